"""A read-only view of a Volcano Job as admission sees it: tasks, NPU containers, mounts, route planning.

The job comes from a client, so every accessor tolerates missing keys and wrong types (it then sees "nothing
there"); the API server's own schema validation reports the shape errors, admission reports policy.
"""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from webhook.admission.quantity import card_count
from webhook.common.names import LAUNCHER_ANNOTATION, LAUNCHER_KEY, RING_LABEL, ROUTE_PLAN_ANNOTATION, ROUTE_PLAN_ENV
from webhook.common.settings import AcceleratorProfile, Settings

EMPTY: Mapping[str, Any] = {}


def as_int(value: Any) -> int | None:
    """`value` if it is a JSON integer (not a boolean), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_mapping(value: Any) -> Mapping[str, Any]:
    """`value` if it is a JSON object, else an empty mapping."""
    if type(value) is dict:  # the common cases first: an ABC check costs more than the rest together
        return value
    if value is None:
        return EMPTY
    return value if isinstance(value, Mapping) else EMPTY


def as_list(value: Any) -> Sequence[Any]:
    """`value` if it is a JSON array, else an empty sequence."""
    return value if isinstance(value, list) else ()


def as_mappings(value: Any) -> tuple[Mapping[str, Any], ...]:
    """The entries of a JSON array of objects (non-objects read as empty), or () when `value` is not an array."""
    if not isinstance(value, list):
        return ()
    return tuple([v if type(v) is dict else as_mapping(v) for v in value])


MAX_CACHED_PATH = 256
"""Longest path `normal_path` caches: the cache then holds at most 4,096 entries of this size (about 3 MiB), whatever
clients send; a longer path is normalised each time."""

_normal_paths = functools.lru_cache(maxsize=4096)(posixpath.normpath)


def normal_path(path: str) -> str:
    """`posixpath.normpath`, cached for short paths: every container of a job repeats the same few mount paths."""
    return _normal_paths(path) if len(path) <= MAX_CACHED_PATH else posixpath.normpath(path)


def as_str(value: Any) -> str | None:
    """`value` if it is a string, else None."""
    return value if isinstance(value, str) else None


def env_value(env: Sequence[Mapping[str, Any]], name: str) -> tuple[int, str | None] | None:
    """(index, literal value) of the env var `name` in a container's env entries, or None when it is not set."""
    for i, entry in enumerate(env):
        if entry.get("name") == name:
            return i, as_str(entry.get("value"))
    return None


def unwrap_launcher(argv: Sequence[Any]) -> Sequence[Any]:
    """The user's own command inside `["/bin/sh", ".../ringroute-launcher.sh", "--", *command]`."""
    if len(argv) >= 3 and isinstance(argv[1], str) and argv[1].endswith("/" + LAUNCHER_KEY) and argv[2] == "--":
        return argv[3:]
    return argv


def is_true(value: str | None) -> bool:
    """Kubernetes-style boolean text: "true" in any case."""
    return value is not None and value.strip().lower() == "true"


def parse_cards(quantity: Any) -> int | None:
    """A card count from a resource quantity ("8", 8, "8000m"), or None when it is not a whole number of cards
    (`card_count` says why)."""
    count = card_count(quantity)
    return count if isinstance(count, int) else None


def escape_pointer(token: str) -> str:
    """One JSON-Pointer reference token (RFC 6901): `~` -> `~0`, then `/` -> `~1`."""
    return token.replace("~", "~0").replace("/", "~1")


class ContainerView(NamedTuple):
    """One container (or init container) of a task's pod template."""

    container: Mapping[str, Any]
    field: str
    """Field path for messages, e.g. `spec.tasks[0].template.spec.containers[1]`."""
    pointer: str
    """JSON Pointer of the container, e.g. `/spec/tasks/0/template/spec/containers/1`."""
    init: bool
    npu_request: Any
    """The NPU quantity in requests (None when absent)."""
    npu_limit: Any
    """The NPU quantity in limits (None when absent)."""
    env: tuple[Mapping[str, Any], ...]
    """The env entries (empty when absent)."""
    mounts: tuple[Mapping[str, Any], ...]
    """The volumeMounts entries (empty when absent)."""
    is_npu: bool
    """The container asks for cards of the job's accelerator."""
    cards: int | None
    """Cards this container gets: limits win (requests default to them), None when not a whole number."""
    cards_problem: str | None
    """Why the quantity `cards` comes from is not a whole number of cards (None when it is, or no NPU)."""


class TaskView(NamedTuple):
    """One entry of `spec.tasks`."""

    task: Mapping[str, Any]
    field: str
    pointer: str
    replicas: int
    """Pods of this task (a missing or invalid `replicas` counts as 0, as Volcano does)."""
    template: Mapping[str, Any]
    pod_spec: Mapping[str, Any]
    containers: tuple[ContainerView, ...]
    init_containers: tuple[ContainerView, ...]
    npu_containers: tuple[ContainerView, ...]
    """Regular containers that ask for cards."""
    volumes: tuple[Mapping[str, Any], ...]
    """The pod's volumes (empty when absent)."""
    volumes_by_name: Mapping[str, Mapping[str, Any]]
    """The pod's volumes by name (the first one wins on duplicates)."""

    @property
    def is_npu(self) -> bool:
        """The task's pods use the accelerator."""
        return bool(self.npu_containers)

    @property
    def cards_per_pod(self) -> int | None:
        """Cards one pod of this task takes (sum over its containers), None when a count is not whole."""
        total = 0
        for container in self.npu_containers:
            if container.cards is None:
                return None
            total += container.cards
        return total

    def volume(self, name: Any) -> Mapping[str, Any] | None:
        """The pod volume called `name`."""
        return self.volumes_by_name.get(name) if isinstance(name, str) else None


@dataclass(frozen=True, slots=True)
class JobView:
    """What admission needs to know about a job, read once per request."""

    job: Mapping[str, Any]
    name: str | None
    namespace: str | None
    labels: Mapping[str, Any]
    annotations: Mapping[str, Any]
    spec: Mapping[str, Any]
    profile_label: str | None
    profile: AcceleratorProfile | None
    tasks: tuple[TaskView, ...]
    npu_tasks: tuple[TaskView, ...]
    """Tasks whose pods use the accelerator."""
    route_planned: bool
    """Route planning is asked for (job annotation, or `ROUTE_PLAN=true` on any container)."""
    settings: Settings
    """The settings the job was read with (mutation decides by them)."""

    @property
    def npu_pods(self) -> int:
        """NPU pods of the whole job."""
        return sum(t.replicas for t in self.npu_tasks)

    @property
    def launcher_enabled(self) -> bool:
        """Route-planned commands get wrapped by the launcher unless the job opts out."""
        return as_str(self.annotations.get(LAUNCHER_ANNOTATION)) != "false"

    @property
    def configmap_name(self) -> str | None:
        """Name of the job's rank-table ConfigMap (None before the job has a name or a profile)."""
        if self.profile is None or not self.name:
            return None
        return self.profile.configmap_name(self.name)

    @property
    def deleting(self) -> bool:
        """The job is being deleted (its updates only remove finalizers)."""
        return bool(as_mapping(self.job.get("metadata")).get("deletionTimestamp"))


# ContainerView and TaskView are NamedTuples: immutable like frozen dataclasses, and several times cheaper to build
# (read_job makes one per container and task on every admission request).


def _container_views(
    pod_spec: Mapping[str, Any], key: str, field: str, pointer: str, resource: str | None
) -> tuple[ContainerView, ...]:
    listed = pod_spec.get(key)
    if not listed:
        return ()
    init = key == "initContainers"
    views = []
    for j, container in enumerate(as_mappings(listed)):
        request = limit = None
        if resource:
            resources = as_mapping(container.get("resources"))
            request = as_mapping(resources.get("requests")).get(resource)
            limit = as_mapping(resources.get("limits")).get(resource)
        quantity = limit if limit is not None else request
        cards = card_count(quantity) if quantity is not None else None
        views.append(
            ContainerView(
                container=container,
                field=f"{field}.{key}[{j}]",
                pointer=f"{pointer}/{key}/{j}",
                init=init,
                npu_request=request,
                npu_limit=limit,
                env=as_mappings(container.get("env")),
                mounts=as_mappings(container.get("volumeMounts")),
                is_npu=request is not None or limit is not None,
                cards=cards if isinstance(cards, int) else None,
                cards_problem=cards if isinstance(cards, str) else None,
            )
        )
    return tuple(views)


def read_job(job: Mapping[str, Any], settings: Settings) -> JobView:
    """Read a job (any JSON value) into a view; never raises."""
    job = as_mapping(job)
    metadata = as_mapping(job.get("metadata"))
    labels = as_mapping(metadata.get("labels"))
    spec = as_mapping(job.get("spec"))
    profile_label = as_str(labels.get(RING_LABEL))
    profile = settings.profile(profile_label)
    resource = profile.resource_name if profile else None
    tasks = []
    for i, raw in enumerate(as_list(spec.get("tasks"))):
        task = as_mapping(raw)
        template = as_mapping(task.get("template"))
        pod_spec = as_mapping(template.get("spec"))
        field = f"spec.tasks[{i}]"
        pointer = f"/spec/tasks/{i}"
        replicas = task.get("replicas")
        spec_field, spec_pointer = f"{field}.template.spec", f"{pointer}/template/spec"
        containers = _container_views(pod_spec, "containers", spec_field, spec_pointer, resource)
        volumes = as_mappings(pod_spec.get("volumes"))
        volumes_by_name: dict[str, Mapping[str, Any]] = {}
        for volume in volumes:
            name = volume.get("name")
            if isinstance(name, str):
                volumes_by_name.setdefault(name, volume)
        tasks.append(
            TaskView(
                task=task,
                field=field,
                pointer=pointer,
                replicas=replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 0,
                template=template,
                pod_spec=pod_spec,
                containers=containers,
                init_containers=_container_views(pod_spec, "initContainers", spec_field, spec_pointer, resource),
                npu_containers=tuple([c for c in containers if c.is_npu]),
                volumes=volumes,
                volumes_by_name=volumes_by_name,
            )
        )
    annotations = as_mapping(metadata.get("annotations"))
    return JobView(
        job=job,
        name=as_str(metadata.get("name")) or None,
        namespace=as_str(metadata.get("namespace")) or None,
        labels=labels,
        annotations=annotations,
        spec=spec,
        profile_label=profile_label,
        profile=profile,
        tasks=tuple(tasks),
        npu_tasks=tuple(t for t in tasks if t.is_npu),
        route_planned=_route_planned(annotations, tasks),
        settings=settings,
    )


def _route_planned(annotations: Mapping[str, Any], tasks: Sequence[TaskView]) -> bool:
    if is_true(as_str(annotations.get(ROUTE_PLAN_ANNOTATION))):
        return True
    for task in tasks:
        for container in (*task.containers, *task.init_containers):
            found = env_value(container.env, ROUTE_PLAN_ENV)
            if found is not None and is_true(found[1]):
                return True
    return False
