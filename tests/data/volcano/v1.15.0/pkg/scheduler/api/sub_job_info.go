// volcano-sh/volcano v1.15.0:pkg/scheduler/api/sub_job_info.go (excerpt: the structs whose JSON keys ringroute writes)

type SubJobInfo struct {
	GID SubJobGID
	UID SubJobID
	Job JobID

	MinAvailable int32
	Priority     int32 // determined by the highest priority task in the subJob
	MatchIndex   int   // the first label value match to the pods in the subJob

	Tasks           map[TaskID]*TaskInfo
	TaskStatusIndex map[TaskStatus]TasksMap
	taskPriorities  map[int32]sets.Set[TaskID]

	AllocatedHyperNode string
	// NominatedHyperNode is the hyperNode chosen by gangpreempt/gangreclaim
	// for this subJob. allocate honors it via a per-subJob fast path and
	// clears it on commit. In-memory only; not persisted across restarts.
	NominatedHyperNode string

	NetworkTopology *scheduling.NetworkTopologySpec
}
