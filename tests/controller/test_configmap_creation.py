"""The rank-table ConfigMap is created by the controller once the Job is stored, owned by the Job; admission and
jobs that never get stored leave nothing behind. Real kubernetes_asyncio client against the emulated API server."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from emulation.apiserver import FakeApiServer
from emulation.cluster import NS, add_job, cluster_nodes, make_job, make_pod
from tests.support.controller import Harness, admission_chain, fast_settings, running_controller, wait_for
from webhook.common.metrics import Metrics
from webhook.common.names import RANK_TABLE_WRITER_ANNOTATION
from webhook.common.rank_configmap import initial_configmap
from webhook.common.settings import SettingsError, settings_from_mapping
from webhook.controller.reconciler import MAX_DEBOUNCE_FACTOR, Controller
from webhook.kube.client import JOBS, KubeError, KubeRepository

Obj = dict[str, Any]
PROFILE = fast_settings().profiles[0]


@contextlib.asynccontextmanager
async def user_client(h: Harness) -> AsyncIterator[KubeRepository]:
    """A user's kubectl: its requests go through the admission chain."""
    async with h.server.repository(agent="user") as repo:
        yield repo


def job_reference(job: Obj) -> Obj:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": job["metadata"]["name"],
        "uid": job["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


async def test_an_admitted_job_gets_its_configmap_at_once_owned_by_the_job_and_collected_with_it() -> None:
    # A debounce far longer than the wait below: the creation must not wait for the reconcile queue.
    settings = fast_settings(debounce_s=5.0)
    async with running_controller(settings=settings) as h, admission_chain(h.server, settings), user_client(h) as user:
        loop = asyncio.get_running_loop()
        started = loop.time()
        await user.create_object(JOBS, make_job("bert", 4))
        await wait_for(lambda: h.configmap("bert") is not None, timeout_s=1.0)
        assert loop.time() - started < 1.0
        stored = h.server.get("jobs", NS, "bert")
        configmap = h.configmap("bert")
        assert stored is not None
        assert configmap is not None
        volumes = stored["spec"]["tasks"][0]["template"]["spec"]["volumes"]
        assert {"name": "ringroute-config", "configMap": {"name": "configmap1980-bert"}} in volumes
        expected = initial_configmap(stored, PROFILE, settings)
        assert (
            configmap["metadata"]["labels"] == expected["metadata"]["labels"] == {"ring-controller.cce": "ascend-1980"}
        )
        assert configmap["metadata"]["annotations"] == {"ringroute.io/created-by": "ringroute"}
        assert configmap["data"] == expected["data"]
        assert json.loads(configmap["data"]["jobstart_hccl.json"]) == {"status": "initializing"}
        assert configmap["metadata"]["ownerReferences"] == [job_reference(stored)]
        assert h.metrics.configmap_creates.labels("created")._value.get() == 1

        await user.delete_object(JOBS, NS, "bert")
        assert h.configmap("bert") is None, "the garbage collector deletes it with its Job"
        await h.settle(0.3)
        assert h.configmap("bert") is None, "and nothing re-creates it"


async def test_a_job_a_later_admission_step_rejects_leaves_no_configmap_behind() -> None:
    settings = fast_settings()
    async with running_controller(settings=settings) as h, admission_chain(h.server, settings), user_client(h) as user:
        refused = make_job("refused", 3)
        refused["spec"]["queue"] = "no-such-queue"
        with pytest.raises(KubeError, match=r'admission webhook "validatejob\.volcano\.sh" denied') as denied:
            await user.create_object(JOBS, refused)
        assert denied.value.status == 403
        await user.create_object(JOBS, make_job("accepted", 3))
        await wait_for(lambda: h.configmap("accepted") is not None)
        # Watch events arrive in order, so the controller has seen all there is before the accepted job; the
        # longest any job event waits in it is MAX_DEBOUNCE_FACTOR x debounce (0.5 s here, 2 s by default).
        await asyncio.sleep(MAX_DEBOUNCE_FACTOR * settings.controller.debounce_s)
        await h.settle()
        assert h.server.get("jobs", NS, "refused") is None
        assert ("configmaps", NS, "configmap1980-refused") not in h.server.created_at, "never created, not even briefly"
        assert [key for key in h.server.created_at if key[0] == "configmaps"] == [
            ("configmaps", NS, "configmap1980-accepted")
        ]


async def test_a_server_side_dry_run_creates_neither_the_job_nor_its_configmap() -> None:
    settings = fast_settings()
    async with running_controller(settings=settings) as h, admission_chain(h.server, settings), user_client(h) as user:
        answer = await user._call(
            "create jobs", "POST", JOBS.path(NS), query={"dryRun": "All"}, body=make_job("dry", 3)
        )
        assert "ringroute.io/injected" in answer["metadata"]["annotations"], "the dry run shows the mutated job"
        await asyncio.sleep(MAX_DEBOUNCE_FACTOR * settings.controller.debounce_s)
        await h.settle()
        assert h.server.get("jobs", NS, "dry") is None
        assert not [key for key in h.server.created_at if key[0] == "configmaps"]


async def test_a_job_whose_table_the_volcano_plugin_writes_gets_no_configmap_and_no_table_writes() -> None:
    async with running_controller() as h:
        written_by_plugin: Obj = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "configmap1980-vendor-b",
                "namespace": NS,
                "labels": {"ring-controller.cce": "ascend-1980"},
            },
            "data": {"jobstart_hccl.json": '{"status":"completed","server_count":"3"}'},
        }
        await h.server.apply("configmaps", written_by_plugin)
        before = h.configmap("vendor-b")
        since = len(h.server.requests)
        for name, nodes in (("vendor-a", ["npu-0", "npu-8", "npu-16"]), ("vendor-b", ["npu-1", "npu-9", "npu-17"])):
            job = make_job(name, 3)
            job["metadata"]["annotations"] = {RANK_TABLE_WRITER_ANNOTATION: "volcano-plugin"}
            await add_job(h.server, job)
            for index, node in enumerate(nodes):
                await h.server.apply("pods", make_pod(job, index, node))
        await h.settle(0.5)
        assert h.configmap("vendor-a") is None
        assert h.configmap("vendor-b") == before, "the plugin's table is neither adopted nor rewritten"
        assert not h.server.writes(since=since), "no ConfigMap, table or Event writes for these jobs"


async def test_the_creation_never_overwrites_a_configmap_its_cache_has_not_seen_yet() -> None:
    async with running_controller() as h:
        job = make_job("race", 3)
        await add_job(h.server, job)
        for index, node in enumerate(["npu-0", "npu-8", "npu-16"]):
            await h.server.apply("pods", make_pod(job, index, node))
        await h.wait_status("race", "completed")
        await h.settle()
        completed = h.configmap("race")
        # A cache lagging behind the API server, as right after a watch reconnects.
        h.controller.configmaps.store.pop(f"{NS}/configmap1980-race")
        assert await h.controller.keeper.create(f"{NS}/race") is None
        assert h.configmap("race") == completed
        assert h.metrics.configmap_creates.labels("exists")._value.get() == 1


async def test_a_new_leader_leaves_a_completed_table_alone() -> None:
    settings = fast_settings()
    async with FakeApiServer(bookmark_interval_s=0.5) as server:
        for node_object in cluster_nodes(2, 8):
            await server.apply("nodes", node_object)
        job = make_job("kept", 3)
        await add_job(server, job)
        for index, node in enumerate(["npu-0", "npu-8", "npu-9"]):
            await server.apply("pods", make_pod(job, index, node))
        for leader in ("first", "second"):
            async with server.repository(agent=leader) as repo:
                controller = Controller(settings, repo, Metrics(), pending_event_interval_s=0.0)
                task = asyncio.create_task(controller.run())
                await wait_for(
                    lambda: (
                        '"completed"'
                        in (server.get("configmaps", NS, "configmap1980-kept") or {})
                        .get("data", {})
                        .get("jobstart_hccl.json", "")
                    )
                )
                await asyncio.sleep(MAX_DEBOUNCE_FACTOR * settings.controller.debounce_s)
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        assert {r.agent for r in server.writes("configmaps")} == {"first"}, "the second leader wrote nothing"


def existing(name: str, owners: list[Obj], data: dict[str, str]) -> Obj:
    """A rank-table ConfigMap as an older ringroute left it."""
    metadata: Obj = {
        "name": f"configmap1980-{name}",
        "namespace": NS,
        "labels": {"ring-controller.cce": "ascend-1980"},
        "annotations": {"ringroute.io/created-by": "ringroute"},
    }
    if owners:
        metadata["ownerReferences"] = owners
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


@pytest.mark.parametrize("another_controller", [False, True], ids=["unowned", "controlled-by-another-object"])
async def test_an_existing_configmap_is_adopted_as_its_controller_unless_another_object_controls_it(
    another_controller: bool,
) -> None:
    async with running_controller() as h:
        other = await h.server.apply("jobs", {"metadata": {"name": "other", "namespace": NS}})
        owners = [job_reference(other)] if another_controller else []
        job = make_job("old", 3, route_plan=False)
        data = initial_configmap(job, PROFILE, h.settings)["data"]
        await h.server.apply("configmaps", existing("old", owners, data))
        await add_job(h.server, job)
        await h.settle()
        adopted = h.configmap("old")
        assert adopted is not None
        assert adopted["data"] == data
        assert adopted["metadata"]["ownerReferences"] == [
            *owners,
            {**job_reference(job), "controller": not another_controller},
        ]


async def test_a_configmap_an_older_release_owned_without_the_controller_flag_is_left_as_it_is() -> None:
    async with FakeApiServer(bookmark_interval_s=0.5) as server:
        job = make_job("older", 3, route_plan=False)
        await add_job(server, job)
        reference = {**job_reference(job), "controller": False, "blockOwnerDeletion": False}
        data = initial_configmap(job, PROFILE, fast_settings())["data"]
        await server.apply("configmaps", existing("older", [reference], data))
        before = server.get("configmaps", NS, "configmap1980-older")
        async with server.repository() as repo:
            controller = Controller(fast_settings(), repo, Metrics(), pending_event_interval_s=0.0)
            task = asyncio.create_task(controller.run())
            await asyncio.sleep(MAX_DEBOUNCE_FACTOR * fast_settings().controller.debounce_s + 0.3)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        assert server.get("configmaps", NS, "configmap1980-older") == before
        assert not server.writes("configmaps")


def test_configmap_create_workers_below_one_is_refused() -> None:
    with pytest.raises(SettingsError, match="configmapCreateWorkers: must be at least 1"):
        settings_from_mapping({"controller": {"configmapCreateWorkers": 0}})
