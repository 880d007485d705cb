"""Switches with known hashes for calibration tests: affine, declared from the family, and not affine at all."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from planner import HashSample, HashSpec, SwitchHash, compile_switch_hash, tier_of_switch_name
from planner._hash_model import key_int
from planner.fabric._gf2 import parity

Hop = Callable[[int, int, int], int]
"""A switch's answer: (src, dst, sport) -> next-hop index (UDP to 4791)."""


@dataclass(frozen=True)
class AffineHash:
    """A random affine hash with low-bit buckets: member = order[B x ^ c]."""

    rows: tuple[int, ...]
    constant: int
    order: tuple[int, ...]

    def __call__(self, src: int, dst: int, sport: int) -> int:
        key = key_int(src, dst, sport)
        value = sum(parity(row & key) << i for i, row in enumerate(self.rows)) ^ self.constant
        return self.order[value]


def random_affine(rng: np.random.Generator, checks: int) -> AffineHash:
    rows = tuple(int.from_bytes(rng.bytes(13), "big") for _ in range(checks))
    order = tuple(int(j) for j in rng.permutation(1 << checks))
    return AffineHash(rows, int(rng.integers(0, 1 << checks)), order)


def declared(spec: HashSpec, choices: int = 4) -> Hop:
    """The answer of a switch that hashes with `spec` among `choices` next hops (its members, if it lists them)."""
    compiled = compile_switch_hash(SwitchHash(spec), "leaf")
    count = len(spec.members) if spec.members is not None else choices

    def hop(src: int, dst: int, sport: int) -> int:
        hops = compiled.evaluate(
            np.array([src], dtype=np.uint64), np.array([dst], dtype=np.uint64), np.array([sport]), count
        )
        return int(hops[0])

    return hop


def multiplicative(members: int) -> Hop:
    """Fibonacci hashing of the key's low 64 bits: (key * 2^64/phi mod 2^64) >> (64 - log2 m); not affine."""
    shift = 64 - (members - 1).bit_length()

    def hop(src: int, dst: int, sport: int) -> int:
        key = key_int(src, dst, sport) & ((1 << 64) - 1)
        return ((key * 0x9E3779B97F4A7C15) & ((1 << 64) - 1)) >> shift

    return hop


def random_tuples(rng: np.random.Generator, count: int, *, bits: int = 32) -> list[tuple[int, int, int]]:
    """Tuples with random addresses in 10.0.0.0/8 (or their low `bits` bits random) and dynamic source ports."""
    mask = (1 << min(bits, 24)) - 1 if bits < 32 else (1 << 32) - 1
    base = 0x0A000000 if bits < 32 else 0
    return [
        (base | int(rng.integers(0, 1 << 32)) & mask, base | int(rng.integers(0, 1 << 32)) & mask, int(p))
        for p in rng.integers(49152, 65536, count)
    ]


def samples(switch: str, hop: Hop, tuples: Sequence[tuple[int, int, int]], *, first_line: int = 1) -> list[HashSample]:
    """The switch's answers for `tuples`, one sample a line (duplicates dropped, as the samples reader does); a
    spine's (`<pod>/spine-<j>`) next hops are cores."""
    prefix = "core-" if tier_of_switch_name(switch) == "spine" else "spine-"
    out: list[HashSample] = []
    seen: set[tuple[int, int, int]] = set()
    for number, (src, dst, sport) in enumerate(tuples, start=first_line):
        if (src, dst, sport) in seen:
            continue
        seen.add((src, dst, sport))
        out.append(HashSample(switch, src, dst, sport, f"{prefix}{hop(src, dst, sport)}", line=number))
    return out
