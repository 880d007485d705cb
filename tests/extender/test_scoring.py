"""Predicate and scoring logic of the scheduler extender, without HTTP."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.extender.payloads import job_task, leaf_spine, node, rename_go_keys, session_open, tor
from webhook.cli_extender import task_info
from webhook.extender_scoring import (
    ExtenderState,
    PayloadError,
    label_path_reader,
    predicate,
    prioritize,
    prioritize_body,
    read_task,
    score_nodes,
)
from webhook.extender_types import CODE_SUCCESS, CODE_UNSCHEDULABLE, CODE_UNSCHEDULABLE_AND_UNRESOLVABLE
from webhook.settings import Settings, TopologySettings

SETTINGS = Settings()


def fresh_state() -> ExtenderState:
    return ExtenderState(SETTINGS, path_reader=label_path_reader())


def example(data_dir: Path) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads((data_dir / "extender-prioritize.json").read_text(encoding="utf-8"))
    return payload


# ------------------------------------------------------------------------------------------------------ predicate


def test_route_planned_task_fits_a_node_with_every_card_free() -> None:
    answer = predicate(job_task(0), node("n1", tor("a")), SETTINGS, fresh_state())
    assert answer == {"status": "", "code": CODE_SUCCESS}


def test_route_planned_task_is_refused_a_partly_used_node_with_the_free_card_count() -> None:
    partly = node("n1", tor("a"))
    partly["Idle"]["ScalarResources"]["huawei.com/ascend-1980"] = 3000.0
    answer = predicate(job_task(0), partly, SETTINGS, fresh_state())
    assert answer["code"] == CODE_UNSCHEDULABLE
    assert "3 of 8 huawei.com/ascend-1980 free" in answer["status"]
    assert "n1" in answer["status"]
    assert "team-a/bert" in answer["status"]


def test_releasing_cards_count_as_free_and_pipelined_cards_do_not() -> None:
    releasing = node("n1", tor("a"), busy=True)
    releasing["Releasing"]["ScalarResources"] = {"huawei.com/ascend-1980": 8000.0}
    assert predicate(job_task(0), releasing, SETTINGS, fresh_state())["status"] == ""
    pipelined = node("n2", tor("a"))
    pipelined["Pipelined"]["ScalarResources"] = {"huawei.com/ascend-1980": 8000.0}
    assert "0 of 8" in predicate(job_task(0), pipelined, SETTINGS, fresh_state())["status"]


def test_node_without_npu_cards_is_unresolvable_for_a_route_planned_task() -> None:
    cpu_node = node("cpu-1", tor("a"))
    cpu_node["Allocatable"]["ScalarResources"] = None
    cpu_node["Idle"]["ScalarResources"] = None
    cpu_node["Node"]["status"]["allocatable"] = {"cpu": "64"}
    answer = predicate(job_task(0), cpu_node, SETTINGS, fresh_state())
    assert answer["code"] == CODE_UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "no huawei.com/ascend-1980 cards" in answer["status"]


def test_task_without_route_planning_may_share_a_node() -> None:
    task = job_task(0, route_planned=False, cards=4)
    partly = node("n1", tor("a"))
    partly["Idle"]["ScalarResources"]["huawei.com/ascend-1980"] = 4000.0
    assert predicate(task, partly, SETTINGS, fresh_state())["status"] == ""


def test_route_plan_annotation_on_the_pod_counts_like_the_env() -> None:
    task = job_task(0, route_planned=False)
    task["Pod"]["metadata"]["annotations"]["ringroute.io/route-plan"] = "true"
    assert read_task(task, SETTINGS).route_planned


def test_non_ringroute_task_fits_anywhere_without_reading_the_node() -> None:
    task = task_info(namespace="x", job_name="web", index=0, ring_label=None)
    assert predicate(task, "not even a node", SETTINGS, fresh_state()) == {"status": "", "code": CODE_SUCCESS}


def test_unknown_profile_label_value_is_not_judged() -> None:
    task = task_info(namespace="x", job_name="j", index=0, ring_label="ascend-9999")
    assert read_task(task, SETTINGS).profile is None


def test_predicate_message_names_the_resource_of_the_16_card_profile() -> None:
    task = job_task(0, ring_label="ascend-1980-snt9b23", cards=16)
    big = node("n1", tor("a"))
    for key in ("Allocatable", "Idle"):
        big[key]["ScalarResources"]["huawei.com/ascend-1980"] = 16000.0 if key == "Allocatable" else 8000.0
    answer = predicate(task, big, SETTINGS, fresh_state())
    assert "8 of 16 huawei.com/ascend-1980 free" in answer["status"]


# --------------------------------------------------------------------------------------------------- prioritize


def three_tier_cluster() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Job of 6: tasks 0-1 on leaf A (spine S1, 1 more free node); leaf B (S2) has room for the other 4;
    leaf C (S1) and D (S2) have one free node each. Returns (hosting nodes, candidate nodes)."""
    hosting = [
        node("a-0", leaf_spine("A", "S1"), hosts=[job_task(0)]),
        node("a-1", leaf_spine("A", "S1"), hosts=[job_task(1)]),
    ]
    candidates = [node("a-2", leaf_spine("A", "S1"))]
    candidates += [node(f"b-{i}", leaf_spine("B", "S2")) for i in range(5)]
    candidates += [node("c-0", leaf_spine("C", "S1")), node("d-0", leaf_spine("D", "S2"))]
    return hosting, candidates


def test_scores_rank_same_leaf_then_leaf_with_room_then_same_spine_then_other() -> None:
    hosting, candidates = three_tier_cluster()
    state = fresh_state()
    job = [job_task(0, node="a-0", status=32), job_task(1, node="a-1", status=32)] + [job_task(i) for i in range(2, 6)]
    state.open_session(session_open(job, hosting + candidates))
    scores = prioritize(job_task(2), candidates, SETTINGS, state)["nodeScore"]
    assert scores["a-2"] > scores["b-0"] > scores["c-0"] > scores["d-0"]
    assert all(0.0 <= s <= 100.0 for s in scores.values())
    assert len({scores[f"b-{i}"] for i in range(5)}) == 1


def test_hosting_nodes_in_the_payload_are_enough_without_session_open() -> None:
    hosting, candidates = three_tier_cluster()
    scores = prioritize(job_task(2), hosting + candidates, SETTINGS, fresh_state())["nodeScore"]
    assert scores["a-2"] == max(scores.values())
    assert scores["c-0"] > scores["d-0"]


def test_tasks_seen_by_earlier_predicate_calls_count_when_prioritize_gets_only_free_nodes() -> None:
    hosting, candidates = three_tier_cluster()
    state = fresh_state()
    for n in hosting + candidates:
        predicate(job_task(2), n, SETTINGS, state)
    _, context = score_nodes(read_task(job_task(2), SETTINGS), candidates, state)
    assert dict(context.hosted_leaves) == {"A": 2}
    assert context.placed == 2
    scores = prioritize(job_task(2), candidates, SETTINGS, state)["nodeScore"]
    assert scores["a-2"] == max(scores.values())


def test_a_node_seen_empty_later_no_longer_hosts_the_job() -> None:
    state = fresh_state()
    predicate(job_task(2), node("a-0", tor("A"), hosts=[job_task(0)]), SETTINGS, state)
    assert state.placed_nodes("team-a/bert-0c2d3e4f") == {"a-0": 1}
    predicate(job_task(2), node("a-0", tor("A")), SETTINGS, state)
    assert state.placed_nodes("team-a/bert-0c2d3e4f") == {}


def test_the_task_being_scheduled_is_not_counted_as_already_placed() -> None:
    state = fresh_state()
    task = job_task(0)
    predicate(task, node("a-0", tor("A"), hosts=[task]), SETTINGS, state)
    assert state.placed_nodes("team-a/bert-0c2d3e4f", exclude_uid=task["UID"]) == {}


def test_leaf_with_the_tightest_room_wins_when_the_job_size_is_known() -> None:
    candidates = [node(f"big-{i}", tor("big")) for i in range(8)] + [node(f"fit-{i}", tor("fit")) for i in range(4)]
    state = fresh_state()
    state.open_session(session_open([job_task(i) for i in range(4)], candidates))
    scores = prioritize(job_task(0), candidates, SETTINGS, state)["nodeScore"]
    assert scores["fit-0"] > scores["big-0"]


def test_leaf_with_most_room_wins_when_the_job_size_is_unknown() -> None:
    candidates = [node(f"big-{i}", tor("big")) for i in range(8)] + [node(f"fit-{i}", tor("fit")) for i in range(4)]
    scores = prioritize(job_task(0), candidates, SETTINGS, fresh_state())["nodeScore"]
    assert scores["big-0"] > scores["fit-0"]


def test_session_open_infers_job_size_from_npu_tasks_and_ignores_terminating_ones() -> None:
    tasks = [job_task(i) for i in range(5)]
    tasks[4]["Status"] = 64  # Releasing
    state = fresh_state()
    state.open_session(session_open(tasks, [], min_available=3))
    assert state.job_sizes == {"team-a/bert-0c2d3e4f": 4}


def test_nodes_without_topology_labels_score_zero() -> None:
    candidates = [node("lab-0", tor("A")), node("bare-0", {})]
    scores = prioritize(job_task(0), candidates, SETTINGS, fresh_state())["nodeScore"]
    assert scores["bare-0"] == 0.0
    assert scores["lab-0"] > 0.0


def test_non_ringroute_task_gets_no_scores() -> None:
    task = task_info(namespace="x", job_name="web", index=0, ring_label=None)
    assert prioritize(task, [node("n", tor("a"))], SETTINGS, fresh_state()) == {"nodeScore": {}, "errorMessage": ""}


def test_example_payload_prefers_the_free_node_on_the_leaf_hosting_worker_0(data_dir: Path) -> None:
    payload = example(data_dir)
    state = fresh_state()
    scores = prioritize(payload["task"], payload["nodes"], SETTINGS, state)["nodeScore"]
    assert set(scores) == {"npu-0101", "npu-0102"}
    assert scores["npu-0101"] >= 90.0
    assert "0 of 8" in predicate(payload["task"], payload["nodes"][1], SETTINGS, state)["status"]


# ---------------------------------------------------------------------------------------------- lenient reading


@pytest.mark.parametrize("style", ["lower-camel", "lower"])
def test_lower_case_field_names_give_the_same_scores(style: str) -> None:
    hosting, candidates = three_tier_cluster()
    expected = prioritize(job_task(2), hosting + candidates, SETTINGS, fresh_state())
    renamed_task = rename_go_keys(job_task(2), style)
    renamed_nodes = rename_go_keys(hosting + candidates, style)
    assert "milliCPU" in json.dumps(renamed_nodes) or "millicpu" in json.dumps(renamed_nodes)
    assert prioritize(renamed_task, renamed_nodes, SETTINGS, fresh_state()) == expected


def test_nulls_and_missing_fields_read_as_empty() -> None:
    task = job_task(0)
    bare_node: dict[str, Any] = {
        "Name": "n1",
        "Node": {
            "metadata": {"name": "n1", "labels": tor("A")},
            "status": {"allocatable": {"huawei.com/ascend-1980": "8"}},
        },
        "Idle": {"ScalarResources": {"huawei.com/ascend-1980": 8000}},
        "Allocatable": None,
        "Used": None,
        "Releasing": None,
        "Tasks": None,
        "Others": None,
    }
    assert predicate(task, bare_node, SETTINGS, fresh_state())["status"] == ""
    assert prioritize(task, [bare_node], SETTINGS, fresh_state())["nodeScore"]["n1"] > 0
    task["Resreq"] = None
    task["Pod"]["metadata"]["annotations"] = None
    assert read_task(task, SETTINGS).profile is not None


def test_a_huge_tasks_map_is_read() -> None:
    crowded = node("n1", tor("A"), hosts=[job_task(0)])
    for i in range(3000):
        daemon = task_info(
            namespace="kube-system", job_name=f"ds-{i}", index=0, ring_label=None, cards=0, node_name="n1"
        )
        crowded["Tasks"][daemon["UID"]] = daemon
    free = node("n2", tor("A"))
    other = node("n3", tor("B"))
    scores = prioritize(job_task(1), [crowded, free, other], SETTINGS, fresh_state())["nodeScore"]
    assert scores["n2"] > scores["n3"]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda n: n.update(Idle={"ScalarResources": {"huawei.com/ascend-1980": "lots"}}), "expected a number"),
        (lambda n: n.update(Idle=[1, 2]), "expected a Resource object"),
        (lambda n: (n.pop("Name"), n.pop("Node")), "Name: missing"),
    ],
)
def test_malformed_node_fields_are_payload_errors_naming_the_field(mutate: Any, message: str) -> None:
    bad = node("n1", tor("A"))
    mutate(bad)
    with pytest.raises(PayloadError, match=message):
        prioritize(job_task(0), [bad], SETTINGS, fresh_state())


def test_a_task_that_is_not_an_object_is_a_payload_error() -> None:
    with pytest.raises(PayloadError, match="task: expected a TaskInfo object"):
        read_task(["no"], SETTINGS)


def test_state_forgets_jobs_after_the_ttl() -> None:
    state = fresh_state()
    predicate(job_task(2), node("a-0", tor("A"), hosts=[job_task(0)]), SETTINGS, state)
    state.prune(now=10**9)
    assert state.placed_nodes("team-a/bert-0c2d3e4f") == {}


def test_topology_cache_rereads_a_node_whose_labels_changed() -> None:
    state = fresh_state()
    moved = node("n1", tor("A"))
    assert state.paths_of([("n1", moved["Node"]["metadata"]["labels"])]) == {"n1": ("A",)}
    moved = copy.deepcopy(moved)
    moved["Node"]["metadata"]["labels"]["volcano.sh/tor"] = "B"
    assert state.paths_of([("n1", moved["Node"]["metadata"]["labels"])]) == {"n1": ("B",)}


def test_fast_decoder_and_lenient_reader_give_the_same_scores() -> None:
    hosting, candidates = three_tier_cluster()
    partly = node("c-1", leaf_spine("C", "S1"))
    partly["Releasing"]["ScalarResources"] = {"huawei.com/ascend-1980": 8000.0}
    nodes = [*hosting, *candidates, partly, node("busy", leaf_spine("D", "S2"), busy=True)]
    body = json.dumps({"task": job_task(2), "nodes": nodes}).encode()
    fast = prioritize_body(body, SETTINGS, fresh_state())
    assert fast == prioritize(job_task(2), nodes, SETTINGS, fresh_state())
    assert fast["nodeScore"]["a-2"] == max(fast["nodeScore"].values())


def test_fast_decoder_falls_back_when_allocatable_is_only_on_the_node_object() -> None:
    bare = node("n1", tor("A"))
    bare["Allocatable"] = None
    body = json.dumps({"task": job_task(0), "nodes": [bare]}).encode()
    assert prioritize_body(body, SETTINGS, fresh_state())["nodeScore"]["n1"] > 0


def test_body_that_is_not_json_is_a_payload_error() -> None:
    with pytest.raises(PayloadError, match="body: not JSON"):
        prioritize_body(b"{", SETTINGS, fresh_state())


def test_default_reader_keeps_the_spine_tier_for_a_batch_under_one_spine() -> None:
    state = ExtenderState(SETTINGS)
    nodes = [("n1", leaf_spine("L1", "S1")), ("n2", leaf_spine("L2", "S1"))]
    assert state.paths_of(nodes) == {"n1": ("L1", "S1"), "n2": ("L2", "S1")}


def test_configured_label_keys_are_read_top_most_first() -> None:
    settings = Settings(topology=TopologySettings(label_keys=("example.com/pod", "example.com/leaf")))
    state = ExtenderState(settings)
    labels = {"example.com/pod": "P1", "example.com/leaf": "L7", "volcano.sh/tor": "ignored"}
    assert state.paths_of([("n1", labels)]) == {"n1": ("L7", "P1")}
