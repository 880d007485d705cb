"""The emulated Volcano allocate action with and without the extender, and `ringroute simulate-scheduling`."""

from __future__ import annotations

import json
import logging
from collections import Counter
from typing import Any

import numpy as np
import pytest

from tests.support.extender import RESOURCE, job, sim_node, tor
from webhook.cli.main import main
from webhook.common.metrics import Metrics
from webhook.common.settings import Settings, settings_from_mapping
from webhook.extender.app import ExtenderService
from webhook.volcano_emulation.allocate_action import VolcanoAllocate, VolcanoConfig, num_feasible_nodes_to_find
from webhook.volcano_emulation.cluster_objects import SimNode
from webhook.volcano_emulation.experiment import ClusterSpec, simulate, summarise


@pytest.fixture(autouse=True)
def quiet_extender() -> None:
    logging.getLogger("webhook.extender.app").setLevel(logging.WARNING)


def measured_cluster(seed: int) -> list[SimNode]:
    """24 nodes on 6 leaves with 2, 3, 2, 4, 1, 4 free (the cluster of the report), busy nodes at random
    positions and the node list in name order, leaf membership unrelated to names."""
    rng = np.random.default_rng(seed)
    free = (2, 3, 2, 4, 1, 4)
    names = [f"node-{i:02d}" for i in rng.permutation(24)]
    nodes = []
    for leaf, count in enumerate(free):
        busy = set(rng.choice(4, size=4 - count, replace=False).tolist())
        for slot in range(4):
            nodes.append(sim_node(names[leaf * 4 + slot], tor(f"tor-{leaf}"), busy=slot in busy))
    return sorted(nodes, key=lambda n: n.name)


def leaves_of_six_pod_job(config: VolcanoConfig, settings: Settings | None, seed: int) -> int:
    nodes = measured_cluster(seed)
    service = ExtenderService(settings, Metrics()) if settings is not None else None
    volcano = VolcanoAllocate(nodes, config, service, np.random.default_rng(seed))
    six = job("llm", 6)
    volcano.session([six])
    assert len(six.placed) == 6
    by_name = {n.name: n for n in nodes}
    return len({by_name[name].labels["volcano.sh/tor"] for name in six.placed.values()})


CONFIGS = [
    VolcanoConfig(release=(1, 7)),
    VolcanoConfig(release=(1, 9)),
    VolcanoConfig(release=(1, 10)),
    VolcanoConfig(release=(1, 13), events=True),
    VolcanoConfig(release=(1, 16), events=True),
    VolcanoConfig(release=(1, 7), session_open=False),
    VolcanoConfig(release=(1, 10), session_open=False),
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.release}-open{c.session_open}-events{c.events}")
def test_every_six_pod_job_lands_on_two_leaves_of_the_measured_cluster(config: VolcanoConfig) -> None:
    settings = Settings()
    assert {leaves_of_six_pod_job(config, settings, seed) for seed in range(25)} == {2}


def test_volcano_alone_spreads_the_six_pod_job_over_more_leaves() -> None:
    counts = Counter(leaves_of_six_pod_job(VolcanoConfig(), None, seed) for seed in range(25))
    assert sum(k * v for k, v in counts.items()) / 25 > 3.0


def test_scoring_each_call_on_its_own_spreads_the_gang_as_measured_on_real_volcano() -> None:
    # The extender before gang plans: the emulation reproduces the 3-4 leaves seen on a real cluster.
    settings = settings_from_mapping({"extender": {"gangPlanning": False}})
    counts = Counter(leaves_of_six_pod_job(VolcanoConfig(), settings, seed) for seed in range(25))
    assert min(counts) >= 3


def test_the_extender_never_hears_of_nodes_the_job_already_filled() -> None:
    nodes = [sim_node(f"a{i}", tor("A")) for i in range(4)]
    seen: list[str] = []
    service = ExtenderService(Settings(), Metrics())
    original = service.predicate

    def spy(raw: bytes | bytearray | memoryview) -> tuple[Any, str]:
        seen.append(json.loads(bytes(raw))["node"]["Name"])
        return original(raw)

    service.predicate = spy  # type: ignore[method-assign]
    volcano = VolcanoAllocate(nodes, VolcanoConfig(), service, np.random.default_rng(0))
    four = job("four", 4)
    volcano.session([four])
    # Task k sees 4 - k nodes: resource fit drops the filled ones before any plugin predicate.
    assert len(seen) == 4 + 3 + 2 + 1
    assert volcano.calls.prioritize == 3


@pytest.mark.parametrize(("nodes", "expected"), [(24, 24), (100, 100), (1000, 420), (5000, 500), (10_000, 500)])
def test_volcano_finds_only_a_share_of_the_feasible_nodes_on_large_clusters(nodes: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(nodes, VolcanoConfig()) == expected


def test_an_enforced_plan_reaches_the_bound_where_volcano_offers_only_part_of_the_free_nodes() -> None:
    spec = ClusterSpec(leaves=125, servers_per_leaf=8, occupancy=0.2)
    sizes = [16, 12]
    enforced = simulate(
        "ringroute", spec, sizes, seed=3, config=VolcanoConfig(), service=ExtenderService(Settings(), Metrics())
    )
    assert [o.leaves for o in enforced] == [o.leaves_bound for o in enforced]
    alone = simulate("volcano", spec, sizes, seed=3, config=VolcanoConfig(), service=None)
    assert all(o.leaves > o.leaves_bound for o in alone)


def test_jobs_on_a_three_tier_fabric_stay_within_the_fewest_spine_domains() -> None:
    spec = ClusterSpec(leaves=32, servers_per_leaf=8, leaves_per_pod=4, occupancy=0.6)
    sizes = [16, 8, 24, 12]
    packed = simulate(
        "ringroute", spec, sizes, seed=1, config=VolcanoConfig(), service=ExtenderService(Settings(), Metrics())
    )
    alone = simulate("volcano", spec, sizes, seed=1, config=VolcanoConfig(), service=None)
    assert [o.leaves for o in packed] == [o.leaves_bound for o in packed]
    assert summarise(packed)["mean_spines"] < summarise(alone)["mean_spines"]


def test_every_placed_node_is_used_once_and_jobs_need_one_session() -> None:
    spec = ClusterSpec(leaves=16, servers_per_leaf=8, occupancy=0.5)
    outcomes = simulate(
        "ringroute", spec, [8, 16, 8], seed=2, config=VolcanoConfig(), service=ExtenderService(Settings(), Metrics())
    )
    nodes = [n for o in outcomes for n in o.nodes]
    assert len(nodes) == len(set(nodes)) == 32
    assert {o.sessions for o in outcomes} == {1}


def test_a_node_with_cards_in_use_never_takes_a_route_planned_task() -> None:
    nodes = [
        sim_node("a0", tor("A")),
        SimNode("a1", {"accelerator/huawei-npu": "ascend-1980", **tor("A")}, 8, RESOURCE),
    ]
    partial = job("partial", 1, route_planned=False)
    partial.tasks[0]["Resreq"]["ScalarResources"][RESOURCE] = 4000.0
    nodes[1].tasks["p"] = dict(partial.tasks[0], NodeName="a1", Status=32)
    volcano = VolcanoAllocate(nodes, VolcanoConfig(), ExtenderService(Settings(), Metrics()), np.random.default_rng(0))
    two = job("two", 2)
    volcano.session([two])
    assert two.placed == {}


def test_command_prints_job_lines_summaries_and_leaves_per_job(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["simulate-scheduling", "--leaves", "16", "--servers-per-leaf", "4", "--jobs", "8,4", "--occupancy", "0.4"]
    )
    assert code == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    summaries = {line["summary"]: line for line in lines if "summary" in line}
    assert set(summaries) == {"volcano", "ringroute"}
    assert summaries["ringroute"]["jobs_at_bound"] == 2
    table = lines[-1]["leaves_per_job"]
    assert table["ringroute"] == table["optimum"]
    assert set(table) == {"volcano", "ringroute", "optimum"}
    assert all(line["ring_busbw_planned"] is not None for line in lines if line.get("scheduler") == "ringroute")


def test_command_rejects_a_bad_job_list_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate-scheduling", "--jobs", "8,x"]) == 2
    assert "--jobs: '8,x' is not a comma-separated list" in capsys.readouterr().err


def test_command_rejects_a_release_before_1_7(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate-scheduling", "--volcano-version", "1.6"]) == 2
    assert "--volcano-version" in capsys.readouterr().err


def test_the_score_steps_outweigh_what_nodeorder_and_binpack_add_at_their_default_weights() -> None:
    from webhook.extender.scoring import PLAN_BASE, SAME_LEAF
    from webhook.extender.state import PLAN_LEAF_STEP
    from webhook.extender.volcano_releases import RELEASES
    from webhook.volcano_emulation import max_score_spread

    weight = Settings().extender.score_weight
    smallest_step = min(PLAN_LEAF_STEP, PLAN_BASE - (SAME_LEAF[0] + SAME_LEAF[1]))
    for release in RELEASES:
        assert weight * smallest_step > max_score_spread(release, binpack=True).independent


def test_with_scores_alone_a_weight_of_one_loses_to_image_locality_and_the_default_weight_wins() -> None:
    # Without onSessionOpen the plan is only scored; half the nodes hold the training image (100 points).
    spec = ClusterSpec(leaves=12, servers_per_leaf=8, occupancy=0.5)
    sizes = [8, 12, 6, 10]
    config = VolcanoConfig(release=(1, 10), session_open=False)
    weak = settings_from_mapping({"extender": {"scoreWeight": 1}})
    results = {}
    for name, settings in (("weight 1", weak), ("default", Settings())):
        outcomes = [
            o
            for seed in range(6)
            for o in simulate(
                "ringroute", spec, sizes, seed=seed, config=config, service=ExtenderService(settings, Metrics())
            )
        ]
        results[name] = sum(o.leaves - o.leaves_bound for o in outcomes)
    assert results["default"] == 0
    assert results["weight 1"] > 0
