"""Domain objects shared by every planner module: what was placed, and the network it sits on.

Everything here is a frozen dataclass of plain values so that plans are reproducible and hashable.
Wire formats (Kubernetes objects, rank tables) are converted to these at the edge, once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, TypeVar

K = TypeVar("K")
V = TypeVar("V")

Layout = Literal["tor", "rail"]
"""`tor`: every NIC of a server on the same tier-1 switch; `rail`: NIC d on rail switch d of its group."""

Pattern = Literal["ring", "halving-doubling", "mixed"]
"""Collective traffic pattern between servers (replicated on every NIC/rail)."""

Routing = Literal["ecmp", "slice", "pinned"]
"""How cross-leaf flows pick their uplink: hashed, static by port slot (NSLB), or chosen by ringroute."""


@dataclass(frozen=True, slots=True)
class Device:
    """One NPU of a server as the device plugin reports it."""

    device_id: int
    """Numeric device id on the server (the rank table sorts by it)."""
    device_ip: str
    """IP of the NPU's RoCE port; never "-1" in a Device (that means the plugin failed)."""
    super_device_id: str | None = None
    """Super-pod wide device id (rank table 1.2, Snt9b23); None on 910B."""


@dataclass(frozen=True, slots=True)
class Server:
    """One placed NPU pod: a `server_list` entry of the rank table."""

    pod_name: str
    node_name: str
    server_id: str
    """What the rank table calls the server: the plugin's `server_id` (node IP on older plugins)."""
    host_ip: str | None
    """Node IP (`status.hostIP` or the plugin's `host_ip`)."""
    pod_ip: str | None
    """Pod IP (`status.podIP`), the table's `container_ip` and the launcher's MASTER_ADDR."""
    task_name: str
    task_index: int
    devices: tuple[Device, ...]
    """Sorted by numeric device_id."""
    super_pod_id: str | None = None
    """Super-pod the node belongs to (rank table 1.2)."""


@dataclass(frozen=True, slots=True)
class IgnoredPod:
    """An NPU pod that was read but left out of the placement on purpose, and why."""

    pod: str
    """`namespace/name` of the pod."""
    reason: str
    """Short machine-readable name: other-job, other-job-uid, older-job-version, terminated, being-deleted."""
    detail: str
    """Which job, version or phase it belongs to, in words."""

    def render(self) -> str:
        """One line: `pod ns/name: reason: detail`."""
        return f"pod {self.pod}: {self.reason}: {self.detail}"


@dataclass(frozen=True, slots=True)
class Placement:
    """A job's NPU pods after scheduling, in pod-index order (task order, then task index)."""

    job_name: str
    namespace: str
    servers: tuple[Server, ...]
    master: int = 0
    """Index into `servers` of the pod MASTER_ADDR names (task index 0 of the first NPU task); it gets rank 0."""
    ignored_pods: tuple[IgnoredPod, ...] = ()
    """NPU pods read with the job's but left out (another job, job UID or version; terminated), for reports."""

    @property
    def devices_per_server(self) -> int:
        """Devices on each server (the rank table requires the same count everywhere)."""
        return len(self.servers[0].devices) if self.servers else 0


@dataclass(frozen=True, slots=True)
class Fabric:
    """Fabric facts that node labels do not carry; admins set them, defaults describe a 1:1 Clos."""

    layout: Layout = "tor"
    """Where a server's NICs attach: all to one leaf (`tor`) or NIC d to rail switch d (`rail`)."""
    nics_per_server: int = 8
    """RoCE ports per server, one per NPU on Ascend servers."""
    link_gbps: float = 200.0
    """Line rate of every link (NIC and switch-to-switch), in Gbit/s."""
    leaf_oversubscription: float = 1.0
    """Tier-1 downlink capacity over uplink capacity (2.0 = 2:1). Uplinks = ceil(down ports / this)."""
    spine_oversubscription: float = 1.0
    """Tier-2 downlink capacity over uplink capacity towards tier 3 (3-tier fabrics only)."""
    leaf_uplinks: int | None = None
    """Explicit uplinks per tier-1 switch; None derives them from the ports under it and the oversubscription."""


@dataclass(frozen=True, slots=True)
class Topology:
    """Where every server of the cluster sits, as a tree of switch domains.

    `paths[node]` lists the node's domain ids from tier 1 (leaf / ToR, or rail group in a rail layout)
    upwards. The switch layer above the last listed domain is implicit and joins all of them: `("leaf-3",)`
    is a 2-tier Clos (leaves + one spine layer), `("leaf-3", "pod-1")` a 3-tier fabric (leaves, spines per pod,
    a core layer). Every node has the same number of listed tiers; ids are unique per tier.
    The topology describes the whole cluster (or at least every server under the job's switches) so that
    switch sizes and uplink counts are known, not only the job's servers.
    """

    paths: Mapping[str, tuple[str, ...]]
    slots: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    """Port slot (NSLB slice id) of a node on its leaf; nodes not listed take their rank in name order."""
    fabric: Fabric = Fabric()
    source: str = "unknown"
    """Where the topology came from (labels, hypernodes, tor-configmap, file), for reports."""

    def __post_init__(self) -> None:
        # read-only views, so a frozen topology stays unchanged (and pickles: `__reduce__`)
        for name in ("paths", "slots"):
            value = getattr(self, name)
            if not isinstance(value, MappingProxyType):
                object.__setattr__(self, name, MappingProxyType(dict(value)))

    def __reduce__(self) -> tuple[type[Topology], tuple[dict[str, tuple[str, ...]], dict[str, int], Fabric, str]]:
        # MappingProxyType does not pickle; the controller hands topologies to its planning process.
        return (Topology, (dict(self.paths), dict(self.slots), self.fabric, self.source))

    @property
    def tiers(self) -> int:
        """Number of listed domain tiers (switch tiers minus the implicit top layer; 0 when empty)."""
        return len(next(iter(self.paths.values()))) if self.paths else 0

    def leaf_of(self, node: str) -> str:
        """Tier-1 domain of a node."""
        return self.paths[node][0]


def frozen_mapping(items: Mapping[K, V]) -> Mapping[K, V]:
    """A read-only copy, for mappings stored in frozen dataclasses."""
    return MappingProxyType(dict(items))
