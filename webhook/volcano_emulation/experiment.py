"""The `ringroute simulate-scheduling` experiment: a fragmented Clos cluster, a stream of route-planned jobs placed
by Volcano's emulated allocate action (`webhook.volcano_emulation.allocate_action`) without and with the extender,
where each job landed, and the ring bus bandwidth of its pod-index and planned orders."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from planner import Device, Placement, Server, Topology, plan_ranks
from webhook.common.names import (
    NPU_LABEL_VALUE,
    NPU_NODE_LABEL,
    NPU_RESOURCE,
    NVIDIA_LEAF_LABEL,
    NVIDIA_SPINE_LABEL,
    TOR_LABEL,
)
from webhook.common.settings import Settings
from webhook.extender.app import ExtenderService
from webhook.extender.placement import leaves_lower_bound
from webhook.volcano_emulation.allocate_action import VolcanoAllocate, VolcanoConfig
from webhook.volcano_emulation.cluster_objects import TASK_RUNNING, SimJob, SimNode, make_job, task_info

NPU_NODE_LABELS = {NPU_NODE_LABEL: NPU_LABEL_VALUE}


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """A Clos cluster of identical NPU nodes, a share of them busy with other work."""

    leaves: int
    servers_per_leaf: int
    leaves_per_pod: int | None = None
    """Leaves per spine domain (3-tier fabric); None for 2 tiers."""
    occupancy: float = 0.5
    cards: int = 8
    resource: str = NPU_RESOURCE


def build_cluster(spec: ClusterSpec, seed: int) -> tuple[list[SimNode], dict[str, tuple[str, ...]]]:
    """Nodes in Volcano's node-list order (by name, as the API server lists them; names do not follow leaves) and
    each node's topology path. Busy nodes run a one-node job of other work; every node has some daemon load."""
    rng = np.random.default_rng(seed)
    count = spec.leaves * spec.servers_per_leaf
    names = [f"node-{i:05d}" for i in rng.permutation(count)]
    nodes: list[SimNode] = []
    paths: dict[str, tuple[str, ...]] = {}
    busy = set(rng.choice(count, size=round(spec.occupancy * count), replace=False).tolist())
    for i, name in enumerate(names):
        leaf = i // spec.servers_per_leaf
        if spec.leaves_per_pod:
            spine = f"spine-{leaf // spec.leaves_per_pod:03d}"
            labels = {NVIDIA_LEAF_LABEL: f"leaf-{leaf:04d}", NVIDIA_SPINE_LABEL: spine}
            paths[name] = (f"leaf-{leaf:04d}", spine)
        else:
            labels = {TOR_LABEL: f"leaf-{leaf:04d}"}
            paths[name] = (f"leaf-{leaf:04d}",)
        node = SimNode(
            name,
            {**labels, **NPU_NODE_LABELS},
            spec.cards,
            spec.resource,
            daemon_cpu=float(rng.integers(500, 12_000)),
            daemon_memory=float(rng.integers(1, 48)) * 2**30,
            has_image=bool(rng.random() < 0.5),
        )
        if i in busy:
            other = make_job(
                "other", f"other-{i:05d}", 1, cards=spec.cards, resource=spec.resource, route_planned=False
            )
            task = task_info(other, 0, node=name, status=TASK_RUNNING)
            node.tasks[task["UID"]] = task
        nodes.append(node)
    nodes.sort(key=lambda n: n.name)
    return nodes, paths


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """Where one job landed."""

    scheduler: str
    job: str
    size: int
    nodes: tuple[str, ...]
    leaves: int
    leaves_bound: int
    """Fewest leaves the free nodes allowed when the job arrived (what an optimal scheduler reaches)."""
    spines: int
    sessions: int
    """Scheduling sessions until the job was placed."""
    ring_busbw_pod_index: float | None = None
    ring_busbw_planned: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (node list left out)."""
        return {
            "scheduler": self.scheduler,
            "job": self.job,
            "size": self.size,
            "leaves": self.leaves,
            "leaves_bound": self.leaves_bound,
            "spines": self.spines,
            "sessions": self.sessions,
            "ring_busbw_pod_index": self.ring_busbw_pod_index,
            "ring_busbw_planned": self.ring_busbw_planned,
        }


def simulate(
    scheduler: str,
    spec: ClusterSpec,
    job_sizes: Sequence[int],
    *,
    seed: int,
    config: VolcanoConfig,
    service: ExtenderService | None,
    max_sessions: int = 3,
) -> list[JobOutcome]:
    """Submit `job_sizes` one after another (each gets up to `max_sessions` sessions, then is given up) with the
    extender (`service`) or without it (None: Volcano's own plugins decide); jobs stay once placed."""
    nodes, paths = build_cluster(spec, seed)
    volcano = VolcanoAllocate(nodes, config, service, np.random.default_rng(seed + 1))
    leaf_of = {name: path[0] for name, path in paths.items()}
    outcomes: list[JobOutcome] = []
    jobs: list[SimJob] = []
    for j, size in enumerate(job_sizes):
        job = make_job("train", f"job-{j:03d}", size, cards=spec.cards, resource=spec.resource)
        bound = fewest_leaves(nodes, job, leaf_of)
        jobs.append(job)
        for session in range(1, max_sessions + 1):
            volcano.session(jobs)
            if job.placed:
                chosen = tuple(job.placed[i] for i in range(size))
                outcomes.append(
                    JobOutcome(
                        scheduler=scheduler,
                        job=job.name,
                        size=size,
                        nodes=chosen,
                        leaves=len({leaf_of[n] for n in chosen}),
                        leaves_bound=bound or 0,
                        spines=len({paths[n][1] for n in chosen if len(paths[n]) > 1}) or 1,
                        sessions=session,
                    )
                )
                break
        else:
            jobs.remove(job)
    return outcomes


def summarise(outcomes: Sequence[JobOutcome]) -> dict[str, Any]:
    """Mean leaves spanned against the bound, spines, sessions and bus bandwidth of one scheduler's jobs."""
    if not outcomes:
        return {"jobs": 0}
    planned = [o.ring_busbw_planned for o in outcomes if o.ring_busbw_planned is not None]
    pod_index = [o.ring_busbw_pod_index for o in outcomes if o.ring_busbw_pod_index is not None]
    count = len(outcomes)
    return {
        "jobs": count,
        "servers": sum(o.size for o in outcomes),
        "mean_leaves": round(sum(o.leaves for o in outcomes) / count, 3),
        "mean_leaves_bound": round(sum(o.leaves_bound for o in outcomes) / count, 3),
        "jobs_at_bound": sum(1 for o in outcomes if o.leaves == o.leaves_bound),
        "mean_spines": round(sum(o.spines for o in outcomes) / count, 3),
        "mean_sessions": round(sum(o.sessions for o in outcomes) / count, 3),
        "mean_ring_busbw_pod_index": round(sum(pod_index) / len(pod_index), 4) if pod_index else None,
        "mean_ring_busbw_planned": round(sum(planned) / len(planned), 4) if planned else None,
    }


def fewest_leaves(nodes: Sequence[SimNode], job: SimJob, leaf_of: Mapping[str, str]) -> int | None:
    """Fewest leaves whose free nodes could hold the whole job now (the optimum a scheduler can reach)."""
    free: dict[str, int] = {}
    for node in nodes:
        if node.used_cards() == 0 and node.cards >= job.cards and node.name in leaf_of:
            free[leaf_of[node.name]] = free.get(leaf_of[node.name], 0) + 1
    return leaves_lower_bound(free.values(), job.size)


def simulated_placement(
    job_name: str, nodes: Sequence[str], *, namespace: str, devices_per_server: int = 8
) -> Placement:
    """A placed job as the experiment sees it: pod `<job_name>-worker-<i>` (task "worker", index i) on `nodes[i]`,
    with made-up but distinct host, pod and device IPs (the planner reads the topology, not the addresses)."""
    servers = tuple(
        Server(
            pod_name=f"{job_name}-worker-{i}",
            node_name=node,
            server_id=f"10.0.{i // 250}.{i % 250 + 1}",
            host_ip=f"10.0.{i // 250}.{i % 250 + 1}",
            pod_ip=f"172.16.{i // 250}.{i % 250 + 1}",
            task_name="worker",
            task_index=i,
            devices=tuple(
                Device(device_id=d, device_ip=f"192.168.{i % 250}.{d + 1}") for d in range(devices_per_server)
            ),
        )
        for i, node in enumerate(nodes)
    )
    return Placement(job_name=job_name, namespace=namespace, servers=servers)


def with_bandwidth(
    outcome: JobOutcome, paths: Mapping[str, tuple[str, ...]], *, seed: int, settings: Settings
) -> JobOutcome:
    """The outcome with ring bus bandwidth of the pod-index order and of the planned order."""
    placement = simulated_placement(outcome.job, outcome.nodes, namespace="train")
    topology = Topology(paths=dict(paths), fabric=settings.topology.fabric, source="simulation")
    result = plan_ranks(placement, topology, "ring", settings.planning.routing, rng=seed)
    return replace(
        outcome,
        ring_busbw_pod_index=round(float(result.before.ring_busbw), 4),
        ring_busbw_planned=round(float(result.after.ring_busbw), 4),
    )


__all__ = [
    "ClusterSpec",
    "JobOutcome",
    "build_cluster",
    "fewest_leaves",
    "simulate",
    "simulated_placement",
    "summarise",
    "with_bandwidth",
]
