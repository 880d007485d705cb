"""Development-only emulations shared by the tests and the benchmarks (not installed with ringroute).

- `apiserver`: an in-process Kubernetes API server (list/watch, guarded writes, admission chain, faults);
- `admission`: AdmissionReviews as the API server sends them to a webhook;
- `cluster`: a Volcano Job, its pods and labelled NPU nodes, as the controller finds them;
- `volcano_payloads`: what vc-scheduler sends to an extender, byte for byte, per release (its Go structs, the Pod
  and Node objects inside them, whole synthetic clusters).

Shipped code never imports this package (an import-linter contract); what the tests and benchmarks need of Volcano's
scheduler itself, and `ringroute simulate-scheduling` too, is `webhook.volcano_emulation`.
"""
