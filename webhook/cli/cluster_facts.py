"""What admission knows of the cluster, kept current for each serving process: the HyperNodes and the NPU capacity
of the Nodes, from two watches, handed to admission as one immutable snapshot (`ClusterFacts`).

Admission holds no API client (its import contract forbids one): this module, part of the serving process, holds
the watches and replaces `AdmissionHandlers.cluster_facts` whole after each change that matters (a HyperNode
added, changed or removed; a Node added or removed, relabelled, or with another allocatable count of a profile's
resource). Node status heartbeats change nothing admission reads and are ignored. The snapshot is rebuilt in a
worker thread, at most one at a time, a short while after the last change, so a burst of changes costs one
rebuild and the event loop keeps answering admission requests meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from webhook.admission.policy.network_topology import ClusterFacts, TopologyFacts, topology_facts
from webhook.kube.client import HYPERNODES, NODES, KubeError, KubeRepository, sleep_or_stop
from webhook.kube.informer import Informer, Obj

if TYPE_CHECKING:
    from webhook.common.settings import Settings

log = logging.getLogger("ringroute.cluster_facts")

REBUILD_DELAY_S = 0.2
"""Wait this long after a change before rebuilding, so a burst of changes (a rack of nodes joining) costs one."""
CRD_CHECK_INTERVAL_S = 10.0
"""How often to look for the HyperNode CRD while the cluster has none (Volcano installed later)."""
FIRST_SYNC_TIMEOUT_S = 10.0
"""How long the serving process waits for the first snapshot before it listens (it listens anyway after that,
without one, and admission asks Volcano for no network topology until one arrives)."""


def slim_node(resources: frozenset[str]) -> Callable[[Obj], Obj]:
    """What the Node cache keeps: name, labels (HyperNode labelMatch selectors read them), resourceVersion, and
    the allocatable amounts of the profiles' resources."""

    def keep(node: Obj) -> Obj:
        metadata = node.get("metadata") or {}
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        return {
            "metadata": {
                "name": metadata.get("name"),
                "labels": metadata.get("labels") or {},
                "resourceVersion": metadata.get("resourceVersion"),
            },
            "status": {"allocatable": {r: allocatable[r] for r in resources if r in allocatable}},
        }

    return keep


def _same(obj: Obj, old: Obj | None) -> bool:
    """Two kept Nodes that differ only in resourceVersion."""
    if old is None:
        return False
    return (obj.get("metadata") or {}).get("labels") == (old.get("metadata") or {}).get("labels") and obj.get(
        "status"
    ) == old.get("status")


class ClusterFactsWatch:
    """Watches HyperNodes and Nodes and hands admission a fresh `ClusterFacts` after every change that matters."""

    def __init__(
        self,
        repository: KubeRepository,
        settings: Settings,
        publish: Callable[[ClusterFacts], None],
        *,
        rebuild_delay_s: float = REBUILD_DELAY_S,
        crd_check_interval_s: float = CRD_CHECK_INTERVAL_S,
    ) -> None:
        self.repository = repository
        self.publish = publish
        self.resources = frozenset(profile.resource_name for profile in settings.profiles)
        self.rebuild_delay_s = rebuild_delay_s
        self.crd_check_interval_s = crd_check_interval_s
        self.hypernodes: Informer | None = None
        self.nodes: Informer | None = None
        self.synced = asyncio.Event()
        """Set once the first snapshot is published (or the cluster turned out to have no HyperNode CRD)."""
        self.rebuilds = 0
        self._dirty = asyncio.Event()
        self._last: TopologyFacts | None = None
        self._problems: tuple[str, ...] = ()

    async def run(self, stop: asyncio.Event) -> None:
        """Until `stop`: wait for the HyperNode CRD, then watch HyperNodes and Nodes and rebuild on change."""
        while not await self._crd_present():
            self.synced.set()  # no CRD: nothing to wait for; admission asks for no network topology
            if await sleep_or_stop(stop, self.crd_check_interval_s):
                return
        self.hypernodes = Informer(self.repository, HYPERNODES, self._on_hypernode)
        self.nodes = Informer(self.repository, NODES, self._on_node, keep=slim_node(self.resources))
        tasks = [
            asyncio.create_task(self.hypernodes.run(), name="admission-hypernodes"),
            asyncio.create_task(self.nodes.run(), name="admission-nodes"),
            asyncio.create_task(self._rebuild_loop(), name="admission-cluster-facts"),
        ]
        try:
            await stop.wait()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _crd_present(self) -> bool:
        try:
            return await self.repository.has_resource(HYPERNODES)
        except KubeError as exc:
            log.warning("event=cluster_facts_failed error=%s action=retrying", exc)
            return False

    def _on_hypernode(self, _event: str, _obj: Obj, _old: Obj | None) -> None:
        self._dirty.set()

    def _on_node(self, event: str, obj: Obj, old: Obj | None) -> None:
        if event == "MODIFIED" and _same(obj, old):
            return  # a status heartbeat: nothing admission reads changed
        self._dirty.set()

    async def _rebuild_loop(self) -> None:
        assert self.hypernodes is not None
        assert self.nodes is not None
        await asyncio.gather(self.hypernodes.synced.wait(), self.nodes.synced.wait())
        self._dirty.set()
        while True:
            await self._dirty.wait()
            await asyncio.sleep(self.rebuild_delay_s)
            self._dirty.clear()
            hypernodes = list(self.hypernodes.store.values())
            nodes = list(self.nodes.store.values())
            started = time.perf_counter()
            try:
                facts = await asyncio.to_thread(topology_facts, hypernodes, nodes, self.resources)
            except Exception:
                log.exception("event=cluster_facts_failed action=keeping_last_snapshot")
                continue
            self.rebuilds += 1
            self._announce(facts, time.perf_counter() - started)
            self.publish(ClusterFacts(topology=facts))
            self.synced.set()

    def _announce(self, facts: TopologyFacts, seconds: float) -> None:
        """Log a snapshot that differs from the last one, and HyperNode problems once each."""
        if facts != self._last:
            log.info(
                "event=cluster_facts hypernodes=%d tiers=%s nodes=%d rebuild_ms=%.1f",
                len(facts.domains),
                ",".join(map(str, facts.tiers)) or "-",
                facts.cluster.nodes,
                seconds * 1000.0,
            )
        for problem in facts.problems:
            if problem not in self._problems:
                log.warning("event=hypernode_problem detail=%r", problem)
        self._problems = facts.problems
        self._last = facts


async def start_cluster_facts(
    repository: KubeRepository, settings: Settings, publish: Callable[[ClusterFacts], None], stop: asyncio.Event
) -> asyncio.Task[Any]:
    """Start the watch and wait (up to FIRST_SYNC_TIMEOUT_S) for the first snapshot; returns the running task."""
    watch = ClusterFactsWatch(repository, settings, publish)
    task = asyncio.create_task(watch.run(stop), name="cluster-facts")
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(watch.synced.wait(), FIRST_SYNC_TIMEOUT_S)
    if not watch.synced.is_set():
        log.warning(
            "event=cluster_facts_late waited_s=%.0f detail=listening without HyperNode facts", FIRST_SYNC_TIMEOUT_S
        )
    return task


__all__ = [
    "CRD_CHECK_INTERVAL_S",
    "FIRST_SYNC_TIMEOUT_S",
    "REBUILD_DELAY_S",
    "ClusterFactsWatch",
    "slim_node",
    "start_cluster_facts",
]
