"""Small builders for placements and topologies used by the planner core tests."""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType

from planner import Fabric, Placement, Topology
from webhook.cli_extender import worker_placement


def make_topology(
    leaf_sizes: Sequence[int],
    *,
    leaves_per_pod: int | None = None,
    slots: Sequence[Sequence[int]] | None = None,
    fabric: Fabric | None = None,
) -> Topology:
    """Nodes `n<leaf>-<i>` under leaves `leaf-<j>` (and pods `pod-<j // leaves_per_pod>` when given)."""
    paths: dict[str, tuple[str, ...]] = {}
    node_slots: dict[str, int] = {}
    for leaf, size in enumerate(leaf_sizes):
        for i in range(size):
            node = f"n{leaf:03d}-{i:02d}"
            path: tuple[str, ...] = (f"leaf-{leaf}",)
            if leaves_per_pod is not None:
                path += (f"pod-{leaf // leaves_per_pod}",)
            paths[node] = path
            if slots is not None:
                node_slots[node] = slots[leaf][i]
    return Topology(
        paths=MappingProxyType(paths), slots=MappingProxyType(node_slots), fabric=fabric or Fabric(), source="test"
    )


def make_placement(nodes: Sequence[str], *, master: int = 0, devices: int = 2) -> Placement:
    """One pod per node, in the given (pod-index) order."""
    return worker_placement(
        "job", nodes, devices_per_server=devices, pod_network="10.1", device_network="10.2", master=master
    )
