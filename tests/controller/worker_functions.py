"""Functions for the planning process's tests to run there (pickled by reference: this module is light to import)."""

from __future__ import annotations

import os
import signal
import time


def allocate(mib: int) -> int:
    """Hold `mib` MiB for a moment; returns how many bytes it got."""
    block = bytearray(mib * 1024 * 1024)
    return len(block)


def sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def refuse(message: str) -> None:
    raise ValueError(message)


def die() -> None:
    """End the process as the kernel's OOM killer would."""
    os.kill(os.getpid(), signal.SIGKILL)


def plan_forever(marker: str) -> None:
    """Stand for a plan that keeps the planning process busy in Python: write the process id to `marker`, then
    compute until killed."""
    with open(marker, "w", encoding="ascii") as file:
        file.write(str(os.getpid()))
    total = 0
    while True:
        total = (total * 31 + 7) % 1_000_003
