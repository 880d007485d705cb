"""Volcano's allocate action, emulated call for call, to show what the extender does to placement.

What it reproduces (volcano-sh/volcano `pkg/scheduler/actions/allocate/allocate.go`, v1.7 through master, for
jobs without `networkTopology`), because each of these decides which nodes the extender is asked about:
- one scheduling session at a time; onSessionOpen (when configured) gets the scheduler cache: every job with its
  tasks and every node with its tasks;
- jobs one after another; a job's tasks one after another, each: resource fit against the node's future idle
  first (so a node the job already filled is never offered again), then the plugin predicates, the extender's
  among them (its refusals are cached per job and task spec for the rest of the job's turn);
- nodes scanned from where the previous scan stopped (a process-wide index), stopping once
  `numFeasibleNodesToFind` nodes passed (all nodes up to 100, then 50 % minus 1 % per 125 nodes, at least 5 %);
- no prioritize call when a single node passed; otherwise the extender's scores are added to `nodeorder` and
  `binpack` scores at their default weights and the best node wins, ties at random;
- the job's allocations are committed when the gang is complete, else discarded (allocate and deallocate events
  go to the extender on 1.13+ when configured);
- answers are decoded as the release decodes them: a predicate answer that release cannot read is an error,
  which `ignorable` turns into a pass.
Bodies travel as JSON bytes through the same `ExtenderService` the HTTP endpoints use.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np
import orjson

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
from webhook.extender import volcano
from webhook.extender.app import ExtenderService
from webhook.extender.fit import node_admits, pod_constraints
from webhook.extender.wire import NodeInfo, Pod

Release = tuple[int, int]

TASK_PENDING, TASK_ALLOCATED, TASK_RUNNING = 1, 2, 32
NODE_CPU_MILLI = 192_000.0
NODE_MEMORY = 1536 * 2**30
TASK_CPU_MILLI = 16_000.0
TASK_MEMORY = 256 * 2**30


@dataclass(frozen=True, slots=True)
class VolcanoConfig:
    """How the emulated scheduler is set up."""

    release: Release = (1, 10)
    extender: bool = True
    """The extender plugin is configured (predicate and prioritize verbs)."""
    session_open: bool = True
    """`extender.onSessionOpenVerb` is configured."""
    events: bool = False
    """`extender.allocateFuncVerb`/`deallocateFuncVerb` are configured (honoured on 1.13+)."""
    ignorable: bool = True
    min_nodes_to_find: int = 100
    """`--minimum-feasible-nodes`."""
    min_percentage_to_find: int = 5
    """`--minimum-percentage-nodes-to-find`."""
    percentage_to_find: int | None = None
    """`--percentage-nodes-to-find` (None: the release's default, 100 before 1.9, adaptive from 1.9)."""


def num_feasible_nodes_to_find(nodes: int, config: VolcanoConfig) -> int:
    """`util.CalculateNumOfFeasibleNodesToFind` with the release's flag defaults (all nodes before 1.9)."""
    return volcano.num_feasible_nodes_to_find(
        nodes,
        release_name(config.release),
        percentage=config.percentage_to_find,
        minimum=config.min_nodes_to_find,
        min_percentage=config.min_percentage_to_find,
    )


def release_name(release: Release) -> str:
    """(1, 10) -> "1.10", clamped to the releases the protocol emulation knows."""
    newest = volcano.normalize_release(volcano.MASTER_RELEASE)
    name = f"{release[0]}.{release[1]}"
    return name if name in volcano.RELEASES else newest


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
        return sum(_cards(t, self.resource) for t in self.tasks.values())

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

    @property
    def job_id(self) -> str:
        return f"{self.namespace}/{self.name}-pg"


def make_job(namespace: str, name: str, size: int, *, cards: int, resource: str, route_planned: bool = True) -> SimJob:
    """A job with its pending TaskInfos, as Volcano's controller and cache create them."""
    job = SimJob(namespace, name, size, cards, resource, route_planned)
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


def _cards(task: Mapping[str, Any], resource: str) -> int:
    scalars = (task.get("Resreq") or {}).get("ScalarResources") or {}
    return int(float(scalars.get(resource, 0.0)) / 1000.0 + 1e-6)


# --------------------------------------------------------------------------------------------- answer decoding


def predicate_passes(release: Release, body: bytes, *, ignorable: bool) -> bool:
    """Whether `release` treats the predicate answer as a pass (a body it cannot decode is an error)."""
    return volcano.decode_predicate_response(release_name(release), body, ignorable).passes


# ---------------------------------------------------------------------------------------------------- plugins


def plugin_scores(node: SimNode, release: Release) -> float:
    """What `nodeorder` and `binpack` add at their default weights (Volcano's Helm chart enables both): the
    scores the extender's must outweigh. Image locality counts when the node already holds the training image."""
    images = ((volcano.TRAINING_IMAGE.size_bytes, 1),) if node.has_image else ()
    scores = volcano.default_node_scores(
        release_name(release),
        volcano.ScoringInput(
            task_cpu_milli=int(TASK_CPU_MILLI),
            task_memory=int(TASK_MEMORY),
            node_cpu_allocatable_milli=int(NODE_CPU_MILLI),
            node_memory_allocatable=int(NODE_MEMORY),
            node_cpu_requested_milli=int(node.used_cpu()),
            node_memory_requested=int(node.used_memory()),
            task_images_on_node=images,
            total_nodes=1,
        ),
        binpack=True,
    )
    return scores["total"]


# ------------------------------------------------------------------------------------------------- the action


@dataclass(slots=True)
class CallCounts:
    """Extender calls the emulated scheduler made."""

    session_open: int = 0
    predicate: int = 0
    prioritize: int = 0
    events: int = 0


class VolcanoAllocate:
    """Sessions of Volcano's allocate action over a fixed set of nodes."""

    def __init__(
        self,
        nodes: Sequence[SimNode],
        config: VolcanoConfig,
        service: ExtenderService | None,
        rng: np.random.Generator,
    ) -> None:
        self.nodes = list(nodes)
        self.by_name = {n.name: n for n in self.nodes}
        self.config = config
        self.service = service if config.extender else None
        self.rng = rng
        self.last_index = 0
        self.calls = CallCounts()

    def session(self, jobs: Sequence[SimJob]) -> list[SimJob]:
        """One session: try every job with pending tasks in order; returns the jobs placed in full."""
        if self.service is not None and self.config.session_open:
            self.calls.session_open += 1
            self.service.session_open(orjson.dumps(self._cache(jobs)))
        placed: list[SimJob] = []
        for job in jobs:
            if job.placed:
                continue
            if self._allocate(job):
                placed.append(job)
        return placed

    def _cache(self, jobs: Sequence[SimJob]) -> dict[str, Any]:
        job_infos: dict[str, Any] = {}
        for job in jobs:
            tasks = {}
            for index, task in enumerate(job.tasks):
                node = job.placed.get(index, "")
                tasks[task["UID"]] = dict(task, NodeName=node, Status=TASK_RUNNING if node else TASK_PENDING)
            job_infos[job.job_id] = {
                "UID": job.job_id,
                "Name": f"{job.name}-pg",
                "Namespace": job.namespace,
                "MinAvailable": job.size,
                "Tasks": tasks,
                "PodGroup": {
                    "metadata": {"name": f"{job.name}-pg"},
                    "spec": {"minMember": job.size},
                    "Version": "v1beta1",
                },
            }
        return {
            "Jobs": job_infos,
            "Nodes": {n.name: node_info(n) for n in self.nodes},
            "Queues": {},
            "NamespaceInfo": {},
            "RevocableNodes": {},
            "NodeList": None,
        }

    def _allocate(self, job: SimJob) -> bool:
        failed: set[str] = set()
        """Predicate error cache of this job's turn (one task spec)."""
        allocated: list[tuple[dict[str, Any], SimNode]] = []
        for index, task in enumerate(job.tasks):
            if index in job.placed:
                continue
            feasible = self._predicate_nodes(job, task, failed)
            if not feasible:
                break
            node = feasible[0] if len(feasible) == 1 else self._best(task, feasible)
            placed = dict(task, NodeName=node.name, Status=TASK_ALLOCATED)
            node.tasks[task["UID"]] = placed
            allocated.append((placed, node))
            self._event("allocate", placed)
        if len(allocated) + len(job.placed) == job.size:
            for placed, node in allocated:
                node.tasks[placed["UID"]] = dict(placed, Status=TASK_RUNNING)
                job.placed[job.tasks.index(next(t for t in job.tasks if t["UID"] == placed["UID"]))] = node.name
            return True
        for placed, node in allocated:
            del node.tasks[placed["UID"]]
            self._event("deallocate", placed)
        return False

    def _predicate_nodes(self, job: SimJob, task: dict[str, Any], failed: set[str]) -> list[SimNode]:
        total = len(self.nodes)
        wanted = num_feasible_nodes_to_find(total, self.config)
        found: list[SimNode] = []
        processed = 0
        constraints = pod_constraints(msgspec.convert(task["Pod"], Pod))
        for offset in range(total):
            node = self.nodes[(self.last_index + offset) % total]
            processed += 1
            # Resource fit first: the extender never hears of nodes the task does not fit.
            if node.cards - node.used_cards() < job.cards or NODE_CPU_MILLI - node.used_cpu() < TASK_CPU_MILLI:
                continue
            if node.name in failed:
                continue
            info = node_info(node)
            # The `predicates` plugin (node selector, affinity, taints) runs before the extender in its tier.
            if not node_admits(constraints, msgspec.convert(info, NodeInfo)):
                failed.add(node.name)
                continue
            if self.service is not None:
                self.calls.predicate += 1
                answer, _ = self.service.predicate(orjson.dumps({"task": task, "node": info}))
                if not predicate_passes(self.config.release, orjson.dumps(answer), ignorable=self.config.ignorable):
                    failed.add(node.name)
                    continue
            found.append(node)
            if len(found) >= wanted:
                break
        self.last_index = (self.last_index + processed) % total
        return found

    def _best(self, task: dict[str, Any], nodes: Sequence[SimNode]) -> SimNode:
        scores = {n.name: plugin_scores(n, self.config.release) for n in nodes}
        if self.service is not None:
            self.calls.prioritize += 1
            answer, _ = self.service.prioritize(orjson.dumps({"task": task, "nodes": [node_info(n) for n in nodes]}))
            outcome = volcano.decode_prioritize_response(
                release_name(self.config.release), orjson.dumps(answer), self.config.ignorable
            )
            if outcome.effect == "call_failed":
                raise RuntimeError(f"prioritize answer fails the call on Volcano: {outcome.consequence}")
            for name, score in (outcome.scores or {}).items():
                if name in scores:
                    scores[name] += float(score)
        best = max(scores.values())
        top = [n for n in nodes if scores[n.name] == best]
        return top[int(self.rng.integers(len(top)))]

    def _event(self, verb: str, task: dict[str, Any]) -> None:
        if self.service is None or not self.config.events or self.config.release < (1, 13):
            return
        self.calls.events += 1
        body = orjson.dumps({"task": task})
        answer, _ = self.service.allocate(body) if verb == "allocate" else self.service.deallocate(body)
        outcome = volcano.decode_event_handler_response(
            release_name(self.config.release), orjson.dumps(answer), self.config.ignorable
        )
        if outcome.error is not None:
            raise RuntimeError(f"{verb} answer fails the event on Volcano: {outcome.error}")


__all__ = [
    "CallCounts",
    "SimJob",
    "SimNode",
    "VolcanoAllocate",
    "VolcanoConfig",
    "make_job",
    "node_info",
    "num_feasible_nodes_to_find",
    "plugin_scores",
    "predicate_passes",
    "task_info",
]
