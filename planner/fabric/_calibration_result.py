"""What calibration makes of switches' samples: a status per switch and overall, in scipy's style, and the words
for a switch hash.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from planner._hash_model import FUNCTION_WIDTHS, KEY_BITS, HashModel, HashSpec, LearnedHash, SwitchHash, SwitchTier

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


__all__ = [
    "CALIBRATION_STATUS_MESSAGES",
    "CalibrationResult",
    "CalibrationStatus",
    "HoldoutCheck",
    "SwitchCalibration",
    "describe_spec",
    "describe_switch_hash",
]
