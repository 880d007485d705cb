"""Scoring candidate orders: the objective, its seed-free ECMP estimate, and the search over candidates.

The objective is the collective's time, then its largest link load. `Search` keeps every scored candidate and
picks the best one that is no worse than any baseline.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.special import bdtr

from planner._model import Pattern, Routing
from planner.sim._loads import link_loads
from planner.sim._network import JobNetwork
from planner.sim._patterns import lambda_star, pattern_step_sizes, pattern_steps, unique_steps

EPS = 1e-9


@dataclass(frozen=True, slots=True)
class Score:
    """A candidate order's objective: the collective's time (data x largest load, summed over steps), then load.

    For the ring both agree (one step). For halving-doubling the time is what bus bandwidth measures; a lower
    peak load on a tiny late step must not outweigh a slower early step carrying most of the data.
    """

    load: float
    """Largest link load over the steps (ecmp: expected value)."""
    time: float
    """Sum over steps of data size x max(largest load, 1) (ecmp: expected); 1 / bus bandwidth up to a constant."""

    def better_than(self, other: Score) -> bool:
        """Lower time wins; equal times are decided by load."""
        if self.time < other.time - EPS:
            return True
        return abs(self.time - other.time) <= EPS and self.load < other.load - EPS


class _EcmpEstimate:
    """Expected largest link load of ECMP-hashed steps, from per-switch flow counts, without sampling.

    Each tier-1 switch spreads its cross-leaf sub-flows (flows x NICs x queue pairs, in the rail layout per
    plane) uniformly over its U uplinks, and receives its inbound ones over U downlinks; in 3 tiers a pod spreads
    its cross-pod sub-flows over spines x V core links. The largest bin of M balls in B bins has
    P(max <= t) ~ BinomCDF(t; M, 1/B)^B, and groups (and distinct steps) are treated as independent, so the
    estimate depends only on how many flows leave and enter each switch: orders alike in that respect tie
    exactly instead of differing by hash luck, and scoring costs no routing.
    """

    def __init__(self, network: JobNetwork, qps: int) -> None:
        self.network = network
        self.qps = qps
        self.per_pair = network.nics if network.layout == "tor" else 1
        self.copies = 1 if network.layout == "tor" else network.nics
        if network.listed_tiers == 2:
            self.pod_bins = network.pod_spines * np.maximum(network.pod_uplinks, 1)
        else:
            self.pod_bins = np.zeros(0, dtype=np.int64)

    def log_cdf(self, step: np.ndarray, top: int) -> np.ndarray:
        """log P(largest link load of the step <= t / Q) for t = 0 .. top - 1 (in sub-flow units)."""
        net = self.network
        src, dst = step[:, 0], step[:, 1]
        cross_leaf, cross_pod = net.cross_domains(src, dst)
        leaves = len(net.leaf_names)
        groups: list[tuple[np.ndarray, np.ndarray]] = []
        domains = [(net.server_leaf, cross_leaf, leaves, net.leaf_uplinks)]
        if self.pod_bins.size:
            domains.append((net.server_pod, cross_pod, len(net.pod_names), self.pod_bins))
        for domain, crossing, count, bins in domains:
            out = np.bincount(domain[src[crossing]], minlength=count)
            into = np.bincount(domain[dst[crossing]], minlength=count)
            groups.append((out * self.per_pair * self.qps, bins))
            groups.append((into * self.per_pair * self.qps * ~self._mirrored(domain, src, dst, crossing, count), bins))
        balls = np.concatenate([g[0] for g in groups])
        bins = np.concatenate([g[1] for g in groups])
        keep = balls > 0
        pairs, multiplicity = np.unique(np.c_[balls[keep], bins[keep]], axis=0, return_counts=True)
        t = np.arange(top)
        total = np.zeros(top)
        for (m, b), count in zip(pairs.tolist(), multiplicity.tolist(), strict=True):
            with np.errstate(divide="ignore"):
                total += count * self.copies * b * np.log(bdtr(np.minimum(t, m), m, 1.0 / b))
        return total

    @staticmethod
    def _mirrored(domain: np.ndarray, src: np.ndarray, dst: np.ndarray, crossing: np.ndarray, count: int) -> np.ndarray:
        """Domains whose inbound flows all come from one domain that sends only to them.

        A flow takes the same spine (and core) up and down, so such a domain's downlinks carry exactly its
        sender's uplink pattern: counting both would double the chance of a collision.
        """
        a, b = domain[src[crossing]], domain[dst[crossing]]
        links = np.unique(a * count + b)
        senders = np.bincount(links % count, minlength=count)
        receivers = np.bincount(links // count, minlength=count)
        only_sender = np.full(count, -1, dtype=np.int64)
        only_sender[links % count] = links // count
        mirrored: np.ndarray = (senders == 1) & (receivers[np.maximum(only_sender, 0)] == 1) & (only_sender >= 0)
        return mirrored

    def __call__(self, steps: list[np.ndarray], sizes: np.ndarray) -> Score:
        unique, index = unique_steps(steps)
        q = self.qps
        # No link of a group carries more sub-flows than the group holds, and a domain sends at most one flow
        # per server and step: beyond the largest domain the CDF is exactly 1, so the sums stop there.
        net = self.network
        largest = int(np.bincount(net.server_leaf).max())
        if self.pod_bins.size:
            largest = max(largest, int(np.bincount(net.server_pod).max()))
        flows = min(max(int(step.shape[0]) for step in unique), largest)
        top = max(flows * self.per_pair * q, q) + 1
        logs = np.array([self.log_cdf(step, top) for step in unique])
        # E[max(X / Q, 1)] = 1 + sum over t >= Q of P(X > t) / Q, with X in sub-flow units
        tail = 1.0 - np.exp(logs[:, q:])
        expected = 1.0 + tail.sum(axis=1) / q
        worst_tail = 1.0 - np.exp(logs[:, q:].sum(axis=0))
        worst = 1.0 + float(worst_tail.sum()) / q
        return Score(worst, float((sizes * expected[index]).sum()))


def objective(network: JobNetwork, pattern: Pattern, routing: Routing, qps: int) -> Callable[[np.ndarray], Score]:
    """Score of an order (lower is better): the largest link load over the pattern's steps, then step time.

    Slice routing is deterministic and scored exactly. Pinned routing reaches λ* for every step (König), so it
    is scored by λ*. ECMP is scored by `_EcmpEstimate`, an expectation that needs no seeds, so the choice is
    not hash luck and the report's seeds stay unseen by the search.
    """
    sizes = pattern_step_sizes(network.servers, pattern)
    estimate = _EcmpEstimate(network, qps) if routing == "ecmp" else None

    def score(order: np.ndarray) -> Score:
        steps = pattern_steps(order, pattern)
        if not steps:
            return Score(1.0, 0.0)
        if estimate is not None:
            return estimate(steps, sizes[: len(steps)])
        unique, index = unique_steps(steps)
        if routing == "pinned":
            loads = np.array([float(lambda_star(network, s, qps)) for s in unique])
        else:
            loads = np.array([float(link_loads(network, s, routing).max()) for s in unique])
        per_step = np.maximum(loads[index], 1.0)
        return Score(float(per_step.max()), float((sizes[: len(steps)] * per_step).sum()))

    return score


@dataclass
class Search:
    """Scored candidates, the planner's own and baselines; candidates are scored until the deadline."""

    score: Callable[[np.ndarray], Score]
    deadline: float
    load_slack: float = 0.0
    """Relative load difference treated as a tie when comparing with baselines (ECMP loads are estimates)."""
    scored: list[tuple[np.ndarray, Score, str | None]] = field(default_factory=list)
    timed_out: bool = False

    def offer(self, order: np.ndarray, *, always: bool = False, baseline: str | None = None) -> Score | None:
        """Score `order` unless past the deadline (and not `always`); `baseline` names a baseline's order."""
        if not always and time.perf_counter() >= self.deadline:
            self.timed_out = True
            return None
        value = self.score(order)
        self.scored.append((order, value, baseline))
        return value

    @property
    def order(self) -> np.ndarray:
        """The best candidate that is no worse than any baseline in time and in load, when one is.

        Otherwise the lowest load among those no slower than any baseline (the fastest baseline is one). `Score`
        orders the dominating candidates. ECMP loads within `load_slack` of the lowest count as equal.
        """
        assert self.scored
        pool = self.scored
        baselines = [value for _, value, name in self.scored if name is not None]
        if baselines:
            least_time = min(v.time for v in baselines) + EPS
            least_load = min(v.load for v in baselines) * (1.0 + self.load_slack) + EPS
            dominating = [c for c in pool if c[1].time <= least_time and c[1].load <= least_load]
            if not dominating:
                # no candidate beats every baseline on both: stay no slower than any, with the lowest load
                fast = [c for c in pool if c[1].time <= least_time]
                return min(fast, key=lambda c: (c[1].load, c[1].time))[0]
            pool = dominating
        best = pool[0]
        for candidate in pool[1:]:
            if candidate[1].better_than(best[1]):
                best = candidate
        return best[0]
