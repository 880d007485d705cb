"""Wire formats of Volcano's `extender` scheduler plugin (volcano-sh/volcano `pkg/scheduler/plugins/extender`).

Volcano marshals its scheduler structs with Go's encoding/json. The request wrappers carry json tags
(`task`, `node`, `nodes`), the responses too (`status`/`code`, `nodeScore`/`errorMessage`), but `TaskInfo`,
`NodeInfo` and `Resource` have none, so their keys are the exported Go field names (`Name`, `Idle`,
`ScalarResources`, ...). Embedded `TransactionContext` fields (`NodeName`, `Status`, ...) appear at the top level
of a TaskInfo. `Pod` and `Node` are Kubernetes objects in their usual camelCase JSON. Scalar resources such as
NPUs are in milli-units (8 cards = 8000). `NodeInfo.Tasks` is keyed by task id (the pod UID).

Every TypedDict here is `total=False`: Volcano versions add and drop fields, and other senders use lower-case
keys; readers in `webhook.extender_scoring` accept `Name`, `name` and lower camel case and treat null as missing.
"""

from __future__ import annotations

from typing import Any, TypedDict

import msgspec


class Resource(TypedDict, total=False):
    """`api.Resource`: CPU in millicores, memory in bytes, extended resources in milli-units."""

    MilliCPU: float
    Memory: float
    ScalarResources: dict[str, float] | None
    MaxTaskNum: int


class NodeState(TypedDict, total=False):
    """`api.NodeState`: Phase 1 = Ready, 2 = NotReady."""

    Phase: int
    Reason: str


class TaskInfo(TypedDict, total=False):
    """`api.TaskInfo` (plus the promoted fields of the embedded `TransactionContext`)."""

    UID: str
    Job: str
    """`<namespace>/<podgroup name>`; empty when the pod has no `scheduling.k8s.io/group-name` annotation."""
    Name: str
    Namespace: str
    TaskRole: str
    Resreq: Resource | None
    InitResreq: Resource | None
    NodeName: str
    EvictionOccurred: bool
    JobAllocatedHyperNode: str
    Status: int
    """TaskStatus bit: 1 Pending, 2 Allocated, 4 Pipelined, 8 Binding, 16 Bound, 32 Running, 64 Releasing, ..."""
    LastTransaction: dict[str, Any] | None
    Priority: int
    Preemptable: bool
    BestEffort: bool
    RevocableZone: str
    Pod: dict[str, Any] | None
    """The v1 Pod (camelCase JSON)."""


class NodeInfo(TypedDict, total=False):
    """`api.NodeInfo`."""

    Name: str
    Node: dict[str, Any] | None
    """The v1 Node (camelCase JSON); its labels carry the network topology."""
    State: NodeState | None
    Releasing: Resource | None
    Pipelined: Resource | None
    Idle: Resource | None
    Used: Resource | None
    Allocatable: Resource | None
    Capacity: Resource | None
    Tasks: dict[str, TaskInfo] | None
    RevocableZone: str
    Others: dict[str, Any] | None


class JobInfo(TypedDict, total=False):
    """`api.JobInfo`, the parts the extender reads from `onSessionOpen`."""

    UID: str
    Name: str
    Namespace: str
    MinAvailable: int
    Tasks: dict[str, TaskInfo] | None


class PredicateRequest(TypedDict, total=False):
    """Body of POST `<urlPrefix>/<predicateVerb>`."""

    task: TaskInfo
    node: NodeInfo


class PredicateResponse(TypedDict):
    """Answer to a predicate call: an empty `status` means the node fits.

    Go: `ErrorMessage string json:"status"`, `Code int json:"code"`. Codes are Volcano's `api` status codes
    (0 Success, 1 Error, 2 Unschedulable, 3 UnschedulableAndUnresolvable); Volcano turns a non-empty message
    with code 0 into code 1.
    """

    status: str
    code: int


class PrioritizeRequest(TypedDict, total=False):
    """Body of POST `<urlPrefix>/<prioritizeVerb>`: the task and the nodes that passed the predicates."""

    task: TaskInfo
    nodes: list[NodeInfo]


class PrioritizeResponse(TypedDict):
    """Answer to a prioritize call; Volcano adds `nodeScore` to the other plugins' scores when `errorMessage` is
    empty. An empty `nodeScore` map expresses no preference."""

    nodeScore: dict[str, float]
    errorMessage: str


class OnSessionOpenRequest(TypedDict, total=False):
    """Body of POST `<urlPrefix>/<onSessionOpenVerb>` (Go struct without json tags)."""

    Jobs: dict[str, JobInfo] | None
    Nodes: dict[str, NodeInfo] | None
    Queues: dict[str, Any] | None
    NamespaceInfo: dict[str, Any] | None
    RevocableNodes: dict[str, NodeInfo] | None
    NodeList: list[str] | None


# --- fast-path decode types: only the fields prioritize reads, with Volcano's exact key names. msgspec skips every
# other field (notably the Pod objects inside NodeInfo.Tasks) without building Python objects, which is what keeps
# a 1,000-node prioritize call well under Volcano's timeout. Payloads that do not fit (lower-case keys, odd types)
# are read again by the lenient dict readers.


class FastMeta(msgspec.Struct, gc=False):
    """v1 ObjectMeta: the parts the extender reads."""

    name: str | None = None
    labels: dict[str, str] | None = None


class FastNode(msgspec.Struct, gc=False):
    """v1 Node: metadata only."""

    metadata: FastMeta | None = None


class FastResource(msgspec.Struct, gc=False):
    """api.Resource: extended resources only."""

    ScalarResources: dict[str, float] | None = None


class FastTask(msgspec.Struct, gc=False):
    """api.TaskInfo as listed in NodeInfo.Tasks: identity and status only."""

    UID: str | None = None
    Job: str | None = None
    Status: int | None = None


class FastNodeInfo(msgspec.Struct, gc=False):
    """api.NodeInfo: the parts prioritize reads."""

    Name: str | None = None
    Node: FastNode | None = None
    Idle: FastResource | None = None
    Allocatable: FastResource | None = None
    Releasing: FastResource | None = None
    Pipelined: FastResource | None = None
    Tasks: dict[str, FastTask] | None = None


class FastPrioritizeRequest(msgspec.Struct, gc=False):
    """PrioritizeRequest with the task kept as raw JSON (it is read in full, leniently)."""

    task: msgspec.Raw = msgspec.Raw(b"null")
    nodes: list[FastNodeInfo] | None = None


# Volcano `api` status codes used in PredicateResponse.code.
CODE_SUCCESS = 0
CODE_ERROR = 1
CODE_UNSCHEDULABLE = 2
CODE_UNSCHEDULABLE_AND_UNRESOLVABLE = 3

__all__ = [
    "CODE_ERROR",
    "CODE_SUCCESS",
    "CODE_UNSCHEDULABLE",
    "CODE_UNSCHEDULABLE_AND_UNRESOLVABLE",
    "FastMeta",
    "FastNode",
    "FastNodeInfo",
    "FastPrioritizeRequest",
    "FastResource",
    "FastTask",
    "JobInfo",
    "NodeInfo",
    "NodeState",
    "OnSessionOpenRequest",
    "PredicateRequest",
    "PredicateResponse",
    "PrioritizeRequest",
    "PrioritizeResponse",
    "Resource",
    "TaskInfo",
]
