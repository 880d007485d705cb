"""Route pinning in 3 tiers: the reported bound is the true optimum (brute force) and the routes reach it."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import (
    JobNetwork,
    Layout,
    Topology,
    halving_doubling_steps,
    lambda_star,
    link_loads,
    pin_routes,
    ring_flows,
)
from tests.support.fabrics import clos, network


def brute_force_optimum(net: JobNetwork, flows: np.ndarray) -> int:
    """Smallest max link load over every (spine, core) choice of every cross-leaf flow (tiny steps only)."""
    options: list[list[tuple[int, int | None]]] = []
    ends: list[tuple[int, int, int, int, int]] = []
    for src, dst in flows.tolist():
        for nic in range(net.nics):
            sw_a = int(net.tier1_switch(np.array(src), np.array(nic)))
            sw_b = int(net.tier1_switch(np.array(dst), np.array(nic)))
            if sw_a == sw_b:
                continue
            leaf_a, leaf_b = int(net.server_leaf[src]), int(net.server_leaf[dst])
            pod_a, pod_b = int(net.server_pod[src]), int(net.server_pod[dst])
            spines = range(min(int(net.leaf_uplinks[leaf_a]), int(net.leaf_uplinks[leaf_b])))
            if pod_a == pod_b:
                options.append([(j, None) for j in spines])
            else:
                cores = range(min(int(net.pod_uplinks[pod_a]), int(net.pod_uplinks[pod_b])))
                options.append([(j, c) for j in spines for c in cores])
            plane = nic if net.layout == "rail" else 0
            ends.append((sw_a, sw_b, pod_a, pod_b, plane))
    nic_load = max(np.bincount(flows[:, 0]).max(), np.bincount(flows[:, 1]).max()) if flows.size else 0
    best = 10**9
    for choice in itertools.product(*options):
        loads: dict[tuple[object, ...], int] = {}
        for (spine, core), (sw_a, sw_b, pod_a, pod_b, plane) in zip(choice, ends, strict=True):
            keys: list[tuple[object, ...]] = [("up", sw_a, spine), ("down", sw_b, spine)]
            if core is not None:
                keys += [("core-up", pod_a, plane, spine, core), ("core-down", pod_b, plane, spine, core)]
            for key in keys:
                loads[key] = loads.get(key, 0) + 1
        best = min(best, max(loads.values(), default=0))
    return max(int(nic_load), best, 1)


@st.composite
def tiny_three_tier_steps(draw: st.DrawFn) -> tuple[Topology, np.ndarray]:
    leaves_per_pod = draw(st.integers(1, 3))
    pods = draw(st.integers(2, 3))
    per_leaf = draw(st.integers(1, 2))
    layout: Layout = draw(st.sampled_from(["tor", "rail"]))
    topology = clos(
        [per_leaf] * (leaves_per_pod * pods),
        nics=1,
        layout=layout,
        oversubscription=draw(st.sampled_from([1.0, 2.0])),
        leaves_per_pod=leaves_per_pod,
        spine_oversubscription=draw(st.sampled_from([1.0, 1.5, 2.0, 4.0])),
    )
    servers = leaves_per_pod * pods * per_leaf
    order = np.array(draw(st.permutations(list(range(servers)))))
    flows = ring_flows(order) if draw(st.booleans()) else halving_doubling_steps(order)[0]
    return topology, flows[: draw(st.integers(1, 6))]


@given(tiny_three_tier_steps())
@settings(max_examples=60, deadline=None)
def test_pinned_bound_is_the_brute_force_optimum_and_the_routes_reach_it(case: tuple[Topology, np.ndarray]) -> None:
    topology, flows = case
    net = network(topology)
    plan = pin_routes(net, [flows])
    optimum = brute_force_optimum(net, flows)
    assert plan.bound == optimum
    assert plan.max_load == optimum
    assert lambda_star(net, flows) <= optimum
    assert link_loads(net, flows, "pinned", routes=plan).max() == optimum


@st.composite
def regular_three_tier_jobs(draw: st.DrawFn) -> tuple[Topology, np.ndarray, bool]:
    leaves_per_pod = draw(st.sampled_from([2, 4]))
    pods = draw(st.integers(2, 4))
    per_leaf = draw(st.sampled_from([2, 4]))
    topology = clos(
        [per_leaf] * (leaves_per_pod * pods),
        nics=draw(st.sampled_from([1, 2, 4])),
        layout=draw(st.sampled_from(["tor", "rail"])),
        oversubscription=draw(st.sampled_from([1.0, 2.0, 4.0])),
        leaves_per_pod=leaves_per_pod,
        spine_oversubscription=draw(st.sampled_from([1.0, 2.0, 4.0])),
    )
    order = np.array(draw(st.permutations(list(range(leaves_per_pod * pods * per_leaf)))))
    return topology, order, draw(st.booleans())


@given(regular_three_tier_jobs())
@settings(max_examples=40, deadline=None)
def test_colouring_alone_reaches_lambda_star_on_regular_fabrics_with_oversubscribed_spines(
    case: tuple[Topology, np.ndarray, bool],
) -> None:
    # Equal pods and power-of-two uplink counts, as in the benchmark families. λ* is not always attainable
    # there either (see the brute-force test below), and the colouring is a heuristic for the coupled pod
    # constraint: it reaches λ* or misses it by one flow, and the exact fallback then proves the optimum.
    topology, order, hd = case
    net = network(topology)
    steps = halving_doubling_steps(order) if hd else [ring_flows(order)]
    plan = pin_routes(net, steps, exact_time_limit=0)
    lambdas = [lambda_star(net, s) for s in steps]
    assert plan.bound == max(lambdas)
    assert all(lam <= load <= lam + 1 for lam, load in zip(lambdas, plan.step_loads, strict=True))
    if plan.max_load > plan.bound:
        exact = pin_routes(net, steps, exact_time_limit=30)
        assert exact.step_loads == exact.step_bounds
        assert exact.max_load == exact.bound


def test_colouring_alone_reaches_lambda_star_on_two_pods_of_two_leaves_with_two_to_one_spines() -> None:
    # Found by Hypothesis: a pod's cross-pod flows doubled up on one spine after the Euler split, and no
    # two-spine Kempe chain could move them apart; another pairing order avoids the imbalance.
    net = network(clos([4] * 4, leaves_per_pod=2, spine_oversubscription=2.0))
    order = np.array([0, 4, 14, 3, 1, 5, 6, 8, 7, 9, 12, 11, 13, 2, 10, 15])
    plan = pin_routes(net, [ring_flows(order)], exact_time_limit=0)
    assert lambda_star(net, ring_flows(order)) == 1
    assert plan.max_load == plan.bound == 1
    assert link_loads(net, ring_flows(order), "pinned", routes=plan).max() == 1


def test_lambda_star_is_not_always_attainable_on_a_regular_fabric_with_two_to_one_spines() -> None:
    # Two pods of two leaves, two rail-layout servers per leaf, one NIC: every switch and pod is at λ* = 1,
    # yet the brute-force optimum is 2, so no colouring can promise λ* on regular fabrics.
    topology = clos([2] * 4, layout="rail", leaves_per_pod=2, spine_oversubscription=2.0)
    net = network(topology)
    flows = ring_flows(np.array([3, 1, 4, 2, 6, 5, 7, 0]))
    assert lambda_star(net, flows) == 1
    assert brute_force_optimum(net, flows) == 2
    plan = pin_routes(net, [flows])
    assert plan.max_load == plan.bound == 2


def test_a_parity_obstruction_keeps_the_optimum_above_lambda_star_and_the_bound_says_so() -> None:
    # Two pods of three leaves, 2 uplinks per leaf, spines with 2 core uplinks (1.5:1): every switch and pod
    # sits exactly at λ* = 1, but the coupled choices form an odd cycle, so every pinning has a link with 2.
    net = network(clos([2] * 6, leaves_per_pod=3, spine_oversubscription=1.5))
    leaf_pairs = [(0, 5), (1, 3), (1, 4), (2, 1), (2, 4), (3, 1), (3, 2), (4, 5), (4, 2), (5, 0), (5, 3)]
    used_out: dict[int, int] = {}
    used_in: dict[int, int] = {}
    flows = []
    for a, b in leaf_pairs:
        src, dst = 2 * a + used_out.get(a, 0), 2 * b + used_in.get(b, 0)
        used_out[a] = used_out.get(a, 0) + 1
        used_in[b] = used_in.get(b, 0) + 1
        flows.append((src, dst))
    step = np.array(flows)
    assert net.pod_uplinks.tolist() == [2, 2]
    assert lambda_star(net, step) == 1
    plan = pin_routes(net, [step])
    assert plan.step_bounds == (2,)
    assert plan.max_load == plan.bound == 2
    assert pin_routes(net, [step], exact_time_limit=0).max_load == 2
