"""The network model: uplink counts, slots, pods and the link-id layout."""

from __future__ import annotations

import numpy as np
import pytest

from planner import TopologyError, job_network
from planner.sim._network import LINK_TIER_LEAF, LINK_TIER_NIC, LINK_TIER_SPINE
from tests.support.fabrics import clos, network


def test_tor_uplinks_count_every_nic_of_every_server_on_the_leaf_in_the_whole_topology() -> None:
    topology = clos([8, 8, 8], nics=8, oversubscription=2.0)
    net = job_network(topology, ["n0-0", "n1-3"])
    assert net.leaf_uplinks.tolist() == [32, 32]
    assert net.leaf_names == ("leaf-0", "leaf-1")


def test_rail_uplinks_count_servers_of_the_group_only() -> None:
    net = network(clos([8, 6], nics=8, layout="rail", oversubscription=4.0))
    assert net.leaf_uplinks.tolist() == [2, 2]
    assert net.planes == 8


def test_explicit_leaf_uplinks_override_oversubscription() -> None:
    net = network(clos([4, 4], nics=2, oversubscription=4.0, leaf_uplinks=3))
    assert net.leaf_uplinks.tolist() == [3, 3]


def test_spine_uplinks_follow_leaves_per_pod_and_spine_oversubscription() -> None:
    topology = clos([1] * 8, leaves_per_pod=4, spine_oversubscription=2.0)
    net = network(topology)
    assert net.switch_tiers == 3
    assert net.pod_uplinks.tolist() == [2, 2]
    assert net.leaf_position.tolist() == [0, 1, 2, 3, 0, 1, 2, 3]


def test_slots_default_to_name_order_on_the_leaf_and_honour_explicit_slice_ids() -> None:
    topology = clos([3], slots={"n0-0": 7})
    net = job_network(topology, ["n0-2", "n0-0", "n0-1"])
    assert net.server_slot.tolist() == [2, 7, 1]


def test_missing_node_is_a_topology_error_naming_the_node() -> None:
    with pytest.raises(TopologyError, match="'ghost'"):
        job_network(clos([2]), ["n0-0", "ghost"])


def test_four_tier_paths_are_rejected_with_the_supported_shapes() -> None:
    topology = clos([1])
    deep = type(topology)(paths={"n0-0": ("a", "b", "c")}, fabric=topology.fabric)
    with pytest.raises(TopologyError, match="3 domain tiers"):
        job_network(deep, ["n0-0"])


def test_every_link_id_is_distinct_and_inside_the_layout() -> None:
    net = network(clos([2, 2, 2, 2], nics=2, layout="rail", leaves_per_pod=2))
    servers, nics = np.meshgrid(np.arange(net.servers), np.arange(net.nics), indexing="ij")
    ids = [net.nic_link(servers.ravel(), nics.ravel(), up=up) for up in (True, False)]
    switches, spines = np.meshgrid(
        np.arange(len(net.leaf_names) * net.planes), np.arange(net.max_uplinks), indexing="ij"
    )
    ids += [net.leaf_link(switches.ravel(), spines.ravel(), up=up) for up in (True, False)]
    grid = np.meshgrid(
        np.arange(len(net.pod_names)),
        np.arange(net.planes),
        np.arange(net.max_uplinks),
        np.arange(net.max_pod_uplinks),
        indexing="ij",
    )
    ids += [net.spine_link(*(g.ravel() for g in grid), up=up) for up in (True, False)]
    every = np.concatenate(ids)
    assert every.size == net.num_links
    assert np.array_equal(np.sort(every), np.arange(net.num_links))
    tiers = net.link_tier
    assert (tiers[ids[0]] == LINK_TIER_NIC).all()
    assert (tiers[ids[2]] == LINK_TIER_LEAF).all()
    assert (tiers[ids[4]] == LINK_TIER_SPINE).all()
