"""HTTP endpoints of the Volcano scheduler extender: decode, call `webhook.extender_scoring`, encode.

Volcano's `extender` plugin POSTs JSON to `<extender.urlPrefix>/<verb>` and treats any non-200 answer as an
error (ignored when `extender.ignorable: true`). A body that is not an extender payload gets HTTP 400 with a
one-line message; an internal error never fails scheduling: it answers "fits" / no scores, is logged and is
counted in `ringroute_extender_degraded_total`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from webhook import extender_scoring as scoring
from webhook.extender_scoring import ExtenderState, PayloadError
from webhook.metrics import Metrics
from webhook.settings import Settings

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 512 * 1024 * 1024
"""Default largest request body (`extender.maxBodyMib`). Volcano sends every candidate NodeInfo with its tasks'
full Pod objects, and onSessionOpen sends the whole cluster: tens of MB on large clusters (aiohttp's default
limit is 1 MiB)."""

STATE_KEY = web.AppKey("extender_state", ExtenderState)
"""The app's ExtenderState (job placement memory, topology cache)."""

PREFIX = "/extender"

Outcome = str
VerbResult = tuple[dict[str, Any], Outcome]


def extender_app(settings: Settings, metrics: Metrics, *, state: ExtenderState | None = None) -> web.Application:
    """The extender application: POST `/extender/predicate`, `/extender/prioritize`, `/extender/onSessionOpen`,
    `/extender/onSessionClose`, and GET `/extender/healthz`.

    `state` lets tests and benchmarks supply an ExtenderState (e.g. with a fixed topology reader).
    """
    state = state or ExtenderState(settings)
    app = web.Application(client_max_size=settings.extender.max_body_mib * 1024 * 1024)
    app[STATE_KEY] = state

    def predicate(raw: bytes) -> VerbResult:
        body = _json_object(raw)
        task = scoring.read_task(_member(body, "task"), settings)
        answer = scoring.predicate_for(task, _member(body, "node", required=task.profile is not None), state)
        if answer["status"]:
            return dict(answer), "unfit"
        return dict(answer), "neutral" if task.profile is None else "fit"

    def prioritize(raw: bytes) -> VerbResult:
        answer = scoring.prioritize_body(raw, settings, state)
        return dict(answer), "scored" if answer["nodeScore"] else "neutral"

    def session_open(raw: bytes) -> VerbResult:
        counts = scoring_open(state, _json_object(raw, empty_ok=True))
        log.info("event=extender_session_open %s", " ".join(f"{k}={v}" for k, v in counts.items()))
        return {}, "ok"

    def session_close(raw: bytes) -> VerbResult:
        _json_object(raw, empty_ok=True)
        state.maybe_prune()
        return {}, "ok"

    neutral_predicate: dict[str, Any] = dict(scoring.fits())
    neutral_scores: dict[str, Any] = {"nodeScore": {}, "errorMessage": ""}
    app.router.add_post(f"{PREFIX}/predicate", _handler("predicate", predicate, neutral_predicate, metrics))
    app.router.add_post(f"{PREFIX}/prioritize", _handler("prioritize", prioritize, neutral_scores, metrics))
    app.router.add_post(f"{PREFIX}/onSessionOpen", _handler("onSessionOpen", session_open, {}, metrics))
    app.router.add_post(f"{PREFIX}/onSessionClose", _handler("onSessionClose", session_close, {}, metrics))
    app.router.add_get(f"{PREFIX}/healthz", _healthz)
    return app


def scoring_open(state: ExtenderState, body: dict[str, Any]) -> dict[str, int]:
    """Seed the state from an OnSessionOpenRequest (separate so tests can make it fail)."""
    return state.open_session(body)


def _member(body: dict[str, Any], name: str, *, required: bool = True) -> Any:
    """A top-level request member by its json tag (`task`), also accepted as `Task`."""
    value = body.get(name)
    if value is None:
        value = body.get(name[0].upper() + name[1:])
    if value is None and required:
        raise PayloadError(f"{name}: missing; a Volcano extender request has {name!r} at the top level")
    return value


async def _healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


def _json_object(raw: bytes, *, empty_ok: bool = False) -> dict[str, Any]:
    """The request body as a JSON object (an empty body reads as `{}` where Volcano sends nothing useful)."""
    if empty_ok and not raw.strip():
        return {}
    body = scoring.decode_json(raw)
    if not isinstance(body, dict):
        raise PayloadError(f"body: expected a JSON object, got {type(body).__name__}")
    return body


def _handler(
    verb: str,
    work: Callable[[bytes], VerbResult],
    neutral: dict[str, Any],
    metrics: Metrics,
) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handle(request: web.Request) -> web.Response:
        started = time.perf_counter()
        outcome = "bad_request"
        try:
            raw = await request.read()
            try:
                answer, outcome = work(raw)
            except PayloadError as exc:
                return _bad_request(verb, str(exc))
            except Exception:
                log.exception("event=extender_degraded verb=%s", verb)
                metrics.extender_degraded.labels(verb=verb).inc()
                answer, outcome = neutral, "degraded"
            return web.Response(body=orjson.dumps(answer), content_type="application/json")
        finally:
            metrics.extender_requests.labels(verb=verb, outcome=outcome).inc()
            metrics.extender_latency.labels(verb=verb).observe(time.perf_counter() - started)

    return handle


def _bad_request(verb: str, message: str) -> web.Response:
    log.warning("event=extender_bad_request verb=%s error=%r", verb, message)
    return web.Response(status=400, body=orjson.dumps({"error": message}), content_type="application/json")


__all__ = ["MAX_BODY_BYTES", "PREFIX", "STATE_KEY", "extender_app"]
