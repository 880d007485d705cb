"""One pod's server and devices from its device-plugin annotation, and the checks across pods (duplicate devices,
addresses, nodes) that keep a table HCCL would refuse from being built."""

from __future__ import annotations

import ipaddress
import json
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from planner._model import Device, Server
from planner.io._kube_objects import (
    label_or_annotation,
    labelled,
    mapping_of,
    meta,
    pod_ref,
    resource_amounts,
)
from planner.io._numbers import parse_count, quantity_is_zero, shown
from planner.io._placement_types import DeviceAnnotation, PlacementProblem

TASK_SPEC_KEY = "volcano.sh/task-spec"


TASK_INDEX_KEY = "volcano.sh/task-index"


SUPER_POD_ANNOTATION = "super_pod_id"
"""Pod annotation MindCluster uses for the super-pod of a node (rank table 1.2)."""


_TRAILING_INDEX = re.compile(r"-([0-9]+)$")  # ASCII: \d also matches "٨"


@dataclass(frozen=True, slots=True)
class PodFacts:
    pod_id: str
    name: str
    task_name: str
    task_index: int
    server: Server | None
    device_ip_fields: Mapping[str, str] = field(default_factory=dict)
    """Normalised device IP -> the field it was read from (to name both places of a duplicate)."""
    server_id_field: str = ""


def _quantity_problems(pod: Mapping[str, Any], resource_name: str | None) -> list[PlacementProblem]:
    if resource_name is None:
        return []
    problems: list[PlacementProblem] = []
    for position, container, section, amount in resource_amounts(pod, resource_name):
        try:
            quantity_is_zero(amount)
        except ValueError as exc:
            problems.append(
                PlacementProblem(
                    "bad-quantity",
                    pod_ref(pod),
                    f"spec.containers[{position}].resources.{section}[{resource_name}]",
                    f"{exc}; container {container.get('name')!s} must request a whole number of NPUs, such as 8",
                )
            )
    return problems


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _task_index(pod: Mapping[str, Any], name: str, problems: list[PlacementProblem]) -> int:
    """The pod's task index (label, annotation, else the `-<index>` suffix of its name), or -1 after a problem."""
    found = labelled(pod, TASK_INDEX_KEY)
    if found is None:
        match = _TRAILING_INDEX.search(name)  # Volcano names pods <job>-<task>-<index>
        found = (match.group(1), "metadata.name") if match else None
    if found is None:
        problems.append(
            PlacementProblem(
                "missing-task-index",
                pod_ref(pod),
                f"metadata.labels[{TASK_INDEX_KEY}]",
                "missing (and the pod name has no -<index> suffix); the pod must be created by a Volcano Job",
            )
        )
        return -1
    raw, where = found
    try:
        return parse_count(raw)
    except ValueError as exc:
        problems.append(
            PlacementProblem(
                "bad-task-index",
                pod_ref(pod),
                where,
                f"{exc}; the task index is a number Volcano sets: recreate the pod from its Volcano Job",
            )
        )
        return -1


def read_pod(
    pod: Mapping[str, Any],
    annotation_keys: Sequence[str],
    resource_name: str | None,
    problems: list[PlacementProblem],
) -> PodFacts | None:
    pod_id = pod_ref(pod)
    metadata = mapping_of(pod.get("metadata"))
    name = str(metadata.get("name") or "")
    spec = mapping_of(pod.get("spec"))
    status = mapping_of(pod.get("status"))
    found = len(problems)
    problems += _quantity_problems(pod, resource_name)

    task_name = label_or_annotation(pod, TASK_SPEC_KEY)
    if task_name is None:
        problems.append(
            PlacementProblem(
                "missing-task",
                pod_id,
                f"metadata.labels[{TASK_SPEC_KEY}]",
                "missing; the pod must belong to a Volcano Job task (Volcano sets this label)",
            )
        )
    task_index = _task_index(pod, name, problems)

    node_name = spec.get("nodeName")
    if not node_name:
        problems.append(
            PlacementProblem("unbound", pod_id, "spec.nodeName", "not bound to a node yet; wait for the scheduler")
        )
        return None
    node_name = str(node_name)

    annotations = meta(pod, "annotations")
    key = next((k for k in annotation_keys if k in annotations), None)
    if key is None:
        problems.append(
            PlacementProblem(
                "missing-annotation",
                pod_id,
                f"metadata.annotations[{annotation_keys[0]}]",
                "missing; the device plugin has not written device info yet: wait, or check the NPU device plugin "
                f"on node {node_name}",
            )
        )
        return None
    annotation = _parse_annotation(pod_id, key, str(annotations[key]), problems)
    if annotation is None:
        return None

    field_path = f"metadata.annotations[{key}]"
    devices: list[Device] = []
    seen_ids: set[int] = set()
    ip_fields: dict[str, str] = {}
    for position, info in enumerate(annotation["devices"]):
        where = f"{field_path}.devices[{position}]"
        device = _read_device(
            info,
            pod_id=pod_id,
            node_name=node_name,
            where=where,
            seen_ids=seen_ids,
            ip_fields=ip_fields,
            problems=problems,
        )
        if device is not None:
            devices.append(device)
    if not annotation["devices"]:
        problems.append(
            PlacementProblem("no-devices", pod_id, f"{field_path}.devices", "empty; the pod must request NPUs")
        )
    if len(problems) > found:
        return PodFacts(pod_id, name, task_name or "", task_index, None)

    host_ip = annotation.get("host_ip") or status.get("hostIP")
    if annotation.get("server_id"):
        server_id, server_id_field = str(annotation["server_id"]), f"{field_path}.server_id"
    elif host_ip:
        server_id = str(host_ip)
        server_id_field = f"{field_path}.host_ip" if annotation.get("host_ip") else "status.hostIP"
    else:
        server_id, server_id_field = node_name, "spec.nodeName"
    super_pod = annotation.get("super_pod_id") or annotations.get(SUPER_POD_ANNOTATION)
    pod_ip = status.get("podIP")
    server = Server(
        pod_name=name,
        node_name=node_name,
        server_id=server_id,
        host_ip=None if host_ip is None else str(host_ip),
        pod_ip=None if pod_ip is None else str(pod_ip),
        task_name=task_name or "",
        task_index=task_index,
        devices=tuple(sorted(devices, key=lambda d: d.device_id)),
        super_pod_id=None if super_pod is None else str(super_pod),
    )
    return PodFacts(pod_id, name, task_name or "", task_index, server, ip_fields, server_id_field)


def _read_device(
    info: Mapping[str, Any],
    *,
    pod_id: str,
    node_name: str,
    where: str,
    seen_ids: set[int],
    ip_fields: dict[str, str],
    problems: list[PlacementProblem],
) -> Device | None:
    """One device of the annotation, checked: a bounded ASCII device id seen once, an IP (not "-1") seen once."""
    try:
        device_id = parse_count(info.get("device_id", ""))
    except ValueError as exc:
        problems.append(
            PlacementProblem("bad-device-id", pod_id, f"{where}.device_id", f"{exc}; fix the device plugin")
        )
        return None
    if device_id in seen_ids:
        problems.append(
            PlacementProblem(
                "duplicate-device",
                pod_id,
                f"{where}.device_id",
                f"device {device_id} is listed twice; restart the NPU device plugin on node {node_name}",
            )
        )
        return None
    seen_ids.add(device_id)
    raw_ip = str(info.get("device_ip", ""))
    if raw_ip == "-1":
        problems.append(
            PlacementProblem(
                "device-failed",
                pod_id,
                f"{where}.device_ip",
                f'"-1": the device plugin could not read the IP of device {device_id} on node {node_name}; '
                "wait for it to retry, or check the NPU network (hccn_tool)",
            )
        )
        return None
    if not _is_ip(raw_ip):
        problems.append(
            PlacementProblem(
                "bad-device-ip",
                pod_id,
                f"{where}.device_ip",
                f"{shown(raw_ip)} is not an IP address; check the NPU network configuration on node {node_name}",
            )
        )
        return None
    normalised = str(ipaddress.ip_address(raw_ip))
    if normalised in ip_fields:
        problems.append(
            PlacementProblem(
                "duplicate-device-ip",
                pod_id,
                f"{where}.device_ip",
                f"{raw_ip} is also the IP of {ip_fields[normalised]}; HCCL needs a distinct IP per NPU: "
                f"check /etc/hccn.conf (hccn_tool -i <device> -ip -g) on node {node_name}",
            )
        )
        return None
    ip_fields[normalised] = f"{where}.device_ip"
    super_device_id = info.get("super_device_id")
    return Device(device_id, raw_ip, None if super_device_id is None else str(super_device_id))


def _parse_annotation(pod_id: str, key: str, raw: str, problems: list[PlacementProblem]) -> DeviceAnnotation | None:
    field_path = f"metadata.annotations[{key}]"
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        problems.append(
            PlacementProblem(
                "malformed-annotation",
                pod_id,
                field_path,
                f"not JSON ({exc.msg} at column {exc.colno}); the device plugin writes "
                '{"pod_name", "server_id", "devices": [...]}: check its version',
            )
        )
        return None
    except (ValueError, RecursionError):  # a number of over 4,300 digits, or nesting past the stack
        problems.append(
            PlacementProblem(
                "malformed-annotation",
                pod_id,
                field_path,
                'unreadable JSON (nested too deeply or a number too long); the device plugin writes {"pod_name", '
                '"server_id", "devices": [...]}: check its version',
            )
        )
        return None
    if not isinstance(data, dict) or not isinstance(data.get("devices"), list):
        problems.append(
            PlacementProblem(
                "malformed-annotation",
                pod_id,
                f"{field_path}.devices",
                'missing or not a list; expected {"devices": [{"device_id", "device_ip"}, ...]}',
            )
        )
        return None
    if not all(isinstance(d, dict) for d in data["devices"]):
        problems.append(
            PlacementProblem(
                "malformed-annotation",
                pod_id,
                f"{field_path}.devices",
                'every entry must be an object {"device_id", "device_ip"}',
            )
        )
        return None
    for name in ("server_id", "host_ip", "super_pod_id"):
        if data.get(name) is not None and not isinstance(data[name], str):
            problems.append(
                PlacementProblem(
                    "malformed-annotation",
                    pod_id,
                    f"{field_path}.{name}",
                    f"{shown(data[name])} is not a string; check the device plugin's version",
                )
            )
            return None
    kept = {k: v for k, v in data.items() if k in ("pod_name", "server_id", "devices", "host_ip", "super_pod_id")}
    return cast(DeviceAnnotation, kept)


def check_across_pods(facts: Sequence[PodFacts], problems: list[PlacementProblem]) -> None:
    complete = [f for f in facts if f.server is not None]
    counts = Counter(len(f.server.devices) for f in complete if f.server is not None)
    if len(counts) > 1:
        usual = counts.most_common(1)[0][0]
        for f in complete:
            assert f.server is not None
            if len(f.server.devices) != usual:
                problems.append(
                    PlacementProblem(
                        "device-count-mismatch",
                        f.pod_id,
                        "devices",
                        f"{len(f.server.devices)} devices while the other pods have {usual}; every pod of a "
                        "rank table must request the same number of NPUs",
                    )
                )
    by_node: dict[str, list[PodFacts]] = defaultdict(list)
    for f in complete:
        assert f.server is not None
        by_node[f.server.node_name].append(f)
    for node, sharing in sorted(by_node.items()):
        if len(sharing) > 1:
            names = ", ".join(s.pod_id for s in sharing)
            problems.append(
                PlacementProblem(
                    "shared-node",
                    sharing[1].pod_id,
                    "spec.nodeName",
                    f"node {node} runs {len(sharing)} pods of the job ({names}); route planning needs one pod per "
                    "node: add podAntiAffinity on kubernetes.io/hostname and request every NPU of the node",
                )
            )
    _check_unique_addresses(complete, problems)
    by_index: dict[tuple[str, int], list[PodFacts]] = defaultdict(list)
    for f in facts:
        if f.task_index >= 0:
            by_index[(f.task_name, f.task_index)].append(f)
    for (task, index), same in sorted(by_index.items()):
        if len(same) > 1:
            problems.append(
                PlacementProblem(
                    "duplicate-index",
                    same[1].pod_id,
                    f"metadata.labels[{TASK_INDEX_KEY}]",
                    f"task {task} index {index} is also used by {same[0].pod_id}; "
                    "pass the pods of one job version only",
                )
            )


def _check_unique_addresses(complete: Sequence[PodFacts], problems: list[PlacementProblem]) -> None:
    """HCCL refuses a table in which two servers share a server_id or two NPUs a device IP: name both pods."""
    first_ip: dict[str, tuple[PodFacts, str]] = {}
    first_server: dict[str, PodFacts] = {}
    for f in complete:
        assert f.server is not None
        for ip, where in f.device_ip_fields.items():
            first, first_where = first_ip.setdefault(ip, (f, where))
            # pods sharing a node are a shared-node problem already; their devices are the same hardware
            if first is not f and first.server is not None and first.server.node_name != f.server.node_name:
                nodes = f"{first.server.node_name} and {f.server.node_name}"
                problems.append(
                    PlacementProblem(
                        "duplicate-device-ip",
                        f.pod_id,
                        where,
                        f"{ip} is also the IP of a device of pod {first.pod_id} ({first_where}); HCCL needs a "
                        f"distinct IP per NPU: check /etc/hccn.conf on nodes {nodes}",
                    )
                )
        earlier = first_server.setdefault(f.server.server_id, f)
        if earlier is not f and earlier.server is not None and earlier.server.node_name != f.server.node_name:
            problems.append(
                PlacementProblem(
                    "duplicate-server-id",
                    f.pod_id,
                    f.server_id_field,
                    f"server_id {f.server.server_id} is also the server_id of pod {earlier.pod_id} "
                    f"({earlier.server_id_field}); each server of a rank table needs its own: check the device "
                    f"plugin on nodes {earlier.server.node_name} and {f.server.node_name}",
                )
            )


__all__ = ["PodFacts", "SUPER_POD_ANNOTATION", "TASK_INDEX_KEY", "TASK_SPEC_KEY", "check_across_pods", "read_pod"]
