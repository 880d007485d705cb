"""A route plan: the pinned spine (and core) of every cross-leaf flow of some steps, and its `routes.json` form."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np

from planner.sim._network import JobNetwork
from planner.sim._patterns import lambda_star


class RouteEntry(TypedDict):
    """One pinned cross-leaf flow of `routes.json`."""

    step: int
    src_node: str
    src_pod: str | None
    dst_node: str
    dst_pod: str | None
    nic: int
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
    max_load: int
    bound: int
    steps: int
    flows: list[RouteEntry]


@dataclass(frozen=True, eq=False)
class RoutePlan:
    """Pinned routes of every cross-leaf flow of some flow steps, with the max link load they give."""

    network: JobNetwork
    steps: tuple[np.ndarray, ...]
    """(pairs, 2) server flows of each step, as passed to `pin_routes`."""
    spines: tuple[np.ndarray, ...]
    """(pairs, nics) spine of each flow of each step; -1 for flows that stay on their tier-1 switch."""
    cores: tuple[np.ndarray, ...]
    """(pairs, nics) core uplink of each cross-pod flow; -1 otherwise."""
    max_load: int
    """Largest link load (in flows) over all steps with these routes."""
    bound: int
    """The largest per-step proven lower bound (see `step_bounds`); max_load == bound when pinning is optimal."""
    step_bounds: tuple[int, ...] = ()
    """Proven lower bound of each step's max link load under any pinning: λ* (`lambda_star`), raised to the
    exact optimum for steps where λ* is not attainable (oversubscribed spines, unequal uplink counts)."""
    step_loads: tuple[int, ...] = ()
    """Max link load of each step with these routes."""

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

    def bound_for(self, flows: np.ndarray) -> int | None:
        """Proven lower bound of the max link load of a step with exactly these flows, or None if not covered."""
        index = self._index_of(flows)
        if index is None or index >= len(self.step_bounds):
            return None
        return self.step_bounds[index]

    def merged(self, other: RoutePlan) -> RoutePlan:
        """This plan and `other` (same network) as one plan."""
        return RoutePlan(
            network=self.network,
            steps=self.steps + other.steps,
            spines=self.spines + other.spines,
            cores=self.cores + other.cores,
            max_load=max(self.max_load, other.max_load),
            bound=max(self.bound, other.bound),
            step_bounds=self.step_bounds + other.step_bounds,
            step_loads=self.step_loads + other.step_loads,
        )

    def to_json(self, pod_names: Sequence[str] | None = None) -> RoutesFile:
        """The `routes.json` content: every cross-leaf flow with its step, endpoints, NIC, spine and core.

        `pod_names[i]` names server i's pod (Placement order); without it the pod fields are None.
        """
        net = self.network
        flows: list[RouteEntry] = []
        for index, (step, spines) in enumerate(zip(self.steps, self.spines, strict=True)):
            cores = self.cores[index]
            pair_ids, nics = np.nonzero(spines >= 0)
            for p, d in zip(pair_ids.tolist(), nics.tolist(), strict=True):
                src, dst = int(step[p, 0]), int(step[p, 1])
                core = int(cores[p, d])
                flows.append(
                    RouteEntry(
                        step=index,
                        src_node=net.nodes[src],
                        src_pod=pod_names[src] if pod_names is not None else None,
                        dst_node=net.nodes[dst],
                        dst_pod=pod_names[dst] if pod_names is not None else None,
                        nic=d,
                        src_leaf=net.leaf_names[net.server_leaf[src]],
                        dst_leaf=net.leaf_names[net.server_leaf[dst]],
                        spine=int(spines[p, d]),
                        plane=d if net.layout == "rail" else 0,
                        core=core if core >= 0 else None,
                    )
                )
        return RoutesFile(
            version="1",
            layout=net.layout,
            switch_tiers=net.switch_tiers,
            max_load=self.max_load,
            bound=self.bound,
            steps=len(self.steps),
            flows=flows,
        )

    def json_chunks(self, pod_names: Sequence[str] | None = None) -> Iterator[str]:
        """`json.dumps(self.to_json(pod_names), indent=2)` in pieces of at most one step each, for a file.

        The same text, written without holding it or its flow list whole: at 4,096 servers, halving-doubling
        with pinned routes has about 400,000 cross-leaf flows, 200 MB of text and over 1 GB as one list of dicts.
        """
        net = self.network
        dump = json.dumps
        nodes = [dump(name) for name in net.nodes]
        pods = [dump(name) for name in pod_names] if pod_names is not None else ["null"] * len(nodes)
        leaves = [dump(net.leaf_names[leaf]) for leaf in net.server_leaf.tolist()]
        rail = net.layout == "rail"
        head = {
            "version": "1",
            "layout": net.layout,
            "switch_tiers": net.switch_tiers,
            "max_load": self.max_load,
            "bound": self.bound,
            "steps": len(self.steps),
        }
        yield "{\n" + "".join(f"  {dump(key)}: {dump(value)},\n" for key, value in head.items()) + '  "flows": ['
        first = True
        for index, (step, spines) in enumerate(zip(self.steps, self.spines, strict=True)):
            cores = self.cores[index]
            pair_ids, nics = np.nonzero(spines >= 0)
            if not pair_ids.size:
                continue
            sources = step[pair_ids, 0].tolist()
            targets = step[pair_ids, 1].tolist()
            spine_of = spines[pair_ids, nics].tolist()
            core_of = cores[pair_ids, nics].tolist()
            parts: list[str] = []
            for src, dst, d, spine, core in zip(sources, targets, nics.tolist(), spine_of, core_of, strict=True):
                parts.append(
                    ("\n" if first else ",\n") + f'    {{\n      "step": {index},\n      "src_node": {nodes[src]},\n'
                    f'      "src_pod": {pods[src]},\n'
                    f'      "dst_node": {nodes[dst]},\n      "dst_pod": {pods[dst]},\n      "nic": {d},\n'
                    f'      "src_leaf": {leaves[src]},\n      "dst_leaf": {leaves[dst]},\n      "spine": {spine},\n'
                    f'      "plane": {d if rail else 0},\n      "core": {core if core >= 0 else "null"}\n    }}'
                )
                first = False
            yield "".join(parts)
        yield "]\n}" if first else "\n  ]\n}"

    def to_dict(self) -> dict[str, Any]:
        """Summary for reports (without the per-flow list)."""
        return {
            "max_load": self.max_load,
            "bound": self.bound,
            "lambda_star": max((lambda_star(self.network, s) for s in self.steps), default=1),
            "steps": len(self.steps),
        }
