"""Admission mutation: the JSON Patch that gives a labelled Volcano Job what its NPU pods need.

Pure: a function of the job as received and the settings. Ops are `add` (which also replaces an existing
member, used only to wrap `command` and to fill an empty `schedulerName`), computed against the incoming
object as plain dicts and serialised once at the end. Running the mutator on its own output yields no ops.

On UPDATE (`mutate_update`) only a job ringroute admitted is patched, and only with what the stored object
already has: Volcano's own webhook lets an update change nothing in `spec` but `minAvailable` and `replicas`,
and a server-side apply that omits the fields injected on CREATE removes them.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from webhook.admission_types import JsonPatchOperation
from webhook.policy.jobview import (
    ContainerView,
    JobView,
    TaskView,
    as_list,
    as_mapping,
    as_str,
    escape_pointer,
    normal_path,
    read_job,
    unwrap_launcher,
)
from webhook.policy.route_plan import HOSTNAME_KEY, has_hostname_anti_affinity
from webhook.rank_configmap import LAUNCHER_KEY
from webhook.settings import INJECTED_ANNOTATION, RING_LABEL, AcceleratorProfile, HostPathVolume, Settings

PatchOp = JsonPatchOperation
"""One RFC 6902 operation, a plain dict `{"op": "add", "path": ..., "value": ...}`."""

CONFIG_VOLUME = "ringroute-config"
"""Name of the injected rank-table ConfigMap volume."""
VOLCANO_SCHEDULER = "volcano"
JOB_NAME_LABEL = "volcano.sh/job-name"

# What the `ringroute.io/injected` annotation lists.
INJECTED_CONFIG_VOLUME = "configmap-volume"
INJECTED_ENV = "env"
INJECTED_DRIVER_VOLUMES = "driver-volumes"
INJECTED_NODE_SELECTOR = "node-selector"
INJECTED_ANTI_AFFINITY = "anti-affinity"
INJECTED_TASK_LABEL = "task-label"
INJECTED_SCHEDULER = "scheduler-name"
INJECTED_LAUNCHER = "launcher"

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_ANNOTATION_POINTER = "/metadata/annotations/" + escape_pointer(INJECTED_ANNOTATION)
_TASK_LABEL_KEY = escape_pointer(RING_LABEL)
_FIELD_ENV = (("POD_NAME", "metadata.name"), ("POD_IP", "status.podIP"), ("HOST_IP", "status.hostIP"))
_MISSING: Any = object()


def add(path: str, value: Any) -> PatchOp:
    """An RFC 6902 `add` operation."""
    return {"op": "add", "path": path, "value": value}


def pointer(*tokens: str | int) -> str:
    """A JSON Pointer from raw tokens, escaping `~` and `/` (RFC 6901)."""
    return "".join("/" + escape_pointer(str(t)) for t in tokens)


def encode_patch(ops: Sequence[PatchOp]) -> str:
    """The base64 JSON Patch of an AdmissionResponse."""
    return base64.b64encode(orjson.dumps(ops)).decode("ascii")


def field_env(name: str, field_path: str) -> dict[str, Any]:
    """An env var from the downward API."""
    return {"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": field_path}}}


@dataclass(frozen=True, slots=True)
class _ProfileNeeds:
    """What a profile asks of every NPU container, with its paths normalised once per process."""

    mount_path: str
    mount_dir: str
    """`mount_path` normalised, to compare with the containers' normalised mount paths."""
    rank_table_file: str
    host_paths: tuple[tuple[HostPathVolume, str], ...]
    """Driver volumes with their normalised paths."""
    node_selector: tuple[tuple[str, str], ...]
    label_value: str


@functools.lru_cache(maxsize=64)
def _needs(profile: AcceleratorProfile) -> _ProfileNeeds:
    return _ProfileNeeds(
        mount_path=profile.mount_path,
        mount_dir=normal_path(profile.mount_path),
        rank_table_file=profile.rank_table_file,
        host_paths=tuple((host, normal_path(host.path)) for host in profile.host_path_volumes),
        node_selector=profile.node_selector,
        label_value=profile.label_value,
    )


@dataclass
class _Patch:
    """Ops plus what they inject, collected while walking the job."""

    ops: list[PatchOp] = field(default_factory=list)
    injected: set[str] = field(default_factory=set)

    def add(self, path: str, value: Any, what: str) -> None:
        """One `add`, recorded under `what`."""
        self.ops.append({"op": "add", "path": path, "value": value})
        self.injected.add(what)

    def extend_list(self, path: str, present: Any, items: list[Any], what: str | None) -> None:
        """Append items to the list at `path` (now `present`): `-` adds, or one add of the list when absent."""
        if not items:
            return
        if isinstance(present, list):
            end = path + "/-"
            self.ops += [{"op": "add", "path": end, "value": item} for item in items]
        else:
            self.ops.append({"op": "add", "path": path, "value": items})
        if what:
            self.injected.add(what)

    def extend_map(self, path: str, present: Any, entries: dict[str, Any], what: str) -> None:
        """Add entries to the object at `path` (now `present`): one add each, or one add of the object."""
        if not entries:
            return
        if isinstance(present, Mapping):
            self.ops += [{"op": "add", "path": f"{path}/{escape_pointer(k)}", "value": v} for k, v in entries.items()]
        else:
            self.ops.append({"op": "add", "path": path, "value": entries})
        self.injected.add(what)


def _free_name(wanted: str, taken: set[str]) -> str:
    name, n = wanted, 2
    while name in taken:
        name, n = f"{wanted}-{n}", n + 1
    return name


def _read_mounts(container: ContainerView, config_volumes: set[str]) -> tuple[set[str], str | None]:
    """The container's normalised mount paths, and where it mounts the rank-table ConfigMap as a directory."""
    mount_dirs: set[str] = set()
    rank_table_dir: str | None = None
    for mount in container.mounts:
        path = mount.get("mountPath")
        if not isinstance(path, str) or not path:
            continue
        mount_dirs.add(normal_path(path))
        if (
            rank_table_dir is None
            and mount.get("name") in config_volumes
            and not mount.get("subPath")
            and not mount.get("subPathExpr")
        ):
            rank_table_dir = path
    return mount_dirs, rank_table_dir


def _launcher_command(command: Sequence[Any], directory: str) -> list[Any] | None:
    """The wrapped command, or None when it is already wrapped (or there is nothing to wrap)."""
    if not command or len(unwrap_launcher(command)) != len(command):
        return None
    return ["/bin/sh", f"{directory.rstrip('/')}/{LAUNCHER_KEY}", "--", *command]


def _mutate_task(view: JobView, task: TaskView, needs: _ProfileNeeds, configmap: str, patch: _Patch) -> None:
    spec_ptr = f"{task.pointer}/template/spec"
    # Names mounted by any container count as taken even without a volume: reusing one would change a mount.
    taken = set(task.volumes_by_name)
    for other in (*task.containers, *task.init_containers):
        taken.update(n for m in other.mounts if isinstance(n := m.get("name"), str))

    # One pass over the volumes: the user's volumes of the ConfigMap and of each host path are reused.
    config_volumes: set[str] = set()
    config_volume: str | None = None
    by_host_path: dict[str, str] = {}
    for name, volume in task.volumes_by_name.items():
        source = volume.get("configMap")
        if source is not None and as_mapping(source).get("name") == configmap:
            config_volumes.add(name)
            config_volume = config_volume or name
        host_path = as_mapping(volume.get("hostPath")).get("path")
        if isinstance(host_path, str):
            by_host_path.setdefault(host_path, name)
    new_config_volume: dict[str, Any] | None = None
    if config_volume is None:
        config_volume = _free_name(CONFIG_VOLUME, taken)
        taken.add(config_volume)
        new_config_volume = {"name": config_volume, "configMap": {"name": configmap}}

    # A driver volume is added (and named) the first time a container needs it.
    new_driver_volumes: list[dict[str, Any]] = []
    needs_config_volume = False
    containers = [(c, False) for c in task.npu_containers] + [(c, True) for c in task.init_containers if c.is_npu]
    for container, init in containers:
        mount_dirs, directory = _read_mounts(container, config_volumes)
        new_mounts: list[dict[str, Any]] = []
        if directory is None:
            directory = needs.mount_path
            if needs.mount_dir not in mount_dirs:
                new_mounts.append({"name": config_volume, "mountPath": directory})
                needs_config_volume = True
                patch.injected.add(INJECTED_CONFIG_VOLUME)
        for host, host_dir in needs.host_paths:
            if host_dir in mount_dirs:
                continue
            volume_name = by_host_path.get(host.path)
            if volume_name is None:
                volume_name = by_host_path[host.path] = _free_name(host.name, taken)
                taken.add(volume_name)
                new_driver_volumes.append({"name": volume_name, "hostPath": {"path": host.path}})
            new_mounts.append({"name": volume_name, "mountPath": host.path})
            patch.injected.add(INJECTED_DRIVER_VOLUMES)
        patch.extend_list(
            f"{container.pointer}/volumeMounts", container.container.get("volumeMounts"), new_mounts, None
        )

        env_names = {e.get("name") for e in container.env}
        new_env: list[dict[str, Any]] = []
        if "RANK_TABLE_FILE" not in env_names:
            new_env.append({"name": "RANK_TABLE_FILE", "value": f"{directory.rstrip('/')}/{needs.rank_table_file}"})
        new_env += [field_env(name, path) for name, path in _FIELD_ENV if name not in env_names]
        patch.extend_list(f"{container.pointer}/env", container.container.get("env"), new_env, INJECTED_ENV)

        if not init and view.route_planned and view.launcher_enabled:
            command = container.container.get("command")
            if isinstance(command, list):
                wrapped = _launcher_command(command, directory)
                if wrapped is not None:
                    patch.add(f"{container.pointer}/command", wrapped, INJECTED_LAUNCHER)

    new_volumes = [new_config_volume] if needs_config_volume and new_config_volume else []
    new_volumes += new_driver_volumes
    patch.extend_list(f"{spec_ptr}/volumes", task.pod_spec.get("volumes"), new_volumes, None)

    selector = task.pod_spec.get("nodeSelector")
    present = as_mapping(selector)
    patch.extend_map(
        f"{spec_ptr}/nodeSelector",
        selector,
        {k: v for k, v in needs.node_selector if k not in present},
        INJECTED_NODE_SELECTOR,
    )

    if view.name and not has_hostname_anti_affinity(task):
        _add_anti_affinity(task, spec_ptr, view.name, patch)

    template_meta = task.template.get("metadata")
    labels = as_mapping(template_meta).get("labels")
    if RING_LABEL not in as_mapping(labels):
        if isinstance(template_meta, Mapping):
            patch.extend_map(
                f"{task.pointer}/template/metadata/labels", labels, {RING_LABEL: needs.label_value}, INJECTED_TASK_LABEL
            )
        else:
            patch.add(
                f"{task.pointer}/template/metadata", {"labels": {RING_LABEL: needs.label_value}}, INJECTED_TASK_LABEL
            )


def _add_anti_affinity(task: TaskView, spec_ptr: str, job_name: str, patch: _Patch) -> None:
    term = {
        "labelSelector": {"matchExpressions": [{"key": JOB_NAME_LABEL, "operator": "In", "values": [job_name]}]},
        "topologyKey": HOSTNAME_KEY,
    }
    affinity = task.pod_spec.get("affinity")
    anti = as_mapping(affinity).get("podAntiAffinity")
    if not isinstance(affinity, Mapping):
        patch.add(f"{spec_ptr}/affinity", {"podAntiAffinity": {_REQUIRED: [term]}}, INJECTED_ANTI_AFFINITY)
    elif not isinstance(anti, Mapping):
        patch.add(f"{spec_ptr}/affinity/podAntiAffinity", {_REQUIRED: [term]}, INJECTED_ANTI_AFFINITY)
    else:
        path = f"{spec_ptr}/affinity/podAntiAffinity/{_REQUIRED}"
        patch.extend_list(path, anti.get(_REQUIRED), [term], INJECTED_ANTI_AFFINITY)


def _template_key(task: TaskView) -> bytes | None:
    """The task's pod template as JSON (exact: `1` and `true` differ), or None when it is not plain JSON."""
    try:
        return orjson.dumps(task.template)
    except TypeError:
        return None


def _copy_twin_ops(patch: _Patch, twin: tuple[str, int, int], pointer: str) -> bool:
    """Append copies of the ops `patch.ops[start:end]` of the task at `root`, re-rooted at `pointer`."""
    root, start, end = twin
    ops = patch.ops[start:end]
    try:  # fresh values: a caller may change one task's ops without touching the other's
        values = orjson.loads(orjson.dumps([op["value"] for op in ops]))
    except TypeError:
        return False
    cut = len(root)
    for op, value in zip(ops, values, strict=True):
        patch.ops.append({"op": "add", "path": pointer + op["path"][cut:], "value": value})
    return True


def _collect(view: JobView) -> _Patch:
    """Every op the job lacks, without the annotation that records them."""
    patch = _Patch()
    profile = view.profile
    configmap = view.configmap_name
    if profile is None or configmap is None or not isinstance(view.job.get("spec"), Mapping):
        return patch
    needs = _needs(profile)
    # Jobs often repeat one pod template in many tasks (a task per node group or per role): a task whose template
    # serialises to the same JSON as one already walked gets that task's ops, re-rooted and copied.
    walked: dict[bytes, tuple[str, int, int]] = {}
    for task in view.npu_tasks:
        key = _template_key(task)
        twin = walked.get(key) if key is not None else None
        if twin is not None and _copy_twin_ops(patch, twin, task.pointer):
            continue
        start = len(patch.ops)
        _mutate_task(view, task, needs, configmap, patch)
        if key is not None:
            walked[key] = (task.pointer, start, len(patch.ops))
    if view.spec.get("schedulerName") in (None, ""):
        patch.add("/spec/schedulerName", VOLCANO_SCHEDULER, INJECTED_SCHEDULER)
    return patch


def _recorded(annotations: Mapping[str, Any]) -> set[str]:
    """The items of a `ringroute.io/injected` annotation value."""
    return {item for item in (as_str(annotations.get(INJECTED_ANNOTATION)) or "").split(",") if item}


def _with_record(view: JobView, ops: list[PatchOp], record: set[str]) -> list[PatchOp]:
    """`ops` plus the add that sets the `ringroute.io/injected` annotation to `record`."""
    value = ",".join(sorted(record))
    metadata = view.job.get("metadata")
    if not isinstance(metadata, Mapping):
        ops.append(add("/metadata", {"annotations": {INJECTED_ANNOTATION: value}}))
    elif isinstance(metadata.get("annotations"), Mapping):
        ops.append(add(_ANNOTATION_POINTER, value))
    else:
        ops.append(add("/metadata/annotations", {INJECTED_ANNOTATION: value}))
    return ops


def mutate(job: Mapping[str, Any], settings: Settings) -> list[PatchOp]:
    """The `add` ops that complete a labelled NPU job; [] for jobs of an unknown profile or with nothing missing."""
    return mutate_view(read_job(job, settings))


def mutate_view(view: JobView) -> list[PatchOp]:
    """`mutate` for a job already read into a view (the patch of a CREATE)."""
    patch = _collect(view)
    if not patch.ops:
        return []
    return _with_record(view, patch.ops, _recorded(view.annotations) | patch.injected)


def mutate_update(view: JobView, old: Mapping[str, Any]) -> list[PatchOp]:
    """The patch of an UPDATE from stored object `old` to the job in `view`.

    Nothing unless `old` carries `ringroute.io/injected` (ringroute admitted it). Then what the update dropped
    is added back exactly as `old` has it (a server-side apply that omits the injected fields removes them),
    and nothing `old` does not have is ever added: Volcano rejects updates that change other spec fields.
    A job being deleted is left alone (its updates only remove finalizers).
    """
    old_record = _recorded(as_mapping(as_mapping(old.get("metadata")).get("annotations")))
    if not old_record or view.deleting:
        return []
    ops = [kept for op in _collect(view).ops if (kept := _restorable(op, old)) is not None]
    record = old_record | _recorded(view.annotations)
    if not ops and as_str(view.annotations.get(INJECTED_ANNOTATION)) == ",".join(sorted(record)):
        return []
    return _with_record(view, ops, record)


def _resolve(document: Any, path: str) -> Any:
    """The value at a JSON Pointer, or _MISSING."""
    node = document
    for raw in path.split("/")[1:]:
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping):
            node = node.get(token, _MISSING)
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return _MISSING
        if node is _MISSING:
            return _MISSING
    return node


def _restorable(op: PatchOp, old: Mapping[str, Any]) -> PatchOp | None:
    """The part of `op` that puts back what `old` has at the same place, or None when it adds something new."""
    path, value = op["path"], op["value"]
    if path.endswith("/-"):
        stored = _resolve(old, path[:-2])
        return op if isinstance(stored, list) and value in stored else None
    stored = _resolve(old, path)
    if stored == value:
        return op
    if isinstance(value, list) and isinstance(stored, list):
        items = [item for item in value if item in stored]
        return add(path, items) if items else None
    if isinstance(value, Mapping) and isinstance(stored, Mapping):
        entries = {k: v for k, v in value.items() if k in stored and stored[k] == v}
        return add(path, entries) if entries else None
    return None


def injected_items(ops: Sequence[PatchOp]) -> list[str]:
    """What a patch injects, as recorded in its `ringroute.io/injected` annotation."""
    for op in reversed(ops):
        value = op["value"]
        if op["path"] == _ANNOTATION_POINTER and isinstance(value, str):
            return value.split(",")
        if isinstance(value, Mapping):
            annotations = as_mapping(value.get("annotations")) if "annotations" in value else value
            recorded = annotations.get(INJECTED_ANNOTATION)
            if isinstance(recorded, str):
                return recorded.split(",")
    return []


__all__ = [
    "CONFIG_VOLUME",
    "LAUNCHER_KEY",
    "PatchOp",
    "add",
    "as_list",
    "encode_patch",
    "field_env",
    "injected_items",
    "mutate",
    "mutate_update",
    "mutate_view",
    "pointer",
]
