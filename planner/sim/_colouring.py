"""Bipartite multigraph edge colouring with per-vertex capacities, by Euler splitting (König).

A colouring with U colours in which every vertex of degree d uses each colour at most ceil(d / U) times is built
by halving: every vertex sends ceil/floor of its edges to each half, recursively; an odd colour count peels one
matching first. Route pinning colours cross-leaf flows with the uplinks of their switches.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components, maximum_bipartite_matching

from planner._errors import InputError


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


def _consecutive_pairs(vertex: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pair each vertex's edges consecutively in `order` (edge indices sorted by vertex, then preference).

    Returns (first, second, leftover) edge indices; `leftover` holds the last edge of every odd-degree vertex.
    """
    size = order.size
    ordered = vertex[order]
    same_as_next = np.zeros(size, dtype=bool)
    same_as_next[:-1] = ordered[1:] == ordered[:-1]
    starts = np.flatnonzero(np.r_[True, ~same_as_next[:-1]]) if size else np.zeros(0, dtype=np.int64)
    position = np.arange(size) - np.repeat(starts, np.diff(np.r_[starts, size]))
    even = (position & 1) == 0
    first = np.flatnonzero(even & same_as_next)
    leftover = order[even & ~same_as_next]
    return order[first], order[first + 1], leftover


def _two_colour(size: int, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """A 2-colouring (bool per edge) of the pairing graph in which every pair gets different colours.

    Each edge has at most one partner at its out end and one at its in end, so the pairing graph is a union of
    paths and cycles that alternate out/in pairs, hence even: 2-colourable. The colouring is read off the
    connected components of the graph's bipartite double cover (node e and e' = e + size; a pair joins e to f'
    and e' to f): an edge is True when its plain copy has the smaller component label.
    """
    rows = np.concatenate([first, first + size])
    cols = np.concatenate([second + size, second])
    graph = csr_matrix((np.ones(rows.size, dtype=np.int8), (rows, cols)), shape=(2 * size, 2 * size))
    _, labels = connected_components(graph, directed=True, connection="weak")
    colour: np.ndarray = labels[:size] < labels[size:]
    return colour


def _halve(
    size: int,
    sides: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
) -> np.ndarray:
    """Euler split: every vertex sends ceil/floor of its edges to each half (True / False).

    `sides` gives, for the out and the in end, (vertex of every edge, edges sorted by vertex then preference,
    group of every edge or -1). Pairs are formed at each vertex in that order; an odd vertex's leftover edge
    with a group id >= 0 is paired with the leftover of another vertex of the same group, so groups (a pod's
    cross-pod flows) are balanced too, without unbalancing any vertex.
    """
    firsts: list[np.ndarray] = []
    seconds: list[np.ndarray] = []
    for vertex, order, group in sides:
        first, second, leftover = _consecutive_pairs(vertex, order)
        firsts.append(first)
        seconds.append(second)
        grouped = leftover[group[leftover] >= 0]
        if grouped.size > 1:
            g_order = grouped[np.argsort(group[grouped], kind="stable")]
            g_first, g_second, _ = _consecutive_pairs(group, g_order)
            firsts.append(g_first)
            seconds.append(g_second)
    return _two_colour(size, np.concatenate(firsts), np.concatenate(seconds))


def _chunks(vertex: np.ndarray, size: int, key: np.ndarray) -> np.ndarray:
    """Vertex id of every edge when each vertex's edges (in `key` order) are cut into chunks of `size`."""
    order = np.lexsort((key, vertex))
    ordered = vertex[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    position = np.arange(vertex.size) - np.repeat(starts, np.diff(np.r_[starts, vertex.size]))
    chunk = np.empty(vertex.size, dtype=np.int64)
    chunk[order] = position // size
    _, ids = np.unique(np.stack([vertex, chunk], axis=1), axis=0, return_inverse=True)
    flat: np.ndarray = ids.ravel()
    return flat


def _peel_matching(out_v: np.ndarray, in_v: np.ndarray, colours: int, key: np.ndarray) -> np.ndarray:
    """Mask of a matching of the chunk graph (chunks of `colours` edges) that covers every full chunk.

    Taking it as one colour leaves every vertex with at most its capacity for the remaining colours - 1.
    The chunk graph is packed and padded to be `colours`-regular, which has a perfect matching (König).
    """
    left = _chunks(out_v, colours, key)
    right = _chunks(in_v, colours, key)
    left = _pack(np.bincount(left), colours)[left]
    right = _pack(np.bincount(right), colours)[right]
    n = int(max(left.max(), right.max())) + 1
    dummy_left = np.repeat(np.arange(n), colours - np.bincount(left, minlength=n))
    dummy_right = np.repeat(np.arange(n), colours - np.bincount(right, minlength=n))
    rows = np.concatenate([left, dummy_left])
    cols = np.concatenate([right, dummy_right])
    graph = csr_matrix((np.ones(rows.size, dtype=np.int8), (rows, cols)), shape=(n, n))
    graph.sum_duplicates()
    match = maximum_bipartite_matching(graph, perm_type="column")
    if np.any(match < 0):
        raise AssertionError("a regular bipartite multigraph must have a perfect matching")
    # One real edge per matched (row, column) when such an edge exists (else the match used padding).
    wanted = np.full(n, -1, dtype=np.int64)
    wanted[np.arange(n)] = match
    hit = wanted[left] == right
    candidates = np.flatnonzero(hit)
    _, first = np.unique(left[candidates], return_index=True)
    mask = np.zeros(out_v.size, dtype=bool)
    mask[candidates[first]] = True
    return mask


def _capacity_colouring(
    out_v: np.ndarray,
    in_v: np.ndarray,
    colours: int,
    *,
    key: np.ndarray | None = None,
    out_group: np.ndarray | None = None,
    in_group: np.ndarray | None = None,
) -> np.ndarray:
    """Colours 0 .. colours-1 such that every vertex of degree d uses each colour at most ceil(d / colours) times.

    Recursive Euler splitting: an even colour count splits the edges into two halves that each vertex shares
    ceil/floor (and groups, when given, as evenly as vertex balance allows); an odd count first peels one
    matching off the chunk graph. Every level is one vectorised pass over the edges of a colour class.
    """
    size = out_v.size
    colour = np.zeros(size, dtype=np.int64)
    if size == 0 or colours <= 1:
        return colour
    sort_key = np.zeros(size, dtype=np.int64) if key is None else key
    no_group = np.full(size, -1, dtype=np.int64)
    groups_out = no_group if out_group is None else out_group
    groups_in = no_group if in_group is None else in_group
    # Edge orders by (vertex, preference) are computed once: a subset of a sorted order stays sorted.
    span = int(sort_key.max()) - int(sort_key.min()) + 1
    relative = sort_key - sort_key.min()
    out_order = np.argsort(out_v * span + relative, kind="stable")
    in_order = np.argsort(in_v * span + relative, kind="stable")
    member = np.zeros(size, dtype=bool)
    local_out = np.zeros(size, dtype=np.int64)
    # Work list of (edges sorted at the out end, at the in end, colour count, first colour).
    pending: list[tuple[np.ndarray, np.ndarray, int, int]] = [(out_order, in_order, colours, 0)]
    while pending:
        by_out, by_in, count, offset = pending.pop()
        if by_out.size == 0:
            continue
        if count == 1:
            colour[by_out] = offset
            continue
        if count % 2:
            idx = np.sort(by_out)
            peeled = _peel_matching(out_v[idx], in_v[idx], count, sort_key[idx])
            colour[idx[peeled]] = offset + count - 1
            member[idx[~peeled]] = True
            pending.append((by_out[member[by_out]], by_in[member[by_in]], count - 1, offset))
            member[idx] = False
            continue
        local_out[by_out] = np.arange(by_out.size)
        sides = (
            (out_v[by_out], np.arange(by_out.size), groups_out[by_out]),
            (in_v[by_out], local_out[by_in], groups_in[by_out]),
        )
        first = _halve(by_out.size, sides)
        member[by_out[first]] = True
        pending.append((by_out[member[by_out]], by_in[member[by_in]], count // 2, offset))
        member[by_out] = False
        member[by_out[~first]] = True
        pending.append((by_out[member[by_out]], by_in[member[by_in]], count // 2, offset + count // 2))
        member[by_out] = False
    return colour


def edge_colouring(left: np.ndarray, right: np.ndarray, colours: int | None = None) -> np.ndarray:
    """A proper edge colouring of a bipartite multigraph with max-degree colours (König's theorem).

    `left[e]`, `right[e]` are the endpoints of edge e (non-negative ints, independent id spaces). Returns the
    colour of every edge in 0 .. Δ-1 (`colours` >= Δ may be given to allow more). Built by Euler splitting
    (one matching per odd colour count on the way down).
    """
    edges = left.size
    if edges == 0:
        return np.zeros(0, dtype=np.int64)
    _, left_v = np.unique(left, return_inverse=True)
    _, right_v = np.unique(right, return_inverse=True)
    left_v, right_v = left_v.ravel(), right_v.ravel()
    delta = int(max(np.bincount(left_v).max(), np.bincount(right_v).max()))
    if colours is not None:
        if colours < delta:
            raise InputError(f"colours: {colours} is below the max degree {delta}; a colouring needs at least Δ")
        delta = colours
    return _capacity_colouring(left_v, right_v, delta)


def limited_colouring(
    out_v: np.ndarray,
    in_v: np.ndarray,
    out_size: np.ndarray,
    in_size: np.ndarray,
    *,
    key: np.ndarray,
    out_group: np.ndarray,
    in_group: np.ndarray,
) -> np.ndarray:
    """Colour edges with colours below min(out_size, in_size) keeping each vertex near ceil(degree / its size).

    Equal sizes: exact capacity colouring. Unequal sizes (switches with different uplink counts): each vertex's
    edges are cut into chunks of its own size, the chunk graph is properly coloured with the largest size, and
    edges whose colour one end lacks move to the least loaded colour both ends have (a greedy repair).
    """
    if out_v.size == 0:
        return np.zeros(0, dtype=np.int64)
    largest = int(max(out_size.max(), in_size.max()))
    if out_size.min() == largest and in_size.min() == largest:
        return _capacity_colouring(out_v, in_v, largest, key=key, out_group=out_group, in_group=in_group)
    colour = _capacity_colouring(
        _chunk_by_size(out_v, out_size, key), _chunk_by_size(in_v, in_size, key), largest, key=key
    )
    _repair(colour, np.minimum(out_size, in_size), out_v, in_v)
    return colour


def _chunk_by_size(vertex: np.ndarray, size: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Vertex id of every edge when each vertex's edges are cut into chunks of its own `size`."""
    order = np.lexsort((key, vertex))
    ordered = vertex[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    position = np.arange(vertex.size) - np.repeat(starts, np.diff(np.r_[starts, vertex.size]))
    chunk = np.empty(vertex.size, dtype=np.int64)
    chunk[order] = position // size[order]
    _, ids = np.unique(np.stack([vertex, chunk], axis=1), axis=0, return_inverse=True)
    flat: np.ndarray = ids.ravel()
    return flat


def _repair(colour: np.ndarray, limit: np.ndarray, out_v: np.ndarray, in_v: np.ndarray) -> None:
    """Move edges whose colour is not available at both ends (colour >= limit) to the least loaded valid colour."""
    bad = np.flatnonzero(colour >= limit)
    if not bad.size:
        return
    width = int(colour.max()) + 1
    _, out_i = np.unique(out_v, return_inverse=True)
    _, in_i = np.unique(in_v, return_inverse=True)
    ok = colour < limit
    out_load = np.zeros((int(out_i.max()) + 1, width), dtype=np.int64)
    in_load = np.zeros((int(in_i.max()) + 1, width), dtype=np.int64)
    np.add.at(out_load, (out_i[ok], colour[ok]), 1)
    np.add.at(in_load, (in_i[ok], colour[ok]), 1)
    for e in bad.tolist():
        allowed = int(limit[e])
        cost = np.maximum(out_load[out_i[e], :allowed], in_load[in_i[e], :allowed])
        best = int(np.argmin(cost))
        colour[e] = best
        out_load[out_i[e], best] += 1
        in_load[in_i[e], best] += 1
