"""Tiny hand-made topologies for simulator tests (node `n<leaf>-<slot>`, leaves `leaf-<i>`, pods `pod-<j>`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from planner import Fabric, JobNetwork, Layout, Topology, job_network


def clos(
    servers_per_leaf: Sequence[int],
    *,
    nics: int = 1,
    layout: Layout = "tor",
    oversubscription: float = 1.0,
    leaf_uplinks: int | None = None,
    leaves_per_pod: int | None = None,
    spine_oversubscription: float = 1.0,
    slots: Mapping[str, int] | None = None,
) -> Topology:
    """Leaves with the given server counts; with `leaves_per_pod`, a 3-tier fabric."""
    paths: dict[str, tuple[str, ...]] = {}
    for leaf, count in enumerate(servers_per_leaf):
        path: tuple[str, ...] = (f"leaf-{leaf}",)
        if leaves_per_pod is not None:
            path = (f"leaf-{leaf}", f"pod-{leaf // leaves_per_pod}")
        for slot in range(count):
            paths[f"n{leaf}-{slot}"] = path
    fabric = Fabric(
        layout=layout,
        nics_per_server=nics,
        leaf_oversubscription=oversubscription,
        spine_oversubscription=spine_oversubscription,
        leaf_uplinks=leaf_uplinks,
    )
    return Topology(paths=paths, slots=dict(slots or {}), fabric=fabric)


def network(topology: Topology) -> JobNetwork:
    """The network of every server of the topology, in leaf then slot order."""
    return job_network(topology, list(topology.paths))
