"""The RankTableCompleted message reports the gain for the collective that was planned, never "nan"."""

from __future__ import annotations

import pytest

from planner import Pattern, generate_topology, plan_ranks
from tests.support.placements import worker_placement
from webhook.controller.completed_table import _completed_message


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("ring", ["ring bus bandwidth"]),
        ("halving-doubling", ["halving-doubling bus bandwidth"]),
    ],
)
def test_completed_message_names_the_planned_collective_and_no_nan(pattern: Pattern, expected: list[str]) -> None:
    topology = generate_topology(leaves=4, servers_per_leaf=4)
    names = sorted(topology.paths)
    nodes = [names[i] for i in (0, 5, 10, 15, 3, 6, 9, 12)]  # scattered over all four leaves
    placement = worker_placement("job", nodes)
    result = plan_ranks(placement, topology, pattern, "ecmp", rng=0, time_limit=1.0)
    message = _completed_message(placement, result, 12.0, True)
    assert "nan" not in message
    for text in expected:
        assert text in message
    assert message.startswith("8 servers, 64 devices; ring edges crossing leaves ")
    assert f"max link load {result.before.max_link_load:.2f} -> {result.after.max_link_load:.2f} flows" in message
    assert message.endswith(f"(ecmp, mean over ECMP hash seeds 0-{result.after.seeds - 1}); planning 12 ms")


def test_completed_message_without_a_plan_says_why() -> None:
    placement = worker_placement("job", ["a", "b", "c"])
    message = _completed_message(placement, None, 3.0, False)
    assert message == "3 servers, 24 devices; ranks in pod-index order (route planning not requested); 3 ms"
