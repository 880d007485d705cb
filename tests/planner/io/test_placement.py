"""Reading a placement from Pods: the happy paths, the plugin formats, and every problem the issue lists."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import InputError, PlacementError, load_kube_objects, placement_from_pods, read_placement
from tests.support.pods import ANNOTATION_910, ANNOTATION_1980, RESOURCE, device_annotation, pod

KEYS = (ANNOTATION_1980, ANNOTATION_910)


def read(pods: list[dict[str, Any]], **options: Any) -> Any:
    return read_placement(pods, annotation_keys=KEYS, resource_name=RESOURCE, **options)


def job(nodes: tuple[int, ...] = (3, 0, 2, 1), **options: Any) -> list[dict[str, Any]]:
    return [pod("train", "worker", i, node, **options) for i, node in enumerate(nodes)]


def test_complete_job_gives_servers_in_task_index_order_with_master_at_index_zero() -> None:
    pods = job()
    random.Random(1).shuffle(pods)
    readout = read(pods)
    assert readout.ready
    placement = readout.placement
    assert [s.task_index for s in placement.servers] == [0, 1, 2, 3]
    assert [s.node_name for s in placement.servers] == ["npu-03", "npu-00", "npu-02", "npu-01"]
    assert placement.master == 0
    assert placement.job_name == "train"
    assert placement.servers[0].server_id == "10.0.0.4"
    assert placement.servers[0].pod_ip == "172.20.3.2"
    assert placement.devices_per_server == 8


def test_master_is_index_zero_of_the_first_task_in_task_order() -> None:
    pods = [pod("train", "worker", i, i + 1) for i in range(3)] + [pod("train", "chief", 0, 0)]
    readout = read(pods, task_order=("worker", "chief"))
    assert [(s.task_name, s.task_index) for s in readout.placement.servers][:2] == [("worker", 0), ("worker", 1)]
    assert readout.placement.master == 0
    by_name = read(pods)  # without a task order tasks sort by name: chief first
    assert by_name.placement.servers[by_name.placement.master].task_name == "chief"


def test_newer_plugin_with_host_ip_and_pod_uid_server_id() -> None:
    readout = read(job(new_plugin=True))
    first = readout.placement.servers[0]
    assert first.host_ip == "10.0.0.4"
    assert first.server_id.startswith("00000000-0000-4000-8000-")


def test_older_annotation_key_is_read_when_the_first_key_is_absent() -> None:
    readout = read(job(annotation_key=ANNOTATION_910))
    assert readout.ready


def test_task_index_falls_back_to_the_pod_name_suffix() -> None:
    readout = read(job(with_index_label=False))
    assert [s.pod_name for s in readout.placement.servers] == [f"train-worker-{i}" for i in range(4)]


def test_devices_are_sorted_by_numeric_id() -> None:
    ids = ["10", "9", "0", "1", "8", "11", "2", "3"]
    pods = job(device_ids=ids)
    readout = read(pods)
    assert [d.device_id for d in readout.placement.servers[0].devices] == [0, 1, 2, 3, 8, 9, 10, 11]


def test_pods_of_an_older_job_version_are_ignored_and_the_newest_wins() -> None:
    old = [pod("train", "worker", i, i + 8, job_version="1") for i in range(4)]
    new = job(job_version="2")
    readout = read(old + new)
    assert readout.ready
    assert {s.node_name for s in readout.placement.servers} == {"npu-00", "npu-01", "npu-02", "npu-03"}
    assert sorted(readout.ignored_pods) == sorted(f"default/train-worker-{i}" for i in range(4))
    pinned = read(old + new, job_version="1")
    assert {s.node_name for s in pinned.placement.servers} == {"npu-08", "npu-09", "npu-10", "npu-11"}


def test_pods_of_another_job_uid_are_ignored() -> None:
    others = [pod("train", "worker", i, i + 8, job_uid="other-uid") for i in range(4)]
    readout = read(job() + others, job_uid="5d0c3a86-3f5e-4a57-9b1c-2f0a9e1c7d41")
    assert readout.ready
    assert len(readout.ignored_pods) == 4


def test_pods_without_npu_requests_are_not_part_of_the_placement() -> None:
    launcher = pod("train", "launcher", 0, 9, annotation=None)
    launcher["spec"]["containers"][0]["resources"] = {}
    readout = read([*job(), launcher])
    assert readout.ready
    assert len(readout.placement.servers) == 4


def problem_of(pods: list[dict[str, Any]], **options: Any) -> Any:
    readout = read(pods, **options)
    assert not readout.ready
    assert readout.placement is None
    return readout.problems


def test_missing_annotation_names_pod_and_key_and_says_to_wait() -> None:
    pods = job()
    del pods[2]["metadata"]["annotations"][ANNOTATION_1980]
    (problem,) = problem_of(pods)
    assert problem.kind == "missing-annotation"
    assert problem.pod == "default/train-worker-2"
    assert ANNOTATION_1980 in problem.field
    assert "wait" in problem.detail
    assert "\n" not in problem.render()


def test_unbound_pod_is_reported() -> None:
    pods = job()
    pods[1] = pod("train", "worker", 1, None)
    (problem,) = problem_of(pods)
    assert (problem.kind, problem.field) == ("unbound", "spec.nodeName")


@pytest.mark.parametrize(
    ("ips", "kind"),
    [
        (["-1"] + [f"192.168.9.{d}" for d in range(1, 8)], "device-failed"),
        (["not-an-ip"] + [f"192.168.9.{d}" for d in range(1, 8)], "bad-device-ip"),
    ],
)
def test_bad_device_ip_names_pod_field_and_device(ips: list[str], kind: str) -> None:
    pods = job()
    pods[3] = pod("train", "worker", 3, 1, device_ips=ips)
    (problem,) = problem_of(pods)
    assert problem.kind == kind
    assert problem.pod == "default/train-worker-3"
    assert problem.field.endswith(".devices[0].device_ip")


def test_duplicate_device_ids_are_reported() -> None:
    pods = job()
    pods[0] = pod("train", "worker", 0, 3, device_ids=["0", "1", "1", "3"], device_ips=["1.1.1.1"] * 4, devices=4)
    problems = problem_of(pods)
    assert "duplicate-device" in [p.kind for p in problems]


def test_malformed_annotation_is_reported() -> None:
    pods = job()
    pods[0]["metadata"]["annotations"][ANNOTATION_1980] = '{"devices": [oops'
    (problem,) = problem_of(pods)
    assert problem.kind == "malformed-annotation"


def test_device_count_differing_between_pods_is_reported() -> None:
    pods = job()
    pods[2] = pod("train", "worker", 2, 2, devices=4)
    (problem,) = problem_of(pods)
    assert problem.kind == "device-count-mismatch"
    assert problem.pod == "default/train-worker-2"


def test_two_pods_on_one_node_are_reported() -> None:
    (problem,) = problem_of(job((0, 1, 1, 2)))
    assert problem.kind == "shared-node"
    assert "npu-01" in problem.detail


def test_fewer_pods_than_expected_is_a_job_problem() -> None:
    (problem,) = problem_of(job(), expected_pods=6)
    assert problem.kind == "missing-pods"
    assert problem.pod is None
    assert "4 of 6" in problem.detail
    assert problem.render().startswith("job: pods:")


def test_every_problem_is_collected_not_only_the_first() -> None:
    pods = job()
    del pods[0]["metadata"]["annotations"][ANNOTATION_1980]
    pods[1] = pod("train", "worker", 1, None)
    kinds = {p.kind for p in problem_of(pods, expected_pods=5)}
    assert {"missing-annotation", "unbound", "missing-pods"} <= kinds


def test_placement_from_pods_raises_one_line_with_the_first_problem_and_a_count() -> None:
    pods = job()
    del pods[0]["metadata"]["annotations"][ANNOTATION_1980]
    pods[1] = pod("train", "worker", 1, None)
    with pytest.raises(PlacementError) as raised:
        placement_from_pods(pods, annotation_keys=KEYS, resource_name=RESOURCE)
    message = str(raised.value)
    assert "\n" not in message
    assert "train-worker-0" in message
    assert "(and 1 more problem)" in message


def test_load_kube_objects_reads_lists_multi_documents_and_json() -> None:
    pods = job()
    as_list = json.dumps({"apiVersion": "v1", "kind": "List", "items": pods})
    assert load_kube_objects(as_list) == pods
    import yaml

    multi = yaml.safe_dump_all(pods)
    assert load_kube_objects(multi) == pods
    assert load_kube_objects(yaml.safe_dump({"kind": "PodList", "items": pods})) == pods


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("kind: Pod\nmetadata: {name: x\n", "malformed YAML at line"),
        ('{"kind": "Pod",', "malformed JSON at line 1"),
        ("- a\n- b\n", "document 1"),
        ("just text", "document 1"),
    ],
)
def test_load_kube_objects_rejects_malformed_input_in_one_line(text: str, match: str) -> None:
    with pytest.raises(InputError, match=match) as raised:
        load_kube_objects(text)
    assert "\n" not in str(raised.value)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 10), st.randoms(use_true_random=False), st.sampled_from((1, 2, 4, 8, 16)))
def test_placement_invariants_hold_for_any_pod_order(n: int, rng: random.Random, devices: int) -> None:
    nodes = rng.sample(range(40), n)
    pods = []
    for i, node in enumerate(nodes):
        ids = [str(d) for d in rng.sample(range(16), devices)]
        annotation = device_annotation(node, device_ids=ids, device_ips=[f"10.9.{node}.{d}" for d in ids])
        pods.append(pod("j", "worker", i, node, annotation=annotation, devices=devices))
    rng.shuffle(pods)
    placement = read(pods).placement
    assert [s.task_index for s in placement.servers] == list(range(n))
    assert placement.servers[placement.master].task_index == 0
    for s in placement.servers:
        ids = [d.device_id for d in s.devices]
        assert ids == sorted(ids)
        assert len(ids) == devices
    assert read(list(reversed(pods))).placement == placement


@pytest.mark.parametrize("release", ["1.7", "1.8", "1.16"])
def test_pods_exactly_as_volcano_creates_them_give_task_indices_with_or_without_the_index_annotation(
    release: str,
) -> None:
    from emulation.volcano_payloads import volcano_job_pod

    pods = []
    for index, node in enumerate((3, 0, 2, 1)):
        created = volcano_job_pod(
            "train", index, node_name=f"npu-{node:02d}", node_ip=f"10.0.0.{node + 1}", phase="Running", release=release
        )
        created["metadata"]["annotations"][ANNOTATION_1980] = device_annotation(
            node, pod_name=created["metadata"]["name"]
        )
        pods.append(created)
    has_index = any("volcano.sh/task-index" in (p["metadata"].get("annotations") or {}) for p in pods)
    # Volcano 1.7 and 1.8 set no task-index annotation or label: the index comes from the pod name suffix.
    assert has_index == (release not in ("1.7", "1.8"))
    random.Random(0).shuffle(pods)
    readout = read(pods)
    assert readout.ready
    assert [s.node_name for s in readout.placement.servers] == ["npu-03", "npu-00", "npu-02", "npu-01"]
    assert readout.placement.servers[readout.placement.master].pod_name == "train-worker-0"
