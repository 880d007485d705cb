"""HTTP endpoints of the Volcano scheduler extender: decode, call `webhook.extender.scoring`, encode.

Volcano's `extender` plugin POSTs JSON to `<extender.urlPrefix>/<verb>` and treats any non-200 answer as an
error (ignored when `extender.ignorable: true`). A body that is not an extender payload gets HTTP 400 with a
one-line message naming the field; an internal error never fails scheduling: it answers "fits" / no scores, is
logged and is counted in `ringroute_extender_degraded_total`.

The endpoints are served by `webhook.common.buffered_http` (`serve_extender`), which receives each body straight
into a buffer kept between calls; the verbs decode it from there.
"""

from __future__ import annotations

import gc
import logging
import operator
import time
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
import orjson
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from webhook.common import buffered_http
from webhook.common.buffered_http import Endpoint, Reply, Request
from webhook.common.metrics import Metrics
from webhook.common.settings import Settings, volcano_release
from webhook.extender import scoring
from webhook.extender.answers import Release, configured_release, predicate_answer
from webhook.extender.fit import TaskView, read_task
from webhook.extender.release_detection import detect_release_range
from webhook.extender.state import ExtenderState, JobPlan, Unplanned
from webhook.extender.wire import (
    EventRequest,
    PredicateRequest,
    PrioritizeRequest,
    SessionOpenRequest,
    SessionPrioritizeRequest,
    TaskInfo,
)

log = logging.getLogger(__name__)

PREFIX = "/extender"

Outcome = str
VerbResult = tuple[Any, Outcome]
Body = bytes | bytearray | memoryview
"""A request body: bytes, or a view of the server's receive buffer."""
Decoded = TypeVar("Decoded", bound=msgspec.Struct)


KEPT_BUFFER_BYTES = 32 * 2**20
"""Largest receive buffer kept between calls: a 10,000-candidate prioritize (16 MB) or 1,000 candidates as kubelet
reports them (25 MB) fit; the memory it holds stays resident."""

SESSION_CLOSE_MAX_BYTES = 64 * 1024
"""Largest onSessionClose body read: Volcano's OnSessionCloseRequest has no fields (it sends `{}`)."""

_NAME = operator.attrgetter("Name")

RELEASE_DETECTION_INTERVAL_S = 300.0
"""How often the Volcano release is read again from a request when `volcano.version` is auto."""


def answer_group(raw: Body) -> Release | None:
    """The first release of the predicate-answer group (1.7, 1.8 or 1.10) a request body comes from, when its
    field names say so unambiguously."""
    try:
        request = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    found = detect_release_range(request) if isinstance(request, dict) else None
    if found is None:
        return None
    low, high = volcano_release(found[0]), volcano_release(found[1])
    if low is None or high is None:
        return None
    for first, last in (((1, 7), (1, 7)), ((1, 8), (1, 9)), ((1, 10), (99, 0))):
        if first <= low and high <= last:
            return first
    return None


class PayloadError(ValueError):
    """The request body is not a Volcano extender payload; the message names the field (HTTP 400)."""


_DECODERS: dict[type[Any], msgspec.json.Decoder[Any]] = {
    kind: msgspec.json.Decoder(kind)
    for kind in (PredicateRequest, PrioritizeRequest, SessionPrioritizeRequest, SessionOpenRequest, EventRequest)
}


def decode(kind: type[Decoded], raw: Body) -> Decoded:
    """Decode a request body into `kind`; PayloadError with the field path when it does not fit."""
    try:
        return _DECODERS[kind].decode(raw)  # type: ignore[no-any-return]
    except msgspec.ValidationError as exc:
        raise PayloadError(_field_message(str(exc))) from None
    except msgspec.DecodeError as exc:
        raise PayloadError(f"body: not a JSON object ({exc})") from None
    except RecursionError:
        # msgspec follows nesting, even in fields it skips, as deep as the interpreter's recursion limit allows.
        raise PayloadError("body: nested too deeply (Volcano's objects nest a few dozen levels)") from None


def _field_message(text: str) -> str:
    """msgspec's "Expected `int`, got `str` - at `$.task.Status`" as "task.Status: expected `int`, got `str`"."""
    message, sep, where = text.rpartition(" - at `")
    if not sep:
        message, where = text, ""
    path = where.rstrip("`").removeprefix("$").lstrip(".") or "body"
    return f"{path}: {message[:1].lower()}{message[1:]}"


class ExtenderService:
    """The extender's verbs on request bytes: each returns the answer object and the metrics outcome, or raises
    PayloadError. The HTTP endpoints wrap it; the emulated scheduler (`webhook.volcano_emulation`) calls it
    directly with Volcano's bodies."""

    def __init__(self, settings: Settings, metrics: Metrics, state: ExtenderState | None = None) -> None:
        self.settings = settings
        self.metrics = metrics
        self.state = state or ExtenderState(settings)
        self.state.on_plan = _plan_logger(metrics)
        state = self.state
        metrics.extender_state_bytes.set_function(lambda: state.stored_bytes)
        self.release: Release | None = configured_release(settings)
        self._detected: Release | None = None
        self._detected_at = -RELEASE_DETECTION_INTERVAL_S

    def predicate(self, raw: Body) -> VerbResult:
        """POST <prefix>/predicate."""
        request = decode(PredicateRequest, raw)
        task = _task(request.task, self.settings)
        if task.profile is None:
            return predicate_answer(scoring.FITS, self.release), "neutral"
        if request.node is None:
            raise PayloadError("node: missing; a predicate request has 'node' at the top level")
        verdict = scoring.predicate(task, request.node, self.state)
        self.state.maybe_prune()
        release = self.release if self.release is not None or verdict.passes else self._answer_release(raw)
        return predicate_answer(verdict, release), "fit" if verdict.passes else "unfit"

    def _answer_release(self, raw: Body) -> Release | None:
        """With `volcano.version: auto`, the release group the requests come from (refusals differ between
        1.7, 1.8-1.9 and 1.10+), read from the request's field names every few minutes."""
        now = time.monotonic()
        if now - self._detected_at >= RELEASE_DETECTION_INTERVAL_S:
            self._detected_at = now
            detected = answer_group(raw)
            if detected != self._detected:
                log.info("event=extender_volcano_release_detected answers_as=%s", detected)
            self._detected = detected
        return self._detected

    def prioritize(self, raw: Body) -> VerbResult:
        """POST <prefix>/prioritize."""
        # Read the candidates' names only, when the node views (session cache or earlier calls) already give
        # every candidate's topology; read their labels too only when some are missing or stale.
        lean = decode(SessionPrioritizeRequest, raw)
        task = _task(lean.task, self.settings)
        if task.profile is None:
            return {"nodeScore": {}, "errorMessage": ""}, "neutral"
        names = list(map(_NAME, lean.nodes or ()))
        self.state.maybe_prune()  # before the path lookup: it also retires paths read too long ago
        if self.state.session_data:
            scores = scoring.prioritize(task, lean.nodes or [], self.state, names_only=True, names=names)
        else:
            self.state.mark_fresh(names)
            try:
                path_ids = self.state.known_path_ids(names)
                if path_ids is None:
                    full = decode(PrioritizeRequest, raw)
                    scores = scoring.prioritize(task, full.nodes or [], self.state)
                else:
                    scores = scoring.prioritize(
                        task, lean.nodes or [], self.state, names_only=True, path_ids=path_ids, names=names
                    )
            finally:
                self.state.mark_fresh(())
        self.state.maybe_prune()
        return {"nodeScore": scores, "errorMessage": ""}, "scored" if scores else "neutral"

    def session_open(self, raw: Body) -> VerbResult:
        """POST <prefix>/onSessionOpen: the scheduler's cache at the start of a session.

        Answered `{}` with HTTP 200. A body that is not Volcano's cache (a field of the wrong type or shape) gets
        HTTP 400 naming the field, and what the extender knew of the previous session is dropped, not replaced:
        Volcano never sends such a body, and with the required `extender.ignorable: true` it goes on regardless.
        """
        try:
            request = SessionOpenRequest() if _blank(raw) else decode(SessionOpenRequest, raw)
        except PayloadError:
            self.state.session_without_data()
            raise
        if request.Nodes is None:
            # Volcano always sends its nodes; a cache without them says nothing about this session.
            self.state.session_without_data()
            return {}, "ok"
        counts = self.state.open_session(request)
        self.metrics.extender_session_bytes.set(len(raw))
        self.metrics.extender_session_nodes.set(counts["nodes"])
        log.info("event=extender_session_open bytes=%d %s", len(raw), " ".join(f"{k}={v}" for k, v in counts.items()))
        return {}, "ok"

    def session_too_large(self, length: int) -> None:
        """An onSessionOpen body over `extender.maxSessionOpenMib` was left unread."""
        self.state.session_without_data()
        self.metrics.extender_session_bytes.set(length)
        log.warning(
            "event=extender_session_too_large bytes=%d limit_mib=%d detail=planning from calls only; raise "
            "extender.maxSessionOpenMib or drop onSessionOpenVerb on clusters this large",
            length,
            self.settings.extender.max_session_open_mib,
        )

    def session_close(self, raw: Body) -> VerbResult:
        """POST <prefix>/onSessionClose: Volcano sends `{}` (OnSessionCloseRequest has no fields)."""
        if not _blank(raw):
            _json_object(raw)
        self.state.maybe_prune()
        return {}, "ok"

    def allocate(self, raw: Body) -> VerbResult:
        """POST <prefix>/allocate (Volcano 1.13+ `allocateFuncVerb`): a task took a node in this session."""
        task = _task(decode(EventRequest, raw).task, self.settings)
        self.state.allocated(task)
        return {"errorMessage": ""}, "ok" if task.profile is not None else "neutral"

    def deallocate(self, raw: Body) -> VerbResult:
        """POST <prefix>/deallocate (Volcano 1.13+ `deallocateFuncVerb`): an allocation was undone."""
        task = _task(decode(EventRequest, raw).task, self.settings)
        self.state.deallocated(task)
        return {"errorMessage": ""}, "ok" if task.profile is not None else "neutral"


def extender_endpoints(service: ExtenderService) -> dict[str, Endpoint]:
    """The extender's endpoints: POST `/extender/predicate`, `/prioritize`, `/onSessionOpen`, `/onSessionClose`,
    `/allocate`, `/deallocate`; GET `/extender/healthz` and `/metrics`."""
    settings, metrics = service.settings, service.metrics
    neutral_predicate: Any = predicate_answer(scoring.FITS, service.release)
    max_body = settings.extender.max_body_mib * 2**20
    max_session = settings.extender.max_session_open_mib * 2**20
    endpoints = {
        f"{PREFIX}/predicate": _endpoint("predicate", service.predicate, neutral_predicate, metrics, max_body),
        f"{PREFIX}/prioritize": _endpoint(
            "prioritize", service.prioritize, {"nodeScore": {}, "errorMessage": ""}, metrics, max_body
        ),
        f"{PREFIX}/onSessionOpen": _endpoint(
            "onSessionOpen",
            service.session_open,
            {},
            metrics,
            max_session,
            on_too_large=service.session_too_large,
            settles_memory=True,
        ),
        f"{PREFIX}/onSessionClose": _endpoint(
            "onSessionClose", service.session_close, {}, metrics, SESSION_CLOSE_MAX_BYTES
        ),
        f"{PREFIX}/allocate": _endpoint("allocate", service.allocate, {"errorMessage": ""}, metrics, max_body),
        f"{PREFIX}/deallocate": _endpoint("deallocate", service.deallocate, {"errorMessage": ""}, metrics, max_body),
    }

    def healthz(_request: Request) -> Reply:
        return Reply(200, b"ok", "text/plain; charset=utf-8")

    def metrics_page(_request: Request) -> Reply:
        return Reply(200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST)

    endpoints[f"{PREFIX}/healthz"] = Endpoint(healthz, methods=frozenset({"GET"}))
    endpoints["/metrics"] = Endpoint(metrics_page, methods=frozenset({"GET"}))
    return endpoints


async def serve_extender(
    service: ExtenderService, host: str, port: int, *, reuse_port: bool = False
) -> buffered_http.BufferedServer:
    """Serve the extender's endpoints on host:port within `extender.server`; stop with `await server.close()`.
    The bound port is `server.port` (for port 0)."""
    settings = service.settings.extender
    keep = min(settings.max_body_mib * 2**20, KEPT_BUFFER_BYTES)
    return await buffered_http.serve(
        extender_endpoints(service), host, port, settings.server, keep_buffer_bytes=keep, reuse_port=reuse_port
    )


def _task(task: TaskInfo | None, settings: Settings) -> TaskView:
    if task is None:
        raise PayloadError("task: missing; a Volcano extender request has 'task' at the top level")
    return read_task(task, settings)


def _plan_logger(metrics: Metrics) -> Callable[[TaskView, JobPlan | Unplanned], None]:
    def on_plan(task: TaskView, plan: JobPlan | Unplanned) -> None:
        if isinstance(plan, Unplanned):
            metrics.extender_gang_plans.labels(plan.reason).inc()
            log.info("event=extender_gang_unplanned job=%s reason=%s detail=%r", task.job, plan.reason, plan.detail)
            return
        metrics.extender_gang_plans.labels("enforced" if plan.enforced else "scored").inc()
        log.info("event=extender_gang_plan %s", scoring.plan_summary(plan))

    return on_plan


def _blank(raw: Body) -> bool:
    """An empty body (Volcano sends `{}`, other senders nothing); long bodies are never blank."""
    return len(raw) < 64 and not bytes(raw).strip()


def _json_object(raw: Body) -> dict[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise PayloadError(f"body: not JSON ({exc})") from None
    if not isinstance(body, dict):
        raise PayloadError(f"body: expected a JSON object, got {type(body).__name__}")
    return body


def _endpoint(
    verb: str,
    work: Callable[[Body], VerbResult],
    neutral: Any,
    metrics: Metrics,
    max_body: int,
    *,
    on_too_large: Callable[[int], None] | None = None,
    settles_memory: bool = False,
) -> Endpoint:
    def handle(request: Request) -> Reply:
        outcome = "bad_request"
        try:
            # The decoded request is acyclic and freed by reference counting; letting the cyclic collector run
            # in the middle of a 10,000-node call only walks thousands of fresh objects (a third of the time).
            gc.disable()
            if settles_memory:
                gc.unfreeze()
            try:
                answer, outcome = work(request.body)
            except PayloadError as exc:
                return _error(verb, 400, str(exc))
            except Exception:
                log.exception("event=extender_degraded verb=%s", verb)
                metrics.extender_degraded.labels(verb=verb).inc()
                answer, outcome = neutral, "degraded"
            finally:
                gc.enable()
                if settles_memory:
                    # The session's state is hundreds of thousands of objects: collect now and exempt them from
                    # later collections, rather than have a full collection (about 20 ms at 10,000 nodes) fall
                    # into a prioritize call.
                    gc.collect()
                    gc.freeze()
            return Reply(200, orjson.dumps(answer))
        finally:
            metrics.extender_requests.labels(verb=verb, outcome=outcome).inc()
            metrics.extender_latency.labels(verb=verb).observe(time.perf_counter() - request.started)

    def refused(status: int, length: int) -> None:
        # Refused unread (411, 413) or too slow (408), and the connection closed. Volcano (with the required
        # `extender.ignorable: true`) then goes on without the extender for this call.
        metrics.extender_requests.labels(verb=verb, outcome="body_timeout" if status == 408 else "too_large").inc()
        if status != 408:
            log.warning("event=extender_body_refused verb=%s status=%d bytes=%d", verb, status, length)
            if on_too_large is not None:
                on_too_large(length)

    return Endpoint(handle, max_body=max_body, on_refused=refused)


def _error(verb: str, status: int, message: str) -> Reply:
    log.warning("event=extender_bad_request verb=%s status=%d error=%r", verb, status, message[:500])
    return Reply(status, orjson.dumps({"error": message}))


__all__ = ["PREFIX", "ExtenderService", "PayloadError", "decode", "extender_endpoints", "serve_extender"]
