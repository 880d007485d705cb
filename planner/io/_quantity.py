"""Kubernetes resource quantities ("8", "500m", "1Gi", "1e3") as exact fractions, read as the API machinery reads
them (`Quantity.UnmarshalJSON`, which trims spaces, then `resource.ParseQuantity`). The mantissa needs a digit, as
the Volcano Job CRD's quantity pattern does (ParseQuantity alone reads "m" as 0).

Only ASCII digits count ("²" and "٨" are not quantities, as in Go). Nothing here raises on client input: a
quantity too long or too large to compute cheaply is reported as such instead of being converted. Admission and
the planner both read quantities here, so a pod's NPU count means the same to each.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

# No `\d` (it matches every Unicode digit): the API machinery reads ASCII digits only.
_QUANTITY = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(.*)", re.ASCII | re.DOTALL)
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
_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)", re.ASCII)
_GO_SPACE = " \t\n\v\f\r\x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
"""What Go's strings.TrimSpace trims (unicode.IsSpace); Python's str.strip also trims \\x1c-\\x1f, Go does not."""

MAX_QUANTITY_CHARS = 128
"""Longest quantity text computed exactly. Kubernetes accepts longer ones; no amount a pod can use needs them, and
converting thousands of digits costs time a client could make ringroute spend."""
MAX_EXPONENT = 1000
"""Largest decimal exponent computed exactly (`1e1000`), for the same reason."""


def read_quantity(value: Any) -> Fraction | str:
    """The exact amount of a quantity (string or JSON number), or a sentence saying why it is not one ringroute
    reads (to follow the value in a message: `'²' is not a Kubernetes quantity ...`)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return 'must be a quantity, such as "8"'
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        # The decimal text of the JSON number, as Go reads it ("0.1" is 1/10, not the nearest binary fraction).
        return Fraction(repr(value)) if math.isfinite(value) else "must be a finite number"
    text = value.strip(_GO_SPACE)
    if len(text) > MAX_QUANTITY_CHARS:
        return f"is {len(text):,} characters long; ringroute reads quantities of up to {MAX_QUANTITY_CHARS}"
    match = _QUANTITY.fullmatch(text)
    if match is not None:
        number, suffix = match.group(1), match.group(2)
        if suffix in _DECIMAL:
            return Fraction(number) * _DECIMAL[suffix]
        if suffix in _BINARY:
            return Fraction(number) * _BINARY[suffix]
        exponent = _EXPONENT.fullmatch(suffix)
        if exponent is not None:
            power = int(exponent.group(1))
            if abs(power) > MAX_EXPONENT:
                return f"has an exponent beyond {MAX_EXPONENT}"
            return Fraction(number) * Fraction(10) ** power
    return 'is not a Kubernetes quantity (ASCII digits with an optional suffix, such as "8" or "8000m")'


__all__ = ["MAX_EXPONENT", "MAX_QUANTITY_CHARS", "read_quantity"]
