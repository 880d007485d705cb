"""Admission mutation: the JSON Patch that gives a labelled Volcano Job what its NPU pods need.

Pure: a function of the job as received and the settings. Ops are `add` (which also replaces an existing
member, used only to wrap `command` and to fill an empty `schedulerName`), computed against the incoming
object and serialised once at the end. Running the mutator on its own output yields no ops.
"""

from __future__ import annotations

import base64
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from webhook.admission_types import JsonPatchOperation
from webhook.policy.jobview import (
    LAUNCHER_SCRIPT,
    ContainerView,
    JobView,
    TaskView,
    as_list,
    as_mapping,
    as_str,
    configmap_mounts,
    escape_pointer,
    read_job,
    unwrap_launcher,
)
from webhook.policy.route_plan import HOSTNAME_KEY, has_hostname_anti_affinity
from webhook.settings import INJECTED_ANNOTATION, RING_LABEL, AcceleratorProfile, Settings

LAUNCHER_KEY = LAUNCHER_SCRIPT
"""ConfigMap key of the launcher script (same as webhook.rank_configmap.LAUNCHER_KEY)."""
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


@dataclass(frozen=True, slots=True)
class PatchOp:
    """One RFC 6902 operation; only `add` is emitted."""

    path: str
    value: Any
    op: Literal["add"] = "add"

    def to_json(self) -> JsonPatchOperation:
        """The wire form."""
        return {"op": self.op, "path": self.path, "value": self.value}


def pointer(*tokens: str | int) -> str:
    """A JSON Pointer from raw tokens, escaping `~` and `/` (RFC 6901)."""
    return "".join("/" + escape_pointer(str(t)) for t in tokens)


def encode_patch(ops: Sequence[PatchOp]) -> str:
    """The base64 JSON Patch of an AdmissionResponse."""
    return base64.b64encode(orjson.dumps([op.to_json() for op in ops])).decode("ascii")


def field_env(name: str, field_path: str) -> dict[str, Any]:
    """An env var from the downward API."""
    return {"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": field_path}}}


@dataclass
class _Patch:
    """Ops plus what they inject, collected while walking the job."""

    ops: list[PatchOp] = field(default_factory=list)
    injected: set[str] = field(default_factory=set)

    def extend_list(self, parent: str, key: str, present: Any, items: Sequence[Any], what: str) -> None:
        """Append items to the list `parent/key`: one add of the whole list if it is absent, else `-` adds."""
        if not items:
            return
        if isinstance(present, list):
            self.ops.extend(PatchOp(f"{parent}{pointer(key)}/-", item) for item in items)
        else:
            self.ops.append(PatchOp(f"{parent}{pointer(key)}", list(items)))
        self.injected.add(what)

    def extend_map(self, parent: str, key: str, present: Any, entries: Mapping[str, Any], what: str) -> None:
        """Add entries to the object `parent/key`: one add of the whole object if absent, else one add each."""
        if not entries:
            return
        if isinstance(present, Mapping):
            self.ops.extend(PatchOp(f"{parent}{pointer(key, k)}", v) for k, v in entries.items())
        else:
            self.ops.append(PatchOp(f"{parent}{pointer(key)}", dict(entries)))
        self.injected.add(what)


def _free_name(wanted: str, taken: set[str]) -> str:
    name, n = wanted, 2
    while name in taken:
        name, n = f"{wanted}-{n}", n + 1
    return name


def _mount_paths(container: ContainerView) -> set[str]:
    return {posixpath.normpath(p) for p in (as_str(as_mapping(m).get("mountPath")) for m in container.mounts) if p}


def _rank_table_dir(container: ContainerView, task: TaskView, configmap: str) -> str | None:
    """Where the container already mounts the rank-table ConfigMap (as a directory), if it does."""
    for _, mount in configmap_mounts(container, task, configmap):
        mount_path = as_str(mount.get("mountPath"))
        if mount_path and not mount.get("subPath") and not mount.get("subPathExpr"):
            return mount_path
    return None


def _launcher_command(command: Sequence[Any], directory: str) -> list[Any] | None:
    """The wrapped command, or None when it is already wrapped (or there is nothing to wrap)."""
    script = f"{directory.rstrip('/')}/{LAUNCHER_KEY}"
    if not command or len(unwrap_launcher(command)) != len(command):
        return None
    return ["/bin/sh", script, "--", *command]


def _mutate_task(view: JobView, task: TaskView, profile: AcceleratorProfile, configmap: str, patch: _Patch) -> None:
    spec_ptr = f"{task.pointer}/template/spec"
    volumes = task.volumes
    # Names mounted by any container count as taken even without a volume: reusing one would change a mount.
    mounted = (as_mapping(m).get("name") for c in (*task.containers, *task.init_containers) for m in c.mounts)
    taken = {n for n in (*(as_mapping(v).get("name") for v in volumes), *mounted) if isinstance(n, str)}
    new_volumes: list[dict[str, Any]] = []

    # One pass over the volumes: the user's volume of the ConfigMap and of each host path are reused.
    config_volume: str | None = None
    by_host_path: dict[str, str] = {}
    for raw in volumes:
        volume = as_mapping(raw)
        name = volume.get("name")
        if not isinstance(name, str):
            continue
        if config_volume is None and as_mapping(volume.get("configMap")).get("name") == configmap:
            config_volume = name
        host_path = as_mapping(volume.get("hostPath")).get("path")
        if isinstance(host_path, str):
            by_host_path.setdefault(host_path, name)
    if config_volume is None:
        config_volume = _free_name(CONFIG_VOLUME, taken)
        taken.add(config_volume)
        new_volumes.append({"name": config_volume, "configMap": {"name": configmap}})

    driver_volume: dict[str, str] = {}
    for host in profile.host_path_volumes:
        existing = by_host_path.get(host.path)
        if existing is not None:
            driver_volume[host.path] = existing
            continue
        name = _free_name(host.name, taken)
        taken.add(name)
        driver_volume[host.path] = name
        new_volumes.append({"name": name, "hostPath": {"path": host.path}})

    needs_config_volume = False
    used_driver_volumes: set[str] = set()
    containers = [(c, False) for c in task.npu_containers] + [(c, True) for c in task.init_containers if c.is_npu]
    for container, init in containers:
        mount_paths = _mount_paths(container)
        new_mounts: list[dict[str, Any]] = []
        directory = _rank_table_dir(container, task, configmap)
        if directory is None:
            directory = profile.mount_path
            if posixpath.normpath(directory) not in mount_paths:
                new_mounts.append({"name": config_volume, "mountPath": directory})
                needs_config_volume = True
                patch.injected.add(INJECTED_CONFIG_VOLUME)
        for host in profile.host_path_volumes:
            if posixpath.normpath(host.path) not in mount_paths:
                new_mounts.append({"name": driver_volume[host.path], "mountPath": host.path})
                used_driver_volumes.add(driver_volume[host.path])
                patch.injected.add(INJECTED_DRIVER_VOLUMES)
        patch.extend_list(container.pointer, "volumeMounts", container.container.get("volumeMounts"), new_mounts, "")

        env_names = {as_mapping(e).get("name") for e in container.env}
        wanted_env = [
            {"name": "RANK_TABLE_FILE", "value": f"{directory.rstrip('/')}/{profile.rank_table_file}"},
            field_env("POD_NAME", "metadata.name"),
            field_env("POD_IP", "status.podIP"),
            field_env("HOST_IP", "status.hostIP"),
        ]
        patch.extend_list(
            container.pointer,
            "env",
            container.container.get("env"),
            [e for e in wanted_env if e["name"] not in env_names],
            INJECTED_ENV,
        )

        if not init and view.route_planned and view.launcher_enabled:
            command = container.container.get("command")
            if isinstance(command, list):
                wrapped = _launcher_command(command, directory)
                if wrapped is not None:
                    patch.ops.append(PatchOp(f"{container.pointer}/command", wrapped))
                    patch.injected.add(INJECTED_LAUNCHER)

    new_volumes = [
        v
        for v in new_volumes
        if (v["name"] == config_volume and needs_config_volume) or v["name"] in used_driver_volumes
    ]
    patch.extend_list(spec_ptr, "volumes", task.pod_spec.get("volumes"), new_volumes, "")

    node_selector = as_mapping(task.pod_spec.get("nodeSelector"))
    patch.extend_map(
        spec_ptr,
        "nodeSelector",
        task.pod_spec.get("nodeSelector"),
        {k: v for k, v in profile.node_selector if k not in node_selector},
        INJECTED_NODE_SELECTOR,
    )

    if view.name and not has_hostname_anti_affinity(task):
        _add_anti_affinity(task, spec_ptr, view.name, patch)

    template_meta = task.template.get("metadata")
    labels = as_mapping(template_meta).get("labels")
    if RING_LABEL not in as_mapping(labels):
        if isinstance(template_meta, Mapping):
            patch.extend_map(
                f"{task.pointer}/template/metadata",
                "labels",
                labels,
                {RING_LABEL: profile.label_value},
                INJECTED_TASK_LABEL,
            )
        else:
            patch.ops.append(
                PatchOp(f"{task.pointer}/template/metadata", {"labels": {RING_LABEL: profile.label_value}})
            )
            patch.injected.add(INJECTED_TASK_LABEL)


def _add_anti_affinity(task: TaskView, spec_ptr: str, job_name: str, patch: _Patch) -> None:
    term = {
        "labelSelector": {
            "matchExpressions": [{"key": JOB_NAME_LABEL, "operator": "In", "values": [job_name]}],
        },
        "topologyKey": HOSTNAME_KEY,
    }
    affinity = task.pod_spec.get("affinity")
    anti = as_mapping(affinity).get("podAntiAffinity")
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    if not isinstance(affinity, Mapping):
        patch.ops.append(PatchOp(f"{spec_ptr}/affinity", {"podAntiAffinity": {required: [term]}}))
    elif not isinstance(anti, Mapping):
        patch.ops.append(PatchOp(f"{spec_ptr}/affinity/podAntiAffinity", {required: [term]}))
    else:
        patch.extend_list(f"{spec_ptr}/affinity/podAntiAffinity", required, anti.get(required), [term], "")
    patch.injected.add(INJECTED_ANTI_AFFINITY)


def mutate(job: Mapping[str, Any], settings: Settings) -> list[PatchOp]:
    """The `add` ops that complete a labelled NPU job; [] for jobs of an unknown profile or with nothing missing."""
    view = read_job(job, settings)
    return mutate_view(view)


def mutate_view(view: JobView) -> list[PatchOp]:
    """`mutate` for a job already read into a view."""
    profile = view.profile
    configmap = view.configmap_name
    if profile is None or configmap is None or not isinstance(view.job.get("spec"), Mapping):
        return []
    patch = _Patch()
    for task in view.npu_tasks:
        _mutate_task(view, task, profile, configmap, patch)
    if view.spec.get("schedulerName") in (None, ""):
        patch.ops.append(PatchOp("/spec/schedulerName", VOLCANO_SCHEDULER))
        patch.injected.add(INJECTED_SCHEDULER)
    patch.injected.discard("")
    if not patch.ops:
        return []
    previous = as_str(view.annotations.get(INJECTED_ANNOTATION)) or ""
    recorded = sorted({p for p in previous.split(",") if p} | patch.injected)
    metadata = view.job.get("metadata")
    if isinstance(metadata, Mapping):
        patch.extend_map(
            "/metadata", "annotations", metadata.get("annotations"), {INJECTED_ANNOTATION: ",".join(recorded)}, ""
        )
    else:
        patch.ops.append(PatchOp("/metadata", {"annotations": {INJECTED_ANNOTATION: ",".join(recorded)}}))
    return patch.ops


def injected_items(ops: Sequence[PatchOp]) -> list[str]:
    """What a patch injects, as recorded in its `ringroute.io/injected` annotation."""
    for op in reversed(ops):
        value = op.value
        if op.path.endswith(pointer(INJECTED_ANNOTATION)) and isinstance(value, str):
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
    "as_list",
    "encode_patch",
    "field_env",
    "injected_items",
    "mutate",
    "mutate_view",
    "pointer",
]
