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

With HyperNodes (Volcano 1.12+, `VolcanoAllocate(..., hypernodes=...)`) it also reproduces network-topology-aware
scheduling as v1.12-v1.15 do it (`webhook.volcano_emulation.network_topology` holds the plugin's formulas): a job
whose PodGroup has a hard `networkTopology` is tried as a whole, task by task as above, inside each candidate
HyperNode in turn (the lowest tier that works; from 1.14 only HyperNodes whose free resources cover the job, from
1.15 also the lowest tier inside the chosen one), every trial undone, and the best HyperNode's placement is
replayed and committed: on 1.12-1.13 the one whose tasks' best node scores add up highest, from 1.14 the one the
plugin's HyperNode binpack scores highest; ties at random. The plugin's node scores join nodeorder's, binpack's and
the extender's: toward the HyperNode the job's first tasks took (jobs with networkTopology; 1.12 soft ones only)
and, from 1.14, HyperNode binpack for jobs without. A soft job keeps the ordinary path on 1.12-1.13 and becomes
hard at a virtual tier above every HyperNode from 1.14 (as 1.14.3 and later do).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
import orjson

from planner import hypernode_tree
from webhook.extender.app import ExtenderService
from webhook.extender.fit import node_admits, pod_constraints
from webhook.extender.volcano_releases import MASTER_RELEASE, RELEASES, normalize_release
from webhook.extender.wire import NodeInfo, Pod
from webhook.volcano_emulation import allocate_rules
from webhook.volcano_emulation.cluster_objects import (
    NODE_CPU_MILLI,
    NODE_MEMORY,
    TASK_ALLOCATED,
    TASK_CPU_MILLI,
    TASK_MEMORY,
    TASK_PENDING,
    TASK_RUNNING,
    TRAINING_IMAGE_BYTES,
    SimJob,
    SimNode,
    node_info,
    task_cards,
)
from webhook.volcano_emulation.default_scores import ScoringInput, default_node_scores
from webhook.volcano_emulation.extender_answers import (
    decode_event_handler_response,
    decode_predicate_response,
    decode_prioritize_response,
)
from webhook.volcano_emulation.network_topology import (
    KIT_ARGUMENTS,
    SUB_JOB_GRADIENT_RELEASE,
    Amounts,
    EffectiveTopology,
    PluginArguments,
    SessionHyperNodes,
    effective_topology,
    gradient,
    hypernode_order_scores,
    network_aware_scores,
    normal_pod_scores,
    total,
)

Release = tuple[int, int]


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
    network_topology: PluginArguments = KIT_ARGUMENTS
    """Arguments of the `network-topology-aware` plugin, configured when the cluster has HyperNodes."""


def num_feasible_nodes_to_find(nodes: int, config: VolcanoConfig) -> int:
    """`util.CalculateNumOfFeasibleNodesToFind` with the release's flag defaults (all nodes before 1.9)."""
    return allocate_rules.num_feasible_nodes_to_find(
        nodes,
        release_name(config.release),
        percentage=config.percentage_to_find,
        minimum=config.min_nodes_to_find,
        min_percentage=config.min_percentage_to_find,
    )


def release_name(release: Release) -> str:
    """(1, 10) -> "1.10", clamped to the releases `volcano_releases` knows."""
    newest = normalize_release(MASTER_RELEASE)
    name = f"{release[0]}.{release[1]}"
    return name if name in RELEASES else newest


# --------------------------------------------------------------------------------------------- answer decoding


def predicate_passes(release: Release, body: bytes, *, ignorable: bool) -> bool:
    """Whether `release` treats the predicate answer as a pass (a body it cannot decode is an error)."""
    return decode_predicate_response(release_name(release), body, ignorable).passes


# ---------------------------------------------------------------------------------------------------- plugins


def plugin_scores(node: SimNode, release: Release) -> float:
    """What `nodeorder` and `binpack` add at their default weights (Volcano's Helm chart enables both): the
    scores the extender's must outweigh. Image locality counts when the node already holds the training image."""
    images = ((TRAINING_IMAGE_BYTES, 1),) if node.has_image else ()
    scores = default_node_scores(
        release_name(release),
        ScoringInput(
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


@dataclass(slots=True)
class _Trial:
    """One run of a job's pending tasks over a list of nodes (a whole session's, or one HyperNode's)."""

    allocations: list[tuple[dict[str, Any], SimNode]]
    """The tasks allocated, in order, with their nodes."""
    ok: bool
    """Every task of the gang got a node."""
    score_sum: float = 0.0
    """Sum of each task's best node score (1.12-1.13 choose among HyperNodes by it)."""
    allocated: str = ""
    """The job's allocated HyperNode after the run (the lowest common ancestor of its tasks' HyperNodes)."""


def _request(job: SimJob) -> Amounts:
    return Amounts(TASK_CPU_MILLI, float(TASK_MEMORY), {job.resource: job.cards * 1000.0})


class VolcanoAllocate:
    """Sessions of Volcano's allocate action over a fixed set of nodes (and their HyperNodes, if any)."""

    def __init__(
        self,
        nodes: Sequence[SimNode],
        config: VolcanoConfig,
        service: ExtenderService | None,
        rng: np.random.Generator,
        *,
        hypernodes: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        self.nodes = list(nodes)
        self.by_name = {n.name: n for n in self.nodes}
        self.config = config
        self.service = service if config.extender else None
        self.rng = rng
        self.last_index = 0
        self.calls = CallCounts()
        node_objects = [{"metadata": {"name": n.name, "labels": n.labels}} for n in self.nodes]
        self.tree = hypernode_tree(hypernodes, node_objects) if hypernodes else None
        self.hyper: SessionHyperNodes | None = None
        """The session's HyperNodes (None without HyperNodes, or before 1.12)."""
        self._allocatable: dict[str, Amounts] = {}
        self._idle: dict[str, Amounts] = {}
        """Free resources of each HyperNode at session open (the gradient's eligibility reads these)."""

    def session(self, jobs: Sequence[SimJob]) -> list[SimJob]:
        """One session: try every job with pending tasks in order; returns the jobs placed in full."""
        self._open_hypernodes()
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

    # -------------------------------------------------------------------------------------------- HyperNodes

    def _open_hypernodes(self) -> None:
        if self.tree is None or self.config.release < (1, 12):
            return
        self.hyper = SessionHyperNodes.of(self.tree, self.by_name, self.config.release)
        self._allocatable = {name: self._sum(name, self._node_allocatable) for name in self.hyper.by_name}
        self._idle = {
            name: self._sum(name, lambda n: _minus(self._node_allocatable(n), self._node_used(n)))
            for name in self.hyper.by_name
        }

    def _sum(self, hypernode: str, amounts: Any) -> Amounts:
        assert self.hyper is not None
        return total(amounts(self.by_name[n]) for n in self.hyper.by_name[hypernode].nodes)

    @staticmethod
    def _node_allocatable(node: SimNode) -> Amounts:
        return Amounts(NODE_CPU_MILLI, float(NODE_MEMORY), {node.resource: node.cards * 1000.0})

    @staticmethod
    def _node_used(node: SimNode) -> Amounts:
        return Amounts(node.used_cpu(), node.used_memory(), {node.resource: node.used_cards() * 1000.0})

    def _used(self) -> dict[str, Amounts]:
        """What every HyperNode's nodes hold now (the plugin's cache follows allocate and deallocate events)."""
        assert self.hyper is not None
        return {name: self._sum(name, self._node_used) for name in self.hyper.by_name}

    def _nodes_of(self, hypernode: str) -> list[SimNode]:
        assert self.hyper is not None
        members = self.hyper.by_name[hypernode].nodes
        return [n for n in self.nodes if n.name in members]

    def _topology(self, job: SimJob) -> EffectiveTopology | None:
        if self.hyper is None or job.network_topology is None:
            return None
        return effective_topology(job.network_topology, self.hyper, self.config.release)

    def _shuffled(self, names: Sequence[str]) -> list[str]:
        """HyperNodes in the order vc-scheduler meets them: a Go map's, so at random."""
        order = list(names)
        self.rng.shuffle(order)
        return order

    def _pick(self, scores: Mapping[str, float]) -> str:
        """The highest score, ties at random."""
        best = max(scores.values())
        top = sorted(name for name, score in scores.items() if score == best)
        return top[int(self.rng.integers(len(top)))]

    # ------------------------------------------------------------------------------------------------ the job

    def _cache(self, jobs: Sequence[SimJob]) -> dict[str, Any]:
        release = self.config.release
        job_infos: dict[str, Any] = {}
        for job in jobs:
            tasks = {}
            for index, task in enumerate(job.tasks):
                node = job.placed.get(index, "")
                tasks[task["UID"]] = dict(task, NodeName=node, Status=TASK_RUNNING if node else TASK_PENDING)
            pod_group: dict[str, Any] = {
                "metadata": {"name": f"{job.name}-pg"},
                "spec": {"minMember": job.size},
                "Version": "v1beta1",
            }
            info: dict[str, Any] = {
                "UID": job.job_id,
                "Name": f"{job.name}-pg",
                "Namespace": job.namespace,
                "MinAvailable": job.size,
                "Tasks": tasks,
                "PodGroup": pod_group,
            }
            spec = job.network_topology
            if spec is not None and release >= (1, 14):
                pod_group["spec"]["networkTopology"] = dict(spec)
            elif spec is not None and release >= (1, 12):
                # Before 1.14 the internal types have no json tags.
                written = {"Mode": spec.get("mode", "hard"), "HighestTierAllowed": spec.get("highestTierAllowed")}
                pod_group["Spec"] = {"NetworkTopology": written}
            topology = self._topology(job)
            if topology is not None and release >= (1, 15):
                effective = {"mode": "hard" if topology.hard else "soft"}
                if topology.tier is not None:
                    effective["highestTierAllowed"] = topology.tier  # type: ignore[assignment]
                info["NetworkTopology"] = effective
            job_infos[job.job_id] = info
        return {
            "Jobs": job_infos,
            "Nodes": {n.name: node_info(n) for n in self.nodes},
            "Queues": {},
            "NamespaceInfo": {},
            "RevocableNodes": {},
            "NodeList": None,
        }

    def _allocate(self, job: SimJob) -> bool:
        topology = self._topology(job)
        if topology is not None and topology.hard and topology.tier is not None:
            return self._allocate_hard(job, topology)
        trial = self._trial(job, self.nodes, topology)
        if not trial.ok:
            return False
        self._commit(job, trial)
        if topology is not None:
            job.allocated_hypernode = trial.allocated
        return True

    def _allocate_hard(self, job: SimJob, topology: EffectiveTopology) -> bool:
        """A hard networkTopology: the gang tried as a whole inside candidate HyperNodes, the best one kept."""
        hyper = self.hyper
        assert hyper is not None
        assert topology.tier is not None
        if self.config.release < (1, 14):
            successes: dict[str, _Trial] = {}
            sums: dict[str, float] = {}
            for tier in hyper.tiers:
                if tier > topology.tier or successes:
                    break
                for name in self._shuffled(hyper.at_tier(tier)):
                    trial = self._trial(job, self._nodes_of(name), topology)
                    sums[name] = sums.get(name, 0.0) + trial.score_sum
                    if trial.ok:
                        successes[name] = trial
                        self._undo(trial)
            if not successes:
                return False
            chosen = successes[self._pick({name: sums[name] for name in successes})]
        else:
            assert hyper.top is not None
            need = total(_request(job) for index in range(job.size) if index not in job.placed)
            found: _Trial | None = None
            for candidates in gradient(
                hyper,
                hyper.top,
                highest_tier=topology.tier,
                min_resources=need,
                idle=self._idle,
                future_idle=self._idle,
            ):
                results: dict[str, tuple[_Trial, float]] = {}
                for name in self._shuffled(candidates):
                    result = self._in_hypernode(job, name, topology, need)
                    if result is not None:
                        results[name] = result
                if results:
                    found = results[self._pick({name: score for name, (_, score) in results.items()})][0]
                    break
            if found is None:
                return False
            chosen = found
        self._replay(chosen)
        self._commit(job, chosen)
        return True

    def _in_hypernode(
        self, job: SimJob, hypernode: str, topology: EffectiveTopology, need: Amounts
    ) -> tuple[_Trial, float] | None:
        """1.14+: the job's (default) sub-job tried inside one HyperNode, with the plugin's HyperNode score; on 1.15
        within the lowest tier of HyperNodes under it that works."""
        hyper = self.hyper
        assert hyper is not None
        assert topology.tier is not None
        if self.config.release >= SUB_JOB_GRADIENT_RELEASE:
            levels = gradient(
                hyper,
                hypernode,
                highest_tier=topology.tier,
                min_resources=need,
                idle=self._idle,
                future_idle=self._idle,
            )
        else:
            levels = [[hypernode]]
        request = total(_request(job) for _ in job.tasks)
        for candidates in levels:
            successes: dict[str, _Trial] = {}
            for name in self._shuffled(candidates):
                trial = self._trial(job, self._nodes_of(name), topology)
                if trial.ok:
                    successes[name] = trial
                    self._undo(trial)
            if not successes:
                continue
            scores = hypernode_order_scores(
                list(successes),
                request,
                used=self._used(),
                allocatable=self._allocatable,
                session=hyper,
                task_nodes=[job.placed.get(i, "") for i in range(job.size)],
                args=self.config.network_topology,
            )
            best = self._pick(scores)
            if self.config.release >= SUB_JOB_GRADIENT_RELEASE:
                # The sub-job's statement is recovered, then discarded again as the job's dry run.
                self._replay(successes[best])
                self._undo(successes[best])
            return successes[best], scores[best]
        return None

    def _trial(self, job: SimJob, nodes: Sequence[SimNode], topology: EffectiveTopology | None) -> _Trial:
        """The job's pending tasks one after another over `nodes`; left allocated if the gang is complete,
        undone otherwise."""
        failed: set[str] = set()
        """Predicate error cache of this run (one task spec)."""
        track = topology is not None and (self.config.release >= (1, 13) or not topology.hard)
        trial = _Trial([], ok=False, allocated=job.allocated_hypernode if track else "")
        for index, task in enumerate(job.tasks):
            if index in job.placed:
                continue
            feasible = self._predicate_nodes(task, failed, nodes)
            if not feasible:
                break
            if len(feasible) == 1:
                node, score = feasible[0], 0.0
            else:
                node, score = self._best(job, task, feasible, topology, trial)
            trial.score_sum += score
            placed = dict(task, NodeName=node.name, Status=TASK_ALLOCATED)
            node.tasks[task["UID"]] = placed
            trial.allocations.append((placed, node))
            self._event("allocate", placed)
            if track and self.hyper is not None:
                trial.allocated = self.hyper.lca(self.hyper.leaf_of(node.name), trial.allocated)
        trial.ok = len(trial.allocations) + len(job.placed) == job.size
        if not trial.ok:
            self._undo(trial)
        return trial

    def _undo(self, trial: _Trial) -> None:
        for placed, node in trial.allocations:
            del node.tasks[placed["UID"]]
            self._event("deallocate", placed)

    def _replay(self, trial: _Trial) -> None:
        for placed, node in trial.allocations:
            node.tasks[placed["UID"]] = placed
            self._event("allocate", placed)

    def _commit(self, job: SimJob, trial: _Trial) -> None:
        index_of = {task["UID"]: index for index, task in enumerate(job.tasks)}
        for placed, node in trial.allocations:
            node.tasks[placed["UID"]] = dict(placed, Status=TASK_RUNNING)
            job.placed[index_of[placed["UID"]]] = node.name

    def _predicate_nodes(self, task: dict[str, Any], failed: set[str], nodes: Sequence[SimNode]) -> list[SimNode]:
        total_nodes = len(nodes)
        wanted = num_feasible_nodes_to_find(total_nodes, self.config)
        found: list[SimNode] = []
        processed = 0
        constraints = pod_constraints(msgspec.convert(task["Pod"], Pod))
        start = self.last_index % total_nodes if total_nodes else 0
        for offset in range(total_nodes):
            node = nodes[(start + offset) % total_nodes]
            processed += 1
            # Resource fit first: the extender never hears of nodes the task does not fit.
            job_cards = task_cards(task, node.resource)
            if node.cards - node.used_cards() < job_cards or NODE_CPU_MILLI - node.used_cpu() < TASK_CPU_MILLI:
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
        self.last_index = (start + processed) % total_nodes if total_nodes else 0
        return found

    def _network_scores(
        self,
        job: SimJob,
        task: dict[str, Any],
        nodes: Sequence[SimNode],
        topology: EffectiveTopology | None,
        trial: _Trial,
    ) -> dict[str, float]:
        """The network-topology-aware plugin's node scores for this task (none without HyperNodes)."""
        hyper = self.hyper
        if hyper is None:
            return {}
        release = self.config.release
        names = [n.name for n in nodes]
        if topology is not None:
            if release < (1, 13) and topology.hard:
                return {}  # 1.12 scores soft jobs only
            where = {placed["UID"]: node.name for placed, node in trial.allocations}
            task_nodes = [job.placed.get(i, "") or where.get(t["UID"], "") for i, t in enumerate(job.tasks)]
            return network_aware_scores(
                names,
                trial.allocated,
                session=hyper,
                task_nodes=task_nodes,
                args=self.config.network_topology,
                release=release,
            )
        if release < (1, 14):
            return {}
        return normal_pod_scores(
            names,
            Amounts(TASK_CPU_MILLI, float(TASK_MEMORY), {job.resource: task_cards(task, job.resource) * 1000.0}),
            used=self._used(),
            allocatable=self._allocatable,
            session=hyper,
            args=self.config.network_topology,
        )

    def _best(
        self,
        job: SimJob,
        task: dict[str, Any],
        nodes: Sequence[SimNode],
        topology: EffectiveTopology | None,
        trial: _Trial,
    ) -> tuple[SimNode, float]:
        scores = {n.name: plugin_scores(n, self.config.release) for n in nodes}
        for name, score in self._network_scores(job, task, nodes, topology, trial).items():
            scores[name] += score
        if self.service is not None:
            self.calls.prioritize += 1
            answer, _ = self.service.prioritize(orjson.dumps({"task": task, "nodes": [node_info(n) for n in nodes]}))
            outcome = decode_prioritize_response(
                release_name(self.config.release), orjson.dumps(answer), self.config.ignorable
            )
            if outcome.effect == "call_failed":
                raise RuntimeError(f"prioritize answer fails the call on Volcano: {outcome.consequence}")
            for name, score in (outcome.scores or {}).items():
                if name in scores:
                    scores[name] += float(score)
        best = max(scores.values())
        top = [n for n in nodes if scores[n.name] == best]
        return top[int(self.rng.integers(len(top)))], best

    def _event(self, verb: str, task: dict[str, Any]) -> None:
        if self.service is None or not self.config.events or self.config.release < (1, 13):
            return
        self.calls.events += 1
        body = orjson.dumps({"task": task})
        answer, _ = self.service.allocate(body) if verb == "allocate" else self.service.deallocate(body)
        outcome = decode_event_handler_response(
            release_name(self.config.release), orjson.dumps(answer), self.config.ignorable
        )
        if outcome.error is not None:
            raise RuntimeError(f"{verb} answer fails the event on Volcano: {outcome.error}")


def _minus(a: Amounts, b: Amounts) -> Amounts:
    scalars = {name: a.scalars.get(name, 0.0) - b.scalars.get(name, 0.0) for name in {*a.scalars, *b.scalars}}
    return Amounts(a.cpu - b.cpu, a.memory - b.memory, scalars)


__all__ = [
    "CallCounts",
    "VolcanoAllocate",
    "VolcanoConfig",
    "num_feasible_nodes_to_find",
    "plugin_scores",
    "predicate_passes",
    "release_name",
]
