"""How a job asks for route planning, as admission reads it (the rule the controller and the extender share):
`true` in any letter case and spacing, on the training container or the Job; a request ringroute would ignore, or
cannot read, is denied rather than turned into a pod-index table."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support.admission import apply_ops, container, load_example, mutate, without_vendor_plugin
from webhook.admission.policy import judge, validate
from webhook.common.settings import Settings

SETTINGS = Settings()
RULE = "route-plan-request"


def training_job(replicas: int = 4) -> dict[str, Any]:
    """The distributed example without ROUTE_PLAN: nothing asks for route planning yet."""
    job = without_vendor_plugin(load_example("distributed-route-plan.yaml"))
    job["spec"]["tasks"][0]["replicas"] = job["spec"]["minAvailable"] = replicas
    container(job)["env"] = [e for e in container(job)["env"] if e["name"] != "ROUTE_PLAN"]
    return job


def found(job: dict[str, Any]) -> list[str]:
    return [v.render() for v in validate(job, None, SETTINGS) if v.rule == RULE]


def test_route_plan_only_on_an_init_container_is_denied_naming_where_to_put_it() -> None:
    job = training_job()
    job["spec"]["tasks"][0]["template"]["spec"]["initContainers"] = [
        {"name": "setup", "image": "busybox", "env": [{"name": "ROUTE_PLAN", "value": "true"}]}
    ]
    assert found(job) == [
        'spec.tasks[0].template.spec.initContainers[0].env[0]: Invalid value: "true": ROUTE_PLAN on an init '
        "container asks for nothing: ringroute reads it on the training container (the one with "
        "huawei.com/ascend-1980 cards), where HCCL runs and the launcher starts the command; set ROUTE_PLAN on the "
        'training container, or annotate the Job ringroute.io/route-plan: "true"'
    ]
    assert not judge(job, None, SETTINGS).allowed


def test_route_plan_only_on_a_container_without_cards_is_denied() -> None:
    job = training_job()
    job["spec"]["tasks"][0]["template"]["spec"]["containers"].append(
        {"name": "logs", "image": "fluent-bit", "env": [{"name": "ROUTE_PLAN", "value": "TRUE"}]}
    )
    [message] = found(job)
    assert message.startswith(
        'spec.tasks[0].template.spec.containers[1].env[0]: Invalid value: "TRUE": ROUTE_PLAN on a container without '
        "huawei.com/ascend-1980 cards asks for nothing"
    )


def test_route_plan_beside_the_training_containers_own_is_admitted() -> None:
    job = training_job()
    container(job)["env"].append({"name": "ROUTE_PLAN", "value": "true"})
    job["spec"]["tasks"][0]["template"]["spec"]["initContainers"] = [
        {"name": "setup", "image": "busybox", "env": [{"name": "ROUTE_PLAN", "value": "true"}]}
    ]
    assert found(job) == []
    assert judge(job, None, SETTINGS).allowed


@pytest.mark.parametrize("value", ["yes", "1", "on", "ture", ""])
def test_a_value_that_is_neither_true_nor_false_is_denied(value: str) -> None:
    job = training_job()
    container(job)["env"].append({"name": "ROUTE_PLAN", "value": value})
    [message] = found(job)
    assert message.endswith(
        f'env[3]: Invalid value: "{value}": ROUTE_PLAN is "true" or "false" (any letter case); write "true" to ask '
        "for route planning"
    )


@pytest.mark.parametrize("value", ["false", "False", " FALSE "])
def test_false_in_any_spelling_asks_for_no_route_planning(value: str) -> None:
    job = training_job(replicas=2)
    job["metadata"]["annotations"] = {"ringroute.io/route-plan": value}
    assert found(job) == []
    assert judge(job, None, SETTINGS).allowed, "two nodes are fine without route planning"


def test_a_value_ringroute_cannot_read_is_denied() -> None:
    job = training_job()
    container(job)["env"].append({"name": "ROUTE_PLAN", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}})
    [message] = found(job)
    assert "env[3]: Invalid value: null: ROUTE_PLAN must be literal text" in message


@pytest.mark.parametrize("value", [" true", "True", "TRUE\n"])
def test_true_with_spaces_or_capitals_makes_the_job_route_planned_for_every_rule(value: str) -> None:
    job = training_job(replicas=2)
    job["metadata"]["annotations"] = {"ringroute.io/route-plan": value}
    assert [v.rule for v in validate(job, None, SETTINGS)] == ["route-plan-min-nodes"]


def test_the_mutation_copies_route_planning_onto_the_npu_templates_once() -> None:
    job = training_job()
    job["metadata"]["annotations"] = {"ringroute.io/route-plan": " true"}
    cpu = copy.deepcopy(job["spec"]["tasks"][0])
    cpu["name"] = "ps"
    cpu["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "4"}}
    job["spec"]["tasks"].append(cpu)
    stored = apply_ops(job, mutate(job, SETTINGS))
    npu, ps = (t["template"]["metadata"] for t in stored["spec"]["tasks"])
    assert npu["annotations"]["ringroute.io/route-plan"] == "true"
    assert "ringroute.io/route-plan" not in (ps.get("annotations") or {})
    assert "route-plan" in stored["metadata"]["annotations"]["ringroute.io/injected"].split(",")
    assert stored["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["command"][1].endswith(
        "ringroute-launcher.sh"
    ), "the launcher wraps the training command of a job annotated ' true'"
    assert mutate(stored, SETTINGS) == [], "idempotent"


def test_a_job_that_asks_for_nothing_gets_no_route_plan_annotation() -> None:
    job = training_job()
    stored = apply_ops(job, mutate(job, SETTINGS))
    assert "ringroute.io/route-plan" not in stored["spec"]["tasks"][0]["template"]["metadata"].get("annotations", {})
