"""After a rank-table write, one annotation patch per pod of the job, so kubelet rewrites the table file at once.

kubelet rewrites a ConfigMap volume only when it syncs the pod: on an update of the pod, or at its periodic sync
(`syncFrequency`, 1 min plus up to 50 % jitter). On real kubelets a ConfigMap update alone reached a running pod's
file after 30-87 s; followed by a patch of the pod's annotations, after 0.1-0.7 s (docs/controller.md, "How the
table reaches the pods"). The annotation's value names the write (`<ConfigMap resourceVersion>-<data sha256>`): a
patch that changes nothing is no update (the API server stores nothing and sends no event), so every write needs a
value of its own.

kubelets that use the `Cache` strategy instead read the ConfigMap through a cache whose entries live for the node's
`node.alpha.kubernetes.io/ttl` (set by kube-controller-manager by cluster size: 0 s up to 100 nodes, then 15 s to
600 s): a sync within that TTL of kubelet's last read rewrites the file with the old table. Pods on nodes with a TTL
above 0 are therefore updated once more when that TTL has passed since the write (value `<version>+ttl<N>`), which
bounds such a kubelet's delay by the TTL instead of the TTL plus its periodic sync.

Pod updates never hold up the table: each job's updates run in a task of their own after the write, at most
`controller.podUpdateConcurrency` requests in flight over all jobs. A failed update is retried with backoff for
`controller.podUpdateRetryS`, logged once per pod and counted; a pod that is gone (404) or whose name now belongs to
another pod (the patch names the pod's UID, which the API server answers with 422) is not retried.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from planner import Placement
from webhook.common.metrics import Metrics
from webhook.common.names import RANK_TABLE_VERSION_ANNOTATION
from webhook.common.settings import ControllerSettings
from webhook.kube.client import PODS, KubeError, KubeRepository
from webhook.kube.events import EventType

log = logging.getLogger("ringroute.controller")

FIRST_RETRY_S = 0.5
"""The first retry of a failed pod update waits this long; each next one twice as long, up to MAX_RETRY_S."""
MAX_RETRY_S = 15.0
SHOWN_FAILURES = 3
"""Pods named in the Event when some were not updated."""

Report = Callable[[str, str, EventType], Awaitable[None]]
"""Posts an Event (reason RankTablePodsUpdated) on the job `key` with a message and a type."""


@dataclass(frozen=True, slots=True)
class PodRef:
    """A pod to update: the table's pod, read from the cache by the Job's UID."""

    namespace: str
    name: str
    uid: str
    node_ttl_s: int = 0
    """The `node.alpha.kubernetes.io/ttl` of the pod's node (0 when absent): kubelet's object-cache TTL."""

    @property
    def key(self) -> str:
        """`namespace/name`."""
        return f"{self.namespace}/{self.name}"


NODE_TTL_ANNOTATION = "node.alpha.kubernetes.io/ttl"
"""Node annotation kube-controller-manager's TTL controller sets: how long a kubelet with the `Cache` strategy may
serve a ConfigMap from its cache, in seconds."""
TTL_MARGIN_S = 1.0
"""The follow-up update comes this long after the TTL has passed, so the cache entry is stale for sure."""
MAX_NODE_TTL_S = 3600
"""A larger annotation value is read as this (kube-controller-manager sets at most 600)."""


def node_ttl_s(node: Mapping[str, Any] | None) -> int:
    """The node's kubelet object-cache TTL in whole seconds from its annotation; 0 when absent or unreadable."""
    value = ((node or {}).get("metadata") or {}).get("annotations", {}).get(NODE_TTL_ANNOTATION, "")
    if not (isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 6):
        return 0
    return min(int(value), MAX_NODE_TTL_S)


def table_version(resource_version: str, data_sha256: str) -> str:
    """The annotation value of one table write: the ConfigMap's resourceVersion after the write and the data hash."""
    return f"{resource_version}-{data_sha256[:16]}"


@dataclass
class _Delivery:
    version: str
    written_at: float | None
    """`time.monotonic()` when the table was written; None when an earlier leader wrote it."""
    total: int
    pending: dict[str, PodRef]
    updated: int = 0
    last_updated_at: float | None = None
    gone: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    """Pod key -> the last error of a pod that is not updated (yet)."""
    forbidden: bool = False
    """Some update was refused with 403 (RBAC, or an admission policy on pod updates)."""
    task: asyncio.Task[None] | None = None


class _NotLeaderError(Exception):
    """The lease was lost: the next leader updates what is left."""


def table_pods(
    placement: Placement,
    pods: Sequence[Mapping[str, Any]],
    version: str,
    nodes: Mapping[str, Mapping[str, Any]],
    *,
    rewritten: bool,
) -> list[PodRef]:
    """The pods of a table's servers to annotate with its `version`: all of them after a write (`rewritten`),
    else those not carrying it yet (an earlier leader wrote it and stopped); `nodes` by name, for their TTL."""
    on = {server.pod_name: server.node_name for server in placement.servers}
    refs = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        node = on.get(str(meta.get("name")))
        if node is None:
            continue
        current = str((meta.get("annotations") or {}).get(RANK_TABLE_VERSION_ANNOTATION, ""))
        if not rewritten and (current == version or current.startswith(f"{version}+")):
            continue
        ttl = node_ttl_s(nodes.get(node))
        refs.append(PodRef(str(meta.get("namespace")), str(meta.get("name")), str(meta.get("uid", "")), ttl))
    return refs


class PodUpdater:
    """Annotates the pods of each written table, in the background; `update` never waits for the API server."""

    def __init__(
        self,
        repo: KubeRepository,
        metrics: Metrics,
        settings: ControllerSettings,
        *,
        is_leader: Callable[[], bool],
        report: Report,
    ) -> None:
        self.repo = repo
        self.metrics = metrics
        self.retry_s = settings.pod_update_retry_s
        self.is_leader = is_leader
        self.report = report
        self._slots = asyncio.Semaphore(settings.pod_update_concurrency)
        self._deliveries: dict[str, _Delivery] = {}
        """Per job key: the latest table's delivery, running or finished."""

    def update(self, job_key: str, version: str, pods: Sequence[PodRef], *, written_at: float | None) -> None:
        """Annotate `pods` with `version` in the background. A delivery of the same version for the job, running or
        finished, is left as it is (pod events after the patches come back here); another version replaces it."""
        current = self._deliveries.get(job_key)
        if current is not None and current.version == version:
            return
        self.forget(job_key)
        if not pods:
            return
        delivery = _Delivery(version, written_at, len(pods), {pod.key: pod for pod in pods})
        self._deliveries[job_key] = delivery
        delivery.task = asyncio.create_task(self._deliver(job_key, delivery), name=f"pod-updates-{job_key}")

    def forget(self, job_key: str) -> None:
        """Stop the job's delivery (its job is gone, or a newer table replaces it)."""
        delivery = self._deliveries.pop(job_key, None)
        if delivery is not None and delivery.task is not None and not delivery.task.done():
            delivery.task.cancel()

    def running(self) -> int:
        """Deliveries still updating pods."""
        return sum(1 for d in self._deliveries.values() if d.task is not None and not d.task.done())

    def cancel(self) -> list[asyncio.Task[None]]:
        """Cancel every running delivery; returns their tasks to wait for (with the controller's own)."""
        tasks = [d.task for d in self._deliveries.values() if d.task is not None and not d.task.done()]
        for task in tasks:
            task.cancel()
        return tasks

    async def _deliver(self, job_key: str, delivery: _Delivery) -> None:
        pods = list(delivery.pending.values())
        try:
            await self._round(delivery, delivery.version)
            await self._finish(job_key, delivery)
            # For kubelets that read through a TTL cache (the `Cache` strategy): once more after the TTL.
            written_at = delivery.written_at if delivery.written_at is not None else time.monotonic()
            for ttl in sorted({pod.node_ttl_s for pod in pods if pod.node_ttl_s > 0}):
                delivery.pending = {
                    pod.key: pod for pod in pods if pod.node_ttl_s == ttl and pod.key not in delivery.gone
                }
                delivery.failed = {}
                await asyncio.sleep(max(0.0, written_at + ttl + TTL_MARGIN_S - time.monotonic()))
                await self._round(delivery, f"{delivery.version}+ttl{ttl}")
                log.info(
                    "event=pods_updated_after_node_ttl job=%s version=%s ttl_s=%d failed=%d",
                    job_key,
                    delivery.version,
                    ttl,
                    len(delivery.failed),
                )
        except _NotLeaderError:
            return

    async def _round(self, delivery: _Delivery, value: str) -> None:
        """Patch every pending pod with `value`, retrying failures with backoff for `retry_s`."""
        started = time.monotonic()
        retries = 0
        while delivery.pending:
            await asyncio.gather(*(self._patch(delivery, pod, value) for pod in list(delivery.pending.values())))
            if not delivery.pending:
                return
            delay = min(FIRST_RETRY_S * 2.0**retries, MAX_RETRY_S)
            retries += 1
            if time.monotonic() + delay - started > self.retry_s:
                self.metrics.pod_updates.labels("given_up").inc(len(delivery.pending))
                delivery.pending = {}
                return
            await asyncio.sleep(delay)

    async def _patch(self, delivery: _Delivery, pod: PodRef, value: str) -> None:
        async with self._slots:
            if not self.is_leader():
                raise _NotLeaderError()
            # The UID makes the patch fail (422) on a pod that took over the name: only the table's pods are touched.
            patch = {"metadata": {"uid": pod.uid, "annotations": {RANK_TABLE_VERSION_ANNOTATION: value}}}
            try:
                await self.repo.patch_object(PODS, pod.namespace, pod.name, patch)
            except KubeError as exc:
                self._failed(delivery, pod, exc)
                return
        delivery.pending.pop(pod.key, None)
        delivery.failed.pop(pod.key, None)
        self.metrics.pod_updates.labels("updated").inc()
        if value == delivery.version:
            delivery.updated += 1
            delivery.last_updated_at = time.monotonic()

    def _failed(self, delivery: _Delivery, pod: PodRef, exc: KubeError) -> None:
        if exc.status == 404 or (exc.status == 422 and "metadata.uid" in str(exc)):
            # Deleted, or deleted and created again under the same name (Volcano reuses pod names).
            delivery.pending.pop(pod.key, None)
            delivery.gone.append(pod.key)
            self.metrics.pod_updates.labels("gone").inc()
            return
        first = pod.key not in delivery.failed
        delivery.failed[pod.key] = str(exc)
        delivery.forbidden |= exc.status == 403
        if exc.status == 422:
            delivery.pending.pop(pod.key, None)
            self.metrics.pod_updates.labels("refused").inc()
        else:
            self.metrics.pod_updates.labels("retried").inc()
        if first:
            log.warning(
                "event=pod_update_failed pod=%s version=%s error=%s retry=%s",
                pod.key,
                delivery.version,
                exc,
                "no" if exc.status == 422 else f"with backoff for up to {self.retry_s:g}s",
            )

    async def _finish(self, job_key: str, delivery: _Delivery) -> None:
        seconds = None
        if delivery.written_at is not None and delivery.last_updated_at is not None:
            seconds = delivery.last_updated_at - delivery.written_at
            self.metrics.table_to_pods.observe(seconds)
        log.info(
            "event=pods_updated job=%s version=%s updated=%d pods=%d gone=%d failed=%d seconds=%s",
            job_key,
            delivery.version,
            delivery.updated,
            delivery.total,
            len(delivery.gone),
            len(delivery.failed),
            "-" if seconds is None else f"{seconds:.3f}",
        )
        event_type: EventType = "Warning" if delivery.failed else "Normal"
        await self.report(job_key, _message(delivery, seconds, self.retry_s), event_type)


def _message(delivery: _Delivery, seconds: float | None, retry_s: float) -> str:
    """The RankTablePodsUpdated Event: how long from the write to the last pod updated, and what was not updated."""
    if seconds is not None:
        head = f"table written -> last pod updated {seconds:.2f} s"
    elif delivery.written_at is None:
        head = "pods updated for a table an earlier leader wrote"
    else:
        head = "no pod updated"
    text = (
        f"{head}: {delivery.updated} of {delivery.total} pods annotated {RANK_TABLE_VERSION_ANNOTATION}="
        f"{delivery.version}, so kubelet rewrites their table file now"
    )
    if delivery.gone:
        text += f"; {len(delivery.gone)} gone meanwhile ({', '.join(delivery.gone[:SHOWN_FAILURES])})"
    if delivery.failed:
        shown = "; ".join(f"pod {key}: {error}" for key, error in list(delivery.failed.items())[:SHOWN_FAILURES])
        more = len(delivery.failed) - SHOWN_FAILURES
        text += (
            f"; {len(delivery.failed)} not updated after retrying for up to {retry_s:g} s ({shown}"
            f"{f'; and {more} more' if more > 0 else ''}): kubelet rewrites their file at its next periodic sync, "
            "within about 90 s"
        )
        if delivery.forbidden:
            text += "; ringroute needs patch on pods (ClusterRole ringroute-jobs) and admission policies must allow it"
    return text


__all__ = ["NODE_TTL_ANNOTATION", "PodRef", "PodUpdater", "node_ttl_s", "table_version"]
