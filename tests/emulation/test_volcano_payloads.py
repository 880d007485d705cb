"""Volcano's side of the extender protocol, per release: the payloads (`emulation.volcano_payloads`), the release
tables and detection (`webhook.extender`), the answers, scores and allocate rules (`webhook.volcano_emulation`)."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from emulation import volcano_payloads as payloads
from webhook import volcano_emulation as volcano
from webhook.extender import volcano_releases as releases
from webhook.extender.release_detection import detect_release_range

RELEASES = releases.RELEASES


# ----------------------------------------------------------------------------------------------------------- helpers


def _pending_task(release: str) -> dict[str, Any]:
    pod = payloads.volcano_job_pod("bert", 0, namespace="team-a", release=release)
    return payloads.task_info(pod, release=release)


def _busy_node(release: str, *, daemon: bool = True) -> dict[str, Any]:
    node = payloads.kube_node("npu-0001-02", labels={"volcano.sh/tor": "leaf-0001"}, index=10, release=release)
    tasks = [
        payloads.task_info(
            payloads.volcano_job_pod("gpt", 3, node_name="npu-0001-02", release=release), release=release
        )
    ]
    if daemon:
        tasks += [
            payloads.task_info(
                payloads.daemonset_pod(kind, "npu-0001-02", "10.20.0.11", release=release), release=release
            )
            for kind in payloads.DAEMONSET_KINDS
        ]
    return payloads.node_info(node, tasks, release=release, image_nodes=24)


def _job(release: str, *, network_topology: Mapping[str, Any] | None = None) -> dict[str, Any]:
    uid = payloads.stable_uid("job", "team-a", "gpt")
    tasks = [
        payloads.task_info(
            payloads.volcano_job_pod("gpt", i, namespace="team-a", job_uid=uid, node_name=f"n{i}", release=release),
            release=release,
        )
        for i in range(2)
    ]
    return payloads.job_info(
        tasks,
        pod_group_name=f"gpt-{uid}",
        namespace="team-a",
        min_task_member={"worker": 2},
        owner_job=("gpt", uid),
        network_topology=network_topology,
        release=release,
    )


def _cluster(release: str) -> payloads.SyntheticCluster:
    return payloads.synthetic_cluster(24, release=release, seed=3)


# ------------------------------------------------------------------------------------------- key sets per release


@pytest.mark.parametrize("release", RELEASES)
def test_task_info_keys_are_the_go_fields_of_the_release_in_declaration_order(release: str) -> None:
    assert tuple(_pending_task(release)) == releases.GO_FIELDS[release]["TaskInfo"]


@pytest.mark.parametrize("release", RELEASES)
def test_node_info_keys_and_nested_struct_keys_follow_the_release(release: str) -> None:
    info = _busy_node(release)
    fields = releases.GO_FIELDS[release]
    assert tuple(info) == fields["NodeInfo"]
    for key in ("Releasing", "Pipelined", "Idle", "Used", "Allocatable", "OversubscriptionResource"):
        assert tuple(info[key]) == fields["Resource"]
    assert tuple(info["State"]) == fields["NodeState"]
    assert tuple(info["ResourceUsage"]) == fields["NodeUsage"]
    for summary in info["ImageStates"].values():
        assert tuple(summary) == fields["ImageStateSummary"]
    for task in info["Tasks"].values():
        assert tuple(task) == fields["TaskInfo"]
        assert tuple(task["NumaInfo"]) == fields["TopologyInfo"]


@pytest.mark.parametrize("release", RELEASES)
def test_job_info_keys_and_its_budget_subjobs_and_pod_group_follow_the_release(release: str) -> None:
    job = _job(release)
    fields = releases.GO_FIELDS[release]
    assert tuple(job) == fields["JobInfo"]
    assert tuple(job["Budget"]) == fields["DisruptionBudget"]
    for key in ("Allocated", "TotalRequest"):
        assert tuple(job[key]) == fields["Resource"]
    if "SubJobs" in job:
        (sub_job,) = job["SubJobs"].values()
        assert tuple(sub_job) == fields["SubJobInfo"]
    group = job["PodGroup"]
    if releases.release_at_least(release, "1.14"):
        assert tuple(group) == ("metadata", "spec", "status", "Version")
        assert [k for k in fields["PodGroupSpec"] if k in group["spec"]] == list(group["spec"])
    else:
        meta_keys = [k for k in group if k not in ("Spec", "Status", "Version")]
        assert meta_keys == [k for k in releases.OBJECT_META_KEYS if k in meta_keys]
        assert list(group)[-3:] == ["Spec", "Status", "Version"]
        assert tuple(group["Spec"]) == fields["PodGroupSpec"]
        assert tuple(group["Status"]) == fields["PodGroupStatus"]
        (condition,) = group["Status"]["Conditions"]
        assert tuple(condition) == fields["PodGroupCondition"]


@pytest.mark.parametrize("release", RELEASES)
def test_queue_and_namespace_info_keys_follow_the_release(release: str) -> None:
    fields = releases.GO_FIELDS[release]
    queue = payloads.queue_info(release=release)
    assert tuple(queue) == fields["QueueInfo"]
    inner = queue["Queue"]
    if releases.release_at_least(release, "1.14"):
        assert tuple(inner) == ("metadata", "spec", "status")
    else:
        spec = inner["Spec"]
        # Tagged omitempty fields (affinity, type, parent, ...) drop out when empty; Go-named ones never do.
        assert [k for k in fields["QueueSpec"] if k[0].isupper() or k == "guarantee"] == list(spec)
        assert tuple(inner["Status"]) == fields["QueueStatus"]
    assert tuple(payloads.namespace_info("team-a", release=release)) == fields["NamespaceInfo"]


@pytest.mark.parametrize("release", RELEASES)
def test_request_wrappers_have_the_argument_go_keys(release: str) -> None:
    task, node = _pending_task(release), _busy_node(release, daemon=False)
    fields = releases.GO_FIELDS[release]
    assert tuple(payloads.predicate_request(task, node)) == fields["PredicateRequest"]
    assert tuple(payloads.prioritize_request(task, [node])) == fields["PrioritizeRequest"]
    session = payloads.on_session_open_request(
        jobs=[_job(release)], nodes=[node], queues=[payloads.queue_info(release=release)]
    )
    assert tuple(session) == fields["OnSessionOpenRequest"]
    if releases.release_at_least(release, "1.13"):
        assert tuple(payloads.event_handler_request(task, release=release)) == fields["EventHandlerRequest"]
    else:
        with pytest.raises(ValueError, match=r"1\.13"):
            payloads.event_handler_request(task, release=release)


@pytest.mark.parametrize("release", RELEASES)
def test_a_last_transaction_marshals_as_the_transaction_context_of_the_release(release: str) -> None:
    pod = payloads.volcano_job_pod("bert", 1, release=release)
    task = payloads.task_info(pod, release=release, last_transaction=("npu-1", releases.TASK_STATUS["Allocated"]))
    assert tuple(task["LastTransaction"]) == releases.GO_FIELDS[release]["TransactionContext"]
    assert task["LastTransaction"]["Status"] == 2


def test_field_tables_have_an_entry_for_every_struct_the_builders_use() -> None:
    for release in RELEASES:
        fields = releases.GO_FIELDS[release]
        for struct in ("TaskInfo", "NodeInfo", "JobInfo", "Resource", "QueueInfo", "PredicateResponse"):
            assert struct in fields
        assert ("SubJobInfo" in fields) == releases.release_at_least(release, "1.14")
        assert ("EventHandlerRequest" in fields) == releases.release_at_least(release, "1.13")


# -------------------------------------------------------------------------- field tables against Volcano's source

GO_SOURCES = Path(__file__).resolve().parents[1] / "data" / "volcano"
"""Excerpts of Volcano's Go sources at each release tag (tests/data/volcano/PROVENANCE.yaml)."""


def _go_json_keys(source: str, struct: str) -> tuple[str, ...]:
    """JSON keys encoding/json writes for `struct` in `source`: exported fields in order, `json:"-"` dropped, tag
    names used, untagged embedded structs of the same file promoted in place."""
    match = re.search(rf"^type {struct} struct \{{\n(.*?)^\}}", source, re.S | re.M)
    assert match, struct
    keys: list[str] = []
    for raw_line in match.group(1).splitlines():
        line = re.sub(r"//.*$", "", raw_line).strip()
        if not line:
            continue
        tag = re.search(r'json:"([^"]*)"', line)
        parts = re.sub(r"`.*`", "", line).split()
        if len(parts) == 1:  # embedded
            keys.extend(_go_json_keys(source, parts[0]))
            continue
        name = parts[0]
        if (tag and tag.group(1).split(",")[0] == "-") or not name[0].isupper():
            continue
        keys.append(tag.group(1).split(",")[0] if tag and tag.group(1).split(",")[0] else name)
    return tuple(keys)


@pytest.mark.parametrize("release", RELEASES)
def test_field_tables_equal_the_exported_fields_of_volcanos_structs_at_the_release_tag(release: str) -> None:
    checked = set()
    for path in sorted((GO_SOURCES / releases.RELEASE_TAGS[release]).rglob("*.go")):
        source = path.read_text(encoding="utf-8")
        for struct in re.findall(r"^type (\w+) struct", source, re.M):
            if struct in releases.GO_FIELDS[release]:
                assert _go_json_keys(source, struct) == releases.GO_FIELDS[release][struct], (release, struct)
                checked.add(struct)
    assert {"TaskInfo", "NodeInfo", "JobInfo", "QueueInfo", "PredicateRequest", "PrioritizeRequest"} <= checked


# ---------------------------------------------------------------------------------------- Go encoding/json output


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (8000.0, "8000"),
        (0.5, "0.5"),
        (1649267441664.0, "1649267441664"),
        (3456736289398000.0, "3456736289398000"),
        (1.2345678901234567e19, "12345678901234567000"),
        (1e21, "1e+21"),
        (1e-7, "1e-7"),
        (0.00001, "0.00001"),
        (-0.0, "-0"),
        (123.456, "123.456"),
    ],
)
def test_floats_are_written_as_go_writes_float64(value: float, text: str) -> None:
    assert payloads.go_float_text(value) == text
    assert payloads.go_json(payloads.go_number(value)) == text.encode()


def test_nan_cannot_be_marshalled() -> None:
    with pytest.raises(ValueError, match="unsupported value"):
        payloads.go_float_text(float("nan"))


def test_html_characters_and_line_separators_are_escaped_like_go() -> None:
    out = payloads.go_json({"cmd": "a && b <c> \u2028\u2029"})
    assert out == b'{"cmd":"a \\u0026\\u0026 b \\u003cc\\u003e \\u2028\\u2029"}'


def test_backspace_and_form_feed_escapes_depend_on_the_go_version_of_the_release() -> None:
    value = {"s": "x\b\fy\\b"}
    assert payloads.go_json(value, "1.7") == b'{"s":"x\\u0008\\u000cy\\\\b"}'
    assert payloads.go_json(value, "1.10") == b'{"s":"x\\b\\fy\\\\b"}'


def test_resources_print_integral_floats_without_a_fraction_and_sort_scalar_keys() -> None:
    out = payloads.resource(milli_cpu=8000.0, memory=2.0**30, scalars={"pods": 1.0, "huawei.com/ascend-1980": 8000.0})
    assert payloads.go_json(out) == (
        b'{"MilliCPU":8000,"Memory":1073741824,"ScalarResources":{"huawei.com/ascend-1980":8000,"pods":1},'
        b'"MaxTaskNum":0}'
    )
    assert payloads.resource()["ScalarResources"] is None


def test_task_status_index_keys_are_decimal_strings_in_string_order() -> None:
    uid = payloads.stable_uid("job", "default", "mix")
    pods = [
        payloads.volcano_job_pod("mix", 0, job_uid=uid, node_name="n0"),
        payloads.volcano_job_pod("mix", 1, job_uid=uid, node_name="n1", phase="Pending"),
        payloads.volcano_job_pod("mix", 2, job_uid=uid),
    ]
    tasks = [payloads.task_info(p) for p in pods]
    job = payloads.job_info(tasks, pod_group_name=f"mix-{uid}")
    assert list(job["TaskStatusIndex"]) == ["1", "16", "32"]  # Pending, Bound, Running
    assert list(job["Tasks"]) == sorted(t["UID"] for t in tasks)


def test_node_tasks_are_keyed_by_namespace_and_name_not_by_uid() -> None:
    info = _busy_node("1.16")
    for key, task in info["Tasks"].items():
        assert key == f"{task['Namespace']}/{task['Name']}"
        assert key != task["UID"]


@pytest.mark.parametrize(
    ("release", "others"),
    [
        ("1.7", None),
        ("1.8", {"GpuShare": None, "vgpu4pd": None}),
        ("1.13", {"GpuShare": None, "hamivgpu": None}),
        ("1.14", {}),
        ("1.16", {}),
    ],
)
def test_node_others_holds_what_set_node_others_resource_leaves_on_an_npu_node(
    release: str, others: dict[str, None] | None
) -> None:
    assert _busy_node(release, daemon=False)["Others"] == others


def test_nil_fields_marshal_as_null_and_empty_maps_as_objects() -> None:
    task = _pending_task("1.11")
    assert task["LastTransaction"] is None
    assert task["PodVolumes"] is None
    assert task["NumaInfo"] == {"Policy": "", "ResMap": {}}
    info = _busy_node("1.7")
    assert info["Releasing"]["ScalarResources"] is None
    assert info["GPUDevices"] == {}
    assert info["Others"] is None
    assert info["ResourceUsage"] == {"CPUUsageAvg": {}, "MEMUsageAvg": {}}
    assert _busy_node("1.9")["ResourceUsage"]["MetricsTime"] == "0001-01-01T00:00:00Z"
    session = payloads.on_session_open_request(jobs=[], nodes=[info], queues=[])
    assert session["NodeList"] is None
    assert session["RevocableNodes"] == {}


def test_idle_used_and_pods_scalar_follow_add_task_and_new_resource() -> None:
    info17, info19 = _busy_node("1.7"), _busy_node("1.9")
    assert info17["Idle"]["ScalarResources"]["huawei.com/ascend-1980"] == 0
    assert "pods" not in info17["Idle"]["ScalarResources"]
    assert info19["Idle"]["ScalarResources"]["pods"] == 110 - 4
    assert info19["Idle"]["MaxTaskNum"] == 110  # Sub never touches MaxTaskNum
    assert info19["Used"]["ScalarResources"]["pods"] == 4
    # kube-proxy requests nothing: still a BestEffort task, and Used only grows by the others' requests.
    proxy = next(t for k, t in info19["Tasks"].items() if k.startswith("kube-system/kube-proxy-"))
    assert proxy["BestEffort"] is True
    assert proxy["Job"] == ""


def test_pending_task_pipelined_and_releasing_tasks_land_in_the_right_node_resources() -> None:
    node = payloads.kube_node("n1", index=1)
    releasing = payloads.task_info(payloads.volcano_job_pod("old", 0, node_name="n1", deleting=True))
    pipelined = payloads.task_info(payloads.volcano_job_pod("new", 0), status="Pipelined", node_name="n1")
    info = payloads.node_info(node, [releasing, pipelined])
    assert releasing["Status"] == releases.TASK_STATUS["Releasing"]
    assert info["Releasing"]["ScalarResources"]["huawei.com/ascend-1980"] == 8000
    assert info["Pipelined"]["ScalarResources"]["huawei.com/ascend-1980"] == 8000
    assert info["Idle"]["ScalarResources"]["huawei.com/ascend-1980"] == 0


def test_v1_9_snapshots_lose_the_pod_group_uid_and_later_releases_keep_it() -> None:
    assert _job("1.9")["PgUID"] == ""
    assert _job("1.10")["PgUID"] == _job("1.10")["PodGroup"]["uid"]


def test_the_budget_field_is_misspelt_until_v1_12() -> None:
    assert "MaxUnavilable" in _job("1.11")["Budget"]
    assert "MaxUnavailable" in _job("1.12")["Budget"]


def test_network_topology_is_copied_into_the_job_and_its_default_sub_job_from_v1_15() -> None:
    job = _job("1.15", network_topology={"mode": "hard", "highestTierAllowed": 1})
    assert job["NetworkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    (sub_job,) = job["SubJobs"].values()
    assert sub_job["NetworkTopology"] == job["NetworkTopology"]
    assert job["PodGroup"]["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    untagged = _job("1.12", network_topology={"mode": "soft"})["PodGroup"]["Spec"]["NetworkTopology"]
    assert untagged == {"Mode": "soft", "HighestTierAllowed": None}


def test_master_copies_the_pod_annotations_into_the_task() -> None:
    task = _pending_task("1.16")
    assert task["PodAnnotations"] == task["Pod"]["metadata"]["annotations"]


# --------------------------------------------------------------------------------------------- Kubernetes objects


def test_a_node_carries_topology_labels_npu_capacity_five_conditions_and_at_most_fifty_images() -> None:
    node = payloads.kube_node("npu-0007-03", labels={"volcano.sh/tor": "leaf-0007"}, index=59)
    assert node["metadata"]["labels"]["volcano.sh/tor"] == "leaf-0007"
    assert node["status"]["capacity"]["huawei.com/ascend-1980"] == "8"
    assert node["status"]["allocatable"]["huawei.com/ascend-1980"] == "8"
    assert [c["type"] for c in node["status"]["conditions"]] == [
        "NetworkUnavailable",
        "MemoryPressure",
        "DiskPressure",
        "PIDPressure",
        "Ready",
    ]
    assert node["status"]["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10250}}
    assert len(node["status"]["images"]) == 20
    assert all(len(i["names"]) == 2 for i in node["status"]["images"])
    many = payloads.kube_node("big", images=payloads.NPU_NODE_IMAGES * 4)
    assert len(many["status"]["images"]) == 50
    assert list(node) == ["metadata", "spec", "status"]
    assert [k for k in releases.OBJECT_META_KEYS if k in node["metadata"]] == list(node["metadata"])


@pytest.mark.parametrize(
    ("release", "present", "absent"),
    [
        ("1.9", [], ["runtimeHandlers", "features"]),
        ("1.10", ["runtimeHandlers"], ["features"]),
        ("1.11", ["runtimeHandlers", "features"], []),
    ],
)
def test_node_status_keeps_only_the_fields_the_vendored_k8s_api_knows(
    release: str, present: list[str], absent: list[str]
) -> None:
    status = payloads.kube_node("n", release=release)["status"]
    assert all(k in status for k in present)
    assert not any(k in status for k in absent)
    assert ("swap" in status["nodeInfo"]) == releases.release_at_least(release, "1.13")


def test_volcano_job_pods_carry_the_controllers_names_labels_annotations_and_env() -> None:
    pod17 = payloads.volcano_job_pod("bert", 5, namespace="team-a", queue="train", release="1.7")
    meta = pod17["metadata"]
    assert meta["name"] == "bert-worker-5"
    assert meta["labels"]["volcano.sh/job-name"] == "bert"
    assert meta["labels"]["volcano.sh/job-namespace"] == "team-a"
    assert meta["labels"]["volcano.sh/queue-name"] == "train"
    assert meta["labels"]["volcano.sh/task-spec"] == "worker"
    assert meta["annotations"]["scheduling.k8s.io/group-name"].startswith("bert-")
    assert meta["annotations"]["volcano.sh/job-version"] == "0"
    assert meta["annotations"]["volcano.sh/template-uid"] == "bert-worker"
    assert "volcano.sh/task-index" not in meta["annotations"]
    assert meta["ownerReferences"][0]["kind"] == "Job"
    env = {e["name"]: e.get("value") for e in pod17["spec"]["containers"][0]["env"]}
    assert env["VC_TASK_INDEX"] == env["VK_TASK_INDEX"] == "5"
    pod110 = payloads.volcano_job_pod("bert", 5, release="1.10")["metadata"]
    assert pod110["annotations"]["volcano.sh/task-index"] == "5"
    assert pod110["labels"]["volcano.sh/task-index"] == "5"
    assert pod110["annotations"]["volcano.sh/job-retry-count"] == "0"


def test_running_pods_have_status_conditions_and_pending_pods_only_a_phase() -> None:
    running = payloads.volcano_job_pod("bert", 0, node_name="n1", node_ip="10.0.0.1")
    assert running["spec"]["nodeName"] == "n1"
    assert [c["type"] for c in running["status"]["conditions"]][-1] == "PodScheduled"
    assert running["status"]["phase"] == "Running"
    pending = payloads.volcano_job_pod("bert", 0)
    assert "nodeName" not in pending["spec"]
    assert pending["status"] == {"phase": "Pending", "qosClass": "Guaranteed"}
    assert payloads.task_info(pending)["Status"] == releases.TASK_STATUS["Pending"]
    assert payloads.task_info(running)["Status"] == releases.TASK_STATUS["Running"]


@pytest.mark.parametrize("kind", payloads.DAEMONSET_KINDS)
def test_daemonset_pods_are_node_tasks_without_a_job(kind: str) -> None:
    pod = payloads.daemonset_pod(kind, "npu-1", "10.0.0.9")
    task = payloads.task_info(pod)
    assert task["Job"] == ""
    assert task["NodeName"] == "npu-1"
    assert pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ][0]["matchFields"][0]["values"] == ["npu-1"]
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("500m", 500),
        ("8", 8000),
        ("1536Gi", 1536 * 2**30 * 1000),
        ("1e3", 1_000_000),
        ("3456736289398", 3456736289398000),
    ],
)
def test_quantities_convert_as_resource_quantity_milli_value(text: str, milli: int) -> None:
    assert payloads.quantity_milli_value(text) == milli


def test_a_malformed_quantity_names_the_expected_form() -> None:
    with pytest.raises(ValueError, match="Kubernetes quantity"):
        payloads.parse_quantity("lots")


# --------------------------------------------------------------------------------------------- synthetic clusters


@pytest.mark.parametrize("release", ["1.7", "1.12", "1.16"])
def test_stamped_cluster_objects_equal_what_the_builders_make(release: str) -> None:
    cluster = _cluster(release)
    for index, info in enumerate(cluster.node_infos[:6]):
        tasks = []
        for task in info["Tasks"].values():
            pod = task["Pod"]
            meta = pod["metadata"]
            if meta["namespace"] == "team-a":
                built = payloads.volcano_job_pod(
                    meta["labels"]["volcano.sh/job-name"],
                    int(meta["name"].rsplit("-", 1)[1]),
                    namespace="team-a",
                    node_name=info["Name"],
                    node_ip=pod["status"]["hostIP"],
                    pod_ip=pod["status"]["podIP"],
                    release=release,
                )
            else:
                kind = next(k for k in payloads.DAEMONSET_KINDS if meta["name"].startswith(k))
                built = payloads.daemonset_pod(kind, info["Name"], pod["status"]["hostIP"], release=release)
            assert built == pod
            assert payloads.task_info(built, release=release) == task
            tasks.append(task)
        node = payloads.kube_node(
            info["Name"], labels={"volcano.sh/tor": f"leaf-{index // 8:04d}"}, index=index, release=release
        )
        assert payloads.node_info(node, tasks, release=release, image_nodes=24) == info


def test_raw_clusters_serialise_to_the_same_bytes_as_parsed_ones() -> None:
    parsed = payloads.synthetic_cluster(16, release="1.14", seed=5)
    raw = payloads.synthetic_cluster(16, release="1.14", seed=5, raw=True)
    assert payloads.go_json(parsed.on_session_open_request(), "1.14") == payloads.go_json(
        raw.on_session_open_request(), "1.14"
    )
    assert payloads.go_json(parsed.prioritize_request(), "1.14") == payloads.go_json(raw.prioritize_request(), "1.14")


def test_a_cluster_has_the_requested_share_of_busy_nodes_and_a_pending_gang() -> None:
    cluster = payloads.synthetic_cluster(50, busy_fraction=0.6, pending_job_size=6)
    assert len(cluster.free_nodes) == 20
    assert len(cluster.pending_tasks) == 6
    assert all(t["Status"] == releases.TASK_STATUS["Pending"] for t in cluster.pending_tasks)
    free = cluster.prioritize_request(free_only=True)
    assert [n["Name"] for n in free["nodes"]] == list(cluster.free_nodes)


# ------------------------------------------------------------------------------------------------------ decoders


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("ignorable", [True, False])
@pytest.mark.parametrize("body", [volcano.UNIVERSAL_PREDICATE_PASS, b"{}", b"null", b'{"status": null}  trailing junk'])
def test_the_universal_pass_answers_pass_in_every_release(release: str, ignorable: bool, body: bytes) -> None:
    outcome = volcano.decode_predicate_response(release, body, ignorable)
    assert outcome.passes
    assert outcome.error is None


@pytest.mark.parametrize("release", RELEASES)
def test_the_hybrid_fail_answer_fails_everywhere_when_errors_are_not_ignorable(release: str) -> None:
    body = volcano.encode_predicate_fail_everywhere("node full")
    assert not volcano.decode_predicate_response(release, body, False).passes
    assert volcano.decode_predicate_response(release, body, True).passes == releases.release_at_least(release, "1.10")


def test_no_answer_fails_in_every_release_when_errors_are_ignorable() -> None:
    statuses: list[Any] = [None, "", "full", [], [None], [{"Code": 2, "Reason": "full"}], {"Code": 2}, 2]
    messages: list[Any] = [None, "", "full"]
    codes: list[Any] = [None, 0, 2]
    for status in statuses:
        for message in messages:
            for code in codes:
                body: dict[str, Any] = {}
                for key, value in (("status", status), ("errorMessage", message), ("code", code)):
                    if value is not None:
                        body[key] = value
                encoded = json.dumps(body).encode()
                failing = [not volcano.decode_predicate_response(r, encoded, True).passes for r in RELEASES]
                assert not all(failing), body


def test_v1_7_reads_only_error_message() -> None:
    fail = volcano.decode_predicate_response("1.7", b'{"errorMessage": "no NPUs", "status": "x", "code": 3}', False)
    assert (fail.passes, fail.code, fail.reason) == (False, None, "no NPUs")
    assert volcano.decode_predicate_response("1.7", b'{"status": "full", "code": 2}', False).passes


def test_v1_8_and_v1_9_fail_on_any_status_with_code_one_to_five_and_drop_its_reason() -> None:
    for code, passes in ((0, True), (1, False), (2, False), (3, False), (5, False), (6, True), (-1, True)):
        body = json.dumps({"status": [{"Code": code, "Reason": "full"}]}).encode()
        outcome = volcano.decode_predicate_response("1.8", body, False, task="ns/p-0", node="n1")
        assert outcome.passes is passes, code
        if not passes:
            assert outcome.code == code
            assert outcome.reason.endswith("for task <ns/p-0> on node <n1>, status is not success")
    assert volcano.decode_predicate_response("1.9", b'{"status": [null, {"Code": 0}]}', False).passes


def test_v1_10_and_later_turn_code_zero_into_error_and_ignore_codes_outside_one_to_five() -> None:
    zero = volcano.decode_predicate_response("1.10", b'{"status": "full", "code": 0}', False)
    assert (zero.passes, zero.code, zero.reason) == (False, 1, "full")
    three = volcano.decode_predicate_response("1.16", b'{"status": "no NPUs", "code": 3}', False)
    assert (three.passes, three.code) == (False, 3)
    assert volcano.decode_predicate_response("1.12", b'{"status": "full", "code": 7}', False).passes


def test_keys_match_case_insensitively_like_go() -> None:
    assert volcano.decode_predicate_response("1.10", b'{"Status": "full", "CODE": 2}', False).code == 2
    assert not volcano.decode_predicate_response("1.7", b'{"ERRORMESSAGE": "full"}', False).passes
    assert not volcano.decode_predicate_response("1.8", b'{"status": [{"code": 2, "reason": "x"}]}', False).passes


@pytest.mark.parametrize("release", RELEASES)
def test_a_list_where_a_string_is_expected_is_a_decode_error_handled_by_ignorable(release: str) -> None:
    body = b'{"status": [{"Code": 2, "Reason": "full"}]}'
    ignored = volcano.decode_predicate_response(release, body, True)
    strict = volcano.decode_predicate_response(release, body, False)
    if release in ("1.8", "1.9"):
        assert (ignored.passes, ignored.error) == (False, None)
    elif release == "1.7":
        assert (ignored.passes, strict.passes) == (True, True)  # an unknown key
    else:
        assert ignored.passes
        assert "cannot unmarshal array" in (ignored.error or "")
        assert (strict.passes, strict.code) == (False, 1)


@pytest.mark.parametrize(
    "body", [b"", b"   ", b'{"status": "x"', b"\xef\xbb\xbf{}", b"[]", b'"full"', b'{"code": 2.0, "status": ""}']
)
def test_empty_truncated_and_mistyped_bodies_are_errors(body: bytes) -> None:
    outcome = volcano.decode_predicate_response("1.12", body, True)
    assert outcome.passes
    assert outcome.error
    strict = volcano.decode_predicate_response("1.12", body, False)
    assert (strict.passes, strict.code) == (False, 1)


def test_a_string_code_is_a_type_error_while_a_null_status_is_a_no_op() -> None:
    assert volcano.decode_predicate_response("1.10", b'{"status": "x", "code": "2"}', True).error
    assert volcano.decode_predicate_response("1.10", b'{"status": null, "code": null}', False).passes


def test_non_200_answers_are_errors_whatever_the_body() -> None:
    outcome = volcano.decode_predicate_response("1.10", b"{}", False, http_status=500)
    assert not outcome.passes
    assert "code 500" in outcome.reason
    assert volcano.decode_predicate_response("1.10", b"{}", True, http_status=503).passes


def test_bodies_over_ten_mib_are_rejected_from_v1_12_only() -> None:
    body = b'{"pad": "' + b"a" * volcano.MAX_RESPONSE_BYTES + b'", "status": ""}'
    assert volcano.decode_predicate_response("1.11", body, False).passes
    outcome = volcano.decode_predicate_response("1.12", body, False)
    assert (outcome.passes, outcome.error) == (False, "http: request body too large")


@pytest.mark.parametrize("release", RELEASES)
def test_an_encoded_answer_is_read_back_by_its_release(release: str) -> None:
    assert volcano.decode_predicate_response(release, volcano.encode_predicate_answer(release), False).passes
    failed = volcano.decode_predicate_response(
        release, volcano.encode_predicate_answer(release, reason="full", code=3), False
    )
    assert not failed.passes
    if release not in ("1.8", "1.9"):
        assert failed.reason == "full"
    if release != "1.7":
        assert failed.code == 3


def test_a_failing_answer_needs_a_failing_code() -> None:
    with pytest.raises(ValueError, match="failing status code"):
        volcano.encode_predicate_answer("1.12", reason="full", code=0)
    with pytest.raises(ValueError, match="failing status code"):
        volcano.encode_predicate_fail_everywhere("full", code=6)


def test_explicit_node_resources_replace_the_derived_ones() -> None:
    idle = payloads.resource(milli_cpu=4000, memory=2**30, scalars={"huawei.com/ascend-1980": 3000})
    info = payloads.node_info(payloads.kube_node("n1"), idle=idle)
    assert info["Idle"] == idle
    assert info["Used"]["ScalarResources"] is None
    task = payloads.task_info(payloads.volcano_job_pod("bert", 0), job="team-a/other-group")
    assert task["Job"] == "team-a/other-group"


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("ignorable", [True, False])
def test_a_null_or_missing_node_score_fails_the_prioritize_call_even_when_ignorable(
    release: str, ignorable: bool
) -> None:
    for body in (b'{"nodeScore": null, "errorMessage": ""}', b"{}", b'{"errorMessage": "busy", "nodeScore": {}}'):
        outcome = volcano.decode_prioritize_response(release, body, ignorable)
        assert outcome.effect == "call_failed"
        assert ("panics" in outcome.consequence) == (not releases.release_at_least(release, "1.12"))


def test_an_empty_node_score_map_is_no_preference_and_null_scores_count_as_zero() -> None:
    assert volcano.decode_prioritize_response("1.7", b'{"nodeScore": {}}', False).scores == {}
    scored = volcano.decode_prioritize_response("1.16", b'{"nodeScore": {"a": 90, "b": null, "c": 1.5e2}}', False)
    assert scored.effect == "scored"
    assert scored.scores == {"a": 90.0, "b": 0.0, "c": 150.0}


def test_duplicate_node_score_objects_merge_like_go_maps() -> None:
    body = b'{"nodeScore": {"a": 1, "b": 2}, "NodeScore": {"b": 5}}'
    assert volcano.decode_prioritize_response("1.12", body, False).scores == {"a": 1.0, "b": 5.0}


def test_a_string_score_is_a_send_error_that_ignorable_hides() -> None:
    body = b'{"nodeScore": {"a": "90"}}'
    assert volcano.decode_prioritize_response("1.12", body, True).effect == "ignored"
    assert volcano.decode_prioritize_response("1.12", body, False).effect == "call_failed"


def test_encoded_prioritize_answers_are_scored_by_every_release() -> None:
    body = volcano.encode_prioritize_answer({"n1": 100.0, "n2": 0.5})
    for release in RELEASES:
        assert volcano.decode_prioritize_response(release, body, False).scores == {"n1": 100.0, "n2": 0.5}


def test_event_answers_roll_back_on_error_message_or_unignored_errors() -> None:
    assert volcano.decode_event_handler_response("1.13", b'{"errorMessage": ""}', False).error is None
    assert volcano.decode_event_handler_response("1.13", b'{"errorMessage": "no plan"}', True).error == "no plan"
    assert volcano.decode_event_handler_response("1.14", b"[]", True).error is None
    assert volcano.decode_event_handler_response("1.14", b"[]", False).error
    # A message decoded before a later type error still counts.
    assert volcano.decode_event_handler_response("1.16", b'{"errorMessage": "x", "errorMessage": 1}', True).error == "x"
    with pytest.raises(ValueError, match=r"1\.13"):
        volcano.decode_event_handler_response("1.12", b"{}", True)


def test_a_failed_session_open_disables_the_extender_only_when_not_ignorable() -> None:
    assert volcano.on_session_open_outcome("1.7", 200, False) == "ok"
    assert "no predicate" in volcano.on_session_open_outcome("1.10", 500, False)
    assert "continues" in volcano.on_session_open_outcome("1.10", 500, True)


def test_the_answer_shape_table_names_three_predicate_shapes() -> None:
    shapes = {volcano.ANSWER_SHAPES[r]["predicate"] for r in RELEASES}
    assert len(shapes) == 3
    assert volcano.ANSWER_SHAPES["1.12"]["event"] == ""
    assert volcano.ANSWER_SHAPES["1.13"]["event"]


# ----------------------------------------------------------------------------------------------- release detection


@pytest.mark.parametrize(
    ("release", "expected"),
    [
        ("1.7", ("1.7", "1.7")),
        ("1.8", ("1.8", "1.8")),
        ("1.9", ("1.9", "1.9")),
        ("1.10", ("1.10", "1.11")),
        ("1.11", ("1.11", "1.11")),
        ("1.12", ("1.12", "1.13")),
        ("1.13", ("1.13", "1.13")),
        ("1.14", ("1.14", "1.14")),
        ("1.15", ("1.15", "1.15")),
        ("1.16", ("1.16", "1.16")),
    ],
)
def test_a_predicate_request_tells_its_release_range(release: str, expected: tuple[str, str]) -> None:
    request = payloads.predicate_request(_pending_task(release), _busy_node(release))
    assert detect_release_range(request) == expected
    as_json = json.loads(payloads.go_json(request, release))
    assert detect_release_range(as_json) == expected


@pytest.mark.parametrize("release", RELEASES)
def test_a_prioritize_request_tells_the_same_range_as_a_predicate_request(release: str) -> None:
    task, node = _pending_task(release), _busy_node(release)
    assert detect_release_range(payloads.prioritize_request(task, [node, node])) == detect_release_range(
        payloads.predicate_request(task, node)
    )


def test_the_coarse_ranges_are_unambiguous_from_a_prioritize_request() -> None:
    def coarse(release: str) -> str:
        found = detect_release_range(payloads.prioritize_request(_pending_task(release), [_busy_node(release)]))
        assert found
        low, high = found
        if high == "1.7":
            return "<1.8"
        if releases.release_at_least(low, "1.8") and not releases.release_at_least(high, "1.10"):
            return "1.8-1.9"
        assert releases.release_at_least(low, "1.10")
        return ">=1.10"

    assert [coarse(r) for r in RELEASES] == ["<1.8", "1.8-1.9", "1.8-1.9"] + [">=1.10"] * 7


def test_onsessionopen_separates_v1_12_from_v1_13_by_the_queue_spec() -> None:
    assert detect_release_range(_cluster("1.12").on_session_open_request()) == ("1.12", "1.12")
    assert detect_release_range(_cluster("1.13").on_session_open_request()) == ("1.13", "1.13")


def test_an_event_request_is_at_least_v1_13() -> None:
    request = payloads.event_handler_request(_pending_task("1.13"), release="1.13")
    assert detect_release_range(request) == ("1.13", "1.14")  # TaskInfo is the same in 1.12 - 1.14
    assert detect_release_range({"task": _pending_task("1.9")}) is None


def test_requests_that_no_release_sends_are_not_recognised() -> None:
    assert detect_release_range({"pod": {}, "nodes": []}) is None
    assert detect_release_range({"task": {"name": "x"}, "node": {"name": "n"}}) is None
    mixed = payloads.predicate_request(_pending_task("1.7"), _busy_node("1.16"))
    assert detect_release_range(mixed) is None


# ------------------------------------------------------------------------------------ default scores and allocate


def _npu_input(**overrides: Any) -> volcano.ScoringInput:
    values: dict[str, Any] = {
        "task_cpu_milli": 176_000,
        "task_memory": 1400 * 2**30,
        "node_cpu_allocatable_milli": 190_000,
        "node_memory_allocatable": 1512 * 2**30,
    }
    values.update(overrides)
    return volcano.ScoringInput(**values)


def test_least_allocated_on_an_empty_npu_node_is_hand_computed() -> None:
    # cpu: (190000 - 176000) * 100 // 190000 = 7; memory: (1512 - 1400) * 100 // 1512 = 7; (7*50 + 7*50) // 100
    assert volcano.least_allocated_score(_npu_input()) == 7
    # BestEffort kube-proxy counts 100m / 200 MiB in NonZeroRequested.
    busy = _npu_input(node_cpu_nonzero_requested_milli=10_100, node_memory_nonzero_requested=200 * 2**20)
    assert volcano.least_allocated_score(busy) == (1 * 50 + 7 * 50) // 100


def test_balanced_allocation_is_one_minus_half_the_fraction_gap() -> None:
    # fractions 176/190 = 0.92632 and 1400/1512 = 0.92593: std 0.0002, int(99.98) truncates to 99
    assert volcano.balanced_allocation_score(_npu_input()) == 99
    # cpu 95000/190000 = 0.5, memory 0: std 0.25 -> 75
    lopsided = _npu_input(task_cpu_milli=95_000, task_memory=0)
    assert volcano.balanced_allocation_score(lopsided) == 75


def test_image_locality_scores_a_present_training_image_at_the_maximum_and_a_missing_one_at_zero() -> None:
    present = _npu_input(task_images_on_node=[(24 * 2**30, 500)], total_nodes=1000)
    assert volcano.image_locality_score(present) == 100
    assert volcano.image_locality_score(_npu_input()) == 0
    # 600 MiB on 60 % of nodes: 360 MiB -> 100 * (360 - 23) // (1000 - 23) = 34
    partial = _npu_input(task_images_on_node=[(600 * 2**20, 600)], total_nodes=1000)
    assert volcano.image_locality_score(partial) == 34


def test_binpack_averages_cpu_and_memory_fill_and_zeroes_overflow_from_v1_8() -> None:
    inp = _npu_input(node_cpu_requested_milli=9_500, node_memory_requested=0)
    # cpu (9500 + 176000) / 190000 = 0.976..., memory 1400/1512 = 0.9259...
    expected = ((185_500 / 190_000) + (1400 / 1512)) / 2 * 100
    assert volcano.binpack_score(inp) == pytest.approx(expected)
    overflow = _npu_input(node_cpu_requested_milli=20_000)
    assert volcano.binpack_score(overflow, "1.8") == 0.0
    assert volcano.binpack_score(overflow, "1.7") == pytest.approx((1400 / 1512) / 2 * 100)


def test_default_node_scores_apply_the_release_weights_and_v1_14_loses_image_locality() -> None:
    inp = _npu_input(task_images_on_node=[(24 * 2**30, 1000)], total_nodes=1000)
    scores = volcano.default_node_scores("1.13", inp)
    assert scores["nodeorder.imagelocality"] == 100.0
    assert scores["total"] == pytest.approx(sum(v for k, v in scores.items() if k != "total"))
    assert volcano.default_node_scores("1.14", inp)["nodeorder.imagelocality"] == 0.0
    assert "binpack" not in volcano.default_node_scores("1.13", inp, binpack=False)


@given(
    cpu_used=st.integers(0, 190_000),
    mem_used=st.integers(0, 1512 * 2**30),
    cpu_req=st.integers(1, 190_000),
    mem_req=st.integers(1, 1512 * 2**30),
)
def test_least_requested_and_binpack_together_stay_within_two_points(
    cpu_used: int, mem_used: int, cpu_req: int, mem_req: int
) -> None:
    inp = volcano.ScoringInput(
        task_cpu_milli=cpu_req,
        task_memory=mem_req,
        node_cpu_allocatable_milli=190_000,
        node_memory_allocatable=1512 * 2**30,
        node_cpu_requested_milli=cpu_used,
        node_memory_requested=mem_used,
    )
    if cpu_used + cpu_req > 190_000 or mem_used + mem_req > 1512 * 2**30:
        return  # not a candidate: resource fit fails first
    total = volcano.least_allocated_score(inp) + volcano.binpack_score(inp)
    assert 98.0 < total <= 100.0 + 1e-9


def test_max_score_spread_sums_plugin_ranges_and_the_coupled_bound() -> None:
    spread = volcano.max_score_spread("1.16")
    assert spread.independent == 350.0  # 100 least + 50 balanced + 100 image + 100 binpack
    assert spread.coupled == 152.0  # least + binpack within 2, + 50 + 100
    assert spread.conditional["nodeorder.tainttoleration"] == 300.0
    assert volcano.max_score_spread("1.7").conditional["nodeorder.tainttoleration"] == 100.0
    assert volcano.max_score_spread("1.14").independent == 250.0
    assert volcano.max_score_spread("1.13", binpack=False).independent == 250.0


@pytest.mark.parametrize(
    ("n_nodes", "v17", "v19"),
    [(50, 50, 50), (100, 100, 100), (1000, 1000, 420), (5000, 5000, 500), (10_000, 10_000, 500), (200, 200, 100)],
)
def test_feasible_node_cut_off_follows_calculate_num_of_feasible_nodes_to_find(
    n_nodes: int, v17: int, v19: int
) -> None:
    assert volcano.num_feasible_nodes_to_find(n_nodes, "1.7") == v17
    assert volcano.num_feasible_nodes_to_find(n_nodes, "1.8") == v17
    assert volcano.num_feasible_nodes_to_find(n_nodes, "1.9") == v19
    assert volcano.num_feasible_nodes_to_find(n_nodes, "1.16") == v19


def test_a_predicate_pass_starts_at_the_rotating_index_and_stops_at_the_cut_off() -> None:
    feasible = [True, False, True, True, False, True]
    assert volcano.feasible_scan(feasible, 4, 2) == ([5, 0], 1)
    assert volcano.feasible_scan(feasible, 1, 10) == ([2, 3, 5, 0], 1)
    assert volcano.feasible_scan([], 0, 3) == ([], 0)


def test_allocate_helpers_describe_candidate_lists_prioritize_calls_and_the_error_cache() -> None:
    assert volcano.candidate_lists("1.7") == ("idle_or_future_idle",)
    assert volcano.candidate_lists("1.8") == ("idle", "future_idle")
    assert len(volcano.candidate_lists("1.14")) == 4
    assert not volcano.prioritize_called(1)
    assert volcano.prioritize_called(2)
    assert volcano.predicate_error_cache_key("1.9", "ns/pg", "") == "ns/pg/"
    assert volcano.predicate_error_cache_key("1.10", "ns/pg", "") is None
    assert volcano.predicate_error_cache_key("1.10", "ns/pg", "worker") == "ns/pg/worker"
    assert volcano.select_best_node({}, random.Random(0).choice) is None
    picks = {volcano.select_best_node({"a": 5.0, "b": 5.0, "c": 1.0}, random.Random(s).choice) for s in range(20)}
    assert picks == {"a", "b"}
    assert all(fact.source for fact in volcano.ALLOCATE_FACTS)


def test_release_names_normalise_and_unknown_ones_are_refused() -> None:
    assert releases.normalize_release("v1.14.3") == "1.14"
    assert releases.normalize_release("master") == "1.16"
    assert releases.normalize_release("v1.16.0-alpha.1") == "1.16"
    with pytest.raises(ValueError, match=r"1\.7"):
        releases.normalize_release("1.6")


def test_payloads_serialise_to_valid_json_with_go_key_order() -> None:
    request = _cluster("1.15").prioritize_request()
    data = payloads.go_json(request, "1.15")
    decoded = orjson.loads(data)
    assert list(decoded["nodes"][0]) == list(releases.GO_FIELDS["1.15"]["NodeInfo"])
    assert list(decoded["task"]) == list(releases.GO_FIELDS["1.15"]["TaskInfo"])
