"""`ring_order`: the bound-meeting ring order alone, without search, simulation or routes (the cheapest plan).

What a plan falls back to when the full plan does not fit its memory or time budget: every tier's ring cross
edges at their lower bound (leaf-contiguous, domains grouped, the master's domains first), in time and memory
linear in the job's size. No candidate is scored, so the load on the spine uplinks is not optimised.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from planner._model import Placement, Topology
from planner.core._ring import cross_edge_bounds, cross_edge_counts, grouped_ring_order, server_layout
from planner.core._validation import _fixed_ranks_iv


@dataclass(frozen=True)
class RingOrder:
    """The ring order alone and its cross edges per listed tier (leaf first) against their lower bounds."""

    order: tuple[int, ...]
    """`order[r]` = index into `Placement.servers` of node rank r; `order[0]` is the master."""
    cross_edges: tuple[int, ...]
    cross_edge_bounds: tuple[int, ...]

    @property
    def meets_bounds(self) -> bool:
        """Whether every tier's ring cross edges equal their lower bound (fixed ranks can keep it out of reach)."""
        return self.cross_edges == self.cross_edge_bounds


def ring_order(placement: Placement, topology: Topology, *, fixed_ranks: Mapping[int, int] | None = None) -> RingOrder:
    """The ring order meeting every tier's cross-edge bound, rank 0 on the master, without any search.

    `fixed_ranks` (server index -> rank) keeps surviving servers' ranks after a partial pod replacement; the other
    servers take the free ranks in the ring order's sequence. Raises InputError for bad fixed ranks and
    TopologyError for nodes the topology does not know.
    """
    n = len(placement.servers)
    layout = server_layout(placement, topology)
    fixed = _fixed_ranks_iv(fixed_ranks, n, placement.master) if n else {}
    preferred = grouped_ring_order(layout)
    if n and int(preferred[0]) != placement.master:
        start = int(np.flatnonzero(preferred == placement.master)[0])
        preferred = np.r_[preferred[start:], preferred[:start]]  # a rotation keeps every ring edge
    if len(fixed) > 1:
        order = np.full(n, -1, dtype=np.int64)
        for server, rank in fixed.items():
            order[rank] = server
        free = [int(s) for s in preferred if int(s) not in fixed]
        order[order < 0] = free
        preferred = order
    counts = cross_edge_counts(layout.codes, preferred)
    return RingOrder(
        order=tuple(int(s) for s in preferred),
        cross_edges=counts,
        cross_edge_bounds=cross_edge_bounds(layout.codes),
    )
