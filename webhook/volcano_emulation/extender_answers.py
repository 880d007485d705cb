"""Extender answers as each Volcano release's plugin and allocate action decode them, and answers encoded for them."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import orjson

from webhook.extender.volcano_releases import FAILING_CODES, RELEASES, STATUS_CODES, normalize_release, release_at_least

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
        failing = [s["Code"] for s in decoded.get("status") or [] if s is not None and s["Code"] in FAILING_CODES]
        if not failing:
            return PredicateOutcome(True, None, "", None)
        reason = f"predicates failed in allocate for task <{task}> on node <{node}>, status is not success"
        return PredicateOutcome(False, failing[0], reason, None)
    message = decoded.get("status") or ""
    if not message:
        return PredicateOutcome(True, None, "", None)
    code = decoded.get("code") or STATUS_CODES["Error"]
    if code not in FAILING_CODES:
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
    if code not in FAILING_CODES:
        raise ValueError(f"code: {code} is not a failing status code (1 Error .. 5 Skip); use 2 (Unschedulable)")
    return orjson.dumps({"errorMessage": reason, "status": [{"Code": code, "Reason": reason}], "code": code})


def encode_predicate_answer(release: str, *, reason: str = "", code: int = STATUS_CODES["Unschedulable"]) -> bytes:
    """The predicate answer `release` reads: pass with an empty `reason`, fail with `reason` and `code` (a code
    outside 1-5 would be ignored by v1.8+ allocate, so it must be one of those)."""
    rel = normalize_release(release)
    if reason and code not in FAILING_CODES:
        raise ValueError(f"code: {code} is not a failing status code (1 Error .. 5 Skip); use 2 (Unschedulable)")
    if rel == "1.7":
        return orjson.dumps({"errorMessage": reason})
    if rel in ("1.8", "1.9"):
        return orjson.dumps({"status": [{"Code": code, "Reason": reason}] if reason else None})
    return orjson.dumps({"status": reason, "code": code if reason else 0})


def encode_prioritize_answer(scores: Mapping[str, float]) -> bytes:
    """`{"nodeScore": {...}, "errorMessage": ""}`; never null: every release turns a null nodeScore into an error."""
    return orjson.dumps({"nodeScore": dict(scores), "errorMessage": ""})


__all__ = [
    "ANSWER_SHAPES",
    "EventOutcome",
    "MAX_RESPONSE_BYTES",
    "PredicateOutcome",
    "PrioritizeOutcome",
    "UNIVERSAL_PREDICATE_PASS",
    "decode_event_handler_response",
    "decode_predicate_response",
    "decode_prioritize_response",
    "encode_predicate_answer",
    "encode_predicate_fail_everywhere",
    "encode_prioritize_answer",
    "on_session_open_outcome",
]
