"""What `plan_ranks` returns: the order, a status in scipy's style, and every metric against its bound."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from planner._model import Pattern, Placement, Routing
from planner.sim._evaluate import OrderEvaluation
from planner.sim._route_plan import RoutePlan

STATUS_MESSAGES = {
    0: "planned: every lower bound of the pattern's structure is met",
    1: "time limit reached: the best order found so far is returned",
    2: "fixed ranks keep a lower bound out of reach: the best completion is returned",
}
"""`PlanResult.status` values and what they mean."""


TIER_NAMES = ("leaf", "pod")


def tier_name(tier: int) -> str:
    """Name of the 0-based listed tier in reports ("leaf", "pod", "tier-3", ...)."""
    return TIER_NAMES[tier] if tier < len(TIER_NAMES) else f"tier-{tier + 1}"


@dataclass(frozen=True)
class PlanResult:
    """Outcome of `plan_ranks`, in the spirit of `scipy.optimize.OptimizeResult`."""

    order: tuple[int, ...]
    """`order[r]` = index into `Placement.servers` of node rank r; `order[0]` is the master."""
    status: int
    """0 planned, 1 time limit reached, 2 fixed ranks keep a ring bound out of reach (see STATUS_MESSAGES)."""
    success: bool
    """True when the order is usable as planned: status 0, 1, or 2 (bounds missed only because of fixed ranks)."""
    message: str
    pattern: Pattern
    routing: Routing
    qps: int
    before: OrderEvaluation
    """Metrics of the pod-index order (what the job would run with unplanned)."""
    after: OrderEvaluation
    """Metrics of `order`."""
    routes: RoutePlan | None
    """Pinned spine/uplink of every cross-leaf flow when routing is "pinned"."""
    wall_time_s: float
    """Time spent in `plan_ranks`, evaluations included."""

    @property
    def ranks(self) -> tuple[int, ...]:
        """`ranks[i]` = node rank of server i (the inverse of `order`)."""
        inverse = [0] * len(self.order)
        for rank, server in enumerate(self.order):
            inverse[server] = rank
        return tuple(inverse)

    def to_report(self, placement: Placement) -> dict[str, Any]:
        """The `ringroute-plan.json` content: inputs, the order by pod name, metrics before/after with bounds."""
        pods = [s.pod_name for s in placement.servers]
        report: dict[str, Any] = {
            "job": placement.job_name,
            "namespace": placement.namespace,
            "pattern": self.pattern,
            "routing": self.routing,
            "qps": self.qps,
            "servers": len(pods),
            "devices": len(pods) * placement.devices_per_server,
            "status": self.status,
            "success": self.success,
            "message": self.message,
            "wall_time_s": round(self.wall_time_s, 6),
            "order": [pods[s] for s in self.order],
            "ranks": {pods[i]: rank for i, rank in enumerate(self.ranks)},
            "before": {"order": "pod-index", **self.before.to_dict(), "summary": summarise(self.before)},
            "after": {"order": "ringroute", **self.after.to_dict(), "summary": summarise(self.after)},
        }
        if self.routes is not None:
            report["routes"] = {"max_load": self.routes.max_load, "bound": self.routes.bound}
        return report


def summarise(evaluation: OrderEvaluation) -> list[str]:
    """Metrics as sentences with their bounds: "128 cross-leaf edges (bound 128)"."""
    lines = [
        f"{count} cross-{tier_name(t)} edges (bound {bound})"
        for t, (count, bound) in enumerate(zip(evaluation.cross_edges, evaluation.cross_edge_bounds, strict=True))
    ]
    lines.append(f"max link load {evaluation.max_link_load:.3g} (bound {evaluation.max_link_load_bound})")
    # a bus bandwidth that was not simulated (NaN: the pod-index order's other collective) is left out
    if not math.isnan(evaluation.ring_busbw):
        lines.append(f"ring bus bandwidth {evaluation.ring_busbw:.3f} of line rate (bound 1)")
    if not math.isnan(evaluation.hd_busbw):
        lines.append(f"halving-doubling bus bandwidth {evaluation.hd_busbw:.3f} of line rate (bound 1)")
    return lines
