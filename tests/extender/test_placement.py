"""Gang placement: the plan against a brute-force optimum, and the cases Volcano's greedy allocation gets wrong."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.extender.placement import LeafRoom, leaves_lower_bound, plan_gang


def brute_force(rooms: list[LeafRoom], need: int) -> tuple[int, int, int] | None:
    """(leaves, spines, slack) of the best placement, by trying every set of leaves."""
    hosting = [r for r in rooms if r.hosted]
    others = [r for r in rooms if not r.hosted and r.free > 0]
    best: tuple[int, int, int] | None = None
    hosting_free = sum(r.free for r in hosting)
    for size in range(len(others) + 1):
        for chosen in itertools.combinations(others, size):
            free = hosting_free + sum(r.free for r in chosen)
            if free < need:
                continue
            spanned = hosting + list(chosen)
            spines = {r.spine for r in spanned} - {None}
            # Slack counts free nodes left in the leaves the plan takes from; hosting leaves are used first.
            new_free = sum(r.free for r in chosen)
            slack = new_free - max(0, need - hosting_free) if chosen else 0
            key = (len(spanned), len(spines), slack)
            if best is None or key < best:
                best = key
    return best


def plan_key(rooms: list[LeafRoom], need: int) -> tuple[int, int, int] | None:
    plan = plan_gang(rooms, need)
    if plan is None:
        return None
    hosting = {r.leaf for r in rooms if r.hosted}
    new_slack = sum(plan.free[leaf] - n for leaf, n in plan.take.items() if leaf not in hosting)
    return len(plan.leaves), len(plan.spines), new_slack


def test_the_measured_cluster_packs_a_six_pod_job_on_two_leaves_without_leftovers() -> None:
    # Free whole nodes per leaf on the cluster where the extender spread 6-pod jobs over 3-4 leaves.
    rooms = [LeafRoom(f"tor-{i}", None, free) for i, free in enumerate([2, 3, 2, 4, 1, 4])]
    plan = plan_gang(rooms, 6)
    assert plan is not None
    assert len(plan.leaves) == 2 == plan.leaves_bound
    assert plan.slack == 0
    assert sum(plan.take.values()) == 6


def test_a_job_that_does_not_fit_gets_no_plan() -> None:
    rooms = [LeafRoom("a", None, 2), LeafRoom("b", None, 3)]
    assert plan_gang(rooms, 6) is None
    assert leaves_lower_bound([2, 3], 6) is None


def test_free_nodes_under_hosting_leaves_are_used_before_a_new_leaf() -> None:
    rooms = [LeafRoom("a", None, 2, hosted=4), LeafRoom("b", None, 8), LeafRoom("c", None, 1)]
    plan = plan_gang(rooms, 2)
    assert plan is not None
    assert plan.take == {"a": 2}
    assert plan.leaves == ("a",)


def test_a_replacement_pod_returns_to_the_leaf_of_its_job() -> None:
    rooms = [LeafRoom("a", None, 1, hosted=5), LeafRoom("b", None, 8)]
    plan = plan_gang(rooms, 1)
    assert plan is not None
    assert plan.take == {"a": 1}


def test_three_tier_prefers_leaves_under_one_spine_over_fewer_free_nodes_left() -> None:
    rooms = [
        LeafRoom("a", "s1", 4),
        LeafRoom("b", "s2", 2),
        LeafRoom("c", "s2", 4),
    ]
    plan = plan_gang(rooms, 6)
    assert plan is not None
    assert plan.spines == ("s2",)
    assert set(plan.take) == {"b", "c"}


def test_full_leaves_are_the_ones_the_plan_empties() -> None:
    rooms = [LeafRoom("a", None, 4), LeafRoom("b", None, 3)]
    plan = plan_gang(rooms, 5)
    assert plan is not None
    assert plan.full_leaves == frozenset({"a"})
    assert plan.take == {"a": 4, "b": 1}


def test_large_jobs_fall_back_to_greedy_best_fit_and_still_meet_the_leaf_bound() -> None:
    rooms = [LeafRoom(f"l{i:04d}", f"s{i // 16}", 1 + (i * 7) % 8) for i in range(1200)]
    plan = plan_gang(rooms, 2000)
    assert plan is not None
    assert len(plan.leaves) == plan.leaves_bound == leaves_lower_bound([r.free for r in rooms], 2000)
    assert sum(plan.take.values()) == 2000


rooms_strategy = st.lists(
    st.tuples(st.integers(0, 6), st.integers(0, 3), st.integers(0, 2)), min_size=1, max_size=8
).map(
    lambda items: [
        LeafRoom(f"leaf-{i}", f"spine-{spine}", free, hosted=hosted if hosted < 2 else 0)
        for i, (free, spine, hosted) in enumerate(items)
    ]
)


@settings(max_examples=300, deadline=None)
@given(rooms=rooms_strategy, need=st.integers(1, 20))
def test_plan_matches_the_brute_force_optimum_in_leaves_then_spines_then_slack(
    rooms: list[LeafRoom], need: int
) -> None:
    assert plan_key(rooms, need) == brute_force(rooms, need)


@settings(max_examples=200, deadline=None)
@given(rooms=rooms_strategy, need=st.integers(1, 20))
def test_plan_takes_exactly_the_tasks_it_needs_from_free_nodes(rooms: list[LeafRoom], need: int) -> None:
    plan = plan_gang(rooms, need)
    if plan is None:
        return
    free = {r.leaf: r.free for r in rooms}
    assert sum(plan.take.values()) == need
    assert all(0 < count <= free[leaf] for leaf, count in plan.take.items())
    # At most one leaf is taken partly: the others are emptied.
    hosting = {r.leaf for r in rooms if r.hosted}
    partial = [leaf for leaf, count in plan.take.items() if count < free[leaf] and leaf not in hosting]
    assert len(partial) <= 1
