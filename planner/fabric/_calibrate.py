"""Calibration: a hash model of the fabric's switches from what they answered (samples).

Per switch, with its samples (5-tuple -> next hop):

(a) **Fit** a declared function (the switch's or its tier's in `declared`). For a key of fixed length every
    init or seed difference XORs a constant into the output, so the unknowns are that constant and the member
    order. With low-bit buckets they are one unknown: a table bucket -> next hop. With modulo buckets the constant
    is searched over the output window (every candidate at once, in numpy chunks, dropping candidates sample by
    sample), up to 24 bits; a declared `members` list fixes the order, else it is learned with the constant.
(b) **Learn** the hash outright when nothing is declared. Every CRC and XOR hash is affine over GF(2); with 2^k
    members and low-bit buckets the member is an injective function of k parity checks of the key. Let V be the
    span of x_i ^ x_0 over the samples' keys and D the span of x_i ^ x_j over samples with the same next hop (each
    sample against the first of its next hop suffices). The parity checks that can pick the member lie in
    R = D-perp restricted to V, of dimension r = dim V - dim D; z = R(x) indexes a table of 2^r next hops.
    When 2^r is the fewest values that separate the next hops seen (r = ceil(log2 hops)), R is exactly the
    switch's checks on V, so the model is exact for every key in x_0 + V (`LearnedHash.checks` say which keys
    are). A larger r means too few samples (about r - that more, plus a margin). Two samples with the same z and
    different next hops prove that no affine hash with injective low-bit buckets explains them.
(c) Without a declaration, when learning does not finish: fit every function of the family with the default key
    layout, both bucket rules and the full or 16-bit output windows (cheap ones first), and take the one that
    explains every sample, if the ones that do agree everywhere in the samples' span.

A switch's model is checked against every one of its samples before it is returned; a switch no model explains
is refused (its name and a contradicting pair of lines in the message) and listed as `unknown` in the model, so
its tier's default never applies to it either.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Literal

import numpy as np

from planner._errors import InputError
from planner._hash_model import (
    FUNCTION_WIDTHS,
    HASH_FUNCTIONS,
    KEY_BITS,
    MAX_LEARNED_ROWS,
    NEXT_HOP_PREFIX,
    FabricSwitch,
    HashModel,
    HashSample,
    HashSpec,
    LearnedHash,
    SwitchHash,
    SwitchTier,
    next_hop_index,
)
from planner.fabric._gf2 import XorBasis, parity
from planner.fabric._hashing import KeyMap, compile_switch_hash, next_hop_name

CalibrationStatus = Literal["complete", "partial", "needs-samples", "refused", "skipped"]
"""Outcome for one switch: `complete` (a model exact within its domain), `partial` (exact, but some next hops
never answered: keys hashing to them stay unknown), `needs-samples` (no model yet: more samples would settle it),
`refused` (no model explains the samples), `skipped` (the time limit came first)."""

CALIBRATION_STATUS_MESSAGES = {
    0: "every switch calibrated",
    1: "some switches need more samples",
    2: "some switches' samples no model explains",
    3: "time limit reached before every switch was calibrated",
}
"""`CalibrationResult.status` values and what they mean."""

MARGIN = 12
"""Samples asked beyond the count learning needs at least: each further sample with an already-seen next hop
adds a new independent difference with probability at least 1/2, so 12 more leave the spans unsettled about once
in 4,000 (measured on probes of a job's NICs: 0 of 1,026 switches, against 2 with 8)."""
TRUST_BITS = 20
"""A learned hash is taken once the samples after it settled would all have been predicted by chance with
probability at most 2^-20 (`predictions_to_trust`)."""
MAX_SEARCH_BITS = 24
"""Widest output window a modulo constant is searched over (16 million candidates, about a second per switch)."""
HOLDOUT_FRACTION = 0.2
"""Share of a switch's samples (the last ones in file order) a learned model is also checked on, learned from the
rest alone."""
_CHUNK = 1 << 18
_AGREEMENT_KEYS = 2048


@dataclass(frozen=True)
class HoldoutCheck:
    """A learned hash learned again from the first samples alone and tested on the last ones."""

    trained: int
    """Samples learned from (the first ones in file order)."""
    tested: int
    correct: int
    unknown: int
    """Tested samples the smaller model could not predict (outside its span, or a value it never saw)."""
    wrong: int

    def render(self) -> str:
        """`hold-out 24/24` or `hold-out 20/24 (4 unknown)`."""
        extra = [f"{n} {what}" for n, what in ((self.unknown, "unknown"), (self.wrong, "wrong")) if n]
        return f"hold-out {self.correct}/{self.tested}" + (f" ({', '.join(extra)})" if extra else "")

    def to_dict(self) -> dict[str, int]:
        return {
            "trained": self.trained,
            "tested": self.tested,
            "correct": self.correct,
            "unknown": self.unknown,
            "wrong": self.wrong,
        }


@dataclass(frozen=True)
class SwitchCalibration:
    """What calibration made of one switch's samples."""

    switch: str
    tier: SwitchTier
    status: CalibrationStatus
    message: str
    hash: SwitchHash | None
    """The model (source `fitted` or `learned`); None unless complete or partial."""
    samples_used: int
    """Distinct samples of the switch."""
    samples_needed: int | None
    """Samples the model needed (the first this many, in file order, already gave it), or for `needs-samples` an
    estimate of the total; None when refused or skipped."""
    next_hops: int
    """Distinct next hops the switch answered."""
    span_bits: int
    """Dimension of the span of the samples' keys (the key bits the samples vary, after elimination)."""
    holdout: HoldoutCheck | None = None
    contradiction: tuple[int, int] | None = None
    """Lines of two samples no model explains together (refused), when one pair shows it."""

    @property
    def success(self) -> bool:
        """Whether the switch has a model (complete or partial)."""
        return self.status in ("complete", "partial")

    def to_dict(self) -> dict[str, Any]:
        spec = self.hash.hash if self.hash is not None else None
        described = None
        if isinstance(spec, HashSpec):
            described = describe_spec(spec)
        elif isinstance(spec, LearnedHash):
            described = f"learned: {len(spec.rows)} parity checks"
        return {
            "switch": self.switch,
            "tier": self.tier,
            "status": self.status,
            "source": self.hash.source if self.hash is not None else None,
            "hash": described,
            "samples_used": self.samples_used,
            "samples_needed": self.samples_needed,
            "next_hops": self.next_hops,
            "span_bits": self.span_bits,
            "holdout": self.holdout.to_dict() if self.holdout is not None else None,
            "contradiction": list(self.contradiction) if self.contradiction is not None else None,
            "message": self.message,
        }


@dataclass(frozen=True)
class CalibrationResult:
    """Outcome of `calibrate_hash_model`, in the spirit of `scipy.optimize.OptimizeResult`."""

    model: HashModel
    """The declared model with every calibrated switch's hash; switches without one are listed as unknown."""
    switches: Mapping[str, SwitchCalibration]
    """Per switch with samples, in natural name order."""
    status: int
    """See CALIBRATION_STATUS_MESSAGES."""
    success: bool
    """True when every switch with samples has a model (status 0)."""
    message: str
    wall_time_s: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "success": self.success,
            "message": self.message,
            "wall_time_s": round(self.wall_time_s, 6),
            "switches": [calibration.to_dict() for calibration in self.switches.values()],
        }


def describe_spec(spec: HashSpec) -> str:
    """`crc32c bits 0-16, modulo 6, seed 0x1a2b` in words."""
    width = FUNCTION_WIDTHS[spec.function]
    low, high = spec.bits if spec.bits is not None else (0, width)
    members = len(spec.members) if spec.members is not None else None
    parts = [spec.function if (low, high) == (0, width) else f"{spec.function} bits {low}-{high}"]
    parts.append(spec.bucket + (f" over {members}" if members is not None else ""))
    if spec.seed:
        parts.append(f"seed 0x{spec.seed:x}")
    if spec.init is not None:
        parts.append(f"init 0x{spec.init:x}")
    return ", ".join(parts)


_DIGITS = re.compile(r"([0-9]+)")


def name_order(name: str) -> tuple[tuple[int, str], ...]:
    """Sort key that puts `leaf-9` before `leaf-10` (digit runs compare by value, without converting them)."""
    return tuple(
        (0, part.lstrip("0").rjust(64, "0")) if _DIGITS.fullmatch(part) else (1, part)
        for part in _DIGITS.split(name)
        if part
    )


def describe_switch_hash(switch: SwitchHash) -> str:
    """A switch hash in words, with where it came from: `crc32c, modulo over 3, seed 0x1234 (fitted from 120
    samples)`, `learned: 2 parity checks on a 78-dimensional span, 4 of 4 values known (from 120 samples)`."""
    spec = switch.hash
    origin = switch.source + (f" from {switch.samples} samples" if switch.samples else "")
    if isinstance(spec, HashSpec):
        return f"{describe_spec(spec)} ({origin})"
    known = sum(hop is not None for hop in spec.table)
    return (
        f"learned: {len(spec.rows)} parity checks on a {KEY_BITS - len(spec.checks)}-dimensional span, {known} of "
        f"{len(spec.table)} values known ({origin})"
    )


# -- one switch's samples -----------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _Samples:
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

    def head(self, count: int) -> _Samples:
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


def _group(samples: Sequence[HashSample], switches: Mapping[str, FabricSwitch] | None) -> dict[str, _Samples]:
    by_switch: dict[str, list[HashSample]] = {}
    for sample in samples:
        by_switch.setdefault(sample.switch, []).append(sample)
    grouped: dict[str, _Samples] = {}
    for name, rows in by_switch.items():
        tier = rows[0].tier
        known = switches.get(name) if switches is not None else None
        grouped[name] = _Samples(
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


# -- (b) learning ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Learned:
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


def _learn(data: _Samples) -> _Learned:
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
    learned = _Learned(len(span), rows, checks, origin, {}, target, None, None)
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


def _learned_hash(learned: _Learned, data: _Samples) -> LearnedHash:
    table = tuple(
        data.hop_name(learned.values[z]) if z in learned.values else None for z in range(1 << len(learned.rows))
    )
    return LearnedHash(rows=learned.rows, table=table, origin=learned.origin, checks=learned.checks)


def _holdout(data: _Samples) -> HoldoutCheck | None:
    tested = round(data.count * HOLDOUT_FRACTION)
    if tested < 1 or data.count - tested < 2:
        return None
    trained = data.count - tested
    smaller = _learn(data.head(trained))
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


# -- (a) and (c) fitting -----------------------------------------------------------------------------------------


@lru_cache(maxsize=256)
def _window_map(spec: HashSpec) -> KeyMap:
    """The key -> output-window map of a spec without its seed (the seed is a constant the fit adds)."""
    return KeyMap.from_spec(replace(spec, seed=0, members=None))


@dataclass(frozen=True)
class _Fit:
    spec: HashSpec | None
    """The fitted spec (seed and members set) when the samples settle one."""
    problem: str = ""
    """Why there is none."""
    contradiction: tuple[int, int] | None = None
    ambiguous: bool = False
    """The samples do not settle it (several constants, or buckets never answered): more samples would."""
    unfit: bool = False
    """The declared spec cannot be fitted at all (too wide to search, too few output bits)."""
    more_needed: int = 0
    settled_after: int | None = None
    """Samples (in the order the fit took them) after which the fit was settled."""
    failed_at: int | None = None
    """Samples after which no constant was left (how many it took to rule the spec out)."""


_MAX_COMPARED = 64
"""Surviving constants compared for equivalence; with more, the samples are simply too few."""


def _member_count(spec: HashSpec, data: _Samples) -> int:
    if spec.members is not None:
        return len(spec.members)
    count = data.members if data.members is not None else int(data.hops.max()) + 1
    count = max(count, data.distinct)
    if spec.bucket == "low-bits":
        count = 1 << max(count - 1, 0).bit_length()
    return count


def _window(spec: HashSpec) -> tuple[int, int]:
    return spec.bits if spec.bits is not None else (0, FUNCTION_WIDTHS[spec.function])


def _buckets(values: np.ndarray, constant: int | np.ndarray, members: int) -> np.ndarray:
    """Bucket of each window value under a constant; modulo, which for a power-of-two count is the low bits."""
    buckets: np.ndarray = (values ^ np.asarray(constant, dtype=np.uint64)) % np.uint64(members)
    return buckets


def _bucket_table(
    buckets: np.ndarray, data: _Samples, members: int
) -> tuple[list[int | None], tuple[int, int] | None, int]:
    """Next hop of each bucket from the samples: (table, contradicting lines, samples taken: until every bucket
    was seen, or until the contradiction)."""
    table: list[int | None] = [None] * members
    line_of: list[int] = [0] * members
    seen = 0
    settled = data.count
    for n, (bucket, hop, line) in enumerate(zip(buckets.tolist(), data.hops.tolist(), data.lines, strict=True)):
        known = table[bucket]
        if known is None:
            table[bucket] = hop
            line_of[bucket] = line
            seen += 1
            if seen == members:
                settled = n + 1
        elif known != hop:
            return table, (line_of[bucket], line), n + 1
    return table, None, settled


def _fit_table(spec: HashSpec, data: _Samples, values: np.ndarray, members: int, constant: int) -> _Fit:
    """The constant given: the member of each bucket, from the samples (or as declared)."""
    low = _window(spec)[0]
    seed = spec.seed ^ (constant << low)
    buckets = _buckets(values, constant, members).astype(np.intp)
    if spec.members is not None:
        declared = np.array([next_hop_index(name, data.tier) for name in spec.members], dtype=np.int64)
        wrong = np.flatnonzero(declared[buckets] != data.hops)
        if wrong.size:
            return _Fit(None, f"line {data.lines[int(wrong[0])]} takes another next hop", failed_at=int(wrong[0]) + 1)
        return _Fit(replace(spec, seed=seed), settled_after=1)
    table, contradiction, taken = _bucket_table(buckets, data, members)
    if contradiction is not None:
        return _Fit(
            None, "two samples in one bucket took different next hops", contradiction=contradiction, failed_at=taken
        )
    missing = sum(hop is None for hop in table)
    if missing:
        more = math.ceil(members * (math.log(members) + 3)) - data.count
        return _Fit(None, f"{missing} of {members} buckets never answered", ambiguous=True, more_needed=max(more, 1))
    names = tuple(data.hop_name(hop) for hop in table if hop is not None)
    return _Fit(replace(spec, seed=seed, members=names), settled_after=taken)


def _survivors(
    data: _Samples, values: np.ndarray, members: int, width: int, declared: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every constant of the window at once, in chunks, dropped as soon as a sample contradicts it: (constants
    left, candidates alive after each sample in search order, the search order)."""
    hops = data.hops
    reps = np.unique(hops, return_index=True)[1]  # the first sample of each next hop
    if declared is None:
        order = np.concatenate([reps, np.setdiff1d(np.arange(data.count), reps)])
    else:
        order = np.arange(data.count)
    column = {int(hops[i]): k for k, i in enumerate(reps)}
    columns = np.array([column[int(hop)] for hop in hops], dtype=np.intp)
    alive_after = np.zeros(data.count, dtype=np.int64)
    survivors: list[np.ndarray] = []
    for start in range(0, 1 << width, _CHUNK):
        alive = np.arange(start, min(start + _CHUNK, 1 << width), dtype=np.uint64)
        if declared is not None:
            for step, i in enumerate(order):
                alive = alive[declared[_buckets(values[i], alive, members)] == hops[i]]
                alive_after[step] += alive.size
                if not alive.size:
                    break
        else:
            # The member order is free, but one next hop is one bucket: each sample's bucket must be the bucket
            # of the first sample of its next hop, and those must differ.
            rep_buckets = _buckets(values[reps][None, :], alive[:, None], members)
            ordered = np.sort(rep_buckets, axis=1)
            keep = np.all(ordered[:, 1:] != ordered[:, :-1], axis=1)
            alive, rep_buckets = alive[keep], rep_buckets[keep]
            alive_after[: reps.size] += alive.size
            for step in range(reps.size, data.count):
                i = order[step]
                keep = _buckets(values[i], alive, members) == rep_buckets[:, columns[i]]
                alive, rep_buckets = alive[keep], rep_buckets[keep]
                alive_after[step] += alive.size
                if not alive.size:
                    break
        if alive.size:
            survivors.append(alive)
    found = np.concatenate(survivors) if survivors else np.zeros(0, dtype=np.uint64)
    return found, alive_after, order


def _same_everywhere(fits: Sequence[tuple[int, HashSpec]], data: _Samples, members: int, width: int) -> bool:
    """Whether fitted constants (with their member orders) pick the same next hop for every window value."""
    tables = [np.array([next_hop_index(n, data.tier) for n in spec.members or ()], dtype=np.int64) for _, spec in fits]
    for start in range(0, 1 << width, _CHUNK):
        window = np.arange(start, min(start + _CHUNK, 1 << width), dtype=np.uint64)
        first = tables[0][_buckets(window, fits[0][0], members)]
        for (constant, _), table in zip(fits[1:], tables[1:], strict=True):
            if not np.array_equal(first, table[_buckets(window, constant, members)]):
                return False
    return True


def _search(spec: HashSpec, data: _Samples, values: np.ndarray, members: int, width: int) -> _Fit:
    """The constant searched over `width` bits; the member order with it unless declared."""
    declared = None
    if spec.members is not None:
        declared = np.array([next_hop_index(name, data.tier) for name in spec.members], dtype=np.int64)
    found, alive_after, order = _survivors(data, values, members, width, declared)
    if found.size == 0:
        taken = int(np.argmax(alive_after == 0)) + 1
        return _Fit(
            None,
            f"no seed explains the samples (the first {taken} in search order leave none, the last of them "
            f"line {data.lines[int(order[taken - 1])]})",
            failed_at=taken,
        )
    settled = int(np.argmax(alive_after == found.size)) + 1
    more = math.ceil(math.log(found.size) / math.log(max(members, 2))) + MARGIN
    if found.size > _MAX_COMPARED:
        return _Fit(None, f"{found.size} seeds explain the samples", ambiguous=True, more_needed=more)
    fits: list[tuple[int, HashSpec]] = []
    for constant in found.tolist():
        fit = _fit_table(spec, data, values, members, constant)
        if fit.spec is None:
            return replace(fit, more_needed=max(fit.more_needed, more))
        fits.append((constant, fit.spec))
    if len(fits) > 1 and not _same_everywhere(fits, data, members, width):
        return _Fit(None, f"{found.size} seeds explain the samples", ambiguous=True, more_needed=more)
    return _Fit(fits[0][1], settled_after=settled)


def _fit(spec: HashSpec, data: _Samples) -> _Fit:
    """Fit the constant (seed) and member order of a declared function to one switch's samples."""
    low, high = _window(spec)
    width = high - low
    members = _member_count(spec, data)
    power_of_two = members & (members - 1) == 0
    if spec.bucket == "low-bits" and (not power_of_two or members > 1 << width):
        return _Fit(None, f"{members} members do not fit low-bit buckets of {width} output bits", unfit=True)
    values = _window_map(spec)(data.src, data.dst, data.sport, data.dport, data.proto)
    values = values ^ np.uint64((spec.seed >> low) & ((1 << width) - 1))
    if power_of_two:
        # Only the constant's low log2(m) bits matter (modulo a power of two is the low bits), and without a
        # declared order they are the order: learn the table.
        if spec.members is None:
            return _fit_table(spec, data, values, members, 0)
        return _search(spec, data, values, members, max(members - 1, 0).bit_length())
    as_declared = _fit_table(spec, data, values, members, 0)
    if as_declared.spec is not None:
        return as_declared
    if width > MAX_SEARCH_BITS:
        return _Fit(
            None,
            f"the declared seed does not explain the samples ({as_declared.problem}), and a modulo bucket's seed is "
            f"searched over the output window, {width} bits here, at most {MAX_SEARCH_BITS}: declare the seed, or "
            "the window (bits) the switch takes its bucket from",
            unfit=True,
        )
    return _search(spec, data, values, members, width)


def family_candidates() -> list[HashSpec]:
    """The family with the default key layout, cheap fits first: low-bit buckets (a table), then modulo over
    16-bit (or 8-bit) windows (a search of 2^16 constants). Full 32-bit modulo windows are left out (too wide to
    search)."""
    low_bits: list[HashSpec] = []
    modulo: list[HashSpec] = []
    for function in HASH_FUNCTIONS:
        width = FUNCTION_WIDTHS[function]
        low_bits.append(HashSpec(function, bucket="low-bits"))
        if width == 32:
            low_bits.append(HashSpec(function, bits=(16, 32), bucket="low-bits"))
            modulo.append(HashSpec(function, bits=(0, 16), bucket="modulo"))
            modulo.append(HashSpec(function, bits=(16, 32), bucket="modulo"))
        else:
            modulo.append(HashSpec(function, bucket="modulo"))
    return low_bits + modulo


def _agreement_keys(data: _Samples, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Random keys of the samples' affine span, as (src, dst, sport, dport, proto) arrays."""
    differences = [key ^ data.keys[0] for key in data.keys[1:]]
    keys = []
    for _ in range(_AGREEMENT_KEYS):
        key = data.keys[0]
        for difference, pick in zip(differences, rng.integers(0, 2, len(differences)).tolist(), strict=True):
            if pick:
                key ^= difference
        keys.append(key)
    fields = [
        np.array([(key >> shift) & mask for key in keys], dtype=dtype)
        for shift, mask, dtype in ((72, 0xFFFFFFFF, np.uint64), (40, 0xFFFFFFFF, np.uint64), (16, 0xFFFF, np.intp))
    ]
    dport = np.array([key & 0xFFFF for key in keys], dtype=np.uint64)
    proto = np.array([(key >> 32) & 0xFF for key in keys], dtype=np.uint64)
    return fields[0], fields[1], fields[2], dport, proto


def _family(data: _Samples, deadline: float) -> tuple[HashSpec | None, list[HashSpec], int]:
    """Fit every function of the family: (the one to take, all that explain the samples, samples after which
    every other candidate was ruled out and the one taken settled)."""
    explaining: list[tuple[HashSpec, int]] = []
    ruled_out_by = 0
    for candidate in family_candidates():
        if time.monotonic() > deadline:
            break
        members = _member_count(candidate, data)
        if candidate.bucket == "modulo" and members & (members - 1) == 0:
            continue  # the same as low bits, tried already
        fit = _fit(candidate, data)
        if fit.spec is not None:
            explaining.append((fit.spec, fit.settled_after or data.count))
        elif fit.failed_at is not None:
            ruled_out_by = max(ruled_out_by, fit.failed_at)
    if not explaining:
        return None, [], ruled_out_by
    specs = [spec for spec, _ in explaining]
    if len(specs) > 1:
        keys = _agreement_keys(data, np.random.default_rng(len(data.keys)))
        predictions = [_predict(spec, data.tier, keys) for spec in specs]
        if any(not np.array_equal(predictions[0], other) for other in predictions[1:]):
            return None, specs, ruled_out_by
    return specs[0], specs, max(ruled_out_by, explaining[0][1])


def _predict(spec: HashSpec, tier: SwitchTier, keys: tuple[np.ndarray, ...]) -> np.ndarray:
    compiled = compile_switch_hash(SwitchHash(spec, "fitted"), tier)
    src, dst, sport, dport, proto = keys
    value = compiled.value(src, dst, sport, dport, proto)
    return compiled.next_hops(value, 0)


# -- per switch --------------------------------------------------------------------------------------------------


def _reproduces(switch: SwitchHash, data: _Samples) -> bool:
    """Whether the model gives every sample's next hop (the last word before a model is returned)."""
    compiled = compile_switch_hash(switch, data.tier)
    key = (data.src, data.dst, data.sport, data.dport, data.proto)
    value = compiled.value(*key)
    outside = None
    if compiled.checks:  # on each sample's own dport and proto (`CompiledHash.outside` takes one of each)
        outside = np.zeros(data.count, dtype=bool)
        for check in compiled.checks:
            outside |= check(*key) != 0
    choices = data.members if data.members is not None else int(data.hops.max()) + 1
    hops = compiled.next_hops(value, choices, outside)
    return bool(np.array_equal(hops, data.hops))


def _result(
    data: _Samples,
    status: CalibrationStatus,
    message: str,
    *,
    switch: SwitchHash | None = None,
    needed: int | None = None,
    span_bits: int = 0,
    holdout: HoldoutCheck | None = None,
    contradiction: tuple[int, int] | None = None,
) -> SwitchCalibration:
    return SwitchCalibration(
        switch=data.name,
        tier=data.tier,
        status=status,
        message=message,
        hash=switch,
        samples_used=data.count,
        samples_needed=needed,
        next_hops=data.distinct,
        span_bits=span_bits,
        holdout=holdout,
        contradiction=contradiction,
    )


def _checked_result(data: _Samples, result: SwitchCalibration) -> SwitchCalibration:
    if result.hash is None or _reproduces(result.hash, data):
        return result
    return replace(  # never expected: the model is built from these samples; never hand out one that disagrees
        result,
        status="refused",
        message=f"{data.name}: the model calibrated disagrees with its samples; refused",
        hash=None,
        samples_needed=None,
    )


def _calibrate_declared(data: _Samples, spec: HashSpec, span_bits: int) -> SwitchCalibration:
    fit = _fit(spec, data)
    what = describe_spec(spec)
    if fit.spec is not None:
        settled = fit.settled_after or data.count
        fitted = SwitchHash(fit.spec, "fitted", data.count)
        message = (
            f"{data.name}: fitted the declared {what}: {describe_spec(fit.spec)}, members "
            f"{', '.join(fit.spec.members or ())}; the only constant and order that explain the {data.count} "
            f"samples (settled after {settled})"
        )
        return _result(data, "complete", message, switch=fitted, needed=settled, span_bits=span_bits)
    if fit.ambiguous:
        message = (
            f"{data.name}: the declared {what} is not settled by {data.count} samples ({fit.problem}); "
            f"ask about {fit.more_needed} more tuples"
        )
        return _result(data, "needs-samples", message, needed=data.count + fit.more_needed, span_bits=span_bits)
    pair = f" (lines {fit.contradiction[0]} and {fit.contradiction[1]})" if fit.contradiction is not None else ""
    verdict = "cannot fit" if fit.unfit else "the samples contradict"
    message = f"{data.name}: {verdict} the declared {what}: {fit.problem}{pair}"
    return _result(data, "refused", message, span_bits=span_bits, contradiction=fit.contradiction)


def predictions_to_trust(next_hops: int) -> int:
    """Samples a settled learned hash must predict before it is taken: until a hash that is not affine would
    pass them all by chance about once in a million (each one with probability 1/m among m next hops)."""
    return math.ceil(TRUST_BITS / math.log2(max(next_hops, 2)))


def _calibrate_learned(data: _Samples, deadline: float) -> SwitchCalibration:
    learned = _learn(data)
    rows = len(learned.rows)
    hops = data.distinct
    # Before the spans settle any answers fit some affine hash (samples in general position prove nothing); after,
    # every sample whose value of the rows an earlier one showed is a prediction the model had to get right.
    settled = learned.settled_after if learned.settled_after is not None else data.count
    tested = len(learned.predictions)
    wanted = predictions_to_trust(hops)
    if learned.settled and rows <= MAX_LEARNED_ROWS and tested >= wanted:
        switch = SwitchHash(_learned_hash(learned, data), "learned", data.count)
        seen = len(learned.values)
        exact = (
            f"exact on the {learned.span_bits}-dimensional span of the samples (settled after {settled} samples, "
            f"then predicted {tested})"
        )
        needed = max(learned.predictions[wanted - 1], learned.last_new_value)
        holdout = _holdout(data)
        status: CalibrationStatus = "complete" if seen == 1 << rows else "partial"
        if status == "complete":
            message = f"{data.name}: learned {rows} parity checks that pick among {hops} next hops; {exact}"
        else:
            message = (
                f"{data.name}: learned {rows} parity checks; {seen} of their {1 << rows} values answered, the "
                f"others stay unknown; {exact}"
            )
        return _result(
            data,
            status,
            message,
            switch=switch,
            needed=needed,
            span_bits=learned.span_bits,
            holdout=holdout,
        )
    chosen, explaining, settled_after = _family(data, deadline)
    if chosen is not None:
        fitted = SwitchHash(chosen, "fitted", data.count)
        others = ""
        if len(explaining) > 1:
            others = f" ({len(explaining) - 1} more of the family agree on every key of the span)"
        message = (
            f"{data.name}: {describe_spec(chosen)} with members {', '.join(chosen.members or ())} explains all "
            f"{data.count} samples{others}; no other function of the family explains the first {settled_after}"
        )
        return _result(data, "complete", message, switch=fitted, needed=settled_after, span_bits=learned.span_bits)
    if learned.contradiction is not None and not explaining:
        a, b = learned.contradiction
        message = (
            f"{data.name}: no model explains the samples: lines {a} and {b} take different next hops with the same "
            "parity checks, so no affine hash (CRC, XOR) with low-bit buckets does, and no function of the family "
            "with modulo buckets over a 16-bit window does either"
        )
        return _result(data, "refused", message, span_bits=learned.span_bits, contradiction=learned.contradiction)
    if explaining:
        names = "; ".join(describe_spec(spec) for spec in explaining[:3])
        more = MARGIN
        message = (
            f"{data.name}: {len(explaining)} functions of the family explain the {data.count} samples and disagree "
            f"elsewhere ({names}); ask about {more} more tuples"
        )
        return _result(data, "needs-samples", message, needed=data.count + more, span_bits=learned.span_bits)
    if learned.settled and rows <= MAX_LEARNED_ROWS:
        more = wanted - tested
        message = (
            f"{data.name}: {rows} parity checks fit the samples, but they predicted only {tested} samples after they "
            f"settled and {wanted} must be predicted before the hash is trusted; ask about {more} more tuples"
        )
    else:
        more = rows - learned.target + MARGIN + wanted
        message = (
            f"{data.name}: learning needs about {more} more samples: {rows} parity checks remain where "
            f"{learned.target} would pick among {hops} next hops"
        )
    return _result(data, "needs-samples", message, needed=data.count + more, span_bits=learned.span_bits)


def _calibrate_switch(data: _Samples, declared: HashModel | None, deadline: float) -> SwitchCalibration:
    own = declared.for_switch(data.name, data.tier) if declared is not None else None
    if own is not None and isinstance(own.hash, HashSpec):
        span_bits = len(XorBasis(key ^ data.keys[0] for key in data.keys))
        return _checked_result(data, _calibrate_declared(data, own.hash, span_bits))
    return _checked_result(data, _calibrate_learned(data, deadline))


# -- public entry point ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Checked:
    samples: tuple[HashSample, ...]
    declared: HashModel | None
    switches: Mapping[str, FabricSwitch] | None
    time_limit: float = field(default=math.inf)


def _calibrate_hash_model_iv(
    samples: Iterable[HashSample],
    declared: HashModel | None,
    switches: Mapping[str, FabricSwitch] | None,
    time_limit: float | None,
) -> _Checked:
    rows = tuple(samples)
    if not rows:
        raise InputError("samples: none given; ask the switches about the tuples --print-probes lists")
    tier_of: dict[str, tuple[SwitchTier, int]] = {}
    for index, sample in enumerate(rows):
        if not isinstance(sample, HashSample):
            raise InputError(f"samples[{index}]: expected a HashSample, got {type(sample).__name__}")
        where = f"line {sample.line}" if sample.line else f"samples[{index}]"
        tier = sample.tier
        try:
            next_hop_index(sample.next_hop, tier)
        except InputError as exc:
            raise InputError(f"{where}: next_hop: {exc}") from None
        first = tier_of.setdefault(sample.switch, (tier, index))
        if first[0] != tier:
            other = rows[first[1]]
            raise InputError(
                f"{where}: {sample.switch} answered {sample.next_hop} here and {other.next_hop} at "
                f"{f'line {other.line}' if other.line else f'samples[{first[1]}]'}: one switch's next hops are all "
                "spines or all cores"
            )
        if switches is not None:
            known = switches.get(sample.switch)
            if known is None:
                raise InputError(f"{where}: switch: {sample.switch!r} is not a switch of the topology")
            if known.tier != tier:
                raise InputError(
                    f"{where}: next_hop: {sample.switch} is a {known.tier} switch of the topology, whose next hops "
                    f"are {NEXT_HOP_PREFIX[known.tier]}<n>, not {sample.next_hop}"
                )
            if next_hop_index(sample.next_hop, tier) >= known.next_hops:
                raise InputError(
                    f"{where}: next_hop: {sample.next_hop}: {sample.switch} has {known.next_hops} equal-cost next "
                    "hops in the topology"
                )
    if declared is not None and not isinstance(declared, HashModel):
        raise InputError(f"declared: expected a HashModel, got {type(declared).__name__}")
    limit = math.inf if time_limit is None else float(time_limit)
    if not limit > 0:  # also refuses nan
        raise InputError(f"time_limit: must be a positive number of seconds, got {time_limit}")
    return _Checked(rows, declared, switches, limit)


def calibrate_hash_model(
    samples: Iterable[HashSample],
    declared: HashModel | None = None,
    *,
    switches: Mapping[str, FabricSwitch] | None = None,
    time_limit: float | None = None,
) -> CalibrationResult:
    """A hash model from switches' answers: every switch with samples fitted (declared function), learned, or
    refused.

    `declared` (e.g. from `--hash-model`) gives functions to fit per switch or tier; its other entries are kept.
    `switches` (from the topology) gives each switch's equal-cost next-hop count. `time_limit` (seconds) bounds the
    run: switches not reached are `skipped`. Raises InputError only for malformed input; "cannot calibrate" is a
    status, per switch (`CalibrationResult.switches`).
    """
    started = time.monotonic()
    checked = _calibrate_hash_model_iv(samples, declared, switches, time_limit)
    deadline = started + checked.time_limit
    grouped = _group(checked.samples, checked.switches)
    results: dict[str, SwitchCalibration] = {}
    for name in sorted(grouped, key=name_order):
        data = grouped[name]
        if time.monotonic() > deadline:
            results[name] = _result(data, "skipped", f"{name}: the time limit came first")
            continue
        results[name] = _calibrate_switch(data, checked.declared, deadline)
    return _assemble(results, checked.declared, time.monotonic() - started)


def _assemble(results: Mapping[str, SwitchCalibration], declared: HashModel | None, wall: float) -> CalibrationResult:
    base = declared if declared is not None else HashModel()
    switches = dict(base.switches)
    unknown = set(base.unknown)
    for name, calibration in results.items():
        if calibration.hash is not None:
            switches[name] = calibration.hash
            unknown.discard(name)
        else:
            switches.pop(name, None)
            unknown.add(name)
    model = HashModel(tiers=base.tiers, switches=switches, unknown=frozenset(unknown))
    statuses = {calibration.status for calibration in results.values()}
    status = 3 if "skipped" in statuses else 2 if "refused" in statuses else 1 if "needs-samples" in statuses else 0
    counts = {s: sum(c.status == s for c in results.values()) for s in ("complete", "partial")}
    message = (
        f"{CALIBRATION_STATUS_MESSAGES[status]}: {counts['complete']} complete, {counts['partial']} partial of "
        f"{len(results)} switches"
    )
    return CalibrationResult(
        model=model,
        switches=MappingProxyType(dict(results)),
        status=status,
        success=status == 0,
        message=message,
        wall_time_s=wall,
    )


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
    "MARGIN",
    "MAX_SEARCH_BITS",
    "CALIBRATION_STATUS_MESSAGES",
    "CalibrationResult",
    "CalibrationStatus",
    "HoldoutCheck",
    "SwitchCalibration",
    "calibrate_hash_model",
    "describe_spec",
    "describe_switch_hash",
    "family_candidates",
    "samples_to_learn",
    "predictions_to_trust",
]
