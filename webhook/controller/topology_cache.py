"""The fabric's topology as the controller sees it: built from its caches, once per change of what it is built from.

Sources, first match: HyperNodes (CRD installed, objects present), the configured MindCluster basic-tor-node-cm
ConfigMap, node labels. A rebuild that finds the same topology keeps the one it had (the same object), so what is
derived from it (the fabric ledger, the job networks' whole-topology sizes) is not derived again when only a node's
status changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from planner import Topology, topology_from_hypernodes, topology_from_nodes, topology_from_tor_configmap
from webhook.common.settings import TopologySettings
from webhook.kube.client import KubeRepository
from webhook.kube.informer import Informer, Obj, object_version


def build_topology(
    settings: TopologySettings,
    nodes: Sequence[Mapping[str, Any]],
    hypernodes: Sequence[Mapping[str, Any]],
    tor_configmap: Mapping[str, Any] | None,
) -> Topology:
    """The fabric from the first source present: HyperNodes, the MindCluster basic-tor-node-cm ConfigMap, or node
    labels (nodes without topology labels, such as CPU nodes, left out)."""
    if hypernodes:
        return topology_from_hypernodes(hypernodes, nodes, settings.fabric)
    if tor_configmap is not None:
        return topology_from_tor_configmap(tor_configmap, settings.fabric, nodes=nodes)
    return topology_from_nodes(nodes, settings.label_keys, settings.fabric, skip_unlabelled=True)


class TopologyCache:
    """The topology of the controller's caches, memoised by their generations."""

    def __init__(self, settings: TopologySettings, repo: KubeRepository, nodes: Informer) -> None:
        self.settings = settings
        self.repo = repo
        self.nodes = nodes
        self.hypernodes: Informer | None = None
        """Set when the HyperNode CRD is served."""
        self._cached: tuple[tuple[int, int, str], Topology] | None = None

    async def thunk(self) -> Callable[[], Topology]:
        """A function building the topology from the caches as they are now (run it in a worker thread)."""
        hyper = self.hypernodes
        settings = self.settings
        tor: Obj | None = None
        if settings.tor_configmap and not (hyper is not None and hyper.store):
            namespace, _, name = settings.tor_configmap.partition("/")
            tor = await self.repo.get_configmap(namespace, name)
        generation = (self.nodes.generation, hyper.generation if hyper is not None else -1, object_version(tor or {}))
        cached = self._cached
        if cached is not None and cached[0] == generation:
            found = cached[1]
            return lambda: found
        nodes = list(self.nodes.store.values())
        hypernodes = list(hyper.store.values()) if hyper is not None else []

        def build() -> Topology:
            topology = build_topology(settings, nodes, hypernodes, tor)
            if cached is not None and cached[1] == topology:
                topology = cached[1]  # the same fabric: keep the object whatever was derived from it hangs on
            self._cached = (generation, topology)
            return topology

        return build


__all__ = ["TopologyCache", "build_topology"]
