"""Admission mutation: the JSON Patch that gives a labelled Volcano Job what its NPU pods need.

Pure: a function of the job as received, the settings and the cluster facts passed in (`ClusterFacts`). Ops are
`add` (which also replaces an existing member, used to wrap `command`, to fill an empty `schedulerName` and to
correct ringroute's own annotations), plus one `remove`: the vendor fork's `configmap1980` job plugin, which
open-source Volcano refuses. They are computed against the incoming object as plain dicts and serialised once at
the end. Running the mutator on its own output yields no ops.

On CREATE the mutation also decides who writes the rank table (`ringroute.io/rank-table-writer`), requests
Volcano's network-topology-aware scheduling for route-planned jobs at the lowest HyperNode tier that can hold them
(`webhook.admission.network_topology`; the decision is a warning and `ringroute.io/network-topology`), and tells
the scheduler extender the gang size and route planning (`ringroute.io/npu-pods` and `ringroute.io/route-plan` on the
NPU pod templates, which Volcano copies onto the pods).

On UPDATE (`plan_update`) only a job ringroute admitted is patched, and only with what the stored object
already has: Volcano's own webhook lets an update change nothing in `spec` but `minAvailable` and `replicas`,
and a server-side apply that omits the fields injected on CREATE removes them.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook.admission.jobview import (
    ContainerView,
    JobView,
    TaskView,
    as_list,
    as_mapping,
    as_str,
    escape_pointer,
    normal_path,
    unwrap_launcher,
)
from webhook.admission.patch import (
    COPY_BUDGET_BYTES,
    MISSING,
    PatchBuilder,
    PatchOp,
    WalkedTask,
    add,
    copy_twin_ops,
    copy_twin_template,
    encode_patch,
    op_growth,
    pointer,
    remove,
    restorable,
    template_key,
)
from webhook.admission.policy.network_topology import (
    INJECTED_NETWORK_TOPOLOGY,
    NO_FACTS,
    ClusterFacts,
    TopologyDecision,
    decide,
)
from webhook.admission.policy.route_plan import has_hostname_anti_affinity
from webhook.admission.policy.size import job_bytes, limit_bytes, too_large_after_mutation
from webhook.admission.policy.violation import Violation
from webhook.admission.policy.volcano_plugins import plugins_of, rank_table_writer
from webhook.admission.policy.volcano_release import VENDOR_CONFIGMAP_PLUGIN
from webhook.common.names import (
    HOSTNAME_LABEL,
    INJECTED_ANNOTATION,
    JOB_NAME_LABEL,
    LAUNCHER_KEY,
    NETWORK_TOPOLOGY_ANNOTATION,
    NPU_PODS_ANNOTATION,
    RANK_TABLE_WRITER_ANNOTATION,
    RING_LABEL,
    RINGROUTE_WRITER,
    ROUTE_PLAN_ANNOTATION,
    VOLCANO_PLUGIN_WRITER,
    VOLCANO_SCHEDULER,
)
from webhook.common.settings import AcceleratorProfile, HostPathVolume

CONFIG_VOLUME = "ringroute-config"
"""Name of the injected rank-table ConfigMap volume."""

# What the `ringroute.io/injected` annotation lists.
INJECTED_CONFIG_VOLUME = "configmap-volume"
INJECTED_ENV = "env"
INJECTED_DRIVER_VOLUMES = "driver-volumes"
INJECTED_NODE_SELECTOR = "node-selector"
INJECTED_ANTI_AFFINITY = "anti-affinity"
INJECTED_TASK_LABEL = "task-label"
INJECTED_SCHEDULER = "scheduler-name"
INJECTED_LAUNCHER = "launcher"
INJECTED_NPU_PODS = "npu-pods"
INJECTED_ROUTE_PLAN = "route-plan"
_TEMPLATE_ANNOTATIONS = {NPU_PODS_ANNOTATION: INJECTED_NPU_PODS, ROUTE_PLAN_ANNOTATION: INJECTED_ROUTE_PLAN}
"""What the `ringroute.io/injected` annotation lists for each pod-template annotation the mutation adds."""
REMOVED_VENDOR_PLUGIN = "configmap1980-plugin-removed"

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_ANNOTATION_POINTER = "/metadata/annotations/" + escape_pointer(INJECTED_ANNOTATION)
_PLUGIN_POINTER = "/spec/plugins/" + escape_pointer(VENDOR_CONFIGMAP_PLUGIN)
_FIELD_ENV = (("POD_NAME", "metadata.name"), ("POD_IP", "status.podIP"), ("HOST_IP", "status.hostIP"))


@dataclass(frozen=True, slots=True)
class Mutation:
    """The patch of one admission request, and what the AdmissionResponse warns the user about."""

    ops: list[PatchOp] = field(default_factory=list)
    warnings: tuple[str, ...] = ()
    denial: Violation | None = None
    """Set when the job with ringroute's additions would be over `admission.maxJobKib` (then `ops` is empty)."""


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


@dataclass(frozen=True, slots=True)
class _Plan:
    """Job-level decisions: from the settings and cluster facts on CREATE, from the stored object on UPDATE."""

    writer: str | None
    """`ringroute.io/rank-table-writer` to set (None: leave the annotation alone)."""
    remove_plugin: bool
    """Remove `configmap1980` from spec.plugins."""
    topology: Mapping[str, Any] | None
    """spec.networkTopology to add when the job has none."""
    npu_pods: tuple[str | None, ...] | str | None
    """`ringroute.io/npu-pods` for every NPU template (CREATE), or per task index as stored (UPDATE)."""
    replace_npu_pods: bool
    """Correct a different `ringroute.io/npu-pods` value (CREATE), or only add a missing one (UPDATE)."""
    route_plan: bool
    """Set `ringroute.io/route-plan: "true"` on the NPU templates: the job is route-planned."""
    mount_configmap: bool
    """Mount the rank-table ConfigMap (not when the vendor plugin writes it: it mounts its own)."""
    topology_reason: str | None = None
    """`ringroute.io/network-topology` to set: why the job got the networkTopology it has (None: leave it)."""
    warnings: tuple[str, ...] = ()
    """Warnings of decisions made on CREATE (the networkTopology asked for)."""

    def npu_pods_of(self, index: int) -> str | None:
        """The npu-pods annotation of task `index`."""
        if isinstance(self.npu_pods, tuple):
            return self.npu_pods[index] if index < len(self.npu_pods) else None
        return self.npu_pods


def _mutate_task(
    view: JobView, task: TaskView, needs: _ProfileNeeds, configmap: str, *, plan: _Plan, index: int, patch: PatchBuilder
) -> None:
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
            if plan.mount_configmap and needs.mount_dir not in mount_dirs:
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

    _mutate_template_metadata(task, needs, plan, index, patch)


def _mutate_template_metadata(
    task: TaskView, needs: _ProfileNeeds, plan: _Plan, index: int, patch: PatchBuilder
) -> None:
    """The task label and the npu-pods and route-plan annotations, in one add when the template has no metadata."""
    template_meta = task.template.get("metadata")
    labels = as_mapping(template_meta).get("labels")
    annotations = as_mapping(template_meta).get("annotations")
    new_labels = {} if RING_LABEL in as_mapping(labels) else {RING_LABEL: needs.label_value}
    npu_pods = plan.npu_pods_of(index)
    present = as_mapping(annotations).get(NPU_PODS_ANNOTATION, MISSING)
    new_annotations: dict[str, Any] = {}
    if npu_pods is not None and present != npu_pods and (plan.replace_npu_pods or present is MISSING):
        new_annotations[NPU_PODS_ANNOTATION] = npu_pods
    if plan.route_plan and as_mapping(annotations).get(ROUTE_PLAN_ANNOTATION) != "true":
        # Volcano copies template annotations onto the pods, not the Job's: the extender reads the pods.
        new_annotations[ROUTE_PLAN_ANNOTATION] = "true"
    recorded = [_TEMPLATE_ANNOTATIONS[k] for k in new_annotations]
    meta_ptr = f"{task.pointer}/template/metadata"
    if not isinstance(template_meta, Mapping):
        value = {k: v for k, v in (("labels", new_labels), ("annotations", new_annotations)) if v}
        if value:
            patch.ops.append(add(meta_ptr, value))
            patch.injected.update(recorded + ([INJECTED_TASK_LABEL] if new_labels else []))
        return
    patch.extend_map(f"{meta_ptr}/labels", labels, new_labels, INJECTED_TASK_LABEL)
    patch.extend_map(f"{meta_ptr}/annotations", annotations, new_annotations, None)
    patch.injected.update(recorded)


def _add_anti_affinity(task: TaskView, spec_ptr: str, job_name: str, patch: PatchBuilder) -> None:
    term = {
        "labelSelector": {"matchExpressions": [{"key": JOB_NAME_LABEL, "operator": "In", "values": [job_name]}]},
        "topologyKey": HOSTNAME_LABEL,
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


def _mutable(view: JobView) -> bool:
    """A job the mutation completes: a known profile, a name (the ConfigMap's), and a spec."""
    return view.profile is not None and view.configmap_name is not None and isinstance(view.job.get("spec"), Mapping)


def _collect(view: JobView, plan: _Plan, *, copies: bool, budget: int | None) -> PatchBuilder:
    """Every op the job lacks, without the annotations that record them. With `copies`, a task whose template is
    the same JSON as one already walked gets one `copy` of that task's mutated template. With `budget` (bytes the
    job may grow), the walk stops once the ops would take the job past it (`PatchBuilder.stopped`)."""
    patch = PatchBuilder()
    profile = view.profile
    configmap = view.configmap_name
    if profile is None or configmap is None or not _mutable(view):
        return patch
    needs = _needs(profile)
    if plan.remove_plugin and VENDOR_CONFIGMAP_PLUGIN in plugins_of(view):
        patch.ops.append(remove(_PLUGIN_POINTER))
        patch.injected.add(REMOVED_VENDOR_PLUGIN)
    # Jobs often repeat one pod template in many tasks (a task per node group or per role): a task whose template
    # serialises to the same JSON as one already walked reuses that task's work.
    walked: dict[tuple[bytes, str | None], WalkedTask] = {}
    for index, task in enumerate(view.tasks):
        if not task.is_npu:
            continue
        if budget is not None and patch.growth > budget:
            patch.stopped = True
            return patch
        template = template_key(task)
        key = (template, plan.npu_pods_of(index)) if template is not None else None
        twin = walked.get(key) if key is not None else None
        if twin is not None and twin.start == twin.end:
            continue  # the same template needed nothing
        if twin is not None and (
            (copies and copy_twin_template(patch, twin, task.pointer)) or copy_twin_ops(patch, twin, task.pointer)
        ):
            continue
        start = len(patch.ops)
        _mutate_task(view, task, needs, configmap, plan=plan, index=index, patch=patch)
        growth = op_growth(patch.ops[start:])
        patch.growth += growth
        if key is not None:
            walked[key] = WalkedTask(task.pointer, start, len(patch.ops), growth, len(key[0]) + growth)
    if budget is not None and patch.growth > budget:
        patch.stopped = True
        return patch
    if view.spec.get("schedulerName") in (None, ""):
        patch.add("/spec/schedulerName", VOLCANO_SCHEDULER, INJECTED_SCHEDULER)
    if plan.topology is not None and view.spec.get("networkTopology") is None:
        patch.add("/spec/networkTopology", dict(plan.topology), INJECTED_NETWORK_TOPOLOGY)
    return patch


def _recorded(annotations: Mapping[str, Any]) -> set[str]:
    """The items of a `ringroute.io/injected` annotation value."""
    return {item for item in (as_str(annotations.get(INJECTED_ANNOTATION)) or "").split(",") if item}


def _with_annotations(view: JobView, ops: list[PatchOp], entries: Mapping[str, str]) -> list[PatchOp]:
    """`ops` plus the add(s) that set the Job annotations `entries` (one add when the job has no annotations)."""
    if not entries:
        return ops
    metadata = view.job.get("metadata")
    if not isinstance(metadata, Mapping):
        ops.append(add("/metadata", {"annotations": dict(entries)}))
    elif isinstance(metadata.get("annotations"), Mapping):
        ops += [add("/metadata/annotations/" + escape_pointer(k), v) for k, v in entries.items()]
    else:
        ops.append(add("/metadata/annotations", dict(entries)))
    return ops


def _plugin_warning(view: JobView) -> str:
    """Why the vendor plugin was removed, for kubectl's `Warning:` line."""
    configmap = view.configmap_name
    if view.settings.volcano.configmap_plugin == "installed":
        why = (
            f"this job is route-planned, so ringroute writes its rank table {configmap} and the plugin would be a "
            "second writer"
        )
    else:
        why = (
            f"open-source Volcano refuses jobs that name this plugin of the cloud vendor's fork (unable to find job "
            f"plugin); ringroute writes the rank table {configmap} itself"
        )
    return f"spec.plugins[{VENDOR_CONFIGMAP_PLUGIN}]: removed by ringroute: {why}"


def _finish(view: JobView, patch: PatchBuilder, plan: _Plan, record: set[str], *, update: bool) -> Mutation:
    """The patch with the Job annotations that record it, and its warnings."""
    entries: dict[str, str] = {}
    if plan.writer is not None and view.annotations.get(RANK_TABLE_WRITER_ANNOTATION) != plan.writer:
        entries[RANK_TABLE_WRITER_ANNOTATION] = plan.writer
    if plan.topology_reason is not None and view.annotations.get(NETWORK_TOPOLOGY_ANNOTATION) != plan.topology_reason:
        entries[NETWORK_TOPOLOGY_ANNOTATION] = plan.topology_reason
    value = ",".join(sorted(record))
    if patch.ops and value:
        entries[INJECTED_ANNOTATION] = value
    elif update and value and as_str(view.annotations.get(INJECTED_ANNOTATION)) != value:
        entries[INJECTED_ANNOTATION] = value  # a server-side apply dropped only the annotation
    removed = any(op["op"] == "remove" for op in patch.ops)
    warnings = ((_plugin_warning(view),) if removed else ()) + plan.warnings
    return Mutation(_with_annotations(view, patch.ops, entries), warnings)


def plan_create(view: JobView, facts: ClusterFacts = NO_FACTS, *, size_at_most: int | None = None) -> Mutation:
    """The patch and warnings of a CREATE: what the job lacks, for a labelled job of a known profile.

    A job the additions would take over `admission.maxJobKib` gets `Mutation.denial` instead (`size_at_most`, a
    bound on the job's JSON size the caller knows, spares measuring a small job). The patch grows with the number
    of distinct pod templates, not tasks: a task whose template repeats an earlier one's gets one `copy` op.
    """
    if not _mutable(view):
        return Mutation()
    writer = rank_table_writer(view, view.settings)
    decision: TopologyDecision | None = decide(view, facts)
    plan = _Plan(
        writer=writer,
        remove_plugin=writer == RINGROUTE_WRITER,
        topology=decision.request if decision is not None else None,
        topology_reason=decision.reason if decision is not None else None,
        warnings=(decision.warning,) if decision is not None else (),
        npu_pods=str(view.npu_pods) if view.npu_tasks else None,
        replace_npu_pods=True,
        route_plan=view.route_planned,
        mount_configmap=writer == RINGROUTE_WRITER,
    )
    # The request's length bounds the job's size closely enough (the envelope is a few hundred bytes).
    size = size_at_most if size_at_most is not None else job_bytes(view.job)
    patch = _collect(view, plan, copies=True, budget=limit_bytes(view.settings) - size)
    if patch.stopped:
        estimate = job_bytes(view.job) + patch.growth
        return Mutation(denial=too_large_after_mutation(estimate, len(view.npu_tasks), view.settings))
    return _finish(view, patch, plan, _recorded(view.annotations) | patch.injected, update=False)


def plan_update(view: JobView, old: Mapping[str, Any]) -> Mutation:
    """The patch of an UPDATE from stored object `old` to the job in `view`.

    Nothing unless `old` carries `ringroute.io/injected` or `ringroute.io/rank-table-writer` (ringroute admitted
    it). Then what the update dropped is put back exactly as `old` has it (a server-side apply that omits the
    injected fields removes them; a client-side apply that resends the file's `configmap1980` plugin gets it
    removed again), and nothing `old` does not have is ever added: Volcano rejects updates that change other
    spec fields. The rank-table writer stays what CREATE decided. A job being deleted is left alone (its
    updates only remove finalizers).
    """
    old_annotations = as_mapping(as_mapping(old.get("metadata")).get("annotations"))
    old_record = _recorded(old_annotations)
    old_writer = old_annotations.get(RANK_TABLE_WRITER_ANNOTATION)
    writer: str | None = old_writer if old_writer in (RINGROUTE_WRITER, VOLCANO_PLUGIN_WRITER) else None
    if (not old_record and writer is None) or view.deleting or not _mutable(view):
        return Mutation()
    old_spec = as_mapping(old.get("spec"))
    old_tasks = as_list(old_spec.get("tasks"))
    topology = old_spec.get("networkTopology")
    plan = _Plan(
        writer=writer,
        remove_plugin=VENDOR_CONFIGMAP_PLUGIN not in as_mapping(old_spec.get("plugins")),
        topology=topology if INJECTED_NETWORK_TOPOLOGY in old_record and isinstance(topology, Mapping) else None,
        npu_pods=tuple(_template_annotation(task, NPU_PODS_ANNOTATION) for task in old_tasks),
        replace_npu_pods=False,
        route_plan=view.route_planned,
        mount_configmap=writer != VOLCANO_PLUGIN_WRITER,
        topology_reason=as_str(old_annotations.get(NETWORK_TOPOLOGY_ANNOTATION)),
    )
    # Per-task ops, not copies: each is kept only where the stored object has it.
    patch = _collect(view, plan, copies=False, budget=None)
    patch.ops = [kept for op in patch.ops if (kept := restorable(op, old)) is not None]
    return _finish(view, patch, plan, old_record | _recorded(view.annotations), update=True)


def _template_annotation(task: Any, key: str) -> str | None:
    metadata = as_mapping(as_mapping(as_mapping(task).get("template")).get("metadata"))
    return as_str(as_mapping(metadata.get("annotations")).get(key))


__all__ = [
    "CONFIG_VOLUME",
    "COPY_BUDGET_BYTES",
    "NO_FACTS",
    "ClusterFacts",
    "Mutation",
    "PatchOp",
    "add",
    "as_list",
    "encode_patch",
    "field_env",
    "plan_create",
    "plan_update",
    "pointer",
    "remove",
]
