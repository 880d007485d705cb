"""Volcano releases and the JSON keys of its Go structs at each release tag."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

JSONObject = dict[str, Any]
"""A JSON object as Go writes it: keys in Go's order (struct declaration order, or sorted for maps)."""

# ---------------------------------------------------------------------------------------------------------- releases

RELEASES: Final[tuple[str, ...]] = ("1.7", "1.8", "1.9", "1.10", "1.11", "1.12", "1.13", "1.14", "1.15", "1.16")
MASTER_RELEASE: Final = "1.16"
"""master (`git describe`: v1.16.0-alpha.1-42, `.release-version`: latest) is treated as release 1.16."""

RELEASE_TAGS: Final[Mapping[str, str]] = {
    **{r: f"v{r}.0" for r in RELEASES[:-1]},
    MASTER_RELEASE: "master",
}
"""The volcano-sh/volcano git ref each release's facts were read from."""

RELEASE_K8S_API: Final[Mapping[str, int]] = {
    "1.7": 25,
    "1.8": 25,
    "1.9": 29,
    "1.10": 30,
    "1.11": 31,
    "1.12": 32,
    "1.13": 33,
    "1.14": 34,
    "1.15": 35,
    "1.16": 36,
}
"""Minor version of the vendored k8s.io/api (go.mod at each tag); Pod and Node fields newer than it are dropped."""

RELEASE_GO: Final[Mapping[str, str]] = {
    "1.7": "1.19.1",
    "1.8": "1.19.4",
    "1.9": "1.21.8",
    "1.10": "1.22.2",
    "1.11": "1.22",
    "1.12": "1.23",
    "1.13": "1.24",
    "1.14": "1.24",
    "1.15": "1.25",
    "1.16": "1.26.2",
}
"""Go toolchain of the release image (installer/dockerfile/scheduler/Dockerfile); < 1.22 escapes \\b, \\f as \\u00XX."""

RELEASE_GROUPS: Final[Mapping[str, tuple[str, ...]]] = {
    "1.7": ("1.7",),
    "1.8": ("1.8",),
    "1.9": ("1.9",),
    "1.10-1.11": ("1.10", "1.11"),
    "1.12-1.13": ("1.12", "1.13"),
    "1.14": ("1.14",),
    "1.15": ("1.15",),
    "1.16": ("1.16",),
}
"""Releases whose predicate and prioritize requests have identical key sets at every level of Volcano's structs.

1.12 and 1.13 still differ in onSessionOpen (the internal QueueSpec lost `State` in 1.13) and in the event verbs
(1.13+); 1.10 and 1.11 differ only in which newer Pod/Node fields k8s.io/api 0.30 vs 0.31 keeps.
"""


def normalize_release(release: str) -> str:
    """`"1.10"`, `"v1.10.0"`, `"1.10.3"` -> `"1.10"`; `"master"` -> `"1.16"`. Raises ValueError otherwise."""
    text = release.strip().lower()
    if text in ("master", "main"):
        return MASTER_RELEASE
    match = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?(?:-[0-9a-z.]+)?", text)
    if match:
        name = f"{match.group(1)}.{match.group(2)}"
        if name in RELEASES:
            return name
    raise ValueError(f"release: {release!r} is not one of {', '.join(RELEASES)} (or 'master')")


def release_index(release: str) -> int:
    return RELEASES.index(normalize_release(release))


def release_at_least(release: str, minimum: str) -> bool:
    """Whether `release` is `minimum` or newer."""
    return release_index(release) >= release_index(minimum)


def json_tagged(release: str) -> bool:
    # volcano.sh/apis internal scheduling types carry json tags (omitempty) from v1.14.0 (staging copy).
    return release_at_least(release, "1.14")


# ----------------------------------------------------------------------------------------------- Go struct key lists
# JSON keys in Go's order. Go writes exported fields in declaration order, promotes the fields of embedded structs
# without a json tag to the embedding position, and drops `json:"-"` and unexported fields. Each entry is
# (first release, keys); a struct keeps the latest entry at or before a release (no keys: gone from then on).


def _keys(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_HISTORY: Final[Mapping[str, tuple[tuple[str, tuple[str, ...]], ...]]] = {
    # pkg/scheduler/api/job_info.go TaskInfo: TransactionContext promoted (NodeName .. Status);
    # CustomBindErrHandler is `json:"-"`. 1.7: v1.7.0, v1.8.0; 1.10: v1.10.0, v1.11.0; 1.12: v1.12.0 .. v1.14.0.
    "TaskInfo": (
        (
            "1.7",
            _keys(
                "UID Job Name Namespace Resreq InitResreq NodeName Status LastTransaction Priority VolumeReady "
                "Preemptable BestEffort RevocableZone NumaInfo PodVolumes Pod"
            ),
        ),
        (
            "1.9",
            _keys(
                "UID Job Name Namespace Resreq InitResreq NodeName Status LastTransaction Priority VolumeReady "
                "Preemptable BestEffort RevocableZone NumaInfo PodVolumes Pod CustomBindErrHandlerSucceeded"
            ),
        ),
        (
            "1.10",
            _keys(
                "UID Job Name Namespace TaskRole Resreq InitResreq NodeName EvictionOccurred Status LastTransaction "
                "Priority VolumeReady Preemptable BestEffort HasRestartableInitContainer SchGated RevocableZone "
                "NumaInfo PodVolumes Pod CustomBindErrHandlerSucceeded"
            ),
        ),
        (
            "1.12",
            _keys(
                "UID Job Name Namespace TaskRole Resreq InitResreq NodeName EvictionOccurred JobAllocatedHyperNode "
                "Status LastTransaction Priority VolumeReady Preemptable BestEffort HasRestartableInitContainer "
                "SchGated RevocableZone NumaInfo Pod CustomBindErrHandlerSucceeded"
            ),
        ),
        (
            "1.15",
            _keys(
                "UID Job Name Namespace TaskRole Resreq InitResreq DRAResreq ResourceClaimKeys ResourceClaimDRAResreq "
                "NodeName EvictionOccurred JobAllocatedHyperNode Status LastTransaction Priority VolumeReady "
                "Preemptable BestEffort HasRestartableInitContainer SchGated RevocableZone NumaInfo Pod "
                "CustomBindErrHandlerSucceeded"
            ),
        ),
        (
            "1.16",
            _keys(
                "UID Job Name Namespace TaskRole Resreq InitResreq DRAResreq ResourceClaimKeys ResourceClaimDRAResreq "
                "NodeName EvictionOccurred JobAllocatedHyperNode Status LastTransaction Priority VolumeReady "
                "Preemptable BestEffort HasRestartableInitContainer SchGated RevocableZone NumaInfo Pod "
                "PodAnnotations CustomBindErrHandlerSucceeded"
            ),
        ),
    ),
    # pkg/scheduler/api/job_info.go TransactionContext (LastTransaction when not nil)
    "TransactionContext": (
        ("1.7", _keys("NodeName Status")),
        ("1.10", _keys("NodeName EvictionOccurred Status")),
        ("1.12", _keys("NodeName EvictionOccurred JobAllocatedHyperNode Status")),
    ),
    # pkg/scheduler/api/node_info.go NodeInfo. v1.8.0 renamed Capability to Capacity and moved GPUDevices into
    # Others; master replaced NumaChgFlag by UnassignedNumaPods (map key PodMeta marshals as text).
    "NodeInfo": (
        (
            "1.7",
            _keys(
                "Name Node State Releasing Pipelined Idle Used Allocatable Capability ResourceUsage Tasks NumaInfo "
                "NumaChgFlag NumaSchedulerInfo RevocableZone Others GPUDevices OversubscriptionNode "
                "OfflineJobEvicting OversubscriptionResource ImageStates"
            ),
        ),
        (
            "1.8",
            _keys(
                "Name Node State Releasing Pipelined Idle Used Allocatable Capacity ResourceUsage Tasks NumaInfo "
                "NumaChgFlag NumaSchedulerInfo RevocableZone Others OversubscriptionNode OfflineJobEvicting "
                "OversubscriptionResource ImageStates"
            ),
        ),
        (
            "1.14",
            _keys(
                "Name Node State Releasing Pipelined Idle Used Allocatable Capacity ResourceUsage Tasks NumaInfo "
                "NumaChgFlag NumaSchedulerInfo RevocableZone Others OversubscriptionNode OfflineJobEvicting "
                "OversubscriptionResource ImageStates Generation BindGeneration"
            ),
        ),
        (
            "1.16",
            _keys(
                "Name Node State Releasing Pipelined Idle Used Allocatable Capacity ResourceUsage Tasks NumaInfo "
                "UnassignedNumaPods NumaSchedulerInfo RevocableZone Others OversubscriptionNode OfflineJobEvicting "
                "OversubscriptionResource ImageStates Generation BindGeneration"
            ),
        ),
    ),
    # pkg/scheduler/api/job_info.go JobInfo (1.9: v1.9.0 .. v1.13.0; 1.15: v1.15.0, master)
    "JobInfo": (
        (
            "1.7",
            _keys(
                "UID Name Namespace Queue Priority MinAvailable WaitingTime JobFitErrors NodesFitErrors "
                "TaskStatusIndex Tasks TaskMinAvailable TaskMinAvailableTotal Allocated TotalRequest "
                "CreationTimestamp PodGroup ScheduleStartTimestamp Preemptable RevocableZone Budget"
            ),
        ),
        (
            "1.9",
            _keys(
                "UID PgUID Name Namespace Queue Priority MinAvailable WaitingTime JobFitErrors NodesFitErrors "
                "TaskStatusIndex Tasks TaskMinAvailable TaskMinAvailableTotal Allocated TotalRequest "
                "CreationTimestamp PodGroup ScheduleStartTimestamp Preemptable RevocableZone Budget"
            ),
        ),
        (
            "1.14",
            _keys(
                "UID PgUID Name Namespace Queue Priority MinAvailable WaitingTime JobFitErrors NodesFitErrors "
                "AllocatedHyperNode SubJobs TaskToSubJob MinSubJobs TaskStatusIndex Tasks TaskMinAvailable "
                "TaskMinAvailableTotal Allocated TotalRequest CreationTimestamp PodGroup ScheduleStartTimestamp "
                "Preemptable RevocableZone Budget"
            ),
        ),
        (
            "1.15",
            _keys(
                "UID PgUID Name Namespace Queue Priority MinAvailable WaitingTime JobFitErrors NodesFitErrors "
                "AllocatedHyperNode NetworkTopology SubJobs TaskToSubJob MinSubJobs TaskStatusIndex Tasks "
                "TaskMinAvailable TaskMinAvailableTotal Allocated TotalRequest CreationTimestamp PodGroup "
                "ScheduleStartTimestamp Preemptable RevocableZone Budget"
            ),
        ),
    ),
    # pkg/scheduler/api/sub_job_info.go SubJobInfo (taskPriorities unexported; networkTopology unexported in v1.14)
    "SubJobInfo": (
        ("1.14", _keys("GID UID Job MinAvailable Priority MatchIndex Tasks TaskStatusIndex AllocatedHyperNode")),
        (
            "1.15",
            _keys(
                "GID UID Job MinAvailable Priority MatchIndex Tasks TaskStatusIndex AllocatedHyperNode "
                "NominatedHyperNode NetworkTopology"
            ),
        ),
    ),
    # pkg/scheduler/api/resource_info.go Resource (unchanged v1.7.0 .. master)
    "Resource": (("1.7", _keys("MilliCPU Memory ScalarResources MaxTaskNum")),),
    # pkg/scheduler/api/node_info.go NodeState
    "NodeState": (("1.7", _keys("Phase Reason")),),
    # pkg/scheduler/api/node_info.go NodeUsage (MetricsTime is a time.Time: "0001-01-01T00:00:00Z" when unset)
    "NodeUsage": (
        ("1.7", _keys("CPUUsageAvg MEMUsageAvg")),
        ("1.9", _keys("MetricsTime CPUUsageAvg MEMUsageAvg")),
    ),
    # pkg/scheduler/api/job_info.go TopologyInfo (TaskInfo.NumaInfo; never nil)
    "TopologyInfo": (("1.7", _keys("Policy ResMap")),),
    # pkg/scheduler/api/job_info.go DisruptionBudget (JobInfo.Budget; misspelt until v1.12.0)
    "DisruptionBudget": (
        ("1.7", _keys("MinAvailable MaxUnavilable")),
        ("1.12", _keys("MinAvailable MaxUnavailable")),
    ),
    # pkg/scheduler/api/queue_info.go QueueInfo
    "QueueInfo": (("1.7", _keys("UID Name Weight Weights Hierarchy Queue")),),
    # pkg/scheduler/api/namespace_info.go NamespaceInfo
    "NamespaceInfo": (
        ("1.7", _keys("Name Weight QuotaStatus")),
        ("1.8", _keys("Name QuotaStatus")),
    ),
    # k8s.io/kubernetes pkg/scheduler/framework (k8s.io/kube-scheduler/framework from v1.14.0) ImageStateSummary;
    # Kubernetes 1.28 added Nodes (sets.Set[string]), which Volcano's copies leave nil.
    "ImageStateSummary": (
        ("1.7", _keys("Size NumNodes")),
        ("1.9", _keys("Size NumNodes Nodes")),
    ),
    # pkg/scheduler/api/device_info.go GPUDevice (v1.7.0 NodeInfo.GPUDevices values)
    "GPUDevice": (("1.7", _keys("ID PodMap Memory")), ("1.8", ())),
    # pkg/scheduler/api/types.go Status (v1.8.0, v1.9.0 PredicateResponse.status elements; no json tags)
    "Status": (("1.8", _keys("Code Reason")), ("1.10", _keys("Code Reason Plugin"))),
    # pkg/scheduler/plugins/extender/argument.go
    "PredicateRequest": (("1.7", _keys("task node")),),
    "PrioritizeRequest": (("1.7", _keys("task nodes")),),
    "OnSessionOpenRequest": (("1.7", _keys("Jobs Nodes Queues NamespaceInfo RevocableNodes NodeList")),),
    "EventHandlerRequest": (("1.13", _keys("task")),),
    "PredicateResponse": (
        ("1.7", _keys("errorMessage")),
        ("1.8", _keys("status")),
        ("1.10", _keys("status code")),
    ),
    "PrioritizeResponse": (("1.7", _keys("nodeScore errorMessage")),),
    "EventHandlerResponse": (("1.13", _keys("errorMessage")),),
    # volcano.sh/apis pkg/apis/scheduling/types.go (internal types; staging/src/volcano.sh/apis from v1.14.0):
    # no json tags until v1.13 (Go names; ObjectMeta promoted), tagged omitempty from v1.14.
    "PodGroupSpec": (
        ("1.7", _keys("MinMember MinTaskMember Queue PriorityClassName MinResources")),
        ("1.12", _keys("MinMember MinTaskMember Queue PriorityClassName MinResources NetworkTopology")),
        ("1.14", _keys("minMember minTaskMember queue priorityClassName minResources networkTopology subGroupPolicy")),
    ),
    "PodGroupStatus": (
        ("1.7", _keys("Phase Conditions Running Succeeded Failed")),
        ("1.14", _keys("phase conditions running succeeded failed")),
    ),
    "PodGroupCondition": (
        ("1.7", _keys("Type Status TransitionID LastTransitionTime Reason Message")),
        ("1.14", _keys("type status transitionID lastTransitionTime reason message")),
    ),
    "QueueSpec": (
        ("1.7", _keys("Weight Capability State Reclaimable ExtendClusters guarantee affinity type")),
        ("1.9", _keys("Weight Capability State Reclaimable ExtendClusters guarantee affinity type parent deserved")),
        (
            "1.10",
            _keys(
                "Weight Capability State Reclaimable ExtendClusters guarantee affinity type parent deserved priority"
            ),
        ),
        (
            "1.13",
            _keys("Weight Capability Reclaimable ExtendClusters guarantee affinity type parent deserved priority"),
        ),
        (
            "1.14",
            _keys(
                "weight capability reclaimable extendClusters guarantee affinity type parent deserved priority "
                "dequeueStrategy"
            ),
        ),
    ),
    "QueueStatus": (
        ("1.7", _keys("State Unknown Pending Running Inqueue Completed Reservation Allocated")),
        ("1.14", _keys("state unknown pending running inqueue completed reservation allocated")),
    ),
}


def _keys_at(history: tuple[tuple[str, tuple[str, ...]], ...], release: str) -> tuple[str, ...] | None:
    known = [keys for first, keys in history if release_index(first) <= release_index(release)]
    return known[-1] if known and known[-1] else None  # an empty entry: the struct is gone


GO_FIELDS: Final[Mapping[str, Mapping[str, tuple[str, ...]]]] = {
    release: {struct: keys for struct, history in _HISTORY.items() if (keys := _keys_at(history, release)) is not None}
    for release in RELEASES
}
"""`GO_FIELDS[release][struct]`: JSON keys of a Volcano struct at that release, in Go's order."""

OBJECT_META_KEYS: Final = (
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
)
"""metav1.ObjectMeta JSON keys in Go order; all omitempty except creationTimestamp (a struct: `null` when zero)."""

TASK_STATUS: Final[Mapping[str, int]] = {
    "Pending": 1,
    "Allocated": 2,
    "Pipelined": 4,
    "Binding": 8,
    "Bound": 16,
    "Running": 32,
    "Releasing": 64,
    "Succeeded": 128,
    "Failed": 256,
    "Unknown": 512,
}
"""api.TaskStatus bits (pkg/scheduler/api/types.go, unchanged v1.7.0 .. master); JSON map keys are their decimals."""

STATUS_CODES: Final[Mapping[str, int]] = {
    "Success": 0,
    "Error": 1,
    "Unschedulable": 2,
    "UnschedulableAndUnresolvable": 3,
    "Wait": 4,
    "Skip": 5,
}
"""api status codes (pkg/scheduler/api/types.go from v1.8.0)."""

FAILING_CODES: Final = frozenset({1, 2, 3, 4, 5})


__all__ = [
    "JSONObject",
    "json_tagged",
    "GO_FIELDS",
    "MASTER_RELEASE",
    "OBJECT_META_KEYS",
    "RELEASES",
    "RELEASE_GO",
    "RELEASE_GROUPS",
    "RELEASE_K8S_API",
    "RELEASE_TAGS",
    "STATUS_CODES",
    "TASK_STATUS",
    "normalize_release",
    "release_at_least",
]
