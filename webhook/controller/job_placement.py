"""A job's placement as its rank table needs it, and what the table still waits for (the RankTablePending Event).

Pure: it reads the pods and the Job it is handed.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from planner import Placement, PlacementProblem, PlacementReadout, Server, read_placement
from webhook.common.names import NETWORK_TOPOLOGY_ANNOTATION


def placement_fingerprint(placement: Placement, job_uid: str, job_version: str, route_plan: bool) -> str:
    """Hash of everything a completed table depends on (servers in pod-index order, devices, job identity)."""
    digest = hashlib.sha256(f"{job_uid}\0{job_version}\0{route_plan}\0{placement.master}\0".encode())
    for server in placement.servers:
        digest.update(repr(server).encode())
    return digest.hexdigest()[:32]


WAIT_KINDS = frozenset({"missing-pods", "unbound", "missing-annotation", "device-failed", "missing-pod-ip"})
"""Placement problems that resolve themselves (Volcano, the scheduler, the device plugin or kubelet is not done
yet); every other kind needs someone to fix the pods, the device plugin or the nodes."""


def with_pod_addresses(
    placement: Placement, pods: Iterable[Mapping[str, Any]]
) -> tuple[Placement, tuple[PlacementProblem, ...]]:
    """The placement with every server's `container_ip`, or the pods still waiting for an IP.

    A pod on the pod network needs its `status.podIP`: the table's `container_ip` and, for rank 0, the launcher's
    MASTER_ADDR (the node's IP reaches no other pod there). The device plugin annotates a pod before kubelet has
    started its sandbox, so a placement can be complete while pod IPs are still missing. A `hostNetwork` pod's IP is
    its node's IP (what kubelet reports as its podIP), so it never waits.
    """
    by_name = {str((p.get("metadata") or {}).get("name", "")): p for p in pods}
    servers: list[Server] = []
    problems: list[PlacementProblem] = []
    for server in placement.servers:
        pod = by_name.get(server.pod_name) or {}
        host_network = (pod.get("spec") or {}).get("hostNetwork") is True
        address = server.pod_ip
        if address is None and host_network:
            address = (pod.get("status") or {}).get("hostIP") or server.host_ip
        if address:
            servers.append(server if address == server.pod_ip else dataclasses.replace(server, pod_ip=str(address)))
            continue
        pod_id = f"{(pod.get('metadata') or {}).get('namespace') or placement.namespace}/{server.pod_name}"
        if host_network:
            field, detail = (
                "status.hostIP",
                f"not set yet on this hostNetwork pod; wait for kubelet on {server.node_name}",
            )
        else:
            field = "status.podIP"
            detail = (
                "not set yet; the table's container_ip (and MASTER_ADDR for rank 0) needs it: wait for kubelet "
                f"and the network plugin to start the pod on node {server.node_name}"
            )
        problems.append(PlacementProblem("missing-pod-ip", pod_id, field, detail))
    if problems:
        return placement, tuple(problems)
    return dataclasses.replace(placement, servers=tuple(servers)), ()


def read_job_placement(
    pods: Sequence[Mapping[str, Any]],
    *,
    annotation_keys: Sequence[str],
    resource_name: str,
    expected_pods: int,
    job_name: str,
    job_uid: str | None,
    job_version: str | None,
    task_order: Sequence[str],
) -> PlacementReadout:
    """The job's placement as `read_placement` reads it, with every server's pod IP (`with_pod_addresses`).

    Never raises for what pods hold: a pod the planner cannot read becomes a problem of that pod, so a reconcile
    reports it in an Event instead of failing (and retrying) on it.
    """

    def read(chosen: Sequence[Mapping[str, Any]], expected: int | None) -> PlacementReadout:
        return read_placement(
            chosen,
            annotation_keys=annotation_keys,
            resource_name=resource_name,
            expected_pods=expected,
            job_name=job_name,
            job_uid=job_uid,
            job_version=job_version,
            task_order=task_order,
        )

    try:
        readout = read(pods, expected_pods)
    except ValueError as exc:
        problems: list[PlacementProblem] = []
        for pod in pods:  # find the pods that cannot be read, to name them
            try:
                read([pod], None)
            except ValueError as single:
                meta = pod.get("metadata") or {}
                problems.append(
                    PlacementProblem(
                        "unreadable-pod",
                        f"{meta.get('namespace')}/{meta.get('name')}",
                        "metadata",
                        f"cannot be read ({type(single).__name__}: {single}); check its volcano.sh labels and "
                        "the device plugin's annotation",
                    )
                )
        if not problems:
            problems.append(PlacementProblem("unreadable-pod", None, "pods", f"{type(exc).__name__}: {exc}"))
        return PlacementReadout(None, tuple(problems), ())
    if readout.placement is None or readout.problems:
        return readout
    placement, waiting = with_pod_addresses(readout.placement, pods)
    if waiting:
        return PlacementReadout(None, waiting, readout.ignored_pods, readout.ignored)
    return PlacementReadout(placement, (), readout.ignored_pods, readout.ignored)


def needs_a_fix(readout: PlacementReadout) -> bool:
    """Whether a problem of the readout will not go away by waiting (the Event is then a Warning)."""
    return any(problem.kind not in WAIT_KINDS for problem in readout.problems)


def pending_summary(readout: PlacementReadout, expected: int, limit: int = 6) -> str:
    """What keeps the table from completing, for the RankTablePending event."""
    problems = readout.problems
    if not problems:
        return f"waiting for {expected} NPU pods"
    kinds: dict[str, int] = {}
    for problem in problems:
        kinds[problem.kind] = kinds.get(problem.kind, 0) + 1
    counts = ", ".join(f"{kind} x{n}" for kind, n in sorted(kinds.items()))
    shown = "; ".join(p.render() for p in problems[:limit])
    more = f"; and {len(problems) - limit} more" if len(problems) > limit else ""
    return f"{expected} NPU pods expected; not ready ({counts}): {shown}{more}{_other_jobs(readout)}"


def topology_wait(job: Mapping[str, Any], readout: PlacementReadout) -> str:
    """What Volcano waits for while the job's pods are unbound and its hard `spec.networkTopology` keeps it within
    one HyperNode (Volcano itself only says "gang unschedulable"), for the RankTablePending event; "" otherwise."""
    if not any(problem.kind == "unbound" for problem in readout.problems):
        return ""
    spec = job.get("spec")
    topology = spec.get("networkTopology") if isinstance(spec, Mapping) else None
    if not isinstance(topology, Mapping) or (topology.get("mode") or "hard") != "hard":
        return ""
    tier, name = topology.get("highestTierAllowed"), topology.get("highestTierName")
    if isinstance(tier, int) and not isinstance(tier, bool):
        where, field = f"tier {tier} or below", f"highestTierAllowed {tier}"
    elif isinstance(name, str) and name:
        where, field = f"tier {name!r} or below", f"highestTierName {name!r}"
    else:
        return ""
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    why = " (why: annotation ringroute.io/network-topology)" if NETWORK_TOPOLOGY_ANNOTATION in annotations else ""
    return (
        f"; Volcano places this job only within one HyperNode of {where} (spec.networkTopology: mode hard, "
        f"{field}) and waits until one has room for all its pods{why}"
    )


def _other_jobs(readout: PlacementReadout, limit: int = 3) -> str:
    """Pods carrying the job's name that belong to another Job (left out, never in its table), for the Event."""
    strays = [pod for pod in readout.ignored if pod.reason in ("other-job", "other-job-uid")]
    if not strays:
        return ""
    shown = "; ".join(pod.render() for pod in strays[:limit])
    more = f"; and {len(strays) - limit} more" if len(strays) > limit else ""
    return f"; left out as pods of another job: {shown}{more}"


__all__ = [
    "WAIT_KINDS",
    "needs_a_fix",
    "pending_summary",
    "placement_fingerprint",
    "read_job_placement",
    "topology_wait",
    "with_pod_addresses",
]
