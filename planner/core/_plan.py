"""`plan_ranks`: the rank order of a placed job, planned for its network, with every metric against its bound."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator, Mapping

import numpy as np

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
from planner.core._result import STATUS_MESSAGES, PlanResult, summarise
from planner.core._ring import (
    ServerLayout,
    cross_edge_bounds,
    cross_edge_counts,
    grouped_ring_order,
    ring_candidates,
    server_layout,
)
from planner.core._search import Search, objective
from planner.core._tiebreak import TIEBREAK_MAX_SERVERS, simulated_choice
from planner.core._validation import CheckedArguments, _plan_ranks_iv
from planner.sim._evaluate import evaluate_order
from planner.sim._fabric_links import LinkBackground
from planner.sim._network import JobNetwork, job_network
from planner.sim._patterns import pattern_steps
from planner.sim._pinning import pin_routes

MAX_RING_CANDIDATES = 16
"""Bound-meeting ring orders of the planner's own construction scored at most (the first two always)."""
PORTFOLIO_BASELINES = ("nslb", "leaf-grouped", "hostname", "pod-index")
"""Baseline orders also scored as candidates when they meet the pattern's structural bounds (never worse)."""
REPORT_SUBFLOW_SEEDS = 250_000
"""ECMP budget of each report evaluation: seeds x servers x NICs x queue pairs (REPORT_SEEDS at most, 2 at least)."""
REPORT_SEEDS = 64
"""Most ECMP seeds per report evaluation (small jobs): their means are then close to the expectation."""
PINNED_REPORT_SUBFLOWS = 1 << 19
"""Queue pairs of the other collective's steps a pinned plan's report pins to simulate its bus bandwidth at most
(halving-doubling's at 4,096 servers with one queue pair, not with four)."""
ECMP_LOAD_SLACK = 0.02
"""Expected ECMP loads within 2 % of a baseline's count as equal when the planner checks it is no worse."""


def _meets_ring_bounds(layout: ServerLayout, order: np.ndarray) -> bool:
    return cross_edge_counts(layout.codes, order) == cross_edge_bounds(layout.codes)


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


def _other_collective_affordable(network: JobNetwork, checked: CheckedArguments) -> bool:
    """Whether the report also simulates the collective the plan was not made for: under pinned routing that
    means pinning its steps too, every queue pair of them (1.5 million at 4,096 servers with 4 queue pairs of
    halving-doubling, past the planning process's memory), so only up to PINNED_REPORT_SUBFLOWS."""
    if checked.routing != "pinned" or checked.pattern == "mixed":
        return True
    n = network.servers
    steps = 1 if checked.pattern == "halving-doubling" else max(1, (n - 1).bit_length())  # the other one's
    return n * network.nics * checked.qps * steps <= PINNED_REPORT_SUBFLOWS


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
    background: LinkBackground | None = None,
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
    search = Search(objective(network, checked.pattern, checked.routing, checked.qps), deadline, slack)
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
            order = simulated_choice(search, network, checked, lambda o: _meets_ring_bounds(layout, o))
        else:
            order = simulated_choice(search, network, checked, lambda _o: True)
    routes = None
    if checked.routing == "pinned":
        shared = background.on(network) if background is not None else None
        routes = pin_routes(network, pattern_steps(order, checked.pattern), qps=checked.qps, background=shared)
    seeds = _report_seeds(network, checked.routing, checked.qps)
    after = evaluate_order(
        network,
        order.tolist(),
        pattern=checked.pattern,
        routing=checked.routing,
        qps=checked.qps,
        seeds=seeds,
        routes=routes,
        patterns=None if _other_collective_affordable(network, checked) else (),
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
        success=status != 2,
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
    search: Search,
    *,
    placement: Placement,
    topology: Topology,
    layout: ServerLayout,
    network: JobNetwork,
    checked: CheckedArguments,
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
