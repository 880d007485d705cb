"""Planning in a process of its own: a plan past the memory or time limit fails alone, the caller (the process
that serves admission) carries on, and the controller falls back to a cheaper plan (see test_planning_budget.py)."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import time
from collections.abc import AsyncIterator

import pytest

from emulation.cluster import add_job, make_job, make_pod
from tests.controller import worker_functions
from tests.support.controller import fast_settings, running_controller, wait_for
from webhook.common.settings import Settings, SettingsError, settings_from_mapping
from webhook.controller.isolation import PlanningProcess, PlanningProcessError


@pytest.fixture
async def worker() -> AsyncIterator[PlanningProcess]:
    process = PlanningProcess(memory_limit_mib=256, timeout_s=5.0)
    await asyncio.to_thread(process.start)
    try:
        yield process
    finally:
        process.close()


async def test_a_call_runs_in_another_process_and_its_exception_is_raised_in_the_caller(
    worker: PlanningProcess,
) -> None:
    assert await worker.call(os.getpid) == worker.pid != os.getpid()
    with pytest.raises(ValueError, match="no plan"):
        await worker.call(worker_functions.refuse, "no plan")
    assert await worker.call(worker_functions.allocate, 16) == 16 * 1024 * 1024
    assert worker.starts == 1


async def test_memory_past_the_limit_fails_the_call_not_the_caller(worker: PlanningProcess) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(PlanningProcessError, match=r"more than the 256 MiB of its process"):
        await worker.call(worker_functions.allocate, 1024)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 * 1024, "the caller's memory is its own"
    assert await worker.call(worker_functions.allocate, 64) == 64 * 1024 * 1024, "the worker carries on"
    assert worker.starts == 1


async def test_a_call_past_the_time_limit_is_stopped_and_the_next_one_gets_a_new_process() -> None:
    process = PlanningProcess(memory_limit_mib=256, timeout_s=0.5)
    try:
        started = time.monotonic()
        with pytest.raises(PlanningProcessError, match=r"longer than 0.5 s .*its process was stopped"):
            await process.call(worker_functions.sleep, 60.0)
        assert time.monotonic() - started < 30, "stopped, not waited for"
        assert await process.call(worker_functions.sleep, 0.0) == 0.0
        assert process.starts == 2
    finally:
        process.close()


async def test_a_worker_killed_like_the_oom_killer_does_is_reported_and_replaced(worker: PlanningProcess) -> None:
    with pytest.raises(PlanningProcessError, match=r"died \(killed by signal 9, as the kernel's OOM killer does"):
        await worker.call(worker_functions.die)
    assert await worker.call(os.getpid) == worker.pid
    assert worker.starts == 2


async def test_closing_stops_the_worker_and_a_waiting_call() -> None:
    process = PlanningProcess(memory_limit_mib=256, timeout_s=60.0)
    await asyncio.to_thread(process.start)
    waiting = asyncio.create_task(process.call(worker_functions.sleep, 60.0))
    await asyncio.sleep(0.2)
    process.close()
    with pytest.raises(PlanningProcessError, match="stopped with the controller"):
        await asyncio.wait_for(waiting, 10)
    assert process.pid is None


async def test_a_route_planned_job_is_planned_in_the_planning_process() -> None:
    async with running_controller(settings=fast_settings(planning_process=True)) as h:
        job = make_job("isolated", 4)
        await add_job(h.server, job)
        for i, node in enumerate(["npu-0", "npu-8", "npu-16", "npu-24"]):
            await h.server.apply("pods", make_pod(job, i, node))
        await h.wait_status("isolated", "completed", timeout_s=30)
        assert "ringroute-plan.json" in h.data("isolated"), "route planned"
        assert h.controller.tables.process is not None
        assert h.controller.tables.process.starts == 1
        assert h.controller.tables.process.pid not in (None, os.getpid())
        [completed] = await h.wait_events("RankTableCompleted")
        assert completed["message"].startswith("4 servers, 32 devices; ")
        assert not h.events("RankTableFailed")


async def test_a_plan_past_the_time_limit_at_every_level_is_written_in_pod_index_order_with_a_warning() -> None:
    settings = fast_settings(planning_process=True, planning_timeout_s=0.01)
    async with running_controller(settings=settings) as h:
        # every level takes 50 ms in this planning process: the 10 ms limit stops each one
        started = h.controller.tables.process
        assert started is not None
        h.controller.tables.process = PlanningProcess(
            memory_limit_mib=512, timeout_s=0.01, preload=(*started.preload, "tests.controller.slow_planner")
        )
        started.close()
        job = make_job("slow", 4)
        await add_job(h.server, job)
        for i, node in enumerate(["npu-0", "npu-8", "npu-16", "npu-24"]):
            await h.server.apply("pods", make_pod(job, i, node))
        await h.wait_status("slow", "completed", timeout_s=30)
        assert h.ranks("slow") == {f"slow-worker-{i}": i for i in range(4)}
        stopped = "planning took longer than 0.01 s (controller.planningTimeoutS); its process was stopped"
        report = json.loads(h.data("slow")["ringroute-plan.json"])
        assert report["plan_level"] == "pod-index"
        assert report["fallback"]["reasons"] == [f"ring/ecmp plan: {stopped}", f"ring order alone: {stopped}"]
        [fallback, *_] = await h.wait_events("RankTableFallback")
        assert fallback["type"] == "Warning"
        assert fallback["message"] == (
            f"planned with pod-index order instead of the ring/ecmp plan: ring/ecmp plan: {stopped}; "
            f"ring order alone: {stopped}"
        )
        assert not h.events("RankTableFailed"), "a budget fallback is not a failure: the table completes"
        [completed, *_] = await h.wait_events("RankTableCompleted")
        assert "ranks in pod-index order, over the planning budget" in completed["message"]
        await wait_for(lambda: h.controller.tables.process is not None and h.controller.tables.process.pid is None)


def test_the_planning_limits_are_settings_checked_at_start_up() -> None:
    settings = settings_from_mapping(
        {"controller": {"planningProcess": False, "planningMemoryLimitMib": 768, "planningTimeoutS": 30}}
    )
    controller = settings.controller
    assert (controller.planning_process, controller.planning_memory_limit_mib, controller.planning_timeout_s) == (
        False,
        768,
        30.0,
    )
    defaults = Settings().controller
    assert (defaults.planning_process, defaults.planning_memory_limit_mib, defaults.planning_timeout_s) == (
        True,
        512,
        60.0,
    )
    with pytest.raises(SettingsError) as refused:
        settings_from_mapping(
            {"controller": {"planningMemoryLimitMib": 64, "planningTimeoutS": 2}, "planning": {"timeLimitS": 5}}
        )
    assert refused.value.problems == (
        "controller.planningMemoryLimitMib: must be at least 192, got 64",
        "controller.planningTimeoutS: must be longer than planning.timeLimitS (5), got 2",
    )
