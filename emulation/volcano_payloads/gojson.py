"""Go's encoding/json output and Kubernetes' resource.Quantity, as Volcano's binaries write and read them."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from fractions import Fraction
from typing import Any, Final

import orjson

from planner import read_quantity
from webhook.extender.volcano_releases import MASTER_RELEASE, RELEASE_GO, normalize_release

# ------------------------------------------------------------------------------------------ Go encoding/json output


def go_float_text(value: float) -> str:
    """How Go's encoding/json writes a float64: shortest round-trip digits, `%f` style unless |x| < 1e-6 or
    |x| >= 1e21 (then `1e+21`, `1e-7`). NaN and infinities make json.Marshal fail (ValueError here)."""
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"json: unsupported value: {value!r}")
    if value == 0.0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    dec = Decimal(repr(value)).normalize()
    magnitude = abs(value)
    if 1e-6 <= magnitude < 1e21:
        return format(dec, "f")
    sign, digits, exponent = dec.as_tuple()
    assert isinstance(exponent, int)
    mantissa = str(digits[0]) + ("." + "".join(map(str, digits[1:])) if len(digits) > 1 else "")
    exp10 = len(digits) - 1 + exponent
    text = f"{'-' if sign else ''}{mantissa}e{'-' if exp10 < 0 else '+'}{abs(exp10):02d}"
    # Go trims e-09 to e-9, but keeps e+21.
    return re.sub(r"e-0(\d)$", r"e-\1", text)


def go_number(value: float) -> int | orjson.Fragment:
    """A float64 field value ready for `go_json`: a Python int when Go prints no fraction (the JSON text is then
    identical), else a pre-rendered fragment with Go's text."""
    value = float(value)  # callers may pass ints for float64 fields
    if value.is_integer() and abs(value) < 1e21 and not (value == 0.0 and math.copysign(1.0, value) < 0):
        number = int(value) if abs(value) < 2**53 else int(Decimal(repr(value)))
        if abs(number) < 2**63:
            return number
    return orjson.Fragment(go_float_text(value).encode())


_HTML_ESCAPES: Final = ((b"<", b"\\u003c"), (b">", b"\\u003e"), (b"&", b"\\u0026"))
_LINE_SEPARATORS: Final = (("\u2028".encode(), b"\\u2028"), ("\u2029".encode(), b"\\u2029"))
_ESCAPE_PAIR = re.compile(rb"\\(.)")


def go_json(value: Any, release: str = MASTER_RELEASE) -> bytes:
    """The bytes Go's json.Marshal writes for a value built by this module (dicts already in Go's key order).

    On top of plain JSON, Go escapes `<`, `>`, `&`, U+2028 and U+2029 in strings; binaries built with Go < 1.22
    (v1.7 .. v1.9) also write \\b and \\f as \\u0008 and \\u000c.
    """
    out = orjson.dumps(value)
    for raw, escaped in _HTML_ESCAPES + _LINE_SEPARATORS:
        if raw in out:
            out = out.replace(raw, escaped)
    if RELEASE_GO[normalize_release(release)] < "1.22" and (b"\\b" in out or b"\\f" in out):
        pairs = {b"b": b"\\u0008", b"f": b"\\u000c"}
        out = _ESCAPE_PAIR.sub(lambda m: pairs.get(m.group(1), m.group(0)), out)
    return out


GO_ZERO_TIME: Final = "0001-01-01T00:00:00Z"
"""time.Time zero value as encoding/json writes it (NodeUsage.MetricsTime)."""

# --------------------------------------------------------------------------------------------- resource.Quantity


def parse_quantity(text: str) -> Fraction:
    """The exact value of a Kubernetes quantity string ("192", "1536Gi", "500m", "3456736289398", "1e3"), read with
    the grammar admission and the planner use (`planner.read_quantity`)."""
    amount = read_quantity(text)
    if isinstance(amount, str):
        raise ValueError(f"quantity: {text!r} {amount}")
    return amount


def _round_up(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def quantity_milli_value(text: str) -> int:
    """resource.Quantity.MilliValue(): value x 1000 rounded up."""
    return _round_up(parse_quantity(text) * 1000)


def quantity_value(text: str) -> int:
    """resource.Quantity.Value(): value rounded up."""
    return _round_up(parse_quantity(text))


__all__ = [
    "GO_ZERO_TIME",
    "go_float_text",
    "go_json",
    "go_number",
    "parse_quantity",
    "quantity_milli_value",
    "quantity_value",
]
