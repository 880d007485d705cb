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
from webhook.controller import reconciler, table_planning

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

    monkeypatch.setattr(table_planning, "completed_table", broken)
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

        monkeypatch.setattr(table_planning, "completed_table", failing)

        def disown(configmap: Obj) -> None:
            configmap["metadata"].pop("ownerReferences", None)

        # The controller re-adopts the ConfigMap, which re-plans the table; the planner fails this time.
        await h.server.mutate("configmaps", NS, "configmap1980-keep", disown)
        [failed] = await warnings_naming(h, "RankTableFailed", "the planner refuses")
        assert "the table completed earlier for these pods stays" in failed["message"]
        await h.settle()
        assert h.status("keep") == "completed"
        assert h.data("keep")["jobstart_hccl.json"] == table


def with_device_ip(pod: Obj, position: int, value: str) -> Obj:
    info = json.loads(pod["metadata"]["annotations"][DEVICE_KEY])
    info["devices"][position]["device_ip"] = value
    pod["metadata"]["annotations"][DEVICE_KEY] = json.dumps(info)
    return pod


def with_server_id(pod: Obj, value: str) -> Obj:
    info = json.loads(pod["metadata"]["annotations"][DEVICE_KEY])
    info["server_id"] = value
    pod["metadata"]["annotations"][DEVICE_KEY] = json.dumps(info)
    return pod


def device_ip(pod: Obj, position: int) -> str:
    return str(json.loads(pod["metadata"]["annotations"][DEVICE_KEY])["devices"][position]["device_ip"])


def server_id(pod: Obj) -> str:
    return str(json.loads(pod["metadata"]["annotations"][DEVICE_KEY])["server_id"])


@pytest.mark.parametrize(
    ("spoil", "kind", "names"),
    [
        # pod 1's device 1 takes the IP of its own device 0
        (lambda pods: with_device_ip(pods[1], 1, device_ip(pods[1], 0)), "duplicate-device-ip", ["/etc/hccn.conf"]),
        # pod 2's device 0 takes the IP of pod 0's device 0: both pods are named
        (
            lambda pods: with_device_ip(pods[2], 0, device_ip(pods[0], 0)),
            "duplicate-device-ip",
            [f"{NS}/twice-worker-0", f"{NS}/twice-worker-2", "/etc/hccn.conf"],
        ),
        # pod 2 reports pod 1's server_id
        (
            lambda pods: with_server_id(pods[2], server_id(pods[1])),
            "duplicate-server-id",
            [f"{NS}/twice-worker-1", f"{NS}/twice-worker-2", "check the device plugin"],
        ),
    ],
    ids=["device-ip-within-a-pod", "device-ip-across-pods", "server-id"],
)
async def test_addresses_hccl_would_refuse_are_a_pending_warning_and_the_table_stays_initializing(
    caplog: pytest.LogCaptureFixture, spoil: Any, kind: str, names: list[str]
) -> None:
    caplog.set_level(logging.INFO, logger="ringroute.controller")
    async with running_controller() as h:
        job = make_job("twice", 3)
        await add_job(h.server, job)
        pods = [make_pod(job, i, node) for i, node in enumerate(NODES)]
        spoilt = spoil(pods)
        for pod in pods:
            await h.server.apply("pods", pod)
        [pending, *_] = await warnings_naming(h, "RankTablePending", f"{kind} x1")
        assert pending["type"] == "Warning", "a duplicate address needs a fix: waiting will not help"
        for name in names:
            assert name in pending["message"]
        await h.settle()
        assert h.status("twice") == "initializing"
        assert not h.events("RankTableCompleted")
        assert crashes(caplog) == 0

        index = int(spoilt["metadata"]["name"].rsplit("-", 1)[1])
        await h.server.apply("pods", make_pod(job, index, NODES[index]))  # the device plugin reports it right
        await h.wait_status("twice", "completed")


async def test_a_pod_of_another_job_carrying_this_jobs_name_is_never_in_its_table() -> None:
    async with running_controller() as h:
        job = make_job("shared", 3)
        await add_job(h.server, job)
        other = make_job("shared-copy", 1, route_plan=False)
        await add_job(h.server, other)
        stray = make_pod(other, 0, "npu-25")
        stray["metadata"]["name"] = "shared-worker-9"
        stray["metadata"]["labels"]["volcano.sh/job-name"] = "shared"  # the other job's pod, labelled as this job's
        await h.server.apply("pods", stray)
        for i, node in enumerate(NODES[:2]):
            await h.server.apply("pods", make_pod(job, i, node))
        await wait_for(lambda: any("found 2 of 3 NPU pods" in e["message"] for e in h.events("RankTablePending")))
        pending = [e for e in h.events("RankTablePending") if "found 2 of 3 NPU pods" in e["message"]][-1]
        assert (
            f"; left out as pods of another job: pod {NS}/shared-worker-9: other-job-uid: owned by job UID "
            f"{other['metadata']['uid']}, not {job['metadata']['uid']} (an earlier Job)"
        ) in pending["message"]
        await h.settle()
        assert h.status("shared") == "initializing", "the other job's pod does not make the count"

        await h.server.apply("pods", make_pod(job, 2, NODES[2]))
        await h.wait_status("shared", "completed")
        table = json.loads(h.data("shared")["jobstart_hccl.json"])
        assert table["server_count"] == "3"
        assert "shared-worker-9" not in h.data("shared")["ranks.env"]
