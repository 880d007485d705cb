"""Route pinning: give every cross-leaf flow a spine (and a core in 3 tiers) so no link exceeds the bound λ*.

Per step, cross-leaf flows form a bipartite multigraph between source and destination tier-1 switches.
Each switch's edges are cut into chunks of at most U (uplinks); a proper edge colouring of the chunk graph with
U colours (König: a bipartite multigraph of max degree Δ has a Δ-edge-colouring) gives every flow a spine such
that a switch uses each spine at most ceil(degree / U) <= λ* times. The colouring is built from Δ perfect
matchings of the graph padded to Δ-regular. In 3 tiers the cross-pod flows through spine j of each pod are
coloured the same way with the V core uplinks of the spines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_bipartite_matching

from planner._errors import InputError
from planner._network import JobNetwork
from planner._simulate import _check_flows, lambda_star, link_loads


class RouteEntry(TypedDict):
    """One pinned cross-leaf flow of `routes.json`."""

    step: int
    src_node: str
    src_pod: str | None
    dst_node: str
    dst_pod: str | None
    nic: int
    src_leaf: str
    dst_leaf: str
    spine: int
    """Uplink index j of the source tier-1 switch = spine j of its plane (of its pod in 3 tiers)."""
    plane: int
    """Rail (NIC index) in the rail layout; 0 in the ToR layout."""
    core: int | None
    """Core uplink c of spine j for cross-pod flows (3 tiers); None otherwise."""


class RoutesFile(TypedDict):
    """`routes.json`: the route plan for a fabric controller or per-QP UDP source-port steering."""

    version: str
    layout: str
    switch_tiers: int
    max_load: int
    bound: int
    steps: int
    flows: list[RouteEntry]


@dataclass(frozen=True, eq=False)
class RoutePlan:
    """Pinned routes of every cross-leaf flow of some flow steps, with the max link load they give."""

    network: JobNetwork
    steps: tuple[np.ndarray, ...]
    """(pairs, 2) server flows of each step, as passed to `pin_routes`."""
    spines: tuple[np.ndarray, ...]
    """(pairs, nics) spine of each flow of each step; -1 for flows that stay on their tier-1 switch."""
    cores: tuple[np.ndarray, ...]
    """(pairs, nics) core uplink of each cross-pod flow; -1 otherwise."""
    max_load: int
    """Largest link load (in flows) over all steps with these routes."""
    bound: int
    """λ*: the largest per-step lower bound; max_load == bound when pinning is optimal."""

    def assignment_for(self, flows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """(spines, cores) of a step with exactly these flows, or None when the plan does not cover it."""
        pairs = np.asarray(flows, dtype=np.int64)
        for step, spines, cores in zip(self.steps, self.spines, self.cores, strict=True):
            if step.shape == pairs.shape and np.array_equal(step, pairs):
                return spines, cores
        return None

    def merged(self, other: RoutePlan) -> RoutePlan:
        """This plan and `other` (same network) as one plan."""
        return RoutePlan(
            network=self.network,
            steps=self.steps + other.steps,
            spines=self.spines + other.spines,
            cores=self.cores + other.cores,
            max_load=max(self.max_load, other.max_load),
            bound=max(self.bound, other.bound),
        )

    def to_json(self, pod_names: Sequence[str] | None = None) -> RoutesFile:
        """The `routes.json` content: every cross-leaf flow with its step, endpoints, NIC, spine and core.

        `pod_names[i]` names server i's pod (Placement order); without it the pod fields are None.
        """
        net = self.network
        flows: list[RouteEntry] = []
        for index, (step, spines) in enumerate(zip(self.steps, self.spines, strict=True)):
            cores = self.cores[index]
            pair_ids, nics = np.nonzero(spines >= 0)
            for p, d in zip(pair_ids.tolist(), nics.tolist(), strict=True):
                src, dst = int(step[p, 0]), int(step[p, 1])
                core = int(cores[p, d])
                flows.append(
                    RouteEntry(
                        step=index,
                        src_node=net.nodes[src],
                        src_pod=pod_names[src] if pod_names is not None else None,
                        dst_node=net.nodes[dst],
                        dst_pod=pod_names[dst] if pod_names is not None else None,
                        nic=d,
                        src_leaf=net.leaf_names[net.server_leaf[src]],
                        dst_leaf=net.leaf_names[net.server_leaf[dst]],
                        spine=int(spines[p, d]),
                        plane=d if net.layout == "rail" else 0,
                        core=core if core >= 0 else None,
                    )
                )
        return RoutesFile(
            version="1",
            layout=net.layout,
            switch_tiers=net.switch_tiers,
            max_load=self.max_load,
            bound=self.bound,
            steps=len(self.steps),
            flows=flows,
        )

    def to_dict(self) -> dict[str, Any]:
        """Summary for reports (without the per-flow list)."""
        return {"max_load": self.max_load, "bound": self.bound, "steps": len(self.steps)}


# -- bipartite multigraph edge colouring ---------------------------------------------------------------------------


def _pack(degrees: np.ndarray, capacity: int) -> np.ndarray:
    """Merge vertices into bins of total degree <= capacity (first fit decreasing); returns each vertex's bin.

    Merging never breaks a proper colouring of the merged graph and keeps the padded regular graph small.
    """
    order = np.argsort(-degrees, kind="stable")
    bins = np.empty(degrees.size, dtype=np.int64)
    free: list[int] = []
    for vertex in order.tolist():
        degree = int(degrees[vertex])
        placed = -1
        # Bins fill in degree-decreasing order, so checking the last few open bins is enough in practice.
        for b in range(max(0, len(free) - 8), len(free)):
            if free[b] >= degree:
                placed = b
                break
        if placed < 0:
            free.append(capacity)
            placed = len(free) - 1
        free[placed] -= degree
        bins[vertex] = placed
    return bins


def edge_colouring(left: np.ndarray, right: np.ndarray, colours: int | None = None) -> np.ndarray:
    """A proper edge colouring of a bipartite multigraph with max-degree colours (König's theorem).

    `left[e]`, `right[e]` are the endpoints of edge e (non-negative ints, independent id spaces). Returns the
    colour of every edge in 0 .. Δ-1 (`colours` >= Δ may be given to allow more). Built from Δ perfect
    matchings of the multigraph padded (after merging light vertices) to be Δ-regular.
    """
    edges = left.size
    if edges == 0:
        return np.zeros(0, dtype=np.int64)
    _, left_v = np.unique(left, return_inverse=True)
    _, right_v = np.unique(right, return_inverse=True)
    delta = int(max(np.bincount(left_v).max(), np.bincount(right_v).max()))
    if colours is not None:
        if colours < delta:
            raise InputError(f"colours: {colours} is below the max degree {delta}; a colouring needs at least Δ")
        delta = colours
    left_v = _pack(np.bincount(left_v), delta)[left_v]
    right_v = _pack(np.bincount(right_v), delta)[right_v]
    n = int(max(left_v.max(), right_v.max())) + 1
    # Pad to Δ-regular: dummy edges join left and right deficits in order (equal totals, n*Δ - E each side).
    left_deficit = delta - np.bincount(left_v, minlength=n)
    right_deficit = delta - np.bincount(right_v, minlength=n)
    dummy_left = np.repeat(np.arange(n), left_deficit)
    dummy_right = np.repeat(np.arange(n), right_deficit)

    real_key = left_v * n + right_v
    order = np.argsort(real_key, kind="stable")
    keys, first, real_count = np.unique(real_key[order], return_index=True, return_counts=True)
    all_keys, dummy_count_of = np.unique(np.concatenate([keys, dummy_left * n + dummy_right]), return_counts=True)
    real_remaining = np.zeros(all_keys.size, dtype=np.int64)
    start = np.zeros(all_keys.size, dtype=np.int64)
    at = np.searchsorted(all_keys, keys)
    real_remaining[at] = real_count
    start[at] = first
    dummy_remaining = dummy_count_of.copy()
    dummy_remaining[at] -= 1
    used = np.zeros(all_keys.size, dtype=np.int64)
    colour = np.full(edges, -1, dtype=np.int64)
    rows, cols = all_keys // n, all_keys % n
    for c in range(delta):
        alive = (real_remaining + dummy_remaining) > 0
        graph = csr_matrix((np.ones(int(alive.sum()), dtype=np.int8), (rows[alive], cols[alive])), shape=(n, n))
        match = maximum_bipartite_matching(graph, perm_type="column")
        matched_rows = np.flatnonzero(match >= 0)
        if matched_rows.size != n:
            raise AssertionError("a regular bipartite multigraph must have a perfect matching")
        k = np.searchsorted(all_keys, matched_rows * n + match[matched_rows])
        real = real_remaining[k] > 0
        real_k = k[real]
        colour[order[start[real_k] + used[real_k]]] = c
        used[real_k] += 1
        real_remaining[real_k] -= 1
        dummy_remaining[k[~real]] -= 1
    return colour


# -- pinning -------------------------------------------------------------------------------------------------------


def _chunk_ids(group: np.ndarray, size: np.ndarray, priority: np.ndarray) -> np.ndarray:
    """Vertex id of every edge when each group's edges are cut into chunks of its `size` (priority edges first)."""
    order = np.lexsort((-priority, group))
    sorted_group = group[order]
    starts = np.flatnonzero(np.r_[True, sorted_group[1:] != sorted_group[:-1]])
    position = np.arange(group.size) - np.repeat(starts, np.diff(np.r_[starts, group.size]))
    chunk = np.empty(group.size, dtype=np.int64)
    chunk[order] = position // size[order]
    return group * (group.size + 1) + chunk


def _repair(colour: np.ndarray, limit: np.ndarray, out_group: np.ndarray, in_group: np.ndarray) -> None:
    """Move edges whose colour is not available at both ends (colour >= limit) to the least loaded valid colour.

    Only fabrics whose switches differ in uplink count need this; with equal counts every colour is valid.
    """
    bad = np.flatnonzero(colour >= limit)
    if not bad.size:
        return
    width = int(colour.max()) + 1
    _, out_v = np.unique(out_group, return_inverse=True)
    _, in_v = np.unique(in_group, return_inverse=True)
    ok = colour < limit
    out_load = np.zeros((out_v.max() + 1, width), dtype=np.int64)
    in_load = np.zeros((in_v.max() + 1, width), dtype=np.int64)
    np.add.at(out_load, (out_v[ok], colour[ok]), 1)
    np.add.at(in_load, (in_v[ok], colour[ok]), 1)
    for e in bad.tolist():
        allowed = int(limit[e])
        cost = np.maximum(out_load[out_v[e], :allowed], in_load[in_v[e], :allowed])
        best = int(np.argmin(cost))
        colour[e] = best
        out_load[out_v[e], best] += 1
        in_load[in_v[e], best] += 1


def pin_routes(network: JobNetwork, flow_steps: Sequence[np.ndarray]) -> RoutePlan:
    """Pin every cross-leaf flow of every step to a spine (and core) so link loads meet λ* per step.

    Steps are separate moments in time and are pinned independently (in one colouring of their disjoint union).
    With equal uplink counts per tier the result reaches the bound: `max_load == bound`.
    """
    all_steps = tuple(_check_flows(network, s) for s in flow_steps)
    # Identical steps (the two halves of halving-doubling) are one set of connections: pin them once.
    first_of: dict[tuple[tuple[int, ...], bytes], int] = {}
    distinct_of: list[int] = []
    for pairs in all_steps:
        distinct_of.append(first_of.setdefault((pairs.shape, pairs.tobytes()), len(first_of)))
    steps = tuple(all_steps[distinct_of.index(k)] for k in range(len(first_of)))
    bound = max((lambda_star(network, s) for s in steps), default=1)
    best: RoutePlan | None = None
    # With oversubscribed spines the per-pod split of cross-pod flows over spines can miss the tier-2 bound;
    # a few reshuffled attempts (seeded, so plans stay reproducible) usually find a plan that meets it.
    attempts = 8 if network.listed_tiers == 2 else 1
    rng = np.random.default_rng(0)
    for attempt in range(attempts):
        spines_out, cores_out = _pin_once(network, steps, rng if attempt else None)
        spines_all = tuple(spines_out[k] for k in distinct_of)
        cores_all = tuple(cores_out[k] for k in distinct_of)
        plan = RoutePlan(network, all_steps, spines_all, cores_all, max_load=0, bound=bound)
        max_load = 0
        for pairs in steps:
            if pairs.size:
                loads = link_loads(network, pairs, "pinned", routes=plan)
                max_load = max(max_load, round(float(loads.max())))
        if best is None or max_load < best.max_load:
            best = RoutePlan(network, all_steps, spines_all, cores_all, max_load=max_load, bound=bound)
        if best.max_load <= bound:
            break
    assert best is not None
    return best


def _pin_once(
    network: JobNetwork, steps: tuple[np.ndarray, ...], rng: np.random.Generator | None
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """One pinning of distinct steps: (spines, cores) per step; `rng` shuffles chunk membership."""
    nics, planes = network.nics, network.planes
    spines_out = [np.full((s.shape[0], nics), -1, dtype=np.int64) for s in steps]
    cores_out = [np.full((s.shape[0], nics), -1, dtype=np.int64) for s in steps]

    step_id, pair_id, nic = [], [], []
    for i, pairs in enumerate(steps):
        count = pairs.shape[0]
        step_id.append(np.full(count * nics, i))
        pair_id.append(np.repeat(np.arange(count), nics))
        nic.append(np.tile(np.arange(nics), count))
    if steps:
        s_id, p_id, d = np.concatenate(step_id), np.concatenate(pair_id), np.concatenate(nic)
        src = np.concatenate([s[:, 0] for s in steps])[_flat_pair_index(steps, nics)]
        dst = np.concatenate([s[:, 1] for s in steps])[_flat_pair_index(steps, nics)]
        sw_a, sw_b = network.tier1_switch(src, d), network.tier1_switch(dst, d)
        cross = sw_a != sw_b
        s_id, p_id, d, src, dst, sw_a, sw_b = (x[cross] for x in (s_id, p_id, d, src, dst, sw_a, sw_b))
        pod_a, pod_b = network.server_pod[src], network.server_pod[dst]
        cross_pod = (pod_a != pod_b).astype(np.int64)
        priority = cross_pod * (cross_pod.size + 1)
        if rng is not None:
            priority = priority + rng.permutation(cross_pod.size)
        switches = len(network.leaf_names) * planes
        out_group = s_id * switches + sw_a
        in_group = s_id * switches + sw_b
        leaf_a, leaf_b = network.server_leaf[src], network.server_leaf[dst]
        spine_limit = np.minimum(network.leaf_uplinks[leaf_a], network.leaf_uplinks[leaf_b])
        spine = edge_colouring(
            _chunk_ids(out_group, network.leaf_uplinks[leaf_a], priority),
            _chunk_ids(in_group, network.leaf_uplinks[leaf_b], priority),
            network.max_uplinks,
        )
        _repair(spine, spine_limit, out_group, in_group)
        core = np.full(spine.size, -1, dtype=np.int64)
        if network.listed_tiers == 2 and cross_pod.any():
            up = np.flatnonzero(cross_pod)
            pods = len(network.pod_names)
            plane = d[up] if network.layout == "rail" else np.zeros(up.size, dtype=np.int64)
            spine_group = (s_id[up] * planes + plane) * network.max_uplinks + spine[up]
            out_group2 = spine_group * pods + pod_a[up]
            in_group2 = spine_group * pods + pod_b[up]
            v_a, v_b = network.pod_uplinks[pod_a[up]], network.pod_uplinks[pod_b[up]]
            none = np.zeros(up.size, dtype=np.int64) if rng is None else rng.permutation(up.size)
            core_up = edge_colouring(
                _chunk_ids(out_group2, v_a, none),
                _chunk_ids(in_group2, v_b, none),
                network.max_pod_uplinks,
            )
            _repair(core_up, np.minimum(v_a, v_b), out_group2, in_group2)
            core[up] = core_up
        for i in range(len(steps)):
            mine = s_id == i
            spines_out[i][p_id[mine], d[mine]] = spine[mine]
            cores_out[i][p_id[mine], d[mine]] = core[mine]

    return spines_out, cores_out


def _flat_pair_index(steps: Sequence[np.ndarray], nics: int) -> np.ndarray:
    """Index into the concatenated pairs of every (step, pair, nic) flow."""
    total = sum(s.shape[0] for s in steps)
    return np.repeat(np.arange(total), nics)
