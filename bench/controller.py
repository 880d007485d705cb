"""Controller benchmark: a 1,024-pod route-planned job against the emulated API server (real client, loopback).

Prints JSON lines: time from the last device annotation to the completed ConfigMap (target <= 1 s), API writes
per transition (target: 1 ConfigMap update plus Events), time to go back to "initializing" when a pod is lost,
and peak memory of the process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.controller.cluster import NS, add_job, cluster_nodes, make_job, make_pod  # noqa: E402
from tests.fakes import FakeApiServer  # noqa: E402
from webhook.controller import Controller  # noqa: E402
from webhook.kube import KubeRepository  # noqa: E402
from webhook.metrics import Metrics  # noqa: E402
from webhook.settings import Settings  # noqa: E402


def emit(**fields: Any) -> None:
    print(json.dumps(fields, sort_keys=True), flush=True)


def table_status(server: FakeApiServer, name: str) -> str | None:
    configmap = server.get("configmaps", NS, f"configmap1980-{name}")
    if configmap is None:
        return None
    text = (configmap.get("data") or {}).get("jobstart_hccl.json", "{}")
    return str(json.loads(text).get("status"))


async def wait_status(server: FakeApiServer, name: str, status: str, timeout_s: float) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < timeout_s:
        if table_status(server, name) == status:
            return time.perf_counter()
        await asyncio.sleep(0.005)
    raise SystemExit(f"bench/controller.py: job {name} did not reach {status!r} within {timeout_s}s")


def writes_by_resource(server: FakeApiServer, since: int) -> dict[str, int]:
    counts: dict[str, int] = {}
    for request in server.writes(since=since):
        plural = next((p for p in ("configmaps", "events", "leases") if f"/{p}" in request.path), "other")
        key = f"{request.method} {plural}"
        counts[key] = counts.get(key, 0) + 1
    return counts


async def run(pods: int, route_plan: bool) -> None:
    leaves = pods // 8 + 2
    settings = Settings()
    async with FakeApiServer(bookmark_interval_s=1.0) as server:
        for node in cluster_nodes(leaves, 8):
            await server.apply("nodes", node)
        api = server.client()
        metrics = Metrics()
        controller = Controller(settings, KubeRepository(api, metrics), metrics)
        task = asyncio.create_task(controller.run())
        try:
            name = "bench"
            job = make_job(name, pods, route_plan=route_plan)
            await add_job(server, job)
            await wait_status(server, name, "initializing", 10)
            nodes = [f"npu-{i}" for i in range(pods)]
            for index in range(pods):
                await server.apply("pods", make_pod(job, index, nodes[index], annotated=index != pods - 1))
            await asyncio.sleep(settings.controller.debounce_s * 3)
            while len(controller.queue) or controller.queue._processing:  # noqa: ASYNC110 (polling a queue)
                await asyncio.sleep(0.01)

            since = len(server.requests)
            started = time.perf_counter()
            await server.apply("pods", make_pod(job, pods - 1, nodes[pods - 1]))
            done = await wait_status(server, name, "completed", 60)
            await asyncio.sleep(0.3)
            emit(
                bench="controller",
                case="last-annotation-to-completed",
                pods=pods,
                devices=pods * 8,
                route_plan=route_plan,
                seconds=round(done - started, 4),
                target_seconds=1.0,
                debounce_s=settings.controller.debounce_s,
                planning_ms=round(metrics.plan_latency._sum.get() * 1000, 1),
                api_writes=writes_by_resource(server, since),
                configmap_bytes=len(json.dumps(server.get("configmaps", NS, f"configmap1980-{name}"))),
            )

            since = len(server.requests)
            started = time.perf_counter()
            await server.remove("pods", NS, f"{name}-worker-{pods // 2}")
            reset = await wait_status(server, name, "initializing", 10)
            await asyncio.sleep(0.3)
            emit(
                bench="controller",
                case="pod-lost-to-initializing",
                pods=pods,
                seconds=round(reset - started, 4),
                api_writes=writes_by_resource(server, since),
            )

            since = len(server.requests)
            started = time.perf_counter()
            await server.apply("pods", make_pod(job, pods // 2, f"npu-{pods + 3}"))
            done = await wait_status(server, name, "completed", 60)
            await asyncio.sleep(0.3)
            emit(
                bench="controller",
                case="replacement-to-completed",
                pods=pods,
                seconds=round(done - started, 4),
                api_writes=writes_by_resource(server, since),
            )
            emit(
                bench="controller",
                case="process",
                peak_rss_mib=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                reconciles=controller.reconciles,
                note="peak RSS includes the emulated API server and its watch history in the same process",
            )
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await api.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=1024)
    parser.add_argument("--no-route-plan", action="store_true", help="pod-index order (no planner)")
    args = parser.parse_args()
    asyncio.run(run(args.pods, not args.no_route_plan))
    return 0


if __name__ == "__main__":
    sys.exit(main())
