"""Wrong tables are never written as completed: pods the planner cannot use are a RankTablePending Warning that
names the pod and the fix, the table stays "initializing", a failure never turns into a retry loop, and a table
completed for the pods as they are is never lost to a failure of ringroute's own."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from emulation.cluster import DEVICE_KEY, NS, add_job, make_job, make_pod
from planner import InputError
from tests.support.controller import Harness, running_controller, wait_for
from webhook.controller import reconciler

NODES = ["npu-0", "npu-9", "npu-17"]
Obj = dict[str, Any]


def crashes(caplog: pytest.LogCaptureFixture) -> int:
    return sum("event=reconcile_crashed" in r.getMessage() for r in caplog.records)


async def warnings_naming(h: Harness, reason: str, text: str) -> list[Obj]:
    await wait_for(lambda: any(text in e["message"] for e in h.events(reason)))
    return [e for e in h.events(reason) if text in e["message"]]


def with_task_index(pod: Obj, value: str) -> Obj:
    pod["metadata"]["labels"]["volcano.sh/task-index"] = value
    return pod


def with_device_id(pod: Obj, position: int, value: str) -> Obj:
    info = json.loads(pod["metadata"]["annotations"][DEVICE_KEY])
    info["devices"][position]["device_id"] = value
    pod["metadata"]["annotations"][DEVICE_KEY] = json.dumps(info)
    return pod


@pytest.mark.parametrize(
    ("spoil", "where"),
    [
        (lambda pod: with_task_index(pod, "²"), "task index"),
        (lambda pod: with_device_id(pod, 3, "²"), "device id"),
    ],
    ids=["task-index", "device-id"],
)
async def test_a_superscript_digit_is_a_pending_warning_naming_the_pod_and_never_a_crash_loop(
    caplog: pytest.LogCaptureFixture, spoil: Any, where: str
) -> None:
    caplog.set_level(logging.INFO, logger="ringroute.controller")
    async with running_controller() as h:
        job = make_job("super", 3)
        await add_job(h.server, job)
        for i, node in enumerate(NODES):
            pod = make_pod(job, i, node)
            await h.server.apply("pods", spoil(pod) if i == 1 else pod)
        [pending, *_] = await warnings_naming(h, "RankTablePending", f"pod {NS}/super-worker-1")
        assert pending["type"] == "Warning", f"a bad {where} needs a fix: waiting will not help"
        assert "'²'" in pending["message"]
        await h.settle()
        assert h.status("super") == "initializing"
        assert crashes(caplog) == 0
        reconciles = reconciles_done(h)
        await h.settle(0.5)
        assert reconciles_done(h) == reconciles, "nothing changed, so nothing is retried"

        await h.server.apply("pods", make_pod(job, 1, NODES[1]))
        await h.wait_status("super", "completed")


def reconciles_done(h: Harness) -> float:
    return h.metrics.registry.get_sample_value("ringroute_reconcile_seconds_count") or 0.0


async def test_an_unexpected_failure_is_a_warning_and_is_retried_a_few_times_only(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("planner bug")

    monkeypatch.setattr(reconciler, "plan_table", broken)
    monkeypatch.setattr(reconciler, "BACKOFF_S", (0.01, 0.05))
    caplog.set_level(logging.INFO, logger="ringroute.controller")
    async with running_controller() as h:
        job = make_job("bug", 3)
        await add_job(h.server, job)
        for i, node in enumerate(NODES):
            await h.server.apply("pods", make_pod(job, i, node))
        [failed] = await warnings_naming(
            h, "RankTableFailed", "reconcile failed unexpectedly (RuntimeError: planner bug)"
        )
        assert failed["type"] == "Warning"
        await wait_for(lambda: crashes(caplog) == reconciler.CRASH_RETRIES + 1)
        await h.settle(0.5)
        assert crashes(caplog) == reconciler.CRASH_RETRIES + 1, "no crash loop"
        assert len(h.events("RankTableFailed")) == 1, "one Event for one failure"
        assert h.status("bug") == "initializing"

        monkeypatch.undo()
        await h.server.apply("pods", make_pod(job, 2, NODES[2]))
        await h.wait_status("bug", "completed")


async def test_a_planning_failure_keeps_a_table_completed_for_the_same_pods(monkeypatch: pytest.MonkeyPatch) -> None:
    async with running_controller() as h:
        job = make_job("keep", 3)
        await add_job(h.server, job)
        for i, node in enumerate(NODES):
            await h.server.apply("pods", make_pod(job, i, node))
        await h.wait_status("keep", "completed")
        table = h.data("keep")["jobstart_hccl.json"]

        def failing(*_args: Any, **_kwargs: Any) -> Any:
            raise InputError("the planner refuses")

        monkeypatch.setattr(reconciler, "plan_table", failing)

        def disown(configmap: Obj) -> None:
            configmap["metadata"].pop("ownerReferences", None)

        # The controller re-adopts the ConfigMap, which re-plans the table; the planner fails this time.
        await h.server.mutate("configmaps", NS, "configmap1980-keep", disown)
        [failed] = await warnings_naming(h, "RankTableFailed", "the planner refuses")
        assert "the table completed earlier for these pods stays" in failed["message"]
        await h.settle()
        assert h.status("keep") == "completed"
        assert h.data("keep")["jobstart_hccl.json"] == table
