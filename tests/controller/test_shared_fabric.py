"""The controller plans every route-planned job around the jobs already running on the fabric: from their rank-table
ConfigMaps alone (rebuilt by a new leader), freed when a job goes, committed so that two plans made at once never
claim the same links, and counting a job whose routes cannot be read as unsteered."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from emulation.cluster import NS, add_job, make_job, make_pod
from planner import FabricLedger, fabric_ledger, load_hash_model, read_running_job, topology_from_nodes
from tests.support.controller import Harness, fast_settings, running_controller, wait_for
from webhook.common.names import DATA_HASH_ANNOTATION
from webhook.common.rank_configmap import payload_hash, plan_files
from webhook.common.settings import Settings, load_settings

MODEL = """apiVersion: ringroute.io/v1alpha1
kind: HashModel
tiers:
  leaf: {function: crc32c, seed: 0x5eed, bucket: low-bits}
"""
# the emulated cluster: 4 leaves x 8 nodes (npu-0 .. npu-31), 8 NICs, 64 uplinks a leaf (1:1)
JOBS = {
    "first": ["npu-0", "npu-8", "npu-16", "npu-24"],
    "second": ["npu-1", "npu-9", "npu-17", "npu-25"],
    "third": ["npu-2", "npu-10", "npu-18", "npu-26"],
}


def shared_settings(tmp_path: Path, qps: int = 1) -> Settings:
    (tmp_path / "hash-model.yaml").write_text(MODEL, encoding="utf-8")
    (tmp_path / "settings.yaml").write_text(
        f"planning: {{routing: pinned, qpsPerConnection: {qps}}}\ntopology: {{hashModelFile: hash-model.yaml}}\n",
        encoding="utf-8",
    )
    loaded = load_settings(tmp_path / "settings.yaml")
    return msgspec.structs.replace(loaded, controller=fast_settings().controller)


async def start(h: Harness, name: str, *, wait: bool = True) -> dict[str, Any]:
    job = make_job(name, len(JOBS[name]))
    await add_job(h.server, job)
    for i, node in enumerate(JOBS[name]):
        await h.server.apply("pods", make_pod(job, i, node))
    if wait:
        await h.wait_status(name, "completed", timeout_s=30)
    return job


def truth(h: Harness, names: list[str]) -> FabricLedger:
    """Every named job's queue pairs, read from its ConfigMap as the ledger reads it, through the hash model."""
    profile = h.settings.profiles[0]
    jobs = []
    for name in names:
        configmap = h.configmap(name)
        assert configmap is not None
        jobs.append(read_running_job(plan_files(configmap, profile), key=name))
    topology = topology_from_nodes(h.server.list("nodes"), h.settings.topology.label_keys, h.settings.topology.fabric)
    return fabric_ledger(jobs, topology, load_hash_model(MODEL))


def uplinks(ledger: FabricLedger, name: str) -> set[str]:
    return {ledger.links.name(int(link)).render() for link in ledger.jobs[name].links}


@contextlib.asynccontextmanager
async def shared(tmp_path: Path, qps: int = 1, **kwargs: Any) -> AsyncIterator[Harness]:
    async with running_controller(settings=shared_settings(tmp_path, qps), **kwargs) as h:
        yield h


@pytest.mark.parametrize("qps", [1, 4])
async def test_a_job_is_planned_around_the_running_one_and_their_links_never_meet(tmp_path: Path, qps: int) -> None:
    async with shared(tmp_path, qps) as h:
        await start(h, "first")
        before = h.data("first")
        await start(h, "second")
        ledger = truth(h, ["first", "second"])
        assert ledger.report().max_link_load == pytest.approx(1.0 / qps)
        assert not uplinks(ledger, "first") & uplinks(ledger, "second"), "no link carries both jobs"
        assert h.data("first") == before, "the running job's table and ports are never rewritten"
        report = json.loads(h.data("second")["ringroute-plan.json"])
        assert report["fabric"]["other_jobs"] == 1
        assert report["fabric"]["predicted_busbw"] == 1.0
        await wait_for(lambda: any(e["involvedObject"]["name"] == "second" for e in h.events("RankTableCompleted")))
        completed = [e for e in h.events("RankTableCompleted") if e["involvedObject"]["name"] == "second"]
        assert "on the shared fabric: busiest link" in completed[0]["message"]
        value = h.metrics.registry.get_sample_value("ringroute_fabric_job_busbw", {"namespace": NS, "job": "second"})
        assert value == 1.0
        assert h.metrics.registry.get_sample_value("ringroute_fabric_max_link_load") == pytest.approx(1.0 / qps)


async def test_the_links_of_a_deleted_job_are_free_for_the_next_one(tmp_path: Path) -> None:
    async with shared(tmp_path) as h:
        await start(h, "first")
        await start(h, "second")
        used_by_first = uplinks(truth(h, ["first"]), "first")
        await h.server.remove("jobs", NS, "first")
        await wait_for(lambda: h.configmap("first") is None)
        await wait_for(lambda: h.controller.tables.ledger.nodes_of("team-a/first") == ())
        await start(h, "third")
        ledger = truth(h, ["second", "third"])
        assert uplinks(ledger, "third") & used_by_first, "the lowest-numbered spines, freed, are taken again"
        assert not uplinks(ledger, "third") & uplinks(ledger, "second")


async def test_a_new_leader_rebuilds_the_ledger_and_plans_around_the_running_jobs(tmp_path: Path) -> None:
    settings = shared_settings(tmp_path)
    async with running_controller(settings=settings) as h:
        await start(h, "first")
        # the leader goes; a new one (a new controller, its caches and ledger built from nothing) takes over
        h.controller.is_leader = lambda: False
        from webhook.controller.reconciler import Controller

        successor = Controller(settings, h.repo, h.metrics, pending_event_interval_s=0.0)
        task = asyncio.create_task(successor.run())
        try:
            await wait_for(lambda: successor.tables.ledger.ready, timeout_s=15)
            ledger = successor.tables.ledger.snapshot()
            assert ledger is not None
            assert list(ledger.jobs) == ["team-a/first"]
            h.controller = successor
            await start(h, "second")
            found = truth(h, ["first", "second"])
            assert found.report().max_link_load == 1.0
            assert not uplinks(found, "first") & uplinks(found, "second")
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_two_jobs_whose_tables_complete_together_do_not_collide(tmp_path: Path) -> None:
    async with shared(tmp_path, workers=2) as h:
        await asyncio.gather(start(h, "first", wait=False), start(h, "second", wait=False))
        await h.wait_status("first", "completed", timeout_s=30)
        await h.wait_status("second", "completed", timeout_s=30)
        await h.settle()
        ledger = truth(h, ["first", "second"])
        assert ledger.report().max_link_load == 1.0
        assert not uplinks(ledger, "first") & uplinks(ledger, "second")


async def test_a_running_job_whose_routes_cannot_be_read_counts_as_unsteered(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with shared(tmp_path) as h:
        await start(h, "first")

        def corrupt(configmap: dict[str, Any]) -> None:
            # as an older release might have left it: its own write (the data hash matches), routes unreadable
            configmap["data"]["routes.json"] = "{not json"
            configmap["data"]["MultiQpSrcPort.cfg"] = "garbage\n"
            sha = payload_hash(configmap["data"], configmap.get("binaryData"))
            configmap["metadata"]["annotations"][DATA_HASH_ANNOTATION] = sha

        await h.server.mutate("configmaps", NS, "configmap1980-first", corrupt)
        await wait_for(lambda: any("fabric_job_unsteered job=team-a/first" in r.getMessage() for r in caplog.records))
        await start(h, "second")
        await wait_for(lambda: h.controller.tables.ledger.nodes_of("team-a/second") != ())  # put after the write
        ledger = h.controller.tables.ledger.snapshot()
        assert ledger is not None
        assert ledger.jobs["team-a/first"].delivery == "ecmp"
        assert ledger.jobs["team-a/second"].delivery == "hashed"
        assert h.data("first")["routes.json"] == "{not json", "never rewritten"
        report = json.loads(h.data("second")["ringroute-plan.json"])
        assert report["steering"]["mode"] == "steered"
        # the first job's flows spread evenly over the spines: 8 flows over 64 uplinks of a leaf
        assert report["fabric"]["other_jobs_load"] == pytest.approx(8 / 64)


@pytest.mark.parametrize(
    "damage",
    [
        {"ringroute-plan.json": "[" * 100_000 + "]" * 100_000},
        {
            "ringroute-state.json": '{"servers": "²"}',
            "jobstart_hccl.json": '{"status": "completed", "server_count": "²"}',
        },
    ],
    ids=["nested-100000-deep", "superscript-two"],
)
async def test_a_running_jobs_configmap_edited_into_nonsense_is_left_out_and_the_ledger_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: dict[str, str]
) -> None:
    async with shared(tmp_path) as h:
        await start(h, "first")

        def edit(configmap: dict[str, Any]) -> None:
            configmap["data"].update(damage)
            sha = payload_hash(configmap["data"], configmap.get("binaryData"))
            configmap["metadata"]["annotations"][DATA_HASH_ANNOTATION] = sha

        await h.server.mutate("configmaps", NS, "configmap1980-first", edit)
        await wait_for(lambda: any("fabric_job_left_out job=team-a/first" in r.getMessage() for r in caplog.records))
        await start(h, "second")
        await wait_for(lambda: h.controller.tables.ledger.nodes_of("team-a/second") != ())
        assert h.controller.tables.ledger.nodes_of("team-a/first") == (), "left out, not counted"
