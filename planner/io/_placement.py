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
import logging
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict, cast

import yaml

from planner._errors import InputError, PlacementError
from planner._model import Device, IgnoredPod, Placement, Server
from planner.io._numbers import parse_count, quantity_is_zero, shown

JOB_NAME_KEY = "volcano.sh/job-name"
TASK_SPEC_KEY = "volcano.sh/task-spec"
TASK_INDEX_KEY = "volcano.sh/task-index"
JOB_VERSION_KEY = "volcano.sh/job-version"
SUPER_POD_ANNOTATION = "super_pod_id"
"""Pod annotation MindCluster uses for the super-pod of a node (rank table 1.2)."""

_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
_TRAILING_INDEX = re.compile(r"-([0-9]+)$")  # ASCII: \d also matches "٨"

log = logging.getLogger("ringroute.planner")


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
    ignored: tuple[IgnoredPod, ...] = ()
    """The same pods with the reason each was left out."""

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
        except (ValueError, RecursionError) as exc:  # a number of over 4,300 digits; nesting past the stack
            raise InputError(f"unreadable JSON: {_unreadable(exc)}; fix the file") from None
        documents = parsed if isinstance(parsed, list) else [parsed]
    else:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        try:
            documents = list(yaml.load_all(text, Loader=loader))
        except yaml.YAMLError as exc:
            raise InputError(f"malformed YAML {_yaml_error_line(exc)}; fix the file") from exc
        except (ValueError, RecursionError) as exc:
            raise InputError(f"unreadable YAML: {_unreadable(exc)}; fix the file") from None
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


def _unreadable(exc: ValueError | RecursionError) -> str:
    """What a parser's ValueError or RecursionError means to the person who wrote the file."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return "a number too long to convert" if "digits" in str(exc) else str(exc).splitlines()[0][:200]


def _yaml_error_line(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is not None:
        return f"at line {mark.line + 1} column {mark.column + 1}: {problem}"
    return f": {problem}"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _meta(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    return _mapping(_mapping(obj.get("metadata")).get(key))


def _labelled(pod: Mapping[str, Any], key: str) -> tuple[str, str] | None:
    """A label's value (else the annotation's) and the field path it came from, or None when neither is set."""
    for where in ("labels", "annotations"):
        value = _meta(pod, where).get(key)
        if value is not None and str(value) != "":
            return str(value), f"metadata.{where}[{key}]"
    return None


def _label_or_annotation(pod: Mapping[str, Any], key: str) -> str | None:
    found = _labelled(pod, key)
    return None if found is None else found[0]


def _pod_id(pod: Mapping[str, Any]) -> str:
    metadata = _mapping(pod.get("metadata"))
    name = str(metadata.get("name") or "<unnamed>")
    namespace = metadata.get("namespace")
    return f"{namespace}/{name}" if namespace else name


def _containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    containers = _mapping(pod.get("spec")).get("containers")
    return [c for c in containers if isinstance(c, Mapping)] if isinstance(containers, list) else []


def _requests_resource(pod: Mapping[str, Any], resource_name: str) -> bool:
    """Whether a container asks for the resource: a non-zero amount, or one that is not a quantity at all
    (`_quantity_problems` reports it; leaving the pod out would hide it)."""
    for container in _containers(pod):
        resources = _mapping(container.get("resources"))
        for section in ("requests", "limits"):
            amount = _mapping(resources.get(section)).get(resource_name)
            if amount is None:
                continue
            try:
                if not quantity_is_zero(amount):
                    return True
            except ValueError:
                return True
    return False


def _quantity_problems(pod: Mapping[str, Any], resource_name: str | None) -> list[PlacementProblem]:
    if resource_name is None:
        return []
    problems: list[PlacementProblem] = []
    for position, container in enumerate(_containers(pod)):
        resources = _mapping(container.get("resources"))
        for section in ("requests", "limits"):
            amount = _mapping(resources.get(section)).get(resource_name)
            if amount is None:
                continue
            try:
                quantity_is_zero(amount)
            except ValueError as exc:
                problems.append(
                    PlacementProblem(
                        "bad-quantity",
                        _pod_id(pod),
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


def _version_key(version: str) -> tuple[int, int, str]:
    """Numeric versions in numeric order (after any other text, which sorts by name)."""
    try:
        return (1, parse_count(version), "")
    except ValueError:
        return (0, 0, version)


def _owner(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod's owning Job: the controller owner reference (Volcano sets one), else the first owner."""
    owners = _mapping(pod.get("metadata")).get("ownerReferences")
    references = [o for o in owners if isinstance(o, Mapping)] if isinstance(owners, list) else []
    return next((o for o in references if o.get("controller") is True), references[0] if references else None)


def _job_of(pod: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(job name, job UID) of a pod: the volcano.sh/job-name label (else the owner's name), the owner's UID."""
    owner = _owner(pod)
    name = _label_or_annotation(pod, JOB_NAME_KEY)
    if name is None and owner is not None and owner.get("name"):
        name = str(owner["name"])
    uid = str(owner["uid"]) if owner is not None and owner.get("uid") else None
    return name, uid


def _owned_by(pod: Mapping[str, Any], uid: str) -> bool:
    owners = _mapping(pod.get("metadata")).get("ownerReferences")
    if not isinstance(owners, list) or not owners:
        return True  # pods as fixtures or from old dumps carry no owner: do not drop them
    return any(isinstance(owner, Mapping) and str(owner.get("uid")) == uid for owner in owners)


JobKey = tuple[str | None, str | None]
"""(job name, job UID) identifying the Job a pod belongs to; either may be unknown."""


def _group_by_job(pods: Sequence[Mapping[str, Any]]) -> dict[JobKey, list[Mapping[str, Any]]]:
    """Pods by the Job they belong to: owner UID, or the job name for pods without an owner.

    A pod without an owner joins the one owned Job of its name, and a pod with neither name nor owner joins the
    only Job there is (test fixtures and hand-written dumps carry neither); otherwise they stand apart.
    """
    keys = [_job_of(pod) for pod in pods]
    uids_of_name: dict[str | None, set[str]] = defaultdict(set)
    for name, uid in keys:
        if uid is not None:
            uids_of_name[name].add(uid)
    resolved: list[JobKey] = []
    for name, uid in keys:
        only = uids_of_name[name] if name is not None else set()
        resolved.append((name, next(iter(only)) if uid is None and len(only) == 1 else uid))
    known = {key for key in resolved if key != (None, None)}
    groups: dict[JobKey, list[Mapping[str, Any]]] = defaultdict(list)
    for pod, key in zip(pods, resolved, strict=True):
        groups[next(iter(known)) if key == (None, None) and len(known) == 1 else key].append(pod)
    return dict(groups)


def _describe_job(key: JobKey, count: int) -> str:
    name, uid = key
    pods = f"{count} pod{'s' if count != 1 else ''}"
    if name is None and uid is None:
        return f"pods of no job ({pods}: no {JOB_NAME_KEY} label, no owner)"
    return f"{name or '<unnamed>'} ({pods}{f', UID {uid}' if uid else ''})"


def _multiple_jobs(groups: Mapping[JobKey, Sequence[Mapping[str, Any]]], job_name: str | None) -> PlacementProblem:
    ordered = sorted(groups, key=lambda key: (key[0] or "", key[1] or ""))
    named = [_describe_job(key, len(groups[key])) for key in ordered]
    listed = " and ".join(named) if len(named) == 2 else ", ".join(named[:-1]) + f" and {named[-1]}"
    if job_name is not None or len({key[0] for key in ordered}) == 1:
        fix = (
            "a Job deleted and created again under one name leaves pods of the old UID behind: wait until they "
            "are gone, or pass only the new Job's pods"
        )
    else:
        fix = (
            "pass one job's pods (kubectl get pods -l volcano.sh/job-name=<job> -o yaml) or choose the job by "
            "name (ringroute plan --job-name)"
        )
    return PlacementProblem(
        "multiple-jobs", None, "pods", f"pods of {len(named)} jobs: {listed}; a rank table serves one job: {fix}"
    )


@dataclass(frozen=True, slots=True)
class _PodFacts:
    pod_id: str
    name: str
    task_name: str
    task_index: int
    server: Server | None
    device_ip_fields: Mapping[str, str] = field(default_factory=dict)
    """Normalised device IP -> the field it was read from (to name both places of a duplicate)."""
    server_id_field: str = ""


def _leave_out(ignored: list[IgnoredPod], pod: Mapping[str, Any], reason: str, detail: str) -> None:
    left = IgnoredPod(_pod_id(pod), reason, detail)
    log.debug("event=pod_left_out pod=%s reason=%s detail=%s", left.pod, reason, detail)
    ignored.append(left)


def _job_pods(
    pods: Iterable[Mapping[str, Any]],
    *,
    annotation_keys: Sequence[str],
    resource_name: str | None,
    job_name: str | None,
    job_uid: str | None,
    ignored: list[IgnoredPod],
) -> list[Mapping[str, Any]]:
    """The NPU pods that may belong to the job; pods of another job name or UID, or no longer running, go to
    `ignored`."""
    candidates: list[Mapping[str, Any]] = []
    for pod in pods:
        if not isinstance(pod, Mapping):
            raise InputError(f"pods: expected Pod objects (mappings), got {type(pod).__name__}")
        kind = pod.get("kind")
        if kind not in (None, "Pod"):
            raise InputError(
                f"{shown(kind)} {_pod_id(pod)}: expected Pod objects; pass the job's pods (kubectl get pods -o yaml)"
            )
        if resource_name is not None:
            is_npu = _requests_resource(pod, resource_name)
        else:
            is_npu = any(key in _meta(pod, "annotations") for key in annotation_keys)
        if not is_npu:
            continue
        name, uid = _job_of(pod)
        phase = _mapping(pod.get("status")).get("phase")
        if job_name is not None and name not in (job_name, None):
            _leave_out(ignored, pod, "other-job", f"a pod of job {name}, not {job_name}")
        elif job_uid is not None and not _owned_by(pod, job_uid):
            _leave_out(ignored, pod, "other-job-uid", f"owned by job UID {uid}, not {job_uid} (an earlier Job)")
        elif _mapping(pod.get("metadata")).get("deletionTimestamp"):
            _leave_out(ignored, pod, "being-deleted", "being deleted")
        elif phase in _TERMINAL_PHASES:
            _leave_out(ignored, pod, "terminated", f"phase {phase}")
        else:
            candidates.append(pod)
    return candidates


def _current_version(
    candidates: Sequence[Mapping[str, Any]], job_version: str | None, ignored: list[IgnoredPod]
) -> list[Mapping[str, Any]]:
    """The pods of `job_version` (the newest present when None); pods of another version go to `ignored`."""
    versions = {v for v in (_label_or_annotation(p, JOB_VERSION_KEY) for p in candidates) if v is not None}
    wanted = job_version
    if wanted is None and versions:
        wanted = max(versions, key=_version_key)
    current: list[Mapping[str, Any]] = []
    for pod in candidates:
        version = _label_or_annotation(pod, JOB_VERSION_KEY)
        if wanted is not None and version is not None and version != wanted:
            _leave_out(ignored, pod, "other-job-version", f"job version {version}; the job is at {wanted}")
        else:
            current.append(pod)
    return current


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

    NPU pods are those requesting `resource_name` (when given) or carrying one of `annotation_keys`. A rank
    table serves one Job: pods of more than one (by owner UID, or job name for pods without an owner) are a
    `multiple-jobs` problem naming them, unless `job_name` (and `job_uid`) pick one. Pods of another job name or
    UID, of another `volcano.sh/job-version` (the newest present wins when `job_version` is None), terminated
    pods and pods being deleted are left out and listed, with the reason, in `ignored` and in the placement's
    `ignored_pods` (and logged at DEBUG). Servers come in pod-index order (tasks in `task_order`, else sorted by
    name; then task index); the master is task index 0 of the first task. Every integer is read as ASCII digits
    within bounds, and duplicate device IPs or server ids are problems naming both pods, so no table HCCL would
    refuse is built. `placement` is None whenever a problem is found.
    """
    if not annotation_keys:
        raise InputError("annotation_keys: give at least one device-plugin annotation key")
    problems: list[PlacementProblem] = []
    ignored: list[IgnoredPod] = []
    candidates = _job_pods(
        pods,
        annotation_keys=annotation_keys,
        resource_name=resource_name,
        job_name=job_name,
        job_uid=job_uid,
        ignored=ignored,
    )
    groups = _group_by_job(candidates)
    if len(groups) > 1:
        problem = _multiple_jobs(groups, job_name)
        return PlacementReadout(None, (problem,), tuple(i.pod for i in ignored), tuple(ignored))

    current = _current_version(candidates, job_version, ignored)
    read = [_read_pod(pod, annotation_keys, resource_name, problems) for pod in current]
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
            job_name=job_name or _job_of(first)[0] or "",
            namespace=str(_mapping(first.get("metadata")).get("namespace") or "default"),
            servers=servers,
            master=master,
            ignored_pods=tuple(ignored),
        )
    return PlacementReadout(placement, tuple(problems), tuple(i.pod for i in ignored), tuple(ignored))


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


def _task_index(pod: Mapping[str, Any], name: str, problems: list[PlacementProblem]) -> int:
    """The pod's task index (label, annotation, else the `-<index>` suffix of its name), or -1 after a problem."""
    found = _labelled(pod, TASK_INDEX_KEY)
    if found is None:
        match = _TRAILING_INDEX.search(name)  # Volcano names pods <job>-<task>-<index>
        found = (match.group(1), "metadata.name") if match else None
    if found is None:
        problems.append(
            PlacementProblem(
                "missing-task-index",
                _pod_id(pod),
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
                _pod_id(pod),
                where,
                f"{exc}; the task index is a number Volcano sets: recreate the pod from its Volcano Job",
            )
        )
        return -1


def _read_pod(
    pod: Mapping[str, Any],
    annotation_keys: Sequence[str],
    resource_name: str | None,
    problems: list[PlacementProblem],
) -> _PodFacts | None:
    pod_id = _pod_id(pod)
    metadata = _mapping(pod.get("metadata"))
    name = str(metadata.get("name") or "")
    spec = _mapping(pod.get("spec"))
    status = _mapping(pod.get("status"))
    found = len(problems)
    problems += _quantity_problems(pod, resource_name)

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
    task_index = _task_index(pod, name, problems)

    node_name = spec.get("nodeName")
    if not node_name:
        problems.append(
            PlacementProblem("unbound", pod_id, "spec.nodeName", "not bound to a node yet; wait for the scheduler")
        )
        return None
    node_name = str(node_name)

    annotations = _meta(pod, "annotations")
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
        return _PodFacts(pod_id, name, task_name or "", task_index, None)

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
    return _PodFacts(pod_id, name, task_name or "", task_index, server, ip_fields, server_id_field)


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
    _check_unique_addresses(complete, problems)
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


def _check_unique_addresses(complete: Sequence[_PodFacts], problems: list[PlacementProblem]) -> None:
    """HCCL refuses a table in which two servers share a server_id or two NPUs a device IP: name both pods."""
    first_ip: dict[str, tuple[_PodFacts, str]] = {}
    first_server: dict[str, _PodFacts] = {}
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
