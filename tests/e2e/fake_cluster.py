"""Nodes an e2e test keeps Ready itself (heartbeats and node leases), playing kubelet and the device plugin for the
pods bound to them, and the clean-up that leaves the real cluster as it was."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from emulation.cluster import device_annotation
from webhook.kube.client import HYPERNODES, JOBS, NODES, PODS, KubeError, KubeRepository

Obj = dict[str, Any]
NPU = "huawei.com/ascend-1980"
LEAF_LABEL = "volcano.sh/tor"
MERGE = "application/merge-patch+json"


@dataclass
class FakeNodes:
    """Node objects kept Ready by heartbeats, with kubelet and the device plugin played for their pods."""

    repo: KubeRepository
    prefix: str
    leaf_of: Callable[[int], str]
    names: list[str] = field(default_factory=list)

    def node_name(self, index: int) -> str:
        return f"{self.prefix}-{index:02d}"

    async def add(self, index: int, leaf: str | None = None) -> None:
        name = self.node_name(index)
        leaf = leaf or self.leaf_of(index)
        labels = {
            "kubernetes.io/hostname": name,
            LEAF_LABEL: leaf,
            "accelerator/huawei-npu": "ascend-1980",
            # leaf and spine group as the extender reads them: the same tree as the HyperNodes
            "volcano.sh/hypernode": leaf,
            "volcano.sh/hypercluster": f"{self.prefix}-spine",
        }
        await self.repo.create_object(
            NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
        )
        self.names.append(name)
        await self._heartbeat(name, index)

    async def _heartbeat(self, name: str, index: int) -> None:
        now = dt.datetime.now(dt.UTC)
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        resources = {NPU: "8", "cpu": "192", "memory": "1536Gi", "pods": "110"}
        status = {
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "addresses": [{"type": "InternalIP", "address": f"192.168.77.{index + 10}"}],
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "kept Ready by the e2e test",
                        "lastHeartbeatTime": stamp,
                        "lastTransitionTime": stamp,
                    }
                ],
            }
        }
        await self.repo._call(
            "patch node status", "PATCH", NODES.path(None, name) + "/status", body=status, content_type=MERGE
        )
        lease_path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"
        spec = {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
        if await self.repo._call("get lease", "GET", lease_path, missing_ok=True) is None:
            body = {"metadata": {"name": name, "namespace": "kube-node-lease"}, "spec": spec}
            await self.repo._call("create lease", "POST", lease_path.rsplit("/", 1)[0], body=body)
        else:
            await self.repo._call("patch lease", "PATCH", lease_path, body={"spec": spec}, content_type=MERGE)

    async def run(self, stop: asyncio.Event) -> None:
        """Heartbeats every 5 s; pods bound to these nodes get device info, then Running with an IP."""
        last = 0.0
        while not stop.is_set():
            if time.monotonic() - last > 5.0:
                last = time.monotonic()
                for name in list(self.names):
                    await self._heartbeat(name, int(name.rsplit("-", 1)[1]))
            pods, _ = await self.repo.list_objects(PODS)
            for pod in pods:
                meta, spec = pod["metadata"], pod.get("spec") or {}
                node = spec.get("nodeName")
                if node not in self.names or (pod.get("status") or {}).get("phase") != "Pending":
                    continue
                if meta.get("deletionTimestamp"):
                    continue
                index = int(node.rsplit("-", 1)[1])
                annotations = meta.get("annotations") or {}
                if not any(k.endswith("-configuration") for k in annotations):
                    number = {"metadata": {"annotations": device_annotation(meta["name"], f"npu-{index}")}}
                    await self.repo.patch_object(PODS, meta["namespace"], meta["name"], number)
                status = {
                    "status": {
                        "phase": "Running",
                        "hostIP": f"192.168.77.{index + 10}",
                        "podIP": f"10.77.{index}.{abs(hash(meta['name'])) % 200 + 2}",
                        "conditions": [{"type": "Ready", "status": "True"}],
                    }
                }
                path = PODS.path(meta["namespace"], meta["name"]) + "/status"
                await self.repo._call("patch pod status", "PATCH", path, body=status, content_type=MERGE)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)


async def clean_up(repo: KubeRepository, namespace: str, hypernodes: list[str], nodes: list[str]) -> None:
    """Jobs first, then their pods (nothing runs them: deleted at once) until none is left, so Volcano's cache holds
    nothing of this run when the next starts; then the HyperNodes, the nodes and the namespace."""
    jobs, _ = await repo.list_objects(JOBS, namespace)
    for job in jobs:
        with contextlib.suppress(KubeError):
            await repo.delete_object(JOBS, namespace, job["metadata"]["name"])
    deadline = time.monotonic() + 60.0
    while time.monotonic() < deadline:
        pods, _ = await repo.list_objects(PODS, namespace)
        if not pods:
            break
        for pod in pods:
            path = PODS.path(namespace, pod["metadata"]["name"])
            with contextlib.suppress(KubeError):
                await repo._call("delete pod", "DELETE", path, query={"gracePeriodSeconds": 0}, missing_ok=True)
        await asyncio.sleep(0.5)
    for name in hypernodes:
        with contextlib.suppress(KubeError):
            await repo.delete_object(HYPERNODES, None, name)
    for name in nodes:
        with contextlib.suppress(KubeError):
            await repo.delete_object(NODES, None, name)
    await repo._call("delete namespaces", "DELETE", f"/api/v1/namespaces/{namespace}", missing_ok=True)
    while time.monotonic() < deadline:
        if await repo._call("get namespace", "GET", f"/api/v1/namespaces/{namespace}", missing_ok=True) is None:
            break
        await asyncio.sleep(0.5)
    await repo.close()


def job_manifest(
    name: str, namespace: str, replicas: int, topology: Obj | None = None, *, affinity: Obj | None = None
) -> Obj:
    """A route-planned Volcano Job of `replicas` 8-card pods (sleeping busybox), with an optional
    `spec.networkTopology` and pod `affinity`."""
    template = {
        "metadata": {"labels": {"ring-controller.cce": "ascend-1980"}},
        "spec": {
            "restartPolicy": "Never",
            **({"affinity": affinity} if affinity is not None else {}),
            "containers": [
                {
                    "name": "train",
                    "image": "localhost/rr-busybox:1",
                    "command": ["sh", "-c", "sleep 3600"],
                    "env": [{"name": "ROUTE_PLAN", "value": "true"}],
                    "resources": {"requests": {NPU: "8"}, "limits": {NPU: "8"}},
                }
            ],
        },
    }
    spec: Obj = {
        "minAvailable": replicas,
        "schedulerName": "volcano",
        "queue": "default",
        "tasks": [{"name": "worker", "replicas": replicas, "template": template}],
    }
    if topology is not None:
        spec["networkTopology"] = topology
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {"ring-controller.cce": "ascend-1980"}},
        "spec": spec,
    }
