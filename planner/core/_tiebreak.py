"""The ECMP tie-break of halving-doubling and mixed plans: simulation decides what the estimate cannot.

Near-ties of the seed-free estimate and every qualifying baseline are simulated on the same seeds (common random
numbers) and compared pair by pair; small jobs whose pick is more loaded than nslb get a block-swap search for an
order that is both fast and less loaded.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from planner._model import Pattern
from planner.core._search import EPS, Score, Search
from planner.core._validation import CheckedArguments
from planner.sim._evaluate import SeedMetrics, order_seed_metrics, paired_difference
from planner.sim._network import JobNetwork
from planner.sim._patterns import STEP_PATTERNS, StepPattern, halving_doubling_sizes

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


def simulated_choice(
    search: Search, network: JobNetwork, checked: CheckedArguments, valid: Callable[[np.ndarray], bool]
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
    search: Search,
    network: JobNetwork,
    checked: CheckedArguments,
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
