"""How a rank order performs: ring cross edges, max link load and bus bandwidth, each with its lower bound.

Bus bandwidth is the ideal time over the simulated time, a step taking data x its largest link load.
`order_seed_metrics` keeps the per-seed values (ECMP common random numbers: compare two orders seed by seed with
`paired_difference`); `evaluate_order` reports their means.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass
from typing import Any, get_args

import numpy as np

from planner._errors import InputError
from planner._model import Pattern, Routing
from planner.sim._loads import step_link_loads_per_seed, step_max_loads_per_seed
from planner.sim._network import JobNetwork
from planner.sim._patterns import STEP_PATTERNS, StepPattern, collective_steps, lambda_star, ring_flows, unique_steps
from planner.sim._pinning import pin_routes
from planner.sim._route_plan import RoutePlan
from planner.sim._routing import check_routing


@dataclass(frozen=True)
class OrderEvaluation:
    """How a rank order performs on the network, with the lower bound of every metric."""

    cross_edges: tuple[int, ...]
    """Ring edges crossing a domain boundary at each listed tier (leaf; leaf and pod in 3 tiers)."""
    cross_edge_bounds: tuple[int, ...]
    """Lower bound of each: the number of domains the job touches at that tier, when > 1 (else 0)."""
    max_link_load: float
    """Largest link load in flows over all steps of the pattern (ecmp: mean over seeds)."""
    max_link_load_bound: float
    """λ*: the largest per-step lower bound on the max link load (a multiple of 1/qps when flows are split over
    queue pairs)."""
    ring_busbw: float
    """Simulated ring allreduce bus bandwidth, fraction of line rate (ecmp: mean over seeds; NaN if not simulated)."""
    hd_busbw: float
    """Simulated halving-doubling allreduce bus bandwidth, fraction of line rate (ecmp: mean; NaN if not simulated)."""
    pattern: str = "ring"
    routing: str = "ecmp"
    qps: int = 1
    max_link_load_sem: float = 0.0
    """Standard error of `max_link_load` over the ecmp seeds (0 for deterministic routing)."""
    ring_busbw_sem: float = 0.0
    """Standard error of `ring_busbw` over the ecmp seeds."""
    hd_busbw_sem: float = 0.0
    """Standard error of `hd_busbw` over the ecmp seeds."""
    seeds: int = 1
    """ECMP hash seeds the means are over (seeds 0 .. seeds-1); 1 for deterministic routing."""

    @property
    def max_link_load_gap(self) -> float:
        """max_link_load - λ* (0 = optimal)."""
        return self.max_link_load - self.max_link_load_bound

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict of every metric and its bound."""
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, float) and math.isnan(value):
                out[key] = None  # a bus bandwidth that was not simulated (JSON has no NaN)
        out["cross_edges"] = list(self.cross_edges)
        out["cross_edge_bounds"] = list(self.cross_edge_bounds)
        out["max_link_load_gap"] = self.max_link_load_gap
        return out


def ring_cross_edges(network: JobNetwork, order: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Ring edges crossing each listed tier's domain boundaries, and the lower bound of each."""
    ring = ring_flows(order)
    counts: list[int] = []
    bounds: list[int] = []
    for tier in range(network.listed_tiers):
        domain = network.domain_of(tier)
        counts.append(int(np.count_nonzero(domain[ring[:, 0]] != domain[ring[:, 1]])))
        touched = int(np.unique(domain[np.asarray(order, dtype=np.int64)]).size)
        bounds.append(touched if touched > 1 else 0)
    return tuple(counts), tuple(bounds)


def _check_order(network: JobNetwork, order: Sequence[int] | np.ndarray) -> np.ndarray:
    ranks = np.asarray(order, dtype=np.int64)
    if (
        ranks.ndim != 1
        or ranks.size != network.servers
        or not np.array_equal(np.sort(ranks), np.arange(network.servers))
    ):
        raise InputError(f"order: must be a permutation of the {network.servers} server indices")
    return ranks


def _sem(values: np.ndarray) -> float:
    """Standard error of the mean of per-seed values."""
    return float(values.std(ddof=1) / np.sqrt(values.size)) if values.size > 1 else 0.0


def paired_difference(mine: np.ndarray, other: np.ndarray) -> tuple[float, float]:
    """(mean, standard error) of the per-seed differences `mine - other` of two orders evaluated on one seed set.

    With common random numbers the two orders' noise largely cancels, so this standard error is far below
    the unpaired one (the hypot of the two means' standard errors).
    """
    diff = np.asarray(mine, dtype=float) - np.asarray(other, dtype=float)
    if diff.size == 0:
        raise InputError("seeds: compare per-seed values of at least one seed")
    return float(diff.mean()), _sem(diff)


def _busbw(loads: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Per-seed ideal time / simulated time, step time = data x largest load (1.0 when there is no step)."""
    if not loads.size:
        return np.ones(loads.shape[1] if loads.ndim == 2 else 1)
    times = (sizes[:, None] * np.maximum(loads, 1.0)).sum(axis=0)
    per_seed: np.ndarray = sizes.sum() / times
    return per_seed


@dataclass(frozen=True, eq=False)
class SeedMetrics:
    """Per-seed values behind an `OrderEvaluation`, to compare orders seed by seed (common random numbers).

    Evaluated on the same seeds, two orders share ECMP draws wherever their switches carry the same flow
    counts, so `paired_difference` of their arrays has a far smaller standard error than the two means.
    """

    seeds: np.ndarray
    max_link_load: np.ndarray
    """Largest link load over the pattern's steps under each seed."""
    ring_busbw: np.ndarray | None
    """Ring bus bandwidth under each seed (None when the ring was not simulated)."""
    hd_busbw: np.ndarray | None
    """Halving-doubling bus bandwidth under each seed (None when it was not simulated)."""
    max_link_load_bound: float
    """λ* (or the route plan's proven bound under pinned routing) over the pattern's steps."""

    def busbw(self, pattern: StepPattern) -> np.ndarray:
        """Per-seed bus bandwidth of one collective; raises InputError when it was not simulated."""
        values = self.ring_busbw if pattern == "ring" else self.hd_busbw
        if values is None:
            raise InputError(f"patterns: {pattern!r} was not simulated; include it in evaluate's patterns")
        return values


def _simulated_collectives(pattern: Pattern, patterns: Collection[str] | None) -> tuple[StepPattern, ...]:
    """The collectives to simulate: `patterns` (default both) plus those the pattern's max load needs."""
    wanted = set(STEP_PATTERNS if patterns is None else patterns)
    unknown = sorted(wanted - set(STEP_PATTERNS))
    if unknown:
        raise InputError(f"patterns: {unknown[0]!r} is not one of {', '.join(STEP_PATTERNS)}")
    if pattern in ("ring", "mixed"):
        wanted.add("ring")
    if pattern in ("halving-doubling", "mixed"):
        wanted.add("halving-doubling")
    return tuple(p for p in STEP_PATTERNS if p in wanted)


def order_seed_metrics(
    network: JobNetwork,
    order: Sequence[int] | np.ndarray,
    *,
    pattern: Pattern = "ring",
    routing: Routing = "ecmp",
    qps: int = 1,
    seeds: int | Sequence[int] | np.ndarray = 20,
    routes: RoutePlan | None = None,
    patterns: Collection[StepPattern] | None = None,
) -> SeedMetrics:
    """Per-seed max link load and bus bandwidths of a rank order (`evaluate_order` reports their means).

    `seeds`: a count (seeds 0 .. k-1, as `evaluate_order`) or the seed values. `patterns`: the collectives
    simulated for their bus bandwidth (default both); the pattern's own steps are always simulated. Under
    deterministic routing every seed repeats one value. Steps keep fixed ECMP stream ids (ring 0, the
    distinct halving-doubling steps 1, 2, ...) so that every order is evaluated on the same streams.
    """
    check_routing(routing, qps)
    if pattern not in get_args(Pattern):
        raise InputError(f"pattern: {pattern!r} is not one of {', '.join(get_args(Pattern))}")
    if isinstance(seeds, int | np.integer):
        if seeds < 1:
            raise InputError(f"seeds: {seeds}; average ecmp over at least 1 seed (20 is the default)")
        seed_values = np.arange(int(seeds))
    else:
        seed_values = np.asarray(seeds, dtype=np.int64).ravel()
        if not seed_values.size:
            raise InputError("seeds: give at least one ecmp seed")
    simulated = _simulated_collectives(pattern, patterns)
    ranks = _check_order(network, order)
    runs = seed_values if routing == "ecmp" else seed_values[:1]
    ring_steps, ring_sizes = collective_steps(ranks, "ring") if "ring" in simulated else ([], np.zeros(0))
    hd_all, hd_sizes = (
        collective_steps(ranks, "halving-doubling") if "halving-doubling" in simulated else ([], np.zeros(0))
    )
    hd_steps, hd_index = unique_steps(hd_all)
    if routing == "pinned":
        routes = _complete_routes(network, [*ring_steps, *hd_steps], routes, qps)
    steps, step_ids = _routed_together(pattern, ring_steps, hd_steps)
    loads = step_max_loads_per_seed(network, steps, routing, qps=qps, seeds=runs, routes=routes, step_ids=step_ids)
    hd_first = pattern == "halving-doubling"
    ring_loads = loads[len(hd_steps) :] if hd_first else loads[: len(ring_steps)]
    hd_part = loads[: len(hd_steps)] if hd_first else loads[len(ring_steps) :]
    hd_loads = hd_part[hd_index] if hd_all else np.zeros((0, runs.size))
    chosen: list[np.ndarray] = []
    bound_steps: list[np.ndarray] = []
    if pattern in ("ring", "mixed"):
        chosen.append(ring_loads)
        bound_steps += ring_steps
    if pattern in ("halving-doubling", "mixed"):
        chosen.append(hd_loads)
        bound_steps += hd_steps
    stacked = np.concatenate(chosen, axis=0)
    per_seed_max = stacked.max(axis=0) if stacked.size else np.zeros(runs.size)
    bound = max((_step_bound(network, s, routes, routing, qps) for s in bound_steps), default=1)
    repeat = seed_values.size // runs.size
    return SeedMetrics(
        seeds=seed_values,
        max_link_load=np.repeat(per_seed_max, repeat),
        ring_busbw=np.repeat(_busbw(ring_loads, ring_sizes), repeat) if "ring" in simulated else None,
        hd_busbw=np.repeat(_busbw(hd_loads, hd_sizes), repeat) if "halving-doubling" in simulated else None,
        max_link_load_bound=bound,
    )


def _routed_together(
    pattern: Pattern, ring_steps: list[np.ndarray], hd_steps: list[np.ndarray]
) -> tuple[list[np.ndarray], list[int]]:
    """The steps in the order they are routed together, and their ECMP stream ids (ring 0, the distinct
    halving-doubling steps 1, 2, ...).

    A connection takes the stream of the first step holding it, so the pattern's own steps go first: its max link
    load is then the same whether or not the other collective is simulated too (for its bus bandwidth).
    """
    ring_ids = [0] * len(ring_steps)
    hd_ids = [1 + k for k in range(len(hd_steps))]
    if pattern == "halving-doubling":
        return [*hd_steps, *ring_steps], [*hd_ids, *ring_ids]
    return [*ring_steps, *hd_steps], [*ring_ids, *hd_ids]


def _mean_and_sem(values: np.ndarray | None) -> tuple[float, float]:
    if values is None:
        return math.nan, math.nan
    return float(values.mean()), _sem(values)


def evaluate_order(
    network: JobNetwork,
    order: Sequence[int],
    *,
    pattern: Pattern = "ring",
    routing: Routing = "ecmp",
    qps: int = 1,
    seeds: int = 20,
    routes: RoutePlan | None = None,
    patterns: Collection[StepPattern] | None = None,
) -> OrderEvaluation:
    """Metrics of a rank order (`order[r]` = server of node rank r) under a pattern and routing model.

    `max_link_load` and its bound cover the pattern's steps ("mixed": ring and halving-doubling). Both bus
    bandwidths are reported by default; `patterns` limits the simulated collectives (the pattern's own are
    always simulated) and a bus bandwidth left out is NaN (None in `to_dict`). Routing "pinned" uses `routes`
    where it covers a step and pins the rest. ECMP averages seeds 0 .. seeds-1; deterministic routings
    evaluate once.
    """
    if isinstance(seeds, bool) or not isinstance(seeds, int | np.integer):
        raise InputError(f"seeds: {seeds!r}; pass a number of ecmp seeds (20 is the default)")
    if seeds < 1:
        raise InputError(f"seeds: {seeds}; average ecmp over at least 1 seed (20 is the default)")
    metrics = order_seed_metrics(
        network,
        order,
        pattern=pattern,
        routing=routing,
        qps=qps,
        seeds=seeds if routing == "ecmp" else 1,
        routes=routes,
        patterns=patterns,
    )
    counts, bounds = ring_cross_edges(network, _check_order(network, order).tolist())
    ring_busbw, ring_sem = _mean_and_sem(metrics.ring_busbw)
    hd_busbw, hd_sem = _mean_and_sem(metrics.hd_busbw)
    return OrderEvaluation(
        cross_edges=counts,
        cross_edge_bounds=bounds,
        max_link_load=float(metrics.max_link_load.mean()),
        max_link_load_bound=metrics.max_link_load_bound,
        ring_busbw=ring_busbw,
        hd_busbw=hd_busbw,
        pattern=pattern,
        routing=routing,
        qps=qps,
        max_link_load_sem=_sem(metrics.max_link_load),
        ring_busbw_sem=ring_sem,
        hd_busbw_sem=hd_sem,
        seeds=int(metrics.seeds.size) if routing == "ecmp" else 1,
    )


@dataclass(frozen=True, eq=False)
class LinkLoads:
    """Every link's load under each seed for a rank order: what `evaluate_order`'s max link load is the mean of.

    `loads[s, link]` is the link's largest load over the pattern's steps under seed s, in flows. The busiest link
    of each seed (`busiest`) averaged over the seeds is `OrderEvaluation.max_link_load` for the same arguments.
    """

    seeds: np.ndarray
    """The seeds of the rows (one row for deterministic routing)."""
    loads: np.ndarray
    """(seeds, links) load of every link (`JobNetwork` link ids, NIC links first)."""
    max_link_load_bound: float

    @property
    def busiest(self) -> np.ndarray:
        """Largest link load under each seed."""
        largest: np.ndarray = self.loads.max(axis=1) if self.loads.size else np.zeros(self.seeds.size)
        return largest

    @property
    def max_link_load(self) -> float:
        """Mean over the seeds of the busiest link's load: `OrderEvaluation.max_link_load`."""
        return float(self.busiest.mean())

    @property
    def mean(self) -> np.ndarray:
        """Each link's load averaged over the seeds (its expected load under ECMP)."""
        averaged: np.ndarray = self.loads.mean(axis=0)
        return averaged

    def ranked(self, links: slice | np.ndarray | None = None) -> np.ndarray:
        """The links' loads sorted busiest first under each seed, then averaged over the seeds position by
        position: entry 0 is `max_link_load` (over `links`; all links by default), entry k the mean load of the
        (k+1)-th busiest link. Links that carry nothing under every seed are left out."""
        chosen = self.loads if links is None else self.loads[:, links]
        ranked: np.ndarray = -np.sort(-chosen, axis=1)
        averaged: np.ndarray = ranked.mean(axis=0)
        return averaged[averaged > 0]


def order_link_loads(
    network: JobNetwork,
    order: Sequence[int] | np.ndarray,
    *,
    pattern: Pattern = "ring",
    routing: Routing = "ecmp",
    qps: int = 1,
    seeds: int = 20,
    routes: RoutePlan | None = None,
) -> LinkLoads:
    """The load of every link under each seed, for the same arguments as `evaluate_order` and on its streams.

    Deterministic routings evaluate once. Under pinned routing `routes` is used where it covers a step and the
    rest is pinned, as in `evaluate_order`.
    """
    check_routing(routing, qps)
    if pattern not in get_args(Pattern):
        raise InputError(f"pattern: {pattern!r} is not one of {', '.join(get_args(Pattern))}")
    if isinstance(seeds, bool) or not isinstance(seeds, int | np.integer) or seeds < 1:
        raise InputError(f"seeds: {seeds!r}; average ecmp over at least 1 seed (20 is the default)")
    ranks = _check_order(network, order)
    runs = np.arange(int(seeds) if routing == "ecmp" else 1)
    ring_steps = collective_steps(ranks, "ring")[0] if pattern in ("ring", "mixed") else []
    hd_steps: list[np.ndarray] = []
    if pattern in ("halving-doubling", "mixed"):
        hd_steps = unique_steps(collective_steps(ranks, "halving-doubling")[0])[0]
    steps, step_ids = _routed_together(pattern, ring_steps, hd_steps)  # the streams of `order_seed_metrics`
    if routing == "pinned":
        routes = _complete_routes(network, steps, routes, qps)
    loads = step_link_loads_per_seed(network, steps, routing, qps=qps, seeds=runs, routes=routes, step_ids=step_ids)
    bound = max((_step_bound(network, s, routes, routing, qps) for s in steps), default=1)
    return LinkLoads(seeds=runs, loads=loads, max_link_load_bound=bound)


def _step_bound(network: JobNetwork, flows: np.ndarray, routes: RoutePlan | None, routing: Routing, qps: int) -> float:
    """λ* of a step (of queue pairs: flows split over qps are routed in pieces), raised to the route plan's proven
    bound for it under pinned routing."""
    if routing == "pinned" and routes is not None:
        qps = routes.qps
    bound = lambda_star(network, flows, qps)
    proven = routes.bound_for(flows) if routes is not None and routing == "pinned" else None
    return bound if proven is None else max(bound, proven)


def _complete_routes(network: JobNetwork, steps: list[np.ndarray], routes: RoutePlan | None, qps: int) -> RoutePlan:
    """`routes` extended with pinned routes (of `qps` queue pairs per flow, or the plan's) for the steps it does
    not cover."""
    missing = [s for s in steps if routes is None or routes.assignment_for(s) is None]
    if not missing:
        assert routes is not None
        return routes
    extra = pin_routes(network, missing, qps=routes.qps if routes is not None else qps)
    return extra if routes is None else routes.merged(extra)
