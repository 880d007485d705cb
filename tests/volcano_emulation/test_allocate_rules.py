"""The allocate action's rules (`webhook.volcano_emulation.allocate_rules`): the feasible-node cut-off, the node scan,
candidate lists, prioritize calls, the predicate error cache and the best node."""

from __future__ import annotations

import random

import pytest

from webhook import volcano_emulation as volcano


@pytest.mark.parametrize(
    ("n_nodes", "v17", "v19"),
    [(50, 50, 50), (100, 100, 100), (1000, 1000, 420), (5000, 5000, 500), (10_000, 10_000, 500), (200, 200, 100)],
)
def test_feasible_node_cut_off_follows_calculate_num_of_feasible_nodes_to_find(
    n_nodes: int, v17: int, v19: int
) -> None:
    assert volcano.num_feasible_nodes_to_find(n_nodes, "1.7") == v17
    assert volcano.num_feasible_nodes_to_find(n_nodes, "1.8") == v17
    assert volcano.num_feasible_nodes_to_find(n_nodes, "1.9") == v19
    assert volcano.num_feasible_nodes_to_find(n_nodes, "1.16") == v19


def test_a_predicate_pass_starts_at_the_rotating_index_and_stops_at_the_cut_off() -> None:
    feasible = [True, False, True, True, False, True]
    assert volcano.feasible_scan(feasible, 4, 2) == ([5, 0], 1)
    assert volcano.feasible_scan(feasible, 1, 10) == ([2, 3, 5, 0], 1)
    assert volcano.feasible_scan([], 0, 3) == ([], 0)


def test_allocate_helpers_describe_candidate_lists_prioritize_calls_and_the_error_cache() -> None:
    assert volcano.candidate_lists("1.7") == ("idle_or_future_idle",)
    assert volcano.candidate_lists("1.8") == ("idle", "future_idle")
    assert len(volcano.candidate_lists("1.14")) == 4
    assert not volcano.prioritize_called(1)
    assert volcano.prioritize_called(2)
    assert volcano.predicate_error_cache_key("1.9", "ns/pg", "") == "ns/pg/"
    assert volcano.predicate_error_cache_key("1.10", "ns/pg", "") is None
    assert volcano.predicate_error_cache_key("1.10", "ns/pg", "worker") == "ns/pg/worker"
    assert volcano.select_best_node({}, random.Random(0).choice) is None
    picks = {volcano.select_best_node({"a": 5.0, "b": 5.0, "c": 1.0}, random.Random(s).choice) for s in range(20)}
    assert picks == {"a", "b"}
    assert all(fact.source for fact in volcano.ALLOCATE_FACTS)
