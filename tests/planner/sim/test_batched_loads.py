"""Batched max link loads over many ECMP seeds equal the per-seed link loads."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import (
    InputError,
    Layout,
    Topology,
    ecmp_max_loads,
    halving_doubling_steps,
    link_loads,
    max_link_loads,
    pin_routes,
    ring_flows,
)
from tests.support.fabrics import clos, network


@st.composite
def fabrics_and_orders(draw: st.DrawFn) -> tuple[Topology, np.ndarray]:
    leaves = draw(st.integers(2, 6))
    layout: Layout = draw(st.sampled_from(["tor", "rail"]))
    pods = draw(st.sampled_from([None, 1, 2]))
    topology = clos(
        [draw(st.integers(1, 3))] * leaves,
        nics=draw(st.sampled_from([1, 2, 4])),
        layout=layout,
        oversubscription=draw(st.sampled_from([1.0, 2.0])),
        leaves_per_pod=pods,
        spine_oversubscription=draw(st.sampled_from([1.0, 2.0])),
    )
    order = np.array(draw(st.permutations(list(range(len(topology.paths))))))
    return topology, order


@given(fabrics_and_orders(), st.sampled_from([1, 4, 8]), st.lists(st.integers(0, 2**40), min_size=1, max_size=5))
@settings(max_examples=40, deadline=None)
def test_ecmp_max_loads_of_all_seeds_equal_each_seeds_link_loads(
    case: tuple[Topology, np.ndarray], qps: int, seeds: list[int]
) -> None:
    topology, order = case
    net = network(topology)
    for flows in [ring_flows(order), *halving_doubling_steps(order)[:1]]:
        batched = ecmp_max_loads(net, flows, qps=qps, seeds=seeds)
        expected = [link_loads(net, flows, "ecmp", qps=qps, seed=s).max() for s in seeds]
        assert batched.shape == (len(seeds),)
        assert np.allclose(batched, expected)


def test_max_link_loads_repeat_the_deterministic_value_for_slice_and_pinned_routing() -> None:
    net = network(clos([2, 2, 2]))
    flows = ring_flows([0, 2, 4, 3, 1, 5])
    assert max_link_loads(net, flows, "slice", seeds=[1, 2, 3]).tolist() == [2.0, 2.0, 2.0]
    routes = pin_routes(net, [flows])
    assert max_link_loads(net, flows, "pinned", seeds=[7, 8], routes=routes).tolist() == [1.0, 1.0]


def test_max_link_loads_need_at_least_one_seed() -> None:
    net = network(clos([1, 1]))
    with pytest.raises(InputError, match="seeds"):
        max_link_loads(net, ring_flows([0, 1]), "ecmp", seeds=[])
