"""Volcano's PodGroup, Queue, Namespace and JobInfo structs, and the extender requests built from them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from emulation.volcano_payloads.objects import DEFAULT_CREATED, fields_v1, managed_fields_entry, stable_uid
from emulation.volcano_payloads.structs import ResourceValue, resource_of
from webhook.common.names import (
    JDB_MAX_UNAVAILABLE_ANNOTATION,
    JDB_MIN_AVAILABLE_ANNOTATION,
    PREEMPTABLE_KEY,
    VOLCANO_JOB_API_VERSION,
    VOLCANO_SCHEDULING_API_VERSION,
)
from webhook.extender.volcano_releases import (
    GO_FIELDS,
    MASTER_RELEASE,
    TASK_STATUS,
    JSONObject,
    json_tagged,
    normalize_release,
    release_at_least,
)

# ------------------------------------------------------------------------------- PodGroup, Queue, JobInfo, requests


def _object_meta(
    name: str,
    namespace: str | None,
    uid: str,
    created: str,
    *,
    generation: int | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    owner: Mapping[str, Any] | None = None,
    managed: Sequence[JSONObject] = (),
) -> JSONObject:
    meta: JSONObject = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta |= {"uid": uid, "resourceVersion": str(51_000_000 + len(name))}
    if generation:
        meta["generation"] = generation
    meta["creationTimestamp"] = created
    if labels:
        meta["labels"] = dict(sorted(labels.items()))
    if annotations:
        meta["annotations"] = dict(sorted(annotations.items()))
    if owner:
        meta["ownerReferences"] = [dict(owner)]
    if managed:
        meta["managedFields"] = list(managed)
    return meta


def _spec_object(values: Mapping[str, Any], struct: str, release: str) -> JSONObject:
    """An internal scheduling struct: Go names and every field before v1.14, tagged omitempty keys after."""
    keys = GO_FIELDS[release][struct]
    if not json_tagged(release):
        return {k: values[k] for k in keys}
    out: JSONObject = {}
    for key in keys:
        value = values[key[0].upper() + key[1:]]
        if key in _STRUCT_KEYS:  # omitempty never drops a struct
            out[key] = value
        elif key in _POINTER_KEYS:  # nor a non-nil pointer, even to false or an empty map
            if value is not None:
                out[key] = value
        elif value not in (None, "", 0, False, [], {}):
            out[key] = value
    return out


_STRUCT_KEYS: Final = frozenset({"guarantee", "reservation", "lastTransitionTime"})
_POINTER_KEYS: Final = frozenset({"reclaimable", "affinity", "minResources", "networkTopology"})


def _network_topology(spec: Mapping[str, Any] | None, release: str) -> JSONObject | None:
    if spec is None:
        return None
    if not json_tagged(release):
        return {"Mode": spec.get("mode", "hard"), "HighestTierAllowed": spec.get("highestTierAllowed")}
    out: JSONObject = {"mode": spec.get("mode", "hard")}
    if spec.get("highestTierAllowed") is not None:
        out["highestTierAllowed"] = spec["highestTierAllowed"]
    if spec.get("highestTierName"):
        out["highestTierName"] = spec["highestTierName"]
    return out


def pod_group(
    name: str,
    *,
    namespace: str = "default",
    uid: str | None = None,
    min_member: int = 1,
    min_task_member: Mapping[str, int] | None = None,
    queue: str = "default",
    min_resources: Mapping[str, str] | None = None,
    network_topology: Mapping[str, Any] | None = None,
    phase: str = "Running",
    running: int = 0,
    succeeded: int = 0,
    failed: int = 0,
    scheduled_at: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    owner_job: tuple[str, str] | None = None,
    created: str = DEFAULT_CREATED,
    release: str = MASTER_RELEASE,
) -> JSONObject:
    """An api.PodGroup (internal scheduling.PodGroup embedded, plus `Version: "v1beta1"`) as `release` marshals it.

    Before v1.14 the internal types have no json tags: ObjectMeta's fields sit at the top level next to `Spec`,
    `Status`, `Version`. From v1.14 they are tagged: `metadata`, `spec`, `status` with omitempty fields.
    `scheduled_at` adds the gang plugin's Scheduled condition. `owner_job` is (job name, job uid).
    """
    rel = normalize_release(release)
    uid = uid or stable_uid("podgroup", namespace, name)
    owner = None
    if owner_job:
        owner = {
            "apiVersion": VOLCANO_JOB_API_VERSION,
            "kind": "Job",
            "name": owner_job[0],
            "uid": owner_job[1],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    conditions = None
    if scheduled_at:
        condition = {
            "Type": "Scheduled",
            "Status": "True",
            "TransitionID": stable_uid("session", name),
            "LastTransitionTime": scheduled_at,
            "Reason": "tasks in gang are ready to be scheduled",
            "Message": "",
        }
        conditions = [_spec_object(condition, "PodGroupCondition", rel)]
    spec = {
        "MinMember": min_member,
        "MinTaskMember": None if min_task_member is None else dict(sorted(min_task_member.items())),
        "Queue": queue,
        "PriorityClassName": "",
        "MinResources": None if min_resources is None else dict(sorted(min_resources.items())),
        "NetworkTopology": _network_topology(network_topology, rel),
        "SubGroupPolicy": None,
    }
    status = {"Phase": phase, "Conditions": conditions, "Running": running, "Succeeded": succeeded, "Failed": failed}
    managed = [
        managed_fields_entry(
            "vc-controller-manager",
            created,
            {
                "f:metadata": {"f:ownerReferences": {}},
                "f:spec": fields_v1({k[0].lower() + k[1:]: v for k, v in spec.items() if v is not None}),
            },
        ),
        managed_fields_entry(
            "vc-scheduler",
            scheduled_at or created,
            {"f:status": fields_v1({k[0].lower() + k[1:]: v for k, v in status.items() if v})},
            subresource="status",
        ),
    ]
    for entry in managed:
        entry["apiVersion"] = VOLCANO_SCHEDULING_API_VERSION
    meta = _object_meta(
        name,
        namespace,
        uid,
        created,
        generation=2,
        labels=labels,
        annotations=annotations,
        owner=owner,
        managed=managed,
    )
    spec_json = _spec_object(spec, "PodGroupSpec", rel)
    status_json = _spec_object(status, "PodGroupStatus", rel)
    if json_tagged(rel):
        return {"metadata": meta, "spec": spec_json, "status": status_json, "Version": "v1beta1"}
    return {**meta, "Spec": spec_json, "Status": status_json, "Version": "v1beta1"}


def queue_info(
    name: str = "default",
    *,
    weight: int = 1,
    reclaimable: bool = True,
    capability: Mapping[str, str] | None = None,
    state: str = "Open",
    running: int = 0,
    pending: int = 0,
    allocated: Mapping[str, str] | None = None,
    created: str = "2025-11-03T02:20:41Z",
    release: str = MASTER_RELEASE,
) -> JSONObject:
    """An api.QueueInfo (UID and Name are the queue name) holding the internal scheduling.Queue."""
    rel = normalize_release(release)
    spec = {
        "Weight": weight,
        "Capability": None if capability is None else dict(sorted(capability.items())),
        "State": "",
        "Reclaimable": reclaimable,
        "ExtendClusters": None,
        "Guarantee": {},
        "Affinity": None,
        "Type": "",
        "Parent": "",
        "Deserved": None,
        "Priority": 0,
        "DequeueStrategy": "",
    }
    status = {
        "State": state,
        "Unknown": 0,
        "Pending": pending,
        "Running": running,
        "Inqueue": 0,
        "Completed": 0,
        "Reservation": {},
        "Allocated": None if allocated is None else dict(sorted(allocated.items())),
    }
    if not json_tagged(rel):  # the tagged-but-omitempty fields of the untagged era
        spec_json = {}
        for key in GO_FIELDS[rel]["QueueSpec"]:
            value = spec[key[0].upper() + key[1:]]
            if key[0].isupper() or key == "guarantee" or value not in (None, "", 0):
                spec_json[key] = value
    else:
        spec_json = _spec_object(spec, "QueueSpec", rel)
    managed = [
        managed_fields_entry(
            "vc-controller-manager", created, {"f:spec": fields_v1({"reclaimable": True, "weight": 1})}
        ),
        managed_fields_entry(
            "vc-controller-manager", created, {"f:status": fields_v1({"state": state})}, subresource="status"
        ),
    ]
    for entry in managed:
        entry["apiVersion"] = VOLCANO_SCHEDULING_API_VERSION
    meta = _object_meta(name, None, stable_uid("queue", name), created, generation=1, managed=managed)
    status_json = _spec_object(status, "QueueStatus", rel)
    queue = (
        {"metadata": meta, "spec": spec_json, "status": status_json}
        if json_tagged(rel)
        else {**meta, "Spec": spec_json, "Status": status_json}
    )
    values = {"UID": name, "Name": name, "Weight": weight, "Weights": "", "Hierarchy": "", "Queue": queue}
    return {k: values[k] for k in GO_FIELDS[rel]["QueueInfo"]}


def namespace_info(
    name: str, *, quota_status: Mapping[str, Mapping[str, Any]] | None = None, release: str = MASTER_RELEASE
) -> JSONObject:
    """An api.NamespaceInfo. Volcano only has them for namespaces with a ResourceQuota; `quota_status` maps a
    quota name to its v1.ResourceQuotaStatus (`{"hard": {...}, "used": {...}}`)."""
    rel = normalize_release(release)
    values = {"Name": name, "Weight": 1, "QuotaStatus": dict(sorted((quota_status or {}).items()))}
    return {k: values[k] for k in GO_FIELDS[rel]["NamespaceInfo"]}


def _status_index(tasks: Mapping[str, Mapping[str, Any]]) -> JSONObject:
    index: dict[str, dict[str, Mapping[str, Any]]] = {}
    for uid, task in tasks.items():
        index.setdefault(str(task["Status"]), {})[uid] = task
    return {k: dict(sorted(v.items())) for k, v in sorted(index.items())}


_ALLOCATED_BITS: Final = frozenset({TASK_STATUS[s] for s in ("Allocated", "Binding", "Bound", "Running")})


def job_info(
    tasks: Sequence[Mapping[str, Any]],
    *,
    pod_group_name: str,
    namespace: str = "default",
    pod_group_uid: str | None = None,
    min_available: int | None = None,
    min_task_member: Mapping[str, int] | None = None,
    queue: str = "default",
    phase: str = "Running",
    priority: int = 0,
    pod_group_annotations: Mapping[str, str] | None = None,
    pod_group_labels: Mapping[str, str] | None = None,
    owner_job: tuple[str, str] | None = None,
    network_topology: Mapping[str, Any] | None = None,
    created: str = DEFAULT_CREATED,
    release: str = MASTER_RELEASE,
) -> JSONObject:
    """An api.JobInfo as the session snapshot holds it (JobInfo.Clone of the cache's job), for TaskInfos built with
    `task_info` (pods of one PodGroup). UID is `<namespace>/<podgroup>`; Tasks and TaskStatusIndex are keyed by pod
    UID; from v1.14 every task also sits in the default SubJob (keyed by the job UID) and its TaskStatusIndex.
    PgUID stays "" in v1.9 (JobInfo.Clone does not copy it until v1.10). ScheduleStartTimestamp is null: the
    enqueue action sets it after onSessionOpen.
    """
    rel = normalize_release(release)
    job_uid = f"{namespace}/{pod_group_name}"
    pg_uid = pod_group_uid or stable_uid("podgroup", namespace, pod_group_name)
    by_uid = {str(t["UID"]): t for t in tasks}
    task_map = dict(sorted(by_uid.items()))
    min_available = len(tasks) if min_available is None else min_available
    min_task_member = min_task_member if min_task_member is not None else {}
    counts = {"Running": 0, "Succeeded": 0, "Failed": 0}
    allocated, total = ResourceValue(), ResourceValue()
    for task in tasks:
        request = resource_of(task["Resreq"])
        total.add(request)
        if task["Status"] in _ALLOCATED_BITS:
            allocated.add(request)
        for state in counts:
            counts[state] += task["Status"] == TASK_STATUS[state]
    annotations = pod_group_annotations or {}
    labels = pod_group_labels or {}
    pg = pod_group(
        pod_group_name,
        namespace=namespace,
        uid=pg_uid,
        min_member=min_available,
        min_task_member=min_task_member,
        queue=queue,
        network_topology=network_topology,
        phase=phase,
        running=counts["Running"],
        succeeded=counts["Succeeded"],
        failed=counts["Failed"],
        scheduled_at=created[:-3] + "44Z" if phase == "Running" else None,
        labels=labels,
        annotations=annotations,
        owner_job=owner_job,
        created=created,
        release=rel,
    )
    preemptable = False
    for source in (annotations, labels):
        if PREEMPTABLE_KEY in source:
            preemptable = source[PREEMPTABLE_KEY].lower() in ("1", "t", "true")
            break
    budget_values = {
        "MinAvailable": annotations.get(JDB_MIN_AVAILABLE_ANNOTATION, ""),
        "MaxUnavailable": ""
        if JDB_MIN_AVAILABLE_ANNOTATION in annotations
        else annotations.get(JDB_MAX_UNAVAILABLE_ANNOTATION, ""),
    }
    budget_values["MaxUnavilable"] = budget_values["MaxUnavailable"]
    index = _status_index(task_map)
    sub_job: JSONObject = {
        "GID": job_uid,
        "UID": job_uid,
        "Job": job_uid,
        "MinAvailable": min_available,
        "Priority": max([0, *(int(t["Priority"]) for t in tasks)]),
        "MatchIndex": 0,
        "Tasks": task_map,
        "TaskStatusIndex": index,
        "AllocatedHyperNode": "",
        "NominatedHyperNode": "",
        "NetworkTopology": _network_topology(network_topology, rel),
    }
    values: JSONObject = {
        "UID": job_uid,
        "PgUID": "" if rel == "1.9" else pg_uid,
        "Name": pod_group_name,
        "Namespace": namespace,
        "Queue": queue,
        "Priority": priority,
        "MinAvailable": min_available,
        "WaitingTime": None,
        "JobFitErrors": "",
        "NodesFitErrors": {},
        "AllocatedHyperNode": "",
        "NetworkTopology": _network_topology(network_topology, rel),
        "SubJobs": {job_uid: {k: sub_job[k] for k in GO_FIELDS[rel].get("SubJobInfo", ())}},
        "TaskToSubJob": dict.fromkeys(task_map, job_uid),
        "MinSubJobs": {},
        "TaskStatusIndex": index,
        "Tasks": task_map,
        "TaskMinAvailable": dict(sorted(min_task_member.items())),
        "TaskMinAvailableTotal": sum(min_task_member.values()),
        "Allocated": allocated.to_json(),
        "TotalRequest": total.to_json(),
        "CreationTimestamp": created,
        "PodGroup": pg,
        "ScheduleStartTimestamp": None,
        "Preemptable": preemptable,
        "RevocableZone": "",
        "Budget": {k: budget_values[k] for k in GO_FIELDS[rel]["DisruptionBudget"]},
    }
    return {k: values[k] for k in GO_FIELDS[rel]["JobInfo"]}


def predicate_request(task: Mapping[str, Any], node: Mapping[str, Any]) -> JSONObject:
    """PredicateRequest{Task json:"task", Node json:"node"} (argument.go, every release)."""
    return {"task": task, "node": node}


def prioritize_request(task: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]) -> JSONObject:
    """PrioritizeRequest{Task json:"task", Nodes json:"nodes"}: allocate passes the candidate list (never empty)."""
    return {"task": task, "nodes": list(nodes)}


def event_handler_request(task: Mapping[str, Any], *, release: str = MASTER_RELEASE) -> JSONObject:
    """EventHandlerRequest{Task json:"task"}, sent to allocateFuncVerb / deallocateFuncVerb from v1.13.0."""
    if not release_at_least(release, "1.13"):
        raise ValueError(f"release: {release!r} has no allocate/deallocate event verbs (they arrived in 1.13)")
    return {"task": task}


def on_session_open_request(
    *,
    jobs: Iterable[Mapping[str, Any]],
    nodes: Iterable[Mapping[str, Any]],
    queues: Iterable[Mapping[str, Any]],
    namespaces: Iterable[Mapping[str, Any]] = (),
) -> JSONObject:
    """OnSessionOpenRequest (no json tags, Go field names): the session's Jobs (keyed by `<ns>/<podgroup>`), Nodes
    (Ready nodes only, by name), Queues, NamespaceInfo and RevocableNodes (the nodes with a revocable zone). The
    plugin never sets NodeList, so it is null in every release."""
    node_map = {str(n["Name"]): n for n in nodes}
    return {
        "Jobs": dict(sorted((str(j["UID"]), j) for j in jobs)),
        "Nodes": dict(sorted(node_map.items())),
        "Queues": dict(sorted((str(q["UID"]), q) for q in queues)),
        "NamespaceInfo": dict(sorted((str(n["Name"]), n) for n in namespaces)),
        "RevocableNodes": {k: v for k, v in sorted(node_map.items()) if v.get("RevocableZone")},
        "NodeList": None,
    }


__all__ = [
    "event_handler_request",
    "job_info",
    "namespace_info",
    "on_session_open_request",
    "pod_group",
    "predicate_request",
    "prioritize_request",
    "queue_info",
]
