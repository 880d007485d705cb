"""The rank-table ConfigMap's birth and, for a Job that never appeared, its removal.

A labelled Job gets its "initializing" ConfigMap, owned by the Job, as soon as the Job is in the cache, from a
queue of its own without debounce, so that creation never waits behind planning (pods wait on the ConfigMap volume
until it exists). ConfigMaps ringroute made for Jobs that were never created are deleted after a grace period.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from webhook.common.jobfacts import job_facts
from webhook.common.metrics import Metrics
from webhook.common.rank_configmap import initial_configmap
from webhook.common.settings import Settings
from webhook.controller.configmap_jobs import is_orphan
from webhook.controller.watches import NamespacesInformer
from webhook.kube.client import CONFIGMAPS, ConflictError, KubeError, KubeRepository
from webhook.kube.informer import BACKOFF_S, Informer, object_key
from webhook.kube.workqueue import DebouncedQueue

log = logging.getLogger("ringroute.controller")


class ConfigMapKeeper:
    """Creates each labelled Job's ConfigMap and sweeps orphans; `reconcile` owns everything written after."""

    def __init__(
        self,
        settings: Settings,
        repo: KubeRepository,
        metrics: Metrics,
        *,
        jobs: Informer | NamespacesInformer,
        configmaps: Informer | NamespacesInformer,
        reconciles: DebouncedQueue,
        is_leader: Callable[[], bool],
        orphan_grace_s: float,
    ) -> None:
        self.settings = settings
        self.repo = repo
        self.metrics = metrics
        self.jobs = jobs
        self.configmaps = configmaps
        self.reconciles = reconciles
        """The reconcile queue: a ConfigMap that exists already (409) is the reconcile's to adopt or leave."""
        self.is_leader = is_leader
        self.orphan_grace_s = orphan_grace_s
        self.creations = DebouncedQueue(0.0, 0.0)
        self._failures: dict[str, int] = {}

    def configmap_key(self, job: Mapping[str, Any]) -> str | None:
        """Cache key of the job's rank-table ConfigMap (None when ringroute writes none for this job)."""
        facts = job_facts(job, self.settings)
        profile = facts.rank_table_profile
        if profile is None:
            return None
        return f"{facts.namespace}/{profile.configmap_name(str(facts.name))}"

    def job_seen(self, key: str, job: Mapping[str, Any]) -> None:
        """A job was added or changed: queue its ConfigMap's creation if it has none."""
        configmap_key = self.configmap_key(job)
        if configmap_key is not None and configmap_key not in self.configmaps.store:
            self.creations.add(key, 0.0)

    def job_deleted(self, key: str) -> None:
        self._failures.pop(key, None)

    async def run_creations(self) -> None:
        """One creation worker: takes jobs from the creation queue until cancelled."""
        while True:
            key = await self.creations.get()
            retry: float | None = None
            try:
                retry = await self.create(key)
            except asyncio.CancelledError:
                raise
            except Exception:
                retry = self._backoff(key)
                log.exception("event=configmap_create_crashed job=%s retry_s=%.2f", key, retry)
            finally:
                self.creations.done(key)
            if retry is not None:
                self.creations.add(key, retry)

    def _backoff(self, key: str) -> float:
        failures = self._failures[key] = self._failures.get(key, 0) + 1
        return float(min(BACKOFF_S[0] * 2.0 ** (failures - 1), BACKOFF_S[1]))

    async def create(self, key: str) -> float | None:
        """Create the job's "initializing" ConfigMap, owned by the Job, if it has none; returns a retry delay.

        An existing ConfigMap is never touched here: a 409 hands the job to `reconcile`, which adopts it or
        leaves it. Pods do not matter: they wait on the ConfigMap volume until it exists.
        """
        job = self.jobs.store.get(key)
        if job is None or not self.is_leader():
            return None
        configmap_key = self.configmap_key(job)
        if configmap_key is None or configmap_key in self.configmaps.store:
            return None
        profile = job_facts(job, self.settings).rank_table_profile
        assert profile is not None
        body = initial_configmap(job, profile, self.settings)
        try:
            written = await self.repo.create_object(CONFIGMAPS, body)
        except ConflictError:
            self.metrics.configmap_creates.labels("exists").inc()
            self.reconciles.add(key, 0.0)
            return None
        except KubeError as exc:
            self.metrics.configmap_creates.labels("error").inc()
            retry = self._backoff(key)
            log.warning("event=configmap_create_failed job=%s error=%s retry_s=%.2f", key, exc, retry)
            return retry
        self._failures.pop(key, None)
        self.configmaps.store[object_key(written)] = written
        self.metrics.configmap_creates.labels("created").inc()
        log.info("event=configmap_created job=%s configmap=%s", key, object_key(written))
        return None

    async def sweep_forever(self) -> None:
        interval = min(max(self.orphan_grace_s / 4, 0.2), 60.0)
        while True:
            await asyncio.sleep(interval)
            try:
                await self.sweep()
            except KubeError as exc:
                log.warning("event=orphan_sweep_failed error=%s", exc)

    async def sweep(self) -> int:
        """Delete ConfigMaps ringroute created for jobs that never got created (older than the grace period)."""
        deleted = 0
        now = time.time()
        for key, configmap in list(self.configmaps.store.items()):
            if not is_orphan(configmap, self.settings, self.jobs.store, now=now, grace_s=self.orphan_grace_s):
                continue
            meta = configmap.get("metadata") or {}
            if not self.is_leader():
                return deleted
            if await self.repo.delete_object(
                CONFIGMAPS,
                meta.get("namespace"),
                str(meta.get("name", "")),
                uid=meta.get("uid"),
                resource_version=meta.get("resourceVersion"),
            ):
                deleted += 1
                log.info("event=orphan_deleted configmap=%s detail=its job was never created", key)
            self.configmaps.store.pop(key, None)
        return deleted


__all__ = ["ConfigMapKeeper"]
