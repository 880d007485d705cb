"""One switch's samples as arrays, for calibration: grouped by switch, in file order; switch names in natural order."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from planner._hash_model import FabricSwitch, HashSample, SwitchTier, next_hop_index
from planner.fabric._hashing import next_hop_name

MARGIN = 12
"""Samples asked beyond the count learning needs at least: each further sample with an already-seen next hop
adds a new independent difference with probability at least 1/2, so 12 more leave the spans unsettled about once
in 4,000 (measured on probes of a job's NICs: 0 of 1,026 switches, against 2 with 8)."""

_DIGITS = re.compile(r"([0-9]+)")


def name_order(name: str) -> tuple[tuple[int, str], ...]:
    """Sort key that puts `leaf-9` before `leaf-10` (digit runs compare by value, without converting them)."""
    return tuple(
        (0, part.lstrip("0").rjust(64, "0")) if _DIGITS.fullmatch(part) else (1, part)
        for part in _DIGITS.split(name)
        if part
    )


@dataclass(frozen=True, eq=False)
class SwitchSamples:
    """One switch's distinct samples as arrays (file order)."""

    name: str
    tier: SwitchTier
    keys: tuple[int, ...]
    hops: np.ndarray
    """Next-hop index of each sample."""
    lines: tuple[int, ...]
    src: np.ndarray
    dst: np.ndarray
    sport: np.ndarray
    dport: np.ndarray
    proto: np.ndarray
    members: int | None
    """Equal-cost next hops from the topology, when known."""

    @property
    def count(self) -> int:
        return len(self.keys)

    @property
    def distinct(self) -> int:
        return int(np.unique(self.hops).size)

    def head(self, count: int) -> SwitchSamples:
        """The first `count` samples."""
        cut = slice(0, count)
        return replace(
            self,
            keys=self.keys[cut],
            hops=self.hops[cut],
            lines=self.lines[cut],
            src=self.src[cut],
            dst=self.dst[cut],
            sport=self.sport[cut],
            dport=self.dport[cut],
            proto=self.proto[cut],
        )

    def hop_name(self, index: int) -> str:
        return next_hop_name(index, self.tier)


def samples_by_switch(
    samples: Sequence[HashSample], switches: Mapping[str, FabricSwitch] | None
) -> dict[str, SwitchSamples]:
    by_switch: dict[str, list[HashSample]] = {}
    for sample in samples:
        by_switch.setdefault(sample.switch, []).append(sample)
    grouped: dict[str, SwitchSamples] = {}
    for name, rows in by_switch.items():
        tier = rows[0].tier
        known = switches.get(name) if switches is not None else None
        grouped[name] = SwitchSamples(
            name=name,
            tier=tier,
            keys=tuple(row.key for row in rows),
            hops=np.array([next_hop_index(row.next_hop, tier) for row in rows], dtype=np.int64),
            lines=tuple(row.line for row in rows),
            src=np.array([row.src for row in rows], dtype=np.uint64),
            dst=np.array([row.dst for row in rows], dtype=np.uint64),
            sport=np.array([row.sport for row in rows], dtype=np.intp),
            dport=np.array([row.dport for row in rows], dtype=np.uint64),
            proto=np.array([row.proto for row in rows], dtype=np.uint64),
            members=known.next_hops if known is not None else None,
        )
    return grouped


__all__ = ["MARGIN", "SwitchSamples", "name_order", "samples_by_switch"]
