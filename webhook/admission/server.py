"""The admission HTTP service: decode an AdmissionReview, call the pure policy/mutation, encode the answer.

Two error channels: a broken request is an HTTP 4xx; a rejected job is HTTP 200 with `allowed: false`.
Nothing a client sends produces a 500: a failure in our own code denies on /jobs/validate and admits without a
patch on /jobs/mutate, logged and counted. Admission has no side effects (`sideEffects: None`): it writes nothing
to the API server; the controller creates the rank-table ConfigMap once the Job is stored.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import orjson
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from webhook.admission.jobview import read_job
from webhook.admission.mutation import ClusterFacts, Mutation, encode_patch, plan_create, plan_update
from webhook.admission.policy import classify, existing_violations, validate
from webhook.admission.review import (
    AdmissionRequest,
    AdmissionResponse,
    AdmissionReview,
    BadReviewError,
    StatusCause,
    parse_review,
)
from webhook.common.metrics import Metrics
from webhook.common.names import ADMISSION_REVIEW_API_VERSION, JOBS_PLURAL, RING_LABEL, VOLCANO_BATCH_GROUP
from webhook.common.settings import Settings

if TYPE_CHECKING:
    from certs import ServingCertificates

log = logging.getLogger("ringroute.admission")

MAX_BODY_BYTES = 7 * 1024 * 1024
"""Largest AdmissionReview accepted (the API server's own request limit is 3 MiB of object, doubled on UPDATE)."""

Endpoint = Literal["validate", "mutate"]


def _json_response(payload: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(payload), status=status, content_type="application/json")


def _problem(status: int, message: str) -> web.Response:
    """A 4xx for a broken request: a metav1.Status-shaped body so kubectl-like clients show the message."""
    reason = {400: "BadRequest", 413: "RequestEntityTooLarge", 415: "UnsupportedMediaType"}.get(status, "Error")
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": status, "reason": reason}
    body["message"] = message
    return _json_response(body, status)


def _is_labelled_job(request: AdmissionRequest) -> bool:
    """A request this webhook has an opinion on: CREATE/UPDATE of a labelled Volcano Job (not a subresource)."""
    resource = request.get("resource") or {}
    if resource.get("group") != VOLCANO_BATCH_GROUP or resource.get("resource") != JOBS_PLURAL:
        return False
    if request.get("subResource") or request.get("operation") not in ("CREATE", "UPDATE"):
        return False
    job = request.get("object")
    if not isinstance(job, dict):
        return False
    labels = (job.get("metadata") or {}).get("labels") if isinstance(job.get("metadata"), dict) else None
    return isinstance(labels, dict) and RING_LABEL in labels


def _review(uid: str, response: AdmissionResponse) -> AdmissionReview:
    response["uid"] = uid
    return {"apiVersion": ADMISSION_REVIEW_API_VERSION, "kind": "AdmissionReview", "response": response}


class AdmissionHandlers:
    """The aiohttp handlers, holding the settings, metrics and serving certificates."""

    def __init__(self, settings: Settings, metrics: Metrics, certificates: ServingCertificates | None) -> None:
        self.settings = settings
        self.metrics = metrics
        self.certificates = certificates
        # What `ringroute serve` finds out about the cluster and keeps current; nothing without an API server.
        self.cluster_facts = ClusterFacts()

    async def _read_review(self, request: web.Request) -> AdmissionReview | web.Response:
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            return _problem(413, f"request body is {request.content_length} bytes; the limit is {MAX_BODY_BYTES}")
        if request.content_type != "application/json":
            return _problem(415, f'Content-Type must be "application/json" (got "{request.content_type}")')
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _problem(413, f"request body exceeds the limit of {MAX_BODY_BYTES} bytes")
        try:
            return parse_review(body)
        except BadReviewError as exc:
            return _problem(400, str(exc))

    async def _handle(
        self,
        request: web.Request,
        endpoint: Endpoint,
        answer: Callable[[AdmissionRequest], Awaitable[tuple[AdmissionResponse, str]]],
    ) -> web.Response:
        started = time.perf_counter()
        verdict = "bad_request"
        try:
            review = await self._read_review(request)
            if isinstance(review, web.Response):
                return review
            admission = review["request"]
            uid = admission["uid"]
            if not _is_labelled_job(admission):
                verdict = "ignored"
                return _json_response(_review(uid, {"allowed": True}))
            response, verdict = await answer(admission)
            return _json_response(_review(uid, response))
        finally:
            self.metrics.admission_requests.labels(endpoint, verdict).inc()
            self.metrics.admission_latency.labels(endpoint).observe(time.perf_counter() - started)

    async def validate(self, request: web.Request) -> web.Response:
        """POST /jobs/validate."""
        return await self._handle(request, "validate", self._validate)

    async def mutate(self, request: web.Request) -> web.Response:
        """POST /jobs/mutate."""
        return await self._handle(request, "mutate", self._mutate)

    async def _validate(self, admission: AdmissionRequest) -> tuple[AdmissionResponse, str]:
        job = admission.get("object") or {}
        old = _old_object(admission)
        try:
            violations = validate(job, old, self.settings)
            verdict = classify(violations, self.settings, existing=existing_violations(old, self.settings))
        except Exception:
            log.exception("event=policy_failed uid=%s", admission.get("uid"))
            return {
                "allowed": False,
                "status": {
                    "code": 500,
                    "reason": "InternalError",
                    "message": "ringroute could not check this job (an internal error, logged); retry, "
                    "or ask the cluster admin to look at the ringroute logs",
                },
            }, "error"
        for violation in violations:
            self.metrics.admission_violations.labels(violation.rule).inc()
        response: AdmissionResponse = {"allowed": verdict.allowed}
        if verdict.warnings or verdict.ratcheted:
            response["warnings"] = verdict.warning_messages()
        if not verdict.allowed:
            causes: list[StatusCause] = [
                {"reason": v.cause_reason, "message": v.render(), "field": v.path} for v in verdict.denials
            ]
            response["status"] = {
                "code": verdict.http_code,
                "reason": "Forbidden" if verdict.http_code == 403 else "Invalid",
                "message": verdict.message(),
                "details": {"causes": causes},
            }
            log.info(
                "event=job_denied uid=%s job=%s/%s rules=%s",
                admission.get("uid"),
                admission.get("namespace"),
                admission.get("name") or _job_name(job),
                ",".join(sorted({v.rule for v in verdict.denials})),
            )
            return response, "denied"
        return response, "warned" if "warnings" in response else "allowed"

    async def _mutate(self, admission: AdmissionRequest) -> tuple[AdmissionResponse, str]:
        job = admission.get("object") or {}
        try:
            view = read_job(job, self.settings)
            if admission.get("operation") == "UPDATE":
                # Only a job ringroute admitted is patched, and only back to what the stored object has.
                old = _old_object(admission)
                mutation = plan_update(view, old) if old is not None else Mutation()
            else:
                mutation = plan_create(view, self.cluster_facts)
            patch = encode_patch(mutation.ops) if mutation.ops else None
        except Exception:
            log.exception("event=mutation_failed uid=%s", admission.get("uid"))
            return {"allowed": True}, "error"
        response: AdmissionResponse = {"allowed": True}
        if mutation.warnings:
            response["warnings"] = list(mutation.warnings)
        if patch is not None:
            response["patch"] = patch
            response["patchType"] = "JSONPatch"
            return response, "patched"
        return response, "allowed"

    async def healthz(self, _request: web.Request) -> web.Response:
        """GET /healthz: the process answers."""
        return web.Response(text="ok")

    async def readyz(self, _request: web.Request) -> web.Response:
        """GET /readyz: ready only with a loaded serving certificate."""
        if self.certificates is None or not self.certificates.loaded:
            return web.Response(status=503, text="no serving certificate loaded")
        return web.Response(text="ok")

    async def metrics_page(self, _request: web.Request) -> web.Response:
        """GET /metrics: Prometheus text format."""
        return web.Response(body=generate_latest(self.metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})


def _old_object(admission: AdmissionRequest) -> Mapping[str, Any] | None:
    """The stored object of an UPDATE (None on CREATE, or when the request does not carry it)."""
    if admission.get("operation") != "UPDATE":
        return None
    old = admission.get("oldObject")
    return old if isinstance(old, dict) else None


def _job_name(job: Mapping[str, Any]) -> Any:
    metadata = job.get("metadata")
    return metadata.get("name") if isinstance(metadata, Mapping) else None


HANDLERS_KEY = web.AppKey("admission_handlers", AdmissionHandlers)


def admission_app(
    settings: Settings,
    metrics: Metrics,
    *,
    certificates: ServingCertificates | None,
) -> web.Application:
    """The admission aiohttp application: /jobs/validate, /jobs/mutate, /healthz, /readyz, /metrics."""
    handlers = AdmissionHandlers(settings, metrics, certificates)
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app[HANDLERS_KEY] = handlers
    app.router.add_post("/jobs/validate", handlers.validate)
    app.router.add_post("/jobs/mutate", handlers.mutate)
    app.router.add_get("/healthz", handlers.healthz)
    app.router.add_get("/readyz", handlers.readyz)
    app.router.add_get("/metrics", handlers.metrics_page)
    return app


__all__ = [
    "HANDLERS_KEY",
    "MAX_BODY_BYTES",
    "AdmissionHandlers",
    "admission_app",
]
