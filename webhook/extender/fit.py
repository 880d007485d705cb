"""What a task asks for, and which nodes can give it: resources as Volcano counts them, and the static checks
of Volcano's `predicates` plugin.

Volcano checks resource fit against a node's *future idle* (Idle + Releasing - Pipelined) before any plugin
predicate; route-planned tasks also need every NPU card of the node free. A gang plan that names a node the
job's pods can never use would hold the job back, so the extender plans only on nodes that also pass the checks
kube-scheduler's NodeUnschedulable, TaintToleration and NodeAffinity (nodeSelector, required node affinity)
plugins make, and that Volcano reports Ready. Pure functions; no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import msgspec

from webhook.common.jobfacts import pod_facts
from webhook.common.names import GROUP_NAME_ANNOTATION, JOB_NAME_LABEL
from webhook.common.settings import AcceleratorProfile, Settings
from webhook.extender.wire import (
    NodeResources,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    NodeView,
    Pod,
    Resource,
    Taint,
    TaskInfo,
    Toleration,
)


@dataclass(frozen=True, slots=True)
class PodConstraints:
    """The parts of a pod spec that restrict which nodes it may run on."""

    node_selector: tuple[tuple[str, str], ...] = ()
    required_terms: tuple[NodeSelectorTerm, ...] | None = None
    """Required node affinity terms (ORed); None when the pod has none."""
    tolerations: tuple[Toleration, ...] = ()


UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")
"""What kube-scheduler checks a cordoned node against (a pod tolerating it may still go there)."""
NODE_NOT_READY = 2
"""`api.NodeState.Phase` of a node Volcano will not schedule to."""


@dataclass(frozen=True, slots=True)
class TaskView:
    """What the extender needs to know about the task being scheduled."""

    uid: str
    job: str
    """Volcano job id (`<namespace>/<podgroup>`), the key that NodeInfo Tasks and onSessionOpen carry too."""
    name: str
    profile: AcceleratorProfile | None
    """Profile selected by the pod's `ring-controller.cce` label; None when the extender has no opinion."""
    route_planned: bool
    cards: int
    """NPU cards of the profile's resource the task requests."""
    milli_cpu: float = 0.0
    memory: float = 0.0
    constraints: PodConstraints = PodConstraints()
    npu_pods: int | None = None
    """NPU pods of the whole job, from the pod annotation admission adds (a hint when onSessionOpen is off)."""
    node_name: str = ""
    """The node of an allocated task (event verbs)."""


def read_task(task: TaskInfo, settings: Settings) -> TaskView:
    """Convert a decoded TaskInfo to a TaskView. Its pod is read as admission and the controller read its task's
    template (`webhook.common.jobfacts.pod_facts`): a pod of an NPU task of a known profile is judged, any other
    gets no opinion."""
    meta = task.Pod.metadata if task.Pod is not None else None
    labels = (meta.labels if meta is not None else None) or {}
    annotations = (meta.annotations if meta is not None else None) or {}
    namespace = task.Namespace or (meta.namespace if meta is not None else "")
    job = task.Job
    if not job:
        group = annotations.get(GROUP_NAME_ANNOTATION) or labels.get(JOB_NAME_LABEL)
        job = f"{namespace}/{group}" if group else ""
    name = task.Name or (meta.name if meta is not None else "")
    uid = task.UID or (meta.uid if meta is not None else "")
    facts = pod_facts(msgspec.to_builtins(task.Pod), settings)
    profile = facts.profile
    if profile is None or not facts.npu:
        return TaskView(uid, job, name, None, False, 0, node_name=task.NodeName)
    request = task.InitResreq if _milli(task.InitResreq, profile.resource_name) > 0 else task.Resreq
    return TaskView(
        uid=uid,
        job=job,
        name=name,
        profile=profile,
        route_planned=facts.route_planned,
        cards=_cards(_milli(request, profile.resource_name)),
        milli_cpu=request.MilliCPU if request is not None else 0.0,
        memory=request.Memory if request is not None else 0.0,
        constraints=pod_constraints(task.Pod),
        npu_pods=facts.template.npu_pods,
        node_name=task.NodeName,
    )


def _milli(resource: Resource | None, name: str) -> float:
    if resource is None or not resource.ScalarResources:
        return 0.0
    return resource.ScalarResources.get(name, 0.0)


def _cards(milli: float) -> int:
    """Whole cards in a milli-unit amount (8000 -> 8; tolerate float noise)."""
    return int(milli / 1000.0 + 1e-6) if milli > 0 else 0


@dataclass(frozen=True, slots=True)
class NodeCards:
    """NPU cards of one resource on a node, and whether a task's whole request fits its future idle."""

    total: int
    free: int
    """Future idle: Idle + Releasing - Pipelined (at most `total`)."""
    fits: bool
    """The task fits (every requested resource; all cards free for route-planned tasks)."""


def node_cards(info: NodeResources, task: TaskView) -> NodeCards:
    """Cards of the task's resource on a node, and whether the task fits there now."""
    assert task.profile is not None
    resource = task.profile.resource_name
    total = _cards(_milli(info.Allocatable, resource))
    idle = info.Idle
    free_milli = _milli(idle, resource) if idle is not None else total * 1000.0
    free_milli += _milli(info.Releasing, resource) - _milli(info.Pipelined, resource)
    free = max(0, min(total, _cards(free_milli)))
    fits = (total > 0 and free >= total) if task.route_planned else free >= task.cards
    if fits and idle is not None:
        fits = _fits_other(task, info, idle)
    return NodeCards(total, free, fits)


def _fits_other(task: TaskView, info: NodeResources, idle: Resource) -> bool:
    """CPU and memory against the future idle; skipped for a dimension the node does not report."""
    releasing, pipelined = info.Releasing, info.Pipelined
    if task.milli_cpu > 0 and (idle.MilliCPU > 0 or (info.Allocatable is not None and info.Allocatable.MilliCPU > 0)):
        cpu = idle.MilliCPU + (releasing.MilliCPU if releasing else 0.0) - (pipelined.MilliCPU if pipelined else 0.0)
        if cpu + 1e-6 < task.milli_cpu:
            return False
    if task.memory > 0 and (idle.Memory > 0 or (info.Allocatable is not None and info.Allocatable.Memory > 0)):
        memory = idle.Memory + (releasing.Memory if releasing else 0.0) - (pipelined.Memory if pipelined else 0.0)
        if memory + 1.0 < task.memory:
            return False
    return True


def pod_constraints(pod: Pod | None) -> PodConstraints:
    """Read a pod's node selector, required node affinity and tolerations."""
    spec = pod.spec if pod is not None else None
    if spec is None:
        return PodConstraints()
    terms: tuple[NodeSelectorTerm, ...] | None = None
    affinity = spec.affinity.nodeAffinity if spec.affinity is not None else None
    required = affinity.requiredDuringSchedulingIgnoredDuringExecution if affinity is not None else None
    if required is not None:
        terms = tuple(required.nodeSelectorTerms or ())
    return PodConstraints(
        node_selector=tuple(sorted((spec.nodeSelector or {}).items())),
        required_terms=terms,
        tolerations=tuple(spec.tolerations or ()),
    )


def node_admits(constraints: PodConstraints, node: NodeView) -> bool:
    """Whether the pod may run on the node, resources aside."""
    if node.State is not None and node.State.Phase == NODE_NOT_READY:
        return False
    meta = node.Node.metadata if node.Node is not None else None
    labels: Mapping[str, str] = (meta.labels if meta is not None else None) or {}
    for key, value in constraints.node_selector:
        if labels.get(key) != value:
            return False
    if constraints.required_terms is not None and not any(
        _term_matches(term, labels, node.Name) for term in constraints.required_terms
    ):
        return False
    spec = node.Node.spec if node.Node is not None else None
    if spec is None:
        return True
    if spec.unschedulable and not _tolerated(UNSCHEDULABLE_TAINT, constraints.tolerations):
        return False
    return all(
        taint.effect not in ("NoSchedule", "NoExecute") or _tolerated(taint, constraints.tolerations)
        for taint in spec.taints or ()
    )


def _term_matches(term: NodeSelectorTerm, labels: Mapping[str, str], node_name: str) -> bool:
    """A term with no requirements matches nothing (as in kube-scheduler)."""
    expressions = term.matchExpressions or []
    fields = term.matchFields or []
    if not expressions and not fields:
        return False
    if not all(_requirement_matches(r, labels) for r in expressions):
        return False
    return all(_field_matches(r, node_name) for r in fields)


def _requirement_matches(requirement: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    values: Sequence[str] = requirement.values or ()
    present = requirement.key in labels
    value = labels.get(requirement.key)
    match requirement.operator:
        case "In":
            return present and value in values
        case "NotIn":
            return not present or value not in values
        case "Exists":
            return present
        case "DoesNotExist":
            return not present
        case "Gt" | "Lt":
            if not present or len(values) != 1:
                return False
            have, limit = _go_int(value), _go_int(values[0])
            if have is None or limit is None:
                return False
            return have > limit if requirement.operator == "Gt" else have < limit
    return False


_GO_INT = re.compile(r"[+-]?[0-9]{1,19}", re.ASCII)
INT64_MAX = 2**63 - 1


def _go_int(text: str | None) -> int | None:
    """A label value as Kubernetes reads it for Gt/Lt (strconv.ParseInt base 10, 64 bits): ASCII digits with an
    optional sign, no spaces or underscores; None for anything else, which matches neither operator. Python's int()
    would also take "٨", " 8" and "1_000"."""
    if text is None or _GO_INT.fullmatch(text) is None:
        return None
    value = int(text)
    return value if -INT64_MAX - 1 <= value <= INT64_MAX else None


def _field_matches(requirement: NodeSelectorRequirement, node_name: str) -> bool:
    """matchFields supports only `metadata.name` with In/NotIn."""
    if requirement.key != "metadata.name":
        return False
    values = requirement.values or ()
    if requirement.operator == "In":
        return node_name in values
    if requirement.operator == "NotIn":
        return node_name not in values
    return False


def _tolerated(taint: Taint, tolerations: Sequence[Toleration]) -> bool:
    for toleration in tolerations:
        if toleration.effect and toleration.effect != taint.effect:
            continue
        if toleration.operator == "Exists":
            if not toleration.key or toleration.key == taint.key:
                return True
        elif toleration.key == taint.key and toleration.value == taint.value:
            return True
    return False


__all__ = [
    "GROUP_NAME_ANNOTATION",
    "JOB_NAME_LABEL",
    "NodeCards",
    "PodConstraints",
    "TaskView",
    "node_admits",
    "node_cards",
    "pod_constraints",
    "read_task",
]
