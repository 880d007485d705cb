"""Read a job's placement from its Pods as the API server returns them (camelCase JSON / `kubectl get -o yaml`).

The device plugin writes each NPU pod's devices to an annotation once it has allocated them:
`{"pod_name": ..., "server_id": ..., "devices": [{"device_id": "0", "device_ip": "10.0.0.2"}, ...]}`.
Older plugins put the node IP in `server_id`; newer ones put it in `host_ip` and a pod UID in `server_id`.
`read_placement` converts the pods to a `Placement` once, collecting every problem (not only the first) so that a
controller can report them all and a command line can name the first one.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict, cast

import yaml

from planner._errors import InputError, PlacementError
from planner._model import Device, Placement, Server

JOB_NAME_KEY = "volcano.sh/job-name"
TASK_SPEC_KEY = "volcano.sh/task-spec"
TASK_INDEX_KEY = "volcano.sh/task-index"
JOB_VERSION_KEY = "volcano.sh/job-version"
SUPER_POD_ANNOTATION = "super_pod_id"
"""Pod annotation MindCluster uses for the super-pod of a node (rank table 1.2)."""

_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
_TRAILING_INDEX = re.compile(r"-(\d+)$")


class DeviceInfo(TypedDict):
    """One device of the device-plugin annotation."""

    device_id: str
    device_ip: str
    super_device_id: NotRequired[str]


class DeviceAnnotation(TypedDict):
    """The device-plugin pod annotation (`...-configuration`)."""

    pod_name: str
    server_id: str
    devices: list[DeviceInfo]
    host_ip: NotRequired[str]
    super_pod_id: NotRequired[str]


@dataclass(frozen=True, slots=True)
class PlacementProblem:
    """Why the pods do not (yet) make a complete placement: which pod, which field, and what to do."""

    kind: str
    """Short machine-readable name: missing-pods, unbound, missing-annotation, device-failed, ..."""
    pod: str | None
    """`namespace/name` of the pod, or None for a problem of the whole job."""
    field: str
    """Field path in the pod (or job) the problem is about."""
    detail: str
    """What is wrong and how to fix it."""

    def render(self) -> str:
        """One line: `pod ns/name: field: detail`."""
        subject = f"pod {self.pod}" if self.pod else "job"
        return f"{subject}: {self.field}: {self.detail}"


@dataclass(frozen=True, slots=True)
class PlacementReadout:
    """The outcome of reading a job's pods: a placement when complete, and every problem found."""

    placement: Placement | None
    problems: tuple[PlacementProblem, ...]
    ignored_pods: tuple[str, ...]
    """Pods left out on purpose (another job, job UID or job version, terminated or being deleted)."""

    @property
    def ready(self) -> bool:
        """True when the placement is complete and has no problem."""
        return self.placement is not None and not self.problems


def load_kube_objects(text: str) -> list[dict[str, Any]]:
    """Kubernetes objects from `kubectl get -o yaml|json` output: a `List`, multi-document YAML, or JSON.

    `List` objects (and `PodList`, `NodeList`, ...) are flattened into their items. Raises InputError naming the
    document or line when the text does not parse or holds something other than objects.
    """
    stripped = text.lstrip()
    documents: list[Any]
    if stripped.startswith(("{", "[")):
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}; fix the file or pass YAML"
            ) from exc
        documents = parsed if isinstance(parsed, list) else [parsed]
    else:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        try:
            documents = list(yaml.load_all(text, Loader=loader))
        except yaml.YAMLError as exc:
            raise InputError(f"malformed YAML {_yaml_error_line(exc)}; fix the file") from exc
    objects: list[dict[str, Any]] = []
    for number, document in enumerate(documents, start=1):
        if document is None:
            continue
        if not isinstance(document, dict):
            raise InputError(
                f"document {number}: expected a Kubernetes object (a mapping), got {type(document).__name__}"
            )
        kind = str(document.get("kind", ""))
        if "items" in document and (kind == "List" or kind.endswith("List")):
            items = document.get("items") or []
            if not isinstance(items, list):
                raise InputError(f"document {number}: items: expected a list of objects")
            for position, item in enumerate(items):
                if not isinstance(item, dict):
                    raise InputError(f"document {number}: items[{position}]: expected a Kubernetes object")
                objects.append(item)
        else:
            objects.append(document)
    return objects


def _yaml_error_line(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is not None:
        return f"at line {mark.line + 1} column {mark.column + 1}: {problem}"
    return f": {problem}"


def _meta(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = (obj.get("metadata") or {}).get(key) or {}
    return value if isinstance(value, Mapping) else {}


def _label_or_annotation(pod: Mapping[str, Any], key: str) -> str | None:
    for where in ("labels", "annotations"):
        value = _meta(pod, where).get(key)
        if value is not None and str(value) != "":
            return str(value)
    return None


def _pod_id(pod: Mapping[str, Any]) -> str:
    metadata = pod.get("metadata") or {}
    name = str(metadata.get("name") or "<unnamed>")
    namespace = metadata.get("namespace")
    return f"{namespace}/{name}" if namespace else name


def _requests_resource(pod: Mapping[str, Any], resource_name: str) -> bool:
    containers = list((pod.get("spec") or {}).get("containers") or [])
    for container in containers:
        resources = container.get("resources") or {}
        for section in ("requests", "limits"):
            amount = (resources.get(section) or {}).get(resource_name)
            if amount is not None and str(amount).strip() not in ("", "0"):
                return True
    return False


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _version_key(version: str) -> tuple[int, int | str]:
    return (0, int(version)) if version.isdigit() else (1, version)


@dataclass(frozen=True, slots=True)
class _PodFacts:
    pod_id: str
    name: str
    task_name: str
    task_index: int
    server: Server | None


def read_placement(
    pods: Iterable[Mapping[str, Any]],
    *,
    annotation_keys: Sequence[str],
    resource_name: str | None = None,
    expected_pods: int | None = None,
    job_name: str | None = None,
    job_uid: str | None = None,
    job_version: str | None = None,
    task_order: Sequence[str] = (),
) -> PlacementReadout:
    """Convert a job's Pods into a Placement, collecting every problem that keeps it from being complete.

    NPU pods are those requesting `resource_name` (when given) or carrying one of `annotation_keys`. Pods of
    another job name or UID, of an older `volcano.sh/job-version` (the newest present wins when `job_version` is
    None), terminated pods and pods being deleted are ignored and listed in `ignored_pods`. Servers come in
    pod-index order (tasks in `task_order`, else sorted by name; then task index); the master is task index 0 of
    the first task. `placement` is None whenever a problem is found.
    """
    if not annotation_keys:
        raise InputError("annotation_keys: give at least one device-plugin annotation key")
    problems: list[PlacementProblem] = []
    ignored: list[str] = []
    candidates: list[Mapping[str, Any]] = []
    for pod in pods:
        if not isinstance(pod, Mapping):
            raise InputError(f"pods: expected Pod objects (mappings), got {type(pod).__name__}")
        pod_id = _pod_id(pod)
        kind = pod.get("kind")
        if kind not in (None, "Pod"):
            raise InputError(f"{kind} {pod_id}: expected Pod objects; pass the job's pods (kubectl get pods -o yaml)")
        annotations = _meta(pod, "annotations")
        if resource_name is not None:
            is_npu = _requests_resource(pod, resource_name)
        else:
            is_npu = any(key in annotations for key in annotation_keys)
        if not is_npu:
            continue
        if job_name is not None and _label_or_annotation(pod, JOB_NAME_KEY) not in (job_name, None):
            ignored.append(pod_id)
            continue
        if job_uid is not None and not _owned_by(pod, job_uid):
            ignored.append(pod_id)
            continue
        metadata = pod.get("metadata") or {}
        phase = (pod.get("status") or {}).get("phase")
        if metadata.get("deletionTimestamp") or phase in _TERMINAL_PHASES:
            ignored.append(pod_id)
            continue
        candidates.append(pod)

    versions = {v for v in (_label_or_annotation(p, JOB_VERSION_KEY) for p in candidates) if v is not None}
    wanted_version = job_version
    if wanted_version is None and versions:
        wanted_version = max(versions, key=_version_key)
    current: list[Mapping[str, Any]] = []
    for pod in candidates:
        version = _label_or_annotation(pod, JOB_VERSION_KEY)
        if wanted_version is not None and version is not None and version != wanted_version:
            ignored.append(_pod_id(pod))
        else:
            current.append(pod)

    read = [_read_pod(pod, annotation_keys, problems) for pod in current]
    facts = [f for f in read if f is not None]

    if expected_pods is not None and len(current) < expected_pods:
        problems.append(
            PlacementProblem(
                "missing-pods",
                None,
                "pods",
                f"found {len(current)} of {expected_pods} NPU pods; wait until every pod is created and scheduled",
            )
        )
    _check_across_pods(facts, problems)

    tasks_present = sorted({f.task_name for f in facts})
    order_of_tasks = [t for t in task_order if t in tasks_present] + [t for t in tasks_present if t not in task_order]
    rank_of_task = {t: i for i, t in enumerate(order_of_tasks)}
    facts.sort(key=lambda f: (rank_of_task[f.task_name], f.task_index, f.name))

    master = -1
    if facts:
        first_task = order_of_tasks[0]
        master = next((i for i, f in enumerate(facts) if f.task_name == first_task and f.task_index == 0), -1)
        if master < 0 and not problems:  # a pod with a problem may well be the master
            problems.append(
                PlacementProblem(
                    "missing-master",
                    None,
                    f"task {first_task}",
                    "no pod with task index 0; the master (rank 0) must be task index 0 of the first NPU task",
                )
            )
    elif not problems:
        problems.append(
            PlacementProblem(
                "missing-pods",
                None,
                "pods",
                "no NPU pod found; pass the job's pods (kubectl get pods -l volcano.sh/job-name=<job> -o yaml)",
            )
        )

    placement: Placement | None = None
    if not problems and master >= 0:
        servers = tuple(f.server for f in facts if f.server is not None)
        first = current[0]
        placement = Placement(
            job_name=job_name or _label_or_annotation(first, JOB_NAME_KEY) or "",
            namespace=str((first.get("metadata") or {}).get("namespace") or "default"),
            servers=servers,
            master=master,
        )
    return PlacementReadout(placement, tuple(problems), tuple(ignored))


def placement_from_pods(
    pods: Iterable[Mapping[str, Any]],
    *,
    annotation_keys: Sequence[str],
    resource_name: str | None = None,
    expected_pods: int | None = None,
    job_name: str | None = None,
    job_uid: str | None = None,
    job_version: str | None = None,
    task_order: Sequence[str] = (),
) -> Placement:
    """Like `read_placement`, but return the Placement or raise PlacementError naming the first problem."""
    readout = read_placement(
        pods,
        annotation_keys=annotation_keys,
        resource_name=resource_name,
        expected_pods=expected_pods,
        job_name=job_name,
        job_uid=job_uid,
        job_version=job_version,
        task_order=task_order,
    )
    if readout.placement is None or readout.problems:
        raise PlacementError(render_placement_problems(readout.problems))
    return readout.placement


def render_placement_problems(problems: Sequence[PlacementProblem]) -> str:
    """One line: the first problem, and how many more there are."""
    if not problems:
        return "no placement"
    more = len(problems) - 1
    return problems[0].render() + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")


def _owned_by(pod: Mapping[str, Any], uid: str) -> bool:
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    if not owners:
        return True  # pods as fixtures or from old dumps carry no owner: do not drop them
    return any(str(owner.get("uid")) == uid for owner in owners)


def _read_pod(
    pod: Mapping[str, Any], annotation_keys: Sequence[str], problems: list[PlacementProblem]
) -> _PodFacts | None:
    pod_id = _pod_id(pod)
    metadata = pod.get("metadata") or {}
    name = str(metadata.get("name") or "")
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    found = len(problems)

    task_name = _label_or_annotation(pod, TASK_SPEC_KEY)
    if task_name is None:
        problems.append(
            PlacementProblem(
                "missing-task",
                pod_id,
                f"metadata.labels[{TASK_SPEC_KEY}]",
                "missing; the pod must belong to a Volcano Job task (Volcano sets this label)",
            )
        )
    raw_index = _label_or_annotation(pod, TASK_INDEX_KEY)
    if raw_index is None:
        match = _TRAILING_INDEX.search(name)  # Volcano names pods <job>-<task>-<index>
        raw_index = match.group(1) if match else None
    task_index = -1
    if raw_index is None or not raw_index.isdigit():
        problems.append(
            PlacementProblem(
                "missing-task-index",
                pod_id,
                f"metadata.labels[{TASK_INDEX_KEY}]",
                f"missing or not a number ({raw_index!r}); the pod must be created by a Volcano Job",
            )
        )
    else:
        task_index = int(raw_index)

    node_name = spec.get("nodeName")
    if not node_name:
        problems.append(
            PlacementProblem("unbound", pod_id, "spec.nodeName", "not bound to a node yet; wait for the scheduler")
        )
        return None

    key = next((k for k in annotation_keys if k in _meta(pod, "annotations")), None)
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
    annotation = _parse_annotation(pod_id, key, str(_meta(pod, "annotations")[key]), problems)
    if annotation is None:
        return None

    field = f"metadata.annotations[{key}]"
    devices: list[Device] = []
    seen_ids: set[int] = set()
    for position, info in enumerate(annotation["devices"]):
        where = f"{field}.devices[{position}]"
        raw_id = str(info.get("device_id", ""))
        raw_ip = str(info.get("device_ip", ""))
        if not raw_id.isdigit():
            problems.append(
                PlacementProblem(
                    "bad-device-id", pod_id, f"{where}.device_id", f"{raw_id!r} is not a number; fix the device plugin"
                )
            )
            continue
        device_id = int(raw_id)
        if device_id in seen_ids:
            problems.append(
                PlacementProblem(
                    "duplicate-device",
                    pod_id,
                    f"{where}.device_id",
                    f"device {device_id} is listed twice; restart the NPU device plugin on node {node_name}",
                )
            )
            continue
        seen_ids.add(device_id)
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
            continue
        if not _is_ip(raw_ip):
            problems.append(
                PlacementProblem(
                    "bad-device-ip",
                    pod_id,
                    f"{where}.device_ip",
                    f"{raw_ip!r} is not an IP address; check the NPU network configuration on node {node_name}",
                )
            )
            continue
        super_device_id = info.get("super_device_id")
        devices.append(Device(device_id, raw_ip, None if super_device_id is None else str(super_device_id)))
    if not annotation["devices"]:
        problems.append(PlacementProblem("no-devices", pod_id, f"{field}.devices", "empty; the pod must request NPUs"))
    if len(problems) > found:
        return _PodFacts(pod_id, name, task_name or "", task_index, None)

    host_ip = annotation.get("host_ip") or status.get("hostIP")
    server_id = str(annotation.get("server_id") or host_ip or node_name)
    super_pod = annotation.get("super_pod_id") or _meta(pod, "annotations").get(SUPER_POD_ANNOTATION)
    server = Server(
        pod_name=name,
        node_name=str(node_name),
        server_id=server_id,
        host_ip=None if host_ip is None else str(host_ip),
        pod_ip=None if status.get("podIP") is None else str(status["podIP"]),
        task_name=task_name or "",
        task_index=task_index,
        devices=tuple(sorted(devices, key=lambda d: d.device_id)),
        super_pod_id=None if super_pod is None else str(super_pod),
    )
    return _PodFacts(pod_id, name, task_name or "", task_index, server)


def _parse_annotation(pod_id: str, key: str, raw: str, problems: list[PlacementProblem]) -> DeviceAnnotation | None:
    field = f"metadata.annotations[{key}]"
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        problems.append(
            PlacementProblem(
                "malformed-annotation",
                pod_id,
                field,
                f"not JSON ({exc.msg} at column {exc.colno}); the device plugin writes "
                '{"pod_name", "server_id", "devices": [...]}: check its version',
            )
        )
        return None
    if not isinstance(data, dict) or not isinstance(data.get("devices"), list):
        problems.append(
            PlacementProblem(
                "malformed-annotation",
                pod_id,
                f"{field}.devices",
                'missing or not a list; expected {"devices": [{"device_id", "device_ip"}, ...]}',
            )
        )
        return None
    if not all(isinstance(d, dict) for d in data["devices"]):
        problems.append(
            PlacementProblem(
                "malformed-annotation",
                pod_id,
                f"{field}.devices",
                'every entry must be an object {"device_id", "device_ip"}',
            )
        )
        return None
    kept = {k: v for k, v in data.items() if k in ("pod_name", "server_id", "devices", "host_ip", "super_pod_id")}
    return cast(DeviceAnnotation, kept)


def _check_across_pods(facts: Sequence[_PodFacts], problems: list[PlacementProblem]) -> None:
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
    by_node: dict[str, list[_PodFacts]] = defaultdict(list)
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
    by_index: dict[tuple[str, int], list[_PodFacts]] = defaultdict(list)
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


__all__ = [
    "DeviceAnnotation",
    "DeviceInfo",
    "PlacementProblem",
    "PlacementReadout",
    "load_kube_objects",
    "placement_from_pods",
    "read_placement",
    "render_placement_problems",
]
