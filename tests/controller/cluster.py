"""A small emulated cluster for controller tests and the benchmark: a Volcano Job, its pods, NPU nodes, and the
admission chain a Job goes through (ringroute's webhooks, then Volcano's)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import msgspec
from aiohttp import web

from planner import generate_topology, nodes_for_topology
from tests.fakes import AdmissionWebhook, FakeApiServer, http_webhook
from webhook.controller import Controller
from webhook.kube import KubeRepository
from webhook.metrics import Metrics
from webhook.server import admission_app
from webhook.settings import ControllerSettings, Settings

DEVICE_KEY = "cce.kubectl.kubernetes.io/ascend-1980-configuration"
NPU = "huawei.com/ascend-1980"
NS = "team-a"


def fast_settings(**controller: Any) -> Settings:
    """Default settings with short debounce (tests must stay fast)."""
    values: dict[str, Any] = {"debounce_s": 0.05, "lease_namespace": NS}
    values.update(controller)
    return msgspec.structs.replace(Settings(), controller=ControllerSettings(**values))


def make_job(name: str, replicas: int, *, route_plan: bool = True, cards: int = 8) -> dict[str, Any]:
    env = [{"name": "ROUTE_PLAN", "value": "true"}] if route_plan else []
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": {"ring-controller.cce": "ascend-1980"}},
        "spec": {
            "minAvailable": replicas,
            "schedulerName": "volcano",
            "tasks": [
                {
                    "name": "worker",
                    "replicas": replicas,
                    "template": {
                        "metadata": {"labels": {"ring-controller.cce": "ascend-1980"}},
                        "spec": {
                            "containers": [
                                {
                                    "name": "train",
                                    "image": "train:1",
                                    "command": ["python", "train.py"],
                                    "env": env,
                                    "resources": {"requests": {NPU: str(cards)}, "limits": {NPU: str(cards)}},
                                }
                            ]
                        },
                    },
                }
            ],
        },
        "status": {"version": 0},
    }


def node_ip(node: str) -> str:
    number = int(node.rsplit("-", 1)[1])
    return f"192.168.{number // 250}.{number % 250 + 1}"


def make_pod(
    job: dict[str, Any],
    index: int,
    node: str | None,
    *,
    devices: int = 8,
    device_ip: str | None = None,
    version: int = 0,
    annotated: bool = True,
) -> dict[str, Any]:
    job_name = job["metadata"]["name"]
    name = f"{job_name}-worker-{index}"
    annotations: dict[str, str] = {"volcano.sh/job-version": str(version), "volcano.sh/task-spec": "worker"}
    status: dict[str, Any] = {"phase": "Pending"}
    spec: dict[str, Any] = {
        "containers": [{"name": "train", "resources": {"requests": {NPU: str(devices)}, "limits": {NPU: str(devices)}}}]
    }
    if node is not None:
        spec["nodeName"] = node
        host = node_ip(node)
        status = {"phase": "Running", "hostIP": host, "podIP": f"172.16.{index // 250}.{index % 250 + 1}"}
        if annotated:
            number = int(node.rsplit("-", 1)[1])
            annotations[DEVICE_KEY] = json.dumps(
                {
                    "pod_name": name,
                    "server_id": host,
                    "devices": [
                        {"device_id": str(d), "device_ip": device_ip or f"10.{number // 250}.{number % 250}.{d + 1}"}
                        for d in range(devices)
                    ],
                }
            )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {
                "ring-controller.cce": "ascend-1980",
                "volcano.sh/job-name": job_name,
                "volcano.sh/task-spec": "worker",
                "volcano.sh/task-index": str(index),
            },
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": "batch.volcano.sh/v1alpha1",
                    "kind": "Job",
                    "name": job_name,
                    "uid": job["metadata"].get("uid", ""),
                    "controller": True,
                }
            ],
        },
        "spec": spec,
        "status": status,
    }


def cluster_nodes(leaves: int, servers_per_leaf: int) -> list[dict[str, Any]]:
    """Node objects labelled with their leaf (`volcano.sh/tor`), named npu-0, npu-1, ... (servers_per_leaf a leaf)."""
    topology = generate_topology(leaves=leaves, servers_per_leaf=servers_per_leaf)
    nodes = nodes_for_topology(topology)
    for node in nodes:
        name = f"npu-{int(node['metadata']['name'].rsplit('-', 1)[1])}"
        node["metadata"]["name"] = name
        node["metadata"]["labels"]["kubernetes.io/hostname"] = name
    return nodes


@dataclass
class Harness:
    server: FakeApiServer
    repo: KubeRepository
    metrics: Metrics
    controller: Controller
    settings: Settings

    def configmap(self, job: str) -> dict[str, Any] | None:
        return self.server.get("configmaps", NS, f"configmap1980-{job}")

    def data(self, job: str) -> dict[str, str]:
        configmap = self.configmap(job)
        assert configmap is not None, f"no ConfigMap for job {job}"
        return dict(configmap.get("data") or {})

    def status(self, job: str) -> str | None:
        configmap = self.configmap(job)
        if configmap is None:
            return None
        return str(json.loads((configmap.get("data") or {}).get("jobstart_hccl.json", "{}")).get("status"))

    def events(self, reason: str | None = None, kind: str = "Job") -> list[dict[str, Any]]:
        return [
            e
            for e in self.server.list("events", NS)
            if (reason is None or e["reason"] == reason) and e["involvedObject"]["kind"] == kind
        ]

    def ranks(self, job: str) -> dict[str, int]:
        lines = self.data(job).get("ranks.env", "").splitlines()
        return {line.split("=")[0]: int(line.split("=")[1]) for line in lines if line}

    async def wait_status(self, job: str, status: str, timeout_s: float = 10.0) -> None:
        deadline = asyncio.get_running_loop().time() + timeout_s
        while asyncio.get_running_loop().time() < deadline:
            if self.status(job) == status:
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"job {job}: status {self.status(job)!r}, expected {status!r} within {timeout_s}s")

    async def settle(self, seconds: float = 0.3) -> None:
        """Let the controller catch up (debounce + a reconcile) and the queue drain."""
        await asyncio.sleep(seconds)
        for _ in range(200):
            if len(self.controller.queue) == 0 and not self.controller.queue._processing:
                return
            await asyncio.sleep(0.02)


async def volcano_validator(review: dict[str, Any]) -> dict[str, Any]:
    """What vc-webhook-manager answers for the queue it checks: jobs naming a queue that does not exist are refused."""
    queue = ((review["request"]["object"] or {}).get("spec") or {}).get("queue") or "default"
    if queue == "default":
        return {"allowed": True}
    return {"allowed": False, "status": {"message": f'unable to find job queue: queue "{queue}" not found'}}


@contextlib.asynccontextmanager
async def admission_chain(server: FakeApiServer, settings: Settings) -> AsyncIterator[None]:
    """Jobs created over HTTP go through ringroute's admission (served on loopback), then Volcano's validation."""
    runner = web.AppRunner(admission_app(settings, Metrics(), certificates=None))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    base = f"http://127.0.0.1:{port}"
    server.admission["jobs"] = [
        http_webhook("mutate.jobs.ringroute.io", f"{base}/jobs/mutate"),
        http_webhook("validate.jobs.ringroute.io", f"{base}/jobs/validate"),
        AdmissionWebhook("validatejob.volcano.sh", volcano_validator),
    ]
    try:
        yield
    finally:
        server.admission.pop("jobs", None)
        await runner.cleanup()


async def add_job(server: FakeApiServer, job: dict[str, Any]) -> dict[str, Any]:
    created = await server.apply("jobs", job)
    job["metadata"]["uid"] = created["metadata"]["uid"]
    return created


@contextlib.asynccontextmanager
async def running_controller(
    *,
    nodes: list[dict[str, Any]] | None = None,
    settings: Settings | None = None,
    hypernodes: bool = False,
    **controller_kwargs: Any,
) -> AsyncIterator[Harness]:
    """A fake API server with nodes, and a Controller running against it through the real client."""
    settings = settings or fast_settings()
    async with FakeApiServer(hypernodes=hypernodes, bookmark_interval_s=0.5) as server:
        for node in nodes if nodes is not None else cluster_nodes(4, 8):
            await server.apply("nodes", node)
        api = server.client()
        metrics = Metrics()
        repo = KubeRepository(api, metrics, request_timeout_s=2.0)
        controller_kwargs.setdefault("pending_event_interval_s", 0.0)
        controller = Controller(settings, repo, metrics, **controller_kwargs)
        task = asyncio.create_task(controller.run())
        try:
            yield Harness(server, repo, metrics, controller, settings)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await api.close()
