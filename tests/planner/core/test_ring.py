"""Ring ordering: brute-force oracle on tiny jobs, slot pairing, and the regressions it protects against."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from planner import Fabric, job_network, lambda_star, link_loads, ring_flows
from planner.core._ring import (
    ServerLayout,
    choose_boundary_servers,
    cross_edge_bounds,
    grouped_ring_order,
    server_layout,
)
from tests.support.placements import make_placement, make_topology, ring_crossings


def all_orders(n: int, master: int) -> list[tuple[int, ...]]:
    rest = [i for i in range(n) if i != master]
    return [(master, *p) for p in itertools.permutations(rest)]


TINY_CASES = [
    # (leaf sizes, leaves per pod, pod-index order of nodes, master)
    ([3, 2, 2], None, [0, 3, 5, 1, 6, 2, 4], 0),
    ([2, 2, 2, 2], 2, [7, 0, 4, 2, 6, 1, 5, 3], 3),
    ([1, 3, 1, 2], 2, [6, 2, 0, 5, 1, 3, 4], 5),
    ([4, 1, 2], 1, [1, 4, 6, 0, 2, 5, 3], 2),
    ([5, 3], None, [0, 5, 1, 6, 2, 7, 3, 4], 6),
]


@pytest.mark.parametrize(("leaf_sizes", "leaves_per_pod", "picks", "master"), TINY_CASES)
def test_ring_cross_edges_equal_the_brute_force_optimum_at_every_tier(
    leaf_sizes: list[int], leaves_per_pod: int | None, picks: list[int], master: int
) -> None:
    topology = make_topology(leaf_sizes, leaves_per_pod=leaves_per_pod)
    nodes = list(topology.paths)
    placement = make_placement([nodes[i] for i in picks], master=master)
    layout = server_layout(placement, topology)
    orders = all_orders(len(picks), master)
    optimum = [min(ring_crossings(layout.codes, o)[t] for o in orders) for t in range(layout.tiers)]
    order = grouped_ring_order(layout).tolist()
    assert order[0] == master
    assert sorted(order) == list(range(len(picks)))
    assert ring_crossings(layout.codes, order) == optimum
    assert list(cross_edge_bounds(layout.codes)) == optimum


@pytest.mark.parametrize(("leaf_sizes", "leaves_per_pod", "picks", "master"), TINY_CASES)
def test_pinned_ring_load_equals_the_brute_force_optimum(
    leaf_sizes: list[int], leaves_per_pod: int | None, picks: list[int], master: int
) -> None:
    topology = make_topology(leaf_sizes, leaves_per_pod=leaves_per_pod, fabric=Fabric(nics_per_server=2))
    nodes = list(topology.paths)
    placement = make_placement([nodes[i] for i in picks], master=master)
    network = job_network(topology, [s.node_name for s in placement.servers])
    layout = server_layout(placement, topology)
    # pinned routes reach λ* of the order's flows (König), so the best order is the one with the least λ*
    optimum = min(lambda_star(network, ring_flows(o)) for o in all_orders(len(picks), master))
    assert lambda_star(network, ring_flows(grouped_ring_order(layout))) == optimum


@pytest.mark.parametrize("oversubscription", [1.0, 4.0])
@pytest.mark.parametrize(("leaf_sizes", "leaves_per_pod", "picks", "master"), TINY_CASES[:3])
def test_slice_ring_load_equals_the_brute_force_optimum(
    leaf_sizes: list[int], leaves_per_pod: int | None, picks: list[int], master: int, oversubscription: float
) -> None:
    fabric = Fabric(nics_per_server=2, leaf_oversubscription=oversubscription)
    topology = make_topology(leaf_sizes, leaves_per_pod=leaves_per_pod, fabric=fabric)
    nodes = list(topology.paths)
    placement = make_placement([nodes[i] for i in picks], master=master)
    network = job_network(topology, [s.node_name for s in placement.servers])
    layout = server_layout(placement, topology)

    def slice_load(order: tuple[int, ...] | np.ndarray) -> float:
        return float(link_loads(network, ring_flows(order), "slice").max())

    optimum = min(slice_load(o) for o in all_orders(len(picks), master))
    assert slice_load(grouped_ring_order(layout)) == optimum


def layout_of(leaves: list[list[int]], slots: list[int], master: int) -> ServerLayout:
    codes = np.zeros((len(slots), 1), dtype=np.int64)
    for leaf, members in enumerate(leaves):
        codes[members, 0] = leaf
    return ServerLayout(codes=codes, slots=np.asarray(slots, dtype=np.int64), master=master)


def brute_force_mismatches(leaves: list[list[int]], slots: list[int], master: int) -> int:
    """Fewest slot mismatches over every choice of distinct entry/exit servers, the master entering leaf 0."""
    choices = []
    for i, members in enumerate(leaves):
        entries = [master] if i == 0 else members
        choices.append([(e, x) for e in entries for x in members if x != e or len(members) == 1])
    best = len(leaves)
    for pick in itertools.product(*choices):
        mismatches = sum(slots[pick[i][1]] != slots[pick[(i + 1) % len(leaves)][0]] for i in range(len(leaves)))
        best = min(best, mismatches)
    return best


SLOT_CASES = [
    ([[0, 1, 2], [3, 4], [5, 6, 7, 8], [9]], [0, 1, 2, 0, 1, 3, 2, 0, 1, 0], 0),
    # greedy pairing takes slot 0 into leaf 1 and strands its exit; the programme looks ahead
    ([[0, 1], [2, 3], [4]], [0, 1, 1, 0, 0], 0),
    ([[0, 1, 2, 3], [4, 5, 6, 7]], [0, 1, 2, 3, 0, 1, 2, 3], 2),
    ([[0], [1], [2]], [5, 5, 7], 0),
]


@pytest.mark.parametrize(("leaves", "slots", "master"), SLOT_CASES)
def test_boundary_servers_pair_slots_as_well_as_brute_force(
    leaves: list[list[int]], slots: list[int], master: int
) -> None:
    ordered = [sorted(m, key=lambda s: s != master) for m in leaves]
    entries, exits, mismatches = choose_boundary_servers(ordered, np.asarray(slots), master)
    assert mismatches == brute_force_mismatches(ordered, slots, master)
    assert entries[0] == master
    recount = sum(slots[exits[i]] != slots[entries[(i + 1) % len(leaves)]] for i in range(len(leaves)))
    assert recount == mismatches
    for i, members in enumerate(ordered):
        assert entries[i] in members
        assert exits[i] in members
        assert entries[i] != exits[i] or len(members) == 1


def test_the_ring_enters_each_leaf_where_the_previous_leaf_leaves_on_the_same_slot() -> None:
    layout = layout_of([[0, 1, 2, 3], [4, 5, 6, 7]], [0, 1, 2, 3, 3, 2, 1, 0], 0)
    order = grouped_ring_order(layout).tolist()
    boundary = next(r for r in range(7) if layout.codes[order[r], 0] != layout.codes[order[r + 1], 0])
    assert layout.slots[order[boundary]] == layout.slots[order[boundary + 1]]
    assert layout.slots[order[-1]] == layout.slots[order[0]]


def test_master_in_the_middle_of_its_leaf_still_takes_position_zero() -> None:
    layout = layout_of([[0, 1, 2], [3, 4]], [0, 1, 2, 0, 1], 1)
    order = grouped_ring_order(layout).tolist()
    assert order[0] == 1
    assert ring_crossings(layout.codes, order) == [2]


def test_single_server_leaves_are_entered_and_left_by_their_only_server() -> None:
    layout = layout_of([[0], [1], [2, 3], [4]], [0, 0, 0, 1, 0], 0)
    for reverse in (False, True):
        order = grouped_ring_order(layout, reverse=reverse).tolist()
        assert order[0] == 0
        assert sorted(order) == [0, 1, 2, 3, 4]
        assert ring_crossings(layout.codes, order) == [4]


def test_reversed_ring_keeps_the_master_first_and_every_bound() -> None:
    topology = make_topology([3, 2, 4, 1], leaves_per_pod=2)
    nodes = list(topology.paths)
    placement = make_placement([nodes[i] for i in [4, 0, 9, 2, 7, 1, 5, 8, 3, 6]], master=3)
    layout = server_layout(placement, topology)
    forward = grouped_ring_order(layout).tolist()
    backward = grouped_ring_order(layout, reverse=True).tolist()
    assert forward[0] == backward[0] == 3
    assert forward != backward
    assert ring_crossings(layout.codes, backward) == list(cross_edge_bounds(layout.codes))
