"""`plan_ranks`: the rank order of a placed job, planned for its network, with every metric against its bound."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, get_args

import numpy as np

from planner._baselines import baseline_order
from planner._errors import InputError, PlacementError
from planner._hd import block_order, distance_matrix, fill_free_ranks, qap_polish, traffic_matrix, traffic_pairs
from planner._model import Pattern, Placement, Routing, Topology
from planner._network import JobNetwork, job_network
from planner._ring import ServerLayout, cross_edge_bounds, cross_edge_counts, ring_candidates, server_layout
from planner._simulate import (
    OrderEvaluation,
    evaluate_order,
    halving_doubling_sizes,
    halving_doubling_steps,
    lambda_star,
    link_loads,
    ring_flows,
)

if TYPE_CHECKING:
    from planner._routes import RoutePlan

STATUS_MESSAGES = {
    0: "planned: every lower bound of the pattern's structure is met",
    1: "time limit reached: the best order found so far is returned",
    2: "fixed ranks keep a lower bound out of reach: the best completion is returned",
    3: "the lowest-load order for this pattern misses a ring cross-edge bound",
}
"""`PlanResult.status` values and what they mean."""

OBJECTIVE_SEEDS = (1000, 1001, 1002)
"""ECMP seeds the planner scores candidates on, disjoint from the report's seeds 0..19 so metrics stay honest."""
MAX_RING_CANDIDATES = 16
"""Bound-meeting ring orders scored at most (the first two always)."""

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
    """0 planned, 1 time limit reached, 2 fixed ranks prevent a bound, 3 a ring bound not met (see STATUS_MESSAGES)."""
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
    lines.append(f"max link load {evaluation.max_link_load:g} (bound {evaluation.max_link_load_bound})")
    lines.append(f"ring bus bandwidth {evaluation.ring_busbw:.3f} of line rate (bound 1)")
    lines.append(f"halving-doubling bus bandwidth {evaluation.hd_busbw:.3f} of line rate (bound 1)")
    return lines


@dataclass(frozen=True)
class _Checked:
    pattern: Pattern
    routing: Routing
    qps: int
    rng: np.random.Generator
    time_limit: float
    fixed: dict[int, int]


def _plan_ranks_iv(
    placement: Placement,
    topology: Topology,
    *,
    pattern: str,
    routing: str,
    qps: object,
    rng: object,
    time_limit: object,
    fixed_ranks: Mapping[int, int] | None,
) -> _Checked:
    """Check `plan_ranks`'s arguments; every message names the argument and says what to pass."""
    if not isinstance(placement, Placement):
        raise InputError(f"placement: expected a planner.Placement, got {type(placement).__name__}")
    if not isinstance(topology, Topology):
        raise InputError(f"topology: expected a planner.Topology, got {type(topology).__name__}")
    n = len(placement.servers)
    if n == 0:
        raise PlacementError("placement.servers: the job has no servers; plan after its pods are bound")
    if not 0 <= placement.master < n:
        raise PlacementError(f"placement.master: {placement.master} is not a server index (0..{n - 1})")
    nodes = [s.node_name for s in placement.servers]
    if len(set(nodes)) != n:
        twice = next(node for node in nodes if nodes.count(node) > 1)
        raise PlacementError(f"placement.servers: node {twice!r} holds two pods; route planning needs one pod per node")
    if pattern not in get_args(Pattern):
        raise InputError(f"pattern: {pattern!r} is not one of {', '.join(get_args(Pattern))}")
    if routing not in get_args(Routing):
        raise InputError(f"routing: {routing!r} is not one of {', '.join(get_args(Routing))}")
    if isinstance(qps, bool) or not isinstance(qps, int | np.integer) or qps < 1:
        raise InputError(
            f"qps: {qps!r} queue pairs per connection; pass an integer >= 1 (HCCL_RDMA_QPS_PER_CONNECTION)"
        )
    if isinstance(time_limit, bool) or not isinstance(time_limit, int | float) or not math.isfinite(time_limit):
        raise InputError(f"time_limit: {time_limit!r}; pass a finite number of seconds > 0")
    if time_limit <= 0:
        raise InputError(f"time_limit: {time_limit!r}; pass a finite number of seconds > 0")
    if isinstance(rng, bool) or (rng is not None and not isinstance(rng, int | np.integer | np.random.Generator)):
        raise InputError(f"rng: {rng!r}; pass an int seed, a numpy Generator or None")
    generator = np.random.default_rng(rng)
    fixed: dict[int, int] = {}
    for server, rank in (fixed_ranks or {}).items():
        if isinstance(server, bool) or not isinstance(server, int | np.integer) or not 0 <= server < n:
            raise InputError(f"fixed_ranks: key {server!r} is not a server index (0..{n - 1})")
        if isinstance(rank, bool) or not isinstance(rank, int | np.integer) or not 0 <= rank < n:
            raise InputError(f"fixed_ranks[{server}]: rank {rank!r} is not a node rank (0..{n - 1})")
        fixed[int(server)] = int(rank)
    taken: dict[int, int] = {}
    for server, rank in fixed.items():
        if rank in taken:
            raise InputError(
                f"fixed_ranks: servers {taken[rank]} and {server} both keep rank {rank}; give each rank to one server"
            )
        taken[rank] = server
    if taken.get(0, placement.master) != placement.master:
        raise InputError(
            f"fixed_ranks: server {taken[0]} keeps rank 0, but rank 0 belongs to the master "
            f"(server {placement.master}); leave rank 0 to the master"
        )
    if placement.master in fixed and fixed[placement.master] != 0:
        raise InputError(
            f"fixed_ranks[{placement.master}]: the master must keep rank 0 (got {fixed[placement.master]})"
        )
    fixed[placement.master] = 0
    return _Checked(pattern, routing, int(qps), generator, float(time_limit), fixed)  # type: ignore[arg-type]


def _pattern_steps(order: np.ndarray, pattern: Pattern) -> list[np.ndarray]:
    """Flows of every step of the pattern for an order (mixed: the ring, then halving-doubling)."""
    steps: list[np.ndarray] = []
    if pattern in ("ring", "mixed"):
        ring = ring_flows(order)
        if ring.size:
            steps.append(ring)
    if pattern in ("halving-doubling", "mixed"):
        steps += halving_doubling_steps(order)
    return steps


def _objective(network: JobNetwork, pattern: Pattern, routing: Routing, qps: int) -> Callable[[np.ndarray], float]:
    """Score of an order (lower is better): the largest link load over the pattern's steps.

    Ties break on the sum of per-step loads weighted by data size (a proxy for completion time). Pinned routing
    reaches λ* for every step (König), so it is scored by λ*; ECMP on seeds the report does not use.
    """
    n = network.servers
    sizes: list[float] = []
    if pattern in ("ring", "mixed") and n > 1:
        sizes.append(1.0)
    if pattern in ("halving-doubling", "mixed"):
        sizes += [float(s) for s in halving_doubling_sizes(n)]
    weights = np.asarray(sizes)
    seeds = OBJECTIVE_SEEDS if routing == "ecmp" else (0,)

    def score(order: np.ndarray) -> float:
        steps = _pattern_steps(order, pattern)
        if not steps:
            return 0.0
        if routing == "pinned":
            loads = np.array([[float(lambda_star(network, s))] for s in steps])
        else:
            loads = np.array(
                [[float(link_loads(network, s, routing, qps=qps, seed=seed).max()) for seed in seeds] for s in steps]
            )
        worst = float(loads.max(axis=0).mean())
        total = float((weights[: len(steps), None] * np.maximum(loads, 1.0)).sum(axis=0).mean())
        return worst + 1e-6 * total

    return score


def _meets_ring_bounds(layout: ServerLayout, order: np.ndarray) -> bool:
    return cross_edge_counts(layout.codes, order) == cross_edge_bounds(layout.codes)


def _best_ring(
    layout: ServerLayout, score: Callable[[np.ndarray], float], rng: np.random.Generator, deadline: float
) -> tuple[np.ndarray, float, bool]:
    """Best of the bound-meeting ring candidates scored before the deadline; (order, score, timed out)."""
    best: np.ndarray | None = None
    best_score = math.inf
    timed_out = False
    limit = MAX_RING_CANDIDATES if layout.tiers and len(np.unique(layout.codes[:, 0])) > 2 else 2
    for count, candidate in enumerate(ring_candidates(layout, rng)):
        if count >= limit:
            break
        if count >= 2 and time.perf_counter() >= deadline:
            timed_out = True
            break
        value = score(candidate)
        if value < best_score - 1e-12:
            best, best_score = candidate, value
    assert best is not None
    return best, best_score, timed_out


def _best_pairwise(
    layout: ServerLayout,
    pattern: Pattern,
    score: Callable[[np.ndarray], float],
    rng: np.random.Generator,
    deadline: float,
) -> tuple[np.ndarray, float, bool]:
    """Leaf-aligned block order, polished by 2-opt QAP for small jobs; (order, score, timed out)."""
    n = layout.size
    identity_steps = _pattern_steps(np.arange(n), pattern)
    order = block_order(layout, traffic_pairs(identity_steps, n))
    value = score(order)
    timed_out = False
    if n >= 3 and time.perf_counter() < deadline:
        traffic = traffic_matrix(identity_steps, n) if n <= 64 else None
        if traffic is not None:
            polished, ran = qap_polish(
                layout, order, traffic, distance_matrix(layout.codes), rng=rng, deadline=deadline
            )
            if ran:
                polished_value = score(polished)
                if polished_value < value - 1e-12:
                    order, value = polished, polished_value
        timed_out = time.perf_counter() >= deadline
    return order, value, timed_out


def plan_ranks(
    placement: Placement,
    topology: Topology,
    pattern: Pattern = "ring",
    routing: Routing = "ecmp",
    *,
    qps: int = 1,
    rng: int | np.random.Generator | None = None,
    time_limit: float = 2.0,
    fixed_ranks: Mapping[int, int] | None = None,
) -> PlanResult:
    """Plan the node ranks of a placed job for its network.

    Ring: every tier's ring cross edges equal their lower bound (hierarchical contiguous grouping, the master's
    domains first); among such orders the domain order, boundary servers (paired by port slot) and direction
    with the lowest maximum link load under `routing` win. Halving-doubling: leaf-aligned power-of-two blocks,
    mapped with `linear_sum_assignment`, polished by `quadratic_assignment` for small jobs. Mixed: the better
    of both for ring plus halving-doubling traffic. `fixed_ranks` (server index -> rank) keeps surviving
    servers' ranks after a partial pod replacement; the others fill the free ranks. The master always gets
    rank 0. `rng` seeds every random choice; `time_limit` (seconds) bounds the search, not the evaluations.
    Raises InputError (or a subclass) for bad arguments only; "could not do better" is a status.
    """
    started = time.perf_counter()
    checked = _plan_ranks_iv(
        placement,
        topology,
        pattern=pattern,
        routing=routing,
        qps=qps,
        rng=rng,
        time_limit=time_limit,
        fixed_ranks=fixed_ranks,
    )
    deadline = started + checked.time_limit
    layout = server_layout(placement, topology)
    network = job_network(topology, [s.node_name for s in placement.servers])
    score = _objective(network, checked.pattern, checked.routing, checked.qps)
    n = layout.size
    timed_out = False
    if len(checked.fixed) > 1:
        identity_steps = _pattern_steps(np.arange(n), checked.pattern)
        pairs = traffic_pairs(identity_steps, n)
        if checked.pattern == "ring":
            preferred, _, _ = _best_ring(layout, score, checked.rng, started)
        else:
            preferred = block_order(layout, pairs)
        order = fill_free_ranks(layout, checked.fixed, pairs, preferred)
    elif checked.pattern == "ring":
        order, _, timed_out = _best_ring(layout, score, checked.rng, deadline)
    elif checked.pattern == "halving-doubling":
        order, _, timed_out = _best_pairwise(layout, checked.pattern, score, checked.rng, deadline)
    else:
        ring_order, ring_score, timed_out = _best_ring(layout, score, checked.rng, deadline)
        pair_order, pair_score, pair_timed_out = _best_pairwise(layout, checked.pattern, score, checked.rng, deadline)
        timed_out = timed_out or pair_timed_out
        order = pair_order if pair_score < ring_score - 1e-12 else ring_order
    routes = None
    if checked.routing == "pinned":
        from planner._routes import pin_routes

        routes = pin_routes(network, _pattern_steps(order, checked.pattern))
    after = evaluate_order(
        network, order.tolist(), pattern=checked.pattern, routing=checked.routing, qps=checked.qps, routes=routes
    )
    before_order = baseline_order("pod-index", placement, topology)
    before = evaluate_order(network, before_order, pattern=checked.pattern, routing=checked.routing, qps=checked.qps)
    meets = _meets_ring_bounds(layout, order)
    if checked.pattern != "halving-doubling" and not meets:
        status = 2 if len(checked.fixed) > 1 else 3
    else:
        status = 1 if timed_out else 0
    shown = summarise(after)[: layout.tiers + 1]
    if checked.pattern == "halving-doubling":
        shown = shown[layout.tiers :]
    message = f"{STATUS_MESSAGES[status]}; " + "; ".join(shown)
    return PlanResult(
        order=tuple(int(s) for s in order),
        status=status,
        success=status in (0, 1, 2),
        message=message,
        pattern=checked.pattern,
        routing=checked.routing,
        qps=checked.qps,
        before=before,
        after=after,
        routes=routes,
        wall_time_s=time.perf_counter() - started,
    )
