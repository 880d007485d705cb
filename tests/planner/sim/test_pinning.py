"""Route pinning: König edge colouring reaches λ*, routes every cross-leaf flow once, and routes.json agrees."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import (
    Layout,
    RoutePlan,
    edge_colouring,
    evaluate_order,
    halving_doubling_steps,
    lambda_star,
    link_loads,
    pin_routes,
    ring_flows,
)
from tests.support.fabrics import clos, network


@st.composite
def multigraphs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    left_vertices = draw(st.integers(1, 6))
    right_vertices = draw(st.integers(1, 6))
    edges = draw(st.integers(1, 40))
    left = draw(st.lists(st.integers(0, left_vertices - 1), min_size=edges, max_size=edges))
    right = draw(st.lists(st.integers(0, right_vertices - 1), min_size=edges, max_size=edges))
    return np.array(left), np.array(right)


@given(multigraphs())
@settings(max_examples=80, deadline=None)
def test_edge_colouring_is_proper_with_max_degree_colours(graph: tuple[np.ndarray, np.ndarray]) -> None:
    left, right = graph
    colours = edge_colouring(left, right)
    delta = max(np.bincount(left).max(), np.bincount(right).max())
    assert colours.min() >= 0
    assert colours.max() < delta
    for side in (left, right):
        pairs = side * (delta + 1) + colours
        assert np.unique(pairs).size == pairs.size


@st.composite
def pinning_cases(draw: st.DrawFn) -> tuple[object, list[int], bool]:
    leaves = draw(st.integers(2, 5))
    per_leaf = draw(st.integers(1, 4))
    layout: Layout = draw(st.sampled_from(["tor", "rail"]))
    nics = draw(st.sampled_from([1, 2, 4]))
    over = draw(st.sampled_from([1.0, 2.0, 4.0]))
    # Equal uplink counts per tier (whole pods) is where König's bound is guaranteed.
    pods = draw(st.sampled_from([None, 1, leaves] + ([2] if leaves % 2 == 0 else [])))
    topology = clos([per_leaf] * leaves, nics=nics, layout=layout, oversubscription=over, leaves_per_pod=pods)
    order = draw(st.permutations(list(range(leaves * per_leaf))))
    hd = draw(st.booleans())
    return topology, list(order), hd


def _recomputed_loads(plan: RoutePlan, step: int) -> np.ndarray:
    """Switch-link loads of one step rebuilt from routes.json alone."""
    net = plan.network
    document = json.loads(json.dumps(plan.to_json()))
    leaf_index = {name: i for i, name in enumerate(net.leaf_names)}
    pod_of = {name: int(net.server_pod[i]) for i, name in enumerate(net.nodes)}
    loads = np.zeros(net.num_links)
    for entry in document["flows"]:
        if entry["step"] != step:
            continue
        plane = entry["plane"]
        spine = entry["spine"]
        a = leaf_index[entry["src_leaf"]] * net.planes + plane
        b = leaf_index[entry["dst_leaf"]] * net.planes + plane
        loads[net.leaf_link(np.array(a), np.array(spine), up=True)] += 1
        loads[net.leaf_link(np.array(b), np.array(spine), up=False)] += 1
        if entry["core"] is not None:
            pa, pb, core = pod_of[entry["src_node"]], pod_of[entry["dst_node"]], entry["core"]
            loads[net.spine_link(np.array(pa), np.array(plane), np.array(spine), np.array(core), up=True)] += 1
            loads[net.spine_link(np.array(pb), np.array(plane), np.array(spine), np.array(core), up=False)] += 1
    return loads


@given(pinning_cases())
@settings(max_examples=50, deadline=None)
def test_pinned_routes_reach_lambda_star_and_route_every_cross_leaf_flow_exactly_once(
    case: tuple[object, list[int], bool],
) -> None:
    topology, order, hd = case
    net = network(topology)  # type: ignore[arg-type]
    steps = halving_doubling_steps(order) if hd else [ring_flows(order)]
    plan = pin_routes(net, steps)
    assert plan.bound == max((lambda_star(net, s) for s in steps), default=1)
    assert plan.max_load == plan.bound
    entries = plan.to_json()["flows"]
    expected_entries = 0
    for index, step in enumerate(steps):
        spines, cores = plan.spines[index], plan.cores[index]
        src, dst = step[:, 0], step[:, 1]
        nic = np.arange(net.nics)[None, :]
        cross = net.tier1_switch(src[:, None], nic) != net.tier1_switch(dst[:, None], nic)
        assert np.array_equal(spines >= 0, cross)
        cross_pod = (net.server_pod[src] != net.server_pod[dst])[:, None] & cross
        assert np.array_equal(cores >= 0, cross_pod)
        expected_entries += int(cross.sum())
        pinned = link_loads(net, step, "pinned", routes=plan)
        switch = slice(net.first_switch_link, None)
        assert np.array_equal(pinned[switch], _recomputed_loads(plan, index)[switch])
        assert pinned.max() <= plan.bound
    assert len(entries) == expected_entries


def test_pinning_on_unequal_pods_uses_only_core_uplinks_both_spines_have() -> None:
    # pod-2 has one leaf, so its spines have one core uplink while the others have two.
    net = network(clos([1, 1, 1, 1, 1], leaves_per_pod=2))
    order = [0, 1, 2, 4, 3]
    plan = pin_routes(net, [ring_flows(order)])
    cores = plan.cores[0][:, 0]
    flows = ring_flows(order)
    limit = np.minimum(net.pod_uplinks[net.server_pod[flows[:, 0]]], net.pod_uplinks[net.server_pod[flows[:, 1]]])
    assert np.all(cores < limit)
    assert plan.max_load >= plan.bound


def test_pinned_evaluation_reaches_line_rate_at_one_to_one_for_any_order() -> None:
    net = network(clos([4] * 6, nics=4))
    order = list(np.random.default_rng(3).permutation(24))
    evaluation = evaluate_order(net, order, routing="pinned", pattern="mixed")
    assert evaluation.max_link_load == evaluation.max_link_load_bound == 1
    assert evaluation.ring_busbw == 1.0
    assert evaluation.hd_busbw == 1.0


def test_routes_json_names_nodes_pods_leaves_and_nics() -> None:
    net = network(clos([1, 1]))
    plan = pin_routes(net, [ring_flows([0, 1])])
    document = plan.to_json(pod_names=["job-0", "job-1"])
    assert document["max_load"] == document["bound"] == 1
    first = document["flows"][0]
    assert (first["src_node"], first["src_pod"], first["dst_node"], first["dst_pod"]) == (
        "n0-0",
        "job-0",
        "n1-0",
        "job-1",
    )
    assert (first["src_leaf"], first["dst_leaf"], first["nic"], first["core"]) == ("leaf-0", "leaf-1", 0, None)
