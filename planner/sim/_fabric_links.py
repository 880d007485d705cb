"""The whole fabric's switch links, indexed once, and the load other jobs put on the links of one job.

A job's `JobNetwork` numbers only the switches it touches; the jobs sharing a fabric meet on the same physical
links under different local numbers. `FabricLinks` numbers every switch link of a topology (tier-1 uplinks and
downlinks, and spine-core links in 3 tiers) as the network of all its nodes does, and maps any job's local link
ids onto it. `LinkBackground` is what a planning job needs of the rest: the load of every other job on the links
its flows may take, keyed by switch names (`tier1_switch_name`, `spine_switch_name`), so it crosses a process
boundary without the fabric index and lands on the job's network however that numbers its switches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from planner._errors import TopologyError
from planner._hash_model import spine_switch_name, tier1_switch_name
from planner._model import Topology
from planner.sim._network import JobNetwork, job_network

LinkDirection = Literal["up", "down"]


@dataclass(frozen=True, slots=True)
class LinkName:
    """A switch link in words: which switch, which next hop, which way."""

    tier: Literal["leaf", "spine"]
    """`leaf`: a tier-1 switch's link to spine `hop`; `spine`: a spine's link to core `hop` (3 tiers)."""
    switch: str
    """The tier-1 switch (`leaf-03`, `group-1/rail-2`) or the spine (`pod-1/spine-4`)."""
    hop: int
    direction: LinkDirection
    """`up`: towards the spine (core); `down`: from it."""

    def render(self) -> str:
        """`leaf-03 -> spine-5` (up), `spine-5 -> leaf-03` (down); cores likewise."""
        far = f"{'spine' if self.tier == 'leaf' else 'core'}-{self.hop}"
        return f"{self.switch} -> {far}" if self.direction == "up" else f"{far} -> {self.switch}"


@dataclass(frozen=True, eq=False)
class FabricLinks:
    """Every switch link of a topology: the link ids of the network of all its nodes (`JobNetwork`)."""

    network: JobNetwork
    leaf_index: Mapping[str, int]
    pod_index: Mapping[str, int]
    node_index: Mapping[str, int]

    @property
    def num_links(self) -> int:
        """Link ids run from 0 to this (NIC links first: they belong to one job each and stay empty here)."""
        return self.network.num_links

    def local_ids(self, network: JobNetwork) -> np.ndarray:
        """The fabric id of each of a job network's link ids; -1 for its NIC links (never shared)."""
        fabric = self.network
        if network.planes != fabric.planes or network.listed_tiers != fabric.listed_tiers:
            raise TopologyError("fabric: the job's network is not of this topology (layout or tiers differ)")
        out = np.full(network.num_links, -1, dtype=np.int64)
        leaves = np.array([self.leaf_index.get(name, -1) for name in network.leaf_names], dtype=np.int64)
        if (leaves < 0).any():
            raise TopologyError("fabric: the job's leaves are not all in this topology")
        planes, width = network.planes, network.max_uplinks
        switch = np.repeat(np.arange(len(network.leaf_names) * planes), width)
        spine = np.tile(np.arange(width), len(network.leaf_names) * planes)
        leaf, plane = np.divmod(switch, planes)
        exists = spine < network.leaf_uplinks[leaf]
        fabric_switch = leaves[leaf] * planes + plane
        for up in (True, False):
            local = network.leaf_link(switch, spine, up=up)
            out[local[exists]] = fabric.leaf_link(fabric_switch[exists], spine[exists], up=up)
        if network.listed_tiers == 2 and network.max_pod_uplinks:
            pods = np.array([self.pod_index.get(name, -1) for name in network.pod_names], dtype=np.int64)
            cores = network.max_pod_uplinks
            count = len(network.pod_names) * planes * width * cores
            flat = np.arange(count)
            rest, core = np.divmod(flat, cores)
            rest, spine = np.divmod(rest, width)
            pod, plane = np.divmod(rest, planes)
            exists = (spine < network.pod_spines[pod]) & (core < network.pod_uplinks[pod])
            for up in (True, False):
                local = network.spine_link(pod, plane, spine, core, up=up)
                out[local[exists]] = fabric.spine_link(
                    pods[pod[exists]], plane[exists], spine[exists], core[exists], up=up
                )
        return out

    def name(self, link: int) -> LinkName:
        """The link of fabric id `link` in words (a switch link: NIC ids raise ValueError)."""
        return link_name(self.network, link)


def link_name(net: JobNetwork, link: int) -> LinkName:
    """Switch link `link` of a network in words (NIC links raise ValueError)."""
    first = net.first_switch_link
    tier1 = len(net.leaf_names) * net.planes * net.max_uplinks
    offset = int(link) - first
    if offset < 0:
        raise ValueError(f"link {link}: a NIC link, not a switch link")
    if offset < 2 * tier1:
        direction: LinkDirection = "up" if offset < tier1 else "down"
        switch, hop = divmod(offset % tier1, net.max_uplinks)
        leaf, plane = divmod(switch, net.planes)
        rail = plane if net.layout == "rail" else None
        return LinkName("leaf", tier1_switch_name(net.leaf_names[leaf], rail), hop, direction)
    offset -= 2 * tier1
    tier2 = len(net.pod_names) * net.planes * net.max_uplinks * net.max_pod_uplinks
    direction = "up" if offset < tier2 else "down"
    rest, core = divmod(offset % tier2, net.max_pod_uplinks)
    rest, spine = divmod(rest, net.max_uplinks)
    pod, plane = divmod(rest, net.planes)
    rail = plane if net.layout == "rail" else None
    return LinkName("spine", spine_switch_name(net.pod_names[pod], rail, spine), core, direction)


def fabric_links(topology: Topology) -> FabricLinks:
    """Index every switch link of `topology` (raises TopologyError for an empty or unsupported topology)."""
    nodes = sorted(topology.paths)
    network = job_network(topology, nodes)
    return FabricLinks(
        network,
        {name: i for i, name in enumerate(network.leaf_names)},
        {name: i for i, name in enumerate(network.pod_names)},
        {name: i for i, name in enumerate(network.nodes)},
    )


@dataclass(frozen=True, eq=False)
class LinkBackground:
    """Other jobs' load (in flows) on the links a job may use: uplinks of its tier-1 switches, and across pods the
    core links of its pods' spines. Rows are switches by name; column j is uplink j (spine j, core j)."""

    switches: tuple[str, ...]
    """Tier-1 switch names (`tier1_switch_name`)."""
    up: np.ndarray
    """(switches, width) load on each switch's uplink j towards spine j."""
    down: np.ndarray
    """(switches, width) load on spine j's downlink to the switch."""
    spines: tuple[str, ...] = ()
    """Spine names (`spine_switch_name`), 3 tiers only."""
    core_up: np.ndarray | None = None
    """(spines, width) load on each spine's uplink c towards core c."""
    core_down: np.ndarray | None = None
    jobs: int = 0
    """Jobs whose traffic this is."""
    version: int = 0
    """The ledger version it was read at (`FabricLedger.version`)."""

    @property
    def is_empty(self) -> bool:
        """No other job loads any of these links."""
        return not (self.up.any() or self.down.any() or (self.core_up is not None and self.core_up.any()))

    def on(self, network: JobNetwork) -> np.ndarray:
        """The background load of every link id of `network` (0 on NIC links and on links it does not list)."""
        out = np.zeros(network.num_links)
        row = {name: i for i, name in enumerate(self.switches)}
        rail = network.layout == "rail"
        for leaf, leaf_name in enumerate(network.leaf_names):
            for plane in range(network.planes):
                found = row.get(tier1_switch_name(leaf_name, plane if rail else None))
                if found is None:
                    continue
                count = min(int(network.leaf_uplinks[leaf]), self.up.shape[1])
                switch = np.full(count, leaf * network.planes + plane)
                hops = np.arange(count)
                out[network.leaf_link(switch, hops, up=True)] = self.up[found, :count]
                out[network.leaf_link(switch, hops, up=False)] = self.down[found, :count]
        if self.spines and self.core_up is not None and self.core_down is not None and network.max_pod_uplinks:
            spine_row = {name: i for i, name in enumerate(self.spines)}
            for pod, pod_name in enumerate(network.pod_names):
                cores = min(int(network.pod_uplinks[pod]), self.core_up.shape[1])
                for plane in range(network.planes):
                    for spine in range(int(network.pod_spines[pod])):
                        found = spine_row.get(spine_switch_name(pod_name, plane if rail else None, spine))
                        if found is None:
                            continue
                        core = np.arange(cores)
                        at = (np.full(cores, pod), np.full(cores, plane), np.full(cores, spine))
                        out[network.spine_link(*at, core, up=True)] = self.core_up[found, :cores]
                        out[network.spine_link(*at, core, up=False)] = self.core_down[found, :cores]
        return out


def background_from_loads(
    links: FabricLinks, loads: np.ndarray, nodes: Sequence[str], *, jobs: int = 0, version: int = 0
) -> LinkBackground:
    """The part of fabric-wide `loads` (indexed by fabric link ids) on the links a job on `nodes` may use."""
    fabric = links.network
    leaf_rows: list[int] = []
    pods: set[int] = set()
    for node in dict.fromkeys(nodes):
        at = links.node_index.get(node)
        if at is None:
            raise TopologyError(f"fabric: node {node!r} is not in the topology")
        leaf = int(fabric.server_leaf[at])
        if leaf not in leaf_rows:
            leaf_rows.append(leaf)
        pods.add(int(fabric.server_pod[at]))
    planes, width = fabric.planes, fabric.max_uplinks
    rail = fabric.layout == "rail"
    names: list[str] = []
    switch_ids: list[int] = []
    for leaf in leaf_rows:
        for plane in range(planes):
            names.append(tier1_switch_name(fabric.leaf_names[leaf], plane if rail else None))
            switch_ids.append(leaf * planes + plane)
    switches = np.repeat(np.asarray(switch_ids, dtype=np.int64), width)
    hops = np.tile(np.arange(width), len(switch_ids))
    up = loads[fabric.leaf_link(switches, hops, up=True)].reshape(len(switch_ids), width)
    down = loads[fabric.leaf_link(switches, hops, up=False)].reshape(len(switch_ids), width)
    exists = hops.reshape(len(switch_ids), width) < fabric.leaf_uplinks[switches // planes].reshape(-1, width)
    up, down = np.where(exists, up, 0.0), np.where(exists, down, 0.0)
    if fabric.listed_tiers != 2 or not fabric.max_pod_uplinks:
        return LinkBackground(tuple(names), up, down, jobs=jobs, version=version)
    spine_names: list[str] = []
    rows: list[tuple[int, int, int]] = []
    for pod in sorted(pods):
        for plane in range(planes):
            for spine in range(int(fabric.pod_spines[pod])):
                spine_names.append(spine_switch_name(fabric.pod_names[pod], plane if rail else None, spine))
                rows.append((pod, plane, spine))
    cores = fabric.max_pod_uplinks
    table = np.asarray(rows, dtype=np.int64).reshape(-1, 3)
    pod_of, plane_of, spine_of = (np.repeat(table[:, k], cores) for k in range(3))
    core = np.tile(np.arange(cores), len(rows))
    core_up = loads[fabric.spine_link(pod_of, plane_of, spine_of, core, up=True)].reshape(len(rows), cores)
    core_down = loads[fabric.spine_link(pod_of, plane_of, spine_of, core, up=False)].reshape(len(rows), cores)
    valid = core.reshape(len(rows), cores) < fabric.pod_uplinks[pod_of].reshape(-1, cores)
    return LinkBackground(
        tuple(names),
        up,
        down,
        tuple(spine_names),
        np.where(valid, core_up, 0.0),
        np.where(valid, core_down, 0.0),
        jobs=jobs,
        version=version,
    )


__all__ = ["FabricLinks", "LinkBackground", "LinkName", "background_from_loads", "fabric_links", "link_name"]
