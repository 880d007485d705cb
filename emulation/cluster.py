"""Objects of a small emulated cluster for the controller's tests and benchmark: a Volcano Job, its pods as
vc-controller-manager creates them and the device plugin annotates them, and NPU nodes labelled with their leaf."""

from __future__ import annotations

import json
from typing import Any

from kubernetes_asyncio.client import ApiClient, CoreV1Api

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


def pod_ip(index: int) -> str:
    """The pod network's IP of task index `index` (what kubelet reports as `status.podIP`)."""
    return f"172.16.{index // 250}.{index % 250 + 1}"


def device_annotation(pod_name: str, node: str, *, devices: int = 8, device_ip: str | None = None) -> dict[str, str]:
    """The device plugin's annotation of a pod on `node` (device IPs from the node number, or all `device_ip`)."""
    number = int(node.rsplit("-", 1)[1])
    info = {
        "pod_name": pod_name,
        "server_id": node_ip(node),
        "devices": [
            {"device_id": str(d), "device_ip": device_ip or f"10.{number // 250}.{number % 250}.{d + 1}"}
            for d in range(devices)
        ],
    }
    return {DEVICE_KEY: json.dumps(info)}


def make_pod(
    job: dict[str, Any],
    index: int,
    node: str | None,
    *,
    devices: int = 8,
    device_ip: str | None = None,
    version: int = 0,
    annotated: bool = True,
    with_pod_ip: bool = True,
    host_network: bool = False,
) -> dict[str, Any]:
    """Task index `index` of `job`: unbound and Pending without a node; else bound, running (with its pod IP unless
    `with_pod_ip` is False) and annotated by the device plugin unless `annotated` is False."""
    job_name = job["metadata"]["name"]
    name = f"{job_name}-worker-{index}"
    annotations: dict[str, str] = {"volcano.sh/job-version": str(version), "volcano.sh/task-spec": "worker"}
    status: dict[str, Any] = {"phase": "Pending"}
    spec: dict[str, Any] = {
        "containers": [{"name": "train", "resources": {"requests": {NPU: str(devices)}, "limits": {NPU: str(devices)}}}]
    }
    if host_network:
        spec["hostNetwork"] = True
    if node is not None:
        spec["nodeName"] = node
        host = node_ip(node)
        status = {"phase": "Running", "hostIP": host}
        if with_pod_ip:
            status["podIP"] = host if host_network else pod_ip(index)
        if annotated:
            annotations.update(device_annotation(name, node, devices=devices, device_ip=device_ip))
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


# A pod's life as the cluster writes it, each step the request its component sends, through the real client.
# Bodies go as plain dicts (the generated client serialises them as they are, whatever its type hints say); the
# client cannot decode a Binding's answer (a Status), so answers are not decoded; an error status raises
# aiohttp.ClientResponseError.


def _done(answer: Any) -> None:
    answer.release()
    answer.raise_for_status()


async def create_pod(api: ApiClient, pod: dict[str, Any]) -> None:
    """vc-controller-manager creates the pod (the API server makes its status `Pending`)."""
    body: Any = {**pod, "spec": {k: v for k, v in pod["spec"].items() if k != "nodeName"}}
    answer = await CoreV1Api(api).create_namespaced_pod(pod["metadata"]["namespace"], body, _preload_content=False)
    _done(answer)


async def bind_pod(api: ApiClient, pod: dict[str, Any], node: str) -> None:
    """vc-scheduler binds the pod to `node` (`pods/<name>/binding`)."""
    name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
    binding: Any = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name},
        "target": {"kind": "Node", "name": node},
    }
    answer = await CoreV1Api(api).create_namespaced_pod_binding(name, namespace, binding, _preload_content=False)
    _done(answer)


async def annotate_pod(api: ApiClient, pod: dict[str, Any], annotations: dict[str, str]) -> None:
    """The NPU device plugin writes its device info (during Allocate, before the pod's sandbox exists)."""
    patch = {"metadata": {"annotations": annotations}}
    name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
    answer = await CoreV1Api(api).patch_namespaced_pod(name, namespace, patch, _preload_content=False)
    _done(answer)


async def report_pod_status(api: ApiClient, pod: dict[str, Any], status: dict[str, Any]) -> None:
    """kubelet patches `pods/<name>/status`: the host IP first, the pod IP once the network plugin has one."""
    name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
    patch = {"status": status}
    answer = await CoreV1Api(api).patch_namespaced_pod_status(name, namespace, patch, _preload_content=False)
    _done(answer)
