"""Routing models: the spine (and core) every cross-leaf sub-flow takes under ecmp, slice or pinned routing.

With Q queue pairs every flow splits into Q sub-flows carrying 1/Q. ECMP draws each sub-flow's uplinks from
hashed streams with common random numbers (`_Prepared`), slice routing pins by port slot (NSLB), pinned routing
follows a `RoutePlan`. Routes are kept as link bases plus choices, so loads under many seeds count cheaply.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import get_args

import numpy as np

from planner._errors import InputError
from planner._model import Routing
from planner.sim._network import JobNetwork
from planner.sim._route_plan import RoutePlan


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
class Routed:
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

    def take(self, view: _StepView) -> Routed:
        """The routes of one step of a union of connections routed together."""
        if self.cross_pod is None or view.cross_pod is None or view.pod_ids is None:
            return Routed(
                self.weight, view.cross, self.up_base[view.ids], self.down_base[view.ids], self.spine[:, view.ids]
            )
        assert self.core_up_base is not None
        assert self.core_down_base is not None
        assert self.core is not None
        return Routed(
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

    def route(self, seeds: np.ndarray) -> Routed:
        """Routes of the cross sub-flows under each seed."""
        s = seeds.size
        if self.spine_key is None:
            assert self.fixed_spine is not None
            spine = np.broadcast_to(self.fixed_spine, (s, self.cross.size))
        else:
            spine = _uniform_choice(_seeded(self.spine_key, seeds, _SALT_SPINE), self.spine_choices)
        if self.cross_pod is None:
            return Routed(self.weight, self.cross, self.up_base, self.down_base, spine)
        if self.spine_key is None:
            assert self.fixed_core is not None
            core = np.broadcast_to(self.fixed_core, (s, self.cross_pod.size))
        else:
            core = self._ecmp_cores(spine[:, self.cross_pod], seeds)
        return Routed(
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
    if assignment is not None and pairs.shape[0]:
        effective_qps = assignment[0].shape[0] // pairs.shape[0]  # a route plan of queue pairs: one row each
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
        row = pair * effective_qps + qp
        fixed_spine = spines[row, nic]
        if three_tier:
            fixed_core = np.maximum(cores[row, nic], 0)[leaves_pod]
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


def prepared_steps(
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


def routed_steps(
    network: JobNetwork,
    steps: Sequence[np.ndarray],
    routing: Routing,
    *,
    qps: int,
    seeds: np.ndarray,
    routes: RoutePlan | None,
) -> list[Routed]:
    """Routes of every step under every seed, in one pass (few seeds or small steps)."""
    routed: dict[int, Routed] = {}
    out: list[Routed] = []
    for prepared, view in prepared_steps(network, steps, routing, qps=qps, routes=routes):
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


def check_routing(routing: str, qps: int) -> None:
    if routing not in get_args(Routing):
        raise InputError(f"routing: {routing!r} is not one of {', '.join(get_args(Routing))}")
    if qps < 1:
        raise InputError(f"qps: {qps} queue pairs per connection; use 1 or more (HCCL_RDMA_QPS_PER_CONNECTION)")
