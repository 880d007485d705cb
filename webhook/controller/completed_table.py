"""The completed rank-table ConfigMap data of a plan, or of pod-index order, and the words of the Events that say
what it holds (RankTableCompleted) or why it was not planned (RankTableFailed).

Pure: the plan (`webhook.controller.graded_plan`) is made before; this renders it. What the Job asks for is read by
`webhook.common.jobfacts`, as admission and the extender read it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from planner import InputError, Placement, PlanResult, build_rank_table, render_rank_table, render_ranks_env
from webhook.common.rank_configmap import (
    CONFIGMAP_DATA_LIMIT,
    QP_PORT_CONFIG_KEY,
    completed_payload,
    state_record,
)
from webhook.common.settings import AcceleratorProfile, Settings
from webhook.controller.graded_plan import LEVEL_NAMES, GradedPlan, pod_index_fill
from webhook.controller.plan_files import RANK_TABLE_FILE, RANKS_ENV_FILE, REPORT_FILE, ROUTES_FILE, plan_outputs


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
        order = pod_index_fill(placement, fixed)
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


__all__ = [
    "Planned",
    "completed_table",
    "fixed_ranks_from_record",
    "planning_failure",
    "pod_index_order",
    "route_planning_problem",
]
