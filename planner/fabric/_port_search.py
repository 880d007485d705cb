"""UDP source ports that steer every queue pair onto its planned spine (and core), and the routes ports give.

HCCL reads one line per (source IP, destination IP) from MultiQpSrcPort.cfg: one UDP source port per queue pair.
An ECMP switch picks the next hop from a hash of the 5-tuple, in which only the source port is the host's to
choose (RoCEv2 goes to UDP port 4791). With the hash known (`planner.HashModel`), a port is searched for every
queue pair of every cross-leaf connection whose hash lands on the pinned spine at the tier-1 switch and, across
pods, on the pinned core at that spine. `hashed_routes` runs the other way: the spine and core each port gives,
so the simulator measures what a written file does, not what was meant.
"""

from __future__ import annotations

import dataclasses
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
from planner.sim._pinning import routes_from_assignment
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
        keys = _connection_key(self.connections[:, 0], self.connections[:, 1], self.connections[:, 2], servers, nics)
        wanted = _connection_key(src, dst, nic, servers, nics)
        at = np.searchsorted(keys, wanted)
        found = at < keys.size
        found[found] = keys[at[found]] == wanted[found]
        return np.where(found, at, -1)


def _connection_key(src: np.ndarray, dst: np.ndarray, nic: np.ndarray, servers: int, nics: int) -> np.ndarray:
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
    key = _connection_key(src, dst, nic, net.servers, net.nics) * q + qp
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


def _tier1_names(network: JobNetwork, src: np.ndarray, nic: np.ndarray) -> list[str]:
    rail = network.layout == "rail"
    leaves = network.server_leaf[src].tolist()
    return [
        tier1_switch_name(network.leaf_names[leaf], d if rail else None)
        for leaf, d in zip(leaves, nic.tolist(), strict=True)
    ]


def _spine_names(network: JobNetwork, src: np.ndarray, nic: np.ndarray, spine: np.ndarray) -> list[str]:
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
            _tier1_names(network, src, nic),
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
                    _spine_names(network, src[up], nic[up], spine[up]),
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


def _check_port_range(port_range: tuple[int, int]) -> tuple[int, int]:
    low, high = port_range
    if not (1 <= low <= high <= 65535):
        raise InputError(f"source ports: {low}-{high} is not a range within 1-65535")
    return low, high


def _candidate_stride(span: int) -> int:
    """A step near span x (golden ratio - 1) coprime with span: candidates then visit every port once, spread."""
    stride = max(1, round(span * 0.6180339887))
    while math.gcd(stride, span) != 1:
        stride += 1
    return stride


def _offsets(keys: np.ndarray, seed: int, span: int) -> np.ndarray:
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
    low, high = _check_port_range(port_range)
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
    stride = _candidate_stride(span)
    keys = _connection_key(targets.src, targets.dst, targets.nic, network.servers, network.nics)
    # Queue pair q of a connection starts q/Q of the way along the connection's sequence: they rarely meet.
    start = _offsets(keys, seed, span) + targets.qp * (span // qps)
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


@dataclass(frozen=True, eq=False)
class Rerouted:
    """Queue pairs moved to the least loaded route their ports can reach, where no port reaches the planned one."""

    ports: np.ndarray
    """The port of every queue pair of the targets (the search's, and the rerouted ones')."""
    targets: QueuePairTargets
    """The targets with the rerouted queue pairs' new spine and core."""
    moved: int
    problems: tuple[str, ...] = ()
    """Queue pairs with no route at all (the model cannot tell any next hop for them), in words."""


def reroute(
    network: JobNetwork,
    routes: RoutePlan,
    targets: QueuePairTargets,
    search: PortSearch,
    *,
    addresses: np.ndarray,
    model: HashModel | CompiledModel,
    port_range: tuple[int, int] = DEFAULT_PORT_RANGE,
    background: np.ndarray | None = None,
) -> Rerouted:
    """Give every unreached queue pair the port whose route adds least to the busiest link of its steps.

    Two switches' hashes can leave a source port too few free bits for some pairs of next hops (a spine and a
    core whose parity checks depend on the same port bits): no port takes that queue pair onto its planned route.
    Each such queue pair, one after another, tries every port of the range: the distinct (spine, core) routes
    they reach are scored by the largest link load they would make in the steps holding the connection, with
    every other queue pair on its route; the lowest wins (ties: the planned spine, then the least loaded).
    `background` (flows per link id: other jobs on a shared fabric) counts on every link too.
    """
    low, high = _check_port_range(port_range)
    ports = search.ports.copy()
    spine, core = targets.spine.copy(), targets.core.copy()
    if not search.unreached.size:
        return Rerouted(ports, targets, 0)
    q, servers, nics = routes.qps, network.servers, network.nics
    keys = _connection_key(targets.src, targets.dst, targets.nic, servers, nics)
    row_of = keys * q + targets.qp
    order = np.argsort(row_of)
    links_of = _RouteLinks(network, targets)
    unreached = set(search.unreached.tolist())
    # per distinct step: its queue pairs (target rows) and the link loads of the reached ones
    steps: list[np.ndarray] = []
    seen: set[bytes] = set()
    for step, spines in zip(routes.steps, routes.spines, strict=True):
        if step.tobytes() in seen:
            continue
        seen.add(step.tobytes())
        rows, nic = np.nonzero(spines >= 0)
        pair = rows // q
        wanted = _connection_key(step[pair, 0], step[pair, 1], nic, servers, nics) * q + rows % q
        steps.append(order[np.searchsorted(row_of, wanted, sorter=order)])
    loads = np.zeros((len(steps), network.num_links + 1))  # in queue pairs, + the spare id
    if background is not None:
        loads[:, :-1] += np.asarray(background, dtype=np.float64)[None, :] * q
    for k, members in enumerate(steps):
        reached = members[[m not in unreached for m in members.tolist()]]
        np.add.at(loads[k], links_of(reached, spine[reached], core[reached]).ravel(), 1)
    loads[:, -1] = 0
    steps_of: dict[int, list[int]] = {}
    for k, members in enumerate(steps):
        for member in set(members.tolist()) & unreached:
            steps_of.setdefault(member, []).append(k)
    hashes = model if isinstance(model, CompiledModel) else CompiledModel(model)
    span = high - low + 1
    # Enough ports that every route a port can reach is offered by several (U x V routes, about span / (U x V)
    # ports each), far fewer than the whole range: a few milliseconds per queue pair.
    sample = min(span, REROUTE_PORTS)
    stride = _candidate_stride(span)
    problems: list[str] = []
    for row in search.unreached.tolist():
        candidates = low + (int(_offsets(keys[row : row + 1], row, span)[0]) + np.arange(sample) * stride) % span
        taken = ports[(keys == keys[row]) & (ports >= 0)]
        usable = candidates[~np.isin(candidates, taken)]
        hops = _reachable(network, hashes, targets, row, ports=usable, addresses=addresses)
        if hops is None:
            problems.append(_unreached(network, targets, row, port_range))
            continue
        reach_spine, reach_core = hops
        known = reach_spine >= 0
        # one integer per (spine, core) route (core -1 inside a pod): a 1-D unique, not a row-wise sort
        width = int(reach_core.max(initial=0)) + 2
        codes, first = np.unique(reach_spine[known] * width + reach_core[known] + 1, return_index=True)
        routes_found = np.stack([codes // width, codes % width - 1], axis=1)
        if not routes_found.size:
            problems.append(_unreached(network, targets, row, port_range))
            continue
        member = np.full(routes_found.shape[0], row, dtype=np.int64)
        links = links_of(member, routes_found[:, 0], routes_found[:, 1])
        mine = steps_of.get(row, [])
        worst = np.max([loads[k][links].max(axis=1) for k in mine], axis=0) + 1 if mine else np.ones(len(links))
        total = np.sum([loads[k][links].sum(axis=1) for k in mine], axis=0) if mine else np.zeros(len(links))
        planned = routes_found[:, 0] != targets.spine[row]
        best = int(np.lexsort((total, planned, worst))[0])
        ports[row] = int(usable[known][first[best]])
        spine[row], core[row] = (int(v) for v in routes_found[best])
        for k in mine:
            np.add.at(loads[k], links[best], 1)
            loads[k, -1] = 0
    rerouted = dataclasses.replace(targets, spine=spine, core=core)
    moved = len(search.unreached) - len(problems)
    return Rerouted(ports, rerouted, moved, tuple(problems))


def reachable_spines(
    network: JobNetwork,
    targets: QueuePairTargets,
    rows: np.ndarray,
    *,
    addresses: np.ndarray,
    model: HashModel | CompiledModel,
    port_range: tuple[int, int] = DEFAULT_PORT_RANGE,
) -> np.ndarray:
    """(rows, max uplinks) mask of the spines some source port of the range takes each queue pair of `rows` to
    (with a core the model can tell, across pods): what pinning may give the queue pairs the search left unreached."""
    low, high = _check_port_range(port_range)
    span = high - low + 1
    hashes = model if isinstance(model, CompiledModel) else CompiledModel(model)
    keys = _connection_key(targets.src, targets.dst, targets.nic, network.servers, network.nics)
    stride = _candidate_stride(span)
    out = np.zeros((rows.size, max(network.max_uplinks, 1)), dtype=bool)
    for at, row in enumerate(rows.tolist()):
        start = int(_offsets(keys[row : row + 1], row, span)[0])
        ports = low + (start + np.arange(min(span, REROUTE_PORTS)) * stride) % span
        hops = _reachable(network, hashes, targets, row, ports=ports, addresses=addresses)
        if hops is not None:
            spines = hops[0]
            out[at, np.unique(spines[spines >= 0])] = True
    return out


class _RouteLinks:
    """Switch link ids a queue pair crosses on route (spine, core): up and down at tier 1, and across pods the
    spine-core links up and down (-1 padding where it stays in its pod)."""

    def __init__(self, network: JobNetwork, targets: QueuePairTargets) -> None:
        self.network = network
        self.targets = targets

    def __call__(self, rows: np.ndarray, spine: np.ndarray, core: np.ndarray) -> np.ndarray:
        net, t = self.network, self.targets
        src, dst, nic = t.src[rows], t.dst[rows], t.nic[rows]
        up = net.leaf_link(net.tier1_switch(src, nic), spine, up=True)
        down = net.leaf_link(net.tier1_switch(dst, nic), spine, up=False)
        if net.listed_tiers != 2:
            return np.stack([up, down], axis=1)
        plane = nic if net.layout == "rail" else np.zeros_like(nic)
        crossing = core >= 0
        c = np.maximum(core, 0)
        core_up = net.spine_link(net.server_pod[src], plane, spine, c, up=True)
        core_down = net.spine_link(net.server_pod[dst], plane, spine, c, up=False)
        # a route inside one pod pads with the spare id num_links, a link no route uses (always empty)
        spare = net.num_links
        return np.stack([up, down, np.where(crossing, core_up, spare), np.where(crossing, core_down, spare)], axis=1)


def _reachable(
    network: JobNetwork,
    hashes: CompiledModel,
    targets: QueuePairTargets,
    row: int,
    *,
    ports: np.ndarray,
    addresses: np.ndarray,
) -> tuple[np.ndarray, np.ndarray] | None:
    """(spine, core) each port takes queue pair `row` to (-1 where the model cannot tell); None without a model."""
    src, dst, nic = int(targets.src[row]), int(targets.dst[row]), int(targets.nic[row])
    src_ip = np.full(ports.size, addresses[src, nic], dtype=np.uint64)
    dst_ip = np.full(ports.size, addresses[dst, nic], dtype=np.uint64)
    leaf_a, leaf_b = network.server_leaf[src], network.server_leaf[dst]
    leaf = hashes.get(_tier1_names(network, targets.src[row : row + 1], targets.nic[row : row + 1])[0], "leaf")
    if leaf is None:
        return None
    choices = int(min(network.leaf_uplinks[leaf_a], network.leaf_uplinks[leaf_b]))
    spine = leaf.hops_at(leaf.prepare(src_ip[:1], dst_ip[:1]), ports[None, :], choices)[0]
    core = np.full(ports.size, -1, dtype=np.int64)
    pod_a, pod_b = network.server_pod[src], network.server_pod[dst]
    if network.listed_tiers != 2 or pod_a == pod_b:
        return spine, core
    cores = int(min(network.pod_uplinks[pod_a], network.pod_uplinks[pod_b]))
    for j in np.unique(spine[spine >= 0]).tolist():
        name = _spine_names(network, targets.src[row : row + 1], targets.nic[row : row + 1], np.array([j]))[0]
        upper = hashes.get(name, "spine")
        at = spine == j
        if upper is None:
            spine[at] = -1
            continue
        core[at] = upper.hops_at(upper.prepare(src_ip[:1], dst_ip[:1]), ports[at][None, :], cores)[0]
        spine[at & (core < 0)] = -1
    return spine, core


def _unreached(network: JobNetwork, targets: QueuePairTargets, row: int, port_range: tuple[int, int]) -> str:
    name = _tier1_names(network, targets.src[row : row + 1], targets.nic[row : row + 1])[0]
    return (
        f"a queue pair from {name} finds no source port in {port_range[0]}-{port_range[1]} whose next hop the hash "
        "model can tell (addresses outside the span its switches were calibrated on, or a learned table that "
        "never saw the value)"
    )


def spread_ports(
    keys: np.ndarray, qps: int, *, port_range: tuple[int, int] = DEFAULT_PORT_RANGE, seed: int = 0
) -> np.ndarray:
    """(connections, qps) distinct ports per connection, spread over the range from a per-connection start:
    without a hash model, ports that differ in many bits are the best a host can do for ECMP entropy."""
    low, high = _check_port_range(port_range)
    span = high - low + 1
    if qps > span:
        raise InputError(f"source ports: {qps} queue pairs need {qps} ports, the range {low}-{high} has {span}")
    stride = _candidate_stride(span)
    offset = _offsets(keys, seed, span)
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
    forward = _connection_key(targets.src, targets.dst, targets.nic, servers, nics)
    backward = _connection_key(targets.dst, targets.src, targets.nic, servers, nics)
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


# -- the routes a set of ports gives -----------------------------------------------------------------------------


def hashed_routes(
    network: JobNetwork,
    steps: Sequence[np.ndarray],
    ports: SourcePorts,
    addresses: np.ndarray,
    model: HashModel | CompiledModel,
) -> RoutePlan:
    """The spine and core every cross-leaf queue pair of `steps` takes with these ports under the hash model.

    Raises InputError naming a connection without a line, or a switch whose next hop the model cannot tell.
    """
    qps = ports.qps
    hashes = model if isinstance(model, CompiledModel) else CompiledModel(model)
    spines_out: list[np.ndarray] = []
    cores_out: list[np.ndarray] = []
    for step in steps:
        pairs = np.asarray(step, dtype=np.int64)
        spines = np.full((pairs.shape[0] * qps, network.nics), -1, dtype=np.int64)
        cores = np.full_like(spines, -1)
        crossing = network.server_leaf[pairs[:, 0]] != network.server_leaf[pairs[:, 1]]
        pair = np.repeat(np.flatnonzero(crossing), network.nics)
        nic = np.tile(np.arange(network.nics), int(crossing.sum()))
        src, dst = pairs[pair, 0], pairs[pair, 1]
        row = ports.rows(src, dst, nic, network.servers, network.nics)
        if (row < 0).any():
            i = int(np.flatnonzero(row < 0)[0])
            raise InputError(
                f"source ports: no line for {network.nodes[src[i]]} -> {network.nodes[dst[i]]} on NIC {nic[i]}; "
                "every cross-leaf connection of the plan needs one"
            )
        leaf_choices = np.minimum(
            network.leaf_uplinks[network.server_leaf[src]], network.leaf_uplinks[network.server_leaf[dst]]
        )
        up = np.flatnonzero(network.server_pod[src] != network.server_pod[dst])
        pod_a, pod_b = network.server_pod[src[up]], network.server_pod[dst[up]]
        core_choices = np.minimum(network.pod_uplinks[pod_a], network.pod_uplinks[pod_b])
        src_ip, dst_ip = addresses[src, nic], addresses[dst, nic]
        leaf_names = _tier1_names(network, src, nic)
        for q in range(qps):
            sport = ports.ports[row, q]
            spine = _next_hops(hashes, leaf_names, "leaf", (src_ip, dst_ip, sport), leaf_choices)
            spines[pair * qps + q, nic] = spine
            if network.listed_tiers == 2 and up.size:
                names = _spine_names(network, src[up], nic[up], spine[up])
                core = _next_hops(hashes, names, "spine", (src_ip[up], dst_ip[up], sport[up]), core_choices)
                cores[pair[up] * qps + q, nic[up]] = core
        spines_out.append(spines)
        cores_out.append(cores)
    return routes_from_assignment(network, steps, spines_out, cores_out, qps)


def _next_hops(
    hashes: CompiledModel,
    names: list[str],
    tier: SwitchTier,
    tuples: tuple[np.ndarray, np.ndarray, np.ndarray],
    choices: np.ndarray,
) -> np.ndarray:
    """Next hop of each (src_ip, dst_ip, sport) at switch `names[i]`; InputError where the model cannot tell."""
    src_ip, dst_ip, sport = tuples
    out = np.full(len(names), -1, dtype=np.int64)
    by_name: dict[str, list[int]] = {}
    for index, name in enumerate(names):
        by_name.setdefault(name, []).append(index)
    for name, members in by_name.items():
        compiled = hashes.get(name, tier)
        if compiled is None:
            raise InputError(f"hash model: no hash for switch {name} ({tier} tier); calibrate it or declare its tier")
        rows = np.asarray(members, dtype=np.int64)
        out[rows] = compiled.evaluate(
            src_ip[rows].astype(np.uint64), dst_ip[rows].astype(np.uint64), sport[rows], choices[rows]
        )
    unknown = np.flatnonzero(out < 0)
    if unknown.size:
        i = int(unknown[0])
        raise InputError(
            f"hash model: switch {names[i]} cannot tell the next hop of {unknown.size} queue pair(s) (addresses "
            "outside its calibrated span, or a hash value no sample showed); calibrate it with more samples"
        )
    return out


def device_addresses(servers: Iterable[Sequence[str]], nics: int) -> np.ndarray:
    """(servers, nics) uint32 of IPv4 device addresses (InputError naming the first that is not one)."""
    rows = [[ipv4_int(ip, f"device {d} address") for ip, d in zip(row, range(nics), strict=False)] for row in servers]
    out = np.asarray(rows, dtype=np.uint64)
    if out.ndim != 2 or out.shape[1] != nics:
        raise InputError(f"device addresses: every server needs {nics} NIC addresses")
    return out


__all__ = [
    "CompiledModel",
    "DEFAULT_PORT_RANGE",
    "MAX_QP_PORTS",
    "PortSearch",
    "QueuePairTargets",
    "Rerouted",
    "SourcePorts",
    "SwitchUse",
    "device_addresses",
    "hashed_routes",
    "queue_pair_targets",
    "reachable_spines",
    "reroute",
    "search_ports",
    "source_ports",
    "spread_ports",
]
