"""Wire formats admission reads and writes: AdmissionReview v1 and the parts of a Volcano Job it looks at.

These describe what a well-formed request carries; the code still checks shapes at run time, because the bytes
come from a client (`total=False` everywhere: any key may be missing).
"""

from __future__ import annotations

import uuid
from typing import Any, Literal, NotRequired, TypedDict


class GroupVersionKind(TypedDict, total=False):
    """`request.kind` of an AdmissionReview."""

    group: str
    version: str
    kind: str


class GroupVersionResource(TypedDict, total=False):
    """`request.resource` of an AdmissionReview."""

    group: str
    version: str
    resource: str


class AdmissionRequest(TypedDict, total=False):
    """`request` of an AdmissionReview (admission.k8s.io/v1)."""

    uid: str
    kind: GroupVersionKind
    resource: GroupVersionResource
    subResource: str
    name: str
    namespace: str
    operation: Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
    userInfo: dict[str, Any]
    object: VolcanoJob | None
    oldObject: VolcanoJob | None
    dryRun: bool
    options: dict[str, Any] | None


class StatusCause(TypedDict, total=False):
    """One field error inside a metav1.Status (`details.causes`)."""

    reason: str
    message: str
    field: str


class StatusDetails(TypedDict, total=False):
    """`details` of a metav1.Status."""

    causes: list[StatusCause]


class Status(TypedDict, total=False):
    """metav1.Status: why a request was denied."""

    code: int
    message: str
    reason: str
    details: StatusDetails


class AdmissionResponse(TypedDict, total=False):
    """`response` of an AdmissionReview (admission.k8s.io/v1)."""

    uid: str
    allowed: bool
    status: Status
    patch: str
    patchType: Literal["JSONPatch"]
    warnings: list[str]


class AdmissionReview(TypedDict, total=False):
    """The envelope sent by the API server and answered by the webhook."""

    apiVersion: str
    kind: str
    request: AdmissionRequest
    response: AdmissionResponse


class ObjectMeta(TypedDict, total=False):
    """The metadata fields admission reads."""

    name: str
    generateName: str
    namespace: str
    uid: str
    labels: dict[str, str]
    annotations: dict[str, str]
    deletionTimestamp: str


class EnvVar(TypedDict, total=False):
    """A container env entry (`value` or `valueFrom`)."""

    name: str
    value: str
    valueFrom: dict[str, Any]


class VolumeMount(TypedDict, total=False):
    """A container volume mount."""

    name: str
    mountPath: str
    subPath: str
    subPathExpr: str
    readOnly: bool


class ResourceRequirements(TypedDict, total=False):
    """Container resources (quantities are strings or numbers on the wire)."""

    requests: dict[str, str | int | float]
    limits: dict[str, str | int | float]


class Container(TypedDict, total=False):
    """The container fields admission reads or writes."""

    name: str
    image: str
    command: list[str]
    args: list[str]
    workingDir: str
    env: list[EnvVar]
    volumeMounts: list[VolumeMount]
    resources: ResourceRequirements


class Volume(TypedDict, total=False):
    """A pod volume; exactly one source key is set in a valid pod."""

    name: str
    configMap: dict[str, Any]
    hostPath: dict[str, Any]
    nfs: dict[str, Any]
    cephfs: dict[str, Any]
    glusterfs: dict[str, Any]
    csi: dict[str, Any]
    persistentVolumeClaim: dict[str, Any]
    emptyDir: dict[str, Any]


class PodSpec(TypedDict, total=False):
    """The pod spec fields admission reads or writes."""

    containers: list[Container]
    initContainers: list[Container]
    volumes: list[Volume]
    nodeSelector: dict[str, str]
    affinity: dict[str, Any]
    schedulerName: str


class PodTemplateSpec(TypedDict, total=False):
    """A task's pod template."""

    metadata: ObjectMeta
    spec: PodSpec


class TaskSpec(TypedDict, total=False):
    """One entry of `spec.tasks` of a Volcano Job."""

    name: str
    replicas: int
    minAvailable: int
    template: PodTemplateSpec


class VolcanoJobSpec(TypedDict, total=False):
    """The Volcano Job spec fields admission reads or writes."""

    minAvailable: int
    schedulerName: str
    queue: str
    tasks: list[TaskSpec]


class VolcanoJob(TypedDict, total=False):
    """A `batch.volcano.sh/v1alpha1` Job."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: VolcanoJobSpec


class JsonPatchOperation(TypedDict):
    """One RFC 6902 operation as serialised in `response.patch` (`remove` carries no value)."""

    op: str
    path: str
    value: NotRequired[Any]


JOBS_RESOURCE = ("batch.volcano.sh", "v1alpha1", "jobs")
"""(group, version, plural) of Volcano Jobs, the resource ringroute admits."""


def admission_review(
    obj: Any,
    *,
    operation: str = "CREATE",
    uid: str | None = None,
    dry_run: bool = False,
    old: Any = None,
    resource: tuple[str, str, str] = JOBS_RESOURCE,
    username: str = "kubernetes-admin",
) -> dict[str, Any]:
    """An AdmissionReview v1 as the API server sends it, for clients of the webhook (demo, benchmarks, tests).

    `obj` is sent as given (it may be malformed on purpose); name and namespace are read from it when present.
    """
    group, version, plural = resource
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    name = metadata.get("name", "") if isinstance(metadata, dict) else ""
    namespace = metadata.get("namespace", "default") if isinstance(metadata, dict) else "default"
    kind = {"group": group, "version": version, "kind": "Job" if plural == "jobs" else plural.rstrip("s").title()}
    options = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}.get(operation)
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid if uid is not None else str(uuid.uuid4()),
            "kind": kind,
            "resource": {"group": group, "version": version, "resource": plural},
            "requestKind": kind,
            "requestResource": {"group": group, "version": version, "resource": plural},
            "name": name,
            "namespace": namespace,
            "operation": operation,
            "userInfo": {"username": username, "groups": ["system:authenticated"]},
            "object": obj,
            "oldObject": old,
            "dryRun": dry_run,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": options} if options else None,
        },
    }
