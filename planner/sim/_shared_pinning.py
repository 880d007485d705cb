"""Route pinning on a shared fabric: a job's queue pairs placed around the load other jobs already put on it.

Alone, pinning colours a job's cross-leaf flows so its own busiest link reaches λ*; every job colours the same way,
so jobs that share leaves pile onto the same spines. Here each step is an assignment problem against the
background: queue pairs of one (source switch, destination switch) group choose among the routes both ends have
(spine j, and across pods core c), and the largest total load (background + own) over the links the job uses is
minimised, the links it avoids left out of the maximum; among equal loads the lowest-numbered spines win.

The water-filling heuristic fills each group onto the routes whose busiest link is least loaded (exact per group
in 2 tiers, where a group's routes share no link), preferring routes by `route_preference` among equals. When it
misses the step's lower bound, the smallest feasible level is searched for as an integer program (HiGHS through
`scipy.optimize.milp`): for a level L, link l takes at most floor(Q (L - background_l)) queue pairs, and a level is
feasible when every group's queue pairs fit. Running jobs' routes never move: only the new job's are chosen.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import csr_matrix

from planner.sim._cross_flows import CrossFlows, cross_flows
from planner.sim._network import JobNetwork

EXACT_MAX_VARIABLES = 60_000
"""Largest (group, route) count the integer program takes on; bigger steps keep the water-filling."""
LEVEL_EPS = 1e-7
"""Loads within this of each other are equal (background loads are sums of 1/Q)."""


@dataclass(frozen=True, eq=False)
class _Groups:
    """The cross-leaf queue pairs of one step grouped by (source tier-1 switch, destination tier-1 switch)."""

    of_flow: np.ndarray
    """Group of every cross flow."""
    demand: np.ndarray
    """Queue pairs of each group."""
    sw_a: np.ndarray
    sw_b: np.ndarray
    spines: np.ndarray
    """Spines both ends reach (min of their uplinks)."""
    cores: np.ndarray
    """Cores both pods' spines reach, 0 for a group inside one pod."""
    pod_a: np.ndarray
    pod_b: np.ndarray
    plane: np.ndarray
    allowed: np.ndarray | None = None
    """(groups, width) spines each group may take (its queue pairs' ports reach no other), or None: all."""


@dataclass(frozen=True, eq=False)
class _Routes:
    """Every route of every group: its spine, core (-1 inside a pod) and the switch links it crosses."""

    group: np.ndarray
    spine: np.ndarray
    core: np.ndarray
    links: np.ndarray
    """(routes, 4) link ids, padded with the spare id `network.num_links` (always empty)."""
    preference: np.ndarray
    """Lower is preferred among routes of equal load."""


def _groups(network: JobNetwork, flows: CrossFlows, allowed: np.ndarray | None = None) -> _Groups:
    """Group cross flows (one entry per queue pair) by their tier-1 switches, and by the spines they may take
    (`allowed[flow, spine]`; None: every spine both ends reach)."""
    switches = len(network.leaf_names) * network.planes
    out_switch, in_switch = flows.out_switch % switches, flows.in_switch % switches
    leaf_a, leaf_b, pod_a, pod_b, plane = flows.leaf_a, flows.leaf_b, flows.pod_a, flows.pod_b, flows.plane
    key = out_switch * switches + in_switch
    classes = np.zeros(key.size, dtype=np.int64)
    masks: np.ndarray | None = None
    if allowed is not None:
        kinds, classes = np.unique(np.packbits(allowed, axis=1), axis=0, return_inverse=True)
        classes = classes.ravel()
        masks = np.unpackbits(kinds, axis=1, count=allowed.shape[1]).astype(bool)
        key = key * kinds.shape[0] + classes
    uniq, first, inverse, counts = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
    spines = np.minimum(network.leaf_uplinks[leaf_a[first]], network.leaf_uplinks[leaf_b[first]])
    cross_pod = pod_a[first] != pod_b[first]
    if network.listed_tiers == 2:
        cores = np.where(cross_pod, np.minimum(network.pod_uplinks[pod_a[first]], network.pod_uplinks[pod_b[first]]), 0)
    else:
        cores = np.zeros(uniq.size, dtype=np.int64)
    return _Groups(
        of_flow=inverse.ravel(),
        demand=counts.astype(np.int64),
        sw_a=out_switch[first],
        sw_b=in_switch[first],
        spines=spines.astype(np.int64),
        cores=cores.astype(np.int64),
        pod_a=pod_a[first],
        pod_b=pod_b[first],
        plane=plane[first],
        allowed=masks[classes[first]] if masks is not None else None,
    )


def _routes(network: JobNetwork, groups: _Groups) -> _Routes:
    """Every (spine, core) route of every group, with its links and preference."""
    per_group = groups.spines * np.maximum(groups.cores, 1)
    group = np.repeat(np.arange(per_group.size), per_group)
    within = np.arange(group.size) - np.repeat(np.cumsum(per_group) - per_group, per_group)
    width = np.maximum(groups.cores, 1)[group]
    spine = within // width
    core = np.where(groups.cores[group] > 0, within % width, -1)
    spare = network.num_links
    links = np.full((group.size, 4), spare, dtype=np.int64)
    links[:, 0] = network.leaf_link(groups.sw_a[group], spine, up=True)
    links[:, 1] = network.leaf_link(groups.sw_b[group], spine, up=False)
    crossing = core >= 0
    if crossing.any():
        g, c, j = group[crossing], core[crossing], spine[crossing]
        links[crossing, 2] = network.spine_link(groups.pod_a[g], groups.plane[g], j, c, up=True)
        links[crossing, 3] = network.spine_link(groups.pod_b[g], groups.plane[g], j, c, up=False)
    # Lowest-numbered spines (and cores) first, for every job: the links left free at each switch then nest, and a
    # later job finds the most routes free at both of its ends (measured against a per-job rotation: 8 of 8 shared
    # fabrics at the bound, 7 of 8 rotated; bench/fabric.py).
    preference = spine * 1024 + np.maximum(core, 0)
    if groups.allowed is not None:
        width = groups.allowed.shape[1]
        keep = groups.allowed[group, np.minimum(spine, width - 1)] & (spine < width)
        # a group none of whose routes its ports reach keeps them all (its queue pairs are rerouted later)
        stranded = np.bincount(group[keep], minlength=groups.demand.size) == 0
        keep |= stranded[group]
        group, spine, core, links, preference = group[keep], spine[keep], core[keep], links[keep], preference[keep]
    return _Routes(group, spine, core, links, preference.astype(np.float64))


def _fill(routes: _Routes, groups: _Groups, load: np.ndarray) -> np.ndarray:
    """Water-filling, group by group (largest first): queue pairs of each route, adding them to `load` (in queue
    pairs, background included, with the spare id last)."""
    count = np.zeros(routes.group.size, dtype=np.int64)
    starts = np.r_[0, np.cumsum(np.bincount(routes.group, minlength=groups.demand.size))]
    for g in np.argsort(-groups.demand, kind="stable").tolist():
        lo, hi = int(starts[g]), int(starts[g + 1])
        links = routes.links[lo:hi]
        preference = routes.preference[lo:hi]
        crossing = bool((routes.core[lo:hi] >= 0).any())
        remaining = int(groups.demand[g])
        if not crossing:
            # 2 tiers: a group's routes share no link, so water-filling their busiest links is exact
            level = load[links].max(axis=1)
            order = np.lexsort((preference, level))
            take = _water(level[order], remaining)
            chosen = np.zeros(hi - lo, dtype=np.int64)
            chosen[order] = take
            count[lo:hi] = chosen
            np.add.at(load, links, chosen[:, None])
            load[-1] = 0
            continue
        for _ in range(remaining):  # routes of one spine share its uplink: one queue pair at a time
            level = load[links].max(axis=1)
            best = int(np.lexsort((preference, level))[0])
            count[lo + best] += 1
            load[links[best]] += 1
            load[-1] = 0
    return count


def _water(levels: np.ndarray, units: int) -> np.ndarray:
    """Units poured one at a time onto the lowest of bins at `levels` (one unit raises a bin by one; among equal
    bins the earlier first): each bin's share. The final state of that greedy, computed at once: the smallest level
    T that takes every unit, less the excess from the highest, latest bins."""
    take = np.zeros(levels.size, dtype=np.int64)
    if units <= 0 or not levels.size:
        return take

    def taken(level: float) -> np.ndarray:
        shares: np.ndarray = np.ceil(np.maximum(0.0, level - levels) - LEVEL_EPS).astype(np.int64)
        return shares

    lo, hi = float(levels.min()), float(levels.min()) + units + 1.0
    for _ in range(64):
        mid = (lo + hi) / 2
        if taken(mid).sum() >= units:
            hi = mid
        else:
            lo = mid
    take = taken(hi)
    excess = int(take.sum()) - units
    if excess > 0:
        final = levels + take
        order = np.lexsort((-np.arange(levels.size), -final))
        order = order[take[order] > 0][:excess]
        take[order] -= 1
    return take


def _feasible(
    routes: _Routes, groups: _Groups, capacity: np.ndarray, time_limit: float
) -> tuple[np.ndarray | None, bool]:
    """Queue pairs per route with every group placed and no link over its capacity (preferred routes first), or
    None; and whether the solver settled the question within the time limit."""
    variables = routes.group.size
    links = routes.links
    used, row = np.unique(links.ravel(), return_inverse=True)
    row = row.ravel().reshape(links.shape)
    spare = used == capacity.size - 1
    column = np.repeat(np.arange(variables), links.shape[1])
    keep = ~spare[row.ravel()]
    groups_n = groups.demand.size
    matrix = csr_matrix(
        (
            np.ones(variables + int(keep.sum())),
            (np.r_[routes.group, groups_n + row.ravel()[keep]], np.r_[np.arange(variables), column[keep]]),
        ),
        shape=(groups_n + used.size, variables),
    )
    lower = np.r_[groups.demand, np.full(used.size, -np.inf)].astype(np.float64)
    upper = np.r_[groups.demand, capacity[used]].astype(np.float64)
    upper[groups_n:][spare] = np.inf
    result = milp(
        routes.preference / max(float(routes.preference.max(initial=1.0)), 1.0),
        constraints=LinearConstraint(matrix, lower, upper),
        integrality=np.ones(variables),
        bounds=Bounds(np.zeros(variables), groups.demand[routes.group].astype(np.float64)),
        options={"time_limit": max(time_limit, 0.01)},
    )
    if result.x is None:
        return None, result.status == 2  # 2: infeasible (settled); otherwise stopped before an answer
    return np.round(result.x).astype(np.int64), True


def _candidate_levels(background: np.ndarray, links: np.ndarray, qps: int, low: float, high: float) -> np.ndarray:
    """Every level a link's load can take between `low` and `high` (flows): background + k / qps."""
    base = np.unique(background[np.unique(links)])
    steps = int(np.ceil((high - float(base.min(initial=0.0))) * qps)) + 1
    values = (base[:, None] + np.arange(0, steps + 1)[None, :] / qps).ravel()
    values = np.unique(np.round(values / LEVEL_EPS) * LEVEL_EPS)
    chosen: np.ndarray = values[(values >= low - LEVEL_EPS) & (values <= high + LEVEL_EPS)]
    return chosen


def _step_floor(network: JobNetwork, groups: _Groups, background: np.ndarray, qps: int) -> float:
    """A lower bound on the step's largest link load (background + own) over the links the job uses: at every
    tier-1 switch, its queue pairs and the background on its uplinks (downlinks) spread evenly at best."""
    floor = 0.0
    for side, direction in ((groups.sw_a, True), (groups.sw_b, False)):
        for switch in np.unique(side).tolist():
            mine = side == switch
            spines = int(groups.spines[mine].max())
            links = network.leaf_link(np.full(spines, switch), np.arange(spines), up=direction)
            total = background[links].sum() + groups.demand[mine].sum() / qps
            floor = max(floor, total / spines, float(background[links].min()) + 1.0 / qps)
    return floor


def pin_around(
    network: JobNetwork,
    queue_pairs: tuple[np.ndarray, ...],
    background: np.ndarray,
    qps: int,
    *,
    exact_time_limit: float = 2.0,
    allowed: Sequence[np.ndarray | None] | None = None,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Spine and core of every cross-leaf queue pair of each step, chosen around `background` (flows per link of
    `network`, 0 on NIC links). `queue_pairs[k]` holds step k's flows repeated `qps` times (one row per queue pair,
    as `_pin` takes them); returns per step (rows, nics) spines and cores, -1 for flows that stay on their switch.
    `allowed[k]`, a (rows, nics, spines) mask, limits the spines each queue pair of step k may take (those its
    source ports can reach through the switch's hash).
    """
    deadline = time.perf_counter() + exact_time_limit
    spines_out: list[np.ndarray] = []
    cores_out: list[np.ndarray] = []
    background_q = np.r_[np.asarray(background, dtype=np.float64) * qps, 0.0]
    for index, pairs in enumerate(queue_pairs):
        spines = np.full((pairs.shape[0], network.nics), -1, dtype=np.int64)
        cores = np.full_like(spines, -1)
        flows = cross_flows(network, [pairs])
        if flows.step.size:
            mask = allowed[index] if allowed is not None else None
            groups = _groups(network, flows, mask[flows.pair, flows.nic] if mask is not None else None)
            routes = _routes(network, groups)
            count = _fill(routes, groups, background_q.copy())
            count = _improve(
                network, routes, groups, background_q=background_q, qps=qps, count=count, deadline=deadline
            )
            spine_of, core_of = _spread_members(routes, groups, count)
            spines[flows.pair, flows.nic] = spine_of
            cores[flows.pair, flows.nic] = core_of
        spines_out.append(spines)
        cores_out.append(cores)
    return spines_out, cores_out


def _level_of(routes: _Routes, background_q: np.ndarray, count: np.ndarray, qps: int) -> float:
    """Largest load (flows, background included) over the links the routes with queue pairs use."""
    load = background_q.copy()
    np.add.at(load, routes.links, count[:, None])
    load[-1] = 0
    used = np.unique(routes.links[count > 0])
    used = used[used != background_q.size - 1]
    return float(load[used].max(initial=0.0)) / qps


def _improve(
    network: JobNetwork,
    routes: _Routes,
    groups: _Groups,
    *,
    background_q: np.ndarray,
    qps: int,
    count: np.ndarray,
    deadline: float,
) -> np.ndarray:
    """The water-filling's counts, or the integer program's at a lower level when one exists (in time)."""
    if routes.group.size > EXACT_MAX_VARIABLES:
        return count
    reached = _level_of(routes, background_q, count, qps)
    floor = _step_floor(network, groups, background_q[:-1] / qps, qps)
    if reached <= floor + LEVEL_EPS:
        return count
    levels = _candidate_levels(
        background_q[:-1] / qps, routes.links[routes.links < network.num_links], qps, floor, reached
    )
    levels = levels[levels < reached - LEVEL_EPS]
    best = count
    lo, hi = 0, levels.size - 1
    while lo <= hi:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            break
        mid = (lo + hi) // 2
        capacity = np.maximum(0.0, np.floor(levels[mid] * qps - background_q + LEVEL_EPS * qps))
        capacity[-1] = np.inf
        found, settled = _feasible(routes, groups, capacity, remaining)
        if found is not None:
            best = found
            hi = mid - 1
        elif settled:
            lo = mid + 1
        else:
            break
    return best


def _spread_members(routes: _Routes, groups: _Groups, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The route of each cross flow: a group's flows (in queue-pair order) take its routes' slots round-robin, so
    the queue pairs of one connection land on different routes where the group has several."""
    spine = np.empty(groups.of_flow.size, dtype=np.int64)
    core = np.empty(groups.of_flow.size, dtype=np.int64)
    members = np.argsort(groups.of_flow, kind="stable")
    slot_route = np.repeat(np.arange(routes.group.size), count)
    # slot i of a route comes before slot i+1 of every route of its group: a round-robin over the routes
    nth = np.arange(slot_route.size) - np.repeat(np.cumsum(count) - count, count)
    slots = slot_route[np.lexsort((slot_route, nth, routes.group[slot_route]))]
    spine[members] = routes.spine[slots]
    core[members] = routes.core[slots]
    return spine, core


__all__ = ["pin_around"]
