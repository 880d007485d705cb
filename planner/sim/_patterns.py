"""Collective traffic patterns as flow steps, and the counting lower bound on a step's max link load.

A pattern gives server-level (src, dst) pairs per step; the network model replicates every pair on each
NIC/rail d (flow (src, d) -> (dst, d)). `lambda_star` bounds the max link load of one step under every routing of
whole flows; `pattern_steps` and `pattern_step_sizes` give the steps of a planning pattern ("mixed": the ring, then
halving-doubling) and the data each step carries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from planner._errors import InputError
from planner._model import Pattern
from planner.sim._network import JobNetwork

# -- traffic patterns --------------------------------------------------------------------------------------------


def ring_flows(order: Sequence[int] | np.ndarray) -> np.ndarray:
    """Flows of a unidirectional ring over servers in rank order: rank r sends to rank r+1 mod n.

    Returns an (n, 2) int array of (src, dst) server indices (empty for a single server).
    """
    ranks = np.asarray(order, dtype=np.int64)
    if ranks.size < 2:
        return np.zeros((0, 2), dtype=np.int64)
    return np.stack([ranks, np.roll(ranks, -1)], axis=1)


def _hd_layout(n: int) -> tuple[int, int]:
    """(p, extra): the largest power of two p <= n and extra = n - p ranks that fold into others."""
    p = 1 << (n.bit_length() - 1)
    return p, n - p


def halving_doubling_steps(order: Sequence[int] | np.ndarray) -> list[np.ndarray]:
    """Flows of every step of a halving-doubling allreduce over servers in rank order.

    Power of two n: reduce-scatter steps k = 0 .. log2(n)-1 where rank r exchanges with r xor 2^k (both
    directions), then the allgather steps in reverse order. Otherwise (MPICH's scheme) with p the largest power
    of two below n and e = n - p: a fold step where even ranks r < 2e send to r+1, the halving-doubling among
    the p remaining ranks (odd r < 2e as virtual rank r//2, r >= 2e as r - e), and an unfold step r+1 -> r.
    """
    ranks = np.asarray(order, dtype=np.int64)
    n = int(ranks.size)
    if n < 2:
        return []
    p, extra = _hd_layout(n)
    virtual_to_real = np.concatenate([np.arange(extra) * 2 + 1, np.arange(2 * extra, n)])
    exchange: list[np.ndarray] = []
    for k in range(p.bit_length() - 1):
        v = np.arange(p)
        partner = v ^ (1 << k)
        pairs = np.stack([virtual_to_real[v], virtual_to_real[partner]], axis=1)
        exchange.append(ranks[pairs])
    steps = exchange + exchange[::-1]
    if extra:
        even = np.arange(extra) * 2
        fold = ranks[np.stack([even, even + 1], axis=1)]
        steps = [fold, *steps, fold[:, ::-1].copy()]
    return steps


def halving_doubling_sizes(n: int) -> np.ndarray:
    """Data each flow carries in every step of `halving_doubling_steps` for n servers (1.0 = the whole vector)."""
    if n < 2:
        return np.zeros(0)
    p, extra = _hd_layout(n)
    halves = 0.5 ** np.arange(1, p.bit_length())
    sizes = np.concatenate([halves, halves[::-1]])
    if extra:
        sizes = np.concatenate([[1.0], sizes, [1.0]])
    return sizes


StepPattern = Literal["ring", "halving-doubling"]
STEP_PATTERNS: tuple[StepPattern, ...] = ("ring", "halving-doubling")
"""The collectives whose bus bandwidth `evaluate_order` simulates (by default both)."""


def collective_steps(order: np.ndarray, collective: StepPattern) -> tuple[list[np.ndarray], np.ndarray]:
    """Flows of every step of one collective for an order, and the data each step carries."""
    if collective == "ring":
        ring = ring_flows(order)
        return ([ring] if ring.size else []), np.ones(1 if ring.size else 0)
    return halving_doubling_steps(order), halving_doubling_sizes(order.size)


def pattern_steps(order: np.ndarray, pattern: Pattern) -> list[np.ndarray]:
    """Flows of every step of the pattern for an order (mixed: the ring, then halving-doubling)."""
    steps: list[np.ndarray] = []
    if pattern in ("ring", "mixed"):
        ring = ring_flows(order)
        if ring.size:
            steps.append(ring)
    if pattern in ("halving-doubling", "mixed"):
        steps += halving_doubling_steps(order)
    return steps


def pattern_step_sizes(n: int, pattern: Pattern) -> np.ndarray:
    """Data each flow carries in every step of `pattern_steps` for n servers (1.0 = the whole vector)."""
    sizes: list[float] = []
    if pattern in ("ring", "mixed") and n > 1:
        sizes.append(1.0)
    if pattern in ("halving-doubling", "mixed"):
        sizes += [float(s) for s in halving_doubling_sizes(n)]
    return np.asarray(sizes, dtype=np.float64)


def unique_steps(steps: list[np.ndarray]) -> tuple[list[np.ndarray], np.ndarray]:
    """Distinct steps (the reduce-scatter and allgather halves repeat) and the index of each step's copy."""
    seen: dict[bytes, int] = {}
    unique: list[np.ndarray] = []
    index = np.zeros(len(steps), dtype=np.int64)
    for i, pairs in enumerate(steps):
        key = pairs.tobytes()
        if key not in seen:
            seen[key] = len(unique)
            unique.append(pairs)
        index[i] = seen[key]
    return unique, index


# -- bounds ------------------------------------------------------------------------------------------------------


def check_flows(network: JobNetwork, flows: np.ndarray) -> np.ndarray:
    pairs = np.asarray(flows, dtype=np.int64)
    if pairs.ndim != 2 or pairs.shape[1] != 2:
        raise InputError(f"flows: expected an (n, 2) array of (src, dst) server indices, got shape {pairs.shape}")
    if pairs.size and (pairs.min() < 0 or pairs.max() >= network.servers):
        raise InputError(f"flows: server index out of range 0..{network.servers - 1}; index Placement.servers")
    return pairs


def lambda_star(network: JobNetwork, flows: np.ndarray, qps: int = 1) -> float:
    """Counting lower bound on the max link load of one step, valid for every routing of whole flows (of whole
    queue pairs, each carrying 1/qps of its flow, when qps > 1).

    Max over tier-1 switches of ceil(max(out, in) / U); in 3 tiers also max over pods (and planes) of
    ceil(max(cross-pod out, in) / spine-core links of the pod); the flows one server sends or receives per NIC;
    at least 1. Counted in queue pairs and divided by qps when qps > 1 (so splitting a flow over spines can lower
    it: 3 flows over 2 uplinks need 2 whole, 1.5 in halves). Attainable by pinning in 2 tiers with equal uplink
    counts; with oversubscribed spines or unequal uplink counts the optimum can be higher
    (`RoutePlan.step_bounds` holds the proven bound). An int when qps is 1.
    """
    pairs = check_flows(network, flows)
    if qps > 1 and pairs.size:
        return whole_flow_bound(network, np.repeat(pairs, qps, axis=0)) / qps
    return whole_flow_bound(network, pairs)


def whole_flow_bound(network: JobNetwork, pairs: np.ndarray) -> int:
    """`lambda_star` of checked flows, each routed whole (an int)."""
    bound = 1
    if not pairs.size:
        return bound
    bound = max(
        bound,
        int(np.bincount(pairs[:, 0]).max()),
        int(np.bincount(pairs[:, 1]).max()),
    )
    per_pair = network.nics if network.layout == "tor" else 1
    src, dst = pairs[:, 0], pairs[:, 1]
    cross_leaf, cross_pod = network.cross_domains(src, dst)
    leaves = len(network.leaf_names)
    out = np.bincount(network.server_leaf[src[cross_leaf]], minlength=leaves) * per_pair
    into = np.bincount(network.server_leaf[dst[cross_leaf]], minlength=leaves) * per_pair
    tier1 = -(-np.maximum(out, into) // network.leaf_uplinks)
    bound = max(bound, int(tier1.max()))
    if network.listed_tiers == 2:
        pods = len(network.pod_names)
        out = np.bincount(network.server_pod[src[cross_pod]], minlength=pods) * per_pair
        into = np.bincount(network.server_pod[dst[cross_pod]], minlength=pods) * per_pair
        capacity = network.pod_spines * network.pod_uplinks
        bound = max(bound, int((-(-np.maximum(out, into) // capacity)).max()))
    return bound
