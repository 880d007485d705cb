"""Scheduler extender benchmark: prioritize latency on a 1,000-node payload, and the scheduling simulation.

Prints JSON lines:
- `payload`: size of the prioritize body (Volcano's NodeInfo shape: Node objects with labels, Idle/Used/...,
  every node with 3 daemon pods, ~60 % of nodes busy with a training pod of another job, full Pod objects);
- `prioritize_inprocess`: decode + scoring without HTTP, for the fast decoder the server uses and for the lenient
  reader (orjson + dict access) it falls back to; cold = first call, topology cache empty;
- `prioritize_http`: POSTs through the real aiohttp app on 127.0.0.1, sequential, p50/p99;
- `predicate_http`: one-node predicate calls (Volcano makes one per candidate node);
- `simulation`: random-feasible vs extender placement on a fragmented cluster (leaves spanned, ring bus bandwidth
  of the planned order when `planner._plan` is installed).
Usage: python bench/extender.py [--nodes 1000] [--calls 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import multiprocessing
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiohttp import ClientSession, web

from webhook.cli_extender import node_info, planner_available, simulate, summarise, task_info, with_bandwidth
from webhook.extender import extender_app
from webhook.extender_scoring import ExtenderState, prioritize, prioritize_body
from webhook.metrics import Metrics
from webhook.settings import Settings

DAEMONS = ("kube-proxy", "ascend-device-plugin", "node-exporter")


def build_payload(nodes: int, seed: int, daemons: int = 0) -> dict[str, Any]:
    """A prioritize request for task 8 of a 32-pod route-planned job whose tasks 0-7 run on leaf 0; `daemons`
    DaemonSet pods per node (Volcano's NodeInfo lists every pod on the node)."""
    rng = np.random.default_rng(seed)
    busy = set(rng.choice(nodes, size=int(nodes * 0.6), replace=False).tolist())
    busy -= set(range(8))
    infos = []
    for i in range(nodes):
        name = f"npu-{i:04d}"
        tasks: dict[str, dict[str, Any]] = {}
        for daemon in DAEMONS[:daemons]:
            pod = task_info(
                namespace="kube-system", job_name=f"{daemon}-{i}", index=0, ring_label=None, cards=0, node_name=name
            )
            tasks[pod["UID"]] = pod
        if i < 8:
            mine = task_info(namespace="team-a", job_name="llm", index=i, node_name=name, status=32)
            tasks[mine["UID"]] = mine
        elif i in busy:
            other = task_info(namespace="team-b", job_name=f"job-{i // 16}", index=i % 16, node_name=name, status=32)
            tasks[other["UID"]] = other
        labels = {"volcano.sh/tor": f"tor-{i // 8:03d}", "accelerator/huawei-npu": "ascend-1980"}
        infos.append(node_info(name, labels, tasks=tasks))
    return {"task": task_info(namespace="team-a", job_name="llm", index=8), "nodes": infos}


def percentiles(samples_s: list[float]) -> dict[str, float]:
    ms = np.array(samples_s) * 1000.0
    return {
        "p50_ms": round(float(np.percentile(ms, 50)), 2),
        "p99_ms": round(float(np.percentile(ms, 99)), 2),
        "max_ms": round(float(ms.max()), 2),
    }


def bench_inprocess(body: bytes, calls: int) -> list[dict[str, Any]]:
    """Decode + score without HTTP: the fast path the server uses, and the lenient path (orjson + dict readers)."""
    settings = Settings()
    out = []
    for path, n in (("fast", calls), ("lenient", max(5, calls // 10))):
        state = ExtenderState(settings)
        samples = []
        for _ in range(n):
            started = time.perf_counter()
            if path == "fast":
                prioritize_body(body, settings, state)
            else:
                request = orjson.loads(body)
                prioritize(request["task"], request["nodes"], settings, state)
            samples.append(time.perf_counter() - started)
        out.append(
            {
                "case": "prioritize_inprocess",
                "decoder": path,
                "calls": n,
                "cold_ms": round(samples[0] * 1000.0, 2),
                **percentiles(samples[1:]),
            }
        )
    return out


def serve(port_queue: Any) -> None:
    """The extender app on 127.0.0.1 in its own process (Volcano is another process too)."""
    gc.collect()
    gc.freeze()

    async def run() -> None:
        runner = web.AppRunner(extender_app(Settings(), Metrics()), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port_queue.put(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        await asyncio.Event().wait()

    asyncio.run(run())


async def bench_http(url: str, body: bytes, predicate_body: bytes, calls: int) -> list[dict[str, Any]]:
    results = []
    async with ClientSession() as session:
        for verb, payload, n in (("prioritize", body, calls), ("predicate", predicate_body, calls * 5)):
            samples = []
            for i in range(n + 5):
                started = time.perf_counter()
                async with session.post(
                    f"{url}/{verb}", data=payload, headers={"Content-Type": "application/json"}
                ) as response:
                    answer = await response.read()
                    assert response.status == 200, answer[:200]
                if i >= 5:  # warm-up calls fill the topology cache and the connection pool
                    samples.append(time.perf_counter() - started)
            results.append({"case": f"{verb}_http", "calls": n, "response_bytes": len(answer), **percentiles(samples)})
    return results


def bench_simulation(seed: int) -> list[dict[str, Any]]:
    out = []
    plan = planner_available()
    for leaves_per_pod in (None, 4):
        sizes = [16, 8, 32, 12, 24, 8, 16, 48, 4, 16]
        leaves, per_leaf = 64, 8
        paths = {}
        for leaf in range(leaves):
            for slot in range(per_leaf):
                name = f"npu-{leaf:03d}-{slot:02d}"
                paths[name] = (f"leaf-{leaf:03d}",) + ((f"pod-{leaf // leaves_per_pod:02d}",) if leaves_per_pod else ())
        for scheduler in ("default", "extender"):
            outcomes = simulate(
                scheduler,
                leaves=leaves,
                servers_per_leaf=per_leaf,
                leaves_per_pod=leaves_per_pod,
                occupancy=0.6,
                job_sizes=sizes,
                seed=seed,
            )
            if plan:
                outcomes = [with_bandwidth(o, paths, seed=seed) for o in outcomes]
            out.append(
                {
                    "case": "simulation",
                    "tiers": 3 if leaves_per_pod else 2,
                    "cluster": f"{leaves} leaves x {per_leaf} servers, 60% busy",
                    "scheduler": scheduler,
                    **summarise(outcomes),
                    "leaves_per_job": [o.leaves for o in outcomes],
                    "leaves_bound_per_job": [o.leaves_bound for o in outcomes],
                    "bandwidth": "planner" if plan else "planner._plan not installed",
                }
            )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-simulation", action="store_true")
    args = parser.parse_args()

    port_queue: Any = multiprocessing.Queue()
    server = multiprocessing.Process(target=serve, args=(port_queue,), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{port_queue.get(timeout=30)}/extender"
    try:
        for daemons in (0, len(DAEMONS)):
            payload = build_payload(args.nodes, args.seed, daemons)
            body = orjson.dumps(payload)
            predicate_body = orjson.dumps({"task": payload["task"], "node": payload["nodes"][9]})
            variant = {"payload": f"1 training pod on 60% of nodes, {daemons} daemon pods per node"}
            tasks = sum(len(n["Tasks"]) for n in payload["nodes"])
            del payload
            gc.collect()
            print(
                json.dumps(
                    {
                        "case": "payload",
                        **variant,
                        "nodes": args.nodes,
                        "tasks": tasks,
                        "bytes": len(body),
                        "mib": round(len(body) / 2**20, 2),
                    }
                )
            )
            for line in bench_inprocess(body, args.calls):
                print(json.dumps({**line, **variant}))
            for line in asyncio.run(bench_http(url, body, predicate_body, args.calls)):
                print(json.dumps({**line, **variant}))
    finally:
        server.terminate()
        server.join(10)
    if not args.no_simulation:
        for line in bench_simulation(args.seed):
            print(json.dumps(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
