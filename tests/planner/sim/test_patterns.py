"""Traffic patterns: ring and halving-doubling flows against their definitions."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import halving_doubling_sizes, halving_doubling_steps, ring_flows


def test_ring_sends_from_every_rank_to_the_next_in_rank_order() -> None:
    order = [3, 0, 2, 1]
    assert ring_flows(order).tolist() == [[3, 0], [0, 2], [2, 1], [1, 3]]
    assert ring_flows([5]).shape == (0, 2)


def test_power_of_two_halving_doubling_pairs_rank_r_with_r_xor_two_to_the_k() -> None:
    order = [7, 6, 5, 4, 3, 2, 1, 0]
    steps = halving_doubling_steps(order)
    assert len(steps) == 6
    for k in range(3):
        expected = sorted((order[r], order[r ^ (1 << k)]) for r in range(8))
        assert sorted(map(tuple, steps[k].tolist())) == expected
        assert np.array_equal(steps[k], steps[5 - k])
    assert halving_doubling_sizes(8).tolist() == [0.5, 0.25, 0.125, 0.125, 0.25, 0.5]


def _mpich_reference(n: int) -> list[list[tuple[int, int]]]:
    """Steps of MPICH's non-power-of-two recursive halving, written out rank by rank."""
    p = 1
    while p * 2 <= n:
        p *= 2
    extra = n - p
    fold = [(r, r + 1) for r in range(0, 2 * extra, 2)]

    def real(v: int) -> int:
        return 2 * v + 1 if v < extra else v + extra

    exchange = [[(real(v), real(v ^ (1 << k))) for v in range(p)] for k in range(p.bit_length() - 1)]
    steps = exchange + exchange[::-1]
    if extra:
        steps = [fold, *steps, [(b, a) for a, b in fold]]
    return steps


@given(st.integers(min_value=2, max_value=40))
@settings(max_examples=40, deadline=None)
def test_halving_doubling_matches_the_mpich_definition_for_any_server_count(n: int) -> None:
    order = list(range(n))
    steps = halving_doubling_steps(order)
    reference = _mpich_reference(n)
    assert [sorted(map(tuple, s.tolist())) for s in steps] == [sorted(s) for s in reference]
    assert len(halving_doubling_sizes(n)) == len(steps)


@given(st.integers(min_value=2, max_value=40), st.randoms(use_true_random=False))
@settings(max_examples=40, deadline=None)
def test_halving_doubling_steps_complete_an_allreduce(n: int, random: object) -> None:
    order = list(range(n))
    random.shuffle(order)  # type: ignore[attr-defined]
    knows = np.eye(n, dtype=bool)
    for step in halving_doubling_steps(order):
        before = knows.copy()
        for src, dst in step.tolist():
            knows[dst] |= before[src]
    assert knows.all()


def test_non_power_of_two_sizes_carry_the_whole_vector_in_fold_and_unfold() -> None:
    sizes = halving_doubling_sizes(6)
    assert sizes.tolist() == [1.0, 0.5, 0.25, 0.25, 0.5, 1.0]
    steps = halving_doubling_steps(list(range(6)))
    assert steps[0].tolist() == [[0, 1], [2, 3]]
    assert steps[-1].tolist() == [[1, 0], [3, 2]]
