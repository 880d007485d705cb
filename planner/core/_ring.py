"""Ring ordering: hierarchical contiguous grouping that meets the cross-domain lower bound at every tier.

A ring over servers in rank order crosses a tier-t domain boundary at least once per tier-t domain the job
touches (when it touches more than one). Listing every domain's servers contiguously, nested by tier, meets that
bound at every tier at once. Rank 0 stays on the master, so the master's leaf, pod, ... come first and the ring's
wrap-around edge closes back into them. What is left free is the domain order, which servers enter and leave
each leaf (the boundary servers) and the direction; those decide link loads and are chosen by an objective.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from planner._errors import TopologyError
from planner._model import Placement, Topology


@dataclass(frozen=True, slots=True)
class ServerLayout:
    """Where the job's servers sit: integer domain codes per listed tier, port slots, and the master."""

    codes: np.ndarray
    """(n, tiers) int64: codes[i, t] identifies server i's tier-(t+1) domain (0 = leaf)."""
    slots: np.ndarray
    """(n,) int64: port slot (NSLB slice id) of each server on its leaf."""
    master: int
    """Server index that keeps rank 0."""

    @property
    def size(self) -> int:
        """Number of servers."""
        return int(self.codes.shape[0])

    @property
    def tiers(self) -> int:
        """Number of listed domain tiers."""
        return int(self.codes.shape[1])


def server_layout(placement: Placement, topology: Topology) -> ServerLayout:
    """Domain codes and slots of the placement's servers; raises TopologyError for unknown or inconsistent nodes."""
    nodes = [server.node_name for server in placement.servers]
    missing = [node for node in nodes if node not in topology.paths]
    if missing:
        raise TopologyError(
            f"topology.paths: node {missing[0]!r} (pod {placement.servers[nodes.index(missing[0])].pod_name!r}) "
            f"is not in the topology ({len(missing)} node(s) missing); label the node or add it to the topology"
        )
    tiers = topology.tiers
    paths = [topology.paths[node] for node in nodes]
    bad = next((p for p in paths if len(p) != tiers), None)
    if bad is not None:
        raise TopologyError(
            f"topology.paths: node path {bad!r} lists {len(bad)} tier(s), others list {tiers}; "
            "give every node the same number of tiers"
        )
    codes = np.zeros((len(nodes), max(tiers, 0)), dtype=np.int64)
    for t in range(tiers):
        _, codes[:, t] = np.unique(np.array([p[t] for p in paths], dtype=object).astype(str), return_inverse=True)
    for t in range(tiers - 1):
        pairs = np.unique(codes[:, t : t + 2], axis=0)
        if len(pairs) != len(np.unique(codes[:, t])):
            child = pairs[np.flatnonzero(np.diff(pairs[:, 0]) == 0)[0], 0]
            name = paths[int(np.flatnonzero(codes[:, t] == child)[0])][t]
            raise TopologyError(
                f"topology.paths: tier-{t + 1} domain {name!r} lies under two tier-{t + 2} domains; "
                "a domain must have exactly one parent"
            )
    return ServerLayout(codes=codes, slots=server_slots(placement, topology), master=placement.master)


def server_slots(placement: Placement, topology: Topology) -> np.ndarray:
    """Port slot of each server: `topology.slots`, else the node's rank in name order among its leaf's nodes."""
    slots = np.zeros(len(placement.servers), dtype=np.int64)
    unlisted_leaves: set[str] = set()
    for i, server in enumerate(placement.servers):
        slot = topology.slots.get(server.node_name)
        if slot is None:
            unlisted_leaves.add(topology.leaf_of(server.node_name))
        else:
            slots[i] = slot
    if unlisted_leaves:
        by_leaf: dict[str, list[str]] = {}
        for node, path in topology.paths.items():
            if path and path[0] in unlisted_leaves:
                by_leaf.setdefault(path[0], []).append(node)
        rank = {node: r for names in by_leaf.values() for r, node in enumerate(sorted(names))}
        for i, server in enumerate(placement.servers):
            if server.node_name not in topology.slots:
                slots[i] = rank[server.node_name]
    return slots


def cross_edge_counts(codes: np.ndarray, order: Sequence[int] | np.ndarray) -> tuple[int, ...]:
    """Ring edges (rank r -> r+1 mod n) whose ends lie in different domains, per listed tier."""
    ordered = codes[np.asarray(order, dtype=np.int64)]
    if len(ordered) < 2:
        return tuple(0 for _ in range(codes.shape[1]))
    differs = ordered != np.roll(ordered, -1, axis=0)
    return tuple(int(c) for c in differs.sum(axis=0))


def cross_edge_bounds(codes: np.ndarray) -> tuple[int, ...]:
    """Lower bound on ring cross edges per tier: the number of domains touched, when more than one."""
    counts = (len(np.unique(codes[:, t])) for t in range(codes.shape[1]))
    return tuple(c if c > 1 else 0 for c in counts)


def domain_ranks_first_seen(layout: ServerLayout) -> list[np.ndarray]:
    """Per tier, a rank for every domain code: the master's domain first, others by their lowest server index."""
    ranks = []
    for t in range(layout.tiers):
        column = layout.codes[:, t]
        first_seen = np.full(int(column.max()) + 1, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first_seen, column, np.arange(layout.size, dtype=np.int64))
        first_seen[column[layout.master]] = -1
        ranks.append(np.argsort(np.argsort(first_seen, kind="stable"), kind="stable"))
    return ranks


def leaf_sequence(layout: ServerLayout, domain_ranks: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Servers sorted by nested domain rank (leaf blocks in ring order) and the start of every leaf block."""
    # lexsort: the last key is primary; slot then server index order the servers inside a leaf
    keys = [np.arange(layout.size), layout.slots]
    keys += [domain_ranks[t][layout.codes[:, t]] for t in range(layout.tiers)]
    by_leaf = np.lexsort(keys)
    leaf_codes = layout.codes[by_leaf, 0] if layout.tiers else np.zeros(layout.size, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, leaf_codes[1:] != leaf_codes[:-1]])
    return by_leaf, starts


def choose_boundary_servers(
    leaves: Sequence[Sequence[int]], slots: np.ndarray, master: int
) -> tuple[list[int], list[int], int]:
    """Entry and exit server of every leaf, leaves visited in the given ring order, leaf 0 entered at the master.

    Minimises the number of leaf boundaries whose exit and entry servers have different port slots (NSLB pairs
    boundary servers with equal slice ids so their cross-leaf flow meets no other flow). Exact dynamic programme
    over leaves: the state is the entry server; a leaf of two or more servers needs a distinct exit.
    Returns (entries, exits, mismatched boundaries).
    """
    k = len(leaves)
    if k == 1:
        rest = [s for s in leaves[0] if s != master]
        return [master], [rest[-1] if rest else master], 0
    # cost[e]: fewest mismatches up to entering this leaf at e; came_from[i][e]: exit of the previous leaf
    cost: dict[int, int] = {master: 0}
    exit_choice: list[dict[int, int]] = []
    entry_choice: list[dict[int, int]] = []
    final_cost = -1
    final_exit = -1
    for i, members in enumerate(leaves):
        ranked = sorted(cost.items(), key=lambda item: (item[1], slots[item[0]], item[0]))
        best_e, best_c = ranked[0]
        second = ranked[1] if len(ranked) > 1 else None
        exit_cost: dict[int, int] = {}
        chosen_entry: dict[int, int] = {}
        for x in members:
            if len(members) == 1:
                exit_cost[x], chosen_entry[x] = cost[x], x
            elif x != best_e:
                exit_cost[x], chosen_entry[x] = best_c, best_e
            elif second is not None:
                exit_cost[x], chosen_entry[x] = second[1], second[0]
        exit_choice.append(chosen_entry)
        by_slot: dict[int, tuple[int, int]] = {}
        any_best = min(exit_cost.items(), key=lambda item: (item[1], slots[item[0]], item[0]))
        for x, c in exit_cost.items():
            s = int(slots[x])
            if s not in by_slot or (c, x) < (by_slot[s][1], by_slot[s][0]):
                by_slot[s] = (x, c)
        if i == k - 1:
            matched = by_slot.get(int(slots[master]))
            if matched is not None and matched[1] <= any_best[1] + 1:
                final_exit, final_cost = matched[0], matched[1]
            else:
                final_exit, final_cost = any_best[0], any_best[1] + 1
            break
        next_cost: dict[int, int] = {}
        came_from: dict[int, int] = {}
        for e in leaves[i + 1]:
            matched = by_slot.get(int(slots[e]))
            if matched is not None and matched[1] <= any_best[1] + 1:
                next_cost[e], came_from[e] = matched[1], matched[0]
            else:
                next_cost[e], came_from[e] = any_best[1] + 1, any_best[0]
        entry_choice.append(came_from)
        cost = next_cost
    exits = [0] * k
    entries = [0] * k
    exits[k - 1] = final_exit
    for i in range(k - 1, -1, -1):
        entries[i] = exit_choice[i][exits[i]]
        if i > 0:
            exits[i - 1] = entry_choice[i - 1][entries[i]]
    return entries, exits, final_cost


def grouped_ring_order(
    layout: ServerLayout, domain_ranks: Sequence[np.ndarray] | None = None, *, reverse: bool = False
) -> np.ndarray:
    """A ring order meeting every tier's cross-edge bound, boundary servers paired by slot.

    Domains are visited by `domain_ranks` (per tier, rank of every domain code; the master's must be 0), each
    leaf from its entry server through the others (by slot) to its exit server. `reverse` runs the ring the
    other way round (rank 0 stays on the master).
    """
    n = layout.size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if layout.tiers == 0:
        return np.array([layout.master, *(i for i in range(n) if i != layout.master)], dtype=np.int64)
    ranks = domain_ranks if domain_ranks is not None else domain_ranks_first_seen(layout)
    by_leaf, starts = leaf_sequence(layout, ranks)
    bounds = np.r_[starts, n]
    leaves = [by_leaf[bounds[j] : bounds[j + 1]].tolist() for j in range(len(starts))]
    if reverse:
        # the same construction on the mirrored leaf sequence, then read backwards from the master
        leaves = [leaves[0], *leaves[:0:-1]]
    entries, exits, _ = choose_boundary_servers(leaves, layout.slots, layout.master)
    # within-leaf key: entry first, exit last, the rest by slot (already sorted that way)
    position = np.empty(n, dtype=np.int64)
    position[by_leaf] = np.arange(n)
    within = position.copy()
    within[np.asarray(entries)] = -1
    within[np.asarray(exits)] = n
    leaf_index = np.empty(n, dtype=np.int64)
    for j, members in enumerate(leaves):
        leaf_index[members] = j
    if len(leaves) > 0 and len(leaves[0]) == 1:
        within[layout.master] = -1
    order = np.lexsort((within, leaf_index))
    if reverse:
        order = np.r_[order[:1], order[:0:-1]]
    result: np.ndarray = order.astype(np.int64)
    return result


def shuffled_domain_ranks(layout: ServerLayout, rng: np.random.Generator) -> list[np.ndarray]:
    """Random domain order at every tier, the master's domains kept first."""
    ranks = []
    for t in range(layout.tiers):
        count = int(layout.codes[:, t].max()) + 1
        keys = rng.permutation(count).astype(np.int64)
        keys[layout.codes[layout.master, t]] = -1
        ranks.append(np.argsort(np.argsort(keys, kind="stable"), kind="stable"))
    return ranks


def ring_candidates(layout: ServerLayout, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Bound-meeting ring orders: first-seen domain order both ways, then random domain orders, without end."""
    yield grouped_ring_order(layout)
    yield grouped_ring_order(layout, reverse=True)
    while True:
        ranks = shuffled_domain_ranks(layout, rng)
        yield grouped_ring_order(layout, ranks, reverse=bool(rng.integers(2)))
