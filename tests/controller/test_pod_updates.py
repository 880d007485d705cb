"""After each rank-table write the controller annotates the table's pods, so kubelet rewrites their table file at
once: every pod of the job gets the write's version, in the background, and a pod that is gone or refuses the patch
(403, 404, 409, 422) never stops the table or the other pods. Against the emulated API server, which answers pod
patches as a v1.36 API server does (measured: a patch naming another UID is a 422, a patch that changes nothing
stores nothing)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from emulation.apiserver import AdmissionWebhook, FakeApiServer, Fault
from emulation.cluster import NS, add_job, cluster_nodes, make_job, make_pod
from tests.support.controller import Harness, fast_settings, running_controller, wait_for
from webhook.common.metrics import Metrics
from webhook.common.names import DATA_HASH_ANNOTATION, RANK_TABLE_VERSION_ANNOTATION
from webhook.controller.reconciler import Controller

Obj = dict[str, Any]
NODES = ["npu-0", "npu-8", "npu-16"]


def pod_version(server: FakeApiServer, name: str) -> str | None:
    pod = server.get("pods", NS, name)
    return None if pod is None else (pod["metadata"].get("annotations") or {}).get(RANK_TABLE_VERSION_ANNOTATION)


def write_version(h: Harness, job: str) -> str:
    """The version the controller's last table write should leave on every pod."""
    configmap = h.configmap(job)
    assert configmap is not None
    meta = configmap["metadata"]
    return f"{meta['resourceVersion']}-{meta['annotations'][DATA_HASH_ANNOTATION][:16]}"


def updates(h: Harness, outcome: str) -> float:
    return h.metrics.registry.get_sample_value("ringroute_pod_updates_total", {"outcome": outcome}) or 0.0


async def placed_job(h: Harness, name: str = "train", *, route_plan: bool = True) -> Obj:
    job = make_job(name, len(NODES), route_plan=route_plan)
    await add_job(h.server, job)
    await h.wait_status(name, "initializing")
    for index, node in enumerate(NODES):
        await h.server.apply("pods", make_pod(job, index, node))
    return job


async def test_every_pod_of_a_completed_table_carries_the_version_of_that_write() -> None:
    async with running_controller() as h:
        await placed_job(h)
        await h.wait_status("train", "completed")
        version = write_version(h, "train")
        names = [f"train-worker-{i}" for i in range(3)]
        await wait_for(lambda: all(pod_version(h.server, n) == version for n in names))
        (event,) = await h.wait_events("RankTablePodsUpdated")
        assert event["type"] == "Normal"
        assert event["message"].startswith("table written -> last pod updated ")
        assert f"3 of 3 pods annotated {RANK_TABLE_VERSION_ANNOTATION}={version}" in event["message"]
        assert updates(h, "updated") == 3
        assert h.metrics.registry.get_sample_value("ringroute_rank_table_pods_updated_seconds_count") == 1
        patches = [r for r in h.server.writes("pods") if r.method == "PATCH"]
        assert sorted(r.path.rsplit("/", 1)[1] for r in patches) == names, "one patch per pod, pods only"
        await h.settle()
        assert [r for r in h.server.writes("pods") if r.method == "PATCH"] == patches, "the pods' own events add none"


async def test_a_replacement_pod_and_the_survivors_get_the_new_tables_version() -> None:
    async with running_controller() as h:
        job = await placed_job(h)
        await h.wait_status("train", "completed")
        first = write_version(h, "train")
        await wait_for(lambda: pod_version(h.server, "train-worker-2") == first)
        await h.server.remove("pods", NS, "train-worker-2")
        await h.wait_status("train", "initializing")
        await h.server.apply("pods", make_pod(job, 2, "npu-24"))
        await h.wait_status("train", "completed")
        second = write_version(h, "train")
        assert second != first
        await wait_for(lambda: all(pod_version(h.server, f"train-worker-{i}") == second for i in range(3)))


async def test_the_same_table_written_again_still_updates_the_pods() -> None:
    """A patch that changes nothing is no update (no event reaches kubelet), so each write has its own version even
    when the table's data is the same as before (pod-index order: no plan report with its timings)."""
    async with running_controller() as h:
        job = await placed_job(h, route_plan=False)
        await h.wait_status("train", "completed")
        first = write_version(h, "train")
        await wait_for(lambda: pod_version(h.server, "train-worker-1") == first)
        await h.server.remove("pods", NS, "train-worker-1")
        await h.wait_status("train", "initializing")
        await h.server.apply("pods", make_pod(job, 1, NODES[1]))  # the same pod again: the same data
        await h.wait_status("train", "completed")
        second = write_version(h, "train")
        assert second.split("-")[1] == first.split("-")[1], "the same data"
        assert second != first
        await wait_for(lambda: all(pod_version(h.server, f"train-worker-{i}") == second for i in range(3)))


async def test_pod_updates_never_hold_up_the_table_write() -> None:
    async with running_controller() as h:
        h.server.faults.append(Fault("PATCH", "/pods/", status=0, delay_s=1.5, times=-1))
        await placed_job(h)
        await h.wait_status("train", "completed", timeout_s=1.0)
        assert h.controller.pod_updates.running() == 1
        assert pod_version(h.server, "train-worker-0") is None
        await h.wait_events("RankTableCompleted", timeout_s=1.0)
        await wait_for(lambda: pod_version(h.server, "train-worker-0") is not None, timeout_s=5)


async def test_a_pod_whose_update_admission_denies_never_stops_the_table_or_the_other_pods() -> None:
    settings = fast_settings(pod_update_retry_s=1.5)
    async with running_controller(settings=settings) as h:

        async def deny_worker_1(review: dict[str, Any]) -> dict[str, Any]:
            request = review["request"]
            if request["operation"] == "UPDATE" and request["name"] == "train-worker-1":
                return {"allowed": False, "status": {"message": "pods of team-a are immutable"}}
            return {"allowed": True}

        h.server.admission["pods"] = [AdmissionWebhook("policy.example.com", deny_worker_1)]
        await placed_job(h)
        await h.wait_status("train", "completed")
        version = write_version(h, "train")
        await wait_for(lambda: pod_version(h.server, "train-worker-2") == version)
        assert pod_version(h.server, "train-worker-0") == version
        (event,) = await h.wait_events("RankTablePodsUpdated", timeout_s=5)
        assert event["type"] == "Warning"
        message = event["message"]
        assert "2 of 3 pods annotated" in message
        assert (
            "1 not updated after retrying for up to 1.5 s (pod team-a/train-worker-1: patch pods: HTTP 403" in message
        )
        assert "pods of team-a are immutable" in message
        assert "ringroute needs patch on pods" in message
        assert pod_version(h.server, "train-worker-1") is None
        assert updates(h, "retried") >= 2
        assert updates(h, "given_up") == 1
        assert h.status("train") == "completed"


async def test_a_pod_that_answers_409_is_retried_until_it_is_updated() -> None:
    async with running_controller() as h:
        h.server.faults.append(Fault("PATCH", "/pods/train-worker-0", status=409, times=2))
        await placed_job(h)
        await h.wait_status("train", "completed")
        version = write_version(h, "train")
        await wait_for(lambda: all(pod_version(h.server, f"train-worker-{i}") == version for i in range(3)))
        assert updates(h, "retried") == 2
        (event,) = await h.wait_events("RankTablePodsUpdated")
        assert event["type"] == "Normal"
        assert "3 of 3 pods" in event["message"]


async def test_a_pod_deleted_before_its_update_is_gone_and_the_other_pods_are_updated() -> None:
    async with running_controller() as h:
        # The patch of worker-1 waits on the way in; the pod is deleted meanwhile, so it finds no pod (404).
        h.server.faults.append(Fault("PATCH", "/pods/train-worker-1", status=0, delay_s=0.6))
        await placed_job(h)
        await h.wait_status("train", "completed")
        version = write_version(h, "train")
        await h.server.remove("pods", NS, "train-worker-1")
        await wait_for(lambda: updates(h, "gone") == 1)
        assert pod_version(h.server, "train-worker-0") == version
        assert pod_version(h.server, "train-worker-2") == version
        (event,) = await h.wait_events("RankTablePodsUpdated")
        assert "2 of 3 pods annotated" in event["message"]
        assert "1 gone meanwhile (team-a/train-worker-1)" in event["message"]
        assert [r.status for r in h.server.requests if r.method == "PATCH" and "train-worker-1" in r.path] == [404]
        await h.wait_status("train", "initializing")  # the lost pod takes the table back, as always


async def test_a_pod_replaced_under_the_same_name_before_its_update_is_not_patched() -> None:
    async with running_controller() as h:
        h.server.faults.append(Fault("PATCH", "/pods/train-worker-1", status=0, delay_s=0.6))
        job = await placed_job(h)
        await h.wait_status("train", "completed")
        await h.server.remove("pods", NS, "train-worker-1")
        # Volcano's replacement takes the name before the delayed patch arrives (no device info yet: no new table).
        await h.server.apply("pods", make_pod(job, 1, "npu-24", annotated=False))
        await wait_for(lambda: updates(h, "gone") == 1)
        first = next(r for r in h.server.requests if r.method == "PATCH" and "train-worker-1" in r.path)
        assert first.status == 422, "the UID in the patch keeps it off the new pod"
        assert pod_version(h.server, "train-worker-1") is None
        await h.server.apply("pods", make_pod(job, 1, "npu-24"))
        # The replacement completes a new table, and that write updates every pod, the new one included.
        await h.wait_status("train", "completed")
        version = write_version(h, "train")
        await wait_for(lambda: all(pod_version(h.server, f"train-worker-{i}") == version for i in range(3)))


@contextlib.asynccontextmanager
async def controller_on(server: FakeApiServer, *, pod_updates: bool) -> AsyncIterator[Metrics]:
    """A controller (one replica, leading) on an existing emulated API server while the block runs."""
    metrics = Metrics()
    async with server.repository(metrics, request_timeout_s=2.0) as repo:
        controller = Controller(fast_settings(pod_updates=pod_updates), repo, metrics, pending_event_interval_s=0)
        task = asyncio.create_task(controller.run())
        try:
            yield metrics
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_a_new_leader_updates_the_pods_an_earlier_leader_left_behind() -> None:
    async with FakeApiServer(bookmark_interval_s=0.5) as server:
        for node_object in cluster_nodes(4, 8):
            await server.apply("nodes", node_object)
        job = make_job("train", 3)
        await add_job(server, job)
        for index, node in enumerate(NODES):
            await server.apply("pods", make_pod(job, index, node))

        def table() -> Obj:
            return server.get("configmaps", NS, "configmap1980-train") or {}

        async with controller_on(server, pod_updates=False):
            await wait_for(lambda: '"completed"' in table().get("data", {}).get("jobstart_hccl.json", ""))
            await asyncio.sleep(0.3)
        assert not [r for r in server.requests if r.method == "PATCH"], "pod updates switched off"
        meta = table()["metadata"]
        version = f"{meta['resourceVersion']}-{meta['annotations'][DATA_HASH_ANNOTATION][:16]}"
        names = [f"train-worker-{i}" for i in range(3)]

        def reported() -> list[Obj]:
            return [e for e in server.list("events", NS) if e["reason"] == "RankTablePodsUpdated"]

        async with controller_on(server, pod_updates=True) as metrics:
            await wait_for(lambda: all(pod_version(server, n) == version for n in names))
            await wait_for(lambda: bool(reported()))
        assert reported()[0]["message"].startswith("pods updated for a table an earlier leader wrote: 3 of 3 pods")
        assert metrics.registry.get_sample_value("ringroute_rank_table_pods_updated_seconds_count") == 0
        assert table()["metadata"]["resourceVersion"] == meta["resourceVersion"], "the table itself is left alone"


async def test_pods_on_nodes_with_a_cache_ttl_are_updated_again_once_it_has_passed() -> None:
    """kubelets of the `Cache` strategy may serve the old table from their cache for the node's TTL: the pods there
    get a second update after it, the others none."""
    nodes = cluster_nodes(4, 8)
    for node in nodes:
        if node["metadata"]["name"] in ("npu-0", "npu-8"):
            node["metadata"].setdefault("annotations", {})["node.alpha.kubernetes.io/ttl"] = "1"
    async with running_controller(nodes=nodes) as h:
        await placed_job(h)
        await h.wait_status("train", "completed")
        version = write_version(h, "train")
        await wait_for(lambda: all(pod_version(h.server, f"train-worker-{i}") == version for i in range(3)))
        updated_at = asyncio.get_running_loop().time()
        await wait_for(lambda: pod_version(h.server, "train-worker-1") == f"{version}+ttl1", timeout_s=5)
        assert asyncio.get_running_loop().time() - updated_at > 0.5, "after the TTL, not at once"
        assert pod_version(h.server, "train-worker-0") == f"{version}+ttl1"
        assert pod_version(h.server, "train-worker-2") == version, "a node without a TTL gets one update"
        await h.settle()
        patches = [r for r in h.server.writes("pods") if r.method == "PATCH"]
        assert len(patches) == 5
        assert len(await h.wait_events("RankTablePodsUpdated")) == 1
