"""Kubernetes Node objects as a kube-apiserver 1.36 cluster holds them, and the helpers every object builder shares."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from emulation.volcano_payloads.gojson import quantity_milli_value, quantity_value
from webhook.common.names import HOSTNAME_LABEL, NPU_RESOURCE
from webhook.extender.volcano_releases import MASTER_RELEASE, RELEASE_K8S_API, JSONObject, normalize_release
from webhook.volcano_emulation.cluster_objects import TRAINING_IMAGE_BYTES

# ------------------------------------------------------------------------------------------ Kubernetes objects
# Informer objects as kube-apiserver 1.36 returns them (empty TypeMeta, managedFields kept: Volcano's informers do
# not strip them), in Go field order. Fields newer than a release's vendored k8s.io/api are left out, since Volcano
# decodes into those structs before re-encoding. Timestamps are fixed strings so payloads are reproducible.


DEFAULT_CREATED: Final = "2026-06-01T08:00:00Z"
_NODE_CREATED: Final = "2025-11-03T02:14:55Z"
HEARTBEAT: Final = "2026-06-02T09:41:17Z"


def stable_hash(text: str) -> int:
    """A 128-bit deterministic hash (blake2b is several times faster than uuid5 for bulk payloads)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=16).digest(), "big")


def stable_hex(text: str) -> str:
    return f"{stable_hash(text):032x}"


def stable_uid(*parts: object) -> str:
    """A deterministic v4-style UID for an object named by `parts` (reproducible payloads)."""
    return str(uuid.UUID(int=stable_hash("/".join(map(str, parts))), version=4))


def name_suffix(seed: str, length: int = 5) -> str:
    # Kubernetes generateName suffixes avoid vowels and look-alike digits.
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    number = stable_hash(seed)
    return "".join(alphabet[(number >> (5 * i)) % len(alphabet)] for i in range(length))


def fields_v1(value: Any) -> Any:
    """A managedFields fieldsV1 tree for `value` (server-side-apply shape: f:<key>, k:{...} for keyed lists)."""
    if isinstance(value, dict):
        return {f"f:{k}": fields_v1(v) for k, v in value.items()}
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        tree: JSONObject = {}
        for item in value:
            for keys in (("containerPort", "protocol"), ("mountPath",), ("name",), ("key", "effect"), ("type",)):
                if all(k in item for k in keys):
                    key = json.dumps({k: item[k] for k in keys}, separators=(",", ":"))
                    tree[f"k:{key}"] = {".": {}, **{f"f:{k}": fields_v1(v) for k, v in item.items()}}
                    break
        return tree
    return {}


def managed_fields_entry(manager: str, time: str, fields: Any, *, subresource: str | None = None) -> JSONObject:
    entry: JSONObject = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": "v1",
        "time": time,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


@dataclass(frozen=True, slots=True)
class ContainerImage:
    """One entry of node.status.images (kubelet reports at most 50, largest first)."""

    repository: str
    tag: str
    size_bytes: int

    def names(self) -> list[str]:
        """The two names kubelet lists: `repo@sha256:...` and `repo:tag`."""
        digest = stable_hex(f"{self.repository}:{self.tag}") * 2
        return [f"{self.repository}@sha256:{digest}", f"{self.repository}:{self.tag}"]


TRAINING_IMAGE: Final = ContainerImage(
    "swr.cn-south-1.myhuaweicloud.com/ai-train/pytorch-ascend", "2.1.0-cann8.0", TRAINING_IMAGE_BYTES
)
NPU_NODE_IMAGES: Final[tuple[ContainerImage, ...]] = (
    TRAINING_IMAGE,
    ContainerImage("swr.cn-south-1.myhuaweicloud.com/ai-train/mindspore-ascend", "2.3.1-cann8.0", 19_662_118_912),
    ContainerImage("swr.cn-south-1.myhuaweicloud.com/ai-train/pytorch-ascend", "2.1.0-cann7.0", 18_904_219_648),
    ContainerImage("swr.cn-south-1.myhuaweicloud.com/ai-train/llm-pretrain", "v0.9.3", 16_106_127_360),
    ContainerImage("swr.cn-south-1.myhuaweicloud.com/ai-train/deepspeed-ascend", "0.14.2", 14_532_812_800),
    ContainerImage("swr.cn-south-1.myhuaweicloud.com/ai-infer/mindie", "1.0.0-800I-A2", 12_884_901_888),
    ContainerImage("swr.cn-south-1.myhuaweicloud.com/ai-train/cann-toolkit", "8.0.RC3", 9_663_676_416),
    ContainerImage("swr.cn-south-1.myhuaweicloud.com/ai-train/hccl-test", "8.0.RC3", 6_442_450_944),
    ContainerImage("swr.cn-south-1.myhuaweicloud.com/mindx/ascend-k8sdeviceplugin", "v6.0.0", 418_119_680),
    ContainerImage("swr.cn-south-1.myhuaweicloud.com/mindx/noded", "v6.0.0", 203_423_744),
    ContainerImage("swr.cn-south-1.myhuaweicloud.com/mindx/npu-exporter", "v6.0.0", 187_564_032),
    ContainerImage("docker.io/calico/node", "v3.28.2", 142_671_360),
    ContainerImage("docker.io/calico/cni", "v3.28.2", 95_748_096),
    ContainerImage("registry.k8s.io/kube-proxy", "v1.36.1", 31_772_672),
    ContainerImage("quay.io/prometheus/node-exporter", "v1.8.2", 12_140_544),
    ContainerImage("docker.io/volcanosh/vc-webhook-manager", "v1.12.2", 29_879_296),
    ContainerImage("registry.k8s.io/coredns/coredns", "v1.12.1", 21_365_248),
    ContainerImage("docker.io/library/busybox", "1.36", 2_155_008),
    ContainerImage("registry.k8s.io/pause", "3.10", 320_368),
    ContainerImage("swr.cn-south-1.myhuaweicloud.com/ai-train/dataset-prefetch", "v2.4", 1_610_612_736),
)
"""Twenty images (40 names) as a busy NPU training node carries them, largest first."""


def node_identity(name: str, index: int | None) -> dict[str, str]:
    """The per-node strings of a kube_node (all derived from the name and index, so templates can swap them)."""
    if index is None:
        index = stable_hash(name) % 60000
    return {
        "uid": stable_uid("node", name),
        "rv": str(48_000_000 + index),
        "ip": f"10.{20 + index // 62500}.{index // 250 % 250}.{index % 250 + 1}",
        "pod_cidr": f"172.{16 + index // 256 % 16}.{index % 256}.0/24",
        "tunnel": f"100.{64 + index // 65536 % 64}.{index // 256 % 256}.{index % 256}",
        "device_net": f"192.{168 + index // 250 % 80}.{index % 250}.",
        "machine": stable_hex(f"machine/{name}"),
        "system": str(uuid.UUID(int=stable_hash(f"system/{name}"))).upper(),
        "boot": str(uuid.UUID(int=stable_hash(f"boot/{name}"), version=4)),
        "serial": f"2102314QKT10P{index:07d}",
    }


def kube_node(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    cards: int = 8,
    resource: str = NPU_RESOURCE,
    cpu: str = "192",
    memory: str = "1584871932Ki",
    images: Sequence[ContainerImage] = NPU_NODE_IMAGES,
    internal_ip: str | None = None,
    index: int | None = None,
    ready: bool = True,
    release: str = MASTER_RELEASE,
) -> JSONObject:
    """A v1.Node as kubelet 1.36 (with calico, the Ascend device plugin and a `volcano.sh/tor` label) reports it.

    `labels` are added to the usual node labels (hostname, arch, Ascend accelerator labels); pass the topology
    labels here, e.g. `{"volcano.sh/tor": "leaf-012"}`. Allocatable keeps 2 CPUs and 100 MiB of memory back.
    `index` (0-based position in the cluster) picks the node's IPs; by default they come from a hash of the name.
    """
    api = RELEASE_K8S_API[normalize_release(release)]
    ident = node_identity(name, index)
    ip = internal_ip or ident["ip"]
    all_labels = {
        "accelerator": "huawei-Ascend910",
        "accelerator-type": "module-910b-8",
        "beta.kubernetes.io/arch": "arm64",
        "beta.kubernetes.io/os": "linux",
        "host-arch": "huawei-arm",
        "kubernetes.io/arch": "arm64",
        HOSTNAME_LABEL: name,
        "kubernetes.io/os": "linux",
        "node-role.kubernetes.io/worker": "worker",
        "nodeDEnable": "on",
        "servertype": "Ascend910B-20",
        "workerselector": "dls-worker-node",
        **(labels or {}),
    }
    device_list = ",".join(f"Ascend910-{i}" for i in range(cards))
    base_infos = {f"Ascend910-{i}": {"IP": f"{ident['device_net']}{i + 1}", "SuperDeviceID": 0} for i in range(cards)}
    all_annotations = {
        "baseDeviceInfos": json.dumps(base_infos, separators=(",", ":")),
        "huawei.com/Ascend910": device_list,
        "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock",
        "node.alpha.kubernetes.io/ttl": "0",
        "product-serial-number": ident["serial"],
        "projectcalico.org/IPv4Address": f"{ip}/16",
        "projectcalico.org/IPv4VXLANTunnelAddr": ident["tunnel"],
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        **(annotations or {}),
    }
    capacity = {
        "cpu": cpu,
        "ephemeral-storage": "3750772604Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "hugepages-32Mi": "0",
        "hugepages-64Ki": "0",
        resource: str(cards),
        "memory": memory,
        "pods": "110",
    }
    allocatable = dict(capacity)
    allocatable["cpu"] = (
        f"{quantity_milli_value(cpu) - 2000}m" if quantity_milli_value(cpu) % 1000 else str(quantity_value(cpu) - 2)
    )
    allocatable["ephemeral-storage"] = "3456736289398"
    allocatable["memory"] = f"{quantity_value(memory) // 1024 - 102400}Ki"

    def condition(kind: str, status: str, reason: str, message: str, beat: str = HEARTBEAT) -> JSONObject:
        return {
            "type": kind,
            "status": status,
            "lastHeartbeatTime": beat,
            "lastTransitionTime": _NODE_CREATED,
            "reason": reason,
            "message": message,
        }

    spec: JSONObject = {"podCIDR": ident["pod_cidr"], "podCIDRs": [ident["pod_cidr"]]}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    node_info: JSONObject = {
        "machineID": ident["machine"],
        "systemUUID": ident["system"],
        "bootID": ident["boot"],
        "kernelVersion": "5.10.0-182.0.0.95.oe2203sp3.aarch64",
        "osImage": "openEuler 22.03 (LTS-SP3)",
        "containerRuntimeVersion": "containerd://1.7.22",
        "kubeletVersion": "v1.36.1",
        "kubeProxyVersion": "",
        "operatingSystem": "linux",
        "architecture": "arm64",
    }
    if api >= 33:
        node_info["swap"] = {"capacity": 0}
    status: JSONObject = {
        "capacity": dict(sorted(capacity.items())),
        "allocatable": dict(sorted(allocatable.items())),
        "conditions": [
            condition("NetworkUnavailable", "False", "CalicoIsUp", "Calico is running on this node", _NODE_CREATED),
            condition(
                "MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"
            ),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            condition(
                "Ready",
                "True" if ready else "False",
                "KubeletReady" if ready else "KubeletNotReady",
                "kubelet is posting ready status" if ready else "container runtime network not ready",
            ),
        ],
        "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": node_info,
        "images": [{"names": image.names(), "sizeBytes": image.size_bytes} for image in images[:50]],
    }
    if api >= 30:
        handler_features: JSONObject = {"recursiveReadOnlyMounts": True}
        if api >= 31:
            handler_features["userNamespaces"] = True
        status["runtimeHandlers"] = [
            {"name": "", "features": dict(handler_features)},
            {"name": "runc", "features": dict(handler_features)},
        ]
    if api >= 31:
        status["features"] = {"supplementalGroupsPolicy": True}
    metadata: JSONObject = {
        "name": name,
        "uid": ident["uid"],
        "resourceVersion": ident["rv"],
        "creationTimestamp": _NODE_CREATED,
        "labels": dict(sorted(all_labels.items())),
        "annotations": dict(sorted(all_annotations.items())),
    }
    kubelet_meta = {k: all_labels[k] for k in all_labels if k.startswith(("kubernetes.io/", "beta.kubernetes.io/"))}
    metadata["managedFields"] = [
        managed_fields_entry(
            "kubelet",
            _NODE_CREATED,
            {
                "f:metadata": fields_v1(
                    {
                        "annotations": dict.fromkeys(
                            ("node.alpha.kubernetes.io/ttl", "volumes.kubernetes.io/controller-managed-attach-detach"),
                            "",
                        ),
                        "labels": kubelet_meta,
                    }
                )
            },
        ),
        managed_fields_entry(
            "kubeadm",
            _NODE_CREATED,
            {"f:metadata": fields_v1({"annotations": {"kubeadm.alpha.kubernetes.io/cri-socket": ""}})},
        ),
        managed_fields_entry(
            "kube-controller-manager",
            _NODE_CREATED,
            {
                "f:metadata": fields_v1({"annotations": {"node.alpha.kubernetes.io/ttl": ""}}),
                "f:spec": fields_v1(spec),
            },
        ),
        managed_fields_entry(
            "calico-node",
            _NODE_CREATED,
            {
                "f:metadata": fields_v1(
                    {"annotations": {k: "" for k in all_annotations if k.startswith("projectcalico.org/")}}
                ),
                "f:status": fields_v1({"conditions": [status["conditions"][0]]}),
            },
            subresource="status",
        ),
        managed_fields_entry(
            "kubectl-label",
            _NODE_CREATED,
            {"f:metadata": fields_v1({"labels": {k: "" for k in all_labels if k not in kubelet_meta}})},
        ),
        managed_fields_entry(
            "device-plugin",
            HEARTBEAT,
            {
                "f:metadata": fields_v1(
                    {
                        "annotations": dict.fromkeys(
                            ("baseDeviceInfos", "huawei.com/Ascend910", "product-serial-number"), ""
                        )
                    }
                )
            },
        ),
        managed_fields_entry(
            "kubelet",
            HEARTBEAT,
            {"f:status": fields_v1({k: v for k, v in status.items() if k != "images"}) | {"f:images": {}}},
            subresource="status",
        ),
    ]
    return {"metadata": metadata, "spec": spec, "status": status}


__all__ = [
    "ContainerImage",
    "NPU_NODE_IMAGES",
    "NPU_RESOURCE",
    "TRAINING_IMAGE",
    "kube_node",
    "stable_uid",
]
