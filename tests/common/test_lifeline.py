"""Children end with the process that started them, however it ends: `kill -9` of a process that runs a plan in
its planning process leaves no process behind (the planning process, multiprocessing's resource tracker)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.support.processes import descendants, kill_all, left_after_kill, running
from webhook.common.lifeline import end_with_parent

ROOT = Path(__file__).resolve().parents[2]


PLANNING_PARENT = """
import asyncio, sys
from tests.controller import worker_functions
from webhook.controller.isolation import PlanningProcess

async def main() -> None:
    planning = PlanningProcess(memory_limit_mib=256, timeout_s=None)
    await asyncio.to_thread(planning.start)  # from a thread, as the controller starts it
    await planning.call(worker_functions.plan_forever, sys.argv[1])

asyncio.run(main())
"""


def test_a_planning_process_busy_with_a_plan_ends_within_5_s_of_its_parent_being_killed(tmp_path: Path) -> None:
    marker = tmp_path / "planning.pid"
    parent = subprocess.Popen([sys.executable, "-c", PLANNING_PARENT, str(marker)], cwd=ROOT)
    processes: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while not (marker.exists() and marker.read_text()):
            assert parent.poll() is None, "the parent exited"
            assert time.monotonic() < deadline, "the plan did not start"
            time.sleep(0.05)
        planning = int(marker.read_text())
        processes = descendants(parent.pid)
        assert planning in processes
        assert len(processes) == 2, "the planning process and multiprocessing's resource tracker"
        assert all(running(pid) for pid in processes)
        assert left_after_kill(parent.pid, processes) == set()
        parent.wait(5)
    finally:
        if parent.poll() is None:
            parent.kill()
        kill_all(processes)


def test_outside_a_spawned_child_ending_with_the_parent_does_nothing() -> None:
    end_with_parent(kernel_signal=True)  # the test process has no multiprocessing parent: nothing to watch
    assert running(os.getpid())
