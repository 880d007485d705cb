"""Regressions named after the benchmark cases they protect: small jobs of the same family and shape.

Under `slice` routing (deterministic) the plan's max link load must not exceed the vendor ordering's (nslb) and
its bus bandwidth must not fall below any baseline's the planner also scores, ring and halving-doubling alike.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from planner import (
    OrderEvaluation,
    Pattern,
    Placement,
    SeedMetrics,
    Topology,
    baseline_order,
    evaluate_order,
    generate_topology,
    job_network,
    order_seed_metrics,
    paired_difference,
    plan_ranks,
)
from planner.core._plan import PORTFOLIO_BASELINES
from planner.core._search import objective
from tests.support.placements import make_placement


def cluster(leaves: int, oversubscription: float, leaves_per_pod: int | None = None) -> Topology:
    return generate_topology(
        leaves=leaves,
        servers_per_leaf=8,
        leaves_per_pod=leaves_per_pod,
        nics_per_server=8,
        leaf_oversubscription=oversubscription,
    )


def packed(topology: Topology, servers: int, seed: int) -> Placement:
    """Leaf-by-leaf fill of free nodes (a quarter busy), a fifth of pod indices swapped: the bench's packed."""
    rng = np.random.default_rng(seed)
    nodes = sorted(topology.paths, key=lambda n: (topology.paths[n], n))
    free = [n for n in nodes if rng.random() >= 0.25]
    start = int(rng.integers(len(free)))
    chosen = [free[(start + i) % len(free)] for i in range(servers)]
    for a, b in rng.choice(servers, size=(servers // 5, 2)).tolist():
        chosen[a], chosen[b] = chosen[b], chosen[a]
    return make_placement(chosen)


def fragmented(topology: Topology, servers: int, seed: int) -> Placement:
    """Random free nodes in random pod-index order: the bench's fragmented placement."""
    rng = np.random.default_rng(seed)
    nodes = sorted(topology.paths)
    return make_placement([nodes[i] for i in rng.choice(len(nodes), size=servers, replace=False)])


def busbw(evaluation: OrderEvaluation, pattern: Pattern) -> float:
    return evaluation.ring_busbw if pattern == "ring" else evaluation.hd_busbw


def assert_no_worse_than_any_baseline_under_slice(placement: Placement, topology: Topology, pattern: Pattern) -> None:
    network = job_network(topology, [s.node_name for s in placement.servers])
    plan = plan_ranks(placement, topology, pattern, "slice", rng=7)
    for name in PORTFOLIO_BASELINES:
        order = baseline_order(name, placement, topology, 7, pattern=pattern)
        other = evaluate_order(network, order, pattern=pattern, routing="slice")
        if name == "nslb" or pattern == "ring":
            assert plan.after.max_link_load <= other.max_link_load, name
        assert busbw(plan.after, pattern) >= busbw(other, pattern) - 1e-12, name


@pytest.mark.parametrize("pattern", ["ring", "halving-doubling"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_tor_2tier_1to1_packed_non_power_of_two_is_no_worse_than_any_baseline_under_slice(
    pattern: Pattern, seed: int
) -> None:
    topology = cluster(12, 1.0)
    assert_no_worse_than_any_baseline_under_slice(packed(topology, 56, seed), topology, pattern)


@pytest.mark.parametrize("seed", [1, 2])
def test_tor_2tier_2to1_packed_non_power_of_two_is_no_worse_than_any_baseline_under_slice(seed: int) -> None:
    topology = cluster(12, 2.0)
    assert_no_worse_than_any_baseline_under_slice(packed(topology, 56, seed), topology, "halving-doubling")


@pytest.mark.parametrize("pattern", ["ring", "halving-doubling"])
def test_tor_3tier_1to1_packed_is_no_worse_than_any_baseline_under_slice(pattern: Pattern) -> None:
    topology = cluster(16, 1.0, leaves_per_pod=4)
    assert_no_worse_than_any_baseline_under_slice(packed(topology, 56, 4), topology, pattern)


@pytest.mark.parametrize("pattern", ["ring", "halving-doubling"])
def test_tor_3tier_4to1_fragmented_is_no_worse_than_any_baseline_under_slice(pattern: Pattern) -> None:
    topology = cluster(24, 4.0, leaves_per_pod=8)
    assert_no_worse_than_any_baseline_under_slice(fragmented(topology, 64, 5), topology, pattern)


def test_mixed_plans_always_meet_every_ring_bound() -> None:
    topology = cluster(12, 2.0, leaves_per_pod=4)
    placement = fragmented(topology, 40, 6)
    for routing in ("ecmp", "slice", "pinned"):
        plan = plan_ranks(placement, topology, "mixed", routing, rng=0)
        assert plan.status == 0
        assert plan.after.cross_edges == plan.after.cross_edge_bounds


def test_ecmp_objective_estimates_the_simulated_expectation() -> None:
    topology = cluster(12, 4.0)
    placement = fragmented(topology, 32, 8)
    network = job_network(topology, [s.node_name for s in placement.servers])
    for pattern in ("ring", "halving-doubling"):
        score = objective(network, pattern, "ecmp", 1)
        for name in ("nslb", "pod-index"):
            order = np.asarray(baseline_order(name, placement, topology), dtype=np.int64)
            simulated = evaluate_order(network, order, pattern=pattern, routing="ecmp", seeds=300)  # type: ignore[arg-type]
            assert score(order).load == pytest.approx(simulated.max_link_load, rel=0.06), (pattern, name)


def test_ring_ecmp_candidates_that_meet_every_bound_tie_so_the_choice_is_not_hash_luck() -> None:
    topology = cluster(12, 4.0)
    placement = fragmented(topology, 40, 9)
    network = job_network(topology, [s.node_name for s in placement.servers])
    score = objective(network, "ring", "ecmp", 1)
    orders = [baseline_order(name, placement, topology) for name in ("nslb", "hostname")]
    assert score(np.asarray(orders[0])) == score(np.asarray(orders[1]))


def bench_fragmented(topology: Topology, servers: int, seed: int) -> Placement:
    """The bench's fragmented placement: a random quarter of the nodes busy, random free nodes in random order."""
    rng = np.random.default_rng(seed)
    nodes = sorted(topology.paths, key=lambda n: (topology.paths[n], n))
    busy = rng.random(len(nodes)) < 0.25
    free = [n for n, b in zip(nodes, busy, strict=True) if not b]
    return make_placement([free[i] for i in rng.choice(len(free), size=servers, replace=False)])


def test_rail_2tier_4to1_64_fragmented_halving_doubling_ecmp_q1_is_as_light_as_nslb_and_as_fast_as_any_baseline() -> (
    None
):
    # the bench's cluster for 64 servers of rail-2tier-4to1: 12 rail groups of 16 servers, 4:1 at the leaf
    topology = generate_topology(
        leaves=12, servers_per_leaf=16, layout="rail", nics_per_server=8, leaf_oversubscription=4.0
    )
    placement = bench_fragmented(topology, 64, 7)
    network = job_network(topology, [s.node_name for s in placement.servers])
    plan = plan_ranks(placement, topology, "halving-doubling", "ecmp", rng=7)
    seeds = np.arange(200)

    def metrics(order: Sequence[int]) -> SeedMetrics:
        return order_seed_metrics(
            network, order, pattern="halving-doubling", routing="ecmp", seeds=seeds, patterns=["halving-doubling"]
        )

    mine = metrics(plan.order)
    for name in PORTFOLIO_BASELINES:
        other = metrics(baseline_order(name, placement, topology, 7, pattern="halving-doubling"))
        if name == "nslb":
            load_gap, load_se = paired_difference(mine.max_link_load, other.max_link_load)
            assert load_gap <= 2 * load_se, (load_gap, load_se)
        speed_gap, speed_se = paired_difference(mine.busbw("halving-doubling"), other.busbw("halving-doubling"))
        assert speed_gap >= -2 * speed_se, (name, speed_gap, speed_se)
