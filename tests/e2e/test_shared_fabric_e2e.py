"""On a real API server with real Volcano: route-planned jobs submitted one after another are planned around each
other through the controller's fabric ledger, with a hash model, so their queue pairs never share a link while
each leaf is full to its bound; a deleted job's links are free for the next job; a new leader (the first killed
between two jobs) rebuilds the ledger from the ConfigMaps and its next plan still avoids the running jobs; and two
jobs whose tables complete in the same second do not collide.

24 Node objects `rrfab-NN` in 6 leaves of 4 servers x 8 NICs (32 uplinks a leaf, 1:1), kept Ready by this test,
which also plays kubelet and the device plugin for the pods Volcano binds to them. Every job has 3 pods pinned by
node affinity to one server of 3 leaves, 4 jobs a leaf: each leaf then sends 4 x 8 = 32 cross-leaf flows over its
32 uplinks, so only plans that see each other reach the bound (one flow a link); jobs planned alone all take the
same 8 lowest spines (4 flows a link). Two controllers (leader-elected, short lease) run in this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest

from planner import FabricLedger, fabric_ledger, load_hash_model, read_running_job, topology_from_nodes
from tests.e2e.fake_cluster import FakeNodes, clean_up, job_manifest
from webhook.common.metrics import Metrics
from webhook.common.rank_configmap import plan_files
from webhook.common.settings import ControllerSettings, Settings, load_settings
from webhook.controller.run import run_controller
from webhook.kube.client import CONFIGMAPS, JOBS, NODES, PODS, KubeRepository, connect

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]
PREFIX = "rrfab"
MODEL = """apiVersion: ringroute.io/v1alpha1
kind: HashModel
tiers:
  leaf: {function: crc32c, seed: 0x5eed, bucket: low-bits}
"""
JOB_NODES = {  # one server of three leaves each; four jobs a leaf
    "j1": (0, 4, 8),
    "j2": (1, 5, 9),
    "j3": (2, 6, 10),
    "j4": (3, 7, 11),
    "j5": (12, 16, 20),
    "j6": (13, 17, 21),
}


def leaf_of(index: int) -> str:
    return f"{PREFIX}-leaf-{index // 4}"


def pinned_job(name: str, namespace: str, nodes: tuple[int, ...]) -> Obj:
    """A route-planned job of one pod on each of `nodes` (by node affinity)."""
    hostnames = [f"{PREFIX}-{n:02d}" for n in nodes]
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": hostnames}]}
                ]
            }
        },
        "podAntiAffinity": {  # one pod a node
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"volcano.sh/job-name": name}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        },
    }
    return job_manifest(name, namespace, len(nodes), affinity=affinity)


@dataclass
class Fabric:
    repo: KubeRepository
    namespace: str
    settings: Settings
    controllers: dict[str, tuple[asyncio.Task[None], asyncio.Event, Metrics]]

    async def submit(self, name: str, nodes: tuple[int, ...] | None = None) -> None:
        await self.repo.create_object(JOBS, pinned_job(name, self.namespace, nodes or JOB_NODES[name]))

    async def completed(self, name: str, timeout_s: float = 90.0) -> Obj:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            configmap = await self.repo.get_object(CONFIGMAPS, self.namespace, f"configmap1980-{name}")
            table = json.loads(((configmap or {}).get("data") or {}).get("jobstart_hccl.json", "{}"))
            if configmap is not None and table.get("status") == "completed":
                return configmap
            await asyncio.sleep(0.5)
        raise AssertionError(f"rank table of {self.namespace}/{name} not completed within {timeout_s} s")

    async def truth(self, names: list[str]) -> FabricLedger:
        """The named jobs' queue pairs, read from their ConfigMaps as the ledger reads them, through the model."""
        profile = self.settings.profiles[0]
        jobs = [
            read_running_job(plan_files(await self.completed(name), profile), key=name, ports_first=True)
            for name in names
        ]
        nodes, _ = await self.repo.list_objects(NODES)
        ours = [n for n in nodes if n["metadata"]["name"].startswith(f"{PREFIX}-")]
        topology = topology_from_nodes(ours, ["volcano.sh/tor"], self.settings.topology.fabric)
        return fabric_ledger(jobs, topology, load_hash_model(MODEL))

    async def force_delete_pods(self, name: str) -> None:
        pods, _ = await self.repo.list_objects(PODS, self.namespace, label_selector=f"volcano.sh/job-name={name}")
        for pod in pods:
            path = PODS.path(self.namespace, pod["metadata"]["name"])
            await self.repo._call("delete pod", "DELETE", path, query={"gracePeriodSeconds": 0}, missing_ok=True)

    def start_controller(self, identity: str) -> None:
        stop = asyncio.Event()
        metrics = Metrics()
        task = asyncio.create_task(
            run_controller(self.settings, KubeRepository(self.repo.api, metrics), metrics, identity=identity, stop=stop)
        )
        self.controllers[identity] = (task, stop, metrics)

    def leader_metrics(self) -> Metrics:
        for task, _stop, metrics in self.controllers.values():
            if not task.done() and metrics.registry.get_sample_value("ringroute_leader") == 1.0:
                return metrics
        raise AssertionError("no controller leads")


def links(ledger: FabricLedger, name: str) -> set[str]:
    return {ledger.links.name(int(link)).render() for link in ledger.jobs[name].links}


@contextlib.asynccontextmanager
async def shared_fabric() -> AsyncIterator[Fabric]:
    api = await connect(os.environ["RINGROUTE_E2E_KUBECONFIG"])
    assert api is not None
    repo = KubeRepository(api, Metrics(), request_timeout_s=10.0)
    namespace = f"{PREFIX}-{uuid.uuid4().hex[:6]}"
    nodes = FakeNodes(repo, PREFIX, leaf_of)
    stop = asyncio.Event()
    fabric: Fabric | None = None
    with tempfile.TemporaryDirectory() as directory:
        (Path(directory) / "hash-model.yaml").write_text(MODEL, encoding="utf-8")
        (Path(directory) / "settings.yaml").write_text(
            "planning: {routing: pinned}\ntopology: {hashModelFile: hash-model.yaml}\n", encoding="utf-8"
        )
        loaded = load_settings(Path(directory) / "settings.yaml")
        controller = ControllerSettings(
            namespaces=(namespace,),
            lease_namespace=namespace,
            lease_duration_s=4.0,
            renew_deadline_s=3.0,
            retry_period_s=0.5,
            debounce_s=0.1,
        )
        settings = msgspec.structs.replace(loaded, controller=controller)
        heartbeats: asyncio.Task[None] | None = None
        try:
            await repo._call("create namespaces", "POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}})
            for index in range(24):
                await nodes.add(index)
            heartbeats = asyncio.create_task(nodes.run(stop))
            for _ in range(100):  # pods need the namespace's ServiceAccount, which kube-controller-manager makes
                if await repo._call(
                    "get", "GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/default", missing_ok=True
                ):
                    break
                await asyncio.sleep(0.1)
            fabric = Fabric(repo, namespace, settings, {})
            fabric.start_controller("fabric-a")
            fabric.start_controller("fabric-b")
            yield fabric
        finally:
            stop.set()
            for _task, controller_stop, _metrics in fabric.controllers.values() if fabric else []:
                controller_stop.set()
            tasks = [t for t, _s, _m in fabric.controllers.values()] if fabric else []
            await asyncio.gather(*tasks, *([heartbeats] if heartbeats else []), return_exceptions=True)
            await clean_up(repo, namespace, [], nodes.names)


async def test_jobs_planned_one_after_another_through_the_controller_never_share_a_link() -> None:
    async with shared_fabric() as fabric:
        for name in ("j1", "j2", "j3"):
            await fabric.submit(name)
            await fabric.completed(name)
        # the leader is killed between two jobs: the other controller takes over and rebuilds the ledger
        [leader] = [
            identity
            for identity, (_t, _s, m) in fabric.controllers.items()
            if m.registry.get_sample_value("ringroute_leader") == 1.0
        ]
        task, _stop, _metrics = fabric.controllers.pop(leader)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await fabric.submit("j4")
        await fabric.completed("j4", timeout_s=120)
        # two jobs whose tables complete within the same second
        await asyncio.gather(fabric.submit("j5"), fabric.submit("j6"))
        await asyncio.gather(fabric.completed("j5"), fabric.completed("j6"))
        names = list(JOB_NODES)
        ledger = await fabric.truth(names)
        report = ledger.report(busiest=0)
        print(json.dumps({"e2e": "shared-fabric", "max_link_load": report.max_link_load, "bound": report.bound}))
        assert report.bound == 1.0, "every leaf's 32 uplinks carry its 32 cross-leaf flows: one a link at best"
        assert report.max_link_load == 1.0, "every job at line rate: no link carries two jobs' flows"
        for first in names:
            for second in names:
                if first < second:
                    assert not links(ledger, first) & links(ledger, second), (first, second)
        assert all(job.delivery == "hashed" and job.busbw == 1.0 for job in report.jobs)
        metrics = fabric.leader_metrics()
        assert metrics.registry.get_sample_value("ringroute_fabric_jobs", {"delivery": "hashed"}) == 6.0
        assert metrics.registry.get_sample_value("ringroute_fabric_max_link_load") == 1.0

        # a deleted job's links are free for the next: j7 on j2's nodes takes j2's spines again
        freed = links(ledger, "j2")
        await fabric.repo.delete_object(JOBS, fabric.namespace, "j2")
        await fabric.force_delete_pods("j2")  # no kubelet finishes them: their nodes are free at once
        deadline = time.monotonic() + 60
        while metrics.registry.get_sample_value("ringroute_fabric_jobs", {"delivery": "hashed"}) != 5.0:
            assert time.monotonic() < deadline, "the deleted job left the ledger"
            await asyncio.sleep(0.5)
        await fabric.submit("j7", JOB_NODES["j2"])
        await fabric.completed("j7", timeout_s=120)
        after = await fabric.truth(["j1", "j3", "j4", "j5", "j6", "j7"])
        assert after.report(busiest=0).max_link_load == 1.0
        assert links(after, "j7") == freed, "the same links, the lowest free ones, as the deleted job had"
