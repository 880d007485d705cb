"""One reading of a Volcano Job for admission, the controller and the scheduler extender.

The three services decide the same things about a job: its accelerator profile, its NPU tasks and how many pods
they make, whether it asks for route planning, its task order, and who writes its rank table. `job_facts` reads
them in one place, so the services cannot come to disagree. The extender sees pods, not Jobs: Volcano makes each
pod from its task's template, and `pod_facts` reads a pod with the same per-template reading (`template_facts`).

The rules (docs/admission.md, "Route planning"):
- "true" is `true` in any letter case, surrounding whitespace ignored (`" true"`, `"True"`); no other text is.
- An NPU container is a regular container (not an init container) whose requests or limits name the profile's
  resource with a quantity other than zero; a quantity ringroute cannot read counts (admission names it). An NPU
  task is one whose template has an NPU container; init containers that name the resource get the rank-table
  mount too, but do not make a task an NPU task.
- Route planning is asked for by the annotation `ringroute.io/route-plan` on the Job or on an NPU task's pod
  template (admission copies the Job's onto those, so that the pods carry it to the extender), or by env
  `ROUTE_PLAN` on an NPU container: the training container, where HCCL runs and whose command the launcher wraps.
  `ROUTE_PLAN` on an init container or on a container without cards asks for nothing (admission refuses it there
  rather than ignore it).

The job comes from a client, so nothing here raises: a part of the wrong shape reads as absent, and
`JobFacts.problems` says what was read that way. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from planner import read_quantity
from webhook.common.names import (
    NPU_PODS_ANNOTATION,
    RANK_TABLE_WRITER_ANNOTATION,
    RING_LABEL,
    RINGROUTE_WRITER,
    ROUTE_PLAN_ANNOTATION,
    ROUTE_PLAN_ENV,
    VOLCANO_PLUGIN_WRITER,
)
from webhook.common.settings import AcceleratorProfile, Settings

EMPTY: Mapping[str, Any] = {}

# -- JSON of any shape --------------------------------------------------------------------------------------------


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


def as_str(value: Any) -> str | None:
    """`value` if it is a string, else None."""
    return value if isinstance(value, str) else None


def as_int(value: Any) -> int | None:
    """`value` if it is a JSON integer (not a boolean), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# -- the rules ------------------------------------------------------------------------------------------------------


def is_true(value: Any) -> bool:
    """The one reading of "true": the text `true` in any letter case, surrounding whitespace ignored."""
    return isinstance(value, str) and value.strip().lower() == "true"


def is_boolean_text(value: Any) -> bool:
    """`true` or `false` as `is_true` reads them."""
    return isinstance(value, str) and value.strip().lower() in ("true", "false")


def card_count(value: Any) -> int | str:
    """The whole number of cards a resource quantity asks for (`8`, `"8"`, `"8000m"` and `"8e0"` are 8), or a
    sentence saying why it is not one (a fraction, a negative count, not a quantity). The grammar is the planner's
    (`planner.read_quantity`: ASCII digits, as the API machinery reads them), so every reader counts alike."""
    if type(value) is str and 0 < len(value) <= 18 and value.isascii() and value.isdigit():
        return int(value)  # the common case, without building a Fraction
    amount = read_quantity(value)
    if isinstance(amount, str):
        return amount
    if amount < 0:
        return "must not be negative"
    if amount.denominator != 1:
        return "must be a whole number (the device plugin allocates whole cards)"
    return amount.numerator


def positive_count(text: Any) -> int | None:
    """A count written by admission ("6"); None for anything that is not a plain positive ASCII integer."""
    if not isinstance(text, str) or not (0 < len(text) <= 6 and text.isascii() and text.isdecimal()):
        return None
    value = int(text)
    return value if value > 0 else None


# -- facts ------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NpuContainer:
    """A container or init container that names the profile's resource with a quantity other than zero."""

    index: int
    """Position in `containers` (or `initContainers`)."""
    init: bool
    request: Any
    """The quantity in requests as written (None when absent)."""
    limit: Any
    """The quantity in limits as written (None when absent)."""
    cards: int | None
    """Cards it gets: limits win (requests default to them); None when that quantity is not a whole count."""
    cards_problem: str | None
    """Why `cards` is None."""


RequestPlace = Literal["job", "template", "container", "init-container"]
"""Where a route-planning request is written: the Job's annotation, a pod template's (or pod's) annotation, a
container's env, an init container's env."""


@dataclass(frozen=True, slots=True)
class RoutePlanRequest:
    """A place that mentions route planning: the annotation, or a container's `ROUTE_PLAN`."""

    place: RequestPlace
    path: str
    """Field path, e.g. `spec.tasks[0].template.spec.initContainers[0].env[2]`."""
    value: str | None
    """The literal text (None for a `valueFrom` env var, or a value that is not a string)."""
    counts: bool
    """A place ringroute reads (see the module docstring); the others ask for nothing."""

    @property
    def true(self) -> bool:
        """The value reads as true."""
        return is_true(self.value)


@dataclass(frozen=True, slots=True)
class TemplateFacts:
    """A pod template (or a pod made from one) as every service reads it."""

    npu_containers: tuple[NpuContainer, ...]
    """Containers, then init containers, that name the resource with a quantity other than zero."""
    route_plan_requests: tuple[RoutePlanRequest, ...]
    npu_pods: int | None
    """The job's NPU pods as admission wrote them on the template (`ringroute.io/npu-pods`), if readable."""

    @property
    def npu(self) -> bool:
        """Its pods use the accelerator: a regular container asks for cards."""
        return any(not c.init for c in self.npu_containers)

    @property
    def cards_per_pod(self) -> int | None:
        """Cards one pod takes (sum over its regular NPU containers); None when a count is not whole."""
        total = 0
        for container in self.npu_containers:
            if container.init:
                continue
            if container.cards is None:
                return None
            total += container.cards
        return total

    @property
    def route_planned(self) -> bool:
        """The template itself asks for route planning."""
        return any(r.counts and r.true for r in self.route_plan_requests)


NO_TEMPLATE = TemplateFacts((), (), None)


@dataclass(frozen=True, slots=True)
class TaskFacts:
    """One entry of `spec.tasks`."""

    index: int
    name: str
    """The task's name as Volcano names it (its mutating webhook names an unnamed task `default<index>`)."""
    replicas: int
    """Pods of this task (missing or invalid counts as 0, as Volcano makes none)."""
    template: TemplateFacts
    problems: tuple[str, ...] = ()
    """What of the task was read as absent because of its shape, `path: what` each."""

    @property
    def npu(self) -> bool:
        """Its pods use the accelerator."""
        return self.template.npu


@dataclass(frozen=True, slots=True)
class JobFacts:
    """A Volcano Job as admission, the controller and the extender read it."""

    name: str | None
    namespace: str | None
    uid: str | None
    version: str | None
    """`status.version` (Volcano bumps it when it restarts the job), as text."""
    profile_label: str | None
    """The `ring-controller.cce` label value, when it is a string."""
    profile: AcceleratorProfile | None
    """The profile it selects; None for an unknown value."""
    tasks: tuple[TaskFacts, ...]
    """Every entry of `spec.tasks`, in order (an entry that is not an object reads as an empty task)."""
    route_plan_requests: tuple[RoutePlanRequest, ...]
    """Every place that mentions route planning: the Job's annotation, then the templates' places in task order."""
    table_writer: str
    """Who writes the rank table, as `ringroute.io/rank-table-writer` records it (missing: ringroute)."""
    deleting: bool
    """`metadata.deletionTimestamp` is set."""
    problems: tuple[str, ...] = ()
    """What was read as absent because of its shape, `path: what` each."""

    @property
    def route_planned(self) -> bool:
        """Route planning is asked for at a place ringroute reads."""
        return any(r.counts and r.true for r in self.route_plan_requests)

    @property
    def npu_tasks(self) -> tuple[TaskFacts, ...]:
        """Tasks whose pods use the accelerator."""
        return tuple(t for t in self.tasks if t.npu)

    @property
    def npu_pods(self) -> int:
        """NPU pods of the whole job (the gang)."""
        return sum(t.replicas for t in self.tasks if t.npu)

    @property
    def task_order(self) -> tuple[str, ...]:
        """Task names in `spec.tasks` order: pod-index order of the rank table goes task by task."""
        return tuple(t.name for t in self.tasks)

    @property
    def configmap_name(self) -> str | None:
        """The job's rank-table ConfigMap (None without a name or a known profile)."""
        return self.profile.configmap_name(self.name) if self.profile is not None and self.name else None

    @property
    def rank_table_profile(self) -> AcceleratorProfile | None:
        """The profile of a job whose rank table ringroute's controller writes; None when it writes none: a job
        being deleted, of an unknown label value, without NPU pods, or whose table the vendor's Volcano plugin
        writes (`ringroute.io/rank-table-writer: volcano-plugin`)."""
        if self.deleting or self.table_writer == VOLCANO_PLUGIN_WRITER or self.npu_pods == 0:
            return None
        return self.profile


@dataclass(frozen=True, slots=True)
class PodFacts:
    """A pod of a Volcano Job as the extender reads it: the same reading as its task's template."""

    profile_label: str | None
    profile: AcceleratorProfile | None
    template: TemplateFacts

    @property
    def npu(self) -> bool:
        """A pod of an NPU task of a known profile."""
        return self.profile is not None and self.template.npu

    @property
    def route_planned(self) -> bool:
        """The pod asks for route planning (annotation, or ROUTE_PLAN on its NPU container)."""
        return self.template.route_planned


# -- reading --------------------------------------------------------------------------------------------------------


def _no_cards(quantity: Any) -> bool:
    return quantity is None or card_count(quantity) == 0


def _npu_container(container: Mapping[str, Any], index: int, init: bool, resource: str) -> NpuContainer | None:
    resources = container.get("resources")
    if not resources:
        return None
    resources = as_mapping(resources)
    request = as_mapping(resources.get("requests")).get(resource)
    limit = as_mapping(resources.get("limits")).get(resource)
    if _no_cards(request) and _no_cards(limit):
        return None  # absent, or "0": the device plugin allocates no card
    cards = card_count(limit if limit is not None else request)
    if isinstance(cards, str):
        return NpuContainer(index, init, request, limit, None, cards)
    return NpuContainer(index, init, request, limit, cards, None)


def template_facts(template: Any, resource_name: str | None, field: str = "") -> TemplateFacts:
    """Read a pod template, or a pod (`metadata` and `spec` alike), whose NPU resource is `resource_name` (None: an
    unknown profile, no NPU containers); `field` prefixes the paths it names (`spec.tasks[0].template.`)."""
    template = as_mapping(template)
    spec = as_mapping(template.get("spec"))
    npu: list[NpuContainer] = []
    requests: list[RoutePlanRequest] = []
    for key, init in (("containers", False), ("initContainers", True)):
        listed = spec.get(key)
        if not listed:
            continue
        for index, container in enumerate(as_mappings(listed)):
            found = _npu_container(container, index, init, resource_name) if resource_name else None
            if found is not None:
                npu.append(found)
            env = container.get("env")
            if not env:
                continue
            last: tuple[int, Any] | None = None
            for position, entry in enumerate(as_mappings(env)):
                if entry.get("name") == ROUTE_PLAN_ENV:
                    last = (position, entry.get("value"))  # kubelet gives the process the last one
            if last is not None:
                requests.append(
                    RoutePlanRequest(
                        "init-container" if init else "container",
                        f"{field}spec.{key}[{index}].env[{last[0]}]",
                        as_str(last[1]),
                        found is not None and not init,
                    )
                )
    annotations = as_mapping(as_mapping(template.get("metadata")).get("annotations"))
    if ROUTE_PLAN_ANNOTATION in annotations:
        path = f"{field}metadata.annotations[{ROUTE_PLAN_ANNOTATION}]"
        value = as_str(annotations[ROUTE_PLAN_ANNOTATION])
        requests.insert(0, RoutePlanRequest("template", path, value, any(not c.init for c in npu)))
    if not npu and not requests and NPU_PODS_ANNOTATION not in annotations:
        return NO_TEMPLATE
    return TemplateFacts(tuple(npu), tuple(requests), positive_count(annotations.get(NPU_PODS_ANNOTATION)))


def task_facts(job: Any, resource_name: str | None) -> tuple[TaskFacts, ...]:
    """Every entry of a Job's `spec.tasks`, NPU containers read by `resource_name` (`job_facts` takes the
    profile's; `ringroute plan --job` the one of the profile it plans with)."""
    tasks = []
    for index, raw in enumerate(as_list(as_mapping(as_mapping(job).get("spec")).get("tasks"))):
        field = f"spec.tasks[{index}]"
        problems = [] if isinstance(raw, Mapping) else [f"{field}: not an object"]
        task = as_mapping(raw)
        replicas = task.get("replicas")
        count = as_int(replicas)
        if replicas is not None and (count is None or count < 0):
            problems.append(f"{field}.replicas: not a count of pods ({replicas!r}); read as 0")
        template = template_facts(task.get("template"), resource_name, f"{field}.template.")
        problems += [
            f"{field}.template.spec.{'initContainers' if c.init else 'containers'}[{c.index}].resources: "
            f"{c.cards_problem}"
            for c in template.npu_containers
            if c.cards_problem is not None
        ]
        name = as_str(task.get("name")) or f"default{index}"
        tasks.append(TaskFacts(index, name, max(count or 0, 0), template, tuple(problems)))
    return tuple(tasks)


def _profile(labels: Mapping[str, Any], settings: Settings) -> tuple[str | None, AcceleratorProfile | None]:
    label = as_str(labels.get(RING_LABEL))
    return label, settings.profile(label) if label is not None else None


def job_facts(job: Any, settings: Settings) -> JobFacts:
    """Read a Volcano Job (any JSON value); never raises."""
    problems: list[str] = []
    job = as_mapping(job)
    if not isinstance(job.get("metadata", EMPTY), Mapping):
        problems.append("metadata: not an object")
    metadata = as_mapping(job.get("metadata"))
    label, profile = _profile(as_mapping(metadata.get("labels")), settings)
    annotations = as_mapping(metadata.get("annotations"))
    listed = as_mapping(job.get("spec")).get("tasks")
    if listed is not None and not isinstance(listed, list):
        problems.append("spec.tasks: not a list")
    tasks = task_facts(job, profile.resource_name if profile is not None else None)
    requests: list[RoutePlanRequest] = []
    if ROUTE_PLAN_ANNOTATION in annotations:
        path = f"metadata.annotations[{ROUTE_PLAN_ANNOTATION}]"
        requests.append(RoutePlanRequest("job", path, as_str(annotations[ROUTE_PLAN_ANNOTATION]), True))
    for task in tasks:
        requests += task.template.route_plan_requests
        problems += task.problems
    version = as_mapping(job.get("status")).get("version")
    return JobFacts(
        name=as_str(metadata.get("name")) or None,
        namespace=as_str(metadata.get("namespace")) or None,
        uid=as_str(metadata.get("uid")) or None,
        version=str(version) if isinstance(version, (int, str)) and not isinstance(version, bool) else None,
        profile_label=label,
        profile=profile,
        tasks=tasks,
        route_plan_requests=tuple(requests),
        table_writer=as_str(annotations.get(RANK_TABLE_WRITER_ANNOTATION)) or RINGROUTE_WRITER,
        deleting=bool(metadata.get("deletionTimestamp")),
        problems=tuple(problems),
    )


def pod_facts(pod: Any, settings: Settings) -> PodFacts:
    """Read a pod of a Volcano Job (any JSON value, or the part of one the extender decodes); never raises."""
    pod = as_mapping(pod)
    label, profile = _profile(as_mapping(as_mapping(pod.get("metadata")).get("labels")), settings)
    return PodFacts(label, profile, template_facts(pod, profile.resource_name if profile is not None else None))


__all__ = [
    "EMPTY",
    "JobFacts",
    "NO_TEMPLATE",
    "NpuContainer",
    "PodFacts",
    "RequestPlace",
    "RoutePlanRequest",
    "TaskFacts",
    "TemplateFacts",
    "as_int",
    "as_list",
    "as_mapping",
    "as_mappings",
    "as_str",
    "card_count",
    "is_boolean_text",
    "is_true",
    "job_facts",
    "pod_facts",
    "positive_count",
    "task_facts",
    "template_facts",
]
