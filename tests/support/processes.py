"""Processes by their ids, read from /proc: who started whom, who still runs, and killing a parent."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

GONE_WITHIN_S = 5.0
"""How long the children of a killed process may take to end."""


def children(pid: int) -> set[int]:
    """Processes whose parent is `pid` (from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.add(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return found


def descendants(pid: int) -> set[int]:
    """Children of `pid`, theirs, and so on."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children(todo.pop()) - found:
            found.add(child)
            todo.append(child)
    return found


def running(pid: int) -> bool:
    """The process exists and has not exited (a zombie waiting to be reaped has)."""
    try:
        return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]) != "Z"
    except OSError:
        return False


def left_after_kill(parent: int, processes: set[int]) -> set[int]:
    """SIGKILL `parent`; the `processes` still running GONE_WITHIN_S later (its caller reaps the parent)."""
    os.kill(parent, signal.SIGKILL)
    deadline = time.monotonic() + GONE_WITHIN_S
    while time.monotonic() < deadline and any(running(pid) for pid in processes):
        time.sleep(0.05)
    return {pid for pid in processes if running(pid)}


def kill_all(processes: set[int]) -> None:
    for pid in processes:
        if running(pid):
            os.kill(pid, signal.SIGKILL)
