"""A running controller against the emulated API server, and the admission chain a Job goes through there."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from aiohttp import web

from emulation.apiserver import AdmissionWebhook, FakeApiServer, http_webhook
from emulation.cluster import NS, cluster_nodes
from webhook.admission.server import admission_app
from webhook.common.metrics import Metrics
from webhook.common.settings import ControllerSettings, Settings
from webhook.controller.reconciler import Controller
from webhook.kube.client import KubeRepository


async def wait_for(predicate: Callable[[], bool], timeout_s: float = 8.0) -> None:
    """Poll `predicate` until it holds; AssertionError after `timeout_s`."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while asyncio.get_running_loop().time() < deadline:
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached in time")


def fast_settings(**controller: Any) -> Settings:
    """Default settings with short debounce, planning in a thread (tests must stay fast; a planning process takes
    2 s to start, and tests that patch the planner patch this process). tests/controller/test_planning_process.py
    runs the planning process."""
    values: dict[str, Any] = {"debounce_s": 0.05, "lease_namespace": NS, "planning_process": False}
    values.update(controller)
    return msgspec.structs.replace(Settings(), controller=ControllerSettings(**values))


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

    async def wait_events(self, reason: str, kind: str = "Job", timeout_s: float = 10.0) -> list[dict[str, Any]]:
        """The Events of `reason` once there is one (the controller posts them after the write they report)."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while not (found := self.events(reason, kind)):
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"no {reason} Event on a {kind} within {timeout_s}s")
            await asyncio.sleep(0.02)
        return found

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
