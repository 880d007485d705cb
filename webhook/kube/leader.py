"""Leader election with a coordination.k8s.io/v1 Lease, as client-go does it.

kubernetes_asyncio ships `leaderelection`, but it cannot release the lease on shutdown, requires periods of at
least one second, and ends its loop on network errors; this elector keeps the same protocol (holderIdentity,
leaseDurationSeconds, renewTime; updates guarded by resourceVersion; a follower waits a full lease duration after
it last saw the record change) and adds release on stop and a write fence (`is_leader`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

from webhook.common.kube_time import now_rfc3339
from webhook.common.metrics import Metrics
from webhook.kube.client import LEASES, ConflictError, KubeError, KubeRepository, sleep_or_stop

log = logging.getLogger("ringroute.leader")


class LeaderElector:
    """Acquires, renews and releases one Lease; runs `lead()` while it holds it."""

    def __init__(
        self,
        repo: KubeRepository,
        metrics: Metrics,
        *,
        name: str,
        namespace: str,
        identity: str,
        lease_duration_s: float,
        renew_deadline_s: float,
        retry_period_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0 < retry_period_s < renew_deadline_s < lease_duration_s:
            raise ValueError(
                "leader election needs 0 < retryPeriodS < renewDeadlineS < leaseDurationS "
                f"(got {retry_period_s}, {renew_deadline_s}, {lease_duration_s})"
            )
        self.repo = repo
        self.metrics = metrics
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_duration_s = lease_duration_s
        self.renew_deadline_s = renew_deadline_s
        self.retry_period_s = retry_period_s
        self._clock = clock
        self._leading = False
        self._last_renew = -math.inf
        self._observed: tuple[Any, ...] | None = None
        """(holderIdentity, renewTime, leaseDurationSeconds) as last seen."""
        self._observed_at = -math.inf

    def is_leader(self) -> bool:
        """True while this replica holds the lease and renewed it within the renew deadline (the write fence)."""
        return self._leading and self._clock() - self._last_renew < self.renew_deadline_s

    async def run(self, lead: Callable[[], Awaitable[None]], stop: asyncio.Event) -> None:
        """Campaign until `stop` is set; run `lead()` as a task while leading, cancel it at once when the lease
        is lost, and release the lease before returning."""
        while not stop.is_set():
            if not await self._try_acquire_or_renew():
                await sleep_or_stop(stop, self.retry_period_s * random.uniform(1.0, 1.2))
                continue
            self._set_leading(True)
            log.info("event=leader_acquired lease=%s/%s identity=%s", self.namespace, self.name, self.identity)
            task = asyncio.create_task(_run_lead(lead), name="ringroute-leading")
            try:
                await self._renew_until_lost(task, stop)
            finally:
                self._set_leading(False)
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if stop.is_set():
                break
            log.warning("event=leader_lost lease=%s/%s identity=%s", self.namespace, self.name, self.identity)
        await self.release()

    async def _renew_until_lost(self, task: asyncio.Task[None], stop: asyncio.Event) -> None:
        while not stop.is_set():
            stop_wait = asyncio.create_task(stop.wait())
            try:
                await asyncio.wait({task, stop_wait}, timeout=self.retry_period_s, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stop_wait.cancel()
            if stop.is_set():
                return
            if task.done():
                # The controller ended on its own (an unexpected error was logged): give the lease up so that
                # another replica, or this one after a fresh start, takes over.
                return
            if await self._try_acquire_or_renew():
                continue
            if self._observed is not None and self._observed[0] not in (self.identity, None, ""):
                return  # someone else holds it now
            if self._clock() - self._last_renew >= self.renew_deadline_s:
                return

    def _set_leading(self, leading: bool) -> None:
        self._leading = leading
        self.metrics.leader.set(1 if leading else 0)

    async def _try_acquire_or_renew(self) -> bool:
        started = self._clock()
        try:
            lease = await self.repo.get_object(LEASES, self.namespace, self.name)
        except KubeError as exc:
            log.warning("event=lease_read_failed error=%s", exc)
            return False
        duration = max(1, math.ceil(self.lease_duration_s))
        if lease is None:
            body = {
                "apiVersion": LEASES.api_version,
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {
                    "holderIdentity": self.identity,
                    "leaseDurationSeconds": duration,
                    "acquireTime": now_rfc3339(micro=True),
                    "renewTime": now_rfc3339(micro=True),
                    "leaseTransitions": 0,
                },
            }
            try:
                await self.repo.create_object(LEASES, body)
            except KubeError as exc:
                log.info("event=lease_create_failed error=%s", exc)
                return False
            self._last_renew = started
            self._observed = (self.identity, "", duration)
            self._observed_at = started
            return True
        spec = dict(lease.get("spec") or {})
        holder = spec.get("holderIdentity") or ""
        record = (holder, spec.get("renewTime"), spec.get("leaseDurationSeconds"))
        if record != self._observed:
            self._observed = record
            self._observed_at = started
        if holder and holder != self.identity:
            held_for = float(spec.get("leaseDurationSeconds") or duration)
            if started < self._observed_at + held_for:
                return False
        now = now_rfc3339(micro=True)
        if holder != self.identity:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        spec.update({"holderIdentity": self.identity, "leaseDurationSeconds": duration, "renewTime": now})
        body = {**lease, "spec": spec}
        try:
            await self.repo.replace_object(LEASES, body)
        except ConflictError:
            return False
        except KubeError as exc:
            log.warning("event=lease_update_failed error=%s", exc)
            return False
        self._last_renew = started
        self._observed = (self.identity, now, duration)
        self._observed_at = started
        return True

    async def release(self) -> None:
        """Give the lease up if this replica holds it, so another replica takes over without waiting."""
        try:
            lease = await self.repo.get_object(LEASES, self.namespace, self.name)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            spec = dict(lease.get("spec") or {})
            spec.pop("holderIdentity", None)
            spec["leaseDurationSeconds"] = 1
            spec["renewTime"] = now_rfc3339(micro=True)
            await self.repo.replace_object(LEASES, {**lease, "spec": spec})
            log.info("event=leader_released lease=%s/%s identity=%s", self.namespace, self.name, self.identity)
        except KubeError as exc:
            log.warning("event=lease_release_failed error=%s", exc)


async def _run_lead(lead: Callable[[], Awaitable[None]]) -> None:
    try:
        await lead()
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("event=controller_crashed")


__all__ = ["LeaderElector"]
