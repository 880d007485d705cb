"""Volcano's default `nodeorder` and `binpack` scores."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from webhook.extender.volcano_releases import MASTER_RELEASE, RELEASES, normalize_release

# ------------------------------------------------------------------------ default nodeorder and binpack scores
# nodeorder (pkg/scheduler/plugins/nodeorder) wraps kube-scheduler plugins: NodeResourcesLeastAllocated (cpu 50,
# memory 50), NodeResourcesBalancedAllocation (cpu, memory, nvidia.com/gpu; unrequested scalars skipped),
# ImageLocality, NodeAffinity, InterPodAffinity, TaintToleration, PodTopologySpread. binpack is in the Helm chart's
# volcano-scheduler.conf (every release) but not in the built-in default conf (pkg/scheduler/util.go).

NODEORDER_WEIGHTS: Final[Mapping[str, Mapping[str, int]]] = {
    release: {
        "leastrequested": 1,
        "mostrequested": 0,
        "nodeaffinity": 1 if release == "1.7" else 2,
        "podaffinity": 1 if release == "1.7" else 2,
        "balancedresource": 1,
        "tainttoleration": 1 if release == "1.7" else 3,
        "imagelocality": 1,
        "podtopologyspread": 2,
    }
    for release in RELEASES
}
"""calculateWeight defaults (nodeorder.go): v1.8.0 raised nodeaffinity/podaffinity to 2 and tainttoleration to 3."""

BINPACK_DEFAULTS: Final[Mapping[str, int]] = {"binpack.weight": 1, "binpack.cpu": 1, "binpack.memory": 1}
"""binpack.go calculateWeight defaults; other resources (NPUs) count only when listed in binpack.resources."""

IMAGE_LOCALITY_EFFECTIVE: Final[Mapping[str, bool]] = {r: r != "1.14" for r in RELEASES}
"""v1.14.0 - v1.14.2 build the kube-scheduler NodeInfos without ImageStates (framework/util.go
GenerateNodeMapAndSlice), so ImageLocality scores 0 everywhere; v1.14.3 restored it."""

_DEFAULT_MILLI_CPU: Final = 100
_DEFAULT_MEMORY: Final = 200 * 1024 * 1024
_MB: Final = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ScoringInput:
    """What the default plugins read for one task on one node (CPU in millicores, memory in bytes).

    `node_*_requested` sum the requests of the pods already on the node (Volcano's NodeInfo.Used; kube-scheduler's
    Requested). `node_*_nonzero_requested` is kube-scheduler's NonZeroRequested, which counts 100m CPU and 200 MiB
    for each container without a request (kube-proxy, say); it defaults to the plain sum.
    """

    task_cpu_milli: int
    task_memory: int
    node_cpu_allocatable_milli: int
    node_memory_allocatable: int
    node_cpu_requested_milli: int = 0
    node_memory_requested: int = 0
    node_cpu_nonzero_requested_milli: int | None = None
    node_memory_nonzero_requested: int | None = None
    task_images_on_node: Sequence[tuple[int, int]] = ()
    """(image size in bytes, nodes holding it) for each task container whose image the node already has."""
    task_containers: int = 1
    total_nodes: int = 1


def least_allocated_score(inp: ScoringInput) -> int:
    """NodeResourcesFit LeastAllocated, cpu and memory weighted 50/50, integer arithmetic, 0-100."""
    node_cpu = inp.node_cpu_requested_milli
    if inp.node_cpu_nonzero_requested_milli is not None:
        node_cpu = inp.node_cpu_nonzero_requested_milli
    node_memory = inp.node_memory_requested
    if inp.node_memory_nonzero_requested is not None:
        node_memory = inp.node_memory_nonzero_requested
    # A container without a request counts as 100m CPU and 200 MiB here (schedutil.GetNonzeroRequests).
    cpu_requested = node_cpu + (inp.task_cpu_milli or _DEFAULT_MILLI_CPU)
    memory_requested = node_memory + (inp.task_memory or _DEFAULT_MEMORY)
    total = weights = 0
    for requested, allocatable in (
        (cpu_requested, inp.node_cpu_allocatable_milli),
        (memory_requested, inp.node_memory_allocatable),
    ):
        if allocatable == 0:
            continue
        score = 0 if requested > allocatable else (allocatable - requested) * 100 // allocatable
        total += score * 50
        weights += 50
    return total // weights if weights else 0


def balanced_allocation_score(inp: ScoringInput) -> int:
    """NodeResourcesBalancedAllocation on cpu and memory (requests, no defaults): int((1 - |f_cpu - f_mem| / 2) * 100)
    with each fraction capped at 1, so 50-100."""
    fractions = []
    for requested, allocatable in (
        (inp.node_cpu_requested_milli + inp.task_cpu_milli, inp.node_cpu_allocatable_milli),
        (inp.node_memory_requested + inp.task_memory, inp.node_memory_allocatable),
    ):
        if allocatable:
            fractions.append(min(requested / allocatable, 1.0))
    std = abs(fractions[0] - fractions[1]) / 2 if len(fractions) == 2 else 0.0
    return int((1 - std) * 100)


def image_locality_score(inp: ScoringInput) -> int:
    """ImageLocality: sum of size x (nodes with the image / all nodes) over the task's images present on the node,
    clamped to [23 MiB, 1000 MiB x containers] and scaled to 0-100."""
    nodes = max(inp.total_nodes, 1)
    total = sum(int(size * (count / nodes)) for size, count in inp.task_images_on_node)
    low, high = 23 * _MB, 1000 * _MB * max(inp.task_containers, 1)
    total = min(max(total, low), high)
    return 100 * (total - low) // (high - low)


def binpack_score(inp: ScoringInput, release: str = MASTER_RELEASE) -> float:
    """binpack at default weights: mean over cpu and memory of (used + request) / allocatable, x 100.

    A resource that would overflow makes the whole score 0 from v1.8 (v1.7 scores that resource 0 and keeps
    the others). NPUs do not count unless binpack.resources lists them.
    """
    rel = normalize_release(release)
    score, weights = 0.0, 0
    for request, used, capacity in (
        (inp.task_cpu_milli, inp.node_cpu_requested_milli, inp.node_cpu_allocatable_milli),
        (inp.task_memory, inp.node_memory_requested, inp.node_memory_allocatable),
    ):
        if request == 0:
            continue
        weights += 1
        if capacity == 0:
            continue
        if request + used > capacity:
            if rel != "1.7":
                return 0.0
            continue
        score += (request + used) / capacity
    if weights:
        score /= weights
    return score * 100 * BINPACK_DEFAULTS["binpack.weight"]


def default_node_scores(release: str, inp: ScoringInput, *, binpack: bool = True) -> dict[str, float]:
    """Per-plugin scores the default configuration adds for this node (weights applied) and their `total`.

    Assumes the pod has no node or pod (anti-)affinity, the node no PreferNoSchedule taint and topology spreading
    puts no difference between candidates; those plugins then add the same amount to every node (TaintToleration
    normalises to 100 x weight; the rest to 0), which is left out. `binpack=False` is the built-in conf.
    """
    rel = normalize_release(release)
    weights = NODEORDER_WEIGHTS[rel]
    scores: dict[str, float] = {
        "nodeorder.leastrequested": float(least_allocated_score(inp) * weights["leastrequested"]),
        "nodeorder.balancedresource": float(balanced_allocation_score(inp) * weights["balancedresource"]),
        "nodeorder.imagelocality": float(image_locality_score(inp) * weights["imagelocality"])
        if IMAGE_LOCALITY_EFFECTIVE[rel]
        else 0.0,
    }
    if binpack:
        scores["binpack"] = binpack_score(inp, rel)
    scores["total"] = sum(scores.values())
    return scores


@dataclass(frozen=True, slots=True)
class ScoreSpread:
    """Largest difference the default plugins can put between two candidate nodes for one task."""

    per_plugin: Mapping[str, float]
    independent: float
    """Sum of each plugin's own range: a bound that holds for any inputs."""
    coupled: float
    """With leastrequested and binpack moving in opposite directions (same cpu/memory weights, both on
    requested/allocatable), their sum stays within 2 points, so the reachable spread is this."""
    conditional: Mapping[str, float]
    """Extra spread from plugins that are equal on all nodes under the stated assumptions but not in general."""


def max_score_spread(release: str, *, binpack: bool = True) -> ScoreSpread:
    """The most the default nodeorder (and Helm chart's binpack) scores can differ between two nodes.

    leastrequested 0-100 (x1), balancedresource 50-100 with two resources (x1), imagelocality 0-100 (x1; 0 in
    v1.14.0-2), binpack 0-100 (x1). nodeaffinity, podaffinity, tainttoleration and podtopologyspread add nothing
    between nodes for a pod without affinity terms on untainted nodes in one zone; `conditional` lists what each
    could add otherwise (100 x weight).
    """
    rel = normalize_release(release)
    weights = NODEORDER_WEIGHTS[rel]
    per_plugin: dict[str, float] = {
        "nodeorder.leastrequested": 100.0 * weights["leastrequested"],
        "nodeorder.balancedresource": 50.0 * weights["balancedresource"],
        "nodeorder.imagelocality": 100.0 * weights["imagelocality"] if IMAGE_LOCALITY_EFFECTIVE[rel] else 0.0,
    }
    if binpack:
        per_plugin["binpack"] = 100.0 * BINPACK_DEFAULTS["binpack.weight"]
    independent = sum(per_plugin.values())
    coupled = independent
    if binpack:
        coupled = independent - per_plugin["nodeorder.leastrequested"] - per_plugin["binpack"] + 2.0
    conditional = {
        "nodeorder.nodeaffinity": 100.0 * weights["nodeaffinity"],
        "nodeorder.podaffinity": 100.0 * weights["podaffinity"],
        "nodeorder.tainttoleration": 100.0 * weights["tainttoleration"],
        "nodeorder.podtopologyspread": 100.0 * weights["podtopologyspread"],
    }
    return ScoreSpread(per_plugin, independent, coupled, conditional)


__all__ = [
    "BINPACK_DEFAULTS",
    "IMAGE_LOCALITY_EFFECTIVE",
    "NODEORDER_WEIGHTS",
    "ScoreSpread",
    "ScoringInput",
    "balanced_allocation_score",
    "binpack_score",
    "default_node_scores",
    "image_locality_score",
    "least_allocated_score",
    "max_score_spread",
]
