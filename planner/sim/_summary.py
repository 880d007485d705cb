"""One rounding and one wording for every metric of a rank order, shared by every output that shows one.

The plan report (`PlanResult.to_report`: its summaries, `headline` and `changes`) and the steering messages are
written with these; `ringroute plan` and `simulate` (table, plot and page), the controller's RankTableCompleted
Event and the demo format `OrderEvaluation` values through the same functions (those `planner` exports), so the
same input shows the same digits everywhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.sim._evaluate import OrderEvaluation

TIER_NAMES = ("leaf", "pod")
TIER_PLURALS = ("leaves", "pods")


def tier_name(tier: int) -> str:
    """Name of the 0-based listed tier in reports ("leaf", "pod", "tier-3", ...)."""
    return TIER_NAMES[tier] if tier < len(TIER_NAMES) else f"tier-{tier + 1}"


def tier_plural(tier: int) -> str:
    """Plural of `tier_name` ("leaves", "pods", "tier-3 domains")."""
    return TIER_PLURALS[tier] if tier < len(TIER_PLURALS) else f"tier-{tier + 1} domains"


def format_load(value: float) -> str:
    """A link load in flows: two decimals ("2.16"; "1.00" under deterministic routing)."""
    return f"{value:.2f}"


def format_fraction(value: float) -> str:
    """A bus bandwidth as a fraction of line rate: three decimals ("0.479")."""
    return f"{value:.3f}"


def format_gain(before: float, after: float) -> str:
    """How many times `after` is `before` ("1.66x"); "" when either is missing or `before` is 0."""
    if not (math.isfinite(before) and math.isfinite(after)) or before <= 0:
        return ""
    return f"{after / before:.2f}x"


def seed_note(evaluation: OrderEvaluation) -> str:
    """Which seeds the numbers average: "mean over ECMP hash seeds 0-63", or "" for deterministic routing."""
    if evaluation.routing != "ecmp":
        return ""
    if evaluation.seeds == 1:
        return "ECMP hash seed 0"
    return f"mean over ECMP hash seeds 0-{evaluation.seeds - 1}"


def explain_cross_edges(evaluation: OrderEvaluation, tier: int) -> str:
    """ "4 ring edges cross leaves (bound 4: the job spans 4 leaves)"."""
    count, bound = evaluation.cross_edges[tier], evaluation.cross_edge_bounds[tier]
    plural = tier_plural(tier)
    if bound == 0:
        return f"{count} ring edges cross {plural} (bound 0: the job sits under one {tier_name(tier)})"
    return f"{count} ring edges cross {plural} (bound {bound}: the job spans {bound} {plural})"


def explain_max_link_load(evaluation: OrderEvaluation) -> str:
    """The max link load against its bound, in words: why a gap is left, and what would close it."""
    bound = f"{evaluation.max_link_load_bound:g}"
    note = seed_note(evaluation)
    head = f"max link load {format_load(evaluation.max_link_load)} flows" + (f" ({note})" if note else "")
    if evaluation.max_link_load <= evaluation.max_link_load_bound + 1e-9:
        return f"{head}, at its bound of {bound}"
    remedy = "pinned routes would" if len(evaluation.cross_edges) <= 1 else "pinned routes come closer"
    if evaluation.routing == "ecmp":
        return f"{head}: ECMP hashing cannot reach the bound of {bound} (hashed flows share uplinks); {remedy}"
    if evaluation.routing == "slice":
        return f"{head}: static slice routing cannot reach the bound of {bound} for this placement; {remedy}"
    return f"{head}: above the bound of {bound}, which no pinning found reaches"


@dataclass(frozen=True)
class MetricChange:
    """One metric of the pod-index order and of the planned order, with its bound, formatted once."""

    key: str
    """Stable name: cross_leaf_edges, cross_pod_edges, max_link_load, ring_busbw, hd_busbw."""
    label: str
    before: float
    after: float
    bound: float
    unit: str
    """"" for counts, "flows" for loads, "of line rate" for bus bandwidths."""

    def text(self, value: float) -> str:
        """`value` with this metric's rounding."""
        if self.key.endswith("_edges"):
            return str(int(value))
        if self.key == "max_link_load":
            return format_load(value)
        return format_fraction(value)

    @property
    def before_text(self) -> str:
        return self.text(self.before)

    @property
    def after_text(self) -> str:
        return self.text(self.after)

    @property
    def bound_text(self) -> str:
        return f"{self.bound:g}"

    @property
    def gain(self) -> str:
        """ "1.66x" for bus bandwidths, "" for the others."""
        return format_gain(self.before, self.after) if self.key.endswith("_busbw") else ""

    def render(self) -> str:
        """ "max link load 3.58 -> 2.16 flows (bound 1)"; bus bandwidths add the gain."""
        unit = f" {self.unit}" if self.unit else ""
        gain = f", {self.gain}" if self.gain else ""
        return f"{self.label} {self.before_text} -> {self.after_text}{unit} (bound {self.bound_text}{gain})"


def metric_changes(before: OrderEvaluation, after: OrderEvaluation) -> list[MetricChange]:
    """Every metric both evaluations carry, pod-index order (`before`) against the plan (`after`).

    A bus bandwidth that was not simulated for both (the pod-index order's other collective) is left out.
    """
    changes = [
        MetricChange(
            f"cross_{tier_name(t)}_edges",
            f"ring edges crossing {tier_plural(t)}",
            float(before.cross_edges[t]),
            float(after.cross_edges[t]),
            float(after.cross_edge_bounds[t]),
            "",
        )
        for t in range(min(len(before.cross_edges), len(after.cross_edges)))
    ]
    changes.append(
        MetricChange(
            "max_link_load",
            "max link load",
            before.max_link_load,
            after.max_link_load,
            float(after.max_link_load_bound),
            "flows",
        )
    )
    for key, label in (("ring_busbw", "ring bus bandwidth"), ("hd_busbw", "halving-doubling bus bandwidth")):
        b, a = getattr(before, key), getattr(after, key)
        if math.isfinite(b) and math.isfinite(a):
            changes.append(MetricChange(key, label, b, a, 1.0, "of line rate"))
    return changes


def headline(before: OrderEvaluation, after: OrderEvaluation) -> str:
    """The gain in one phrase: the planned collective's bus bandwidth, else the max link load."""
    changes = {change.key: change for change in metric_changes(before, after)}
    preferred = "hd_busbw" if after.pattern == "halving-doubling" else "ring_busbw"
    change = changes.get(preferred) or changes["max_link_load"]
    return change.render()
