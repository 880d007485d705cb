"""ECMP common random numbers: orders alike per switch draw alike; the model's distribution is unchanged."""

from __future__ import annotations

import numpy as np

from planner import (
    JobNetwork,
    Pattern,
    evaluate_order,
    halving_doubling_steps,
    order_seed_metrics,
    paired_difference,
    ring_flows,
)
from tests.support.fabrics import clos, network


def _reference_max_loads(net: JobNetwork, steps: list[np.ndarray], qps: int, seeds: int) -> np.ndarray:
    """Per seed, the largest switch-link load over the steps when every distinct (src, dst, NIC, QP) sub-flow
    draws its spine (and core) uniformly and independently, kept across steps: the previous hash model."""
    rng = np.random.default_rng(12345)
    out = np.zeros(seeds)
    for s in range(seeds):
        paths: dict[tuple[int, int, int, int], tuple[int, int]] = {}
        worst = 0.0
        for step in steps:
            loads: dict[tuple[object, ...], float] = {}
            for src, dst in step.tolist():
                for nic in range(net.nics):
                    plane = nic if net.layout == "rail" else 0
                    a, b = int(net.server_leaf[src]), int(net.server_leaf[dst])
                    if a == b:
                        continue
                    for qp in range(qps):
                        key = (src, dst, nic, qp)
                        if key not in paths:
                            u = int(min(net.leaf_uplinks[a], net.leaf_uplinks[b]))
                            pa, pb = int(net.server_pod[src]), int(net.server_pod[dst])
                            v = int(min(net.pod_uplinks[pa], net.pod_uplinks[pb])) if net.listed_tiers == 2 else 1
                            paths[key] = (int(rng.integers(u)), int(rng.integers(max(v, 1))))
                        spine, core = paths[key]
                        links: list[tuple[object, ...]] = [("up", a, plane, spine), ("down", b, plane, spine)]
                        if net.listed_tiers == 2 and net.server_pod[src] != net.server_pod[dst]:
                            links += [("cup", int(net.server_pod[src]), plane, spine, core)]
                            links += [("cdown", int(net.server_pod[dst]), plane, spine, core)]
                        for link in links:
                            loads[link] = loads.get(link, 0.0) + 1.0 / qps
            worst = max(worst, max(loads.values(), default=0.0))
        out[s] = max(worst, 1.0)
    return out


def _agrees(mine: np.ndarray, reference: np.ndarray) -> bool:
    noise = np.hypot(mine.std(ddof=1) / np.sqrt(mine.size), reference.std(ddof=1) / np.sqrt(reference.size))
    return bool(abs(mine.mean() - reference.mean()) <= 4 * noise + 1e-9)


def test_single_order_statistics_match_independent_uniform_draws_on_ring_and_halving_doubling() -> None:
    rng = np.random.default_rng(3)
    for topology, qps in (
        (clos([4] * 6, nics=2, oversubscription=2.0), 1),
        (clos([4] * 6, nics=2, oversubscription=2.0), 4),
        (clos([4] * 8, nics=2, leaves_per_pod=2, oversubscription=2.0, spine_oversubscription=2.0), 1),
        (clos([4] * 6, nics=4, layout="rail", oversubscription=4.0), 1),
    ):
        net = network(topology)
        order = rng.permutation(net.servers)
        cases: list[tuple[Pattern, list[np.ndarray]]] = [
            ("ring", [ring_flows(order)]),
            ("halving-doubling", halving_doubling_steps(order)),
        ]
        for pattern, steps in cases:
            mine = order_seed_metrics(net, order, pattern=pattern, qps=qps, seeds=400).max_link_load
            reference = _reference_max_loads(net, steps, qps, 400)
            assert _agrees(mine, reference), (pattern, qps, mine.mean(), reference.mean())


def test_two_bound_meeting_ring_orders_give_identical_per_seed_max_loads() -> None:
    # 4:1 leaves (2 uplinks for 8 ports): collisions are common, so equal draws are not a coincidence.
    net = network(clos([4] * 6, nics=2, oversubscription=4.0))
    by_leaf = [list(range(4 * leaf, 4 * leaf + 4)) for leaf in range(6)]
    first = [s for leaf in (0, 1, 2, 3, 4, 5) for s in by_leaf[leaf]]
    second = [s for leaf in (0, 3, 5, 1, 4, 2) for s in reversed(by_leaf[leaf])]
    second = second[second.index(0) :] + second[: second.index(0)]
    one = order_seed_metrics(net, first, qps=2, seeds=64).max_link_load
    two = order_seed_metrics(net, second, qps=2, seeds=64).max_link_load
    assert one.std() > 0
    assert np.array_equal(one, two)
    assert paired_difference(one, two) == (0.0, 0.0)


def test_paired_comparison_of_halving_doubling_orders_has_a_much_smaller_standard_error() -> None:
    net = network(clos([4] * 8, nics=4, oversubscription=2.0))
    # Leaf-aligned blocks against the same order with leaf blocks permuted and two servers swapped across
    # leaves: structurally different (two leaves send more flows in some steps), as planner and vendor orders are.
    blocks = np.arange(net.servers).reshape(8, 4)
    aligned = blocks.ravel()
    other = blocks[[0, 5, 2, 7, 4, 1, 6, 3]].ravel().copy()
    other[[1, 9]] = other[[9, 1]]
    a = order_seed_metrics(net, aligned, pattern="halving-doubling", seeds=200)
    b = order_seed_metrics(net, other, pattern="halving-doubling", seeds=200)
    assert not np.array_equal(a.max_link_load, b.max_link_load)
    _, paired_se = paired_difference(a.max_link_load, b.max_link_load)
    unpaired_se = np.hypot(a.max_link_load.std(ddof=1), b.max_link_load.std(ddof=1)) / np.sqrt(200)
    assert paired_se < 0.5 * unpaired_se


def test_evaluating_only_the_patterns_own_collective_leaves_the_other_bus_bandwidth_out() -> None:
    net = network(clos([2, 2, 2], nics=2))
    order = [0, 2, 4, 1, 3, 5]
    evaluation = evaluate_order(net, order, routing="pinned", patterns=())
    full = evaluate_order(net, order, routing="pinned")
    assert np.isnan(evaluation.hd_busbw)
    assert evaluation.to_dict()["hd_busbw"] is None
    assert evaluation.ring_busbw == full.ring_busbw
    assert evaluation.max_link_load == full.max_link_load
