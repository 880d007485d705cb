"""Rank orders other tools produce, for the benchmark to compare against. Each keeps the master at rank 0."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.optimize import quadratic_assignment

from planner._errors import InputError
from planner._model import Pattern, Placement, Topology
from planner.core._halving_doubling import distance_matrix, traffic_matrix
from planner.core._ring import server_layout
from planner.sim._patterns import halving_doubling_steps, ring_flows

BASELINES: tuple[str, ...] = ("pod-index", "hostname", "random", "nslb", "leaf-grouped", "qap")
"""Names `baseline_order` accepts."""

QAP_BASELINE_MAX_SERVERS = 1024
"""Largest job the generic QAP mapper runs on (dense n x n matrices, FAQ iterations cost n^3)."""


def _rotated_to(order: Sequence[int], master: int) -> tuple[int, ...]:
    """The same ring started at the master (rotation keeps every ring edge)."""
    start = list(order).index(master)
    return tuple(int(s) for s in (*order[start:], *order[:start]))


def baseline_order(
    name: str,
    placement: Placement,
    topology: Topology,
    rng: int | np.random.Generator | None = None,
    *,
    pattern: Pattern = "ring",
) -> tuple[int, ...]:
    """The order a baseline ranks the placement's servers in (`order[r]` = server index of node rank r).

    - "pod-index": pods in task-index order, what incumbents write today;
    - "hostname": servers sorted by node name;
    - "random": a seeded random order;
    - "nslb": MindCluster's NSLB ordering, leaf-contiguous with leaves by name and servers by slice id;
    - "leaf-grouped": a topology-aware scheduler's ordering, leaves in first-seen order, servers by pod index;
    - "qap": scipy `quadratic_assignment` (FAQ from its default start) on `pattern`'s traffic x tier distance,
      a generic mapper (jobs up to `QAP_BASELINE_MAX_SERVERS` servers).
    List-based orders are rotated so the master comes first, which keeps their ring edges.
    """
    if name not in BASELINES:
        raise InputError(f"name: {name!r} is not a baseline; use one of {', '.join(BASELINES)}")
    n = len(placement.servers)
    master = placement.master
    if n == 0:
        return ()
    generator = np.random.default_rng(rng)
    if name == "pod-index":
        return _rotated_to(range(n), master)
    if name == "hostname":
        by_name = sorted(range(n), key=lambda i: (placement.servers[i].node_name, i))
        return _rotated_to(by_name, master)
    if name == "random":
        rest = [i for i in range(n) if i != master]
        return (master, *(int(rest[j]) for j in generator.permutation(len(rest))))
    layout = server_layout(placement, topology)
    if name in ("nslb", "leaf-grouped"):
        leaf_names = [topology.leaf_of(s.node_name) for s in placement.servers]
        if name == "nslb":
            by_slot = sorted(range(n), key=lambda i: (leaf_names[i], int(layout.slots[i]), i))
            return _rotated_to(by_slot, master)
        first_seen: dict[str, int] = {}
        for i, leaf in enumerate(leaf_names):
            first_seen.setdefault(leaf, i)
        grouped = sorted(range(n), key=lambda i: (first_seen[leaf_names[i]], i))
        return _rotated_to(grouped, master)
    if n > QAP_BASELINE_MAX_SERVERS:
        raise InputError(
            f"name: the 'qap' baseline handles up to {QAP_BASELINE_MAX_SERVERS} servers (got {n}); "
            "use a smaller job for it"
        )
    if n < 3:
        return _rotated_to(range(n), master)
    identity = np.arange(n)
    steps = [ring_flows(identity)] if pattern != "halving-doubling" else []
    if pattern != "ring":
        steps += halving_doubling_steps(identity)
    result = quadratic_assignment(
        traffic_matrix(steps, n),
        distance_matrix(layout.codes),
        method="faq",
        options={"partial_match": np.array([[0, master]]), "rng": generator},
    )
    return tuple(int(s) for s in result.col_ind)
