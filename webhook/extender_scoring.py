"""Predicate and scoring logic of the Volcano scheduler extender (no HTTP here).

What is judged: only tasks whose pod carries the `ring-controller.cce` label of a known accelerator profile.
Everything else gets an empty predicate status and no scores, decided from the task alone.

- predicate: a route-planned task (container env `ROUTE_PLAN=true`, or pod annotation
  `ringroute.io/route-plan: "true"`) fits a node only when every NPU card of the profile's resource on it is free.
  "Free" is Volcano's future idle: Idle + Releasing - Pipelined, so a job may be pipelined onto a node whose
  previous pods are terminating.
- prioritize: tiers of leaf switches (tier-1 domains of the node topology), best first:
  1. 90-100: the leaf that already hosts tasks of the same job (more hosted tasks, higher);
  2. 60-80: a leaf with enough fitting nodes for the rest of the job (tightest fit highest, +5 in a spine
     domain that hosts the job);
  3. 40-55: a leaf in a spine domain (tier-2) that already hosts the job (more room, higher);
  4. 0-35: any other leaf (more room, higher; +15 when its spine domain has room for the rest of the job).
  Nodes without topology labels score 0.

Where the job's other tasks are: the nodes in the payload list their `Tasks`; Volcano only passes nodes that passed
the predicates to prioritize, so the nodes that already hold the job are usually missing there. The extender
therefore remembers, per job, which nodes it saw holding the job's tasks in any call (predicate calls see every
node, including the ones allocated earlier in the same session) and what `onSessionOpen` reported.

Job size: from `onSessionOpen` (the job's NPU tasks that are not terminating, else `MinAvailable`). Without it the
size is unknown, tier 2 is skipped and leaves with more room win, which still packs the job.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgspec
import orjson

from webhook.extender_types import (
    CODE_SUCCESS,
    CODE_UNSCHEDULABLE,
    CODE_UNSCHEDULABLE_AND_UNRESOLVABLE,
    FastNodeInfo,
    FastPrioritizeRequest,
    PredicateResponse,
    PrioritizeResponse,
)
from webhook.settings import RING_LABEL, ROUTE_PLAN_ANNOTATION, ROUTE_PLAN_ENV, AcceleratorProfile, Settings

log = logging.getLogger(__name__)

GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
"""Pod annotation naming the PodGroup; Volcano's job id is `<namespace>/<group name>`."""
JOB_NAME_LABEL = "volcano.sh/job-name"
"""Pod label naming the Volcano Job (fallback job id when the group annotation is missing)."""

# TaskStatus bits of tasks that no longer count towards a job's size or placement.
_RELEASING, _SUCCEEDED, _FAILED = 64, 128, 256
_GONE_STATUSES = frozenset({_RELEASING, _SUCCEEDED, _FAILED})

JOB_MEMORY_TTL_S = 900.0
"""Default of `extender.jobMemoryTtlS`: jobs not seen in any call for this long are forgotten (bounds memory
when onSessionOpen is not configured)."""

MAX_REMEMBERED_NODES = 200_000
"""Topology cache entries kept before the cache is cleared and rebuilt from the next payloads."""


def fits() -> PredicateResponse:
    """The predicate answer for "no objection"."""
    return {"status": "", "code": CODE_SUCCESS}


class PayloadError(ValueError):
    """The request body is not a Volcano extender payload; the message names the field (HTTP 400)."""


# --------------------------------------------------------------------------------------------- lenient field access


def field(obj: Mapping[str, Any] | None, go_name: str) -> Any:
    """A field of a Volcano struct by its Go name, also accepted in lower camel case and lower case; None if absent."""
    if not obj:
        return None
    value = obj.get(go_name)
    if value is None:
        value = obj.get(go_name[0].lower() + go_name[1:])
        if value is None:
            value = obj.get(go_name.lower())
    return value


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    """An optional object: null reads as empty; anything but an object is a payload error."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PayloadError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _milli_cards(resource: Any, resource_name: str, where: str) -> float:
    """Milli-units of one scalar resource in a Volcano Resource (0 when absent)."""
    if not resource:
        return 0.0
    if not isinstance(resource, Mapping):
        raise PayloadError(f"{where}: expected a Resource object, got {type(resource).__name__}")
    scalars = field(resource, "ScalarResources")
    if not scalars:
        return 0.0
    value = scalars.get(resource_name)
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PayloadError(f"{where}.ScalarResources[{resource_name!r}]: expected a number, got {value!r}")
    return float(value)


def _quantity_cards(value: Any) -> float:
    """Cards in a Kubernetes quantity string of an extended resource ("8", "8000m"); 0 when unreadable."""
    text = str(value).strip()
    try:
        if text.endswith("m"):
            return float(text[:-1]) / 1000.0
        return float(text)
    except ValueError:
        return 0.0


def _cards(milli: float) -> int:
    """Whole cards in a milli-unit amount (8000 -> 8; tolerate float noise)."""
    return int(milli / 1000.0 + 1e-6) if milli > 0 else 0


# ------------------------------------------------------------------------------------------------------- task view


@dataclass(frozen=True, slots=True)
class TaskView:
    """What the extender needs to know about the task being scheduled."""

    uid: str
    job: str
    """Volcano job id (`<namespace>/<podgroup>`), the key that NodeInfo Tasks carry too."""
    name: str
    profile: AcceleratorProfile | None
    """Profile selected by the pod's `ring-controller.cce` label; None when the task is not judged."""
    route_planned: bool
    cards_requested: int


def read_task(raw: Any, settings: Settings) -> TaskView:
    """Convert a TaskInfo to a TaskView (raises PayloadError when it is not an object)."""
    if not isinstance(raw, Mapping):
        raise PayloadError(f"task: expected a TaskInfo object, got {type(raw).__name__}")
    pod = _mapping(field(raw, "Pod"), "task.Pod")
    meta = _mapping(pod.get("metadata"), "task.Pod.metadata")
    labels = _mapping(meta.get("labels"), "task.Pod.metadata.labels")
    annotations = _mapping(meta.get("annotations"), "task.Pod.metadata.annotations")
    name = str(field(raw, "Name") or meta.get("name") or "")
    uid = str(field(raw, "UID") or meta.get("uid") or "")
    namespace = str(field(raw, "Namespace") or meta.get("namespace") or "")
    job = str(field(raw, "Job") or "")
    if not job:
        group = annotations.get(GROUP_NAME_ANNOTATION) or labels.get(JOB_NAME_LABEL)
        job = f"{namespace}/{group}" if group else ""
    label_value = labels.get(RING_LABEL)
    profile = settings.profile(str(label_value)) if label_value is not None else None
    if profile is None:
        return TaskView(uid, job, name, None, False, 0)
    requested = _milli_cards(field(raw, "Resreq"), profile.resource_name, "task.Resreq")
    if requested <= 0:
        requested = _milli_cards(field(raw, "InitResreq"), profile.resource_name, "task.InitResreq")
    return TaskView(
        uid=uid,
        job=job,
        name=name,
        profile=profile,
        route_planned=_route_planned(pod, annotations),
        cards_requested=_cards(requested),
    )


def _route_planned(pod: Mapping[str, Any], annotations: Mapping[str, Any]) -> bool:
    """Env ROUTE_PLAN=true on any container, or the route-plan annotation (copied from the Job) on the pod."""
    if str(annotations.get(ROUTE_PLAN_ANNOTATION, "")).strip().lower() == "true":
        return True
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        return False
    for container in spec.get("containers") or ():
        if not isinstance(container, Mapping):
            continue
        for env in container.get("env") or ():
            if (
                isinstance(env, Mapping)
                and env.get("name") == ROUTE_PLAN_ENV
                and str(env.get("value", "")).strip().lower() == "true"
            ):
                return True
    return False


def is_judged(task: TaskView) -> bool:
    """Whether the extender has an opinion on this task at all."""
    return task.profile is not None


# ------------------------------------------------------------------------------------------------- node topology

Path = tuple[str, ...]
PathReader = Callable[[Sequence[Mapping[str, Any]]], Mapping[str, Path]]
"""Node objects -> domain path per node name (tier 1 first); nodes without topology labels are left out."""

# Recognised label families, tier 1 first, in the order the planner tries them (planner._topology_sources
# DEFAULT_LABEL_KEYS lists them top-most first).
DEFAULT_LABEL_FAMILIES: tuple[tuple[str, ...], ...] = (
    ("volcano.sh/hypernode", "volcano.sh/hypercluster"),
    ("volcano.sh/tor",),
    ("network.topology.nvidia.com/leaf", "network.topology.nvidia.com/spine", "network.topology.nvidia.com/core"),
    tuple(f"fabric.topograph.run/tier-{n}" for n in range(1, 5)),
)


def label_path_reader(label_keys: Sequence[str] = ()) -> PathReader:
    """Read each node's path from its own labels: `label_keys` (top-most tier first, as in TopologySettings) or
    the recognised families. A path is the node's values from tier 1 up, stopping at the first missing key.

    Per node on purpose: the extender sees changing subsets of nodes, while the planner's
    `topology_from_nodes` normalises a whole-cluster view (it drops a top tier that has one value on all the
    nodes it is given, so a batch of nodes under one spine would lose the spine tier).
    """
    families: tuple[tuple[str, ...], ...] = (tuple(reversed(label_keys)),) if label_keys else DEFAULT_LABEL_FAMILIES

    def read(nodes: Sequence[Mapping[str, Any]]) -> Mapping[str, Path]:
        paths: dict[str, Path] = {}
        for node in nodes:
            meta = node.get("metadata") or {}
            name = meta.get("name")
            labels = meta.get("labels") or {}
            if not name:
                continue
            for family in families:
                path: list[str] = []
                for key in family:
                    value = labels.get(key)
                    if not value:
                        break
                    path.append(str(value))
                if path:
                    paths[str(name)] = tuple(path)
                    break
        return paths

    return read


def default_path_reader(settings: Settings) -> PathReader:
    """The label reader for the configured topology label keys (settings.topology.label_keys)."""
    return label_path_reader(settings.topology.label_keys)


# --------------------------------------------------------------------------------------------------- session state


class ExtenderState:
    """What the extender remembers between calls: node paths, where each job's tasks are, job sizes.

    One instance per process; handlers run on one event loop, so no locking.
    """

    def __init__(self, settings: Settings, path_reader: PathReader | None = None) -> None:
        self.settings = settings
        self.path_reader: PathReader = path_reader or default_path_reader(settings)
        # node name -> (label items, path or None); label items are the cache key (Go sorts map keys).
        self._paths: dict[str, tuple[tuple[tuple[str, Any], ...], Path | None]] = {}
        # job -> node name -> task uids of the job seen on that node
        self._placed: dict[str, dict[str, frozenset[str]]] = {}
        self._touched: dict[str, float] = {}
        self.job_sizes: dict[str, int] = {}
        """NPU tasks per job, from onSessionOpen."""
        self._last_prune = time.monotonic()

    # -- topology

    def paths_of(self, nodes: Iterable[tuple[str, Mapping[str, str] | None]]) -> dict[str, Path | None]:
        """Domain path per node name for (name, node labels) pairs, reading labels only for nodes that changed."""
        out: dict[str, Path | None] = {}
        misses: list[tuple[str, Mapping[str, str] | None, tuple[tuple[str, Any], ...]]] = []
        cache = self._paths
        for name, labels in nodes:
            key = tuple(labels.items()) if labels else ()
            hit = cache.get(name)
            if hit is not None and hit[0] == key:
                out[name] = hit[1]
            else:
                misses.append((name, labels, key))
        if misses:
            if len(cache) + len(misses) > MAX_REMEMBERED_NODES:
                cache.clear()
            objects = [{"metadata": {"name": name, "labels": dict(labels or {})}} for name, labels, _ in misses]
            read = self.path_reader(objects)
            for name, _, key in misses:
                path = read.get(name)
                cache[name] = (key, path)
                out[name] = path
        return out

    def cached_path(self, node_name: str) -> Path | None:
        """The last known path of a node (None when never seen or unlabelled)."""
        hit = self._paths.get(node_name)
        return hit[1] if hit else None

    # -- job placement memory

    def observe(self, job: str, node_name: str, uids: frozenset[str]) -> None:
        """Record which tasks of `job` a node holds now (an empty set forgets the node for that job)."""
        placed = self._placed.get(job)
        if placed is None:
            if not uids:
                return
            placed = self._placed[job] = {}
        if uids:
            placed[node_name] = uids
        else:
            placed.pop(node_name, None)
        self._touched[job] = time.monotonic()

    def observe_nodes(self, job: str, records: Iterable[NodeRecord]) -> None:
        """`observe` for many nodes, touching only nodes that hold the job now or did before."""
        placed = self._placed.get(job)
        for record in records:
            if record.job_uids or (placed is not None and record.name in placed):
                self.observe(job, record.name, record.job_uids)
                placed = self._placed.get(job)

    def placed_nodes(self, job: str, exclude_uid: str = "") -> dict[str, int]:
        """Tasks of `job` per node name, leaving out one task (the one being scheduled)."""
        placed = self._placed.get(job)
        if not placed:
            return {}
        self._touched[job] = time.monotonic()
        counts: dict[str, int] = {}
        for node, uids in placed.items():
            count = len(uids) - (1 if exclude_uid in uids else 0)
            if count > 0:
                counts[node] = count
        return counts

    def prune(self, now: float | None = None) -> None:
        """Forget jobs untouched for `settings.extender.job_memory_ttl_s`."""
        now = time.monotonic() if now is None else now
        self._last_prune = now
        ttl = self.settings.extender.job_memory_ttl_s
        stale = [job for job, at in self._touched.items() if now - at > ttl]
        for job in stale:
            self._touched.pop(job, None)
            self._placed.pop(job, None)
            self.job_sizes.pop(job, None)

    def maybe_prune(self) -> None:
        """Prune at most once a minute."""
        now = time.monotonic()
        if now - self._last_prune > 60.0:
            self.prune(now)

    # -- sessions

    def open_session(self, body: Any) -> dict[str, int]:
        """Reset job memory from an OnSessionOpenRequest: job sizes, where jobs' tasks run, node paths.

        Returns counts for the log line. Raises PayloadError for a body that is not an object.
        """
        body = _mapping(body, "body")
        jobs = _mapping(field(body, "Jobs"), "Jobs")
        nodes = _mapping(field(body, "Nodes"), "Nodes")
        self._placed.clear()
        self._touched.clear()
        self.job_sizes.clear()
        now = time.monotonic()
        node_pairs: list[tuple[str, Mapping[str, str] | None]] = []
        for key, raw_node in nodes.items():
            node_info = _mapping(raw_node, f"Nodes[{key!r}]")
            name = str(field(node_info, "Name") or key)
            node_pairs.append((name, _labels_of(_mapping(field(node_info, "Node"), f"Nodes[{key!r}].Node"))))
        self.paths_of(node_pairs)
        for job_id, raw_job in jobs.items():
            job_info = _mapping(raw_job, f"Jobs[{job_id!r}]")
            tasks = _mapping(field(job_info, "Tasks"), f"Jobs[{job_id!r}].Tasks")
            size = 0
            placed: dict[str, set[str]] = {}
            ring = False
            for task_key, raw_task in tasks.items():
                task = _mapping(raw_task, f"Jobs[{job_id!r}].Tasks[{task_key!r}]")
                view = read_task(task, self.settings)
                if view.profile is None:
                    continue
                ring = True
                if field(task, "Status") in _GONE_STATUSES or view.cards_requested <= 0:
                    continue
                size += 1
                node_name = field(task, "NodeName")
                if node_name:
                    placed.setdefault(str(node_name), set()).add(view.uid or str(task_key))
            if not ring:
                continue
            job = str(job_id)
            min_available = field(job_info, "MinAvailable")
            if size == 0 and isinstance(min_available, int) and min_available > 0:
                size = min_available
            if size:
                self.job_sizes[job] = size
            if placed:
                self._placed[job] = {node: frozenset(uids) for node, uids in placed.items()}
            self._touched[job] = now
        return {"jobs": len(self.job_sizes), "placed_jobs": len(self._placed), "nodes": len(node_pairs)}


def _labels_of(node: Any) -> Mapping[str, str] | None:
    """metadata.labels of a v1 Node object (None when absent)."""
    if not isinstance(node, Mapping):
        return None
    meta = node.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else None


# -------------------------------------------------------------------------------------------------------- nodes


@dataclass(frozen=True, slots=True)
class NodeCards:
    """NPU cards of one profile resource on a node."""

    name: str
    total: int
    free: int
    """Future idle: Idle + Releasing - Pipelined."""


class NodeRecord(NamedTuple):
    """One candidate node as scoring sees it, whichever decoder produced it (a tuple: cheap to build 1,000 of)."""

    name: str
    total: int
    free: int
    labels: Mapping[str, str] | None
    job_uids: frozenset[str]
    """Tasks of the job being scheduled that the node holds."""


def node_cards(raw: Mapping[str, Any], resource_name: str, where: str) -> NodeCards:
    """Cards of `resource_name` on a NodeInfo (Allocatable, else the Node's status.allocatable)."""
    node = field(raw, "Node")
    name = field(raw, "Name")
    if not name and isinstance(node, Mapping):
        name = (node.get("metadata") or {}).get("name")
    if not name:
        raise PayloadError(f"{where}.Name: missing; every NodeInfo needs the node name")
    total_milli = _milli_cards(field(raw, "Allocatable"), resource_name, f"{where}.Allocatable")
    if total_milli <= 0 and isinstance(node, Mapping):
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        total_milli = _quantity_cards(allocatable.get(resource_name, 0)) * 1000.0
    idle = field(raw, "Idle")
    # Without Idle the extender cannot tell; Volcano's own resource check still applies.
    free_milli = total_milli if idle is None else _milli_cards(idle, resource_name, f"{where}.Idle")
    free_milli += _milli_cards(field(raw, "Releasing"), resource_name, f"{where}.Releasing")
    free_milli -= _milli_cards(field(raw, "Pipelined"), resource_name, f"{where}.Pipelined")
    total = _cards(total_milli)
    return NodeCards(str(name), total, min(total, _cards(free_milli)))


def _job_uids_on(raw: Mapping[str, Any], job: str) -> frozenset[str]:
    """UIDs of the tasks of `job` in a NodeInfo's Tasks map (terminating ones left out)."""
    tasks = field(raw, "Tasks")
    if not tasks or not isinstance(tasks, Mapping):
        return frozenset()
    found: list[str] = []
    for key, task in tasks.items():
        if not isinstance(task, Mapping):
            continue
        task_job = task.get("Job")
        if task_job is None:
            task_job = field(task, "Job")
        if task_job != job:
            continue
        status = task.get("Status")
        if status is None:
            status = field(task, "Status")
        if status not in _GONE_STATUSES:
            found.append(str(field(task, "UID") or key))
    return frozenset(found)


def node_record(raw: Any, resource_name: str, job: str, where: str) -> NodeRecord:
    """A NodeRecord from a NodeInfo decoded as plain JSON (lenient about key case and nulls)."""
    if not isinstance(raw, Mapping):
        raise PayloadError(f"{where}: expected a NodeInfo object, got {type(raw).__name__}")
    cards = node_cards(raw, resource_name, where)
    uids = _job_uids_on(raw, job) if job else frozenset()
    return NodeRecord(cards.name, cards.total, cards.free, _labels_of(field(raw, "Node")), uids)


def fast_node_records(nodes: Sequence[FastNodeInfo], resource_name: str, job: str) -> list[NodeRecord] | None:
    """NodeRecords from the fast decoder, or None when the payload does not use Volcano's key names (then the
    lenient reader must look at it)."""
    records: list[NodeRecord] = []
    append = records.append
    gone = _GONE_STATUSES
    for info in nodes:
        name = info.Name
        if not name or (info.Idle is None and info.Allocatable is None):
            return None
        allocatable = info.Allocatable.ScalarResources if info.Allocatable else None
        total_milli = allocatable.get(resource_name, 0.0) if allocatable else 0.0
        if total_milli <= 0:
            return None  # the lenient reader also looks at the Node's status.allocatable
        idle = info.Idle.ScalarResources if info.Idle else None
        free_milli = total_milli if info.Idle is None else (idle.get(resource_name, 0.0) if idle else 0.0)
        if info.Releasing is not None and info.Releasing.ScalarResources:
            free_milli += info.Releasing.ScalarResources.get(resource_name, 0.0)
        if info.Pipelined is not None and info.Pipelined.ScalarResources:
            free_milli -= info.Pipelined.ScalarResources.get(resource_name, 0.0)
        uids: frozenset[str] = frozenset()
        if job and info.Tasks:
            found = [t.UID or key for key, t in info.Tasks.items() if t.Job == job and t.Status not in gone]
            if found:
                uids = frozenset(found)
        meta = info.Node.metadata if info.Node else None
        total = _cards(total_milli)
        append(NodeRecord(name, total, min(total, _cards(free_milli)), meta.labels if meta else None, uids))
    return records


_FAST_PRIORITIZE = msgspec.json.Decoder(FastPrioritizeRequest)


def decode_json(body: bytes) -> Any:
    """Plain JSON decode; PayloadError when the body is not JSON."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise PayloadError(f"body: not JSON ({exc})") from None


# ---------------------------------------------------------------------------------------------------- predicate


def predicate(task_raw: Any, node_raw: Any, settings: Settings, state: ExtenderState) -> PredicateResponse:
    """Full-node predicate for route-planned ringroute tasks; every other task fits (empty status)."""
    return predicate_for(read_task(task_raw, settings), node_raw, state)


def predicate_for(task: TaskView, node_raw: Any, state: ExtenderState) -> PredicateResponse:
    """`predicate` for an already converted task."""
    if task.profile is None:
        return fits()
    if not isinstance(node_raw, Mapping):
        raise PayloadError(f"node: expected a NodeInfo object, got {type(node_raw).__name__}")
    cards = node_cards(node_raw, task.profile.resource_name, "node")
    if task.job:
        uids = _job_uids_on(node_raw, task.job)
        state.observe(task.job, cards.name, uids)
        if uids:
            # Prioritize rarely sees this node again (it is full now), so learn its leaf here.
            state.paths_of([(cards.name, _labels_of(field(node_raw, "Node")))])
        state.maybe_prune()
    if not task.route_planned:
        return fits()
    resource = task.profile.resource_name
    if cards.total <= 0:
        return {
            "status": f"node {cards.name} has no {resource} cards; route-planned job {task.job or task.name} "
            f"needs whole NPU nodes",
            "code": CODE_UNSCHEDULABLE_AND_UNRESOLVABLE,
        }
    if cards.free < cards.total:
        return {
            "status": f"node {cards.name} has {cards.free} of {cards.total} {resource} free; route-planned job "
            f"{task.job or task.name} takes whole nodes only (all {cards.total} cards free)",
            "code": CODE_UNSCHEDULABLE,
        }
    return fits()


# --------------------------------------------------------------------------------------------------- prioritize

SAME_LEAF = (90.0, 10.0)
LEAF_WITH_ROOM = (60.0, 15.0)
SAME_SPINE_BONUS = 5.0
SAME_SPINE = (40.0, 15.0)
OTHER = (0.0, 20.0)
OTHER_SPINE_ROOM_BONUS = 15.0


@dataclass(frozen=True, slots=True)
class JobContext:
    """What prioritize inferred about the task's job, for logs and tests."""

    size: int | None
    """NPU tasks of the job (None: unknown, no onSessionOpen data)."""
    placed: int
    """Tasks of the job already on nodes (the task being scheduled not counted)."""
    hosted_leaves: Mapping[str, int]
    hosted_spines: Mapping[str, int]

    @property
    def remaining(self) -> int | None:
        """Tasks still to place including this one (None when the size is unknown)."""
        if self.size is None:
            return None
        return max(1, self.size - self.placed)


def _no_scores() -> PrioritizeResponse:
    return {"nodeScore": {}, "errorMessage": ""}


def prioritize(task_raw: Any, nodes_raw: Any, settings: Settings, state: ExtenderState) -> PrioritizeResponse:
    """Scores 0-100 per node name for a ringroute task; an empty map (no preference) for any other task."""
    task = read_task(task_raw, settings)
    if task.profile is None:
        return _no_scores()
    if nodes_raw is None:
        nodes_raw = []
    if not isinstance(nodes_raw, list):
        raise PayloadError(f"nodes: expected a list of NodeInfo objects, got {type(nodes_raw).__name__}")
    scores, _ = score_nodes(task, nodes_raw, state)
    state.maybe_prune()
    return {"nodeScore": scores, "errorMessage": ""}


def prioritize_body(body: bytes, settings: Settings, state: ExtenderState) -> PrioritizeResponse:
    """`prioritize` straight from the request bytes: a fast decoder for Volcano's key names that skips the Pod
    objects, falling back to a plain decode and the lenient readers for anything else."""
    try:
        fast = _FAST_PRIORITIZE.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        fast = None
    if fast is not None and fast.nodes is not None and bytes(fast.task) != b"null":
        task = read_task(decode_json(bytes(fast.task)), settings)
        if task.profile is None:
            return _no_scores()
        records = fast_node_records(fast.nodes, task.profile.resource_name, task.job)
        if records is not None:
            scores, _ = score_records(task, records, state)
            state.maybe_prune()
            return {"nodeScore": scores, "errorMessage": ""}
    request = decode_json(body)
    if not isinstance(request, Mapping):
        raise PayloadError(f"body: expected a JSON object, got {type(request).__name__}")
    task_raw = request.get("task", request.get("Task"))
    if task_raw is None:
        raise PayloadError("task: missing; a Volcano extender request has 'task' at the top level")
    return prioritize(task_raw, request.get("nodes", request.get("Nodes")), settings, state)


def score_nodes(task: TaskView, nodes_raw: Sequence[Any], state: ExtenderState) -> tuple[dict[str, float], JobContext]:
    """Leaf-packing scores for a judged task over candidate NodeInfos (plain JSON), and the job context used."""
    assert task.profile is not None
    resource = task.profile.resource_name
    records = [node_record(raw, resource, task.job, f"nodes[{i}]") for i, raw in enumerate(nodes_raw)]
    return score_records(task, records, state)


def score_records(
    task: TaskView, records: Sequence[NodeRecord], state: ExtenderState
) -> tuple[dict[str, float], JobContext]:
    """Leaf-packing scores for a judged task over candidate NodeRecords, and the job context they were based on."""
    job = task.job
    full_node = task.route_planned or task.cards_requested <= 0
    if job:
        state.observe_nodes(job, records)
    paths = state.paths_of([(r.name, r.labels) for r in records])

    placed = state.placed_nodes(job, task.uid) if job else {}
    hosted_leaves: dict[str, int] = {}
    hosted_spines: dict[str, int] = {}
    for node_name, count in placed.items():
        path = paths.get(node_name) if node_name in paths else state.cached_path(node_name)
        if not path:
            continue
        hosted_leaves[path[0]] = hosted_leaves.get(path[0], 0) + count
        if len(path) > 1:
            hosted_spines[path[1]] = hosted_spines.get(path[1], 0) + count
    size = state.job_sizes.get(job) if job else None
    context = JobContext(size, sum(placed.values()), hosted_leaves, hosted_spines)
    need = context.remaining

    room: dict[str, int] = {}
    spine_room: dict[str, int] = {}
    for record in records:
        path = paths.get(record.name)
        fit = record.total > 0 and record.free >= record.total if full_node else record.free >= task.cards_requested
        if path and fit:
            room[path[0]] = room.get(path[0], 0) + 1
            if len(path) > 1:
                spine_room[path[1]] = spine_room.get(path[1], 0) + 1
    max_room = max(room.values(), default=1) or 1
    max_hosted = max(hosted_leaves.values(), default=1) or 1

    # Every node of a leaf scores the same, so score leaves once.
    leaf_scores: dict[Path, float] = {}
    scores: dict[str, float] = {}
    for record in records:
        path = paths.get(record.name)
        if not path:
            scores[record.name] = 0.0
            continue
        score = leaf_scores.get(path)
        if score is None:
            score = leaf_scores[path] = _leaf_score(
                path,
                room=room,
                spine_room=spine_room,
                hosted_leaves=hosted_leaves,
                hosted_spines=hosted_spines,
                need=need,
                max_room=max_room,
                max_hosted=max_hosted,
            )
        scores[record.name] = score
    return scores, context


def _leaf_score(
    path: Path,
    *,
    room: Mapping[str, int],
    spine_room: Mapping[str, int],
    hosted_leaves: Mapping[str, int],
    hosted_spines: Mapping[str, int],
    need: int | None,
    max_room: int,
    max_hosted: int,
) -> float:
    leaf = path[0]
    spine = path[1] if len(path) > 1 else None
    leaf_room = room.get(leaf, 0)
    hosted = hosted_leaves.get(leaf, 0)
    if hosted:
        base, span = SAME_LEAF
        score = base + span * hosted / max_hosted
    elif need is not None and leaf_room >= need:
        base, span = LEAF_WITH_ROOM
        slack = leaf_room - need
        score = base + span * (1.0 - slack / (max_room - need + 1))
        if spine is not None and hosted_spines.get(spine):
            score += SAME_SPINE_BONUS
    elif spine is not None and hosted_spines.get(spine):
        base, span = SAME_SPINE
        score = base + span * leaf_room / max_room
    else:
        base, span = OTHER
        score = base + span * leaf_room / max_room
        if need is not None and spine is not None and spine_room.get(spine, 0) >= need:
            score += OTHER_SPINE_ROOM_BONUS
    return round(score, 3)


__all__ = [
    "DEFAULT_LABEL_FAMILIES",
    "GROUP_NAME_ANNOTATION",
    "JOB_MEMORY_TTL_S",
    "ExtenderState",
    "JobContext",
    "NodeCards",
    "NodeRecord",
    "PathReader",
    "PayloadError",
    "TaskView",
    "decode_json",
    "default_path_reader",
    "fast_node_records",
    "field",
    "fits",
    "is_judged",
    "label_path_reader",
    "node_record",
    "node_cards",
    "predicate",
    "predicate_for",
    "prioritize",
    "prioritize_body",
    "read_task",
    "score_nodes",
    "score_records",
]
