"""Builders of Kubernetes objects as `kubectl get -o yaml` prints them, for tests and the sample inputs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

ANNOTATION_1980 = "cce.kubectl.kubernetes.io/ascend-1980-configuration"
ANNOTATION_910 = "ascend.kubectl.kubernetes.io/ascend-910-configuration"
RESOURCE = "huawei.com/ascend-1980"
JOB_UID = "5d0c3a86-3f5e-4a57-9b1c-2f0a9e1c7d41"


def node_ip(node_index: int) -> str:
    return f"10.0.{node_index // 256}.{node_index % 256 + 1}"


def device_annotation(
    node_index: int,
    *,
    devices: int = 8,
    pod_name: str = "",
    new_plugin: bool = False,
    pod_uid: str = "",
    super_pod: bool = False,
    device_ips: Sequence[str] | None = None,
    device_ids: Sequence[str] | None = None,
) -> str:
    ids = list(device_ids) if device_ids is not None else [str(d) for d in range(devices)]
    ips = list(device_ips) if device_ips is not None else [f"192.168.{node_index}.{int(d) + 10}" for d in ids]
    entries: list[dict[str, str]] = []
    for device_id, ip in zip(ids, ips, strict=True):
        entry = {"device_id": device_id, "device_ip": ip}
        if super_pod:
            entry["super_device_id"] = str(node_index * 16 + int(device_id) + 100000)
        entries.append(entry)
    body: dict[str, Any] = {"pod_name": pod_name, "server_id": node_ip(node_index), "devices": entries}
    if new_plugin:
        body = {"pod_name": pod_name, "server_id": pod_uid, "host_ip": node_ip(node_index), "devices": entries}
    if super_pod:
        body["super_pod_id"] = "0"
    return json.dumps(body, separators=(",", ":"))


def pod(
    job: str,
    task: str,
    index: int,
    node_index: int | None,
    *,
    namespace: str = "default",
    devices: int = 8,
    annotation_key: str = ANNOTATION_1980,
    annotation: str | None = "",
    job_version: str = "0",
    job_uid: str = JOB_UID,
    with_index_label: bool = True,
    **annotation_options: Any,
) -> dict[str, Any]:
    """An NPU pod of a Volcano Job; node_index None leaves it unbound, annotation None leaves out device info."""
    name = f"{job}-{task}-{index}"
    uid = f"00000000-0000-4000-8000-{index:012d}"
    labels = {
        "ring-controller.cce": "ascend-1980",
        "volcano.sh/job-name": job,
        "volcano.sh/job-namespace": namespace,
        "volcano.sh/queue-name": "default",
        "volcano.sh/task-spec": task,
    }
    if with_index_label:
        labels["volcano.sh/task-index"] = str(index)
    annotations = {
        "scheduling.k8s.io/group-name": f"{job}-{job_uid}",
        "volcano.sh/job-name": job,
        "volcano.sh/job-version": job_version,
        "volcano.sh/queue-name": "default",
        "volcano.sh/task-spec": task,
    }
    if node_index is not None and annotation is not None:
        annotations[annotation_key] = annotation or device_annotation(
            node_index, devices=devices, pod_name=name, pod_uid=uid, **annotation_options
        )
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "mindspore",
                "image": "bert_pretrain_mindspore:v1",
                "command": ["/bin/sh", "-c", "python train.py"],
                "resources": {"limits": {RESOURCE: str(devices)}, "requests": {RESOURCE: str(devices)}},
            }
        ],
        "schedulerName": "volcano",
        "restartPolicy": "OnFailure",
    }
    status: dict[str, Any] = {"phase": "Pending", "qosClass": "BestEffort"}
    if node_index is not None:
        spec["nodeName"] = f"npu-{node_index:02d}"
        status = {
            "phase": "Running",
            "hostIP": node_ip(node_index),
            "podIP": f"172.20.{node_index}.{index + 2}",
            "podIPs": [{"ip": f"172.20.{node_index}.{index + 2}"}],
            "qosClass": "BestEffort",
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "annotations": annotations,
            "labels": labels,
            "name": name,
            "namespace": namespace,
            "ownerReferences": [
                {
                    "apiVersion": "batch.volcano.sh/v1alpha1",
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": "Job",
                    "name": job,
                    "uid": job_uid,
                }
            ],
            "uid": uid,
        },
        "spec": spec,
        "status": status,
    }


# The sample job: 12 pods on 3 nodes of each of the 4 leaves of the 16-node cluster, pod index round-robin over
# leaves (what a spread scheduler produces), so pod-index order crosses a leaf boundary on every ring edge.
SAMPLE_NODES = (0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14)


def sample_job_pods(job: str = "llm-pretrain", nodes: Sequence[int] = SAMPLE_NODES) -> list[dict[str, Any]]:
    return [pod(job, "worker", index, node) for index, node in enumerate(nodes)]


def pod_list(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": list(items), "metadata": {"resourceVersion": ""}}
