"""Routing models and the bound λ* on hand-computed tiny fabrics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from planner import InputError, evaluate_order, lambda_star, link_loads, pin_routes, ring_flows
from planner.sim._network import LINK_TIER_NIC, LINK_TIER_SPINE
from tests.support.fabrics import clos, network

# Servers of `clos([2, 2, 2])`: 0, 1 on leaf-0; 2, 3 on leaf-1; 4, 5 on leaf-2 (slot = position on the leaf).
COLLIDING_RING = [0, 2, 4, 3, 1, 5]
"""Servers 0 and 4 (both slot 0) send into leaf-1: under slice pinning both take spine 0 down to leaf-1."""


def _switch_loads(loads: np.ndarray, net_tiers: np.ndarray) -> np.ndarray:
    switch: np.ndarray = loads[net_tiers != LINK_TIER_NIC]
    return switch


def test_slice_pinning_sends_equal_slots_from_two_leaves_down_the_same_spine() -> None:
    net = network(clos([2, 2, 2]))
    flows = ring_flows(COLLIDING_RING)
    loads = link_loads(net, flows, "slice")
    down_leaf1_spine0 = net.leaf_link(np.array(1), np.array(0), up=False)
    assert loads[down_leaf1_spine0] == 2
    assert lambda_star(net, flows) == 1
    assert _switch_loads(loads, net.link_tier).max() == 2


def test_slice_pinning_spreads_a_servers_nics_over_consecutive_uplinks() -> None:
    net = network(clos([2, 2], nics=2))
    loads = link_loads(net, ring_flows([0, 2, 1, 3]), "slice")
    leaf0_up = net.leaf_link(np.zeros(4, dtype=np.int64), np.arange(4), up=True)
    assert loads[leaf0_up].tolist() == [1, 1, 1, 1]
    assert lambda_star(net, ring_flows([0, 2, 1, 3])) == 1


def test_lambda_star_counts_nic_flows_over_the_uplinks_of_an_oversubscribed_leaf() -> None:
    net = network(clos([2, 2], nics=2, oversubscription=2.0))
    assert net.leaf_uplinks.tolist() == [2, 2]
    assert lambda_star(net, ring_flows([0, 2, 1, 3])) == 2
    assert lambda_star(net, ring_flows([0, 1, 2, 3])) == 1
    assert lambda_star(net, np.zeros((0, 2), dtype=np.int64)) == 1


def test_ecmp_with_a_single_uplink_puts_every_flow_of_a_leaf_on_it() -> None:
    net = network(clos([2, 2], leaf_uplinks=1))
    loads = link_loads(net, ring_flows([0, 2, 1, 3]), "ecmp", seed=5)
    assert loads[net.leaf_link(np.array([0, 1]), np.array([0, 0]), up=True)].tolist() == [2, 2]


def test_ecmp_queue_pairs_split_each_flow_into_equal_parts_and_conserve_load() -> None:
    net = network(clos([4, 4], nics=2))
    flows = ring_flows([0, 4, 1, 5, 2, 6, 3, 7])
    for qps in (1, 4, 8):
        loads = link_loads(net, flows, "ecmp", qps=qps, seed=1)
        up = loads[net.first_switch_link : net.first_switch_link + len(net.leaf_names) * net.max_uplinks]
        assert up.sum() == pytest.approx(16.0)
        assert np.allclose(up * qps, np.round(up * qps))


def test_ecmp_hashes_spread_flows_roughly_uniformly_over_the_uplinks() -> None:
    net = network(clos([8, 8], nics=8))
    flows = ring_flows([0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15])
    first = net.first_switch_link
    totals = sum(link_loads(net, flows, "ecmp", seed=s)[first : first + 64] for s in range(200))
    expected = 200 * 64 / 64
    assert np.all(np.abs(totals - expected) < 0.35 * expected)


def test_ecmp_max_load_is_the_mean_over_seeds_of_each_seeds_largest_link() -> None:
    net = network(clos([4, 4, 4], nics=2))
    order = [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]
    evaluation = evaluate_order(net, order, seeds=20)
    per_seed = [link_loads(net, ring_flows(order), "ecmp", seed=s).max() for s in range(20)]
    assert evaluation.max_link_load == pytest.approx(np.mean(per_seed))
    assert evaluation.ring_busbw == pytest.approx(np.mean([1 / x for x in per_seed]))


def test_three_tier_cross_pod_flows_use_spine_and_core_links_chosen_by_leaf_position() -> None:
    net = network(clos([1, 1, 1, 1], leaves_per_pod=2))
    flows = ring_flows([0, 1, 2, 3])
    loads = link_loads(net, flows, "slice")
    core_links = np.flatnonzero(net.link_tier == LINK_TIER_SPINE)
    used = core_links[loads[core_links] > 0]
    expected = [
        net.spine_link(np.array(0), np.array(0), np.array(0), np.array(1), up=True),
        net.spine_link(np.array(1), np.array(0), np.array(0), np.array(1), up=False),
        net.spine_link(np.array(1), np.array(0), np.array(0), np.array(1), up=True),
        net.spine_link(np.array(0), np.array(0), np.array(0), np.array(1), up=False),
    ]
    assert sorted(used.tolist()) == sorted(int(x) for x in expected)
    assert lambda_star(net, flows) == 1


def test_three_tier_lambda_star_counts_cross_pod_flows_over_spine_core_links() -> None:
    # Two pods of two single-server leaves; spine oversubscription 2:1 leaves one core uplink per spine.
    net = network(clos([1, 1, 1, 1], leaves_per_pod=2, spine_oversubscription=2.0))
    assert net.pod_uplinks.tolist() == [1, 1]
    flows = np.array([[0, 2], [1, 3]])
    assert lambda_star(net, flows) == 2
    assert link_loads(net, flows, "ecmp").max() == 2


def test_pinned_routing_without_a_plan_is_an_input_error() -> None:
    net = network(clos([2, 2]))
    with pytest.raises(InputError, match="routes"):
        link_loads(net, ring_flows([0, 2, 1, 3]), "pinned")


def test_pinned_routes_remove_the_slice_collision() -> None:
    net = network(clos([2, 2, 2]))
    flows = ring_flows(COLLIDING_RING)
    plan = pin_routes(net, [flows])
    assert plan.max_load == plan.bound == 1
    assert link_loads(net, flows, "pinned", routes=plan).max() == 1
    assert evaluate_order(net, COLLIDING_RING, routing="pinned").max_link_load == 1
    assert evaluate_order(net, COLLIDING_RING, routing="slice").max_link_load == 2


def test_cross_edges_and_their_bounds_count_ring_edges_leaving_leaves_and_pods() -> None:
    net = network(clos([2, 2, 2, 2], leaves_per_pod=2))
    evaluation = evaluate_order(net, [0, 2, 1, 3, 4, 5, 6, 7], routing="slice")
    assert evaluation.cross_edges == (6, 2)
    assert evaluation.cross_edge_bounds == (4, 2)
    assert evaluation.to_dict()["max_link_load_gap"] == evaluation.max_link_load - evaluation.max_link_load_bound


def test_bad_order_and_routing_are_rejected_with_the_argument_named() -> None:
    net = network(clos([2, 2]))
    with pytest.raises(InputError, match="order"):
        evaluate_order(net, [0, 1, 1, 3])
    with pytest.raises(InputError, match="routing"):
        evaluate_order(net, [0, 1, 2, 3], routing="random")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="qps"):
        evaluate_order(net, [0, 1, 2, 3], qps=0)


def test_plot_link_loads_writes_a_png(tmp_path: Path) -> None:
    from planner import plot_link_loads

    net = network(clos([2, 2, 2]))
    flows = ring_flows(COLLIDING_RING)
    before = link_loads(net, flows, "slice")[net.first_switch_link :]
    after = link_loads(net, flows, "pinned", routes=pin_routes(net, [flows]))[net.first_switch_link :]
    target = plot_link_loads(before, after, tmp_path / "loads.png", bound=1)
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
