"""Small builders for placements and topologies used by the planner-core tests."""

from __future__ import annotations

from collections.abc import Sequence

from planner._model import Device, Fabric, Placement, Server, Topology, frozen_mapping


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
        paths=frozen_mapping(paths), slots=frozen_mapping(node_slots), fabric=fabric or Fabric(), source="test"
    )


def make_placement(nodes: Sequence[str], *, master: int = 0, devices: int = 2) -> Placement:
    """One pod per node, in the given (pod-index) order."""
    servers = tuple(
        Server(
            pod_name=f"job-worker-{i}",
            node_name=node,
            server_id=f"10.0.{i // 250}.{i % 250 + 1}",
            host_ip=f"10.0.{i // 250}.{i % 250 + 1}",
            pod_ip=f"10.1.{i // 250}.{i % 250 + 1}",
            task_name="worker",
            task_index=i,
            devices=tuple(Device(device_id=d, device_ip=f"10.2.{i % 250}.{d + 1}") for d in range(devices)),
        )
        for i, node in enumerate(nodes)
    )
    return Placement(job_name="job", namespace="default", servers=servers, master=master)
