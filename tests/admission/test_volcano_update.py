"""Volcano's update rule: an UPDATE may change only minAvailable, priorityClassName and the tasks' replicas and
minAvailable. ringroute denies any other change, naming the first changed field and what Volcano allows, after its
own mutation put back what it had injected; the rule can be made a warning."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support.admission import (
    Service,
    apply_ops,
    bare_job,
    container,
    load_example,
    mutate,
    review,
    volcano_defaults,
)
from webhook.admission.jobview import read_job
from webhook.admission.mutation import plan_update
from webhook.admission.policy import judge, validate
from webhook.common.settings import PolicySettings, Settings

SETTINGS = Settings()


def stored(job: dict[str, Any]) -> dict[str, Any]:
    """The job as the API server stores it: ringroute's patch, then Volcano's defaults."""
    return volcano_defaults(apply_ops(job, mutate(job, SETTINGS)))


def update_denials(new: dict[str, Any], old: dict[str, Any], settings: Settings = SETTINGS) -> list[str]:
    return [v.render() for v in judge(new, old, settings).denials]


def test_scaling_replicas_and_min_available_and_changing_the_priority_class_are_allowed() -> None:
    old = stored(bare_job())
    new = copy.deepcopy(old)
    new["spec"]["tasks"][0]["replicas"] = 5
    new["spec"]["tasks"][0]["minAvailable"] = 5
    new["spec"]["minAvailable"] = 5
    new["spec"]["priorityClassName"] = "high"
    new["spec"]["tasks"][0]["template"]["metadata"]["annotations"]["ringroute.io/npu-pods"] = "3"  # never changed
    assert update_denials(new, old) == []


def test_a_changed_image_is_denied_naming_the_field_and_what_volcano_allows() -> None:
    old = stored(bare_job())
    new = copy.deepcopy(old)
    container(new)["image"] = "train:v2"
    assert update_denials(new, old) == [
        "spec.tasks[0].template.spec.containers[0].image: Forbidden: Volcano refuses job updates that change "
        "anything in spec but minAvailable, priorityClassName and the tasks' replicas and minAvailable (was "
        '"train:v1", now "train:v2"); change only those, or delete the job and create it again'
    ]


def test_adding_a_task_is_denied() -> None:
    old = stored(bare_job())
    new = copy.deepcopy(old)
    new["spec"]["tasks"].append({**copy.deepcopy(new["spec"]["tasks"][0]), "name": "more"})
    assert update_denials(new, old) == [
        "spec.tasks: Forbidden: Volcano refuses job updates that add or remove tasks (1 before, 2 now); delete the "
        "job and create it again"
    ]


def test_a_file_applied_again_without_volcanos_task_defaults_is_denied_with_the_stored_value() -> None:
    job = bare_job()
    old = stored(job)
    new = copy.deepcopy(old)
    new["spec"]["tasks"] = copy.deepcopy(job["spec"]["tasks"])  # kubectl's three-way merge resends spec.tasks
    new = apply_ops(new, plan_update(read_job(new, SETTINGS), old).ops)  # ringroute puts its own fields back
    assert update_denials(new, old) == [
        "spec.tasks[0].maxRetry: Forbidden: Volcano refuses job updates that change anything in spec but "
        "minAvailable, priorityClassName and the tasks' replicas and minAvailable (was 3, now unset (a re-applied "
        "file must carry the stored value: `kubectl get vcjob bare -o yaml`)); change only those, or delete the job "
        "and create it again"
    ]
    new["spec"]["tasks"][0]["maxRetry"] = 3
    new["spec"]["tasks"][0]["replicas"] = 4
    assert update_denials(new, old) == []


def test_the_stored_documented_job_applied_again_as_its_file_passes_once_the_file_has_volcanos_defaults(
    distributed_job: dict[str, Any],
) -> None:
    old = stored(distributed_job)
    applied = copy.deepcopy(distributed_job)
    for task in applied["spec"]["tasks"]:
        task["maxRetry"] = 3
    applied["spec"]["tasks"][0]["replicas"] = 6
    applied["spec"]["minAvailable"] = 6
    new = copy.deepcopy(old)
    new["spec"]["minAvailable"] = 6
    new["spec"]["tasks"] = applied["spec"]["tasks"]
    new["spec"]["plugins"] = applied["spec"]["plugins"]  # the file still names the vendor plugin
    result = apply_ops(new, plan_update(read_job(new, SETTINGS), old).ops)
    assert "configmap1980" not in result["spec"]["plugins"]
    assert judge(result, old, SETTINGS).allowed


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ({"cpu": "1"}, {"cpu": "1000m"}),
        ({"memory": "1Gi"}, {"memory": 1073741824}),
        ({"huawei.com/ascend-1980": "8"}, {"huawei.com/ascend-1980": 8}),
    ],
)
def test_quantities_compare_by_amount_as_volcano_compares_them(before: dict[str, Any], after: dict[str, Any]) -> None:
    old = stored(bare_job())
    container(old)["resources"]["requests"] = before
    new = copy.deepcopy(old)
    container(new)["resources"]["requests"] = after
    assert update_denials(new, old) == []


def test_empty_and_missing_values_are_the_same_to_volcano() -> None:
    old = stored(bare_job())
    new = copy.deepcopy(old)
    container(new)["args"] = []
    new["spec"]["tasks"][0]["template"]["spec"]["tolerations"] = []
    new["spec"]["ttlSecondsAfterFinished"] = None
    container(old)["resources"]["claims"] = []
    assert update_denials(new, old) == []


def test_a_pvc_name_the_job_controller_filled_in_is_neither_a_change_nor_a_conflict() -> None:
    old = stored(bare_job())
    old["spec"]["volumes"] = [{"mountPath": "/data", "volumeClaim": {"accessModes": ["ReadWriteOnce"]}}]
    new = copy.deepcopy(old)
    new["spec"]["volumes"][0]["volumeClaimName"] = "bare-volume-x1"
    assert update_denials(new, old) == []


def test_the_update_rule_can_be_a_warning() -> None:
    settings = Settings(policy=PolicySettings(rule_modes=(("volcano-update", "warn"),)))
    old = stored(bare_job())
    new = copy.deepcopy(old)
    new["spec"]["queue"] = "research"
    verdict = judge(new, old, settings)
    assert verdict.allowed
    [warning] = verdict.warning_messages()
    assert warning.startswith("spec.queue: Forbidden: Volcano refuses job updates that change anything in spec but")
    assert '(was "default", now "research")' in warning


def test_a_job_being_deleted_is_left_alone() -> None:
    old = stored(bare_job())
    new = copy.deepcopy(old)
    container(new)["image"] = "other"
    new["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert validate(new, old, SETTINGS) == []


async def test_the_validating_webhook_denies_a_forbidden_update_over_tls(service: Service) -> None:
    old = stored(load_example("distributed-route-plan.yaml"))
    new = copy.deepcopy(old)
    container(new)["image"] = "bert:v2"
    _, answer = await service.post("/jobs/validate", review(new, operation="UPDATE", old=old, uid="upd"))
    response = answer["response"]
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    assert response["status"]["details"]["causes"] == [
        {
            "reason": "FieldValueForbidden",
            "message": response["status"]["message"],
            "field": "spec.tasks[0].template.spec.containers[0].image",
        }
    ]
