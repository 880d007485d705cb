"""Volcano's side of the scheduler-extender protocol, release by release (v1.7 to master).

What vc-scheduler sends to an extender and how it reads the answers, reproduced from volcano-sh/volcano at each
release tag (`pkg/scheduler/plugins/extender`, `pkg/scheduler/api`, `pkg/scheduler/actions/allocate`,
`pkg/scheduler/plugins/{nodeorder,binpack}`); docs/volcano-extender-protocol.md gives the facts with their sources.

- Request builders return the JSON value Go's encoding/json produces for Volcano's structs (key order, nulls,
  promoted embedded fields, sorted map keys); `go_json` serialises it to the exact bytes.
- Kubernetes object builders make the Node and Pod objects a kube-apiserver 1.36 cluster holds, trimmed to the
  fields the release's vendored k8s.io/api knows (Volcano decodes into those structs and re-encodes).
- Decoders read an extender answer the way the release's plugin and allocate action do.
- `detect_release_range` tells releases apart from a decoded request.
- Score functions reproduce the default `nodeorder` and `binpack` plugins, and `num_feasible_nodes_to_find` the
  allocate action's candidate cut-off.

Pure: no I/O. Releases are named "1.7" ... "1.15" and "1.16" (master, which reports v1.16.0-alpha).
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
import random
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from typing import Any, Final, Literal

import orjson

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


def _ri(release: str) -> int:
    return RELEASES.index(normalize_release(release))


def release_at_least(release: str, minimum: str) -> bool:
    """Whether `release` is `minimum` or newer."""
    return _ri(release) >= _ri(minimum)


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
    known = [keys for first, keys in history if _ri(first) <= _ri(release)]
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

_FAILING_CODES: Final = frozenset({1, 2, 3, 4, 5})

# ------------------------------------------------------------------------------------------ Go encoding/json output


def go_float_text(value: float) -> str:
    """How Go's encoding/json writes a float64: shortest round-trip digits, `%f` style unless |x| < 1e-6 or
    |x| >= 1e21 (then `1e+21`, `1e-7`). NaN and infinities make json.Marshal fail (ValueError here)."""
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"json: unsupported value: {value!r}")
    if value == 0.0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    dec = Decimal(repr(value)).normalize()
    magnitude = abs(value)
    if 1e-6 <= magnitude < 1e21:
        return format(dec, "f")
    sign, digits, exponent = dec.as_tuple()
    assert isinstance(exponent, int)
    mantissa = str(digits[0]) + ("." + "".join(map(str, digits[1:])) if len(digits) > 1 else "")
    exp10 = len(digits) - 1 + exponent
    text = f"{'-' if sign else ''}{mantissa}e{'-' if exp10 < 0 else '+'}{abs(exp10):02d}"
    # Go trims e-09 to e-9, but keeps e+21.
    return re.sub(r"e-0(\d)$", r"e-\1", text)


def go_number(value: float) -> int | orjson.Fragment:
    """A float64 field value ready for `go_json`: a Python int when Go prints no fraction (the JSON text is then
    identical), else a pre-rendered fragment with Go's text."""
    value = float(value)  # callers may pass ints for float64 fields
    if value.is_integer() and abs(value) < 1e21 and not (value == 0.0 and math.copysign(1.0, value) < 0):
        number = int(value) if abs(value) < 2**53 else int(Decimal(repr(value)))
        if abs(number) < 2**63:
            return number
    return orjson.Fragment(go_float_text(value).encode())


_HTML_ESCAPES: Final = ((b"<", b"\\u003c"), (b">", b"\\u003e"), (b"&", b"\\u0026"))
_LINE_SEPARATORS: Final = (("\u2028".encode(), b"\\u2028"), ("\u2029".encode(), b"\\u2029"))
_ESCAPE_PAIR = re.compile(rb"\\(.)")


def go_json(value: Any, release: str = MASTER_RELEASE) -> bytes:
    """The bytes Go's json.Marshal writes for a value built by this module (dicts already in Go's key order).

    On top of plain JSON, Go escapes `<`, `>`, `&`, U+2028 and U+2029 in strings; binaries built with Go < 1.22
    (v1.7 .. v1.9) also write \\b and \\f as \\u0008 and \\u000c.
    """
    out = orjson.dumps(value)
    for raw, escaped in _HTML_ESCAPES + _LINE_SEPARATORS:
        if raw in out:
            out = out.replace(raw, escaped)
    if RELEASE_GO[normalize_release(release)] < "1.22" and (b"\\b" in out or b"\\f" in out):
        pairs = {b"b": b"\\u0008", b"f": b"\\u000c"}
        out = _ESCAPE_PAIR.sub(lambda m: pairs.get(m.group(1), m.group(0)), out)
    return out


GO_ZERO_TIME: Final = "0001-01-01T00:00:00Z"
"""time.Time zero value as encoding/json writes it (NodeUsage.MetricsTime)."""

# --------------------------------------------------------------------------------------------- resource.Quantity

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")


def parse_quantity(text: str) -> Decimal:
    """The exact value of a Kubernetes quantity string ("192", "1536Gi", "500m", "3456736289398", "1e3")."""
    match = _QUANTITY.match(text.strip())
    if not match:
        raise ValueError(f"quantity: {text!r} is not a Kubernetes quantity such as '8', '500m' or '256Gi'")
    number, suffix = Decimal(match.group(1)), match.group(2) or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    return number * (Decimal(10) ** int(suffix[1:]))


def quantity_milli_value(text: str) -> int:
    """resource.Quantity.MilliValue(): value x 1000 rounded up."""
    return int((parse_quantity(text) * 1000).to_integral_value(rounding=ROUND_CEILING))


def quantity_value(text: str) -> int:
    """resource.Quantity.Value(): value rounded up."""
    return int(parse_quantity(text).to_integral_value(rounding=ROUND_CEILING))


# ------------------------------------------------------------------------------------------ Kubernetes objects
# Informer objects as kube-apiserver 1.36 returns them (empty TypeMeta, managedFields kept: Volcano's informers do
# not strip them), in Go field order. Fields newer than a release's vendored k8s.io/api are left out, since Volcano
# decodes into those structs before re-encoding. Timestamps are fixed strings so payloads are reproducible.

NPU_RESOURCE: Final = "huawei.com/ascend-1980"
DEFAULT_CREATED: Final = "2026-06-01T08:00:00Z"
_NODE_CREATED: Final = "2025-11-03T02:14:55Z"
_HEARTBEAT: Final = "2026-06-02T09:41:17Z"


def _hash(text: str) -> int:
    """A 128-bit deterministic hash (blake2b is several times faster than uuid5 for bulk payloads)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=16).digest(), "big")


def _hex(text: str) -> str:
    return f"{_hash(text):032x}"


def stable_uid(*parts: object) -> str:
    """A deterministic v4-style UID for an object named by `parts` (reproducible payloads)."""
    return str(uuid.UUID(int=_hash("/".join(map(str, parts))), version=4))


def _suffix(seed: str, length: int = 5) -> str:
    # Kubernetes generateName suffixes avoid vowels and look-alike digits.
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    number = _hash(seed)
    return "".join(alphabet[(number >> (5 * i)) % len(alphabet)] for i in range(length))


def _fields_v1(value: Any) -> Any:
    """A managedFields fieldsV1 tree for `value` (server-side-apply shape: f:<key>, k:{...} for keyed lists)."""
    if isinstance(value, dict):
        return {f"f:{k}": _fields_v1(v) for k, v in value.items()}
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        tree: JSONObject = {}
        for item in value:
            for keys in (("containerPort", "protocol"), ("mountPath",), ("name",), ("key", "effect"), ("type",)):
                if all(k in item for k in keys):
                    key = json.dumps({k: item[k] for k in keys}, separators=(",", ":"))
                    tree[f"k:{key}"] = {".": {}, **{f"f:{k}": _fields_v1(v) for k, v in item.items()}}
                    break
        return tree
    return {}


def _managed(manager: str, time: str, fields: Any, *, subresource: str | None = None) -> JSONObject:
    entry: JSONObject = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": "v1",
        "time": time,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


@dataclass(frozen=True, slots=True)
class ContainerImage:
    """One entry of node.status.images (kubelet reports at most 50, largest first)."""

    repository: str
    tag: str
    size_bytes: int

    def names(self) -> list[str]:
        """The two names kubelet lists: `repo@sha256:...` and `repo:tag`."""
        digest = _hex(f"{self.repository}:{self.tag}") * 2
        return [f"{self.repository}@sha256:{digest}", f"{self.repository}:{self.tag}"]


TRAINING_IMAGE: Final = ContainerImage(
    "swr.cn-south-1.myhuaweicloud.com/ai-train/pytorch-ascend", "2.1.0-cann8.0", 24_817_294_336
)
NPU_NODE_IMAGES: Final[tuple[ContainerImage, ...]] = (
    TRAINING_IMAGE,
    ContainerImage("swr.cn-south-1.myhuaweicloud.com/ai-train/mindspore-ascend", "2.3.1-cann8.0", 19_662_118_912),
    ContainerImage("swr.cn-south-1.myhuaweicloud.com/ai-train/pytorch-ascend", "2.1.0-cann7.0", 18_904_219_648),
    ContainerImage("swr.cn-south-1.myhuaweicloud.com/ai-train/llm-pretrain", "v0.9.3", 16_106_127_360),
    ContainerImage("swr.cn-south-1.myhuaweicloud.com/ai-train/deepspeed-ascend", "0.14.2", 14_532_812_800),
    ContainerImage("swr.cn-south-1.myhuaweicloud.com/ai-infer/mindie", "1.0.0-800I-A2", 12_884_901_888),
    ContainerImage("swr.cn-south-1.myhuaweicloud.com/ai-train/cann-toolkit", "8.0.RC3", 9_663_676_416),
    ContainerImage("swr.cn-south-1.myhuaweicloud.com/ai-train/hccl-test", "8.0.RC3", 6_442_450_944),
    ContainerImage("swr.cn-south-1.myhuaweicloud.com/mindx/ascend-k8sdeviceplugin", "v6.0.0", 418_119_680),
    ContainerImage("swr.cn-south-1.myhuaweicloud.com/mindx/noded", "v6.0.0", 203_423_744),
    ContainerImage("swr.cn-south-1.myhuaweicloud.com/mindx/npu-exporter", "v6.0.0", 187_564_032),
    ContainerImage("docker.io/calico/node", "v3.28.2", 142_671_360),
    ContainerImage("docker.io/calico/cni", "v3.28.2", 95_748_096),
    ContainerImage("registry.k8s.io/kube-proxy", "v1.36.1", 31_772_672),
    ContainerImage("quay.io/prometheus/node-exporter", "v1.8.2", 12_140_544),
    ContainerImage("docker.io/volcanosh/vc-webhook-manager", "v1.12.2", 29_879_296),
    ContainerImage("registry.k8s.io/coredns/coredns", "v1.12.1", 21_365_248),
    ContainerImage("docker.io/library/busybox", "1.36", 2_155_008),
    ContainerImage("registry.k8s.io/pause", "3.10", 320_368),
    ContainerImage("swr.cn-south-1.myhuaweicloud.com/ai-train/dataset-prefetch", "v2.4", 1_610_612_736),
)
"""Twenty images (40 names) as a busy NPU training node carries them, largest first."""


def _node_identity(name: str, index: int | None) -> dict[str, str]:
    """The per-node strings of a kube_node (all derived from the name and index, so templates can swap them)."""
    if index is None:
        index = _hash(name) % 60000
    return {
        "uid": stable_uid("node", name),
        "rv": str(48_000_000 + index),
        "ip": f"10.{20 + index // 62500}.{index // 250 % 250}.{index % 250 + 1}",
        "pod_cidr": f"172.{16 + index // 256 % 16}.{index % 256}.0/24",
        "tunnel": f"100.{64 + index // 65536 % 64}.{index // 256 % 256}.{index % 256}",
        "device_net": f"192.{168 + index // 250 % 80}.{index % 250}.",
        "machine": _hex(f"machine/{name}"),
        "system": str(uuid.UUID(int=_hash(f"system/{name}"))).upper(),
        "boot": str(uuid.UUID(int=_hash(f"boot/{name}"), version=4)),
        "serial": f"2102314QKT10P{index:07d}",
    }


def kube_node(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    cards: int = 8,
    resource: str = NPU_RESOURCE,
    cpu: str = "192",
    memory: str = "1584871932Ki",
    images: Sequence[ContainerImage] = NPU_NODE_IMAGES,
    internal_ip: str | None = None,
    index: int | None = None,
    ready: bool = True,
    release: str = MASTER_RELEASE,
) -> JSONObject:
    """A v1.Node as kubelet 1.36 (with calico, the Ascend device plugin and a `volcano.sh/tor` label) reports it.

    `labels` are added to the usual node labels (hostname, arch, Ascend accelerator labels); pass the topology
    labels here, e.g. `{"volcano.sh/tor": "leaf-012"}`. Allocatable keeps 2 CPUs and 100 MiB of memory back.
    `index` (0-based position in the cluster) picks the node's IPs; by default they come from a hash of the name.
    """
    api = RELEASE_K8S_API[normalize_release(release)]
    ident = _node_identity(name, index)
    ip = internal_ip or ident["ip"]
    all_labels = {
        "accelerator": "huawei-Ascend910",
        "accelerator-type": "module-910b-8",
        "beta.kubernetes.io/arch": "arm64",
        "beta.kubernetes.io/os": "linux",
        "host-arch": "huawei-arm",
        "kubernetes.io/arch": "arm64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node-role.kubernetes.io/worker": "worker",
        "nodeDEnable": "on",
        "servertype": "Ascend910B-20",
        "workerselector": "dls-worker-node",
        **(labels or {}),
    }
    device_list = ",".join(f"Ascend910-{i}" for i in range(cards))
    base_infos = {f"Ascend910-{i}": {"IP": f"{ident['device_net']}{i + 1}", "SuperDeviceID": 0} for i in range(cards)}
    all_annotations = {
        "baseDeviceInfos": json.dumps(base_infos, separators=(",", ":")),
        "huawei.com/Ascend910": device_list,
        "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock",
        "node.alpha.kubernetes.io/ttl": "0",
        "product-serial-number": ident["serial"],
        "projectcalico.org/IPv4Address": f"{ip}/16",
        "projectcalico.org/IPv4VXLANTunnelAddr": ident["tunnel"],
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        **(annotations or {}),
    }
    capacity = {
        "cpu": cpu,
        "ephemeral-storage": "3750772604Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "hugepages-32Mi": "0",
        "hugepages-64Ki": "0",
        resource: str(cards),
        "memory": memory,
        "pods": "110",
    }
    allocatable = dict(capacity)
    allocatable["cpu"] = (
        f"{quantity_milli_value(cpu) - 2000}m" if quantity_milli_value(cpu) % 1000 else str(quantity_value(cpu) - 2)
    )
    allocatable["ephemeral-storage"] = "3456736289398"
    allocatable["memory"] = f"{quantity_value(memory) // 1024 - 102400}Ki"

    def condition(kind: str, status: str, reason: str, message: str, beat: str = _HEARTBEAT) -> JSONObject:
        return {
            "type": kind,
            "status": status,
            "lastHeartbeatTime": beat,
            "lastTransitionTime": _NODE_CREATED,
            "reason": reason,
            "message": message,
        }

    spec: JSONObject = {"podCIDR": ident["pod_cidr"], "podCIDRs": [ident["pod_cidr"]]}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    node_info: JSONObject = {
        "machineID": ident["machine"],
        "systemUUID": ident["system"],
        "bootID": ident["boot"],
        "kernelVersion": "5.10.0-182.0.0.95.oe2203sp3.aarch64",
        "osImage": "openEuler 22.03 (LTS-SP3)",
        "containerRuntimeVersion": "containerd://1.7.22",
        "kubeletVersion": "v1.36.1",
        "kubeProxyVersion": "",
        "operatingSystem": "linux",
        "architecture": "arm64",
    }
    if api >= 33:
        node_info["swap"] = {"capacity": 0}
    status: JSONObject = {
        "capacity": dict(sorted(capacity.items())),
        "allocatable": dict(sorted(allocatable.items())),
        "conditions": [
            condition("NetworkUnavailable", "False", "CalicoIsUp", "Calico is running on this node", _NODE_CREATED),
            condition(
                "MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"
            ),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            condition(
                "Ready",
                "True" if ready else "False",
                "KubeletReady" if ready else "KubeletNotReady",
                "kubelet is posting ready status" if ready else "container runtime network not ready",
            ),
        ],
        "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": node_info,
        "images": [{"names": image.names(), "sizeBytes": image.size_bytes} for image in images[:50]],
    }
    if api >= 30:
        handler_features: JSONObject = {"recursiveReadOnlyMounts": True}
        if api >= 31:
            handler_features["userNamespaces"] = True
        status["runtimeHandlers"] = [
            {"name": "", "features": dict(handler_features)},
            {"name": "runc", "features": dict(handler_features)},
        ]
    if api >= 31:
        status["features"] = {"supplementalGroupsPolicy": True}
    metadata: JSONObject = {
        "name": name,
        "uid": ident["uid"],
        "resourceVersion": ident["rv"],
        "creationTimestamp": _NODE_CREATED,
        "labels": dict(sorted(all_labels.items())),
        "annotations": dict(sorted(all_annotations.items())),
    }
    kubelet_meta = {k: all_labels[k] for k in all_labels if k.startswith(("kubernetes.io/", "beta.kubernetes.io/"))}
    metadata["managedFields"] = [
        _managed(
            "kubelet",
            _NODE_CREATED,
            {
                "f:metadata": _fields_v1(
                    {
                        "annotations": dict.fromkeys(
                            ("node.alpha.kubernetes.io/ttl", "volumes.kubernetes.io/controller-managed-attach-detach"),
                            "",
                        ),
                        "labels": kubelet_meta,
                    }
                )
            },
        ),
        _managed(
            "kubeadm",
            _NODE_CREATED,
            {"f:metadata": _fields_v1({"annotations": {"kubeadm.alpha.kubernetes.io/cri-socket": ""}})},
        ),
        _managed(
            "kube-controller-manager",
            _NODE_CREATED,
            {
                "f:metadata": _fields_v1({"annotations": {"node.alpha.kubernetes.io/ttl": ""}}),
                "f:spec": _fields_v1(spec),
            },
        ),
        _managed(
            "calico-node",
            _NODE_CREATED,
            {
                "f:metadata": _fields_v1(
                    {"annotations": {k: "" for k in all_annotations if k.startswith("projectcalico.org/")}}
                ),
                "f:status": _fields_v1({"conditions": [status["conditions"][0]]}),
            },
            subresource="status",
        ),
        _managed(
            "kubectl-label",
            _NODE_CREATED,
            {"f:metadata": _fields_v1({"labels": {k: "" for k in all_labels if k not in kubelet_meta}})},
        ),
        _managed(
            "device-plugin",
            _HEARTBEAT,
            {
                "f:metadata": _fields_v1(
                    {
                        "annotations": dict.fromkeys(
                            ("baseDeviceInfos", "huawei.com/Ascend910", "product-serial-number"), ""
                        )
                    }
                )
            },
        ),
        _managed(
            "kubelet",
            _HEARTBEAT,
            {"f:status": _fields_v1({k: v for k, v in status.items() if k != "images"}) | {"f:images": {}}},
            subresource="status",
        ),
    ]
    return {"metadata": metadata, "spec": spec, "status": status}


def _container_status(container: JSONObject, *, started: str, api: int, pod_name: str) -> JSONObject:
    name, image = container["name"], container["image"]
    digest = _hex(image) * 2
    container_id = _hex(f"{pod_name}/{name}") * 2
    out: JSONObject = {
        "name": name,
        "state": {"running": {"startedAt": started}},
        "lastState": {},
        "ready": True,
        "restartCount": 0,
        "image": image,
        "imageID": f"{image.rsplit(':', 1)[0]}@sha256:{digest}",
        "containerID": f"containerd://{container_id}",
        "started": True,
    }
    if api >= 29:
        out["resources"] = container.get("resources", {})
    if api >= 30:
        mounts: list[JSONObject] = []
        for mount in container.get("volumeMounts", []):
            entry: JSONObject = {"name": mount["name"], "mountPath": mount["mountPath"]}
            if mount.get("readOnly"):
                entry["readOnly"] = True
                entry["recursiveReadOnly"] = "Disabled"
            mounts.append(entry)
        out["volumeMounts"] = mounts
    if api >= 31:
        out["user"] = {"linux": {"uid": 0, "gid": 0, "supplementalGroups": [0, 1, 2, 3, 4, 6, 10, 11, 20, 26, 27]}}
    return out


def _pod_status(
    spec: JSONObject, *, phase: str, node_ip: str, pod_ip: str, created: str, qos: str, api: int, pod_name: str
) -> JSONObject:
    if phase == "Pending":
        return {"phase": "Pending", "qosClass": qos}
    started = created[:-3] + "41Z"
    status: JSONObject = {}
    if api >= 33:
        status["observedGeneration"] = 1

    def condition(kind: str) -> JSONObject:
        out: JSONObject = {"type": kind}
        if api >= 33:
            out["observedGeneration"] = 1
        out |= {"status": "True", "lastProbeTime": None, "lastTransitionTime": started}
        return out

    status["phase"] = phase
    status["conditions"] = [
        condition(kind) for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")
    ] + [condition("PodScheduled") | {"lastTransitionTime": created}]
    status["hostIP"] = node_ip
    if api >= 29:
        status["hostIPs"] = [{"ip": node_ip}]
    status["podIP"] = pod_ip
    status["podIPs"] = [{"ip": pod_ip}]
    status["startTime"] = created
    status["containerStatuses"] = [
        _container_status(c, started=started, api=api, pod_name=pod_name) for c in spec["containers"]
    ]
    status["qosClass"] = qos
    return status


_SA_VOLUME_MOUNT: Final = "/var/run/secrets/kubernetes.io/serviceaccount"
_DEFAULT_TOLERATIONS: Final = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
)


def _sa_volume(seed: str) -> JSONObject:
    return {
        "name": f"kube-api-access-{_suffix(seed)}",
        "projected": {
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [
                            {"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}
                        ]
                    }
                },
            ],
            "defaultMode": 420,
        },
    }


def volcano_job_pod(
    job_name: str,
    index: int,
    *,
    namespace: str = "default",
    task_name: str = "worker",
    job_uid: str | None = None,
    queue: str = "default",
    cards: int = 8,
    resource: str = NPU_RESOURCE,
    cpu: str = "176",
    memory: str = "1400Gi",
    image: ContainerImage = TRAINING_IMAGE,
    node_name: str | None = None,
    node_ip: str = "",
    pod_ip: str | None = None,
    phase: Literal["Pending", "Running", "Succeeded", "Failed"] | None = None,
    job_version: int = 0,
    created: str = DEFAULT_CREATED,
    extra_labels: Mapping[str, str] | None = None,
    extra_annotations: Mapping[str, str] | None = None,
    extra_env: Mapping[str, str] | None = None,
    deleting: bool = False,
    release: str = MASTER_RELEASE,
) -> JSONObject:
    """A v1.Pod as vc-controller-manager creates it for task `task_name` of a Volcano Job (plugins env + svc).

    Name `<job>-<task>-<index>`; labels volcano.sh/job-name, job-namespace, queue-name, task-spec (and
    task-index from v1.9); annotations scheduling.k8s.io/group-name (`<job>-<job uid>`), volcano.sh/job-name,
    job-version, queue-name, task-spec, template-uid (plus task-index from v1.9, job-retry-count from v1.10);
    env VK_TASK_INDEX and VC_TASK_INDEX from the env plugin, hostname/subdomain and the `<job>-svc` ConfigMap from
    the svc plugin. Without `node_name` the pod is Pending and unbound.
    """
    rel = normalize_release(release)
    api = RELEASE_K8S_API[rel]
    job_uid = job_uid or stable_uid("job", namespace, job_name)
    name = f"{job_name}-{task_name}-{index}"
    phase = phase or ("Running" if node_name else "Pending")
    labels = {
        "app": job_name,
        "volcano.sh/job-name": job_name,
        "volcano.sh/job-namespace": namespace,
        "volcano.sh/queue-name": queue,
        "volcano.sh/task-spec": task_name,
        **(extra_labels or {}),
    }
    annotations = {
        "scheduling.k8s.io/group-name": f"{job_name}-{job_uid}",
        "volcano.sh/job-name": job_name,
        "volcano.sh/job-version": str(job_version),
        "volcano.sh/queue-name": queue,
        "volcano.sh/task-spec": task_name,
        "volcano.sh/template-uid": f"{job_name}-{task_name}",
        **(extra_annotations or {}),
    }
    if release_at_least(rel, "1.9"):
        labels["volcano.sh/task-index"] = str(index)
        annotations["volcano.sh/task-index"] = str(index)
    if release_at_least(rel, "1.10"):
        annotations["volcano.sh/job-retry-count"] = "0"
    limits = {"cpu": cpu, resource: str(cards), "memory": memory}
    svc = f"{job_name}-svc"
    container: JSONObject = {
        "name": "train",
        "image": f"{image.repository}:{image.tag}",
        "command": [
            "/bin/bash",
            "-c",
            "cd /home/ma-user/modelarts && bash scripts/run_pretrain.sh 2>&1 | tee /logs/train.log",
        ],
        "ports": [{"name": "hccl", "containerPort": 2222, "protocol": "TCP"}],
        "env": [
            {"name": "ASCEND_VISIBLE_DEVICES", "value": ",".join(str(i) for i in range(cards))},
            {"name": "HCCL_CONNECT_TIMEOUT", "value": "1800"},
            {"name": "MASTER_PORT", "value": "29500"},
            *({"name": k, "value": v} for k, v in (extra_env or {}).items()),
            {"name": "VK_TASK_INDEX", "value": str(index)},
            {"name": "VC_TASK_INDEX", "value": str(index)},
            {
                "name": f"VC_{task_name.upper().replace('-', '_')}_HOSTS",
                "valueFrom": {
                    "configMapKeyRef": {"name": svc, "key": f"VC_{task_name.upper().replace('-', '_')}_HOSTS"}
                },
            },
            {
                "name": f"VC_{task_name.upper().replace('-', '_')}_NUM",
                "valueFrom": {"configMapKeyRef": {"name": svc, "key": f"VC_{task_name.upper().replace('-', '_')}_NUM"}},
            },
        ],
        "resources": {"limits": dict(sorted(limits.items())), "requests": dict(sorted(limits.items()))},
        "volumeMounts": [
            {"name": "ascend-driver", "mountPath": "/usr/local/Ascend/driver", "readOnly": True},
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "training-data", "mountPath": "/data"},
            {"name": "logs", "mountPath": "/logs"},
            {"name": svc, "mountPath": "/etc/volcano"},
            {"name": "", "mountPath": _SA_VOLUME_MOUNT, "readOnly": True},
        ],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }
    sa_volume = _sa_volume(f"{namespace}/{name}")
    container["volumeMounts"][-1]["name"] = sa_volume["name"]
    spec: JSONObject = {
        "volumes": [
            {"name": "ascend-driver", "hostPath": {"path": "/usr/local/Ascend/driver", "type": ""}},
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
            {"name": "training-data", "persistentVolumeClaim": {"claimName": "pretrain-corpus", "readOnly": True}},
            {"name": "logs", "hostPath": {"path": f"/var/log/training/{job_name}", "type": "DirectoryOrCreate"}},
            {"name": svc, "configMap": {"name": svc, "defaultMode": 420}},
            sa_volume,
        ],
        "containers": [container],
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "nodeSelector": {"accelerator-type": "module-910b-8", "host-arch": "huawei-arm"},
        "serviceAccountName": "default",
        "serviceAccount": "default",
    }
    if node_name:
        spec["nodeName"] = node_name
    spec |= {
        "securityContext": {},
        "hostname": name,
        "subdomain": job_name,
        "schedulerName": "volcano",
        "tolerations": [dict(t) for t in _DEFAULT_TOLERATIONS],
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    if pod_ip is None:
        number = _hash(f"{namespace}/{name}")
        pod_ip = f"172.{16 + number % 16}.{number // 16 % 256}.{number // 4096 % 254 + 1}" if node_name else ""
    status = _pod_status(
        spec, phase=phase, node_ip=node_ip, pod_ip=pod_ip, created=created, qos="Guaranteed", api=api, pod_name=name
    )
    owner = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": job_name,
        "uid": job_uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    metadata: JSONObject = {
        "name": name,
        "namespace": namespace,
        "uid": stable_uid("pod", namespace, name, job_version),
        "resourceVersion": str(50_000_000 + index),
        "creationTimestamp": created,
    }
    if deleting:
        metadata |= {"deletionTimestamp": _HEARTBEAT, "deletionGracePeriodSeconds": 30}
    metadata |= {
        "labels": dict(sorted(labels.items())),
        "annotations": dict(sorted(annotations.items())),
        "ownerReferences": [owner],
        "managedFields": _job_pod_managed_fields(labels, annotations, spec, status, created=created),
    }
    return {"metadata": metadata, "spec": spec, "status": status}


def _job_pod_managed_fields(
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    spec: JSONObject,
    status: JSONObject,
    *,
    created: str,
) -> list[JSONObject]:
    owner_key = f"k:{json.dumps({'uid': 'x'})}"
    controller = {
        "f:metadata": {
            "f:annotations": {f"f:{k}": {} for k in sorted(annotations)},
            "f:labels": {f"f:{k}": {} for k in sorted(labels)},
            "f:ownerReferences": {owner_key: {}},
        },
        "f:spec": _fields_v1({k: v for k, v in spec.items() if k != "nodeName"}),
    }
    entries = [_managed("vc-controller-manager", created, controller)]
    if status.get("conditions"):
        entries.append(_managed("kubelet", status["startTime"], {"f:status": _fields_v1(status)}, subresource="status"))
    return entries


DAEMONSET_KINDS: Final = ("kube-proxy", "ascend-device-plugin", "node-exporter")


def daemonset_pod(kind: str, node_name: str, node_ip: str, *, release: str = MASTER_RELEASE) -> JSONObject:
    """A running DaemonSet pod on `node_name`: `kube-proxy`, `ascend-device-plugin` (MindX device plugin) or
    `node-exporter` (kube-prometheus). Volcano lists these pods (bound by default-scheduler) as node tasks with
    Job "".
    """
    api = RELEASE_K8S_API[normalize_release(release)]
    created = "2026-05-20T03:12:09Z"
    if kind == "kube-proxy":
        namespace, prefix, sa = "kube-system", "kube-proxy-", "kube-proxy"
        labels = {"controller-revision-hash": "7d9f8c6b5d", "k8s-app": "kube-proxy", "pod-template-generation": "3"}
        container: JSONObject = {
            "name": "kube-proxy",
            "image": "registry.k8s.io/kube-proxy:v1.36.1",
            "command": [
                "/usr/local/bin/kube-proxy",
                "--config=/var/lib/kube-proxy/config.conf",
                "--hostname-override=$(NODE_NAME)",
            ],
            "env": [
                {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}}
            ],
            "resources": {},
            "volumeMounts": [
                {"name": "kube-proxy", "mountPath": "/var/lib/kube-proxy"},
                {"name": "xtables-lock", "mountPath": "/run/xtables.lock"},
                {"name": "lib-modules", "mountPath": "/lib/modules", "readOnly": True},
            ],
            "securityContext": {"privileged": True},
        }
        volumes: list[JSONObject] = [
            {"name": "kube-proxy", "configMap": {"name": "kube-proxy", "defaultMode": 420}},
            {"name": "xtables-lock", "hostPath": {"path": "/run/xtables.lock", "type": "FileOrCreate"}},
            {"name": "lib-modules", "hostPath": {"path": "/lib/modules", "type": ""}},
        ]
        priority_class, priority, qos = "system-node-critical", 2000001000, "BestEffort"
    elif kind == "ascend-device-plugin":
        namespace, prefix, sa = "kube-system", "ascend-device-plugin-daemonset-", "ascend-device-plugin-sa-910"
        labels = {
            "controller-revision-hash": "5c8b7f9d4",
            "name": "ascend-device-plugin-ds",
            "pod-template-generation": "1",
        }
        requests = {"cpu": "500m", "memory": "500Mi"}
        container = {
            "name": "device-plugin-01",
            "image": "swr.cn-south-1.myhuaweicloud.com/mindx/ascend-k8sdeviceplugin:v6.0.0",
            "command": [
                "/bin/bash",
                "-c",
                "device-plugin -useAscendDocker=true -volcanoType=true "
                "-presetVirtualDevice=true -logFile=/var/log/mindx-dl/devicePlugin/devicePlugin.log "
                "-logLevel=0",
            ],
            "env": [
                {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}}
            ],
            "resources": {"limits": dict(requests), "requests": dict(requests)},
            "volumeMounts": [
                {"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"},
                {"name": "pod-resource", "mountPath": "/var/lib/kubelet/pod-resources"},
                {"name": "hiai-driver", "mountPath": "/usr/local/Ascend/driver", "readOnly": True},
                {"name": "log-path", "mountPath": "/var/log/mindx-dl/devicePlugin"},
                {"name": "tmp", "mountPath": "/tmp"},
            ],
            "securityContext": {"privileged": True, "readOnlyRootFilesystem": True},
        }
        volumes = [
            {"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins", "type": ""}},
            {"name": "pod-resource", "hostPath": {"path": "/var/lib/kubelet/pod-resources", "type": ""}},
            {"name": "hiai-driver", "hostPath": {"path": "/usr/local/Ascend/driver", "type": ""}},
            {"name": "log-path", "hostPath": {"path": "/var/log/mindx-dl/devicePlugin", "type": "Directory"}},
            {"name": "tmp", "hostPath": {"path": "/tmp", "type": ""}},
        ]
        priority_class, priority, qos = "system-node-critical", 2000001000, "Guaranteed"
    elif kind == "node-exporter":
        namespace, prefix, sa = "monitoring", "node-exporter-", "node-exporter"
        labels = {
            "app.kubernetes.io/component": "exporter",
            "app.kubernetes.io/name": "node-exporter",
            "app.kubernetes.io/part-of": "kube-prometheus",
            "app.kubernetes.io/version": "1.8.2",
            "controller-revision-hash": "6b9d8f7c44",
            "pod-template-generation": "2",
        }
        container = {
            "name": "node-exporter",
            "image": "quay.io/prometheus/node-exporter:v1.8.2",
            "args": [
                "--web.listen-address=127.0.0.1:9100",
                "--path.sysfs=/host/sys",
                "--path.rootfs=/host/root",
                "--path.udev.data=/host/root/run/udev/data",
                "--no-collector.wifi",
                "--no-collector.hwmon",
                "--collector.filesystem.mount-points-exclude=^/(dev|proc|sys|run/k3s/containerd/.+|var/lib/docker/.+|var/lib/kubelet/pods/.+)($|/)",
            ],
            "resources": {"limits": {"cpu": "250m", "memory": "180Mi"}, "requests": {"cpu": "102m", "memory": "180Mi"}},
            "volumeMounts": [
                {"name": "sys", "mountPath": "/host/sys", "readOnly": True},
                {"name": "root", "mountPath": "/host/root", "readOnly": True},
            ],
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "capabilities": {"add": ["SYS_TIME"], "drop": ["ALL"]},
                "readOnlyRootFilesystem": True,
            },
        }
        volumes = [
            {"name": "sys", "hostPath": {"path": "/sys", "type": ""}},
            {"name": "root", "hostPath": {"path": "/", "type": ""}},
        ]
        priority_class, priority, qos = "system-cluster-critical", 2000000000, "Burstable"
    else:
        raise ValueError(f"kind: {kind!r} is not one of {', '.join(DAEMONSET_KINDS)}")
    name = prefix + _suffix(f"{kind}/{node_name}")
    sa_volume = _sa_volume(f"{namespace}/{name}")
    volumes.append(sa_volume)
    container["volumeMounts"].append({"name": sa_volume["name"], "mountPath": _SA_VOLUME_MOUNT, "readOnly": True})
    container |= {
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }
    security = container.pop("securityContext")
    container["securityContext"] = security
    spec: JSONObject = {
        "volumes": volumes,
        "containers": [container],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "serviceAccountName": sa,
        "serviceAccount": sa,
        "nodeName": node_name,
        "hostNetwork": True,
    }
    if kind == "node-exporter":
        spec["hostPID"] = True
    spec |= {
        "securityContext": {},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
                    ]
                }
            }
        },
        "schedulerName": "default-scheduler",
        "tolerations": [{"operator": "Exists"}]
        + [
            {"key": f"node.kubernetes.io/{k}", "operator": "Exists", "effect": e}
            for k, e in (
                ("not-ready", "NoExecute"),
                ("unreachable", "NoExecute"),
                ("disk-pressure", "NoSchedule"),
                ("memory-pressure", "NoSchedule"),
                ("pid-pressure", "NoSchedule"),
                ("unschedulable", "NoSchedule"),
                ("network-unavailable", "NoSchedule"),
            )
        ],
        "priorityClassName": priority_class,
        "priority": priority,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    status = _pod_status(
        spec, phase="Running", node_ip=node_ip, pod_ip=node_ip, created=created, qos=qos, api=api, pod_name=name
    )
    owner = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "name": prefix.rstrip("-"),
        "uid": stable_uid("daemonset", namespace, kind),
        "controller": True,
        "blockOwnerDeletion": True,
    }
    metadata: JSONObject = {
        "name": name,
        "generateName": prefix,
        "namespace": namespace,
        "uid": stable_uid("pod", namespace, name),
        "resourceVersion": str(47_000_000 + _hash(name) % 1_000_000),
        "creationTimestamp": created,
        "labels": dict(sorted(labels.items())),
        "ownerReferences": [owner],
    }
    metadata["managedFields"] = [
        _managed(
            "kube-controller-manager",
            created,
            {
                "f:metadata": {
                    "f:generateName": {},
                    "f:labels": {f"f:{k}": {} for k in sorted(labels)},
                    "f:ownerReferences": {f"k:{json.dumps({'uid': owner['uid']})}": {}},
                },
                "f:spec": _fields_v1({k: v for k, v in spec.items() if k != "nodeName"}),
            },
        ),
        _managed("kubelet", status["startTime"], {"f:status": _fields_v1(status)}, subresource="status"),
    ]
    return {"metadata": metadata, "spec": spec, "status": status}


# ------------------------------------------------------------------------------------------------- api.Resource


@dataclass(slots=True)
class _Resource:
    """api.Resource arithmetic as Volcano does it (float64 sums; scalar map created lazily)."""

    milli_cpu: float = 0.0
    memory: float = 0.0
    scalars: dict[str, float] | None = None
    max_task_num: int = 0

    def add_scalar(self, name: str, quantity: float) -> None:
        if self.scalars is None:
            self.scalars = {}
        self.scalars[name] = self.scalars.get(name, 0.0) + quantity

    def add(self, other: _Resource) -> _Resource:
        self.milli_cpu += other.milli_cpu
        self.memory += other.memory
        for name, quantity in (other.scalars or {}).items():
            self.add_scalar(name, quantity)
        return self

    def sub(self, other: _Resource) -> _Resource:
        self.milli_cpu -= other.milli_cpu
        self.memory -= other.memory
        if self.scalars is not None:  # Go's sub() skips scalars when the receiver has none
            for name, quantity in (other.scalars or {}).items():
                self.scalars[name] = self.scalars.get(name, 0.0) - quantity
        return self

    def set_max(self, other: _Resource) -> None:
        self.milli_cpu = max(self.milli_cpu, other.milli_cpu)
        self.memory = max(self.memory, other.memory)
        for name, quantity in (other.scalars or {}).items():
            if self.scalars is None:  # Go copies all of other's scalars and returns early here
                self.scalars = dict(other.scalars or {})
                return
            if name not in self.scalars or quantity > self.scalars[name]:
                self.scalars[name] = quantity

    def copy(self) -> _Resource:
        return _Resource(
            self.milli_cpu, self.memory, None if self.scalars is None else dict(self.scalars), self.max_task_num
        )

    def is_empty(self, release: str) -> bool:
        if not (self.milli_cpu < 0.1 and self.memory < 0.1):
            return False
        ignored = {"pods"} if release_at_least(release, "1.9") else set()
        return all(q < 0.1 for n, q in (self.scalars or {}).items() if n not in ignored)

    def to_json(self) -> JSONObject:
        return {
            "MilliCPU": go_number(self.milli_cpu),
            "Memory": go_number(self.memory),
            "ScalarResources": None
            if self.scalars is None
            else {k: go_number(v) for k, v in sorted(self.scalars.items())},
            "MaxTaskNum": self.max_task_num,
        }


def resource(
    *, milli_cpu: float = 0.0, memory: float = 0.0, scalars: Mapping[str, float] | None = None, max_task_num: int = 0
) -> JSONObject:
    """An api.Resource from plain numbers: CPU in millicores, memory in bytes, scalars (NPUs, hugepages,
    ephemeral-storage) in milli-units, so 8 cards are 8000. `scalars=None` gives `"ScalarResources": null`."""
    return _Resource(milli_cpu, memory, None if scalars is None else dict(scalars), max_task_num).to_json()


def _is_scalar_resource(name: str) -> bool:
    # k8s v1helper.IsScalarResourceName: extended (has a "/" outside kubernetes.io), hugepages-, kubernetes.io/
    # prefixed native, attachable-volumes-.
    return (
        "/" in name or name.startswith("hugepages-") or name.startswith("attachable-volumes-")
    ) and not name.startswith("requests.")


def _new_resource(resource_list: Mapping[str, str], release: str) -> _Resource:
    """api.NewResource: cpu -> millicores, memory -> bytes, pods -> MaxTaskNum (and a `pods` scalar from v1.9),
    ephemeral-storage and other scalar resources -> milli-units; count/ quotas skipped."""
    out = _Resource()
    for name, text in resource_list.items():
        if name == "cpu":
            out.milli_cpu += float(quantity_milli_value(text))
        elif name == "memory":
            out.memory += float(quantity_value(text))
        elif name == "pods":
            out.max_task_num += quantity_value(text)
            if release_at_least(release, "1.9"):
                out.add_scalar("pods", float(quantity_value(text)))
        elif name == "ephemeral-storage" or (not name.startswith("count/") and _is_scalar_resource(name)):
            out.add_scalar(name, float(quantity_milli_value(text)))
    return out


def _pod_request(pod: Mapping[str, Any], release: str) -> _Resource:
    """api.GetPodResourceRequest at `release` (pkg/scheduler/api/pod_info.go)."""
    spec = pod.get("spec") or {}
    result = _Resource()
    for container in spec.get("containers") or []:
        result.add(_new_resource((container.get("resources") or {}).get("requests") or {}, release))
    overhead = spec.get("overhead")
    if overhead and not release_at_least(release, "1.15"):
        result.add(_new_resource(overhead, release))
    inits = spec.get("initContainers") or []
    if release_at_least(release, "1.10"):  # restartable (sidecar) init containers add up
        sidecars, init_max = _Resource(), _Resource()
        for container in inits:
            request = _new_resource((container.get("resources") or {}).get("requests") or {}, release)
            if container.get("restartPolicy") == "Always":
                result.add(request)
                sidecars.add(request)
                request = sidecars.copy()
            else:
                request = request.add(sidecars)
            init_max.set_max(request)
        result.set_max(init_max)
    else:
        for container in inits:
            result.set_max(_new_resource((container.get("resources") or {}).get("requests") or {}, release))
    if release_at_least(release, "1.9"):
        result.add_scalar("pods", 1.0)
    if release_at_least(release, "1.15"):
        if result.scalars is None:
            result.scalars = {}
        if overhead:
            result.add(_new_resource(overhead, release))
    return result


# ------------------------------------------------------------------------------------------------- api.TaskInfo


def _transaction_context(node_name: str, status: int, release: str) -> JSONObject:
    values = {"NodeName": node_name, "EvictionOccurred": False, "JobAllocatedHyperNode": "", "Status": status}
    return {k: values[k] for k in GO_FIELDS[release]["TransactionContext"]}


def task_status_of(pod: Mapping[str, Any]) -> int:
    """getTaskStatus: the TaskStatus Volcano derives from a pod's phase, deletionTimestamp and nodeName."""
    phase = (pod.get("status") or {}).get("phase")
    deleting = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
    if phase == "Running":
        return TASK_STATUS["Releasing" if deleting else "Running"]
    if phase == "Pending":
        if deleting:
            return TASK_STATUS["Releasing"]
        return TASK_STATUS["Bound" if (pod.get("spec") or {}).get("nodeName") else "Pending"]
    if phase in ("Succeeded", "Failed"):
        return TASK_STATUS[str(phase)]
    return TASK_STATUS["Unknown"]


def task_info(
    pod: Mapping[str, Any],
    *,
    release: str = MASTER_RELEASE,
    status: int | str | None = None,
    node_name: str | None = None,
    last_transaction: tuple[str, int] | None = None,
    job_allocated_hyper_node: str = "",
    job: str | None = None,
) -> JSONObject:
    """An api.TaskInfo as `release` marshals it, derived from a v1.Pod the way NewTaskInfo and Clone do.

    `status` (a TaskStatus name or bit), `node_name` and `job` override what the pod implies, e.g.
    `status="Allocated"` with `node_name` for a task allocated earlier in the session (Statement.Allocate also sets
    the shared Pod's spec.nodeName, so build that pod with `node_name`). Job is `<namespace>/<group-name annotation>`
    ("" without the annotation), TaskRole the volcano.sh/task-spec annotation or label, Priority the pod's
    spec.priority (1 when absent), Preemptable true unless the pod says otherwise. EvictionOccurred and
    CustomBindErrHandlerSucceeded are false in every snapshot: TaskInfo.Clone does not copy them.
    """
    rel = normalize_release(release)
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    annotations = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    request = _pod_request(pod, rel)
    group = annotations.get("scheduling.k8s.io/group-name", "")
    bit = TASK_STATUS[status] if isinstance(status, str) else status
    priority = spec.get("priority")
    task_priority = annotations.get("volcano.sh/task-priority")
    if task_priority is not None and re.fullmatch(r"[+-]?\d+", task_priority):
        priority = int(task_priority)
    preemptable = True
    for source in (annotations, labels):
        if "volcano.sh/preemptable" in source:
            preemptable = source["volcano.sh/preemptable"].lower() in ("1", "t", "true")
            break
    revocable = ""
    if annotations.get("volcano.sh/revocable-zone") == "*" or (
        "volcano.sh/revocable-zone" not in annotations
        and annotations.get("volcano.sh/preemptable", "").lower()
        in (
            "1",
            "t",
            "true",
        )
    ):
        revocable = "*"
    node = spec.get("nodeName", "") if node_name is None else node_name
    values: JSONObject = {
        "UID": meta.get("uid", ""),
        "Job": job if job is not None else f"{meta.get('namespace', '')}/{group}" if group else "",
        "Name": meta.get("name", ""),
        "Namespace": meta.get("namespace", ""),
        "TaskRole": annotations.get("volcano.sh/task-spec") or labels.get("volcano.sh/task-spec") or "",
        "Resreq": request.to_json(),
        "InitResreq": request.to_json(),
        "DRAResreq": None,
        "ResourceClaimKeys": None,
        "ResourceClaimDRAResreq": None,
        "NodeName": node,
        "EvictionOccurred": False,
        "JobAllocatedHyperNode": job_allocated_hyper_node,
        "Status": task_status_of(pod) if bit is None else bit,
        "LastTransaction": None
        if last_transaction is None
        else _transaction_context(last_transaction[0], last_transaction[1], rel),
        "Priority": 1 if priority is None else priority,
        "VolumeReady": False,
        "Preemptable": preemptable,
        "BestEffort": request.is_empty(rel),
        "HasRestartableInitContainer": any(
            c.get("restartPolicy") == "Always" for c in spec.get("initContainers") or []
        ),
        "SchGated": bool(spec.get("schedulingGates")),
        "RevocableZone": revocable,
        "NumaInfo": {"Policy": annotations.get("volcano.sh/numa-topology-policy", ""), "ResMap": {}},
        "PodVolumes": None,
        "Pod": pod,
        "PodAnnotations": dict(annotations) if annotations else None,
        "CustomBindErrHandlerSucceeded": False,
    }
    return {k: values[k] for k in GO_FIELDS[rel]["TaskInfo"]}


def task_key(task: Mapping[str, Any]) -> str:
    """NodeInfo.Tasks key: `<namespace>/<name>` (PodKey); JobInfo.Tasks is keyed by pod UID instead."""
    return f"{task['Namespace']}/{task['Name']}"


# ------------------------------------------------------------------------------------------------- api.NodeInfo


def _resource_of(value: Mapping[str, Any]) -> _Resource:
    return _Resource(
        float(value["MilliCPU"]),
        float(value["Memory"]),
        None if value["ScalarResources"] is None else {k: float(v) for k, v in value["ScalarResources"].items()},
        int(value["MaxTaskNum"]),
    )


_OTHERS: Final[Mapping[str, JSONObject | None]] = {
    "1.7": None,
    "1.8": {"GpuShare": None, "vgpu4pd": None},
    **{r: {"GpuShare": None, "hamivgpu": None} for r in ("1.9", "1.10", "1.11", "1.12", "1.13")},
    **{r: {} for r in ("1.14", "1.15", "1.16")},
}
"""NodeInfo.Others on a node without GPU-share/vGPU resources: nil (v1.7), two nil device entries (v1.8 - v1.13:
setNodeOthersResource stores typed nil pointers), empty (v1.14+: entries only when those features are enabled)."""


def _node_usage(allocatable: _Resource, tasks: Iterable[Mapping[str, Any]]) -> JSONObject:
    """Releasing, Pipelined, Idle, Used and Tasks as NodeInfo.AddTask leaves them after adding `tasks`."""
    idle, used = allocatable.copy(), _Resource()
    releasing, pipelined = _Resource(), _Resource()
    task_map: dict[str, Mapping[str, Any]] = {}
    for task in tasks:
        request = _resource_of(task["Resreq"])
        bit = task["Status"]
        if bit == TASK_STATUS["Pipelined"]:
            pipelined.add(request)
        else:
            idle.sub(request)
            used.add(request)
            if bit == TASK_STATUS["Releasing"]:
                releasing.add(request)
        task_map[task_key(task)] = task
    return {
        "Releasing": releasing.to_json(),
        "Pipelined": pipelined.to_json(),
        "Idle": idle.to_json(),
        "Used": used.to_json(),
        "Tasks": dict(sorted(task_map.items())),
    }


def node_info(
    node: Mapping[str, Any],
    tasks: Iterable[Mapping[str, Any]] = (),
    *,
    release: str = MASTER_RELEASE,
    image_nodes: int | Mapping[str, int] = 1,
    bind_generation: int = 0,
    idle: JSONObject | None = None,
    used: JSONObject | None = None,
    releasing: JSONObject | None = None,
    pipelined: JSONObject | None = None,
) -> JSONObject:
    """An api.NodeInfo as `release` marshals it in a session, for a v1.Node and the TaskInfos on it.

    Idle, Used, Releasing and Pipelined follow NodeInfo.AddTask: a Releasing task counts in Idle, Used and
    Releasing; a Pipelined task only in Pipelined; any other status in Idle and Used. Succeeded and Failed pods
    are not node tasks in Volcano's cache: leave them out. `image_nodes` is how many nodes hold each image
    (ImageStateSummary.NumNodes), one number for all or per image name. `idle`, `used`, `releasing` and
    `pipelined` (built with `resource`) replace the derived values, e.g. for free cards without modelling pods.
    """
    rel = normalize_release(release)
    status = node.get("status") or {}
    meta = node.get("metadata") or {}
    allocatable = _new_resource(status.get("allocatable") or {}, rel)
    capacity = _new_resource(status.get("capacity") or {}, rel)
    ready = all(c.get("status") == "True" for c in status.get("conditions") or [] if c.get("type") == "Ready")
    images: dict[str, JSONObject] = {}
    for image in status.get("images") or []:
        for name in image.get("names") or []:
            count = image_nodes if isinstance(image_nodes, int) else image_nodes.get(name, 1)
            summary = {"Size": image.get("sizeBytes", 0), "NumNodes": count, "Nodes": None}
            images.setdefault(name, {k: summary[k] for k in GO_FIELDS[rel]["ImageStateSummary"]})
    usage = {"MetricsTime": GO_ZERO_TIME, "CPUUsageAvg": {}, "MEMUsageAvg": {}}
    others = _OTHERS[rel]
    revocable = (meta.get("labels") or {}).get("volcano.sh/revocable-zone", "")
    values: JSONObject = {
        "Name": meta.get("name", ""),
        "Node": node,
        "State": {"Phase": 1, "Reason": ""} if ready else {"Phase": 2, "Reason": "NotReady"},
        **_node_usage(allocatable, tasks),
        **{
            key: value
            for key, value in (("Idle", idle), ("Used", used), ("Releasing", releasing), ("Pipelined", pipelined))
            if value is not None
        },
        "Allocatable": allocatable.to_json(),
        "Capability": capacity.to_json(),
        "Capacity": capacity.to_json(),
        "ResourceUsage": {k: usage[k] for k in GO_FIELDS[rel]["NodeUsage"]},
        "NumaInfo": None,
        "NumaChgFlag": 0,
        "UnassignedNumaPods": None,
        "NumaSchedulerInfo": None,
        "RevocableZone": revocable,
        "Others": None if others is None else dict(others),
        "GPUDevices": {},
        "OversubscriptionNode": False,
        "OfflineJobEvicting": False,
        "OversubscriptionResource": _Resource().to_json(),
        "ImageStates": dict(sorted(images.items())),
        "Generation": 0,
        "BindGeneration": bind_generation,
    }
    return {k: values[k] for k in GO_FIELDS[rel]["NodeInfo"]}


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


def _tagged(release: str) -> bool:
    # volcano.sh/apis internal scheduling types carry json tags (omitempty) from v1.14.0 (staging copy).
    return release_at_least(release, "1.14")


def _spec_object(values: Mapping[str, Any], struct: str, release: str) -> JSONObject:
    """An internal scheduling struct: Go names and every field before v1.14, tagged omitempty keys after."""
    keys = GO_FIELDS[release][struct]
    if not _tagged(release):
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
    if not _tagged(release):
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
            "apiVersion": "batch.volcano.sh/v1alpha1",
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
        _managed(
            "vc-controller-manager",
            created,
            {
                "f:metadata": {"f:ownerReferences": {}},
                "f:spec": _fields_v1({k[0].lower() + k[1:]: v for k, v in spec.items() if v is not None}),
            },
        ),
        _managed(
            "vc-scheduler",
            scheduled_at or created,
            {"f:status": _fields_v1({k[0].lower() + k[1:]: v for k, v in status.items() if v})},
            subresource="status",
        ),
    ]
    for entry in managed:
        entry["apiVersion"] = "scheduling.volcano.sh/v1beta1"
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
    if _tagged(rel):
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
    if not _tagged(rel):  # the tagged-but-omitempty fields of the untagged era
        spec_json = {}
        for key in GO_FIELDS[rel]["QueueSpec"]:
            value = spec[key[0].upper() + key[1:]]
            if key[0].isupper() or key == "guarantee" or value not in (None, "", 0):
                spec_json[key] = value
    else:
        spec_json = _spec_object(spec, "QueueSpec", rel)
    managed = [
        _managed("vc-controller-manager", created, {"f:spec": _fields_v1({"reclaimable": True, "weight": 1})}),
        _managed("vc-controller-manager", created, {"f:status": _fields_v1({"state": state})}, subresource="status"),
    ]
    for entry in managed:
        entry["apiVersion"] = "scheduling.volcano.sh/v1beta1"
    meta = _object_meta(name, None, stable_uid("queue", name), created, generation=1, managed=managed)
    status_json = _spec_object(status, "QueueStatus", rel)
    queue = (
        {"metadata": meta, "spec": spec_json, "status": status_json}
        if _tagged(rel)
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
    allocated, total = _Resource(), _Resource()
    for task in tasks:
        request = _resource_of(task["Resreq"])
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
        if "volcano.sh/preemptable" in source:
            preemptable = source["volcano.sh/preemptable"].lower() in ("1", "t", "true")
            break
    budget_values = {
        "MinAvailable": annotations.get("volcano.sh/jdb-min-available", ""),
        "MaxUnavailable": ""
        if "volcano.sh/jdb-min-available" in annotations
        else annotations.get("volcano.sh/jdb-max-unavailable", ""),
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


# ------------------------------------------------------------------------------------- answers as Volcano reads them
# extender.go send(): POST, then `resp.StatusCode != 200` is an error (body unread), else
# json.NewDecoder(body).Decode(&resp): the first JSON value only (trailing bytes never read), keys matched
# case-insensitively (exact match first), unknown keys skipped, `null` leaves strings/numbers unchanged and sets
# slices/maps to nil, a type mismatch is remembered while decoding goes on and returned at the end. From v1.12.0
# the body passes through http.MaxBytesReader(10 MiB). Every send() error goes through the `ignorable` switch.

MAX_RESPONSE_BYTES: Final = 10 << 20
"""maxBodySize in extender.go from v1.12.0: a JSON value reaching past 10 MiB is an error."""


class _Obj(list[tuple[str, Any]]):
    """A JSON object as (key, value) pairs in document order, duplicates kept (Go decodes each in turn)."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid character {name[0]!r} looking for beginning of value")


_JSON_DECODER: Final = json.JSONDecoder(object_pairs_hook=_Obj, parse_constant=_reject_constant, strict=True)


def _go_first_value(body: bytes, limit: int | None) -> tuple[Any, str | None]:
    text = body.decode("utf-8", errors="replace")  # Go turns invalid UTF-8 in strings into U+FFFD
    start = len(text) - len(text.lstrip(" \t\r\n"))
    if start == len(text):
        return None, "EOF"
    try:
        value, end = _JSON_DECODER.raw_decode(text, start)
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, json.JSONDecodeError) and exc.pos >= len(text):
            return None, "unexpected EOF"
        return None, f"invalid JSON: {exc}"
    if limit is not None and len(text[:end].encode("utf-8")) > limit:
        return None, "http: request body too large"
    return value, None


def _json_kind(value: Any) -> str:
    if isinstance(value, _Obj):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return f"number {value}"
    return "string"


def _fold(name: str) -> str:
    return "".join(c.upper().lower() if len(c.upper()) == 1 else c.lower() for c in name)


_Kind = Literal["string", "int", "float_map", "status_list"]
_GO_TYPES: Final[Mapping[str, str]] = {
    "string": "string",
    "int": "int",
    "float_map": "map[string]float64",
    "status_list": "[]*api.Status",
}


def _type_error(value: Any, go_type: str, where: str) -> str:
    kind = _json_kind(value)
    kind = kind if kind.startswith("number") and go_type == "int" else kind.split(" ")[0]
    return f"json: cannot unmarshal {kind} into Go {where} of type {go_type}"


def _decode_value(value: Any, kind: _Kind, current: Any, where: str) -> tuple[Any, str | None]:
    """(new field value, error). On error the field keeps `current`, as Go leaves it."""
    if value is None:
        return (None, None) if kind in ("float_map", "status_list") else (current, None)
    if kind == "string":
        return (value, None) if isinstance(value, str) else (current, _type_error(value, "string", where))
    if kind == "int":
        if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63:
            return value, None
        return current, _type_error(value, "int", where)
    if kind == "float_map":
        if not isinstance(value, _Obj):
            return current, _type_error(value, "map[string]float64", where)
        scores: dict[str, float] = dict(current) if isinstance(current, dict) else {}
        error = None
        for key, item in value:
            number = 0.0
            if item is None:
                pass
            elif isinstance(item, (int, float)) and not isinstance(item, bool) and math.isfinite(float(item)):
                number = float(item)
            else:
                error = error or _type_error(item, "float64", f"struct field {where.rsplit(maxsplit=1)[-1]}.{key}")
            scores[key] = number  # Go stores the (zero) element even when its value failed to decode
        return scores, error
    # status_list: []*api.Status {Code int; Reason string}, no json tags
    if not isinstance(value, list) or isinstance(value, _Obj):
        return current, _type_error(value, "[]*api.Status", where)
    statuses: list[dict[str, Any] | None] = []
    error = None
    for item in value:
        if item is None:
            statuses.append(None)
            continue
        if not isinstance(item, _Obj):
            statuses.append({"Code": 0, "Reason": ""})
            error = error or _type_error(item, "api.Status", "value")
            continue
        fields, item_error = _decode_struct(item, {"Code": "int", "Reason": "string"}, "Status")
        statuses.append({"Code": fields.get("Code", 0), "Reason": fields.get("Reason", "")})
        error = error or item_error
    return statuses, error


def _decode_struct(value: Any, fields: Mapping[str, _Kind], struct: str) -> tuple[dict[str, Any], str | None]:
    if value is None:
        return {}, None
    if not isinstance(value, _Obj):
        return {}, _type_error(value, f"extender.{struct}", "value")
    by_fold = {_fold(name): name for name in fields}
    out: dict[str, Any] = {}
    error = None
    for key, item in value:
        name = key if key in fields else by_fold.get(_fold(key))
        if name is None:
            continue
        decoded, item_error = _decode_value(item, fields[name], out.get(name), f"struct field {struct}.{name}")
        out[name] = decoded
        error = error or item_error
    return out, error


def _send(
    body: bytes, *, http_status: int, release: str, fields: Mapping[str, _Kind], struct: str, verb: str
) -> tuple[dict[str, Any], str | None]:
    if http_status != 200:
        return {}, f"failed {verb} with extender at URL <urlPrefix>/{verb}, code {http_status}"
    limit = MAX_RESPONSE_BYTES if release_at_least(release, "1.12") else None
    value, error = _go_first_value(body, limit)
    if error:
        return {}, error
    return _decode_struct(value, fields, struct)


@dataclass(frozen=True, slots=True)
class PredicateOutcome:
    """How the allocate action treats a node after the extender's predicate answer."""

    passes: bool
    code: int | None
    """Status code Volcano records for a failed node (v1.8+: 1 Error .. 5 Skip); None when it passes, and in v1.7
    (plain errors, no codes)."""
    reason: str
    """What Volcano records as the node's failure ("" when it passes)."""
    error: str | None
    """The send()/decode error, also when `ignorable` turned it into a pass."""


def decode_predicate_response(
    release: str,
    body: bytes,
    ignorable: bool,
    *,
    http_status: int = 200,
    task: str = "<namespace>/<name>",
    node: str = "<node>",
) -> PredicateOutcome:
    """Whether the node passes the extender predicate in `release`, as the plugin and allocate action decide.

    v1.7: `{"errorMessage"}`, non-empty fails (plain error). v1.8, v1.9: `{"status": [{"Code", "Reason"}]}`; the
    node fails when an entry has code 1-5 (Error, Unschedulable, UnschedulableAndUnresolvable, Wait, Skip) and
    allocate then records only "status is not success". v1.10+: `{"status": "<reason>", "code": int}`; a non-empty
    status fails with its code (0 becomes 1), but PredicateForAllocateAction ignores codes outside 1-5, so such a
    node passes. Errors (non-200, bad JSON, type mismatch) pass when `ignorable`, else fail: v1.7 with the error,
    v1.8/v1.9 wrapped by allocate, v1.10+ as a FitError with code 1.
    """
    rel = normalize_release(release)
    fields: dict[str, _Kind] = (
        {"errorMessage": "string"}
        if rel == "1.7"
        else {"status": "status_list"}
        if rel in ("1.8", "1.9")
        else {"status": "string", "code": "int"}
    )
    decoded, error = _send(
        body, http_status=http_status, release=rel, fields=fields, struct="PredicateResponse", verb="predicate"
    )
    if error:
        if ignorable:
            return PredicateOutcome(True, None, "", error)
        if rel == "1.7":
            return PredicateOutcome(False, None, error, error)
        if rel in ("1.8", "1.9"):
            wrapped = f"predicates failed in allocate for task <{task}> on node <{node}>: {error}"
            return PredicateOutcome(False, None, wrapped, error)
        return PredicateOutcome(False, STATUS_CODES["Error"], error, error)
    if rel == "1.7":
        message = decoded.get("errorMessage") or ""
        return PredicateOutcome(not message, None, message, None)
    if rel in ("1.8", "1.9"):
        failing = [s["Code"] for s in decoded.get("status") or [] if s is not None and s["Code"] in _FAILING_CODES]
        if not failing:
            return PredicateOutcome(True, None, "", None)
        reason = f"predicates failed in allocate for task <{task}> on node <{node}>, status is not success"
        return PredicateOutcome(False, failing[0], reason, None)
    message = decoded.get("status") or ""
    if not message:
        return PredicateOutcome(True, None, "", None)
    code = decoded.get("code") or STATUS_CODES["Error"]
    if code not in _FAILING_CODES:
        return PredicateOutcome(True, None, "", None)
    return PredicateOutcome(False, code, message, None)


PrioritizeEffect = Literal["scored", "ignored", "call_failed"]


@dataclass(frozen=True, slots=True)
class PrioritizeOutcome:
    """What a prioritize answer does to the allocate action's node scores."""

    effect: PrioritizeEffect
    """`scored`: nodeScore added to the other plugins' scores (missing nodes get 0). `ignored`: send() failed and
    `ignorable` made the plugin return no scores; the other plugins still decide. `call_failed`: the plugin returned
    an error, Session.BatchNodeOrderFn fails and PrioritizeNodes returns no scores at all."""
    scores: Mapping[str, float] | None
    error: str | None
    consequence: str
    """For `call_failed`: no node is chosen from that candidate list; v1.7 - v1.11 then dereference a nil node and
    vc-scheduler panics (wait.Until re-raises), v1.12+ skip the task for this session."""


def decode_prioritize_response(
    release: str, body: bytes, ignorable: bool, *, http_status: int = 200
) -> PrioritizeOutcome:
    """`{"nodeScore": {node: float}, "errorMessage": ""}` as every release reads it: scores are used only when
    errorMessage is empty and nodeScore is not null. A missing or null nodeScore, or any errorMessage, is an error
    even with `ignorable` (that switch only covers send() errors); `{"nodeScore": {}}` means no preference."""
    rel = normalize_release(release)
    decoded, error = _send(
        body,
        http_status=http_status,
        release=rel,
        fields={"nodeScore": "float_map", "errorMessage": "string"},
        struct="PrioritizeResponse",
        verb="prioritize",
    )
    crash = (
        "vc-scheduler panics on a nil best node when the list had 2+ candidates (allocate.go)"
        if not release_at_least(rel, "1.12")
        else "task skipped for this session (prioritizeNodes returns no node)"
    )
    if error:
        if ignorable:
            return PrioritizeOutcome("ignored", None, error, "extender scores left out; other plugins decide")
        return PrioritizeOutcome("call_failed", None, error, crash)
    message = decoded.get("errorMessage") or ""
    scores = decoded.get("nodeScore")
    if message or scores is None:
        return PrioritizeOutcome("call_failed", None, message, crash)
    return PrioritizeOutcome("scored", dict(scores), None, "scores added to the other node-order plugins' scores")


@dataclass(frozen=True, slots=True)
class EventOutcome:
    """Effect of an allocateFunc/deallocateFunc answer (v1.13+)."""

    error: str | None
    """event.Err as the plugin sets it; on allocate it makes Statement.Allocate fail and the allocation is rolled
    back; on deallocate it is only logged."""


def decode_event_handler_response(
    release: str, body: bytes, ignorable: bool, *, http_status: int = 200
) -> EventOutcome:
    """EventHandlerResponse{ErrorMessage json:"errorMessage"}: a send() error sets event.Err unless `ignorable`;
    a non-empty errorMessage sets it in any case, even one decoded before a later type error."""
    rel = normalize_release(release)
    if not release_at_least(rel, "1.13"):
        raise ValueError(f"release: {release!r} has no allocate/deallocate event verbs (they arrived in 1.13)")
    decoded, error = _send(
        body,
        http_status=http_status,
        release=rel,
        fields={"errorMessage": "string"},
        struct="EventHandlerResponse",
        verb="allocate",
    )
    message = decoded.get("errorMessage") or ""
    if message:
        return EventOutcome(message)
    return EventOutcome(None if ignorable else error)


def on_session_open_outcome(release: str, http_status: int, ignorable: bool) -> str:
    """onSessionOpen's answer body is never read; only the HTTP status (or a transport error, any non-200 here)
    matters. On error without `ignorable` the plugin returns before registering its predicate, prioritize and
    event functions: the extender is off for the whole session."""
    normalize_release(release)
    if http_status == 200:
        return "ok"
    if ignorable:
        return "error logged; session continues with the extender's functions registered"
    return "error logged; no predicate/prioritize/event calls to the extender in this session"


ANSWER_SHAPES: Final[Mapping[str, Mapping[str, str]]] = {
    release: {
        "predicate": '{"errorMessage": "<reason, empty to pass>"}'
        if release == "1.7"
        else '{"status": [{"Code": <int>, "Reason": "<text>"}]}  (null or [] to pass)'
        if release in ("1.8", "1.9")
        else '{"status": "<reason, empty to pass>", "code": <int>}',
        "prioritize": '{"nodeScore": {"<node>": <float>}, "errorMessage": ""}',
        "event": '{"errorMessage": "<text, empty for ok>"}' if release_at_least(release, "1.13") else "",
        "onSessionOpen": "any body; HTTP 200",
    }
    for release in RELEASES
}
"""The answer shape each release reads, per verb ("" when the release has no such verb)."""

UNIVERSAL_PREDICATE_PASS: Final = b'{"status":null,"code":0,"errorMessage":""}'
"""Read as "fits" by every release, whatever `ignorable` is (so is `{}`)."""


def encode_predicate_fail_everywhere(reason: str, *, code: int = STATUS_CODES["Unschedulable"]) -> bytes:
    """A failing predicate answer every release reads as a failure, but only with `ignorable: false`: v1.7 reads
    errorMessage, v1.8/v1.9 the status list, v1.10+ cannot decode that list into their string `status` and record
    a FitError with code 1 and the decode error as its text. No body fails everywhere with `ignorable: true`:
    "status" must be a list for v1.8/v1.9 and a string for v1.10+, and any spelling of that key lands in that one
    field in both."""
    if code not in _FAILING_CODES:
        raise ValueError(f"code: {code} is not a failing status code (1 Error .. 5 Skip); use 2 (Unschedulable)")
    return orjson.dumps({"errorMessage": reason, "status": [{"Code": code, "Reason": reason}], "code": code})


def encode_predicate_answer(release: str, *, reason: str = "", code: int = STATUS_CODES["Unschedulable"]) -> bytes:
    """The predicate answer `release` reads: pass with an empty `reason`, fail with `reason` and `code` (a code
    outside 1-5 would be ignored by v1.8+ allocate, so it must be one of those)."""
    rel = normalize_release(release)
    if reason and code not in _FAILING_CODES:
        raise ValueError(f"code: {code} is not a failing status code (1 Error .. 5 Skip); use 2 (Unschedulable)")
    if rel == "1.7":
        return orjson.dumps({"errorMessage": reason})
    if rel in ("1.8", "1.9"):
        return orjson.dumps({"status": [{"Code": code, "Reason": reason}] if reason else None})
    return orjson.dumps({"status": reason, "code": code if reason else 0})


def encode_prioritize_answer(scores: Mapping[str, float]) -> bytes:
    """`{"nodeScore": {...}, "errorMessage": ""}`; never null: every release turns a null nodeScore into an error."""
    return orjson.dumps({"nodeScore": dict(scores), "errorMessage": ""})


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
                candidates &= {r for r in RELEASES if not _tagged(r)}
                candidates &= {r for r in RELEASES if ("State" in spec) == ("State" in GO_FIELDS[r]["QueueSpec"])}
            elif "spec" in inner:
                candidates &= {r for r in RELEASES if _tagged(r)}
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
    ordered = sorted(candidates, key=_ri)
    return ordered[0], ordered[-1]


# ------------------------------------------------------------------------ default nodeorder and binpack scores
# nodeorder (pkg/scheduler/plugins/nodeorder) wraps kube-scheduler plugins: NodeResourcesLeastAllocated (cpu 50,
# memory 50), NodeResourcesBalancedAllocation (cpu, memory, nvidia.com/gpu; unrequested scalars skipped),
# ImageLocality, NodeAffinity, InterPodAffinity, TaintToleration, PodTopologySpread. binpack is in the Helm chart's
# volcano-scheduler.conf (every release) but not in the built-in default conf (pkg/scheduler/util.go).

NODEORDER_WEIGHTS: Final[Mapping[str, Mapping[str, int]]] = {
    release: {
        "leastrequested": 1,
        "mostrequested": 0,
        "nodeaffinity": 1 if release == "1.7" else 2,
        "podaffinity": 1 if release == "1.7" else 2,
        "balancedresource": 1,
        "tainttoleration": 1 if release == "1.7" else 3,
        "imagelocality": 1,
        "podtopologyspread": 2,
    }
    for release in RELEASES
}
"""calculateWeight defaults (nodeorder.go): v1.8.0 raised nodeaffinity/podaffinity to 2 and tainttoleration to 3."""

BINPACK_DEFAULTS: Final[Mapping[str, int]] = {"binpack.weight": 1, "binpack.cpu": 1, "binpack.memory": 1}
"""binpack.go calculateWeight defaults; other resources (NPUs) count only when listed in binpack.resources."""

IMAGE_LOCALITY_EFFECTIVE: Final[Mapping[str, bool]] = {r: r != "1.14" for r in RELEASES}
"""v1.14.0 - v1.14.2 build the kube-scheduler NodeInfos without ImageStates (framework/util.go
GenerateNodeMapAndSlice), so ImageLocality scores 0 everywhere; v1.14.3 restored it."""

_DEFAULT_MILLI_CPU: Final = 100
_DEFAULT_MEMORY: Final = 200 * 1024 * 1024
_MB: Final = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ScoringInput:
    """What the default plugins read for one task on one node (CPU in millicores, memory in bytes).

    `node_*_requested` sum the requests of the pods already on the node (Volcano's NodeInfo.Used; kube-scheduler's
    Requested). `node_*_nonzero_requested` is kube-scheduler's NonZeroRequested, which counts 100m CPU and 200 MiB
    for each container without a request (kube-proxy, say); it defaults to the plain sum.
    """

    task_cpu_milli: int
    task_memory: int
    node_cpu_allocatable_milli: int
    node_memory_allocatable: int
    node_cpu_requested_milli: int = 0
    node_memory_requested: int = 0
    node_cpu_nonzero_requested_milli: int | None = None
    node_memory_nonzero_requested: int | None = None
    task_images_on_node: Sequence[tuple[int, int]] = ()
    """(image size in bytes, nodes holding it) for each task container whose image the node already has."""
    task_containers: int = 1
    total_nodes: int = 1


def least_allocated_score(inp: ScoringInput) -> int:
    """NodeResourcesFit LeastAllocated, cpu and memory weighted 50/50, integer arithmetic, 0-100."""
    node_cpu = inp.node_cpu_requested_milli
    if inp.node_cpu_nonzero_requested_milli is not None:
        node_cpu = inp.node_cpu_nonzero_requested_milli
    node_memory = inp.node_memory_requested
    if inp.node_memory_nonzero_requested is not None:
        node_memory = inp.node_memory_nonzero_requested
    # A container without a request counts as 100m CPU and 200 MiB here (schedutil.GetNonzeroRequests).
    cpu_requested = node_cpu + (inp.task_cpu_milli or _DEFAULT_MILLI_CPU)
    memory_requested = node_memory + (inp.task_memory or _DEFAULT_MEMORY)
    total = weights = 0
    for requested, allocatable in (
        (cpu_requested, inp.node_cpu_allocatable_milli),
        (memory_requested, inp.node_memory_allocatable),
    ):
        if allocatable == 0:
            continue
        score = 0 if requested > allocatable else (allocatable - requested) * 100 // allocatable
        total += score * 50
        weights += 50
    return total // weights if weights else 0


def balanced_allocation_score(inp: ScoringInput) -> int:
    """NodeResourcesBalancedAllocation on cpu and memory (requests, no defaults): int((1 - |f_cpu - f_mem| / 2) * 100)
    with each fraction capped at 1, so 50-100."""
    fractions = []
    for requested, allocatable in (
        (inp.node_cpu_requested_milli + inp.task_cpu_milli, inp.node_cpu_allocatable_milli),
        (inp.node_memory_requested + inp.task_memory, inp.node_memory_allocatable),
    ):
        if allocatable:
            fractions.append(min(requested / allocatable, 1.0))
    std = abs(fractions[0] - fractions[1]) / 2 if len(fractions) == 2 else 0.0
    return int((1 - std) * 100)


def image_locality_score(inp: ScoringInput) -> int:
    """ImageLocality: sum of size x (nodes with the image / all nodes) over the task's images present on the node,
    clamped to [23 MiB, 1000 MiB x containers] and scaled to 0-100."""
    nodes = max(inp.total_nodes, 1)
    total = sum(int(size * (count / nodes)) for size, count in inp.task_images_on_node)
    low, high = 23 * _MB, 1000 * _MB * max(inp.task_containers, 1)
    total = min(max(total, low), high)
    return 100 * (total - low) // (high - low)


def binpack_score(inp: ScoringInput, release: str = MASTER_RELEASE) -> float:
    """binpack at default weights: mean over cpu and memory of (used + request) / allocatable, x 100.

    A resource that would overflow makes the whole score 0 from v1.8 (v1.7 scores that resource 0 and keeps
    the others). NPUs do not count unless binpack.resources lists them.
    """
    rel = normalize_release(release)
    score, weights = 0.0, 0
    for request, used, capacity in (
        (inp.task_cpu_milli, inp.node_cpu_requested_milli, inp.node_cpu_allocatable_milli),
        (inp.task_memory, inp.node_memory_requested, inp.node_memory_allocatable),
    ):
        if request == 0:
            continue
        weights += 1
        if capacity == 0:
            continue
        if request + used > capacity:
            if rel != "1.7":
                return 0.0
            continue
        score += (request + used) / capacity
    if weights:
        score /= weights
    return score * 100 * BINPACK_DEFAULTS["binpack.weight"]


def default_node_scores(release: str, inp: ScoringInput, *, binpack: bool = True) -> dict[str, float]:
    """Per-plugin scores the default configuration adds for this node (weights applied) and their `total`.

    Assumes the pod has no node or pod (anti-)affinity, the node no PreferNoSchedule taint and topology spreading
    puts no difference between candidates; those plugins then add the same amount to every node (TaintToleration
    normalises to 100 x weight; the rest to 0), which is left out. `binpack=False` is the built-in conf.
    """
    rel = normalize_release(release)
    weights = NODEORDER_WEIGHTS[rel]
    scores: dict[str, float] = {
        "nodeorder.leastrequested": float(least_allocated_score(inp) * weights["leastrequested"]),
        "nodeorder.balancedresource": float(balanced_allocation_score(inp) * weights["balancedresource"]),
        "nodeorder.imagelocality": float(image_locality_score(inp) * weights["imagelocality"])
        if IMAGE_LOCALITY_EFFECTIVE[rel]
        else 0.0,
    }
    if binpack:
        scores["binpack"] = binpack_score(inp, rel)
    scores["total"] = sum(scores.values())
    return scores


@dataclass(frozen=True, slots=True)
class ScoreSpread:
    """Largest difference the default plugins can put between two candidate nodes for one task."""

    per_plugin: Mapping[str, float]
    independent: float
    """Sum of each plugin's own range: a bound that holds for any inputs."""
    coupled: float
    """With leastrequested and binpack moving in opposite directions (same cpu/memory weights, both on
    requested/allocatable), their sum stays within 2 points, so the reachable spread is this."""
    conditional: Mapping[str, float]
    """Extra spread from plugins that are equal on all nodes under the stated assumptions but not in general."""


def max_score_spread(release: str, *, binpack: bool = True) -> ScoreSpread:
    """The most the default nodeorder (and Helm chart's binpack) scores can differ between two nodes.

    leastrequested 0-100 (x1), balancedresource 50-100 with two resources (x1), imagelocality 0-100 (x1; 0 in
    v1.14.0-2), binpack 0-100 (x1). nodeaffinity, podaffinity, tainttoleration and podtopologyspread add nothing
    between nodes for a pod without affinity terms on untainted nodes in one zone; `conditional` lists what each
    could add otherwise (100 x weight).
    """
    rel = normalize_release(release)
    weights = NODEORDER_WEIGHTS[rel]
    per_plugin: dict[str, float] = {
        "nodeorder.leastrequested": 100.0 * weights["leastrequested"],
        "nodeorder.balancedresource": 50.0 * weights["balancedresource"],
        "nodeorder.imagelocality": 100.0 * weights["imagelocality"] if IMAGE_LOCALITY_EFFECTIVE[rel] else 0.0,
    }
    if binpack:
        per_plugin["binpack"] = 100.0 * BINPACK_DEFAULTS["binpack.weight"]
    independent = sum(per_plugin.values())
    coupled = independent
    if binpack:
        coupled = independent - per_plugin["nodeorder.leastrequested"] - per_plugin["binpack"] + 2.0
    conditional = {
        "nodeorder.nodeaffinity": 100.0 * weights["nodeaffinity"],
        "nodeorder.podaffinity": 100.0 * weights["podaffinity"],
        "nodeorder.tainttoleration": 100.0 * weights["tainttoleration"],
        "nodeorder.podtopologyspread": 100.0 * weights["podtopologyspread"],
    }
    return ScoreSpread(per_plugin, independent, coupled, conditional)


# ------------------------------------------------------------------------------------------- the allocate action


def num_feasible_nodes_to_find(
    n_nodes: int,
    release: str = MASTER_RELEASE,
    *,
    percentage: int | None = None,
    minimum: int = 100,
    min_percentage: int = 5,
) -> int:
    """CalculateNumOfFeasibleNodesToFind (pkg/scheduler/util/scheduler_helper.go): how many feasible nodes the
    predicate pass collects before it stops. Flags --percentage-nodes-to-find (default 100 in v1.7/v1.8, 0 =
    adaptive from v1.9), --minimum-feasible-nodes (100), --minimum-percentage-nodes-to-find (5). Adaptive:
    max(50 - n/125, 5) percent, at least 100 nodes."""
    rel = normalize_release(release)
    if percentage is None:
        percentage = 100 if rel in ("1.7", "1.8") else 0
    if n_nodes <= minimum or percentage >= 100:
        return n_nodes
    adaptive = percentage
    if adaptive <= 0:
        adaptive = max(50 - int(n_nodes / 125), min_percentage)
    return max(n_nodes * adaptive // 100, minimum)


def feasible_scan(feasible: Sequence[bool], start: int, to_find: int) -> tuple[list[int], int]:
    """One predicate pass over the session's node list (PredicateNodes): nodes are examined from `start`
    (lastProcessedNodeIndex) round the list until `to_find` feasible ones are found. Returns their indices in
    examination order and the next start index, (start + nodes examined) mod n.

    Sequential model of Volcano's 16 parallel workers, which may examine up to 15 more nodes before the
    cancellation lands; the returned nodes are then the same set but the next start can be further on.
    """
    n = len(feasible)
    found: list[int] = []
    examined = 0
    while examined < n and len(found) < to_find:
        index = (start + examined) % n
        examined += 1
        if feasible[index]:
            found.append(index)
    return found, (start + examined) % n if n else 0


def candidate_lists(release: str) -> tuple[str, ...]:
    """The candidate lists allocate scores in turn; the first list that yields a node wins. v1.7 scores one list
    (nodes whose Idle or FutureIdle fits); v1.8+ score nodes fitting Idle first and FutureIdle
    (Idle + Releasing - Pipelined) only when none does; v1.14+ also split by scheduler shard (soft sharding)."""
    rel = normalize_release(release)
    if rel == "1.7":
        return ("idle_or_future_idle",)
    if not release_at_least(rel, "1.14"):
        return ("idle", "future_idle")
    return ("idle", "idle_other_shards", "future_idle", "future_idle_other_shards")


def prioritize_called(n_candidates: int) -> bool:
    """Volcano scores (and calls prioritize) only when a candidate list holds 2+ nodes; one node is taken as is."""
    return n_candidates >= 2


def predicate_error_cache_key(release: str, job: str, task_role: str) -> str | None:
    """Key under which a failed (task, node) predicate is remembered for the rest of the job's allocate pass, so
    later tasks of the same job and role never ask about that node again; None when the cache is off.

    v1.7 - v1.9: `<job>/<volcano.sh/task-spec>`, always on. v1.10+: `<job>/<TaskRole>`, off when TaskRole is empty
    or the allocate argument predicateErrorCacheEnable is false.
    """
    if not release_at_least(release, "1.10"):
        return f"{job}/{task_role}"
    return f"{job}/{task_role}" if task_role else None


def select_best_node(scores: Mapping[str, float], choice: Callable[[Sequence[str]], str]) -> str | None:
    """SelectBestNode: the highest total score, ties broken at random (`choice`, e.g. `random.Random(0).choice`)."""
    if not scores:
        return None
    best = max(scores.values())
    return choice(sorted(name for name, score in scores.items() if score == best))


@dataclass(frozen=True, slots=True)
class Fact:
    """One scheduler-side fact with its source."""

    topic: str
    releases: str
    statement: str
    source: str


ALLOCATE_FACTS: Final[tuple[Fact, ...]] = (
    Fact(
        "order",
        "1.7-1.16",
        "Resource fit on FutureIdle runs before any plugin predicate; a node a task of the "
        "same job filled earlier in the session fails it and never reaches the extender.",
        "pkg/scheduler/actions/allocate/allocate.go (predicateFn / predicate)",
    ),
    Fact(
        "parallelism",
        "1.7-1.16",
        "Predicates run on 16 goroutines from a rotating start index "
        "(lastProcessedNodeIndex, kept across tasks and sessions) and stop once numNodesToFind nodes passed.",
        "pkg/scheduler/util/predicate_helper.go PredicateNodes",
    ),
    Fact(
        "error cache",
        "1.7-1.16",
        "A failed (task group, node) pair is cached for the job's allocate pass; see "
        "predicate_error_cache_key. v1.10+ also skip further tasks of a role once one found no node "
        "(job.TaskHasFitErrors).",
        "pkg/scheduler/util/predicate_helper.go taskGroupID",
    ),
    Fact(
        "feasible nodes",
        "1.7-1.16",
        "numNodesToFind = num_feasible_nodes_to_find(len(nodes)).",
        "pkg/scheduler/util/scheduler_helper.go CalculateNumOfFeasibleNodesToFind; cmd/scheduler/app/options",
    ),
    Fact(
        "candidates",
        "1.7-1.16",
        "See candidate_lists: prioritize sees only the list being scored.",
        "pkg/scheduler/actions/allocate/allocate.go",
    ),
    Fact(
        "single node",
        "1.7-1.16",
        "A list with one node is used without scoring: no prioritize call.",
        "pkg/scheduler/actions/allocate/allocate.go",
    ),
    Fact(
        "best node",
        "1.7-1.16",
        "Scores of all node-order plugins are summed (extender scores unweighted); the "
        "best total wins, ties at random (rand.Intn).",
        "pkg/scheduler/util/scheduler_helper.go SelectBestNode",
    ),
    Fact(
        "prioritize error",
        "1.7-1.11",
        "A prioritize error (null nodeScore, errorMessage, or a send error "
        "without ignorable) leaves no scores; the nil best node is then dereferenced and vc-scheduler panics.",
        "pkg/scheduler/actions/allocate/allocate.go; pkg/scheduler/util/scheduler_helper.go PrioritizeNodes",
    ),
    Fact(
        "prioritize error",
        "1.12-1.16",
        "Same error: the task is skipped for this session.",
        "pkg/scheduler/actions/allocate/allocate.go allocateResourcesForTasks",
    ),
    Fact(
        "session open",
        "1.7-1.16",
        "onSessionOpen failing without ignorable disables the extender's predicate, "
        "prioritize and event functions for the session.",
        "pkg/scheduler/plugins/extender/extender.go",
    ),
)

# ------------------------------------------------------------------------------------------ synthetic clusters
# Large payloads are stamped from templates: one object is built with placeholder identity strings, serialised
# once, and each instance swaps those strings for its own and parses the bytes (about 30 us per object instead of
# 400 us), so a 10,000-node onSessionOpen builds in seconds. Every swapped string is derived by the same helper
# the builders use, so an instance equals what the builder would make for it.

_PLACEHOLDER_NODE: Final = "zz-template-node-0"
_PLACEHOLDER_LEAF: Final = "zz-template-leaf"
_PLACEHOLDER_INDEX: Final = 19_999
_PLACEHOLDER_POD_INDEX: Final = 98_765


class _Template:
    """Serialised object cut at its identity strings; `make` joins the pieces with an instance's strings."""

    __slots__ = ("_chunks", "_slots")

    def __init__(self, value: Any, placeholders: Mapping[str, str]) -> None:
        data = orjson.dumps(value)
        by_text = {text.encode(): key for key, text in placeholders.items()}
        # Longest first, so a placeholder that contains another is matched whole.
        pattern = re.compile(b"|".join(re.escape(t) for t in sorted(by_text, key=len, reverse=True)))
        self._chunks: list[bytes] = []
        self._slots: list[str] = []
        last = 0
        for match in pattern.finditer(data):
            self._chunks.append(data[last : match.start()])
            self._slots.append(by_text[match.group(0)])
            last = match.end()
        self._chunks.append(data[last:])

    def render(self, actual: Mapping[str, str]) -> bytes:
        parts = [self._chunks[0]]
        for key, chunk in zip(self._slots, self._chunks[1:], strict=True):
            parts.append(actual[key].encode())
            parts.append(chunk)
        return b"".join(parts)

    def make(self, actual: Mapping[str, str], *, raw: bool) -> Any:
        data = self.render(actual)
        return orjson.Fragment(data) if raw else orjson.loads(data)


_DS_IDENTITY: Final[Mapping[str, tuple[str, str, str]]] = {
    "kube-proxy": ("kube-system", "kube-proxy-", "kube-proxy"),
    "ascend-device-plugin": ("kube-system", "ascend-device-plugin-daemonset-", "device-plugin-01"),
    "node-exporter": ("monitoring", "node-exporter-", "node-exporter"),
}
"""(namespace, generateName, container) per DaemonSet kind, for the per-pod strings daemonset_pod derives."""


def _pod_strings(namespace: str, name: str, container: str) -> dict[str, str]:
    return {
        "name": name,
        "sa": f"kube-api-access-{_suffix(f'{namespace}/{name}')}",
        "cid": f"containerd://{_hex(f'{name}/{container}') * 2}",
    }


def _ds_identity(kind: str, node_name: str, node_ip: str) -> dict[str, str]:
    namespace, prefix, container = _DS_IDENTITY[kind]
    name = prefix + _suffix(f"{kind}/{node_name}")
    return {
        **_pod_strings(namespace, name, container),
        "uid": stable_uid("pod", namespace, name),
        "rv": str(47_000_000 + _hash(name) % 1_000_000),
        "node": f'"{node_name}"',
        "ip": f'"{node_ip}"',
    }


def _job_pod_identity(
    job_name: str, index: int, *, namespace: str, node_name: str, node_ip: str, pod_ip: str
) -> dict[str, str]:
    name = f"{job_name}-worker-{index}"
    return {
        **_pod_strings(namespace, name, "train"),
        "uid": stable_uid("pod", namespace, name, 0),
        "rv": f'"{50_000_000 + index}"',
        "index": f'"{index}"',
        "node": f'"{node_name}"',
        "ip": f'"{node_ip}"',
        "pod_ip": f'"{pod_ip}"',
    }


def _task_like(template: JSONObject, pod: Any, ident: Mapping[str, str]) -> JSONObject:
    """The TaskInfo of a pod stamped from the same template as the pod of `template` (same requests and status);
    `pod` may be a raw fragment, so the per-pod fields come from `ident`."""
    task = dict(template)
    task["UID"] = ident["uid"]
    task["Name"] = ident["name"]
    task["NodeName"] = ident["node"].strip('"')
    task["Pod"] = pod
    annotations = task.get("PodAnnotations")
    if annotations and "index" in ident and "volcano.sh/task-index" in annotations:
        task["PodAnnotations"] = annotations | {"volcano.sh/task-index": ident["index"].strip('"')}
    return task


def _node_info_like(template: JSONObject, name: str, node: Any, tasks: Sequence[JSONObject]) -> JSONObject:
    """The NodeInfo of a node stamped from the template node of `template` (same allocatable and images)."""
    info = dict(template)
    info["Name"] = name
    info["Node"] = node
    info.update(_node_usage(_resource_of(template["Allocatable"]), tasks))
    return info


@dataclass(frozen=True, slots=True)
class SyntheticCluster:
    """A scheduling session's view of an NPU cluster, as one release marshals it."""

    release: str
    node_infos: tuple[JSONObject, ...]
    """Every node's NodeInfo (with its tasks), in cluster order."""
    jobs: tuple[JSONObject, ...]
    """JobInfos: the running jobs, then the pending one."""
    queues: tuple[JSONObject, ...]
    pending_tasks: tuple[JSONObject, ...]
    """The pending job's tasks (Pending, unbound), task index order."""
    free_nodes: tuple[str, ...]
    """Nodes running no training pod (all cards free)."""

    def prioritize_request(self, n_candidates: int | None = None, *, free_only: bool = False) -> JSONObject:
        """A prioritize body for the first pending task over the first `n_candidates` nodes (all by default);
        `free_only` keeps to nodes where an 8-card task fits, as a real call would."""
        free = set(self.free_nodes)
        nodes = [n for n in self.node_infos if not free_only or n["Name"] in free]
        return prioritize_request(self.pending_tasks[0], nodes[: n_candidates or len(nodes)])

    def on_session_open_request(self) -> JSONObject:
        """The onSessionOpen body of the whole cluster."""
        return on_session_open_request(jobs=self.jobs, nodes=self.node_infos, queues=self.queues)


def synthetic_cluster(
    n_nodes: int,
    *,
    release: str = MASTER_RELEASE,
    busy_fraction: float = 0.6,
    daemon_pods: bool = True,
    pods_per_job: int = 8,
    pending_job_size: int = 6,
    nodes_per_leaf: int = 8,
    seed: int = 0,
    raw: bool = False,
) -> SyntheticCluster:
    """An NPU cluster of `n_nodes` 8-card nodes (`npu-LLLL-SS`, `volcano.sh/tor: leaf-LLLL`) where a random
    `busy_fraction` of the nodes run one 8-card pod of running Volcano jobs of `pods_per_job` pods, plus one pending
    job of `pending_job_size` pods; with `daemon_pods` every node also runs kube-proxy, the Ascend device plugin and
    node-exporter. Deterministic for a seed.

    With `raw`, Node and Pod objects are pre-serialised `orjson.Fragment`s: `go_json` writes the same bytes, but
    those objects cannot be read as dicts (10,000 nodes build in about two seconds instead of ten).
    """
    with _gc_paused():
        return _build_cluster(
            n_nodes,
            release=release,
            busy_fraction=busy_fraction,
            daemon_pods=daemon_pods,
            pods_per_job=pods_per_job,
            pending_job_size=pending_job_size,
            nodes_per_leaf=nodes_per_leaf,
            seed=seed,
            raw=raw,
        )


@contextmanager
def _gc_paused() -> Iterator[None]:
    # Building allocates millions of acyclic containers; pausing the cyclic GC halves the time.
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _build_cluster(
    n_nodes: int,
    *,
    release: str,
    busy_fraction: float,
    daemon_pods: bool,
    pods_per_job: int,
    pending_job_size: int,
    nodes_per_leaf: int,
    seed: int,
    raw: bool,
) -> SyntheticCluster:
    rel = normalize_release(release)
    rng = random.Random(seed)
    names = [f"npu-{i // nodes_per_leaf:04d}-{i % nodes_per_leaf:02d}" for i in range(n_nodes)]
    busy = sorted(rng.sample(range(n_nodes), round(busy_fraction * n_nodes)))
    ph_ident = _node_identity(_PLACEHOLDER_NODE, _PLACEHOLDER_INDEX)
    ph_ip = ph_ident["ip"]
    template_node = kube_node(
        _PLACEHOLDER_NODE, labels={"volcano.sh/tor": _PLACEHOLDER_LEAF}, index=_PLACEHOLDER_INDEX, release=rel
    )
    node_template = _Template(template_node, {**ph_ident, "name": _PLACEHOLDER_NODE, "leaf": _PLACEHOLDER_LEAF})
    template_info = node_info(template_node, release=rel, image_nodes=n_nodes)
    node_ips = [_node_identity(name, i)["ip"] for i, name in enumerate(names)]
    node_tasks: list[list[JSONObject]] = [[] for _ in names]
    if daemon_pods:
        for kind in DAEMONSET_KINDS:
            template_pod = daemonset_pod(kind, _PLACEHOLDER_NODE, ph_ip, release=rel)
            template = _Template(template_pod, _ds_identity(kind, _PLACEHOLDER_NODE, ph_ip))
            template_task = task_info(template_pod, release=rel)
            for i, name in enumerate(names):
                ident = _ds_identity(kind, name, node_ips[i])
                node_tasks[i].append(_task_like(template_task, template.make(ident, raw=raw), ident))
    jobs: list[JSONObject] = []
    pod_counter = 0
    for j in range(0, len(busy), pods_per_job):
        members = busy[j : j + pods_per_job]
        job_name = f"train-{j // pods_per_job:04d}"
        job_uid = stable_uid("job", "team-a", job_name)
        template_pod = volcano_job_pod(
            job_name,
            _PLACEHOLDER_POD_INDEX,
            namespace="team-a",
            job_uid=job_uid,
            node_name=_PLACEHOLDER_NODE,
            node_ip=ph_ip,
            pod_ip="203.0.113.77",
            release=rel,
        )
        template = _Template(
            template_pod,
            _job_pod_identity(
                job_name,
                _PLACEHOLDER_POD_INDEX,
                namespace="team-a",
                node_name=_PLACEHOLDER_NODE,
                node_ip=ph_ip,
                pod_ip="203.0.113.77",
            ),
        )
        template_task = task_info(template_pod, release=rel)
        tasks = []
        for index, node_index in enumerate(members):
            pod_counter += 1
            pod_ip = f"172.{16 + pod_counter // 65536 % 16}.{pod_counter // 256 % 256}.{pod_counter % 256}"
            ident = _job_pod_identity(
                job_name,
                index,
                namespace="team-a",
                node_name=names[node_index],
                node_ip=node_ips[node_index],
                pod_ip=pod_ip,
            )
            task = _task_like(template_task, template.make(ident, raw=raw), ident)
            node_tasks[node_index].append(task)
            tasks.append(task)
        jobs.append(
            job_info(
                tasks,
                pod_group_name=f"{job_name}-{job_uid}",
                namespace="team-a",
                min_task_member={"worker": len(tasks)},
                owner_job=(job_name, job_uid),
                pod_group_annotations={"volcano.sh/job-type": "pretrain"},
                release=rel,
            )
        )
    pending_uid = stable_uid("job", "team-b", "llm-pretrain")
    pending = [
        task_info(volcano_job_pod("llm-pretrain", i, namespace="team-b", job_uid=pending_uid, release=rel), release=rel)
        for i in range(pending_job_size)
    ]
    jobs.append(
        job_info(
            pending,
            pod_group_name=f"llm-pretrain-{pending_uid}",
            namespace="team-b",
            min_task_member={"worker": pending_job_size},
            phase="Inqueue",
            owner_job=("llm-pretrain", pending_uid),
            release=rel,
        )
    )
    infos = []
    for i, name in enumerate(names):
        node = node_template.make(
            {**_node_identity(name, i), "name": name, "leaf": f"leaf-{i // nodes_per_leaf:04d}"}, raw=raw
        )
        infos.append(_node_info_like(template_info, name, node, node_tasks[i]))
    busy_set = set(busy)
    return SyntheticCluster(
        release=rel,
        node_infos=tuple(infos),
        jobs=tuple(jobs),
        queues=(queue_info(running=len(jobs) - 1, pending=1, release=rel),),
        pending_tasks=tuple(pending),
        free_nodes=tuple(n for i, n in enumerate(names) if i not in busy_set),
    )


__all__ = [
    "ALLOCATE_FACTS",
    "ANSWER_SHAPES",
    "BINPACK_DEFAULTS",
    "DAEMONSET_KINDS",
    "GO_FIELDS",
    "GO_ZERO_TIME",
    "IMAGE_LOCALITY_EFFECTIVE",
    "MASTER_RELEASE",
    "MAX_RESPONSE_BYTES",
    "NODEORDER_WEIGHTS",
    "NPU_NODE_IMAGES",
    "NPU_RESOURCE",
    "OBJECT_META_KEYS",
    "RELEASES",
    "RELEASE_GO",
    "RELEASE_GROUPS",
    "RELEASE_K8S_API",
    "RELEASE_TAGS",
    "STATUS_CODES",
    "TASK_STATUS",
    "TRAINING_IMAGE",
    "UNIVERSAL_PREDICATE_PASS",
    "ContainerImage",
    "EventOutcome",
    "Fact",
    "PredicateOutcome",
    "PrioritizeOutcome",
    "ScoreSpread",
    "ScoringInput",
    "SyntheticCluster",
    "balanced_allocation_score",
    "binpack_score",
    "candidate_lists",
    "daemonset_pod",
    "decode_event_handler_response",
    "decode_predicate_response",
    "decode_prioritize_response",
    "default_node_scores",
    "detect_release_range",
    "encode_predicate_answer",
    "encode_predicate_fail_everywhere",
    "encode_prioritize_answer",
    "event_handler_request",
    "feasible_scan",
    "go_float_text",
    "go_json",
    "go_number",
    "image_locality_score",
    "job_info",
    "kube_node",
    "least_allocated_score",
    "max_score_spread",
    "namespace_info",
    "node_info",
    "normalize_release",
    "num_feasible_nodes_to_find",
    "on_session_open_outcome",
    "on_session_open_request",
    "parse_quantity",
    "pod_group",
    "predicate_error_cache_key",
    "predicate_request",
    "prioritize_called",
    "prioritize_request",
    "quantity_milli_value",
    "quantity_value",
    "queue_info",
    "release_at_least",
    "resource",
    "select_best_node",
    "stable_uid",
    "synthetic_cluster",
    "task_info",
    "task_key",
    "task_status_of",
    "volcano_job_pod",
]
