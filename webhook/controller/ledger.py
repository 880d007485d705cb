"""The controller's fabric load ledger: every running route-planned job's traffic, from its rank-table ConfigMap.

No state beyond the API server: the ledger is rebuilt from the completed rank-table ConfigMaps in the informer's
cache when the controller starts leading and whenever the topology changes; a table written, re-planned or reset
(pods lost: "initializing") updates its job's entry, and a Job or ConfigMap deleted removes it. A ConfigMap whose
ports or routes cannot be read counts as unsteered (ECMP), with a warning in the log, never a crash; one whose
table cannot be read or names nodes the topology lacks is left out, with a warning.

Plans made at the same time are committed against the ledger as it is at write time: `commit` holds the lock
from the check (have the links this plan was made around moved since?) through the write, so two plans never
claim the same room. Thread-safe: its CPU work runs in worker threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from planner import (
    CompiledModel,
    FabricLedger,
    HashModel,
    InputError,
    LinkBackground,
    Topology,
    fabric_links,
    job_network,
    running_job_traffic,
)
from webhook.common.metrics import Metrics
from webhook.common.rank_configmap import payload_hash
from webhook.common.settings import Settings
from webhook.controller.configmap_jobs import configmap_job_key, running_job_of

log = logging.getLogger("ringroute.controller")


@dataclass(frozen=True, slots=True)
class _Source:
    """What a job's entry was computed from: its ConfigMap's data, by hash."""

    data_sha: str
    warnings: tuple[str, ...]


class LedgerKeeper:
    """The fabric load ledger of the running jobs' rank-table ConfigMaps (module docstring)."""

    def __init__(self, settings: Settings, hash_model: HashModel | None, metrics: Metrics) -> None:
        self.settings = settings
        self.metrics = metrics
        self._model = CompiledModel(hash_model) if hash_model is not None and not hash_model.is_empty else None
        self._lock = threading.Lock()
        self.commit_lock = asyncio.Lock()
        """Held from a plan's check against the ledger through its table's write (`moved_since`, then `put`)."""
        self._ledger: FabricLedger | None = None
        self._topology: Topology | None = None
        self._sources: dict[str, _Source] = {}
        self._published: set[str] = set()
        self._changes: dict[str, Mapping[str, Any] | None] = {}
        self._wake = asyncio.Event()

    @property
    def ready(self) -> bool:
        """Whether the ledger was built for a topology."""
        return self._ledger is not None

    # -- building ---------------------------------------------------------------------------------------------

    def rebuild(self, topology: Topology, configmaps: Iterable[Mapping[str, Any]], jobs: Iterable[str]) -> float:
        """Build the ledger anew from every completed rank-table ConfigMap of a known Job; returns seconds."""
        started = time.perf_counter()
        known = set(jobs)
        try:
            ledger = FabricLedger(fabric_links(topology))
        except InputError as exc:
            log.warning("event=fabric_ledger_unavailable error=%s", exc)
            with self._lock:
                self._ledger, self._topology, self._sources = None, topology, {}
            return time.perf_counter() - started
        sources: dict[str, _Source] = {}
        for configmap in configmaps:
            key = configmap_job_key(configmap, self.settings)
            if key is None or key not in known:
                continue
            self._add(ledger, topology, key, configmap, sources)
        with self._lock:
            self._ledger, self._topology, self._sources = ledger, topology, sources
        elapsed = time.perf_counter() - started
        self.metrics.fabric_rebuild.observe(elapsed)
        log.info("event=fabric_ledger_rebuilt jobs=%d seconds=%.3f", len(ledger), elapsed)
        self._publish()
        return elapsed

    def ensure(
        self, topology: Topology, running: Callable[[], tuple[Iterable[Mapping[str, Any]], Iterable[str]]]
    ) -> float | None:
        """Rebuild, from the ConfigMaps and Jobs `running()` gives, when the topology is not the one the ledger was
        built for; the seconds taken, or None (nothing read: the common case, on every plan)."""
        if self._topology is topology:
            return None
        configmaps, jobs = running()
        return self.rebuild(topology, configmaps, jobs)

    def _add(
        self,
        ledger: FabricLedger,
        topology: Topology,
        key: str,
        configmap: Mapping[str, Any],
        sources: dict[str, _Source],
    ) -> bool:
        """Put the job of a completed ConfigMap into `ledger`; False (and its entry dropped) when it holds none. A
        ConfigMap that cannot be read leaves the job out with a warning, whatever it holds (users can edit them)."""
        sha = payload_hash(configmap.get("data"), configmap.get("binaryData"))
        if key in sources and sources[key].data_sha == sha and key in ledger:
            return True
        try:
            found = running_job_of(configmap, self.settings, ports_first=self._model is not None)
            traffic = running_job_traffic(found[1], topology, ledger.links, self._model) if found else None
        except Exception as exc:
            log.warning("event=fabric_job_left_out job=%s error=%s: %s", key, type(exc).__name__, exc)
            traffic = None
        if traffic is None:
            ledger.remove(key)
            sources.pop(key, None)
            return False
        for warning in traffic.warnings:
            log.warning("event=fabric_job_unsteered job=%s detail=%s", key, warning)
        ledger.put(traffic)
        sources[key] = _Source(sha, traffic.warnings)
        return True

    # -- changes ----------------------------------------------------------------------------------------------

    def update(self, key: str, configmap: Mapping[str, Any] | None) -> None:
        """The job's ConfigMap as it is now (None: gone): its entry follows."""
        with self._lock:
            ledger, topology = self._ledger, self._topology
            if ledger is None or topology is None:
                return
            if configmap is None:
                ledger.remove(key)
                self._sources.pop(key, None)
            else:
                self._add(ledger, topology, key, configmap, self._sources)
        self._publish()

    def changed(self, key: str, configmap: Mapping[str, Any] | None) -> None:
        """The job's ConfigMap as an informer saw it now (None: gone); applied by `follow_changes`, in order, the
        latest of each job only."""
        self._changes[key] = configmap
        self._wake.set()

    def forget_changes(self) -> None:
        """Drop the changes not applied yet (a rebuild reads every ConfigMap anyway)."""
        self._changes.clear()

    async def follow_changes(self) -> None:
        """Apply the informers' changes (parsing and hashing in a thread) until cancelled."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._changes:
                key, configmap = self._changes.popitem()
                await asyncio.to_thread(self.update, key, configmap)

    def remove(self, key: str) -> None:
        """The job is gone (its Job deleted): its load leaves the fabric."""
        self.update(key, None)

    # -- planning against it ----------------------------------------------------------------------------------

    def background(self, key: str, nodes: Iterable[str]) -> LinkBackground | None:
        """Every other job's load on the links a job on `nodes` may use (None without a ledger)."""
        with self._lock:
            if self._ledger is None:
                return None
            try:
                return self._ledger.background(list(nodes), exclude=key)
            except InputError as exc:
                log.warning("event=fabric_background_unavailable job=%s error=%s", key, exc)
                return None

    def moved_since(self, version: int, topology: Topology, nodes: Iterable[str]) -> bool:
        """Whether the links a job on `nodes` may use changed after ledger version `version` (or the ledger was
        rebuilt for another topology)."""
        with self._lock:
            ledger = self._ledger
            if ledger is None:
                return False
            if self._topology is not topology:
                return True
            try:
                links = ledger.job_links(job_network(topology, list(nodes)))
            except InputError:
                return False
            return ledger.moved_since(version, links)

    def nodes_of(self, key: str) -> tuple[str, ...]:
        """The nodes the ledger holds a job on (empty when it holds none)."""
        with self._lock:
            found = self._ledger.jobs.get(key) if self._ledger is not None else None
            return found.nodes if found is not None else ()

    # -- reports ----------------------------------------------------------------------------------------------

    def snapshot(self) -> FabricLedger | None:
        """The ledger itself (read it under no other writer: the controller's event loop owns the updates)."""
        return self._ledger

    def _publish(self) -> None:
        """Metrics: the fabric's max link load and bound, jobs by delivery, each job's predicted bus bandwidth."""
        with self._lock:
            ledger = self._ledger
            if ledger is None:
                return
            report = ledger.report(busiest=0)
            by_delivery: dict[str, int] = {"hashed": 0, "planned": 0, "ecmp": 0}
            current: set[str] = set()
            for outlook in report.jobs:
                by_delivery[outlook.delivery] += 1
                namespace, _, name = outlook.key.partition("/")
                self.metrics.fabric_job_busbw.labels(namespace, name).set(outlook.busbw)
                current.add(outlook.key)
            for gone in self._published - current:
                namespace, _, name = gone.partition("/")
                with contextlib.suppress(KeyError):
                    self.metrics.fabric_job_busbw.remove(namespace, name)
            self._published = current
            self.metrics.fabric_max_link_load.set(report.max_link_load)
            self.metrics.fabric_bound.set(report.bound)
            for delivery, count in by_delivery.items():
                self.metrics.fabric_jobs.labels(delivery).set(count)


__all__ = ["LedgerKeeper"]
