"""Link loads and max-min fair rates of routed flows.

Loads are counted in flows (a sub-flow of Q queue pairs weighs 1/Q); capacities are 1.0 (line rate).
Step time = data / rate of the slowest flow. Under max-min fairness the slowest flow runs at exactly
1 / (largest link load), because the first water-filling level is set by the most loaded link; evaluation uses
that identity and `flow_rates` computes the full max-min allocation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planner._errors import InputError
from planner._model import Routing
from planner.sim._network import JobNetwork
from planner.sim._patterns import check_flows
from planner.sim._route_plan import RoutePlan
from planner.sim._routing import Routed, check_routing, prepared_steps, routed_steps

_CAPACITY_EPS = 1e-9
_BATCH_COUNT_CELLS = 1 << 21
"""Up to this many (seed, link) counters, all seeds are counted in one bincount."""
_ROUTE_CHUNK_CELLS = 1 << 21
"""ECMP choices drawn per pass: seeds x cross sub-flows (bigger arrays cost more in page faults than they save)."""


@dataclass(frozen=True, eq=False)
class _SubFlows:
    """Every (pair, nic, qp) sub-flow of one step, flattened; weight 1/Q each."""

    pair: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    nic: np.ndarray
    qp: np.ndarray
    weight: float


def _expand(network: JobNetwork, pairs: np.ndarray, qps: int) -> _SubFlows:
    count = pairs.shape[0]
    n, q = network.nics, qps
    pair = np.repeat(np.arange(count), n * q)
    nic = np.tile(np.repeat(np.arange(n), q), count)
    qp = np.tile(np.arange(q), count * n)
    return _SubFlows(pair, pairs[pair, 0], pairs[pair, 1], nic, qp, 1.0 / q)


def _nic_loads(network: JobNetwork, pairs: np.ndarray) -> np.ndarray:
    """Loads of every NIC link (up then down), the same under every routing model."""
    count = np.bincount(pairs[:, 0], minlength=network.servers), np.bincount(pairs[:, 1], minlength=network.servers)
    return np.concatenate([np.repeat(count[0], network.nics), np.repeat(count[1], network.nics)]).astype(float)


def link_loads(
    network: JobNetwork,
    flows: np.ndarray,
    routing: Routing,
    *,
    qps: int = 1,
    seed: int = 0,
    routes: RoutePlan | None = None,
) -> np.ndarray:
    """Load of every directed link (indexed as `JobNetwork` link ids) in flows: a sub-flow of Q weighs 1/Q."""
    check_routing(routing, qps)
    pairs = check_flows(network, flows)
    (routed,) = routed_steps(network, [pairs], routing, qps=qps, seeds=np.array([seed]), routes=routes)
    loads = np.zeros(network.num_links)
    nic = _nic_loads(network, pairs)
    loads[: nic.size] = nic
    loads += np.bincount(routed.seed_links(0), minlength=network.num_links) * routed.weight
    return loads


def _max_switch_loads(network: JobNetwork, routed: Routed, seeds: int) -> np.ndarray:
    """Largest switch-link load under each seed, shape (seeds,)."""
    if not routed.cross.size:
        return np.zeros(seeds)
    # Switch links follow the NIC links in the id layout; count only them. Few seeds x links: one bincount over
    # (seed, link); otherwise one seed at a time (a bincount over a range that fits in cache is faster).
    first = network.first_switch_link
    width = network.num_links - first
    largest = np.zeros(seeds)
    if seeds * width <= _BATCH_COUNT_CELLS:
        links = np.concatenate([routed.seed_links(seed) - first + seed * width for seed in range(seeds)])
        largest[:] = np.bincount(links, minlength=seeds * width).reshape(seeds, width).max(axis=1)
    else:
        for seed in range(seeds):
            largest[seed] = np.bincount(routed.seed_links(seed) - first, minlength=width).max()
    largest *= routed.weight
    return largest


def max_link_loads(
    network: JobNetwork,
    flows: np.ndarray,
    routing: Routing,
    *,
    qps: int = 1,
    seeds: Sequence[int] | np.ndarray = (0,),
    routes: RoutePlan | None = None,
) -> np.ndarray:
    """Largest link load (NIC links included) of one step under each seed, shape (len(seeds),), in one pass.

    Equals `[link_loads(network, flows, routing, qps=qps, seed=s, routes=routes).max() for s in seeds]`
    (deterministic routings repeat one value) but hashes and counts all seeds together: use it in objectives
    that score many candidate orders.
    """
    check_routing(routing, qps)
    pairs = check_flows(network, flows)
    seed_values = np.asarray(seeds, dtype=np.int64).ravel()
    if not seed_values.size:
        raise InputError("seeds: give at least one ecmp seed")
    if not pairs.size:
        return np.zeros(seed_values.size)
    if routing != "ecmp":
        (one,) = routed_steps(network, [pairs], routing, qps=qps, seeds=seed_values[:1], routes=routes)
        value = max(float(_nic_loads(network, pairs).max()), float(_max_switch_loads(network, one, 1)[0]))
        return np.full(seed_values.size, value)
    (routed,) = routed_steps(network, [pairs], routing, qps=qps, seeds=seed_values, routes=None)
    nic = float(_nic_loads(network, pairs).max())
    largest: np.ndarray = np.maximum(_max_switch_loads(network, routed, seed_values.size), nic)
    return largest


def ecmp_max_loads(
    network: JobNetwork, flows: np.ndarray, *, qps: int = 1, seeds: Sequence[int] | np.ndarray = (0,)
) -> np.ndarray:
    """Largest link load of one step under ECMP for every seed at once, shape (len(seeds),).

    `max_link_loads(network, flows, "ecmp", qps=qps, seeds=seeds)`; one vectorised pass over all seeds.
    """
    return max_link_loads(network, flows, "ecmp", qps=qps, seeds=seeds)


def step_max_loads_per_seed(
    network: JobNetwork,
    steps: list[np.ndarray],
    routing: Routing,
    *,
    qps: int,
    seeds: np.ndarray,
    routes: RoutePlan | None,
    step_ids: Sequence[int],
) -> np.ndarray:
    """(steps, seeds) largest link load of every (distinct) step, NIC links included."""
    out = np.zeros((len(steps), seeds.size))
    prepared = prepared_steps(network, steps, routing, qps=qps, routes=routes, step_ids=step_ids)
    nic = [float(_nic_loads(network, pairs).max()) if pairs.size else 0.0 for pairs in steps]
    largest = max((p.cross.size for p, _ in prepared), default=0)
    chunk = max(1, _ROUTE_CHUNK_CELLS // max(largest, 1))
    for begin in range(0, seeds.size, chunk):
        part = seeds[begin : begin + chunk]
        routed: dict[int, Routed] = {}
        for i, (one, view) in enumerate(prepared):
            whole = routed.get(id(one))
            if whole is None:
                whole = routed[id(one)] = one.route(part)
            step = whole if view is None else whole.take(view)
            out[i, begin : begin + part.size] = np.maximum(_max_switch_loads(network, step, part.size), nic[i])
    return out


def step_link_loads_per_seed(
    network: JobNetwork,
    steps: list[np.ndarray],
    routing: Routing,
    *,
    qps: int,
    seeds: np.ndarray,
    routes: RoutePlan | None,
    step_ids: Sequence[int],
) -> np.ndarray:
    """(seeds, links) load of every link under each seed, the largest over the steps, NIC links included.

    Routed exactly as `step_max_loads_per_seed` (same streams), so each row's maximum is that function's
    largest value over the steps for the same seed.
    """
    out = np.zeros((seeds.size, network.num_links))
    first = network.first_switch_link
    width = network.num_links - first
    prepared = prepared_steps(network, steps, routing, qps=qps, routes=routes, step_ids=step_ids)
    for pairs in steps:
        if pairs.size:
            nic = _nic_loads(network, pairs)
            np.maximum(out[:, : nic.size], nic[None, :], out=out[:, : nic.size])
    routed: dict[int, Routed] = {}
    for one, view in prepared:
        whole = routed.get(id(one))
        if whole is None:
            whole = routed[id(one)] = one.route(seeds)
        step = whole if view is None else whole.take(view)
        if not step.cross.size:
            continue
        for seed in range(seeds.size):
            counts = np.bincount(step.seed_links(seed) - first, minlength=width) * step.weight
            np.maximum(out[seed, first:], counts, out=out[seed, first:])
    return out


# -- max-min fair rates ------------------------------------------------------------------------------------------


def max_min_rates(paths: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Max-min fair rates of flows over links by progressive filling.

    `paths` is (flows, k) link ids padded with -1; `capacity` holds every link's capacity. All active flows
    grow together until a link saturates; its flows freeze; repeat. A flow without links gets rate inf.
    """
    flows = paths.shape[0]
    rates = np.zeros(flows)
    valid = paths >= 0
    entry_flow = np.nonzero(valid)[0]
    entry_link = paths[valid]
    remaining = capacity.astype(float).copy()
    active = np.zeros(flows, dtype=bool)
    active[entry_flow] = True
    rates[~active] = np.inf
    while active.any():
        keep = active[entry_flow]
        entry_flow, entry_link = entry_flow[keep], entry_link[keep]
        counts = np.bincount(entry_link, minlength=remaining.size)
        used = counts > 0
        increment = float((remaining[used] / counts[used]).min())
        rates[active] += increment
        remaining[used] -= increment * counts[used]
        saturated = used & (remaining <= _CAPACITY_EPS)
        active[entry_flow[saturated[entry_link]]] = False
    return rates


def flow_rates(
    network: JobNetwork,
    flows: np.ndarray,
    routing: Routing,
    *,
    qps: int = 1,
    seed: int = 0,
    routes: RoutePlan | None = None,
) -> np.ndarray:
    """Max-min fair rate (fraction of line rate) of every flow, shape (pairs, nics).

    A flow split over Q queue pairs finishes when its slowest queue pair does: its rate is Q x its smallest
    queue-pair rate.
    """
    check_routing(routing, qps)
    pairs = check_flows(network, flows)
    (routed,) = routed_steps(network, [pairs], routing, qps=qps, seeds=np.array([seed]), routes=routes)
    sub = _expand(network, pairs, round(1.0 / routed.weight))
    width = routed.links.shape[2]
    paths = np.full((sub.pair.size, 2 + width), -1, dtype=np.int64)
    paths[:, 0] = network.nic_link(sub.src, sub.nic, up=True)
    paths[:, 1] = network.nic_link(sub.dst, sub.nic, up=False)
    paths[routed.cross, 2:] = routed.links[0]
    rates = max_min_rates(paths, np.ones(network.num_links))
    q = round(1.0 / sub.weight)
    per_qp = rates.reshape(pairs.shape[0], network.nics, q)
    effective: np.ndarray = per_qp.min(axis=2) * q
    return effective
