"""Controller benchmark against the emulated API server (real kubernetes_asyncio client, loopback).

Prints JSON lines. A burst of 100 labelled Jobs created at once: Job created -> its rank-table ConfigMap exists,
p50/p99/max (target <= 1 s for every job). A 1,024-pod route-planned job: time from the last device annotation to
the completed ConfigMap (target <= 1 s, with the pod updates that follow each write switched on), API writes per
transition (target: 1 ConfigMap update plus Events), time from the completed table to the last of its 1,024 pods
annotated (what lets kubelet rewrite their table file at once), time to go back to "initializing" when a pod is
lost, and peak memory of the process. The same table with 100 route-planned jobs already running on the fabric
(target <= 1 s), planned as configured and with pinned routes around their ledger. Planning isolation: one large
plan (4,096 servers, mixed pattern, pinned routes) in a thread of the serving process and in the planning process,
each in a fresh process: the serving process's peak memory and its event loop's stalls (what admission waits).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import resource
import subprocess
import sys
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402
import numpy as np  # noqa: E402

from bench._common import peak_rss_mb  # noqa: E402
from emulation.apiserver import FakeApiServer  # noqa: E402
from emulation.cluster import NS, add_job, cluster_nodes, make_job, make_pod  # noqa: E402
from planner import Device, Pattern, Placement, Routing, Server, generate_topology  # noqa: E402
from webhook.common.metrics import Metrics  # noqa: E402
from webhook.common.names import DATA_HASH_ANNOTATION, RANK_TABLE_VERSION_ANNOTATION  # noqa: E402
from webhook.common.settings import PlanningSettings, Settings  # noqa: E402
from webhook.controller.completed_table import Planned, completed_table  # noqa: E402
from webhook.controller.graded_plan import PlanRequest, graded_plan  # noqa: E402
from webhook.controller.isolation import PlanningProcess  # noqa: E402
from webhook.controller.reconciler import Controller  # noqa: E402
from webhook.kube.client import JOBS, KubeRepository  # noqa: E402


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
        plural = next(
            (p for p in ("configmaps", "events", "leases", "jobs", "pods") if f"/{p}" in request.path), "other"
        )
        key = f"{request.method} {plural}"
        counts[key] = counts.get(key, 0) + 1
    return counts


async def transition(
    server: FakeApiServer, name: str, status: str, timeout_s: float, change: Awaitable[object]
) -> tuple[float, dict[str, int]]:
    """Seconds from `change` until job `name`'s table says `status`, and the API writes meanwhile (counted after
    a short quiet period, so the Events that follow the write are in)."""
    since = len(server.requests)
    started = time.perf_counter()
    await change
    done = await wait_status(server, name, status, timeout_s)
    await asyncio.sleep(0.3)
    return round(done - started, 4), writes_by_resource(server, since)


def pods_updated_totals(metrics: Metrics) -> tuple[int, float]:
    """Tables whose pods were all updated so far, and their summed table written -> last pod updated seconds."""
    sample = metrics.registry.get_sample_value
    return (
        int(sample("ringroute_rank_table_pods_updated_seconds_count") or 0),
        float(sample("ringroute_rank_table_pods_updated_seconds_sum") or 0.0),
    )


async def report_pod_updates(
    server: FakeApiServer,
    metrics: Metrics,
    *,
    name: str,
    pods: int,
    before: tuple[int, float],
    completed_at: float,
    after: str,
) -> None:
    """Wait until the controller has annotated every pod of the table just written; emit how long that took."""
    while pods_updated_totals(metrics)[0] == before[0]:
        if time.perf_counter() - completed_at > 120:
            raise SystemExit("bench/controller.py: the pods were not updated within 120 s of the table")
        await asyncio.sleep(0.005)
    seen = time.perf_counter() - completed_at
    configmap = server.get("configmaps", NS, f"configmap1980-{name}") or {}
    meta = configmap.get("metadata") or {}
    version = f"{meta.get('resourceVersion')}-{(meta.get('annotations') or {}).get(DATA_HASH_ANNOTATION, '')[:16]}"
    carrying = sum(
        1
        for pod in server.list("pods", NS)
        if (pod["metadata"].get("annotations") or {}).get(RANK_TABLE_VERSION_ANNOTATION) == version
    )
    emit(
        bench="controller",
        case="completed-to-last-pod-updated",
        after=after,
        pods=pods,
        seconds=round(pods_updated_totals(metrics)[1] - before[1], 4),
        seen_by_bench_seconds=round(seen, 4),
        pods_carrying_the_tables_version=carrying,
        pod_patches={
            outcome: int(metrics.registry.get_sample_value("ringroute_pod_updates_total", {"outcome": outcome}) or 0)
            for outcome in ("updated", "gone", "refused", "retried", "given_up")
        },
        concurrency=Settings().controller.pod_update_concurrency,
        note="seconds: the controller's table written -> last pod updated; seen_by_bench: completed status seen "
        "-> histogram observed (bench polling included); pod_patches are cumulative",
    )


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


async def run_burst(jobs: int, busy_pods: int) -> None:
    """`jobs` Jobs created at once by a user's client; optionally while both reconcile workers plan big jobs."""
    settings = Settings()
    async with FakeApiServer(bookmark_interval_s=1.0) as server:
        for node in cluster_nodes(max(4, 2 * busy_pods // 8 + 2), 8):
            await server.apply("nodes", node)
        api = server.client(agent="ringroute")
        metrics = Metrics()
        controller = Controller(settings, KubeRepository(api, metrics), metrics)
        task = asyncio.create_task(controller.run())
        user = server.client(agent="user")
        try:
            await asyncio.wait_for(controller.jobs.synced.wait(), 10)
            busy = [make_job(f"busy-{i}", busy_pods) for i in range(2 if busy_pods else 0)]
            for i, job in enumerate(busy):
                await add_job(server, job)
                for index in range(busy_pods):
                    node_name = f"npu-{i * busy_pods + index}"
                    await server.apply("pods", make_pod(job, index, node_name, annotated=index != busy_pods - 1))
            await asyncio.sleep(settings.controller.debounce_s * 3)
            while len(controller.queue) or controller.queue._processing:  # noqa: ASYNC110 (polling a queue)
                await asyncio.sleep(0.01)
            for i, job in enumerate(busy):
                # The last annotations: both reconcile workers start planning while the burst arrives.
                last = busy_pods - 1
                await server.apply("pods", make_pod(job, last, f"npu-{i * busy_pods + last}"))

            since = len(server.requests)
            repo = KubeRepository(user, Metrics())
            names = [f"burst-{i:03d}" for i in range(jobs)]
            started = time.perf_counter()
            await asyncio.gather(*(repo.create_object(JOBS, make_job(name, 4)) for name in names))
            created = time.perf_counter()
            keys = [("configmaps", NS, f"configmap1980-{name}") for name in names]
            while not all(k in server.created_at for k in keys):
                if time.perf_counter() - started > 60:
                    raise SystemExit("bench/controller.py: the burst's ConfigMaps did not all appear within 60 s")
                await asyncio.sleep(0.005)
            latencies = [
                server.created_at[key] - server.created_at[("jobs", NS, name)]
                for key, name in zip(keys, names, strict=True)
            ]
            owned = [
                (server.get(*key) or {}).get("metadata", {}).get("ownerReferences", [{}])[0].get("controller")
                for key in keys
            ]
            await asyncio.sleep(0.5)
            emit(
                bench="controller",
                case="job-created-to-configmap",
                jobs=jobs,
                planning_while_created=[f"{busy_pods} pods"] * len(busy),
                p50_seconds=round(percentile(latencies, 50), 4),
                p99_seconds=round(percentile(latencies, 99), 4),
                max_seconds=round(max(latencies), 4),
                target_seconds=1.0,
                all_within_target=max(latencies) <= 1.0,
                submit_seconds=round(created - started, 4),
                owned_by_job=sum(1 for o in owned if o is True),
                api_writes=writes_by_resource(server, since),
            )
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await api.close()
            await user.close()


RUNNING_JOB_PODS = 3


async def start_running_jobs(server: FakeApiServer, count: int, first_node: int) -> None:
    """`count` route-planned jobs of RUNNING_JOB_PODS pods each on the nodes from `first_node`, completed."""
    for k in range(count):
        job = make_job(f"running-{k}", RUNNING_JOB_PODS)
        await add_job(server, job)
        for index in range(RUNNING_JOB_PODS):
            node = first_node + k * RUNNING_JOB_PODS + index
            await server.apply("pods", make_pod(job, index, f"npu-{node}"))
    for k in range(count):
        await wait_status(server, f"running-{k}", "completed", 120)


async def run(pods: int, route_plan: bool, *, running: int = 0, pinned: bool = False) -> None:
    leaves = (pods + running * RUNNING_JOB_PODS) // 8 + 2
    settings = Settings()
    if pinned:  # pinned routes planned around the running jobs (the fabric ledger)
        settings = msgspec.structs.replace(settings, planning=PlanningSettings(routing="pinned"))
    async with FakeApiServer(bookmark_interval_s=1.0) as server:
        for node in cluster_nodes(leaves, 8):
            await server.apply("nodes", node)
        api = server.client()
        metrics = Metrics()
        controller = Controller(settings, KubeRepository(api, metrics), metrics)
        task = asyncio.create_task(controller.run())
        try:
            await start_running_jobs(server, running, pods + 8)
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

            updates_before = pods_updated_totals(metrics)
            seconds, writes = await transition(
                server, name, "completed", 60, server.apply("pods", make_pod(job, pods - 1, nodes[pods - 1]))
            )
            completed_at = time.perf_counter() - 0.3  # transition() waits 0.3 s after seeing the status
            emit(
                bench="controller",
                case="last-annotation-to-completed",
                pods=pods,
                devices=pods * 8,
                route_plan=route_plan,
                routing=settings.planning.routing,
                running_jobs=running,
                ledger_jobs=len(ledger.jobs) if (ledger := controller.tables.ledger.snapshot()) is not None else None,
                seconds=seconds,
                target_seconds=1.0,
                debounce_s=settings.controller.debounce_s,
                planning_ms=round(metrics.plan_latency._sum.get() * 1000, 1),
                api_writes=writes,
                configmap_bytes=len(json.dumps(server.get("configmaps", NS, f"configmap1980-{name}"))),
                pod_updates=settings.controller.pod_updates,
            )
            await report_pod_updates(
                server,
                metrics,
                name=name,
                pods=pods,
                before=updates_before,
                completed_at=completed_at,
                after="completed",
            )
            seconds, writes = await transition(
                server, name, "initializing", 10, server.remove("pods", NS, f"{name}-worker-{pods // 2}")
            )
            emit(bench="controller", case="pod-lost-to-initializing", pods=pods, seconds=seconds, api_writes=writes)
            updates_before = pods_updated_totals(metrics)
            seconds, writes = await transition(
                server, name, "completed", 60, server.apply("pods", make_pod(job, pods // 2, f"npu-{pods + 3}"))
            )
            completed_at = time.perf_counter() - 0.3
            emit(bench="controller", case="replacement-to-completed", pods=pods, seconds=seconds, api_writes=writes)
            await report_pod_updates(
                server,
                metrics,
                name=name,
                pods=pods,
                before=updates_before,
                completed_at=completed_at,
                after="replacement",
            )
            emit(
                bench="controller",
                case="process",
                peak_rss_mib=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                reconciles=int(metrics.registry.get_sample_value("ringroute_reconcile_seconds_count") or 0),
                note="peak RSS includes the emulated API server and its watch history in the same process",
            )
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await api.close()


def _fragmented_placement(servers: int, seed: int) -> tuple[Placement, Any]:
    """A job on random free nodes of a 3-tier fabric (8 servers a leaf, 8 leaves a pod) about 2/3 occupied."""
    leaves = math.ceil(servers * 1.5 / 8 / 8) * 8
    topology = generate_topology(leaves=leaves, servers_per_leaf=8, leaves_per_pod=8)
    rng = np.random.default_rng(seed)
    nodes = sorted(topology.paths)
    chosen = [nodes[i] for i in rng.choice(len(nodes), size=servers, replace=False)]
    placed = tuple(
        Server(
            pod_name=f"big-worker-{i}",
            node_name=node,
            server_id=f"10.{i // 65536}.{i // 256 % 256}.{i % 256}",
            host_ip=f"10.{i // 65536}.{i // 256 % 256}.{i % 256}",
            pod_ip=f"172.{16 + i // 65536}.{i // 256 % 256}.{i % 256}",
            task_name="worker",
            task_index=i,
            devices=tuple(Device(d, f"11.{i // 256 % 256}.{i % 256}.{d + 1}") for d in range(8)),
        )
        for i, node in enumerate(chosen)
    )
    return Placement(job_name="big", namespace=NS, servers=placed), topology


async def measure_isolation(mode: str, servers: int, pattern: Pattern, routing: Routing) -> None:
    """One plan in `mode` ("thread" or "process") while a 10 ms ticker samples the event loop's stalls."""
    settings = msgspec.structs.replace(
        Settings(), planning=PlanningSettings(pattern=pattern, routing=routing, time_limit_s=2.0)
    )
    profile = msgspec.structs.replace(settings.profiles[0], gzip_rank_table=True)  # 4,096 servers: 2.5 MB of table
    placement, topology = _fragmented_placement(servers, seed=1)
    stalls: list[float] = []
    loop = asyncio.get_running_loop()
    running = True

    async def ticker() -> None:
        while running:
            before = loop.time()
            await asyncio.sleep(0.01)
            stalls.append(max(0.0, loop.time() - before - 0.01))

    arguments: dict[str, Any] = {
        "job_uid": "u",
        "job_version": "0",
        "route_plan": True,
        "route_problem": None,
        "fixed": {},
        "planning_ms": 0.0,
    }
    request = PlanRequest(placement, topology, settings.planning)
    baseline_mib = peak_rss_mb()
    worker: PlanningProcess | None = None
    worker_peak_mib = None
    sampler = asyncio.create_task(ticker())
    started = time.perf_counter()
    planned: Planned
    if mode == "thread":
        graded = await asyncio.to_thread(graded_plan, request)
        planned = await asyncio.to_thread(completed_table, settings, profile, placement, graded, **arguments)
    else:
        controller = settings.controller
        worker = PlanningProcess(
            memory_limit_mib=controller.planning_memory_limit_mib,
            timeout_s=controller.planning_timeout_s,
            preload=(graded_plan.__module__,),
        )
        await asyncio.to_thread(worker.start)
        started = time.perf_counter()
        graded = await worker.call(graded_plan, request)
        planned = await asyncio.to_thread(completed_table, settings, profile, placement, graded, **arguments)
        status = Path(f"/proc/{worker.pid}/status").read_text(encoding="ascii")  # noqa: ASYNC240 (procfs, no disk)
        worker_peak_mib = next(int(line.split()[1]) / 1024 for line in status.splitlines() if line.startswith("VmHWM:"))
    seconds = time.perf_counter() - started
    running = False
    await sampler
    if worker is not None:
        worker.close()
    emit(
        bench="controller",
        case="planning-isolation",
        mode=mode,
        servers=servers,
        pattern=pattern,
        routing=routing,
        plan_seconds=round(seconds, 2),
        planning_ms=round(planned.planning_ms),
        routed=planned.routed,
        route_problem=planned.route_problem,
        plan_level=planned.plan_level,
        fallback=planned.fallback,
        serving_process_peak_mib=peak_rss_mb(),
        serving_process_before_mib=baseline_mib,
        planning_process_peak_mib=None if worker_peak_mib is None else round(worker_peak_mib, 1),
        event_loop_stall_max_ms=round(max(stalls, default=0.0) * 1000, 1),
        event_loop_stall_p99_ms=round(percentile(stalls, 99) * 1000, 1) if stalls else 0.0,
        note="stalls of the serving process's event loop are what admission requests wait meanwhile",
    )


def run_isolation(servers: int, pattern: str, routing: str) -> None:
    """Each mode in a fresh interpreter, so that each peak memory figure is that mode's alone."""
    for mode in ("thread", "process"):
        command = [sys.executable, __file__, "--isolation-mode", mode, "--pods", str(servers)]
        command += ["--pattern", pattern, "--routing", routing]
        subprocess.run(command, check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=1024)
    parser.add_argument("--no-route-plan", action="store_true", help="pod-index order (no planner)")
    parser.add_argument("--burst-jobs", type=int, default=100, metavar="N", help="Jobs created at once")
    parser.add_argument(
        "--running-jobs", type=int, default=100, metavar="N", help="fabric case: jobs running before the table"
    )
    parser.add_argument(
        "--case",
        choices=("all", "burst", "table", "fabric", "isolation"),
        default="all",
        help="the Job burst, the 1,024-pod table, a 4,096-server plan in a thread and in the planning process",
    )
    parser.add_argument("--pattern", default="mixed", help="isolation case: the collective pattern")
    parser.add_argument("--routing", default="pinned", help="isolation case: the routing model")
    parser.add_argument("--isolation-mode", choices=("thread", "process"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.isolation_mode:
        asyncio.run(measure_isolation(args.isolation_mode, args.pods, args.pattern, args.routing))
        return 0
    # The table first: its peak-memory line then covers that case alone.
    if args.case in ("all", "table"):
        asyncio.run(run(args.pods, not args.no_route_plan))
    if args.case in ("all", "fabric"):  # the same table with 100 jobs running, pinned around them
        asyncio.run(run(args.pods, not args.no_route_plan, running=args.running_jobs))
        asyncio.run(run(args.pods, not args.no_route_plan, running=args.running_jobs, pinned=True))
    if args.case in ("all", "burst"):
        asyncio.run(run_burst(args.burst_jobs, 0))
        asyncio.run(run_burst(args.burst_jobs, 1024))
    if args.case in ("all", "isolation"):
        run_isolation(4096 if args.case == "all" else args.pods, args.pattern, args.routing)
    return 0


if __name__ == "__main__":
    sys.exit(main())
