"""Queue pairs no source port takes onto their planned route: moved to the least loaded route their ports reach.

Two switches' hashes can leave a source port too few free bits for some pairs of next hops (a spine and a core whose
parity checks depend on the same port bits): the port search (`planner.fabric._port_search`) then finds no port for
that queue pair. `reroute` gives each such queue pair the port whose route adds least to the busiest link of its
steps; `reachable_spines` tells pinning which spines some port reaches.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from planner._hash_model import HashModel
from planner.fabric._port_search import (
    DEFAULT_PORT_RANGE,
    REROUTE_PORTS,
    CompiledModel,
    PortSearch,
    QueuePairTargets,
    candidate_stride,
    check_port_range,
    connection_key,
    port_offsets,
    spine_names,
    tier1_names,
)
from planner.sim._network import JobNetwork
from planner.sim._route_plan import RoutePlan


@dataclass(frozen=True, eq=False)
class Rerouted:
    """Queue pairs moved to the least loaded route their ports can reach, where no port reaches the planned one."""

    ports: np.ndarray
    """The port of every queue pair of the targets (the search's, and the rerouted ones')."""
    targets: QueuePairTargets
    """The targets with the rerouted queue pairs' new spine and core."""
    moved: int
    problems: tuple[str, ...] = ()
    """Queue pairs with no route at all (the model cannot tell any next hop for them), in words."""


def reroute(
    network: JobNetwork,
    routes: RoutePlan,
    targets: QueuePairTargets,
    search: PortSearch,
    *,
    addresses: np.ndarray,
    model: HashModel | CompiledModel,
    port_range: tuple[int, int] = DEFAULT_PORT_RANGE,
    background: np.ndarray | None = None,
) -> Rerouted:
    """Give every unreached queue pair the port whose route adds least to the busiest link of its steps.

    Two switches' hashes can leave a source port too few free bits for some pairs of next hops (a spine and a
    core whose parity checks depend on the same port bits): no port takes that queue pair onto its planned route.
    Each such queue pair, one after another, tries every port of the range: the distinct (spine, core) routes
    they reach are scored by the largest link load they would make in the steps holding the connection, with
    every other queue pair on its route; the lowest wins (ties: the planned spine, then the least loaded).
    `background` (flows per link id: other jobs on a shared fabric) counts on every link too.
    """
    low, high = check_port_range(port_range)
    ports = search.ports.copy()
    spine, core = targets.spine.copy(), targets.core.copy()
    if not search.unreached.size:
        return Rerouted(ports, targets, 0)
    q, servers, nics = routes.qps, network.servers, network.nics
    keys = connection_key(targets.src, targets.dst, targets.nic, servers, nics)
    row_of = keys * q + targets.qp
    order = np.argsort(row_of)
    links_of = _RouteLinks(network, targets)
    unreached = set(search.unreached.tolist())
    # per distinct step: its queue pairs (target rows) and the link loads of the reached ones
    steps: list[np.ndarray] = []
    seen: set[bytes] = set()
    for step, spines in zip(routes.steps, routes.spines, strict=True):
        if step.tobytes() in seen:
            continue
        seen.add(step.tobytes())
        rows, nic = np.nonzero(spines >= 0)
        pair = rows // q
        wanted = connection_key(step[pair, 0], step[pair, 1], nic, servers, nics) * q + rows % q
        steps.append(order[np.searchsorted(row_of, wanted, sorter=order)])
    loads = np.zeros((len(steps), network.num_links + 1))  # in queue pairs, + the spare id
    if background is not None:
        loads[:, :-1] += np.asarray(background, dtype=np.float64)[None, :] * q
    for k, members in enumerate(steps):
        reached = members[[m not in unreached for m in members.tolist()]]
        np.add.at(loads[k], links_of(reached, spine[reached], core[reached]).ravel(), 1)
    loads[:, -1] = 0
    steps_of: dict[int, list[int]] = {}
    for k, members in enumerate(steps):
        for member in set(members.tolist()) & unreached:
            steps_of.setdefault(member, []).append(k)
    hashes = model if isinstance(model, CompiledModel) else CompiledModel(model)
    span = high - low + 1
    # Enough ports that every route a port can reach is offered by several (U x V routes, about span / (U x V)
    # ports each), far fewer than the whole range: a few milliseconds per queue pair.
    sample = min(span, REROUTE_PORTS)
    stride = candidate_stride(span)
    problems: list[str] = []
    for row in search.unreached.tolist():
        candidates = low + (int(port_offsets(keys[row : row + 1], row, span)[0]) + np.arange(sample) * stride) % span
        taken = ports[(keys == keys[row]) & (ports >= 0)]
        usable = candidates[~np.isin(candidates, taken)]
        hops = _reachable(network, hashes, targets, row, ports=usable, addresses=addresses)
        if hops is None:
            problems.append(_unreached(network, targets, row, port_range))
            continue
        reach_spine, reach_core = hops
        known = reach_spine >= 0
        # one integer per (spine, core) route (core -1 inside a pod): a 1-D unique, not a row-wise sort
        width = int(reach_core.max(initial=0)) + 2
        codes, first = np.unique(reach_spine[known] * width + reach_core[known] + 1, return_index=True)
        routes_found = np.stack([codes // width, codes % width - 1], axis=1)
        if not routes_found.size:
            problems.append(_unreached(network, targets, row, port_range))
            continue
        member = np.full(routes_found.shape[0], row, dtype=np.int64)
        links = links_of(member, routes_found[:, 0], routes_found[:, 1])
        mine = steps_of.get(row, [])
        worst = np.max([loads[k][links].max(axis=1) for k in mine], axis=0) + 1 if mine else np.ones(len(links))
        total = np.sum([loads[k][links].sum(axis=1) for k in mine], axis=0) if mine else np.zeros(len(links))
        planned = routes_found[:, 0] != targets.spine[row]
        best = int(np.lexsort((total, planned, worst))[0])
        ports[row] = int(usable[known][first[best]])
        spine[row], core[row] = (int(v) for v in routes_found[best])
        for k in mine:
            np.add.at(loads[k], links[best], 1)
            loads[k, -1] = 0
    rerouted = replace(targets, spine=spine, core=core)
    moved = len(search.unreached) - len(problems)
    return Rerouted(ports, rerouted, moved, tuple(problems))


def reachable_spines(
    network: JobNetwork,
    targets: QueuePairTargets,
    rows: np.ndarray,
    *,
    addresses: np.ndarray,
    model: HashModel | CompiledModel,
    port_range: tuple[int, int] = DEFAULT_PORT_RANGE,
) -> np.ndarray:
    """(rows, max uplinks) mask of the spines some source port of the range takes each queue pair of `rows` to
    (with a core the model can tell, across pods): what pinning may give the queue pairs the search left unreached."""
    low, high = check_port_range(port_range)
    span = high - low + 1
    hashes = model if isinstance(model, CompiledModel) else CompiledModel(model)
    keys = connection_key(targets.src, targets.dst, targets.nic, network.servers, network.nics)
    stride = candidate_stride(span)
    out = np.zeros((rows.size, max(network.max_uplinks, 1)), dtype=bool)
    for at, row in enumerate(rows.tolist()):
        start = int(port_offsets(keys[row : row + 1], row, span)[0])
        ports = low + (start + np.arange(min(span, REROUTE_PORTS)) * stride) % span
        hops = _reachable(network, hashes, targets, row, ports=ports, addresses=addresses)
        if hops is not None:
            spines = hops[0]
            out[at, np.unique(spines[spines >= 0])] = True
    return out


class _RouteLinks:
    """Switch link ids a queue pair crosses on route (spine, core): up and down at tier 1, and across pods the
    spine-core links up and down (-1 padding where it stays in its pod)."""

    def __init__(self, network: JobNetwork, targets: QueuePairTargets) -> None:
        self.network = network
        self.targets = targets

    def __call__(self, rows: np.ndarray, spine: np.ndarray, core: np.ndarray) -> np.ndarray:
        net, t = self.network, self.targets
        src, dst, nic = t.src[rows], t.dst[rows], t.nic[rows]
        up = net.leaf_link(net.tier1_switch(src, nic), spine, up=True)
        down = net.leaf_link(net.tier1_switch(dst, nic), spine, up=False)
        if net.listed_tiers != 2:
            return np.stack([up, down], axis=1)
        plane = nic if net.layout == "rail" else np.zeros_like(nic)
        crossing = core >= 0
        c = np.maximum(core, 0)
        core_up = net.spine_link(net.server_pod[src], plane, spine, c, up=True)
        core_down = net.spine_link(net.server_pod[dst], plane, spine, c, up=False)
        # a route inside one pod pads with the spare id num_links, a link no route uses (always empty)
        spare = net.num_links
        return np.stack([up, down, np.where(crossing, core_up, spare), np.where(crossing, core_down, spare)], axis=1)


def _reachable(
    network: JobNetwork,
    hashes: CompiledModel,
    targets: QueuePairTargets,
    row: int,
    *,
    ports: np.ndarray,
    addresses: np.ndarray,
) -> tuple[np.ndarray, np.ndarray] | None:
    """(spine, core) each port takes queue pair `row` to (-1 where the model cannot tell); None without a model."""
    src, dst, nic = int(targets.src[row]), int(targets.dst[row]), int(targets.nic[row])
    src_ip = np.full(ports.size, addresses[src, nic], dtype=np.uint64)
    dst_ip = np.full(ports.size, addresses[dst, nic], dtype=np.uint64)
    leaf_a, leaf_b = network.server_leaf[src], network.server_leaf[dst]
    leaf = hashes.get(tier1_names(network, targets.src[row : row + 1], targets.nic[row : row + 1])[0], "leaf")
    if leaf is None:
        return None
    choices = int(min(network.leaf_uplinks[leaf_a], network.leaf_uplinks[leaf_b]))
    spine = leaf.hops_at(leaf.prepare(src_ip[:1], dst_ip[:1]), ports[None, :], choices)[0]
    core = np.full(ports.size, -1, dtype=np.int64)
    pod_a, pod_b = network.server_pod[src], network.server_pod[dst]
    if network.listed_tiers != 2 or pod_a == pod_b:
        return spine, core
    cores = int(min(network.pod_uplinks[pod_a], network.pod_uplinks[pod_b]))
    for j in np.unique(spine[spine >= 0]).tolist():
        name = spine_names(network, targets.src[row : row + 1], targets.nic[row : row + 1], np.array([j]))[0]
        upper = hashes.get(name, "spine")
        at = spine == j
        if upper is None:
            spine[at] = -1
            continue
        core[at] = upper.hops_at(upper.prepare(src_ip[:1], dst_ip[:1]), ports[at][None, :], cores)[0]
        spine[at & (core < 0)] = -1
    return spine, core


def _unreached(network: JobNetwork, targets: QueuePairTargets, row: int, port_range: tuple[int, int]) -> str:
    name = tier1_names(network, targets.src[row : row + 1], targets.nic[row : row + 1])[0]
    return (
        f"a queue pair from {name} finds no source port in {port_range[0]}-{port_range[1]} whose next hop the hash "
        "model can tell (addresses outside the span its switches were calibrated on, or a learned table that "
        "never saw the value)"
    )


__all__ = ["Rerouted", "reachable_spines", "reroute"]
