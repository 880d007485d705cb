"""Fabric ledger at scale: 1,000 running jobs on 10,000 nodes.

The jobs (3-14 servers, 8 NICs, pinned ring routes with 4 queue pairs steered through the leaves' hash) are planned
and rendered as the controller writes their rank-table ConfigMaps. Then, in a fresh process as a new leader would:
the controller's ledger (`LedgerKeeper.rebuild`) is built from those ConfigMaps, timed, with that process's peak
memory; and a 512-server job is planned on the free nodes, alone and around the 1,000 jobs, its planning time
compared. Targets: rebuilt in <= 2 s and <= 200 MiB; planned around them within 1.2x of planning alone. The last
line checks them (exit code 1 when one fails).

    python bench/fabric_scale.py [--jobs 1000] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import emit, peak_rss_mb  # noqa: E402
from planner import Device, HashModel, HashSpec, Placement, Server, SwitchHash, Topology, generate_topology  # noqa: E402
from webhook.common.metrics import Metrics  # noqa: E402
from webhook.common.settings import PlanningSettings, Settings  # noqa: E402
from webhook.controller.completed_table import completed_table  # noqa: E402
from webhook.controller.graded_plan import PlanRequest, graded_plan  # noqa: E402
from webhook.controller.ledger import LedgerKeeper  # noqa: E402

LEAVES, PER_LEAF = 1250, 8
MODEL = HashModel(tiers={"leaf": SwitchHash(HashSpec("crc32c", seed=0x5EED, bucket="low-bits"))})
PLANNING = PlanningSettings(routing="pinned", qps_per_connection=4, time_limit_s=0.2)
REBUILD_TARGET_S, REBUILD_TARGET_MIB, PLAN_TARGET_RATIO = 2.0, 200.0, 1.2
BIG_JOB = 512


def topology() -> Topology:
    return generate_topology(leaves=LEAVES, servers_per_leaf=PER_LEAF, nics_per_server=8)


def server(index: int, node: str, number: int) -> Server:
    devices = tuple(Device(d, f"172.{16 + d}.{number >> 8}.{number & 255}") for d in range(8))
    ip = f"10.{number >> 16}.{(number >> 8) & 255}.{number & 255}"
    return Server(f"w-{index}", node, ip, ip, ip, "worker", index, devices)


def configmaps(jobs: int, seed: int) -> tuple[list[dict[str, Any]], list[str]]:
    """The rank-table ConfigMaps of `jobs` running jobs, packed leaf by leaf from the first node, and the free
    nodes left."""
    fabric = topology()
    settings = Settings()
    profile = settings.profiles[0]
    nodes = sorted(fabric.paths, key=lambda n: (fabric.paths[n], n))
    number = {node: i for i, node in enumerate(sorted(fabric.paths))}
    rng = np.random.default_rng(seed)
    out: list[dict[str, Any]] = []
    at = 0
    for k in range(jobs):
        chosen = nodes[at : at + int(rng.integers(3, 15))]
        at += len(chosen)
        placement = Placement(f"job-{k}", "bench", tuple(server(i, n, number[n]) for i, n in enumerate(chosen)))
        graded = graded_plan(PlanRequest(placement, fabric, PLANNING, MODEL))
        planned = completed_table(
            settings,
            profile,
            placement,
            graded,
            job_uid=f"uid-{k}",
            job_version="0",
            route_plan=True,
            route_problem=None,
            fixed={},
            planning_ms=0.0,
        )
        meta: dict[str, Any] = {"name": profile.configmap_name(f"job-{k}"), "namespace": "bench"}
        meta["labels"] = {"ring-controller.cce": profile.label_value}
        out.append({"metadata": meta, "data": planned.payload_data, "binaryData": planned.payload_binary})
    return out, nodes[at:]


def in_new_leader(path: Path) -> dict[str, Any]:
    """What the child process measures: the rebuild, and the big job planned alone and around the jobs."""
    saved = json.loads(path.read_text(encoding="utf-8"))
    fabric = topology()
    baseline = peak_rss_mb()
    keeper = LedgerKeeper(Settings(), MODEL, Metrics())
    jobs = [f"bench/job-{k}" for k in range(len(saved["configmaps"]))]
    rebuilt_s = keeper.rebuild(fabric, saved["configmaps"], jobs)
    rebuilt_mib = peak_rss_mb()
    ledger = keeper.snapshot()
    assert ledger is not None
    number = {node: i for i, node in enumerate(sorted(fabric.paths))}
    free = saved["free"][:BIG_JOB]
    placement = Placement("big", "bench", tuple(server(i, n, number[n]) for i, n in enumerate(free)))
    timings: dict[str, float] = {}
    plans = {}
    for how in ("alone", "around", "alone-again", "around-again"):
        started = time.perf_counter()
        background = keeper.background("bench/big", free) if how.startswith("around") else None
        plans[how] = graded_plan(PlanRequest(placement, fabric, PLANNING, MODEL, background))
        timings[how] = time.perf_counter() - started
    outlook = plans["around"].outlook
    return {
        "jobs": len(ledger),
        "servers": sum(t.servers for t in ledger.jobs.values()),
        "rebuild_s": rebuilt_s,
        "rebuild_peak_rss_mib": rebuilt_mib,
        "rss_before_rebuild_mib": baseline,
        "big_job_servers": len(free),
        "plan_alone_s": min(timings["alone"], timings["alone-again"]),
        "plan_around_s": min(timings["around"], timings["around-again"]),
        "around_bottleneck": outlook.bottleneck if outlook is not None else None,
        "around_other_jobs_load": outlook.others if outlook is not None else None,
        "fabric_max_link_load": ledger.report(busiest=0).max_link_load,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000, help="running jobs (default: 1000)")
    parser.add_argument("--seed", type=int, default=0, help="seed (default: 0)")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # the child: measure a saved fabric
    parser.add_argument("--keep", type=Path, metavar="FILE", help="also keep the ConfigMaps written (JSON)")
    args = parser.parse_args(argv)
    if args.measure is not None:
        print(json.dumps(in_new_leader(args.measure)))
        return 0
    started = time.perf_counter()
    found, free = configmaps(args.jobs, args.seed)
    written_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as directory:
        path = Path(args.keep) if args.keep is not None else Path(directory) / "fabric.json"
        path.write_text(json.dumps({"configmaps": found, "free": free}), encoding="utf-8")
        child = subprocess.run(
            [sys.executable, __file__, "--measure", str(path)], capture_output=True, text=True, check=True
        )
    result = json.loads(child.stdout.strip().splitlines()[-1])
    ratio = result["plan_around_s"] / result["plan_alone_s"]
    checks = {
        f"rebuild <= {REBUILD_TARGET_S:g} s": result["rebuild_s"] <= REBUILD_TARGET_S,
        f"rebuild <= {REBUILD_TARGET_MIB:g} MiB": result["rebuild_peak_rss_mib"] <= REBUILD_TARGET_MIB,
        f"around <= {PLAN_TARGET_RATIO:g}x alone": ratio <= PLAN_TARGET_RATIO,
    }
    emit(
        {
            "bench": "fabric-ledger-scale",
            "nodes": LEAVES * PER_LEAF,
            **result,
            "plan_around_over_alone": ratio,
            "configmaps_written_s": written_s,
            "ok": all(checks.values()),
            "checks": checks,
        }
    )
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
