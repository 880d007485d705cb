"""Route pinning: give every cross-leaf flow a spine (and a core in 3 tiers) so link loads reach the optimum.

Per step, cross-leaf flows form a bipartite multigraph between source and destination tier-1 switches. A
colouring with U colours (uplinks) in which every switch of degree d uses each colour at most ceil(d / U) times
gives every flow a spine and puts at most λ* flows on every tier-1 link (2 tiers: optimal). It is built by
Euler splitting: halve the edges so every switch sends ceil/floor of its degree to each half, recurse; an odd
colour count peels one matching first. In 3 tiers a pod's cross-pod flows through spine j share its V core
uplinks, which couples the switches of a pod: the splitting also balances each pod's cross-pod flows, Kempe
swaps remove what is left over, and the core uplinks are then a colouring of the pod-level flows per spine.
The per-tier bound λ* is not always attainable jointly with oversubscribed spines (a parity obstruction), so a
step that misses it is solved exactly as an integer program when small; `RoutePlan.step_bounds` holds the
proven lower bound of every step (λ*, or the exact optimum).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from planner._errors import InputError
from planner.sim._colouring import limited_colouring
from planner.sim._cross_flows import CROSS_FIELDS, CrossFlows, cross_flows
from planner.sim._network import JobNetwork
from planner.sim._patterns import check_flows, whole_flow_bound
from planner.sim._route_plan import RoutePlan

EXACT_MAX_CHOICES = 20_000
"""Largest number of (flow, spine, core) choices the exact solver takes on; bigger steps keep the colouring."""
EXACT_TIME_LIMIT_S = 2.0
"""Time budget of the exact solves of one `pin_routes` call (HiGHS branch and bound); a solve stopped early
contributes its proven dual bound."""


def pin_routes(
    network: JobNetwork,
    flow_steps: Sequence[np.ndarray],
    *,
    qps: int = 1,
    exact_time_limit: float = EXACT_TIME_LIMIT_S,
    background: np.ndarray | None = None,
    allowed: Sequence[np.ndarray | None] | None = None,
) -> RoutePlan:
    """Pin every cross-leaf flow of every step to a spine (and core) with the smallest max link load per step.

    Steps are separate moments in time and are pinned independently (in one colouring of their disjoint union;
    identical steps, such as the two halves of halving-doubling, once). `RoutePlan.step_bounds` holds each
    step's proven lower bound and `step_loads` what the routes reach; they are equal (optimal) for every step
    whose load reaches λ* or that the exact solver finished (small steps; `exact_time_limit` seconds in total
    over all steps, 0 to skip it). With `qps` > 1 every queue pair of a flow (1/qps of it) is pinned on its own,
    so a flow may be split over spines: loads and bounds are then in flows, multiples of 1/qps.

    `background` (flows per link id of `network`: other jobs' load on a shared fabric) pins around it instead
    (`planner.sim._shared_pinning`): each step's largest total load over the links the job uses is minimised,
    the lowest-numbered spines preferred among equals. `step_loads` and `max_load` stay the job's
    own loads. `allowed[k]` ((pairs x qps, nics, spines) masks, one per step) limits the spines each queue pair
    may take, to those its source ports reach (pinned around a zero background when none is given).
    """
    if qps < 1:
        raise InputError(f"qps: {qps} queue pairs per connection; use 1 or more")
    given = tuple(check_flows(network, s) for s in flow_steps)
    if background is not None or allowed is not None:
        around = background if background is not None else np.zeros(network.num_links)
        return _pin_shared(
            network, given, qps=qps, background=around, exact_time_limit=exact_time_limit, allowed=allowed
        )
    if qps == 1:
        return _pin(network, given, exact_time_limit)
    whole = _pin(network, tuple(np.repeat(s, qps, axis=0) for s in given), exact_time_limit)
    return RoutePlan(
        network,
        given,
        whole.spines,
        whole.cores,
        max_load=whole.max_load / qps,
        bound=whole.bound / qps,
        step_bounds=tuple(b / qps for b in whole.step_bounds),
        step_loads=tuple(load / qps for load in whole.step_loads),
        qps=qps,
    )


def _pin(network: JobNetwork, all_steps: tuple[np.ndarray, ...], exact_time_limit: float) -> RoutePlan:
    """`pin_routes` of whole flows (queue pairs repeated as flows of their own)."""
    first_of: dict[tuple[tuple[int, ...], bytes], int] = {}
    distinct_of: list[int] = []
    for pairs in all_steps:
        distinct_of.append(first_of.setdefault((pairs.shape, pairs.tobytes()), len(first_of)))
    steps = tuple(all_steps[distinct_of.index(k)] for k in range(len(first_of)))
    flows = cross_flows(network, steps)
    spine, core = _assign(network, flows)
    spines_out = [np.full((s.shape[0], network.nics), -1, dtype=np.int64) for s in steps]
    cores_out = [np.full((s.shape[0], network.nics), -1, dtype=np.int64) for s in steps]
    for i in range(len(steps)):
        mine = flows.step == i
        spines_out[i][flows.pair[mine], flows.nic[mine]] = spine[mine]
        cores_out[i][flows.pair[mine], flows.nic[mine]] = core[mine]
    loads = _pinned_step_loads(network, steps, flows, spine, core)
    bounds = [whole_flow_bound(network, s) for s in steps]
    if network.listed_tiers == 2:
        _recolour_missed_steps(network, steps, bounds=bounds, loads=loads, spines_out=spines_out, cores_out=cores_out)
    deadline = time.perf_counter() + exact_time_limit
    for i, pairs in enumerate(steps):
        remaining = deadline - time.perf_counter()
        if loads[i] <= bounds[i] or remaining <= 0:
            continue
        nic_load = _nic_max_load(pairs)
        exact = _exact_step(network, pairs, bounds[i], remaining)
        if exact is None:
            continue
        bounds[i] = max(bounds[i], exact.lower_bound)
        if max(exact.max_load, nic_load) < loads[i]:
            step_flows = cross_flows(network, [pairs])
            spines_out[i][step_flows.pair, step_flows.nic] = exact.spine
            cores_out[i][step_flows.pair, step_flows.nic] = exact.core
            loads[i] = max(exact.max_load, nic_load)
    return RoutePlan(
        network,
        all_steps,
        tuple(spines_out[k] for k in distinct_of),
        tuple(cores_out[k] for k in distinct_of),
        max_load=max(loads, default=0),
        bound=max(bounds, default=1),
        step_bounds=tuple(bounds[k] for k in distinct_of),
        step_loads=tuple(loads[k] for k in distinct_of),
    )


def _pin_shared(
    network: JobNetwork,
    given: tuple[np.ndarray, ...],
    *,
    qps: int,
    background: np.ndarray,
    exact_time_limit: float,
    allowed: Sequence[np.ndarray | None] | None = None,
) -> RoutePlan:
    """`pin_routes` around other jobs' load: distinct steps pinned once, then the plan of those routes."""
    from planner.sim._shared_pinning import pin_around

    if background.shape != (network.num_links,):
        raise InputError(f"background: {background.shape} loads for a network of {network.num_links} links")
    first_of: dict[tuple[tuple[int, ...], bytes], int] = {}
    distinct_of = [first_of.setdefault((s.shape, s.tobytes()), len(first_of)) for s in given]
    distinct = [given[distinct_of.index(k)] for k in range(len(first_of))]
    masks = [allowed[distinct_of.index(k)] for k in range(len(first_of))] if allowed is not None else None
    spines, cores = pin_around(
        network,
        tuple(np.repeat(s, qps, axis=0) for s in distinct),
        background,
        qps,
        exact_time_limit=exact_time_limit,
        allowed=masks,
    )
    return routes_from_assignment(
        network, given, [spines[k] for k in distinct_of], [cores[k] for k in distinct_of], qps
    )


def routes_from_assignment(
    network: JobNetwork,
    steps: Sequence[np.ndarray],
    spines: Sequence[np.ndarray],
    cores: Sequence[np.ndarray],
    qps: int,
) -> RoutePlan:
    """The route plan of given routes (`spines[k]`, `cores[k]`: (pairs x qps, nics) per step, as `RoutePlan`
    holds them), with the loads they give and each step's counting bound λ* (not a proven optimum)."""
    given = tuple(check_flows(network, s) for s in steps)
    whole = [np.repeat(s, qps, axis=0) for s in given]
    flows = cross_flows(network, whole)
    spine_of = np.concatenate([np.asarray(s)[f.pair, f.nic] for s, f in _per_step(spines, flows, len(whole))])
    core_of = np.concatenate([np.asarray(c)[f.pair, f.nic] for c, f in _per_step(cores, flows, len(whole))])
    if (spine_of < 0).any():
        raise InputError("routes: every cross-leaf queue pair needs a spine (got -1)")
    loads = _pinned_step_loads(network, whole, flows, spine_of, core_of)
    bounds = [whole_flow_bound(network, s) for s in whole]
    return RoutePlan(
        network,
        given,
        tuple(np.asarray(s) for s in spines),
        tuple(np.asarray(c) for c in cores),
        max_load=max(loads, default=0) / qps,
        bound=max(bounds, default=1) / qps,
        step_bounds=tuple(b / qps for b in bounds),
        step_loads=tuple(load / qps for load in loads),
        qps=qps,
    )


def _per_step(arrays: Sequence[np.ndarray], flows: CrossFlows, steps: int) -> list[tuple[np.ndarray, CrossFlows]]:
    """Each step's array with the cross flows of that step (in `flows` order, which is step-major)."""
    out: list[tuple[np.ndarray, CrossFlows]] = []
    for k in range(steps):
        mine = flows.step == k
        out.append((arrays[k], CrossFlows(*(getattr(flows, f)[mine] for f in CROSS_FIELDS))))
    return out


RECOLOUR_ATTEMPTS = 32
"""Most colourings with other tie-breaks tried for a 3-tier step whose pod repair left it above λ*."""
RECOLOUR_FLOW_BUDGET = 65_536
"""Cross-leaf flows coloured again per missed step at most (attempts x flows), so large steps stay cheap."""


def _recolour_missed_steps(
    network: JobNetwork,
    steps: Sequence[np.ndarray],
    *,
    bounds: Sequence[int],
    loads: list[int],
    spines_out: list[np.ndarray],
    cores_out: list[np.ndarray],
) -> None:
    """Colour again, with seeded tie-breaks, each small 3-tier step the first colouring left above λ*.

    With oversubscribed spines the Euler split balances a pod's cross-pod flows only as far as its leaves'
    parities allow, and single Kempe swaps cannot always remove what is left (every two-spine chain can carry
    two flows of one pod); another pairing order usually avoids the imbalance altogether. Deterministic.
    """
    for i, pairs in enumerate(steps):
        if loads[i] <= bounds[i]:
            continue
        step_flows = cross_flows(network, [pairs])
        attempts = min(RECOLOUR_ATTEMPTS, RECOLOUR_FLOW_BUDGET // max(step_flows.step.size, 1))
        nic_load = _nic_max_load(pairs)
        rng = np.random.default_rng(i)
        for _ in range(attempts):
            spine, core = _assign(network, step_flows, rng.permutation(step_flows.step.size))
            load = _pinned_step_loads(network, [pairs], step_flows, spine, core)[0]
            if max(load, nic_load) < loads[i]:
                spines_out[i][step_flows.pair, step_flows.nic] = spine
                cores_out[i][step_flows.pair, step_flows.nic] = core
                loads[i] = max(load, nic_load)
            if loads[i] <= bounds[i]:
                break


def _nic_max_load(pairs: np.ndarray) -> int:
    """Largest number of flows on one NIC link (per NIC and direction) of a step."""
    if not pairs.size:
        return 0
    return int(max(np.bincount(pairs[:, 0]).max(), np.bincount(pairs[:, 1]).max()))


def _pinned_step_loads(
    network: JobNetwork, steps: Sequence[np.ndarray], flows: CrossFlows, spine: np.ndarray, core: np.ndarray
) -> list[int]:
    """Max link load (NIC and switch links) of every step under the given routes."""
    switches = len(network.leaf_names) * network.planes
    sw_a, sw_b = flows.out_switch % switches, flows.in_switch % switches
    parts = [network.leaf_link(sw_a, spine, up=True), network.leaf_link(sw_b, spine, up=False)]
    owners = [flows.step, flows.step]
    up = np.flatnonzero(core >= 0)
    if up.size:
        for pod, direction in ((flows.pod_a, True), (flows.pod_b, False)):
            parts.append(network.spine_link(pod[up], flows.plane[up], spine[up], core[up], up=direction))
            owners.append(flows.step[up])
    first = network.first_switch_link
    width = network.num_links - first
    links = np.concatenate(parts) - first
    owner = np.concatenate(owners)
    out = [_nic_max_load(s) for s in steps]
    if links.size:
        counts = np.bincount(owner * width + links, minlength=len(steps) * width).reshape(len(steps), width)
        out = [max(a, int(b)) for a, b in zip(out, counts.max(axis=1), strict=True)]
    return out


# -- pinning -----------------------------------------------------------------------------------------------------


def _assign(
    network: JobNetwork, flows: CrossFlows, tie_break: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(spine, core) of every cross-leaf flow: spines by a pod-aware colouring, then cores per spine plane.

    `tie_break` (a permutation of the flows) reorders flows of the same kind at each switch, which changes the
    Euler-split pairings; None keeps flow order.
    """
    planes, pods = network.planes, len(network.pod_names)
    cross_pod = flows.cross_pod
    # Intra-pod flows pair first, so a leaf's odd cross-pod flow is left over and balanced at pod level.
    key = cross_pod.astype(np.int64)
    if tie_break is not None:
        key = key * max(key.size, 1) + tie_break
    pod_key = (flows.step * planes + flows.plane) * pods
    out_group = np.where(cross_pod, pod_key + flows.pod_a, -1)
    in_group = np.where(cross_pod, pod_key + flows.pod_b, -1)
    spine = limited_colouring(
        flows.out_switch,
        flows.in_switch,
        network.leaf_uplinks[flows.leaf_a],
        network.leaf_uplinks[flows.leaf_b],
        key=key,
        out_group=out_group,
        in_group=in_group,
    )
    core = np.full(spine.size, -1, dtype=np.int64)
    if network.listed_tiers == 2 and cross_pod.any():
        spine, core = _repair_pods(network, flows, spine)
    return spine, core


def _repair_pods(network: JobNetwork, flows: CrossFlows, spine: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Spines that keep every pod's cross-pod flows per spine within its core uplinks, and cores for them.

    Tier-1 colouring keeps each switch within λ per spine; a pod's cross-pod flows through spine j must also
    stay within λ x V (its core uplinks) or no core choice can meet λ. Violations are removed by Kempe swaps:
    in the subgraph of spines j and k (switch ends cut into chunks holding at most one flow of each spine),
    every component is a path or cycle, and swapping j and k along it keeps every switch within λ while moving
    cross-pod flows of the pods it touches between j and k. A swap is taken when it lowers the total excess.
    """
    spine = spine.copy()
    planes, pods = network.planes, len(network.pod_names)
    width = network.max_uplinks
    lam = _step_lambdas(network, flows)
    cross = np.flatnonzero(flows.cross_pod)
    # Groups: (step, plane, pod, side); caps λ_step x V_pod.
    base = (flows.step[cross] * planes + flows.plane[cross]) * pods
    out_group = (base + flows.pod_a[cross]) * 2
    in_group = (base + flows.pod_b[cross]) * 2 + 1
    groups = len(lam) * planes * pods * 2
    group_step = np.arange(groups) // (planes * pods * 2)
    group_pod = (np.arange(groups) // 2) % pods
    cap = lam[group_step] * network.pod_uplinks[group_pod]

    def counts() -> np.ndarray:
        table = np.zeros((groups, width), dtype=np.int64)
        np.add.at(table, (out_group, spine[cross]), 1)
        np.add.at(table, (in_group, spine[cross]), 1)
        return table

    table = counts()
    budget = 50 + 4 * int(np.maximum(table - cap[:, None], 0).sum())
    for _ in range(budget):
        excess = np.maximum(table - cap[:, None], 0)
        if not excess.any():
            break
        # Try the worst violation first; when no chain helps it, the next ones (a swap elsewhere may unlock it).
        violations = np.argsort(-excess, axis=None, kind="stable")[: int(np.count_nonzero(excess))]
        for flat in violations.tolist():
            group, colour = divmod(flat, width)
            if _kempe_step(
                network,
                flows,
                spine,
                cross=cross,
                out_group=out_group,
                in_group=in_group,
                table=table,
                cap=cap,
                group=group,
                colour=colour,
            ):
                break
        else:
            break
        table = counts()
    return spine, _assign_cores(network, flows, spine)


def _kempe_step(
    network: JobNetwork,
    flows: CrossFlows,
    spine: np.ndarray,
    *,
    cross: np.ndarray,
    out_group: np.ndarray,
    in_group: np.ndarray,
    table: np.ndarray,
    cap: np.ndarray,
    group: int,
    colour: int,
) -> bool:
    """Swap spines `colour` and some k along one Kempe chain that lowers the total excess; False if none does."""
    planes, pods = network.planes, len(network.pod_names)
    step_plane = group // (pods * 2)
    in_step = (flows.step * planes + flows.plane) == step_plane
    limit = np.minimum(network.leaf_uplinks[flows.leaf_a], network.leaf_uplinks[flows.leaf_b])
    group_of = np.full(spine.size, -1, dtype=np.int64)
    group_in = np.full(spine.size, -1, dtype=np.int64)
    group_of[cross] = out_group
    group_in[cross] = in_group
    candidates = np.argsort(table[group], kind="stable")
    for other in candidates.tolist():
        if other == colour or table[group, other] >= cap[group]:
            continue
        edges = np.flatnonzero(in_step & ((spine == colour) | (spine == other)) & (limit > max(colour, other)))
        if not edges.size:
            continue
        chain = _kempe_chains(flows.out_switch[edges], flows.in_switch[edges], spine[edges])
        # Net change of each (chain, group) count of `colour` when the chain swaps: -(#colour) + (#other).
        sign = np.where(spine[edges] == colour, -1, 1)
        keys_c: list[np.ndarray] = []
        keys_g: list[np.ndarray] = []
        values: list[np.ndarray] = []
        for side in (group_of, group_in):
            g = side[edges]
            has = g >= 0
            keys_c.append(chain[has])
            keys_g.append(g[has])
            values.append(sign[has])
        all_c, all_g, all_v = np.concatenate(keys_c), np.concatenate(keys_g), np.concatenate(values)
        if not all_c.size:
            continue
        combined = all_c * table.shape[0] + all_g
        uniq, inverse = np.unique(combined, return_inverse=True)
        delta = np.bincount(inverse.ravel(), weights=all_v, minlength=uniq.size).astype(np.int64)
        chain_of, group_key = uniq // table.shape[0], uniq % table.shape[0]
        old = np.maximum(table[group_key, colour] - cap[group_key], 0) + np.maximum(
            table[group_key, other] - cap[group_key], 0
        )
        new = np.maximum(table[group_key, colour] + delta - cap[group_key], 0) + np.maximum(
            table[group_key, other] - delta - cap[group_key], 0
        )
        gain = np.bincount(chain_of, weights=(old - new), minlength=int(chain.max()) + 1)
        best = int(np.argmax(gain))
        if gain[best] <= 0:
            continue
        flip = edges[chain == best]
        spine[flip] = np.where(spine[flip] == colour, other, colour)
        return True
    return False


def _kempe_chains(out_v: np.ndarray, in_v: np.ndarray, colour: np.ndarray) -> np.ndarray:
    """Component id of every edge of a two-colour subgraph whose vertices are cut into chunks.

    The i-th edge of each colour at a vertex goes to chunk i, so every chunk holds at most one edge of each
    colour and the components are paths and cycles.
    """
    size = out_v.size
    ends: list[np.ndarray] = []
    for vertex in (out_v, in_v):
        order = np.lexsort((colour, vertex))
        ordered = np.stack([vertex[order], colour[order]], axis=1)
        new_run = np.r_[True, np.any(ordered[1:] != ordered[:-1], axis=1)]
        starts = np.flatnonzero(new_run)
        rank = np.arange(size) - np.repeat(starts, np.diff(np.r_[starts, size]))
        chunk_rank = np.empty(size, dtype=np.int64)
        chunk_rank[order] = rank
        _, ids = np.unique(np.stack([vertex, chunk_rank], axis=1), axis=0, return_inverse=True)
        ends.append(ids.ravel())
    left, right = ends
    n_left = int(left.max()) + 1
    n = n_left + int(right.max()) + 1
    graph = csr_matrix((np.ones(size, dtype=np.int8), (left, right + n_left)), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    chain: np.ndarray = labels[left]
    return chain


def _assign_cores(network: JobNetwork, flows: CrossFlows, spine: np.ndarray) -> np.ndarray:
    """Core uplink of every cross-pod flow: per spine plane, a colouring of the pod-level flows with V colours."""
    core = np.full(spine.size, -1, dtype=np.int64)
    up = np.flatnonzero(flows.cross_pod)
    if not up.size:
        return core
    planes, pods = network.planes, len(network.pod_names)
    spine_group = ((flows.step[up] * planes + flows.plane[up]) * network.max_uplinks + spine[up]) * pods
    core[up] = limited_colouring(
        spine_group + flows.pod_a[up],
        spine_group + flows.pod_b[up],
        network.pod_uplinks[flows.pod_a[up]],
        network.pod_uplinks[flows.pod_b[up]],
        key=np.zeros(up.size, dtype=np.int64),
        out_group=np.full(up.size, -1, dtype=np.int64),
        in_group=np.full(up.size, -1, dtype=np.int64),
    )
    return core


def _step_lambdas(network: JobNetwork, flows: CrossFlows) -> np.ndarray:
    """λ* of every step from its cross flows (tier-1 switches and pods)."""
    steps = int(flows.step.max()) + 1 if flows.step.size else 0
    lam = np.ones(steps, dtype=np.int64)
    if not steps:
        return lam
    for vertex, leaf in ((flows.out_switch, flows.leaf_a), (flows.in_switch, flows.leaf_b)):
        uniq, inverse, count = np.unique(vertex, return_inverse=True, return_counts=True)
        size = np.zeros(uniq.size, dtype=np.int64)
        size[inverse.ravel()] = network.leaf_uplinks[leaf]
        step_of = np.zeros(uniq.size, dtype=np.int64)
        step_of[inverse.ravel()] = flows.step
        np.maximum.at(lam, step_of, -(-count // size))
    if network.listed_tiers == 2:
        cross = flows.cross_pod
        pods = len(network.pod_names)
        capacity = network.pod_spines * network.pod_uplinks
        for pod in (flows.pod_a, flows.pod_b):
            key = flows.step[cross] * pods * network.planes + flows.plane[cross] * pods + pod[cross]
            uniq, count = np.unique(key, return_counts=True)
            pod_of = uniq % pods
            step_of = uniq // (pods * network.planes)
            np.maximum.at(lam, step_of, -(-count // capacity[pod_of]))
    return lam


# -- exact optimum of one step (small steps only) ----------------------------------------------------------------


@dataclass(frozen=True)
class _ExactResult:
    spine: np.ndarray
    core: np.ndarray
    max_load: int
    lower_bound: int


def _exact_step(network: JobNetwork, pairs: np.ndarray, floor: int, time_limit: float) -> _ExactResult | None:
    """Min-max-load pinning of one step as an integer program: x[flow, spine, core] in {0, 1}, minimise L.

    Every cross-leaf flow takes one (spine, core) both ends have; every switch link carries at most L flows.
    Returns None when the step is too large or no solution was found in time.
    """
    flows = cross_flows(network, [pairs])
    count = flows.step.size
    if not count:
        return None
    spine_limit = np.minimum(network.leaf_uplinks[flows.leaf_a], network.leaf_uplinks[flows.leaf_b])
    cross_pod = flows.cross_pod
    core_limit = np.where(cross_pod, np.minimum(network.pod_uplinks[flows.pod_a], network.pod_uplinks[flows.pod_b]), 1)
    choices = spine_limit * core_limit
    total = int(choices.sum())
    if total > EXACT_MAX_CHOICES:
        return None
    var_flow = np.repeat(np.arange(count), choices)
    within = np.arange(total) - np.repeat(np.cumsum(choices) - choices, choices)
    var_spine = within // core_limit[var_flow]
    var_core = within % core_limit[var_flow]
    switches = len(network.leaf_names) * network.planes
    sw_a, sw_b = flows.out_switch % switches, flows.in_switch % switches
    link_cols = [
        network.leaf_link(sw_a[var_flow], var_spine, up=True),
        network.leaf_link(sw_b[var_flow], var_spine, up=False),
    ]
    var_ids = [np.arange(total), np.arange(total)]
    pod_vars = np.flatnonzero(cross_pod[var_flow])
    if pod_vars.size:
        f = var_flow[pod_vars]
        for pod, up in ((flows.pod_a, True), (flows.pod_b, False)):
            link_cols.append(network.spine_link(pod[f], flows.plane[f], var_spine[pod_vars], var_core[pod_vars], up=up))
            var_ids.append(pod_vars)
    links, link_row = np.unique(np.concatenate(link_cols), return_inverse=True)
    link_row = link_row.ravel() + count
    variables = total + 1
    rows = np.concatenate([var_flow, link_row, count + np.arange(links.size)])
    cols = np.concatenate([np.arange(total), np.concatenate(var_ids), np.full(links.size, total)])
    data = np.concatenate([np.ones(total), np.ones(link_row.size), -np.ones(links.size)])
    matrix = csr_matrix((data, (rows, cols)), shape=(count + links.size, variables))
    lower = np.r_[np.ones(count), np.full(links.size, -np.inf)]
    upper = np.r_[np.ones(count), np.zeros(links.size)]
    objective = np.zeros(variables)
    objective[-1] = 1.0
    result = milp(
        objective,
        constraints=LinearConstraint(matrix, lower, upper),
        integrality=np.ones(variables),
        bounds=Bounds(np.zeros(variables), np.r_[np.ones(total), np.inf]),
        options={"time_limit": time_limit},
    )
    if result.x is None:
        return None
    chosen = np.flatnonzero(result.x[:total] > 0.5)
    spine = np.empty(count, dtype=np.int64)
    core = np.full(count, -1, dtype=np.int64)
    spine[var_flow[chosen]] = var_spine[chosen]
    core[var_flow[chosen]] = np.where(cross_pod[var_flow[chosen]], var_core[chosen], -1)
    max_load = round(float(result.x[-1]))
    dual = getattr(result, "mip_dual_bound", None)
    proven = max_load if result.status == 0 else math.ceil(float(dual) - 1e-6) if dual is not None else floor
    return _ExactResult(spine, core, max_load, max(floor, min(proven, max_load)))
