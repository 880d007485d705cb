"""The one reading of a Volcano Job (`webhook.common.jobfacts`): its rules, one at a time, and that it reads any
JSON without raising."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from emulation.cluster import make_job
from tests.support.admission import apply_ops, damaged_jobs, json_values, mutate
from tests.support.jobfacts import FIXTURES, route_plan_jobs, volcano_pods
from webhook.common.jobfacts import is_true, job_facts, pod_facts
from webhook.common.settings import Settings

SETTINGS = Settings()
NPU = "huawei.com/ascend-1980"


@pytest.mark.parametrize("text", ["true", "TRUE", "True", " true", "true ", "\ttrue\n"])
def test_true_is_true_in_any_letter_case_with_surrounding_whitespace(text: str) -> None:
    assert is_true(text)


@pytest.mark.parametrize("text", ["yes", "1", "t", "tru e", "truee", "", "false", None, True, 1])
def test_nothing_else_is_true(text: Any) -> None:
    assert not is_true(text)


def test_expected_pods_count_only_npu_tasks_in_task_order() -> None:
    job = make_job("j", 5, route_plan=False)
    cpu_task = copy.deepcopy(job["spec"]["tasks"][0])
    cpu_task["name"] = "ps"
    cpu_task["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "4"}}
    job["spec"]["tasks"].append(cpu_task)
    facts = job_facts(job, SETTINGS)
    assert (facts.npu_pods, facts.task_order) == (5, ("worker", "ps"))
    assert [t.name for t in facts.npu_tasks] == ["worker"]
    assert not facts.route_planned
    job["metadata"]["annotations"] = {"ringroute.io/route-plan": " True"}
    assert job_facts(job, SETTINGS).route_planned
    assert job_facts(make_job("k", 3, route_plan=True), SETTINGS).route_planned


def test_an_unnamed_task_is_named_as_volcano_names_it() -> None:
    job = make_job("j", 2)
    del job["spec"]["tasks"][0]["name"]
    assert job_facts(job, SETTINGS).task_order == ("default0",)


@pytest.mark.parametrize("cards", ["0", 0, "0m", "0.0"])
def test_a_container_asking_for_zero_cards_is_no_npu_container(cards: Any) -> None:
    job = make_job("j", 3)
    job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"] = {"limits": {NPU: cards}}
    facts = job_facts(job, SETTINGS)
    assert facts.npu_pods == 0
    assert not facts.route_planned, "ROUTE_PLAN on a container without cards asks for nothing"
    assert facts.rank_table_profile is None


def test_an_unreadable_card_count_is_an_npu_container_and_a_problem() -> None:
    job = make_job("j", 3)
    job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"] = {"limits": {NPU: "3.5"}}
    facts = job_facts(job, SETTINGS)
    assert facts.npu_pods == 3
    assert facts.tasks[0].template.cards_per_pod is None
    assert facts.problems == (
        "spec.tasks[0].template.spec.containers[0].resources: must be a whole number (the device plugin "
        "allocates whole cards)",
    )


def test_route_plan_on_an_init_container_asks_for_nothing_and_says_where_it_is() -> None:
    facts = job_facts(FIXTURES["init-only"], SETTINGS)
    assert not facts.route_planned
    [request] = facts.route_plan_requests
    assert (request.place, request.path, request.value, request.counts, request.true) == (
        "init-container",
        "spec.tasks[0].template.spec.initContainers[0].env[0]",
        "true",
        False,
        True,
    )


def test_the_last_route_plan_entry_of_a_container_is_the_one_its_process_sees() -> None:
    job = make_job("j", 3, route_plan=False)
    job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "ROUTE_PLAN", "value": "true"},
        {"name": "ROUTE_PLAN", "value": "false"},
    ]
    facts = job_facts(job, SETTINGS)
    assert not facts.route_planned
    assert [r.path for r in facts.route_plan_requests] == ["spec.tasks[0].template.spec.containers[0].env[1]"]


def test_jobs_ringroute_writes_no_table_for_have_no_rank_table_profile() -> None:
    job = make_job("j", 3)
    assert job_facts(job, SETTINGS).rank_table_profile is SETTINGS.profiles[0]
    plugin = copy.deepcopy(job)
    plugin["metadata"]["annotations"] = {"ringroute.io/rank-table-writer": "volcano-plugin"}
    deleting = copy.deepcopy(job)
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    unknown = copy.deepcopy(job)
    unknown["metadata"]["labels"]["ring-controller.cce"] = "ascend-310"
    empty = make_job("j", 0)
    for other in (plugin, deleting, unknown, empty):
        assert job_facts(other, SETTINGS).rank_table_profile is None


def test_a_malformed_job_reads_as_facts_that_say_so() -> None:
    job = {"metadata": ["x"], "spec": {"tasks": [7, {"replicas": "3", "template": {"spec": {"containers": 1}}}]}}
    facts = job_facts(job, SETTINGS)
    assert facts.problems == (
        "metadata: not an object",
        "spec.tasks[0]: not an object",
        "spec.tasks[1].replicas: not a count of pods ('3'); read as 0",
    )
    assert (facts.name, facts.profile, facts.npu_pods, facts.task_order) == (None, None, 0, ("default0", "default1"))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(job=json_values | damaged_jobs())
def test_any_json_reads_without_raising(job: Any) -> None:
    facts = job_facts(job, SETTINGS)
    assert facts.npu_pods >= 0
    assert facts.route_planned in (True, False)
    json.dumps(facts.problems)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(job=route_plan_jobs())
def test_every_pod_volcano_makes_reads_as_its_task_does(job: dict[str, Any]) -> None:
    """The extender's reading of a pod (pod_facts) is the Job's reading of its task, once admission has copied
    the Job's route-plan annotation onto the NPU templates."""
    stored = apply_ops(job, mutate(job, SETTINGS))
    facts = job_facts(stored, SETTINGS)
    assert facts.route_planned == job_facts(job, SETTINGS).route_planned, "the mutation keeps the facts"
    for pod in volcano_pods(stored, 0):
        task = next(t for t in facts.tasks if t.name == pod["metadata"]["labels"]["volcano.sh/task-spec"])
        read = pod_facts(pod, SETTINGS)
        assert read.npu == (task.npu and facts.profile is not None)
        if read.npu:
            assert read.route_planned == facts.route_planned
            assert read.template.npu_pods == facts.npu_pods
            assert read.template.cards_per_pod == task.template.cards_per_pod
