"""Telling Volcano releases apart from a decoded extender request."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from webhook.extender.volcano_releases import (
    GO_FIELDS,
    RELEASE_K8S_API,
    RELEASES,
    json_tagged,
    release_at_least,
    release_index,
)

# -------------------------------------------------------------------------------------------- release detection

_K8S_FIELD_SINCE: Final[tuple[tuple[str, tuple[str, ...], int], ...]] = (
    ("node", ("status", "features"), 31),
    ("node", ("status", "runtimeHandlers"), 30),
    ("node", ("status", "nodeInfo", "swap"), 33),
    ("node", ("status", "declaredFeatures"), 35),
    ("pod", ("status", "observedGeneration"), 33),
    ("pod", ("status", "hostIPs"), 29),
    ("pod", ("spec", "resources"), 32),
    ("pod", ("spec", "hostnameOverride"), 34),
)
"""Pod/Node fields only a newer vendored k8s.io/api keeps: their presence raises the release's lower bound (their
absence proves nothing: the cluster may not set them)."""


def _dig(value: Any, path: Sequence[str]) -> bool:
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return False
        value = value[key]
    return True


def _matching(struct: str, keys: Iterable[str]) -> set[str]:
    found = set(keys)
    return {r for r in RELEASES if struct in GO_FIELDS[r] and set(GO_FIELDS[r][struct]) == found}


def detect_release_range(request: Mapping[str, Any]) -> tuple[str, str] | None:
    """The oldest and newest release that could have sent `request` (a decoded predicate, prioritize, event or
    onSessionOpen body), or None when no release's structs match its keys.

    Volcano marshals every exported field, so the key sets of TaskInfo, NodeInfo, JobInfo and the internal
    Queue/PodGroup identify the group exactly: 1.7 | 1.8 | 1.9 | 1.10-1.11 | 1.12-1.13 (1.12 and 1.13 apart in
    onSessionOpen) | 1.14 | 1.15 | 1.16. A body with only `task` is an event call (1.13+). Newer Pod/Node fields
    (`node.status.features` for 1.11, `nodeInfo.swap` or pod `status.observedGeneration` for 1.13) can raise the
    lower bound inside a group.
    """
    candidates = set(RELEASES)
    tasks: list[Mapping[str, Any]] = []
    nodes: list[Mapping[str, Any]] = []
    if "task" in request:
        if not isinstance(request["task"], Mapping):
            return None
        tasks.append(request["task"])
        if "node" in request:
            nodes.append(request["node"])
        elif "nodes" in request:
            nodes.extend(n for n in request["nodes"] or [] if isinstance(n, Mapping))
        else:
            candidates &= {r for r in RELEASES if release_at_least(r, "1.13")}
    elif "Jobs" in request and "Nodes" in request:
        for job in (request.get("Jobs") or {}).values():
            candidates &= _matching("JobInfo", job)
            tasks.extend((job.get("Tasks") or {}).values())
            budget = job.get("Budget")
            if isinstance(budget, Mapping):
                candidates &= _matching("DisruptionBudget", budget)
        nodes.extend((request.get("Nodes") or {}).values())
        for queue in (request.get("Queues") or {}).values():
            inner = queue.get("Queue") or {}
            spec = inner.get("Spec")
            if isinstance(spec, Mapping):  # untagged internal Queue (< 1.14)
                candidates &= {r for r in RELEASES if not json_tagged(r)}
                candidates &= {r for r in RELEASES if ("State" in spec) == ("State" in GO_FIELDS[r]["QueueSpec"])}
            elif "spec" in inner:
                candidates &= {r for r in RELEASES if json_tagged(r)}
        for namespace in (request.get("NamespaceInfo") or {}).values():
            candidates &= _matching("NamespaceInfo", namespace)
    else:
        return None
    for task in tasks:
        candidates &= _matching("TaskInfo", task)
    for node in nodes:
        candidates &= _matching("NodeInfo", node)
    if not candidates:
        return None
    lowest_api = 0
    for kind, path, api in _K8S_FIELD_SINCE:
        objects = [n.get("Node") for n in nodes] if kind == "node" else [t.get("Pod") for t in tasks]
        if any(_dig(obj, path) for obj in objects):
            lowest_api = max(lowest_api, api)
    candidates = {r for r in candidates if RELEASE_K8S_API[r] >= lowest_api}
    if not candidates:
        return None
    ordered = sorted(candidates, key=release_index)
    return ordered[0], ordered[-1]


__all__ = [
    "detect_release_range",
]
