"""Each admission rule: a job that breaks it is denied with a message that says how to fix it; a job that
keeps it is admitted."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from tests.support import admission as conftest
from tests.support.admission import container, without_vendor_plugin
from webhook.admission.policy import RULES, Violation, classify, judge, render, validate
from webhook.common.settings import PolicySettings, Settings

Build = Callable[..., dict[str, Any]]


def load_example(name: str) -> dict[str, Any]:
    """An example job as the validating webhook sees it (ringroute's mutation removed the vendor plugin)."""
    return without_vendor_plugin(conftest.load_example(name))


@pytest.fixture
def documented_job(documented_job: dict[str, Any]) -> dict[str, Any]:
    return without_vendor_plugin(documented_job)


@pytest.fixture
def distributed_job(distributed_job: dict[str, Any]) -> dict[str, Any]:
    return without_vendor_plugin(distributed_job)


def messages(job: dict[str, Any], settings: Settings, old: dict[str, Any] | None = None) -> list[str]:
    return [v.render() for v in validate(job, old, settings)]


def rules(job: dict[str, Any], settings: Settings) -> list[str]:
    return [v.rule for v in validate(job, None, settings)]


def test_the_documented_job_and_its_distributed_variant_have_no_violations(
    documented_job: dict[str, Any], distributed_job: dict[str, Any], settings: Settings
) -> None:
    assert validate(documented_job, None, settings) == []
    assert validate(distributed_job, None, settings) == []


@pytest.mark.parametrize(
    ("example", "rule"),
    [
        ("rejected-two-nodes.yaml", "route-plan-min-nodes"),
        ("rejected-four-cards-route-plan.yaml", "route-plan-full-node"),
        ("rejected-workdir-nfs.yaml", "working-dir-local"),
        ("rejected-requests-not-limits.yaml", "npu-requests-equal-limits"),
    ],
)
def test_each_non_conforming_example_is_denied_by_its_rule(example: str, rule: str, settings: Settings) -> None:
    verdict = judge(load_example(example), None, settings)
    assert not verdict.allowed
    assert rule in {v.rule for v in verdict.denials}


def test_two_node_route_planned_job_is_denied_with_node_count(make_route_planned: Build, settings: Settings) -> None:
    assert messages(make_route_planned(replicas=2), settings) == [
        "spec.tasks[0].replicas: Invalid value: 2: route planning needs at least 3 nodes (got 2); "
        "raise replicas or remove ROUTE_PLAN"
    ]


def test_three_node_route_planned_job_is_admitted(make_route_planned: Build, settings: Settings) -> None:
    assert validate(make_route_planned(replicas=3), None, settings) == []


def test_below_min_nodes_skip_turns_the_denial_into_a_warning(make_route_planned: Build) -> None:
    settings = Settings(policy=PolicySettings(below_min_nodes="skip"))
    verdict = judge(make_route_planned(replicas=2), None, settings)
    assert verdict.allowed
    assert [v.rule for v in verdict.warnings] == ["route-plan-min-nodes"]
    assert "without route planning" in verdict.warnings[0].detail


def test_min_nodes_counts_pods_across_npu_tasks(make_route_planned: Build, settings: Settings) -> None:
    job = make_route_planned(replicas=1, min_available=2)
    job["spec"]["tasks"].append(copy.deepcopy(job["spec"]["tasks"][0]))
    job["spec"]["tasks"][1]["name"] = "second"
    assert messages(job, settings) == [
        "spec.tasks: Invalid value: 2: route planning needs at least 3 nodes (got 2); "
        "raise replicas or remove ROUTE_PLAN"
    ]
    job["spec"]["tasks"][1]["replicas"] = 2
    job["spec"]["minAvailable"] = 3
    assert validate(job, None, settings) == []


def test_jobs_without_route_planning_may_run_on_one_or_two_nodes(
    documented_job: dict[str, Any], settings: Settings
) -> None:
    documented_job["spec"]["tasks"][0]["replicas"] = 2
    assert validate(documented_job, None, settings) == []


def test_route_plan_annotation_asks_for_route_planning_like_the_env(
    documented_job: dict[str, Any], settings: Settings
) -> None:
    documented_job["metadata"]["annotations"] = {"ringroute.io/route-plan": "true"}
    assert "route-plan-min-nodes" in rules(documented_job, settings)


def test_four_card_pods_are_denied_for_route_planning(make_route_planned: Build, settings: Settings) -> None:
    assert messages(make_route_planned(cards=4), settings) == [
        "spec.tasks[0].template.spec.containers[0].resources.limits[huawei.com/ascend-1980]: Invalid value: 4: "
        "route planning needs every NPU pod to take a full node (8 cards); request 8 cards or remove ROUTE_PLAN"
    ]


def test_requests_different_from_limits_are_denied(documented_job: dict[str, Any], settings: Settings) -> None:
    container(documented_job)["resources"]["limits"]["huawei.com/ascend-1980"] = "2"
    assert messages(documented_job, settings) == [
        'spec.tasks[0].template.spec.containers[0].resources.limits[huawei.com/ascend-1980]: Invalid value: "2": '
        "must equal requests (1); set requests and limits to the same card count"
    ]


def test_requests_without_limits_are_denied_and_limits_alone_are_admitted(
    documented_job: dict[str, Any], settings: Settings
) -> None:
    resources = container(documented_job)["resources"]
    del resources["limits"]
    assert messages(documented_job, settings) == [
        "spec.tasks[0].template.spec.containers[0].resources.limits[huawei.com/ascend-1980]: Required value: "
        "huawei.com/ascend-1980 is requested (1) but has no limit; set limits equal to requests"
    ]
    resources["limits"] = resources.pop("requests")
    assert validate(documented_job, None, settings) == []


@pytest.mark.parametrize("cards", [1, 2, 4, 8])
def test_allowed_card_counts_are_admitted(cards: int, documented_job: dict[str, Any], settings: Settings) -> None:
    container(documented_job)["resources"] = {
        "requests": {"huawei.com/ascend-1980": cards},
        "limits": {"huawei.com/ascend-1980": cards},
    }
    assert validate(documented_job, None, settings) == []


def test_three_cards_are_denied_with_the_allowed_counts(documented_job: dict[str, Any], settings: Settings) -> None:
    container(documented_job)["resources"] = {"limits": {"huawei.com/ascend-1980": "3"}}
    assert messages(documented_job, settings) == [
        "spec.tasks[0].template.spec.containers[0].resources.limits[huawei.com/ascend-1980]: Invalid value: 3: "
        "a pod must take one of 1, 2, 4, 8 cards (got 3); round to an allowed count"
    ]


def test_sixteen_cards_are_denied_on_8_card_nodes_and_admitted_on_16_card_nodes(
    documented_job: dict[str, Any], settings: Settings
) -> None:
    container(documented_job)["resources"] = {"limits": {"huawei.com/ascend-1980": "16"}}
    assert messages(documented_job, settings) == [
        "spec.tasks[0].template.spec.containers[0].resources.limits[huawei.com/ascend-1980]: Invalid value: 16: "
        "a ascend-1980 node has 8 cards, a pod cannot take 16; request one of 1, 2, 4, 8 per pod and raise "
        "replicas instead"
    ]
    documented_job["metadata"]["labels"]["ring-controller.cce"] = "ascend-1980-snt9b23"
    documented_job["spec"]["tasks"][0]["template"]["metadata"]["labels"]["ring-controller.cce"] = "ascend-1980-snt9b23"
    assert validate(documented_job, None, settings) == []


def test_fractional_card_quantity_is_denied(documented_job: dict[str, Any], settings: Settings) -> None:
    container(documented_job)["resources"] = {"limits": {"huawei.com/ascend-1980": "500m"}}
    assert messages(documented_job, settings) == [
        'spec.tasks[0].template.spec.containers[0].resources.limits[huawei.com/ascend-1980]: Invalid value: "500m": '
        'container "mindspore": the card count must be a whole number (the device plugin allocates whole cards); '
        "request one of 1, 2, 4, 8 per pod"
    ]


def test_missing_hostname_anti_affinity_is_required_for_route_planning(
    make_route_planned: Build, settings: Settings
) -> None:
    job = make_route_planned()
    del job["spec"]["tasks"][0]["template"]["spec"]["affinity"]
    assert messages(job, settings) == [
        "spec.tasks[0].template.spec.affinity.podAntiAffinity: Required value: route planning needs one pod per "
        "node; add a required podAntiAffinity term on kubernetes.io/hostname (the ringroute mutating webhook adds it)"
    ]


def test_required_pod_affinity_on_hostname_is_forbidden_for_route_planning(
    make_route_planned: Build, settings: Settings
) -> None:
    job = make_route_planned()
    affinity = job["spec"]["tasks"][0]["template"]["spec"]["affinity"]
    affinity["podAffinity"] = copy.deepcopy(affinity["podAntiAffinity"])
    assert messages(job, settings) == [
        "spec.tasks[0].template.spec.affinity.podAffinity: Forbidden: a required podAffinity on "
        "kubernetes.io/hostname packs pods onto one node; route planning needs one pod per node, remove it"
    ]


def test_ma_run_method_is_forbidden_for_route_planning(make_route_planned: Build, settings: Settings) -> None:
    job = make_route_planned()
    container(job)["env"].append({"name": "MA_RUN_METHOD", "value": "torchrun"})
    assert messages(job, settings) == [
        "spec.tasks[0].template.spec.containers[0].env[4]: Forbidden: MA_RUN_METHOD makes the platform launcher "
        "assign ranks, which ignores the route plan; remove MA_RUN_METHOD or ROUTE_PLAN"
    ]


def test_ma_run_method_is_allowed_without_route_planning(documented_job: dict[str, Any], settings: Settings) -> None:
    container(documented_job)["env"].append({"name": "MA_RUN_METHOD", "value": "torchrun"})
    assert validate(documented_job, None, settings) == []


def test_min_available_below_the_npu_pods_is_denied(make_route_planned: Build, settings: Settings) -> None:
    assert messages(make_route_planned(replicas=4, min_available=1), settings) == [
        "spec.minAvailable: Invalid value: 1: route planning needs all 4 NPU pods scheduled together (gang), or "
        "the rank table never completes; set minAvailable to at least 4"
    ]


def test_absent_min_available_defaults_to_all_pods(make_route_planned: Build, settings: Settings) -> None:
    job = make_route_planned()
    del job["spec"]["minAvailable"]
    assert validate(job, None, settings) == []


def test_working_dir_on_nfs_is_denied_naming_the_volume(settings: Settings) -> None:
    assert messages(load_example("rejected-workdir-nfs.yaml"), settings) == [
        'spec.tasks[0].template.spec.containers[0].command[2]: Forbidden: "/mnt/team/code" is on volume '
        '"team-share" (nfs); route planning needs a local working directory (copy the code into the image or an '
        "emptyDir and cd there)"
    ]


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ({"persistentVolumeClaim": {"claimName": "data"}}, "persistentVolumeClaim"),
        ({"cephfs": {"monitors": ["192.0.2.1:6789"]}}, "cephfs"),
        ({"glusterfs": {"endpoints": "gfs", "path": "vol"}}, "glusterfs"),
        ({"csi": {"driver": "nas.csi.example.com"}}, "csi"),
        ({"hostPath": {"path": "/mnt/sfs_turbo"}}, "hostPath /mnt/sfs_turbo"),
    ],
)
def test_working_dir_field_on_any_shared_volume_kind_is_denied(
    source: dict[str, Any], kind: str, documented_job: dict[str, Any], settings: Settings
) -> None:
    spec = documented_job["spec"]["tasks"][0]["template"]["spec"]
    spec["volumes"].append({"name": "code", **source})
    container(documented_job)["volumeMounts"].append({"name": "code", "mountPath": "/code"})
    container(documented_job)["workingDir"] = "/code/bert"
    assert messages(documented_job, settings) == [
        f'spec.tasks[0].template.spec.containers[0].workingDir: Forbidden: "/code/bert" is on volume "code" '
        f"({kind}); NPU training needs a local working directory (copy the code into the image or an emptyDir and "
        "cd there)"
    ]


def test_working_dir_on_a_local_host_path_or_empty_dir_is_admitted(
    documented_job: dict[str, Any], settings: Settings
) -> None:
    spec = documented_job["spec"]["tasks"][0]["template"]["spec"]
    spec["volumes"] += [{"name": "scratch", "emptyDir": {}}, {"name": "cache", "hostPath": {"path": "/data/cache"}}]
    container(documented_job)["volumeMounts"] += [
        {"name": "scratch", "mountPath": "/work"},
        {"name": "cache", "mountPath": "/cache"},
    ]
    container(documented_job)["workingDir"] = "/work"
    container(documented_job)["command"] = ["sh", "-c", "cd /cache/x && ./run.sh"]
    assert validate(documented_job, None, settings) == []


def test_cd_in_bash_args_wins_over_working_dir_and_resolves_relative_paths(
    documented_job: dict[str, Any], settings: Settings
) -> None:
    spec = documented_job["spec"]["tasks"][0]["template"]["spec"]
    spec["volumes"].append({"name": "team", "nfs": {"server": "192.0.2.1", "path": "/x"}})
    c = container(documented_job)
    c["volumeMounts"].append({"name": "team", "mountPath": "/mnt/team"})
    c["workingDir"] = "/mnt"
    c["command"] = ["/bin/bash"]
    c["args"] = ["-lc", "cd 'team/code' && python train.py"]
    [violation] = validate(documented_job, None, settings)
    assert violation.path == "spec.tasks[0].template.spec.containers[0].args[1]"
    assert violation.value == "/mnt/team/code"


def test_shared_host_path_prefixes_come_from_settings(documented_job: dict[str, Any]) -> None:
    spec = documented_job["spec"]["tasks"][0]["template"]["spec"]
    spec["volumes"].append({"name": "lustre", "hostPath": {"path": "/lustre/users"}})
    container(documented_job)["volumeMounts"].append({"name": "lustre", "mountPath": "/code"})
    container(documented_job)["workingDir"] = "/code/me"
    assert validate(documented_job, None, Settings()) == []
    custom = Settings(policy=PolicySettings(shared_host_path_prefixes=("/lustre",)))
    assert [v.rule for v in validate(documented_job, None, custom)] == ["working-dir-local"]


def test_scheduler_other_than_volcano_is_not_supported(documented_job: dict[str, Any], settings: Settings) -> None:
    documented_job["spec"]["schedulerName"] = "default-scheduler"
    assert messages(documented_job, settings) == [
        'spec.schedulerName: Unsupported value: "default-scheduler": supported values: "volcano" (or leave it '
        "empty); NPU jobs need Volcano's gang scheduling"
    ]
    documented_job["spec"]["schedulerName"] = ""
    assert validate(documented_job, None, settings) == []


def test_unknown_accelerator_label_is_not_supported(documented_job: dict[str, Any], settings: Settings) -> None:
    documented_job["metadata"]["labels"]["ring-controller.cce"] = "ascend-310"
    documented_job["spec"]["tasks"][0]["template"]["metadata"]["labels"]["ring-controller.cce"] = "ascend-310"
    assert messages(documented_job, settings) == [
        'metadata.labels[ring-controller.cce]: Unsupported value: "ascend-310": supported values: "ascend-1980", '
        '"ascend-1980-snt9b23"; use the value of your nodes\' accelerator'
    ]


def test_task_label_that_differs_from_the_job_label_is_invalid(
    documented_job: dict[str, Any], settings: Settings
) -> None:
    documented_job["spec"]["tasks"][0]["template"]["metadata"]["labels"]["ring-controller.cce"] = "other"
    assert messages(documented_job, settings) == [
        'spec.tasks[0].template.metadata.labels[ring-controller.cce]: Invalid value: "other": must match the job '
        'label ("ascend-1980"); use one accelerator per job'
    ]


def test_job_name_that_makes_an_invalid_configmap_name_is_denied(
    documented_job: dict[str, Any], settings: Settings
) -> None:
    documented_job["metadata"]["name"] = "x" * 250
    found = validate(documented_job, None, settings)
    assert [v.rule for v in found] == ["configmap-name", "volcano-names", "volcano-names"]  # Volcano: 63 at most
    violation = found[0]
    assert violation.path == "metadata.name"
    assert "at most 239 characters after the prefix); rename the job" in violation.render()


def test_subpath_mount_of_the_rank_table_configmap_is_forbidden(
    documented_job: dict[str, Any], settings: Settings
) -> None:
    spec = documented_job["spec"]["tasks"][0]["template"]["spec"]
    spec["volumes"].append({"name": "ranktable", "configMap": {"name": "configmap1980-bert-single"}})
    container(documented_job)["volumeMounts"].append(
        {"name": "ranktable", "mountPath": "/user/config/jobstart_hccl.json", "subPath": "jobstart_hccl.json"}
    )
    assert messages(documented_job, settings) == [
        "spec.tasks[0].template.spec.containers[0].volumeMounts[5].subPath: Forbidden: ConfigMap "
        '"configmap1980-bert-single" is mounted with subPath, and kubelet never updates subPath mounts, so the job '
        'would wait forever for "completed"; mount the volume as a directory (no subPath)'
    ]


def test_another_volume_at_the_rank_table_mount_path_is_forbidden(
    documented_job: dict[str, Any], settings: Settings
) -> None:
    spec = documented_job["spec"]["tasks"][0]["template"]["spec"]
    spec["volumes"].append({"name": "mine", "emptyDir": {}})
    container(documented_job)["volumeMounts"].append({"name": "mine", "mountPath": "/user/config/"})
    assert [v.rule for v in validate(documented_job, None, settings)] == ["rank-table-mount-path"]


def test_all_violations_come_back_in_one_answer(settings: Settings) -> None:
    job = load_example("rejected-two-nodes.yaml")
    container(job)["resources"]["limits"]["huawei.com/ascend-1980"] = "4"
    job["spec"]["schedulerName"] = "kube-scheduler"
    found = rules(job, settings)
    assert found == [
        "scheduler-name",
        "npu-requests-equal-limits",
        "route-plan-min-nodes",
        "route-plan-full-node",
    ]


def test_update_rechecks_the_new_object_but_not_a_job_being_deleted(
    documented_job: dict[str, Any], settings: Settings
) -> None:
    old = copy.deepcopy(documented_job)
    container(documented_job)["resources"]["limits"]["huawei.com/ascend-1980"] = "2"
    assert [v.rule for v in validate(documented_job, old, settings)] == ["npu-requests-equal-limits", "volcano-update"]
    documented_job["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert validate(documented_job, old, settings) == []


def test_warn_mode_turns_a_rule_into_a_warning(settings: Settings) -> None:
    job = load_example("rejected-workdir-nfs.yaml")
    warn = msgspec.structs.replace(settings, policy=PolicySettings(rule_modes=(("working-dir-local", "warn"),)))
    verdict = classify(validate(job, None, warn), warn)
    assert verdict.allowed
    assert [v.rule for v in verdict.warnings] == ["working-dir-local"]


def test_denials_are_403_only_when_all_are_forbidden(settings: Settings, make_route_planned: Build) -> None:
    assert judge(load_example("rejected-workdir-nfs.yaml"), None, settings).http_code == 403
    assert judge(make_route_planned(replicas=2), None, settings).http_code == 422


def test_rendering_follows_kubernetes_field_errors() -> None:
    required = Violation("spec.a", "Required", None, "set it", "r")
    invalid = Violation("spec.b", "Invalid", {"x": [1]}, "fix it", "r")
    unsupported = Violation("spec.c", "NotSupported", "z", 'supported values: "y"', "r")
    forbidden = Violation("spec.d", "Forbidden", "ignored", "do not", "r")
    assert required.render() == "spec.a: Required value: set it"
    assert invalid.render() == 'spec.b: Invalid value: {"x":[1]}: fix it'
    assert unsupported.render() == 'spec.c: Unsupported value: "z": supported values: "y"'
    assert forbidden.render() == "spec.d: Forbidden: do not"
    assert render([required]) == "spec.a: Required value: set it"
    assert render([required, forbidden]) == "[spec.a: Required value: set it, spec.d: Forbidden: do not]"


def test_every_rule_has_a_distinct_name() -> None:
    assert len(RULES) == len(set(RULES)) == 26


@pytest.mark.parametrize(
    "job",
    [
        None,
        [],
        "job",
        {"spec": []},
        {"metadata": {"labels": {"ring-controller.cce": 3}}, "spec": {"tasks": 1}},
        {"metadata": {"labels": {"ring-controller.cce": "ascend-1980"}}, "spec": {"tasks": [None, {"template": 1}]}},
    ],
)
def test_malformed_jobs_never_raise(job: Any, settings: Settings) -> None:
    assert isinstance(validate(job, None, settings), list)


@pytest.mark.parametrize("example", ["rejected-workdir-nfs.yaml", "rejected-two-nodes.yaml", "documented.yaml"])
def test_validation_after_mutation_finds_what_it_found_before(example: str, settings: Settings) -> None:
    from tests.support.admission import apply_ops, mutate

    job = load_example(example)
    mutated = apply_ops(job, mutate(job, settings))
    assert [v.rule for v in validate(mutated, None, settings)] == [v.rule for v in validate(job, None, settings)]


def test_a_launcher_wrapped_shell_command_is_still_checked_for_its_cd(settings: Settings) -> None:
    job = load_example("rejected-workdir-nfs.yaml")
    command = container(job)["command"]
    container(job)["command"] = ["/bin/sh", "/user/config/ringroute-launcher.sh", "--", *command]
    [violation] = validate(job, None, settings)
    assert violation.path == "spec.tasks[0].template.spec.containers[0].command[5]"


def test_a_card_count_beyond_64_bits_is_rendered_not_crashed_on(
    documented_job: dict[str, Any], settings: Settings
) -> None:
    container(documented_job)["resources"] = {"limits": {"huawei.com/ascend-1980": 10**30}}
    [violation] = validate(documented_job, None, settings)
    assert f"Invalid value: {10**30}:" in violation.render()
