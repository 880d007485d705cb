"""GF(2) bases on integers against brute force: ranks, membership and annihilators of small random sets."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from planner.fabric._gf2 import XorBasis, parity, set_bits

vectors = st.lists(st.integers(0, 255), max_size=10)


def brute_span(values: list[int]) -> set[int]:
    span = {0}
    for value in values:
        span |= {v ^ value for v in span}
    return span


@given(vectors)
def test_the_rank_is_the_log_of_the_brute_force_span(values: list[int]) -> None:
    basis = XorBasis(values)
    assert 1 << len(basis) == len(brute_span(values))


@given(vectors, st.integers(0, 255))
def test_a_vector_reduces_to_zero_exactly_when_the_span_holds_it(values: list[int], probe: int) -> None:
    basis = XorBasis(values)
    assert (probe in basis) == (probe in brute_span(values))
    assert (basis.reduce(probe) == 0) == (probe in basis)


@given(vectors)
def test_pivots_are_set_in_their_vector_only(values: list[int]) -> None:
    basis = XorBasis(values)
    vectors_ = basis.vectors()
    for pivot in set_bits(basis.pivot_mask):
        assert sum(v >> pivot & 1 for v in vectors_) == 1
    assert all(v.bit_length() - 1 in set(set_bits(basis.pivot_mask)) for v in vectors_)


@given(vectors)
def test_the_annihilator_is_every_functional_vanishing_on_the_span(values: list[int]) -> None:
    basis = XorBasis(values)
    functionals = basis.annihilator(255)
    span = brute_span(values)
    vanishing = {f for f in range(256) if all(parity(f & v) == 0 for v in span)}
    assert brute_span(functionals) == vanishing
    assert len(XorBasis(functionals)) == len(functionals) == 8 - len(basis)


def test_set_bits_lists_positions_lowest_first() -> None:
    assert list(set_bits(0b1010_0001)) == [0, 5, 7]
    assert list(set_bits(0)) == []
    assert [parity(v) for v in range(4)] == [0, 1, 1, 0]
    assert not XorBasis().insert(0)
    assert list(itertools.islice(set_bits(1 << 103), 1)) == [103]
