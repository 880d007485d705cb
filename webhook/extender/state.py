"""What the extender knows between calls: the nodes it has seen, the jobs of the current scheduling session, and
one gang plan per route-planned job.

Sources, freshest first: the NodeInfos of the call being answered; allocate/deallocate events (Volcano 1.13+);
the scheduler cache that onSessionOpen sends at the start of every session; NodeInfos of earlier calls. A plan is
made when a job's first call of a session arrives (Volcano allocates jobs one after another, so plans made in call
order reserve nodes in the order Volcano fills them) and kept for the session; without onSessionOpen, sessions are
invisible and a plan lives `extender.planTtlS` after its last use.

One instance per extender process; handlers run on one event loop, so no locking.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from webhook.common.names import RING_LABEL
from webhook.common.settings import Settings
from webhook.extender.fit import TaskView, node_admits, node_cards, read_task
from webhook.extender.node_paths import Path, PathReader, PathTable, label_path_reader, node_labels
from webhook.extender.placement import GangPlan, LeafRoom, plan_gang, plan_gang_within
from webhook.extender.wire import (
    GONE_STATUSES,
    PLACED_STATUSES,
    STATUS_PENDING,
    JobInfo,
    NetworkTopologySpec,
    NodeInfo,
    NodeView,
    SessionOpenRequest,
    TaskInfo,
)

MAX_REMEMBERED_NODES = 200_000
"""Nodes remembered at most (besides the byte budget `extender.maxStateMib`); the least recently seen go first."""
PATH_TTL_S = 600.0
"""A node's topology path read from its labels is trusted this long without reading the labels again."""
MAX_REMEMBERED_JOBS = 20_000
"""Jobs with plans or placements remembered before the oldest are dropped."""

PLAN_LEAF_STEP = 5.0
"""Score step (before `extender.scoreWeight`) between consecutive leaves of a plan, so Volcano fills leaf after
leaf; at the default weight it is 500 points, more than the 350 nodeorder and binpack can add."""


def _view_bytes(info: NodeView) -> int:
    """Rough memory of a kept node view: its strings plus a fixed overhead per object."""
    size = 400 + len(info.Name)
    meta = info.Node.metadata if info.Node is not None else None
    for key, value in ((meta.labels if meta is not None else None) or {}).items():
        size += 120 + len(key) + len(value)
    spec = info.Node.spec if info.Node is not None else None
    for taint in (spec.taints if spec is not None else None) or ():
        size += 150 + len(taint.key) + len(taint.value) + len(taint.effect)
    return size


@dataclass(frozen=True, slots=True)
class TierLimit:
    """A job's hard `spec.networkTopology`: Volcano (1.12+) keeps it within one HyperNode of `tier` or below."""

    tier: int | None
    """highestTierAllowed; None when the job names a tier (highestTierName) the session does not translate."""
    name: str = ""
    """highestTierName as written, for messages."""


@dataclass(slots=True)
class SessionJob:
    """A ringroute job as the session's scheduler cache shows it."""

    size: int
    """NPU tasks that are not terminating."""
    pending: int
    """Of those, tasks still waiting for a node."""
    placed: dict[str, int]
    """Tasks per node that hold one (allocated, binding, bound or running)."""
    hard_tier: TierLimit | None = None
    """The job's PodGroup has a hard networkTopology: its tasks must share one HyperNode of this tier."""


UnplannedReason = Literal["no_fit", "size_unknown", "no_topology", "left_to_volcano", "placed"]


@dataclass(frozen=True, slots=True)
class Unplanned:
    """Why a route-planned job got no gang plan this session (logged, counted by `reason`)."""

    job: str
    reason: UnplannedReason
    """no_fit: the free nodes cannot hold it (within one domain of its tier, for a hard networkTopology);
    size_unknown: no session data and no `ringroute.io/npu-pods`; no_topology: no node it knows carries topology
    labels; left_to_volcano: a hard networkTopology whose tier's domains the nodes' labels do not name, so the
    extender stays out and Volcano places the job alone; placed: no task of the job is pending (a call about a job
    the session's cache or earlier calls show placed)."""
    detail: str


@dataclass(frozen=True, slots=True)
class JobPlan:
    """A gang plan and how calls follow it."""

    job: str
    plan: GangPlan
    allowed: frozenset[str]
    """Nodes the job may use: the free fitting nodes of the planned leaves."""
    bonus: Mapping[str, float]
    """Order within the plan (PLAN_LEAF_STEP apart, one value per leaf): hosting leaves, then leaves the plan
    empties, the partly used leaf last (bonus 0)."""
    enforced: bool
    """The predicate refuses nodes outside `allowed` (only with exact session data)."""
    session: int
    hosted: frozenset[str]
    """Leaves that already held tasks of the job when it was planned."""


@dataclass(slots=True)
class _Allocation:
    node: str
    cards: int


@dataclass(slots=True)
class _JobMemory:
    """Per job: placements seen, allocations reported, the plan and its history."""

    placed: dict[str, set[str]] = field(default_factory=dict)
    """node -> task uids of the job seen there (NodeInfo Tasks of calls)."""
    allocations: dict[str, _Allocation] = field(default_factory=dict)
    """task uid -> node, from allocate events of this session."""
    plan: JobPlan | None = None
    plan_used: float = 0.0
    no_plan_session: int = -1
    """Session in which planning found no placement (not retried within it)."""
    no_plan_at: float = -1e18
    failures: int = 0
    """Consecutive sessions in which the job kept pending tasks after an enforced plan."""
    touched: float = 0.0


def _hard_tier(job: JobInfo) -> TierLimit | None:
    """The tier a job's hard networkTopology keeps it within, as vc-scheduler reads it: mode hard (the CRD's
    default) with highestTierAllowed, or a highestTierName the session translated (1.15 sends the translation in
    `JobInfo.NetworkTopology`). Soft, or hard without any tier, constrains nothing (Volcano places such a job
    without HyperNode limits)."""
    written: NetworkTopologySpec | None = job.PodGroup.network_topology if job.PodGroup is not None else None
    if written is None or written.effective_mode != "hard":
        return None
    if written.tier is not None:
        return TierLimit(written.tier)
    if not written.tier_name:
        return None
    session = job.NetworkTopology
    translated = session.tier if session is not None and session.effective_mode == "hard" else None
    return TierLimit(translated, written.tier_name)


class ExtenderState:
    """The extender's memory; see the module docstring."""

    def __init__(self, settings: Settings, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.clock = clock
        self.read_path: PathReader = label_path_reader(settings.topology.label_keys)
        self.nodes: dict[str, NodeView] = {}
        """Latest NodeInfo per node name, least recently seen first."""
        self._node_bytes: dict[str, int] = {}
        self._stored_bytes = 0
        self._byte_budget = settings.extender.max_state_mib * 2**20
        self.path_table = PathTable()
        """Numbers of the topology paths below (prioritize counts and scores leaves by number)."""
        self._path_ids: dict[str, int] = {}
        """Topology path number per node whose view is kept and whose labels were read within PATH_TTL_S."""
        self._path_read_at: dict[str, float] = {}
        self._fresh: Sequence[str] = ()
        """Candidates of the prioritize call being answered: Volcano found them free just now."""
        self.session = 0
        """Number of onSessionOpen calls seen; 0 while none has come."""
        self.session_data = False
        """The current session's scheduler cache was read (job facts and node paths are exact)."""
        self.jobs: dict[str, SessionJob] = {}
        """ringroute jobs of the current session (empty without onSessionOpen)."""
        self.session_path_ids: dict[str, int] = {}
        """Topology path number (in `path_table`) of every node of the session's cache, read at session open."""
        self._memory: dict[str, _JobMemory] = {}
        self._session_cards: dict[str, int] = {}
        """Cards allocated per node in this session by allocate events (minus deallocations)."""
        self._last_prune = clock()
        self.on_plan: Callable[[TaskView, JobPlan | Unplanned], None] | None = None
        """Called after each planning attempt (the service logs it and counts it)."""

    # ------------------------------------------------------------------------------------------------ sessions

    def open_session(self, request: SessionOpenRequest) -> dict[str, int]:
        """Replace the node view and the job facts with the scheduler's cache; returns counts for the log."""
        now = self.clock()
        nodes = request.Nodes or {}
        self.nodes = {}
        self._node_bytes = {}
        self._path_ids = {}
        self.path_table = PathTable()
        self._path_read_at = {}
        self._stored_bytes = 0
        for name, info in nodes.items():
            self._remember(info.Name or name, info)
        self.session_path_ids = dict(self._path_ids)
        previous = self.session
        self.session += 1
        self.session_data = True
        self._session_cards.clear()
        jobs: dict[str, SessionJob] = {}
        for job_id, job in (request.Jobs or {}).items():
            facts = self._session_job(job)
            if facts is not None:
                jobs[job_id] = facts
        for job_id, memory in self._memory.items():
            plan = memory.plan
            if plan is not None and plan.enforced and plan.session == previous:
                facts = jobs.get(job_id)
                # Volcano tried the job in the last session (it asked about it); count it if it still waits.
                memory.failures = memory.failures + 1 if facts is not None and facts.pending > 0 else 0
            memory.plan = None
            memory.allocations.clear()
            memory.no_plan_session = -1
        self.jobs = jobs
        for job_id in jobs:
            self._job(job_id, now).placed.clear()
        self.prune(now)
        return {"nodes": len(self.nodes), "jobs": len(jobs), "pending_jobs": sum(1 for f in jobs.values() if f.pending)}

    def session_without_data(self) -> None:
        """A session opened whose scheduler cache could not be used (too large, malformed): forget the last
        session's facts and plans, and plan from what calls show."""
        self.session += 1
        self.session_data = False
        self.jobs = {}
        self.session_path_ids = {}
        self._session_cards.clear()
        for memory in self._memory.values():
            memory.plan = None
            memory.allocations.clear()
            memory.no_plan_session = -1

    def _session_job(self, job: JobInfo) -> SessionJob | None:
        """A job with a known profile, else None; NPU tasks by Resreq, its containers' requests (jobfacts' rule)."""
        profile = None
        for task in (job.Tasks or {}).values():
            meta = task.Pod.metadata if task.Pod is not None else None
            value = (meta.labels or {}).get(RING_LABEL) if meta is not None else None
            if value is not None:
                profile = self.settings.profile(value)
                if profile is not None:
                    break
        if profile is None:
            return None
        size = pending = 0
        placed: dict[str, int] = {}
        for task in (job.Tasks or {}).values():
            scalars = task.Resreq.ScalarResources if task.Resreq is not None else None
            if not scalars or scalars.get(profile.resource_name, 0.0) <= 0 or task.Status in GONE_STATUSES:
                continue
            size += 1
            if task.Status == STATUS_PENDING:
                pending += 1
            elif task.Status in PLACED_STATUSES and task.NodeName:
                placed[task.NodeName] = placed.get(task.NodeName, 0) + 1
        if size == 0 and job.MinAvailable > 0:
            size = pending = job.MinAvailable
        return SessionJob(size=size, pending=pending, placed=placed, hard_tier=_hard_tier(job))

    # ---------------------------------------------------------------------------------------------- observation

    def observe(self, infos: Iterable[NodeView], task: TaskView | None = None) -> None:
        """Remember the nodes of a call and, for the task's job, which of them hold its tasks (NodeInfos with a
        Tasks map only)."""
        remember = self._remember
        # The session's facts say where a job's tasks are; calls are read for that only without them.
        job = task.job if task is not None and task.profile is not None and task.job not in self.jobs else ""
        if not job:
            for info in infos:
                if info.Name:
                    remember(info.Name, info)
            return
        memory = self._memory.get(job)
        placed = memory.placed if memory is not None else None
        for info in infos:
            name = info.Name
            if not name:
                continue
            remember(name, info)
            if not isinstance(info, NodeInfo):
                continue
            uids: set[str] | None = None
            tasks = info.Tasks
            if tasks:
                for key, node_task in tasks.items():
                    if node_task.Job == job:
                        if uids is None:
                            uids = set()
                        uids.add(node_task.UID or key)
            if uids:
                if placed is None:
                    placed = self._job(job, self.clock()).placed
                placed[name] = uids
            elif placed:
                placed.pop(name, None)

    def _remember(self, name: str, info: NodeView) -> None:
        """Keep a node's latest view, within `extender.maxStateMib`: the least recently seen nodes go first (the
        views come from requests, so their size is the sender's to choose)."""
        size = _view_bytes(info)
        self._stored_bytes += size - self._node_bytes.pop(name, 0)
        self.nodes.pop(name, None)
        self.nodes[name] = info
        self._node_bytes[name] = size
        self._path_ids[name] = self.path_table.number(self.read_path(node_labels(info)))
        self._path_read_at[name] = self.clock()
        if self._stored_bytes > self._byte_budget or len(self.nodes) > MAX_REMEMBERED_NODES:
            target = self._byte_budget * 3 // 4
            for oldest in list(self.nodes):
                if self._stored_bytes <= target and len(self.nodes) <= MAX_REMEMBERED_NODES * 3 // 4:
                    break
                del self.nodes[oldest]
                self._path_ids.pop(oldest, None)
                self._path_read_at.pop(oldest, None)
                self._stored_bytes -= self._node_bytes.pop(oldest, 0)

    def known_path_ids(self, names: Sequence[str]) -> Sequence[int] | None:
        """The topology path number of every node in `names` read within PATH_TTL_S (pruned once a minute), or
        None when any is missing (the caller then reads the candidates' labels). Lets prioritize without session
        data skip decoding labels; one C-level lookup for all names."""
        if not names:
            return []
        try:
            found = operator.itemgetter(*names)(self._path_ids)
        except KeyError:
            return None
        return (found,) if len(names) == 1 else found

    def mark_fresh(self, names: Sequence[str]) -> None:
        """The candidates of the prioritize call being answered: Volcano found them free just now, whatever an
        older view of them says (planning without session data counts them as free). Kept as given: a set is
        made only if a plan is made during the call."""
        self._fresh = names

    @property
    def stored_bytes(self) -> int:
        """Estimated bytes of the node views kept (bounded by `extender.maxStateMib`)."""
        return self._stored_bytes

    def allocated(self, task: TaskView) -> None:
        """An allocate event: the task took `task.node_name` in this session."""
        if not task.job or not task.node_name or task.profile is None:
            return
        memory = self._job(task.job, self.clock())
        previous = memory.allocations.get(task.uid)
        if previous is not None:
            self._session_cards[previous.node] = self._session_cards.get(previous.node, 0) - previous.cards
        memory.allocations[task.uid] = _Allocation(task.node_name, task.cards)
        self._session_cards[task.node_name] = self._session_cards.get(task.node_name, 0) + task.cards

    def deallocated(self, task: TaskView) -> None:
        """A deallocate event: an allocation of this session was undone (the gang was discarded)."""
        memory = self._memory.get(task.job)
        allocation = memory.allocations.pop(task.uid, None) if memory is not None else None
        if allocation is not None:
            self._session_cards[allocation.node] = self._session_cards.get(allocation.node, 0) - allocation.cards

    # ---------------------------------------------------------------------------------------------------- views

    def hosted_nodes(self, task: TaskView) -> dict[str, int]:
        """Tasks of the task's job per node (the task itself left out): the session's facts, else what calls
        showed; plus this session's allocate events."""
        facts = self.jobs.get(task.job)
        memory = self._memory.get(task.job)
        counts = dict(facts.placed) if facts is not None else {}
        if memory is None:
            return counts
        if facts is None:
            counts = {node: len(uids - {task.uid}) for node, uids in memory.placed.items()}
        for uid, allocation in memory.allocations.items():
            if uid != task.uid:
                counts[allocation.node] = counts.get(allocation.node, 0) + 1
        return {node: count for node, count in counts.items() if count > 0}

    def path_of(self, node: str, info: NodeView | None = None) -> Path | None:
        """The node's topology path from the given or the remembered NodeInfo."""
        info = info if info is not None else self.nodes.get(node)
        return self.read_path(node_labels(info)) if info is not None else None

    def session_job(self, job: str) -> SessionJob | None:
        """The session's facts about a job (None without onSessionOpen or for a job it did not list)."""
        return self.jobs.get(job)

    # ---------------------------------------------------------------------------------------------------- plans

    def plan_for(self, task: TaskView, *, create: bool = True) -> JobPlan | None:
        """The job's gang plan, made now (when `create`) if this is the job's first call of the session; None
        when the job is not planned (not route-planned, size unknown, no placement holds it, or left to Volcano:
        `on_plan` is told why)."""
        if not task.route_planned or task.profile is None or not task.job:
            return None
        settings = self.settings.extender
        if not settings.gang_planning:
            return None
        now = self.clock()
        memory = self._job(task.job, now)
        plan = memory.plan
        if plan is not None and self._current(plan.session, memory.plan_used, now):
            memory.plan_used = now
            return plan
        if not create or self._current(memory.no_plan_session, memory.no_plan_at, now):
            return None
        made = self._make_plan(task, memory)
        if self.on_plan is not None:
            self.on_plan(task, made)
        if isinstance(made, Unplanned):
            memory.plan = None
            memory.no_plan_session, memory.no_plan_at = self.session, now
            return None
        memory.plan, memory.plan_used = made, now
        return made

    def left_to_volcano(self, task: TaskView) -> bool:
        """The job's hard networkTopology names a tier whose domains the extender cannot see: it stays out (every
        node fits, no scores) and Volcano places the job within its HyperNodes alone."""
        facts = self.jobs.get(task.job) if self.session_data else None
        return facts is not None and facts.hard_tier is not None and self._tier_unreadable(facts.hard_tier)

    def _tier_unreadable(self, limit: TierLimit) -> bool:
        """No node the extender knows carries labels naming domains of the limit's tier (tier 1: leaves)."""
        if limit.tier is None:
            return True
        return not self._labelled(max(limit.tier, 1))

    def _labelled(self, tiers: int) -> bool:
        """Some known node's labels give a topology path of at least `tiers` tiers."""
        return any(path is not None and len(path) >= tiers for path in self.path_table.paths)

    def _current(self, session: int, used_at: float, now: float) -> bool:
        """A plan (or a failed planning) of `session` still applies: same session, or, without sessions, used
        within `extender.planTtlS`."""
        if session != self.session:
            return False
        return bool(self.session) or now - used_at <= self.settings.extender.plan_ttl_s

    def _make_plan(self, task: TaskView, memory: _JobMemory) -> JobPlan | Unplanned:
        facts = self.jobs.get(task.job) if self.session_data else None
        limit = facts.hard_tier if facts is not None else None
        if limit is not None and self._tier_unreadable(limit):
            wanted = f"tier {limit.tier}" if limit.tier is not None else f"tier {limit.name!r}"
            return Unplanned(
                task.job,
                "left_to_volcano",
                f"hard networkTopology at {wanted}, and no node's labels name the domains of that tier",
            )
        if not self._labelled(1):
            return Unplanned(task.job, "no_topology", "no node it was shown carries topology labels")
        hosted = self.hosted_nodes(task)
        if facts is not None:
            need = facts.pending
        elif task.npu_pods is not None:
            need = task.npu_pods - sum(hosted.values())
        else:
            return Unplanned(task.job, "size_unknown", "no session data and no ringroute.io/npu-pods on its pods")
        if need <= 0:
            return Unplanned(task.job, "placed", "no task of the job is pending")
        reserved = self._reserved_elsewhere(task.job)
        free_by_leaf: dict[str, list[str]] = {}
        spine_of: dict[str, str | None] = {}
        domain_of: dict[str, str] = {}
        """Tier-`limit` domain of each leaf (the leaf itself at tier 1)."""
        fresh = frozenset(self._fresh)
        for name, info in self.nodes.items():
            path = self.path_of(name, info)
            if not path:
                continue
            leaf = path[0]
            spine_of.setdefault(leaf, path[1] if len(path) > 1 else None)
            if limit is not None and limit.tier is not None and len(path) >= max(limit.tier, 1):
                domain_of.setdefault(leaf, path[max(limit.tier, 1) - 1])
            if self._session_cards.get(name, 0) > 0:
                continue
            if name in fresh or (node_admits(task.constraints, info) and node_cards(info, task).fits):
                free_by_leaf.setdefault(leaf, []).append(name)
        hosted_leaves: dict[str, int] = {}
        for node, count in hosted.items():
            path = self.path_of(node)
            if path:
                hosted_leaves[path[0]] = hosted_leaves.get(path[0], 0) + count
                spine_of.setdefault(path[0], path[1] if len(path) > 1 else None)
                if limit is not None and limit.tier is not None and len(path) >= max(limit.tier, 1):
                    domain_of.setdefault(path[0], path[max(limit.tier, 1) - 1])
        rooms = [
            LeafRoom(
                leaf,
                spine_of.get(leaf),
                free=max(0, len(free_by_leaf.get(leaf, ())) - reserved.get(leaf, 0)),
                hosted=hosted_leaves.get(leaf, 0),
            )
            for leaf in sorted(set(free_by_leaf) | set(hosted_leaves))
        ]
        if limit is not None:
            gang = plan_gang_within(rooms, need, domain_of)
            where = f" within one tier-{limit.tier} domain"
        else:
            gang = plan_gang(rooms, need)
            where = ""
        if gang is None:
            free = sum(r.free for r in rooms)
            return Unplanned(task.job, "no_fit", f"{free} free nodes it can use, {need} pending pods{where}")
        allowed: set[str] = set()
        bonus: dict[str, float] = {}
        full = gang.full_leaves
        # Fill leaf after leaf (hosting leaves, then the ones the plan empties, the partly used one last): tasks
        # are allocated in index order, so pod-index neighbours share a leaf and the partial leaf gets the rest.
        order = sorted(
            gang.take,
            key=lambda leaf: (leaf not in hosted_leaves, leaf not in full, spine_of.get(leaf) or "", leaf),
        )
        for position, leaf in enumerate(order):
            weight = PLAN_LEAF_STEP * (len(order) - 1 - position)
            for name in free_by_leaf.get(leaf, ()):
                allowed.add(name)
                bonus[name] = weight
        enforced = (
            self.settings.extender.enforce_plan
            and facts is not None
            and memory.failures < self.settings.extender.plan_attempts
        )
        return JobPlan(
            job=task.job,
            plan=gang,
            allowed=frozenset(allowed),
            bonus=bonus,
            enforced=enforced,
            session=self.session,
            hosted=frozenset(hosted_leaves),
        )

    def _reserved_elsewhere(self, job: str) -> dict[str, int]:
        """Nodes per leaf that other jobs' plans of this session still expect to take."""
        reserved: dict[str, int] = {}
        now = self.clock()
        for other, memory in self._memory.items():
            plan = memory.plan
            if other == job or plan is None or not self._current(plan.session, memory.plan_used, now):
                continue
            for leaf, count in plan.plan.take.items():
                reserved[leaf] = reserved.get(leaf, 0) + count
        return reserved

    # -------------------------------------------------------------------------------------------------- memory

    def _job(self, job: str, now: float) -> _JobMemory:
        memory = self._memory.get(job)
        if memory is None:
            if len(self._memory) >= MAX_REMEMBERED_JOBS:
                oldest = min(self._memory, key=lambda j: self._memory[j].touched)
                del self._memory[oldest]
            memory = self._memory[job] = _JobMemory()
        memory.touched = now
        return memory

    def prune(self, now: float | None = None) -> None:
        """Forget jobs untouched for `extender.jobMemoryTtlS`."""
        now = self.clock() if now is None else now
        self._last_prune = now
        ttl = self.settings.extender.job_memory_ttl_s
        for job in [j for j, m in self._memory.items() if now - m.touched > ttl]:
            del self._memory[job]
        self._prune_paths(now)

    def _prune_paths(self, now: float) -> None:
        oldest = now - PATH_TTL_S
        for name in [n for n, at in self._path_read_at.items() if at < oldest]:
            del self._path_read_at[name]
            self._path_ids.pop(name, None)
        if len(self.path_table) > 2 * len(self._path_ids) + PathTable.SLACK:
            # Paths of forgotten nodes: number the live ones afresh.
            table = PathTable()
            old = self.path_table.paths
            self._path_ids = {name: table.number(old[i]) for name, i in self._path_ids.items()}
            self.session_path_ids = {name: table.number(old[i]) for name, i in self.session_path_ids.items()}
            self.path_table = table

    def maybe_prune(self) -> None:
        """Prune at most once a minute."""
        now = self.clock()
        if now - self._last_prune > 60.0:
            self.prune(now)

    def read(self, task: TaskInfo) -> TaskView:
        """Convert a TaskInfo with this state's settings."""
        return read_task(task, self.settings)


__all__ = [
    "ExtenderState",
    "JobPlan",
    "SessionJob",
    "TierLimit",
    "Unplanned",
    "UnplannedReason",
]
