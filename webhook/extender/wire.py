"""Wire formats of Volcano's `extender` scheduler plugin (volcano-sh/volcano `pkg/scheduler/plugins/extender`).

Volcano marshals its scheduler structs with Go's encoding/json. The request wrappers carry json tags (`task`,
`node`, `nodes`), but `TaskInfo`, `NodeInfo`, `JobInfo` and `Resource` have none, so their keys are the exported
Go field names (`Name`, `Idle`, `ScalarResources`, ...); the embedded `TransactionContext` promotes `NodeName` and
`Status` to the top level of a TaskInfo. `Pod` and `Node` are Kubernetes objects in their usual camelCase JSON.
Scalar resources such as NPUs are in milli-units (8 cards = 8000); `NodeInfo.Tasks` is keyed by task id (the pod
UID).

Requests are decoded with msgspec into the structs below, which declare only the fields the extender reads:
everything else (the bulk: Pod objects of every task on every node, node images and conditions) is skipped
without building Python objects, and a field of the wrong type is a one-line error naming its path (HTTP 400).
Missing fields and JSON null take the defaults, as Go's decoder would leave them zero.

Answers differ by release (the extender plugin changed its predicate response twice):

| Volcano | predicate answer decoded | prioritize answer |
| --- | --- | --- |
| 1.7 | `{"errorMessage": str}` | `{"nodeScore": {node: float}, "errorMessage": str}` |
| 1.8, 1.9 | `{"status": [{"Code": int, "Reason": str}]}` | same |
| 1.10 and later | `{"status": str, "code": int}` | same |
"""

from __future__ import annotations

from typing import TypedDict

import msgspec

# ------------------------------------------------------------------------------------------- Kubernetes subsets


class ObjectMeta(msgspec.Struct, gc=False, omit_defaults=True):
    """v1 ObjectMeta: the parts the extender reads."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class NodeMeta(msgspec.Struct, gc=False, omit_defaults=True):
    """v1 ObjectMeta of a Node: its labels carry the network topology (annotations, often large, are skipped)."""

    name: str = ""
    labels: dict[str, str] | None = None


class EnvVar(msgspec.Struct, gc=False, omit_defaults=True):
    """v1 EnvVar (a `valueFrom` variable has no value)."""

    name: str = ""
    value: str | None = None


class ResourceRequirements(msgspec.Struct, gc=False, omit_defaults=True):
    """v1 ResourceRequirements: which container asks for NPU cards (quantities as Go writes them, strings)."""

    requests: dict[str, str | int | float] | None = None
    limits: dict[str, str | int | float] | None = None


class Container(msgspec.Struct, gc=False, omit_defaults=True):
    """v1 Container: its env and resources, which decide whether its pod asks for route planning
    (`webhook.common.jobfacts`: `ROUTE_PLAN` counts on the container that asks for cards)."""

    env: list[EnvVar] | None = None
    resources: ResourceRequirements | None = None


class NodeSelectorRequirement(msgspec.Struct, gc=False, omit_defaults=True):
    """v1 NodeSelectorRequirement."""

    key: str = ""
    operator: str = ""
    values: list[str] | None = None


class NodeSelectorTerm(msgspec.Struct, gc=False, omit_defaults=True):
    """v1 NodeSelectorTerm (terms are ORed, requirements within a term ANDed)."""

    matchExpressions: list[NodeSelectorRequirement] | None = None  # noqa: N815 (Kubernetes field name)
    matchFields: list[NodeSelectorRequirement] | None = None  # noqa: N815


class NodeSelector(msgspec.Struct, gc=False, omit_defaults=True):
    """v1 NodeSelector."""

    nodeSelectorTerms: list[NodeSelectorTerm] | None = None  # noqa: N815


class NodeAffinity(msgspec.Struct, gc=False, omit_defaults=True):
    """v1 NodeAffinity: only the required part constrains placement."""

    requiredDuringSchedulingIgnoredDuringExecution: NodeSelector | None = None  # noqa: N815


class Affinity(msgspec.Struct, gc=False, omit_defaults=True):
    """v1 Affinity: node affinity only (pod anti-affinity is one pod per node, which whole nodes imply)."""

    nodeAffinity: NodeAffinity | None = None  # noqa: N815


class Toleration(msgspec.Struct, gc=False, omit_defaults=True):
    """v1 Toleration."""

    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""


class PodSpec(msgspec.Struct, gc=False, omit_defaults=True):
    """v1 PodSpec: what decides route planning and which nodes the pod may use."""

    containers: list[Container] | None = None
    nodeSelector: dict[str, str] | None = None  # noqa: N815
    affinity: Affinity | None = None
    tolerations: list[Toleration] | None = None


class Pod(msgspec.Struct, gc=False, omit_defaults=True):
    """v1 Pod subset."""

    metadata: ObjectMeta | None = None
    spec: PodSpec | None = None


class Taint(msgspec.Struct, gc=False, omit_defaults=True):
    """v1 Taint."""

    key: str = ""
    value: str = ""
    effect: str = ""


class NodeSpec(msgspec.Struct, gc=False, omit_defaults=True):
    """v1 NodeSpec subset."""

    unschedulable: bool = False
    taints: list[Taint] | None = None


class NodeStatus(msgspec.Struct, gc=False, omit_defaults=True):
    """v1 NodeStatus: nothing of it is read (Volcano's NodeInfo carries the node's state and resources); declared so
    that a status that is not an object is refused as the API server would, rather than passed over."""


class Node(msgspec.Struct, gc=False, omit_defaults=True):
    """v1 Node subset: its labels carry the network topology."""

    metadata: NodeMeta | None = None
    spec: NodeSpec | None = None
    status: NodeStatus | None = None


class SessionPod(msgspec.Struct, gc=False, omit_defaults=True):
    """v1 Pod as far as a session-open task needs it: labels only."""

    metadata: ObjectMeta | None = None


# ------------------------------------------------------------------------------------------------ Volcano structs


class Resource(msgspec.Struct, gc=False, omit_defaults=True):
    """`api.Resource`: CPU in millicores, memory in bytes, extended resources in milli-units."""

    MilliCPU: float = 0.0
    Memory: float = 0.0
    ScalarResources: dict[str, float] | None = None


class NodeState(msgspec.Struct, gc=False, omit_defaults=True):
    """`api.NodeState`: Phase 1 = Ready, 2 = NotReady."""

    Phase: int = 0
    Reason: str = ""


class TaskInfo(msgspec.Struct, gc=False, omit_defaults=True):
    """`api.TaskInfo` (plus the promoted fields of the embedded `TransactionContext`) as predicate, prioritize
    and the event verbs send it."""

    UID: str = ""
    Job: str = ""
    """`<namespace>/<podgroup name>`; empty when the pod has no `scheduling.k8s.io/group-name` annotation."""
    Name: str = ""
    Namespace: str = ""
    NodeName: str = ""
    Status: int = 0
    """TaskStatus: 1 Pending, 2 Allocated, 4 Pipelined, 8 Binding, 16 Bound, 32 Running, 64 Releasing, ..."""
    Resreq: Resource | None = None
    InitResreq: Resource | None = None
    Pod: Pod | None = None


class NodeTask(msgspec.Struct, gc=False, omit_defaults=True):
    """A TaskInfo as listed in `NodeInfo.Tasks`: identity and status only (its Pod is skipped)."""

    UID: str = ""
    Job: str = ""
    Status: int = 0


class NodeName(msgspec.Struct, gc=False, omit_defaults=True):
    """`api.NodeInfo` as far as its name: what prioritize reads while a session's scheduler cache already gave
    every node's labels (Volcano offers it only nodes the task fits)."""

    Name: str = ""


class NodeResources(NodeName, gc=False, omit_defaults=True):
    """`api.NodeInfo` as far as its name and resources."""

    Idle: Resource | None = None
    Releasing: Resource | None = None
    Pipelined: Resource | None = None
    Allocatable: Resource | None = None


class NodeView(NodeResources, gc=False, omit_defaults=True):
    """`api.NodeInfo` with its Node object and state: what planning reads of each node (onSessionOpen's nodes are
    decoded this way; the jobs' tasks come from its Jobs map)."""

    Node: Node | None = None
    State: NodeState | None = None


class NodeInfo(NodeView, gc=False, omit_defaults=True):
    """`api.NodeInfo`: the parts the extender reads."""

    Tasks: dict[str, NodeTask] | None = None


class SessionTask(msgspec.Struct, gc=False, omit_defaults=True):
    """A TaskInfo inside `JobInfo.Tasks` of onSessionOpen: enough to count the job and see where it runs."""

    UID: str = ""
    NodeName: str = ""
    Status: int = 0
    Resreq: Resource | None = None
    Pod: SessionPod | None = None


class NetworkTopologySpec(msgspec.Struct, gc=False, omit_defaults=True):
    """`spec.networkTopology` (Volcano 1.12+), with json tags (1.14+) or Go field names (1.12, 1.13)."""

    mode: str = ""
    highestTierAllowed: int | None = None  # noqa: N815
    highestTierName: str = ""  # noqa: N815
    Mode: str = ""
    HighestTierAllowed: int | None = None
    HighestTierName: str = ""

    @property
    def effective_mode(self) -> str:
        """`hard` or `soft`; the CRD's default is hard."""
        return self.mode or self.Mode or "hard"

    @property
    def tier(self) -> int | None:
        """highestTierAllowed, whichever spelling."""
        return self.highestTierAllowed if self.highestTierAllowed is not None else self.HighestTierAllowed

    @property
    def tier_name(self) -> str:
        """highestTierName, whichever spelling."""
        return self.highestTierName or self.HighestTierName


class PodGroupSpecView(msgspec.Struct, gc=False, omit_defaults=True):
    """PodGroup spec subset: Volcano (v1.12+) keeps a job with `networkTopology` within HyperNodes itself."""

    networkTopology: NetworkTopologySpec | None = None  # noqa: N815
    NetworkTopology: NetworkTopologySpec | None = None


class PodGroupView(msgspec.Struct, gc=False, omit_defaults=True):
    """`api.PodGroup` (embeds the scheduling PodGroup, so its spec is at its top level): `spec` from 1.14, when the
    internal types got json tags, `Spec` before."""

    spec: PodGroupSpecView | None = None
    Spec: PodGroupSpecView | None = None

    @property
    def network_topology(self) -> NetworkTopologySpec | None:
        """The PodGroup's networkTopology as the user wrote it (copied from the Job), if any."""
        for spec in (self.spec, self.Spec):
            if spec is not None:
                found = spec.networkTopology or spec.NetworkTopology
                if found is not None:
                    return found
        return None


class JobInfo(msgspec.Struct, gc=False, omit_defaults=True):
    """`api.JobInfo`, the parts the extender reads from onSessionOpen."""

    UID: str = ""
    Name: str = ""
    Namespace: str = ""
    MinAvailable: int = 0
    Tasks: dict[str, SessionTask] | None = None
    PodGroup: PodGroupView | None = None
    NetworkTopology: NetworkTopologySpec | None = None
    """1.15+: the spec vc-scheduler follows this session (a highestTierName translated to its tier, soft turned
    into hard at a tier above every HyperNode)."""


# ------------------------------------------------------------------------------------------------------ requests


class PredicateRequest(msgspec.Struct, gc=False, omit_defaults=True):
    """Body of POST `<urlPrefix>/<predicateVerb>`."""

    task: TaskInfo | None = None
    node: NodeInfo | None = None


class PrioritizeRequest(msgspec.Struct, gc=False, omit_defaults=True):
    """Body of POST `<urlPrefix>/<prioritizeVerb>`: the task and the nodes that passed every predicate.

    The candidates' Tasks maps are skipped: a node that fits a route-planned task has every card free, so it holds
    none of the job's tasks (where the job runs comes from onSessionOpen, allocate events and earlier plans)."""

    task: TaskInfo | None = None
    nodes: list[NodeView] | None = None


class SessionPrioritizeRequest(msgspec.Struct, gc=False, omit_defaults=True):
    """PrioritizeRequest decoded into node names (labels come from the session's cache)."""

    task: TaskInfo | None = None
    nodes: list[NodeName] | None = None


class SessionOpenRequest(msgspec.Struct, gc=False, omit_defaults=True):
    """Body of POST `<urlPrefix>/<onSessionOpenVerb>` (Go struct without json tags): the scheduler's whole cache."""

    Jobs: dict[str, JobInfo] | None = None
    Nodes: dict[str, NodeView] | None = None


class EventRequest(msgspec.Struct, gc=False, omit_defaults=True):
    """Body of POST `<urlPrefix>/<allocateFuncVerb>` and `<deallocateFuncVerb>` (Volcano 1.13+)."""

    task: TaskInfo | None = None


# ------------------------------------------------------------------------------------------------------- answers


class PredicateAnswer110(TypedDict):
    """Predicate answer of Volcano >= 1.10: `ErrorMessage string json:"status"`, `Code int json:"code"`; an empty
    status passes. `errorMessage` is added for 1.7, which reads only that key."""

    status: str | None
    code: int
    errorMessage: str


class PredicateStatus(TypedDict):
    """`api.Status` of Volcano 1.8 and 1.9 (no json tags)."""

    Code: int
    Reason: str


class PredicateAnswer18(TypedDict):
    """Predicate answer of Volcano 1.8 and 1.9: a list of statuses; an empty or null list passes."""

    status: list[PredicateStatus] | None
    errorMessage: str


class PrioritizeAnswer(TypedDict):
    """Answer to a prioritize call; Volcano adds `nodeScore` to the other plugins' scores when `errorMessage` is
    empty and `nodeScore` is not null."""

    nodeScore: dict[str, float]
    errorMessage: str


class EventAnswer(TypedDict):
    """Answer to an allocate/deallocate event (`EventHandlerResponse`); a message fails the allocation."""

    errorMessage: str


# Volcano `api` status codes used in predicate answers.
CODE_SUCCESS = 0
CODE_ERROR = 1
CODE_UNSCHEDULABLE = 2
CODE_UNSCHEDULABLE_AND_UNRESOLVABLE = 3

# TaskStatus values (`api.TaskStatus`, a bit each).
STATUS_PENDING = 1
STATUS_ALLOCATED = 2
STATUS_PIPELINED = 4
STATUS_BINDING = 8
STATUS_BOUND = 16
STATUS_RUNNING = 32
STATUS_RELEASING = 64
STATUS_SUCCEEDED = 128
STATUS_FAILED = 256
GONE_STATUSES = frozenset({STATUS_RELEASING, STATUS_SUCCEEDED, STATUS_FAILED})
"""Tasks that no longer count towards a job's size or placement."""
PLACED_STATUSES = frozenset({STATUS_ALLOCATED, STATUS_PIPELINED, STATUS_BINDING, STATUS_BOUND, STATUS_RUNNING})
"""Tasks that hold (or are about to hold) a node."""

__all__ = [
    "CODE_ERROR",
    "CODE_SUCCESS",
    "CODE_UNSCHEDULABLE",
    "CODE_UNSCHEDULABLE_AND_UNRESOLVABLE",
    "GONE_STATUSES",
    "PLACED_STATUSES",
    "STATUS_ALLOCATED",
    "STATUS_BINDING",
    "STATUS_BOUND",
    "STATUS_FAILED",
    "STATUS_PENDING",
    "STATUS_PIPELINED",
    "STATUS_RELEASING",
    "STATUS_RUNNING",
    "STATUS_SUCCEEDED",
    "Affinity",
    "Container",
    "EnvVar",
    "EventAnswer",
    "EventRequest",
    "JobInfo",
    "Node",
    "NetworkTopologySpec",
    "NodeAffinity",
    "NodeInfo",
    "NodeMeta",
    "NodeName",
    "NodeResources",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "NodeSpec",
    "NodeState",
    "NodeStatus",
    "NodeTask",
    "NodeView",
    "ObjectMeta",
    "Pod",
    "PodGroupSpecView",
    "PodGroupView",
    "PodSpec",
    "PredicateAnswer18",
    "PredicateAnswer110",
    "PredicateRequest",
    "PredicateStatus",
    "PrioritizeAnswer",
    "PrioritizeRequest",
    "Resource",
    "ResourceRequirements",
    "SessionOpenRequest",
    "SessionPrioritizeRequest",
    "SessionPod",
    "SessionTask",
    "Taint",
    "TaskInfo",
    "Toleration",
]
