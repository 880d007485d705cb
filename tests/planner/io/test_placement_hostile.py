"""Pods as a careless user or a broken plugin writes them: every integer is read as ASCII within bounds, a table
HCCL would refuse is never built, and the pods of one job only make a table. Each case is a placement problem
naming the pod and the field (or a job problem naming both jobs), never an exception."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner import InputError, PlacementProblem, load_kube_objects, read_placement
from tests.support.pods import ANNOTATION_910, ANNOTATION_1980, JOB_UID, RESOURCE, pod

KEYS = (ANNOTATION_1980, ANNOTATION_910)
HUGE = "9" * 5000
OTHER_UID = "0b7f6a52-8d1e-4c3b-a0f9-3e2d1c0b9a87"


def read(pods: list[dict[str, Any]], **options: Any) -> Any:
    return read_placement(pods, annotation_keys=KEYS, resource_name=RESOURCE, **options)


def job(nodes: tuple[int, ...] = (3, 0, 2, 1), name: str = "train", **options: Any) -> list[dict[str, Any]]:
    return [pod(name, "worker", i, node, **options) for i, node in enumerate(nodes)]


def only_problem(pods: list[dict[str, Any]], **options: Any) -> PlacementProblem:
    readout = read(pods, **options)
    assert readout.placement is None
    (problem,) = readout.problems
    assert "\n" not in problem.render()
    found: PlacementProblem = problem
    return found


def set_device(p: dict[str, Any], position: int, **values: Any) -> dict[str, Any]:
    info = json.loads(p["metadata"]["annotations"][ANNOTATION_1980])
    info["devices"][position].update(values)
    p["metadata"]["annotations"][ANNOTATION_1980] = json.dumps(info)
    return p


# -- integers ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["²", "٨", "1²", "-1", "+1", " 1", "1.0", "0x1", HUGE])
def test_a_task_index_that_is_not_ascii_digits_within_int32_is_a_problem_naming_the_pod_and_label(value: str) -> None:
    pods = job()
    pods[1]["metadata"]["labels"]["volcano.sh/task-index"] = value
    problem = only_problem(pods)
    assert (problem.kind, problem.pod) == ("bad-task-index", "default/train-worker-1")
    assert problem.field == "metadata.labels[volcano.sh/task-index]"
    assert len(problem.render()) < 300, "a 5,000-digit value is quoted shortened"


def test_a_superscript_task_index_in_the_annotation_is_named_there() -> None:
    pods = job(with_index_label=False)
    pods[2]["metadata"]["annotations"]["volcano.sh/task-index"] = "²"
    problem = only_problem(pods)
    assert problem.field == "metadata.annotations[volcano.sh/task-index]"
    assert "'²'" in problem.detail


def test_a_pod_name_ending_in_an_arabic_digit_gives_no_task_index() -> None:
    pods = job(with_index_label=False)
    pods[3]["metadata"]["name"] = "train-worker-٣"
    problem = only_problem(pods)
    assert (problem.kind, problem.pod) == ("missing-task-index", "default/train-worker-٣")


@pytest.mark.parametrize("value", ["²", "٨", HUGE, "-1", 1.5, True, None, [0]])
def test_a_device_id_that_is_not_a_bounded_ascii_integer_is_a_problem_naming_the_device(value: Any) -> None:
    pods = job()
    set_device(pods[2], 3, device_id=value)
    problem = only_problem(pods)
    assert (problem.kind, problem.pod) == ("bad-device-id", "default/train-worker-2")
    assert problem.field == f"metadata.annotations[{ANNOTATION_1980}].devices[3].device_id"


def test_a_json_integer_device_id_is_read_like_its_string() -> None:
    pods = job()
    set_device(pods[0], 0, device_id=0)
    assert read(pods).ready


def test_an_annotation_with_a_number_too_long_to_convert_is_malformed_not_a_crash() -> None:
    pods = job()
    raw = pods[0]["metadata"]["annotations"][ANNOTATION_1980]
    pods[0]["metadata"]["annotations"][ANNOTATION_1980] = raw.replace('"device_id":"0"', f'"device_id":{HUGE}')
    problem = only_problem(pods)
    assert (problem.kind, problem.pod) == ("malformed-annotation", "default/train-worker-0")


def test_an_annotation_nested_past_the_stack_is_malformed_not_a_crash() -> None:
    pods = job()
    pods[1]["metadata"]["annotations"][ANNOTATION_1980] = "[" * 100_000 + "]" * 100_000
    assert only_problem(pods).kind == "malformed-annotation"


@pytest.mark.parametrize("version", ["²", "٨", HUGE])
def test_job_versions_that_are_not_ascii_numbers_do_not_crash_and_numbers_order_numerically(version: str) -> None:
    old = [pod("train", "worker", i, i + 8, job_version=version) for i in range(4)]
    new = job(job_version="10")
    nine = [pod("train", "worker", i, i + 4, job_version="9") for i in range(4)]
    readout = read(old + nine + new)
    assert readout.ready
    assert {s.node_name for s in readout.placement.servers} == {"npu-00", "npu-01", "npu-02", "npu-03"}


@pytest.mark.parametrize("amount", ["²", "٨", "8x", "-8", HUGE, "1e99999"])
def test_a_malformed_npu_quantity_is_a_problem_naming_the_container(amount: str) -> None:
    pods = job()
    pods[1]["spec"]["containers"][0]["resources"]["limits"][RESOURCE] = amount
    problem = only_problem(pods)
    assert (problem.kind, problem.pod) == ("bad-quantity", "default/train-worker-1")
    assert problem.field == f"spec.containers[0].resources.limits[{RESOURCE}]"
    assert "mindspore" in problem.detail


@pytest.mark.parametrize("amount", ["8", "8000m", "1Ki", "0.5", "1e3", 8])
def test_npu_quantities_kubernetes_accepts_make_an_npu_pod(amount: Any) -> None:
    pods = job()
    for p in pods:
        p["spec"]["containers"][0]["resources"] = {"limits": {RESOURCE: amount}, "requests": {RESOURCE: amount}}
    assert read(pods).ready


@pytest.mark.parametrize("amount", ["0", "0m", "0.0", "-0", "0Ki"])
def test_a_zero_npu_quantity_is_not_an_npu_pod(amount: str) -> None:
    launcher = pod("train", "launcher", 0, 9, annotation=None)
    launcher["spec"]["containers"][0]["resources"] = {"limits": {RESOURCE: amount}}
    readout = read([*job(), launcher])
    assert readout.ready
    assert len(readout.placement.servers) == 4


unicode_digits = st.text(st.characters(categories=("Nd", "No")), min_size=1, max_size=12)
huge_numbers = st.builds(
    lambda sign, digits: sign + digits,
    st.sampled_from(["", "-", "+"]),
    st.text("0123456789", min_size=11, max_size=6000),
)
integer_text = unicode_digits | huge_numbers | st.from_regex(r"\A[0-9]{1,12}\Z") | st.text(max_size=8)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    field=st.sampled_from(["task-index", "task-index-annotation", "device_id", "job-version", "quantity", "name"]),
    value=integer_text,
)
def test_any_text_in_any_integer_field_is_read_or_a_problem_naming_the_pod_never_an_exception(
    field: str, value: str
) -> None:
    pods = job()
    target = pods[2]
    if field == "task-index":
        target["metadata"]["labels"]["volcano.sh/task-index"] = value
    elif field == "task-index-annotation":
        del target["metadata"]["labels"]["volcano.sh/task-index"]
        target["metadata"]["annotations"]["volcano.sh/task-index"] = value
    elif field == "device_id":
        set_device(target, 0, device_id=value)
    elif field == "job-version":
        target["metadata"]["annotations"]["volcano.sh/job-version"] = value
    elif field == "quantity":
        target["spec"]["containers"][0]["resources"]["requests"][RESOURCE] = value
    else:
        del target["metadata"]["labels"]["volcano.sh/task-index"]
        target["metadata"]["name"] = f"train-worker-{value}"
    readout = read(pods)
    for problem in readout.problems:
        assert problem.pod is None or problem.pod.startswith("default/train-worker-")
        assert len(problem.render()) < 600
    if readout.ready:
        assert all(
            s.task_index < 2**31 and all(d.device_id < 2**31 for d in s.devices) for s in readout.placement.servers
        )


@pytest.mark.parametrize(
    "text",
    [
        '{"kind": "Pod", "spec": {"replicas": ' + HUGE + "}}",
        "kind: Pod\nspec: {replicas: " + HUGE + "}\n",
        "[" * 100_000 + "]" * 100_000,
        "a: " + "[" * 50_000 + "]" * 50_000 + "\n",
    ],
    ids=["json-huge-number", "yaml-huge-number", "json-deep", "yaml-deep"],
)
def test_load_kube_objects_refuses_numbers_too_long_and_nesting_too_deep_in_one_line(text: str) -> None:
    with pytest.raises(InputError) as raised:
        load_kube_objects(text)
    assert "\n" not in str(raised.value)


# -- tables HCCL would refuse -----------------------------------------------------------------------------------


def test_the_same_device_ip_twice_in_one_pod_names_both_devices() -> None:
    pods = job()
    ips = [f"192.168.3.{d}" for d in range(8)]
    ips[5] = ips[2]
    pods[0] = pod("train", "worker", 0, 3, device_ips=ips)
    problem = only_problem(pods)
    assert (problem.kind, problem.pod) == ("duplicate-device-ip", "default/train-worker-0")
    assert problem.field.endswith("devices[5].device_ip")
    assert "devices[2].device_ip" in problem.detail


def test_the_same_device_ip_on_two_pods_names_both_pods_and_nodes() -> None:
    pods = job()
    set_device(pods[3], 6, device_ip="192.168.3.12")  # pods[0] on npu-03 has device 2 at this IP
    problem = only_problem(pods)
    assert (problem.kind, problem.pod) == ("duplicate-device-ip", "default/train-worker-3")
    assert problem.field.endswith("devices[6].device_ip")
    assert "default/train-worker-0" in problem.detail
    assert "npu-03" in problem.detail
    assert "npu-01" in problem.detail


def test_device_ips_that_are_equal_as_addresses_are_duplicates_even_when_spelt_differently() -> None:
    pods = job()
    set_device(pods[0], 0, device_ip="fd00::1")
    set_device(pods[1], 0, device_ip="fd00:0:0::0001")
    assert only_problem(pods).kind == "duplicate-device-ip"


def test_the_same_server_id_on_two_pods_names_both_pods() -> None:
    pods = job()
    info = json.loads(pods[0]["metadata"]["annotations"][ANNOTATION_1980])
    for p in pods[1:3]:
        mine = json.loads(p["metadata"]["annotations"][ANNOTATION_1980])
        mine["server_id"] = info["server_id"]
        p["metadata"]["annotations"][ANNOTATION_1980] = json.dumps(mine)
    readout = read(pods)
    assert readout.placement is None
    assert [(p.kind, p.pod) for p in readout.problems] == [
        ("duplicate-server-id", "default/train-worker-1"),
        ("duplicate-server-id", "default/train-worker-2"),
    ]
    assert all("default/train-worker-0" in p.detail for p in readout.problems)
    assert readout.problems[0].field == f"metadata.annotations[{ANNOTATION_1980}].server_id"


def test_a_server_id_that_is_not_a_string_is_a_malformed_annotation() -> None:
    pods = job()
    info = json.loads(pods[1]["metadata"]["annotations"][ANNOTATION_1980])
    info["server_id"] = {"ip": "10.0.0.1"}
    pods[1]["metadata"]["annotations"][ANNOTATION_1980] = json.dumps(info)
    problem = only_problem(pods)
    assert (problem.kind, problem.field) == (
        "malformed-annotation",
        f"metadata.annotations[{ANNOTATION_1980}].server_id",
    )


# -- one job per table ------------------------------------------------------------------------------------------


def two_jobs() -> list[dict[str, Any]]:
    """The issue's case: 6 pods of `train` and 1 pod of `probe` (another Job, another UID) with task index 0."""
    return [*job((3, 0, 2, 1, 4, 5)), pod("probe", "worker", 0, 9, job_uid=OTHER_UID)]


def test_pods_of_two_jobs_are_one_problem_naming_both_jobs() -> None:
    problem = only_problem(two_jobs(), expected_pods=6)
    assert (problem.kind, problem.pod, problem.field) == ("multiple-jobs", None, "pods")
    assert f"probe (1 pod, UID {OTHER_UID})" in problem.detail
    assert f"train (6 pods, UID {JOB_UID})" in problem.detail
    assert "--job-name" in problem.detail


def test_the_job_name_picks_one_job_and_the_others_pods_are_listed_with_the_reason() -> None:
    readout = read(two_jobs(), job_name="train")
    assert readout.ready
    assert len(readout.placement.servers) == 6
    assert readout.placement.servers[readout.placement.master].pod_name == "train-worker-0"
    assert readout.ignored_pods == ("default/probe-worker-0",)
    (left,) = readout.ignored
    assert (left.pod, left.reason) == ("default/probe-worker-0", "other-job")
    assert readout.placement.ignored_pods == readout.ignored


def test_pods_without_owner_are_told_apart_by_job_name() -> None:
    pods = two_jobs()
    for p in pods:
        del p["metadata"]["ownerReferences"]
    problem = only_problem(pods)
    assert problem.kind == "multiple-jobs"
    assert "probe (1 pod)" in problem.detail
    assert "train (6 pods)" in problem.detail


def test_a_pod_without_owner_joins_the_owned_job_of_its_name() -> None:
    pods = job()
    del pods[1]["metadata"]["ownerReferences"]
    assert read(pods).ready


def test_two_jobs_of_one_name_with_different_uids_are_two_jobs_even_with_the_job_name() -> None:
    pods = job() + [pod("train", "worker", i, i + 8, job_uid=OTHER_UID) for i in range(4)]
    problem = only_problem(pods, job_name="train")
    assert problem.kind == "multiple-jobs"
    assert OTHER_UID in problem.detail
    assert JOB_UID in problem.detail
    assert "created again" in problem.detail


def test_the_job_uid_picks_one_incarnation_of_a_name() -> None:
    pods = job() + [pod("train", "worker", i, i + 8, job_uid=OTHER_UID) for i in range(4)]
    readout = read(pods, job_name="train", job_uid=JOB_UID)
    assert readout.ready
    assert {i.reason for i in readout.ignored} == {"other-job-uid"}
    assert len(readout.ignored) == 4


def test_left_out_pods_carry_their_reason_older_versions_and_terminated_pods_included() -> None:
    old = [pod("train", "worker", i, i + 8, job_version="1") for i in range(2)]
    done = pod("train", "worker", 3, 12, job_version="2")
    done["status"]["phase"] = "Failed"
    readout = read([*old, *job(job_version="2"), done])
    assert readout.ready
    reasons = {i.pod: i.reason for i in readout.ignored}
    assert reasons == {
        "default/train-worker-0": "other-job-version",
        "default/train-worker-1": "other-job-version",
        "default/train-worker-3": "terminated",
    }
    assert [i.detail for i in readout.ignored if i.reason == "other-job-version"] == [
        "job version 1; the job is at 2"
    ] * 2


def test_left_out_pods_are_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG", logger="ringroute.planner")
    read(two_jobs(), job_name="train")
    (record,) = [r for r in caplog.records if "pod_left_out" in r.getMessage()]
    assert "pod=default/probe-worker-0" in record.getMessage()
    assert "reason=other-job" in record.getMessage()


def test_expected_pods_counts_only_the_chosen_job() -> None:
    problem = only_problem(two_jobs(), job_name="train", expected_pods=7)
    assert problem.kind == "missing-pods"
    assert problem.detail.startswith("found 6 of 7 NPU pods")
