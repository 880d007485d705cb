"""Which 5-tuples to ask each switch about (`ringroute fabric calibrate --print-probes`).

A learned hash is exact on the span of the keys it was learned from, so the probes of a switch must span every
key bit that varies among the tuples steering will ask it to hash: source and destination addresses from the
pools of that switch, source ports from the steering range, UDP to 4791. The probes start with a spanning set
(one tuple per independent direction of each field, the others held at a base tuple) and are filled up with
uniform random tuples, seeded, to the count learning needs (`samples_to_learn`) with a margin.

For a tier-1 switch the sources are the RoCE addresses of the job's NICs under it and the destinations those
under other tier-1 switches of the same plane; for a spine of a 3-tier fabric, the NICs of its pod and of the
other pods. Without a placement, every switch takes the same address pools (`--addresses CIDR`).
"""

from __future__ import annotations

import ipaddress
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from planner._errors import InputError
from planner._hash_model import (
    ROCE_UDP_PORT,
    UDP,
    FabricSwitch,
    HashProbe,
    ipv4_int,
    spine_switch_name,
    tier1_switch_name,
)
from planner._model import Placement, Topology
from planner.fabric._gf2 import XorBasis
from planner.fabric._learning import samples_to_learn
from planner.fabric._switch_samples import name_order
from planner.sim._network import job_network

DEFAULT_PROBE_PORTS = (49152, 65535)
"""Source ports probed unless told otherwise: IANA's dynamic range, where steering picks its ports."""
ASSUMED_NEXT_HOPS = 16
"""Equal-cost next hops assumed for a switch no topology describes, when counting the probes it needs."""
MAX_PROBES_PER_SWITCH = 100_000
_SPANNING_DRAWS = 64
"""Random draws per missing dimension before a pool's spanning set is given up on (never happens for CIDRs)."""


@dataclass(frozen=True)
class AddressPool:
    """The addresses a probe's source or destination is drawn from: listed ones, or whole networks."""

    addresses: tuple[int, ...] = ()
    networks: tuple[tuple[int, int], ...] = ()
    """(network address, prefix length) of each CIDR."""

    def __post_init__(self) -> None:
        if not self.addresses and not self.networks:
            raise InputError("addresses: an address pool needs at least one address or network")

    def _hosts(self, network: int, prefix: int) -> tuple[int, int]:
        """First host and host count of a network (without its network and broadcast addresses below /31)."""
        size = 1 << (32 - prefix)
        return (network + 1, size - 2) if prefix <= 30 else (network, size)

    def draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """`count` addresses, uniform over the pool."""
        if self.addresses:
            listed = np.array(self.addresses, dtype=np.int64)
            picked: np.ndarray = listed[rng.integers(0, listed.size, count)]
            return picked
        hosts = [self._hosts(network, prefix) for network, prefix in self.networks]
        weights = np.array([float(size) for _, size in hosts])
        which = rng.choice(len(hosts), size=count, p=weights / weights.sum())
        first = np.array([start for start, _ in hosts], dtype=np.int64)[which]
        size = np.array([size for _, size in hosts], dtype=np.int64)[which]
        drawn: np.ndarray = first + np.floor(rng.random(count) * size).astype(np.int64)
        return drawn

    def span(self) -> XorBasis:
        """The span of the differences of the pool's addresses."""
        if self.addresses:
            base = self.addresses[0]
            basis = XorBasis()
            for address in self.addresses:
                basis.insert(address ^ base)
                if len(basis) == 32:
                    break
            return basis
        base = self.networks[0][0]
        basis = XorBasis()
        for network, prefix in self.networks:
            start, size = self._hosts(network, prefix)
            basis.insert(network ^ base)
            for bit in range(32 - prefix):
                basis.insert(1 << bit)
            if size < 1 << (32 - prefix):  # without network and broadcast: still every host bit, and the start
                basis.insert(start ^ base)
        return basis


def address_pool(texts: Iterable[str], where: str = "--addresses") -> AddressPool:
    """A pool from addresses and CIDR networks written as text (`10.0.0.0/16`, `192.168.1.7`)."""
    networks: list[tuple[int, int]] = []
    for text in texts:
        try:
            network = ipaddress.ip_network(text.strip(), strict=False)
        except ValueError:
            raise InputError(f"{where} {text}: not an IPv4 address or network (such as 10.0.0.0/16)") from None
        if network.version != 4:
            raise InputError(f"{where} {text}: IPv6; HCCL's RoCE ports and ringroute's hash model are IPv4")
        networks.append((int(network.network_address), network.prefixlen))
    if not networks:
        raise InputError(f"{where}: give at least one address or network")
    return AddressPool(networks=tuple(networks))


def fabric_switches(topology: Topology) -> dict[str, FabricSwitch]:
    """Every switch of the topology that picks among equal-cost next hops, by name: tier-1 switches (leaves, or
    rail switches `<group>/rail-<d>`) with their uplinks, and in 3-tier fabrics every spine with its core uplinks."""
    network = job_network(topology, sorted(topology.paths, key=name_order))
    rail = network.layout == "rail"
    planes: list[int | None] = list(range(network.nics)) if rail else [None]
    switches: dict[str, FabricSwitch] = {}
    for leaf, uplinks in zip(network.leaf_names, network.leaf_uplinks.tolist(), strict=True):
        for plane in planes:
            name = tier1_switch_name(leaf, plane)
            switches[name] = FabricSwitch(name, "leaf", int(uplinks))
    if network.listed_tiers == 2:
        for pod, spines, uplinks in zip(
            network.pod_names, network.pod_spines.tolist(), network.pod_uplinks.tolist(), strict=True
        ):
            for plane in planes:
                for spine in range(int(spines)):
                    name = spine_switch_name(pod, plane, spine)
                    switches[name] = FabricSwitch(name, "spine", int(uplinks))
    return switches


def switch_pools(topology: Topology, placement: Placement) -> dict[str, tuple[AddressPool, AddressPool]]:
    """For every switch the job's traffic crosses: the pool of source addresses (the job's NICs under it) and of
    destination addresses (those of the same plane beyond it)."""
    network = job_network(topology, [server.node_name for server in placement.servers])
    rail = network.layout == "rail"
    nics = placement.devices_per_server
    device_ips: list[list[int]] = []
    for server in placement.servers:
        row = []
        for device in server.devices:
            row.append(ipv4_int(device.device_ip, f"pod {server.pod_name} device {device.device_id} device_ip"))
        device_ips.append(row)
    leaf_of = network.server_leaf.tolist()
    pod_of = network.server_pod.tolist()
    groups: dict[str, tuple[list[int], list[int]]] = {}

    def add(name: str, inside: Sequence[int], outside: Sequence[int]) -> None:
        if inside and outside:
            groups[name] = (list(inside), list(outside))

    for plane in range(nics) if rail else [None]:
        nic_range = [plane] if plane is not None else list(range(nics))
        for leaf_index, leaf in enumerate(network.leaf_names):
            inside = [device_ips[s][d] for s in range(len(device_ips)) if leaf_of[s] == leaf_index for d in nic_range]
            outside = [device_ips[s][d] for s in range(len(device_ips)) if leaf_of[s] != leaf_index for d in nic_range]
            add(tier1_switch_name(leaf, plane), inside, outside)
        if network.listed_tiers == 2:
            for pod_index, pod in enumerate(network.pod_names):
                inside = [device_ips[s][d] for s in range(len(device_ips)) if pod_of[s] == pod_index for d in nic_range]
                outside = [
                    device_ips[s][d] for s in range(len(device_ips)) if pod_of[s] != pod_index for d in nic_range
                ]
                for spine in range(int(network.pod_spines[pod_index])):
                    add(spine_switch_name(pod, plane, spine), inside, outside)
    return {
        name: (AddressPool(addresses=tuple(src)), AddressPool(addresses=tuple(dst)))
        for name, (src, dst) in groups.items()
    }


def _port_span(low: int, high: int) -> XorBasis:
    """The span of the differences of the ports low..high (a GF(2) elimination over the whole range at once)."""
    differences = np.arange(low, high + 1, dtype=np.int64) ^ low
    basis = XorBasis()
    for bit in range(15, -1, -1):
        has_bit = np.flatnonzero((differences >> bit) & 1)
        if not has_bit.size:
            continue
        pivot = int(differences[has_bit[0]])
        basis.insert(pivot)
        differences = np.where((differences >> bit) & 1, differences ^ pivot, differences)
    return basis


def _spanning(draw: Callable[[], int], base: int, dimension: int) -> list[int]:
    """Values (from `draw()`) whose differences with `base` span `dimension` dimensions, one per dimension."""
    basis = XorBasis()
    chosen: list[int] = []
    attempts = 0
    while len(basis) < dimension and attempts < _SPANNING_DRAWS * (dimension + 1):
        value = draw()
        attempts += 1
        if basis.insert(value ^ base):
            chosen.append(value)
    return chosen


@dataclass(frozen=True)
class SwitchProbes:
    """The probes of one switch."""

    switch: str
    probes: tuple[HashProbe, ...]
    span_bits: int
    """Dimension of the span of every tuple the pools and ports allow: what the probes must span."""
    covered_bits: int
    """Dimension of the span of the probes' keys (equal to span_bits unless the count is too small)."""
    needed: int
    """Samples learning needs for this switch (`samples_to_learn`)."""


def _switch_probes(
    name: str,
    pools: tuple[AddressPool, AddressPool],
    ports: tuple[int, int],
    *,
    next_hops: int,
    count: int | None,
    rng: np.random.Generator,
) -> SwitchProbes:
    sources, destinations = pools
    port_basis = _port_span(*ports)
    dimensions = len(sources.span()) + len(destinations.span()) + len(port_basis)
    needed = samples_to_learn(dimensions, next_hops)
    total = needed if count is None else count

    def one(pool: AddressPool) -> int:
        return int(pool.draw(rng, 1)[0])

    def port() -> int:
        return int(rng.integers(ports[0], ports[1] + 1))

    src0, dst0, port0 = one(sources), one(destinations), port()
    for _ in range(_SPANNING_DRAWS):
        if src0 != dst0:
            break
        dst0 = one(destinations)
    skeleton: list[tuple[int, int, int]] = [(src0, dst0, port0)]
    skeleton += [(s, dst0, port0) for s in _spanning(lambda: one(sources), src0, len(sources.span()))]
    skeleton += [(src0, d, port0) for d in _spanning(lambda: one(destinations), dst0, len(destinations.span()))]
    skeleton += [(src0, dst0, p) for p in _spanning(port, port0, len(port_basis))]
    tuples = [t for t in skeleton if t[0] != t[1]][:total]
    while len(tuples) < total:
        missing = total - len(tuples)
        src = sources.draw(rng, missing)
        dst = destinations.draw(rng, missing)
        sport = rng.integers(ports[0], ports[1] + 1, missing)
        tuples += [
            (int(s), int(d), int(p))
            for s, d, p in zip(src.tolist(), dst.tolist(), sport.tolist(), strict=True)
            if s != d
        ]
        if len(set(sources.addresses) | set(destinations.addresses)) == 1:
            break  # a single address talks to nobody
    probes = tuple(HashProbe(name, s, d, p, ROCE_UDP_PORT, UDP) for s, d, p in tuples[:total])
    covered = XorBasis(probe.key ^ probes[0].key for probe in probes) if probes else XorBasis()
    return SwitchProbes(name, probes, dimensions, len(covered), needed)


def probe_tuples(
    pools: Mapping[str, tuple[AddressPool, AddressPool]],
    *,
    switches: Mapping[str, FabricSwitch] | None = None,
    ports: tuple[int, int] = DEFAULT_PROBE_PORTS,
    count: int | None = None,
    rng: int | np.random.Generator | None = 0,
) -> dict[str, SwitchProbes]:
    """The tuples to ask each switch of `pools` (name -> source pool, destination pool) about.

    `switches` (from the topology) gives each one's next-hop count (else ASSUMED_NEXT_HOPS); `ports` is the
    source-port range steering picks from; `count` overrides the number of probes per switch (the spanning
    tuples come first); `rng` seeds the draws, per switch, so one switch's probes do not depend on the others.
    """
    low, high = ports
    if not (isinstance(low, int) and isinstance(high, int) and 1 <= low <= high <= 65535):
        raise InputError(f"ports: a range low-high within 1-65535, got {low}-{high}")
    if count is not None and not 1 <= count <= MAX_PROBES_PER_SWITCH:
        raise InputError(f"count: 1..{MAX_PROBES_PER_SWITCH} probes per switch, got {count}")
    if not pools:
        raise InputError("switches: none to probe; name them (--switch) or give a topology and the job's pods")
    seed = int(rng.integers(0, 2**63)) if isinstance(rng, np.random.Generator) else int(rng or 0)
    probes: dict[str, SwitchProbes] = {}
    for name in sorted(pools, key=name_order):
        known = switches.get(name) if switches is not None else None
        next_hops = known.next_hops if known is not None else ASSUMED_NEXT_HOPS
        stream = np.random.default_rng((seed, zlib.crc32(name.encode())))
        probes[name] = _switch_probes(name, pools[name], (low, high), next_hops=next_hops, count=count, rng=stream)
    return probes


__all__ = [
    "ASSUMED_NEXT_HOPS",
    "DEFAULT_PROBE_PORTS",
    "AddressPool",
    "SwitchProbes",
    "address_pool",
    "fabric_switches",
    "probe_tuples",
    "switch_pools",
]
