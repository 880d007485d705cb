"""Exact amounts from Kubernetes resource quantities, for admission's rules, and card counts as every service reads
them (`webhook.common.jobfacts.card_count`). The grammar is the planner's (`planner.read_quantity`: ASCII digits, as
the API machinery reads them), so admission and the planner read a pod's NPU count alike.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from planner import MAX_EXPONENT, MAX_QUANTITY_CHARS, read_quantity
from webhook.common.jobfacts import card_count


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


__all__ = ["MAX_EXPONENT", "MAX_QUANTITY_CHARS", "card_count", "ceil", "parse_quantity", "quantity_problem"]
