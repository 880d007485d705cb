"""Wire formats admission reads and writes: AdmissionReview v1 and the parts of a Volcano Job it looks at, and
`parse_review`, which checks a request body against them.

These describe what a well-formed request carries; the code still checks shapes at run time, because the bytes
come from a client (`total=False` everywhere: any key may be missing).
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

import orjson

from webhook.common.names import ADMISSION_REVIEW_API_VERSION


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
    retryAfterSeconds: int
    """The client may retry after this: the API server answers the denial with this Retry-After."""


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


JsonPatchOperation = TypedDict(
    "JsonPatchOperation",
    {"op": str, "path": str, "value": NotRequired[Any], "from": NotRequired[str]},
)
"""One RFC 6902 operation as serialised in `response.patch` (`remove` carries no value, `copy` a `from`)."""


class BadReviewError(ValueError):
    """The request body is not an AdmissionReview this service can answer (HTTP 400)."""


def parse_review(body: bytes | bytearray) -> AdmissionReview:
    """Decode and check the envelope; raises BadReviewError with a one-line message naming the field."""
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadReviewError(f"request body is not valid JSON: {exc}") from exc
    if not isinstance(review, dict):
        raise BadReviewError("request body must be a JSON object (an AdmissionReview)")
    if review.get("apiVersion") != ADMISSION_REVIEW_API_VERSION or review.get("kind") != "AdmissionReview":
        raise BadReviewError(
            f'apiVersion/kind must be "{ADMISSION_REVIEW_API_VERSION}"/"AdmissionReview" '
            f"(got {review.get('apiVersion')!r}/{review.get('kind')!r}); set admissionReviewVersions: [v1]"
        )
    request = review.get("request")
    if not isinstance(request, dict):
        raise BadReviewError("request: Required value: an AdmissionReview to answer must carry a request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReviewError("request.uid: Required value: a non-empty string")
    for key in ("object", "oldObject"):
        value = request.get(key)
        if value is not None and not isinstance(value, dict):
            raise BadReviewError(f"request.{key}: Invalid value: must be an object or null")
    for key in ("resource", "kind"):
        value = request.get(key)
        if value is not None and not isinstance(value, dict):
            raise BadReviewError(f"request.{key}: Invalid value: must be an object")
    return review  # type: ignore[return-value]
