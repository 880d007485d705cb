"""Orders for halving-doubling (and the pairwise part of `mixed`): leaf-aligned rank blocks, then a QAP polish.

Halving-doubling pairs rank r with r xor 2^k at step k, so an aligned block of 2^j ranks talks only inside
itself for the first j steps. Giving every leaf aligned power-of-two blocks keeps those steps inside the leaf;
a leaf of a non-power-of-two size is split into its binary chunks (6 = 4 + 2), each aligned. Chunks of one
size are mapped to the free blocks of that size with `linear_sum_assignment`, costed by traffic to the ranks
already placed. Small jobs are then polished by scipy's `quadratic_assignment` (2-opt) from that seed only,
with rank 0 pinned to the master; a generic QAP from its default start stalls far above the bound.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment, quadratic_assignment

from planner.core._ring import ServerLayout, domain_ranks_first_seen, leaf_sequence

QAP_MAX_SERVERS = 64
"""Largest job the 2-opt polish runs on (its cost grows as n^3 per sweep)."""
LSA_MAX_BLOCKS = 512
"""Largest number of same-size chunks mapped by one assignment problem; larger classes keep their order."""


def traffic_pairs(steps: Sequence[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Undirected rank pairs (a < b) and how many flows each carries, summed over the pattern's steps.

    `steps` are the pattern's flows for the identity order, so server indices are ranks.
    """
    flows = np.concatenate([np.asarray(s, dtype=np.int64).reshape(-1, 2) for s in steps]) if steps else None
    if flows is None or len(flows) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    low = np.minimum(flows[:, 0], flows[:, 1])
    high = np.maximum(flows[:, 0], flows[:, 1])
    keep = low != high
    keys, weights = np.unique(low[keep] * n + high[keep], return_counts=True)
    return keys // n, keys % n, weights.astype(np.int64)


def traffic_matrix(steps: Sequence[np.ndarray], n: int) -> np.ndarray:
    """Dense symmetric rank-by-rank flow counts (small jobs only)."""
    a, b, w = traffic_pairs(steps, n)
    matrix = np.zeros((n, n), dtype=np.float64)
    np.add.at(matrix, (a, b), w)
    np.add.at(matrix, (b, a), w)
    return matrix


def distance_matrix(codes: np.ndarray) -> np.ndarray:
    """Hops class between servers: 0 itself, 1 same leaf, then one more per listed tier whose domains differ."""
    differ = (codes[:, None, :] != codes[None, :, :]).sum(axis=2)
    distance: np.ndarray = (1 + differ).astype(np.float64)
    np.fill_diagonal(distance, 0.0)
    return distance


def _binary_chunks(size: int) -> list[int]:
    """Power-of-two parts of `size`, largest first (6 -> [4, 2])."""
    return [1 << bit for bit in range(size.bit_length() - 1, -1, -1) if size >> bit & 1]


def block_order(
    layout: ServerLayout,
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray],
    domain_ranks: Sequence[np.ndarray] | None = None,
) -> np.ndarray:
    """Leaf-aligned halving-doubling order, the master at rank 0 (see the module docstring)."""
    n = layout.size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if layout.tiers == 0:
        rest = [i for i in range(n) if i != layout.master]
        return np.array([layout.master, *rest], dtype=np.int64)
    ranks = domain_ranks if domain_ranks is not None else domain_ranks_first_seen(layout)
    by_leaf, starts = leaf_sequence(layout, ranks)
    bounds = np.r_[starts, n]
    chunks: list[tuple[int, int, list[int]]] = []  # (size, leaf position, servers)
    for j in range(len(starts)):
        members = by_leaf[bounds[j] : bounds[j + 1]].tolist()
        if layout.master in members:
            members.remove(layout.master)
            members.insert(0, layout.master)
        offset = 0
        for size in _binary_chunks(len(members)):
            chunks.append((size, j, members[offset : offset + size]))
            offset += size
    # descending power-of-two sizes laid end to end start on multiples of their size: every chunk is aligned
    chunks.sort(key=lambda chunk: (-chunk[0], chunk[1]))
    order = np.empty(n, dtype=np.int64)
    placed = np.zeros(n, dtype=bool)
    a, b, w = pairs
    position = 0
    index = 0
    while index < len(chunks):
        size = chunks[index][0]
        end = index
        while end < len(chunks) and chunks[end][0] == size:
            end += 1
        group = chunks[index:end]
        if 2 <= len(group) <= LSA_MAX_BLOCKS and placed.any():
            group = _assign_chunks(layout, group=group, start=position, order=order, placed=placed, pairs=(a, b, w))
        for _, _, members in group:
            order[position : position + size] = members
            placed[position : position + size] = True
            position += size
        index = end
    master_at = int(np.flatnonzero(order == layout.master)[0])
    if master_at and n & (n - 1) == 0:
        # xor relabelling is an automorphism of the hypercube: every partner pair survives
        order = order[np.arange(n) ^ master_at]
    elif master_at:
        size = next(c[0] for c in chunks if layout.master in c[2])
        head = order[:size].copy()
        order[:size] = order[master_at : master_at + size]
        order[master_at : master_at + size] = head
    return order


def _assign_chunks(
    layout: ServerLayout,
    *,
    group: list[tuple[int, int, list[int]]],
    start: int,
    order: np.ndarray,
    placed: np.ndarray,
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> list[tuple[int, int, list[int]]]:
    """Map same-size chunks onto the next free aligned blocks, minimising traffic x distance to placed ranks."""
    size = group[0][0]
    a, b, w = pairs
    stop = start + size * len(group)
    # edges with one end in this class's blocks and the other on an already placed rank
    here_a = (a >= start) & (a < stop) & placed[b]
    here_b = (b >= start) & (b < stop) & placed[a]
    block = np.r_[(a[here_a] - start) // size, (b[here_b] - start) // size]
    other = order[np.r_[b[here_a], a[here_b]]]
    weight = np.r_[w[here_a], w[here_b]].astype(np.float64)
    chunk_codes = layout.codes[[members[0] for _, _, members in group]]  # (m, tiers): chunks lie inside one leaf
    differ = (chunk_codes[:, None, :] != layout.codes[other][None, :, :]).sum(axis=2)  # (m, edges)
    cost = np.zeros((len(group), len(group)), dtype=np.float64)
    for c in range(len(group)):
        np.add.at(cost[c], block, weight * (1 + differ[c]))
    rows, cols = linear_sum_assignment(cost)
    result: list[tuple[int, int, list[int]]] = [group[0]] * len(group)
    for r, c in zip(rows, cols, strict=True):
        result[int(c)] = group[int(r)]
    return result


def qap_polish(
    layout: ServerLayout,
    order: np.ndarray,
    traffic: np.ndarray,
    distance: np.ndarray,
    *,
    rng: np.random.Generator,
    deadline: float,
) -> tuple[np.ndarray, bool]:
    """2-opt quadratic assignment from `order`, rank 0 pinned to the master; (order, ran). Never worse."""
    n = layout.size
    if n > QAP_MAX_SERVERS or n < 3 or time.perf_counter() >= deadline:
        return order, False
    guess = np.c_[np.arange(1, n), order[1:]]
    result = quadratic_assignment(
        traffic,
        distance,
        method="2opt",
        options={"partial_match": np.array([[0, layout.master]]), "partial_guess": guess, "rng": rng},
    )
    polished = np.asarray(result.col_ind, dtype=np.int64)
    if qap_score(polished, traffic, distance) < qap_score(order, traffic, distance):
        return polished, True
    return order, True


def qap_score(order: np.ndarray, traffic: np.ndarray, distance: np.ndarray) -> float:
    """Sum over rank pairs of traffic x distance of the servers holding them."""
    return float((traffic * distance[np.ix_(order, order)]).sum())


def fill_free_ranks(
    layout: ServerLayout,
    fixed: dict[int, int],
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray],
    preferred: np.ndarray,
) -> np.ndarray:
    """Complete an order in which `fixed` servers keep their ranks; the rest take the free ranks.

    A linear assignment: a free server on a free rank costs traffic x distance to the fixed servers it talks
    to there; ties follow `preferred` (an unconstrained plan), so free runs stay grouped by leaf.
    """
    n = layout.size
    order = np.full(n, -1, dtype=np.int64)
    for server, rank in fixed.items():
        order[rank] = server
    free_ranks = np.flatnonzero(order < 0)
    free_servers = np.setdiff1d(np.arange(n), np.fromiter(fixed, dtype=np.int64, count=len(fixed)))
    if len(free_ranks) == 0:
        return order
    a, b, w = pairs
    rank_index = np.full(n, -1, dtype=np.int64)
    rank_index[free_ranks] = np.arange(len(free_ranks))
    to_fixed_a = (rank_index[a] >= 0) & (order[b] >= 0)
    to_fixed_b = (rank_index[b] >= 0) & (order[a] >= 0)
    slot = np.r_[rank_index[a[to_fixed_a]], rank_index[b[to_fixed_b]]]
    other = np.r_[order[b[to_fixed_a]], order[a[to_fixed_b]]]
    weight = np.r_[w[to_fixed_a], w[to_fixed_b]].astype(np.float64)
    differ = (layout.codes[free_servers][:, None, :] != layout.codes[other][None, :, :]).sum(axis=2)
    cost = np.zeros((len(free_servers), len(free_ranks)), dtype=np.float64)
    for s in range(len(free_servers)):
        np.add.at(cost[s], slot, weight * differ[s])
    # tie-break: stay close to where the unconstrained plan puts each free server (relative order)
    preferred_rank = np.empty(n, dtype=np.int64)
    preferred_rank[preferred] = np.arange(n)
    spread = np.abs(preferred_rank[free_servers][:, None] - free_ranks[None, :]) / (n * n + 1.0)
    rows, cols = linear_sum_assignment(cost + spread)
    order[free_ranks[cols]] = free_servers[rows]
    return order


# -- fold-aware, slot-aware construction -------------------------------------------------------------------------


def _popcount(values: np.ndarray) -> np.ndarray:
    counts = np.zeros_like(values)
    rest = values.copy()
    while rest.any():
        counts += rest & 1
        rest >>= 1
    return counts


def _fold_counts(sizes: Sequence[int], folds: int, master_leaf: int) -> list[int]:
    """Fold pairs taken inside each leaf (at most half its servers, at most `folds` in all).

    Exact dynamic programme over leaves minimising the number of power-of-two chunks the surviving servers
    form (folded survivors and plain ones are laid out in separate rank regions). The master's leaf folds at
    least once when it can, so the master can send the fold at rank 0.
    """
    infinity = 1 << 40
    best = np.full(folds + 1, infinity, dtype=np.int64)
    best[0] = 0
    choices: list[np.ndarray] = []
    for leaf, size in enumerate(sizes):
        most = min(size // 2, folds)
        least = 1 if leaf == master_leaf and folds > 0 and size >= 2 else 0
        options = np.arange(least, most + 1, dtype=np.int64)
        cost = _popcount(options) + _popcount(size - 2 * options)
        following = np.full(folds + 1, infinity, dtype=np.int64)
        picked = np.zeros(folds + 1, dtype=np.int64)
        for f, c in zip(options.tolist(), cost.tolist(), strict=True):
            shifted = np.full(folds + 1, infinity, dtype=np.int64)
            shifted[f:] = best[: folds + 1 - f] + c
            better = shifted < following
            following[better] = shifted[better]
            picked[better] = f
        choices.append(picked)
        best = following
    reachable = np.flatnonzero(best < infinity)
    total = int(reachable.max())
    counts = [0] * len(sizes)
    for leaf in range(len(sizes) - 1, -1, -1):
        counts[leaf] = int(choices[leaf][total])
        total -= counts[leaf]
    return counts


def _place_region(
    chunks: list[list[int]],
    starts: list[int],
    *,
    layout: ServerLayout,
    slice_class: np.ndarray | None,
    virtual: np.ndarray,
    dimensions: int,
    pin_first: int | None,
) -> None:
    """Put same-size chunks on the given aligned virtual blocks, costed against already placed partners.

    Cost of chunk c on block b: over every cross-block step's partner vertex already holding a server, the
    number of tiers whose domains differ, plus a quarter per cross-leaf pair whose NSLB slice classes differ
    (slice-pinned flows between equal classes meet no other flow). `pin_first` keeps that chunk on block 0.
    """
    size = len(chunks[0])
    count = len(chunks)
    assignment = list(range(count))
    if pin_first is not None:
        assignment.remove(pin_first)
        assignment.insert(0, pin_first)
    free_chunks = assignment[1:] if pin_first is not None else assignment
    free_blocks = list(range(1 if pin_first is not None else 0, count))
    steps = [k for k in range(dimensions) if (1 << k) >= size]
    if 2 <= len(free_chunks) <= LSA_MAX_BLOCKS and steps and (virtual >= 0).any():
        block_starts = np.asarray([starts[b] for b in free_blocks], dtype=np.int64)
        vertex = block_starts[:, None, None] + np.arange(size)[None, :, None]
        partner = vertex ^ (1 << np.asarray(steps))[None, None, :]
        holder = virtual[partner]  # (blocks, size, steps)
        members = np.asarray([chunks[c] for c in free_chunks], dtype=np.int64)  # (chunks, size)
        placed = holder >= 0
        safe = np.where(placed, holder, 0)
        differ = (layout.codes[members][:, None, :, None, :] != layout.codes[safe][None, :, :, :, :]).sum(axis=4)
        cost = differ.astype(np.float64)
        if slice_class is not None:
            mismatch = slice_class[members][:, None, :, None] != slice_class[safe][None, :, :, :]
            cost += 0.25 * (mismatch & (differ > 0))
        total = (cost * placed[None, :, :, :]).sum(axis=(2, 3))
        rows, cols = linear_sum_assignment(total)
        ordered = [0] * len(free_chunks)
        for r, c in zip(rows, cols, strict=True):
            ordered[int(c)] = free_chunks[int(r)]
        free_chunks = ordered
    chosen = ([pin_first] if pin_first is not None else []) + free_chunks
    for block, chunk in enumerate(chosen):
        virtual[starts[block] : starts[block] + size] = chunks[chunk]


def fold_aware_order(
    layout: ServerLayout,
    slice_class: np.ndarray | None = None,
    domain_ranks: Sequence[np.ndarray] | None = None,
) -> np.ndarray:
    """Halving-doubling order built on the virtual hypercube the fold/unfold steps leave (MPICH's scheme).

    With p the largest power of two <= n and e = n - p, ranks 2v and 2v+1 (v < e) fold into virtual rank v and
    ranks r >= 2e are virtual rank r - e. Fold pairs are taken inside leaves (an exact programme picks how many
    per leaf), the folded survivors fill virtual ranks [0, e) and the others [e, p), each leaf as aligned
    power-of-two chunks, so the early virtual steps stay inside leaves. Same-size chunks go to blocks by
    `linear_sum_assignment` against the partners already placed: fewest cross-domain pairs, then (when
    `slice_class` is given) pairs whose NSLB slice classes match. The master sends the fold at rank 0.
    """
    n = layout.size
    if n <= 2 or layout.tiers == 0:
        rest = [i for i in range(n) if i != layout.master]
        return np.array([layout.master, *rest], dtype=np.int64)
    p = 1 << (n.bit_length() - 1)
    extra = n - p
    dimensions = p.bit_length() - 1
    ranks = domain_ranks if domain_ranks is not None else domain_ranks_first_seen(layout)
    by_leaf, starts = leaf_sequence(layout, ranks)
    bounds = np.r_[starts, n]
    leaves = [by_leaf[bounds[j] : bounds[j + 1]].tolist() for j in range(len(starts))]
    master_leaf = next(j for j, members in enumerate(leaves) if layout.master in members)
    leaves[master_leaf].remove(layout.master)
    leaves[master_leaf].insert(0, layout.master)
    # a master alone on its leaf sends its fold to another leaf: leave one fold for the cross-leaf pool
    inside = extra - 1 if extra and len(leaves[master_leaf]) == 1 else extra
    folds = _fold_counts([len(m) for m in leaves], inside, master_leaf)
    sender_of: dict[int, int] = {}
    folded: list[list[int]] = []
    plain: list[list[int]] = []
    for members, f in zip(leaves, folds, strict=True):
        pairs = [(members[2 * i], members[2 * i + 1]) for i in range(f)]
        sender_of.update({survivor: sender for sender, survivor in pairs})
        folded.append([survivor for _, survivor in pairs])
        plain.append(members[2 * f :])
    missing = extra - sum(folds)
    if missing:
        # not enough pairs inside leaves: fold leftover servers across leaves, the master (if left) sending
        pool = [s for members in plain for s in members]
        if layout.master in pool:
            pool.remove(layout.master)
            pool.insert(0, layout.master)
        taken = pool[: 2 * missing]
        for sender, survivor in zip(taken[0::2], taken[1::2], strict=True):
            sender_of[survivor] = sender
        gone = set(taken)
        survivors = set(taken[1::2])
        for j in range(len(leaves)):
            folded[j] += [s for s in plain[j] if s in survivors]
            plain[j] = [s for s in plain[j] if s not in gone]
    virtual = np.full(p, -1, dtype=np.int64)
    master_survivor = next((s for s, sender in sender_of.items() if sender == layout.master), layout.master)
    for region, low, high in ((folded, 0, extra), (plain, extra, p)):
        chunks: list[tuple[int, int, list[int]]] = []
        for j, members in enumerate(region):
            offset = 0
            for size in _binary_chunks(len(members)):
                chunks.append((size, j, members[offset : offset + size]))
                offset += size
        chunks.sort(key=lambda chunk: (-chunk[0], chunk[1]))
        # [0, e) takes descending sizes from its start, [e, p) from its end backwards: both stay aligned
        position = low
        end = high
        index = 0
        while index < len(chunks):
            size = chunks[index][0]
            stop = index
            while stop < len(chunks) and chunks[stop][0] == size:
                stop += 1
            group = chunks[index:stop]
            if region is folded:
                block_starts = [position + b * size for b in range(len(group))]
                position += size * len(group)
            else:
                end -= size * len(group)
                block_starts = [end + b * size for b in range(len(group))]
            pin = next((c for c, chunk in enumerate(group) if master_survivor in chunk[2]), None)
            pin = pin if pin is not None and block_starts[0] == 0 else None
            _place_region(
                [chunk[2] for chunk in group],
                block_starts,
                layout=layout,
                slice_class=slice_class,
                virtual=virtual,
                dimensions=dimensions,
                pin_first=pin,
            )
            index = stop
    at = int(np.flatnonzero(virtual == master_survivor)[0])
    if at and extra == 0:
        virtual = virtual[np.arange(p) ^ at]  # a hypercube automorphism: every partner pair survives
    elif at:
        # swap the master's aligned chunk block with the block at 0, then xor inside it
        size = _block_size_at(virtual, layout, at, extra)
        base = at - at % size
        head = virtual[:size].copy()
        virtual[:size] = virtual[base : base + size]
        virtual[base : base + size] = head
        virtual[:size] = virtual[:size][np.arange(size) ^ (at - base)]
    order = np.empty(n, dtype=np.int64)
    survivors_virtual = virtual
    order[2 * extra :] = survivors_virtual[extra:]
    order[1 : 2 * extra : 2] = survivors_virtual[:extra]
    order[0 : 2 * extra : 2] = [sender_of[int(s)] for s in survivors_virtual[:extra]]
    return order


def _block_size_at(virtual: np.ndarray, layout: ServerLayout, at: int, limit: int) -> int:
    """Largest aligned block around `at` inside [0, limit) whose servers share one leaf, at least 1."""
    size = 1
    leaf = layout.codes[virtual[at], 0]
    while size * 2 <= limit:
        base = at - at % (size * 2)
        if base + size * 2 > limit:
            break
        if not (layout.codes[virtual[base : base + size * 2], 0] == leaf).all():
            break
        size *= 2
    return size
