"""Steering benchmark: pinned routes delivered to ECMP fabrics by per-queue-pair UDP source ports (docs/steering.md).

For the sample job (examples/, 12 servers under 4 leaves) and a 256-server job on a 3-tier fabric, ring and
halving-doubling, one line per delivery, side by side: ECMP with one queue pair, unmodelled spreading over 4 queue
pairs (an expectation over hash seeds), the pinned plan on paper, and the plan steered through a declared hash
model and through one calibrated from samples alone. Steered figures are the simulator's on the paths the model
gives the written ports. Then held-out checks: on fabrics with 2, 4 and 8 uplinks per leaf and a 3-tier fabric,
every switch hashes with a random affine function over GF(2) and a random member order that ringroute is never
told; calibration sees only samples of it, steering writes MultiQpSrcPort.cfg, and every queue pair of the file
is followed through the secret hashes to check it lands on its planned spine (and core). A non-affine hash is
refused with the switch named. Last, planning with steering at 4,096 servers runs in the controller's planning
process under its default budget (512 MiB, 60 s). The final line checks the required results (exit code 1 when
one fails).

    python bench/steering.py [--quick] [--seed 7]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import ipaddress
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import emit  # noqa: E402
from bench.planner import Family, cluster_topology, place  # noqa: E402
from planner import (  # noqa: E402
    Fabric,
    HashModel,
    HashSample,
    HashSpec,
    Pattern,
    Placement,
    SteeringResult,
    SwitchHash,
    Topology,
    calibrate_hash_model,
    fabric_switches,
    load_kube_objects,
    plan_ranks,
    probe_tuples,
    read_placement,
    steer_source_ports,
    switch_pools,
    topology_for_placement,
    topology_from_nodes,
)

PATTERNS: tuple[Pattern, ...] = ("ring", "halving-doubling")
QPS = 4
SAMPLES_PER_SWITCH = 160
"""Samples each switch answers for calibration (about 100 suffice; the margin covers spans of 80 bits)."""
DECLARED = HashModel(
    tiers={
        "leaf": SwitchHash(HashSpec("crc16-ccitt", seed=0x1D0F, bucket="modulo")),
        "spine": SwitchHash(HashSpec("crc32c", seed=0x5EED, bits=(8, 24), bucket="low-bits")),
    }
)
EPS = 1e-9


# -- a hash ringroute is never told --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SecretHash:
    """A switch's hash: `bits` random GF(2)-affine functions of the 104-bit key, the low bits taken as a bucket,
    buckets mapped to next hops by a random permutation (or, `affine=False`, a multiplicative hash modulo the
    member count that no affine model explains)."""

    matrix: np.ndarray
    """(bits, 104) uint8"""
    constant: np.ndarray
    """(bits,) uint8"""
    order: np.ndarray
    """next hop of each bucket"""
    affine: bool = True

    @classmethod
    def random(cls, members: int, rng: np.random.Generator, *, affine: bool = True) -> SecretHash:
        bits = max(1, int(math.log2(members)))
        return cls(
            rng.integers(0, 2, size=(bits, 104), dtype=np.uint8),
            rng.integers(0, 2, size=bits, dtype=np.uint8),
            rng.permutation(members),
            affine,
        )

    def next_hops(self, src: np.ndarray, dst: np.ndarray, sport: np.ndarray) -> np.ndarray:
        if not self.affine:
            key = src.astype(np.uint64) * np.uint64(0x9E3779B1) + dst.astype(np.uint64) * np.uint64(0x85EBCA77)
            key = (key + sport.astype(np.uint64) * np.uint64(0xC2B2AE3D)) & np.uint64(0xFFFFFFFF)
            mixed: np.ndarray = self.order[(key * key >> np.uint64(17)) % np.uint64(self.order.size)]
            return mixed
        fields = [(src, 32), (dst, 32), (np.full_like(src, 17), 8), (sport, 16), (np.full_like(src, 4791), 16)]
        columns = [
            ((value.astype(np.uint64)[:, None] >> np.arange(width - 1, -1, -1, dtype=np.uint64)) & 1)
            for value, width in fields
        ]
        key_bits = np.concatenate(columns, axis=1).astype(np.uint8)
        out = (key_bits @ self.matrix.T.astype(np.int64) + self.constant) % 2
        bucket = (out * (1 << np.arange(out.shape[1]))).sum(axis=1)
        hops: np.ndarray = self.order[bucket % self.order.size]
        return hops


def secret_fabric(topology: Topology, rng: np.random.Generator, *, affine: bool = True) -> dict[str, SecretHash]:
    """A secret hash for every switch that chooses among equal-cost next hops (tier-1 switches and spines)."""
    return {
        switch.name: SecretHash.random(switch.next_hops, rng, affine=affine)
        for switch in fabric_switches(topology).values()
    }


def answered_probes(
    topology: Topology,
    placement: Placement,
    secrets: dict[str, SecretHash],
    seed: int,
    more: dict[str, int] | None = None,
) -> tuple[list[HashSample], dict[str, int]]:
    """What an admin gets back from the switches: `--print-probes` of the job's switches (only `more`'s, with that
    many probes each, when asking again), each answered by the switch's secret hash (as `show routing hash ...`
    would), and the probes asked per switch."""
    switches = fabric_switches(topology)
    pools = switch_pools(topology, placement)
    asked: dict[str, int] = {}
    samples: list[HashSample] = []
    batches = [(pools, None)] if more is None else [({name: pools[name]}, count) for name, count in more.items()]
    for chosen, count in batches:
        probes = probe_tuples(chosen, switches=switches, count=count, rng=seed)
        for name, switch_probes in probes.items():
            tuples = switch_probes.probes
            asked[name] = len(tuples)
            src = np.array([p.src for p in tuples], dtype=np.uint64)
            dst = np.array([p.dst for p in tuples], dtype=np.uint64)
            sport = np.array([p.sport for p in tuples], dtype=np.uint64)
            hops = secrets[name].next_hops(src, dst, sport)
            prefix = "spine-" if switches[name].tier == "leaf" else "core-"
            samples += [
                HashSample(name, p.src, p.dst, p.sport, f"{prefix}{int(h)}", line=len(samples) + k + 1)
                for k, (p, h) in enumerate(zip(tuples, hops, strict=True))
            ]
    return samples, asked


def verify_with_secrets(result: SteeringResult, secrets: dict[str, SecretHash]) -> tuple[int, int]:
    """(queue pairs checked, queue pairs whose secret path differs from the planned one) over the written file."""
    assert result.routes is not None
    assert result.baseline is not None
    network = result.network
    checked = wrong = 0
    planned = result.routes  # the model's paths; off_plan already compares them with the plan
    for step, ports in zip(planned.steps, result.step_ports(planned), strict=True):
        found = planned.assignment_for(step)
        assert found is not None
        spines, cores = found
        rows, nics = np.nonzero(spines >= 0)
        pair, _qp = np.divmod(rows, planned.qps)
        src, dst = step[pair, 0], step[pair, 1]
        src_ip = np.array(
            [int(ipaddress.IPv4Address(result.addresses[s][d])) for s, d in zip(src, nics, strict=True)],
            dtype=np.uint64,
        )
        dst_ip = np.array(
            [int(ipaddress.IPv4Address(result.addresses[t][d])) for t, d in zip(dst, nics, strict=True)],
            dtype=np.uint64,
        )
        sport = ports[rows, nics].astype(np.uint64)
        rail = network.layout == "rail"
        leaf_names = [
            network.leaf_names[network.server_leaf[s]] + (f"/rail-{d}" if rail else "")
            for s, d in zip(src, nics, strict=True)
        ]
        for name in set(leaf_names):
            mine = np.array([n == name for n in leaf_names])
            hops = secrets[name].next_hops(src_ip[mine], dst_ip[mine], sport[mine])
            wrong += int(np.count_nonzero(hops != spines[rows[mine], nics[mine]]))
            checked += int(mine.sum())
        up = np.flatnonzero(cores[rows, nics] >= 0)
        spine_names = [
            f"{network.pod_names[network.server_pod[src[i]]]}/"
            + (f"rail-{nics[i]}/" if rail else "")
            + f"spine-{spines[rows[i], nics[i]]}"
            for i in up
        ]
        for name in set(spine_names):
            mine = up[np.array([n == name for n in spine_names])]
            hops = secrets[name].next_hops(src_ip[mine], dst_ip[mine], sport[mine])
            wrong += int(np.count_nonzero(hops != cores[rows[mine], nics[mine]]))
    return checked, wrong


# -- cases ---------------------------------------------------------------------------------------------------------


def sample_job() -> tuple[Placement, Topology]:
    """The job of examples/: 12 servers under 4 leaves of the 16-node cluster."""
    pods = load_kube_objects((ROOT / "examples" / "pods" / "llm-pretrain-pods.yaml").read_text(encoding="utf-8"))
    nodes = load_kube_objects((ROOT / "examples" / "topologies" / "nodes-16.yaml").read_text(encoding="utf-8"))
    readout = read_placement(
        pods,
        annotation_keys=("cce.kubectl.kubernetes.io/ascend-1980-configuration",),
        resource_name="huawei.com/ascend-1980",
    )
    assert readout.placement is not None
    topology = topology_from_nodes(nodes, (), Fabric(), skip_unlabelled=True)
    return readout.placement, topology_for_placement(topology, readout.placement)


def fabric_job(
    servers: int, *, per_leaf: int, uplinks: int | None, leaves_per_pod: int | None, seed: int
) -> tuple[Placement, Topology]:
    """A fragmented job of `servers` on a cluster at ~60 % occupancy (bench/planner.py's placements)."""
    family = Family("steering", "tor", per_leaf, 1.0, leaves_per_pod=leaves_per_pod)
    topology = cluster_topology(family, servers)
    if uplinks is not None:
        topology = dataclasses.replace(topology, fabric=dataclasses.replace(topology.fabric, leaf_uplinks=uplinks))
    placement = place(topology, servers, "fragmented", np.random.default_rng(seed))
    return placement, topology_for_placement(topology, placement)


def _busbw(evaluation: Any, pattern: Pattern) -> float:
    return float(evaluation.ring_busbw if pattern == "ring" else evaluation.hd_busbw)


def _row(case: str, pattern: Pattern, delivery: str, evaluation: Any, **extra: Any) -> dict[str, Any]:
    return {
        "bench": "steering",
        "case": case,
        "pattern": pattern,
        "delivery": delivery,
        "routing": evaluation.routing,
        "qps": evaluation.qps,
        "max_link_load": evaluation.max_link_load,
        "bound": evaluation.max_link_load_bound,
        "busbw": _busbw(evaluation, pattern),
        "seeds": evaluation.seeds,
        **extra,
    }


def calibrated(
    placement: Placement, topology: Topology, seed: int, *, affine: bool = True
) -> tuple[Any, dict[str, SecretHash], dict[str, int]]:
    """A hash model calibrated from answered probes of secret per-switch hashes (and the secrets, and the probes
    asked per switch): the admin's loop of docs/fabric-calibration.md, asking again about the switches calibration
    says need more samples (at most twice)."""
    secrets = secret_fabric(topology, np.random.default_rng(seed), affine=affine)
    samples, asked = answered_probes(topology, placement, secrets, seed)
    switches = fabric_switches(topology)
    result = calibrate_hash_model(samples, switches=switches)
    for attempt in range(2):
        short = {
            name: max(8, (s.samples_needed or 0) - s.samples_used + 8)
            for name, s in result.switches.items()
            if s.status == "needs-samples"
        }
        if not short:
            break
        extra, again = answered_probes(topology, placement, secrets, seed + 1 + attempt, more=short)
        samples += [dataclasses.replace(x, line=len(samples) + k + 1) for k, x in enumerate(extra)]
        for name, count in again.items():
            asked[name] += count
        result = calibrate_hash_model(samples, switches=switches)
    return result, secrets, asked


def delivery_rows(
    case: str, placement: Placement, topology: Topology, pattern: Pattern, seed: int
) -> list[dict[str, Any]]:
    """ECMP, spread, the pinned plan, steered through a declared and a calibrated model: one row each."""
    rows = []
    ecmp = plan_ranks(placement, topology, pattern, "ecmp", rng=seed)
    rows.append(_row(case, pattern, "ecmp", ecmp.after, before=_busbw(ecmp.before, pattern)))
    ecmp4 = plan_ranks(placement, topology, pattern, "ecmp", qps=QPS, rng=seed)
    spread = steer_source_ports(placement, topology, ecmp4, None)
    assert spread.predicted is not None
    rows.append(_row(case, pattern, "spread, no model", spread.predicted, mode=spread.mode, lines=spread.lines))
    pinned = plan_ranks(placement, topology, pattern, "pinned", qps=QPS, rng=seed)
    rows.append(_row(case, pattern, "pinned plan (on paper)", pinned.after))
    for name, model, secrets, asked in _models(placement, topology, seed):
        started = time.perf_counter()
        steered = steer_source_ports(placement, topology, pinned, model)
        extra: dict[str, Any] = {
            "mode": steered.mode,
            "lines": steered.lines,
            "off_plan_queue_pairs": steered.off_plan,
            "steering_s": time.perf_counter() - started,
            "fallback": steered.fallback,
        }
        if secrets is not None and steered.mode == "steered":
            checked, wrong = verify_with_secrets(steered, secrets)
            extra |= {"queue_pairs_checked_by_the_secret_hash": checked, "off_plan_by_the_secret_hash": wrong}
            extra["probes_per_switch"] = max(asked.values())
        evaluation = steered.predicted if steered.predicted is not None else pinned.after
        rows.append(_row(case, pattern, name, evaluation, **extra))
    return rows


_MODELS: dict[tuple[int, str], tuple[Any, dict[str, SecretHash], dict[str, int]]] = {}


def _models(placement: Placement, topology: Topology, seed: int) -> list[tuple[str, HashModel, Any, Any]]:
    key = (id(topology), placement.job_name)
    if key not in _MODELS:
        _MODELS[key] = calibrated(placement, topology, seed)
    result, secrets, asked = _MODELS[key]
    return [
        ("steered, declared model", DECLARED, None, None),
        ("steered, calibrated model", result.model, secrets, asked),
    ]


def held_out(seed: int, quick: bool) -> list[dict[str, Any]]:
    """Learn secret hashes from samples only, steer, follow every queue pair through the secrets."""
    rows = []
    shapes: list[tuple[str, int | None, int | None]] = [("2-tier", 2, None), ("2-tier", 4, None), ("2-tier", 8, None)]
    shapes.append(("3-tier", 4, 4))
    for label, uplinks, pods in shapes:
        placement, topology = fabric_job(
            32 if quick else 64, per_leaf=4, uplinks=uplinks, leaves_per_pod=pods, seed=seed
        )
        started = time.perf_counter()
        result, secrets, asked = calibrated(placement, topology, seed + (uplinks or 0))
        calibrate_s = time.perf_counter() - started
        for pattern in PATTERNS:
            plan = plan_ranks(placement, topology, pattern, "pinned", qps=2, rng=seed)
            steered = steer_source_ports(placement, topology, plan, result.model)
            checked = wrong = 0
            if steered.mode == "steered":
                checked, wrong = verify_with_secrets(steered, secrets)
            predicted = steered.predicted
            rows.append(
                {
                    "bench": "steering-held-out",
                    "fabric": f"{label}, {uplinks} uplinks per leaf",
                    "pattern": pattern,
                    "servers": len(placement.servers),
                    "switches_calibrated": len(result.switches),
                    "calibration_success": result.success,
                    "probes_per_switch": max(asked.values()),
                    "calibrate_s": calibrate_s,
                    "mode": steered.mode,
                    "fallback": steered.fallback,
                    "queue_pairs_checked_by_the_secret_hash": checked,
                    "off_plan_by_the_secret_hash": wrong,
                    "max_link_load": predicted.max_link_load if predicted is not None else None,
                    "bound": predicted.max_link_load_bound if predicted is not None else None,
                }
            )
    placement, topology = fabric_job(32, per_leaf=4, uplinks=4, leaves_per_pod=None, seed=seed)
    refused, _secrets, _asked = calibrated(placement, topology, seed, affine=False)
    named = [
        name
        for name, s in refused.switches.items()
        if s.status == "refused" and s.message.startswith(f"{name}: ") and s.contradiction is not None
    ]
    rows.append(
        {
            "bench": "steering-held-out",
            "fabric": "2-tier, 4 uplinks per leaf, a non-affine hash",
            "calibration_success": refused.success,
            "message": refused.message,
            "refused_switches_named": len(named),
            "switches": len(refused.switches),
            "first": refused.switches[named[0]].message if named else None,
            "unknown_in_model": len(refused.model.unknown),
        }
    )
    return rows


def controller_budget(seed: int) -> dict[str, Any]:
    """Planning with steering at 4,096 servers in the controller's planning process, under its default budget."""
    import msgspec

    from planner import Placement as _Placement  # noqa: F401  (the worker unpickles planner objects)
    from webhook.common.settings import PlanningSettings, Settings
    from webhook.controller.completed_table import completed_table
    from webhook.controller.graded_plan import PlanRequest
    from webhook.controller.isolation import PlanningProcess
    from webhook.controller.planning_driver import plan_within_budget

    placement, topology = fabric_job(4096, per_leaf=8, uplinks=None, leaves_per_pod=None, seed=seed)
    # a 4,096-server rank table is 2.6 MB: such clusters store it gzip-compressed (profile gzipRankTable)
    profile = msgspec.structs.replace(Settings().profiles[0], gzip_rank_table=True)
    settings = msgspec.structs.replace(
        Settings(), planning=PlanningSettings(routing="pinned", qps_per_connection=QPS), profiles=(profile,)
    )
    controller = settings.controller
    planning = PlanningProcess(
        memory_limit_mib=controller.planning_memory_limit_mib,
        timeout_s=controller.planning_timeout_s,
        preload=(plan_within_budget.__module__,),
    )
    planning.start()
    try:
        started = time.perf_counter()
        given_up: list[str] = []
        graded = asyncio.run(
            plan_within_budget(
                PlanRequest(placement, topology, settings.planning, DECLARED),
                planning,
                memory_limit=f"the {planning.memory_limit_mib} MiB of controller.planningMemoryLimitMib",
                on_given_up=lambda level, _exc, _following, _reasons: given_up.append(level),
            )
        )
        planned = completed_table(
            settings,
            settings.profiles[0],
            placement,
            graded,
            job_uid="bench",
            job_version="0",
            route_plan=True,
            route_problem=None,
            fixed={},
            planning_ms=(time.perf_counter() - started) * 1000.0,
        )
        wall = time.perf_counter() - started
        peak = _peak_rss_of(planning.pid)
    finally:
        planning.close()
    return {
        "bench": "steering-controller-budget",
        "servers": len(placement.servers),
        "pattern": settings.planning.pattern,
        "routing": "pinned",
        "qps": QPS,
        "plan_level": planned.plan_level,
        "levels_given_up": given_up,
        "steering_fallback": planned.steering_fallback,
        "configmap_has_ports": "MultiQpSrcPort.cfg" in planned.payload_data
        or "MultiQpSrcPort.cfg.gz" in planned.payload_binary,
        "wall_s": wall,
        "planning_ms": planned.planning_ms,
        "budget_s": controller.planning_timeout_s,
        "planning_process_peak_rss_mb": peak,
        "memory_limit_mib": controller.planning_memory_limit_mib,
        "message": planned.message,
    }


def _peak_rss_of(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024.0, 1)
    except OSError:
        return None
    return None


def summarise(
    rows: Sequence[dict[str, Any]], held: Sequence[dict[str, Any]], budget: dict[str, Any] | None
) -> dict[str, Any]:
    checks: dict[str, bool] = {}
    for row in rows:
        if not str(row["delivery"]).startswith("steered"):
            continue
        pinned = next(
            r
            for r in rows
            if r["case"] == row["case"] and r["pattern"] == row["pattern"] and r["delivery"].startswith("pinned")
        )
        label = f"{row['case']} {row['pattern']} {row['delivery']}"
        checks[f"{label}: steered"] = row.get("mode") == "steered"
        checks[f"{label}: bus bandwidth equals the pinned plan's"] = abs(row["busbw"] - pinned["busbw"]) < 1e-6
        checks[f"{label}: max link load equals the bound"] = abs(row["max_link_load"] - row["bound"]) < EPS
        checks[f"{label}: bus bandwidth >= 0.95 of its bound"] = row["busbw"] >= 0.95 / row["bound"] - EPS
        if row["case"] == "sample job":
            checks[f"{label}: 1.000 of line rate"] = abs(row["busbw"] - 1.0) < 5e-4
        if "off_plan_by_the_secret_hash" in row:
            checks[f"{label}: every queue pair on plan by the secret hash"] = row["off_plan_by_the_secret_hash"] == 0
    for row in held:
        if "pattern" in row:
            label = f"held-out {row['fabric']} {row['pattern']}"
            checks[f"{label}: every queue pair on its planned spine"] = (
                row["mode"] == "steered"
                and row["queue_pairs_checked_by_the_secret_hash"] > 0
                and row["off_plan_by_the_secret_hash"] == 0
            )
            checks[f"{label}: max link load = bound"] = (
                row["max_link_load"] is not None and abs(row["max_link_load"] - row["bound"]) < EPS
            )
        else:
            checks["held-out non-affine hash: refused with the switch named"] = (
                not row["calibration_success"] and row["refused_switches_named"] > 0
            )
    if budget is not None:
        checks["4,096 servers: steered within the controller's planning budget"] = (
            budget["plan_level"] == "as-requested"
            and budget["steering_fallback"] is None
            and budget["configmap_has_ports"]
            and budget["wall_s"] < budget["budget_s"]
        )
    failed = [name for name, ok in checks.items() if not ok]
    return {"bench": "steering-summary", "checks": len(checks), "passed": len(checks) - len(failed), "failed": failed}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller held-out fabrics, no 4,096-server budget run")
    parser.add_argument("--seed", type=int, default=7, help="seed of placements, plans, probes and secret hashes")
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    cases = [("sample job", *sample_job())]
    cases.append(("256 servers, 3 tiers", *fabric_job(256, per_leaf=8, uplinks=None, leaves_per_pod=8, seed=args.seed)))
    for name, placement, topology in cases:
        for pattern in PATTERNS:
            for row in delivery_rows(name, placement, topology, pattern, args.seed):
                emit(row)
                rows.append(row)
    held = held_out(args.seed, args.quick)
    for row in held:
        emit(row)
    budget = None if args.quick else controller_budget(args.seed)
    if budget is not None:
        emit(budget)
    summary = summarise(rows, held, budget)
    emit(summary)
    return 0 if not summary["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
