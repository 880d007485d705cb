"""Shared-fabric benchmark: many jobs on one fabric, each planned as it arrives, measured from the written files.

A 2-tier Clos of 16 leaves x 8 servers x 8 NICs, 64 / 32 / 8 / 4 uplinks per leaf; 5-8 jobs of 3-32 servers fill
80-90 % of the servers, placed packed (leaf by leaf), by binpack churn (jobs arrive and leave, a binpack
scheduler fills the fullest leaves first, so leaves are shared by 2-3 jobs) or at random (3-6 jobs a leaf). Every
leaf hashes with a random affine function of its own (ringroute is never told it): the hash model ringroute plans
with is that function declared, or one calibrated from samples the switches answered.

Jobs are planned one after another, as `ringroute plan --running` of the earlier still-running ones plans them
(the same request, driver and files), each writing its plan directory; at the end every running job's files are
read back as the ledger reads them and every queue pair is followed through the switches' real hash. A job's
ring runs at 1 / (the load of its busiest link over every job's queue pairs). Deliveries side by side, in one run:
ECMP with 1 queue pair (ports as HCCL would draw them), 4 spread ports without a model, each job steered alone
(today's plans, Q = 1 and 4), each steered around the running jobs (Q = 1 and 4), and the cluster-wide bound.
The last line checks the required results (exit code 1 when one fails).

    python bench/fabric.py [--quick] [--seed 0]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import emit, peak_rss_mb  # noqa: E402
from planner import (  # noqa: E402
    Device,
    HashModel,
    HashSample,
    LearnedHash,
    Placement,
    QpPortLine,
    RunningJob,
    Server,
    SwitchHash,
    Topology,
    calibrate_hash_model,
    compile_switch_hash,
    fabric_ledger,
    fabric_switches,
    generate_topology,
    probe_tuples,
    read_running_job,
    switch_pools,
)
from webhook.common.settings import PlanningSettings  # noqa: E402
from webhook.controller.graded_plan import PlanRequest, graded_plan  # noqa: E402
from webhook.controller.plan_files import plan_outputs  # noqa: E402

LEAVES, PER_LEAF, NICS = 16, 8, 8
UPLINKS = (64, 32, 8, 4)
PLACEMENTS = ("packed", "churn", "random")
DELIVERIES = ("ecmp, 1 queue pair", "ecmp, 4 spread ports", "alone", "around")
SAMPLES_PER_SWITCH = 160
EPS = 1e-9


# -- the fabric and its secret hashes ------------------------------------------------------------------------------


def fabric(uplinks: int) -> Topology:
    topology = generate_topology(leaves=LEAVES, servers_per_leaf=PER_LEAF, nics_per_server=NICS)
    return dataclasses.replace(topology, fabric=dataclasses.replace(topology.fabric, leaf_uplinks=uplinks))


def secret_hashes(topology: Topology, rng: np.random.Generator) -> HashModel:
    """Every leaf's own random affine hash over the 104-bit key, low bits to a random member order: exactly a
    learned hash valid everywhere (no span checks)."""
    switches: dict[str, SwitchHash] = {}
    for switch in fabric_switches(topology).values():
        bits = int(math.log2(switch.next_hops))
        rows = tuple(int.from_bytes(rng.bytes(13), "big") for _ in range(bits))
        order = rng.permutation(switch.next_hops)
        constant = int(rng.integers(0, 1 << bits))
        table = tuple(f"spine-{int(order[z ^ constant])}" for z in range(1 << bits))
        switches[switch.name] = SwitchHash(LearnedHash(rows, table, 0, ()), source="declared")
    return HashModel(switches=switches)


def server(index: int, node: str, number: int) -> Server:
    devices = tuple(Device(d, f"172.{16 + d}.{number >> 8}.{number & 255}") for d in range(NICS))
    ip = f"10.0.{number >> 8}.{number & 255}"
    return Server(f"w-{index}", node, ip, ip, f"192.168.{number >> 8}.{number & 255}", "worker", index, devices)


def calibrated(topology: Topology, secret: HashModel, seed: int) -> HashModel:
    """The model calibration learns from what the switches answer about probes over every server's addresses,
    asking the switches it calls partial (a next hop never answered) or short of samples again, as an admin does
    (docs/fabric-calibration.md), at most three more times."""
    nodes = sorted(topology.paths)
    everyone = Placement("all", "bench", tuple(server(i, n, i) for i, n in enumerate(nodes)))
    switches = fabric_switches(topology)
    pools = switch_pools(topology, everyone)
    samples: list[HashSample] = []
    asking = list(pools)
    for attempt in range(4):
        chosen = {name: pools[name] for name in asking}
        probes = probe_tuples(chosen, switches=switches, count=SAMPLES_PER_SWITCH, rng=seed + 7919 * attempt)
        for name, asked in probes.items():
            compiled = compile_switch_hash(secret.switches[name], "leaf")
            src = np.array([p.src for p in asked.probes], dtype=np.uint64)
            dst = np.array([p.dst for p in asked.probes], dtype=np.uint64)
            sport = np.array([p.sport for p in asked.probes], dtype=np.int64)
            hops = compiled.evaluate(src, dst, sport, np.full(src.size, switches[name].next_hops))
            samples += [
                HashSample(name, p.src, p.dst, p.sport, f"spine-{int(h)}", line=len(samples) + k + 1)
                for k, (p, h) in enumerate(zip(asked.probes, hops, strict=True))
            ]
        result = calibrate_hash_model(samples, switches=switches)
        asking = [name for name, found in result.switches.items() if found.status in ("partial", "needs-samples")]
        if not asking:
            break
    return result.model


# -- placements ----------------------------------------------------------------------------------------------------

Event = tuple[str, int, tuple[str, ...]]
"""("arrive", job, nodes) or ("leave", job, ())."""


def _sizes(total: int, rng: np.random.Generator) -> list[int]:
    target = int(total * rng.uniform(0.8, 0.9))
    sizes: list[int] = []
    while len(sizes) < 8:
        size = int(rng.integers(3, 33))
        if sum(sizes) + size > target:
            size = target - sum(sizes)
        if size < 3:
            break
        sizes.append(size)
    return sizes


def _binpack(free: set[str], size: int, leaf_of: dict[str, str]) -> tuple[str, ...]:
    by_leaf: dict[str, list[str]] = {}
    for node in free:
        by_leaf.setdefault(leaf_of[node], []).append(node)
    chosen: list[str] = []
    for leaf in sorted(by_leaf, key=lambda leaf: (len(by_leaf[leaf]), leaf)):
        chosen += sorted(by_leaf[leaf])[: size - len(chosen)]
    return tuple(chosen)


def events(topology: Topology, kind: str, rng: np.random.Generator) -> list[Event]:
    nodes = sorted(topology.paths, key=lambda n: (topology.paths[n], n))
    if kind == "packed":
        out, at = [], 0
        for k, size in enumerate(_sizes(len(nodes), rng)):
            out.append(("arrive", k, tuple(nodes[at : at + size])))
            at += size
        return out
    if kind == "random":
        order = [nodes[i] for i in rng.permutation(len(nodes))]
        out, at = [], 0
        for k, size in enumerate(_sizes(len(nodes), rng)):
            out.append(("arrive", k, tuple(order[at : at + size])))
            at += size
        return out
    leaf_of = {n: topology.paths[n][0] for n in nodes}
    free, out, k = set(nodes), [], 0
    running: dict[int, tuple[str, ...]] = {}
    for _ in range(40):  # arrivals and departures, then small jobs until 80 % of the servers run
        occupied = 1 - len(free) / len(nodes)
        if running and (occupied > 0.9 or rng.random() < 0.35):
            gone = sorted(running)[int(rng.integers(len(running)))]
            free |= set(running.pop(gone))
            out.append(("leave", gone, ()))
            continue
        size = int(rng.integers(3, 33))
        if size <= len(free):
            chosen = _binpack(free, size, leaf_of)
            free -= set(chosen)
            running[k] = chosen
            out.append(("arrive", k, chosen))
            k += 1
    while 1 - len(free) / len(nodes) < 0.8 and len(free) >= 3:
        chosen = _binpack(free, min(int(rng.integers(3, 12)), len(free)), leaf_of)
        free -= set(chosen)
        running[k] = chosen
        out.append(("arrive", k, chosen))
        k += 1
    return out


# -- one scenario --------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Outcome:
    busbw: float
    max_link_load: float
    bound: float
    jobs: int
    slowed: int
    """Jobs running slower than they would alone on the fabric."""
    plan_s: float


def _files(outputs: dict[str, Any]) -> dict[str, str]:
    return {name: text if isinstance(text, str) else "".join(text) for name, text in outputs.items()}


def _drawn_ports(job: RunningJob, qps: int, rng: np.random.Generator) -> RunningJob:
    """The job with the source ports HCCL would use without a port file: drawn per queue pair, hashed as any."""
    lines = []
    n = len(job.addresses)
    for rank in range(n):
        for nic in range(NICS):
            for other in {(rank + 1) % n, (rank - 1) % n} - {rank}:
                ports = tuple(int(p) for p in rng.choice(np.arange(49152, 65536), size=qps, replace=False))
                lines.append(QpPortLine(job.addresses[rank][nic], job.addresses[other][nic], ports))
    return dataclasses.replace(job, port_lines=tuple(lines), qps=qps, routes=None)


_DONE: dict[tuple[Any, ...], Outcome] = {}


def scenario(
    uplinks: int, kind: str, delivery: str, *, qps: int, model_kind: str, seed: int, models: dict[Any, Any]
) -> Outcome:
    """One fabric's jobs planned one after another with `delivery` (memoised: a run is deterministic)."""
    memo = (uplinks, kind, delivery, qps, model_kind, seed)
    if memo not in _DONE:
        _DONE[memo] = _scenario(uplinks, kind, delivery, qps=qps, model_kind=model_kind, seed=seed, models=models)
    return _DONE[memo]


def _scenario(
    uplinks: int, kind: str, delivery: str, *, qps: int, model_kind: str, seed: int, models: dict[Any, Any]
) -> Outcome:
    rng = np.random.default_rng(seed)
    topology = fabric(uplinks)
    key = (uplinks, seed)
    if key not in models:
        hidden = secret_hashes(topology, np.random.default_rng(seed + 1000))
        models[key] = {"secret": hidden, "declared": hidden, "calibrated": None}
    if model_kind == "calibrated" and models[key]["calibrated"] is None:
        models[key]["calibrated"] = calibrated(topology, models[key]["secret"], seed)
    secret: HashModel = models[key]["secret"]
    model: HashModel = models[key][model_kind]
    numbers = {node: i for i, node in enumerate(sorted(topology.paths))}
    running: dict[int, RunningJob] = {}
    planning = PlanningSettings(pattern="ring", routing="pinned", qps_per_connection=qps)
    spent = 0.0
    for what, k, nodes in events(topology, kind, rng):
        if what == "leave":
            running.pop(k, None)
            continue
        placement = Placement(f"job-{k}", "bench", tuple(server(i, n, numbers[n]) for i, n in enumerate(nodes)))
        started = time.perf_counter()
        if delivery.startswith("ecmp"):
            spread = 4 if "spread" in delivery else 1
            ecmp = PlanningSettings(pattern="ring", routing="ecmp", qps_per_connection=spread)
            plan = graded_plan(PlanRequest(placement, topology, ecmp))
        else:
            background = None
            if delivery == "around" and running:
                ledger = fabric_ledger(list(running.values()), topology, model)
                background = ledger.background(list(nodes))
            plan = graded_plan(PlanRequest(placement, topology, planning, model, background))
        files = _files(plan_outputs(placement, plan, "1.0", compact=False).files)
        spent += time.perf_counter() - started
        job = read_running_job(files, key=f"job-{k}")
        if delivery == "ecmp, 1 queue pair":
            job = _drawn_ports(job, 1, rng)
        running[k] = job
    jobs = list(running.values())
    truth = fabric_ledger(jobs, topology, secret)  # every queue pair through the switches' real hash
    report = truth.report(busiest=0)
    slowed = 0
    for outlook in report.jobs:
        alone = fabric_ledger([j for j in jobs if j.key == outlook.key], topology, secret).report(busiest=0).jobs[0]
        slowed += outlook.busbw < alone.busbw - EPS
    return Outcome(report.busbw, report.max_link_load, report.bound, len(jobs), slowed, spent)


# -- the run -------------------------------------------------------------------------------------------------------


def cases(quick: bool) -> Iterator[tuple[int, str, str]]:
    for uplinks in UPLINKS[:2] if quick else UPLINKS:
        for kind in PLACEMENTS:
            for model_kind in ("declared",) if quick else ("declared", "calibrated"):
                yield uplinks, kind, model_kind


COLUMNS = (
    ("ecmp, 1 queue pair", "ecmp, 1 queue pair", 1),
    ("ecmp, 4 spread ports", "ecmp, 4 spread ports", 4),
    ("alone, Q=1", "alone", 1),
    ("alone, Q=4", "alone", 4),
    ("around, Q=1", "around", 1),
    ("around, Q=4", "around", 4),
)
"""(column, delivery, queue pairs): ECMP depends on no hash model, so it is measured with the declared one only."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer fabrics and seeds (a smoke run)")
    parser.add_argument("--seed", type=int, default=0, help="first seed (default: 0)")
    args = parser.parse_args(argv)
    seeds = range(args.seed, args.seed + (2 if args.quick else 5))
    models: dict[Any, Any] = {}
    failures: list[str] = []
    reached = runs = alone_reached = 0
    for uplinks, kind, model_kind in cases(args.quick):
        row: dict[str, Any] = {"case": "shared-fabric", "uplinks": uplinks, "placement": kind}
        row["hash_model"] = model_kind
        bounds: dict[int, list[float]] = {1: [], 4: []}
        for column, delivery, qps in COLUMNS:
            if delivery.startswith("ecmp") and model_kind != "declared":
                continue
            found = [
                scenario(uplinks, kind, delivery, qps=qps, model_kind=model_kind, seed=s, models=models) for s in seeds
            ]
            row[column] = round(float(np.mean([o.busbw for o in found])), 3)
            if delivery == "ecmp, 1 queue pair":
                continue
            at_bound = sum(o.max_link_load <= o.bound + EPS for o in found)
            row[f"{column}: at bound"] = f"{at_bound}/{len(found)}"
            row[f"{column}: slowed by neighbours"] = f"{sum(o.slowed for o in found)}/{sum(o.jobs for o in found)}"
            if delivery == "around":
                bounds[qps] += [o.bound for o in found]
                reached, runs = reached + at_bound, runs + len(found)
                row[f"{column}: plan s/job"] = round(sum(o.plan_s for o in found) / sum(o.jobs for o in found), 3)
                alone = [
                    scenario(uplinks, kind, "alone", qps=qps, model_kind=model_kind, seed=s, models=models)
                    for s in seeds
                ]
                alone_reached += sum(o.max_link_load <= o.bound + EPS for o in alone)
                worse = sum(o.max_link_load > a.max_link_load + EPS for o, a in zip(found, alone, strict=True))
                if worse:
                    failures.append(f"{uplinks}/{kind}/{model_kind}/Q{qps}: around worse than alone in {worse} runs")
                if uplinks >= 32 and kind != "random" and at_bound < len(found):
                    failures.append(f"{uplinks}/{kind}/{model_kind}/Q{qps}: around above the bound")
        for qps, found_bounds in bounds.items():
            row[f"bound, Q={qps} (busbw)"] = round(float(np.mean([1 / b for b in found_bounds])), 3)
        emit(row)
    emit(
        {
            "case": "shared-fabric-summary",
            "around_at_bound": f"{reached}/{runs}",
            "alone_at_bound": f"{alone_reached}/{runs}",
            "peak_rss_mib": peak_rss_mb(),
            "ok": not failures,
            "failures": failures,
        }
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
