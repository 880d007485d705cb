"""Development-only emulations shared by the tests and the benchmarks (not installed with ringroute).

- `apiserver`: an in-process Kubernetes API server (list/watch, guarded writes, admission chain, faults);
- `admission`: AdmissionReviews as the API server sends them to a webhook;
- `cluster`: a Volcano Job, its pods and labelled NPU nodes, as the controller finds them.
"""
