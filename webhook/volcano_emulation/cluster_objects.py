"""The emulated cluster: its nodes and route-planned jobs, and their tasks and nodes as Volcano's scheduler cache
holds them (the TaskInfo and NodeInfo that onSessionOpen, predicate and prioritize carry).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.common.names import (
    GROUP_NAME_ANNOTATION,
    HOSTNAME_LABEL,
    JOB_NAME_LABEL,
    JOB_NAMESPACE_LABEL,
    JOB_VERSION_ANNOTATION,
    NPU_NODE_LABEL,
    NPU_PODS_ANNOTATION,
    QUEUE_NAME_KEY,
    RING_LABEL,
    ROUTE_PLAN_ENV,
    TASK_SPEC_KEY,
)

TASK_PENDING, TASK_ALLOCATED, TASK_RUNNING = 1, 2, 32
NODE_CPU_MILLI = 192_000.0
NODE_MEMORY = 1536 * 2**30
TASK_CPU_MILLI = 16_000.0
TASK_MEMORY = 256 * 2**30
TRAINING_IMAGE_BYTES = 24_817_294_336
"""Size of the jobs' training image (pytorch-ascend 2.1.0-cann8.0), which image locality weighs."""


@dataclass(slots=True)
class SimNode:
    """A node of the emulated cluster."""

    name: str
    labels: dict[str, str]
    cards: int
    resource: str
    daemon_cpu: float = 0.0
    daemon_memory: float = 0.0
    has_image: bool = False
    """The node already holds the training image (image locality scores it up to 100 points higher)."""
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    """TaskInfos on the node (bound, or allocated in the running session)."""

    def used_cards(self) -> int:
        return sum(task_cards(t, self.resource) for t in self.tasks.values())

    def used_cpu(self) -> float:
        return self.daemon_cpu + sum(float((t.get("Resreq") or {}).get("MilliCPU", 0.0)) for t in self.tasks.values())

    def used_memory(self) -> float:
        return self.daemon_memory + sum(float((t.get("Resreq") or {}).get("Memory", 0.0)) for t in self.tasks.values())


@dataclass(slots=True)
class SimJob:
    """A Volcano Job with one task spec of `size` NPU pods."""

    namespace: str
    name: str
    size: int
    cards: int
    resource: str
    route_planned: bool = True
    tasks: list[dict[str, Any]] = field(default_factory=list)
    placed: dict[int, str] = field(default_factory=dict)
    """Task index -> node once committed."""
    network_topology: Mapping[str, Any] | None = None
    """The Job's (and so its PodGroup's) `spec.networkTopology`."""
    allocated_hypernode: str = ""
    """The HyperNode Volcano recorded for the job once placed (soft jobs on 1.12-1.13)."""

    @property
    def job_id(self) -> str:
        return f"{self.namespace}/{self.name}-pg"


def make_job(
    namespace: str,
    name: str,
    size: int,
    *,
    cards: int,
    resource: str,
    route_planned: bool = True,
    network_topology: Mapping[str, Any] | None = None,
) -> SimJob:
    """A job with its pending TaskInfos, as Volcano's controller and cache create them."""
    job = SimJob(namespace, name, size, cards, resource, route_planned, network_topology=network_topology)
    job.tasks = [task_info(job, index) for index in range(size)]
    return job


def task_info(job: SimJob, index: int, *, node: str = "", status: int = TASK_PENDING) -> dict[str, Any]:
    """A TaskInfo of a Volcano Job's pod in Volcano's JSON shape (Go field names, milli-unit scalars)."""
    uid = str(uuid.uuid5(uuid.NAMESPACE_OID, f"{job.namespace}/{job.name}/{index}"))
    request = {
        "MilliCPU": TASK_CPU_MILLI,
        "Memory": float(TASK_MEMORY),
        "ScalarResources": {job.resource: job.cards * 1000.0},
    }
    env = [{"name": "VC_TASK_INDEX", "value": str(index)}, {"name": "VK_TASK_INDEX", "value": str(index)}]
    if job.route_planned:
        env.append({"name": ROUTE_PLAN_ENV, "value": "true"})
    quantity = {job.resource: str(job.cards), "cpu": "16", "memory": "256Gi"}
    pod = {
        "metadata": {
            "name": f"{job.name}-worker-{index}",
            "namespace": job.namespace,
            "uid": uid,
            "labels": {
                RING_LABEL: "ascend-1980",
                JOB_NAME_LABEL: job.name,
                JOB_NAMESPACE_LABEL: job.namespace,
                QUEUE_NAME_KEY: "default",
                TASK_SPEC_KEY: "worker",
            },
            "annotations": {
                GROUP_NAME_ANNOTATION: f"{job.name}-pg",
                JOB_NAME_LABEL: job.name,
                JOB_VERSION_ANNOTATION: "0",
                TASK_SPEC_KEY: "worker",
                NPU_PODS_ANNOTATION: str(job.size),
            },
        },
        "spec": {
            "containers": [{"name": "train", "env": env, "resources": {"requests": quantity, "limits": quantity}}],
            "nodeSelector": {NPU_NODE_LABEL: "ascend-1980"},
            "nodeName": node,
            "schedulerName": "volcano",
        },
        "status": {"phase": "Running" if node else "Pending"},
    }
    return {
        "UID": uid,
        "Job": job.job_id,
        "Name": f"{job.name}-worker-{index}",
        "Namespace": job.namespace,
        "TaskRole": "worker",
        "Resreq": request,
        "InitResreq": request,
        "NodeName": node,
        "Status": status,
        "Priority": 0,
        "Pod": pod,
    }


def node_info(node: SimNode) -> dict[str, Any]:
    """A NodeInfo in Volcano's JSON shape, Idle and Used following from its tasks."""
    used_cards = node.used_cards() * 1000.0
    allocatable = {
        "MilliCPU": NODE_CPU_MILLI,
        "Memory": float(NODE_MEMORY),
        "ScalarResources": {node.resource: node.cards * 1000.0},
    }
    idle = {
        "MilliCPU": NODE_CPU_MILLI - node.used_cpu(),
        "Memory": float(NODE_MEMORY) - node.used_memory(),
        "ScalarResources": {node.resource: node.cards * 1000.0 - used_cards},
    }
    empty = {"MilliCPU": 0.0, "Memory": 0.0, "ScalarResources": None}
    return {
        "Name": node.name,
        "Node": {
            "metadata": {"name": node.name, "labels": {HOSTNAME_LABEL: node.name, **node.labels}},
            "spec": {},
        },
        "State": {"Phase": 1, "Reason": ""},
        "Releasing": empty,
        "Pipelined": empty,
        "Idle": idle,
        "Used": {
            "MilliCPU": node.used_cpu(),
            "Memory": node.used_memory(),
            "ScalarResources": {node.resource: used_cards},
        },
        "Allocatable": allocatable,
        "Capacity": allocatable,
        "Tasks": dict(node.tasks),
    }


def task_cards(task: Mapping[str, Any], resource: str) -> int:
    scalars = (task.get("Resreq") or {}).get("ScalarResources") or {}
    return int(float(scalars.get(resource, 0.0)) / 1000.0 + 1e-6)


__all__ = [
    "NODE_CPU_MILLI",
    "NODE_MEMORY",
    "TASK_ALLOCATED",
    "TASK_CPU_MILLI",
    "TASK_MEMORY",
    "TASK_PENDING",
    "TASK_RUNNING",
    "TRAINING_IMAGE_BYTES",
    "SimJob",
    "SimNode",
    "make_job",
    "node_info",
    "task_cards",
    "task_info",
]
