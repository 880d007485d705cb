// volcano-sh/volcano v1.9.0:pkg/scheduler/api/queue_info.go (excerpt: the structs whose JSON keys ringroute writes)

type QueueInfo struct {
	UID  QueueID
	Name string

	Weight int32

	// Weights is a list of slash sperated float numbers.
	// Each of them is a weight corresponding the
	// hierarchy level.
	Weights string
	// Hierarchy is a list of node name along the
	// path from the root to the node itself.
	Hierarchy string

	Queue *scheduling.Queue
}
