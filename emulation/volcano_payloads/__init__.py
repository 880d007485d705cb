"""What vc-scheduler sends to an extender, byte for byte, release by release (v1.7 to master), and the cluster
objects inside it: for the tests and the benchmarks (development only, not installed with ringroute).

Reproduced from volcano-sh/volcano at each release tag (`pkg/scheduler/plugins/extender`, `pkg/scheduler/api`)
and from kube-apiserver 1.36; docs/volcano-extender-protocol.md gives the facts with their sources.

- `sessions`: request builders (predicate, prioritize, onSessionOpen, allocate events) returning the JSON value
  Go's encoding/json produces for Volcano's structs (key order, nulls, promoted embedded fields, sorted map keys);
- `structs`: TaskInfo, NodeInfo and Resource as each release marshals them;
- `objects`, `pods`: the Node and Pod objects a kube-apiserver 1.36 cluster holds (images, conditions,
  managedFields), trimmed to the fields the release's vendored k8s.io/api knows, and Volcano Job and DaemonSet pods;
- `synthetic`: whole clusters of busy and free NPU nodes with a pending gang, in bulk;
- `gojson`: Go's JSON rules (`go_json` writes the exact bytes) and Kubernetes quantities.

The struct keys of each release are the extender's own (`webhook.extender.volcano_releases`); how Volcano reads the
answers and schedules is `webhook.volcano_emulation`.
"""

from emulation.volcano_payloads.gojson import (
    GO_ZERO_TIME,
    go_float_text,
    go_json,
    go_number,
    parse_quantity,
    quantity_milli_value,
    quantity_value,
)
from emulation.volcano_payloads.objects import (
    NPU_NODE_IMAGES,
    NPU_RESOURCE,
    TRAINING_IMAGE,
    ContainerImage,
    kube_node,
    stable_uid,
)
from emulation.volcano_payloads.pods import (
    DAEMONSET_KINDS,
    daemonset_pod,
    volcano_job_pod,
)
from emulation.volcano_payloads.sessions import (
    event_handler_request,
    job_info,
    namespace_info,
    on_session_open_request,
    pod_group,
    predicate_request,
    prioritize_request,
    queue_info,
)
from emulation.volcano_payloads.structs import (
    node_info,
    resource,
    task_info,
    task_key,
    task_status_of,
)
from emulation.volcano_payloads.synthetic import (
    SyntheticCluster,
    synthetic_cluster,
)

__all__ = [
    "ContainerImage",
    "DAEMONSET_KINDS",
    "GO_ZERO_TIME",
    "NPU_NODE_IMAGES",
    "NPU_RESOURCE",
    "SyntheticCluster",
    "TRAINING_IMAGE",
    "daemonset_pod",
    "event_handler_request",
    "go_float_text",
    "go_json",
    "go_number",
    "job_info",
    "kube_node",
    "namespace_info",
    "node_info",
    "on_session_open_request",
    "parse_quantity",
    "pod_group",
    "predicate_request",
    "prioritize_request",
    "quantity_milli_value",
    "quantity_value",
    "queue_info",
    "resource",
    "stable_uid",
    "synthetic_cluster",
    "task_info",
    "task_key",
    "task_status_of",
    "volcano_job_pod",
]
