"""A graded plan, within one process: the plan asked for, else the next cheaper level, and why.

Levels, most expensive first (`plan_levels`):

1. `as-requested`: `plan_ranks` with the configured pattern and routing (pinned routes are the costliest part of a
   large plan: every cross-leaf flow of every step gets a spine, and the report simulates them);
2. `unpinned`: the same pattern planned under ECMP, without pinned routes (only when pinned routes were asked for);
3. `ring-order`: the bound-meeting ring order alone (`planner.ring_order`): no search, no simulation, no routes,
   linear in the job's size;
4. `pod-index`: ranks in pod-index order (surviving servers keep their ranks), which needs no planner at all.

Within one process a level that runs out of memory (a MemoryError, as RLIMIT_DATA gives) falls to the next one
here. A level stopped from outside (past the time limit, or its process killed) is given up by the planning driver
(`webhook.controller.planning_driver`), which starts again at the next level (`next_level`) in a new process and
passes the reasons so far. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from planner import Placement, Topology, plan_outlook, plan_ranks, ring_order, steer_source_ports
from webhook.common.settings import PlanningSettings

if TYPE_CHECKING:
    from planner import (
        Delivery,
        HashModel,
        JobOutlook,
        LinkBackground,
        PlanResult,
        RingOrder,
        Routing,
        SteeringResult,
    )

PlanLevel = Literal["as-requested", "unpinned", "ring-order", "pod-index"]

LEVEL_NAMES: dict[PlanLevel, str] = {
    "as-requested": "the plan as requested",
    "unpinned": "the same plan without pinned routes (ECMP)",
    "ring-order": "the ring order alone (no search, simulation or routes)",
    "pod-index": "pod-index order",
}
"""How Events, logs and the plan report name each level."""


def plan_levels(routing: Routing) -> tuple[PlanLevel, ...]:
    """The levels a plan of `routing` may take, most expensive first (`unpinned` only when routes are pinned)."""
    if routing == "pinned":
        return ("as-requested", "unpinned", "ring-order", "pod-index")
    return ("as-requested", "ring-order", "pod-index")


def next_level(level: PlanLevel, routing: Routing) -> PlanLevel:
    """The next cheaper level after `level` (`pod-index` is the last and its own next)."""
    levels = plan_levels(routing)
    index = levels.index(level) if level in levels else 0
    return levels[min(index + 1, len(levels) - 1)]


def level_title(level: PlanLevel, pattern: str, routing: str) -> str:
    """`mixed/pinned plan`, `mixed/ecmp plan`, `ring order alone`, `pod-index order`: a level in a reason."""
    if level == "as-requested":
        return f"{pattern}/{routing} plan"
    if level == "unpinned":
        return f"{pattern}/ecmp plan"
    if level == "ring-order":
        return "ring order alone"
    return "pod-index order"


@dataclass(frozen=True)
class Fallback:
    """A plan cheaper than the one requested was taken: which one, and why each costlier level was given up."""

    level: PlanLevel
    requested: str
    """`pattern/routing` as configured."""
    reasons: tuple[str, ...]
    """One per level given up, in order: `mixed/pinned plan: planning needed more than the 512 MiB ...`."""

    @property
    def message(self) -> str:
        """One sentence for an Event, a log line and the report."""
        return f"planned with {LEVEL_NAMES[self.level]} instead of the {self.requested} plan: " + "; ".join(
            self.reasons
        )

    def to_report(self) -> dict[str, Any]:
        return {
            "plan": self.level,
            "requested": self.requested,
            "reasons": list(self.reasons),
            "message": self.message,
        }


@dataclass(frozen=True)
class GradedPlan:
    """The order a budgeted plan gave, the level it came from, and the fallback taken (None: as requested)."""

    order: tuple[int, ...]
    level: PlanLevel
    pattern: str
    routing: str
    result: PlanResult | None = None
    """The planner's result at the `as-requested` and `unpinned` levels."""
    ring: RingOrder | None = None
    """The ring order and its cross edges at the `ring-order` level."""
    fallback: Fallback | None = None
    steering: SteeringResult | None = None
    """The per-queue-pair source ports (MultiQpSrcPort.cfg) at the `as-requested` and `unpinned` levels."""
    background: LinkBackground | None = None
    """The other jobs' load the routes were pinned around (None: planned alone)."""
    outlook: JobOutlook | None = None
    """Its busiest link with every job's load counted (planned around a background only)."""

    def report(self, placement: Placement) -> dict[str, Any]:
        """The plan report (`ringroute-plan.json`): the planner's report with `plan_level` and `fallback` added,
        or for the cheaper levels, the order with what is known about it (cross edges for the ring order)."""
        fallback = self.fallback.to_report() if self.fallback is not None else None
        if self.result is not None:
            steering = self.steering.to_report() if self.steering is not None else None
            report = self.result.to_report(placement)
            fabric: dict[str, object] | None = None
            if self.background is not None:
                fabric = {"other_jobs": self.background.jobs, "ledger_version": self.background.version}
                if self.outlook is not None:
                    fabric.update(self.outlook.to_dict())
                    fabric["message"] = self.outlook.sentence()
            return {
                **report,
                "plan_level": self.level,
                "fallback": fallback,
                "steering": steering,
                "fabric": fabric,
            }
        pods = [s.pod_name for s in placement.servers]
        after: dict[str, Any] = {"order": self.level}
        if self.ring is not None:
            after["cross_edges"] = list(self.ring.cross_edges)
            after["cross_edge_bounds"] = list(self.ring.cross_edge_bounds)
        return {
            "job": placement.job_name,
            "namespace": placement.namespace,
            "pattern": self.pattern,
            "routing": self.routing,
            "servers": len(pods),
            "devices": len(pods) * placement.devices_per_server,
            "message": self.fallback.message if self.fallback is not None else LEVEL_NAMES[self.level],
            "order": [pods[s] for s in self.order],
            "nodes": [placement.servers[s].node_name for s in self.order],
            "ranks": {pods[server]: rank for rank, server in enumerate(self.order)},
            "after": after,
            "plan_level": self.level,
            "fallback": fallback,
        }


@dataclass(frozen=True)
class PlanRequest:
    """Everything one plan needs, whole: what `ringroute plan` and the controller hand the planning process."""

    placement: Placement
    topology: Topology
    planning: PlanningSettings
    """Pattern, routing, queue pairs, seed, time limits and source ports (the settings' `planning`, with the
    command's flags applied)."""
    hash_model: HashModel | None = None
    """The fabric's hash: pinned routes are steered through it by per-queue-pair source ports."""
    background: LinkBackground | None = None
    """Other running jobs' load on the links this job may use: routes are pinned around it (None: planned alone)."""
    fixed_ranks: tuple[tuple[int, int], ...] = ()
    """(server index, rank) of surviving servers that keep their ranks."""


def graded_plan(
    request: PlanRequest,
    *,
    start: PlanLevel = "as-requested",
    reasons: Sequence[str] = (),
    memory_limit: str = "the memory available",
) -> GradedPlan:
    """Plan at `start`, falling to the next cheaper level whenever a level runs out of memory.

    `reasons` say why the levels before `start` were given up (by the caller: time limit, process killed);
    `memory_limit` names the limit a MemoryError means (`the 512 MiB of controller.planningMemoryLimitMib`).
    At the `as-requested` level pinned routes are planned around the request's background and steered through its
    hash model by per-queue-pair source ports (`planner.steer_source_ports`); without a model (or at `unpinned`),
    more than one queue pair gets spread ports. Raises what the planner raises for bad input (InputError); "out of
    memory" is never raised.
    """
    placement, topology, planning = request.placement, request.topology, request.planning
    pattern, routing = planning.pattern, planning.routing
    fixed_ranks = dict(request.fixed_ranks) or None
    given_up = list(reasons)
    level = start
    while True:
        steering, outlook = None, None
        try:
            if level in ("as-requested", "unpinned"):
                requested = level == "as-requested"
                background = request.background if requested and routing == "pinned" else None
                result = plan_ranks(
                    placement,
                    topology,
                    pattern,
                    routing if requested else "ecmp",
                    qps=planning.qps_per_connection,
                    rng=planning.seed,
                    time_limit=planning.time_limit_s,
                    fixed_ranks=fixed_ranks,
                    background=background,
                )
                steering = steer_source_ports(
                    placement,
                    topology,
                    result,
                    request.hash_model if requested else None,
                    port_range=planning.source_ports,
                    rng=planning.seed,
                    time_limit=planning.steering_time_limit_s,
                    background=background,
                )
                order, ring = result.order, None
                outlook = _outlook(result, steering, background)
            elif level == "ring-order":
                result = None
                ring = ring_order(placement, topology, fixed_ranks=fixed_ranks)
                order = ring.order
            else:
                result, ring = None, None
                order = pod_index_fill(placement, fixed_ranks or {})
        except MemoryError:
            if level == "pod-index":
                raise
            given_up.append(f"{level_title(level, pattern, routing)}: needed more than {memory_limit}")
            level = next_level(level, routing)
            continue
        fallback = Fallback(level, f"{pattern}/{routing}", tuple(given_up)) if level != "as-requested" else None
        return GradedPlan(
            order,
            level,
            pattern,
            routing,
            result=result,
            ring=ring,
            fallback=fallback,
            steering=steering,
            background=request.background if level == "as-requested" and routing == "pinned" else None,
            outlook=outlook,
        )


def _outlook(result: PlanResult, steering: SteeringResult, background: LinkBackground | None) -> JobOutlook | None:
    """The plan's busiest link with the other jobs' load, on the routes its ports take (its pinned routes when not
    steered); None when planned alone."""
    if background is None or result.routes is None:
        return None
    routes = steering.routes if steering.mode == "steered" and steering.routes is not None else result.routes
    delivery: Delivery = "hashed" if steering.mode == "steered" else "planned"
    return plan_outlook(routes, background.on(routes.network), sharing=background.jobs, delivery=delivery)


def pod_index_fill(placement: Placement, fixed: Mapping[int, int]) -> tuple[int, ...]:
    """Pod-index order with the master first; servers in `fixed` (index -> rank) keep their ranks."""
    n = len(placement.servers)
    order: list[int | None] = [None] * n
    for index, rank in fixed.items():
        if 0 <= rank < n and 0 <= index < n and index != placement.master:
            order[rank] = index
    if n:
        order[0] = placement.master
    placed = {i for i in order if i is not None}
    rest = iter(i for i in range(n) if i not in placed)
    return tuple(i if i is not None else next(rest) for i in order)


__all__ = [
    "Fallback",
    "GradedPlan",
    "LEVEL_NAMES",
    "PlanLevel",
    "PlanRequest",
    "graded_plan",
    "level_title",
    "next_level",
    "plan_levels",
    "pod_index_fill",
]
