// volcano-sh/volcano master:pkg/scheduler/api/job_info.go (excerpt: the structs whose JSON keys ringroute writes)

type DisruptionBudget struct {
	MinAvailable   string
	MaxUnavailable string
}

type TransactionContext struct {
	NodeName              string
	EvictionOccurred      bool
	JobAllocatedHyperNode string
	Status                TaskStatus
}

type TopologyInfo struct {
	Policy string
	ResMap map[int]v1.ResourceList // key: numa ID
}

type TaskInfo struct {
	UID TaskID
	Job JobID

	Name      string
	Namespace string
	TaskRole  string // value of "volcano.sh/task-spec"

	// Resreq is the resource that used when task running.
	Resreq *Resource
	// InitResreq is the resource that used to launch a task.
	InitResreq *Resource
	// DRAResreq aggregates DRA resource requests per DeviceClass
	DRAResreq map[string]*DRAResource
	// ResourceClaimKeys lists namespaced ResourceClaims referenced by this task.
	ResourceClaimKeys []string
	// ResourceClaimDRAResreq stores per-claim DRA resources for shared-claim deduplication.
	ResourceClaimDRAResreq map[string]map[string]*DRAResource

	TransactionContext
	// LastTransaction holds the context of last scheduling transaction
	LastTransaction *TransactionContext

	Priority                    int32
	VolumeReady                 bool
	Preemptable                 bool
	BestEffort                  bool
	HasRestartableInitContainer bool
	SchGated                    bool

	// RevocableZone supports setting volcano.sh/revocable-zone annotation or label for pod/podgroup
	// we only support empty value or * value for this version and we will support specify revocable zone name for future releases
	// empty value means workload can not use revocable node
	// * value means workload can use all the revocable node for during node active revocable time.
	RevocableZone string

	NumaInfo *TopologyInfo
	Pod      *v1.Pod

	// PodAnnotations is the scheduler-owned annotation set that will be submitted
	// with the Pod bind request.
	//
	// TaskInfo intentionally keeps Pod as a shared informer object instead of
	// deep-copying the whole Pod during scheduler snapshots. Mutating
	// Pod.Annotations from scheduling callbacks can race with informer event
	// handling because the underlying map may still be shared with the cache.
	// PodAnnotations is initialized from a cloned Pod.Annotations map and is the
	// only mutable annotation state that scheduling plugins should use.
	//
	// This map is owned by one scheduling session. Plugins may merge final
	// annotations after a node has been selected, such as in AllocateFunc, or
	// immediately before the bind request is enqueued. Predicate callbacks that
	// evaluate candidate nodes in parallel must not write to this map.
	PodAnnotations map[string]string

	// CustomBindErrHandler is a custom callback func called when task bind err.
	CustomBindErrHandler func() error `json:"-"`
	// CustomBindErrHandlerSucceeded indicates whether CustomBindErrHandler is executed successfully.
	CustomBindErrHandlerSucceeded bool
}

type JobInfo struct {
	UID   JobID
	PgUID types.UID

	Name      string
	Namespace string

	Queue QueueID

	Priority int32

	MinAvailable int32

	WaitingTime *time.Duration

	JobFitErrors   string
	NodesFitErrors map[TaskID]*FitErrors

	AllocatedHyperNode string
	NetworkTopology    *scheduling.NetworkTopologySpec
	SubJobs            map[SubJobID]*SubJobInfo
	TaskToSubJob       map[TaskID]SubJobID
	MinSubJobs         map[SubJobGID]int32 // key is name of "PodGroup.Spec.SubGroupPolicy", value is minSubGroups

	// All tasks of the Job.
	TaskStatusIndex       map[TaskStatus]TasksMap
	Tasks                 TasksMap
	TaskMinAvailable      map[string]int32 // key is value of "volcano.sh/task-spec", value is number
	TaskMinAvailableTotal int32

	Allocated    *Resource
	TotalRequest *Resource

	CreationTimestamp metav1.Time
	PodGroup          *PodGroup

	ScheduleStartTimestamp metav1.Time

	Preemptable bool

	// RevocableZone support set volcano.sh/revocable-zone annotation or label for pod/podgroup
	// we only support empty value or * value for this version and we will support specify revocable zone name for future release
	// empty value means workload can not use revocable node
	// * value means workload can use all the revocable node for during node active revocable time.
	RevocableZone string
	Budget        *DisruptionBudget
}
