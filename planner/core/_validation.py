"""Input validation of `plan_ranks`, separate from the planning (scipy's `_..._iv` style)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import get_args

import numpy as np

from planner._errors import InputError, PlacementError
from planner._model import Pattern, Placement, Routing, Topology


@dataclass(frozen=True)
class CheckedArguments:
    """`plan_ranks`'s arguments once checked: the rng a Generator, the master's rank 0 among the fixed ones."""

    pattern: Pattern
    routing: Routing
    qps: int
    rng: np.random.Generator
    time_limit: float
    fixed: dict[int, int]


def _plan_ranks_iv(
    placement: Placement,
    topology: Topology,
    *,
    pattern: str,
    routing: str,
    qps: object,
    rng: object,
    time_limit: object,
    fixed_ranks: Mapping[int, int] | None,
) -> CheckedArguments:
    """Check `plan_ranks`'s arguments; every message names the argument and says what to pass."""
    if not isinstance(placement, Placement):
        raise InputError(f"placement: expected a planner.Placement, got {type(placement).__name__}")
    if not isinstance(topology, Topology):
        raise InputError(f"topology: expected a planner.Topology, got {type(topology).__name__}")
    n = len(placement.servers)
    if n == 0:
        raise PlacementError("placement.servers: the job has no servers; plan after its pods are bound")
    if not 0 <= placement.master < n:
        raise PlacementError(f"placement.master: {placement.master} is not a server index (0..{n - 1})")
    nodes = [s.node_name for s in placement.servers]
    if len(set(nodes)) != n:
        twice = next(node for node in nodes if nodes.count(node) > 1)
        raise PlacementError(f"placement.servers: node {twice!r} holds two pods; route planning needs one pod per node")
    if pattern not in get_args(Pattern):
        raise InputError(f"pattern: {pattern!r} is not one of {', '.join(get_args(Pattern))}")
    if routing not in get_args(Routing):
        raise InputError(f"routing: {routing!r} is not one of {', '.join(get_args(Routing))}")
    if isinstance(qps, bool) or not isinstance(qps, int | np.integer) or qps < 1:
        raise InputError(
            f"qps: {qps!r} queue pairs per connection; pass an integer >= 1 (HCCL_RDMA_QPS_PER_CONNECTION)"
        )
    if isinstance(time_limit, bool) or not isinstance(time_limit, int | float) or not math.isfinite(time_limit):
        raise InputError(f"time_limit: {time_limit!r}; pass a finite number of seconds > 0")
    if time_limit <= 0:
        raise InputError(f"time_limit: {time_limit!r}; pass a finite number of seconds > 0")
    if isinstance(rng, bool) or (rng is not None and not isinstance(rng, int | np.integer | np.random.Generator)):
        raise InputError(f"rng: {rng!r}; pass an int seed, a numpy Generator or None")
    generator = np.random.default_rng(rng)
    fixed = _fixed_ranks_iv(fixed_ranks, n, placement.master)
    return CheckedArguments(pattern, routing, int(qps), generator, float(time_limit), fixed)  # type: ignore[arg-type]


def _fixed_ranks_iv(fixed_ranks: Mapping[int, int] | None, n: int, master: int) -> dict[int, int]:
    """`fixed_ranks` checked (server indexes and ranks in 0..n-1, one server per rank, rank 0 for the master),
    with the master's rank 0 added."""
    fixed: dict[int, int] = {}
    for server, rank in (fixed_ranks or {}).items():
        if isinstance(server, bool) or not isinstance(server, int | np.integer) or not 0 <= server < n:
            raise InputError(f"fixed_ranks: key {server!r} is not a server index (0..{n - 1})")
        if isinstance(rank, bool) or not isinstance(rank, int | np.integer) or not 0 <= rank < n:
            raise InputError(f"fixed_ranks[{server}]: rank {rank!r} is not a node rank (0..{n - 1})")
        fixed[int(server)] = int(rank)
    taken: dict[int, int] = {}
    for server, rank in fixed.items():
        if rank in taken:
            raise InputError(
                f"fixed_ranks: servers {taken[rank]} and {server} both keep rank {rank}; give each rank to one server"
            )
        taken[rank] = server
    if taken.get(0, master) != master:
        raise InputError(
            f"fixed_ranks: server {taken[0]} keeps rank 0, but rank 0 belongs to the master "
            f"(server {master}); leave rank 0 to the master"
        )
    if master in fixed and fixed[master] != 0:
        raise InputError(f"fixed_ranks[{master}]: the master must keep rank 0 (got {fixed[master]})")
    fixed[master] = 0
    return fixed
