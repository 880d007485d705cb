"""The rank-table controller: from placed, annotated pods to a completed (and routed) `jobstart_hccl.json`.

Informers (`webhook.kube.informer`) keep caches of labelled Volcano Jobs, their pods, the rank-table ConfigMaps,
Nodes and (when the CRD exists) HyperNodes. A Job without its ConfigMap gets one at once, owned by the Job, from a
queue of its own (`ConfigMapKeeper.create`). Changes enqueue the job in a debounced work queue; `reconcile` reads the
placement (`webhook.controller.job_placement`), plans (`webhook.controller.table_planning`), and writes the ConfigMap
in one resourceVersion-guarded update. Only the Lease holder runs it (`webhook.controller.run`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from planner import InputError, Placement, PlacementReadout, Topology
from webhook.common.jobfacts import job_facts
from webhook.common.metrics import Metrics
from webhook.common.names import (
    DATA_HASH_ANNOTATION,
    FINGERPRINT_ANNOTATION,
    JOB_NAME_LABEL,
    LAUNCHER_KEY,
    RING_LABEL,
)
from webhook.common.rank_configmap import (
    STATE_KEY,
    ConfigMapTooLargeError,
    configmap_update,
    initializing_data,
    job_owner_reference,
    owned_by,
    parse_state_record,
    payload_hash,
    rank_table_status,
)
from webhook.common.settings import AcceleratorProfile, Settings
from webhook.controller.completed_table import Planned
from webhook.controller.configmap_jobs import configmap_job_key
from webhook.controller.configmaps import ConfigMapKeeper
from webhook.controller.graded_plan import PlanLevel
from webhook.controller.job_placement import (
    needs_a_fix,
    pending_summary,
    placement_fingerprint,
    read_job_placement,
    topology_wait,
)
from webhook.controller.pod_updates import PodUpdater, table_pods, table_version
from webhook.controller.table_planning import MAX_REPLANS, TablePlanning
from webhook.controller.topology_cache import TopologyCache
from webhook.controller.watches import namespaced_informer
from webhook.kube.client import (
    CONFIGMAPS,
    HYPERNODES,
    JOBS,
    NODES,
    PODS,
    ConflictError,
    KubeError,
    KubeRepository,
)
from webhook.kube.events import EventRecorder, EventType
from webhook.kube.informer import BACKOFF_S, Informer, Obj, object_key
from webhook.kube.workqueue import DebouncedQueue

log = logging.getLogger("ringroute.controller")

POD_SELECTOR = f"{RING_LABEL},{JOB_NAME_LABEL}"
MAX_DEBOUNCE_FACTOR = 10
"""A job that keeps changing is still reconciled at least every MAX_DEBOUNCE_FACTOR x debounce."""
CRASH_RETRIES = 4
"""A reconcile that fails unexpectedly is retried this many times with backoff, then only on the next change of
the job, its pods or its ConfigMap: the same input would fail the same way."""


# -- the controller ----------------------------------------------------------------------------------------------


@dataclass
class _JobMemory:
    pending_message: str = ""
    pending_at: float = -1e9
    failed_message: str = ""
    record_servers: list[list[str]] = field(default_factory=list)
    record_identity: tuple[str, str] = ("", "")
    failures: int = 0
    given_up: tuple[str, PlanLevel, tuple[str, ...]] = ("", "as-requested", ())
    """(placement fingerprint, level to start at, reasons): plan levels stopped at the budget for these pods, not
    run again when the same placement is planned again (after a write conflict, or a restart of the lease)."""


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
        self.events = EventRecorder(repo, instance=identity)
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
        namespaces = settings.controller.namespaces
        self.queue = DebouncedQueue(
            settings.controller.debounce_s, settings.controller.debounce_s * MAX_DEBOUNCE_FACTOR
        )
        self.jobs = namespaced_informer(repo, JOBS, self._on_job, namespaces, RING_LABEL)
        self.pods = namespaced_informer(repo, PODS, self._on_pod, namespaces, POD_SELECTOR)
        self.configmaps = namespaced_informer(repo, CONFIGMAPS, self._on_configmap, namespaces, RING_LABEL)
        self.nodes = Informer(repo, NODES, self._on_topology)
        self.hypernodes: Informer | None = None
        self.keeper = ConfigMapKeeper(
            settings,
            repo,
            metrics,
            jobs=self.jobs,
            configmaps=self.configmaps,
            reconciles=self.queue,
            is_leader=is_leader,
            orphan_grace_s=self.orphan_grace_s,
        )
        self.pod_updates = PodUpdater(
            repo, metrics, settings.controller, is_leader=is_leader, report=self._report_pod_updates
        )
        """Annotates the pods of each written table so kubelet rewrites their table file at once."""
        self._pods_by_job: dict[str, set[str]] = {}
        self._memory: dict[str, _JobMemory] = {}
        self.topology = TopologyCache(settings.topology, repo, self.nodes)
        self.tables = TablePlanning(
            settings,
            metrics,
            running=lambda: (list(self.configmaps.store.values()), list(self.jobs.store)),
        )
        """Plans tables within the budget around the fabric's other jobs, and commits them against the ledger."""

    # -- event handlers --------------------------------------------------------------------------------------

    def _on_job(self, event_type: str, job: Obj, _old: Obj | None) -> None:
        key = object_key(job)
        if event_type == "DELETED":
            self._memory.pop(key, None)
            self.keeper.job_deleted(key)
            self.pod_updates.forget(key)
            self.tables.ledger.changed(key, None)  # its load leaves the fabric at once, before its ConfigMap goes
            return
        self.queue.add(key)
        self.keeper.job_seen(key, job)

    def _on_pod(self, event_type: str, pod: Obj, old: Obj | None) -> None:
        meta = pod.get("metadata") or {}
        job = (meta.get("labels") or {}).get(JOB_NAME_LABEL)
        if not job:
            return
        job_key = f"{meta.get('namespace')}/{job}"
        members = self._pods_by_job.setdefault(job_key, set())
        if event_type == "DELETED":
            members.discard(object_key(pod))
            if not members:
                self._pods_by_job.pop(job_key, None)
        else:
            members.add(object_key(pod))
        # A pod lost means the table must go back to "initializing" at once: no debounce.
        lost = event_type == "DELETED" or (
            meta.get("deletionTimestamp") and not (old or {}).get("metadata", {}).get("deletionTimestamp")
        )
        self.queue.add(job_key, 0.0 if lost else None)

    def _on_configmap(self, event_type: str, configmap: Obj, _old: Obj | None) -> None:
        job_key = configmap_job_key(configmap, self.settings)
        if job_key is None:
            return
        known = job_key in self.jobs.store
        self.tables.ledger.changed(job_key, configmap if known and event_type != "DELETED" else None)
        if known:
            self.queue.add(job_key)

    def _on_topology(self, _event_type: str, _obj: Obj, _old: Obj | None) -> None:
        # Jobs still waiting may be waiting for topology labels; completed tables are not re-planned.
        for job_key in self.jobs.store:
            if job_key in self._memory and self._memory[job_key].failed_message:
                self.queue.add(job_key)

    # -- run -------------------------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Start informers, wait for their first list, then reconcile until cancelled (or `stop` is set)."""
        tasks: list[asyncio.Task[None]] = []
        try:
            # The planning worker's interpreter starts (and imports numpy) while the caches fill.
            tasks.append(asyncio.create_task(asyncio.to_thread(self.tables.start), name="planning-process"))
            informers = [self.nodes, self.jobs, self.configmaps, self.pods]
            topology = self.settings.topology
            if topology.use_hypernodes:
                try:
                    if await self.repo.has_resource(HYPERNODES):
                        self.hypernodes = Informer(self.repo, HYPERNODES, self._on_topology)
                        informers.insert(0, self.hypernodes)
                except KubeError as exc:
                    log.warning("event=hypernode_discovery_failed error=%s detail=using node labels", exc)
            for informer in informers:
                tasks.append(asyncio.create_task(informer.run(), name=f"informer-{informer.kind.plural}"))
            await asyncio.gather(*(i.synced.wait() for i in informers))
            log.info(
                "event=caches_synced jobs=%d pods=%d nodes=%d",
                len(self.jobs.store),
                len(self.pods.store),
                len(self.nodes.store),
            )
            await self._rebuild_ledger()
            for job_key in self.jobs.store:
                self.queue.add(job_key, 0.0)
            tasks.append(asyncio.create_task(self.tables.ledger.follow_changes(), name="fabric-ledger"))
            for n in range(self.settings.controller.configmap_create_workers):
                tasks.append(asyncio.create_task(self.keeper.run_creations(), name=f"create-{n}"))
            for n in range(self.workers):
                tasks.append(asyncio.create_task(self._worker(), name=f"reconcile-{n}"))
            tasks.append(asyncio.create_task(self.keeper.sweep_forever(), name="orphans"))
            if stop is None:
                await asyncio.Event().wait()
            else:
                await stop.wait()
        finally:
            self.tables.close()
            tasks += self.pod_updates.cancel()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _rebuild_ledger(self) -> None:
        """The fabric ledger from every completed rank-table ConfigMap in the caches, before any plan is made."""
        if self.settings.planning.routing == "pinned":  # only pinned routes are planned around other jobs
            await self.tables.rebuild_ledger(await self._topology_now())

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            started = time.perf_counter()
            try:
                retry = await self.reconcile(key)
            except asyncio.CancelledError:
                raise
            except ConflictError as exc:
                log.info("event=reconcile_conflict job=%s detail=%s", key, exc)
                retry = 0.0
            except KubeError as exc:
                retry = self._backoff(key)
                log.warning("event=reconcile_failed job=%s error=%s retry_s=%.2f", key, exc, retry)
            except Exception as exc:
                retry = await self._crashed(key, exc)
            else:
                if key in self._memory:
                    self._memory[key].failures = 0
            finally:
                self.queue.done(key)
                self.metrics.reconcile_latency.observe(time.perf_counter() - started)
            if retry is not None:
                self.queue.add(key, retry)

    async def _crashed(self, key: str, exc: Exception) -> float | None:
        """A reconcile failed unexpectedly (nothing was written): say so on the job, retry a few times only."""
        memory = self._memory.setdefault(key, _JobMemory())
        retry: float | None = self._backoff(key)
        if memory.failures > CRASH_RETRIES:
            retry = None
        log.error("event=reconcile_crashed job=%s failures=%d retry_s=%s", key, memory.failures, retry, exc_info=exc)
        job = self.jobs.store.get(key)
        message = (
            f"reconcile failed unexpectedly ({type(exc).__name__}: {exc}); nothing was written, the rank-table "
            "ConfigMap stays as it is and the job is reconciled again when it or its pods change. Please report "
            "this with the ringroute controller's log"
        )
        if job is not None and message != memory.failed_message:
            memory.failed_message = message
            configmap_key = self.keeper.configmap_key(job)
            configmap = self.configmaps.store.get(configmap_key) if configmap_key else None
            await self._event(job, configmap, "RankTableFailed", message, "Warning")
        return retry

    def _backoff(self, key: str) -> float:
        memory = self._memory.setdefault(key, _JobMemory())
        memory.failures += 1
        return float(min(BACKOFF_S[0] * 2.0 ** (memory.failures - 1), BACKOFF_S[1]))

    async def reconcile(self, key: str) -> float | None:
        """Bring the job's ConfigMap in line with its pods; returns a retry delay or None."""
        if not self.is_leader():
            return None
        job = self.jobs.store.get(key)
        if job is None:
            return None
        facts = job_facts(job, self.settings)
        profile = facts.rank_table_profile
        if profile is None:
            return None
        expected, task_order = facts.npu_pods, list(facts.task_order)
        namespace, name = str(facts.namespace), str(facts.name)
        uid = facts.uid or ""
        job_version = facts.version
        memory = self._memory.setdefault(key, _JobMemory())
        cm_key = f"{namespace}/{profile.configmap_name(name)}"
        configmap = self.configmaps.store.get(cm_key)

        pods = [self.pods.store[k] for k in sorted(self._pods_by_job.get(key, ())) if k in self.pods.store]
        readout = read_job_placement(
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
        route_plan = facts.route_planned
        version_text = job_version or ""
        fingerprint = placement_fingerprint(placement, uid, version_text, route_plan)
        owner = job_owner_reference(job)
        configmap_fingerprint = None
        if configmap is not None:
            annotations = (configmap.get("metadata") or {}).get("annotations") or {}
            configmap_fingerprint = annotations.get(FINGERPRINT_ANNOTATION)
            current_sha = payload_hash(configmap.get("data"), configmap.get("binaryData"))
            if (
                status == "completed"
                and configmap_fingerprint == fingerprint
                and annotations.get(DATA_HASH_ANNOTATION) == current_sha
                and owned_by(configmap, owner)
            ):
                # Pods an earlier leader wrote this table for but did not update (it stopped meanwhile).
                self._update_pods(key, configmap, placement, pods, current_sha, written_at=None)
                return None
        record_servers, record_valid = self._record(configmap, memory, uid, version_text)
        done = await self._plan_and_write(
            job,
            profile=profile,
            placement=placement,
            configmap=configmap,
            status=status,
            route_plan=route_plan,
            fingerprint=fingerprint,
            configmap_fingerprint=configmap_fingerprint,
            record=(record_servers, record_valid),
            memory=memory,
        )
        if done is None:
            return None
        planned, written = done
        self._update_pods(key, written, placement, pods, planned.payload_sha, written_at=time.monotonic())
        memory.record_servers = [list(server) for server in planned.state_servers]
        memory.record_identity = (uid, version_text)
        memory.pending_message = ""
        # routed, or the level a budget fallback took (unpinned, ring-order), else pod-index
        outcome = planned.plan_level if planned.plan_level in ("unpinned", "ring-order") else None
        self.metrics.plans.labels(outcome or ("routed" if planned.routed else "pod-index")).inc()
        log.info(
            "event=rank_table_completed job=%s servers=%d routed=%s planning_ms=%.1f",
            key,
            len(placement.servers),
            planned.routed,
            planned.planning_ms,
        )
        if planned.fallback:
            # After the write (a write that conflicts is planned again): one Event per table written this way.
            log.warning("event=plan_fallback job=%s level=%s detail=%s", key, planned.plan_level, planned.fallback)
            await self._event(job, written, "RankTableFallback", planned.fallback, "Warning")
        if planned.steering_fallback:
            log.warning("event=steering_fallback job=%s detail=%s", key, planned.steering_fallback)
            message = f"pinned routes not steered by source ports: {planned.steering_fallback}"
            await self._event(job, written, "RankTableFallback", message, "Warning")
        await self._event(job, written, "RankTableCompleted", planned.message, "Normal")
        return None

    async def _plan_and_write(
        self,
        job: Obj,
        *,
        profile: AcceleratorProfile,
        placement: Placement,
        configmap: Obj | None,
        status: str | None,
        route_plan: bool,
        fingerprint: str,
        configmap_fingerprint: str | None,
        record: tuple[list[list[str]], bool],
        memory: _JobMemory,
    ) -> tuple[Planned, Obj] | None:
        """Plan the completed table and write it, planning again (at most MAX_REPLANS times) while the links it
        was planned around moved before the write; None when nothing was written (a failure is reported)."""
        key = object_key(job)
        meta = job.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        version_value = (job.get("status") or {}).get("version")
        version_text = str(version_value) if version_value is not None else ""
        record_servers, record_valid = record
        topology = await self._topology_now()
        resume = memory.given_up[1:] if memory.given_up[0] == fingerprint else None

        def given_up(following: PlanLevel, reasons: tuple[str, ...]) -> None:
            memory.given_up = (fingerprint, following, reasons)

        written: Obj | None = None
        for attempt in range(MAX_REPLANS + 1):
            try:
                table = await self.tables.plan(
                    key,
                    profile,
                    placement,
                    topology,
                    job_uid=uid,
                    job_version=version_text,
                    route_plan=route_plan,
                    record_servers=record_servers,
                    record_valid=record_valid,
                    resume=resume,
                    on_given_up=given_up,
                )
            except (ConfigMapTooLargeError, InputError) as exc:
                self.metrics.plans.labels("failed").inc()
                message = str(exc)
                if status == "completed" and configmap_fingerprint == fingerprint:
                    # Completed earlier for these very pods (an older release, or before an edit): still right.
                    failed = configmap
                    message += "; the table completed earlier for these pods stays"
                else:
                    failed = await self._reset_to_initializing(job, profile, configmap, status)
                if message != memory.failed_message:
                    memory.failed_message = message
                    await self._event(job, failed, "RankTableFailed", message, "Warning")
                return None
            planned = table.planned
            if attempt == 0:
                if planned.route_problem and planned.route_problem != memory.failed_message:
                    memory.failed_message = planned.route_problem
                    await self._event(job, configmap, "RankTableFailed", planned.route_problem, "Warning")
                elif not planned.route_problem:
                    memory.failed_message = ""
            self.metrics.plan_latency.observe(planned.planning_ms / 1000.0)
            if not self.is_leader():
                return None  # lost the lease while planning: write nothing
            annotations_update = {FINGERPRINT_ANNOTATION: fingerprint, DATA_HASH_ANNOTATION: planned.payload_sha}

            async def write(planned: Planned = planned, annotations: dict[str, str] = annotations_update) -> Obj:
                return await self._write(
                    job,
                    profile=profile,
                    configmap=configmap,
                    data=planned.payload_data,
                    binary_data=planned.payload_binary,
                    annotations=annotations,
                )

            written = await self.tables.commit(key, table, placement, write, last=attempt == MAX_REPLANS)
            if written is not None:
                break
        assert written is not None
        return planned, written

    def _update_pods(
        self,
        key: str,
        configmap: Obj,
        placement: Placement,
        pods: list[Obj],
        data_sha: str,
        *,
        written_at: float | None,
    ) -> None:
        """Annotate the table's pods that do not carry this write's version yet (in the background)."""
        if self.settings.controller.pod_updates:
            version = table_version(str((configmap.get("metadata") or {}).get("resourceVersion", "")), data_sha)
            refs = table_pods(placement, pods, version, self.nodes.store, rewritten=written_at is not None)
            if refs or written_at is not None:
                self.pod_updates.update(key, version, refs, written_at=written_at)

    async def _report_pod_updates(self, key: str, message: str, event_type: EventType) -> None:
        job = self.jobs.store.get(key)
        if job is None:
            return
        configmap_key = self.keeper.configmap_key(job)
        configmap = self.configmaps.store.get(configmap_key) if configmap_key else None
        await self._event(job, configmap, "RankTablePodsUpdated", message, event_type)

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
        """A thunk building the topology from the caches (`TopologyCache`), run in a worker thread."""
        self.topology.hypernodes = self.hypernodes
        return await self.topology.thunk()

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
        message = pending_summary(readout, expected) + topology_wait(job, readout)
        now = time.monotonic()
        if message == memory.pending_message:
            return
        wait = memory.pending_at + self.pending_event_interval_s - now
        if wait > 0:
            # Too soon after the last Event: look again when one may be posted, or a change that comes with no
            # later change to the job or its pods (pods created, then waiting for Volcano) is never reported.
            self.queue.add(object_key(job), wait)
            return
        memory.pending_message = message
        memory.pending_at = now
        await self._event(job, written, "RankTablePending", message, "Warning" if needs_a_fix(readout) else "Normal")

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
            or not owned_by(configmap, job_owner_reference(job))
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
            log.info("event=rank_table_reset job=%s detail=pods changed", object_key(job))
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
        body = configmap_update(
            job, profile, self.settings, configmap, data=data, binary_data=binary_data, annotations=annotations
        )
        meta = body["metadata"]
        if not self.is_leader():
            raise _NotLeaderError()
        if configmap is None:
            try:
                written = await self.repo.create_object(CONFIGMAPS, body)
            except ConflictError:
                # Created meanwhile (the creation queue, an older release's webhook, a user): reconcile against it.
                fresh = await self.repo.get_configmap(meta["namespace"], meta["name"])
                if fresh is not None:
                    self.configmaps.store[object_key(fresh)] = fresh
                raise
        else:
            try:
                written = await self.repo.replace_object(CONFIGMAPS, body)
            except ConflictError:
                fresh = await self.repo.get_configmap(meta["namespace"], meta["name"])
                if fresh is None:
                    self.configmaps.store.pop(object_key(configmap), None)
                else:
                    self.configmaps.store[object_key(fresh)] = fresh
                raise
        self.configmaps.store[object_key(written)] = written
        return written

    async def _event(self, job: Obj, configmap: Obj | None, reason: str, message: str, event_type: EventType) -> None:
        if not self.is_leader():
            return
        await self.events.emit(job, reason=reason, message=message, event_type=event_type)
        if configmap is not None:
            await self.events.emit(configmap, reason=reason, message=message, event_type=event_type)


class _NotLeaderError(KubeError):
    def __init__(self) -> None:
        super().__init__("write", 0, "not the leader any more; nothing written")


__all__ = ["Controller"]
