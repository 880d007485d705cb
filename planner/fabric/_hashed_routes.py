"""The routes a set of source ports gives: the spine and core each queue pair's hash takes it to.

The other direction of the port search (`planner.fabric._port_search`): from the ports written to MultiQpSrcPort.cfg
and the hash model, the spine and core of every cross-leaf queue pair, so the simulator measures what a written file
does, not what was meant.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from planner._errors import InputError
from planner._hash_model import HashModel, SwitchTier
from planner.fabric._port_search import CompiledModel, SourcePorts, spine_names, tier1_names
from planner.sim._network import JobNetwork
from planner.sim._pinning import routes_from_assignment
from planner.sim._route_plan import RoutePlan


def hashed_routes(
    network: JobNetwork,
    steps: Sequence[np.ndarray],
    ports: SourcePorts,
    addresses: np.ndarray,
    model: HashModel | CompiledModel,
) -> RoutePlan:
    """The spine and core every cross-leaf queue pair of `steps` takes with these ports under the hash model.

    Raises InputError naming a connection without a line, or a switch whose next hop the model cannot tell.
    """
    qps = ports.qps
    hashes = model if isinstance(model, CompiledModel) else CompiledModel(model)
    spines_out: list[np.ndarray] = []
    cores_out: list[np.ndarray] = []
    for step in steps:
        pairs = np.asarray(step, dtype=np.int64)
        spines = np.full((pairs.shape[0] * qps, network.nics), -1, dtype=np.int64)
        cores = np.full_like(spines, -1)
        crossing = network.server_leaf[pairs[:, 0]] != network.server_leaf[pairs[:, 1]]
        pair = np.repeat(np.flatnonzero(crossing), network.nics)
        nic = np.tile(np.arange(network.nics), int(crossing.sum()))
        src, dst = pairs[pair, 0], pairs[pair, 1]
        row = ports.rows(src, dst, nic, network.servers, network.nics)
        if (row < 0).any():
            i = int(np.flatnonzero(row < 0)[0])
            raise InputError(
                f"source ports: no line for {network.nodes[src[i]]} -> {network.nodes[dst[i]]} on NIC {nic[i]}; "
                "every cross-leaf connection of the plan needs one"
            )
        leaf_choices = np.minimum(
            network.leaf_uplinks[network.server_leaf[src]], network.leaf_uplinks[network.server_leaf[dst]]
        )
        up = np.flatnonzero(network.server_pod[src] != network.server_pod[dst])
        pod_a, pod_b = network.server_pod[src[up]], network.server_pod[dst[up]]
        core_choices = np.minimum(network.pod_uplinks[pod_a], network.pod_uplinks[pod_b])
        src_ip, dst_ip = addresses[src, nic], addresses[dst, nic]
        leaf_names = tier1_names(network, src, nic)
        for q in range(qps):
            sport = ports.ports[row, q]
            spine = _next_hops(hashes, leaf_names, "leaf", (src_ip, dst_ip, sport), leaf_choices)
            spines[pair * qps + q, nic] = spine
            if network.listed_tiers == 2 and up.size:
                names = spine_names(network, src[up], nic[up], spine[up])
                core = _next_hops(hashes, names, "spine", (src_ip[up], dst_ip[up], sport[up]), core_choices)
                cores[pair[up] * qps + q, nic[up]] = core
        spines_out.append(spines)
        cores_out.append(cores)
    return routes_from_assignment(network, steps, spines_out, cores_out, qps)


def _next_hops(
    hashes: CompiledModel,
    names: list[str],
    tier: SwitchTier,
    tuples: tuple[np.ndarray, np.ndarray, np.ndarray],
    choices: np.ndarray,
) -> np.ndarray:
    """Next hop of each (src_ip, dst_ip, sport) at switch `names[i]`; InputError where the model cannot tell."""
    src_ip, dst_ip, sport = tuples
    out = np.full(len(names), -1, dtype=np.int64)
    by_name: dict[str, list[int]] = {}
    for index, name in enumerate(names):
        by_name.setdefault(name, []).append(index)
    for name, members in by_name.items():
        compiled = hashes.get(name, tier)
        if compiled is None:
            raise InputError(f"hash model: no hash for switch {name} ({tier} tier); calibrate it or declare its tier")
        rows = np.asarray(members, dtype=np.int64)
        out[rows] = compiled.evaluate(
            src_ip[rows].astype(np.uint64), dst_ip[rows].astype(np.uint64), sport[rows], choices[rows]
        )
    unknown = np.flatnonzero(out < 0)
    if unknown.size:
        i = int(unknown[0])
        raise InputError(
            f"hash model: switch {names[i]} cannot tell the next hop of {unknown.size} queue pair(s) (addresses "
            "outside its calibrated span, or a hash value no sample showed); calibrate it with more samples"
        )
    return out


__all__ = ["hashed_routes"]
