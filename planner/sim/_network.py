"""The network a job's flows cross: tier-1 switches, their uplinks to spines, and (3 tiers) spine uplinks to cores.

Model (docs/simulator.md has the long version). Every link has the same line rate, capacity 1.0.
- A tier-1 switch is a leaf (ToR layout: all N NICs of a server on it) or a rail switch (rail layout: NIC d of
  every server of a rail group on rail switch (group, d)). Rails never meet below the spines of their own rail,
  so the rail layout is N independent *planes*; the ToR layout is one plane.
- Uplinks U of a tier-1 switch: `Fabric.leaf_uplinks`, or ceil(ports under it / leaf_oversubscription), where
  ports = servers under it in the whole topology x N (ToR) or servers in the group (rail).
- 2 tiers: uplink j of every tier-1 switch of a plane goes to spine j of that plane. A cross-leaf flow picks a
  spine j and uses links up(leaf_a, j) and down(leaf_b, j).
- 3 tiers: leaves are grouped in pods (path[1]); spine j of pod P has V = ceil(leaves in pod /
  spine_oversubscription) uplinks, uplink c to core c of core plane j. A cross-pod flow picks j and c and uses
  up(leaf_a, j), up(P, j, c), down(Q, j, c), down(leaf_b, j).
- Server NIC links (one per NIC and direction) are modelled too; one flow per NIC and direction never makes
  them the bottleneck.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planner._errors import TopologyError
from planner._model import Layout, Topology

IntArray = np.ndarray

LINK_TIER_NIC = 0
"""`JobNetwork.link_tier` value of a server NIC link."""
LINK_TIER_LEAF = 1
"""`JobNetwork.link_tier` value of a tier-1 switch <-> spine link."""
LINK_TIER_SPINE = 2
"""`JobNetwork.link_tier` value of a spine <-> core link (3-tier fabrics)."""


@dataclass(frozen=True, eq=False)
class JobNetwork:
    """The switches and links a job's servers can use, indexed for vectorised simulation.

    Server index i is `nodes[i]` (the order of `job_network`'s `nodes`, i.e. `Placement.servers`). Switch sizes
    and uplink counts come from the whole topology, not only the job's servers.
    """

    nodes: tuple[str, ...]
    layout: Layout
    nics: int
    """NICs per server, N; every server-level flow is replicated on each (flow (src, d) -> (dst, d))."""
    listed_tiers: int
    """Domain tiers in the topology paths: 1 = 2-tier Clos, 2 = 3-tier (pods + core)."""
    leaf_names: tuple[str, ...]
    """Tier-1 domains the job touches (leaves; rail groups in the rail layout)."""
    pod_names: tuple[str, ...]
    """Tier-2 domains (pods) the job touches; a single implicit pod in a 2-tier fabric."""
    server_leaf: IntArray
    server_pod: IntArray
    server_slot: IntArray
    """Port slot (NSLB slice id) of each server on its leaf."""
    leaf_pod: IntArray
    leaf_uplinks: IntArray
    """U of each tier-1 switch (the same for every rail switch of a group)."""
    leaf_position: IntArray
    """Index of each leaf among all leaves of its pod in the whole topology (the spine port it arrives on)."""
    pod_uplinks: IntArray
    """V of the spines of each pod (uplinks to the core); 0 in a 2-tier fabric."""
    pod_spines: IntArray
    """Spines per plane in each pod (the largest U of the pod's leaves in the whole topology)."""

    # -- sizes and link-id layout -------------------------------------------------------------------------

    @property
    def servers(self) -> int:
        """Number of the job's servers."""
        return len(self.nodes)

    @property
    def planes(self) -> int:
        """Independent switch planes: N in the rail layout, 1 in the ToR layout."""
        return self.nics if self.layout == "rail" else 1

    @property
    def switch_tiers(self) -> int:
        """Switch tiers of the fabric: 2 or 3."""
        return self.listed_tiers + 1

    @property
    def max_uplinks(self) -> int:
        """Largest U of the job's tier-1 switches."""
        return int(self.leaf_uplinks.max()) if self.leaf_uplinks.size else 0

    @property
    def max_pod_uplinks(self) -> int:
        """Largest V of the job's pods (0 in 2 tiers)."""
        return int(self.pod_uplinks.max()) if self.pod_uplinks.size else 0

    @property
    def _tier1_links(self) -> int:
        return len(self.leaf_names) * self.planes * self.max_uplinks

    @property
    def _tier2_links(self) -> int:
        return len(self.pod_names) * self.planes * self.max_uplinks * self.max_pod_uplinks

    @property
    def _nic_links(self) -> int:
        return self.servers * self.nics

    @property
    def num_links(self) -> int:
        """Number of directed links: NIC up/down, tier-1 up/down, tier-2 up/down."""
        return 2 * (self._nic_links + self._tier1_links + self._tier2_links)

    @property
    def first_switch_link(self) -> int:
        """Smallest switch link id (NIC links come first in the id layout)."""
        return 2 * self._nic_links

    def nic_link(self, server: IntArray, nic: IntArray, *, up: bool) -> IntArray:
        """Link ids of server NIC links (up = server -> switch)."""
        base = 0 if up else self._nic_links
        ids: IntArray = base + server * self.nics + nic
        return ids

    def tier1_switch(self, server: IntArray, nic: IntArray) -> IntArray:
        """Tier-1 switch id (leaf x plane) a server's NIC attaches to."""
        plane = nic if self.layout == "rail" else np.zeros_like(nic)
        ids: IntArray = self.server_leaf[server] * self.planes + plane
        return ids

    def leaf_link(self, switch: IntArray, spine: IntArray, *, up: bool) -> IntArray:
        """Link ids between tier-1 switch `switch` (leaf x plane) and spine `spine` of its plane."""
        base = 2 * self._nic_links + (0 if up else self._tier1_links)
        ids: IntArray = base + switch * self.max_uplinks + spine
        return ids

    def spine_link(self, pod: IntArray, plane: IntArray, spine: IntArray, core: IntArray, *, up: bool) -> IntArray:
        """Link ids between spine (pod, plane, spine) and core `core` of core plane (plane, spine)."""
        base = 2 * (self._nic_links + self._tier1_links) + (0 if up else self._tier2_links)
        ids: IntArray = base + ((pod * self.planes + plane) * self.max_uplinks + spine) * self.max_pod_uplinks + core
        return ids

    @property
    def link_tier(self) -> IntArray:
        """Tier of every link id: LINK_TIER_NIC, LINK_TIER_LEAF or LINK_TIER_SPINE."""
        return np.concatenate(
            [
                np.full(2 * self._nic_links, LINK_TIER_NIC),
                np.full(2 * self._tier1_links, LINK_TIER_LEAF),
                np.full(2 * self._tier2_links, LINK_TIER_SPINE),
            ]
        )

    def cross_domains(self, src: IntArray, dst: IntArray) -> tuple[IntArray, IntArray]:
        """Masks of server pairs on different leaves and on different pods."""
        cross_leaf = self.server_leaf[src] != self.server_leaf[dst]
        cross_pod = self.server_pod[src] != self.server_pod[dst]
        return cross_leaf, cross_pod

    def domain_of(self, tier: int) -> IntArray:
        """Domain index of every server at listed tier `tier` (0 = leaf, 1 = pod)."""
        return self.server_leaf if tier == 0 else self.server_pod


def _slots_by_leaf(topology: Topology) -> dict[str, int]:
    """Port slot of every node: `Topology.slots`, else its rank among its leaf's nodes in name order."""
    by_leaf: dict[str, list[str]] = {}
    for node, path in topology.paths.items():
        by_leaf.setdefault(path[0], []).append(node)
    slots: dict[str, int] = {}
    for members in by_leaf.values():
        for rank, node in enumerate(sorted(members)):
            slots[node] = int(topology.slots.get(node, rank))
    return slots


@dataclass(frozen=True, eq=False)
class _TopologyFacts:
    """What every job network of one topology derives from the whole topology: computed once per topology."""

    pod_of_leaf: dict[str, str]
    leaves_in_pod: dict[str, list[str]]
    position: dict[str, int]
    """Index of each leaf among its pod's leaves in name order (the spine port it arrives on)."""
    slots: dict[str, int]
    uplinks: dict[str, int]
    """U of every leaf."""
    pod_spines: dict[str, int]


_FACTS: OrderedDict[int, tuple[Topology, _TopologyFacts]] = OrderedDict()
_FACTS_KEPT = 8
"""Topologies whose facts are kept (a strong reference each, so an id is never reused while cached)."""
_FACTS_LOCK = threading.Lock()


def _topology_facts(topology: Topology) -> _TopologyFacts:
    """The whole-topology sizes of `topology` (cached: a 10,000-node topology takes 20 ms, a job network 0.1)."""
    with _FACTS_LOCK:
        found = _FACTS.get(id(topology))
        if found is not None and found[0] is topology:
            _FACTS.move_to_end(id(topology))
            return found[1]
    tiers, fabric = topology.tiers, topology.fabric
    nics = fabric.nics_per_server
    servers_on_leaf: dict[str, int] = {}
    pod_of_leaf: dict[str, str] = {}
    for path in topology.paths.values():
        servers_on_leaf[path[0]] = servers_on_leaf.get(path[0], 0) + 1
        pod_of_leaf[path[0]] = path[1] if tiers == 2 else ""
    leaves_in_pod: dict[str, list[str]] = {}
    for leaf, pod in pod_of_leaf.items():
        leaves_in_pod.setdefault(pod, []).append(leaf)
    position = {leaf: i for members in leaves_in_pod.values() for i, leaf in enumerate(sorted(members))}

    def uplinks_of(leaf: str) -> int:
        if fabric.leaf_uplinks is not None:
            return fabric.leaf_uplinks
        ports = servers_on_leaf[leaf] * (nics if fabric.layout == "tor" else 1)
        return max(1, math.ceil(ports / fabric.leaf_oversubscription - 1e-9))

    uplinks = {leaf: uplinks_of(leaf) for leaf in servers_on_leaf}
    facts = _TopologyFacts(
        pod_of_leaf,
        leaves_in_pod,
        position,
        _slots_by_leaf(topology),
        uplinks,
        {pod: max(uplinks[leaf] for leaf in leaves) for pod, leaves in leaves_in_pod.items()},
    )
    with _FACTS_LOCK:
        _FACTS[id(topology)] = (topology, facts)
        while len(_FACTS) > _FACTS_KEPT:
            _FACTS.popitem(last=False)
    return facts


def job_network(topology: Topology, nodes: Sequence[str]) -> JobNetwork:
    """The network model for the job's servers `nodes` (server index = position in `nodes`).

    Raises TopologyError when a node is missing from the topology or the topology has an unsupported shape.
    """
    missing = [node for node in nodes if node not in topology.paths]
    if missing:
        shown = ", ".join(repr(n) for n in missing[:3]) + (" ..." if len(missing) > 3 else "")
        raise TopologyError(
            f"topology.paths: {len(missing)} job node(s) missing ({shown}); "
            "label the nodes or describe them in the topology file"
        )
    if not nodes:
        raise TopologyError("nodes: the job has no servers; pass at least one node name")
    if len(set(nodes)) != len(nodes):
        raise TopologyError("nodes: a node appears twice; a route-planned job takes one pod per node")
    tiers = topology.tiers
    if tiers not in (1, 2):
        raise TopologyError(
            f"topology.paths: {tiers} domain tiers; ringroute models 2-tier (leaf) and 3-tier (leaf, pod) fabrics"
        )
    fabric = topology.fabric
    if fabric.nics_per_server < 1:
        raise TopologyError("fabric.nics_per_server: must be at least 1")
    if fabric.leaf_oversubscription <= 0 or fabric.spine_oversubscription <= 0:
        raise TopologyError("fabric oversubscription: must be positive (1.0 = 1:1, 2.0 = 2:1)")
    if fabric.leaf_uplinks is not None and fabric.leaf_uplinks < 1:
        raise TopologyError("fabric.leaf_uplinks: must be at least 1, or unset to derive it from oversubscription")
    nics = fabric.nics_per_server

    facts = _topology_facts(topology)
    pod_of_leaf, leaves_in_pod, position, slots = facts.pod_of_leaf, facts.leaves_in_pod, facts.position, facts.slots
    uplinks_of = facts.uplinks.__getitem__

    leaf_names = tuple(dict.fromkeys(topology.paths[n][0] for n in nodes))
    leaf_index = {leaf: i for i, leaf in enumerate(leaf_names)}
    pod_names = tuple(dict.fromkeys(pod_of_leaf[leaf] for leaf in leaf_names))
    pod_index = {pod: i for i, pod in enumerate(pod_names)}

    pod_uplinks = np.zeros(len(pod_names), dtype=np.int64)
    pod_spines = np.zeros(len(pod_names), dtype=np.int64)
    for pod, i in pod_index.items():
        pod_spines[i] = facts.pod_spines[pod]
        if tiers == 2:
            pod_uplinks[i] = max(1, math.ceil(len(leaves_in_pod[pod]) / fabric.spine_oversubscription - 1e-9))

    return JobNetwork(
        nodes=tuple(nodes),
        layout=fabric.layout,
        nics=nics,
        listed_tiers=tiers,
        leaf_names=leaf_names,
        pod_names=pod_names,
        server_leaf=np.array([leaf_index[topology.paths[n][0]] for n in nodes], dtype=np.int64),
        server_pod=np.array([pod_index[pod_of_leaf[topology.paths[n][0]]] for n in nodes], dtype=np.int64),
        server_slot=np.array([slots[n] for n in nodes], dtype=np.int64),
        leaf_pod=np.array([pod_index[pod_of_leaf[leaf]] for leaf in leaf_names], dtype=np.int64),
        leaf_uplinks=np.array([uplinks_of(leaf) for leaf in leaf_names], dtype=np.int64),
        leaf_position=np.array([position[leaf] for leaf in leaf_names], dtype=np.int64),
        pod_uplinks=pod_uplinks,
        pod_spines=pod_spines,
    )
