"""Flow simulator: collective traffic patterns, routing models, link loads, max-min fair rates, bus bandwidth.

A pattern gives server-level (src, dst) pairs per step; the network model replicates every pair on each
NIC/rail d (flow (src, d) -> (dst, d)), and with Q queue pairs splits each flow into Q sub-flows carrying 1/Q.
Loads are counted in flows (a sub-flow weighs 1/Q); capacities are 1.0 (line rate).
Step time = data / rate of the slowest flow. Under max-min fairness the slowest flow runs at exactly
1 / (largest link load), because the first water-filling level is set by the most loaded link; evaluation uses
that identity and `flow_rates` computes the full max-min allocation.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

import numpy as np

from planner._errors import InputError
from planner._model import Pattern, Routing
from planner.sim._network import JobNetwork

if TYPE_CHECKING:
    from planner.sim._pinning import RoutePlan

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


@dataclass(frozen=True, eq=False)
class _Connections:
    """The distinct connections of one or more steps, and where each first appears (its ECMP stream).

    A connection (src, dst) is routed once: every step that repeats it (the two halves of halving-doubling, a
    ring edge that is also a halving-doubling pair in "mixed") reuses its path, as a switch hashing the same
    5-tuple does.
    """

    pairs: np.ndarray
    """(m, 2) distinct (src, dst) server pairs."""
    step: np.ndarray
    """Stream id of the first step holding each connection."""
    position: np.ndarray
    """Position of each connection in that step's flow array."""
    members: tuple[np.ndarray, ...]
    """For every step, the connection index of each of its flows."""


def _connections(steps: Sequence[np.ndarray], servers: int, step_ids: Sequence[int]) -> _Connections:
    lengths = np.array([s.shape[0] for s in steps], dtype=np.int64)
    if not int(lengths.sum()):
        empty = np.zeros(0, dtype=np.int64)
        return _Connections(np.zeros((0, 2), dtype=np.int64), empty, empty, tuple(empty for _ in steps))
    flat = np.concatenate([s.reshape(-1, 2) for s in steps]).astype(np.int64, copy=False)
    step_of = np.repeat(np.asarray(step_ids, dtype=np.int64), lengths)
    position = np.arange(flat.shape[0]) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    _, first, inverse = np.unique(flat[:, 0] * servers + flat[:, 1], return_index=True, return_inverse=True)
    # number connections by first appearance, so a step without repeats is connections 0 .. len-1 in order
    appearance = np.argsort(first)
    renumber = np.empty_like(appearance)
    renumber[appearance] = np.arange(appearance.size)
    first = first[appearance]
    members = tuple(np.split(renumber[inverse.ravel()], np.cumsum(lengths)[:-1]))
    return _Connections(flat[first], step_of[first], position[first], members)


def _ranks_within(group: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Rank of every element among the elements of its group by ascending `order` (distinct within a group)."""
    if not group.size:
        return np.zeros(0, dtype=np.int64)
    span = int(order.max()) + 1
    # one integer key when it fits (faster than lexsort's two passes)
    fits = int(group.max()) < (1 << 62) // span
    sort = np.argsort(group * span + order) if fits else np.lexsort((order, group))
    grouped = group[sort]
    start = np.ones(sort.size, dtype=bool)
    start[1:] = grouped[1:] != grouped[:-1]
    first = np.maximum.accumulate(np.where(start, np.arange(sort.size), 0))
    ranks = np.empty(sort.size, dtype=np.int64)
    ranks[sort] = np.arange(sort.size) - first
    return ranks


def _uniform_choice(hashes: np.ndarray, choices: np.ndarray) -> np.ndarray:
    """Map 64-bit hashes onto 0 .. choices-1 by multiply-shift on the top 32 bits (faster than modulo)."""
    with np.errstate(over="ignore"):
        picked = ((hashes >> np.uint64(32)) * choices.astype(np.uint64)) >> np.uint64(32)
    return picked.astype(np.int64)


@dataclass(frozen=True, eq=False)
class _Routed:
    """Routes of the cross-leaf sub-flows of one step under each seed, kept as bases + choices (cheap to count)."""

    weight: float
    """Load of one sub-flow, 1/Q."""
    cross: np.ndarray
    """Indices into the step's sub-flows (pair, NIC, queue pair in step order) that leave their tier-1 switch."""
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

    def take(self, view: _StepView) -> _Routed:
        """The routes of one step of a union of connections routed together."""
        if self.cross_pod is None or view.cross_pod is None or view.pod_ids is None:
            return _Routed(
                self.weight, view.cross, self.up_base[view.ids], self.down_base[view.ids], self.spine[:, view.ids]
            )
        assert self.core_up_base is not None
        assert self.core_down_base is not None
        assert self.core is not None
        return _Routed(
            self.weight,
            view.cross,
            self.up_base[view.ids],
            self.down_base[view.ids],
            self.spine[:, view.ids],
            cross_pod=view.cross_pod,
            core_up_base=self.core_up_base[view.pod_ids],
            core_down_base=self.core_down_base[view.pod_ids],
            core=self.core[:, view.pod_ids],
            cores_per_spine=self.cores_per_spine,
        )


@dataclass(frozen=True, eq=False)
class _StepView:
    """Where one step's sub-flows sit among the sub-flows of the union of connections they are routed with."""

    cross: np.ndarray
    """Indices into the step's sub-flows (pair, NIC, queue pair in step order) that leave their tier-1 switch."""
    ids: np.ndarray
    """Their indices among the union's cross sub-flows."""
    cross_pod: np.ndarray | None
    """Indices into the step's cross sub-flows that leave their pod (3 tiers)."""
    pod_ids: np.ndarray | None
    """Their indices among the union's cross-pod sub-flows."""


_SALT_SPINE = np.uint64(0x9E3779B97F4A7C15)
_SALT_CORE = np.uint64(0xD1B54A32D192ED03)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_ROUTE_CHUNK_CELLS = 1 << 21
"""ECMP choices drawn per pass: seeds x cross sub-flows (bigger arrays cost more in page faults than they save)."""


@dataclass(frozen=True, eq=False)
class _Prepared:
    """The seed-independent part of routing a set of flows: sub-flows, link bases, choices and ECMP stream keys.

    ECMP common random numbers: a sub-flow's spine is the draw of the stream (seed, source tier-1 switch, step,
    rank), rank = its place among that switch's cross sub-flows of the step ordered by (NIC, queue pair,
    position in the step); in 3 tiers its core is the draw of (seed, spine switch it reaches, step, rank among
    that spine's cross-pod sub-flows of the step, same ordering). Within one seed distinct sub-flows have
    distinct stream keys, so their choices are independent and uniform, as with a hash of the 5-tuple: the
    model's distribution is unchanged. But two orders whose switches carry the same flow counts draw the same
    choices there, so their loads are equal (or strongly correlated) seed by seed.
    """

    network: JobNetwork
    weight: float
    """Load of one sub-flow, 1/Q."""
    subflows: int
    """Sub-flows of the routed pairs: pairs x NICs x queue pairs."""
    cross: np.ndarray
    """Indices of the sub-flows (pair, NIC, queue pair order) that leave their tier-1 switch."""
    up_base: np.ndarray
    down_base: np.ndarray
    spine_choices: np.ndarray
    fixed_spine: np.ndarray | None
    """Deterministic routings: the spine of every cross sub-flow."""
    spine_key: np.ndarray | None
    """ECMP: the stream key of every cross sub-flow (each seed mixes in)."""
    cross_pod: np.ndarray | None = None
    core_up_base: np.ndarray | None = None
    core_down_base: np.ndarray | None = None
    core_choices: np.ndarray | None = None
    fixed_core: np.ndarray | None = None
    core_step: np.ndarray | None = None
    """ECMP, 3 tiers: stream step of every cross-pod sub-flow."""
    core_switch: np.ndarray | None = None
    """ECMP, 3 tiers: id of spine 0 of the source pod's plane (add the spine) for every cross-pod sub-flow."""
    core_order: np.ndarray | None = None
    """ECMP, 3 tiers: cross-pod sub-flows sorted by (pod, plane, step, NIC, queue pair, position)."""
    core_block: np.ndarray | None = None
    """ECMP, 3 tiers: dense (pod, plane, step) block of each sub-flow of `core_order`."""

    def route(self, seeds: np.ndarray) -> _Routed:
        """Routes of the cross sub-flows under each seed."""
        s = seeds.size
        if self.spine_key is None:
            assert self.fixed_spine is not None
            spine = np.broadcast_to(self.fixed_spine, (s, self.cross.size))
        else:
            spine = _uniform_choice(_seeded(self.spine_key, seeds, _SALT_SPINE), self.spine_choices)
        if self.cross_pod is None:
            return _Routed(self.weight, self.cross, self.up_base, self.down_base, spine)
        if self.spine_key is None:
            assert self.fixed_core is not None
            core = np.broadcast_to(self.fixed_core, (s, self.cross_pod.size))
        else:
            core = self._ecmp_cores(spine[:, self.cross_pod], seeds)
        return _Routed(
            self.weight,
            self.cross,
            self.up_base,
            self.down_base,
            spine,
            cross_pod=self.cross_pod,
            core_up_base=self.core_up_base,
            core_down_base=self.core_down_base,
            core=np.ascontiguousarray(core),
            cores_per_spine=self.network.max_pod_uplinks,
        )

    def _ecmp_cores(self, spine: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        """(seeds, cross-pod sub-flows) core uplink, drawn from the stream of the spine switch each one reaches."""
        assert self.core_order is not None
        assert self.core_block is not None
        assert self.core_switch is not None
        assert self.core_step is not None
        assert self.core_choices is not None
        order, size = self.core_order, self.core_order.size
        if not size:
            return np.zeros((seeds.size, 0), dtype=np.int64)
        # Rank at the spine switch, per seed: a stable sort by (block, spine) keeps the ordering inside a block.
        blocks = int(self.core_block[-1]) + 1
        narrow = np.uint16 if blocks * self.network.max_uplinks <= (1 << 16) else np.int64
        group = (self.core_block * self.network.max_uplinks)[None, :] + spine[:, order]
        group = group.astype(narrow)  # 16-bit keys sort by radix
        sort = np.argsort(group, axis=1, kind="stable")
        grouped = np.take_along_axis(group, sort, axis=1)
        start = np.ones(grouped.shape, dtype=bool)
        start[:, 1:] = grouped[:, 1:] != grouped[:, :-1]
        index = np.arange(size, dtype=np.int32)
        first = np.maximum.accumulate(np.where(start, index[None, :], np.int32(0)), axis=1)
        in_order = np.empty(sort.shape, dtype=np.int32)
        np.put_along_axis(in_order, sort, index[None, :] - first, axis=1)
        rank = np.empty_like(in_order)
        rank[:, order] = in_order
        # stream key (spine switch, step, rank), packed as in `_stream_key` from its seed-independent part
        fixed = _stream_key(self.core_switch, self.core_step, np.zeros(size, dtype=np.int64))
        key = (fixed[None, :] + (spine.astype(np.uint64) << np.uint64(40))) | rank.astype(np.uint64)
        return _uniform_choice(_seeded(key, seeds, _SALT_CORE), self.core_choices[None, :])

    def view(self, members: np.ndarray) -> _StepView:
        """Where the sub-flows of a step (its flows = connections `members` of this union) sit in it."""
        qps = round(1.0 / self.weight)
        per_pair = self.network.nics * qps
        where = np.full(self.subflows, -1, dtype=np.int64)
        where[self.cross] = np.arange(self.cross.size)
        union_ids = (members[:, None] * per_pair + np.arange(per_pair)[None, :]).ravel()
        found = where[union_ids]
        cross = np.flatnonzero(found >= 0)
        ids = found[cross]
        if self.cross_pod is None:
            return _StepView(cross, ids, None, None)
        pod_slot = np.full(self.cross.size, -1, dtype=np.int64)
        pod_slot[self.cross_pod] = np.arange(self.cross_pod.size)
        slots = pod_slot[ids]
        leaves_pod = np.flatnonzero(slots >= 0)
        return _StepView(cross, ids, leaves_pod, slots[leaves_pod])


def _stream_key(switch: np.ndarray, step: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Injective packing of an ECMP stream (hashing switch, step, rank): switch bits 40+, step 32-39, rank 0-31."""
    return (
        (switch.astype(np.uint64) << np.uint64(40)) | (step.astype(np.uint64) << np.uint64(32)) | rank.astype(np.uint64)
    )


def _seeded(key: np.ndarray, seeds: np.ndarray, salt: np.uint64) -> np.ndarray:
    """(seeds, flows) hash of every stream key under every seed; `key` is (flows,) or (seeds, flows).

    splitmix64 of the key, xor-ed with splitmix64 of the seed, mixed again: distinct keys (or seeds) give
    unrelated values, i.e. independent uniform draws for the purposes of the model.
    """
    with np.errstate(over="ignore"):
        seeded = _mix(seeds.astype(np.uint64)[:, None] + salt)
        if key.ndim == 1:
            return _mix(_mix(key ^ salt)[None, :] ^ seeded)
        # per-seed keys: one pass; the odd multiplier spreads the low (rank) bits before the finaliser
        return _mix((key * _GOLDEN) ^ seeded)


def _prepare(
    network: JobNetwork,
    pairs: np.ndarray,
    routing: Routing,
    *,
    qps: int,
    assignment: tuple[np.ndarray, np.ndarray] | None,
    streams: tuple[np.ndarray, np.ndarray] | None = None,
) -> _Prepared:
    """Everything about routing `pairs` that does not depend on the seed (ECMP `streams`: step, position)."""
    effective_qps = qps if routing == "ecmp" else 1
    per_pair = network.nics * effective_qps
    # A sub-flow leaves its tier-1 switch exactly when its pair spans two leaves (rails never differ within a
    # flow), so only those pairs are expanded into (pair, NIC, queue pair) sub-flows.
    crossing = np.flatnonzero(network.server_leaf[pairs[:, 0]] != network.server_leaf[pairs[:, 1]])
    pair = np.repeat(crossing, per_pair)
    nic = np.tile(np.repeat(np.arange(network.nics), effective_qps), crossing.size)
    qp = np.tile(np.arange(effective_qps), crossing.size * network.nics)
    cross = pair * per_pair + nic * effective_qps + qp
    src, dst = pairs[pair, 0], pairs[pair, 1]
    sw_a = network.tier1_switch(src, nic)
    sw_b = network.tier1_switch(dst, nic)
    leaf_a, leaf_b = network.server_leaf[src], network.server_leaf[dst]
    pod_a, pod_b = network.server_pod[src], network.server_pod[dst]
    spine_choices = np.minimum(network.leaf_uplinks[leaf_a], network.leaf_uplinks[leaf_b])
    three_tier = network.listed_tiers == 2
    plane = nic if network.layout == "rail" else np.zeros_like(nic)
    leaves_pod = np.flatnonzero(pod_a != pod_b)
    core_choices = np.minimum(network.pod_uplinks[pod_a], network.pod_uplinks[pod_b])[leaves_pod]
    fixed_spine = fixed_core = spine_key = None
    core_step = core_switch = core_order = core_block = None
    if routing == "ecmp":
        if streams is None:
            streams = (np.zeros(pairs.shape[0], dtype=np.int64), np.arange(pairs.shape[0]))
        step, position = streams
        local = nic if network.layout == "tor" else np.zeros_like(nic)
        # rank among the source switch's cross sub-flows of the step, ordered by (NIC, queue pair, position)
        steps = int(step.max(initial=0)) + 1
        block = network.server_leaf[pairs[crossing, 0]] * steps + step[crossing]
        pair_rank = np.zeros(pairs.shape[0], dtype=np.int64)
        pair_count = np.zeros(pairs.shape[0], dtype=np.int64)
        pair_rank[crossing] = _ranks_within(block, position[crossing])
        pair_count[crossing] = np.bincount(block)[block] if block.size else block
        rank = (local * effective_qps + qp) * pair_count[pair] + pair_rank[pair]
        spine_key = _stream_key(sw_a, step[pair], rank)
        if three_tier:
            lp = leaves_pod
            source = pod_a[lp] * network.planes + plane[lp]
            span = int(position.max(initial=0)) + 1
            ordering = (local[lp] * effective_qps + qp[lp]) * span + position[pair[lp]]
            _, dense = np.unique(source * steps + step[pair[lp]], return_inverse=True)
            dense = dense.ravel()
            order = np.lexsort((ordering, dense))
            core_step, core_switch = step[pair[lp]], source * network.max_uplinks
            core_order, core_block = order, dense[order]
    elif routing == "slice":
        port = network.server_slot[src] * (network.nics if network.layout == "tor" else 1)
        if network.layout == "tor":
            port = port + nic
        fixed_spine = port % spine_choices
        if three_tier:
            fixed_core = network.leaf_position[leaf_a][leaves_pod] % np.maximum(core_choices, 1)
    else:
        if assignment is None:
            raise InputError("routes: routing 'pinned' needs a RoutePlan from pin_routes for these flows")
        spines, cores = assignment
        fixed_spine = spines[pair, nic]
        if three_tier:
            fixed_core = np.maximum(cores[pair, nic], 0)[leaves_pod]
    zero = np.zeros(cross.size, dtype=np.int64)
    prepared = _Prepared(
        network,
        1.0 / effective_qps,
        pairs.shape[0] * per_pair,
        cross,
        network.leaf_link(sw_a, zero, up=True),
        network.leaf_link(sw_b, zero, up=False),
        spine_choices,
        fixed_spine,
        spine_key,
    )
    if not three_tier:
        return prepared
    zero = np.zeros(leaves_pod.size, dtype=np.int64)
    return dataclasses.replace(
        prepared,
        cross_pod=leaves_pod,
        core_up_base=network.spine_link(pod_a[leaves_pod], plane[leaves_pod], zero, zero, up=True),
        core_down_base=network.spine_link(pod_b[leaves_pod], plane[leaves_pod], zero, zero, up=False),
        core_choices=core_choices,
        fixed_core=fixed_core,
        core_step=core_step,
        core_switch=core_switch,
        core_order=core_order,
        core_block=core_block,
    )


def _prepared_steps(
    network: JobNetwork,
    steps: Sequence[np.ndarray],
    routing: Routing,
    *,
    qps: int,
    routes: RoutePlan | None,
    step_ids: Sequence[int] | None = None,
) -> list[tuple[_Prepared, _StepView | None]]:
    """Seed-independent routing of every step: (prepared routes, the step's view of them, or None = all of them).

    ECMP routes the distinct connections of all steps together, once: a connection keeps one path in every
    step it appears in, and its stream is that of the first step holding it (`step_ids`, default 0, 1, ...).
    Slice and pinned routing are deterministic per flow and route each step on its own.
    """
    if routing != "ecmp":
        return [
            (_prepare(network, s, routing, qps=qps, assignment=_pinned_assignment(routes, s, routing)), None)
            for s in steps
        ]
    ids = list(range(len(steps))) if step_ids is None else list(step_ids)
    connections = _connections(steps, network.servers, ids)
    union = _prepare(
        network,
        connections.pairs,
        routing,
        qps=qps,
        assignment=None,
        streams=(connections.step, connections.position),
    )
    whole = connections.pairs.shape[0]
    return [
        (union, None if members.size == whole and bool((members == np.arange(whole)).all()) else union.view(members))
        for members in connections.members
    ]


def _routed_steps(
    network: JobNetwork,
    steps: Sequence[np.ndarray],
    routing: Routing,
    *,
    qps: int,
    seeds: np.ndarray,
    routes: RoutePlan | None,
) -> list[_Routed]:
    """Routes of every step under every seed, in one pass (few seeds or small steps)."""
    routed: dict[int, _Routed] = {}
    out: list[_Routed] = []
    for prepared, view in _prepared_steps(network, steps, routing, qps=qps, routes=routes):
        whole = routed.setdefault(id(prepared), prepared.route(seeds))
        out.append(whole if view is None else whole.take(view))
    return out


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
    (routed,) = _routed_steps(network, [pairs], routing, qps=qps, seeds=np.array([seed]), routes=routes)
    loads = np.zeros(network.num_links)
    nic = _nic_loads(network, pairs)
    loads[: nic.size] = nic
    loads += np.bincount(routed.seed_links(0), minlength=network.num_links) * routed.weight
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
    largest *= routed.weight
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
        (one,) = _routed_steps(network, [pairs], routing, qps=qps, seeds=seed_values[:1], routes=routes)
        value = max(float(_nic_loads(network, pairs).max()), float(_max_switch_loads(network, one, 1)[0]))
        return np.full(seed_values.size, value)
    (routed,) = _routed_steps(network, [pairs], routing, qps=qps, seeds=seed_values, routes=None)
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
    (routed,) = _routed_steps(network, [pairs], routing, qps=qps, seeds=np.array([seed]), routes=routes)
    sub = _expand(network, pairs, qps if routing == "ecmp" else 1)
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
    """Simulated ring allreduce bus bandwidth, fraction of line rate (ecmp: mean over seeds; NaN if not simulated)."""
    hd_busbw: float
    """Simulated halving-doubling allreduce bus bandwidth, fraction of line rate (ecmp: mean; NaN if not simulated)."""
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
        for key, value in out.items():
            if isinstance(value, float) and math.isnan(value):
                out[key] = None  # a bus bandwidth that was not simulated (JSON has no NaN)
        out["cross_edges"] = list(self.cross_edges)
        out["cross_edge_bounds"] = list(self.cross_edge_bounds)
        out["max_link_load_gap"] = self.max_link_load_gap
        return out


def ring_cross_edges(network: JobNetwork, order: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
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


def _check_order(network: JobNetwork, order: Sequence[int] | np.ndarray) -> np.ndarray:
    ranks = np.asarray(order, dtype=np.int64)
    if (
        ranks.ndim != 1
        or ranks.size != network.servers
        or not np.array_equal(np.sort(ranks), np.arange(network.servers))
    ):
        raise InputError(f"order: must be a permutation of the {network.servers} server indices")
    return ranks


StepPattern = Literal["ring", "halving-doubling"]
STEP_PATTERNS: tuple[StepPattern, ...] = ("ring", "halving-doubling")
"""The collectives whose bus bandwidth `evaluate_order` simulates (by default both)."""


def _pattern_steps(order: np.ndarray, pattern: StepPattern) -> tuple[list[np.ndarray], np.ndarray]:
    if pattern == "ring":
        ring = ring_flows(order)
        return ([ring] if ring.size else []), np.ones(1 if ring.size else 0)
    return halving_doubling_steps(order), halving_doubling_sizes(order.size)


def unique_steps(steps: list[np.ndarray]) -> tuple[list[np.ndarray], np.ndarray]:
    """Distinct steps (the reduce-scatter and allgather halves repeat) and the index of each step's copy."""
    seen: dict[bytes, int] = {}
    unique: list[np.ndarray] = []
    index = np.zeros(len(steps), dtype=np.int64)
    for i, pairs in enumerate(steps):
        key = pairs.tobytes()
        if key not in seen:
            seen[key] = len(unique)
            unique.append(pairs)
        index[i] = seen[key]
    return unique, index


def _step_max_loads(
    network: JobNetwork,
    steps: list[np.ndarray],
    routing: Routing,
    *,
    qps: int,
    seeds: np.ndarray,
    routes: RoutePlan | None,
    step_ids: Sequence[int],
) -> np.ndarray:
    """(steps, seeds) largest link load of every (distinct) step, NIC links included."""
    out = np.zeros((len(steps), seeds.size))
    prepared = _prepared_steps(network, steps, routing, qps=qps, routes=routes, step_ids=step_ids)
    nic = [float(_nic_loads(network, pairs).max()) if pairs.size else 0.0 for pairs in steps]
    largest = max((p.cross.size for p, _ in prepared), default=0)
    chunk = max(1, _ROUTE_CHUNK_CELLS // max(largest, 1))
    for begin in range(0, seeds.size, chunk):
        part = seeds[begin : begin + chunk]
        routed: dict[int, _Routed] = {}
        for i, (one, view) in enumerate(prepared):
            whole = routed.get(id(one))
            if whole is None:
                whole = routed[id(one)] = one.route(part)
            step = whole if view is None else whole.take(view)
            out[i, begin : begin + part.size] = np.maximum(_max_switch_loads(network, step, part.size), nic[i])
    return out


def _sem(values: np.ndarray) -> float:
    """Standard error of the mean of per-seed values."""
    return float(values.std(ddof=1) / np.sqrt(values.size)) if values.size > 1 else 0.0


def paired_difference(mine: np.ndarray, other: np.ndarray) -> tuple[float, float]:
    """(mean, standard error) of the per-seed differences `mine - other` of two orders evaluated on one seed set.

    With common random numbers the two orders' noise largely cancels, so this standard error is far below
    the unpaired one (the hypot of the two means' standard errors).
    """
    diff = np.asarray(mine, dtype=float) - np.asarray(other, dtype=float)
    if diff.size == 0:
        raise InputError("seeds: compare per-seed values of at least one seed")
    return float(diff.mean()), _sem(diff)


def _busbw(loads: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Per-seed ideal time / simulated time, step time = data x largest load (1.0 when there is no step)."""
    if not loads.size:
        return np.ones(loads.shape[1] if loads.ndim == 2 else 1)
    times = (sizes[:, None] * np.maximum(loads, 1.0)).sum(axis=0)
    per_seed: np.ndarray = sizes.sum() / times
    return per_seed


@dataclass(frozen=True, eq=False)
class SeedMetrics:
    """Per-seed values behind an `OrderEvaluation`, to compare orders seed by seed (common random numbers).

    Evaluated on the same seeds, two orders share ECMP draws wherever their switches carry the same flow
    counts, so `paired_difference` of their arrays has a far smaller standard error than the two means.
    """

    seeds: np.ndarray
    max_link_load: np.ndarray
    """Largest link load over the pattern's steps under each seed."""
    ring_busbw: np.ndarray | None
    """Ring bus bandwidth under each seed (None when the ring was not simulated)."""
    hd_busbw: np.ndarray | None
    """Halving-doubling bus bandwidth under each seed (None when it was not simulated)."""
    max_link_load_bound: int
    """λ* (or the route plan's proven bound under pinned routing) over the pattern's steps."""

    def busbw(self, pattern: StepPattern) -> np.ndarray:
        """Per-seed bus bandwidth of one collective; raises InputError when it was not simulated."""
        values = self.ring_busbw if pattern == "ring" else self.hd_busbw
        if values is None:
            raise InputError(f"patterns: {pattern!r} was not simulated; include it in evaluate's patterns")
        return values


def _step_patterns(pattern: Pattern, patterns: Collection[str] | None) -> tuple[StepPattern, ...]:
    """The collectives to simulate: `patterns` (default both) plus those the pattern's max load needs."""
    wanted = set(STEP_PATTERNS if patterns is None else patterns)
    unknown = sorted(wanted - set(STEP_PATTERNS))
    if unknown:
        raise InputError(f"patterns: {unknown[0]!r} is not one of {', '.join(STEP_PATTERNS)}")
    if pattern in ("ring", "mixed"):
        wanted.add("ring")
    if pattern in ("halving-doubling", "mixed"):
        wanted.add("halving-doubling")
    return tuple(p for p in STEP_PATTERNS if p in wanted)


def order_seed_metrics(
    network: JobNetwork,
    order: Sequence[int] | np.ndarray,
    *,
    pattern: Pattern = "ring",
    routing: Routing = "ecmp",
    qps: int = 1,
    seeds: int | Sequence[int] | np.ndarray = 20,
    routes: RoutePlan | None = None,
    patterns: Collection[StepPattern] | None = None,
) -> SeedMetrics:
    """Per-seed max link load and bus bandwidths of a rank order (`evaluate_order` reports their means).

    `seeds`: a count (seeds 0 .. k-1, as `evaluate_order`) or the seed values. `patterns`: the collectives
    simulated for their bus bandwidth (default both); the pattern's own steps are always simulated. Under
    deterministic routing every seed repeats one value. Steps keep fixed ECMP stream ids (ring 0, the
    distinct halving-doubling steps 1, 2, ...) so that every order is evaluated on the same streams.
    """
    _check_routing(routing, qps)
    if pattern not in get_args(Pattern):
        raise InputError(f"pattern: {pattern!r} is not one of {', '.join(get_args(Pattern))}")
    if isinstance(seeds, int | np.integer):
        if seeds < 1:
            raise InputError(f"seeds: {seeds}; average ecmp over at least 1 seed (20 is the default)")
        seed_values = np.arange(int(seeds))
    else:
        seed_values = np.asarray(seeds, dtype=np.int64).ravel()
        if not seed_values.size:
            raise InputError("seeds: give at least one ecmp seed")
    simulated = _step_patterns(pattern, patterns)
    ranks = _check_order(network, order)
    runs = seed_values if routing == "ecmp" else seed_values[:1]
    ring_steps, ring_sizes = _pattern_steps(ranks, "ring") if "ring" in simulated else ([], np.zeros(0))
    hd_all, hd_sizes = (
        _pattern_steps(ranks, "halving-doubling") if "halving-doubling" in simulated else ([], np.zeros(0))
    )
    hd_steps, hd_index = unique_steps(hd_all)
    if routing == "pinned":
        routes = _complete_routes(network, [*ring_steps, *hd_steps], routes)
    step_ids = [0] * len(ring_steps) + [1 + k for k in range(len(hd_steps))]
    loads = _step_max_loads(
        network, [*ring_steps, *hd_steps], routing, qps=qps, seeds=runs, routes=routes, step_ids=step_ids
    )
    ring_loads = loads[: len(ring_steps)]
    hd_loads = loads[len(ring_steps) :][hd_index] if hd_all else np.zeros((0, runs.size))
    chosen: list[np.ndarray] = []
    bound_steps: list[np.ndarray] = []
    if pattern in ("ring", "mixed"):
        chosen.append(ring_loads)
        bound_steps += ring_steps
    if pattern in ("halving-doubling", "mixed"):
        chosen.append(hd_loads)
        bound_steps += hd_steps
    stacked = np.concatenate(chosen, axis=0)
    per_seed_max = stacked.max(axis=0) if stacked.size else np.zeros(runs.size)
    bound = max((_step_bound(network, s, routes if routing == "pinned" else None) for s in bound_steps), default=1)
    repeat = seed_values.size // runs.size
    return SeedMetrics(
        seeds=seed_values,
        max_link_load=np.repeat(per_seed_max, repeat),
        ring_busbw=np.repeat(_busbw(ring_loads, ring_sizes), repeat) if "ring" in simulated else None,
        hd_busbw=np.repeat(_busbw(hd_loads, hd_sizes), repeat) if "halving-doubling" in simulated else None,
        max_link_load_bound=bound,
    )


def _mean_and_sem(values: np.ndarray | None) -> tuple[float, float]:
    if values is None:
        return math.nan, math.nan
    return float(values.mean()), _sem(values)


def evaluate_order(
    network: JobNetwork,
    order: Sequence[int],
    *,
    pattern: Pattern = "ring",
    routing: Routing = "ecmp",
    qps: int = 1,
    seeds: int = 20,
    routes: RoutePlan | None = None,
    patterns: Collection[StepPattern] | None = None,
) -> OrderEvaluation:
    """Metrics of a rank order (`order[r]` = server of node rank r) under a pattern and routing model.

    `max_link_load` and its bound cover the pattern's steps ("mixed": ring and halving-doubling). Both bus
    bandwidths are reported by default; `patterns` limits the simulated collectives (the pattern's own are
    always simulated) and a bus bandwidth left out is NaN (None in `to_dict`). Routing "pinned" uses `routes`
    where it covers a step and pins the rest. ECMP averages seeds 0 .. seeds-1; deterministic routings
    evaluate once.
    """
    if isinstance(seeds, bool) or not isinstance(seeds, int | np.integer):
        raise InputError(f"seeds: {seeds!r}; pass a number of ecmp seeds (20 is the default)")
    if seeds < 1:
        raise InputError(f"seeds: {seeds}; average ecmp over at least 1 seed (20 is the default)")
    metrics = order_seed_metrics(
        network,
        order,
        pattern=pattern,
        routing=routing,
        qps=qps,
        seeds=seeds if routing == "ecmp" else 1,
        routes=routes,
        patterns=patterns,
    )
    counts, bounds = ring_cross_edges(network, _check_order(network, order).tolist())
    ring_busbw, ring_sem = _mean_and_sem(metrics.ring_busbw)
    hd_busbw, hd_sem = _mean_and_sem(metrics.hd_busbw)
    return OrderEvaluation(
        cross_edges=counts,
        cross_edge_bounds=bounds,
        max_link_load=float(metrics.max_link_load.mean()),
        max_link_load_bound=metrics.max_link_load_bound,
        ring_busbw=ring_busbw,
        hd_busbw=hd_busbw,
        pattern=pattern,
        routing=routing,
        qps=qps,
        max_link_load_sem=_sem(metrics.max_link_load),
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
    from planner.sim._pinning import pin_routes

    missing = [s for s in steps if routes is None or routes.assignment_for(s) is None]
    if not missing:
        assert routes is not None
        return routes
    extra = pin_routes(network, missing)
    return extra if routes is None else routes.merged(extra)
