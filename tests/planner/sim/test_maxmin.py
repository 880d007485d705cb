"""Max-min fair rates against an LP oracle and the bottleneck characterisation."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from planner import flow_rates, link_loads, max_min_rates, ring_flows
from tests.support.fabrics import clos, network


@st.composite
def flow_networks(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    links = draw(st.integers(min_value=1, max_value=5))
    flows = draw(st.integers(min_value=1, max_value=6))
    capacity = np.array(draw(st.lists(st.sampled_from([0.5, 1.0, 2.0, 3.0]), min_size=links, max_size=links)))
    paths = np.full((flows, 3), -1, dtype=np.int64)
    for f in range(flows):
        used = draw(st.lists(st.integers(0, links - 1), min_size=1, max_size=3, unique=True))
        paths[f, : len(used)] = used
    return paths, capacity


def _incidence(paths: np.ndarray, links: int) -> np.ndarray:
    matrix = np.zeros((links, paths.shape[0]))
    for f, row in enumerate(paths):
        for link in row[row >= 0]:
            matrix[link, f] = 1.0
    return matrix


def _lp_max_min_level(paths: np.ndarray, capacity: np.ndarray) -> float:
    """max t such that every flow gets at least t within link capacities (the smallest max-min rate)."""
    flows = paths.shape[0]
    incidence = _incidence(paths, capacity.size)
    # Variables x_0..x_{F-1}, t; maximise t subject to A x <= c and t - x_f <= 0.
    a_ub = np.vstack(
        [
            np.hstack([incidence, np.zeros((capacity.size, 1))]),
            np.hstack([-np.eye(flows), np.ones((flows, 1))]),
        ]
    )
    b_ub = np.concatenate([capacity, np.zeros(flows)])
    c = np.zeros(flows + 1)
    c[-1] = -1.0
    result = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=[(0, None)] * (flows + 1))
    assert result.success
    return float(result.x[-1])


@given(flow_networks())
@settings(max_examples=60, deadline=None)
def test_progressive_filling_is_feasible_and_every_flow_has_a_bottleneck(
    case: tuple[np.ndarray, np.ndarray],
) -> None:
    paths, capacity = case
    rates = max_min_rates(paths, capacity)
    incidence = _incidence(paths, capacity.size)
    usage = incidence @ rates
    assert np.all(usage <= capacity + 1e-9)
    saturated = usage >= capacity - 1e-9
    for f in range(paths.shape[0]):
        # Max-min fair iff each flow crosses a saturated link on which no flow gets more than it.
        on = np.flatnonzero(incidence[:, f])
        assert any(saturated[link] and rates[incidence[link] > 0].max() <= rates[f] + 1e-9 for link in on)


@given(flow_networks())
@settings(max_examples=60, deadline=None)
def test_smallest_max_min_rate_equals_the_lp_optimum(case: tuple[np.ndarray, np.ndarray]) -> None:
    paths, capacity = case
    assert abs(max_min_rates(paths, capacity).min() - _lp_max_min_level(paths, capacity)) < 1e-7


def test_two_flows_sharing_one_link_get_half_and_a_lone_flow_gets_the_rest() -> None:
    paths = np.array([[0, 1], [0, -1], [1, -1]])
    rates = max_min_rates(paths, np.array([1.0, 1.0]))
    assert rates.tolist() == [0.5, 0.5, 0.5]
    rates = max_min_rates(np.array([[0, -1], [0, 1], [2, -1]]), np.array([1.0, 0.25, 1.0]))
    assert rates.tolist() == [0.75, 0.25, 1.0]


@given(st.permutations(list(range(12))), st.sampled_from([1, 2, 4]), st.integers(0, 50))
@settings(max_examples=30, deadline=None)
def test_slowest_flow_runs_at_one_over_the_largest_link_load(order: list[int], qps: int, seed: int) -> None:
    net = network(clos([4, 4, 4], nics=2, oversubscription=2.0))
    flows = ring_flows(order)
    rates = flow_rates(net, flows, "ecmp", qps=qps, seed=seed)
    loads = link_loads(net, flows, "ecmp", qps=qps, seed=seed)
    assert rates.shape == (12, 2)
    assert abs(rates.min() - 1.0 / loads.max()) < 1e-9
