"""Integers and quantities from untrusted input, read as Kubernetes reads them: ASCII only, and bounded.

`str.isdigit()` is true for "²" and "٨", and `int()` takes "٨" (8), refuses "²" with a ValueError, and refuses
numbers of more than 4,300 digits. Labels, annotations and files are written by people and plugins, so every
integer the planner reads goes through `parse_count`: ASCII digits only, compared against a bound before any
conversion, and a ValueError whose message names the value (shortened) and what was expected.
"""

from __future__ import annotations

from planner.io._quantity import read_quantity

INT32_MAX = 2**31 - 1
"""Largest value of a Kubernetes int32 field (replicas, HyperNode tiers) and of the planner's indexes and ids."""

SHOWN_CHARS = 24
"""Characters of a bad value quoted in a message; the rest is counted, not printed."""


def shown(value: object) -> str:
    """`repr(value)`, shortened to SHOWN_CHARS characters: a 5,000-digit number in a message is noise."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"  # repr() refuses ints of more than 4,300 digits
    text = repr(value) if not isinstance(value, str) else value
    if len(text) <= SHOWN_CHARS:
        return repr(value)
    return f"{text[:SHOWN_CHARS]!r}... ({len(text)} characters)"


def parse_count(value: object, *, maximum: int = INT32_MAX) -> int:
    """A non-negative integer in 0..maximum from a string of ASCII digits, or from a JSON/YAML integer.

    Raises ValueError with a message fragment that quotes the value, e.g. `'²' is not a non-negative integer
    (ASCII digits 0-9)`. The length is checked before converting, so a huge number costs nothing.
    """
    if isinstance(value, bool):
        raise ValueError(f"{shown(value)} is not a non-negative integer")
    if isinstance(value, int):
        if not 0 <= value <= maximum:
            raise ValueError(f"{shown(value)} is out of range 0..{maximum}")
        return value
    if not isinstance(value, str) or not value or not value.isascii() or not value.isdigit():
        raise ValueError(f"{shown(value)} is not a non-negative integer (ASCII digits 0-9)")
    significant = value.lstrip("0") or "0"
    if len(significant) > len(str(maximum)) or int(significant) > maximum:
        raise ValueError(f"{shown(value)} is out of range 0..{maximum}")
    return int(significant)


def quantity_is_zero(value: object) -> bool:
    """Whether a Kubernetes resource quantity (`8`, `8000m`, `1Ki`, `0.5`, `1e3`) is zero, read as admission reads
    it (`read_quantity`). Raises ValueError naming the value when it is not a quantity or is negative."""
    amount = read_quantity(value)
    if isinstance(amount, str):
        raise ValueError(f"{shown(value)} {amount}")
    if amount < 0:
        raise ValueError(f"{shown(value)} is negative")
    return amount == 0


__all__ = ["INT32_MAX", "parse_count", "quantity_is_zero", "shown"]
