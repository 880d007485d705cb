"""Volcano's own job admission, mirrored: a job Volcano would refuse for a reason visible in the job is denied by
ringroute with a message that names the field, the release and the fix; a job Volcano accepts is not."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from tests.support.admission import apply_ops, bare_job, container, mutate
from webhook.admission.policy import validate
from webhook.admission.policy.naming import is_qualified_name
from webhook.admission.policy.volcano_release import configured_release, strict_partition_min_available
from webhook.admission.quantity import parse_quantity
from webhook.common.settings import Settings, VolcanoSettings

Build = Callable[..., dict[str, Any]]


def volcano(version: str = "auto", configmap_plugin: str = "absent") -> Settings:
    return Settings(volcano=VolcanoSettings(version=version, configmap_plugin=configmap_plugin))  # type: ignore[arg-type]


def found(job: dict[str, Any], settings: Settings, prefix: str = "volcano-") -> list[str]:
    """The rendered violations of the rules mirroring Volcano."""
    return [v.render() for v in validate(job, None, settings) if v.rule.startswith(prefix)]


def rules(job: dict[str, Any], settings: Settings) -> list[str]:
    return [v.rule for v in validate(job, None, settings)]


# -- job plugins ----------------------------------------------------------------------------------------------


def test_a_plugin_no_volcano_release_has_is_denied_naming_the_release_and_the_known_plugins() -> None:
    job = bare_job()
    job["spec"]["plugins"] = {"svc": [], "horovod": []}
    assert found(job, volcano("1.10")) == [
        'spec.plugins[horovod]: Unsupported value: "horovod": Volcano 1.10 has no job plugin "horovod" ("unable to '
        'find job plugin"); supported values: "env", "mpi", "pytorch", "ssh", "svc", "tensorflow"; remove it from '
        "spec.plugins"
    ]


def test_with_version_auto_only_plugins_every_release_from_1_7_has_are_accepted() -> None:
    job = bare_job()
    job["spec"]["plugins"] = {"hcclrank": []}
    [message] = found(job, volcano("auto"))
    assert message.startswith(
        'spec.plugins[hcclrank]: Unsupported value: "hcclrank": Volcano before 1.12.3 has no job plugin "hcclrank" '
        "and volcano.version is auto (any release from 1.7)"
    )
    assert message.endswith(
        "or have the cluster admin set volcano.version to the cluster's release; remove it from spec.plugins"
    )


@pytest.mark.parametrize(
    ("version", "plugin", "accepted"),
    [
        ("1.7", "pytorch", True),
        ("1.12", "hcclrank", False),  # a minor release means its first patch: hcclrank came in 1.12.3
        ("1.12.3", "hcclrank", True),
        ("v1.12.4", "ray", False),
        ("1.13", "ray", True),
        ("1.16", "ray", True),
    ],
)
def test_plugins_are_accepted_from_the_release_that_brought_them(version: str, plugin: str, accepted: bool) -> None:
    job = bare_job()
    job["spec"]["plugins"] = {plugin: []}
    assert (found(job, volcano(version)) == []) is accepted


def test_the_vendor_plugin_is_denied_on_open_source_volcano_when_the_mutation_did_not_remove_it() -> None:
    job = bare_job()
    job["spec"]["plugins"] = {"configmap1980": ["--rank-table-version=v2"]}
    [message] = found(job, volcano())
    assert message.startswith(
        'spec.plugins[configmap1980]: Unsupported value: "configmap1980": open-source Volcano has no job plugin '
        '"configmap1980"'
    )
    assert "ringroute's mutating webhook removes it and writes configmap1980-bare itself" in message
    job["metadata"]["annotations"] = {"ringroute.io/rank-table-writer": "volcano-plugin"}
    assert found(job, volcano(configmap_plugin="installed")) == []


def test_an_mpi_job_names_its_master_task_and_before_1_15_its_worker_task() -> None:
    job = bare_job()
    job["spec"]["tasks"][0]["name"] = "trainer"
    job["spec"]["plugins"] = {"mpi": ["--master=launcher"], "svc": [], "ssh": []}
    assert [m.split(": Invalid value")[0] for m in found(job, volcano("1.14"))] == ["spec.plugins[mpi]"] * 2
    [message] = found(job, volcano("1.15"))
    assert 'the mpi plugin\'s master task "launcher" is not a task of this job' in message
    assert "pass --master=<task name>" in message
    job["spec"]["tasks"][0]["name"] = "launcher"
    job["spec"]["tasks"].append({**copy.deepcopy(job["spec"]["tasks"][0]), "name": "worker"})
    assert found(job, volcano()) == []
    job["spec"]["plugins"]["mpi"] = ["-worker", "gpu", "--master", "launcher"]
    assert [m for m in found(job, volcano()) if "worker task" in m]


# -- the rank-table writer ----------------------------------------------------------------------------------------


def test_with_the_vendor_plugin_installed_a_job_that_names_it_must_leave_the_table_to_it() -> None:
    job = bare_job()
    job["spec"]["plugins"] = {"configmap1980": []}
    [violation] = validate(job, None, volcano(configmap_plugin="installed"))
    assert violation.rule == "rank-table-writer"
    assert violation.render().startswith(
        'metadata.annotations[ringroute.io/rank-table-writer]: Invalid value: "ringroute": the job names the '
        "configmap1980 plugin, which writes configmap1980-bare, so ringroute must not"
    )


def test_a_route_planned_job_naming_the_installed_vendor_plugin_would_have_two_writers(
    make_route_planned: Build,
) -> None:
    job = make_route_planned()
    job["spec"]["plugins"]["configmap1980"] = []
    job["metadata"]["annotations"] = {"ringroute.io/rank-table-writer": "volcano-plugin"}
    [violation] = validate(job, None, volcano(configmap_plugin="installed"))
    assert violation.path == "spec.plugins[configmap1980]"
    assert violation.reason == "Forbidden"
    assert "remove the plugin from spec.plugins" in violation.detail


def test_the_plugin_writer_without_the_plugin_would_leave_the_table_unwritten() -> None:
    job = bare_job()
    job["metadata"]["annotations"] = {"ringroute.io/rank-table-writer": "volcano-plugin"}
    for settings in (volcano(), volcano(configmap_plugin="installed")):
        assert rules(job, settings) == ["rank-table-writer"]


# -- counts -------------------------------------------------------------------------------------------------------


def test_negative_counts_are_denied_field_by_field() -> None:
    job = bare_job()
    job["spec"].update({"minAvailable": -1, "maxRetry": -2, "ttlSecondsAfterFinished": -3})
    assert found(job, volcano()) == [
        "spec.minAvailable: Invalid value: -1: must be 0 or more (Volcano refuses a negative minAvailable)",
        "spec.maxRetry: Invalid value: -2: must be 0 or more (Volcano refuses a negative maxRetry)",
        "spec.ttlSecondsAfterFinished: Invalid value: -3: must be 0 or more (Volcano refuses a negative "
        "ttlSecondsAfterFinished)",
    ]
    job = bare_job()
    job["spec"]["tasks"][0]["replicas"] = -4
    job["spec"]["minAvailable"] = 0
    assert found(job, volcano()) == [
        "spec.tasks[0].replicas: Invalid value: -4: must be 0 or more (Volcano refuses a negative replicas)"
    ]


def test_min_available_above_the_replicas_is_denied_for_the_task_and_for_the_job() -> None:
    job = bare_job()
    job["spec"]["minAvailable"] = 5
    job["spec"]["tasks"][0]["minAvailable"] = 4
    assert found(job, volcano()) == [
        "spec.tasks[0].minAvailable: Invalid value: 4: must not exceed the task's replicas (3); Volcano refuses it: "
        "lower minAvailable or raise replicas",
        "spec.minAvailable: Invalid value: 5: must not exceed the total replicas of the tasks (3); Volcano refuses "
        "it: lower minAvailable or raise replicas",
    ]


def test_a_job_without_tasks_is_denied() -> None:
    job = bare_job()
    job["spec"]["tasks"] = []
    job["spec"]["minAvailable"] = 0
    assert found(job, volcano()) == ["spec.tasks: Required value: Volcano refuses a job without tasks; add a task"]


def test_a_partition_policy_must_divide_its_tasks_replicas() -> None:
    job = bare_job()
    job["spec"]["tasks"][0]["partitionPolicy"] = {"totalPartitions": 2, "partitionSize": 2}
    assert found(job, volcano()) == [
        "spec.tasks[0].partitionPolicy.totalPartitions: Invalid value: 2: totalPartitions x partitionSize (2 x 2) "
        "must equal the task's replicas (3); Volcano refuses it otherwise"
    ]
    job["spec"]["tasks"][0]["replicas"] = 4
    job["spec"]["tasks"][0]["minAvailable"] = 4
    # 1.14.0-1.14.2 and 1.15.0 compare minAvailable with minPartitions x partitionSize even when minPartitions is 0
    assert [m.split(":")[0] for m in found(job, volcano())] == ["spec.tasks[0].partitionPolicy.minPartitions"]
    assert found(job, volcano("1.15.1")) == []
    assert strict_partition_min_available(volcano("1.14.2"))
    assert not strict_partition_min_available(volcano("1.14.3"))


# -- names --------------------------------------------------------------------------------------------------------


def test_task_names_are_unique_dns_labels() -> None:
    job = bare_job()
    job["spec"]["tasks"][0]["name"] = "Worker_1"
    job["spec"]["tasks"].append(copy.deepcopy(job["spec"]["tasks"][0]))
    messages = found(job, volcano())
    assert messages[0].startswith('spec.tasks[0].name: Invalid value: "Worker_1": Volcano needs task names to be DNS')
    assert (
        'spec.tasks[1].name: Invalid value: "Worker_1": spec.tasks[0] has the same name and Volcano refuses duplicate '
        "task names; give every task its own name"
    ) in messages


def test_an_unnamed_task_is_judged_by_the_name_volcano_gives_it() -> None:
    job = bare_job()
    del job["spec"]["tasks"][0]["name"]
    job["spec"]["tasks"].append({**copy.deepcopy(job["spec"]["tasks"][0]), "name": "default0"})
    assert found(job, volcano()) == [
        'spec.tasks[1].name: Invalid value: "default0": spec.tasks[0] has the same name and Volcano refuses '
        "duplicate task names; give every task its own name"
    ]


def test_pod_names_volcano_builds_from_job_and_task_must_be_63_characters_at_most() -> None:
    job = bare_job()
    job["metadata"]["name"] = "j" * 40
    job["spec"]["tasks"][0]["name"] = "t" * 22
    [message] = found(job, volcano())
    assert message.startswith(f'spec.tasks[0].name: Invalid value: "{"t" * 22}": Volcano checks the pod name')
    assert "(65 here); shorten the job or the task name" in message
    job["spec"]["tasks"][0]["name"] = "t" * 20
    assert found(job, volcano()) == []


def test_qualified_names_follow_kubernetes() -> None:
    assert is_qualified_name("bert-4x8-worker-0")
    assert is_qualified_name("example.com/name_1")
    assert not is_qualified_name("x" * 64)
    assert not is_qualified_name("-x")
    assert not is_qualified_name("/x")


# -- lifecycle policies ---------------------------------------------------------------------------------------


def test_policy_events_and_actions_are_checked_against_the_release() -> None:
    job = bare_job()
    job["spec"]["policies"] = [{"event": "PodPending", "action": "RestartPod"}]
    assert [m.split(": Unsupported value")[0] for m in found(job, volcano())] == [
        "spec.policies[0].action",
        "spec.policies[0].event",
    ]
    assert found(job, volcano("1.11")) == []
    job["spec"]["policies"] = [{"event": "PodEvicted", "action": "RestartPartition"}]
    [message] = found(job, volcano("1.14"))
    assert "its ValidatingAdmissionPolicy (installed where the admin enables it) and older releases do not" in message


def test_policy_shapes_volcano_refuses_are_each_named() -> None:
    job = bare_job()
    job["spec"]["policies"] = [
        {"event": "PodFailed", "exitCode": 3, "action": "RestartJob"},
        {"action": "RestartJob"},
        {"exitCode": 0, "action": "AbortJob"},
        {"event": "PodEvicted", "action": "RestartJob"},
        {"events": ["PodEvicted"], "action": "AbortJob"},
        {"event": "TaskCompleted"},
        {"event": "OutOfSync", "action": "SyncJob"},
    ]
    job["spec"]["tasks"][0]["policies"] = [
        {"exitCode": 2, "action": "RestartTask"},
        {"exitCode": 2, "action": "AbortJob"},
    ]
    assert [m.split(" (Volcano refuses")[0] for m in found(job, volcano())] == [
        "spec.policies[0].exitCode: Forbidden: must not be set together with events",
        "spec.policies[1]: Required value: name an event (or events) or an exitCode",
        "spec.policies[2].exitCode: Invalid value: 0: 0 is not an error code; name a failure",
        'spec.policies[4].events[0]: Invalid value: "PodEvicted": spec.policies[3].event names the same event',
        "spec.policies[5].action: Required value: an event policy needs an action",
        'spec.policies[6].action: Unsupported value: "SyncJob": Volcano (any release from 1.7, volcano.version: '
        'auto) has no lifecycle-policy action "SyncJob"; supported values: "AbortJob", "CompleteJob", "RestartJob", '
        '"RestartTask", "ResumeJob", "TerminateJob"',
        'spec.policies[6].event: Unsupported value: "OutOfSync": Volcano (any release from 1.7, volcano.version: '
        'auto) has no lifecycle-policy event "OutOfSync"; supported values: "*", "JobUpdated", "PodEvicted", '
        '"PodFailed", "TaskCompleted", "TaskFailed", "Unknown"',
        "spec.tasks[0].policies[1].exitCode: Invalid value: 2: spec.tasks[0].policies[0].exitCode names the same exit "
        "code",
    ]


def test_any_event_excludes_every_other_event() -> None:
    job = bare_job()
    job["spec"]["policies"] = [{"event": "*", "action": "RestartJob"}, {"event": "PodFailed", "action": "AbortJob"}]
    assert found(job, volcano()) == [
        "spec.policies[0].event: Invalid value: \"*\": '*' covers every event: no other policy may name an event "
        "(Volcano refuses the job otherwise)"
    ]


def test_the_documented_policy_is_accepted_by_every_release() -> None:
    job = bare_job()
    job["spec"]["policies"] = [{"event": "PodEvicted", "action": "RestartJob"}]
    for version in ("auto", "1.7", "1.10", "1.16"):
        assert found(job, volcano(version)) == []


# -- task dependencies, volumes, queue, topology -------------------------------------------------------------


def two_tasks(first: list[str] | None, second: list[str] | None) -> dict[str, Any]:
    job = bare_job()
    worker = job["spec"]["tasks"][0]
    job["spec"]["tasks"] = [{**copy.deepcopy(worker), "name": "a"}, {**copy.deepcopy(worker), "name": "b"}]
    for task, names in zip(job["spec"]["tasks"], (first, second), strict=True):
        if names is not None:
            task["dependsOn"] = {"name": names}
    return job


def test_task_dependencies_must_form_a_directed_acyclic_graph() -> None:
    assert found(two_tasks(None, ["a"]), volcano()) == []
    cycle = found(two_tasks(["b"], ["a"]), volcano())
    assert [m.split(": Invalid value")[0] for m in cycle] == [
        "spec.tasks[0].dependsOn.name",
        "spec.tasks[1].dependsOn.name",
    ]
    assert 'task "a" is part of a dependency cycle' in cycle[0]
    [missing] = found(two_tasks(None, ["c"]), volcano())
    assert 'task "b" names "c", which is not a task of this job' in missing
    [twice] = found(two_tasks(None, ["a", "a"]), volcano())
    assert 'task "b" names "a" twice, and Volcano then never starts the task' in twice


def test_job_level_volumes_need_a_unique_mount_path_and_one_claim() -> None:
    job = bare_job()
    job["spec"]["volumes"] = [
        {"mountPath": "/data", "volumeClaimName": "data"},
        {"mountPath": "/data", "volumeClaim": {"accessModes": ["ReadWriteOnce"]}},
        {"mountPath": "", "volumeClaimName": "Bad_Name"},
        {"mountPath": "/out", "volumeClaimName": "out", "volumeClaim": {}},
        {"mountPath": "/x"},
    ]
    assert [m.split(":")[0] for m in found(job, volcano())] == [
        "spec.volumes[1].mountPath",
        "spec.volumes[2].mountPath",
        "spec.volumes[2].volumeClaimName",
        "spec.volumes[3].volumeClaimName",
        "spec.volumes[4]",
    ]


def test_the_root_queue_is_refused_from_1_11_and_other_queues_are_left_to_volcano() -> None:
    job = bare_job()
    job["spec"]["queue"] = "root"
    assert found(job, volcano()) == [
        'spec.queue: Forbidden: Volcano 1.11 and later refuse jobs in the "root" queue (the top of the queue '
        "hierarchy); submit to a leaf queue"
    ]
    assert found(job, volcano("1.10")) == []
    job["spec"]["queue"] = "no-such-queue"  # only Volcano can tell: it needs the API server
    assert found(job, volcano()) == []


def test_network_topology_names_one_of_highest_tier_allowed_and_highest_tier_name() -> None:
    job = bare_job()
    job["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1, "highestTierName": "leaf"}
    assert found(job, volcano()) == [
        "spec.networkTopology.highestTierName: Forbidden: must not be set together with highestTierAllowed (Volcano "
        "refuses both); keep one"
    ]


def test_a_topology_policy_needs_whole_cpus_in_every_container() -> None:
    job = bare_job()
    job["spec"]["tasks"][0]["topologyPolicy"] = "single-numa-node"
    container(job)["resources"]["limits"]["cpu"] = "1500m"
    [message] = found(job, volcano())
    assert message.startswith(
        'spec.tasks[0].template.spec.containers[0].resources.limits[cpu]: Invalid value: "1500m": topologyPolicy '
        '"single-numa-node" needs a whole number of CPUs'
    )
    container(job)["resources"]["requests"] = {"cpu": "2", "huawei.com/ascend-1980": "8"}
    assert found(job, volcano()) == []
    del container(job)["resources"]["requests"]["cpu"]
    assert [m.split(":")[0] for m in found(job, volcano())] == [
        "spec.tasks[0].template.spec.containers[0].resources.requests[cpu]"
    ]


def test_quantities_parse_exactly() -> None:
    assert parse_quantity("1500m") == parse_quantity("1.5") == parse_quantity(1.5)
    assert parse_quantity("1Gi") == 2**30
    assert parse_quantity("1e3") == 1000
    assert parse_quantity("8") == 8
    assert parse_quantity("eight") is None
    assert parse_quantity(True) is None


# -- the documented jobs ------------------------------------------------------------------------------------------


def test_the_examples_keep_every_volcano_rule_once_the_mutation_removed_the_vendor_plugin(
    documented_job: dict[str, Any], distributed_job: dict[str, Any]
) -> None:
    for job in (documented_job, distributed_job):
        settings = volcano()
        assert rules(job, settings) == ["volcano-job-plugins"]
        mutated = apply_ops(job, mutate(job, settings))
        assert validate(mutated, None, settings) == []
        for version in ("1.7", "1.10", "1.12", "1.16"):
            pinned = msgspec.structs.replace(settings, volcano=VolcanoSettings(version=version))
            assert validate(mutated, None, pinned) == []


def test_volcano_version_strings_parse_with_their_patch() -> None:
    assert configured_release(volcano("auto")) is None
    assert configured_release(volcano("1.12")) == (1, 12, 0)
    assert configured_release(volcano("v1.12.3")) == (1, 12, 3)
