"""Pinning around other jobs' load: the lowest reachable level over the links a job uses, checked by brute force on
tiny fabrics and as properties on random ones."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import (
    HashModel,
    JobNetwork,
    LearnedHash,
    RoutePlan,
    SwitchHash,
    job_network,
    lambda_star,
    link_loads,
    pin_routes,
    plan_ranks,
    ring_flows,
    steer_source_ports,
)
from planner.sim._network import LINK_TIER_NIC
from tests.support.fabrics import clos
from tests.support.placements import worker_placement


def level(network: JobNetwork, steps: list[np.ndarray], plan: RoutePlan, background: np.ndarray) -> float:
    """The largest background + own load over the switch links the plan's queue pairs use (any step)."""
    switch = network.link_tier != LINK_TIER_NIC
    worst = 0.0
    for pairs in steps:
        own = link_loads(network, pairs, "pinned", qps=plan.qps, routes=plan)
        used = switch & (own > 1e-12)
        worst = max(worst, float((own + background)[used].max(initial=0.0)))
    return worst


def brute_force(network: JobNetwork, pairs: np.ndarray, qps: int, background: np.ndarray) -> float:
    """The best level over every spine choice of every cross-leaf queue pair (2 tiers, tiny inputs only)."""
    units = []
    for src, dst in pairs.tolist():
        for nic in range(network.nics):
            a = int(network.tier1_switch(np.array([src]), np.array([nic]))[0])
            b = int(network.tier1_switch(np.array([dst]), np.array([nic]))[0])
            if a != b:
                choices = int(min(network.leaf_uplinks[a // network.planes], network.leaf_uplinks[b // network.planes]))
                units += [(a, b, choices)] * qps
    best = np.inf
    for pick in itertools.product(*(range(c) for _, _, c in units)):
        load = background.copy()
        used = set()
        for (a, b, _), j in zip(units, pick, strict=True):
            for link in (
                int(network.leaf_link(np.array([a]), np.array([j]), up=True)[0]),
                int(network.leaf_link(np.array([b]), np.array([j]), up=False)[0]),
            ):
                load[link] += 1 / qps
                used.add(link)
        best = min(best, max((load[link] for link in used), default=0.0))
    return float(best)


@st.composite
def tiny_cases(draw: st.DrawFn) -> tuple[JobNetwork, np.ndarray, int, np.ndarray]:
    leaves = draw(st.integers(2, 3))
    uplinks = draw(st.integers(1, 3))
    topology = clos([2] * leaves, leaf_uplinks=uplinks)
    network = job_network(topology, list(topology.paths))
    servers = network.servers
    count = draw(st.integers(1, 3))
    pairs = np.array(
        [draw(st.tuples(st.integers(0, servers - 1), st.integers(0, servers - 1))) for _ in range(count)],
        dtype=np.int64,
    )
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    qps = draw(st.integers(1, 2))
    background = np.zeros(network.num_links)
    switch = np.flatnonzero(network.link_tier != LINK_TIER_NIC)
    halves = draw(st.lists(st.integers(0, 4), min_size=switch.size, max_size=switch.size))
    background[switch] = np.array(halves) / 2
    return network, pairs.reshape(-1, 2), qps, background


@given(tiny_cases())
@settings(max_examples=120, deadline=None)
def test_pinning_around_a_background_reaches_the_brute_force_optimum(
    case: tuple[JobNetwork, np.ndarray, int, np.ndarray],
) -> None:
    network, pairs, qps, background = case
    plan = pin_routes(network, [pairs], qps=qps, background=background)
    assert level(network, [pairs], plan, background) <= brute_force(network, pairs, qps, background) + 1e-9


def test_pinning_around_nothing_reaches_lambda_star_like_pinning_alone() -> None:
    topology = clos([4, 4, 4, 4], nics=4, leaf_uplinks=4)
    network = job_network(topology, list(topology.paths))
    rng = np.random.default_rng(3)
    for _ in range(20):
        pairs = ring_flows(rng.permutation(network.servers))
        for qps in (1, 2, 4):
            shared = pin_routes(network, [pairs], qps=qps, background=np.zeros(network.num_links))
            assert shared.max_load == lambda_star(network, pairs, qps)


def test_queue_pairs_avoid_the_spine_another_job_fills() -> None:
    topology = clos([2, 2], nics=1, leaf_uplinks=2)
    network = job_network(topology, list(topology.paths))
    pairs = np.array([[0, 2], [1, 3]])
    background = np.zeros(network.num_links)
    spine_0 = network.leaf_link(np.array([0]), np.array([0]), up=True)
    background[spine_0] = 1.0  # another job's flow on leaf-0's uplink to spine 0
    plan = pin_routes(network, [pairs], qps=1, background=background)
    # one flow per spine is the best: spine 0 then carries 2 (its background and one of ours), spine 1 one
    assert level(network, [pairs], plan, background) == 2.0
    alone = pin_routes(network, [pairs], qps=1)
    assert sorted(plan.spines[0][:, 0].tolist()) == sorted(alone.spines[0][:, 0].tolist())
    two = pin_routes(network, [pairs], qps=2, background=background)
    # with two queue pairs per flow the job's four go three onto spine 1, one onto spine 0: level 1.5
    assert level(network, [pairs], two, background) == 1.5


def test_every_cross_leaf_queue_pair_gets_a_spine_both_ends_reach() -> None:
    topology = clos([3, 3, 2], nics=2, leaf_uplinks=None, oversubscription=2.0)
    network = job_network(topology, list(topology.paths))
    rng = np.random.default_rng(0)
    background = np.where(network.link_tier != LINK_TIER_NIC, rng.integers(0, 3, network.num_links) / 2, 0.0)
    pairs = ring_flows(rng.permutation(network.servers))
    plan = pin_routes(network, [pairs], qps=2, background=background)
    spines = plan.spines[0]
    for row in range(spines.shape[0]):
        src, dst = pairs[row // 2]
        for nic in range(network.nics):
            crossing = network.server_leaf[src] != network.server_leaf[dst]
            assert (spines[row, nic] >= 0) == crossing
            if crossing:
                uplinks = network.leaf_uplinks
                reach = min(uplinks[network.server_leaf[src]], uplinks[network.server_leaf[dst]])
                assert spines[row, nic] < reach


def test_pinning_around_a_3_tier_background_keeps_cross_pod_flows_on_a_core() -> None:
    topology = clos([2, 2, 2, 2], nics=2, leaf_uplinks=2, leaves_per_pod=2)
    network = job_network(topology, list(topology.paths))
    pairs = ring_flows(np.arange(network.servers))
    background = np.where(network.link_tier != LINK_TIER_NIC, 0.5, 0.0)
    plan = pin_routes(network, [pairs], qps=1, background=background)
    cross_pod = network.server_pod[pairs[:, 0]] != network.server_pod[pairs[:, 1]]
    assert (plan.cores[0][cross_pod] >= 0).all()
    assert (plan.cores[0][~cross_pod] == -1).all()
    assert level(network, [pairs], plan, background) == 1.5


def test_queue_pairs_are_pinned_off_a_spine_no_source_port_reaches() -> None:
    """A learned hash that never saw one of its values (calibration left the switch `partial`) cannot send any
    port to that spine: steering pins the switch's queue pairs again on the spines its ports reach, instead of
    rerouting them one by one onto whatever is least loaded."""
    topology = clos([4, 4], nics=2, leaf_uplinks=4)
    nodes = list(topology.paths)
    order = [nodes[i] for i in (0, 4, 1, 5, 2, 6, 3, 7)]
    placement = worker_placement("gap", order, devices_per_server=2)
    rng = np.random.default_rng(5)
    switches = {}
    for leaf in ("leaf-0", "leaf-1"):
        rows = tuple(int.from_bytes(rng.bytes(13), "big") for _ in range(2))
        table = ("spine-0", "spine-1", "spine-2", None if leaf == "leaf-0" else "spine-3")
        switches[leaf] = SwitchHash(LearnedHash(rows, table, 0, ()), source="learned", samples=100)
    model = HashModel(switches=switches)
    plan = plan_ranks(placement, topology, "halving-doubling", "pinned", rng=0)
    steered = steer_source_ports(placement, topology, plan, model)
    assert steered.mode == "steered", steered.message
    assert steered.off_plan == 0, "every queue pair on a spine its ports reach, as planned"
    assert steered.routes is not None
    network = steered.network
    for step, spines in zip(steered.routes.steps, steered.routes.spines, strict=True):
        rows_, nics = np.nonzero(spines >= 0)
        from_leaf_0 = network.server_leaf[step[rows_, 0]] == 0
        assert not (spines[rows_, nics][from_leaf_0] == 3).any(), "nothing sent to the spine leaf-0 cannot reach"
    assert steered.predicted is not None
    out_of_leaf_0 = max(
        int(np.count_nonzero((network.server_leaf[s[:, 0]] == 0) & (network.server_leaf[s[:, 1]] == 1)))
        for s in steered.routes.steps
    )
    assert out_of_leaf_0 == 4, "halving-doubling's step across the leaves: every server of a leaf sends"
    assert steered.predicted.max_link_load == 3.0  # 4 servers x 2 NICs over the 3 spines leaf-0 reaches
