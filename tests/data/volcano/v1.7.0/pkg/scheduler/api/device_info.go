// volcano-sh/volcano v1.7.0:pkg/scheduler/api/device_info.go (excerpt: the structs whose JSON keys ringroute writes)

type GPUDevice struct {
	// GPU ID
	ID int
	// The pods that are sharing this GPU
	PodMap map[string]*v1.Pod
	// memory per card
	Memory uint
}
