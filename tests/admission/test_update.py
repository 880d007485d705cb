"""UPDATE: server-side apply gets back exactly what CREATE injected, jobs admitted before ringroute are left alone,
nothing the stored job lacks is ever added (Volcano would reject the update), and validation ratchets."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import jsonschema
import msgspec
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from jsonpointer import resolve_pointer

from tests.support.admission import (
    Service,
    apply_ops,
    bare_job,
    check_schemas,
    container,
    damaged_jobs,
    load_example,
    mutate,
    npu_jobs,
    patch_of,
    review,
    without_vendor_plugin,
)
from webhook.admission.jobview import read_job
from webhook.admission.mutation import PatchOp, plan_update
from webhook.admission.policy import RATCHET_NOTE, judge
from webhook.common.names import INJECTED_ANNOTATION
from webhook.common.settings import HostPathVolume, PolicySettings, Settings

Build = Callable[..., dict[str, Any]]


@pytest.fixture
def documented_job(documented_job: dict[str, Any]) -> dict[str, Any]:
    """The documented job as open-source Volcano stores it: without the vendor plugin."""
    return without_vendor_plugin(documented_job)


SERVER_FIELDS = {"uid": "3f2c0d9e-0000-4000-8000-000000000001", "resourceVersion": "1001", "generation": 1}


def manifest(name: str) -> dict[str, Any]:
    """What the user keeps in git and applies."""
    return bare_job() if name == "bare" else load_example(name)


def stored_after_create(job: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """What the API server stores: the job with the mutating webhook's patch applied, plus server fields."""
    ops = mutate(job, settings)
    assert ops, "the example should need something from the webhook"
    stored = apply_ops(job, ops)
    stored["metadata"].update(SERVER_FIELDS)
    return stored


def scaled(job: dict[str, Any]) -> dict[str, Any]:
    """The job with one more pod in its first task (and minAvailable to match): an update Volcano allows."""
    changed = copy.deepcopy(job)
    changed["spec"]["tasks"][0]["replicas"] += 1
    changed["spec"]["minAvailable"] = sum(t["replicas"] for t in changed["spec"]["tasks"])
    return changed


def server_side_apply(applied: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
    """The object an UPDATE carries after `kubectl apply --server-side` of `applied`.

    Fields the webhook added on CREATE are owned by the applier's field manager (they were set during its
    request), so an apply that omits them removes them; only fields the server set survive.
    """
    new = copy.deepcopy(applied)
    new["metadata"].update({k: stored["metadata"][k] for k in SERVER_FIELDS})
    return new


def update_ops(new: dict[str, Any], old: dict[str, Any], settings: Settings) -> list[PatchOp]:
    return plan_update(read_job(new, settings), old).ops


def volcano_allows_update(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Volcano's job webhook: an update may change spec.minAvailable and tasks[*].replicas/minAvailable only."""
    a, b = copy.deepcopy(old["spec"]), copy.deepcopy(new["spec"])
    for spec in (a, b):
        spec.pop("minAvailable", None)
        for task in spec.get("tasks", []):
            task.pop("replicas", None)
            task.pop("minAvailable", None)
    return bool(a == b)


@pytest.mark.parametrize("name", ["bare", "documented.yaml", "distributed-route-plan.yaml"])
def test_server_side_apply_that_omits_the_injected_fields_gets_them_back_exactly(
    name: str,
    settings: Settings,
    volcano_job_schema: jsonschema.Draft202012Validator,
    pod_template_schema: jsonschema.Draft202012Validator,
) -> None:
    applied = manifest(name)
    stored = stored_after_create(applied, settings)
    new = server_side_apply(scaled(applied), stored)
    assert not volcano_allows_update(stored, new)  # without the webhook, Volcano would reject this update

    result = apply_ops(new, update_ops(new, stored, settings))

    assert result == scaled(stored)
    assert volcano_allows_update(stored, result)
    check_schemas(result, volcano_job_schema, pod_template_schema)
    assert update_ops(result, stored, settings) == []


def test_an_update_that_keeps_the_injected_fields_gets_no_patch(settings: Settings) -> None:
    stored = stored_after_create(bare_job(), settings)
    assert update_ops(scaled(stored), stored, settings) == []  # client-side apply, kubectl edit, scale


def test_an_update_that_only_dropped_the_annotation_gets_it_back(settings: Settings) -> None:
    stored = stored_after_create(bare_job(), settings)
    new = copy.deepcopy(stored)
    del new["metadata"]["annotations"][INJECTED_ANNOTATION]
    ops = update_ops(new, stored, settings)
    assert [op["path"] for op in ops] == ["/metadata/annotations/ringroute.io~1injected"]
    assert apply_ops(new, ops) == stored


def test_a_job_being_deleted_gets_no_patch_on_update(settings: Settings) -> None:
    applied = bare_job()
    stored = stored_after_create(applied, settings)
    new = server_side_apply(applied, stored)
    new["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert update_ops(new, stored, settings) == []


def test_a_job_admitted_before_ringroute_gets_no_patch_on_update(settings: Settings) -> None:
    old = bare_job()  # stored without ringroute: lacks everything the webhook would add
    assert mutate(old, settings)
    assert update_ops(scaled(old), old, settings) == []


def test_an_update_never_adds_what_the_stored_job_lacks_even_when_the_profile_changed(settings: Settings) -> None:
    applied = bare_job()
    stored = stored_after_create(applied, settings)
    profile = settings.profiles[0]
    grown = msgspec.structs.replace(
        profile,
        host_path_volumes=(*profile.host_path_volumes, HostPathVolume("ascend-tools", "/usr/local/Ascend/tools")),
        node_selector=(*profile.node_selector, ("npu-generation", "b")),
    )
    later = msgspec.structs.replace(settings, profiles=(grown, *settings.profiles[1:]))
    new = server_side_apply(scaled(applied), stored)
    result = apply_ops(new, update_ops(new, stored, later))
    assert "/usr/local/Ascend/tools" not in str(result)
    assert "npu-generation" not in str(result)
    assert result == scaled(stored)


def test_a_user_change_to_an_injected_value_is_kept_on_update(settings: Settings) -> None:
    applied = bare_job()
    stored = stored_after_create(applied, settings)
    edited = copy.deepcopy(applied)
    container(edited)["env"] = [{"name": "POD_IP", "value": "10.0.0.1"}]
    result = apply_ops(edited, update_ops(server_side_apply(edited, stored), stored, settings))
    pod_ip = [e for e in container(result)["env"] if e["name"] == "POD_IP"]
    assert pod_ip == [{"name": "POD_IP", "value": "10.0.0.1"}]
    assert [e["name"] for e in container(result)["env"]] == ["POD_IP", "RANK_TABLE_FILE", "POD_NAME", "HOST_IP"]


# -- ratcheting ----------------------------------------------------------------------------------------------


def pre_ringroute_job(make_route_planned: Build) -> dict[str, Any]:
    """A route-planned job stored before ringroute was installed: it lacks the hostname anti-affinity."""
    job = make_route_planned(replicas=4)
    del job["spec"]["tasks"][0]["template"]["spec"]["affinity"]
    return job


def test_a_violation_the_stored_job_already_had_is_only_a_warning_on_update(
    make_route_planned: Build, settings: Settings
) -> None:
    old = pre_ringroute_job(make_route_planned)
    new = scaled(old)
    on_create = judge(new, None, settings)
    assert [v.rule for v in on_create.denials] == ["route-plan-one-pod-per-node"]

    verdict = judge(new, old, settings)
    assert verdict.allowed
    assert [v.rule for v in verdict.ratcheted] == ["route-plan-one-pod-per-node"]
    [warning] = verdict.warning_messages()
    assert warning.startswith("spec.tasks[0].template.spec.affinity.podAntiAffinity: Required value:")
    assert warning.endswith(RATCHET_NOTE)


def test_a_violation_the_update_introduces_is_denied_while_the_old_one_stays_a_warning(
    make_route_planned: Build, settings: Settings
) -> None:
    old = pre_ringroute_job(make_route_planned)
    new = copy.deepcopy(old)
    container(new)["env"].append({"name": "MA_RUN_METHOD", "value": "torch"})
    verdict = judge(new, old, settings)
    assert not verdict.allowed
    assert [v.rule for v in verdict.denials] == ["route-plan-ma-run-method", "volcano-update"]
    assert [v.rule for v in verdict.ratcheted] == ["route-plan-one-pod-per-node"]


def test_the_same_rule_on_another_path_is_a_new_violation(documented_job: dict[str, Any], settings: Settings) -> None:
    old = copy.deepcopy(documented_job)
    container(old)["resources"]["limits"]["huawei.com/ascend-1980"] = "2"
    second = copy.deepcopy(container(old))
    second["name"] = "sidecar"
    new = copy.deepcopy(old)
    new["spec"]["tasks"][0]["template"]["spec"]["containers"].append(second)
    verdict = judge(new, old, settings)
    assert [v.path for v in verdict.ratcheted] == [
        "spec.tasks[0].template.spec.containers[0].resources.limits[huawei.com/ascend-1980]"
    ]
    assert "spec.tasks[0].template.spec.containers[1].resources.limits[huawei.com/ascend-1980]" in [
        v.path for v in verdict.denials
    ]


def test_a_violation_fixed_by_the_update_leaves_no_ratchet_warning(make_route_planned: Build) -> None:
    # Volcano refuses the template change that fixes it; with that rule warning, only its warning is left
    settings = Settings(policy=PolicySettings(rule_modes=(("volcano-update", "warn"),)))
    old = pre_ringroute_job(make_route_planned)
    fixed = make_route_planned(replicas=4)
    verdict = judge(fixed, old, settings)
    assert verdict.allowed
    assert verdict.ratcheted == ()
    assert [v.rule for v in verdict.warnings] == ["volcano-update"]


# -- over HTTP -----------------------------------------------------------------------------------------------


async def test_an_update_review_restores_the_injected_fields_and_a_dry_run_creates_nothing(
    service: Service, settings: Settings
) -> None:
    applied = load_example("distributed-route-plan.yaml")
    stored = stored_after_create(applied, settings)
    new = server_side_apply(scaled(applied), stored)
    for dry_run in (True, False):
        status, answer = await service.post(
            "/jobs/mutate", review(new, operation="UPDATE", old=stored, dry_run=dry_run, uid=f"u-{dry_run}")
        )
        assert status == 200
        assert answer["response"]["uid"] == f"u-{dry_run}"
        result = apply_ops(new, patch_of(answer))
        assert result == scaled(stored)


async def test_an_update_review_of_a_pre_ringroute_job_is_admitted_unpatched_with_ratchet_warnings(
    service: Service, make_route_planned: Build
) -> None:
    old = pre_ringroute_job(make_route_planned)
    new = scaled(old)
    _, answer = await service.post("/jobs/mutate", review(new, operation="UPDATE", old=old))
    assert answer["response"] == {"uid": review(new)["request"]["uid"], "allowed": True}
    _, answer = await service.post("/jobs/validate", review(new, operation="UPDATE", old=old))
    assert answer["response"]["allowed"] is True
    [warning] = answer["response"]["warnings"]
    assert warning.endswith(RATCHET_NOTE)
    warned = service.metrics.registry.get_sample_value(
        "ringroute_admission_requests_total", {"endpoint": "validate", "verdict": "warned"}
    )
    assert warned == 1.0
    _, answer = await service.post("/jobs/validate", review(new))
    assert answer["response"]["allowed"] is False


@hypothesis_settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(npu_jobs())
def test_any_job_applied_again_without_its_injected_fields_is_restored_exactly(job: dict[str, Any]) -> None:
    settings = Settings()
    ops = mutate(job, settings)
    if not ops:
        return
    stored = apply_ops(job, ops)
    result = apply_ops(job, update_ops(job, stored, settings))
    assert result == stored
    assert update_ops(stored, stored, settings) == []


@hypothesis_settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(new=damaged_jobs(), old=damaged_jobs(admitted=True))
def test_an_update_patch_of_any_damaged_pair_applies_and_only_adds_what_the_old_object_has(new: Any, old: Any) -> None:
    settings = Settings()
    if not isinstance(new, dict) or not isinstance(old, dict):
        return
    ops = update_ops(new, old, settings)
    apply_ops(new, ops)  # raises if an op does not apply
    for op in ops:
        path = op["path"]
        if op["op"] == "remove":
            assert resolve_pointer(old, path, None) is None  # puts back the stored object's lack of it
            continue
        value = op["value"]
        if not path.startswith("/spec/"):
            continue
        if path.endswith("/-"):
            assert value in resolve_pointer(old, path[:-2], [])
            continue
        stored = resolve_pointer(old, path, None)
        if isinstance(value, list):
            assert all(item in stored for item in value)
        elif isinstance(value, dict):
            assert all(stored.get(k) == v for k, v in value.items())
        else:
            assert value == stored
