"""Rules for route-planned jobs: enough nodes, whole nodes, one pod per node, no platform launcher, gang; and a
request for route planning that ringroute can read, where it reads it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.admission.jobview import JobView, TaskView, as_list, as_mapping, env_value
from webhook.admission.policy.violation import Violation
from webhook.common.jobfacts import RoutePlanRequest, is_boolean_text
from webhook.common.names import HOSTNAME_LABEL, ROUTE_PLAN_ANNOTATION, ROUTE_PLAN_ENV
from webhook.common.settings import Settings

MIN_NODES = "route-plan-min-nodes"
FULL_NODE = "route-plan-full-node"
ONE_POD_PER_NODE = "route-plan-one-pod-per-node"
MA_RUN_METHOD = "route-plan-ma-run-method"
GANG = "route-plan-gang"
REQUEST = "route-plan-request"

MA_RUN_METHOD_ENV = "MA_RUN_METHOD"


def check_min_nodes(job: JobView, settings: Settings) -> list[Violation]:
    """Route planning needs enough NPU pods for ring neighbours to sit on different leaves."""
    minimum = settings.policy.min_route_plan_nodes
    if not job.route_planned or job.profile is None or not job.npu_tasks or job.npu_pods >= minimum:
        return []
    tasks = job.npu_tasks
    path = f"{tasks[0].field}.replicas" if len(tasks) == 1 else "spec.tasks"
    value: Any = job.npu_pods
    detail = f"route planning needs at least {minimum} nodes (got {job.npu_pods}); raise replicas or remove ROUTE_PLAN"
    if settings.policy.below_min_nodes == "skip":
        detail = (
            f"route planning needs at least {minimum} nodes (got {job.npu_pods}); "
            "the job runs with a rank table but without route planning"
        )
    return [Violation(path, "Invalid", value, detail, MIN_NODES)]


def check_full_node(job: JobView, _settings: Settings) -> list[Violation]:
    """Every NPU pod of a route-planned job takes all cards of its node."""
    profile = job.profile
    if not job.route_planned or profile is None:
        return []
    found = []
    for task in job.npu_tasks:
        cards = task.cards_per_pod
        if cards is None or cards == profile.cards_per_node:
            continue
        first = task.npu_containers[0]
        where = "limits" if first.npu_limit is not None else "requests"
        path = (
            f"{first.field}.resources.{where}[{profile.resource_name}]"
            if len(task.npu_containers) == 1
            else f"{task.field}.template.spec.containers"
        )
        found.append(
            Violation(
                path,
                "Invalid",
                cards,
                f"route planning needs every NPU pod to take a full node ({profile.cards_per_node} cards); "
                f"request {profile.cards_per_node} cards or remove ROUTE_PLAN",
                FULL_NODE,
            )
        )
    return found


def _hostname_terms(affinity: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    required = as_list(as_mapping(affinity.get(kind)).get("requiredDuringSchedulingIgnoredDuringExecution"))
    return [as_mapping(t) for t in required if as_mapping(t).get("topologyKey") == HOSTNAME_LABEL]


def has_hostname_anti_affinity(task: TaskView) -> bool:
    """The task's pods carry a required podAntiAffinity term on kubernetes.io/hostname."""
    return bool(_hostname_terms(as_mapping(task.pod_spec.get("affinity")), "podAntiAffinity"))


def check_one_pod_per_node(job: JobView, _settings: Settings) -> list[Violation]:
    """Route-planned pods spread one per node (the rank table has one server per node)."""
    if not job.route_planned or job.profile is None:
        return []
    found = []
    for task in job.npu_tasks:
        affinity = as_mapping(task.pod_spec.get("affinity"))
        if _hostname_terms(affinity, "podAffinity"):
            found.append(
                Violation(
                    f"{task.field}.template.spec.affinity.podAffinity",
                    "Forbidden",
                    None,
                    f"a required podAffinity on {HOSTNAME_LABEL} packs pods onto one node; "
                    "route planning needs one pod per node, remove it",
                    ONE_POD_PER_NODE,
                )
            )
        if not _hostname_terms(affinity, "podAntiAffinity"):
            found.append(
                Violation(
                    f"{task.field}.template.spec.affinity.podAntiAffinity",
                    "Required",
                    None,
                    f"route planning needs one pod per node; add a required podAntiAffinity term on "
                    f"{HOSTNAME_LABEL} (the ringroute mutating webhook adds it)",
                    ONE_POD_PER_NODE,
                )
            )
    return found


def check_ma_run_method(job: JobView, _settings: Settings) -> list[Violation]:
    """MA_RUN_METHOD selects the platform launcher, which assigns ranks itself and ignores the plan."""
    if not job.route_planned:
        return []
    found = []
    for task in job.tasks:
        for container in (*task.containers, *task.init_containers):
            hit = env_value(container.env, MA_RUN_METHOD_ENV)
            if hit is not None:
                found.append(
                    Violation(
                        f"{container.field}.env[{hit[0]}]",
                        "Forbidden",
                        None,
                        f"{MA_RUN_METHOD_ENV} makes the platform launcher assign ranks, which ignores the "
                        f"route plan; remove {MA_RUN_METHOD_ENV} or ROUTE_PLAN",
                        MA_RUN_METHOD,
                    )
                )
    return found


def check_gang(job: JobView, _settings: Settings) -> list[Violation]:
    """minAvailable covers every NPU pod, or a partially started job waits forever for its rank table."""
    if not job.route_planned or job.profile is None:
        return []
    min_available = job.spec.get("minAvailable")
    if min_available is None or not isinstance(min_available, int) or isinstance(min_available, bool):
        return []  # Volcano defaults minAvailable to all replicas
    if min_available >= job.npu_pods:
        return []
    return [
        Violation(
            "spec.minAvailable",
            "Invalid",
            min_available,
            f"route planning needs all {job.npu_pods} NPU pods scheduled together (gang), or the rank "
            f"table never completes; set minAvailable to at least {job.npu_pods}",
            GANG,
        )
    ]


def check_route_plan_request(job: JobView, _settings: Settings) -> list[Violation]:
    """A request for route planning is one ringroute reads the same in admission, the controller and the extender
    (`webhook.common.jobfacts`): "true" or "false" where it counts, and no "true" where it asks for nothing while
    nothing else asks (the job would silently get a pod-index table)."""
    found = []
    resource = job.profile.resource_name if job.profile is not None else "NPU"
    for request in job.facts.route_plan_requests:
        name = ROUTE_PLAN_ENV if request.place in ("container", "init-container") else ROUTE_PLAN_ANNOTATION
        if request.counts and request.value is None:
            detail = (
                f"{name} must be literal text: ringroute cannot read a value from elsewhere, so it cannot tell "
                'whether to plan routes; set it to "true" or "false"'
            )
            found.append(Violation(request.path, "Invalid", None, detail, REQUEST))
        elif request.counts and not is_boolean_text(request.value):
            detail = f'{name} is "true" or "false" (any letter case); write "true" to ask for route planning'
            found.append(Violation(request.path, "Invalid", request.value, detail, REQUEST))
        elif not request.counts and request.true and not job.route_planned:
            detail = f"{_ignored(request, resource)}; set ROUTE_PLAN on the training container, or annotate the Job "
            detail += f'{ROUTE_PLAN_ANNOTATION}: "true"'
            found.append(Violation(request.path, "Invalid", request.value, detail, REQUEST))
    return found


def _ignored(request: RoutePlanRequest, resource: str) -> str:
    """Why a request at this place asks for nothing."""
    if request.place == "init-container":
        return (
            f"{ROUTE_PLAN_ENV} on an init container asks for nothing: ringroute reads it on the training container "
            f"(the one with {resource} cards), where HCCL runs and the launcher starts the command"
        )
    if request.place == "container":
        return (
            f"{ROUTE_PLAN_ENV} on a container without {resource} cards asks for nothing: ringroute reads it on the "
            "training container, where HCCL runs"
        )
    return f"{ROUTE_PLAN_ANNOTATION} on the pod template of a task without {resource} cards asks for nothing"


__all__ = [
    "FULL_NODE",
    "GANG",
    "MA_RUN_METHOD",
    "MIN_NODES",
    "ONE_POD_PER_NODE",
    "REQUEST",
    "check_route_plan_request",
    "check_full_node",
    "check_gang",
    "check_ma_run_method",
    "check_min_nodes",
    "check_one_pod_per_node",
    "has_hostname_anti_affinity",
]
