"""The extender against each Volcano release's exact wire format: requests built from the Go structs of the
release (`emulation.volcano_payloads`), answers decoded as that release's plugin and allocate action decode them
(`webhook.volcano_emulation`)."""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest

from emulation import volcano_payloads as payloads
from webhook import volcano_emulation as volcano
from webhook.common.metrics import Metrics
from webhook.common.settings import Settings, settings_from_mapping
from webhook.extender import volcano_releases as releases
from webhook.extender.app import ExtenderService, answer_group

RELEASES = ["1.7", "1.8", "1.9", "1.10", "1.12", "1.13", "1.14", "1.15", "1.16"]


@pytest.fixture(autouse=True)
def quiet() -> None:
    logging.getLogger("webhook.extender.app").setLevel(logging.WARNING)


def route_planned_pod(index: int, *, release: str, node_name: str | None = None) -> dict[str, Any]:
    return payloads.volcano_job_pod(
        "llm",
        index,
        namespace="team-a",
        node_name=node_name,
        phase="Running" if node_name else None,
        extra_labels={"ring-controller.cce": "ascend-1980"},
        extra_env={"ROUTE_PLAN": "true"},
        extra_annotations={"ringroute.io/npu-pods": "6"},
        release=release,
    )


def npu_node(name: str, leaf: str, *, release: str, tasks: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    node = payloads.kube_node(
        name, labels={"volcano.sh/tor": leaf, "accelerator/huawei-npu": "ascend-1980"}, release=release
    )
    return payloads.node_info(node, tasks or [], release=release)


def busy_node(name: str, leaf: str, *, release: str) -> dict[str, Any]:
    other = payloads.volcano_job_pod("other", 0, namespace="team-b", node_name=name, phase="Running", release=release)
    return npu_node(name, leaf, release=release, tasks=[payloads.task_info(other, release=release)])


def body(value: Any, release: str) -> bytes:
    return payloads.go_json(value, release)


@pytest.mark.parametrize("release", RELEASES)
def test_a_busy_node_is_refused_and_a_free_one_passes_on_every_release_with_auto_detection(release: str) -> None:
    service = ExtenderService(Settings(), Metrics())
    task = payloads.task_info(route_planned_pod(0, release=release), release=release)
    refused, _ = service.predicate(
        body(payloads.predicate_request(task, busy_node("n1", "t1", release=release)), release)
    )
    fits, _ = service.predicate(body(payloads.predicate_request(task, npu_node("n2", "t1", release=release)), release))
    for ignorable in (True, False):
        outcome = volcano.decode_predicate_response(release, orjson.dumps(refused), ignorable)
        assert not outcome.passes, outcome
        assert volcano.decode_predicate_response(release, orjson.dumps(fits), ignorable).passes
    if not releases.release_at_least(release, "1.8") or releases.release_at_least(release, "1.10"):
        # 1.7 and 1.10+ keep the reason; 1.8/1.9 record only "status is not success".
        assert (
            "takes whole nodes only" in volcano.decode_predicate_response(release, orjson.dumps(refused), True).reason
        )


@pytest.mark.parametrize("release", RELEASES)
def test_a_configured_release_answers_in_its_shape_without_detection(release: str) -> None:
    service = ExtenderService(settings_from_mapping({"volcano": {"version": release}}), Metrics())
    task = payloads.task_info(route_planned_pod(0, release=release), release=release)
    refused, _ = service.predicate(
        body(payloads.predicate_request(task, busy_node("n1", "t1", release=release)), release)
    )
    assert not volcano.decode_predicate_response(release, orjson.dumps(refused), True).passes


@pytest.mark.parametrize(
    ("release", "group"),
    [("1.7", (1, 7)), ("1.8", (1, 8)), ("1.9", (1, 8)), ("1.10", (1, 10)), ("1.13", (1, 10)), ("1.16", (1, 10))],
)
def test_the_answer_group_is_read_from_the_request_field_names(release: str, group: tuple[int, int]) -> None:
    task = payloads.task_info(route_planned_pod(0, release=release), release=release)
    request = payloads.predicate_request(task, npu_node("n1", "t1", release=release))
    assert answer_group(body(request, release)) == group


@pytest.mark.parametrize("release", RELEASES)
def test_prioritize_answers_are_scores_every_release_adds(release: str) -> None:
    service = ExtenderService(Settings(), Metrics())
    task = payloads.task_info(route_planned_pod(1, release=release), release=release)
    nodes = [npu_node(f"n{i}", f"t{i // 2}", release=release) for i in range(4)]
    answer, _ = service.prioritize(body(payloads.prioritize_request(task, nodes), release))
    for ignorable in (True, False):
        outcome = volcano.decode_prioritize_response(release, orjson.dumps(answer), ignorable)
        assert outcome.effect == "scored"
        assert set(outcome.scores or {}) == {"n0", "n1", "n2", "n3"}


@pytest.mark.parametrize("release", ["1.7", "1.16"])
def test_a_non_ringroute_task_gets_an_empty_score_map_never_a_null_one(release: str) -> None:
    service = ExtenderService(Settings(), Metrics())
    pod = payloads.volcano_job_pod("plain", 0, namespace="team-c", release=release)
    task = payloads.task_info(pod, release=release)
    answer, _ = service.prioritize(
        body(payloads.prioritize_request(task, [npu_node("n0", "t0", release=release)]), release)
    )
    assert answer == {"nodeScore": {}, "errorMessage": ""}
    # A null nodeScore would fail the call even with ignorable (and crash vc-scheduler before 1.12).
    assert volcano.decode_prioritize_response(release, orjson.dumps(answer), False).effect == "scored"


@pytest.mark.parametrize("release", ["1.13", "1.16"])
def test_allocate_events_are_accepted_on_releases_that_send_them(release: str) -> None:
    service = ExtenderService(Settings(), Metrics())
    task = payloads.task_info(route_planned_pod(0, release=release, node_name="n3"), release=release, status=2)
    answer, outcome = service.allocate(body(payloads.event_handler_request(task, release=release), release))
    assert outcome == "ok"
    assert volcano.decode_event_handler_response(release, orjson.dumps(answer), False).error is None


@pytest.mark.parametrize("release", ["1.7", "1.10", "1.14", "1.16"])
def test_a_session_cache_of_each_release_gives_job_facts_and_an_enforced_plan(release: str) -> None:
    free = (2, 3, 2, 4, 1, 4)
    nodes = []
    for leaf, count in enumerate(free):
        for slot in range(4):
            make = npu_node if slot < count else busy_node
            nodes.append(make(f"npu-{leaf}{slot}", f"tor-{leaf}", release=release))
    tasks = [payloads.task_info(route_planned_pod(i, release=release), release=release) for i in range(6)]
    group = tasks[0]["Job"].split("/", 1)[1]
    job = payloads.job_info(tasks, pod_group_name=group, namespace="team-a", phase="Inqueue", release=release)
    request = payloads.on_session_open_request(jobs=[job], nodes=nodes, queues=[payloads.queue_info(release=release)])
    service = ExtenderService(Settings(), Metrics())
    assert service.session_open(payloads.go_json(request, release)) == ({}, "ok")
    (facts,) = service.state.jobs.values()
    assert (facts.size, facts.pending) == (6, 6)
    allowed = set()
    for node in nodes:
        answer, _ = service.predicate(body(payloads.predicate_request(tasks[0], node), release))
        if volcano.decode_predicate_response(release, orjson.dumps(answer), True).passes:
            allowed.add(node["Name"])
    # Leaves 3 (4 free) and 0 (2 free): the fewest leaves, nothing left over.
    assert {name[:5] for name in allowed} == {"npu-0", "npu-3"}
    assert len(allowed) == 6
