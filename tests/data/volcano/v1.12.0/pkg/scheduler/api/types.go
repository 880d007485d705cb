// volcano-sh/volcano v1.12.0:pkg/scheduler/api/types.go (excerpt: the structs whose JSON keys ringroute writes)

type Status struct {
	Code   int
	Reason string
	Plugin string
}
