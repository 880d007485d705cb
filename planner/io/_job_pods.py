"""Which pods make the job: NPU pods of one Job (owner UID, else job name) and its current version; the rest are
left out with the reason."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from planner._errors import InputError
from planner._model import IgnoredPod
from planner.io._kube_objects import label_or_annotation, mapping_of, meta, pod_ref, resource_amounts
from planner.io._numbers import parse_count, quantity_is_zero, shown
from planner.io._placement_types import PlacementProblem

log = logging.getLogger("ringroute.planner")


JOB_NAME_KEY = "volcano.sh/job-name"


JOB_VERSION_KEY = "volcano.sh/job-version"


_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def requests_resource(pod: Mapping[str, Any], resource_name: str) -> bool:
    """Whether a container asks for the resource: a non-zero amount, or one that is not a quantity at all
    (reading the pod reports it as a problem; leaving the pod out would hide it)."""
    for _position, _container, _section, amount in resource_amounts(pod, resource_name):
        try:
            if not quantity_is_zero(amount):
                return True
        except ValueError:
            return True
    return False


def _version_key(version: str) -> tuple[int, int, str]:
    """Numeric versions in numeric order (after any other text, which sorts by name)."""
    try:
        return (1, parse_count(version), "")
    except ValueError:
        return (0, 0, version)


def _owner(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod's owning Job: the controller owner reference (Volcano sets one), else the first owner."""
    owners = mapping_of(pod.get("metadata")).get("ownerReferences")
    references = [o for o in owners if isinstance(o, Mapping)] if isinstance(owners, list) else []
    return next((o for o in references if o.get("controller") is True), references[0] if references else None)


def job_of(pod: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(job name, job UID) of a pod: the volcano.sh/job-name label (else the owner's name), the owner's UID."""
    owner = _owner(pod)
    name = label_or_annotation(pod, JOB_NAME_KEY)
    if name is None and owner is not None and owner.get("name"):
        name = str(owner["name"])
    uid = str(owner["uid"]) if owner is not None and owner.get("uid") else None
    return name, uid


def _owned_by(pod: Mapping[str, Any], uid: str) -> bool:
    owners = mapping_of(pod.get("metadata")).get("ownerReferences")
    if not isinstance(owners, list) or not owners:
        return True  # pods as fixtures or from old dumps carry no owner: do not drop them
    return any(isinstance(owner, Mapping) and str(owner.get("uid")) == uid for owner in owners)


JobKey = tuple[str | None, str | None]
"""(job name, job UID) identifying the Job a pod belongs to; either may be unknown."""


def group_by_job(pods: Sequence[Mapping[str, Any]]) -> dict[JobKey, list[Mapping[str, Any]]]:
    """Pods by the Job they belong to: owner UID, or the job name for pods without an owner.

    A pod without an owner joins the one owned Job of its name, and a pod with neither name nor owner joins the
    only Job there is (test fixtures and hand-written dumps carry neither); otherwise they stand apart.
    """
    keys = [job_of(pod) for pod in pods]
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


def multiple_jobs(groups: Mapping[JobKey, Sequence[Mapping[str, Any]]], job_name: str | None) -> PlacementProblem:
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


def _leave_out(ignored: list[IgnoredPod], pod: Mapping[str, Any], reason: str, detail: str) -> None:
    left = IgnoredPod(pod_ref(pod), reason, detail)
    log.debug("event=pod_left_out pod=%s reason=%s detail=%s", left.pod, reason, detail)
    ignored.append(left)


def job_pods(
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
                f"{shown(kind)} {pod_ref(pod)}: expected Pod objects; pass the job's pods (kubectl get pods -o yaml)"
            )
        if resource_name is not None:
            is_npu = requests_resource(pod, resource_name)
        else:
            is_npu = any(key in meta(pod, "annotations") for key in annotation_keys)
        if not is_npu:
            continue
        name, uid = job_of(pod)
        phase = mapping_of(pod.get("status")).get("phase")
        if job_name is not None and name not in (job_name, None):
            _leave_out(ignored, pod, "other-job", f"a pod of job {name}, not {job_name}")
        elif job_uid is not None and not _owned_by(pod, job_uid):
            _leave_out(ignored, pod, "other-job-uid", f"owned by job UID {uid}, not {job_uid} (an earlier Job)")
        elif mapping_of(pod.get("metadata")).get("deletionTimestamp"):
            _leave_out(ignored, pod, "being-deleted", "being deleted")
        elif phase in _TERMINAL_PHASES:
            _leave_out(ignored, pod, "terminated", f"phase {phase}")
        else:
            candidates.append(pod)
    return candidates


def current_version(
    candidates: Sequence[Mapping[str, Any]], job_version: str | None, ignored: list[IgnoredPod]
) -> list[Mapping[str, Any]]:
    """The pods of `job_version` (the newest present when None); pods of another version go to `ignored`."""
    versions = {v for v in (label_or_annotation(p, JOB_VERSION_KEY) for p in candidates) if v is not None}
    wanted = job_version
    if wanted is None and versions:
        wanted = max(versions, key=_version_key)
    current: list[Mapping[str, Any]] = []
    for pod in candidates:
        version = label_or_annotation(pod, JOB_VERSION_KEY)
        if wanted is not None and version is not None and version != wanted:
            _leave_out(ignored, pod, "other-job-version", f"job version {version}; the job is at {wanted}")
        else:
            current.append(pod)
    return current


__all__ = [
    "JOB_NAME_KEY",
    "JOB_VERSION_KEY",
    "JobKey",
    "current_version",
    "group_by_job",
    "job_of",
    "job_pods",
    "multiple_jobs",
    "requests_resource",
]
