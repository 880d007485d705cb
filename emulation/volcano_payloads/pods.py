"""Kubernetes Pod objects: Volcano Job pods and DaemonSet pods, as a kube-apiserver 1.36 cluster holds them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final, Literal

from emulation.volcano_payloads.objects import (
    DEFAULT_CREATED,
    HEARTBEAT,
    NPU_RESOURCE,
    TRAINING_IMAGE,
    ContainerImage,
    fields_v1,
    managed_fields_entry,
    name_suffix,
    stable_hash,
    stable_hex,
    stable_uid,
)
from webhook.common.names import (
    GROUP_NAME_ANNOTATION,
    JOB_NAME_LABEL,
    JOB_NAMESPACE_LABEL,
    JOB_RETRY_COUNT_ANNOTATION,
    JOB_VERSION_ANNOTATION,
    QUEUE_NAME_KEY,
    TASK_INDEX_KEY,
    TASK_SPEC_KEY,
    TEMPLATE_UID_ANNOTATION,
    VOLCANO_JOB_API_VERSION,
)
from webhook.extender.volcano_releases import (
    MASTER_RELEASE,
    RELEASE_K8S_API,
    JSONObject,
    normalize_release,
    release_at_least,
)


def _container_status(container: JSONObject, *, started: str, api: int, pod_name: str) -> JSONObject:
    name, image = container["name"], container["image"]
    digest = stable_hex(image) * 2
    container_id = stable_hex(f"{pod_name}/{name}") * 2
    out: JSONObject = {
        "name": name,
        "state": {"running": {"startedAt": started}},
        "lastState": {},
        "ready": True,
        "restartCount": 0,
        "image": image,
        "imageID": f"{image.rsplit(':', 1)[0]}@sha256:{digest}",
        "containerID": f"containerd://{container_id}",
        "started": True,
    }
    if api >= 29:
        out["resources"] = container.get("resources", {})
    if api >= 30:
        mounts: list[JSONObject] = []
        for mount in container.get("volumeMounts", []):
            entry: JSONObject = {"name": mount["name"], "mountPath": mount["mountPath"]}
            if mount.get("readOnly"):
                entry["readOnly"] = True
                entry["recursiveReadOnly"] = "Disabled"
            mounts.append(entry)
        out["volumeMounts"] = mounts
    if api >= 31:
        out["user"] = {"linux": {"uid": 0, "gid": 0, "supplementalGroups": [0, 1, 2, 3, 4, 6, 10, 11, 20, 26, 27]}}
    return out


def _pod_status(
    spec: JSONObject, *, phase: str, node_ip: str, pod_ip: str, created: str, qos: str, api: int, pod_name: str
) -> JSONObject:
    if phase == "Pending":
        return {"phase": "Pending", "qosClass": qos}
    started = created[:-3] + "41Z"
    status: JSONObject = {}
    if api >= 33:
        status["observedGeneration"] = 1

    def condition(kind: str) -> JSONObject:
        out: JSONObject = {"type": kind}
        if api >= 33:
            out["observedGeneration"] = 1
        out |= {"status": "True", "lastProbeTime": None, "lastTransitionTime": started}
        return out

    status["phase"] = phase
    status["conditions"] = [
        condition(kind) for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")
    ] + [condition("PodScheduled") | {"lastTransitionTime": created}]
    status["hostIP"] = node_ip
    if api >= 29:
        status["hostIPs"] = [{"ip": node_ip}]
    status["podIP"] = pod_ip
    status["podIPs"] = [{"ip": pod_ip}]
    status["startTime"] = created
    status["containerStatuses"] = [
        _container_status(c, started=started, api=api, pod_name=pod_name) for c in spec["containers"]
    ]
    status["qosClass"] = qos
    return status


_SA_VOLUME_MOUNT: Final = "/var/run/secrets/kubernetes.io/serviceaccount"
_DEFAULT_TOLERATIONS: Final = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
)


def _sa_volume(seed: str) -> JSONObject:
    return {
        "name": f"kube-api-access-{name_suffix(seed)}",
        "projected": {
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [
                            {"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}
                        ]
                    }
                },
            ],
            "defaultMode": 420,
        },
    }


def volcano_job_pod(
    job_name: str,
    index: int,
    *,
    namespace: str = "default",
    task_name: str = "worker",
    job_uid: str | None = None,
    queue: str = "default",
    cards: int = 8,
    resource: str = NPU_RESOURCE,
    cpu: str = "176",
    memory: str = "1400Gi",
    image: ContainerImage = TRAINING_IMAGE,
    node_name: str | None = None,
    node_ip: str = "",
    pod_ip: str | None = None,
    phase: Literal["Pending", "Running", "Succeeded", "Failed"] | None = None,
    job_version: int = 0,
    created: str = DEFAULT_CREATED,
    extra_labels: Mapping[str, str] | None = None,
    extra_annotations: Mapping[str, str] | None = None,
    extra_env: Mapping[str, str] | None = None,
    deleting: bool = False,
    release: str = MASTER_RELEASE,
) -> JSONObject:
    """A v1.Pod as vc-controller-manager creates it for task `task_name` of a Volcano Job (plugins env + svc).

    Name `<job>-<task>-<index>`; labels volcano.sh/job-name, job-namespace, queue-name, task-spec (and
    task-index from v1.9); annotations scheduling.k8s.io/group-name (`<job>-<job uid>`), volcano.sh/job-name,
    job-version, queue-name, task-spec, template-uid (plus task-index from v1.9, job-retry-count from v1.10);
    env VK_TASK_INDEX and VC_TASK_INDEX from the env plugin, hostname/subdomain and the `<job>-svc` ConfigMap from
    the svc plugin. Without `node_name` the pod is Pending and unbound.
    """
    rel = normalize_release(release)
    api = RELEASE_K8S_API[rel]
    job_uid = job_uid or stable_uid("job", namespace, job_name)
    name = f"{job_name}-{task_name}-{index}"
    phase = phase or ("Running" if node_name else "Pending")
    labels = {
        "app": job_name,
        JOB_NAME_LABEL: job_name,
        JOB_NAMESPACE_LABEL: namespace,
        QUEUE_NAME_KEY: queue,
        TASK_SPEC_KEY: task_name,
        **(extra_labels or {}),
    }
    annotations = {
        GROUP_NAME_ANNOTATION: f"{job_name}-{job_uid}",
        JOB_NAME_LABEL: job_name,
        JOB_VERSION_ANNOTATION: str(job_version),
        QUEUE_NAME_KEY: queue,
        TASK_SPEC_KEY: task_name,
        TEMPLATE_UID_ANNOTATION: f"{job_name}-{task_name}",
        **(extra_annotations or {}),
    }
    if release_at_least(rel, "1.9"):
        labels[TASK_INDEX_KEY] = str(index)
        annotations[TASK_INDEX_KEY] = str(index)
    if release_at_least(rel, "1.10"):
        annotations[JOB_RETRY_COUNT_ANNOTATION] = "0"
    limits = {"cpu": cpu, resource: str(cards), "memory": memory}
    svc = f"{job_name}-svc"
    container: JSONObject = {
        "name": "train",
        "image": f"{image.repository}:{image.tag}",
        "command": [
            "/bin/bash",
            "-c",
            "cd /home/ma-user/modelarts && bash scripts/run_pretrain.sh 2>&1 | tee /logs/train.log",
        ],
        "ports": [{"name": "hccl", "containerPort": 2222, "protocol": "TCP"}],
        "env": [
            {"name": "ASCEND_VISIBLE_DEVICES", "value": ",".join(str(i) for i in range(cards))},
            {"name": "HCCL_CONNECT_TIMEOUT", "value": "1800"},
            {"name": "MASTER_PORT", "value": "29500"},
            *({"name": k, "value": v} for k, v in (extra_env or {}).items()),
            {"name": "VK_TASK_INDEX", "value": str(index)},
            {"name": "VC_TASK_INDEX", "value": str(index)},
            {
                "name": f"VC_{task_name.upper().replace('-', '_')}_HOSTS",
                "valueFrom": {
                    "configMapKeyRef": {"name": svc, "key": f"VC_{task_name.upper().replace('-', '_')}_HOSTS"}
                },
            },
            {
                "name": f"VC_{task_name.upper().replace('-', '_')}_NUM",
                "valueFrom": {"configMapKeyRef": {"name": svc, "key": f"VC_{task_name.upper().replace('-', '_')}_NUM"}},
            },
        ],
        "resources": {"limits": dict(sorted(limits.items())), "requests": dict(sorted(limits.items()))},
        "volumeMounts": [
            {"name": "ascend-driver", "mountPath": "/usr/local/Ascend/driver", "readOnly": True},
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "training-data", "mountPath": "/data"},
            {"name": "logs", "mountPath": "/logs"},
            {"name": svc, "mountPath": "/etc/volcano"},
            {"name": "", "mountPath": _SA_VOLUME_MOUNT, "readOnly": True},
        ],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }
    sa_volume = _sa_volume(f"{namespace}/{name}")
    container["volumeMounts"][-1]["name"] = sa_volume["name"]
    spec: JSONObject = {
        "volumes": [
            {"name": "ascend-driver", "hostPath": {"path": "/usr/local/Ascend/driver", "type": ""}},
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
            {"name": "training-data", "persistentVolumeClaim": {"claimName": "pretrain-corpus", "readOnly": True}},
            {"name": "logs", "hostPath": {"path": f"/var/log/training/{job_name}", "type": "DirectoryOrCreate"}},
            {"name": svc, "configMap": {"name": svc, "defaultMode": 420}},
            sa_volume,
        ],
        "containers": [container],
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "nodeSelector": {"accelerator-type": "module-910b-8", "host-arch": "huawei-arm"},
        "serviceAccountName": "default",
        "serviceAccount": "default",
    }
    if node_name:
        spec["nodeName"] = node_name
    spec |= {
        "securityContext": {},
        "hostname": name,
        "subdomain": job_name,
        "schedulerName": "volcano",
        "tolerations": [dict(t) for t in _DEFAULT_TOLERATIONS],
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    if pod_ip is None:
        number = stable_hash(f"{namespace}/{name}")
        pod_ip = f"172.{16 + number % 16}.{number // 16 % 256}.{number // 4096 % 254 + 1}" if node_name else ""
    status = _pod_status(
        spec, phase=phase, node_ip=node_ip, pod_ip=pod_ip, created=created, qos="Guaranteed", api=api, pod_name=name
    )
    owner = {
        "apiVersion": VOLCANO_JOB_API_VERSION,
        "kind": "Job",
        "name": job_name,
        "uid": job_uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    metadata: JSONObject = {
        "name": name,
        "namespace": namespace,
        "uid": stable_uid("pod", namespace, name, job_version),
        "resourceVersion": str(50_000_000 + index),
        "creationTimestamp": created,
    }
    if deleting:
        metadata |= {"deletionTimestamp": HEARTBEAT, "deletionGracePeriodSeconds": 30}
    metadata |= {
        "labels": dict(sorted(labels.items())),
        "annotations": dict(sorted(annotations.items())),
        "ownerReferences": [owner],
        "managedFields": _job_pod_managed_fields(labels, annotations, spec, status, created=created),
    }
    return {"metadata": metadata, "spec": spec, "status": status}


def _job_pod_managed_fields(
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    spec: JSONObject,
    status: JSONObject,
    *,
    created: str,
) -> list[JSONObject]:
    owner_key = f"k:{json.dumps({'uid': 'x'})}"
    controller = {
        "f:metadata": {
            "f:annotations": {f"f:{k}": {} for k in sorted(annotations)},
            "f:labels": {f"f:{k}": {} for k in sorted(labels)},
            "f:ownerReferences": {owner_key: {}},
        },
        "f:spec": fields_v1({k: v for k, v in spec.items() if k != "nodeName"}),
    }
    entries = [managed_fields_entry("vc-controller-manager", created, controller)]
    if status.get("conditions"):
        entries.append(
            managed_fields_entry("kubelet", status["startTime"], {"f:status": fields_v1(status)}, subresource="status")
        )
    return entries


DAEMONSET_KINDS: Final = ("kube-proxy", "ascend-device-plugin", "node-exporter")


def daemonset_pod(kind: str, node_name: str, node_ip: str, *, release: str = MASTER_RELEASE) -> JSONObject:
    """A running DaemonSet pod on `node_name`: `kube-proxy`, `ascend-device-plugin` (MindX device plugin) or
    `node-exporter` (kube-prometheus). Volcano lists these pods (bound by default-scheduler) as node tasks with
    Job "".
    """
    api = RELEASE_K8S_API[normalize_release(release)]
    created = "2026-05-20T03:12:09Z"
    if kind == "kube-proxy":
        namespace, prefix, sa = "kube-system", "kube-proxy-", "kube-proxy"
        labels = {"controller-revision-hash": "7d9f8c6b5d", "k8s-app": "kube-proxy", "pod-template-generation": "3"}
        container: JSONObject = {
            "name": "kube-proxy",
            "image": "registry.k8s.io/kube-proxy:v1.36.1",
            "command": [
                "/usr/local/bin/kube-proxy",
                "--config=/var/lib/kube-proxy/config.conf",
                "--hostname-override=$(NODE_NAME)",
            ],
            "env": [
                {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}}
            ],
            "resources": {},
            "volumeMounts": [
                {"name": "kube-proxy", "mountPath": "/var/lib/kube-proxy"},
                {"name": "xtables-lock", "mountPath": "/run/xtables.lock"},
                {"name": "lib-modules", "mountPath": "/lib/modules", "readOnly": True},
            ],
            "securityContext": {"privileged": True},
        }
        volumes: list[JSONObject] = [
            {"name": "kube-proxy", "configMap": {"name": "kube-proxy", "defaultMode": 420}},
            {"name": "xtables-lock", "hostPath": {"path": "/run/xtables.lock", "type": "FileOrCreate"}},
            {"name": "lib-modules", "hostPath": {"path": "/lib/modules", "type": ""}},
        ]
        priority_class, priority, qos = "system-node-critical", 2000001000, "BestEffort"
    elif kind == "ascend-device-plugin":
        namespace, prefix, sa = "kube-system", "ascend-device-plugin-daemonset-", "ascend-device-plugin-sa-910"
        labels = {
            "controller-revision-hash": "5c8b7f9d4",
            "name": "ascend-device-plugin-ds",
            "pod-template-generation": "1",
        }
        requests = {"cpu": "500m", "memory": "500Mi"}
        container = {
            "name": "device-plugin-01",
            "image": "swr.cn-south-1.myhuaweicloud.com/mindx/ascend-k8sdeviceplugin:v6.0.0",
            "command": [
                "/bin/bash",
                "-c",
                "device-plugin -useAscendDocker=true -volcanoType=true "
                "-presetVirtualDevice=true -logFile=/var/log/mindx-dl/devicePlugin/devicePlugin.log "
                "-logLevel=0",
            ],
            "env": [
                {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}}
            ],
            "resources": {"limits": dict(requests), "requests": dict(requests)},
            "volumeMounts": [
                {"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"},
                {"name": "pod-resource", "mountPath": "/var/lib/kubelet/pod-resources"},
                {"name": "hiai-driver", "mountPath": "/usr/local/Ascend/driver", "readOnly": True},
                {"name": "log-path", "mountPath": "/var/log/mindx-dl/devicePlugin"},
                {"name": "tmp", "mountPath": "/tmp"},
            ],
            "securityContext": {"privileged": True, "readOnlyRootFilesystem": True},
        }
        volumes = [
            {"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins", "type": ""}},
            {"name": "pod-resource", "hostPath": {"path": "/var/lib/kubelet/pod-resources", "type": ""}},
            {"name": "hiai-driver", "hostPath": {"path": "/usr/local/Ascend/driver", "type": ""}},
            {"name": "log-path", "hostPath": {"path": "/var/log/mindx-dl/devicePlugin", "type": "Directory"}},
            {"name": "tmp", "hostPath": {"path": "/tmp", "type": ""}},
        ]
        priority_class, priority, qos = "system-node-critical", 2000001000, "Guaranteed"
    elif kind == "node-exporter":
        namespace, prefix, sa = "monitoring", "node-exporter-", "node-exporter"
        labels = {
            "app.kubernetes.io/component": "exporter",
            "app.kubernetes.io/name": "node-exporter",
            "app.kubernetes.io/part-of": "kube-prometheus",
            "app.kubernetes.io/version": "1.8.2",
            "controller-revision-hash": "6b9d8f7c44",
            "pod-template-generation": "2",
        }
        container = {
            "name": "node-exporter",
            "image": "quay.io/prometheus/node-exporter:v1.8.2",
            "args": [
                "--web.listen-address=127.0.0.1:9100",
                "--path.sysfs=/host/sys",
                "--path.rootfs=/host/root",
                "--path.udev.data=/host/root/run/udev/data",
                "--no-collector.wifi",
                "--no-collector.hwmon",
                "--collector.filesystem.mount-points-exclude=^/(dev|proc|sys|run/k3s/containerd/.+|var/lib/docker/.+|var/lib/kubelet/pods/.+)($|/)",
            ],
            "resources": {"limits": {"cpu": "250m", "memory": "180Mi"}, "requests": {"cpu": "102m", "memory": "180Mi"}},
            "volumeMounts": [
                {"name": "sys", "mountPath": "/host/sys", "readOnly": True},
                {"name": "root", "mountPath": "/host/root", "readOnly": True},
            ],
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "capabilities": {"add": ["SYS_TIME"], "drop": ["ALL"]},
                "readOnlyRootFilesystem": True,
            },
        }
        volumes = [
            {"name": "sys", "hostPath": {"path": "/sys", "type": ""}},
            {"name": "root", "hostPath": {"path": "/", "type": ""}},
        ]
        priority_class, priority, qos = "system-cluster-critical", 2000000000, "Burstable"
    else:
        raise ValueError(f"kind: {kind!r} is not one of {', '.join(DAEMONSET_KINDS)}")
    name = prefix + name_suffix(f"{kind}/{node_name}")
    sa_volume = _sa_volume(f"{namespace}/{name}")
    volumes.append(sa_volume)
    container["volumeMounts"].append({"name": sa_volume["name"], "mountPath": _SA_VOLUME_MOUNT, "readOnly": True})
    container |= {
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }
    security = container.pop("securityContext")
    container["securityContext"] = security
    spec: JSONObject = {
        "volumes": volumes,
        "containers": [container],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "serviceAccountName": sa,
        "serviceAccount": sa,
        "nodeName": node_name,
        "hostNetwork": True,
    }
    if kind == "node-exporter":
        spec["hostPID"] = True
    spec |= {
        "securityContext": {},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
                    ]
                }
            }
        },
        "schedulerName": "default-scheduler",
        "tolerations": [{"operator": "Exists"}]
        + [
            {"key": f"node.kubernetes.io/{k}", "operator": "Exists", "effect": e}
            for k, e in (
                ("not-ready", "NoExecute"),
                ("unreachable", "NoExecute"),
                ("disk-pressure", "NoSchedule"),
                ("memory-pressure", "NoSchedule"),
                ("pid-pressure", "NoSchedule"),
                ("unschedulable", "NoSchedule"),
                ("network-unavailable", "NoSchedule"),
            )
        ],
        "priorityClassName": priority_class,
        "priority": priority,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    status = _pod_status(
        spec, phase="Running", node_ip=node_ip, pod_ip=node_ip, created=created, qos=qos, api=api, pod_name=name
    )
    owner = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "name": prefix.rstrip("-"),
        "uid": stable_uid("daemonset", namespace, kind),
        "controller": True,
        "blockOwnerDeletion": True,
    }
    metadata: JSONObject = {
        "name": name,
        "generateName": prefix,
        "namespace": namespace,
        "uid": stable_uid("pod", namespace, name),
        "resourceVersion": str(47_000_000 + stable_hash(name) % 1_000_000),
        "creationTimestamp": created,
        "labels": dict(sorted(labels.items())),
        "ownerReferences": [owner],
    }
    metadata["managedFields"] = [
        managed_fields_entry(
            "kube-controller-manager",
            created,
            {
                "f:metadata": {
                    "f:generateName": {},
                    "f:labels": {f"f:{k}": {} for k in sorted(labels)},
                    "f:ownerReferences": {f"k:{json.dumps({'uid': owner['uid']})}": {}},
                },
                "f:spec": fields_v1({k: v for k, v in spec.items() if k != "nodeName"}),
            },
        ),
        managed_fields_entry("kubelet", status["startTime"], {"f:status": fields_v1(status)}, subresource="status"),
    ]
    return {"metadata": metadata, "spec": spec, "status": status}


__all__ = [
    "DAEMONSET_KINDS",
    "daemonset_pod",
    "volcano_job_pod",
]
