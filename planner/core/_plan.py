"""`plan_ranks`: the rank order of a placed job, planned for its network, with every metric against its bound."""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, get_args

import numpy as np
from scipy.special import bdtr

from planner._errors import InputError, PlacementError
from planner._model import Pattern, Placement, Routing, Topology
from planner.core._baselines import baseline_order
from planner.core._halving_doubling import (
    QAP_MAX_SERVERS,
    block_order,
    distance_matrix,
    fill_free_ranks,
    fold_aware_order,
    qap_polish,
    traffic_matrix,
    traffic_pairs,
)
from planner.core._ring import (
    ServerLayout,
    cross_edge_bounds,
    cross_edge_counts,
    grouped_ring_order,
    ring_candidates,
    server_layout,
)
from planner.sim._evaluate import OrderEvaluation, SeedMetrics, evaluate_order, order_seed_metrics, paired_difference
from planner.sim._loads import link_loads
from planner.sim._network import JobNetwork, job_network
from planner.sim._patterns import (
    STEP_PATTERNS,
    StepPattern,
    halving_doubling_sizes,
    lambda_star,
    pattern_step_sizes,
    pattern_steps,
    unique_steps,
)
from planner.sim._pinning import pin_routes
from planner.sim._route_plan import RoutePlan

STATUS_MESSAGES = {
    0: "planned: every lower bound of the pattern's structure is met",
    1: "time limit reached: the best order found so far is returned",
    2: "fixed ranks keep a lower bound out of reach: the best completion is returned",
}
"""`PlanResult.status` values and what they mean."""

MAX_RING_CANDIDATES = 16
"""Bound-meeting ring orders of the planner's own construction scored at most (the first two always)."""
PORTFOLIO_BASELINES = ("nslb", "leaf-grouped", "hostname", "pod-index")
"""Baseline orders also scored as candidates when they meet the pattern's structural bounds (never worse)."""
REPORT_SUBFLOW_SEEDS = 250_000
"""ECMP budget of each report evaluation: seeds x servers x NICs x queue pairs (REPORT_SEEDS at most, 2 at least)."""
REPORT_SEEDS = 64
"""Most ECMP seeds per report evaluation (small jobs): their means are then close to the expectation."""
ECMP_LOAD_SLACK = 0.02
"""Expected ECMP loads within 2 % of a baseline's count as equal when the planner checks it is no worse."""
TIEBREAK_TOLERANCE = 0.05
"""Halving-doubling and mixed under ECMP: candidates whose estimated time or load is within 5 % of the best
are near-ties of the seed-free estimate (it can mis-rank structurally different orders by a few %); they are
decided by a paired simulation."""
TIEBREAK_CANDIDATES = 3
"""Most own near-ties simulated (the estimate's best first); every baseline candidate is simulated too."""
TIEBREAK_FIRST_SEED = 1 << 40
"""The tie-break's ECMP seeds start here: disjoint from the report's and the benchmark's seeds (0, 1, ...)."""
TIEBREAK_SUBFLOW_SEEDS = 2_000_000
"""Tie-break budget: seeds x candidates x servers x NICs x queue pairs (x 3 in 3 tiers); 4 seeds at least."""
TIEBREAK_MAX_SEEDS = 128
"""Small jobs get many seeds: a max link load over all steps is a coarse statistic, and a 5 % load difference
must not be hidden by noise."""
TIEBREAK_MAX_SERVERS = 512
"""Larger jobs skip the simulated tie-break: their many switches make the estimate's maximum sharp, and the
simulation would cost most of the 0.5 s planning budget at 1,024 servers."""
REFINE_MAX_SERVERS = 128
"""Halving-doubling and mixed under ECMP up to this size: when the tie-break's pick is faster than nslb but more
loaded, aligned block swaps look for an order that is both (`_refine_load`)."""
REFINE_TRIALS = 450
"""Block swaps tried by `_refine_load`: a fixed budget, so the plan does not depend on the machine's speed."""
REFINE_SEEDS = 128
"""ECMP seeds judging each swap: disjoint from the tie-break's, which confirm the result, so the search cannot
fit the seeds that decide whether it is kept."""
REFINE_FIRST_SEED = 1 << 41
REFINE_TIME_SLACK = 1.05
"""Swaps whose estimated time exceeds the tie-break pick's by more than 5 % are not simulated (they are slower)."""
EPS = 1e-9

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


@dataclass(frozen=True, slots=True)
class Score:
    """A candidate order's objective: the collective's time (data x largest load, summed over steps), then load.

    For the ring both agree (one step). For halving-doubling the time is what bus bandwidth measures; a lower
    peak load on a tiny late step must not outweigh a slower early step carrying most of the data.
    """

    load: float
    """Largest link load over the steps (ecmp: expected value)."""
    time: float
    """Sum over steps of data size x max(largest load, 1) (ecmp: expected); 1 / bus bandwidth up to a constant."""

    def better_than(self, other: Score) -> bool:
        """Lower time wins; equal times are decided by load."""
        if self.time < other.time - EPS:
            return True
        return abs(self.time - other.time) <= EPS and self.load < other.load - EPS


class _EcmpEstimate:
    """Expected largest link load of ECMP-hashed steps, from per-switch flow counts, without sampling.

    Each tier-1 switch spreads its cross-leaf sub-flows (flows x NICs x queue pairs, in the rail layout per
    plane) uniformly over its U uplinks, and receives its inbound ones over U downlinks; in 3 tiers a pod spreads
    its cross-pod sub-flows over spines x V core links. The largest bin of M balls in B bins has
    P(max <= t) ~ BinomCDF(t; M, 1/B)^B, and groups (and distinct steps) are treated as independent, so the
    estimate depends only on how many flows leave and enter each switch: orders alike in that respect tie
    exactly instead of differing by hash luck, and scoring costs no routing.
    """

    def __init__(self, network: JobNetwork, qps: int) -> None:
        self.network = network
        self.qps = qps
        self.per_pair = network.nics if network.layout == "tor" else 1
        self.copies = 1 if network.layout == "tor" else network.nics
        if network.listed_tiers == 2:
            self.pod_bins = network.pod_spines * np.maximum(network.pod_uplinks, 1)
        else:
            self.pod_bins = np.zeros(0, dtype=np.int64)

    def log_cdf(self, step: np.ndarray, top: int) -> np.ndarray:
        """log P(largest link load of the step <= t / Q) for t = 0 .. top - 1 (in sub-flow units)."""
        net = self.network
        src, dst = step[:, 0], step[:, 1]
        cross_leaf, cross_pod = net.cross_domains(src, dst)
        leaves = len(net.leaf_names)
        groups: list[tuple[np.ndarray, np.ndarray]] = []
        domains = [(net.server_leaf, cross_leaf, leaves, net.leaf_uplinks)]
        if self.pod_bins.size:
            domains.append((net.server_pod, cross_pod, len(net.pod_names), self.pod_bins))
        for domain, crossing, count, bins in domains:
            out = np.bincount(domain[src[crossing]], minlength=count)
            into = np.bincount(domain[dst[crossing]], minlength=count)
            groups.append((out * self.per_pair * self.qps, bins))
            groups.append((into * self.per_pair * self.qps * ~self._mirrored(domain, src, dst, crossing, count), bins))
        balls = np.concatenate([g[0] for g in groups])
        bins = np.concatenate([g[1] for g in groups])
        keep = balls > 0
        pairs, multiplicity = np.unique(np.c_[balls[keep], bins[keep]], axis=0, return_counts=True)
        t = np.arange(top)
        total = np.zeros(top)
        for (m, b), count in zip(pairs.tolist(), multiplicity.tolist(), strict=True):
            with np.errstate(divide="ignore"):
                total += count * self.copies * b * np.log(bdtr(np.minimum(t, m), m, 1.0 / b))
        return total

    @staticmethod
    def _mirrored(domain: np.ndarray, src: np.ndarray, dst: np.ndarray, crossing: np.ndarray, count: int) -> np.ndarray:
        """Domains whose inbound flows all come from one domain that sends only to them.

        A flow takes the same spine (and core) up and down, so such a domain's downlinks carry exactly its
        sender's uplink pattern: counting both would double the chance of a collision.
        """
        a, b = domain[src[crossing]], domain[dst[crossing]]
        links = np.unique(a * count + b)
        senders = np.bincount(links % count, minlength=count)
        receivers = np.bincount(links // count, minlength=count)
        only_sender = np.full(count, -1, dtype=np.int64)
        only_sender[links % count] = links // count
        mirrored: np.ndarray = (senders == 1) & (receivers[np.maximum(only_sender, 0)] == 1) & (only_sender >= 0)
        return mirrored

    def __call__(self, steps: list[np.ndarray], sizes: np.ndarray) -> Score:
        unique, index = unique_steps(steps)
        q = self.qps
        # No link of a group carries more sub-flows than the group holds, and a domain sends at most one flow
        # per server and step: beyond the largest domain the CDF is exactly 1, so the sums stop there.
        net = self.network
        largest = int(np.bincount(net.server_leaf).max())
        if self.pod_bins.size:
            largest = max(largest, int(np.bincount(net.server_pod).max()))
        flows = min(max(int(step.shape[0]) for step in unique), largest)
        top = max(flows * self.per_pair * q, q) + 1
        logs = np.array([self.log_cdf(step, top) for step in unique])
        # E[max(X / Q, 1)] = 1 + sum over t >= Q of P(X > t) / Q, with X in sub-flow units
        tail = 1.0 - np.exp(logs[:, q:])
        expected = 1.0 + tail.sum(axis=1) / q
        worst_tail = 1.0 - np.exp(logs[:, q:].sum(axis=0))
        worst = 1.0 + float(worst_tail.sum()) / q
        return Score(worst, float((sizes * expected[index]).sum()))


def _objective(network: JobNetwork, pattern: Pattern, routing: Routing, qps: int) -> Callable[[np.ndarray], Score]:
    """Score of an order (lower is better): the largest link load over the pattern's steps, then step time.

    Slice routing is deterministic and scored exactly. Pinned routing reaches λ* for every step (König), so it
    is scored by λ*. ECMP is scored by `_EcmpEstimate`, an expectation that needs no seeds, so the choice is
    not hash luck and the report's seeds stay unseen by the search.
    """
    sizes = pattern_step_sizes(network.servers, pattern)
    estimate = _EcmpEstimate(network, qps) if routing == "ecmp" else None

    def score(order: np.ndarray) -> Score:
        steps = pattern_steps(order, pattern)
        if not steps:
            return Score(1.0, 0.0)
        if estimate is not None:
            return estimate(steps, sizes[: len(steps)])
        unique, index = unique_steps(steps)
        if routing == "pinned":
            loads = np.array([float(lambda_star(network, s)) for s in unique])
        else:
            loads = np.array([float(link_loads(network, s, routing).max()) for s in unique])
        per_step = np.maximum(loads[index], 1.0)
        return Score(float(per_step.max()), float((sizes[: len(steps)] * per_step).sum()))

    return score


def _meets_ring_bounds(layout: ServerLayout, order: np.ndarray) -> bool:
    return cross_edge_counts(layout.codes, order) == cross_edge_bounds(layout.codes)


@dataclass
class _Search:
    """Scored candidates, the planner's own and baselines; candidates are scored until the deadline."""

    score: Callable[[np.ndarray], Score]
    deadline: float
    load_slack: float = 0.0
    """Relative load difference treated as a tie when comparing with baselines (ECMP loads are estimates)."""
    scored: list[tuple[np.ndarray, Score, str | None]] = field(default_factory=list)
    timed_out: bool = False

    def offer(self, order: np.ndarray, *, always: bool = False, baseline: str | None = None) -> Score | None:
        """Score `order` unless past the deadline (and not `always`); `baseline` names a baseline's order."""
        if not always and time.perf_counter() >= self.deadline:
            self.timed_out = True
            return None
        value = self.score(order)
        self.scored.append((order, value, baseline))
        return value

    @property
    def order(self) -> np.ndarray:
        """The best candidate that is no worse than any baseline in time and in load, when one is.

        Otherwise the lowest load among those no slower than any baseline (the fastest baseline is one). `Score`
        orders the dominating candidates. ECMP loads within `load_slack` of the lowest count as equal.
        """
        assert self.scored
        pool = self.scored
        baselines = [value for _, value, name in self.scored if name is not None]
        if baselines:
            least_time = min(v.time for v in baselines) + EPS
            least_load = min(v.load for v in baselines) * (1.0 + self.load_slack) + EPS
            dominating = [c for c in pool if c[1].time <= least_time and c[1].load <= least_load]
            if not dominating:
                # no candidate beats every baseline on both: stay no slower than any, with the lowest load
                fast = [c for c in pool if c[1].time <= least_time]
                return min(fast, key=lambda c: (c[1].load, c[1].time))[0]
            pool = dominating
        best = pool[0]
        for candidate in pool[1:]:
            if candidate[1].better_than(best[1]):
                best = candidate
        return best[0]


def _qualifying_baselines(
    placement: Placement, topology: Topology, layout: ServerLayout, pattern: Pattern
) -> list[tuple[str, np.ndarray]]:
    """Baseline orders meeting the pattern's structural bounds (ring and mixed: every ring cross-edge bound)."""
    found: list[tuple[str, np.ndarray]] = []
    for name in PORTFOLIO_BASELINES:
        order = np.asarray(baseline_order(name, placement, topology), dtype=np.int64)
        if pattern != "halving-doubling" and not _meets_ring_bounds(layout, order):
            continue
        if not any(np.array_equal(order, other) for _, other in found):
            found.append((name, order))
    return found


def _speed(metrics: SeedMetrics, pattern: Pattern, servers: int) -> np.ndarray:
    """Per-seed ideal time / simulated time of the pattern's collectives (halving-doubling: its bus bandwidth)."""
    if pattern == "ring":
        return metrics.busbw("ring")
    hd = metrics.busbw("halving-doubling")
    if pattern == "halving-doubling":
        return hd
    hd_data = float(halving_doubling_sizes(servers).sum())
    ring = metrics.busbw("ring")
    speed: np.ndarray = (1.0 + hd_data) / (1.0 / ring + hd_data / hd)
    return speed


def _tie_break_seeds(network: JobNetwork, qps: int, candidates: int) -> np.ndarray:
    # 3 tiers draw a second (core) choice per seed, ranked per spine: about three times the work
    work = network.servers * network.nics * qps * (3 if network.listed_tiers == 2 else 1) * max(candidates, 1)
    count = int(min(TIEBREAK_MAX_SEEDS, max(4, TIEBREAK_SUBFLOW_SEEDS // max(work, 1))))
    return np.arange(TIEBREAK_FIRST_SEED, TIEBREAK_FIRST_SEED + count)


def _simulated_choice(
    search: _Search, network: JobNetwork, checked: _Checked, valid: Callable[[np.ndarray], bool]
) -> np.ndarray:
    """Every baseline candidate and the estimate's near-ties, decided by a paired ECMP simulation.

    All contenders are simulated on the same tie-break seeds (common random numbers), so their differences are
    precise. Rule: the fastest contender that is no slower than every baseline and has no higher max load than
    nslb (the vendor order; the lowest baseline load without it); when none has both, the lowest load among
    those no slower than every baseline. An own construction replaces the baseline that rule picks from the
    baselines alone only when it is ahead by more than one paired standard error in speed or load, so noise
    never trades a baseline for an order that is not better. Jobs of up to REFINE_MAX_SERVERS whose pick is
    no slower than every baseline but more loaded than nslb get `_refine_load`; its order replaces the pick
    only when, on the tie-break seeds, it is no slower than every baseline and no more loaded than nslb.
    `valid` says whether an order keeps the pattern's structural bounds.
    """
    estimate_pick = search.order
    unique: list[tuple[np.ndarray, Score, str | None]] = []
    for order, value, name in search.scored:
        index = next((k for k, other in enumerate(unique) if np.array_equal(order, other[0])), None)
        if index is None:
            unique.append((order, value, name))
        elif name is not None and unique[index][2] is None:
            unique[index] = (order, unique[index][1], name)
    best_time = min(v.time for _, v, _ in unique)
    best_load = min(v.load for _, v, _ in unique)

    def near_tie(c: tuple[np.ndarray, Score, str | None]) -> bool:
        return (
            c[1].time <= best_time * (1.0 + TIEBREAK_TOLERANCE) + EPS
            or c[1].load <= best_load * (1.0 + TIEBREAK_TOLERANCE) + EPS
            or np.array_equal(c[0], estimate_pick)
        )

    own = [c for c in unique if c[2] is None and near_tie(c)]
    own.sort(key=lambda c: (c[1].time, c[1].load))
    contenders = own[:TIEBREAK_CANDIDATES] + [c for c in unique if c[2] is not None]
    if len(contenders) < 2:
        return estimate_pick
    seeds = _tie_break_seeds(network, checked.qps, len(contenders))
    collectives: list[StepPattern] = (
        ["halving-doubling"] if checked.pattern == "halving-doubling" else list(STEP_PATTERNS)
    )
    loads: list[np.ndarray] = []
    speeds: list[np.ndarray] = []
    for order, _, _ in contenders:
        metrics = order_seed_metrics(
            network, order, pattern=checked.pattern, routing="ecmp", qps=checked.qps, seeds=seeds, patterns=collectives
        )
        loads.append(metrics.max_link_load)
        speeds.append(_speed(metrics, checked.pattern, network.servers))
    names = [c[2] for c in contenders]

    def pick(indices: list[int]) -> int:
        base = [k for k in indices if names[k] is not None] or indices
        vendor = [k for k in base if names[k] == "nslb"] or base
        fastest = max(float(speeds[k].mean()) for k in base) - EPS
        lowest = min(float(loads[k].mean()) for k in vendor) + EPS
        both = [k for k in indices if speeds[k].mean() >= fastest and loads[k].mean() <= lowest]
        if both:
            return max(both, key=lambda k: (float(speeds[k].mean()), -float(loads[k].mean())))
        return min((k for k in indices if speeds[k].mean() >= fastest), key=lambda k: float(loads[k].mean()))

    chosen = pick(list(range(len(contenders))))
    baseline_indices = [k for k in range(len(contenders)) if names[k] is not None]
    if names[chosen] is None and baseline_indices:
        fallback = pick(baseline_indices)
        speed_gain, speed_se = paired_difference(speeds[chosen], speeds[fallback])
        load_gain, load_se = paired_difference(loads[fallback], loads[chosen])
        if speed_gain <= speed_se + EPS and load_gain <= load_se + EPS:
            chosen = fallback
    order = contenders[chosen][0]
    vendor = next((k for k in baseline_indices if names[k] == "nslb"), None)
    if vendor is None or network.servers > REFINE_MAX_SERVERS:
        return order
    vendor_load = float(loads[vendor].mean())
    fastest = max(float(speeds[k].mean()) for k in baseline_indices)
    if loads[chosen].mean() <= vendor_load + EPS or speeds[chosen].mean() < fastest - EPS:
        return order
    baseline_orders = [contenders[k][0] for k in baseline_indices]
    refined = _refine_load(order, baseline_orders, search=search, network=network, checked=checked, valid=valid)
    if refined is None:
        return order
    metrics = order_seed_metrics(
        network, refined, pattern=checked.pattern, routing="ecmp", qps=checked.qps, seeds=seeds, patterns=collectives
    )
    if (
        _speed(metrics, checked.pattern, network.servers).mean() >= fastest - EPS
        and metrics.max_link_load.mean() <= vendor_load + EPS
    ):
        return refined
    return order


def _refine_load(
    order: np.ndarray,
    baseline_orders: list[np.ndarray],
    *,
    search: _Search,
    network: JobNetwork,
    checked: _Checked,
    valid: Callable[[np.ndarray], bool],
) -> np.ndarray | None:
    """A less loaded order no slower than every baseline, by swapping aligned rank blocks; None if none is found.

    Swapping two aligned blocks of 2^k ranks keeps every halving-doubling step below k as it is, so the early
    steps, which carry most of the data, stay as fast while the later ones (few bytes, many cross-leaf flows,
    where the max load usually is) spread their flows over other leaves. The block holding rank 0 stays. A swap
    is simulated only when the seed-free estimate (`_EcmpEstimate`, fast) finds it less loaded than the current
    order and at most 5 % slower than the pick; it is kept when, simulated on REFINE_SEEDS seeds of its own, the
    order is no slower than the fastest baseline and less loaded than the current one on average.
    REFINE_TRIALS swaps are drawn from `checked.rng`; the deadline only guards.
    """
    n = network.servers
    seeds = np.arange(REFINE_FIRST_SEED, REFINE_FIRST_SEED + REFINE_SEEDS)
    collectives: list[StepPattern] = (
        ["halving-doubling"] if checked.pattern == "halving-doubling" else list(STEP_PATTERNS)
    )

    def simulate(candidate: np.ndarray) -> tuple[float, float]:
        metrics = order_seed_metrics(
            network,
            candidate,
            pattern=checked.pattern,
            routing="ecmp",
            qps=checked.qps,
            seeds=seeds,
            patterns=collectives,
        )
        return float(_speed(metrics, checked.pattern, n).mean()), float(metrics.max_link_load.mean())

    fastest = max(simulate(b)[0] for b in baseline_orders)
    widths = [1 << k for k in range(n.bit_length()) if n // (1 << k) >= 3]
    if not widths:
        return None
    current, estimate = order, search.score(order)
    start = estimate
    _, load = simulate(order)
    improved = False
    leaf = network.server_leaf
    for _ in range(REFINE_TRIALS):
        if time.perf_counter() >= search.deadline:
            break
        width = widths[int(checked.rng.integers(len(widths)))]
        a, b = (int(x) for x in checked.rng.integers(1, n // width, size=2))
        if a == b:
            continue
        candidate = current.copy()
        candidate[a * width : (a + 1) * width] = current[b * width : (b + 1) * width]
        candidate[b * width : (b + 1) * width] = current[a * width : (a + 1) * width]
        # swapping servers of one leaf only changes hash luck, not the flows' leaves
        if np.array_equal(leaf[candidate], leaf[current]) or not valid(candidate):
            continue
        value = search.score(candidate)
        if value.time > start.time * REFINE_TIME_SLACK or value.load >= estimate.load - EPS:
            continue
        speed, candidate_load = simulate(candidate)
        if speed >= fastest - EPS and candidate_load < load - EPS:
            current, estimate, load, improved = candidate, value, candidate_load, True
    return current if improved else None


def _ring_candidates(layout: ServerLayout, rng: np.random.Generator) -> Iterator[np.ndarray]:
    limit = MAX_RING_CANDIDATES if layout.tiers and len(np.unique(layout.codes[:, 0])) > 2 else 2
    for count, candidate in enumerate(ring_candidates(layout, rng)):
        if count >= limit:
            return
        yield candidate


def _pairwise_candidates(layout: ServerLayout, pattern: Pattern, slice_class: np.ndarray) -> list[np.ndarray]:
    """The planner's own halving-doubling orders: fold-aware with and without slice classes, and leaf blocks."""
    n = layout.size
    identity_steps = pattern_steps(np.arange(n), pattern)
    found: list[np.ndarray] = []
    for order in (
        fold_aware_order(layout, slice_class),
        fold_aware_order(layout),
        block_order(layout, traffic_pairs(identity_steps, n)),
    ):
        if not any(np.array_equal(order, other) for other in found):
            found.append(order)
    return found


def _slice_classes(network: JobNetwork) -> np.ndarray:
    """NSLB slice class of each server: flows from servers of one class on a NIC take the same spine."""
    ports = network.server_slot * (network.nics if network.layout == "tor" else 1)
    classes: np.ndarray = ports % network.leaf_uplinks[network.server_leaf]
    return classes


def _report_seeds(network: JobNetwork, routing: Routing, qps: int) -> int:
    """ECMP seeds of each report evaluation: up to REPORT_SEEDS, fewer for big jobs (REPORT_SUBFLOW_SEEDS), >= 2.

    3 tiers count three times the sub-flows, as in the tie-break budget: each seed also draws a core per
    cross-pod sub-flow, ranked per spine.
    """
    if routing != "ecmp":
        return 1
    subflows = network.servers * network.nics * qps * (3 if network.listed_tiers == 2 else 1)
    return int(min(REPORT_SEEDS, max(2, REPORT_SUBFLOW_SEEDS // max(subflows, 1))))


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
    with the lowest load under `routing` win. Halving-doubling: fold-aware leaf-aligned power-of-two blocks on
    the virtual hypercube, mapped with `linear_sum_assignment` (slice classes matched), polished by
    `quadratic_assignment` for small jobs. Mixed: the best ring-bound-meeting order for ring plus
    halving-doubling traffic. Baselines meeting the same bounds compete too, so the plan is no slower than any
    of them under the objective. `fixed_ranks` (server index -> rank) keeps surviving
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
    slack = ECMP_LOAD_SLACK if checked.routing == "ecmp" else 0.0
    search = _Search(_objective(network, checked.pattern, checked.routing, checked.qps), deadline, slack)
    n = layout.size
    if len(checked.fixed) > 1:
        identity_steps = pattern_steps(np.arange(n), checked.pattern)
        pairs = traffic_pairs(identity_steps, n)
        if checked.pattern == "ring":
            preferred = grouped_ring_order(layout)
        else:
            preferred = fold_aware_order(layout, _slice_classes(network))
        search.offer(fill_free_ranks(layout, checked.fixed, pairs, preferred), always=True)
    else:
        _search_orders(search, placement=placement, topology=topology, layout=layout, network=network, checked=checked)
    order = search.order
    if (
        checked.routing == "ecmp"
        and checked.pattern != "ring"
        and len(checked.fixed) <= 1
        and network.servers <= TIEBREAK_MAX_SERVERS
    ):
        if checked.pattern == "mixed":
            order = _simulated_choice(search, network, checked, lambda o: _meets_ring_bounds(layout, o))
        else:
            order = _simulated_choice(search, network, checked, lambda o: True)
    routes = None
    if checked.routing == "pinned":
        routes = pin_routes(network, pattern_steps(order, checked.pattern))
    seeds = _report_seeds(network, checked.routing, checked.qps)
    after = evaluate_order(
        network,
        order.tolist(),
        pattern=checked.pattern,
        routing=checked.routing,
        qps=checked.qps,
        seeds=seeds,
        routes=routes,
    )
    before_order = baseline_order("pod-index", placement, topology)
    # The pod-index order only needs the pattern's own collectives (pinning the other one is what costs);
    # the plan's evaluation above reports both bus bandwidths.
    before = evaluate_order(
        network,
        before_order,
        pattern=checked.pattern,
        routing=checked.routing,
        qps=checked.qps,
        seeds=seeds,
        patterns=(),
    )
    # fixed ranks are the only way a ring bound can be missed: every other candidate meets them
    misses_bound = checked.pattern != "halving-doubling" and not _meets_ring_bounds(layout, order)
    status = 2 if misses_bound else int(search.timed_out)
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


def _search_orders(
    search: _Search,
    *,
    placement: Placement,
    topology: Topology,
    layout: ServerLayout,
    network: JobNetwork,
    checked: _Checked,
) -> None:
    """Offer every candidate of the pattern to `search`: the planner's constructions, then qualifying baselines.

    Ring (and mixed, whose orders must meet the ring bounds): bound-meeting grouped rings. Halving-doubling:
    fold-aware leaf blocks, polished by 2-opt QAP for small jobs. Baselines that meet the same bounds are
    scored by the same objective, so the plan is never worse than any of them under it.
    """
    pattern = checked.pattern
    ring_iter = _ring_candidates(layout, checked.rng)
    if pattern == "halving-doubling":
        for index, candidate in enumerate(_pairwise_candidates(layout, pattern, _slice_classes(network))):
            search.offer(candidate, always=index == 0)
    else:
        for candidate in itertools.islice(ring_iter, 2):
            search.offer(candidate, always=True)
    for name, candidate in _qualifying_baselines(placement, topology, layout, pattern):
        search.offer(candidate, always=True, baseline=name)
    if pattern != "halving-doubling":
        for candidate in ring_iter:
            if search.offer(candidate) is None:
                break
    elif layout.size <= QAP_MAX_SERVERS and time.perf_counter() < search.deadline:
        identity_steps = pattern_steps(np.arange(layout.size), pattern)
        polished, ran = qap_polish(
            layout,
            search.order,
            traffic_matrix(identity_steps, layout.size),
            distance_matrix(layout.codes),
            rng=checked.rng,
            deadline=search.deadline,
        )
        if ran:
            search.offer(polished, always=True)
