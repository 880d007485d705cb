"""Objects of a small emulated cluster for the controller's tests and benchmark: a Volcano Job, its pods as
vc-controller-manager creates them and the device plugin annotates them, and NPU nodes labelled with their leaf."""

from __future__ import annotations

import json
from typing import Any

from emulation.apiserver import FakeApiServer
from planner import generate_topology, nodes_for_topology

DEVICE_KEY = "cce.kubectl.kubernetes.io/ascend-1980-configuration"
NPU = "huawei.com/ascend-1980"
NS = "team-a"


def make_job(name: str, replicas: int, *, route_plan: bool = True, cards: int = 8) -> dict[str, Any]:
    env = [{"name": "ROUTE_PLAN", "value": "true"}] if route_plan else []
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": {"ring-controller.cce": "ascend-1980"}},
        "spec": {
            "minAvailable": replicas,
            "schedulerName": "volcano",
            "tasks": [
                {
                    "name": "worker",
                    "replicas": replicas,
                    "template": {
                        "metadata": {"labels": {"ring-controller.cce": "ascend-1980"}},
                        "spec": {
                            "containers": [
                                {
                                    "name": "train",
                                    "image": "train:1",
                                    "command": ["python", "train.py"],
                                    "env": env,
                                    "resources": {"requests": {NPU: str(cards)}, "limits": {NPU: str(cards)}},
                                }
                            ]
                        },
                    },
                }
            ],
        },
        "status": {"version": 0},
    }


def node_ip(node: str) -> str:
    number = int(node.rsplit("-", 1)[1])
    return f"192.168.{number // 250}.{number % 250 + 1}"


def make_pod(
    job: dict[str, Any],
    index: int,
    node: str | None,
    *,
    devices: int = 8,
    device_ip: str | None = None,
    version: int = 0,
    annotated: bool = True,
) -> dict[str, Any]:
    job_name = job["metadata"]["name"]
    name = f"{job_name}-worker-{index}"
    annotations: dict[str, str] = {"volcano.sh/job-version": str(version), "volcano.sh/task-spec": "worker"}
    status: dict[str, Any] = {"phase": "Pending"}
    spec: dict[str, Any] = {
        "containers": [{"name": "train", "resources": {"requests": {NPU: str(devices)}, "limits": {NPU: str(devices)}}}]
    }
    if node is not None:
        spec["nodeName"] = node
        host = node_ip(node)
        status = {"phase": "Running", "hostIP": host, "podIP": f"172.16.{index // 250}.{index % 250 + 1}"}
        if annotated:
            number = int(node.rsplit("-", 1)[1])
            annotations[DEVICE_KEY] = json.dumps(
                {
                    "pod_name": name,
                    "server_id": host,
                    "devices": [
                        {"device_id": str(d), "device_ip": device_ip or f"10.{number // 250}.{number % 250}.{d + 1}"}
                        for d in range(devices)
                    ],
                }
            )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {
                "ring-controller.cce": "ascend-1980",
                "volcano.sh/job-name": job_name,
                "volcano.sh/task-spec": "worker",
                "volcano.sh/task-index": str(index),
            },
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": "batch.volcano.sh/v1alpha1",
                    "kind": "Job",
                    "name": job_name,
                    "uid": job["metadata"].get("uid", ""),
                    "controller": True,
                }
            ],
        },
        "spec": spec,
        "status": status,
    }


def cluster_nodes(leaves: int, servers_per_leaf: int) -> list[dict[str, Any]]:
    """Node objects labelled with their leaf (`volcano.sh/tor`), named npu-0, npu-1, ... (servers_per_leaf a leaf)."""
    topology = generate_topology(leaves=leaves, servers_per_leaf=servers_per_leaf)
    nodes = nodes_for_topology(topology)
    for node in nodes:
        name = f"npu-{int(node['metadata']['name'].rsplit('-', 1)[1])}"
        node["metadata"]["name"] = name
        node["metadata"]["labels"]["kubernetes.io/hostname"] = name
    return nodes


async def add_job(server: FakeApiServer, job: dict[str, Any]) -> dict[str, Any]:
    created = await server.apply("jobs", job)
    job["metadata"]["uid"] = created["metadata"]["uid"]
    return created
