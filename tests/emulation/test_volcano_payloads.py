"""What vc-scheduler sends to an extender, per release, as `emulation.volcano_payloads` builds it: Volcano's Go
structs with each release's keys, Go's JSON output, the Kubernetes objects inside, whole synthetic clusters."""

from __future__ import annotations

import orjson
import pytest

from emulation import volcano_payloads as payloads
from tests.support.volcano_payloads import busy_node, gang_job, pending_task, small_cluster
from webhook.extender import volcano_releases as releases

RELEASES = releases.RELEASES


# ------------------------------------------------------------------------------------------- key sets per release


@pytest.mark.parametrize("release", RELEASES)
def test_task_info_keys_are_the_go_fields_of_the_release_in_declaration_order(release: str) -> None:
    assert tuple(pending_task(release)) == releases.GO_FIELDS[release]["TaskInfo"]


@pytest.mark.parametrize("release", RELEASES)
def test_node_info_keys_and_nested_struct_keys_follow_the_release(release: str) -> None:
    info = busy_node(release)
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
    job = gang_job(release)
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
    task, node = pending_task(release), busy_node(release, daemon=False)
    fields = releases.GO_FIELDS[release]
    assert tuple(payloads.predicate_request(task, node)) == fields["PredicateRequest"]
    assert tuple(payloads.prioritize_request(task, [node])) == fields["PrioritizeRequest"]
    session = payloads.on_session_open_request(
        jobs=[gang_job(release)], nodes=[node], queues=[payloads.queue_info(release=release)]
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
    info = busy_node("1.16")
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
    assert busy_node(release, daemon=False)["Others"] == others


def test_nil_fields_marshal_as_null_and_empty_maps_as_objects() -> None:
    task = pending_task("1.11")
    assert task["LastTransaction"] is None
    assert task["PodVolumes"] is None
    assert task["NumaInfo"] == {"Policy": "", "ResMap": {}}
    info = busy_node("1.7")
    assert info["Releasing"]["ScalarResources"] is None
    assert info["GPUDevices"] == {}
    assert info["Others"] is None
    assert info["ResourceUsage"] == {"CPUUsageAvg": {}, "MEMUsageAvg": {}}
    assert busy_node("1.9")["ResourceUsage"]["MetricsTime"] == "0001-01-01T00:00:00Z"
    session = payloads.on_session_open_request(jobs=[], nodes=[info], queues=[])
    assert session["NodeList"] is None
    assert session["RevocableNodes"] == {}


def test_idle_used_and_pods_scalar_follow_add_task_and_new_resource() -> None:
    info17, info19 = busy_node("1.7"), busy_node("1.9")
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
    assert gang_job("1.9")["PgUID"] == ""
    assert gang_job("1.10")["PgUID"] == gang_job("1.10")["PodGroup"]["uid"]


def test_the_budget_field_is_misspelt_until_v1_12() -> None:
    assert "MaxUnavilable" in gang_job("1.11")["Budget"]
    assert "MaxUnavailable" in gang_job("1.12")["Budget"]


def test_network_topology_is_copied_into_the_job_and_its_default_sub_job_from_v1_15() -> None:
    job = gang_job("1.15", network_topology={"mode": "hard", "highestTierAllowed": 1})
    assert job["NetworkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    (sub_job,) = job["SubJobs"].values()
    assert sub_job["NetworkTopology"] == job["NetworkTopology"]
    assert job["PodGroup"]["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    untagged = gang_job("1.12", network_topology={"mode": "soft"})["PodGroup"]["Spec"]["NetworkTopology"]
    assert untagged == {"Mode": "soft", "HighestTierAllowed": None}


def test_master_copies_the_pod_annotations_into_the_task() -> None:
    task = pending_task("1.16")
    assert task["PodAnnotations"] == task["Pod"]["metadata"]["annotations"]


def test_explicit_node_resources_replace_the_derived_ones() -> None:
    idle = payloads.resource(milli_cpu=4000, memory=2**30, scalars={"huawei.com/ascend-1980": 3000})
    info = payloads.node_info(payloads.kube_node("n1"), idle=idle)
    assert info["Idle"] == idle
    assert info["Used"]["ScalarResources"] is None
    task = payloads.task_info(payloads.volcano_job_pod("bert", 0), job="team-a/other-group")
    assert task["Job"] == "team-a/other-group"


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
    cluster = small_cluster(release)
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


def test_payloads_serialise_to_valid_json_with_go_key_order() -> None:
    request = small_cluster("1.15").prioritize_request()
    data = payloads.go_json(request, "1.15")
    decoded = orjson.loads(data)
    assert list(decoded["nodes"][0]) == list(releases.GO_FIELDS["1.15"]["NodeInfo"])
    assert list(decoded["task"]) == list(releases.GO_FIELDS["1.15"]["TaskInfo"])
