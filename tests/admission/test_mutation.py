"""Mutation: every emitted patch applies to the original, yields a schema-valid Volcano Job whose pod
templates are valid Kubernetes pod templates, injects what the job lacks, and is idempotent."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings

from tests.support.admission import (
    apply_ops,
    bare_job,
    check_schemas,
    container,
    injected_items,
    load_example,
    mutate,
    npu_jobs,
)
from webhook.admission.mutation import PatchOp, add, encode_patch, pointer
from webhook.admission.policy import validate
from webhook.common.names import INJECTED_ANNOTATION, LAUNCHER_KEY
from webhook.common.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.name for p in (ROOT / "examples" / "jobs").glob("*.yaml"))
Build = Callable[..., dict[str, Any]]


def test_the_documented_job_gets_the_rank_table_configmap_and_env(
    documented_job: dict[str, Any], settings: Settings
) -> None:
    ops = mutate(documented_job, settings)
    mutated = apply_ops(documented_job, ops)
    spec = mutated["spec"]["tasks"][0]["template"]["spec"]
    assert {"name": "ringroute-config", "configMap": {"name": "configmap1980-bert-single"}} in spec["volumes"]
    assert {"name": "ringroute-config", "mountPath": "/user/config"} in container(mutated)["volumeMounts"]
    env = {e["name"]: e for e in container(mutated)["env"]}
    assert env["RANK_TABLE_FILE"]["value"] == "/user/config/jobstart_hccl.json"
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["HOST_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP"
    # the job already had drivers, nodeSelector, anti-affinity, task label and scheduler: nothing else is added
    recorded = ["configmap-volume", "configmap1980-plugin-removed", "env", "npu-pods"]
    assert mutated["metadata"]["annotations"][INJECTED_ANNOTATION] == ",".join(recorded)
    assert injected_items(ops) == recorded
    assert container(mutated)["command"] == container(documented_job)["command"]


def test_every_op_is_an_add_but_the_removal_of_the_vendor_plugin(
    documented_job: dict[str, Any], settings: Settings
) -> None:
    ops = mutate(documented_job, settings)
    assert ops
    assert [op for op in ops if op["op"] != "add"] == [{"op": "remove", "path": "/spec/plugins/configmap1980"}]
    assert ops == json.loads(base64.b64decode(encode_patch(ops)))


def test_a_bare_job_gets_everything_it_lacks(settings: Settings) -> None:
    job = bare_job()
    mutated = apply_ops(job, mutate(job, settings))
    template = mutated["spec"]["tasks"][0]["template"]
    spec = template["spec"]
    assert template["metadata"]["labels"] == {"ring-controller.cce": "ascend-1980"}
    assert spec["nodeSelector"] == {"accelerator/huawei-npu": "ascend-1980"}
    [term] = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchExpressions"][0]["values"] == ["bare"]
    assert sorted(v["name"] for v in spec["volumes"]) == [
        "ascend-add-ons",
        "ascend-driver",
        "hccn",
        "localtime",
        "npu-smi",
        "ringroute-config",
    ]
    mounts = {m["mountPath"] for m in container(mutated)["volumeMounts"]}
    assert mounts == {
        "/user/config",
        "/usr/local/Ascend/driver",
        "/usr/local/Ascend/add-ons",
        "/etc/localtime",
        "/etc/hccn.conf",
        "/usr/local/sbin/npu-smi",
    }
    assert mutated["spec"]["schedulerName"] == "volcano"
    assert mutated["metadata"]["annotations"][INJECTED_ANNOTATION] == (
        "anti-affinity,configmap-volume,driver-volumes,env,node-selector,npu-pods,scheduler-name,task-label"
    )
    assert template["metadata"]["annotations"] == {"ringroute.io/npu-pods": "3"}
    assert validate(mutated, None, settings) == []


def test_route_planned_commands_are_wrapped_by_the_launcher(
    distributed_job: dict[str, Any], settings: Settings
) -> None:
    original = list(container(distributed_job)["command"])
    mutated = apply_ops(distributed_job, mutate(distributed_job, settings))
    assert container(mutated)["command"] == ["/bin/sh", f"/user/config/{LAUNCHER_KEY}", "--", *original]
    assert "launcher" in mutated["metadata"]["annotations"][INJECTED_ANNOTATION].split(",")


def test_launcher_opt_out_annotation_leaves_the_command_alone(
    distributed_job: dict[str, Any], settings: Settings
) -> None:
    distributed_job["metadata"]["annotations"] = {"ringroute.io/launcher": "false"}
    mutated = apply_ops(distributed_job, mutate(distributed_job, settings))
    assert container(mutated)["command"] == container(distributed_job)["command"]


def test_containers_without_a_command_are_not_wrapped(distributed_job: dict[str, Any], settings: Settings) -> None:
    del container(distributed_job)["command"]
    mutated = apply_ops(distributed_job, mutate(distributed_job, settings))
    assert "command" not in container(mutated)


def test_the_policy_recognises_the_launcher_file_the_configmap_carries() -> None:
    from webhook.admission.jobview import unwrap_launcher

    assert unwrap_launcher(["/bin/sh", f"/user/config/{LAUNCHER_KEY}", "--", "python"]) == ["python"]


@pytest.mark.parametrize("example", EXAMPLES)
def test_patched_examples_are_valid_volcano_jobs_and_pod_templates(
    example: str,
    settings: Settings,
    volcano_job_schema: jsonschema.Draft202012Validator,
    pod_template_schema: jsonschema.Draft202012Validator,
) -> None:
    job = load_example(example)
    mutated = apply_ops(job, mutate(job, settings))
    check_schemas(mutated, volcano_job_schema, pod_template_schema)


def test_schema_check_catches_a_misplaced_field(
    documented_job: dict[str, Any],
    volcano_job_schema: jsonschema.Draft202012Validator,
    pod_template_schema: jsonschema.Draft202012Validator,
) -> None:
    container(documented_job)["volumeMounts"].append({"name": "x", "mountPath": 3, "subpath": "a"})
    with pytest.raises(AssertionError, match="mountPath"):
        check_schemas(documented_job, volcano_job_schema, pod_template_schema)


@pytest.mark.parametrize("example", EXAMPLES)
def test_mutating_the_mutated_job_adds_nothing(example: str, settings: Settings) -> None:
    job = load_example(example)
    once = apply_ops(job, mutate(job, settings))
    assert mutate(once, settings) == []


def test_keys_with_slash_and_tilde_are_escaped(settings: Settings) -> None:
    assert pointer("metadata", "annotations", "ringroute.io/injected") == "/metadata/annotations/ringroute.io~1injected"
    assert pointer("a~b/c") == "/a~0b~1c"
    job = bare_job()
    job["metadata"]["annotations"] = {"team~x/y": "1"}
    job["spec"]["tasks"][0]["template"]["spec"]["nodeSelector"] = {"zone/a~b": "z"}
    ops = mutate(job, settings)
    paths = [op["path"] for op in ops]
    assert "/metadata/annotations/ringroute.io~1injected" in paths
    assert "/spec/tasks/0/template/spec/nodeSelector/accelerator~1huawei-npu" in paths
    mutated = apply_ops(job, ops)
    assert mutated["metadata"]["annotations"]["team~x/y"] == "1"
    assert mutated["spec"]["tasks"][0]["template"]["spec"]["nodeSelector"] == {
        "zone/a~b": "z",
        "accelerator/huawei-npu": "ascend-1980",
    }


def test_several_tasks_each_get_their_own_patch_and_cpu_tasks_are_left_alone(settings: Settings) -> None:
    job = bare_job()
    second = copy.deepcopy(job["spec"]["tasks"][0])
    second["name"] = "worker-b"
    cpu = {"name": "cpu", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}
    job["spec"]["tasks"] += [cpu, second]
    ops = mutate(job, settings)
    assert not any(op["path"].startswith("/spec/tasks/1/") for op in ops)
    mutated = apply_ops(job, ops)
    for index in (0, 2):
        assert container(mutated, index)["env"][0]["name"] == "RANK_TABLE_FILE"
    assert mutated["spec"]["tasks"][1] == cpu
    assert mutate(mutated, settings) == []


def test_init_containers_are_left_alone_unless_they_use_npus(settings: Settings) -> None:
    job = bare_job()
    spec = job["spec"]["tasks"][0]["template"]["spec"]
    spec["initContainers"] = [
        {"name": "fetch", "image": "busybox", "command": ["sh", "-c", "true"]},
        {
            "name": "warmup",
            "image": "train:v1",
            "command": ["warm"],
            "resources": {"limits": {"huawei.com/ascend-1980": "8"}},
        },
    ]
    container(job)["env"] = [{"name": "ROUTE_PLAN", "value": "true"}]
    mutated = apply_ops(job, mutate(job, settings))
    fetch, warmup = mutated["spec"]["tasks"][0]["template"]["spec"]["initContainers"]
    assert fetch == spec["initContainers"][0]
    assert {"name": "ringroute-config", "mountPath": "/user/config"} in warmup["volumeMounts"]
    assert warmup["command"] == ["warm"]  # init containers run before the table completes: never wrapped
    assert container(mutated)["command"][:2] == ["/bin/sh", "/user/config/ringroute-launcher.sh"]


def test_an_existing_mount_of_the_configmap_is_reused(documented_job: dict[str, Any], settings: Settings) -> None:
    spec = documented_job["spec"]["tasks"][0]["template"]["spec"]
    spec["volumes"].append({"name": "ranktable", "configMap": {"name": "configmap1980-bert-single"}})
    container(documented_job)["volumeMounts"].append({"name": "ranktable", "mountPath": "/opt/ranks"})
    mutated = apply_ops(documented_job, mutate(documented_job, settings))
    assert [v["name"] for v in mutated["spec"]["tasks"][0]["template"]["spec"]["volumes"]].count("ranktable") == 1
    assert "ringroute-config" not in json.dumps(mutated)
    env = {e["name"]: e for e in container(mutated)["env"]}
    assert env["RANK_TABLE_FILE"]["value"] == "/opt/ranks/jobstart_hccl.json"


def test_user_env_values_are_kept(documented_job: dict[str, Any], settings: Settings) -> None:
    container(documented_job)["env"].append({"name": "POD_IP", "value": "fixed"})
    mutated = apply_ops(documented_job, mutate(documented_job, settings))
    assert [e for e in container(mutated)["env"] if e["name"] == "POD_IP"] == [{"name": "POD_IP", "value": "fixed"}]


def test_a_volume_name_clash_gets_a_fresh_name(settings: Settings) -> None:
    job = bare_job()
    job["spec"]["tasks"][0]["template"]["spec"]["volumes"] = [{"name": "ringroute-config", "emptyDir": {}}]
    mutated = apply_ops(job, mutate(job, settings))
    names = [v["name"] for v in mutated["spec"]["tasks"][0]["template"]["spec"]["volumes"]]
    assert "ringroute-config-2" in names
    assert len(names) == len(set(names))
    assert mutate(mutated, settings) == []


def test_unknown_profiles_and_unnamed_jobs_are_not_mutated(documented_job: dict[str, Any], settings: Settings) -> None:
    unknown = copy.deepcopy(documented_job)
    unknown["metadata"]["labels"]["ring-controller.cce"] = "ascend-310"
    assert mutate(unknown, settings) == []
    del documented_job["metadata"]["name"]
    documented_job["metadata"]["generateName"] = "bert-"
    assert mutate(documented_job, settings) == []


def test_previous_injections_are_kept_in_the_annotation(documented_job: dict[str, Any], settings: Settings) -> None:
    documented_job["metadata"]["annotations"] = {INJECTED_ANNOTATION: "launcher"}
    mutated = apply_ops(documented_job, mutate(documented_job, settings))
    assert mutated["metadata"]["annotations"][INJECTED_ANNOTATION] == (
        "configmap-volume,configmap1980-plugin-removed,env,launcher,npu-pods"
    )


def test_patch_ops_are_rfc6902_adds() -> None:
    assert add("/a~1b", [1]) == {"op": "add", "path": "/a~1b", "value": [1]}


# -- properties --------------------------------------------------------------------------------------------


@hypothesis_settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(npu_jobs())
def test_mutation_is_idempotent_and_always_applies(job: dict[str, Any]) -> None:
    settings = Settings()
    original = copy.deepcopy(job)
    ops = mutate(job, settings)
    assert job == original  # pure: the input is not modified
    once = apply_ops(job, ops)
    assert mutate(once, settings) == []
    assert {op["op"] for op in ops} <= {"add", "remove", "copy"}
    for op in ops:
        if op["op"] == "copy":  # only a whole template, onto a task whose template was the same
            source, target = op["from"].split("/"), op["path"].split("/")
            assert source[-1] == target[-1] == "template"
            tasks = job["spec"]["tasks"]
            assert tasks[int(source[3])]["template"] == tasks[int(target[3])]["template"]


def test_a_mount_of_a_missing_volume_named_like_the_config_volume_keeps_its_meaning(settings: Settings) -> None:
    job = bare_job()
    container(job)["volumeMounts"] = [{"name": "ringroute-config", "mountPath": "/data"}]
    container(job)["env"] = [{"name": "ROUTE_PLAN", "value": "true"}]
    mutated = apply_ops(job, mutate(job, settings))
    volumes = {v["name"]: v for v in mutated["spec"]["tasks"][0]["template"]["spec"]["volumes"]}
    assert "ringroute-config" not in volumes
    assert volumes["ringroute-config-2"]["configMap"] == {"name": "configmap1980-bare"}
    assert mutate(mutated, settings) == []


def tasks_ops(ops: list[PatchOp], index: int) -> list[PatchOp]:
    """The ops of one task, with paths relative to the task."""
    root = f"/spec/tasks/{index}"
    return [{**op, "path": op["path"][len(root) :]} for op in ops if op["path"].startswith(root + "/")]


def test_tasks_with_the_same_template_get_one_copy_of_the_first_ones_template(settings: Settings) -> None:
    job = bare_job()
    container(job)["env"] = [{"name": "ROUTE_PLAN", "value": "true"}]
    first = job["spec"]["tasks"][0]
    job["spec"]["tasks"] += [{**copy.deepcopy(first), "name": f"worker-{i}"} for i in range(1, 11)]
    ops = mutate(job, settings)
    assert len(tasks_ops(ops, 0)) > 5
    for index in range(1, 11):
        assert tasks_ops(ops, index) == [{"op": "copy", "from": "/spec/tasks/0/template", "path": "/template"}]
    mutated = apply_ops(job, ops)
    for index in range(1, 11):
        assert mutated["spec"]["tasks"][index]["template"] == mutated["spec"]["tasks"][0]["template"]
        assert mutated["spec"]["tasks"][index]["name"] == f"worker-{index}"
    assert mutate(mutated, settings) == []


def test_templates_that_differ_only_as_1_and_true_are_patched_separately(settings: Settings) -> None:
    job = bare_job()
    container(job)["env"] = [{"name": "ROUTE_PLAN", "value": "true"}]
    container(job)["command"] = ["python", "train.py", 1]
    second = copy.deepcopy(job["spec"]["tasks"][0])
    second["template"]["spec"]["containers"][0]["command"] = ["python", "train.py", True]
    job["spec"]["tasks"].append(second)
    commands = {op["path"]: op["value"] for op in mutate(job, settings) if op["path"].endswith("/command")}
    assert commands["/spec/tasks/0/template/spec/containers/0/command"][-1] is not True
    assert commands["/spec/tasks/1/template/spec/containers/0/command"][-1] is True


def test_templates_that_are_not_plain_json_are_still_patched(settings: Settings) -> None:
    job = bare_job()
    container(job)["ports"] = [{"containerPort": 2**70}]  # beyond what orjson serialises
    job["spec"]["tasks"].append(copy.deepcopy(job["spec"]["tasks"][0]))
    ops = mutate(job, settings)
    assert tasks_ops(ops, 1) == tasks_ops(ops, 0) != []
