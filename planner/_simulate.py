"""Flow simulator: collective traffic patterns, routing models, link loads, max-min fair rates, bus bandwidth.

A pattern gives server-level (src, dst) pairs per step; the network model replicates every pair on each
NIC/rail d (flow (src, d) -> (dst, d)), and with Q queue pairs splits each flow into Q sub-flows carrying 1/Q.
Loads are counted in flows (a sub-flow weighs 1/Q); capacities are 1.0 (line rate).
Step time = data / rate of the slowest flow. Under max-min fairness the slowest flow runs at exactly
1 / (largest link load), because the first water-filling level is set by the most loaded link; evaluation uses
that identity and `flow_rates` computes the full max-min allocation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

import numpy as np

from planner._errors import InputError
from planner._model import Pattern, Routing
from planner._network import JobNetwork

if TYPE_CHECKING:
    from planner._routes import RoutePlan

_HASH_SPINE = np.uint64(0x9E3779B97F4A7C15)
_CAPACITY_EPS = 1e-9
_BATCH_COUNT_CELLS = 1 << 21
"""Up to this many (seed, link) counters, all seeds are counted in one bincount."""

# -- traffic patterns ------------------------------------------------------------------------------------------


def ring_flows(order: Sequence[int] | np.ndarray) -> np.ndarray:
    """Flows of a unidirectional ring over servers in rank order: rank r sends to rank r+1 mod n.

    Returns an (n, 2) int array of (src, dst) server indices (empty for a single server).
    """
    ranks = np.asarray(order, dtype=np.int64)
    if ranks.size < 2:
        return np.zeros((0, 2), dtype=np.int64)
    return np.stack([ranks, np.roll(ranks, -1)], axis=1)


def _hd_layout(n: int) -> tuple[int, int]:
    """(p, extra): the largest power of two p <= n and extra = n - p ranks that fold into others."""
    p = 1 << (n.bit_length() - 1)
    return p, n - p


def halving_doubling_steps(order: Sequence[int] | np.ndarray) -> list[np.ndarray]:
    """Flows of every step of a halving-doubling allreduce over servers in rank order.

    Power of two n: reduce-scatter steps k = 0 .. log2(n)-1 where rank r exchanges with r xor 2^k (both
    directions), then the allgather steps in reverse order. Otherwise (MPICH's scheme) with p the largest power
    of two below n and e = n - p: a fold step where even ranks r < 2e send to r+1, the halving-doubling among
    the p remaining ranks (odd r < 2e as virtual rank r//2, r >= 2e as r - e), and an unfold step r+1 -> r.
    """
    ranks = np.asarray(order, dtype=np.int64)
    n = int(ranks.size)
    if n < 2:
        return []
    p, extra = _hd_layout(n)
    virtual_to_real = np.concatenate([np.arange(extra) * 2 + 1, np.arange(2 * extra, n)])
    exchange: list[np.ndarray] = []
    for k in range(p.bit_length() - 1):
        v = np.arange(p)
        partner = v ^ (1 << k)
        pairs = np.stack([virtual_to_real[v], virtual_to_real[partner]], axis=1)
        exchange.append(ranks[pairs])
    steps = exchange + exchange[::-1]
    if extra:
        even = np.arange(extra) * 2
        fold = ranks[np.stack([even, even + 1], axis=1)]
        steps = [fold, *steps, fold[:, ::-1].copy()]
    return steps


def halving_doubling_sizes(n: int) -> np.ndarray:
    """Data each flow carries in every step of `halving_doubling_steps` for n servers (1.0 = the whole vector)."""
    if n < 2:
        return np.zeros(0)
    p, extra = _hd_layout(n)
    halves = 0.5 ** np.arange(1, p.bit_length())
    sizes = np.concatenate([halves, halves[::-1]])
    if extra:
        sizes = np.concatenate([[1.0], sizes, [1.0]])
    return sizes


# -- bounds ------------------------------------------------------------------------------------------------------


def _check_flows(network: JobNetwork, flows: np.ndarray) -> np.ndarray:
    pairs = np.asarray(flows, dtype=np.int64)
    if pairs.ndim != 2 or pairs.shape[1] != 2:
        raise InputError(f"flows: expected an (n, 2) array of (src, dst) server indices, got shape {pairs.shape}")
    if pairs.size and (pairs.min() < 0 or pairs.max() >= network.servers):
        raise InputError(f"flows: server index out of range 0..{network.servers - 1}; index Placement.servers")
    return pairs


def lambda_star(network: JobNetwork, flows: np.ndarray) -> int:
    """Counting lower bound on the max link load of one step, valid for every routing of whole flows.

    Max over tier-1 switches of ceil(max(out, in) / U); in 3 tiers also max over pods (and planes) of
    ceil(max(cross-pod out, in) / spine-core links of the pod); the flows one server sends or receives per NIC;
    at least 1. Attainable by pinning in 2 tiers with equal uplink counts; with oversubscribed spines or
    unequal uplink counts the optimum can be higher (`RoutePlan.step_bounds` holds the proven bound).
    """
    pairs = _check_flows(network, flows)
    bound = 1
    if not pairs.size:
        return bound
    bound = max(
        bound,
        int(np.bincount(pairs[:, 0]).max()),
        int(np.bincount(pairs[:, 1]).max()),
    )
    per_pair = network.nics if network.layout == "tor" else 1
    src, dst = pairs[:, 0], pairs[:, 1]
    cross_leaf, cross_pod = network.cross_domains(src, dst)
    leaves = len(network.leaf_names)
    out = np.bincount(network.server_leaf[src[cross_leaf]], minlength=leaves) * per_pair
    into = np.bincount(network.server_leaf[dst[cross_leaf]], minlength=leaves) * per_pair
    tier1 = -(-np.maximum(out, into) // network.leaf_uplinks)
    bound = max(bound, int(tier1.max()))
    if network.listed_tiers == 2:
        pods = len(network.pod_names)
        out = np.bincount(network.server_pod[src[cross_pod]], minlength=pods) * per_pair
        into = np.bincount(network.server_pod[dst[cross_pod]], minlength=pods) * per_pair
        capacity = network.pod_spines * network.pod_uplinks
        bound = max(bound, int((-(-np.maximum(out, into) // capacity)).max()))
    return bound


# -- routing -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _SubFlows:
    """Every (pair, nic, qp) sub-flow of one step, flattened; weight 1/Q each."""

    pair: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    nic: np.ndarray
    qp: np.ndarray
    weight: float


def _expand(network: JobNetwork, pairs: np.ndarray, qps: int) -> _SubFlows:
    count = pairs.shape[0]
    n, q = network.nics, qps
    pair = np.repeat(np.arange(count), n * q)
    nic = np.tile(np.repeat(np.arange(n), q), count)
    qp = np.tile(np.arange(q), count * n)
    return _SubFlows(pair, pairs[pair, 0], pairs[pair, 1], nic, qp, 1.0 / q)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: a fixed, well-spread hash of uint64 values (wrapping arithmetic)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    mixed: np.ndarray = x ^ (x >> np.uint64(31))
    return mixed


def _ecmp_hash(sub: _SubFlows, seeds: np.ndarray, salt: np.uint64) -> np.ndarray:
    """(seeds, subflows) hash of each sub-flow's 5-tuple stand-in (src, dst, nic, qp) under each seed.

    A deterministic hash (not a fresh draw per step) keeps one connection on one path for its lifetime, as a
    switch's ECMP hash does, so the reduce-scatter and allgather halves of halving-doubling share paths.
    """
    with np.errstate(over="ignore"):
        key = (
            sub.src.astype(np.uint64) * np.uint64(0x100000001B3)
            + sub.dst.astype(np.uint64) * np.uint64(0x1000193)
            + sub.nic.astype(np.uint64) * np.uint64(0x10001)
            + sub.qp.astype(np.uint64)
        )
        key = _mix(key ^ salt)
        return _mix(key[None, :] ^ _mix(seeds.astype(np.uint64)[:, None] + salt))


def _uniform_choice(hashes: np.ndarray, choices: np.ndarray) -> np.ndarray:
    """Map 64-bit hashes onto 0 .. choices-1 by multiply-shift on the top 32 bits (faster than modulo)."""
    with np.errstate(over="ignore"):
        picked = ((hashes >> np.uint64(32)) * choices.astype(np.uint64)) >> np.uint64(32)
    return picked.astype(np.int64)


@dataclass(frozen=True, eq=False)
class _Routed:
    """Routes of the cross-leaf sub-flows of one step under each seed, kept as bases + choices (cheap to count)."""

    sub: _SubFlows
    cross: np.ndarray
    """Indices into the sub-flows that leave their tier-1 switch."""
    up_base: np.ndarray
    """Link id of uplink 0 of each cross sub-flow's source switch (add the spine)."""
    down_base: np.ndarray
    spine: np.ndarray
    """(seeds, cross sub-flows) chosen spine."""
    cross_pod: np.ndarray | None = None
    """Indices into the cross sub-flows that leave their pod (3 tiers only)."""
    core_up_base: np.ndarray | None = None
    """Link id of (spine 0, core 0) of the source pod's plane for cross-pod sub-flows (add spine x V + core)."""
    core_down_base: np.ndarray | None = None
    core: np.ndarray | None = None
    """(seeds, cross-pod sub-flows) chosen core uplink."""
    cores_per_spine: int = 0

    def seed_links(self, seed: int) -> np.ndarray:
        """Every switch link id used under one seed (a link appears once per sub-flow crossing it)."""
        spine = self.spine[seed]
        parts = [self.up_base + spine, self.down_base + spine]
        if self.cross_pod is not None and self.cross_pod.size:
            assert self.core_up_base is not None
            assert self.core_down_base is not None
            assert self.core is not None
            offset = spine[self.cross_pod] * self.cores_per_spine + self.core[seed]
            parts += [self.core_up_base + offset, self.core_down_base + offset]
        return np.concatenate(parts)

    @property
    def links(self) -> np.ndarray:
        """(seeds, cross sub-flows, 2 or 4) switch link ids; -1 pads tier-2 links of flows that stay in their pod."""
        up = self.up_base[None, :] + self.spine
        down = self.down_base[None, :] + self.spine
        if self.cross_pod is None:
            return np.stack([up, down], axis=2)
        assert self.core_up_base is not None
        assert self.core_down_base is not None
        assert self.core is not None
        core_up = np.full_like(up, -1)
        core_down = np.full_like(up, -1)
        offset = self.spine[:, self.cross_pod] * self.cores_per_spine + self.core
        core_up[:, self.cross_pod] = self.core_up_base[None, :] + offset
        core_down[:, self.cross_pod] = self.core_down_base[None, :] + offset
        return np.stack([up, down, core_up, core_down], axis=2)


def _route(
    network: JobNetwork,
    pairs: np.ndarray,
    routing: Routing,
    *,
    qps: int,
    seeds: np.ndarray,
    assignment: tuple[np.ndarray, np.ndarray] | None,
) -> _Routed:
    effective_qps = qps if routing == "ecmp" else 1
    sub = _expand(network, pairs, effective_qps)
    sw_a = network.tier1_switch(sub.src, sub.nic)
    sw_b = network.tier1_switch(sub.dst, sub.nic)
    cross = np.flatnonzero(sw_a != sw_b)
    src, dst, nic = sub.src[cross], sub.dst[cross], sub.nic[cross]
    leaf_a, leaf_b = network.server_leaf[src], network.server_leaf[dst]
    pod_a, pod_b = network.server_pod[src], network.server_pod[dst]
    spine_choices = np.minimum(network.leaf_uplinks[leaf_a], network.leaf_uplinks[leaf_b])
    three_tier = network.listed_tiers == 2
    core_choices = (
        np.minimum(network.pod_uplinks[pod_a], network.pod_uplinks[pod_b]) if three_tier else np.ones_like(src)
    )
    s = seeds.size
    if routing == "ecmp":
        picked = _SubFlows(sub.pair[cross], src, dst, nic, sub.qp[cross], sub.weight)
        hashes = _ecmp_hash(picked, seeds, _HASH_SPINE)
        spine = _uniform_choice(hashes, spine_choices)
        # The core choice uses the low 32 bits of the same hash (independent of the high bits that pick the spine).
        core = _uniform_choice(hashes << np.uint64(32), core_choices) if three_tier else np.zeros_like(spine)
    elif routing == "slice":
        port = network.server_slot[src] * (network.nics if network.layout == "tor" else 1)
        if network.layout == "tor":
            port = port + nic
        spine = np.broadcast_to(port % spine_choices, (s, cross.size))
        core = np.broadcast_to(network.leaf_position[leaf_a] % core_choices, (s, cross.size))
    else:
        if assignment is None:
            raise InputError("routes: routing 'pinned' needs a RoutePlan from pin_routes for these flows")
        spines, cores = assignment
        spine = np.broadcast_to(spines[sub.pair[cross], nic], (s, cross.size))
        core = np.broadcast_to(np.maximum(cores[sub.pair[cross], nic], 0), (s, cross.size))
    sw_a, sw_b = sw_a[cross], sw_b[cross]
    zero = np.zeros_like(sw_a)
    up_base = network.leaf_link(sw_a, zero, up=True)
    down_base = network.leaf_link(sw_b, zero, up=False)
    spine = np.ascontiguousarray(spine)
    if not three_tier:
        return _Routed(sub, cross, up_base, down_base, spine)
    plane = nic if network.layout == "rail" else np.zeros_like(nic)
    leaves_pod = np.flatnonzero(pod_a != pod_b)
    zero = np.zeros(leaves_pod.size, dtype=np.int64)
    return _Routed(
        sub,
        cross,
        up_base,
        down_base,
        spine,
        cross_pod=leaves_pod,
        core_up_base=network.spine_link(pod_a[leaves_pod], plane[leaves_pod], zero, zero, up=True),
        core_down_base=network.spine_link(pod_b[leaves_pod], plane[leaves_pod], zero, zero, up=False),
        core=np.ascontiguousarray(core[:, leaves_pod]),
        cores_per_spine=network.max_pod_uplinks,
    )


def _pinned_assignment(
    routes: RoutePlan | None, pairs: np.ndarray, routing: Routing
) -> tuple[np.ndarray, np.ndarray] | None:
    if routing != "pinned":
        return None
    if routes is None:
        raise InputError("routes: routing 'pinned' needs a RoutePlan from pin_routes for these flows")
    found = routes.assignment_for(pairs)
    if found is None:
        raise InputError("routes: the RoutePlan does not cover these flows; call pin_routes with the same flow steps")
    return found


def _check_routing(routing: str, qps: int) -> None:
    if routing not in get_args(Routing):
        raise InputError(f"routing: {routing!r} is not one of {', '.join(get_args(Routing))}")
    if qps < 1:
        raise InputError(f"qps: {qps} queue pairs per connection; use 1 or more (HCCL_RDMA_QPS_PER_CONNECTION)")


def _nic_loads(network: JobNetwork, pairs: np.ndarray) -> np.ndarray:
    """Loads of every NIC link (up then down), the same under every routing model."""
    count = np.bincount(pairs[:, 0], minlength=network.servers), np.bincount(pairs[:, 1], minlength=network.servers)
    return np.concatenate([np.repeat(count[0], network.nics), np.repeat(count[1], network.nics)]).astype(float)


def link_loads(
    network: JobNetwork,
    flows: np.ndarray,
    routing: Routing,
    *,
    qps: int = 1,
    seed: int = 0,
    routes: RoutePlan | None = None,
) -> np.ndarray:
    """Load of every directed link (indexed as `JobNetwork` link ids) in flows: a sub-flow of Q weighs 1/Q."""
    _check_routing(routing, qps)
    pairs = _check_flows(network, flows)
    routed = _route(
        network,
        pairs,
        routing,
        qps=qps,
        seeds=np.array([seed]),
        assignment=_pinned_assignment(routes, pairs, routing),
    )
    loads = np.zeros(network.num_links)
    nic = _nic_loads(network, pairs)
    loads[: nic.size] = nic
    loads += np.bincount(routed.seed_links(0), minlength=network.num_links) * routed.sub.weight
    return loads


def _max_switch_loads(network: JobNetwork, routed: _Routed, seeds: int) -> np.ndarray:
    """Largest switch-link load under each seed, shape (seeds,)."""
    if not routed.cross.size:
        return np.zeros(seeds)
    # Switch links follow the NIC links in the id layout; count only them. Few seeds x links: one bincount over
    # (seed, link); otherwise one seed at a time (a bincount over a range that fits in cache is faster).
    first = network.first_switch_link
    width = network.num_links - first
    largest = np.zeros(seeds)
    if seeds * width <= _BATCH_COUNT_CELLS:
        links = np.concatenate([routed.seed_links(seed) - first + seed * width for seed in range(seeds)])
        largest[:] = np.bincount(links, minlength=seeds * width).reshape(seeds, width).max(axis=1)
    else:
        for seed in range(seeds):
            largest[seed] = np.bincount(routed.seed_links(seed) - first, minlength=width).max()
    largest *= routed.sub.weight
    return largest


def max_link_loads(
    network: JobNetwork,
    flows: np.ndarray,
    routing: Routing,
    *,
    qps: int = 1,
    seeds: Sequence[int] | np.ndarray = (0,),
    routes: RoutePlan | None = None,
) -> np.ndarray:
    """Largest link load (NIC links included) of one step under each seed, shape (len(seeds),), in one pass.

    Equals `[link_loads(network, flows, routing, qps=qps, seed=s, routes=routes).max() for s in seeds]`
    (deterministic routings repeat one value) but hashes and counts all seeds together: use it in objectives
    that score many candidate orders.
    """
    _check_routing(routing, qps)
    pairs = _check_flows(network, flows)
    seed_values = np.asarray(seeds, dtype=np.int64).ravel()
    if not seed_values.size:
        raise InputError("seeds: give at least one ecmp seed")
    if not pairs.size:
        return np.zeros(seed_values.size)
    if routing != "ecmp":
        one = _route(
            network,
            pairs,
            routing,
            qps=qps,
            seeds=seed_values[:1],
            assignment=_pinned_assignment(routes, pairs, routing),
        )
        value = max(float(_nic_loads(network, pairs).max()), float(_max_switch_loads(network, one, 1)[0]))
        return np.full(seed_values.size, value)
    routed = _route(network, pairs, routing, qps=qps, seeds=seed_values, assignment=None)
    nic = float(_nic_loads(network, pairs).max())
    largest: np.ndarray = np.maximum(_max_switch_loads(network, routed, seed_values.size), nic)
    return largest


def ecmp_max_loads(
    network: JobNetwork, flows: np.ndarray, *, qps: int = 1, seeds: Sequence[int] | np.ndarray = (0,)
) -> np.ndarray:
    """Largest link load of one step under ECMP for every seed at once, shape (len(seeds),).

    `max_link_loads(network, flows, "ecmp", qps=qps, seeds=seeds)`; one vectorised pass over all seeds.
    """
    return max_link_loads(network, flows, "ecmp", qps=qps, seeds=seeds)


# -- max-min fair rates ------------------------------------------------------------------------------------------


def max_min_rates(paths: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Max-min fair rates of flows over links by progressive filling.

    `paths` is (flows, k) link ids padded with -1; `capacity` holds every link's capacity. All active flows
    grow together until a link saturates; its flows freeze; repeat. A flow without links gets rate inf.
    """
    flows = paths.shape[0]
    rates = np.zeros(flows)
    valid = paths >= 0
    entry_flow = np.nonzero(valid)[0]
    entry_link = paths[valid]
    remaining = capacity.astype(float).copy()
    active = np.zeros(flows, dtype=bool)
    active[entry_flow] = True
    rates[~active] = np.inf
    while active.any():
        keep = active[entry_flow]
        entry_flow, entry_link = entry_flow[keep], entry_link[keep]
        counts = np.bincount(entry_link, minlength=remaining.size)
        used = counts > 0
        increment = float((remaining[used] / counts[used]).min())
        rates[active] += increment
        remaining[used] -= increment * counts[used]
        saturated = used & (remaining <= _CAPACITY_EPS)
        active[entry_flow[saturated[entry_link]]] = False
    return rates


def flow_rates(
    network: JobNetwork,
    flows: np.ndarray,
    routing: Routing,
    *,
    qps: int = 1,
    seed: int = 0,
    routes: RoutePlan | None = None,
) -> np.ndarray:
    """Max-min fair rate (fraction of line rate) of every flow, shape (pairs, nics).

    A flow split over Q queue pairs finishes when its slowest queue pair does: its rate is Q x its smallest
    queue-pair rate.
    """
    _check_routing(routing, qps)
    pairs = _check_flows(network, flows)
    routed = _route(
        network,
        pairs,
        routing,
        qps=qps,
        seeds=np.array([seed]),
        assignment=_pinned_assignment(routes, pairs, routing),
    )
    sub = routed.sub
    width = routed.links.shape[2]
    paths = np.full((sub.pair.size, 2 + width), -1, dtype=np.int64)
    paths[:, 0] = network.nic_link(sub.src, sub.nic, up=True)
    paths[:, 1] = network.nic_link(sub.dst, sub.nic, up=False)
    paths[routed.cross, 2:] = routed.links[0]
    rates = max_min_rates(paths, np.ones(network.num_links))
    q = round(1.0 / sub.weight)
    per_qp = rates.reshape(pairs.shape[0], network.nics, q)
    effective: np.ndarray = per_qp.min(axis=2) * q
    return effective


# -- evaluation --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OrderEvaluation:
    """How a rank order performs on the network, with the lower bound of every metric."""

    cross_edges: tuple[int, ...]
    """Ring edges crossing a domain boundary at each listed tier (leaf; leaf and pod in 3 tiers)."""
    cross_edge_bounds: tuple[int, ...]
    """Lower bound of each: the number of domains the job touches at that tier, when > 1 (else 0)."""
    max_link_load: float
    """Largest link load in flows over all steps of the pattern (ecmp: mean over seeds)."""
    max_link_load_bound: int
    """λ*: the largest per-step lower bound on the max link load."""
    ring_busbw: float
    """Simulated ring allreduce bus bandwidth, fraction of line rate (ecmp: mean over seeds)."""
    hd_busbw: float
    """Simulated halving-doubling allreduce bus bandwidth, fraction of line rate (ecmp: mean over seeds)."""
    pattern: str = "ring"
    routing: str = "ecmp"
    qps: int = 1
    max_link_load_sem: float = 0.0
    """Standard error of `max_link_load` over the ecmp seeds (0 for deterministic routing)."""
    ring_busbw_sem: float = 0.0
    """Standard error of `ring_busbw` over the ecmp seeds."""
    hd_busbw_sem: float = 0.0
    """Standard error of `hd_busbw` over the ecmp seeds."""

    @property
    def max_link_load_gap(self) -> float:
        """max_link_load - λ* (0 = optimal)."""
        return self.max_link_load - self.max_link_load_bound

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict of every metric and its bound."""
        out = asdict(self)
        out["cross_edges"] = list(self.cross_edges)
        out["cross_edge_bounds"] = list(self.cross_edge_bounds)
        out["max_link_load_gap"] = self.max_link_load_gap
        return out


def cross_edges(network: JobNetwork, order: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Ring edges crossing each listed tier's domain boundaries, and the lower bound of each."""
    ring = ring_flows(order)
    counts: list[int] = []
    bounds: list[int] = []
    for tier in range(network.listed_tiers):
        domain = network.domain_of(tier)
        counts.append(int(np.count_nonzero(domain[ring[:, 0]] != domain[ring[:, 1]])))
        touched = int(np.unique(domain[np.asarray(order, dtype=np.int64)]).size)
        bounds.append(touched if touched > 1 else 0)
    return tuple(counts), tuple(bounds)


def _check_order(network: JobNetwork, order: Sequence[int]) -> np.ndarray:
    ranks = np.asarray(order, dtype=np.int64)
    if (
        ranks.ndim != 1
        or ranks.size != network.servers
        or not np.array_equal(np.sort(ranks), np.arange(network.servers))
    ):
        raise InputError(f"order: must be a permutation of the {network.servers} server indices")
    return ranks


StepPattern = Literal["ring", "halving-doubling"]


def _pattern_steps(order: np.ndarray, pattern: StepPattern) -> tuple[list[np.ndarray], np.ndarray]:
    if pattern == "ring":
        ring = ring_flows(order)
        return ([ring] if ring.size else []), np.ones(1 if ring.size else 0)
    return halving_doubling_steps(order), halving_doubling_sizes(order.size)


def _step_max_loads(
    network: JobNetwork,
    steps: list[np.ndarray],
    routing: Routing,
    *,
    qps: int,
    seeds: np.ndarray,
    routes: RoutePlan | None,
) -> np.ndarray:
    """(steps, seeds) largest link load of every step, NIC links included."""
    out = np.zeros((len(steps), seeds.size))
    cache: dict[bytes, np.ndarray] = {}
    for i, pairs in enumerate(steps):
        key = pairs.tobytes()
        if key not in cache:
            routed = _route(
                network,
                pairs,
                routing,
                qps=qps,
                seeds=seeds,
                assignment=_pinned_assignment(routes, pairs, routing),
            )
            nic = float(_nic_loads(network, pairs).max()) if pairs.size else 0.0
            cache[key] = np.maximum(_max_switch_loads(network, routed, seeds.size), nic)
        out[i] = cache[key]
    return out


def _sem(values: np.ndarray) -> float:
    """Standard error of the mean of per-seed values."""
    return float(values.std(ddof=1) / np.sqrt(values.size)) if values.size > 1 else 0.0


def _busbw(loads: np.ndarray, sizes: np.ndarray) -> tuple[float, float]:
    """(mean, standard error) over seeds of ideal time / simulated time, step time = data x largest load."""
    if not loads.size:
        return 1.0, 0.0
    times = (sizes[:, None] * np.maximum(loads, 1.0)).sum(axis=0)
    per_seed = sizes.sum() / times
    return float(np.mean(per_seed)), _sem(per_seed)


def evaluate_order(
    network: JobNetwork,
    order: Sequence[int],
    *,
    pattern: Pattern = "ring",
    routing: Routing = "ecmp",
    qps: int = 1,
    seeds: int = 20,
    routes: RoutePlan | None = None,
) -> OrderEvaluation:
    """Metrics of a rank order (`order[r]` = server of node rank r) under a pattern and routing model.

    `max_link_load` and its bound cover the pattern's steps ("mixed": ring and halving-doubling); both bus
    bandwidths are always reported. Routing "pinned" uses `routes` where it covers a step and pins the rest.
    """
    _check_routing(routing, qps)
    if pattern not in get_args(Pattern):
        raise InputError(f"pattern: {pattern!r} is not one of {', '.join(get_args(Pattern))}")
    if seeds < 1:
        raise InputError(f"seeds: {seeds}; average ecmp over at least 1 seed (20 is the default)")
    ranks = _check_order(network, order)
    seed_values = np.arange(seeds if routing == "ecmp" else 1)
    ring_steps, ring_sizes = _pattern_steps(ranks, "ring")
    hd_steps, hd_sizes = _pattern_steps(ranks, "halving-doubling")
    if routing == "pinned":
        routes = _complete_routes(network, [*ring_steps, *hd_steps], routes)
    ring_loads = _step_max_loads(network, ring_steps, routing, qps=qps, seeds=seed_values, routes=routes)
    hd_loads = _step_max_loads(network, hd_steps, routing, qps=qps, seeds=seed_values, routes=routes)
    chosen: list[np.ndarray] = []
    if pattern in ("ring", "mixed"):
        chosen.append(ring_loads)
    if pattern in ("halving-doubling", "mixed"):
        chosen.append(hd_loads)
    stacked = np.concatenate(chosen, axis=0)
    per_seed_max = stacked.max(axis=0) if stacked.size else np.zeros(1)
    max_load = float(per_seed_max.mean())
    bound_steps = (ring_steps if pattern in ("ring", "mixed") else []) + (
        hd_steps if pattern in ("halving-doubling", "mixed") else []
    )
    bound = max((_step_bound(network, s, routes if routing == "pinned" else None) for s in bound_steps), default=1)
    counts, bounds = cross_edges(network, ranks.tolist())
    ring_busbw, ring_sem = _busbw(ring_loads, ring_sizes)
    hd_busbw, hd_sem = _busbw(hd_loads, hd_sizes)
    return OrderEvaluation(
        cross_edges=counts,
        cross_edge_bounds=bounds,
        max_link_load=max_load,
        max_link_load_bound=bound,
        ring_busbw=ring_busbw,
        hd_busbw=hd_busbw,
        pattern=pattern,
        routing=routing,
        qps=qps,
        max_link_load_sem=_sem(per_seed_max),
        ring_busbw_sem=ring_sem,
        hd_busbw_sem=hd_sem,
    )


def _step_bound(network: JobNetwork, flows: np.ndarray, routes: RoutePlan | None) -> int:
    """λ* of a step, raised to the route plan's proven bound for it under pinned routing."""
    bound = lambda_star(network, flows)
    proven = routes.bound_for(flows) if routes is not None else None
    return bound if proven is None else max(bound, proven)


def _complete_routes(network: JobNetwork, steps: list[np.ndarray], routes: RoutePlan | None) -> RoutePlan:
    """`routes` extended with pinned routes for the steps it does not cover."""
    from planner._routes import pin_routes

    missing = [s for s in steps if routes is None or routes.assignment_for(s) is None]
    if not missing:
        assert routes is not None
        return routes
    extra = pin_routes(network, missing)
    return extra if routes is None else routes.merged(extra)
