"""Volcano-shaped payload helpers for the extender tests."""

from __future__ import annotations

from typing import Any

from webhook.cli_extender import node_info, task_info

JOB = "bert"
NS = "team-a"


def job_task(index: int, *, node: str = "", status: int = 1, size_job: str = JOB, **kwargs: Any) -> dict[str, Any]:
    """A task of the job under test (route-planned, 8 cards)."""
    return task_info(namespace=NS, job_name=size_job, index=index, node_name=node, status=status, **kwargs)


def node(
    name: str, labels: dict[str, str], *, hosts: list[dict[str, Any]] | None = None, busy: bool = False
) -> dict[str, Any]:
    """A NodeInfo with 8 cards; `hosts` are tasks on it, `busy` adds a full-node task of another job."""
    tasks: dict[str, dict[str, Any]] = {}
    for task in hosts or []:
        placed = dict(task, NodeName=name, Status=32)
        tasks[placed["UID"]] = placed
    if busy:
        other = task_info(namespace="other", job_name=f"other-{name}", index=0, ring_label=None, node_name=name)
        tasks[other["UID"]] = other
    return node_info(name, labels, tasks=tasks)


def tor(leaf: str) -> dict[str, str]:
    """2-tier labels."""
    return {"volcano.sh/tor": leaf}


def leaf_spine(leaf: str, spine: str) -> dict[str, str]:
    """3-tier labels (NVIDIA topology label family)."""
    return {"network.topology.nvidia.com/leaf": leaf, "network.topology.nvidia.com/spine": spine}


def session_open(
    job_tasks: list[dict[str, Any]], nodes: list[dict[str, Any]], min_available: int = 0
) -> dict[str, Any]:
    """An OnSessionOpenRequest with one job and the given nodes."""
    job_id = job_tasks[0]["Job"]
    return {
        "Jobs": {
            job_id: {
                "UID": job_id,
                "Name": job_id.split("/", 1)[1],
                "Namespace": NS,
                "MinAvailable": min_available or len(job_tasks),
                "Tasks": {t["UID"]: t for t in job_tasks},
            }
        },
        "Nodes": {n["Name"]: n for n in nodes},
        "Queues": {},
        "NamespaceInfo": None,
        "RevocableNodes": None,
        "NodeList": None,
    }


_K8S_OBJECTS = frozenset({"Pod", "Node"})
_NAME_KEYED = frozenset({"ScalarResources", "Tasks", "Jobs", "Nodes"})


def rename_go_keys(obj: Any, style: str) -> Any:
    """Rewrite Volcano struct keys to `lower-camel` (`milliCPU`) or `lower` (`millicpu`); Kubernetes objects and
    map keys (resource names, task ids) stay as they are."""
    if isinstance(obj, list):
        return [rename_go_keys(v, style) for v in obj]
    if not isinstance(obj, dict):
        return obj
    out: dict[str, Any] = {}
    for key, value in obj.items():
        new_key = key
        if key[:1].isupper():
            new_key = key[0].lower() + key[1:] if style == "lower-camel" else key.lower()
        if key in _K8S_OBJECTS:
            out[new_key] = value
        elif key in _NAME_KEYED and isinstance(value, dict):
            out[new_key] = {k: rename_go_keys(v, style) for k, v in value.items()}
        else:
            out[new_key] = rename_go_keys(value, style)
    return out
