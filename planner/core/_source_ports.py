"""`steer_source_ports`: the per-QP UDP source ports (MultiQpSrcPort.cfg) that deliver a plan to an ECMP fabric.

Three outcomes, each with what it predicts:
- `steered`: a hash model (`HashModel`) knows every switch the pinned routes' flows choose a next hop at, and a
  port was found for every queue pair of every cross-leaf connection that takes it onto its planned spine (and
  core). The prediction is the simulator's, on the paths the model gives for the written ports: it equals the
  pinned plan's loads exactly when every queue pair is on plan (`off_plan` counts those that are not).
- `spread`: no model (or steering fell back), more than one queue pair per connection: distinct ports spread over
  the range per cross-leaf connection. ECMP still hashes them, so the prediction is an expectation over hash seeds
  (ECMP with Q queue pairs), reported beside ECMP with one queue pair: what spreading gains, not pinned loads.
- `none`: nothing to write (one queue pair and no model, or a fallback with one queue pair).

A fallback (a switch the model does not know, a queue pair no port steers, the line limit, the time limit) says
why in `message` and sets `fallback`; it is never an exception. Bad arguments raise InputError.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from planner._errors import InputError
from planner._hash_model import HashModel
from planner._model import Placement, Topology
from planner.core._result import PlanResult
from planner.fabric._hashed_routes import hashed_routes
from planner.fabric._port_search import (
    DEFAULT_PORT_RANGE,
    CompiledModel,
    PortSearch,
    QueuePairTargets,
    SourcePorts,
    SwitchUse,
    device_addresses,
    queue_pair_targets,
    search_ports,
    source_ports,
)
from planner.fabric._reroute import reachable_spines, reroute
from planner.io._qp_ports import MAX_CONFIG_LINES, MAX_PORTS_PER_LINE, QpPortLine, render_qp_port_config
from planner.sim._evaluate import OrderEvaluation, evaluate_order
from planner.sim._fabric_links import LinkBackground
from planner.sim._network import JobNetwork, job_network
from planner.sim._patterns import pattern_steps
from planner.sim._pinning import pin_routes
from planner.sim._route_plan import RoutePlan
from planner.sim._summary import format_fraction, format_load

SteeringMode = Literal["steered", "spread", "none"]
HEADER_LINES = 2
"""Comment lines at the top of a written MultiQpSrcPort.cfg (they count towards HCCL's line limit)."""
SPREAD_SEEDS = 64
"""ECMP seeds the expectation of spread ports averages over at most (fewer for big jobs, as plan reports)."""
SPREAD_SUBFLOW_SEEDS = 250_000


@dataclass(frozen=True, eq=False)
class SteeringResult:
    """Outcome of `steer_source_ports`, in the spirit of scipy's result objects."""

    mode: SteeringMode
    """What the ports do: `steered` onto planned spines, `spread` for ECMP entropy, or `none` written."""
    message: str
    """One sentence: what was written and what it predicts, or why it fell back."""
    fallback: str | None
    """Why steering was asked for (a model given) but not delivered; None otherwise."""
    qps: int
    ports: SourcePorts | None
    """The ports of every line (None for `none`)."""
    addresses: tuple[tuple[str, ...], ...]
    """IPv4 address of NIC d of server i (`Placement.servers` order): the rank table's device_ip."""
    network: JobNetwork
    predicted: OrderEvaluation | None = None
    """steered: the pattern's collectives on the paths the model gives these ports; spread: ECMP with qps queue
    pairs (mean over seeds)."""
    baseline: OrderEvaluation | None = None
    """spread: ECMP with one queue pair, what the spread ports are compared with; steered: the pinned plan."""
    routes: RoutePlan | None = None
    """steered: the route plan the model gives these ports (queue-pair level)."""
    off_plan: int = 0
    """steered: queue pairs the model sends elsewhere than their planned spine or core: those no source port takes
    onto the planned route (two switches' hashes leave the port too few free bits), moved to the least loaded
    route a port reaches. The prediction includes them."""
    conflicts: int = 0
    """Queue pairs of connections shared by steps pinned differently (they keep their first step's routes)."""
    switches: tuple[SwitchUse, ...] = ()
    """Switches whose hash the steering relies on, with where their model came from."""
    wall_time_s: float = 0.0

    @property
    def success(self) -> bool:
        """A file was written as asked (steered with a model, spread without one), not a fallback."""
        return self.fallback is None

    @property
    def lines(self) -> int:
        """Address-pair lines of the file (0 when nothing is written)."""
        return 0 if self.ports is None else len(self.ports)

    def config_lines(self) -> Iterator[QpPortLine]:
        """The file's address-pair lines."""
        if self.ports is None:
            return
        addresses = self.addresses
        for (src, dst, nic), ports in zip(self.ports.connections.tolist(), self.ports.ports.tolist(), strict=True):
            yield QpPortLine(addresses[src][nic], addresses[dst][nic], tuple(ports))

    def config_text(self, header: Sequence[str] | None = None) -> str:
        """MultiQpSrcPort.cfg as written ("" for mode `none`)."""
        if self.ports is None:
            return ""
        head = list(header) if header is not None else self.header()
        return "".join(render_qp_port_config(self.config_lines(), head))

    def header(self) -> list[str]:
        """The two comment lines ringroute writes at the top of the file."""
        return [
            f"ringroute {self.mode} source ports: {self.lines} address pairs x {self.qps} queue pairs",
            self.message[:400],
        ]

    def step_ports(self, routes: RoutePlan) -> list[np.ndarray]:
        """Per step of `routes`, the source port of each queue pair (rows pair x qps + qp, as `RoutePlan.spines`;
        -1 where the pair has no line), for `RoutePlan.json_chunks`."""
        net, out = routes.network, []
        for step in routes.steps:
            q = routes.qps
            ports = np.full((step.shape[0] * q, net.nics), -1, dtype=np.int64)
            if self.ports is not None and step.size and self.ports.qps == q:
                pair = np.repeat(np.arange(step.shape[0]), net.nics)
                nic = np.tile(np.arange(net.nics), step.shape[0])
                row = self.ports.rows(step[pair, 0], step[pair, 1], nic, net.servers, net.nics)
                has = row >= 0
                for qp in range(q):
                    ports[pair[has] * q + qp, nic[has]] = self.ports.ports[row[has], qp]
            out.append(ports)
        return out

    def to_report(self) -> dict[str, Any]:
        """The `steering` section of the plan report."""
        report: dict[str, Any] = {
            "mode": self.mode,
            "message": self.message,
            "fallback": self.fallback,
            "qps": self.qps,
            "lines": self.lines,
            "off_plan_queue_pairs": self.off_plan,
            "conflicting_queue_pairs": self.conflicts,
            "wall_time_s": round(self.wall_time_s, 6),
            "switches": [
                {
                    "switch": s.name,
                    "tier": s.tier,
                    "model": s.source,
                    "samples": s.samples,
                    "queue_pairs": s.queue_pairs,
                }
                for s in self.switches
            ],
        }
        if self.predicted is not None:
            report["predicted"] = self.predicted.to_dict()
        if self.baseline is not None:
            report["baseline"] = self.baseline.to_dict()
        return report


def _steer_iv(
    placement: Placement, plan: PlanResult, qps: int | None, port_range: tuple[int, int], max_lines: int
) -> int:
    q = plan.qps if qps is None else qps
    if isinstance(q, bool) or not isinstance(q, int) or not 1 <= q <= MAX_PORTS_PER_LINE:
        raise InputError(f"qps: {q!r}; HCCL takes 1 to {MAX_PORTS_PER_LINE} queue pairs (ports) per address pair")
    low, high = port_range
    if not (isinstance(low, int) and isinstance(high, int) and 1 <= low <= high <= 65535):
        raise InputError(f"port_range: {port_range!r} is not a range within 1-65535")
    if high - low + 1 < 2 * q:
        raise InputError(f"port_range: {low}-{high} is too narrow for {q} queue pairs to choose from")
    if not 1 <= max_lines <= MAX_CONFIG_LINES:
        raise InputError(f"max_lines: {max_lines}; 1 to HCCL's {MAX_CONFIG_LINES}")
    if len(plan.order) != len(placement.servers):
        raise InputError("plan: its order is not of this placement's servers")
    return q


@dataclass(frozen=True, eq=False)
class _Request:
    """What one `steer_source_ports` call works with."""

    network: JobNetwork
    addresses: tuple[tuple[str, ...], ...]
    qps: int
    port_range: tuple[int, int]
    seed: int
    deadline: float
    max_lines: int
    seeds: int
    started: float
    background: np.ndarray | None = None
    """Other jobs' load (flows per link id of `network`) on a shared fabric, or None."""

    def result(self, mode: SteeringMode, message: str, fallback: str | None, **fields: Any) -> SteeringResult:
        return SteeringResult(
            mode,
            message,
            fallback,
            self.qps,
            addresses=self.addresses,
            network=self.network,
            wall_time_s=time.perf_counter() - self.started,
            **fields,
        )


def steer_source_ports(
    placement: Placement,
    topology: Topology,
    plan: PlanResult,
    model: HashModel | None,
    *,
    qps: int | None = None,
    port_range: tuple[int, int] = DEFAULT_PORT_RANGE,
    rng: int = 0,
    time_limit: float = 10.0,
    max_lines: int = MAX_CONFIG_LINES,
    seeds: int = SPREAD_SEEDS,
    background: LinkBackground | None = None,
) -> SteeringResult:
    """The source ports of a planned job's cross-leaf connections, steered by `model` onto `plan`'s pinned
    routes when it can, else spread (module docstring). `qps` defaults to the plan's; `rng` seeds the order
    ports are tried in (and spread ports); `time_limit` bounds the port search; `max_lines` caps the file
    (HCCL reads 131,072 lines); `seeds` bounds the ECMP seeds of a spread expectation. `background` (other jobs'
    load on a shared fabric) is avoided by queue pairs no port takes onto their planned route. Raises InputError
    for bad arguments only.
    """
    started = time.perf_counter()
    q = _steer_iv(placement, plan, qps, port_range, max_lines)
    network = job_network(topology, [s.node_name for s in placement.servers])
    request = _Request(
        network,
        tuple(tuple(d.device_ip for d in s.devices) for s in placement.servers),
        q,
        port_range,
        rng,
        started + time_limit,
        max_lines,
        seeds,
        started,
        background.on(network) if background is not None else None,
    )
    wants_steering = model is not None and not model.is_empty
    if placement.devices_per_server != network.nics:
        reason = (
            f"servers have {placement.devices_per_server} devices but the fabric {network.nics} NICs per server "
            "(fabric.nicsPerServer): the rank table's device IPs cannot be matched to NICs"
        )
        return request.result("none", f"no source ports: {reason}", reason if wants_steering else None, ports=None)
    try:
        numeric = device_addresses(request.addresses, network.nics)
    except InputError as exc:
        return request.result("none", f"no source ports: {exc}", str(exc) if wants_steering else None, ports=None)
    order = np.asarray(plan.order, dtype=np.int64)
    fallback: str | None = None
    if wants_steering and plan.routing != "pinned":
        fallback = f"steering needs pinned routes; the plan was made for {plan.routing} routing"
    elif wants_steering:
        assert model is not None
        routes = plan.routes if plan.routes is not None and plan.routes.qps == q else None
        if routes is None:
            routes = pin_routes(network, pattern_steps(order, plan.pattern), qps=q, background=request.background)
        compiled = CompiledModel(model)  # one compilation for the search, the rerouting and the prediction
        steered = _steer(request, routes, numeric, compiled)
        if not isinstance(steered, str):
            targets, ports, switches, used = steered  # `used`: the routes pinned again around unreachable spines
            return _steered(request, plan, used, compiled, (numeric, targets, ports, switches))
        fallback = steered
    if q == 1:
        why = fallback or "one queue pair per connection and no hash model: HCCL's default applies"
        return request.result("none", f"no source ports written: {why}", fallback, ports=None)
    return _spread(request, plan, order, fallback)


def _steered(
    request: _Request,
    plan: PlanResult,
    routes: RoutePlan,
    model: CompiledModel,
    found: tuple[np.ndarray, QueuePairTargets, SourcePorts, tuple[SwitchUse, ...]],
) -> SteeringResult:
    """The result of ports found for every queue pair: the routes the model gives them, and their loads."""
    network, q = request.network, request.qps
    addresses, targets, ports, switches = found
    order = np.asarray(plan.order, dtype=np.int64)
    hashed = hashed_routes(network, routes.steps, ports, addresses, model)
    off_plan = _off_plan(routes, hashed)
    predicted, planned = (
        evaluate_order(network, order.tolist(), pattern=plan.pattern, routing="pinned", qps=q, routes=r, patterns=())
        for r in (hashed, routes)
    )
    return request.result(
        "steered",
        _steered_message(predicted, planned, len(ports), q, off_plan),
        None,
        ports=ports,
        predicted=predicted,
        baseline=planned,
        routes=hashed,
        off_plan=off_plan,
        conflicts=targets.conflicts,
        switches=switches,
    )


def _steer(
    request: _Request, routes: RoutePlan, addresses: np.ndarray, model: CompiledModel
) -> tuple[QueuePairTargets, SourcePorts, tuple[SwitchUse, ...], RoutePlan] | str:
    """Steered ports for every cross-leaf queue pair of `routes` (and the switches relied on, and the routes they
    steer onto: `routes` pinned again when some queue pairs cannot reach their spines), or the reason there are
    none."""
    network = request.network
    targets = queue_pair_targets(routes)
    lines = _line_count(network, targets.src, targets.dst, targets.nic)
    if lines + HEADER_LINES > request.max_lines:
        return f"{lines} address pairs need more lines than the {request.max_lines} HCCL reads"
    try:
        search = search_ports(
            network,
            targets,
            addresses,
            model,
            qps=request.qps,
            port_range=request.port_range,
            seed=request.seed,
            deadline=request.deadline,
        )
    except InputError as exc:
        return str(exc)
    if search.timed_out:
        return f"the port search passed its time limit with {int((search.ports < 0).sum())} queue pairs left"
    if search.problems:
        return _listed(search.problems)
    if search.unreached.size:
        # queue pairs no port takes onto their planned spine: pin again with each held to the spines its ports
        # reach, so the others make room for them (rerouting alone only finds the least loaded of those)
        again = _repinned(request, routes, targets, search, addresses=addresses, model=model)
        if again is not None:
            routes, targets, search = again
    rerouted = reroute(
        network,
        routes,
        targets,
        search,
        addresses=addresses,
        model=model,
        port_range=request.port_range,
        background=request.background,
    )
    if rerouted.problems:
        return _listed(rerouted.problems)
    if time.perf_counter() > request.deadline:
        return f"the port search passed its time limit rerouting {rerouted.moved} queue pairs"
    ports = source_ports(
        network, rerouted.targets, rerouted.ports, qps=request.qps, port_range=request.port_range, seed=request.seed
    )
    return rerouted.targets, ports, search.switches, routes


def _repinned(
    request: _Request,
    routes: RoutePlan,
    targets: QueuePairTargets,
    search: PortSearch,
    *,
    addresses: np.ndarray,
    model: CompiledModel,
) -> tuple[RoutePlan, QueuePairTargets, PortSearch] | None:
    """The routes pinned again with the unreached queue pairs held to the spines their ports reach, their targets
    and port search; None when that leaves as many unreached (or time is up)."""
    network, q = request.network, request.qps
    rows = search.unreached
    reach = reachable_spines(network, targets, rows, addresses=addresses, model=model, port_range=request.port_range)
    width = reach.shape[1]
    held = {
        (int(targets.src[r]), int(targets.dst[r]), int(targets.nic[r]), int(targets.qp[r])): reach[i]
        for i, r in enumerate(rows.tolist())
    }
    # A spine none of a switch's unreached queue pairs reach is held from every queue pair of that switch: a
    # learned hash that never saw one of its values cannot send any port there.
    switch_of = network.tier1_switch(targets.src[rows], targets.nic[rows])
    switches = len(network.leaf_names) * network.planes
    reachable_at = np.ones((switches, width), dtype=bool)
    for switch in np.unique(switch_of).tolist():
        reachable_at[switch] = reach[switch_of == switch].any(axis=0) & reach[switch_of == switch].all(axis=0)
    masks: list[np.ndarray | None] = []
    for step in routes.steps:
        rows_of_step = np.arange(step.shape[0] * q)
        src = np.repeat(step[rows_of_step // q, 0], network.nics)
        nic = np.tile(np.arange(network.nics), rows_of_step.size)
        mask = reachable_at[network.tier1_switch(src, nic)].reshape(step.shape[0] * q, network.nics, width).copy()
        index = {(int(a), int(b)): k for k, (a, b) in enumerate(step.tolist())}
        for (src_server, dst, nic_of, qp), spines in held.items():
            at = index.get((src_server, dst))
            if at is not None:
                mask[at * q + qp, nic_of] = spines
        masks.append(mask)
    if time.perf_counter() > request.deadline:
        return None
    again = pin_routes(network, list(routes.steps), qps=q, background=request.background, allowed=masks)
    new_targets = queue_pair_targets(again)
    try:
        new_search = search_ports(
            network,
            new_targets,
            addresses,
            model,
            qps=q,
            port_range=request.port_range,
            seed=request.seed,
            deadline=request.deadline,
        )
    except InputError:
        return None
    if new_search.timed_out or new_search.problems or new_search.unreached.size >= rows.size:
        return None
    return again, new_targets, new_search


def _listed(problems: Sequence[str]) -> str:
    more = f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
    return "; ".join(dict.fromkeys(problems[:3])) + more


def _line_count(network: JobNetwork, src: np.ndarray, dst: np.ndarray, nic: np.ndarray) -> int:
    servers, nics = network.servers, network.nics
    forward = (src * servers + dst) * nics + nic
    backward = (dst * servers + src) * nics + nic
    return int(np.unique(np.concatenate([forward, backward])).size)


def _off_plan(planned: RoutePlan, hashed: RoutePlan) -> int:
    """Queue pairs whose hashed spine or core differs from the planned one (over every step)."""
    total = 0
    for step in planned.steps:
        found_plan = planned.assignment_for(step)
        found_hash = hashed.assignment_for(step)
        assert found_plan is not None
        assert found_hash is not None
        (spines_p, cores_p), (spines_h, cores_h) = found_plan, found_hash
        total += int(np.count_nonzero((spines_p != spines_h) | (cores_p != cores_h)))
    return total


def _steered_message(predicted: OrderEvaluation, planned: OrderEvaluation, lines: int, qps: int, off_plan: int) -> str:
    busbw = _busbw_text(predicted)
    held = (
        "every queue pair on its planned spine"
        if off_plan == 0
        else f"{off_plan} queue pair(s) rerouted where no source port reaches their planned spine and core"
    )
    return (
        f"source ports steer {lines} address pairs x {qps} queue pairs through the hash model ({held}): predicted "
        f"max link load {format_load(predicted.max_link_load)} flows (plan {format_load(planned.max_link_load)}, "
        f"bound {predicted.max_link_load_bound:g}){busbw}"
    )


def _busbw_text(evaluation: OrderEvaluation) -> str:
    parts = []
    if not np.isnan(evaluation.ring_busbw):
        parts.append(f"ring bus bandwidth {format_fraction(evaluation.ring_busbw)}")
    if not np.isnan(evaluation.hd_busbw):
        parts.append(f"halving-doubling bus bandwidth {format_fraction(evaluation.hd_busbw)}")
    return (", " + ", ".join(parts) + " of line rate") if parts else ""


def _spread(request: _Request, plan: PlanResult, order: np.ndarray, fallback: str | None) -> SteeringResult:
    """Spread ports on every cross-leaf connection of the pattern, with the ECMP expectation they give."""
    network, q = request.network, request.qps
    src_l, dst_l, nic_l = [], [], []
    for pairs in pattern_steps(order, plan.pattern):
        crossing = pairs[network.server_leaf[pairs[:, 0]] != network.server_leaf[pairs[:, 1]]]
        src_l.append(np.repeat(crossing[:, 0], network.nics))
        dst_l.append(np.repeat(crossing[:, 1], network.nics))
        nic_l.append(np.tile(np.arange(network.nics), crossing.shape[0]))
    empty = np.zeros(0, dtype=np.int64)
    src = np.concatenate(src_l) if src_l else empty
    dst = np.concatenate(dst_l) if dst_l else empty
    nic = np.concatenate(nic_l) if nic_l else empty
    lines = _line_count(network, src, dst, nic)
    prefix = f"steering fell back: {fallback}; " if fallback else ""
    if lines + HEADER_LINES > request.max_lines:
        why = f"{lines} address pairs need more lines than the {request.max_lines} HCCL reads"
        return request.result("none", f"{prefix}no source ports written: {why}", fallback or why, ports=None)
    targets = QueuePairTargets(src, dst, nic, np.zeros_like(src), np.zeros_like(src), np.full_like(src, -1), 0)
    ports = source_ports(network, targets, None, qps=q, port_range=request.port_range, seed=request.seed)
    count = max(2, min(request.seeds, SPREAD_SUBFLOW_SEEDS // max(network.servers * network.nics * q, 1)))
    predicted, baseline = (
        evaluate_order(network, order.tolist(), pattern=plan.pattern, routing="ecmp", qps=k, seeds=count, patterns=())
        for k in (q, 1)
    )
    message = (
        f"{prefix}source ports spread {lines} address pairs over {q} queue pairs without a hash model: ECMP still "
        f"hashes them, expected max link load {format_load(baseline.max_link_load)} -> "
        f"{format_load(predicted.max_link_load)} flows (1 -> {q} queue pairs, mean over {count} hash seeds)"
        f"{_busbw_text(predicted)}; pinned loads need a hash model (ringroute fabric calibrate)"
    )
    return request.result("spread", message, fallback, ports=ports, predicted=predicted, baseline=baseline)


__all__ = ["SteeringMode", "SteeringResult", "steer_source_ports"]
