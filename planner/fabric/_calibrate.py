"""Calibration: a hash model of the fabric's switches from what they answered (samples).

Per switch, with its samples (5-tuple -> next hop, `planner.fabric._switch_samples`):

(a) **Fit** a declared function (the switch's or its tier's in `declared`): its constant (seed) and member order
    (`planner.fabric._fitting`).
(b) **Learn** the hash outright when nothing is declared: every CRC and XOR hash is affine over GF(2), so with
    2^k members and low-bit buckets the member is a function of k parity checks of the key
    (`planner.fabric._learning`).
(c) Without a declaration, when learning does not finish: fit every function of the family, and take the one
    that explains every sample if the ones that do agree everywhere in the samples' span (`_fitting` again).

A switch's model is checked against every one of its samples before it is returned; a switch no model explains
is refused (its name and a contradicting pair of lines in the message) and listed as `unknown` in the model, so
its tier's default never applies to it either.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

import numpy as np

from planner._errors import InputError
from planner._hash_model import (
    MAX_LEARNED_ROWS,
    NEXT_HOP_PREFIX,
    FabricSwitch,
    HashModel,
    HashSample,
    HashSpec,
    SwitchHash,
    SwitchTier,
    next_hop_index,
)
from planner.fabric._calibration_result import (
    CALIBRATION_STATUS_MESSAGES,
    CalibrationResult,
    CalibrationStatus,
    HoldoutCheck,
    SwitchCalibration,
    describe_spec,
)
from planner.fabric._fitting import fit_declared, fit_family
from planner.fabric._gf2 import XorBasis
from planner.fabric._hashing import compile_switch_hash
from planner.fabric._learning import holdout_check, learn, learned_hash, predictions_to_trust
from planner.fabric._switch_samples import MARGIN, SwitchSamples, name_order, samples_by_switch

# -- per switch --------------------------------------------------------------------------------------------------


def _reproduces(switch: SwitchHash, data: SwitchSamples) -> bool:
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
    data: SwitchSamples,
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


def _checked_result(data: SwitchSamples, result: SwitchCalibration) -> SwitchCalibration:
    if result.hash is None or _reproduces(result.hash, data):
        return result
    return replace(  # never expected: the model is built from these samples; never hand out one that disagrees
        result,
        status="refused",
        message=f"{data.name}: the model calibrated disagrees with its samples; refused",
        hash=None,
        samples_needed=None,
    )


def _calibrate_declared(data: SwitchSamples, spec: HashSpec, span_bits: int) -> SwitchCalibration:
    fit = fit_declared(spec, data)
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


def _calibrate_learned(data: SwitchSamples, deadline: float) -> SwitchCalibration:
    learned = learn(data)
    rows = len(learned.rows)
    hops = data.distinct
    # Before the spans settle any answers fit some affine hash (samples in general position prove nothing); after,
    # every sample whose value of the rows an earlier one showed is a prediction the model had to get right.
    settled = learned.settled_after if learned.settled_after is not None else data.count
    tested = len(learned.predictions)
    wanted = predictions_to_trust(hops)
    if learned.settled and rows <= MAX_LEARNED_ROWS and tested >= wanted:
        switch = SwitchHash(learned_hash(learned, data), "learned", data.count)
        seen = len(learned.values)
        exact = (
            f"exact on the {learned.span_bits}-dimensional span of the samples (settled after {settled} samples, "
            f"then predicted {tested})"
        )
        needed = max(learned.predictions[wanted - 1], learned.last_new_value)
        holdout = holdout_check(data)
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
    chosen, explaining, settled_after = fit_family(data, deadline)
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


def _calibrate_switch(data: SwitchSamples, declared: HashModel | None, deadline: float) -> SwitchCalibration:
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
    grouped = samples_by_switch(checked.samples, checked.switches)
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


__all__ = ["calibrate_hash_model"]
