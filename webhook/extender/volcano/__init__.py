"""Volcano's side of the scheduler-extender protocol, release by release (v1.7 to master).

What vc-scheduler sends to an extender and how it reads the answers, reproduced from volcano-sh/volcano at each
release tag (`pkg/scheduler/plugins/extender`, `pkg/scheduler/api`, `pkg/scheduler/actions/allocate`,
`pkg/scheduler/plugins/{nodeorder,binpack}`); docs/volcano-extender-protocol.md gives the facts with their sources.

- Request builders return the JSON value Go's encoding/json produces for Volcano's structs (key order, nulls,
  promoted embedded fields, sorted map keys); `go_json` serialises it to the exact bytes.
- Kubernetes object builders make the Node and Pod objects a kube-apiserver 1.36 cluster holds, trimmed to the
  fields the release's vendored k8s.io/api knows (Volcano decodes into those structs and re-encodes).
- Decoders read an extender answer the way the release's plugin and allocate action do.
- `detect_release_range` tells releases apart from a decoded request.
- Score functions reproduce the default `nodeorder` and `binpack` plugins, and `num_feasible_nodes_to_find` the
  allocate action's candidate cut-off.

Pure: no I/O. Releases are named "1.7" ... "1.15" and "1.16" (master, which reports v1.16.0-alpha).
"""

from webhook.extender.volcano.allocate import (
    ALLOCATE_FACTS,
    Fact,
    candidate_lists,
    feasible_scan,
    num_feasible_nodes_to_find,
    predicate_error_cache_key,
    prioritize_called,
    select_best_node,
)
from webhook.extender.volcano.answers import (
    ANSWER_SHAPES,
    MAX_RESPONSE_BYTES,
    UNIVERSAL_PREDICATE_PASS,
    EventOutcome,
    PredicateOutcome,
    PrioritizeOutcome,
    decode_event_handler_response,
    decode_predicate_response,
    decode_prioritize_response,
    encode_predicate_answer,
    encode_predicate_fail_everywhere,
    encode_prioritize_answer,
    on_session_open_outcome,
)
from webhook.extender.volcano.detection import (
    detect_release_range,
)
from webhook.extender.volcano.gojson import (
    GO_ZERO_TIME,
    go_float_text,
    go_json,
    go_number,
    parse_quantity,
    quantity_milli_value,
    quantity_value,
)
from webhook.extender.volcano.objects import (
    NPU_NODE_IMAGES,
    NPU_RESOURCE,
    TRAINING_IMAGE,
    ContainerImage,
    kube_node,
    stable_uid,
)
from webhook.extender.volcano.plugins import (
    BINPACK_DEFAULTS,
    IMAGE_LOCALITY_EFFECTIVE,
    NODEORDER_WEIGHTS,
    ScoreSpread,
    ScoringInput,
    balanced_allocation_score,
    binpack_score,
    default_node_scores,
    image_locality_score,
    least_allocated_score,
    max_score_spread,
)
from webhook.extender.volcano.pods import (
    DAEMONSET_KINDS,
    daemonset_pod,
    volcano_job_pod,
)
from webhook.extender.volcano.releases import (
    GO_FIELDS,
    MASTER_RELEASE,
    OBJECT_META_KEYS,
    RELEASE_GO,
    RELEASE_GROUPS,
    RELEASE_K8S_API,
    RELEASE_TAGS,
    RELEASES,
    STATUS_CODES,
    TASK_STATUS,
    normalize_release,
    release_at_least,
)
from webhook.extender.volcano.sessions import (
    event_handler_request,
    job_info,
    namespace_info,
    on_session_open_request,
    pod_group,
    predicate_request,
    prioritize_request,
    queue_info,
)
from webhook.extender.volcano.structs import (
    node_info,
    resource,
    task_info,
    task_key,
    task_status_of,
)
from webhook.extender.volcano.synthetic import (
    SyntheticCluster,
    synthetic_cluster,
)

__all__ = [
    "ALLOCATE_FACTS",
    "ANSWER_SHAPES",
    "BINPACK_DEFAULTS",
    "ContainerImage",
    "DAEMONSET_KINDS",
    "EventOutcome",
    "Fact",
    "GO_FIELDS",
    "GO_ZERO_TIME",
    "IMAGE_LOCALITY_EFFECTIVE",
    "MASTER_RELEASE",
    "MAX_RESPONSE_BYTES",
    "NODEORDER_WEIGHTS",
    "NPU_NODE_IMAGES",
    "NPU_RESOURCE",
    "OBJECT_META_KEYS",
    "PredicateOutcome",
    "PrioritizeOutcome",
    "RELEASES",
    "RELEASE_GO",
    "RELEASE_GROUPS",
    "RELEASE_K8S_API",
    "RELEASE_TAGS",
    "STATUS_CODES",
    "ScoreSpread",
    "ScoringInput",
    "SyntheticCluster",
    "TASK_STATUS",
    "TRAINING_IMAGE",
    "UNIVERSAL_PREDICATE_PASS",
    "balanced_allocation_score",
    "binpack_score",
    "candidate_lists",
    "daemonset_pod",
    "decode_event_handler_response",
    "decode_predicate_response",
    "decode_prioritize_response",
    "default_node_scores",
    "detect_release_range",
    "encode_predicate_answer",
    "encode_predicate_fail_everywhere",
    "encode_prioritize_answer",
    "event_handler_request",
    "feasible_scan",
    "go_float_text",
    "go_json",
    "go_number",
    "image_locality_score",
    "job_info",
    "kube_node",
    "least_allocated_score",
    "max_score_spread",
    "namespace_info",
    "node_info",
    "normalize_release",
    "num_feasible_nodes_to_find",
    "on_session_open_outcome",
    "on_session_open_request",
    "parse_quantity",
    "pod_group",
    "predicate_error_cache_key",
    "predicate_request",
    "prioritize_called",
    "prioritize_request",
    "quantity_milli_value",
    "quantity_value",
    "queue_info",
    "release_at_least",
    "resource",
    "select_best_node",
    "stable_uid",
    "synthetic_cluster",
    "task_info",
    "task_key",
    "task_status_of",
    "volcano_job_pod",
]
