"""A route plan: the pinned spine (and core) of every cross-leaf flow of some steps, and its `routes.json` form."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np

from planner.sim._network import JobNetwork
from planner.sim._patterns import lambda_star

ROUTES_VERSION = "2"
"""`routes.json` format version: 2 has one entry per queue pair (qp, src_ip, dst_ip, sport)."""


class RouteEntry(TypedDict):
    """One pinned cross-leaf queue pair of `routes.json`."""

    step: int
    src_node: str
    src_pod: str | None
    dst_node: str
    dst_pod: str | None
    nic: int
    qp: int
    """Queue pair of the flow (0 .. qps-1), each carrying 1/qps of it."""
    src_ip: str | None
    """IP of the source NIC (the rank table's device_ip), when known."""
    dst_ip: str | None
    sport: int | None
    """UDP source port of the queue pair (MultiQpSrcPort.cfg), when ringroute chose one."""
    src_leaf: str
    dst_leaf: str
    spine: int
    """Uplink index j of the source tier-1 switch = spine j of its plane (of its pod in 3 tiers)."""
    plane: int
    """Rail (NIC index) in the rail layout; 0 in the ToR layout."""
    core: int | None
    """Core uplink c of spine j for cross-pod flows (3 tiers); None otherwise."""


class RoutesFile(TypedDict):
    """`routes.json`: the route plan for a fabric controller or per-QP UDP source-port steering."""

    version: str
    layout: str
    switch_tiers: int
    qps: int
    max_load: float
    bound: float
    steps: int
    flows: list[RouteEntry]


@dataclass(frozen=True, eq=False)
class RoutePlan:
    """Pinned routes of every cross-leaf flow of some flow steps, with the max link load they give."""

    network: JobNetwork
    steps: tuple[np.ndarray, ...]
    """(pairs, 2) server flows of each step, as passed to `pin_routes`."""
    spines: tuple[np.ndarray, ...]
    """(pairs x qps, nics) spine of each queue pair of each flow of each step (row pair x qps + qp); -1 for flows
    that stay on their tier-1 switch."""
    cores: tuple[np.ndarray, ...]
    """(pairs x qps, nics) core uplink of each cross-pod queue pair; -1 otherwise."""
    max_load: float
    """Largest link load (in flows) over all steps with these routes."""
    bound: float
    """The largest per-step proven lower bound (see `step_bounds`); max_load == bound when pinning is optimal."""
    step_bounds: tuple[float, ...] = ()
    """Proven lower bound of each step's max link load under any pinning: λ* (`lambda_star`), raised to the
    exact optimum for steps where λ* is not attainable (oversubscribed spines, unequal uplink counts)."""
    step_loads: tuple[float, ...] = ()
    """Max link load of each step with these routes."""
    qps: int = 1
    """Queue pairs per flow, each pinned on its own and carrying 1/qps of the flow."""

    def _index_of(self, flows: np.ndarray) -> int | None:
        pairs = np.asarray(flows, dtype=np.int64)
        for index, step in enumerate(self.steps):
            if step.shape == pairs.shape and np.array_equal(step, pairs):
                return index
        return None

    def assignment_for(self, flows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """(spines, cores) of a step with exactly these flows, or None when the plan does not cover it."""
        index = self._index_of(flows)
        return None if index is None else (self.spines[index], self.cores[index])

    def bound_for(self, flows: np.ndarray) -> float | None:
        """Proven lower bound of the max link load of a step with exactly these flows, or None if not covered."""
        index = self._index_of(flows)
        if index is None or index >= len(self.step_bounds):
            return None
        return self.step_bounds[index]

    def merged(self, other: RoutePlan) -> RoutePlan:
        """This plan and `other` (same network and queue pairs) as one plan."""
        if other.qps != self.qps:
            raise ValueError(f"route plans of {self.qps} and {other.qps} queue pairs per flow cannot merge")
        return RoutePlan(
            network=self.network,
            steps=self.steps + other.steps,
            spines=self.spines + other.spines,
            cores=self.cores + other.cores,
            max_load=max(self.max_load, other.max_load),
            bound=max(self.bound, other.bound),
            step_bounds=self.step_bounds + other.step_bounds,
            step_loads=self.step_loads + other.step_loads,
            qps=self.qps,
        )

    def _step_columns(
        self,
        index: int,
        step_ports: Sequence[np.ndarray] | None,
    ) -> tuple[list[int], ...]:
        """Columns of the routed queue pairs of step `index`: src, dst, nic, qp, spine, core, sport (-1: none)."""
        q = self.qps
        spines, cores, step = self.spines[index], self.cores[index], self.steps[index]
        rows, nics = np.nonzero(spines >= 0)
        pair = rows // q
        ports = step_ports[index][rows, nics] if step_ports is not None else np.full(rows.size, -1)
        return (
            step[pair, 0].tolist(),
            step[pair, 1].tolist(),
            nics.tolist(),
            (rows % q).tolist(),
            spines[rows, nics].tolist(),
            cores[rows, nics].tolist(),
            np.asarray(ports).tolist(),
        )

    def _head(self) -> dict[str, Any]:
        net = self.network
        return {
            "version": ROUTES_VERSION,
            "layout": net.layout,
            "switch_tiers": net.switch_tiers,
            "qps": self.qps,
            "max_load": self.max_load,
            "bound": self.bound,
            "steps": len(self.steps),
        }

    def to_json(
        self,
        pod_names: Sequence[str] | None = None,
        *,
        addresses: Sequence[Sequence[str]] | None = None,
        step_ports: Sequence[np.ndarray] | None = None,
    ) -> RoutesFile:
        """The `routes.json` content: every cross-leaf queue pair with its step, endpoints, NIC, spine and core.

        `pod_names[i]` names server i's pod (Placement order), `addresses[i][d]` the IP of its NIC d and
        `step_ports[k][pair x qps + qp, nic]` the UDP source port of each queue pair of step k (-1: none); the
        fields they fill are None without them.
        """
        net = self.network
        flows: list[RouteEntry] = []
        for index in range(len(self.steps)):
            columns = self._step_columns(index, step_ports)
            for src, dst, d, qp, spine, core, port in zip(*columns, strict=True):
                flows.append(
                    RouteEntry(
                        step=index,
                        src_node=net.nodes[src],
                        src_pod=pod_names[src] if pod_names is not None else None,
                        dst_node=net.nodes[dst],
                        dst_pod=pod_names[dst] if pod_names is not None else None,
                        nic=d,
                        qp=qp,
                        src_ip=addresses[src][d] if addresses is not None else None,
                        dst_ip=addresses[dst][d] if addresses is not None else None,
                        sport=port if port >= 0 else None,
                        src_leaf=net.leaf_names[net.server_leaf[src]],
                        dst_leaf=net.leaf_names[net.server_leaf[dst]],
                        spine=spine,
                        plane=d if net.layout == "rail" else 0,
                        core=core if core >= 0 else None,
                    )
                )
        head = self._head()
        return RoutesFile(
            version=head["version"],
            layout=net.layout,
            switch_tiers=net.switch_tiers,
            qps=self.qps,
            max_load=self.max_load,
            bound=self.bound,
            steps=len(self.steps),
            flows=flows,
        )

    def json_chunks(
        self,
        pod_names: Sequence[str] | None = None,
        *,
        addresses: Sequence[Sequence[str]] | None = None,
        step_ports: Sequence[np.ndarray] | None = None,
    ) -> Iterator[str]:
        """`json.dumps(self.to_json(...), indent=2)` in pieces of at most one step each, for a file.

        The same text, written without holding it or its flow list whole: at 4,096 servers, halving-doubling
        with pinned routes has about 400,000 cross-leaf flows, 200 MB of text and over 1 GB as one list of dicts.
        """
        net = self.network
        dump = json.dumps
        nodes = [dump(name) for name in net.nodes]
        pods = [dump(name) for name in pod_names] if pod_names is not None else ["null"] * len(nodes)
        ips = [[dump(ip) for ip in row] for row in addresses] if addresses is not None else None
        leaves = [dump(net.leaf_names[leaf]) for leaf in net.server_leaf.tolist()]
        rail = net.layout == "rail"
        yield (
            "{\n" + "".join(f"  {dump(key)}: {dump(value)},\n" for key, value in self._head().items()) + '  "flows": ['
        )
        first = True
        for index in range(len(self.steps)):
            columns = self._step_columns(index, step_ports)
            parts: list[str] = []
            for src, dst, d, qp, spine, core, port in zip(*columns, strict=True):
                src_ip = ips[src][d] if ips is not None else "null"
                dst_ip = ips[dst][d] if ips is not None else "null"
                parts.append(
                    ("\n" if first else ",\n") + f'    {{\n      "step": {index},\n      "src_node": {nodes[src]},\n'
                    f'      "src_pod": {pods[src]},\n'
                    f'      "dst_node": {nodes[dst]},\n      "dst_pod": {pods[dst]},\n      "nic": {d},\n'
                    f'      "qp": {qp},\n      "src_ip": {src_ip},\n      "dst_ip": {dst_ip},\n'
                    f'      "sport": {port if port >= 0 else "null"},\n'
                    f'      "src_leaf": {leaves[src]},\n      "dst_leaf": {leaves[dst]},\n      "spine": {spine},\n'
                    f'      "plane": {d if rail else 0},\n      "core": {core if core >= 0 else "null"}\n    }}'
                )
                first = False
            if parts:
                yield "".join(parts)
        yield "]\n}" if first else "\n  ]\n}"

    def to_dict(self) -> dict[str, Any]:
        """Summary for reports (without the per-flow list)."""
        return {
            "max_load": self.max_load,
            "bound": self.bound,
            "lambda_star": max((lambda_star(self.network, s, self.qps) for s in self.steps), default=1),
            "qps": self.qps,
            "steps": len(self.steps),
        }
