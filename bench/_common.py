"""Helpers shared by the bench scripts: JSON-line output and peak memory."""

from __future__ import annotations

import contextlib
import json
import math
import os
import resource
import signal
import subprocess
import sys
from typing import Any


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB.

    Reads VmHWM from /proc (reset by exec, so a child started by subprocess reports only its own peak);
    falls back to ru_maxrss, which Linux carries over from the forking parent.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024.0, 1)
    except OSError:
        pass
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


def stop_process_group(process: subprocess.Popen[bytes], timeout_s: float) -> None:
    """SIGTERM the process group `process` leads (started with start_new_session=True); SIGKILL it after
    `timeout_s`."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
