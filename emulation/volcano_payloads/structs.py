"""Volcano's scheduler structs api.Resource, api.TaskInfo and api.NodeInfo, as Go's encoding/json writes them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from emulation.volcano_payloads.gojson import GO_ZERO_TIME, go_number, quantity_milli_value, quantity_value
from webhook.common.names import (
    GROUP_NAME_ANNOTATION,
    NUMA_POLICY_ANNOTATION,
    PREEMPTABLE_KEY,
    REVOCABLE_ZONE_KEY,
    TASK_PRIORITY_ANNOTATION,
    TASK_SPEC_KEY,
)
from webhook.extender.volcano_releases import (
    GO_FIELDS,
    MASTER_RELEASE,
    TASK_STATUS,
    JSONObject,
    normalize_release,
    release_at_least,
)

# ------------------------------------------------------------------------------------------------- api.Resource


@dataclass(slots=True)
class ResourceValue:
    """api.Resource arithmetic as Volcano does it (float64 sums; scalar map created lazily)."""

    milli_cpu: float = 0.0
    memory: float = 0.0
    scalars: dict[str, float] | None = None
    max_task_num: int = 0

    def add_scalar(self, name: str, quantity: float) -> None:
        if self.scalars is None:
            self.scalars = {}
        self.scalars[name] = self.scalars.get(name, 0.0) + quantity

    def add(self, other: ResourceValue) -> ResourceValue:
        self.milli_cpu += other.milli_cpu
        self.memory += other.memory
        for name, quantity in (other.scalars or {}).items():
            self.add_scalar(name, quantity)
        return self

    def sub(self, other: ResourceValue) -> ResourceValue:
        self.milli_cpu -= other.milli_cpu
        self.memory -= other.memory
        if self.scalars is not None:  # Go's sub() skips scalars when the receiver has none
            for name, quantity in (other.scalars or {}).items():
                self.scalars[name] = self.scalars.get(name, 0.0) - quantity
        return self

    def set_max(self, other: ResourceValue) -> None:
        self.milli_cpu = max(self.milli_cpu, other.milli_cpu)
        self.memory = max(self.memory, other.memory)
        for name, quantity in (other.scalars or {}).items():
            if self.scalars is None:  # Go copies all of other's scalars and returns early here
                self.scalars = dict(other.scalars or {})
                return
            if name not in self.scalars or quantity > self.scalars[name]:
                self.scalars[name] = quantity

    def copy(self) -> ResourceValue:
        return ResourceValue(
            self.milli_cpu, self.memory, None if self.scalars is None else dict(self.scalars), self.max_task_num
        )

    def is_empty(self, release: str) -> bool:
        if not (self.milli_cpu < 0.1 and self.memory < 0.1):
            return False
        ignored = {"pods"} if release_at_least(release, "1.9") else set()
        return all(q < 0.1 for n, q in (self.scalars or {}).items() if n not in ignored)

    def to_json(self) -> JSONObject:
        return {
            "MilliCPU": go_number(self.milli_cpu),
            "Memory": go_number(self.memory),
            "ScalarResources": None
            if self.scalars is None
            else {k: go_number(v) for k, v in sorted(self.scalars.items())},
            "MaxTaskNum": self.max_task_num,
        }


def resource(
    *, milli_cpu: float = 0.0, memory: float = 0.0, scalars: Mapping[str, float] | None = None, max_task_num: int = 0
) -> JSONObject:
    """An api.Resource from plain numbers: CPU in millicores, memory in bytes, scalars (NPUs, hugepages,
    ephemeral-storage) in milli-units, so 8 cards are 8000. `scalars=None` gives `"ScalarResources": null`."""
    return ResourceValue(milli_cpu, memory, None if scalars is None else dict(scalars), max_task_num).to_json()


def _is_scalar_resource(name: str) -> bool:
    # k8s v1helper.IsScalarResourceName: extended (has a "/" outside kubernetes.io), hugepages-, kubernetes.io/
    # prefixed native, attachable-volumes-.
    return (
        "/" in name or name.startswith("hugepages-") or name.startswith("attachable-volumes-")
    ) and not name.startswith("requests.")


def _new_resource(resource_list: Mapping[str, str], release: str) -> ResourceValue:
    """api.NewResource: cpu -> millicores, memory -> bytes, pods -> MaxTaskNum (and a `pods` scalar from v1.9),
    ephemeral-storage and other scalar resources -> milli-units; count/ quotas skipped."""
    out = ResourceValue()
    for name, text in resource_list.items():
        if name == "cpu":
            out.milli_cpu += float(quantity_milli_value(text))
        elif name == "memory":
            out.memory += float(quantity_value(text))
        elif name == "pods":
            out.max_task_num += quantity_value(text)
            if release_at_least(release, "1.9"):
                out.add_scalar("pods", float(quantity_value(text)))
        elif name == "ephemeral-storage" or (not name.startswith("count/") and _is_scalar_resource(name)):
            out.add_scalar(name, float(quantity_milli_value(text)))
    return out


def _pod_request(pod: Mapping[str, Any], release: str) -> ResourceValue:
    """api.GetPodResourceRequest at `release` (pkg/scheduler/api/pod_info.go)."""
    spec = pod.get("spec") or {}
    result = ResourceValue()
    for container in spec.get("containers") or []:
        result.add(_new_resource((container.get("resources") or {}).get("requests") or {}, release))
    overhead = spec.get("overhead")
    if overhead and not release_at_least(release, "1.15"):
        result.add(_new_resource(overhead, release))
    inits = spec.get("initContainers") or []
    if release_at_least(release, "1.10"):  # restartable (sidecar) init containers add up
        sidecars, init_max = ResourceValue(), ResourceValue()
        for container in inits:
            request = _new_resource((container.get("resources") or {}).get("requests") or {}, release)
            if container.get("restartPolicy") == "Always":
                result.add(request)
                sidecars.add(request)
                request = sidecars.copy()
            else:
                request = request.add(sidecars)
            init_max.set_max(request)
        result.set_max(init_max)
    else:
        for container in inits:
            result.set_max(_new_resource((container.get("resources") or {}).get("requests") or {}, release))
    if release_at_least(release, "1.9"):
        result.add_scalar("pods", 1.0)
    if release_at_least(release, "1.15"):
        if result.scalars is None:
            result.scalars = {}
        if overhead:
            result.add(_new_resource(overhead, release))
    return result


# ------------------------------------------------------------------------------------------------- api.TaskInfo


def _transaction_context(node_name: str, status: int, release: str) -> JSONObject:
    values = {"NodeName": node_name, "EvictionOccurred": False, "JobAllocatedHyperNode": "", "Status": status}
    return {k: values[k] for k in GO_FIELDS[release]["TransactionContext"]}


def task_status_of(pod: Mapping[str, Any]) -> int:
    """getTaskStatus: the TaskStatus Volcano derives from a pod's phase, deletionTimestamp and nodeName."""
    phase = (pod.get("status") or {}).get("phase")
    deleting = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
    if phase == "Running":
        return TASK_STATUS["Releasing" if deleting else "Running"]
    if phase == "Pending":
        if deleting:
            return TASK_STATUS["Releasing"]
        return TASK_STATUS["Bound" if (pod.get("spec") or {}).get("nodeName") else "Pending"]
    if phase in ("Succeeded", "Failed"):
        return TASK_STATUS[str(phase)]
    return TASK_STATUS["Unknown"]


def task_info(
    pod: Mapping[str, Any],
    *,
    release: str = MASTER_RELEASE,
    status: int | str | None = None,
    node_name: str | None = None,
    last_transaction: tuple[str, int] | None = None,
    job_allocated_hyper_node: str = "",
    job: str | None = None,
) -> JSONObject:
    """An api.TaskInfo as `release` marshals it, derived from a v1.Pod the way NewTaskInfo and Clone do.

    `status` (a TaskStatus name or bit), `node_name` and `job` override what the pod implies, e.g.
    `status="Allocated"` with `node_name` for a task allocated earlier in the session (Statement.Allocate also sets
    the shared Pod's spec.nodeName, so build that pod with `node_name`). Job is `<namespace>/<group-name annotation>`
    ("" without the annotation), TaskRole the volcano.sh/task-spec annotation or label, Priority the pod's
    spec.priority (1 when absent), Preemptable true unless the pod says otherwise. EvictionOccurred and
    CustomBindErrHandlerSucceeded are false in every snapshot: TaskInfo.Clone does not copy them.
    """
    rel = normalize_release(release)
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    annotations = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    request = _pod_request(pod, rel)
    group = annotations.get(GROUP_NAME_ANNOTATION, "")
    bit = TASK_STATUS[status] if isinstance(status, str) else status
    priority = spec.get("priority")
    task_priority = annotations.get(TASK_PRIORITY_ANNOTATION)
    if task_priority is not None and re.fullmatch(r"[+-]?\d+", task_priority):
        priority = int(task_priority)
    preemptable = True
    for source in (annotations, labels):
        if PREEMPTABLE_KEY in source:
            preemptable = source[PREEMPTABLE_KEY].lower() in ("1", "t", "true")
            break
    revocable = ""
    if annotations.get(REVOCABLE_ZONE_KEY) == "*" or (
        REVOCABLE_ZONE_KEY not in annotations
        and annotations.get(PREEMPTABLE_KEY, "").lower()
        in (
            "1",
            "t",
            "true",
        )
    ):
        revocable = "*"
    node = spec.get("nodeName", "") if node_name is None else node_name
    values: JSONObject = {
        "UID": meta.get("uid", ""),
        "Job": job if job is not None else f"{meta.get('namespace', '')}/{group}" if group else "",
        "Name": meta.get("name", ""),
        "Namespace": meta.get("namespace", ""),
        "TaskRole": annotations.get(TASK_SPEC_KEY) or labels.get(TASK_SPEC_KEY) or "",
        "Resreq": request.to_json(),
        "InitResreq": request.to_json(),
        "DRAResreq": None,
        "ResourceClaimKeys": None,
        "ResourceClaimDRAResreq": None,
        "NodeName": node,
        "EvictionOccurred": False,
        "JobAllocatedHyperNode": job_allocated_hyper_node,
        "Status": task_status_of(pod) if bit is None else bit,
        "LastTransaction": None
        if last_transaction is None
        else _transaction_context(last_transaction[0], last_transaction[1], rel),
        "Priority": 1 if priority is None else priority,
        "VolumeReady": False,
        "Preemptable": preemptable,
        "BestEffort": request.is_empty(rel),
        "HasRestartableInitContainer": any(
            c.get("restartPolicy") == "Always" for c in spec.get("initContainers") or []
        ),
        "SchGated": bool(spec.get("schedulingGates")),
        "RevocableZone": revocable,
        "NumaInfo": {"Policy": annotations.get(NUMA_POLICY_ANNOTATION, ""), "ResMap": {}},
        "PodVolumes": None,
        "Pod": pod,
        "PodAnnotations": dict(annotations) if annotations else None,
        "CustomBindErrHandlerSucceeded": False,
    }
    return {k: values[k] for k in GO_FIELDS[rel]["TaskInfo"]}


def task_key(task: Mapping[str, Any]) -> str:
    """NodeInfo.Tasks key: `<namespace>/<name>` (PodKey); JobInfo.Tasks is keyed by pod UID instead."""
    return f"{task['Namespace']}/{task['Name']}"


# ------------------------------------------------------------------------------------------------- api.NodeInfo


def resource_of(value: Mapping[str, Any]) -> ResourceValue:
    return ResourceValue(
        float(value["MilliCPU"]),
        float(value["Memory"]),
        None if value["ScalarResources"] is None else {k: float(v) for k, v in value["ScalarResources"].items()},
        int(value["MaxTaskNum"]),
    )


_OTHERS: Final[Mapping[str, JSONObject | None]] = {
    "1.7": None,
    "1.8": {"GpuShare": None, "vgpu4pd": None},
    **{r: {"GpuShare": None, "hamivgpu": None} for r in ("1.9", "1.10", "1.11", "1.12", "1.13")},
    **{r: {} for r in ("1.14", "1.15", "1.16")},
}
"""NodeInfo.Others on a node without GPU-share/vGPU resources: nil (v1.7), two nil device entries (v1.8 - v1.13:
setNodeOthersResource stores typed nil pointers), empty (v1.14+: entries only when those features are enabled)."""


def node_usage(allocatable: ResourceValue, tasks: Iterable[Mapping[str, Any]]) -> JSONObject:
    """Releasing, Pipelined, Idle, Used and Tasks as NodeInfo.AddTask leaves them after adding `tasks`."""
    idle, used = allocatable.copy(), ResourceValue()
    releasing, pipelined = ResourceValue(), ResourceValue()
    task_map: dict[str, Mapping[str, Any]] = {}
    for task in tasks:
        request = resource_of(task["Resreq"])
        bit = task["Status"]
        if bit == TASK_STATUS["Pipelined"]:
            pipelined.add(request)
        else:
            idle.sub(request)
            used.add(request)
            if bit == TASK_STATUS["Releasing"]:
                releasing.add(request)
        task_map[task_key(task)] = task
    return {
        "Releasing": releasing.to_json(),
        "Pipelined": pipelined.to_json(),
        "Idle": idle.to_json(),
        "Used": used.to_json(),
        "Tasks": dict(sorted(task_map.items())),
    }


def node_info(
    node: Mapping[str, Any],
    tasks: Iterable[Mapping[str, Any]] = (),
    *,
    release: str = MASTER_RELEASE,
    image_nodes: int | Mapping[str, int] = 1,
    bind_generation: int = 0,
    idle: JSONObject | None = None,
    used: JSONObject | None = None,
    releasing: JSONObject | None = None,
    pipelined: JSONObject | None = None,
) -> JSONObject:
    """An api.NodeInfo as `release` marshals it in a session, for a v1.Node and the TaskInfos on it.

    Idle, Used, Releasing and Pipelined follow NodeInfo.AddTask: a Releasing task counts in Idle, Used and
    Releasing; a Pipelined task only in Pipelined; any other status in Idle and Used. Succeeded and Failed pods
    are not node tasks in Volcano's cache: leave them out. `image_nodes` is how many nodes hold each image
    (ImageStateSummary.NumNodes), one number for all or per image name. `idle`, `used`, `releasing` and
    `pipelined` (built with `resource`) replace the derived values, e.g. for free cards without modelling pods.
    """
    rel = normalize_release(release)
    status = node.get("status") or {}
    meta = node.get("metadata") or {}
    allocatable = _new_resource(status.get("allocatable") or {}, rel)
    capacity = _new_resource(status.get("capacity") or {}, rel)
    ready = all(c.get("status") == "True" for c in status.get("conditions") or [] if c.get("type") == "Ready")
    images: dict[str, JSONObject] = {}
    for image in status.get("images") or []:
        for name in image.get("names") or []:
            count = image_nodes if isinstance(image_nodes, int) else image_nodes.get(name, 1)
            summary = {"Size": image.get("sizeBytes", 0), "NumNodes": count, "Nodes": None}
            images.setdefault(name, {k: summary[k] for k in GO_FIELDS[rel]["ImageStateSummary"]})
    usage = {"MetricsTime": GO_ZERO_TIME, "CPUUsageAvg": {}, "MEMUsageAvg": {}}
    others = _OTHERS[rel]
    revocable = (meta.get("labels") or {}).get(REVOCABLE_ZONE_KEY, "")
    values: JSONObject = {
        "Name": meta.get("name", ""),
        "Node": node,
        "State": {"Phase": 1, "Reason": ""} if ready else {"Phase": 2, "Reason": "NotReady"},
        **node_usage(allocatable, tasks),
        **{
            key: value
            for key, value in (("Idle", idle), ("Used", used), ("Releasing", releasing), ("Pipelined", pipelined))
            if value is not None
        },
        "Allocatable": allocatable.to_json(),
        "Capability": capacity.to_json(),
        "Capacity": capacity.to_json(),
        "ResourceUsage": {k: usage[k] for k in GO_FIELDS[rel]["NodeUsage"]},
        "NumaInfo": None,
        "NumaChgFlag": 0,
        "UnassignedNumaPods": None,
        "NumaSchedulerInfo": None,
        "RevocableZone": revocable,
        "Others": None if others is None else dict(others),
        "GPUDevices": {},
        "OversubscriptionNode": False,
        "OfflineJobEvicting": False,
        "OversubscriptionResource": ResourceValue().to_json(),
        "ImageStates": dict(sorted(images.items())),
        "Generation": 0,
        "BindGeneration": bind_generation,
    }
    return {k: values[k] for k in GO_FIELDS[rel]["NodeInfo"]}


__all__ = [
    "node_info",
    "resource",
    "task_info",
    "task_key",
    "task_status_of",
]
