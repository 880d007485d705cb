"""Read a job's placement from its Pods as the API server returns them (camelCase JSON / `kubectl get -o yaml`).

The device plugin writes each NPU pod's devices to an annotation once it has allocated them:
`{"pod_name": ..., "server_id": ..., "devices": [{"device_id": "0", "device_ip": "10.0.0.2"}, ...]}`.
Older plugins put the node IP in `server_id`; newer ones put it in `host_ip` and a pod UID in `server_id`.
`read_placement` converts the pods to a `Placement` once, collecting every problem (not only the first) so that a
controller can report them all and a command line can name the first one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from planner._errors import InputError, PlacementError
from planner._model import IgnoredPod, Placement
from planner.io._job_pods import current_version, group_by_job, job_of, job_pods, multiple_jobs
from planner.io._kube_objects import mapping_of
from planner.io._placement_types import (
    PlacementProblem,
    PlacementReadout,
    render_placement_problems,
)
from planner.io._pod_devices import check_across_pods, read_pod


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
    candidates = job_pods(
        pods,
        annotation_keys=annotation_keys,
        resource_name=resource_name,
        job_name=job_name,
        job_uid=job_uid,
        ignored=ignored,
    )
    groups = group_by_job(candidates)
    if len(groups) > 1:
        problem = multiple_jobs(groups, job_name)
        return PlacementReadout(None, (problem,), tuple(i.pod for i in ignored), tuple(ignored))

    current = current_version(candidates, job_version, ignored)
    read = [read_pod(pod, annotation_keys, resource_name, problems) for pod in current]
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
    check_across_pods(facts, problems)

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
            job_name=job_name or job_of(first)[0] or "",
            namespace=str(mapping_of(first.get("metadata")).get("namespace") or "default"),
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


__all__ = ["placement_from_pods", "read_placement"]
