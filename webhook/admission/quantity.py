"""Card counts and exact amounts from Kubernetes resource quantities, for admission's rules. The grammar is the
planner's (`planner.read_quantity`: ASCII digits, as the API machinery reads them), so admission and the planner
read a pod's NPU count alike.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from planner import MAX_EXPONENT, MAX_QUANTITY_CHARS, read_quantity


def quantity_problem(value: Any) -> str | None:
    """Why `value` is not a quantity ringroute can read exactly, or None when it is one."""
    read = read_quantity(value)
    return read if isinstance(read, str) else None


def parse_quantity(value: Any) -> Fraction | None:
    """The exact amount of a quantity (string or JSON number), or None when it is not one (`quantity_problem`)."""
    read = read_quantity(value)
    return read if isinstance(read, Fraction) else None


def ceil(value: Fraction) -> int:
    """The smallest integer not below `value` (Quantity.Value() and MilliValue() round up)."""
    return -((-value.numerator) // value.denominator)


def card_count(value: Any) -> int | str:
    """The whole number of cards a resource quantity asks for (`8`, `"8"`, `"8000m"` and `"8e0"` are 8), or a
    sentence saying why it is not one (a fraction, a negative count, not a quantity)."""
    if type(value) is str and 0 < len(value) <= 18 and value.isascii() and value.isdigit():
        return int(value)  # the common case, without building a Fraction
    amount = read_quantity(value)
    if isinstance(amount, str):
        return amount
    if amount < 0:
        return "must not be negative"
    if amount.denominator != 1:
        return "must be a whole number (the device plugin allocates whole cards)"
    return amount.numerator


__all__ = ["MAX_EXPONENT", "MAX_QUANTITY_CHARS", "card_count", "ceil", "parse_quantity", "quantity_problem"]
