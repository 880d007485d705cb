"""Every queue pair of a steered plan as HCCL would run it: the port it reads from the written MultiQpSrcPort.cfg,
and the spine (and core) the plan's hashed routes say it takes, for tests to follow through a hash of their own."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from planner import SteeringResult
from tests.support import hccl_multi_qp


@dataclass(frozen=True)
class FollowedQueuePair:
    """One queue pair of one step: its 5-tuple's addresses and port, the switches that choose its next hops, and
    the spine (and core, -1 inside a pod) the result says it takes."""

    src: int
    dst: int
    sport: int
    leaf_switch: str
    spine: int
    spine_switch: str | None
    """The spine that chooses its core (cross-pod queue pairs of 3-tier fabrics), else None."""
    core: int
    choices: int
    """Equal-cost spines of its tier-1 switch towards its destination."""
    core_choices: int


def followed_queue_pairs(result: SteeringResult) -> Iterator[FollowedQueuePair]:
    """Each cross-leaf queue pair of every step of `result.routes`, its port read by HCCL's rules from the file."""
    assert result.routes is not None
    cache = hccl_multi_qp.load(result.config_text())
    routes, net = result.routes, result.network
    rail = net.layout == "rail"
    for step in routes.steps:
        found = routes.assignment_for(step)
        assert found is not None
        spines, cores = found
        rows, nics = np.nonzero(spines >= 0)
        for row, nic in zip(rows.tolist(), nics.tolist(), strict=True):
            pair, qp = divmod(row, routes.qps)
            src, dst = int(step[pair, 0]), int(step[pair, 1])
            src_ip, dst_ip = result.addresses[src][nic], result.addresses[dst][nic]
            ports = hccl_multi_qp.source_ports(cache, src_ip, dst_ip)
            assert len(ports) == routes.qps, "HCCL gets one port per planned queue pair"
            leaf_a, leaf_b = net.server_leaf[src], net.server_leaf[dst]
            leaf = net.leaf_names[leaf_a] + (f"/rail-{nic}" if rail else "")
            spine, core = int(spines[row, nic]), int(cores[row, nic])
            pod = net.pod_names[net.server_pod[src]] if net.pod_names else ""
            spine_switch = None
            if core >= 0:
                spine_switch = f"{pod}/rail-{nic}/spine-{spine}" if rail else f"{pod}/spine-{spine}"
            pods = (net.server_pod[src], net.server_pod[dst])
            yield FollowedQueuePair(
                src=int(ipaddress.IPv4Address(src_ip)),
                dst=int(ipaddress.IPv4Address(dst_ip)),
                sport=ports[qp],
                leaf_switch=leaf,
                spine=spine,
                spine_switch=spine_switch,
                core=core,
                choices=int(min(net.leaf_uplinks[leaf_a], net.leaf_uplinks[leaf_b])),
                core_choices=int(min(net.pod_uplinks[pods[0]], net.pod_uplinks[pods[1]])) if core >= 0 else 0,
            )
