"""`ringroute simulate-scheduling`: place jobs on a fragmented cluster with and without the extender's scores.

Both schedulers see the same cluster (a share of nodes already busy with other work, chosen at random) and the same
stream of route-planned jobs. Each job is placed task by task, as Volcano's allocate action does: the predicate
keeps nodes whose NPUs are all free, then the `default` scheduler takes a random one of them (random-feasible)
and the `extender` scheduler takes the best score of `webhook.extender_scoring` (ties broken at random). Each
placed job is then planned with `planner.plan_ranks` when that is installed, and the ring bus bandwidth of its
pod-index order and of the planned order is simulated. One JSON line per job and scheduler, then a summary line.

The payload builders (`node_info`, `task_info`) are shared with the tests and `bench/extender.py`, and
`worker_placement` (a synthetic job's pods on given nodes) with `examples/demo.py` and the planner tests.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from planner import Device, Placement, Server, Topology
from webhook.cli import CommandError
from webhook.settings import RING_LABEL, ROUTE_PLAN_ENV, Settings

LEAF_LABEL = "network.topology.nvidia.com/leaf"
SPINE_LABEL = "network.topology.nvidia.com/spine"
TOR_LABEL = "volcano.sh/tor"


def register(subparsers: Any) -> None:
    """Add `simulate-scheduling` to the `ringroute` parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "simulate-scheduling",
        help="compare random-feasible placement with the extender's leaf packing",
        description=(
            "Place route-planned jobs on a fragmented cluster with a random-feasible scheduler (default) and with "
            "the scheduler extender's scores, plan ranks, and print leaves spanned and simulated ring bus "
            "bandwidth per job as JSON lines, then a summary line."
        ),
    )
    parser.add_argument("--scheduler", choices=("default", "extender", "both"), default="both")
    parser.add_argument("--leaves", type=int, default=32, help="leaf switches (default 32)")
    parser.add_argument("--servers-per-leaf", type=int, default=8, help="servers under each leaf (default 8)")
    parser.add_argument(
        "--leaves-per-pod", type=int, default=None, help="leaves per spine domain; set for a 3-tier fabric"
    )
    parser.add_argument(
        "--occupancy", type=float, default=0.5, help="share of nodes busy before the jobs arrive (default 0.5)"
    )
    parser.add_argument(
        "--jobs",
        default="16,8,24,12,32,8,16",
        help="comma-separated job sizes in servers, placed in this order (default 16,8,24,12,32,8,16)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the cluster, the jobs and tie breaks")
    parser.add_argument(
        "--no-session-open",
        action="store_true",
        help="do not tell the extender the job sizes (as when onSessionOpenVerb is not configured)",
    )
    parser.add_argument("--no-plan", action="store_true", help="skip rank planning and bandwidth simulation")
    parser.set_defaults(handler=_run)


# ------------------------------------------------------------------------------------------------ payload builders


def resource_milli(cards: float, resource: str, *, cpu_milli: float = 0.0, memory: float = 0.0) -> dict[str, Any]:
    """A Volcano Resource with `cards` of one scalar resource (milli-units)."""
    return {
        "MilliCPU": cpu_milli,
        "Memory": memory,
        "ScalarResources": {resource: cards * 1000.0} if cards else None,
        "MaxTaskNum": 0,
    }


def task_info(
    *,
    namespace: str,
    job_name: str,
    index: int,
    resource: str = "huawei.com/ascend-1980",
    cards: int = 8,
    ring_label: str | None = "ascend-1980",
    route_planned: bool = True,
    node_name: str = "",
    status: int = 1,
    uid: str | None = None,
    group_suffix: str = "0c2d3e4f",
) -> dict[str, Any]:
    """A TaskInfo as Volcano serialises it, for one pod of a Volcano Job (task `worker`)."""
    uid = uid or str(uuid.uuid5(uuid.NAMESPACE_OID, f"{namespace}/{job_name}/{index}"))
    group = f"{job_name}-{group_suffix}"
    labels = {"volcano.sh/job-name": job_name, "volcano.sh/task-spec": "worker", "volcano.sh/task-index": str(index)}
    if ring_label is not None:
        labels[RING_LABEL] = ring_label
    env = [{"name": "VC_TASK_INDEX", "value": str(index)}]
    if route_planned:
        env.append({"name": ROUTE_PLAN_ENV, "value": "true"})
    request = {resource: str(cards), "cpu": "16", "memory": "256Gi"} if cards else {"cpu": "1", "memory": "1Gi"}
    pod = {
        "metadata": {
            "name": f"{job_name}-worker-{index}",
            "namespace": namespace,
            "uid": uid,
            "labels": labels,
            "annotations": {
                "volcano.sh/job-version": "0",
                "volcano.sh/task-index": str(index),
                "scheduling.k8s.io/group-name": group,
            },
        },
        "spec": {
            "containers": [
                {
                    "name": "train",
                    "image": "swr.example.com/train/pytorch-ascend:2.1",
                    "command": ["/bin/sh", "-c", "bash /home/ma-user/run.sh"],
                    "env": env,
                    "resources": {"requests": request, "limits": request},
                    "volumeMounts": [{"name": "ascend-driver", "mountPath": "/usr/local/Ascend/driver"}],
                }
            ],
            "volumes": [{"name": "ascend-driver", "hostPath": {"path": "/usr/local/Ascend/driver"}}],
            "nodeName": node_name,
            "schedulerName": "volcano",
        },
        "status": {"phase": "Running" if node_name else "Pending"},
    }
    return {
        "UID": uid,
        "Job": f"{namespace}/{group}",
        "Name": f"{job_name}-worker-{index}",
        "Namespace": namespace,
        "TaskRole": "worker",
        "Resreq": resource_milli(cards, resource, cpu_milli=16000.0, memory=274877906944.0),
        "InitResreq": resource_milli(cards, resource, cpu_milli=16000.0, memory=274877906944.0),
        "NodeName": node_name,
        "EvictionOccurred": False,
        "JobAllocatedHyperNode": "",
        "Status": status,
        "LastTransaction": None,
        "Priority": 0,
        "VolumeReady": False,
        "Preemptable": False,
        "BestEffort": False,
        "HasRestartableInitContainer": False,
        "SchGated": False,
        "RevocableZone": "",
        "NumaInfo": None,
        "Pod": pod,
        "CustomBindErrHandlerSucceeded": False,
    }


def node_info(
    name: str,
    labels: Mapping[str, str],
    *,
    resource: str = "huawei.com/ascend-1980",
    cards: int = 8,
    tasks: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """A NodeInfo as Volcano serialises it; Idle and Used follow from the NPU requests of `tasks`."""
    used = 0.0
    for task in (tasks or {}).values():
        used += ((task.get("Resreq") or {}).get("ScalarResources") or {}).get(resource, 0.0)
    total = cards * 1000.0
    allocatable = {"MilliCPU": 192000.0, "Memory": 1649267441664.0, "ScalarResources": {resource: total}}
    return {
        "Name": name,
        "Node": {
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
            "status": {"allocatable": {resource: str(cards), "cpu": "192", "memory": "1536Gi"}},
        },
        "State": {"Phase": 1, "Reason": ""},
        "Releasing": {"MilliCPU": 0.0, "Memory": 0.0, "ScalarResources": None, "MaxTaskNum": 0},
        "Pipelined": {"MilliCPU": 0.0, "Memory": 0.0, "ScalarResources": None, "MaxTaskNum": 0},
        "Idle": {**allocatable, "ScalarResources": {resource: total - used}, "MaxTaskNum": 110},
        "Used": {"MilliCPU": 0.0, "Memory": 0.0, "ScalarResources": {resource: used}, "MaxTaskNum": 0},
        "Allocatable": {**allocatable, "MaxTaskNum": 110},
        "Capacity": {**allocatable, "MaxTaskNum": 110},
        "Tasks": dict(tasks or {}),
        "RevocableZone": "",
        "Others": None,
    }


def cluster_labels(
    leaves: int, servers_per_leaf: int, leaves_per_pod: int | None
) -> Iterator[tuple[str, dict[str, str]]]:
    """(node name, topology labels) for a Clos cluster: `volcano.sh/tor` in 2 tiers, NVIDIA leaf/spine in 3."""
    for leaf in range(leaves):
        for slot in range(servers_per_leaf):
            name = f"npu-{leaf:03d}-{slot:02d}"
            if leaves_per_pod:
                yield name, {LEAF_LABEL: f"leaf-{leaf:03d}", SPINE_LABEL: f"pod-{leaf // leaves_per_pod:02d}"}
            else:
                yield name, {TOR_LABEL: f"leaf-{leaf:03d}"}


# ------------------------------------------------------------------------------------------------------ simulation


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """Where one job landed and what its ring achieves."""

    scheduler: str
    job: str
    size: int
    nodes: tuple[str, ...]
    leaves: int
    leaves_bound: int
    """Fewest leaves the job could have used, given the free nodes when it arrived."""
    spines: int
    ring_busbw_pod_index: float | None
    ring_busbw_planned: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (node list left out)."""
        return {
            "scheduler": self.scheduler,
            "job": self.job,
            "size": self.size,
            "leaves": self.leaves,
            "leaves_bound": self.leaves_bound,
            "spines": self.spines,
            "ring_busbw_pod_index": self.ring_busbw_pod_index,
            "ring_busbw_planned": self.ring_busbw_planned,
        }


def simulate(
    scheduler: str,
    *,
    leaves: int,
    servers_per_leaf: int,
    leaves_per_pod: int | None,
    occupancy: float,
    job_sizes: Sequence[int],
    seed: int,
    session_open: bool = True,
    settings: Settings | None = None,
) -> list[JobOutcome]:
    """Place `job_sizes` in order with `scheduler` ("default" or "extender"); jobs that do not fit are skipped."""
    from webhook.extender_scoring import ExtenderState, predicate_for, read_task, score_nodes

    settings = settings or Settings()
    profile = settings.profiles[0]
    resource = profile.resource_name
    cards = profile.cards_per_node
    layout = list(cluster_labels(leaves, servers_per_leaf, leaves_per_pod))
    cluster_rng = np.random.default_rng(seed)
    busy = set(cluster_rng.choice(len(layout), size=round(occupancy * len(layout)), replace=False).tolist())
    nodes: dict[str, dict[str, Any]] = {}
    for i, (name, labels) in enumerate(layout):
        background: dict[str, dict[str, Any]] = {}
        if i in busy:
            other = task_info(namespace="other", job_name=f"other-{i}", index=0, ring_label=None, node_name=name)
            background[other["UID"]] = other
        nodes[name] = node_info(name, labels, resource=resource, cards=cards, tasks=background)
    paths = {name: tuple(labels.values()) for name, labels in layout}
    tie_rng = np.random.default_rng(seed + 1)
    state = ExtenderState(settings)
    outcomes: list[JobOutcome] = []
    for j, size in enumerate(job_sizes):
        job_name = f"job-{j:02d}"
        tasks = [
            task_info(namespace="train", job_name=job_name, index=k, resource=resource, cards=cards)
            for k in range(size)
        ]
        job_id = tasks[0]["Job"]
        if session_open:
            state.job_sizes[job_id] = size
        free = [n for n, info in nodes.items() if _free_cards(info, resource) >= cards]
        if len(free) < size:
            continue
        free_per_leaf: dict[str, int] = {}
        for name in free:
            free_per_leaf[paths[name][0]] = free_per_leaf.get(paths[name][0], 0) + 1
        bound = _min_leaves(free_per_leaf.values(), size)
        chosen: list[str] = []
        for task in tasks:
            view = read_task(task, settings)
            if scheduler == "extender":
                candidates = [info for info in nodes.values() if not predicate_for(view, info, state)["status"]]
                scores, _ = score_nodes(view, candidates, state)
                best = max(scores.values())
                top = sorted(n for n, s in scores.items() if s == best)
                pick = top[int(tie_rng.integers(len(top)))]
            else:
                candidates = [info for info in nodes.values() if _free_cards(info, resource) >= cards]
                pick = candidates[int(tie_rng.integers(len(candidates)))]["Name"]
            placed = dict(task, NodeName=pick, Status=2)
            info = nodes[pick]
            info["Tasks"][placed["UID"]] = placed
            info["Idle"]["ScalarResources"][resource] -= cards * 1000.0
            chosen.append(pick)
        outcomes.append(_outcome(scheduler, job_name, chosen, paths, bound))
    return outcomes


def _free_cards(info: Mapping[str, Any], resource: str) -> float:
    return float(info["Idle"]["ScalarResources"].get(resource, 0.0)) / 1000.0


def _min_leaves(free_per_leaf: Iterable[int], size: int) -> int:
    """Fewest leaves whose free nodes hold `size` servers (largest leaves first is optimal)."""
    count = 0
    for free in sorted(free_per_leaf, reverse=True):
        if size <= 0:
            break
        size -= free
        count += 1
    return count


def _outcome(
    scheduler: str, job: str, chosen: Sequence[str], paths: Mapping[str, tuple[str, ...]], leaves_bound: int
) -> JobOutcome:
    leaf_set = {paths[n][0] for n in chosen}
    spine_set = {paths[n][1] for n in chosen if len(paths[n]) > 1}
    return JobOutcome(
        scheduler=scheduler,
        job=job,
        size=len(chosen),
        nodes=tuple(chosen),
        leaves=len(leaf_set),
        leaves_bound=leaves_bound,
        spines=len(spine_set) or 1,
        ring_busbw_pod_index=None,
        ring_busbw_planned=None,
    )


def planner_available() -> bool:
    """Whether `planner._plan.plan_ranks` is installed (bandwidth needs it)."""
    try:
        importlib.import_module("planner._plan")
    except ImportError:
        return False
    return True


def worker_placement(
    job_name: str,
    nodes: Sequence[str],
    *,
    namespace: str = "default",
    devices_per_server: int = 8,
    pod_network: str = "172.16",
    device_network: str = "192.168",
    master: int = 0,
) -> Placement:
    """A synthetic job's placement: pod `<job_name>-worker-<i>` (task "worker", index i) on `nodes[i]`.

    Server and host IPs are `10.0.<i // 250>.<i % 250 + 1>`, pod IPs `<pod_network>.<i // 250>.<i % 250 + 1>`,
    and card d of pod i has device ID d and IP `<device_network>.<i % 250>.<d + 1>`.
    """
    servers = tuple(
        Server(
            pod_name=f"{job_name}-worker-{i}",
            node_name=node,
            server_id=f"10.0.{i // 250}.{i % 250 + 1}",
            host_ip=f"10.0.{i // 250}.{i % 250 + 1}",
            pod_ip=f"{pod_network}.{i // 250}.{i % 250 + 1}",
            task_name="worker",
            task_index=i,
            devices=tuple(
                Device(device_id=d, device_ip=f"{device_network}.{i % 250}.{d + 1}") for d in range(devices_per_server)
            ),
        )
        for i, node in enumerate(nodes)
    )
    return Placement(job_name=job_name, namespace=namespace, servers=servers, master=master)


def with_bandwidth(
    outcome: JobOutcome, paths: Mapping[str, tuple[str, ...]], *, seed: int, settings: Settings | None = None
) -> JobOutcome:
    """The outcome with ring bus bandwidth of the pod-index order and of the planned order (planner required)."""
    plan_module = importlib.import_module("planner._plan")
    settings = settings or Settings()
    placement = worker_placement(outcome.job, outcome.nodes, namespace="train")
    topology = Topology(paths=dict(paths), fabric=settings.topology.fabric, source="simulation")
    result = plan_module.plan_ranks(placement, topology, "ring", settings.planning.routing, rng=seed)
    return JobOutcome(
        **{
            **{f: getattr(outcome, f) for f in outcome.__dataclass_fields__},
            "ring_busbw_pod_index": round(float(result.before.ring_busbw), 4),
            "ring_busbw_planned": round(float(result.after.ring_busbw), 4),
        }
    )


def summarise(outcomes: Sequence[JobOutcome]) -> dict[str, Any]:
    """Mean leaves spanned, excess over the bound, and mean bus bandwidth of one scheduler's jobs."""
    if not outcomes:
        return {"jobs": 0}
    planned = [o.ring_busbw_planned for o in outcomes if o.ring_busbw_planned is not None]
    pod_index = [o.ring_busbw_pod_index for o in outcomes if o.ring_busbw_pod_index is not None]
    return {
        "jobs": len(outcomes),
        "servers": sum(o.size for o in outcomes),
        "mean_leaves": round(sum(o.leaves for o in outcomes) / len(outcomes), 3),
        "mean_leaves_bound": round(sum(o.leaves_bound for o in outcomes) / len(outcomes), 3),
        "jobs_at_bound": sum(1 for o in outcomes if o.leaves == o.leaves_bound),
        "mean_spines": round(sum(o.spines for o in outcomes) / len(outcomes), 3),
        "mean_ring_busbw_pod_index": round(sum(pod_index) / len(pod_index), 4) if pod_index else None,
        "mean_ring_busbw_planned": round(sum(planned) / len(planned), 4) if planned else None,
    }


def _parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise CommandError(f"--jobs: {text!r} is not a comma-separated list of integers, e.g. 16,8,32") from None
    if not sizes or any(s < 1 for s in sizes):
        raise CommandError("--jobs: give at least one job size, each at least 1")
    return sizes


def _run(args: argparse.Namespace) -> int:
    sizes = _parse_sizes(args.jobs)
    if args.leaves < 1 or args.servers_per_leaf < 1:
        raise CommandError("--leaves and --servers-per-leaf must be at least 1")
    if args.leaves_per_pod is not None and args.leaves_per_pod < 1:
        raise CommandError("--leaves-per-pod must be at least 1 (or left out for a 2-tier fabric)")
    if not 0.0 <= args.occupancy < 1.0:
        raise CommandError("--occupancy must be in [0, 1), e.g. 0.5")
    schedulers = ("default", "extender") if args.scheduler == "both" else (args.scheduler,)
    paths = {
        name: tuple(labels.values())
        for name, labels in cluster_labels(args.leaves, args.servers_per_leaf, args.leaves_per_pod)
    }
    plan = not args.no_plan and planner_available()
    if not args.no_plan and not plan:
        print(json.dumps({"note": "planner._plan is not installed: bus bandwidth left out"}), file=sys.stderr)
    for scheduler in schedulers:
        outcomes = simulate(
            scheduler,
            leaves=args.leaves,
            servers_per_leaf=args.servers_per_leaf,
            leaves_per_pod=args.leaves_per_pod,
            occupancy=args.occupancy,
            job_sizes=sizes,
            seed=args.seed,
            session_open=not args.no_session_open,
        )
        if plan:
            outcomes = [with_bandwidth(o, paths, seed=args.seed) for o in outcomes]
        for outcome in outcomes:
            print(json.dumps(outcome.to_dict()))
        print(json.dumps({"summary": scheduler, **summarise(outcomes)}))
    return 0


__all__ = [
    "JobOutcome",
    "cluster_labels",
    "node_info",
    "planner_available",
    "register",
    "resource_milli",
    "simulate",
    "summarise",
    "task_info",
    "with_bandwidth",
    "worker_placement",
]
