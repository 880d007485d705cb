"""Pure planning helpers of the rank-table controller: what a job's table depends on, and the completed ConfigMap
data (planned with the planner, or in pod-index order). What the Job asks for is read by
`webhook.common.jobfacts`, as admission and the extender read it."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from planner import (
    InputError,
    Placement,
    PlacementProblem,
    PlacementReadout,
    PlanResult,
    Server,
    build_rank_table,
    read_placement,
    render_rank_table,
    render_ranks_env,
)
from webhook.common.kube_time import parse_time
from webhook.common.names import (
    CREATED_BY_ANNOTATION,
    CREATED_BY_RINGROUTE,
    NETWORK_TOPOLOGY_ANNOTATION,
    RING_LABEL,
)
from webhook.common.rank_configmap import (
    CONFIGMAP_DATA_LIMIT,
    QP_PORT_CONFIG_KEY,
    completed_payload,
    state_record,
)
from webhook.common.settings import AcceleratorProfile, Settings
from webhook.controller.graded_plan import LEVEL_NAMES, GradedPlan
from webhook.controller.plan_files import RANK_TABLE_FILE, RANKS_ENV_FILE, REPORT_FILE, ROUTES_FILE, plan_outputs


def placement_fingerprint(placement: Placement, job_uid: str, job_version: str, route_plan: bool) -> str:
    """Hash of everything a completed table depends on (servers in pod-index order, devices, job identity)."""
    digest = hashlib.sha256(f"{job_uid}\0{job_version}\0{route_plan}\0{placement.master}\0".encode())
    for server in placement.servers:
        digest.update(repr(server).encode())
    return digest.hexdigest()[:32]


WAIT_KINDS = frozenset({"missing-pods", "unbound", "missing-annotation", "device-failed", "missing-pod-ip"})
"""Placement problems that resolve themselves (Volcano, the scheduler, the device plugin or kubelet is not done
yet); every other kind needs someone to fix the pods, the device plugin or the nodes."""


def with_pod_addresses(
    placement: Placement, pods: Iterable[Mapping[str, Any]]
) -> tuple[Placement, tuple[PlacementProblem, ...]]:
    """The placement with every server's `container_ip`, or the pods still waiting for an IP.

    A pod on the pod network needs its `status.podIP`: the table's `container_ip` and, for rank 0, the launcher's
    MASTER_ADDR (the node's IP reaches no other pod there). The device plugin annotates a pod before kubelet has
    started its sandbox, so a placement can be complete while pod IPs are still missing. A `hostNetwork` pod's IP is
    its node's IP (what kubelet reports as its podIP), so it never waits.
    """
    by_name = {str((p.get("metadata") or {}).get("name", "")): p for p in pods}
    servers: list[Server] = []
    problems: list[PlacementProblem] = []
    for server in placement.servers:
        pod = by_name.get(server.pod_name) or {}
        host_network = (pod.get("spec") or {}).get("hostNetwork") is True
        address = server.pod_ip
        if address is None and host_network:
            address = (pod.get("status") or {}).get("hostIP") or server.host_ip
        if address:
            servers.append(server if address == server.pod_ip else dataclasses.replace(server, pod_ip=str(address)))
            continue
        pod_id = f"{(pod.get('metadata') or {}).get('namespace') or placement.namespace}/{server.pod_name}"
        if host_network:
            field, detail = (
                "status.hostIP",
                f"not set yet on this hostNetwork pod; wait for kubelet on {server.node_name}",
            )
        else:
            field = "status.podIP"
            detail = (
                "not set yet; the table's container_ip (and MASTER_ADDR for rank 0) needs it: wait for kubelet "
                f"and the network plugin to start the pod on node {server.node_name}"
            )
        problems.append(PlacementProblem("missing-pod-ip", pod_id, field, detail))
    if problems:
        return placement, tuple(problems)
    return dataclasses.replace(placement, servers=tuple(servers)), ()


def read_job_placement(
    pods: Sequence[Mapping[str, Any]],
    *,
    annotation_keys: Sequence[str],
    resource_name: str,
    expected_pods: int,
    job_name: str,
    job_uid: str | None,
    job_version: str | None,
    task_order: Sequence[str],
) -> PlacementReadout:
    """The job's placement as `read_placement` reads it, with every server's pod IP (`with_pod_addresses`).

    Never raises for what pods hold: a pod the planner cannot read becomes a problem of that pod, so a reconcile
    reports it in an Event instead of failing (and retrying) on it.
    """

    def read(chosen: Sequence[Mapping[str, Any]], expected: int | None) -> PlacementReadout:
        return read_placement(
            chosen,
            annotation_keys=annotation_keys,
            resource_name=resource_name,
            expected_pods=expected,
            job_name=job_name,
            job_uid=job_uid,
            job_version=job_version,
            task_order=task_order,
        )

    try:
        readout = read(pods, expected_pods)
    except ValueError as exc:
        problems: list[PlacementProblem] = []
        for pod in pods:  # find the pods that cannot be read, to name them
            try:
                read([pod], None)
            except ValueError as single:
                meta = pod.get("metadata") or {}
                problems.append(
                    PlacementProblem(
                        "unreadable-pod",
                        f"{meta.get('namespace')}/{meta.get('name')}",
                        "metadata",
                        f"cannot be read ({type(single).__name__}: {single}); check its volcano.sh labels and "
                        "the device plugin's annotation",
                    )
                )
        if not problems:
            problems.append(PlacementProblem("unreadable-pod", None, "pods", f"{type(exc).__name__}: {exc}"))
        return PlacementReadout(None, tuple(problems), ())
    if readout.placement is None or readout.problems:
        return readout
    placement, waiting = with_pod_addresses(readout.placement, pods)
    if waiting:
        return PlacementReadout(None, waiting, readout.ignored_pods, readout.ignored)
    return PlacementReadout(placement, (), readout.ignored_pods, readout.ignored)


def needs_a_fix(readout: PlacementReadout) -> bool:
    """Whether a problem of the readout will not go away by waiting (the Event is then a Warning)."""
    return any(problem.kind not in WAIT_KINDS for problem in readout.problems)


def pending_summary(readout: PlacementReadout, expected: int, limit: int = 6) -> str:
    """What keeps the table from completing, for the RankTablePending event."""
    problems = readout.problems
    if not problems:
        return f"waiting for {expected} NPU pods"
    kinds: dict[str, int] = {}
    for problem in problems:
        kinds[problem.kind] = kinds.get(problem.kind, 0) + 1
    counts = ", ".join(f"{kind} x{n}" for kind, n in sorted(kinds.items()))
    shown = "; ".join(p.render() for p in problems[:limit])
    more = f"; and {len(problems) - limit} more" if len(problems) > limit else ""
    return f"{expected} NPU pods expected; not ready ({counts}): {shown}{more}{_other_jobs(readout)}"


def topology_wait(job: Mapping[str, Any], readout: PlacementReadout) -> str:
    """What Volcano waits for while the job's pods are unbound and its hard `spec.networkTopology` keeps it within
    one HyperNode (Volcano itself only says "gang unschedulable"), for the RankTablePending event; "" otherwise."""
    if not any(problem.kind == "unbound" for problem in readout.problems):
        return ""
    spec = job.get("spec")
    topology = spec.get("networkTopology") if isinstance(spec, Mapping) else None
    if not isinstance(topology, Mapping) or (topology.get("mode") or "hard") != "hard":
        return ""
    tier, name = topology.get("highestTierAllowed"), topology.get("highestTierName")
    if isinstance(tier, int) and not isinstance(tier, bool):
        where, field = f"tier {tier} or below", f"highestTierAllowed {tier}"
    elif isinstance(name, str) and name:
        where, field = f"tier {name!r} or below", f"highestTierName {name!r}"
    else:
        return ""
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    why = " (why: annotation ringroute.io/network-topology)" if NETWORK_TOPOLOGY_ANNOTATION in annotations else ""
    return (
        f"; Volcano places this job only within one HyperNode of {where} (spec.networkTopology: mode hard, "
        f"{field}) and waits until one has room for all its pods{why}"
    )


def _other_jobs(readout: PlacementReadout, limit: int = 3) -> str:
    """Pods carrying the job's name that belong to another Job (left out, never in its table), for the Event."""
    strays = [pod for pod in readout.ignored if pod.reason in ("other-job", "other-job-uid")]
    if not strays:
        return ""
    shown = "; ".join(pod.render() for pod in strays[:limit])
    more = f"; and {len(strays) - limit} more" if len(strays) > limit else ""
    return f"; left out as pods of another job: {shown}{more}"


def fixed_ranks_from_record(placement: Placement, record_servers: Sequence[Sequence[str]]) -> dict[int, int]:
    """Survivors of a partial replacement: servers whose (pod, node) held a rank in the last completed table."""
    previous = {(s[0], s[1]): rank for rank, s in enumerate(record_servers) if len(s) == 2}
    fixed: dict[int, int] = {}
    n = len(placement.servers)
    for index, server in enumerate(placement.servers):
        rank = previous.get((server.pod_name, server.node_name))
        if rank is None or rank >= n:
            continue
        if (rank == 0) != (index == placement.master):
            continue  # rank 0 belongs to task index 0, always
        fixed[index] = rank
    return fixed


def pod_index_order(placement: Placement) -> tuple[int, ...]:
    """Ranks in pod-index order with the master (task index 0) first."""
    rest = [i for i in range(len(placement.servers)) if i != placement.master]
    return (placement.master, *rest)


@dataclass(frozen=True, slots=True)
class Planned:
    """A completed table ready to write."""

    payload_data: dict[str, str]
    payload_binary: dict[str, str]
    payload_sha: str
    message: str
    routed: bool
    planning_ms: float
    route_problem: str | None = None
    fallback: str | None = None
    """Why the table holds a cheaper plan than the one requested (memory or time budget), for the Event."""
    plan_level: str | None = None
    """The level the plan came from (`webhook.controller.graded_plan.PlanLevel`); None when not route planned."""
    steering_fallback: str | None = None
    """Why pinned routes were not steered by source ports (a hash model was given), for a warning Event."""
    background_version: int | None = None
    """The fabric ledger's version the routes were pinned around (None: planned alone): a write checks that the
    links it planned around have not moved since."""
    state_servers: tuple[tuple[str, str], ...] = ()
    """(pod, node) of every rank, as the state record holds them."""


def route_planning_problem(settings: Settings, placement: Placement, route_plan: bool) -> str | None:
    """Why a route-planned job's table takes pod-index order without planning (too few NPU pods), or None."""
    if route_plan and len(placement.servers) < settings.policy.min_route_plan_nodes:
        return (
            f"route planning needs at least {settings.policy.min_route_plan_nodes} NPU pods "
            f"(got {len(placement.servers)}); the table uses pod-index order"
        )
    return None


def planning_failure(exc: BaseException) -> str:
    """The RankTableFailed message of a route plan that failed (the table then uses pod-index order)."""
    if isinstance(exc, InputError):
        return (
            f"route planning failed: {exc}; the table uses pod-index order. Fix: label every NPU node "
            "with its leaf switch (e.g. volcano.sh/tor) or install HyperNodes"
        )
    if isinstance(exc, MemoryError):
        return "route planning ran out of memory even for pod-index order; the table uses pod-index order"
    # a planner bug must not keep the job from starting: the cheapest table is valid
    return (
        f"route planning failed unexpectedly ({type(exc).__name__}: {exc}); the table uses pod-index "
        "order. Please report this with the controller's log"
    )


def completed_table(
    settings: Settings,
    profile: AcceleratorProfile,
    placement: Placement,
    graded: GradedPlan | None,
    *,
    job_uid: str,
    job_version: str,
    route_plan: bool,
    route_problem: str | None,
    fixed: Mapping[int, int],
    planning_ms: float,
) -> Planned:
    """The completed ConfigMap data of a plan (`graded`), or of pod-index order (survivors keep their ranks) when
    there is none, with the RankTableCompleted message. Raises ConfigMapTooLargeError, or InputError when the
    table cannot be built."""
    result = graded.result if graded is not None else None
    if graded is not None:
        order = graded.order
    elif fixed and len(fixed) < len(placement.servers):
        order = _fill_order(placement, fixed)
    else:
        order = pod_index_order(placement)
    servers = tuple((placement.servers[i].pod_name, placement.servers[i].node_name) for i in order)
    state = state_record(job_uid, job_version, servers)
    if graded is not None:
        outputs = plan_outputs(
            placement, graded, profile.rank_table_version, compact=True, routes_limit=CONFIGMAP_DATA_LIMIT
        )
        texts = {name: text if isinstance(text, str) else "".join(text) for name, text in outputs.files.items()}
        left_out = list(outputs.omitted)
        table, ranks_env = texts[RANK_TABLE_FILE], texts[RANKS_ENV_FILE]
        report, routes, qp_ports = texts.get(REPORT_FILE), texts.get(ROUTES_FILE), texts.get(QP_PORT_CONFIG_KEY)
    else:
        table = render_rank_table(build_rank_table(placement, order, profile.rank_table_version))
        ranks_env, report, routes, qp_ports, left_out = render_ranks_env(placement, order), None, None, None, []
    steering = graded.steering if graded is not None else None
    payload = completed_payload(
        settings,
        profile,
        rank_table=table,
        ranks_env=ranks_env,
        state=state,
        plan_report=report,
        routes=routes,
        qp_ports=qp_ports,
    )
    left_out += [key for key in payload.omitted if key not in left_out]
    if graded is not None and result is None:
        message = _fallback_completed_message(placement, graded, planning_ms)
    else:
        message = _completed_message(placement, result, planning_ms, route_plan)
        if graded is not None and graded.fallback is not None:
            message += f"; {LEVEL_NAMES[graded.level]}: see the RankTableFallback event"
    if left_out:
        message += f"; {' and '.join(left_out)} left out: over the ConfigMap's 1 MiB"
    steering_fallback = steering.fallback if steering is not None else None
    if qp_ports is not None and QP_PORT_CONFIG_KEY in payload.omitted:
        steering_fallback = (
            f"{QP_PORT_CONFIG_KEY} ({steering.lines if steering else 0} address pairs) left out: it does not fit the "
            "ConfigMap's 1 MiB even gzip-compressed; HCCL uses its default queue pairs and ports (ECMP)"
        )
    if steering is not None and steering.mode != "none" and QP_PORT_CONFIG_KEY not in payload.omitted:
        message += f"; {steering.message}"
    if graded is not None and graded.outlook is not None:
        message += f"; on the shared fabric: {graded.outlook.sentence()}"
    background = graded.background if graded is not None else None
    return Planned(
        payload.data,
        payload.binary_data,
        payload.sha256,
        message,
        result is not None,
        planning_ms,
        route_problem,
        graded.fallback.message if graded is not None and graded.fallback is not None else None,
        graded.level if graded is not None else None,
        steering_fallback,
        background.version if background is not None else None,
        servers,
    )


def _fallback_completed_message(placement: Placement, graded: GradedPlan, planning_ms: float) -> str:
    """RankTableCompleted for a table of the ring order alone or pod-index order, taken to stay within budget."""
    servers = len(placement.servers)
    head = f"{servers} servers, {servers * placement.devices_per_server} devices"
    ring = graded.ring
    what = "the ring order alone"
    if ring is not None and ring.cross_edges:
        what += f" (cross-leaf ring edges {ring.cross_edges[0]}, bound {ring.cross_edge_bounds[0]})"
    if graded.level == "pod-index":
        what = "pod-index order"
    return f"{head}; ranks in {what}, over the planning budget: see the RankTableFallback event; {planning_ms:.0f} ms"


def _fill_order(placement: Placement, fixed: Mapping[int, int]) -> tuple[int, ...]:
    """Survivors keep their ranks; the other servers take the free ranks in pod-index order."""
    n = len(placement.servers)
    order: list[int | None] = [None] * n
    for index, rank in fixed.items():
        order[rank] = index
    order[0] = placement.master
    placed = {i for i in order if i is not None}
    rest = iter(i for i in range(n) if i not in placed)
    return tuple(i if i is not None else next(rest) for i in order)


def _completed_message(placement: Placement, result: PlanResult | None, planning_ms: float, route_plan: bool) -> str:
    servers = len(placement.servers)
    devices = servers * placement.devices_per_server
    head = f"{servers} servers, {devices} devices"
    if result is None:
        why = (
            "route planning not requested"
            if not route_plan
            else "route planning skipped: see the RankTableFailed event"
        )
        return f"{head}; ranks in pod-index order ({why}); {planning_ms:.0f} ms"
    from planner import metric_changes, seed_note

    # The plan report's numbers, rounded as `ringroute plan` prints them; a bus bandwidth the pod-index order was
    # not simulated for (the collective the plan was not made for) is left out.
    changes = [change.render() for change in metric_changes(result.before, result.after)]
    note = seed_note(result.after)
    routing = f"{result.routing}, {note}" if note else result.routing
    return f"{head}; " + "; ".join(changes) + f" ({routing}); planning {planning_ms:.0f} ms"


def configmap_job_key(configmap: Mapping[str, Any], settings: Settings) -> str | None:
    """`namespace/job` of the Job a rank-table ConfigMap belongs to (by profile label and name prefix), or None."""
    meta = configmap.get("metadata") or {}
    profile = settings.profile((meta.get("labels") or {}).get(RING_LABEL))
    name = str(meta.get("name", ""))
    if profile is None or not name.startswith(profile.configmap_prefix):
        return None
    return f"{meta.get('namespace')}/{name[len(profile.configmap_prefix) :]}"


def is_orphan(
    configmap: Mapping[str, Any], settings: Settings, jobs: Container[str], *, now: float, grace_s: float
) -> bool:
    """A rank-table ConfigMap ringroute created, owned by nobody, whose Job (not in `jobs`) never appeared within
    `grace_s` of its creation (`now` in Unix seconds)."""
    job_key = configmap_job_key(configmap, settings)
    meta = configmap.get("metadata") or {}
    if job_key is None or job_key in jobs:
        return False
    if (meta.get("annotations") or {}).get(CREATED_BY_ANNOTATION) != CREATED_BY_RINGROUTE:
        return False  # never delete what a user made
    if meta.get("ownerReferences"):
        return False  # the garbage collector handles owned ones
    created = parse_time(meta.get("creationTimestamp"))
    return created is not None and now - created.timestamp() >= grace_s


__all__ = [
    "configmap_job_key",
    "is_orphan",
    "Planned",
    "completed_table",
    "planning_failure",
    "route_planning_problem",
    "fixed_ranks_from_record",
    "needs_a_fix",
    "pending_summary",
    "topology_wait",
    "placement_fingerprint",
    "pod_index_order",
    "read_job_placement",
    "with_pod_addresses",
    "WAIT_KINDS",
]
