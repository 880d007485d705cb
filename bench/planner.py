"""Planner benchmark: ringroute's rank orders against the baselines on realistic placements (DESIGN §5).

For every topology family (2-tier ToR, 2-tier rail-optimized, 3-tier; 1:1, 2:1, 4:1 oversubscription), job size
and placement (fragmented, packed-with-noise on a cluster at ~60 % occupancy) it plans with `plan_ranks` and
compares the result with every baseline order under the same pattern and routing model (ring with Q = 1, 4, 8
queue pairs under ecmp, slice and pinned; halving-doubling under ecmp, slice and pinned). Every metric comes
with its bound. Separate timing cases plan 1,024 and 8,192 servers in fresh processes to report wall time and
peak RSS, and `ringroute plan` runs as a child process at 4,096 servers in every pattern x routing (and once under
the controller's default budget) for its peak RSS against 1 GiB (`cli-peak-rss` lines, each with target and pass).
The last line is a summary that checks the required results; the exit code is 1 when one fails.

    python bench/planner.py [--quick] [--seed 7] [--cli-memory-only]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import emit, peak_rss_mb  # noqa: E402
from planner import (  # noqa: E402
    BASELINES,
    Device,
    JobNetwork,
    Layout,
    Pattern,
    Placement,
    RoutePlan,
    Routing,
    SeedMetrics,
    Server,
    Topology,
    baseline_order,
    generate_topology,
    job_network,
    order_seed_metrics,
    paired_difference,
    plan_ranks,
    ring_cross_edges,
)

PlacementKind = Literal["fragmented", "packed"]
OCCUPANCY = 0.6
"""Share of the cluster's servers in use after the job is placed (background jobs + this job)."""
QAP_MAX_SERVERS = 128
"""The generic QAP mapper only runs on small jobs (it is slow and stalls far above the bound)."""
EPS = 1e-9
SEEDS = 20
"""ECMP seeds of every evaluation (the report's default)."""
MORE_SEEDS = 200
"""ECMP seeds of a re-evaluation of ringroute and every baseline it does not beat outright at SEEDS."""
# Every order of a row is evaluated on the same seeds 0 .. k-1, and the simulator draws ECMP choices from
# common random numbers, so ringroute is compared with each baseline seed by seed (paired differences).


@dataclass(frozen=True)
class Family:
    """A topology family: layout, tiers, oversubscription and switch sizes."""

    name: str
    layout: Layout
    servers_per_leaf: int
    leaf_oversubscription: float
    leaves_per_pod: int | None = None
    spine_oversubscription: float = 1.0


def families(quick: bool) -> list[Family]:
    """The families of DESIGN §5 (a subset with --quick)."""
    shapes: list[tuple[str, Layout, int, int | None]] = [
        ("tor-2tier", "tor", 8, None),
        ("rail-2tier", "rail", 16, None),
        ("tor-3tier", "tor", 8, 8),
    ]
    full = [
        Family(f"{name}-{int(over)}to1", layout, per_leaf, over, pods)
        for name, layout, per_leaf, pods in shapes
        for over in (1.0, 2.0, 4.0)
    ]
    full.append(Family("tor-3tier-spine-2to1", "tor", 8, 1.0, 8, 2.0))
    if not quick:
        return full
    keep = {"tor-2tier-1to1", "tor-2tier-2to1", "rail-2tier-1to1", "tor-3tier-4to1"}
    return [f for f in full if f.name in keep]


@dataclass(frozen=True)
class Case:
    """One benchmark case: family, job size, placement kind and which variants to run."""

    family: Family
    servers: int
    placement: PlacementKind
    variants: tuple[tuple[Pattern, Routing, int], ...]


ALL_VARIANTS: tuple[tuple[Pattern, Routing, int], ...] = (
    ("ring", "ecmp", 1),
    ("ring", "ecmp", 4),
    ("ring", "ecmp", 8),
    ("ring", "slice", 1),
    ("ring", "pinned", 1),
    ("halving-doubling", "ecmp", 1),
    ("halving-doubling", "slice", 1),
    ("halving-doubling", "pinned", 1),
)
LARGE_VARIANTS = tuple(v for v in ALL_VARIANTS if v[2] != 4)
RING_ONLY = tuple(v for v in ALL_VARIANTS if v[0] == "ring" and v[2] == 1)


def cases(quick: bool) -> list[Case]:
    """The benchmark matrix, sized to run in minutes on 2 cores (--quick: well under a minute)."""
    chosen: list[Case] = []
    kinds: tuple[PlacementKind, ...] = ("fragmented", "packed")
    for family in families(quick):
        sizes = [64, 512]
        if not quick and family.name == "tor-2tier-1to1":
            sizes = [64, 128, 512, 1024]
        elif not quick and family.name in ("tor-2tier-2to1", "tor-2tier-4to1", "rail-2tier-1to1", "tor-3tier-1to1"):
            sizes = [64, 512, 1024]
        for servers in sizes:
            variants = ALL_VARIANTS if servers < 1024 else LARGE_VARIANTS
            if servers == 1024 and family.name == "tor-2tier-2to1":
                variants = RING_ONLY
            if quick:
                variants = tuple(v for v in variants if v[2] != 8)
            chosen += [Case(family, servers, kind, variants) for kind in kinds]
    if not quick:
        chosen.append(Case(families(False)[0], 4096, "fragmented", RING_ONLY))
    return chosen


def cluster_topology(family: Family, job: int) -> Topology:
    """A cluster big enough that the job plus background load fill ~OCCUPANCY of it (whole pods in 3 tiers)."""
    servers = math.ceil(job / (OCCUPANCY - 0.25))
    leaves = math.ceil(servers / family.servers_per_leaf)
    if family.leaves_per_pod:
        leaves = math.ceil(leaves / family.leaves_per_pod) * family.leaves_per_pod
    return generate_topology(
        leaves=leaves,
        servers_per_leaf=family.servers_per_leaf,
        leaves_per_pod=family.leaves_per_pod,
        layout=family.layout,
        nics_per_server=8,
        leaf_oversubscription=family.leaf_oversubscription,
        spine_oversubscription=family.spine_oversubscription,
    )


def _server(index: int, node: str, node_number: int) -> Server:
    ip = f"10.{(node_number >> 16) & 255}.{(node_number >> 8) & 255}.{node_number & 255}"
    devices = tuple(
        Device(device_id=d, device_ip=f"172.{16 + d}.{(node_number >> 8) & 255}.{node_number & 255}") for d in range(8)
    )
    return Server(
        pod_name=f"bench-worker-{index}",
        node_name=node,
        server_id=ip,
        host_ip=ip,
        pod_ip=f"192.168.{(index >> 8) & 255}.{index & 255}",
        task_name="worker",
        task_index=index,
        devices=devices,
    )


def place(topology: Topology, job: int, kind: PlacementKind, rng: np.random.Generator) -> Placement:
    """The job's pods on the cluster, in pod-index order.

    Background jobs hold a random 25 % of the nodes. `fragmented`: the job takes random free nodes, and Volcano
    binds pod indices in no topological order. `packed`: a leaf-packing scheduler fills free nodes leaf by leaf
    from a random leaf; pod indices follow the fill order with 20 % of them swapped (binding races).
    """
    nodes = sorted(topology.paths, key=lambda n: (topology.paths[n], n))
    busy = rng.random(len(nodes)) < 0.25
    free = [n for n, b in zip(nodes, busy, strict=True) if not b]
    if kind == "fragmented":
        chosen = [free[i] for i in rng.choice(len(free), size=job, replace=False)]
    else:
        start = int(rng.integers(len(free)))
        chosen = [free[(start + i) % len(free)] for i in range(job)]
        swaps = rng.choice(job, size=(job // 5, 2), replace=True)
        for a, b in swaps.tolist():
            chosen[a], chosen[b] = chosen[b], chosen[a]
    number = {n: i for i, n in enumerate(nodes)}
    servers = tuple(_server(i, node, number[node]) for i, node in enumerate(chosen))
    return Placement(job_name="bench", namespace="default", servers=servers)


def _metrics(network: JobNetwork, order: Sequence[int], metrics: SeedMetrics, pattern: Pattern) -> dict[str, Any]:
    """An order's row entry: means (standard errors) over its seeds, every metric with its bound and gap."""
    counts, bounds = ring_cross_edges(network, list(order))
    load = metrics.max_link_load
    busbw = metrics.busbw("ring" if pattern == "ring" else "halving-doubling")
    k = load.size

    def sem(values: Any) -> float:
        return float(values.std(ddof=1) / math.sqrt(k)) if k > 1 else 0.0

    out: dict[str, Any] = {
        "cross_edges": list(counts),
        "cross_edge_bounds": list(bounds),
        "cross_edge_gaps": [c - b for c, b in zip(counts, bounds, strict=True)],
        "max_link_load": float(load.mean()),
        "max_link_load_sem": sem(load),
        "max_link_load_bound": metrics.max_link_load_bound,
        "max_link_load_gap": float(load.mean()) - metrics.max_link_load_bound,
        "busbw": float(busbw.mean()),
        "busbw_sem": sem(busbw),
        "busbw_bound": 1.0 / metrics.max_link_load_bound,
    }
    out["busbw_gap"] = out["busbw_bound"] - out["busbw"]
    return out


def _paired(mine: SeedMetrics, other: SeedMetrics, pattern: Pattern) -> dict[str, Any]:
    """ringroute minus another order, seed by seed on the same seeds: mean difference and its standard error."""
    load, load_se = paired_difference(mine.max_link_load, other.max_link_load)
    collective: Literal["ring", "halving-doubling"] = "ring" if pattern == "ring" else "halving-doubling"
    busbw, busbw_se = paired_difference(mine.busbw(collective), other.busbw(collective))
    return {
        "seeds": int(mine.seeds.size),
        "max_link_load_diff": load,
        "max_link_load_diff_se": load_se,
        "busbw_diff": busbw,
        "busbw_diff_se": busbw_se,
    }


def _evaluate(
    network: JobNetwork,
    order: Sequence[int],
    *,
    pattern: Pattern,
    routing: Routing,
    qps: int,
    seeds: int,
    routes: RoutePlan | None,
) -> SeedMetrics:
    """Per-seed metrics of one order on seeds 0 .. seeds-1 (one pass for deterministic routing), its pattern only."""
    return order_seed_metrics(
        network,
        order,
        pattern=pattern,
        routing=routing,
        qps=qps,
        seeds=seeds if routing == "ecmp" else 1,
        routes=routes,
        patterns=(),
    )


def _behind(paired: dict[str, Any], vendor: bool) -> bool:
    """True when ringroute is not strictly ahead: higher mean load than the vendor's, or lower mean bus bandwidth."""
    return bool((vendor and paired["max_link_load_diff"] > EPS) or paired["busbw_diff"] < -EPS)


def run_case(case: Case, seed: int) -> Iterator[dict[str, Any]]:
    """JSON rows of one case: one per (pattern, routing, qps) with every order's metrics."""
    family, job, kind = case.family, case.servers, case.placement
    rng = np.random.default_rng(seed)
    topology = cluster_topology(family, job)
    placement = place(topology, job, kind, rng)
    network: JobNetwork = job_network(topology, [s.node_name for s in placement.servers])
    names = [b for b in BASELINES if b != "qap" or job <= QAP_MAX_SERVERS]
    patterns: list[Pattern] = list(dict.fromkeys(v[0] for v in case.variants))
    for pattern in patterns:
        # Halving-doubling runs on power-of-two jobs (fragmented) and on non-power-of-two ones (packed, 7/8 of
        # the servers) so that the fold/unfold steps are exercised too.
        hd_servers = job if pattern == "ring" or kind == "fragmented" else job - job // 8
        if hd_servers != job:
            case_placement = Placement(placement.job_name, placement.namespace, placement.servers[:hd_servers])
            case_network = job_network(topology, [s.node_name for s in case_placement.servers])
        else:
            case_placement, case_network = placement, network
        baselines: dict[str, tuple[int, ...]] = {}
        baseline_seconds: dict[str, float] = {}
        for name in names:
            started = time.perf_counter()
            baselines[name] = baseline_order(name, case_placement, topology, seed, pattern=pattern)
            baseline_seconds[name] = time.perf_counter() - started
        for _, routing, qps in (v for v in case.variants if v[0] == pattern):
            plan = plan_ranks(case_placement, topology, pattern, routing, qps=qps, rng=seed)
            everyone = {"ringroute": plan.order, **baselines}

            same = {"pattern": pattern, "routing": routing, "qps": qps}

            def evaluate(name: str, seeds: int, routes: RoutePlan | None = plan.routes) -> SeedMetrics:
                routes = routes if name == "ringroute" else None
                return _evaluate(case_network, everyone[name], **same, seeds=seeds, routes=routes)  # type: ignore[arg-type]  # noqa: B023

            metrics = {name: evaluate(name, SEEDS) for name in everyone}
            paired = {name: _paired(metrics["ringroute"], m, pattern) for name, m in metrics.items()}
            if routing == "ecmp":
                # Comparisons ringroute does not win outright at SEEDS are decided again on MORE_SEEDS seeds
                # (both orders, paired), so the 2-SE allowance only forgives differences within noise there.
                close = [n for n in baselines if _behind(paired[n], vendor=n == "nslb")]
                if close:
                    mine = evaluate("ringroute", MORE_SEEDS)
                    for name in close:
                        metrics[name] = evaluate(name, MORE_SEEDS)
                        paired[name] = _paired(mine, metrics[name], pattern)
                    metrics["ringroute"] = mine
            orders = {
                name: {
                    **_metrics(case_network, everyone[name], m, pattern),
                    "seeds": int(m.seeds.size) if routing == "ecmp" else 0,
                    **({"vs_ringroute": paired[name]} if name != "ringroute" else {}),
                }
                for name, m in metrics.items()
            }
            yield {
                "case": "plan",
                "family": family.name,
                "layout": family.layout,
                "switch_tiers": network.switch_tiers,
                "leaf_oversubscription": family.leaf_oversubscription,
                "spine_oversubscription": family.spine_oversubscription,
                "servers": case_network.servers,
                "npus": case_network.servers * 8,
                "leaves_touched": len(case_network.leaf_names),
                "cluster_servers": len(topology.paths),
                "placement": kind,
                "pattern": pattern,
                "routing": routing,
                "qps": qps,
                "plan_status": plan.status,
                "plan_message": plan.message,
                "plan_wall_s": plan.wall_time_s,
                "pinned_routes": plan.routes.to_dict() if plan.routes is not None else None,
                "baseline_wall_s": baseline_seconds,
                "orders": orders,
            }


# -- timing cases (fresh process each, so peak RSS is the planner's own) -----------------------------------------


def timing_case(servers: int, seed: int) -> dict[str, Any]:
    """Plan a `servers`-server ring job (ToR 2-tier 1:1, fragmented) in this process; wall time and peak RSS."""
    family = Family("tor-2tier-1to1", "tor", 8, 1.0)
    rng = np.random.default_rng(seed)
    topology = cluster_topology(family, servers)
    placement = place(topology, servers, "fragmented", rng)
    rss_before = peak_rss_mb()
    started = time.perf_counter()
    plan = plan_ranks(placement, topology, "ring", "ecmp", rng=seed)
    wall = time.perf_counter() - started
    return {
        "case": "timing",
        "family": family.name,
        "servers": servers,
        "npus": servers * 8,
        "cluster_servers": len(topology.paths),
        "plan_wall_s": wall,
        "plan_status": plan.status,
        "peak_rss_mb": peak_rss_mb(),
        "peak_rss_before_plan_mb": rss_before,
        "max_link_load": plan.after.max_link_load,
        "max_link_load_bound": plan.after.max_link_load_bound,
    }


def timing_in_subprocess(servers: int, seed: int) -> dict[str, Any]:
    """Run `timing_case` in a fresh interpreter and return its JSON line."""
    output = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--timing-case", str(servers), "--seed", str(seed)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    record: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return record


# -- peak RSS of `ringroute plan` (a subprocess, every pattern and routing) ------------------------------------

CLI_SERVERS = 4096
CLI_RSS_TARGET_MIB = 1024.0
"""Issue 10: `ringroute plan` at 4,096 servers stays within 1 GiB in every pattern/routing combination."""
CLI_PATTERNS: tuple[Pattern, ...] = ("ring", "halving-doubling", "mixed")
CLI_ROUTINGS: tuple[Routing, ...] = ("ecmp", "slice", "pinned")
DEVICE_ANNOTATION = "cce.kubectl.kubernetes.io/ascend-1980-configuration"
NPU_RESOURCE = "huawei.com/ascend-1980"


def _pod_object(server: Server) -> dict[str, Any]:
    """The pod of `server` as `kubectl get pods -o json` prints it: bound, running, annotated by the device plugin."""
    info = {
        "pod_name": server.pod_name,
        "server_id": server.server_id,
        "devices": [{"device_id": str(d.device_id), "device_ip": d.device_ip} for d in server.devices],
    }
    npus = {NPU_RESOURCE: str(len(server.devices))}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": server.pod_name,
            "namespace": "default",
            "labels": {
                "ring-controller.cce": "ascend-1980",
                "volcano.sh/job-name": "bench",
                "volcano.sh/task-spec": server.task_name,
                "volcano.sh/task-index": str(server.task_index),
            },
            "annotations": {"volcano.sh/job-version": "0", DEVICE_ANNOTATION: json.dumps(info)},
            "ownerReferences": [
                {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "bench", "uid": "bench-uid"}
            ],
        },
        "spec": {
            "nodeName": server.node_name,
            "containers": [{"name": "train", "resources": {"requests": npus, "limits": npus}}],
        },
        "status": {"phase": "Running", "hostIP": server.host_ip, "podIP": server.pod_ip},
    }


def cli_inputs(directory: Path, servers: int, seed: int) -> tuple[Path, Path]:
    """A `servers`-server job on random free nodes of a 3-tier fabric (8 servers a leaf, 8 leaves a pod), as
    `ringroute plan` reads it: the pods (JSON) and a ringroute topology file."""
    from planner import dump_topology_file

    family = Family("tor-3tier-1to1", "tor", 8, 1.0, 8)
    topology = cluster_topology(family, servers)
    placement = place(topology, servers, "fragmented", np.random.default_rng(seed))
    pods = directory / "pods.json"
    pods.write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": [_pod_object(s) for s in placement.servers]}),
        encoding="utf-8",
    )
    topology_file = directory / "topology.yaml"
    topology_file.write_text(dump_topology_file(topology), encoding="utf-8")
    return pods, topology_file


def _ringroute() -> list[str]:
    script = Path(sys.executable).with_name("ringroute")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from webhook.cli.main import main; sys.exit(main())"]


def cli_peak_rss(
    pods: Path, topology: Path, out_dir: Path, pattern: Pattern, routing: Routing, *budget: str
) -> dict[str, Any]:
    """Run `ringroute plan` in a child process; its peak RSS from the kernel (wait4's ru_maxrss: the largest of
    the child and the processes it waited for, so a planning worker is included)."""
    command = [*_ringroute(), "plan", "--pods", str(pods), "--topology", str(topology)]
    command += ["--pattern", pattern, "--routing", routing, *budget, "--out-dir", str(out_dir)]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    assert process.stderr is not None
    errors = process.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    peak_mib = usage.ru_maxrss / 1024.0
    level, fallback = None, None
    report = out_dir / "ringroute-plan.json"
    if process.returncode == 0 and report.exists():
        written = json.loads(report.read_text(encoding="utf-8"))
        level, fallback = written.get("plan_level"), (written.get("fallback") or {}).get("message")
    return {
        "case": "cli-peak-rss",
        "command": "ringroute plan",
        "servers": CLI_SERVERS,
        "family": "tor-3tier-1to1",
        "pattern": pattern,
        "routing": routing,
        "budget": " ".join(budget) or None,
        "exit_code": process.returncode,
        "error": errors.strip().splitlines()[-1] if process.returncode else None,
        "wall_s": wall,
        "peak_rss_mib": round(peak_mib, 1),
        "target_peak_rss_mib": CLI_RSS_TARGET_MIB,
        "pass": process.returncode == 0 and peak_mib <= CLI_RSS_TARGET_MIB,
        "plan_level": level,
        "fallback": fallback,
        "routes_json_mb": round((out_dir / "routes.json").stat().st_size / 1e6, 1)
        if (out_dir / "routes.json").exists()
        else None,
    }


def cli_memory_cases(seed: int) -> Iterator[dict[str, Any]]:
    """Peak RSS of `ringroute plan` at 4,096 servers, sequentially: every pattern x routing with no budget (all in
    one process), then mixed/pinned under the controller's default budget (512 MiB, 60 s)."""
    with tempfile.TemporaryDirectory(prefix="ringroute-bench-") as name:
        directory = Path(name)
        pods, topology = cli_inputs(directory, CLI_SERVERS, seed)
        for pattern in CLI_PATTERNS:
            for routing in CLI_ROUTINGS:
                yield cli_peak_rss(pods, topology, directory / f"out-{pattern}-{routing}", pattern, routing)
        budget = ("--memory-limit", "512", "--planning-timeout", "60")
        yield cli_peak_rss(pods, topology, directory / "out-budget", "mixed", "pinned", *budget)


# -- summary ----------------------------------------------------------------------------------------------------


@dataclass
class Tally:
    """Counts of cases meeting each required result, with the first few failures named."""

    passed: int = 0
    total: int = 0
    failures: list[str] | None = None

    def add(self, ok: bool, label: str) -> None:
        self.total += 1
        if ok:
            self.passed += 1
            return
        self.failures = self.failures or []
        if len(self.failures) < 5:
            self.failures.append(label)

    def summary(self) -> dict[str, Any]:
        share = self.passed / self.total if self.total else 1.0
        return {"passed": self.passed, "cases": self.total, "share": share, "first_failures": self.failures or []}


def _anchors(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """DESIGN §5 anchors from the run: ECMP bus bandwidth at 1,024 servers, λ* of random vs contiguous orders."""
    out: dict[str, Any] = {}
    for row in rows:
        where = (row["family"], row["servers"], row["placement"], row["pattern"], row["routing"], row["qps"])
        orders = row["orders"]
        if where == ("tor-2tier-1to1", 1024, "fragmented", "ring", "ecmp", 1):
            out["ecmp_ring_busbw_1024_tor_1to1_q1"] = {
                name: orders[name]["busbw"] for name in ("random", "nslb", "leaf-grouped", "pod-index", "ringroute")
            }
        if row["pattern"] == "ring" and row["routing"] == "pinned" and row["placement"] == "fragmented":
            key = f"lambda_star_{row['family']}_{row['servers']}"
            if row["family"] in ("tor-2tier-2to1", "tor-2tier-4to1", "tor-3tier-spine-2to1"):
                out[key] = {name: orders[name]["max_link_load_bound"] for name in ("random", "nslb", "ringroute")}
    return out


def summarise(
    rows: Sequence[dict[str, Any]], timings: Sequence[dict[str, Any]], cli: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    """The summary line: each required result of issue 2 with its pass share and an explicit pass/fail."""
    cross = Tally()
    pinned = Tally()
    pinned_above_counting = Tally()
    vs_vendor, vs_vendor_strict = Tally(), Tally()
    vs_all, vs_all_strict = Tally(), Tally()
    plan_1024: list[float] = []
    for row in rows:
        label = f"{row['family']}/{row['servers']}/{row['placement']}/{row['pattern']}/{row['routing']}/q{row['qps']}"
        mine = row["orders"]["ringroute"]
        if row["pattern"] == "ring":
            cross.add(mine["cross_edges"] == mine["cross_edge_bounds"], label)
        if row["routing"] == "pinned":
            pinned.add(abs(mine["max_link_load"] - mine["max_link_load_bound"]) < EPS, label)
            counting = (row["pinned_routes"] or {}).get("lambda_star", mine["max_link_load_bound"])
            # Cases where the proven optimum is above the counting bound λ* (informational; 0 expected here).
            pinned_above_counting.add(mine["max_link_load_bound"] <= counting, label)
        else:
            # ECMP metrics are means over seeds: "not worse" allows two standard errors of the paired
            # per-seed difference (same seeds, common random numbers; 0 for slice, which is exact); close
            # calls were re-evaluated on MORE_SEEDS seeds first.
            vendor = row["orders"]["nslb"]["vs_ringroute"]
            load_diff, load_se = vendor["max_link_load_diff"], vendor["max_link_load_diff_se"]
            vs_vendor_strict.add(load_diff <= EPS, label)
            vs_vendor.add(load_diff <= 2.0 * load_se + EPS, label)
            others = [o["vs_ringroute"] for name, o in row["orders"].items() if name != "ringroute"]
            vs_all_strict.add(all(o["busbw_diff"] >= -EPS for o in others), label)
            vs_all.add(all(o["busbw_diff"] >= -2.0 * o["busbw_diff_se"] - EPS for o in others), label)
        if row["servers"] == 1024:
            plan_1024.append(row["plan_wall_s"])
    by_size = {t["servers"]: t for t in timings}
    limits = {1024: 0.5, 8192: 5.0}
    timing_ok = {str(n): bool(n in by_size and by_size[n]["plan_wall_s"] <= limit) for n, limit in limits.items()}
    rss = max((t["peak_rss_mb"] for t in timings), default=0.0)
    checks = {
        "cross_tier_ring_edges_at_bound": cross.summary(),
        "pinned_max_load_at_lambda_star": pinned.summary(),
        "ecmp_slice_max_load_at_most_nslb": vs_vendor.summary(),
        "ecmp_slice_busbw_at_least_every_baseline": vs_all.summary(),
    }
    required = {
        "cross-tier ring edges equal their lower bound in 100 % of cases": cross.summary()["share"] == 1.0,
        "pinned max link load equals the bound in 100 % of cases (ring and halving-doubling)": (
            pinned.summary()["share"] == 1.0
        ),
        "ecmp/slice: ringroute max link load <= nslb's in every case (2 SE)": vs_vendor.summary()["share"] == 1.0,
        "ecmp/slice: ringroute busbw >= every baseline's in every case (2 SE)": vs_all.summary()["share"] == 1.0,
        "planning time <= 0.5 s at 1,024 servers": timing_ok["1024"],
        "planning time <= 0.5 s at 1,024 servers for every pattern, routing and Q": bool(plan_1024)
        and max(plan_1024) <= limits[1024],
        "planning time <= 5 s at 8,192 servers": timing_ok["8192"],
        "peak RSS <= 500 MB": bool(timings) and rss <= 500.0,
        "ringroute plan peak RSS <= 1 GiB at 4,096 servers, every pattern and routing": bool(cli)
        and all(c["pass"] for c in cli),
    }
    informational = {
        "ecmp_slice_max_load_at_most_nslb_strict": vs_vendor_strict.summary(),
        "ecmp_slice_busbw_at_least_every_baseline_strict": vs_all_strict.summary(),
        "pinned_bound_equals_counting_lambda_star": pinned_above_counting.summary(),
    }
    return {
        "case": "summary",
        "ok": all(required.values()),
        "required_results": {name: "pass" if ok else "FAIL" for name, ok in required.items()},
        **checks,
        **informational,
        "anchors": _anchors(rows),
        "plan_time_s": {str(n): by_size[n]["plan_wall_s"] for n in limits if n in by_size},
        "plan_time_within_limit": timing_ok,
        "plan_time_limits_s": {str(n): v for n, v in limits.items()},
        "max_plan_wall_s_any_variant_1024": max(plan_1024, default=None),
        "peak_rss_mb": rss,
        "peak_rss_limit_mb": 500.0,
        "cli_peak_rss_mib": {
            f"{c['pattern']}/{c['routing']}" + (" budget" if c["budget"] else ""): c["peak_rss_mib"] for c in cli
        },
        "cli_peak_rss_target_mib": CLI_RSS_TARGET_MIB,
        "ecmp_seeds": {"default": SEEDS, "close_calls": MORE_SEEDS, "comparison": "paired per-seed differences"},
        "rows": len(rows),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a fast subset of families, sizes and variants")
    parser.add_argument("--seed", type=int, default=7, help="seed of placements, baselines and plans")
    parser.add_argument("--timing-case", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--cli-memory-only",
        action="store_true",
        help="only the peak RSS of `ringroute plan` at 4,096 servers, every pattern and routing",
    )
    args = parser.parse_args(argv)
    if args.timing_case is not None:
        emit(timing_case(args.timing_case, args.seed))
        return 0
    if args.cli_memory_only:
        cli = []
        for record in cli_memory_cases(args.seed):
            emit(record)
            cli.append(record)
        passed = all(c["pass"] for c in cli)
        emit(
            {
                "case": "cli-peak-rss-summary",
                "target_peak_rss_mib": CLI_RSS_TARGET_MIB,
                "pass": passed,
                "max_peak_rss_mib": max(c["peak_rss_mib"] for c in cli),
            }
        )
        return 0 if passed else 1
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for case in cases(args.quick):
        for row in run_case(case, args.seed):
            emit(row)
            rows.append(row)
    timings = [timing_in_subprocess(n, args.seed) for n in (1024, 8192)]
    for record in timings:
        emit(record)
    cli = []
    for record in cli_memory_cases(args.seed):
        emit(record)
        cli.append(record)
    summary = summarise(rows, timings, cli)
    summary["bench_wall_s"] = time.perf_counter() - started
    emit(summary)
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
