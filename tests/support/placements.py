"""Builders of placements and topologies for the planner, controller and extender tests."""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType

import numpy as np

from planner import Device, Fabric, Placement, Server, Topology


def worker_placement(
    job_name: str,
    nodes: Sequence[str],
    *,
    namespace: str = "default",
    devices_per_server: int = 8,
    pod_network: str = "172.16",
    device_network: str = "192.168",
    master: int = 0,
) -> Placement:
    """A synthetic job's placement: pod `<job_name>-worker-<i>` (task "worker", index i) on `nodes[i]`.

    Server and host IPs are `10.0.<i // 250>.<i % 250 + 1>`, pod IPs `<pod_network>.<i // 250>.<i % 250 + 1>`,
    and card d of pod i has device ID d and IP `<device_network>.<i % 250>.<d + 1>`.
    """
    servers = tuple(
        Server(
            pod_name=f"{job_name}-worker-{i}",
            node_name=node,
            server_id=f"10.0.{i // 250}.{i % 250 + 1}",
            host_ip=f"10.0.{i // 250}.{i % 250 + 1}",
            pod_ip=f"{pod_network}.{i // 250}.{i % 250 + 1}",
            task_name="worker",
            task_index=i,
            devices=tuple(
                Device(device_id=d, device_ip=f"{device_network}.{i % 250}.{d + 1}") for d in range(devices_per_server)
            ),
        )
        for i, node in enumerate(nodes)
    )
    return Placement(job_name=job_name, namespace=namespace, servers=servers, master=master)


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


def ring_crossings(codes: np.ndarray, order: tuple[int, ...] | list[int]) -> list[int]:
    """Reference count, written independently of the planner: ring edges whose ends differ at each tier."""
    n = len(order)
    return [
        sum(1 for r in range(n) if n > 1 and codes[order[r], t] != codes[order[(r + 1) % n], t])
        for t in range(codes.shape[1])
    ]
