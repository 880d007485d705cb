"""Volcano's network-topology-aware scheduling, v1.12 to v1.15: the session's HyperNode view and the
`network-topology-aware` plugin's scores, as vc-scheduler computes them.

Read from volcano-sh/volcano at v1.12.0, v1.13.0, v1.14.0, v1.14.3 and v1.15.1:
`pkg/scheduler/plugins/network-topology-aware/network_topology_aware.go`, `pkg/scheduler/framework/session.go`
(addClusterTopHyperNode, adjustNetworkTopologySpec), `pkg/scheduler/api/hyper_node_info.go` (GetLCAHyperNode),
`pkg/scheduler/util/scheduler_helper.go` (FindHyperNodeForNode, FindJobTaskNumOfHyperNode). The allocate action
that uses them (trying HyperNodes tier by tier) is emulated in `webhook.volcano_emulation.allocate_action`.

What differs by release:
- 1.12: a hard job is tried in every HyperNode of the lowest tier that works; among those the sum of its
  tasks' best node scores wins. Node scores of the plugin (toward the job's first HyperNode, `BaseScore` 100 x
  weight) only for soft jobs.
- 1.13: the same search; node scores for hard and soft jobs alike; no HyperNode order function.
- 1.14, 1.15: a virtual HyperNode one tier above the highest holds every node. A hard job is tried in the
  HyperNodes of a "gradient": tiers from the lowest, HyperNodes whose free resources (at session open) cover the
  job's minResources; the best is the one the plugin's HyperNode binpack scores highest. Node scores are 0-1
  scaled by 100 x weight; jobs without networkTopology get HyperNode binpack scores, faded by tier.
  From 1.14.3 a soft job is turned into a hard one at the virtual tier (it then never waits); 1.15 also searches
  the gradient inside the chosen HyperNode for the job's (default) sub-job. This module models 1.14 as 1.14.3+.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from planner import HyperNodeTree

Release = tuple[int, int]

CLUSTER_TOP = "<cluster-top-hypernode>"
"""Name of the virtual HyperNode holding every node (vc-scheduler 1.14+)."""
BASE_SCORE = 100.0
"""1.12 and 1.13: the plugin's full score (before weight)."""
MAX_NODE_SCORE = 100.0
"""1.14+: the 0-1 scores are scaled by this (kube-scheduler's MaxNodeScore) times the weight."""
MIN_RESOURCE = 0.1
"""vc-scheduler's minResource: amounts below it are absent (ResourceNames, LessEqual)."""
VIRTUAL_TOP_RELEASE: Release = (1, 14)
SUB_JOB_GRADIENT_RELEASE: Release = (1, 15)


@dataclass(frozen=True, slots=True)
class PluginArguments:
    """The plugin's arguments in volcano-scheduler.conf (defaults: weight 1, cpu and memory binpack weight 1)."""

    weight: int = 1
    binpack: Mapping[str, int] = field(default_factory=lambda: {"cpu": 1, "memory": 1})
    """`hypernode.binpack.cpu`, `.memory`, and `.resources.<name>` weights (1.14+)."""
    normal_pod_enable: bool = True
    """`hypernode.binpack.normal-pod.enable` (1.14+): binpack jobs without networkTopology by HyperNode."""
    normal_pod_fading: float = 0.8
    """`hypernode.binpack.normal-pod.fading`: tier t weighs fading^(t-1)."""


KIT_ARGUMENTS = PluginArguments(weight=10, binpack={"cpu": 1, "memory": 1, "huawei.com/ascend-1980": 2})
"""What the test cluster's v1.15.1 configuration sets (Volcano's user guide, with the NPU for binpacking)."""


@dataclass(frozen=True, slots=True)
class SessionHyperNode:
    name: str
    tier: int
    parent: str | None
    nodes: frozenset[str]


@dataclass(frozen=True, slots=True)
class SessionHyperNodes:
    """The HyperNodes of one scheduling session (`ssn.HyperNodes`, `HyperNodesTiers`, `RealNodesSet`)."""

    by_name: Mapping[str, SessionHyperNode]
    tiers: tuple[int, ...]
    """HyperNodesTiers, lowest first (the virtual top's tier included from 1.14)."""
    top: str | None
    """The virtual top HyperNode (1.14+)."""
    tier_names: Mapping[str, int]

    @classmethod
    def of(cls, tree: HyperNodeTree, nodes: Iterable[str], release: Release) -> SessionHyperNodes:
        """The session view of resolved HyperNodes over the session's `nodes`."""
        names = frozenset(nodes)
        by_name = {
            h.name: SessionHyperNode(h.name, h.tier, h.parent, h.nodes & names) for h in tree.hypernodes.values()
        }
        top = None
        if release >= VIRTUAL_TOP_RELEASE:
            top_tier = max([1, *(h.tier + 1 for h in by_name.values())])
            by_name = {
                n: SessionHyperNode(h.name, h.tier, h.parent or CLUSTER_TOP, h.nodes) for n, h in by_name.items()
            }
            by_name[CLUSTER_TOP] = SessionHyperNode(CLUSTER_TOP, top_tier, None, names)
            top = CLUSTER_TOP
        tier_names = {h.tier_name: h.tier for h in tree.hypernodes.values() if h.tier_name}
        return cls(by_name, tuple(sorted({h.tier for h in by_name.values()})), top, tier_names)

    def tier(self, name: str) -> int:
        return self.by_name[name].tier

    def at_tier(self, tier: int) -> list[str]:
        """HyperNodes of a tier, by name (vc-scheduler iterates a map: callers shuffle where order matters)."""
        return sorted(h.name for h in self.by_name.values() if h.tier == tier)

    def leaf_of(self, node: str) -> str:
        """FindHyperNodeForNode: the HyperNode of the lowest tier holding `node` ("" when none)."""
        if not self.tiers:
            return ""
        for name in self.at_tier(self.tiers[0]):
            if node in self.by_name[name].nodes:
                return name
        return ""

    def ancestors(self, name: str) -> list[str]:
        """The HyperNode and its ancestors, nearest first."""
        chain = [name]
        while True:
            info = self.by_name.get(chain[-1])
            if info is None or info.parent is None or info.parent in chain:
                return chain
            chain.append(info.parent)

    def lca(self, a: str, b: str) -> str:
        """GetLCAHyperNode ("" when they share no ancestor)."""
        if not a:
            return b
        if not b:
            return a
        seen = set(self.ancestors(a))
        return next((x for x in self.ancestors(b) if x in seen), "")

    def descendants(self, root: str) -> list[str]:
        """`root` and every HyperNode below it, breadth first."""
        children: dict[str, list[str]] = {}
        for info in self.by_name.values():
            if info.parent is not None:
                children.setdefault(info.parent, []).append(info.name)
        order, queue = [], [root]
        while queue:
            current = queue.pop(0)
            order.append(current)
            queue.extend(sorted(children.get(current, ())))
        return order


@dataclass(frozen=True, slots=True)
class Amounts:
    """Resource amounts as vc-scheduler's api.Resource holds them: milli-CPU, bytes, and scalars in milli-units."""

    cpu: float = 0.0
    memory: float = 0.0
    scalars: Mapping[str, float] = field(default_factory=dict)

    def get(self, name: str) -> float:
        if name == "cpu":
            return self.cpu
        if name == "memory":
            return self.memory
        return self.scalars.get(name, 0.0)

    def names(self) -> list[str]:
        """ResourceNames(): cpu, memory and the scalars whose amount is at least MIN_RESOURCE."""
        present = [n for n, v in (("cpu", self.cpu), ("memory", self.memory)) if v >= MIN_RESOURCE]
        return present + [n for n, v in sorted(self.scalars.items()) if v >= MIN_RESOURCE]

    def plus(self, other: Amounts) -> Amounts:
        scalars = dict(self.scalars)
        for name, value in other.scalars.items():
            scalars[name] = scalars.get(name, 0.0) + value
        return Amounts(self.cpu + other.cpu, self.memory + other.memory, scalars)

    def covered_by(self, other: Amounts) -> bool:
        """LessEqual(other, Zero): every amount within other's, give or take MIN_RESOURCE (a scalar other lacks
        counts as 0)."""
        pairs = [(self.cpu, other.cpu), (self.memory, other.memory)]
        pairs += [(value, other.scalars.get(name, 0.0)) for name, value in self.scalars.items()]
        return all(mine < theirs or abs(mine - theirs) < MIN_RESOURCE for mine, theirs in pairs)


def total(amounts: Iterable[Amounts]) -> Amounts:
    out = Amounts()
    for each in amounts:
        out = out.plus(each)
    return out


def binpack_score(request: Amounts, used: Amounts, allocatable: Amounts, args: PluginArguments) -> float:
    """The plugin's HyperNode binpack score (1.14+, 0-1): the weighted mean over the requested resources that have a
    binpack weight of (used + request) / allocatable; 0 when any of them would be overused."""
    score, weights = 0.0, 0
    for name in request.names():
        weight = args.binpack.get(name)
        if weight is None:
            continue
        capacity = allocatable.get(name)
        after = used.get(name) + request.get(name)
        if after > capacity:
            return 0.0
        if capacity <= 0:
            continue
        score += weight * after / capacity
        weights += weight
    return score / weights if weights > 0 else 0.0


def tier_score(tier: int, tiers: Sequence[int], release: Release) -> float:
    """scoreHyperNodeWithTier: (maxTier - tier) / (maxTier - minTier), 0-1."""
    low, high = (tiers[0], tiers[-1]) if tiers else (0, 0)
    if low == high:
        return 0.0 if release < VIRTUAL_TOP_RELEASE else 1.0
    if release >= VIRTUAL_TOP_RELEASE and not low <= tier <= high:
        return 0.0
    return (high - tier) / (high - low)


def network_aware_scores(
    nodes: Sequence[str],
    allocated: str,
    *,
    session: SessionHyperNodes,
    task_nodes: Sequence[str],
    args: PluginArguments,
    release: Release,
) -> dict[str, float]:
    """The plugin's node scores for a task of a job with networkTopology: how low the common ancestor of the
    node's HyperNode and the job's allocated HyperNode is, ties among the best broken by the share of the job's
    tasks already under the node's HyperNode. Empty while the job has no allocated HyperNode. `task_nodes`: the
    node of each task of the job (or sub-job), "" for the unplaced."""
    if not allocated:
        return {}
    old = release < VIRTUAL_TOP_RELEASE
    full = BASE_SCORE if old else 1.0
    scores: dict[str, float] = {}
    for node in nodes:
        hyper = session.leaf_of(node)
        if old:
            if hyper == allocated:
                base = full
            else:
                common = session.lca(hyper, allocated)
                base = full * tier_score(session.tier(common), session.tiers, release) if common else 0.0
        elif not hyper:
            base = 0.0
        elif hyper == allocated:
            base = full
        else:
            common = session.lca(hyper, allocated)
            base = tier_score(session.tier(common), session.tiers, release) if common else 0.0
        scores[node] = base * (args.weight if old else 1.0)
    best = max(scores.values(), default=0.0)
    tied = [n for n, s in scores.items() if s == best]
    if len(tied) > 1:
        for node in tied:
            hyper = session.leaf_of(node)
            members = session.by_name[hyper].nodes if hyper in session.by_name else frozenset()
            count = sum(1 for placed in task_nodes if placed and placed in members)
            share = count / len(task_nodes) if task_nodes else 0.0
            scores[node] += share * (BASE_SCORE * args.weight if old else 1.0)
    if old:
        return scores
    return {node: MAX_NODE_SCORE * args.weight * score for node, score in scores.items()}


def normal_pod_scores(
    nodes: Sequence[str],
    request: Amounts,
    *,
    used: Mapping[str, Amounts],
    allocatable: Mapping[str, Amounts],
    session: SessionHyperNodes,
    args: PluginArguments,
) -> dict[str, float]:
    """1.14+: node scores for a task of a job without networkTopology: the binpack score of the node's HyperNode
    at every tier, weighted fading^(tier-1), scaled by 100 x weight (a tier where no HyperNode holds the node
    scores full)."""
    if not args.normal_pod_enable or not session.tiers:
        return {}
    low, high = session.tiers[0], session.tiers[-1]
    weights = {t: args.normal_pod_fading ** (t - 1) for t in range(low, high + 1)}
    total_weight = sum(weights.values())
    holding = {t: [(h, session.by_name[h].nodes) for h in session.at_tier(t)] for t in weights}
    scores: dict[str, float] = {}
    for node in nodes:
        value = 0.0
        for tier, weight in weights.items():
            tier_value = 1.0
            for name, members in holding[tier]:
                if node in members:
                    tier_value = binpack_score(request, used[name], allocatable[name], args)
                    break
            value += weight * tier_value
        scores[node] = MAX_NODE_SCORE * args.weight * value / total_weight
    return scores


def hypernode_order_scores(
    candidates: Sequence[str],
    request: Amounts,
    *,
    used: Mapping[str, Amounts],
    allocatable: Mapping[str, Amounts],
    session: SessionHyperNodes,
    task_nodes: Sequence[str],
    args: PluginArguments,
) -> dict[str, float]:
    """1.14+ HyperNodeOrderFn: the binpack score of each candidate HyperNode for the whole (sub-)job, ties among
    the best broken by the share of its tasks already there, scaled by 100 x weight."""
    scores = {name: binpack_score(request, used[name], allocatable[name], args) for name in candidates}
    best = max(scores.values(), default=0.0)
    tied = [n for n, s in scores.items() if s == best]
    if len(tied) > 1:
        for name in tied:
            members = session.by_name[name].nodes
            count = sum(1 for placed in task_nodes if placed and placed in members)
            scores[name] += count / len(task_nodes) if task_nodes else 0.0
    return {name: MAX_NODE_SCORE * args.weight * score for name, score in scores.items()}


def gradient(
    session: SessionHyperNodes,
    root: str,
    *,
    highest_tier: int,
    min_resources: Amounts,
    idle: Mapping[str, Amounts],
    future_idle: Mapping[str, Amounts],
) -> list[list[str]]:
    """1.14+ hyperNodeGradientFn (allocation): the HyperNodes at and below `root` of tier `highest_tier` or lower
    whose free resources at session open cover `min_resources`, grouped by tier, lowest first."""
    by_tier: dict[int, list[str]] = {}
    for name in session.descendants(root):
        tier = session.tier(name)
        if tier > highest_tier:
            continue
        if min_resources.covered_by(idle[name]) or min_resources.covered_by(future_idle[name]):
            by_tier.setdefault(tier, []).append(name)
    return [by_tier[t] for t in sorted(by_tier)]


@dataclass(frozen=True, slots=True)
class EffectiveTopology:
    """A job's networkTopology as the session follows it."""

    hard: bool
    tier: int | None
    """The highest tier allowed for hard jobs."""


def effective_topology(
    spec: Mapping[str, object] | None, session: SessionHyperNodes, release: Release
) -> EffectiveTopology | None:
    """What a PodGroup's networkTopology means to the session: soft stays soft on 1.12-1.13 and becomes hard at
    the virtual top tier from 1.14 (1.14.3+); a tier name is translated by the HyperNodes' tierName; hard without
    any tier is not hard (IsHardTopologyMode needs highestTierAllowed)."""
    if spec is None:
        return None
    mode = str(spec.get("mode") or "hard")
    tier = spec.get("highestTierAllowed")
    if not isinstance(tier, int):
        name = spec.get("highestTierName")
        tier = session.tier_names.get(name) if isinstance(name, str) and release >= (1, 14) else None
    if mode == "soft":
        if session.top is not None:
            return EffectiveTopology(True, session.tier(session.top))
        return EffectiveTopology(False, None)
    return EffectiveTopology(tier is not None, tier)


__all__ = [
    "BASE_SCORE",
    "CLUSTER_TOP",
    "KIT_ARGUMENTS",
    "MAX_NODE_SCORE",
    "SUB_JOB_GRADIENT_RELEASE",
    "VIRTUAL_TOP_RELEASE",
    "Amounts",
    "EffectiveTopology",
    "PluginArguments",
    "SessionHyperNode",
    "SessionHyperNodes",
    "binpack_score",
    "effective_topology",
    "gradient",
    "hypernode_order_scores",
    "network_aware_scores",
    "normal_pod_scores",
    "tier_score",
    "total",
]
