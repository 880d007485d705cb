"""Fitting a declared function to a switch's samples, and the family fit when nothing is declared.

For a key of fixed length every init or seed difference XORs a constant into the output, so the unknowns of a
declared function are that constant and the member order. With low-bit buckets they are one unknown: a table
bucket -> next hop. With modulo buckets the constant is searched over the output window (every candidate at once,
in numpy chunks, dropping candidates sample by sample), up to 24 bits; a declared `members` list fixes the order,
else it is learned with the constant. Without a declaration, when learning does not finish, every function of the
family is fitted with the default key layout, both bucket rules and the full or 16-bit output windows (cheap ones
first), and the one that explains every sample is taken, if the ones that do agree everywhere in the samples' span.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from planner._hash_model import FUNCTION_WIDTHS, HASH_FUNCTIONS, HashSpec, SwitchHash, SwitchTier, next_hop_index
from planner.fabric._hashing import KeyMap, compile_switch_hash
from planner.fabric._switch_samples import MARGIN, SwitchSamples

MAX_SEARCH_BITS = 24
"""Widest output window a modulo constant is searched over (16 million candidates, about a second per switch)."""
_CHUNK = 1 << 18
_AGREEMENT_KEYS = 2048


@lru_cache(maxsize=256)
def _window_map(spec: HashSpec) -> KeyMap:
    """The key -> output-window map of a spec without its seed (the seed is a constant the fit adds)."""
    return KeyMap.from_spec(replace(spec, seed=0, members=None))


@dataclass(frozen=True)
class Fit:
    """A declared function fitted to one switch's samples, or why it is not."""

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


def _member_count(spec: HashSpec, data: SwitchSamples) -> int:
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
    buckets: np.ndarray, data: SwitchSamples, members: int
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


def _fit_table(spec: HashSpec, data: SwitchSamples, values: np.ndarray, members: int, constant: int) -> Fit:
    """The constant given: the member of each bucket, from the samples (or as declared)."""
    low = _window(spec)[0]
    seed = spec.seed ^ (constant << low)
    buckets = _buckets(values, constant, members).astype(np.intp)
    if spec.members is not None:
        declared = np.array([next_hop_index(name, data.tier) for name in spec.members], dtype=np.int64)
        wrong = np.flatnonzero(declared[buckets] != data.hops)
        if wrong.size:
            return Fit(None, f"line {data.lines[int(wrong[0])]} takes another next hop", failed_at=int(wrong[0]) + 1)
        return Fit(replace(spec, seed=seed), settled_after=1)
    table, contradiction, taken = _bucket_table(buckets, data, members)
    if contradiction is not None:
        return Fit(
            None, "two samples in one bucket took different next hops", contradiction=contradiction, failed_at=taken
        )
    missing = sum(hop is None for hop in table)
    if missing:
        more = math.ceil(members * (math.log(members) + 3)) - data.count
        return Fit(None, f"{missing} of {members} buckets never answered", ambiguous=True, more_needed=max(more, 1))
    names = tuple(data.hop_name(hop) for hop in table if hop is not None)
    return Fit(replace(spec, seed=seed, members=names), settled_after=taken)


def _survivors(
    data: SwitchSamples, values: np.ndarray, members: int, width: int, declared: np.ndarray | None
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


def _same_everywhere(fits: Sequence[tuple[int, HashSpec]], data: SwitchSamples, members: int, width: int) -> bool:
    """Whether fitted constants (with their member orders) pick the same next hop for every window value."""
    tables = [np.array([next_hop_index(n, data.tier) for n in spec.members or ()], dtype=np.int64) for _, spec in fits]
    for start in range(0, 1 << width, _CHUNK):
        window = np.arange(start, min(start + _CHUNK, 1 << width), dtype=np.uint64)
        first = tables[0][_buckets(window, fits[0][0], members)]
        for (constant, _), table in zip(fits[1:], tables[1:], strict=True):
            if not np.array_equal(first, table[_buckets(window, constant, members)]):
                return False
    return True


def _search(spec: HashSpec, data: SwitchSamples, values: np.ndarray, members: int, width: int) -> Fit:
    """The constant searched over `width` bits; the member order with it unless declared."""
    declared = None
    if spec.members is not None:
        declared = np.array([next_hop_index(name, data.tier) for name in spec.members], dtype=np.int64)
    found, alive_after, order = _survivors(data, values, members, width, declared)
    if found.size == 0:
        taken = int(np.argmax(alive_after == 0)) + 1
        return Fit(
            None,
            f"no seed explains the samples (the first {taken} in search order leave none, the last of them "
            f"line {data.lines[int(order[taken - 1])]})",
            failed_at=taken,
        )
    settled = int(np.argmax(alive_after == found.size)) + 1
    more = math.ceil(math.log(found.size) / math.log(max(members, 2))) + MARGIN
    if found.size > _MAX_COMPARED:
        return Fit(None, f"{found.size} seeds explain the samples", ambiguous=True, more_needed=more)
    fits: list[tuple[int, HashSpec]] = []
    for constant in found.tolist():
        fit = _fit_table(spec, data, values, members, constant)
        if fit.spec is None:
            return replace(fit, more_needed=max(fit.more_needed, more))
        fits.append((constant, fit.spec))
    if len(fits) > 1 and not _same_everywhere(fits, data, members, width):
        return Fit(None, f"{found.size} seeds explain the samples", ambiguous=True, more_needed=more)
    return Fit(fits[0][1], settled_after=settled)


def fit_declared(spec: HashSpec, data: SwitchSamples) -> Fit:
    """Fit the constant (seed) and member order of a declared function to one switch's samples."""
    low, high = _window(spec)
    width = high - low
    members = _member_count(spec, data)
    power_of_two = members & (members - 1) == 0
    if spec.bucket == "low-bits" and (not power_of_two or members > 1 << width):
        return Fit(None, f"{members} members do not fit low-bit buckets of {width} output bits", unfit=True)
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
        return Fit(
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


def _agreement_keys(data: SwitchSamples, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
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


def fit_family(data: SwitchSamples, deadline: float) -> tuple[HashSpec | None, list[HashSpec], int]:
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
        fit = fit_declared(candidate, data)
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


__all__ = ["MAX_SEARCH_BITS", "Fit", "family_candidates", "fit_declared", "fit_family"]
