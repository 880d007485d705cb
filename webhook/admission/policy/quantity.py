"""Kubernetes resource quantities ("8", "500m", "1Gi", "1e3") as exact fractions, compared as the API machinery does."""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(.*)$")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_EXPONENT = re.compile(r"^[eE]([+-]?[0-9]+)$")


def parse_quantity(value: Any) -> Fraction | None:
    """The exact amount of a quantity (string or JSON number), or None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(value) if math.isfinite(value) else None
    if not isinstance(value, str):
        return None
    match = _QUANTITY.match(value.strip())
    if match is None:
        return None
    number, suffix = Fraction(match.group(1)), match.group(2)
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    exponent = _EXPONENT.match(suffix)
    if exponent is not None and abs(int(exponent.group(1))) <= 30:
        return number * Fraction(10) ** int(exponent.group(1))
    return None


def ceil(value: Fraction) -> int:
    """The smallest integer not below `value` (Quantity.Value() and MilliValue() round up)."""
    return -((-value.numerator) // value.denominator)


__all__ = ["ceil", "parse_quantity"]
