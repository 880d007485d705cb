"""What `plan_ranks` returns: the order, a status in scipy's style, and every metric against its bound."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from planner._model import Pattern, Placement, Routing
from planner.sim._evaluate import OrderEvaluation
from planner.sim._route_plan import RoutePlan
from planner.sim._summary import (
    explain_cross_edges,
    explain_max_link_load,
    format_fraction,
    headline,
    metric_changes,
)

STATUS_MESSAGES = {
    0: "planned",
    1: "time limit reached: the best order found so far is returned",
    2: "fixed ranks keep a lower bound out of reach: the best completion is returned",
}
"""`PlanResult.status` values and what they mean."""


@dataclass(frozen=True)
class PlanResult:
    """Outcome of `plan_ranks`, in the spirit of `scipy.optimize.OptimizeResult`."""

    order: tuple[int, ...]
    """`order[r]` = index into `Placement.servers` of node rank r; `order[0]` is the master."""
    status: int
    """0 planned, 1 time limit reached, 2 fixed ranks keep a ring bound out of reach (see STATUS_MESSAGES)."""
    success: bool
    """True when the order meets every structural lower bound of its pattern (status 0, or 1: the best order found
    within the time limit still meets them); False when fixed ranks keep a ring bound out of reach (status 2: a
    partial replacement whose survivors keep their ranks)."""
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
            "nodes": [placement.servers[s].node_name for s in self.order],
            "ranks": {pods[i]: rank for i, rank in enumerate(self.ranks)},
            "before": {"order": "pod-index", **self.before.to_dict(), "summary": summarise(self.before)},
            "after": {"order": "ringroute", **self.after.to_dict(), "summary": summarise(self.after)},
            "headline": headline(self.before, self.after),
            "changes": [
                {
                    "metric": change.key,
                    "before": change.before_text,
                    "after": change.after_text,
                    "bound": change.bound_text,
                    "text": change.render(),
                }
                for change in metric_changes(self.before, self.after)
            ],
        }
        if self.routes is not None:
            report["routes"] = {"max_load": self.routes.max_load, "bound": self.routes.bound}
        return report


def summarise(evaluation: OrderEvaluation) -> list[str]:
    """Metrics as sentences with their bounds, in words: "4 ring edges cross leaves (bound 4: the job spans 4
    leaves)", "max link load 2.16 flows (mean over ECMP hash seeds 0-63): ECMP hashing cannot reach ..."."""
    lines = [explain_cross_edges(evaluation, t) for t in range(len(evaluation.cross_edges))]
    lines.append(explain_max_link_load(evaluation))
    # a bus bandwidth that was not simulated (NaN: the pod-index order's other collective) is left out
    if not math.isnan(evaluation.ring_busbw):
        lines.append(f"ring bus bandwidth {format_fraction(evaluation.ring_busbw)} of line rate (bound 1)")
    if not math.isnan(evaluation.hd_busbw):
        lines.append(f"halving-doubling bus bandwidth {format_fraction(evaluation.hd_busbw)} of line rate (bound 1)")
    return lines
