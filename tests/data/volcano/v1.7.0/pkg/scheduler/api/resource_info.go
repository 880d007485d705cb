// volcano-sh/volcano v1.7.0:pkg/scheduler/api/resource_info.go (excerpt: the structs whose JSON keys ringroute writes)

type Resource struct {
	MilliCPU float64
	Memory   float64

	// ScalarResources
	ScalarResources map[v1.ResourceName]float64

	// MaxTaskNum is only used by predicates; it should NOT
	// be accounted in other operators, e.g. Add.
	MaxTaskNum int
}
