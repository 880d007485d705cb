"""Which `spec.networkTopology` admission asks Volcano for, and whether a job's own can ever be satisfied (pure).

Volcano (1.12+) keeps a job whose networkTopology is `hard` within one HyperNode of tier `highestTierAllowed` or
below, and waits until one has room: a tier none of whose HyperNodes can hold the whole job makes the job wait
forever, with nothing but "gang unschedulable" to show for it. So admission asks only for what the cluster can
satisfy: the lowest tier at which some HyperNode holds the whole job *by capacity* (nodes with enough cards of the
job's resource, free or not, so the answer does not change with the load of the moment), and says so.

The cluster's side is a `TopologyFacts` snapshot (HyperNodes resolved as vc-scheduler resolves them, and every
node's allocatable cards) that `ringroute serve` rebuilds from its watches and hands over whole; admission only
reads it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from planner import hypernode_tree
from webhook.admission.jobview import JobView, as_int, as_mapping, as_str
from webhook.admission.policy.violation import Violation
from webhook.admission.quantity import parse_quantity
from webhook.common.settings import NETWORK_TOPOLOGY_RELEASE, Settings, volcano_release

NETWORK_TOPOLOGY_CAPACITY = "network-topology-capacity"
"""Rule: a job's own hard networkTopology names a tier at which some HyperNode can hold it."""

INJECTED_NETWORK_TOPOLOGY = "network-topology"
"""The `ringroute.io/injected` item saying spec.networkTopology is ringroute's (the capacity rule skips it)."""

VIRTUAL_TOP_RELEASE = (1, 14)
"""From this release vc-scheduler adds a virtual HyperNode above the highest tier holding every node, so a
`highestTierAllowed` above every real tier lets a job span the whole cluster; before it, only real HyperNodes."""


@dataclass(frozen=True, slots=True)
class Domain:
    """One HyperNode and the cards its nodes have."""

    name: str
    tier: int
    nodes: int
    """Nodes under it."""
    cards: Mapping[str, Mapping[int, int]]
    """Per resource: how many of its nodes have each allocatable card count (nodes without the resource left out)."""


@dataclass(frozen=True, slots=True)
class TopologyFacts:
    """The cluster's HyperNodes with their capacity, as one immutable snapshot."""

    domains: tuple[Domain, ...] = ()
    """Every HyperNode, lowest tier first."""
    tier_names: Mapping[str, int] = field(default_factory=dict)
    """`spec.tierName` -> tier."""
    cluster: Domain = Domain("the cluster", 0, 0, {})
    """All nodes (what vc-scheduler 1.14+ puts in its virtual top HyperNode)."""
    problems: tuple[str, ...] = ()
    """HyperNode members that could not be read (logged by the process that builds the snapshot)."""

    @property
    def tiers(self) -> tuple[int, ...]:
        """Tiers present, lowest first."""
        return tuple(sorted({d.tier for d in self.domains}))


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """What admission knows of the cluster, found out by `ringroute serve` (nothing without an API server)."""

    topology: TopologyFacts | None = None
    """The HyperNodes and node capacity, kept current by a watch; None without an API server or HyperNode CRD."""


NO_FACTS = ClusterFacts()
"""No API server: admission asks Volcano for no network topology (unless `inject: fixed`)."""


def topology_facts(
    hypernodes: Iterable[Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]], resources: Iterable[str]
) -> TopologyFacts:
    """The snapshot from HyperNode and Node objects: each HyperNode's nodes counted by allocatable cards of every
    resource in `resources` (the profiles' NPU resources)."""
    tree = hypernode_tree(hypernodes, nodes)
    wanted = frozenset(resources)
    cards: dict[str, dict[str, int]] = {}
    for node in nodes:
        name = as_str(as_mapping(node.get("metadata")).get("name"))
        if not name:
            continue
        allocatable = as_mapping(as_mapping(node.get("status")).get("allocatable"))
        counts: dict[str, int] = {}
        for resource in wanted:
            amount = parse_quantity(allocatable.get(resource)) if resource in allocatable else None
            if amount is not None and amount >= 1:
                counts[resource] = int(amount)  # the device plugin advertises whole cards
        cards[name] = counts

    def domain(name: str, tier: int, members: Iterable[str]) -> Domain:
        per_resource: dict[str, Counter[int]] = {}
        total = 0
        for member in members:
            total += 1
            for resource, count in cards.get(member, {}).items():
                per_resource.setdefault(resource, Counter())[count] += 1
        read_only = {r: MappingProxyType(dict(c)) for r, c in per_resource.items()}
        return Domain(name, tier, total, MappingProxyType(read_only))

    domains = sorted(
        (domain(h.name, h.tier, h.nodes) for h in tree.hypernodes.values()), key=lambda d: (d.tier, d.name)
    )
    tier_names: dict[str, int] = {}
    for info in tree.hypernodes.values():
        if info.tier_name:
            tier_names[info.tier_name] = max(info.tier, tier_names.get(info.tier_name, info.tier))
    return TopologyFacts(
        domains=tuple(domains),
        tier_names=MappingProxyType(tier_names),
        cluster=domain("the cluster", 0, cards),
        problems=tree.problems,
    )


# --------------------------------------------------------------------------------------------------- demand


@dataclass(frozen=True, slots=True)
class Demand:
    """The NPU pods of a job: one per node (route planning takes whole nodes), each needing this many cards."""

    resource: str
    pods: tuple[int, ...]
    """Cards per pod, largest first."""

    def describe(self) -> str:
        """`6 nodes with 8 huawei.com/ascend-1980 cards`."""
        low, high = self.pods[-1], self.pods[0]
        cards = str(high) if low == high else f"{low}-{high}"
        plural = "node" if len(self.pods) == 1 else "nodes"
        return f"{len(self.pods)} {plural} with {cards} {self.resource} cards"


def job_demand(view: JobView) -> Demand | None:
    """What the job's NPU pods need, or None when there are none or a card count is unreadable (other rules name
    it)."""
    profile = view.profile
    if profile is None or not view.npu_tasks:
        return None
    pods: list[int] = []
    for task in view.npu_tasks:
        cards = task.cards_per_pod
        if cards is None or cards <= 0:
            return None
        pods.extend([cards] * task.replicas)
    if not pods:
        return None
    return Demand(profile.resource_name, tuple(sorted(pods, reverse=True)))


def holds(domain: Domain, demand: Demand) -> int:
    """How many of the job's pods the domain's nodes can take, one pod per node with at least its card count: the
    smallest pods first, each onto the smallest node that takes it (a maximum matching for thresholds)."""
    if demand.pods[0] == demand.pods[-1]:
        return min(len(demand.pods), usable(domain, demand))  # pods alike: every node with enough cards takes one
    groups = sorted(domain.cards.get(demand.resource, {}).items())
    index, left, placed = 0, groups[0][1] if groups else 0, 0
    for need in reversed(demand.pods):
        while index < len(groups) and (groups[index][0] < need or left == 0):
            index += 1
            left = groups[index][1] if index < len(groups) else 0
        if index >= len(groups):
            break
        left -= 1
        placed += 1
    return placed


def usable(domain: Domain, demand: Demand) -> int:
    """Nodes of the domain with enough cards for the job's smallest pod: its size as the job sees it."""
    need = demand.pods[-1]
    return sum(count for cards, count in domain.cards.get(demand.resource, {}).items() if cards >= need)


def _largest(domains: Sequence[Domain], demand: Demand) -> tuple[Domain, int]:
    """The domain holding most of the job's pods (then the one with most usable nodes, then the first by name),
    and how many of them it holds."""
    best = min(domains, key=lambda d: (-holds(d, demand), -usable(d, demand), d.name))
    return best, holds(best, demand)


def _per_tier(facts: TopologyFacts, demand: Demand) -> str:
    """`tier 1 leaf-0 4 nodes, tier 2 spine 24 nodes`: the largest HyperNode of every tier and how many nodes
    with enough cards it has, for messages."""
    parts = []
    for tier in facts.tiers:
        best, _ = _largest([d for d in facts.domains if d.tier == tier], demand)
        count = usable(best, demand)
        parts.append(f"tier {tier} {best.name} {count} {'node' if count == 1 else 'nodes'}")
    return ", ".join(parts)


# -------------------------------------------------------------------------------------------------- decisions


@dataclass(frozen=True, slots=True)
class TopologyDecision:
    """What the mutation asks of Volcano for one job, and why, in words the user reads."""

    request: Mapping[str, Any] | None
    """spec.networkTopology to add (None: none)."""
    reason: str
    """The decision in one sentence: the kubectl Warning (prefixed with the field) and the Job annotation."""

    @property
    def warning(self) -> str:
        """The AdmissionResponse warning."""
        return f"spec.networkTopology: {self.reason}"


def decide(view: JobView, facts: ClusterFacts) -> TopologyDecision | None:
    """The networkTopology to request for a route-planned job that has none, by `volcano.networkTopology`, or None
    when nothing is decided (not route-planned, the job sets its own, `inject: never`, a release before 1.12,
    no HyperNodes known)."""
    settings = view.settings
    request = settings.volcano.network_topology
    if not view.route_planned or request.inject == "never" or view.spec.get("networkTopology") is not None:
        return None
    release = volcano_release(settings.volcano.version)
    if release is not None and release < NETWORK_TOPOLOGY_RELEASE:
        return None
    topology = facts.topology
    demand = job_demand(view)
    if request.inject == "fixed":
        return _fixed(settings, topology, demand)
    if topology is None or not topology.domains or demand is None:
        return None
    for tier in topology.tiers:
        holding = _holding(topology, demand, tier)
        if not holding:
            continue
        lower = [t for t in topology.tiers if t < tier]
        if lower:
            best, count = _largest([d for d in topology.domains if d.tier == lower[-1]], demand)
            why = (
                f"the largest tier-{lower[-1]} HyperNode, {best.name}, holds {count} of the {demand.describe()} the "
                f"job needs"
            )
        else:
            verb = "holds" if len(holding) == 1 else "hold"
            why = f"{_count(holding, 'HyperNode')} of tier {tier} {verb} the {demand.describe()} it needs"
        return TopologyDecision(
            {"mode": "hard", "highestTierAllowed": tier},
            f"ringroute asked Volcano to keep this job within one tier-{tier} HyperNode (mode hard, "
            f"highestTierAllowed {tier}): {why}; set spec.networkTopology in the job to choose otherwise",
        )
    none_holds = f"no HyperNode holds the {demand.describe()} the job needs (largest: {_per_tier(topology, demand)})"
    if settings.volcano.network_topology.unsized == "soft":
        return TopologyDecision(
            {"mode": "soft"},
            f"ringroute asked Volcano only to prefer keeping this job within one HyperNode (mode soft): {none_holds}",
        )
    return TopologyDecision(None, f"ringroute did not ask Volcano to keep this job within a HyperNode: {none_holds}")


def _fixed(settings: Settings, topology: TopologyFacts | None, demand: Demand | None) -> TopologyDecision:
    """The configured request, warning when no HyperNode of that tier can ever hold the job."""
    fixed = settings.volcano.network_topology
    request = {"mode": fixed.mode, "highestTierAllowed": fixed.highest_tier_allowed}
    said = (
        f"ringroute asked Volcano to keep this job within one tier-{fixed.highest_tier_allowed} HyperNode (mode "
        f"{fixed.mode}, as volcano.networkTopology.inject: fixed configures)"
    )
    if fixed.mode == "hard" and topology is not None and demand is not None and topology.domains:
        blocked = _unsatisfiable(topology, demand, fixed.highest_tier_allowed, settings)
        if blocked is not None:
            return TopologyDecision(request, f"{said}, but {blocked}: the job will not start; ask the cluster admin")
    return TopologyDecision(request, said)


def _unsatisfiable(topology: TopologyFacts, demand: Demand, tier: int, settings: Settings) -> str | None:
    """Why no HyperNode of tier `tier` or below can ever hold the job, or None when one can."""
    allowed = [d for d in topology.domains if d.tier <= tier]
    if any(holds(d, demand) == len(demand.pods) for d in allowed):
        return None
    release = volcano_release(settings.volcano.version)
    virtual_top = max(topology.tiers) + 1
    spans_cluster = (release is None or release >= VIRTUAL_TOP_RELEASE) and tier >= virtual_top
    if spans_cluster and holds(topology.cluster, demand) == len(demand.pods):
        return None  # vc-scheduler 1.14+ lets it span the whole cluster
    return (
        f"no HyperNode of tier {tier} or below holds the {demand.describe()} it needs (largest: "
        f"{_per_tier(topology, demand)})"
    )


def _holding(topology: TopologyFacts, demand: Demand, tier: int) -> list[Domain]:
    """The HyperNodes of `tier` that hold the whole job."""
    return [d for d in topology.domains if d.tier == tier and holds(d, demand) == len(demand.pods)]


def _count(items: Sequence[Any], noun: str) -> str:
    return f"{len(items)} {noun}" if len(items) == 1 else f"{len(items)} {noun}s"


def check_capacity(view: JobView, facts: ClusterFacts, *, injected: bool) -> list[Violation]:
    """A job's own hard networkTopology whose tier no HyperNode can satisfy (Volcano would never start it): one
    violation naming the largest HyperNode per tier and the fix. Not for what ringroute injected (`injected`)."""
    topology = facts.topology
    spec = as_mapping(view.spec.get("networkTopology"))
    if injected or topology is None or not topology.domains or not spec:
        return []
    if (as_str(spec.get("mode")) or "hard") != "hard":
        return []
    tier = as_int(spec.get("highestTierAllowed"))
    path = "spec.networkTopology.highestTierAllowed"
    value: Any = tier
    if tier is None:
        name = as_str(spec.get("highestTierName"))
        tier = topology.tier_names.get(name) if name else None
        path, value = "spec.networkTopology.highestTierName", name
    demand = job_demand(view)
    if tier is None or demand is None:
        return []
    blocked = _unsatisfiable(topology, demand, tier, view.settings)
    if blocked is None:
        return []
    fits = next((t for t in topology.tiers if _holding(topology, demand, t)), None)
    raise_to = f"raise highestTierAllowed to {fits}, " if fits is not None else ""
    detail = (
        f"{blocked}, so Volcano would never start the job; {raise_to}use mode soft, or remove spec.networkTopology "
        "and ringroute asks for the lowest tier that holds the job"
    )
    return [Violation(path, "Invalid", value, detail, NETWORK_TOPOLOGY_CAPACITY)]


__all__ = [
    "INJECTED_NETWORK_TOPOLOGY",
    "NETWORK_TOPOLOGY_CAPACITY",
    "NO_FACTS",
    "ClusterFacts",
    "Demand",
    "Domain",
    "TopologyDecision",
    "TopologyFacts",
    "check_capacity",
    "decide",
    "holds",
    "job_demand",
    "topology_facts",
]
