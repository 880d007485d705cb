"""The admission HTTP service: decode an AdmissionReview, call the pure policy/mutation, encode the answer.

Two error channels: a broken request is an HTTP 4xx; a rejected job is HTTP 200 with `allowed: false`.
Nothing a client sends produces a 500: a failure in our own code denies on /jobs/validate and admits without a
patch on /jobs/mutate, logged and counted. Admission has no side effects (`sideEffects: None`): it writes nothing
to the API server; the controller creates the rank-table ConfigMap once the Job is stored.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import orjson
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from webhook.admission.jobview import read_job
from webhook.admission.large_requests import LargeRequests
from webhook.admission.mutation import Mutation, encode_patch, plan_create, plan_update
from webhook.admission.policy import Violation, classify, existing_violations, validate
from webhook.admission.policy.network_topology import ClusterFacts
from webhook.admission.policy.size import check_job_size
from webhook.admission.review import (
    AdmissionRequest,
    AdmissionResponse,
    AdmissionReview,
    BadReviewError,
    Status,
    StatusCause,
    parse_review,
)
from webhook.common.http_server import BusyError
from webhook.common.metrics import Metrics
from webhook.common.names import ADMISSION_REVIEW_API_VERSION, JOBS_PLURAL, RING_LABEL, VOLCANO_BATCH_GROUP
from webhook.common.request_bodies import held_body
from webhook.common.settings import Settings

if TYPE_CHECKING:
    from certs import ServingCertificates

log = logging.getLogger("ringroute.admission")

MAX_BODY_BYTES = 7 * 1024 * 1024
"""Largest AdmissionReview accepted (the API server's own request limit is 3 MiB of object, doubled on UPDATE)."""
INLINE_MAX_BYTES = 32 * 1024
"""Requests up to this size are answered on the event loop (a millisecond at most); larger ones are decoded,
checked and encoded in a worker thread, so a large job never holds up the small ones for long."""
LARGE_REQUEST_THREADS = 1
"""Worker threads for large requests. One: the checks are pure Python, so more threads share one interpreter lock
and answer no sooner (bench/burst.py measures 1, 2 and 4 threads, and processes)."""
SMALL_BODY_ROOM = 2 * 1024 * 1024
"""Room in the body buffer that large bodies (read, or waiting for their turn) leave to small ones: small requests
are read at once whatever waits."""
RETRY_AFTER_S = 1
"""What a busy answer asks the client to wait before it retries (kubectl and client-go retry by themselves)."""
_UID_AHEAD = re.compile(rb'"request"\s*:\s*\{\s*"uid"\s*:\s*"([A-Za-z0-9._:-]{1,128})"')
"""`request.uid` where the API server puts it, first in the request (Go writes struct fields in order)."""

Endpoint = Literal["validate", "mutate"]


def _json_response(payload: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(payload), status=status, content_type="application/json")


def _problem(status: int, message: str) -> web.Response:
    """A 4xx for a broken request: a metav1.Status-shaped body so kubectl-like clients show the message."""
    reason = {400: "BadRequest", 413: "RequestEntityTooLarge", 415: "UnsupportedMediaType"}.get(status, "Error")
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": status, "reason": reason}
    body["message"] = message
    return _json_response(body, status)


def _bad_review(exc: BadReviewError) -> tuple[int, bytes, str]:
    """The answer to a body that is not an AdmissionReview: HTTP 400 naming the field."""
    problem = _problem(400, str(exc))
    assert isinstance(problem.body, bytes)
    return 400, problem.body, "bad_request"


def _closing(response: web.Response) -> web.Response:
    """`response`, after which the connection closes: the body it refuses is not read (or not all of it), and
    reading the rest only to keep the connection costs more than a new one."""
    response.force_close()
    return response


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
        # What `ringroute serve` finds out about the cluster and keeps current (replaced whole, never changed in
        # place: a request reads one snapshot); nothing without an API server.
        self.cluster_facts = ClusterFacts()
        # Large requests take turns, and the event loop keeps answering the small ones meanwhile (the interpreter
        # switches threads every few milliseconds).
        self.large = LargeRequests(LARGE_REQUEST_THREADS)

    def close(self) -> None:
        """Stop the worker threads (waiting for the requests they are checking)."""
        self.large.close()

    def _refused_unread(self, request: web.Request) -> web.Response | None:
        """413 or 415 from the headers alone (the body is not read)."""
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            return _closing(
                _problem(413, f"request body is {request.content_length} bytes; the limit is {MAX_BODY_BYTES}")
            )
        if request.content_type != "application/json":
            return _closing(_problem(415, f'Content-Type must be "application/json" (got "{request.content_type}")'))
        return None

    async def _handle(self, request: web.Request, endpoint: Endpoint) -> web.Response:
        started = time.perf_counter()
        # The API server gives up `timeoutSeconds` after it sent the request: answer within answerWithinS of it.
        deadline = asyncio.get_running_loop().time() + self.settings.admission.answer_within_s
        verdict = "bad_request"
        try:
            refused = self._refused_unread(request)
            if refused is not None:
                return refused
            try:
                status, payload, verdict = await self._answer_read(request, endpoint, deadline, started)
            except web.HTTPRequestEntityTooLarge:
                return _closing(_problem(413, f"request body exceeds the limit of {MAX_BODY_BYTES} bytes"))
            except BusyError as exc:
                verdict = "busy"
                return self._unread_busy(request, endpoint, exc)
            return web.Response(body=payload, status=status, content_type="application/json")
        finally:
            self.metrics.admission_requests.labels(endpoint, verdict).inc()
            self.metrics.admission_latency.labels(endpoint).observe(time.perf_counter() - started)

    async def _answer_read(
        self, request: web.Request, endpoint: Endpoint, deadline: float, started: float
    ) -> tuple[int, bytes, str]:
        """The answer to a request once its body is read (within the server's body timeout and body buffer, and by
        `deadline`): a small one at once, a large one when a worker thread is free for it, or busy when that comes
        too late. The body keeps its room in the buffer until then; a large one leaves the last SMALL_BODY_ROOM."""
        small = request.content_length is not None and request.content_length <= INLINE_MAX_BYTES
        leave = 0 if small else SMALL_BODY_ROOM
        async with held_body(request, MAX_BODY_BYTES, answer_by=deadline, leave=leave) as body:
            if len(body) <= INLINE_MAX_BYTES:
                return self.answer(endpoint, body)
            ahead = self.large.ahead
            answered = await self.large.run(functools.partial(self.answer, endpoint, body), deadline)
            if answered is not None:
                return answered
            self.metrics.admission_busy.labels(endpoint, "denied").inc()
            return self._busy(body, endpoint, ahead, time.perf_counter() - started)

    def answer(self, endpoint: Endpoint, body: bytes | bytearray) -> tuple[int, bytes, str]:
        """(HTTP status, JSON body, metrics verdict) of one request body; runs on the loop or in the worker."""
        try:
            review = parse_review(body)
        except BadReviewError as exc:
            return _bad_review(exc)
        admission = review["request"]
        uid = admission["uid"]
        if not _is_labelled_job(admission):
            return 200, orjson.dumps(_review(uid, {"allowed": True})), "ignored"
        # The review's length bounds a CREATE's object; an UPDATE also carries the stored object.
        at_most = len(body) if admission.get("operation") == "CREATE" else None
        work = self._validate if endpoint == "validate" else self._mutate
        answer, verdict = work(admission, at_most)
        return 200, orjson.dumps(_review(uid, answer)), verdict

    def _busy(self, body: bytes | bytearray, endpoint: Endpoint, ahead: int, waited_s: float) -> tuple[int, bytes, str]:
        """The busy denial of a request that got no turn in time: HTTP 200, `allowed: false`, code 429 with
        `retryAfterSeconds`, which the API server hands on to the client as a 429 with Retry-After (kubectl and
        client-go then retry by themselves)."""
        found = _UID_AHEAD.search(body, 0, 4096)
        if found is not None:
            uid = found.group(1).decode("ascii")
        else:
            try:
                uid = parse_review(body)["request"]["uid"]
            except BadReviewError as exc:
                return _bad_review(exc)
        within = self.settings.admission.answer_within_s
        log.warning("event=admission_busy endpoint=%s uid=%s ahead=%d waited_s=%.2f", endpoint, uid, ahead, waited_s)
        status: Status = {
            "code": 429,
            "reason": "TooManyRequests",
            "message": f"ringroute is busy: it could not check this job within {within:g} s "
            f"(admission.answerWithinS), after {ahead} other large job{'' if ahead == 1 else 's'}; "
            "retry in a few seconds",
            "details": {"retryAfterSeconds": RETRY_AFTER_S},
        }
        return 200, orjson.dumps(_review(uid, {"allowed": False, "status": status})), "busy"

    def _unread_busy(self, request: web.Request, endpoint: Endpoint, exc: BusyError) -> web.Response:
        """HTTP 429 for a request whose body could not be read in time: the API server applies the webhook's failure
        policy (ringroute's: Fail) with this message; refused at once, it retries first (Retry-After)."""
        self.metrics.admission_busy.labels(endpoint, "refused_at_once" if exc.at_once else "refused_late").inc()
        log.warning(
            "event=admission_busy endpoint=%s bytes=%s unread=true detail=%r",
            endpoint,
            request.content_length,
            str(exc),
        )
        if exc.at_once:
            message = (
                "ringroute is busy: more request bodies wait to be read than it could read in time "
                f"(admission.server.bodyBufferMib); retry in {RETRY_AFTER_S} s"
            )
        else:
            within = self.settings.admission.answer_within_s
            message = (
                f"ringroute is busy: it could not read this {request.content_length}-byte request within {within:g} s "
                "(admission.answerWithinS); retry in a few seconds"
            )
        body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 429, "reason": "TooManyRequests"}
        body["message"] = message
        response = _closing(_json_response(body, 429))
        if exc.at_once:
            response.headers["Retry-After"] = str(RETRY_AFTER_S)
        return response

    async def validate(self, request: web.Request) -> web.Response:
        """POST /jobs/validate."""
        return await self._handle(request, "validate")

    async def mutate(self, request: web.Request) -> web.Response:
        """POST /jobs/mutate."""
        return await self._handle(request, "mutate")

    def _validate(self, admission: AdmissionRequest, at_most: int | None) -> tuple[AdmissionResponse, str]:
        job = admission.get("object") or {}
        old = _old_object(admission)
        try:
            violations = validate(job, old, self.settings, size_at_most=at_most, facts=self.cluster_facts)
            verdict = classify(violations, self.settings, existing=existing_violations(old, self.settings))
        except RecursionError:
            return self._deny_nesting(admission, job)
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
            response["status"] = _denial(verdict.denials, verdict.http_code, verdict.message())
            self._log_denied(admission, job, verdict.denials)
            return response, "denied"
        return response, "warned" if "warnings" in response else "allowed"

    def _mutate(self, admission: AdmissionRequest, at_most: int | None) -> tuple[AdmissionResponse, str]:
        job = admission.get("object") or {}
        try:
            old = _old_object(admission)
            too_large = check_job_size(job, self.settings, at_most=at_most)
            if too_large is not None and (old is None or check_job_size(old, self.settings) is None):
                return self._deny_size(admission, job, too_large)
            if too_large is not None:
                return {"allowed": True}, "allowed"  # already stored that large: validation ratchets it
            view = read_job(job, self.settings)
            if admission.get("operation") == "UPDATE":
                # Only a job ringroute admitted is patched, and only back to what the stored object has.
                mutation = plan_update(view, old) if old is not None else Mutation()
            else:
                mutation = plan_create(view, self.cluster_facts, size_at_most=at_most)
            if mutation.denial is not None:
                return self._deny_size(admission, job, mutation.denial)
            patch = encode_patch(mutation.ops) if mutation.ops else None
        except RecursionError:
            return self._deny_nesting(admission, job)
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

    def _deny_size(
        self, admission: AdmissionRequest, job: Mapping[str, Any], violation: Violation
    ) -> tuple[AdmissionResponse, str]:
        """A job too large to check and patch is denied by the mutating webhook already (it runs first)."""
        self.metrics.admission_violations.labels(violation.rule).inc()
        self._log_denied(admission, job, (violation,))
        return {"allowed": False, "status": _denial((violation,), 422, violation.render())}, "denied"

    def _deny_nesting(self, admission: AdmissionRequest, job: Mapping[str, Any]) -> tuple[AdmissionResponse, str]:
        """A job nested too deeply for ringroute's checks (JSON allows 1,024 levels; no Volcano Job field nests)."""
        violation = Violation(
            "spec",
            "Forbidden",
            None,
            "values nested hundreds of levels deep cannot be checked (no Volcano Job field nests like that); "
            "remove the nesting",
            "job-size",
        )
        self._log_denied(admission, job, (violation,))
        return {"allowed": False, "status": _denial((violation,), 403, violation.render())}, "denied"

    def _log_denied(self, admission: AdmissionRequest, job: Mapping[str, Any], denials: Sequence[Violation]) -> None:
        log.info(
            "event=job_denied uid=%s job=%s/%s rules=%s",
            admission.get("uid"),
            admission.get("namespace"),
            admission.get("name") or _job_name(job),
            ",".join(sorted({v.rule for v in denials})),
        )

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


def _denial(violations: Sequence[Violation], code: int, message: str) -> Status:
    """The metav1.Status of a denial: the rendered message and one cause per violation."""
    causes: list[StatusCause] = [{"reason": v.cause_reason, "message": v.render(), "field": v.path} for v in violations]
    return {
        "code": code,
        "reason": "Forbidden" if code == 403 else "Invalid",
        "message": message,
        "details": {"causes": causes},
    }


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

    async def close_handlers(_app: web.Application) -> None:
        await asyncio.get_running_loop().run_in_executor(None, handlers.close)

    app.on_cleanup.append(close_handlers)
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
