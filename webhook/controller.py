"""The rank-table controller: from placed, annotated pods to a completed (and routed) `jobstart_hccl.json`.

Informers (list + watch, resume from resourceVersion, relist on 410 Gone, bookmarks, backoff) keep caches of
labelled Volcano Jobs, their pods, the rank-table ConfigMaps, Nodes and (when the CRD exists) HyperNodes. A Job
without its ConfigMap gets one at once, owned by the Job, from a queue of its own (`create_configmap`). Changes
enqueue the job in a debounced work queue; `reconcile` reads the placement, plans, and writes the ConfigMap in one
resourceVersion-guarded update. Only the Lease holder runs it (see `webhook.leader`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from kubernetes_asyncio.client import ApiClient

from planner import (
    InputError,
    Placement,
    PlacementReadout,
    PlanResult,
    Topology,
    build_rank_table,
    plan_ranks,
    read_placement,
    render_rank_table,
    render_ranks_env,
    topology_from_hypernodes,
    topology_from_nodes,
    topology_from_tor_configmap,
)
from webhook.kube import (
    CONFIGMAPS,
    HYPERNODES,
    JOBS,
    NODES,
    PODS,
    ConflictError,
    GoneError,
    KubeError,
    KubeRepository,
    ResourceKind,
    parse_time,
)
from webhook.leader import LeaderElector
from webhook.metrics import Metrics
from webhook.rank_configmap import (
    CREATED_BY_ANNOTATION,
    DATA_HASH_ANNOTATION,
    FINGERPRINT_ANNOTATION,
    LAUNCHER_KEY,
    STATE_KEY,
    ConfigMapTooLargeError,
    completed_payload,
    initial_configmap,
    initializing_data,
    job_owner_reference,
    parse_state_record,
    payload_hash,
    rank_table_status,
    state_record,
)
from webhook.settings import (
    RANK_TABLE_WRITER_ANNOTATION,
    RING_LABEL,
    ROUTE_PLAN_ANNOTATION,
    ROUTE_PLAN_ENV,
    AcceleratorProfile,
    Settings,
)

log = logging.getLogger("ringroute.controller")

JOB_NAME_LABEL = "volcano.sh/job-name"
POD_SELECTOR = f"{RING_LABEL},{JOB_NAME_LABEL}"
WATCH_TIMEOUT_S = (240, 360)
"""Server-side watch timeout range; each watch ends and resumes from its resourceVersion."""
BACKOFF_S = (0.2, 30.0)
"""Retry delay after API errors: starts at the first, doubles up to the second."""
MAX_DEBOUNCE_FACTOR = 10
"""A job that keeps changing is still reconciled at least every MAX_DEBOUNCE_FACTOR x debounce."""
VOLCANO_PLUGIN_WRITER = "volcano-plugin"
"""`ringroute.io/rank-table-writer` value of jobs whose table the vendor's Volcano plugin writes."""

Obj = dict[str, Any]


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


def _strip(obj: Obj) -> Obj:
    """Drop what the controller never reads (managedFields; node images) to keep the caches small."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    status = obj.get("status")
    if obj.get("kind") == "Node" and isinstance(status, dict):
        status.pop("images", None)
    return obj


# -- informers ---------------------------------------------------------------------------------------------------

EventHandler = Callable[[str, Obj, Obj | None], None]


@dataclass
class Informer:
    """A list + watch cache of one resource; calls `on_event(type, object, previous)` for every change."""

    repo: KubeRepository
    kind: ResourceKind
    on_event: EventHandler
    namespace: str | None = None
    label_selector: str | None = None
    store: dict[str, Obj] = field(default_factory=dict)
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    generation: int = 0
    """Bumped on every change (callers cache derived data by it)."""
    resource_version: str | None = None
    relists: int = 0

    async def run(self) -> None:
        """List, then watch from the list's resourceVersion forever (cancel to stop)."""
        backoff = BACKOFF_S[0]
        while True:
            try:
                if self.resource_version is None:
                    await self._relist()
                async for event in self.repo.watch_objects(
                    self.kind,
                    self.namespace,
                    resource_version=self.resource_version or "",
                    label_selector=self.label_selector,
                    timeout_s=random.randint(*WATCH_TIMEOUT_S),
                ):
                    self._apply(event["type"], event["object"])
                    backoff = BACKOFF_S[0]
            except GoneError:
                log.info("event=watch-expired resource=%s detail=relisting", self.kind.plural)
                self.resource_version = None
            except KubeError as exc:
                log.warning("event=watch-failed resource=%s error=%s retry_s=%.1f", self.kind.plural, exc, backoff)
                await asyncio.sleep(backoff * random.uniform(0.8, 1.2))
                backoff = min(backoff * 2, BACKOFF_S[1])

    async def _relist(self) -> None:
        items, resource_version = await self.repo.list_objects(
            self.kind, self.namespace, label_selector=self.label_selector
        )
        self.relists += 1
        fresh = {_key(o): _strip(o) for o in items}
        previous, self.store = self.store, fresh
        self.generation += 1
        self.resource_version = resource_version
        for key, gone in previous.items():
            if key not in fresh:
                self.on_event("DELETED", gone, gone)
        for key, obj in fresh.items():
            before = previous.get(key)
            if before is None or _rv(before) != _rv(obj):
                self.on_event("MODIFIED" if before else "ADDED", obj, before)
        self.synced.set()

    def _apply(self, event_type: str, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        if meta.get("resourceVersion"):
            self.resource_version = str(meta["resourceVersion"])
        if event_type == "BOOKMARK":
            return
        obj = _strip(obj)
        obj.setdefault("apiVersion", self.kind.api_version)
        key = _key(obj)
        old = self.store.get(key)
        if event_type == "DELETED":
            self.store.pop(key, None)
        else:
            self.store[key] = obj
        self.generation += 1
        self.on_event(event_type, obj, old)


def _rv(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


# -- work queue --------------------------------------------------------------------------------------------------


class DebouncedQueue:
    """Per-key debounced work queue: a key is handed out once it has been quiet for `debounce_s` (at most
    `max_delay_s` after its first change), never to two workers at once; changes during processing re-run it."""

    def __init__(self, debounce_s: float, max_delay_s: float) -> None:
        self.debounce_s = debounce_s
        self.max_delay_s = max_delay_s
        self._due: dict[str, tuple[float, float]] = {}
        self._processing: set[str] = set()
        self._wake = asyncio.Event()

    def add(self, key: str, delay: float | None = None) -> None:
        """Schedule `key` (after `delay`, default the debounce); a pending key moves to the later trailing time."""
        now = time.monotonic()
        wait = self.debounce_s if delay is None else delay
        due, first = self._due.get(key, (now + wait, now))
        due = now + wait if wait > 0 else now
        if key in self._due:
            due = min(due, first + self.max_delay_s) if wait > 0 else now
        self._due[key] = (due, first)
        self._wake.set()

    def __len__(self) -> int:
        return len(self._due)

    async def get(self) -> str:
        """The next due key that is not being processed (waits)."""
        while True:
            now = time.monotonic()
            ready = [(due, k) for k, (due, _) in self._due.items() if k not in self._processing]
            if ready:
                due, key = min(ready)
                if due <= now:
                    del self._due[key]
                    self._processing.add(key)
                    return key
                timeout: float | None = due - now
            else:
                timeout = None
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=timeout)

    def done(self, key: str) -> None:
        """Mark `key` processed (it runs again if it was added meanwhile)."""
        self._processing.discard(key)
        self._wake.set()


# -- reconcile helpers (pure) ------------------------------------------------------------------------------------


def npu_task_replicas(job: Mapping[str, Any], resource_name: str) -> tuple[int, list[str]]:
    """Expected NPU pods (sum of replicas of tasks whose containers request the resource) and task order."""
    total = 0
    names: list[str] = []
    for task in (job.get("spec") or {}).get("tasks") or []:
        names.append(str(task.get("name", "")))
        containers = ((task.get("template") or {}).get("spec") or {}).get("containers") or []
        for container in containers:
            resources = container.get("resources") or {}
            amount = (resources.get("limits") or {}).get(resource_name) or (resources.get("requests") or {}).get(
                resource_name
            )
            if amount not in (None, 0, "0"):
                total += int(task.get("replicas", 1) or 0)
                break
    return total, names


def rank_table_profile(job: Mapping[str, Any], settings: Settings) -> AcceleratorProfile | None:
    """The profile of a job whose rank-table ConfigMap ringroute writes; None when it writes nothing for it.

    Nothing for a job being deleted, of an unknown label value, without NPU pods, or whose table the vendor's
    Volcano plugin writes (annotation `ringroute.io/rank-table-writer: volcano-plugin`).
    """
    meta = job.get("metadata") or {}
    profile = settings.profile((meta.get("labels") or {}).get(RING_LABEL))
    if profile is None or meta.get("deletionTimestamp"):
        return None
    if (meta.get("annotations") or {}).get(RANK_TABLE_WRITER_ANNOTATION) == VOLCANO_PLUGIN_WRITER:
        return None
    if npu_task_replicas(job, profile.resource_name)[0] == 0:
        return None
    return profile


def wants_route_plan(job: Mapping[str, Any]) -> bool:
    """Route planning is asked for by annotation `ringroute.io/route-plan: "true"` or env ROUTE_PLAN=true."""
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    if str(annotations.get(ROUTE_PLAN_ANNOTATION, "")).lower() == "true":
        return True
    for task in (job.get("spec") or {}).get("tasks") or []:
        for container in ((task.get("template") or {}).get("spec") or {}).get("containers") or []:
            for env in container.get("env") or []:
                if env.get("name") == ROUTE_PLAN_ENV and str(env.get("value", "")).lower() == "true":
                    return True
    return False


def placement_fingerprint(placement: Placement, job_uid: str, job_version: str, route_plan: bool) -> str:
    """Hash of everything a completed table depends on (servers in pod-index order, devices, job identity)."""
    digest = hashlib.sha256(f"{job_uid}\0{job_version}\0{route_plan}\0{placement.master}\0".encode())
    for server in placement.servers:
        digest.update(repr(server).encode())
    return digest.hexdigest()[:32]


def pending_summary(readout: PlacementReadout, expected: int, limit: int = 6) -> str:
    """What keeps the table from completing, for the RankTablePending event."""
    problems = readout.problems
    if not problems:
        return f"waiting for {expected} NPU pods"
    kinds: dict[str, int] = {}
    for problem in problems:
        kinds[problem.kind] = kinds.get(problem.kind, 0) + 1
    counts = ", ".join(f"{kind} x{n}" for kind, n in sorted(kinds.items()))
    shown = "; ".join(p.render() for p in problems[:limit])
    more = f"; and {len(problems) - limit} more" if len(problems) > limit else ""
    return f"{expected} NPU pods expected; not ready ({counts}): {shown}{more}"


def fixed_ranks_from_record(placement: Placement, record_servers: Sequence[Sequence[str]]) -> dict[int, int]:
    """Survivors of a partial replacement: servers whose (pod, node) held a rank in the last completed table."""
    previous = {(s[0], s[1]): rank for rank, s in enumerate(record_servers) if len(s) == 2}
    fixed: dict[int, int] = {}
    n = len(placement.servers)
    for index, server in enumerate(placement.servers):
        rank = previous.get((server.pod_name, server.node_name))
        if rank is None or rank >= n:
            continue
        if (rank == 0) != (index == placement.master):
            continue  # rank 0 belongs to task index 0, always
        fixed[index] = rank
    return fixed


def pod_index_order(placement: Placement) -> tuple[int, ...]:
    """Ranks in pod-index order with the master (task index 0) first."""
    rest = [i for i in range(len(placement.servers)) if i != placement.master]
    return (placement.master, *rest)


@dataclass(frozen=True, slots=True)
class Planned:
    """A completed table ready to write."""

    payload_data: dict[str, str]
    payload_binary: dict[str, str]
    payload_sha: str
    message: str
    routed: bool
    planning_ms: float
    route_problem: str | None = None


def plan_table(
    settings: Settings,
    profile: AcceleratorProfile,
    placement: Placement,
    topology: Callable[[], Topology],
    *,
    job_uid: str,
    job_version: str,
    route_plan: bool,
    record_servers: Sequence[Sequence[str]],
    record_valid: bool,
) -> Planned:
    """Plan (or take pod-index order) and render the completed ConfigMap data. Runs in a worker thread.

    Raises ConfigMapTooLargeError, or InputError when the table cannot be built.
    """
    started = time.perf_counter()
    result: PlanResult | None = None
    route_problem: str | None = None
    fixed = fixed_ranks_from_record(placement, record_servers) if record_valid else {}
    if route_plan and len(placement.servers) < settings.policy.min_route_plan_nodes:
        route_problem = (
            f"route planning needs at least {settings.policy.min_route_plan_nodes} NPU pods "
            f"(got {len(placement.servers)}); the table uses pod-index order"
        )
    elif route_plan:
        try:
            planning = settings.planning
            result = plan_ranks(
                placement,
                topology(),
                planning.pattern,
                planning.routing,
                qps=planning.qps_per_connection,
                rng=planning.seed,
                time_limit=planning.time_limit_s,
                fixed_ranks=fixed or None,
            )
        except InputError as exc:
            route_problem = (
                f"route planning failed: {exc}; the table uses pod-index order. Fix: label every NPU node "
                "with its leaf switch (e.g. volcano.sh/tor) or install HyperNodes"
            )
    if result is not None:
        order = result.order
    elif fixed and len(fixed) < len(placement.servers):
        order = _fill_order(placement, fixed)
    else:
        order = pod_index_order(placement)
    table = render_rank_table(build_rank_table(placement, order, profile.rank_table_version))
    ranks_env = render_ranks_env(placement, order)
    state = state_record(
        job_uid, job_version, [(placement.servers[i].pod_name, placement.servers[i].node_name) for i in order]
    )
    report = json.dumps(result.to_report(placement), separators=(",", ":")) if result is not None else None
    routes = (
        json.dumps(result.routes.to_json(), separators=(",", ":"))
        if result is not None and result.routes is not None
        else None
    )
    payload = completed_payload(
        settings, profile, rank_table=table, ranks_env=ranks_env, state=state, plan_report=report, routes=routes
    )
    planning_ms = (time.perf_counter() - started) * 1000.0
    return Planned(
        payload.data,
        payload.binary_data,
        payload.sha256,
        _completed_message(placement, result, planning_ms, route_plan, route_problem),
        result is not None,
        planning_ms,
        route_problem,
    )


def _fill_order(placement: Placement, fixed: Mapping[int, int]) -> tuple[int, ...]:
    """Survivors keep their ranks; the other servers take the free ranks in pod-index order."""
    n = len(placement.servers)
    order: list[int | None] = [None] * n
    for index, rank in fixed.items():
        order[rank] = index
    order[0] = placement.master
    placed = {i for i in order if i is not None}
    rest = iter(i for i in range(n) if i not in placed)
    return tuple(i if i is not None else next(rest) for i in order)


def _completed_message(
    placement: Placement, result: PlanResult | None, planning_ms: float, route_plan: bool, problem: str | None
) -> str:
    servers = len(placement.servers)
    devices = servers * placement.devices_per_server
    head = f"{servers} servers, {devices} devices"
    if result is None:
        why = "route planning not requested" if not route_plan else "route planning skipped"
        return f"{head}; ranks in pod-index order ({why}); {planning_ms:.0f} ms"
    before, after = result.before, result.after
    cross_before = before.cross_edges[0] if before.cross_edges else 0
    cross_after = after.cross_edges[0] if after.cross_edges else 0
    bound = after.cross_edge_bounds[0] if after.cross_edge_bounds else 0
    gains = [
        f"predicted {label} bus bandwidth {getattr(before, field):.2f} -> {getattr(after, field):.2f} of line rate"
        for label, field in (("ring", "ring_busbw"), ("halving-doubling", "hd_busbw"))
        # The "before" order is only simulated for the collectives the plan was made for.
        if math.isfinite(getattr(before, field)) and math.isfinite(getattr(after, field))
    ]
    return (
        "; ".join([f"{head}; cross-leaf ring edges {cross_before} -> {cross_after} (bound {bound})", *gains])
        + f" ({result.routing}); planning {planning_ms:.0f} ms"
    )


# -- the controller ----------------------------------------------------------------------------------------------


@dataclass
class _JobMemory:
    pending_message: str = ""
    pending_at: float = -1e9
    failed_message: str = ""
    record_servers: list[list[str]] = field(default_factory=list)
    record_identity: tuple[str, str] = ("", "")
    failures: int = 0


class Controller:
    """Caches, work queue and reconcile of the rank-table controller (runs while this replica leads)."""

    def __init__(
        self,
        settings: Settings,
        repo: KubeRepository,
        metrics: Metrics,
        *,
        identity: str = "ringroute",
        is_leader: Callable[[], bool] = lambda: True,
        orphan_grace_s: float | None = None,
        pending_event_interval_s: float | None = None,
        workers: int = 2,
    ) -> None:
        self.settings = settings
        self.repo = repo
        self.metrics = metrics
        self.identity = identity
        self.is_leader = is_leader
        # None: the settings decide (tests pass short values).
        self.orphan_grace_s = settings.controller.orphan_grace_s if orphan_grace_s is None else orphan_grace_s
        self.pending_event_interval_s = (
            settings.controller.pending_event_interval_s
            if pending_event_interval_s is None
            else pending_event_interval_s
        )
        self.workers = workers
        namespace = settings.controller.namespace
        self.queue = DebouncedQueue(
            settings.controller.debounce_s, settings.controller.debounce_s * MAX_DEBOUNCE_FACTOR
        )
        # ConfigMap creation has its own queue, without debounce, so that it never waits behind planning.
        self.creations = DebouncedQueue(0.0, 0.0)
        self._create_failures: dict[str, int] = {}
        self.jobs = Informer(repo, JOBS, self._on_job, namespace, RING_LABEL)
        self.pods = Informer(repo, PODS, self._on_pod, namespace, POD_SELECTOR)
        self.configmaps = Informer(repo, CONFIGMAPS, self._on_configmap, namespace, RING_LABEL)
        self.nodes = Informer(repo, NODES, self._on_topology)
        self.hypernodes: Informer | None = None
        self._pods_by_job: dict[str, set[str]] = {}
        self._memory: dict[str, _JobMemory] = {}
        self._topology_cache: tuple[tuple[int, int, str], Topology] | None = None
        self.reconciles = 0
        self.completed_at: dict[str, float] = {}
        """Monotonic time of the last completed write per job (benchmarks read it)."""

    # -- event handlers --------------------------------------------------------------------------------------

    def _on_job(self, event_type: str, job: Obj, old: Obj | None) -> None:
        key = _key(job)
        if event_type == "DELETED":
            self._memory.pop(key, None)
            self._create_failures.pop(key, None)
            return
        self.queue.add(key)
        configmap_key = self._configmap_key(job)
        if configmap_key is not None and configmap_key not in self.configmaps.store:
            self.creations.add(key, 0.0)

    def _on_pod(self, event_type: str, pod: Obj, old: Obj | None) -> None:
        meta = pod.get("metadata") or {}
        job = (meta.get("labels") or {}).get(JOB_NAME_LABEL)
        if not job:
            return
        job_key = f"{meta.get('namespace')}/{job}"
        members = self._pods_by_job.setdefault(job_key, set())
        if event_type == "DELETED":
            members.discard(_key(pod))
            if not members:
                self._pods_by_job.pop(job_key, None)
        else:
            members.add(_key(pod))
        # A pod lost means the table must go back to "initializing" at once: no debounce.
        lost = event_type == "DELETED" or (
            meta.get("deletionTimestamp") and not (old or {}).get("metadata", {}).get("deletionTimestamp")
        )
        self.queue.add(job_key, 0.0 if lost else None)

    def _on_configmap(self, event_type: str, configmap: Obj, old: Obj | None) -> None:
        meta = configmap.get("metadata") or {}
        label = (meta.get("labels") or {}).get(RING_LABEL)
        profile = self.settings.profile(label)
        name = str(meta.get("name", ""))
        if profile is None or not name.startswith(profile.configmap_prefix):
            return
        job_key = f"{meta.get('namespace')}/{name[len(profile.configmap_prefix) :]}"
        if job_key in self.jobs.store:
            self.queue.add(job_key)

    def _on_topology(self, event_type: str, obj: Obj, old: Obj | None) -> None:
        # Jobs still waiting may be waiting for topology labels; completed tables are not re-planned.
        for job_key in self.jobs.store:
            if job_key in self._memory and self._memory[job_key].failed_message:
                self.queue.add(job_key)

    # -- run -------------------------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Start informers, wait for their first list, then reconcile until cancelled (or `stop` is set)."""
        tasks: list[asyncio.Task[None]] = []
        try:
            informers = [self.nodes, self.jobs, self.configmaps, self.pods]
            topology = self.settings.topology
            if topology.use_hypernodes:
                try:
                    if await self.repo.has_resource(HYPERNODES):
                        self.hypernodes = Informer(self.repo, HYPERNODES, self._on_topology)
                        informers.insert(0, self.hypernodes)
                except KubeError as exc:
                    log.warning("event=hypernode-discovery-failed error=%s detail=using node labels", exc)
            for informer in informers:
                tasks.append(asyncio.create_task(informer.run(), name=f"informer-{informer.kind.plural}"))
            await asyncio.gather(*(i.synced.wait() for i in informers))
            log.info(
                "event=caches-synced jobs=%d pods=%d nodes=%d",
                len(self.jobs.store),
                len(self.pods.store),
                len(self.nodes.store),
            )
            for job_key in self.jobs.store:
                self.queue.add(job_key, 0.0)
            for n in range(self.settings.controller.configmap_create_workers):
                tasks.append(asyncio.create_task(self._create_worker(), name=f"create-{n}"))
            for n in range(self.workers):
                tasks.append(asyncio.create_task(self._worker(), name=f"reconcile-{n}"))
            tasks.append(asyncio.create_task(self._sweep_orphans_forever(), name="orphans"))
            if stop is None:
                await asyncio.Event().wait()
            else:
                await stop.wait()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            started = time.perf_counter()
            try:
                retry = await self.reconcile(key)
            except asyncio.CancelledError:
                raise
            except ConflictError as exc:
                log.info("event=reconcile-conflict job=%s detail=%s", key, exc)
                retry = 0.0
            except KubeError as exc:
                retry = self._backoff(key)
                log.warning("event=reconcile-failed job=%s error=%s retry_s=%.2f", key, exc, retry)
            except Exception:
                retry = self._backoff(key)
                log.exception("event=reconcile-crashed job=%s retry_s=%.2f", key, retry)
            else:
                if key in self._memory:
                    self._memory[key].failures = 0
            finally:
                self.queue.done(key)
                self.metrics.reconcile_latency.observe(time.perf_counter() - started)
            if retry is not None:
                self.queue.add(key, retry)

    def _backoff(self, key: str) -> float:
        memory = self._memory.setdefault(key, _JobMemory())
        memory.failures += 1
        return float(min(BACKOFF_S[0] * 2.0 ** (memory.failures - 1), BACKOFF_S[1]))

    # -- ConfigMap creation ----------------------------------------------------------------------------------

    def _configmap_key(self, job: Mapping[str, Any]) -> str | None:
        """Cache key of the job's rank-table ConfigMap (None when ringroute writes none for this job)."""
        profile = rank_table_profile(job, self.settings)
        if profile is None:
            return None
        meta = job.get("metadata") or {}
        return f"{meta.get('namespace')}/{profile.configmap_name(str(meta.get('name')))}"

    async def _create_worker(self) -> None:
        while True:
            key = await self.creations.get()
            retry: float | None = None
            try:
                retry = await self.create_configmap(key)
            except asyncio.CancelledError:
                raise
            except Exception:
                retry = self._create_backoff(key)
                log.exception("event=configmap-create-crashed job=%s retry_s=%.2f", key, retry)
            finally:
                self.creations.done(key)
            if retry is not None:
                self.creations.add(key, retry)

    def _create_backoff(self, key: str) -> float:
        failures = self._create_failures[key] = self._create_failures.get(key, 0) + 1
        return float(min(BACKOFF_S[0] * 2.0 ** (failures - 1), BACKOFF_S[1]))

    async def create_configmap(self, key: str) -> float | None:
        """Create the job's "initializing" ConfigMap, owned by the Job, if it has none; returns a retry delay.

        An existing ConfigMap is never touched here: a 409 hands the job to `reconcile`, which adopts it or
        leaves it. Pods do not matter: they wait on the ConfigMap volume until it exists.
        """
        job = self.jobs.store.get(key)
        if job is None or not self.is_leader():
            return None
        configmap_key = self._configmap_key(job)
        if configmap_key is None or configmap_key in self.configmaps.store:
            return None
        profile = rank_table_profile(job, self.settings)
        assert profile is not None
        body = initial_configmap(job, profile, self.settings)
        try:
            written = await self.repo.create_object(CONFIGMAPS, body)
        except ConflictError:
            self.metrics.configmap_creates.labels("exists").inc()
            self.queue.add(key, 0.0)
            return None
        except KubeError as exc:
            self.metrics.configmap_creates.labels("error").inc()
            retry = self._create_backoff(key)
            log.warning("event=configmap-create-failed job=%s error=%s retry_s=%.2f", key, exc, retry)
            return retry
        self._create_failures.pop(key, None)
        self.configmaps.store[_key(written)] = written
        self.metrics.configmap_creates.labels("created").inc()
        log.info("event=configmap-created job=%s configmap=%s", key, _key(written))
        return None

    # -- reconcile -------------------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> float | None:
        """Bring the job's ConfigMap in line with its pods; returns a retry delay or None."""
        if not self.is_leader():
            return None
        self.reconciles += 1
        job = self.jobs.store.get(key)
        if job is None:
            return None
        meta = job.get("metadata") or {}
        profile = rank_table_profile(job, self.settings)
        if profile is None:
            return None
        expected, task_order = npu_task_replicas(job, profile.resource_name)
        namespace, name = str(meta.get("namespace")), str(meta.get("name"))
        uid = str(meta.get("uid", ""))
        version_value = (job.get("status") or {}).get("version")
        job_version = str(version_value) if version_value is not None else None
        memory = self._memory.setdefault(key, _JobMemory())
        cm_key = f"{namespace}/{profile.configmap_name(name)}"
        configmap = self.configmaps.store.get(cm_key)

        pods = [self.pods.store[k] for k in sorted(self._pods_by_job.get(key, ())) if k in self.pods.store]
        readout = read_placement(
            pods,
            annotation_keys=profile.device_annotation_keys,
            resource_name=profile.resource_name,
            expected_pods=expected,
            job_name=name,
            job_uid=uid or None,
            job_version=job_version,
            task_order=task_order,
        )
        status = rank_table_status(configmap, profile) if configmap is not None else None
        if not readout.ready or readout.placement is None:
            await self._pending(
                job,
                profile=profile,
                configmap=configmap,
                readout=readout,
                expected=expected,
                status=status,
                memory=memory,
            )
            return None

        placement = readout.placement
        route_plan = wants_route_plan(job)
        version_text = job_version or ""
        fingerprint = placement_fingerprint(placement, uid, version_text, route_plan)
        owner = job_owner_reference(job)
        if configmap is not None:
            annotations = (configmap.get("metadata") or {}).get("annotations") or {}
            current_sha = payload_hash(configmap.get("data"), configmap.get("binaryData"))
            if (
                status == "completed"
                and annotations.get(FINGERPRINT_ANNOTATION) == fingerprint
                and annotations.get(DATA_HASH_ANNOTATION) == current_sha
                and _owned(configmap, owner)
            ):
                return None
        record_servers, record_valid = self._record(configmap, memory, uid, version_text)
        topology = await self._topology_now()
        try:
            planned = await asyncio.to_thread(
                plan_table,
                self.settings,
                profile,
                placement,
                topology,
                job_uid=uid,
                job_version=version_text,
                route_plan=route_plan,
                record_servers=record_servers,
                record_valid=record_valid,
            )
        except (ConfigMapTooLargeError, InputError) as exc:
            self.metrics.plans.labels("failed").inc()
            written = await self._reset_to_initializing(job, profile, configmap, status)
            message = str(exc)
            if message != memory.failed_message:
                memory.failed_message = message
                await self._event(job, written, "RankTableFailed", message, "Warning")
            return None
        if planned.route_problem and planned.route_problem != memory.failed_message:
            memory.failed_message = planned.route_problem
            await self._event(job, configmap, "RankTableFailed", planned.route_problem, "Warning")
        elif not planned.route_problem:
            memory.failed_message = ""
        self.metrics.plan_latency.observe(planned.planning_ms / 1000.0)

        annotations_update = {FINGERPRINT_ANNOTATION: fingerprint, DATA_HASH_ANNOTATION: planned.payload_sha}
        if not self.is_leader():
            return None  # lost the lease while planning: write nothing
        written = await self._write(
            job,
            profile=profile,
            configmap=configmap,
            data=planned.payload_data,
            binary_data=planned.payload_binary,
            annotations=annotations_update,
        )
        memory.record_servers = json.loads(planned.payload_data[STATE_KEY])["servers"]
        memory.record_identity = (uid, version_text)
        memory.pending_message = ""
        self.metrics.plans.labels("routed" if planned.routed else "pod-index").inc()
        self.completed_at[key] = time.monotonic()
        log.info(
            "event=rank-table-completed job=%s servers=%d routed=%s planning_ms=%.1f",
            key,
            len(placement.servers),
            planned.routed,
            planned.planning_ms,
        )
        await self._event(job, written, "RankTableCompleted", planned.message, "Normal")
        return None

    def _record(
        self, configmap: Obj | None, memory: _JobMemory, uid: str, version: str
    ) -> tuple[list[list[str]], bool]:
        """Servers by rank of the last completed table of this job UID and version (memory first, then the CM)."""
        if memory.record_servers and memory.record_identity == (uid, version):
            return memory.record_servers, True
        if configmap is not None:
            record = parse_state_record((configmap.get("data") or {}).get(STATE_KEY))
            if record is not None and (record["jobUid"], record["jobVersion"]) == (uid, version):
                return record["servers"], True
        return [], False

    async def _topology_now(self) -> Callable[[], Topology]:
        """A thunk building the topology from the caches (memoised by cache generation), run in the planner thread.

        Sources, first match: HyperNodes (CRD installed, objects present), the configured MindCluster
        basic-tor-node-cm ConfigMap, node labels.
        """
        hyper = self.hypernodes
        settings = self.settings.topology
        tor: Obj | None = None
        if settings.tor_configmap and not (hyper is not None and hyper.store):
            namespace, _, name = settings.tor_configmap.partition("/")
            tor = await self.repo.get_configmap(namespace, name)
        generation = (self.nodes.generation, hyper.generation if hyper is not None else -1, _rv(tor or {}))
        if self._topology_cache is not None and self._topology_cache[0] == generation:
            cached = self._topology_cache[1]
            return lambda: cached
        nodes = list(self.nodes.store.values())
        hypernodes = list(hyper.store.values()) if hyper is not None else []

        def build() -> Topology:
            if hypernodes:
                topology = topology_from_hypernodes(hypernodes, nodes, settings.fabric)
            elif tor is not None:
                topology = topology_from_tor_configmap(tor, settings.fabric, nodes=nodes)
            else:
                topology = topology_from_nodes(nodes, settings.label_keys, settings.fabric, skip_unlabelled=True)
            self._topology_cache = (generation, topology)
            return topology

        return build

    async def _pending(
        self,
        job: Obj,
        *,
        profile: AcceleratorProfile,
        configmap: Obj | None,
        readout: PlacementReadout,
        expected: int,
        status: str | None,
        memory: _JobMemory,
    ) -> None:
        written = await self._reset_to_initializing(job, profile, configmap, status)
        message = pending_summary(readout, expected)
        now = time.monotonic()
        if message != memory.pending_message and now - memory.pending_at >= self.pending_event_interval_s:
            memory.pending_message = message
            memory.pending_at = now
            await self._event(job, written, "RankTablePending", message, "Normal")

    async def _reset_to_initializing(
        self, job: Obj, profile: AcceleratorProfile, configmap: Obj | None, status: str | None
    ) -> Obj | None:
        """Make sure the ConfigMap exists, is owned by the job, has the launcher, and says "initializing"."""
        data = initializing_data(self.settings, profile)
        if configmap is not None:
            current = configmap.get("data") or {}
            if STATE_KEY in current:
                data[STATE_KEY] = current[STATE_KEY]  # keep the survivors' ranks for a partial replacement
        needs_write = (
            configmap is None
            or status != "initializing"
            or (LAUNCHER_KEY not in (configmap.get("data") or {}))
            or not _owned(configmap, job_owner_reference(job))
        )
        if not needs_write or not self.is_leader():
            return configmap
        if status == "initializing" and configmap is not None:
            # Keep a hand-made initializing table as the user wrote it; add only what is missing.
            data[profile.rank_table_file] = (configmap.get("data") or {})[profile.rank_table_file]
        written = await self._write(
            job,
            profile=profile,
            configmap=configmap,
            data=data,
            binary_data={},
            annotations={FINGERPRINT_ANNOTATION: None, DATA_HASH_ANNOTATION: payload_hash(data, {})},
        )
        if status == "completed":
            self.metrics.plans.labels("reset").inc()
            log.info("event=rank-table-reset job=%s detail=pods changed", _key(job))
        return written

    async def _write(
        self,
        job: Obj,
        *,
        profile: AcceleratorProfile,
        configmap: Obj | None,
        data: dict[str, str],
        binary_data: dict[str, str],
        annotations: Mapping[str, str | None],
    ) -> Obj:
        """Create the ConfigMap, or replace its data in one update guarded by the resourceVersion read."""
        owner = job_owner_reference(job)
        if configmap is None:
            body = initial_configmap(job, profile, self.settings)
        else:
            body = {k: v for k, v in configmap.items() if k not in ("data", "binaryData")}
            body["metadata"] = dict(configmap.get("metadata") or {})
        meta = body["metadata"]
        merged = dict(meta.get("annotations") or {})
        for k, v in annotations.items():
            if v is None:
                merged.pop(k, None)
            else:
                merged[k] = v
        meta["annotations"] = merged
        if owner is not None and not _owned(body, owner):
            # A reference to an earlier Job of the same name goes; other owners stay.
            others = [
                o
                for o in meta.get("ownerReferences") or []
                if not (o.get("kind") == owner["kind"] and o.get("name") == owner["name"])
            ]
            if any(o.get("controller") for o in others):
                # The API server allows one controller reference; the Job still owns it for garbage collection.
                owner = {**owner, "controller": False}
            meta["ownerReferences"] = [*others, owner]
        body["data"] = data
        if binary_data:
            body["binaryData"] = binary_data
        if not self.is_leader():
            raise _NotLeaderError()
        if configmap is None:
            try:
                written = await self.repo.create_object(CONFIGMAPS, body)
            except ConflictError:
                # Created meanwhile (the creation queue, an older release's webhook, a user): reconcile against it.
                fresh = await self.repo.get_configmap(meta["namespace"], meta["name"])
                if fresh is not None:
                    self.configmaps.store[_key(fresh)] = fresh
                raise
        else:
            try:
                written = await self.repo.replace_object(CONFIGMAPS, body)
            except ConflictError:
                fresh = await self.repo.get_configmap(meta["namespace"], meta["name"])
                if fresh is None:
                    self.configmaps.store.pop(_key(configmap), None)
                else:
                    self.configmaps.store[_key(fresh)] = fresh
                raise
        self.configmaps.store[_key(written)] = written
        return written

    async def _event(
        self, job: Obj, configmap: Obj | None, reason: str, message: str, event_type: Literal["Normal", "Warning"]
    ) -> None:
        if not self.is_leader():
            return
        await self.repo.emit_event(job, reason=reason, message=message, event_type=event_type, instance=self.identity)
        if configmap is not None:
            await self.repo.emit_event(
                configmap, reason=reason, message=message, event_type=event_type, instance=self.identity
            )

    # -- orphans ---------------------------------------------------------------------------------------------

    async def _sweep_orphans_forever(self) -> None:
        interval = min(max(self.orphan_grace_s / 4, 0.2), 60.0)
        while True:
            await asyncio.sleep(interval)
            try:
                await self.sweep_orphans()
            except KubeError as exc:
                log.warning("event=orphan-sweep-failed error=%s", exc)

    async def sweep_orphans(self) -> int:
        """Delete ConfigMaps ringroute created for jobs that never got created (older than the grace period)."""
        deleted = 0
        now = time.time()
        for key, configmap in list(self.configmaps.store.items()):
            meta = configmap.get("metadata") or {}
            profile = self.settings.profile((meta.get("labels") or {}).get(RING_LABEL))
            name = str(meta.get("name", ""))
            if profile is None or not name.startswith(profile.configmap_prefix):
                continue
            if (meta.get("annotations") or {}).get(CREATED_BY_ANNOTATION) != "ringroute":
                continue  # never delete what a user made
            if meta.get("ownerReferences"):
                continue  # the garbage collector handles owned ones
            job_key = f"{meta.get('namespace')}/{name[len(profile.configmap_prefix) :]}"
            if job_key in self.jobs.store:
                continue
            created = parse_time(meta.get("creationTimestamp"))
            if created is None or now - created.timestamp() < self.orphan_grace_s:
                continue
            if not self.is_leader():
                return deleted
            if await self.repo.delete_object(
                CONFIGMAPS,
                meta.get("namespace"),
                name,
                uid=meta.get("uid"),
                resource_version=meta.get("resourceVersion"),
            ):
                deleted += 1
                log.info("event=orphan-deleted configmap=%s detail=its job was never created", key)
            self.configmaps.store.pop(key, None)
        return deleted


class _NotLeaderError(KubeError):
    def __init__(self) -> None:
        super().__init__("write", 0, "not the leader any more; nothing written")


def _owned(configmap: Mapping[str, Any], owner: Mapping[str, Any] | None) -> bool:
    if owner is None:
        return True
    refs = (configmap.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("uid") == owner["uid"] for r in refs)


async def run_controller(
    settings: Settings,
    api: ApiClient,
    metrics: Metrics,
    *,
    identity: str,
    stop: asyncio.Event,
    orphan_grace_s: float | None = None,
    pending_event_interval_s: float | None = None,
) -> None:
    """Campaign for the controller Lease and run the controller while leading; returns after `stop` is set,
    with the lease released (`orphan_grace_s`/`pending_event_interval_s` default to `settings.controller`)."""
    repo = KubeRepository(api, metrics)
    controller_settings = settings.controller
    elector = LeaderElector(
        repo,
        metrics,
        name=controller_settings.lease_name,
        namespace=controller_settings.lease_namespace,
        identity=identity,
        lease_duration_s=controller_settings.lease_duration_s,
        renew_deadline_s=controller_settings.renew_deadline_s,
        retry_period_s=controller_settings.retry_period_s,
    )

    async def lead() -> None:
        controller = Controller(
            settings,
            repo,
            metrics,
            identity=identity,
            is_leader=elector.is_leader,
            orphan_grace_s=orphan_grace_s,
            pending_event_interval_s=pending_event_interval_s,
        )
        await controller.run()

    await elector.run(lead, stop)


__all__ = [
    "VOLCANO_PLUGIN_WRITER",
    "Controller",
    "DebouncedQueue",
    "Informer",
    "fixed_ranks_from_record",
    "npu_task_replicas",
    "pending_summary",
    "placement_fingerprint",
    "plan_table",
    "rank_table_profile",
    "run_controller",
    "wants_route_plan",
]
