// volcano-sh/volcano v1.14.0:pkg/scheduler/api/sub_job_info.go (excerpt: the structs whose JSON keys ringroute writes)

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

	networkTopology *scheduling.NetworkTopologySpec
}
