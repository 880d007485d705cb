"""Predicate and prioritize decisions, the node view and the gang plans of the extender (no HTTP)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from tests.support.extender import (
    RESOURCE,
    decoded_node,
    decoded_session,
    decoded_task,
    job,
    leaf_spine,
    node,
    session_open,
    tor,
)
from webhook.common.settings import (
    DEFAULT_PROFILES,
    ExtenderSettings,
    Settings,
    TopologySettings,
    settings_from_mapping,
)
from webhook.extender.node_paths import label_path_reader
from webhook.extender.scoring import PLAN_BASE, predicate, prioritize
from webhook.extender.state import MAX_REMEMBERED_JOBS, ExtenderState
from webhook.extender.wire import CODE_UNSCHEDULABLE, CODE_UNSCHEDULABLE_AND_UNRESOLVABLE
from webhook.volcano_emulation.cluster_objects import task_info

SETTINGS = Settings()
WEIGHT = SETTINGS.extender.score_weight


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def state(settings: Settings = SETTINGS) -> ExtenderState:
    return ExtenderState(settings, clock=Clock())


def measured_cluster(busy_per_leaf: tuple[int, ...] = (2, 1, 2, 0, 3, 0)) -> list[dict[str, Any]]:
    """6 leaves x 4 nodes; by default the free nodes per leaf are 2, 3, 2, 4, 1, 4 (the cluster of the report)."""
    nodes = []
    for leaf, busy in enumerate(busy_per_leaf):
        for slot in range(4):
            nodes.append(node(f"npu-{leaf}{slot}", tor(f"tor-{leaf}"), busy=slot < busy))
    return nodes


# --------------------------------------------------------------------------------------------------- predicate


def test_route_planned_task_fits_a_node_with_every_card_free() -> None:
    verdict = predicate(decoded_task(job().tasks[0]), decoded_node(node("n1", tor("A"))), state())
    assert verdict.passes


def test_route_planned_task_is_refused_a_partly_used_node_with_the_free_card_count() -> None:
    small = job("small", 1, route_planned=False)
    small_task = dict(small.tasks[0], Resreq={"ScalarResources": {RESOURCE: 4000.0}})
    info = node("n1", tor("A"))
    info["Tasks"] = {"x": dict(small_task, NodeName="n1", Status=32)}
    info["Idle"]["ScalarResources"][RESOURCE] = 4000.0
    verdict = predicate(decoded_task(job().tasks[0]), decoded_node(info), state())
    assert verdict.code == CODE_UNSCHEDULABLE
    assert "node n1 has 4 of 8 huawei.com/ascend-1980 free" in verdict.reason
    assert "takes whole nodes only" in verdict.reason


def test_releasing_cards_count_as_free_and_pipelined_cards_do_not() -> None:
    info = node("n1", tor("A"))
    info["Idle"]["ScalarResources"][RESOURCE] = 0.0
    info["Releasing"] = {"ScalarResources": {RESOURCE: 8000.0}}
    task = decoded_task(job().tasks[0])
    assert predicate(task, decoded_node(info), state()).passes
    info["Pipelined"] = {"ScalarResources": {RESOURCE: 8000.0}}
    assert not predicate(task, decoded_node(info), state()).passes


def test_node_without_npu_cards_is_unresolvable_for_a_route_planned_task() -> None:
    info = node("cpu-1", tor("A"), cards=0)
    info["Allocatable"]["ScalarResources"] = {}
    verdict = predicate(decoded_task(job().tasks[0]), decoded_node(info), state())
    assert verdict.code == CODE_UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "has no huawei.com/ascend-1980 cards" in verdict.reason


def test_task_without_route_planning_may_share_a_node() -> None:
    info = node("n1", tor("A"))
    info["Idle"]["ScalarResources"][RESOURCE] = 4000.0
    assert predicate(decoded_task(job(route_planned=False).tasks[0]), decoded_node(info), state()).passes


def test_route_plan_annotation_on_the_pod_counts_like_the_env() -> None:
    task = job(route_planned=False).tasks[0]
    task["Pod"]["metadata"]["annotations"]["ringroute.io/route-plan"] = "true"
    assert decoded_task(task).route_planned


def test_non_ringroute_task_fits_anywhere_and_gets_no_scores() -> None:
    task = job().tasks[0]
    del task["Pod"]["metadata"]["labels"]["ring-controller.cce"]
    view = decoded_task(task)
    busy = decoded_node(node("n1", tor("A"), busy=True))
    assert view.profile is None
    assert predicate(view, busy, state()).passes
    assert prioritize(view, [busy], state()) == {}


def test_unknown_profile_label_value_is_not_judged() -> None:
    task = job().tasks[0]
    task["Pod"]["metadata"]["labels"]["ring-controller.cce"] = "gpu-a100"
    assert decoded_task(task).profile is None


def test_predicate_message_names_the_resource_of_a_16_card_profile() -> None:
    profile = msgspec.structs.replace(
        DEFAULT_PROFILES[0], label_value="ascend-snt9b23", resource_name="huawei.com/ascend-snt9b23", cards_per_node=16
    )
    settings = Settings(profiles=(*DEFAULT_PROFILES, profile))
    task = job().tasks[0]
    task["Pod"]["metadata"]["labels"]["ring-controller.cce"] = "ascend-snt9b23"
    cards = {"huawei.com/ascend-snt9b23": "16"}
    task["Pod"]["spec"]["containers"][0]["resources"] = {"requests": cards, "limits": cards}
    task["Resreq"] = task["InitResreq"] = {"ScalarResources": {"huawei.com/ascend-snt9b23": 16000.0}}
    info = node("n1", tor("A"))
    info["Allocatable"]["ScalarResources"] = {"huawei.com/ascend-snt9b23": 16000.0}
    info["Idle"]["ScalarResources"] = {"huawei.com/ascend-snt9b23": 8000.0}
    verdict = predicate(decoded_task(task, settings), decoded_node(info), state(settings))
    assert "has 8 of 16 huawei.com/ascend-snt9b23 free" in verdict.reason


# ------------------------------------------------------------------------------------------------------ plans


def test_session_plan_refuses_nodes_outside_the_fewest_leaves_and_names_them() -> None:
    bert = job()
    nodes = measured_cluster()
    memory = state()
    memory.open_session(decoded_session(session_open([bert], nodes)))
    task = decoded_task(bert.tasks[0])
    verdicts = {n["Name"]: predicate(task, decoded_node(n), memory) for n in nodes}
    allowed = {name for name, v in verdicts.items() if v.passes}
    leaves = {name[:5] for name in allowed}
    # Leaves 3 (4 free) and 0 (2 free) hold the 6 pods exactly.
    assert leaves == {"npu-3", "npu-0"}
    assert len(allowed) == 6
    refused = verdicts["npu-51"]
    assert refused.code == CODE_UNSCHEDULABLE
    assert "outside the leaves ringroute planned for route-planned job team-a/bert-pg: tor-0, tor-3" in refused.reason
    assert "the fewest leaves that hold its 6 pending pods" in refused.reason


def test_planned_nodes_outscore_every_other_node_and_fill_leaf_after_leaf() -> None:
    bert = job()
    nodes = measured_cluster()
    memory = state()
    memory.open_session(decoded_session(session_open([bert], nodes)))
    scores = prioritize(decoded_task(bert.tasks[0]), [decoded_node(n) for n in nodes], memory)
    planned = {name: s for name, s in scores.items() if s >= WEIGHT * PLAN_BASE}
    assert {name[:5] for name in planned} == {"npu-0", "npu-3"}
    others = [s for name, s in scores.items() if name not in planned]
    assert max(others) < min(planned.values())
    # One score per leaf: Volcano fills one leaf before the next, so pod-index neighbours share a leaf.
    by_leaf: dict[str, set[float]] = {}
    for name, score in planned.items():
        by_leaf.setdefault(name[:5], set()).add(score)
    assert all(len(values) == 1 for values in by_leaf.values())
    assert len(set().union(*by_leaf.values())) == 2


def test_the_partly_used_leaf_of_a_plan_is_filled_last() -> None:
    bert = job("bert", 5)
    nodes = [node(f"a{i}", tor("A")) for i in range(3)] + [node(f"b{i}", tor("B")) for i in range(4)]
    memory = state()
    memory.open_session(decoded_session(session_open([bert], nodes)))
    scores = prioritize(decoded_task(bert.tasks[0]), [decoded_node(n) for n in nodes], memory)
    # B (4 free) is emptied, A (3 free) gives the fifth node: every B node outscores every A node.
    assert min(scores[f"b{i}"] for i in range(4)) > max(scores[f"a{i}"] for i in range(3)) >= WEIGHT * PLAN_BASE


def test_without_session_open_the_plan_is_made_at_prioritize_from_the_npu_pods_annotation() -> None:
    bert = job()
    nodes = measured_cluster()
    memory = state()
    task = decoded_task(bert.tasks[0])
    assert task.npu_pods == 6
    # Predicate calls pass every free node: no plan exists before the candidates are known.
    assert all(predicate(task, decoded_node(n), memory).passes for n in nodes if not n["Tasks"])
    scores = prioritize(task, [decoded_node(n) for n in nodes if not n["Tasks"]], memory)
    planned = {name[:5] for name, s in scores.items() if s >= WEIGHT * PLAN_BASE}
    assert planned == {"npu-0", "npu-3"}
    plan = memory.plan_for(task)
    assert plan is not None
    assert not plan.enforced


def test_without_session_open_or_annotation_the_leaf_tiers_still_pack() -> None:
    bert = job()
    task_dict = bert.tasks[1]
    del task_dict["Pod"]["metadata"]["annotations"]["ringroute.io/npu-pods"]
    nodes = [node("a1", tor("A"), hosts=[(bert, 0)]), node("a2", tor("A")), node("b1", tor("B")), node("b2", tor("B"))]
    scores = prioritize(decoded_task(task_dict), [decoded_node(n) for n in nodes], state())
    assert scores["a2"] > scores["b1"] == scores["b2"]


def test_plan_leaves_out_nodes_the_pods_cannot_use() -> None:
    bert = job("bert", 4)
    nodes = [node(f"a{i}", tor("A")) for i in range(4)] + [node(f"b{i}", tor("B")) for i in range(3)]
    nodes += [node("c0", tor("C"))]
    nodes[0]["Node"]["spec"] = {"unschedulable": True}
    nodes[1]["Node"]["spec"] = {"taints": [{"key": "maintenance", "effect": "NoSchedule"}]}
    nodes[2]["State"] = {"Phase": 2, "Reason": "NotReady"}
    nodes[3]["Node"]["metadata"]["labels"].pop("accelerator/huawei-npu")
    memory = state()
    memory.open_session(decoded_session(session_open([bert], nodes)))
    plan = memory.plan_for(decoded_task(bert.tasks[0]))
    assert plan is not None
    # Leaf A looks free but none of its nodes can take the pods: B (3) and C (1) hold the job.
    assert plan.allowed == {"b0", "b1", "b2", "c0"}


def test_tolerated_taints_and_matching_affinity_keep_a_node_in_the_plan() -> None:
    bert = job("bert", 2)
    for task in bert.tasks:
        task["Pod"]["spec"]["tolerations"] = [{"key": "maintenance", "operator": "Exists"}]
        task["Pod"]["spec"]["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["x"]}]}]
                }
            }
        }
    nodes = [node("a0", {**tor("A"), "pool": "x"}), node("a1", {**tor("A"), "pool": "x"}), node("b0", tor("B"))]
    nodes[0]["Node"]["spec"] = {"taints": [{"key": "maintenance", "effect": "NoSchedule"}]}
    nodes[2]["Node"]["metadata"]["labels"]["pool"] = "y"
    memory = state()
    memory.open_session(decoded_session(session_open([bert], nodes)))
    plan = memory.plan_for(decoded_task(bert.tasks[0]))
    assert plan is not None
    assert plan.allowed == {"a0", "a1"}


def test_two_jobs_of_one_session_plan_disjoint_leaves() -> None:
    first, second = job("first", 4), job("second", 4)
    nodes = [node(f"a{i}", tor("A")) for i in range(4)] + [node(f"b{i}", tor("B")) for i in range(4)]
    memory = state()
    memory.open_session(decoded_session(session_open([first, second], nodes)))
    plan_one = memory.plan_for(decoded_task(first.tasks[0]))
    plan_two = memory.plan_for(decoded_task(second.tasks[0]))
    assert plan_one is not None
    assert plan_two is not None
    assert plan_one.plan.leaves != plan_two.plan.leaves
    assert not plan_one.allowed & plan_two.allowed


def test_a_replacement_pod_is_planned_back_onto_the_leaf_of_its_job() -> None:
    bert = job("bert", 4)
    nodes = [
        node("a0", tor("A"), hosts=[(bert, 0)]),
        node("a1", tor("A"), hosts=[(bert, 1)]),
        node("a2", tor("A"), hosts=[(bert, 2)]),
        node("a3", tor("A")),
        *[node(f"b{i}", tor("B")) for i in range(4)],
    ]
    placed = {"bert-worker-0": "a0", "bert-worker-1": "a1", "bert-worker-2": "a2"}
    memory = state()
    memory.open_session(decoded_session(session_open([bert], nodes, placed)))
    plan = memory.plan_for(decoded_task(bert.tasks[3]))
    assert plan is not None
    assert plan.allowed == {"a3"}
    assert plan.plan.need == 1


def test_an_enforced_plan_is_relaxed_after_the_job_stays_pending_through_plan_attempts_sessions() -> None:
    bert = job()
    nodes = measured_cluster()
    memory = state()
    task = decoded_task(bert.tasks[0])
    enforced = []
    for _ in range(4):
        memory.open_session(decoded_session(session_open([bert], nodes)))
        plan = memory.plan_for(task)
        assert plan is not None
        enforced.append(plan.enforced)
    assert enforced == [True, True, False, False]


def test_a_placed_job_resets_its_failed_attempts() -> None:
    bert = job("bert", 2)
    nodes = [node(f"a{i}", tor("A")) for i in range(4)]
    memory = state()
    task = decoded_task(bert.tasks[0])
    for _ in range(2):
        memory.open_session(decoded_session(session_open([bert], nodes)))
        assert memory.plan_for(task) is not None
    placed = {"bert-worker-0": "a0", "bert-worker-1": "a1"}
    memory.open_session(decoded_session(session_open([bert], nodes, placed)))
    other = job("other", 2)
    memory.open_session(decoded_session(session_open([bert, other], nodes, placed)))
    plan = memory.plan_for(decoded_task(other.tasks[0]))
    assert plan is not None
    assert plan.enforced


def test_allocate_events_teach_where_the_job_went_and_deallocate_undoes_it() -> None:
    bert = job("bert", 3)
    nodes = [node(f"a{i}", tor("A")) for i in range(2)] + [node(f"b{i}", tor("B")) for i in range(2)]
    memory = state()
    # Task 0's predicate calls showed node a0 before Volcano allocated it there.
    assert predicate(decoded_task(bert.tasks[0]), decoded_node(nodes[0]), memory).passes
    allocated = decoded_task(task_info(bert, 0, node="a0", status=2))
    memory.allocated(allocated)
    task = decoded_task(bert.tasks[1])
    assert memory.hosted_nodes(task) == {"a0": 1}
    scores = prioritize(task, [decoded_node(n) for n in nodes[1:]], memory)
    assert scores["a1"] > scores["b0"]
    memory.deallocated(allocated)
    assert memory.hosted_nodes(task) == {}


def test_gang_planning_can_be_turned_off() -> None:
    bert = job()
    settings = settings_from_mapping({"extender": {"gangPlanning": False}})
    memory = state(settings)
    memory.open_session(decoded_session(session_open([bert], measured_cluster())))
    assert memory.plan_for(decoded_task(bert.tasks[0], settings)) is None


# ------------------------------------------------------------------------------------------------- leaf tiers


def test_leaf_tiers_rank_same_leaf_then_room_then_same_spine_then_other() -> None:
    bert = job("bert", 3)
    settings = settings_from_mapping({"extender": {"gangPlanning": False}})
    nodes = [
        node("a1", leaf_spine("A", "S1"), hosts=[(bert, 0)]),
        node("a2", leaf_spine("A", "S1")),
        node("b1", leaf_spine("B", "S1")),
        node("c1", leaf_spine("C", "S2")),
        node("c2", leaf_spine("C", "S2")),
        node("c3", leaf_spine("C", "S2")),
        node("d1", leaf_spine("D", "S3")),
        node("plain", {}),
    ]
    scores = prioritize(decoded_task(bert.tasks[1], settings), [decoded_node(n) for n in nodes], state(settings))
    assert scores["a2"] > scores["c1"] > scores["b1"] > scores["d1"] > scores["plain"] == 0.0


def test_scores_are_weighted_by_the_score_weight_setting() -> None:
    bert = job()
    nodes = [decoded_node(n) for n in measured_cluster()]
    one = settings_from_mapping({"extender": {"scoreWeight": 1.0}})
    ten = settings_from_mapping({"extender": {"scoreWeight": 10.0}})
    low = prioritize(decoded_task(bert.tasks[0], one), nodes, state(one))
    high = prioritize(decoded_task(bert.tasks[0], ten), nodes, state(ten))
    assert high == {name: pytest.approx(10.0 * score) for name, score in low.items()}


def test_the_task_being_scheduled_is_not_counted_as_hosting_its_job() -> None:
    bert = job("bert", 2)
    memory = state()
    info = node("a1", tor("A"), hosts=[(bert, 0)])
    task = decoded_task(bert.tasks[0])
    memory.observe([decoded_node(info)], task)
    assert memory.hosted_nodes(task) == {}
    assert memory.hosted_nodes(decoded_task(bert.tasks[1])) == {"a1": 1}


def test_a_node_seen_empty_later_no_longer_hosts_the_job() -> None:
    bert = job("bert", 2)
    memory = state()
    task = decoded_task(bert.tasks[1])
    memory.observe([decoded_node(node("a1", tor("A"), hosts=[(bert, 0)]))], task)
    assert memory.hosted_nodes(task) == {"a1": 1}
    memory.observe([decoded_node(node("a1", tor("A")))], task)
    assert memory.hosted_nodes(task) == {}


# ---------------------------------------------------------------------------------------------------- memory


def test_state_forgets_jobs_after_the_ttl() -> None:
    bert = job("bert", 2)
    clock = Clock()
    memory = ExtenderState(Settings(extender=ExtenderSettings(job_memory_ttl_s=60.0)), clock=clock)
    task = decoded_task(bert.tasks[1])
    memory.observe([decoded_node(node("a1", tor("A"), hosts=[(bert, 0)]))], task)
    clock.now += 61.0
    memory.prune()
    assert memory.hosted_nodes(task) == {}


def test_job_memory_is_bounded_by_count() -> None:
    memory = state()
    for i in range(MAX_REMEMBERED_JOBS + 10):
        memory.allocated(decoded_task(task_info(job(f"j{i}", 1), 0, node="a0", status=2)))
    assert len(memory._memory) == MAX_REMEMBERED_JOBS


def test_configured_label_keys_are_read_top_most_first() -> None:
    settings = Settings(topology=TopologySettings(label_keys=("example.com/spine", "example.com/leaf")))
    read = ExtenderState(settings).read_path
    assert read({"example.com/leaf": "L1", "example.com/spine": "S1"}) == ("L1", "S1")
    assert read({"volcano.sh/tor": "T"}) is None


def test_default_reader_recognises_each_label_family() -> None:
    read = label_path_reader()
    assert read({"volcano.sh/tor": "T1"}) == ("T1",)
    assert read({"volcano.sh/hypernode": "H", "volcano.sh/hypercluster": "C"}) == ("H", "C")
    assert read(leaf_spine("L", "S")) == ("L", "S")
    assert read({"fabric.topograph.run/tier-1": "a", "fabric.topograph.run/tier-2": "b"}) == ("a", "b")
    assert read({}) is None


def test_node_views_from_requests_stay_within_the_memory_budget() -> None:
    settings = settings_from_mapping({"extender": {"maxStateMib": 1}})
    memory = state(settings)
    task = decoded_task(job().tasks[0], settings)
    big_labels = {f"example.com/label-{i}": "v" * 200 for i in range(50)}
    for i in range(400):
        memory.observe([decoded_node(node(f"fake-{i:04d}", {**tor("A"), **big_labels}))], task)
    assert memory.stored_bytes <= 2**20
    # The most recently seen nodes are the ones kept.
    assert "fake-0399" in memory.nodes
    assert "fake-0000" not in memory.nodes


def test_without_session_data_prioritize_reads_labels_only_for_nodes_it_has_not_seen_lately() -> None:
    import orjson

    from webhook.common.metrics import Metrics
    from webhook.extender.app import ExtenderService

    clock = Clock()
    service = ExtenderService(SETTINGS, Metrics(), ExtenderState(SETTINGS, clock=clock))
    task = job("bert", 2).tasks[0]
    labelled = [node(f"a{i}", tor("A")) for i in range(2)] + [node(f"b{i}", tor("B")) for i in range(3)]
    first, _ = service.prioritize(orjson.dumps({"task": task, "nodes": labelled}))
    unlabelled = [dict(n, Node=None) for n in labelled]
    # Within the path TTL the labels of known candidates are not read again: the same scores.
    second, _ = service.prioritize(orjson.dumps({"task": task, "nodes": unlabelled}))
    assert second == first
    assert min(first["nodeScore"].values()) > 0
    clock.now += 601.0
    third, _ = service.prioritize(orjson.dumps({"task": task, "nodes": unlabelled}))
    assert set(third["nodeScore"].values()) == {0.0}
