"""Violation: one field error, rendered the way Kubernetes renders field errors."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

Reason = Literal["Required", "Invalid", "Forbidden", "NotSupported", "TooLong"]

_REASON_TEXT: dict[str, str] = {
    "Required": "Required value",
    "Invalid": "Invalid value",
    "Forbidden": "Forbidden",
    "NotSupported": "Unsupported value",
    "TooLong": "Too long",
}

_CAUSE_REASON: dict[str, str] = {
    "Required": "FieldValueRequired",
    "Invalid": "FieldValueInvalid",
    "Forbidden": "FieldValueForbidden",
    "NotSupported": "FieldValueNotSupported",
    "TooLong": "FieldValueTooLong",
}

NO_VALUE: Any = None


@dataclass(frozen=True, slots=True)
class Violation:
    """A policy finding on one field: where, what kind, the bad value, and how to fix it."""

    path: str
    """Field path, e.g. `spec.tasks[0].replicas`."""
    reason: Reason
    value: Any
    """The offending value (shown for Invalid and NotSupported)."""
    detail: str
    """What is wrong and how to fix it."""
    rule: str
    """Name of the rule that found it (policy modes and metrics key on it)."""

    def render(self) -> str:
        """`path: Reason: value: detail`, as Kubernetes' field.Error renders it."""
        head = f"{self.path}: {_REASON_TEXT[self.reason]}"
        if self.reason in ("Invalid", "NotSupported"):
            return f"{head}: {render_value(self.value)}: {self.detail}"
        return f"{head}: {self.detail}"

    @property
    def cause_reason(self) -> str:
        """The metav1.StatusCause reason of this violation (e.g. `FieldValueInvalid`)."""
        return _CAUSE_REASON[self.reason]


MAX_RENDERED_VALUE = 200
"""Longest value shown in a message; a longer one is cut and its length given (a denial never echoes megabytes)."""


def render_value(value: Any) -> str:
    """A value as field errors show it: strings quoted, numbers bare, structures as compact JSON; cut to
    MAX_RENDERED_VALUE characters."""
    text = _rendered(value)
    if len(text) <= MAX_RENDERED_VALUE:
        return text
    return f"{text[: MAX_RENDERED_VALUE // 2]}... ({len(text):,} characters)"


def _rendered(value: Any) -> str:
    if isinstance(value, str):
        return orjson.dumps(value).decode()
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and abs(value) >= 10**MAX_RENDERED_VALUE:
        # repr() refuses integers above 4,300 digits
        return f"a number of about {int(value.bit_length() * math.log10(2)) + 1:,} digits"
    if isinstance(value, int | float):
        return repr(value)  # orjson refuses integers beyond 64 bits
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return repr(value)


def render(violations: Sequence[Violation]) -> str:
    """All violations in one message: one alone, several as Kubernetes aggregates them (`[a, b]`)."""
    if len(violations) == 1:
        return violations[0].render()
    return "[" + ", ".join(v.render() for v in violations) + "]"


def quoted(values: Sequence[object]) -> str:
    """`"a", "b"` for a list of supported values."""
    return ", ".join(render_value(v) for v in values)
