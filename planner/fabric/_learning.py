"""Learning a switch's hash outright from its samples: every CRC and XOR hash is affine over GF(2).

With 2^k members and low-bit buckets the member is an injective function of k parity checks of the key. Let V be
the span of x_i ^ x_0 over the samples' keys and D the span of x_i ^ x_j over samples with the same next hop (each
sample against the first of its next hop suffices). The parity checks that can pick the member lie in R = D-perp
restricted to V, of dimension r = dim V - dim D; z = R(x) indexes a table of 2^r next hops. When 2^r is the fewest
values that separate the next hops seen (r = ceil(log2 hops)), R is exactly the switch's checks on V, so the model
is exact for every key in x_0 + V (`LearnedHash.checks` say which keys are). A larger r means too few samples
(about r - that more, plus a margin). Two samples with the same z and different next hops prove that no affine hash
with injective low-bit buckets explains them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from planner._hash_model import KEY_BITS, LearnedHash
from planner.fabric._calibration_result import HoldoutCheck
from planner.fabric._gf2 import XorBasis, parity
from planner.fabric._switch_samples import MARGIN, SwitchSamples

TRUST_BITS = 20
"""A learned hash is taken once the samples after it settled would all have been predicted by chance with
probability at most 2^-20 (`predictions_to_trust`)."""
HOLDOUT_FRACTION = 0.2
"""Share of a switch's samples (the last ones in file order) a learned model is also checked on, learned from the
rest alone."""


@dataclass(frozen=True)
class Learned:
    """The parity checks learned from one switch's samples, the next hop of each value seen, how settled."""

    span_bits: int
    rows: tuple[int, ...]
    checks: tuple[int, ...]
    origin: int
    values: Mapping[int, int]
    """Value of the rows (z) -> next-hop index, for every value a sample showed."""
    target: int
    """Fewest rows that separate the next hops seen: ceil(log2(distinct next hops))."""
    contradiction: tuple[int, int] | None
    """Lines of two samples with the same z and different next hops."""
    settled_after: int | None
    """The first this many samples already gave the same spans and row count (and so the same rows)."""
    predictions: tuple[int, ...] = ()
    """Positions (from 1) of the samples after that whose value of the rows an earlier sample had shown: each a
    prediction the model had to get right."""
    last_new_value: int = 0
    """Position of the sample that showed the last value of the rows first."""

    @property
    def settled(self) -> bool:
        return self.contradiction is None and len(self.rows) == self.target

    def z(self, key: int) -> int:
        value = 0
        for i, row in enumerate(self.rows):
            value |= parity(row & key) << i
        return value

    def inside(self, key: int) -> bool:
        moved = key ^ self.origin
        return not any(parity(check & moved) for check in self.checks)


def learn(data: SwitchSamples) -> Learned:
    origin = data.keys[0]
    span = XorBasis()
    same_hop = XorBasis()
    first_key: dict[int, int] = {}
    history: list[tuple[int, int, int]] = []
    for key, hop in zip(data.keys, data.hops.tolist(), strict=True):
        span.insert(key ^ origin)
        first = first_key.setdefault(hop, key)
        if first != key:
            same_hop.insert(key ^ first)
        history.append((len(span), len(same_hop), max(len(first_key) - 1, 0).bit_length()))
    pivots = span.pivot_mask
    # Coordinates on V are the bits at V's pivots, so functionals supported there are the functionals on V, each
    # once (none of them vanishes on V); those that vanish on D are the rows.
    projected = XorBasis(vector & pivots for vector in same_hop.vectors())
    rows = tuple(projected.annihilator(pivots))
    checks = tuple(span.annihilator((1 << KEY_BITS) - 1))
    target = max(len(first_key) - 1, 0).bit_length()
    learned = Learned(len(span), rows, checks, origin, {}, target, None, None)
    final = history[-1]
    settled_after = next(n + 1 for n, state in enumerate(history) if state == final)
    values: dict[int, int] = {}
    line_of: dict[int, int] = {}
    contradiction = None
    predictions: list[int] = []
    last_new_value = 0
    for n, (key, hop, line) in enumerate(zip(data.keys, data.hops.tolist(), data.lines, strict=True), start=1):
        z = learned.z(key)
        seen = values.setdefault(z, hop)
        if z in line_of:
            if n > settled_after:  # a value seen before the spans settled: the model predicted this sample
                predictions.append(n)
        else:
            line_of[z] = line
            last_new_value = n
        if seen != hop and contradiction is None:
            contradiction = (line_of[z], line)
    return replace(
        learned,
        values=MappingProxyType(values),
        contradiction=contradiction,
        settled_after=settled_after,
        predictions=tuple(predictions),
        last_new_value=last_new_value,
    )


def learned_hash(learned: Learned, data: SwitchSamples) -> LearnedHash:
    table = tuple(
        data.hop_name(learned.values[z]) if z in learned.values else None for z in range(1 << len(learned.rows))
    )
    return LearnedHash(rows=learned.rows, table=table, origin=learned.origin, checks=learned.checks)


def holdout_check(data: SwitchSamples) -> HoldoutCheck | None:
    tested = round(data.count * HOLDOUT_FRACTION)
    if tested < 1 or data.count - tested < 2:
        return None
    trained = data.count - tested
    smaller = learn(data.head(trained))
    correct = unknown = wrong = 0
    if smaller.contradiction is not None:
        return HoldoutCheck(trained, tested, 0, tested, 0)
    for key, hop in zip(data.keys[trained:], data.hops[trained:].tolist(), strict=True):
        predicted = smaller.values.get(smaller.z(key)) if smaller.inside(key) else None
        if predicted is None:
            unknown += 1
        elif predicted == hop:
            correct += 1
        else:
            wrong += 1
    return HoldoutCheck(trained, tested, correct, unknown, wrong)


def predictions_to_trust(next_hops: int) -> int:
    """Samples a settled learned hash must predict before it is taken: until a hash that is not affine would
    pass them all by chance about once in a million (each one with probability 1/m among m next hops)."""
    return math.ceil(TRUST_BITS / math.log2(max(next_hops, 2)))


def samples_to_learn(span_bits: int, next_hops: int) -> int:
    """Samples to ask a switch about so that learning its hash finishes with high probability: until it settles,
    the span's dimension plus one per next hop beyond the parity checks that pick it plus a margin, or enough to
    see every next hop (m (ln m + 5) for m of them: 99.3 %), whichever is more; then the predictions that make it
    trusted (`predictions_to_trust`)."""
    checks = max(next_hops - 1, 0).bit_length()
    algebra = span_bits + next_hops - checks + MARGIN
    coupons = math.ceil(next_hops * (math.log(next_hops) + 5)) if next_hops > 1 else 1
    return max(algebra, coupons) + predictions_to_trust(next_hops)


__all__ = [
    "HOLDOUT_FRACTION",
    "TRUST_BITS",
    "Learned",
    "holdout_check",
    "learn",
    "learned_hash",
    "predictions_to_trust",
    "samples_to_learn",
]
