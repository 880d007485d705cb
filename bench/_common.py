"""Helpers shared by the bench scripts: JSON-line output and peak memory."""

from __future__ import annotations

import json
import math
import resource
import sys
from typing import Any


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports ru_maxrss in KiB)."""
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(kib / 1024.0, 1)


def _clean(value: Any) -> Any:
    """JSON-safe copy: floats rounded to 4 significant decimals, inf/nan as strings."""
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return round(value, 4)
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def emit(record: dict[str, Any]) -> None:
    """Print one JSON line to stdout and flush, so partial runs still leave complete lines."""
    sys.stdout.write(json.dumps(_clean(record), sort_keys=False) + "\n")
    sys.stdout.flush()
