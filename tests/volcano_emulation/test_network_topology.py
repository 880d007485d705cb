"""Volcano's network-topology-aware scheduling emulated as v1.12-v1.15 do it, with and without the extender, and
ringroute end to end on it: admission sizes spec.networkTopology from the HyperNodes, the emulated scheduler keeps
the job within one HyperNode of that tier, and the extender picks the fewest leaves inside it."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import numpy as np
import pytest

from tests.support.admission import apply_ops, leaf_spine_objects, load_example, without_vendor_plugin
from tests.support.extender import RESOURCE, sim_node
from webhook.admission.jobview import read_job
from webhook.admission.mutation import plan_create
from webhook.admission.policy import validate
from webhook.admission.policy.network_topology import ClusterFacts, topology_facts
from webhook.common.metrics import Metrics
from webhook.common.settings import Settings
from webhook.extender.app import ExtenderService
from webhook.volcano_emulation.allocate_action import VolcanoAllocate, VolcanoConfig
from webhook.volcano_emulation.cluster_objects import SimJob, SimNode, make_job
from webhook.volcano_emulation.network_topology import (
    Amounts,
    PluginArguments,
    SessionHyperNode,
    SessionHyperNodes,
    binpack_score,
    hypernode_order_scores,
    normal_pod_scores,
)

RELEASES = [(1, 12), (1, 13), (1, 14), (1, 15)]
FREE = (2, 3, 2, 4, 1, 4)
"""Free nodes per leaf of the cluster of the report (24 nodes, 6 leaves of 4)."""


@pytest.fixture(autouse=True)
def quiet_extender() -> None:
    logging.getLogger("webhook.extender.app").setLevel(logging.WARNING)


def cluster(seed: int, *, spine_labels: bool = True, free: tuple[int, ...] = FREE) -> list[SimNode]:
    """6 leaves of 4 nodes, `free[leaf]` of them free (the busy ones at random), node names unrelated to leaves.
    Every node is labelled with its leaf (`volcano.sh/tor`, what the HyperNodes select on); with `spine_labels`
    also with leaf and spine group (`volcano.sh/hypernode`, `volcano.sh/hypercluster`)."""
    rng = np.random.default_rng(seed)
    names = [f"node-{i:02d}" for i in rng.permutation(24)]
    nodes = []
    for leaf, count in enumerate(free):
        busy = set(rng.choice(4, size=4 - count, replace=False).tolist())
        for slot in range(4):
            labels = {"volcano.sh/tor": f"leaf-{leaf}"}
            if spine_labels:
                labels |= {"volcano.sh/hypernode": f"leaf-{leaf}", "volcano.sh/hypercluster": "spine"}
            nodes.append(sim_node(names[leaf * 4 + slot], labels, busy=slot in busy))
    return sorted(nodes, key=lambda n: n.name)


HYPERNODES = leaf_spine_objects(6, 4)[1]
"""leaf-0..leaf-5 (tier 1, labelMatch volcano.sh/tor) under `spine` (tier 2)."""


def place(
    job: SimJob,
    release: tuple[int, int],
    *,
    seed: int,
    extender: bool,
    nodes: list[SimNode] | None = None,
    metrics: Metrics | None = None,
    sessions: int = 3,
) -> list[str]:
    """The leaves the job landed on (empty when it was not placed within `sessions` sessions)."""
    nodes = nodes if nodes is not None else cluster(seed)
    service = ExtenderService(Settings(), metrics or Metrics()) if extender else None
    config = VolcanoConfig(release=release, events=release >= (1, 13))
    volcano = VolcanoAllocate(nodes, config, service, np.random.default_rng(seed), hypernodes=HYPERNODES)
    for _ in range(sessions):
        volcano.session([job])
        if job.placed:
            break
    by_name = {n.name: n for n in nodes}
    return sorted({by_name[name].labels["volcano.sh/tor"] for name in job.placed.values()})


def sim_job(size: int, topology: dict[str, Any] | None, name: str = "llm") -> SimJob:
    return make_job("team-a", name, size, cards=8, resource=RESOURCE, network_topology=topology)


HARD_SPINE = {"mode": "hard", "highestTierAllowed": 2}
HARD_LEAF = {"mode": "hard", "highestTierAllowed": 1}


# -- Volcano alone ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("release", RELEASES, ids=lambda r: f"{r[0]}.{r[1]}")
def test_volcano_alone_keeps_a_hard_tier_two_job_in_the_spine_but_not_on_the_fewest_leaves(
    release: tuple[int, int],
) -> None:
    # Real Volcano v1.15.1 with these HyperNodes put the 6-pod job on 3 leaves in 3 runs of 10.
    leaves = Counter(len(place(sim_job(6, HARD_SPINE), release, seed=seed, extender=False)) for seed in range(25))
    assert 0 not in leaves
    assert max(leaves) >= 3


@pytest.mark.parametrize("release", RELEASES, ids=lambda r: f"{r[0]}.{r[1]}")
@pytest.mark.parametrize("extender", [False, True])
def test_a_hard_tier_one_six_pod_job_never_starts_where_no_leaf_holds_six_nodes(
    release: tuple[int, int], extender: bool
) -> None:
    empty = cluster(0, free=(4, 4, 4, 4, 4, 4))
    assert place(sim_job(6, HARD_LEAF), release, seed=0, extender=extender, nodes=empty) == []


@pytest.mark.parametrize("release", RELEASES, ids=lambda r: f"{r[0]}.{r[1]}")
def test_a_soft_job_is_placed_even_where_no_leaf_holds_it(release: tuple[int, int]) -> None:
    empty = cluster(0, free=(4, 4, 4, 4, 4, 4))
    assert place(sim_job(6, {"mode": "soft", "highestTierAllowed": 1}), release, seed=0, extender=True, nodes=empty)


# -- with the extender -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("release", RELEASES, ids=lambda r: f"{r[0]}.{r[1]}")
def test_with_the_extender_every_six_pod_job_lands_on_the_fewest_leaves_within_its_spine(
    release: tuple[int, int],
) -> None:
    leaves = {len(place(sim_job(6, HARD_SPINE), release, seed=seed, extender=True)) for seed in range(25)}
    assert leaves == {2}


@pytest.mark.parametrize("release", RELEASES, ids=lambda r: f"{r[0]}.{r[1]}")
def test_a_four_pod_job_at_tier_one_lands_on_one_leaf_with_and_without_the_extender(release: tuple[int, int]) -> None:
    for extender in (False, True):
        found = {tuple(place(sim_job(4, HARD_LEAF), release, seed=seed, extender=extender)) for seed in range(10)}
        assert {len(leaves) for leaves in found} == {1}
        assert {leaves[0] for leaves in found} <= {"leaf-3", "leaf-5"}  # the only leaves with 4 free nodes


def test_where_labels_name_only_leaves_the_extender_stays_out_of_a_tier_two_job() -> None:
    metrics = Metrics()
    outcomes: Counter[int] = Counter()
    for seed in range(10):
        nodes = cluster(seed, spine_labels=False)
        outcomes[
            len(place(sim_job(6, HARD_SPINE), (1, 15), seed=seed, extender=True, nodes=nodes, metrics=metrics))
        ] += 1
    assert 0 not in outcomes
    assert metrics.extender_gang_plans.labels("left_to_volcano")._value.get() >= 10
    assert metrics.extender_gang_plans.labels("enforced")._value.get() == 0
    assert metrics.extender_requests.labels(verb="predicate", outcome="unfit")._value.get() == 0


# -- ringroute end to end on the emulation ---------------------------------------------------------------------


def admitted(replicas: int, facts: ClusterFacts) -> dict[str, Any]:
    job = without_vendor_plugin(load_example("distributed-route-plan.yaml"))
    job["spec"]["tasks"][0]["replicas"] = job["spec"]["minAvailable"] = replicas
    return apply_ops(job, plan_create(read_job(job, Settings()), facts).ops)


@pytest.mark.parametrize("release", RELEASES, ids=lambda r: f"{r[0]}.{r[1]}")
def test_admission_sized_jobs_land_on_the_fewest_leaves_and_an_impossible_tier_is_refused(
    release: tuple[int, int],
) -> None:
    node_objects, hypernodes = leaf_spine_objects(6, 4)
    facts = ClusterFacts(topology=topology_facts(hypernodes, node_objects, {RESOURCE}))
    six, four = admitted(6, facts), admitted(4, facts)
    assert six["spec"]["networkTopology"] == HARD_SPINE
    assert four["spec"]["networkTopology"] == HARD_LEAF
    for seed in range(10):
        assert len(place(sim_job(6, six["spec"]["networkTopology"]), release, seed=seed, extender=True)) == 2
        assert len(place(sim_job(4, four["spec"]["networkTopology"]), release, seed=seed, extender=True)) == 1
    impossible = without_vendor_plugin(load_example("distributed-route-plan.yaml"))
    impossible["spec"]["tasks"][0]["replicas"] = impossible["spec"]["minAvailable"] = 6
    impossible["spec"]["networkTopology"] = HARD_LEAF
    [violation] = validate(impossible, None, Settings(), facts=facts)
    assert "largest: tier 1 leaf-0 4 nodes, tier 2 spine 24 nodes" in violation.render()


# -- the plugin's formulas against Volcano's own tests ----------------------------------------------------------


def test_hypernode_binpack_scores_match_volcano_1_15s_test_of_its_hypernode_order_function() -> None:
    # TestHyperNodeOrderFn, "score hypernodes for a subjob with default plugin arguments" (v1.15.1).
    giga = 1e9
    cpu_mem = {"s3": (2000, 4), "s4": (4000, 4), "s5": (2000, 8), "s6": (4000, 8)}
    leaves = {name: [f"{name}-n1", f"{name}-n2"] for name in cpu_mem}
    node_amounts = {n: Amounts(cpu_mem[leaf][0], cpu_mem[leaf][1] * giga) for leaf, ns in leaves.items() for n in ns}
    members = {
        "s3": leaves["s3"],
        "s4": leaves["s4"],
        "s5": leaves["s5"],
        "s6": leaves["s6"],
        "s1": leaves["s3"] + leaves["s4"],
        "s2": leaves["s5"] + leaves["s6"],
        "s0": [n for ns in leaves.values() for n in ns],
    }
    session = SessionHyperNodes(
        {name: SessionHyperNode(name, 1, None, frozenset(ns)) for name, ns in members.items()}, (1, 2, 3), None, {}
    )
    allocatable = {name: sum_amounts(node_amounts[n] for n in ns) for name, ns in members.items()}
    used = {name: Amounts() for name in members}
    request = Amounts(8000, 8 * giga)  # two pods of 4 CPUs and 4G
    scores = hypernode_order_scores(
        list(members),
        request,
        used=used,
        allocatable=allocatable,
        session=session,
        task_nodes=["", ""],
        args=PluginArguments(),
    )
    expected = {"s0": 25.0, "s1": 58.3, "s2": 45.8, "s3": 0.0, "s4": 100.0, "s5": 0.0, "s6": 75.0}
    assert {name: round(score, 1) for name, score in scores.items()} == expected


def sum_amounts(items: Any) -> Amounts:
    out = Amounts()
    for item in items:
        out = out.plus(item)
    return out


def test_normal_pod_binpack_scores_match_volcano_1_15s_test() -> None:
    # Test_batchNodeOrderFnForNormalPods (v1.15.1): 2,000 half-used nodes under 200, 40, 5 and 1 HyperNodes.
    args = PluginArguments(
        weight=10, binpack={"cpu": 5, "memory": 5, "example.com/foo": 5}, normal_pod_enable=True, normal_pod_fading=1
    )
    counts = (200, 40, 5, 1)
    members: dict[str, set[str]] = {}
    tiers: dict[str, int] = {}
    for tier, count in enumerate(counts, start=1):
        for i in range(2000):
            name = f"hypernode-tier-{tier}-index-{i % count}"
            members.setdefault(name, set()).add(f"node-{i}")
            tiers[name] = tier
    session = SessionHyperNodes(
        {name: SessionHyperNode(name, tiers[name], None, frozenset(ns)) for name, ns in members.items()},
        (1, 2, 3, 4),
        None,
        {},
    )
    node = Amounts(100_000, 8000, {"example.com/foo": 10})
    half = Amounts(50_000, 4000, {"example.com/foo": 5})
    allocatable = {name: sum_amounts(node for _ in ns) for name, ns in members.items()}
    used = {name: sum_amounts(half for _ in ns) for name, ns in members.items()}
    scores = normal_pod_scores(
        ["node-0", "node-1999"], half, used=used, allocatable=allocatable, session=session, args=args
    )
    for score in scores.values():
        assert score / (100 * args.weight) == pytest.approx(0.515375)


def test_a_hypernode_that_would_be_overused_scores_zero() -> None:
    assert binpack_score(Amounts(9000), Amounts(), Amounts(8000), PluginArguments()) == 0.0
    assert binpack_score(Amounts(4000), Amounts(2000), Amounts(8000), PluginArguments()) == pytest.approx(0.75)
