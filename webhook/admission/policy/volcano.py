"""What Volcano's own admission refuses, decided from the job alone, so ringroute never admits such a job silently.

Mirrors `validateJobCreate` of vc-webhook-manager (`pkg/webhooks/admission/jobs/validate/admit_job.go` and
`util.go`, v1.7.0 through master) and, from v1.14, the `job-validation-policy` ValidatingAdmissionPolicy that took
over its basic checks. Not mirrored: the queue lookup (it needs the API server: a missing or closed queue, or a
non-leaf queue, is reported by Volcano only) and Kubernetes' own pod-template validation, which Volcano runs on
each task's template.

Volcano's mutating webhook runs before any validating webhook and fills `queue`, `maxRetry`, `minAvailable` and
task names; these checkers see the job after it, as Volcano's validating webhook does. A task without a name is
therefore judged by the name Volcano gives it (`default<index>`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.admission.jobview import JobView, TaskView, as_int, as_list, as_mapping, as_mappings, as_str
from webhook.admission.policy.naming import NAME_MAX, is_dns_label, is_dns_subdomain, is_qualified_name, task_name
from webhook.admission.policy.violation import Reason, Violation, quoted
from webhook.admission.policy.volcano_release import (
    HIERARCHICAL_QUEUES,
    POLICY_ACTIONS,
    POLICY_EVENTS,
    VALIDATING_ADMISSION_POLICY,
    accepts,
    configured_release,
    known,
    not_accepted,
    release_text,
    strict_partition_min_available,
)
from webhook.admission.quantity import ceil, parse_quantity
from webhook.common.settings import Settings

COUNTS = "volcano-counts"
NAMES = "volcano-names"
LIFECYCLE_POLICIES = "volcano-lifecycle-policies"
TASK_DEPENDENCIES = "volcano-task-dependencies"
VOLUMES = "volcano-volumes"
QUEUE = "volcano-queue"
TOPOLOGY = "volcano-topology"


# -- counts -------------------------------------------------------------------------------------------------------


def _below_zero(path: str, value: Any, what: str) -> Violation | None:
    number = as_int(value)
    if number is None or number >= 0:
        return None
    return Violation(path, "Invalid", number, f"must be 0 or more (Volcano refuses a negative {what})", COUNTS)


def check_counts(job: JobView, settings: Settings) -> list[Violation]:
    """Volcano's number rules: no negative minAvailable, maxRetry, ttlSecondsAfterFinished or replicas; a task's
    minAvailable within its replicas; the job's minAvailable within all replicas; at least one task; a
    partitionPolicy that divides its task's replicas."""
    spec = job.spec
    found = [
        v
        for v in (
            _below_zero("spec.minAvailable", spec.get("minAvailable"), "minAvailable"),
            _below_zero("spec.maxRetry", spec.get("maxRetry"), "maxRetry"),
            _below_zero("spec.ttlSecondsAfterFinished", spec.get("ttlSecondsAfterFinished"), "ttlSecondsAfterFinished"),
        )
        if v is not None
    ]
    if not job.tasks:
        found.append(
            Violation("spec.tasks", "Required", None, "Volcano refuses a job without tasks; add a task", COUNTS)
        )
        return found
    total = 0
    for task in job.tasks:
        replicas = as_int(task.task.get("replicas"))
        total += replicas or 0
        negative = _below_zero(f"{task.field}.replicas", replicas, "replicas")
        if negative is not None:
            found.append(negative)
        min_available = as_int(task.task.get("minAvailable"))
        if min_available is not None and min_available < 0:
            found.append(
                Violation(
                    f"{task.field}.minAvailable",
                    "Invalid",
                    min_available,
                    "must be 0 or more (Volcano refuses a negative minAvailable)",
                    COUNTS,
                )
            )
        elif min_available is not None and min_available > (replicas or 0) and negative is None:
            found.append(
                Violation(
                    f"{task.field}.minAvailable",
                    "Invalid",
                    min_available,
                    f"must not exceed the task's replicas ({replicas or 0}); Volcano refuses it: lower minAvailable "
                    "or raise replicas",
                    COUNTS,
                )
            )
        found += _check_partition_policy(task, replicas or 0, min_available, settings)
    job_min_available = as_int(spec.get("minAvailable"))
    below_zero = any((as_int(t.task.get("replicas")) or 0) < 0 for t in job.tasks)
    if job_min_available is not None and job_min_available > total and not below_zero:  # else that is the cause
        found.append(
            Violation(
                "spec.minAvailable",
                "Invalid",
                job_min_available,
                f"must not exceed the total replicas of the tasks ({total}); Volcano refuses it: lower minAvailable "
                "or raise replicas",
                COUNTS,
            )
        )
    return found


def _check_partition_policy(
    task: TaskView, replicas: int, min_available: int | None, settings: Settings
) -> list[Violation]:
    policy = task.task.get("partitionPolicy")
    if not isinstance(policy, Mapping):
        return []
    path = f"{task.field}.partitionPolicy"
    total = as_int(policy.get("totalPartitions")) or 0
    size = as_int(policy.get("partitionSize")) or 0
    minimum = as_int(policy.get("minPartitions")) or 0
    if total <= 0:
        detail, where, value = "must be greater than 0", "totalPartitions", total
    elif size <= 0:
        detail, where, value = "must be greater than 0", "partitionSize", size
    elif replicas != total * size:
        detail, where, value = (
            f"totalPartitions x partitionSize ({total} x {size}) must equal the task's replicas ({replicas})",
            "totalPartitions",
            total,
        )
    elif (
        min_available is not None
        and (minimum > 0 or strict_partition_min_available(settings))
        and minimum * size != min_available
    ):
        detail, where, value = (
            f"minPartitions x partitionSize ({minimum} x {size}) must equal the task's minAvailable ({min_available})",
            "minPartitions",
            minimum,
        )
    else:
        return []
    return [Violation(f"{path}.{where}", "Invalid", value, f"{detail}; Volcano refuses it otherwise", COUNTS)]


# -- names --------------------------------------------------------------------------------------------------------


def check_names(job: JobView, _settings: Settings) -> list[Violation]:
    """Task names are unique DNS labels; the job name and every `<job>-<task>-<task index>` are qualified names
    (at most 63 characters), as Volcano checks them."""
    found: list[Violation] = []
    if job.name and not is_qualified_name(job.name):
        found.append(
            Violation(
                "metadata.name",
                "Invalid",
                job.name,
                f"Volcano needs the job name to be a qualified name (at most {NAME_MAX} characters: letters, "
                "digits, '-', '_', '.'); rename the job",
                NAMES,
            )
        )
    first_index: dict[str, int] = {}
    for index, task in enumerate(job.tasks):
        name = task_name(task, index)
        path = f"{task.field}.name"
        if not is_dns_label(name):
            found.append(
                Violation(
                    path,
                    "Invalid",
                    name,
                    f"Volcano needs task names to be DNS labels (at most {NAME_MAX} lowercase letters, digits "
                    "and '-', starting and ending with a letter or digit); rename the task",
                    NAMES,
                )
            )
        if name in first_index:
            found.append(
                Violation(
                    path,
                    "Invalid",
                    name,
                    f"spec.tasks[{first_index[name]}] has the same name and Volcano refuses duplicate task names; "
                    "give every task its own name",
                    NAMES,
                )
            )
        else:
            first_index[name] = index
        if job.name:
            pod = f"{job.name}-{name}-{index}"
            if is_dns_label(name) and not is_qualified_name(pod):
                found.append(
                    Violation(
                        path,
                        "Invalid",
                        name,
                        f"Volcano checks the pod name {quoted([pod])} (<job>-<task>-<task index>) as a qualified "
                        f"name of at most {NAME_MAX} characters ({len(pod)} here); shorten the job or the task name",
                        NAMES,
                    )
                )
    return found


# -- lifecycle policies ---------------------------------------------------------------------------------------


def _policy_lists(job: JobView) -> Iterator[tuple[str, tuple[Mapping[str, Any], ...]]]:
    yield "spec.policies", as_mappings(job.spec.get("policies"))
    for task in job.tasks:
        yield f"{task.field}.policies", as_mappings(task.task.get("policies"))


def _events(policy: Mapping[str, Any], path: str) -> list[tuple[str, Any]]:
    """(field path, event) of every event a policy names (`events` then `event`, as Volcano lists them)."""
    named = [(f"{path}.events[{k}]", event) for k, event in enumerate(as_list(policy.get("events")))]
    event = policy.get("event")
    if event not in (None, ""):
        named.append((f"{path}.event", event))
    seen: set[Any] = set()
    unique = []
    for where, value in named:
        key = repr(value)
        if key not in seen:
            seen.add(key)
            unique.append((where, value))
    return unique


def check_lifecycle_policies(job: JobView, settings: Settings) -> list[Violation]:
    """Job and task `policies`: events and actions the release accepts, event or exitCode (not both), no event
    or exit code twice, no other event next to `*`, no exit code 0."""
    found: list[Violation] = []
    for base, policies in _policy_lists(job):
        events: dict[str, str] = {}
        exit_codes: dict[int, str] = {}
        for k, policy in enumerate(policies):
            path = f"{base}[{k}]"
            named = _events(policy, path)
            exit_code = policy.get("exitCode")
            if named and exit_code is not None:
                found.append(_policy(f"{path}.exitCode", "Forbidden", None, "must not be set together with events"))
                continue
            if not named and exit_code is None:
                found.append(_policy(path, "Required", None, "name an event (or events) or an exitCode"))
                continue
            action = policy.get("action")
            if named or (action is not None and _checks_every_action(settings)):
                found += _check_action(path, action, settings)
            for where, event in named:
                if not (isinstance(event, str) and event in POLICY_EVENTS and accepts(POLICY_EVENTS[event], settings)):
                    detail = not_accepted("lifecycle-policy event", str(event), POLICY_EVENTS, settings)
                    found.append(_policy(where, "NotSupported", event, detail))
                elif event in events:
                    found.append(_policy(where, "Invalid", event, f"{events[event]} names the same event"))
                else:
                    events[event] = where
            code = as_int(exit_code)
            if not named and code is not None:
                if code == 0:
                    found.append(_policy(f"{path}.exitCode", "Invalid", 0, "0 is not an error code; name a failure"))
                elif code in exit_codes:
                    found.append(
                        _policy(f"{path}.exitCode", "Invalid", code, f"{exit_codes[code]} names the same exit code")
                    )
                else:
                    exit_codes[code] = f"{path}.exitCode"
        if "*" in events and len(events) > 1:
            found.append(
                _policy(events["*"], "Invalid", "*", "'*' covers every event: no other policy may name an event")
            )
    return found


def _checks_every_action(settings: Settings) -> bool:
    """Up to 1.13 only event policies have their action checked; the admission policy of 1.14+ checks all."""
    release = configured_release(settings)
    return release is None or release >= VALIDATING_ADMISSION_POLICY


def _check_action(path: str, action: Any, settings: Settings) -> list[Violation]:
    if isinstance(action, str) and action in POLICY_ACTIONS and accepts(POLICY_ACTIONS[action], settings):
        return []
    if action in (None, ""):
        return [_policy(f"{path}.action", "Required", None, "an event policy needs an action")]
    if action == "RestartPartition":
        detail = (
            "the job webhook of Volcano 1.14+ takes it, but its ValidatingAdmissionPolicy (installed where the "
            f"admin enables it) and older releases do not; supported values: {quoted(known(POLICY_ACTIONS, settings))}"
        )
    else:
        detail = not_accepted("lifecycle-policy action", str(action), POLICY_ACTIONS, settings)
    return [_policy(f"{path}.action", "NotSupported", action, detail)]


def _policy(path: str, reason: Reason, value: Any, why: str) -> Violation:
    return Violation(path, reason, value, f"{why} (Volcano refuses the job otherwise)", LIFECYCLE_POLICIES)


# -- task dependencies ------------------------------------------------------------------------------------------


def check_task_dependencies(job: JobView, _settings: Settings) -> list[Violation]:
    """Tasks' `dependsOn` form a directed acyclic graph over the job's tasks (Volcano's topological sort: a
    dependency on a missing task, or on the same task twice, never resolves either)."""
    if not any(t.task.get("dependsOn") is not None for t in job.tasks):
        return []
    names = [task_name(t, i) for i, t in enumerate(job.tasks)]
    depends = [
        [d for d in as_list(as_mapping(t.task.get("dependsOn")).get("name")) if isinstance(d, str)] for t in job.tasks
    ]
    # Volcano's graph: one edge per (dependency, task) pair, but the in-degree counts every listed name.
    in_degree = dict.fromkeys(names, 0)
    edges: dict[str, set[str]] = {}
    for name, deps in zip(names, depends, strict=True):
        for dep in deps:
            edges.setdefault(dep, set()).add(name)
            in_degree[name] += 1
    ready = [name for name, degree in in_degree.items() if degree == 0]
    done: set[str] = set()
    while ready:
        current = ready.pop()
        done.add(current)
        for follower in edges.pop(current, set()):
            in_degree[follower] -= 1
            if in_degree[follower] == 0:
                ready.append(follower)
    if len(done) == len(in_degree):
        return []  # duplicate task names also fail Volcano's sort: the names rule reports them
    found = []
    for index, (name, deps) in enumerate(zip(names, depends, strict=True)):
        if name in done:
            continue
        missing = [d for d in deps if d not in in_degree]
        twice = sorted({d for d in deps if deps.count(d) > 1})
        if missing:
            why = f"names {quoted(missing)}, which is not a task of this job"
        elif twice:
            why = f"names {quoted(twice)} twice, and Volcano then never starts the task"
        else:
            why = "is part of a dependency cycle (directly or through the tasks it waits for)"
        found.append(
            Violation(
                f"spec.tasks[{index}].dependsOn.name",
                "Invalid",
                list(deps),
                f"task {quoted([name])} {why}; Volcano refuses jobs whose dependencies do not form a directed "
                "acyclic graph",
                TASK_DEPENDENCIES,
            )
        )
    return found


# -- volumes, queue, topology ---------------------------------------------------------------------------------


def check_volumes(job: JobView, _settings: Settings) -> list[Violation]:
    """`spec.volumes` (Volcano's job-level PVCs): a unique mountPath each, and either a volumeClaim or a valid
    volumeClaimName, not both."""
    found: list[Violation] = []
    seen: dict[str, int] = {}
    for k, volume in enumerate(as_mappings(job.spec.get("volumes"))):
        path = f"spec.volumes[{k}]"
        mount_path = as_str(volume.get("mountPath")) or ""
        if not mount_path:
            found.append(Violation(f"{path}.mountPath", "Required", None, "Volcano needs a mountPath", VOLUMES))
        elif mount_path in seen:
            found.append(
                Violation(
                    f"{path}.mountPath",
                    "Invalid",
                    mount_path,
                    f"spec.volumes[{seen[mount_path]}] mounts at the same path and Volcano refuses it; use one "
                    "volume per path",
                    VOLUMES,
                )
            )
        else:
            seen[mount_path] = k
        claim_name = as_str(volume.get("volumeClaimName")) or ""
        has_claim = volume.get("volumeClaim") is not None
        if not claim_name and not has_claim:
            found.append(
                Violation(
                    path,
                    "Required",
                    None,
                    "Volcano needs volumeClaim (a new PVC) or volumeClaimName (an existing one)",
                    VOLUMES,
                )
            )
        elif claim_name and has_claim:
            found.append(
                Violation(
                    f"{path}.volumeClaimName",
                    "Forbidden",
                    None,
                    "Volcano refuses volumeClaim and volumeClaimName together: name an existing PVC, or describe a "
                    "new one",
                    VOLUMES,
                )
            )
        elif claim_name and not is_dns_subdomain(claim_name):
            found.append(
                Violation(
                    f"{path}.volumeClaimName",
                    "Invalid",
                    claim_name,
                    "not a valid PersistentVolumeClaim name (lowercase letters, digits, '-' and '.'); Volcano "
                    "refuses it",
                    VOLUMES,
                )
            )
    return found


def check_queue(job: JobView, settings: Settings) -> list[Violation]:
    """The `root` queue of hierarchical queues (1.11+) takes no jobs. Whether any other queue exists and is open
    needs the API server: Volcano alone checks that."""
    release = configured_release(settings)
    if job.spec.get("queue") != "root" or (release is not None and release < HIERARCHICAL_QUEUES):
        return []
    return [
        Violation(
            "spec.queue",
            "Forbidden",
            None,
            f'Volcano {release_text(HIERARCHICAL_QUEUES)} and later refuse jobs in the "root" queue (the top of '
            "the queue hierarchy); submit to a leaf queue",
            QUEUE,
        )
    ]


def check_topology(job: JobView, _settings: Settings) -> list[Violation]:
    """`networkTopology` names highestTierAllowed or highestTierName, not both; a task with a topologyPolicy
    requests whole CPUs in every container (Volcano's NUMA-aware check)."""
    found: list[Violation] = []
    places = [("spec.networkTopology", job.spec.get("networkTopology"))]
    places += [
        (f"{t.field}.partitionPolicy.networkTopology", as_mapping(t.task.get("partitionPolicy")).get("networkTopology"))
        for t in job.tasks
    ]
    for path, topology in places:
        spec = as_mapping(topology)
        if spec.get("highestTierAllowed") is not None and spec.get("highestTierName"):
            found.append(
                Violation(
                    f"{path}.highestTierName",
                    "Forbidden",
                    None,
                    "must not be set together with highestTierAllowed (Volcano refuses both); keep one",
                    TOPOLOGY,
                )
            )
    for task in job.tasks:
        policy = task.task.get("topologyPolicy")
        if policy in (None, "", "none"):
            continue
        for container in (*task.containers, *task.init_containers):
            resources = as_mapping(container.container.get("resources"))
            requests = as_mapping(resources.get("requests"))
            where = "requests" if requests else "limits"
            cpu = (requests or as_mapping(resources.get("limits"))).get("cpu")
            amount = parse_quantity(cpu) if cpu is not None else None
            whole = amount is not None and ceil(amount) * 1000 == ceil(amount * 1000) and ceil(amount) != 0
            if not whole:
                reason: Reason = "Invalid" if cpu is not None else "Required"
                found.append(
                    Violation(
                        f"{container.field}.resources.{where}[cpu]",
                        reason,
                        cpu,
                        f"topologyPolicy {quoted([policy])} needs a whole number of CPUs in every container (Volcano "
                        "refuses the job otherwise); request whole CPUs, or remove topologyPolicy",
                        TOPOLOGY,
                    )
                )
    return found


__all__ = [
    "COUNTS",
    "LIFECYCLE_POLICIES",
    "NAMES",
    "QUEUE",
    "TASK_DEPENDENCIES",
    "TOPOLOGY",
    "VOLUMES",
    "check_counts",
    "check_lifecycle_policies",
    "check_names",
    "check_queue",
    "check_task_dependencies",
    "check_topology",
    "check_volumes",
]
