"""A read-only view of a Volcano Job as admission sees it: tasks, containers, mounts, with field paths and JSON
Pointers for messages and patches.

What the services must agree on (profile, NPU containers and tasks, route planning) comes from
`webhook.common.jobfacts`, the one reading admission, the controller and the extender share; this view adds what
only admission needs. The job comes from a client, so every accessor tolerates missing keys and wrong types (it
then sees "nothing there"); the API server's own schema validation reports the shape errors, admission reports
policy.
"""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from webhook.common.jobfacts import (
    JobFacts,
    NpuContainer,
    as_int,
    as_list,
    as_mapping,
    as_mappings,
    as_str,
    card_count,
    job_facts,
)
from webhook.common.names import LAUNCHER_ANNOTATION, LAUNCHER_KEY
from webhook.common.settings import AcceleratorProfile, Settings

MAX_CACHED_PATH = 256
"""Longest path `normal_path` caches: the cache then holds at most 4,096 entries of this size (about 3 MiB), whatever
clients send; a longer path is normalised each time."""

_normal_paths = functools.lru_cache(maxsize=4096)(posixpath.normpath)


def normal_path(path: str) -> str:
    """`posixpath.normpath`, cached for short paths: every container of a job repeats the same few mount paths."""
    return _normal_paths(path) if len(path) <= MAX_CACHED_PATH else posixpath.normpath(path)


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
    facts: JobFacts
    """The reading the three services share (`webhook.common.jobfacts`)."""
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
    """Route planning is asked for (`JobFacts.route_planned`: the annotation, or `ROUTE_PLAN` on an NPU container)."""
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
    pod_spec: Mapping[str, Any],
    key: str,
    field: str,
    pointer: str,
    npu: Mapping[int, NpuContainer],
) -> tuple[ContainerView, ...]:
    listed = pod_spec.get(key)
    if not listed:
        return ()
    init = key == "initContainers"
    views = []
    for j, container in enumerate(as_mappings(listed)):
        facts = npu.get(j)
        views.append(
            ContainerView(
                container=container,
                field=f"{field}.{key}[{j}]",
                pointer=f"{pointer}/{key}/{j}",
                init=init,
                npu_request=facts.request if facts is not None else None,
                npu_limit=facts.limit if facts is not None else None,
                env=as_mappings(container.get("env")),
                mounts=as_mappings(container.get("volumeMounts")),
                is_npu=facts is not None,
                cards=facts.cards if facts is not None else None,
                cards_problem=facts.cards_problem if facts is not None else None,
            )
        )
    return tuple(views)


def read_job(job: Mapping[str, Any], settings: Settings) -> JobView:
    """Read a job (any JSON value) into a view; never raises."""
    job = as_mapping(job)
    facts = job_facts(job, settings)
    metadata = as_mapping(job.get("metadata"))
    spec = as_mapping(job.get("spec"))
    tasks = []
    for i, raw in enumerate(as_list(spec.get("tasks"))):
        task_facts = facts.tasks[i]
        task = as_mapping(raw)
        template = as_mapping(task.get("template"))
        pod_spec = as_mapping(template.get("spec"))
        field = f"spec.tasks[{i}]"
        pointer = f"/spec/tasks/{i}"
        spec_field, spec_pointer = f"{field}.template.spec", f"{pointer}/template/spec"
        npu = task_facts.template.npu_containers
        regular = {c.index: c for c in npu if not c.init} if npu else EMPTY_NPU
        init = {c.index: c for c in npu if c.init} if npu else EMPTY_NPU
        containers = _container_views(pod_spec, "containers", spec_field, spec_pointer, regular)
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
                replicas=task_facts.replicas,
                template=template,
                pod_spec=pod_spec,
                containers=containers,
                init_containers=_container_views(pod_spec, "initContainers", spec_field, spec_pointer, init),
                npu_containers=tuple([c for c in containers if c.is_npu]),
                volumes=volumes,
                volumes_by_name=volumes_by_name,
            )
        )
    return JobView(
        job=job,
        facts=facts,
        name=facts.name,
        namespace=facts.namespace,
        labels=as_mapping(metadata.get("labels")),
        annotations=as_mapping(metadata.get("annotations")),
        spec=spec,
        profile_label=facts.profile_label,
        profile=facts.profile,
        tasks=tuple(tasks),
        npu_tasks=tuple(t for t in tasks if t.is_npu),
        route_planned=facts.route_planned,
        settings=settings,
    )


EMPTY_NPU: Mapping[int, NpuContainer] = {}


__all__ = [
    "ContainerView",
    "JobView",
    "TaskView",
    "as_int",
    "as_list",
    "as_mapping",
    "as_mappings",
    "as_str",
    "env_value",
    "escape_pointer",
    "normal_path",
    "parse_cards",
    "read_job",
    "unwrap_launcher",
]
