"""The fabric load ledger: jobs' loads add up per link and leave without a trace, versions tell a plan its links
moved, the bound is λ* over every job's flows, and a job's traffic is its routes' (or ECMP's expected) loads."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import FabricLedger, fabric_links, job_network, job_traffic, link_loads, pin_routes, ring_flows
from planner.sim._ledger import JobTraffic
from planner.sim._network import LINK_TIER_LEAF
from tests.support.fabrics import clos

TOPOLOGY = clos([4, 4, 4, 4], nics=2, leaf_uplinks=4)
LINKS = fabric_links(TOPOLOGY)
NODES = list(TOPOLOGY.paths)


def ring_job(key: str, nodes: list[str], *, qps: int = 1, pinned: bool = True) -> JobTraffic:
    network = job_network(TOPOLOGY, nodes)
    steps = [ring_flows(np.arange(len(nodes)))]
    routes = pin_routes(network, steps, qps=qps) if pinned else None
    return job_traffic(LINKS, network, steps, key=key, routes=routes, delivery="planned" if pinned else "ecmp", qps=qps)


@given(st.lists(st.sampled_from(range(6)), min_size=1, max_size=12))
@settings(max_examples=40, deadline=None)
def test_jobs_put_and_removed_in_any_order_leave_an_empty_fabric(operations: list[int]) -> None:
    ledger = FabricLedger(LINKS)
    jobs = [ring_job(f"j{k}", NODES[k * 2 : k * 2 + 3 + k % 2], qps=1 + k % 3, pinned=k % 2 == 0) for k in range(6)]
    held: set[str] = set()
    for k in operations:
        if jobs[k].key in held:
            assert ledger.remove(jobs[k].key)
            held.discard(jobs[k].key)
        else:
            ledger.put(jobs[k])
            held.add(jobs[k].key)
        expected = np.zeros(LINKS.num_links)
        for job in jobs:
            if job.key in held:
                np.add.at(expected, job.links, job.loads)
        assert np.allclose(ledger.loads, expected)
    for key in list(held):
        ledger.remove(key)
    assert not ledger.loads.any(), "no rounding dust left behind"


def test_a_plan_can_tell_that_the_links_it_was_made_around_moved() -> None:
    ledger = FabricLedger(LINKS)
    ledger.put(ring_job("a", [NODES[0], NODES[4], NODES[8]]))
    seen = ledger.version
    network = job_network(TOPOLOGY, [NODES[1], NODES[5]])
    mine = ledger.job_links(network)
    assert not ledger.moved_since(seen, mine)
    ledger.put(ring_job("far", [NODES[10], NODES[14]]))  # leaves 2 and 3: not the planned job's
    assert not ledger.moved_since(seen, mine)
    ledger.put(ring_job("near", [NODES[2], NODES[6]]))  # leaves 0 and 1, as the planned job's
    assert ledger.moved_since(seen, mine)
    assert ledger.remove("a")
    assert not ledger.remove("a")


def test_the_bound_is_lambda_star_over_every_jobs_flows_together() -> None:
    ledger = FabricLedger(LINKS)
    # each job's ring crosses leaf 0 -> 1 -> 0 once each way: 2 flows (NICs) out of each leaf per job
    for k in range(3):
        ledger.put(ring_job(f"j{k}", [NODES[k], NODES[4 + k]]))
    assert ledger.bound() == 2.0  # 6 flows over 4 uplinks
    ledger.remove("j2")
    assert ledger.bound() == 1.0
    ledger.put(ring_job("q4", [NODES[3], NODES[7]], qps=4))
    # 6 flows out of leaf 0 over 4 uplinks: 1.5, which queue pairs of a quarter flow can reach
    assert ledger.bound() == 1.5
    assert ledger.bound([ledger.jobs["q4"]]) == 1.0, "never below one flow per NIC"


def test_an_unsteered_jobs_expected_load_spreads_each_flow_over_the_spines_both_ends_reach() -> None:
    traffic = ring_job("ecmp", [NODES[0], NODES[4], NODES[8]], pinned=False)
    network = LINKS.network
    ids = traffic.links
    assert traffic.delivery == "ecmp"
    tier1 = network.link_tier[ids] == LINK_TIER_LEAF
    # 3 cross-leaf ring edges x 2 NICs, each 1 flow in total up and 1 down, over 4 uplinks
    assert traffic.loads[tier1].sum() == pytest.approx(3 * 2 * 2)
    assert np.allclose(traffic.loads, 0.5)  # 2 flows of a leaf (its NICs) spread over 4 uplinks


def test_a_pinned_jobs_traffic_is_its_routes_loads_on_the_fabric_ids() -> None:
    nodes = [NODES[0], NODES[5], NODES[10], NODES[15], NODES[1]]
    network = job_network(TOPOLOGY, nodes)
    pairs = ring_flows(np.arange(5))
    routes = pin_routes(network, [pairs], qps=2)
    traffic = job_traffic(LINKS, network, [pairs], key="p", routes=routes, delivery="planned", qps=2)
    own = link_loads(network, pairs, "pinned", qps=2, routes=routes)
    local = LINKS.local_ids(network)
    switch = local >= 0
    expected = np.zeros(LINKS.num_links)
    np.add.at(expected, local[switch], own[switch])
    got = np.zeros(LINKS.num_links)
    got[traffic.links] = traffic.loads
    assert np.allclose(got, expected)
    for link in traffic.links[:5].tolist():
        name = LINKS.name(link)
        assert name.switch in network.leaf_names
        assert name.tier == "leaf"


def test_a_background_lands_on_the_same_links_of_any_jobs_network() -> None:
    ledger = FabricLedger(LINKS)
    ledger.put(ring_job("a", [NODES[0], NODES[4], NODES[8], NODES[12]]))
    nodes = [NODES[13], NODES[1], NODES[9]]  # leaves 3, 0, 2: another numbering of the switches
    network = job_network(TOPOLOGY, nodes)
    background = ledger.background(nodes).on(network)
    local = LINKS.local_ids(network)
    switch = local >= 0
    assert np.allclose(background[switch], ledger.loads[local[switch]])
    assert not background[~switch].any()
    assert not ledger.background(nodes, exclude="a").on(network).any()
