"""The port search: UDP source ports that steer every queue pair onto its planned spine (and core).

HCCL reads one line per (source IP, destination IP) from MultiQpSrcPort.cfg: one UDP source port per queue pair.
An ECMP switch picks the next hop from a hash of the 5-tuple, in which only the source port is the host's to
choose (RoCEv2 goes to UDP port 4791). With the hash known (`planner.HashModel`), a port is searched for every
queue pair of every cross-leaf connection whose hash lands on the pinned spine at the tier-1 switch and, across
pods, on the pinned core at that spine. Queue pairs no port steers are rerouted (`planner.fabric._reroute`);
`planner.fabric._hashed_routes` runs the other way, from ports to the routes they give.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from planner._errors import InputError
from planner._hash_model import (
    HashModel,
    SwitchHash,
    SwitchTier,
    ipv4_int,
    spine_switch_name,
    tier1_switch_name,
)
from planner.fabric._hashing import CompiledHash, check_switch_hash, compile_switch_hash
from planner.sim._network import JobNetwork
from planner.sim._route_plan import RoutePlan

DEFAULT_PORT_RANGE = (49152, 65535)
"""Source ports chosen from IANA's dynamic range unless settings say otherwise."""
MAX_QP_PORTS = 32
"""HCCL takes 1 to 32 ports (queue pairs) per line of MultiQpSrcPort.cfg."""
SEARCH_BATCH = 64
"""Candidate ports tried per queue pair and round (a round is one vectorised pass over every open queue pair)."""
REROUTE_PORTS = 4096
"""Ports a queue pair that cannot take its planned route tries for the least loaded other route."""
SEARCH_CELLS = 1 << 20
"""Queue pairs x candidates per round at most once few queue pairs are left (they then try longer runs)."""


@dataclass(frozen=True, eq=False)
class SourcePorts:
    """The UDP source ports of a job's connections: one line of MultiQpSrcPort.cfg per row.

    A connection is a directed (source server, destination server, NIC d) pair: NIC d of the source talks to
    NIC d of the destination, as HCCL's per-rail transports do.
    """

    connections: np.ndarray
    """(c, 3) int64: source server, destination server, NIC; sorted, distinct."""
    ports: np.ndarray
    """(c, qps) int64: the UDP source port of each queue pair."""
    steered: np.ndarray
    """(c,) bool: the ports were chosen through the hash model (else spread without one)."""

    @property
    def qps(self) -> int:
        """Queue pairs (ports) per connection."""
        return int(self.ports.shape[1])

    def __len__(self) -> int:
        return int(self.connections.shape[0])

    def rows(self, src: np.ndarray, dst: np.ndarray, nic: np.ndarray, servers: int, nics: int) -> np.ndarray:
        """Row of each (src, dst, nic) connection, -1 where it has none."""
        keys = connection_key(self.connections[:, 0], self.connections[:, 1], self.connections[:, 2], servers, nics)
        wanted = connection_key(src, dst, nic, servers, nics)
        at = np.searchsorted(keys, wanted)
        found = at < keys.size
        found[found] = keys[at[found]] == wanted[found]
        return np.where(found, at, -1)


def connection_key(src: np.ndarray, dst: np.ndarray, nic: np.ndarray, servers: int, nics: int) -> np.ndarray:
    key: np.ndarray = (np.asarray(src, dtype=np.int64) * servers + np.asarray(dst, dtype=np.int64)) * nics + np.asarray(
        nic, dtype=np.int64
    )
    return key


@dataclass(frozen=True, eq=False)
class QueuePairTargets:
    """Every cross-leaf queue pair of a route plan's connections, with the spine (and core) it must take."""

    src: np.ndarray
    dst: np.ndarray
    nic: np.ndarray
    qp: np.ndarray
    spine: np.ndarray
    core: np.ndarray
    """-1 for queue pairs that stay in their pod."""
    conflicts: int
    """Queue pairs of connections that later steps pin elsewhere than their first step (a connection keeps its
    ports, so those steps run on the first step's routes)."""


def queue_pair_targets(routes: RoutePlan) -> QueuePairTargets:
    """The planned spine and core of each queue pair of every cross-leaf connection, from its first step."""
    net, q = routes.network, routes.qps
    parts: list[tuple[np.ndarray, ...]] = []
    for step, spines, cores in zip(routes.steps, routes.spines, routes.cores, strict=True):
        rows, nics = np.nonzero(spines >= 0)
        pair = rows // q
        parts.append((step[pair, 0], step[pair, 1], nics, rows % q, spines[rows, nics], cores[rows, nics]))
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return QueuePairTargets(empty, empty, empty, empty, empty, empty, 0)
    src, dst, nic, qp, spine, core = (np.concatenate(column).astype(np.int64) for column in zip(*parts, strict=True))
    key = connection_key(src, dst, nic, net.servers, net.nics) * q + qp
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    conflicts = int(np.count_nonzero((spine != spine[first][inverse]) | (core != core[first][inverse])))
    return QueuePairTargets(src[first], dst[first], nic[first], qp[first], spine[first], core[first], conflicts)


# -- switch hashes of the job's network --------------------------------------------------------------------------


@dataclass(frozen=True)
class SwitchUse:
    """A switch whose hash steering relies on, and what the model knows of it."""

    name: str
    tier: SwitchTier
    source: str
    """declared, fitted or learned; `missing` when the model does not know the switch."""
    samples: int
    queue_pairs: int
    """Queue pairs of the plan that this switch chooses the next hop of."""


class CompiledModel:
    """A hash model's switch hashes, compiled on first use, once per distinct SwitchHash: one of these serves the
    port search, the rerouting and the hashed routes of a plan (a learned model has a hash per switch)."""

    def __init__(self, model: HashModel) -> None:
        self.model = model
        self._compiled: dict[int, CompiledHash] = {}
        self._known: dict[int, SwitchHash] = {}

    def get(self, name: str, tier: SwitchTier) -> CompiledHash | None:
        switch = self.model.for_switch(name, tier)
        if switch is None:
            return None
        found = self._compiled.get(id(switch))  # one SwitchHash is often every switch's (a tier default)
        if found is None:
            check_switch_hash(switch, tier, f"hash model: {name}")
            found = self._compiled[id(switch)] = compile_switch_hash(switch, tier)
            self._known[id(switch)] = switch  # keeps the id valid
        return found


def tier1_names(network: JobNetwork, src: np.ndarray, nic: np.ndarray) -> list[str]:
    rail = network.layout == "rail"
    leaves = network.server_leaf[src].tolist()
    return [
        tier1_switch_name(network.leaf_names[leaf], d if rail else None)
        for leaf, d in zip(leaves, nic.tolist(), strict=True)
    ]


def spine_names(network: JobNetwork, src: np.ndarray, nic: np.ndarray, spine: np.ndarray) -> list[str]:
    rail = network.layout == "rail"
    pods = network.server_pod[src].tolist()
    return [
        spine_switch_name(network.pod_names[pod], d if rail else None, j)
        for pod, d, j in zip(pods, nic.tolist(), spine.tolist(), strict=True)
    ]


@dataclass(frozen=True, eq=False)
class _Hops:
    """The switch hops of some queue pairs that choose a next hop: which hash, which choices, which target."""

    rows: np.ndarray
    """Indices of the queue pairs this hop concerns."""
    names: list[str]
    tier: SwitchTier
    choices: np.ndarray
    target: np.ndarray


def _hops(network: JobNetwork, targets: QueuePairTargets) -> list[_Hops]:
    """The tier-1 hop of every queue pair, and the spine hop of those that leave their pod."""
    src, dst, nic, spine, core = targets.src, targets.dst, targets.nic, targets.spine, targets.core
    leaf_a, leaf_b = network.server_leaf[src], network.server_leaf[dst]
    hops = [
        _Hops(
            np.arange(src.size),
            tier1_names(network, src, nic),
            "leaf",
            np.minimum(network.leaf_uplinks[leaf_a], network.leaf_uplinks[leaf_b]),
            spine,
        )
    ]
    if network.listed_tiers == 2:
        up = np.flatnonzero(network.server_pod[src] != network.server_pod[dst])
        if up.size:
            pod_a, pod_b = network.server_pod[src[up]], network.server_pod[dst[up]]
            hops.append(
                _Hops(
                    up,
                    spine_names(network, src[up], nic[up], spine[up]),
                    "spine",
                    np.minimum(network.pod_uplinks[pod_a], network.pod_uplinks[pod_b]),
                    core[up],
                )
            )
    return hops


# -- steering ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PortSearch:
    """Outcome of the port search: a port per queue pair (-1 where none was found) and why some are missing."""

    ports: np.ndarray
    switches: tuple[SwitchUse, ...]
    problems: tuple[str, ...]
    """One sentence per reason queue pairs cannot be steered at all (a switch the model does not know, a hash
    that ignores the source port); empty when every queue pair could be searched for."""
    timed_out: bool = False
    unreached: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Queue pairs (rows of the targets) no port of the range takes onto their planned next hops (`reroute`)."""


def check_port_range(port_range: tuple[int, int]) -> tuple[int, int]:
    low, high = port_range
    if not (1 <= low <= high <= 65535):
        raise InputError(f"source ports: {low}-{high} is not a range within 1-65535")
    return low, high


def candidate_stride(span: int) -> int:
    """A step near span x (golden ratio - 1) coprime with span: candidates then visit every port once, spread."""
    stride = max(1, round(span * 0.6180339887))
    while math.gcd(stride, span) != 1:
        stride += 1
    return stride


def port_offsets(keys: np.ndarray, seed: int, span: int) -> np.ndarray:
    """A pseudo-random start per connection (splitmix64 of its key and the seed)."""
    with np.errstate(over="ignore"):
        x = keys.astype(np.uint64) + np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return (x % np.uint64(span)).astype(np.int64)


def search_ports(
    network: JobNetwork,
    targets: QueuePairTargets,
    addresses: np.ndarray,
    model: HashModel | CompiledModel,
    *,
    qps: int,
    port_range: tuple[int, int] = DEFAULT_PORT_RANGE,
    seed: int = 0,
    deadline: float | None = None,
) -> PortSearch:
    """A source port for every queue pair of `targets` whose hash takes it to its spine (and core).

    Queue pair q of a connection tries the ports offset + (t x qps + q) x stride (mod the range) for t = 0, 1,
    ...: the queue pairs of one connection never share a port, and the range is visited once. `addresses` is
    (servers, nics) uint32 (the NICs' IPv4 addresses).
    """
    low, high = check_port_range(port_range)
    span = high - low + 1
    n = targets.src.size
    ports = np.full(n, -1, dtype=np.int64)
    problems: list[str] = []
    hashes = model if isinstance(model, CompiledModel) else CompiledModel(model)
    hops = _hops(network, targets)
    src_ip = addresses[targets.src, targets.nic].astype(np.uint64)
    dst_ip = addresses[targets.dst, targets.nic].astype(np.uint64)
    # (hop, compiled hash, indices of the hop's queue pairs it applies to, their prepared address pairs)
    plans: list[tuple[_Hops, CompiledHash, np.ndarray, np.ndarray]] = []
    uses: list[SwitchUse] = []
    blocked = np.zeros(n, dtype=bool)
    for hop in hops:
        by_name: dict[str, list[int]] = {}
        for index, name in enumerate(hop.names):
            by_name.setdefault(name, []).append(index)
        groups: dict[int, tuple[CompiledHash, list[int]]] = {}
        for name, named in by_name.items():
            compiled = hashes.get(name, hop.tier)
            switch = hashes.model.for_switch(name, hop.tier)
            source = "missing" if switch is None else switch.source
            uses.append(SwitchUse(name, hop.tier, source, switch.samples if switch else 0, len(named)))
            rows = hop.rows[named]
            if compiled is None:
                blocked[rows] = True
                problems.append(f"the hash model does not know switch {name} ({hop.tier} tier)")
                continue
            if not compiled.reads_port:
                blocked[rows] = True
                problems.append(f"the hash of switch {name} does not read the UDP source port: no port steers it")
                continue
            groups.setdefault(id(compiled), (compiled, []))[1].extend(named)
        for compiled, chosen in groups.values():
            indices = np.asarray(chosen, dtype=np.int64)
            rows = hop.rows[indices]
            plans.append((hop, compiled, indices, compiled.prepare(src_ip[rows], dst_ip[rows])))
    stride = candidate_stride(span)
    keys = connection_key(targets.src, targets.dst, targets.nic, network.servers, network.nics)
    # Queue pair q of a connection starts q/Q of the way along the connection's sequence: they rarely meet.
    start = port_offsets(keys, seed, span) + targets.qp * (span // qps)
    tried = np.zeros(n, dtype=np.int64)
    open_rows = np.flatnonzero(~blocked)
    exhausted: list[np.ndarray] = []
    timed_out = False
    while open_rows.size:
        if deadline is not None and time.perf_counter() > deadline:
            timed_out = True
            break
        # Few rows left (the last, hardest queue pairs): longer runs of candidates per round.
        batch = int(min(span, max(SEARCH_BATCH, SEARCH_CELLS // open_rows.size)))
        t = tried[open_rows, None] + np.arange(batch)[None, :]
        candidates = low + (start[open_rows, None] + t * stride) % span
        good = t < span
        position = np.full(n, -1, dtype=np.int64)
        position[open_rows] = np.arange(open_rows.size)
        for hop, compiled, indices, prepared in plans:
            at = position[hop.rows[indices]]
            keep = at >= 0
            members, at = indices[keep], at[keep]
            if not members.size:
                continue
            reached = compiled.hops_at(prepared[keep], candidates[at], hop.choices[members, None])
            good[at] &= reached == hop.target[members, None]
        found = good.any(axis=1)
        first = good.argmax(axis=1)
        ports[open_rows[found]] = candidates[np.flatnonzero(found), first[found]]
        tried[open_rows] += np.where(found, first + 1, batch)
        done = found | (tried[open_rows] >= span)
        exhausted.append(open_rows[~found & done])
        open_rows = open_rows[~done]
        if not open_rows.size:
            # two queue pairs of a connection on one port would be one 5-tuple: the later ones search on
            open_rows = _sharing_a_port(keys, targets.qp, ports)
            ports[open_rows] = -1
    unreached = np.sort(np.concatenate(exhausted)) if exhausted else np.zeros(0, dtype=np.int64)
    return PortSearch(ports, tuple(uses), tuple(problems), timed_out, unreached)


def _sharing_a_port(keys: np.ndarray, qp: np.ndarray, ports: np.ndarray) -> np.ndarray:
    """Queue pairs whose connection has a lower queue pair on the same port."""
    chosen = np.flatnonzero(ports >= 0)
    if not chosen.size:
        return chosen
    order = np.lexsort((qp[chosen], ports[chosen], keys[chosen]))
    ranked = chosen[order]
    same = (keys[ranked][1:] == keys[ranked][:-1]) & (ports[ranked][1:] == ports[ranked][:-1])
    return np.sort(ranked[1:][same])


def spread_ports(
    keys: np.ndarray, qps: int, *, port_range: tuple[int, int] = DEFAULT_PORT_RANGE, seed: int = 0
) -> np.ndarray:
    """(connections, qps) distinct ports per connection, spread over the range from a per-connection start:
    without a hash model, ports that differ in many bits are the best a host can do for ECMP entropy."""
    low, high = check_port_range(port_range)
    span = high - low + 1
    if qps > span:
        raise InputError(f"source ports: {qps} queue pairs need {qps} ports, the range {low}-{high} has {span}")
    stride = candidate_stride(span)
    offset = port_offsets(keys, seed, span)
    ports: np.ndarray = low + (offset[:, None] + np.arange(qps)[None, :] * stride) % span
    return ports


def source_ports(
    network: JobNetwork,
    targets: QueuePairTargets,
    found: np.ndarray | None,
    *,
    qps: int,
    port_range: tuple[int, int] = DEFAULT_PORT_RANGE,
    seed: int = 0,
) -> SourcePorts:
    """Every connection of `targets` and its reverse with `qps` ports: the `found` ones (steered), spread ports
    elsewhere (reverse connections the plan does not route, or every one when `found` is None).

    Reverse connections get a line too: HCCL sets up the queue pairs of a transport from both ends, so both ends
    ask for the same number of them.
    """
    servers, nics = network.servers, network.nics
    forward = connection_key(targets.src, targets.dst, targets.nic, servers, nics)
    backward = connection_key(targets.dst, targets.src, targets.nic, servers, nics)
    keys = np.unique(np.concatenate([forward, backward]))
    ports = spread_ports(keys, qps, port_range=port_range, seed=seed)
    steered = np.zeros(keys.size, dtype=bool)
    if found is not None and targets.src.size:
        rows = np.searchsorted(keys, forward)
        ports[rows, targets.qp] = found
        steered[rows] = True
    nic = keys % nics
    pair = keys // nics
    connections = np.stack([pair // servers, pair % servers, nic], axis=1)
    return SourcePorts(connections, ports, steered)


def device_addresses(servers: Iterable[Sequence[str]], nics: int) -> np.ndarray:
    """(servers, nics) uint32 of IPv4 device addresses (InputError naming the first that is not one)."""
    rows = [[ipv4_int(ip, f"device {d} address") for ip, d in zip(row, range(nics), strict=False)] for row in servers]
    out = np.asarray(rows, dtype=np.uint64)
    if out.ndim != 2 or out.shape[1] != nics:
        raise InputError(f"device addresses: every server needs {nics} NIC addresses")
    return out


__all__ = [
    "DEFAULT_PORT_RANGE",
    "MAX_QP_PORTS",
    "REROUTE_PORTS",
    "CompiledModel",
    "PortSearch",
    "QueuePairTargets",
    "SourcePorts",
    "SwitchUse",
    "candidate_stride",
    "check_port_range",
    "connection_key",
    "device_addresses",
    "port_offsets",
    "queue_pair_targets",
    "search_ports",
    "source_ports",
    "spine_names",
    "spread_ports",
    "tier1_names",
]
