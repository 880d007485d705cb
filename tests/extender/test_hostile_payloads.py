"""Payloads Volcano never sends: wrongly typed fields, forged or oversized session verbs, numbers that are not
ASCII. Each is a 400 (or 413) with one log line and no traceback, and leaves no forged state behind."""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import pytest

from emulation.volcano_payloads import parse_quantity, quantity_milli_value
from tests.support.extender import (
    RESOURCE,
    ServedExtender,
    decoded_node,
    decoded_task,
    job,
    node,
    serve_extender_for_test,
    session_open,
    tor,
)
from webhook.extender.app import SESSION_CLOSE_MAX_BYTES
from webhook.extender.fit import node_admits


@pytest.fixture
async def client() -> AsyncIterator[ServedExtender]:
    test_client = await serve_extender_for_test()
    yield test_client
    await test_client.close()


async def post(client: ServedExtender, verb: str, body: Any) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = await client.post(f"/extender/{verb}", data=data, headers={"Content-Type": "application/json"})
    return response.status, await response.json()


def scalar_resources_as_list(info: dict[str, Any]) -> str:
    info["Idle"]["ScalarResources"] = [8000]
    return "Idle.ScalarResources: expected `object | null`, got `array`"


def node_status_as_string(info: dict[str, Any]) -> str:
    info["Node"]["status"] = "Ready"
    return "Node.status: expected `object | null`, got `str`"


def bodies(verb: str, spoil: Any) -> tuple[Any, str]:
    """A `verb` body with one node spoilt by `spoil`, and where the error message must say it is."""
    info = node("a0", tor("A"))
    message = spoil(info)
    if verb == "predicate":
        return {"task": job().tasks[0], "node": info}, f"node.{message}"
    if verb == "prioritize":
        return {"task": job().tasks[0], "nodes": [node("a1", tor("A")), info]}, f"nodes[1].{message}"
    return session_open([job("bert", 2)], [info]), f"Nodes[...].{message}"


@pytest.mark.parametrize("spoil", [scalar_resources_as_list, node_status_as_string])
@pytest.mark.parametrize("verb", ["predicate", "prioritize", "onSessionOpen"])
async def test_wrongly_typed_fields_answer_400_with_one_log_line_and_no_traceback(
    client: ServedExtender, caplog: pytest.LogCaptureFixture, verb: str, spoil: Any
) -> None:
    body, message = bodies(verb, spoil)
    caplog.set_level(logging.DEBUG, logger="webhook.extender")
    caplog.clear()
    status, answer = await post(client, verb, body)
    assert status == 400
    assert answer["error"] == message
    records = [r for r in caplog.records if r.name.startswith("webhook.extender")]
    assert len(records) == 1
    assert records[0].levelno == logging.WARNING
    assert records[0].exc_info is None
    assert "event=extender_bad_request" in records[0].getMessage()


DEEP = 100_000


@pytest.mark.parametrize(
    ("verb", "body"),
    [
        ("prioritize", b'{"unread":' + b"[" * DEEP + b"]" * DEEP + b',"task":{"Name":"a"},"nodes":[]}'),
        (
            "prioritize",
            b'{"task":{"Name":"a"},"nodes":[{"Name":"n","Node":' + b'{"a":' * DEEP + b"1" + b"}" * DEEP + b"}]}",
        ),
        (
            "predicate",
            b'{"task":{"Name":"a"},"node":{"Name":"n","Tasks":' + b'{"a":' * DEEP + b"1" + b"}" * DEEP + b"}}",
        ),
        ("onSessionOpen", b'{"Jobs":{},"Nodes":{},"Queues":' + b"[" * DEEP + b"]" * DEEP + b"}"),
    ],
)
async def test_json_nested_100000_deep_is_a_400_without_a_traceback(
    client: ServedExtender, caplog: pytest.LogCaptureFixture, verb: str, body: bytes
) -> None:
    """msgspec follows nesting even in fields it skips; past the recursion limit that is a refusal, not the
    degraded answer of an internal error."""
    caplog.set_level(logging.DEBUG, logger="webhook.extender")
    status, answer = await post(client, verb, body)
    assert status == 400
    assert answer["error"].startswith("body: nested too deeply")
    assert not [r for r in caplog.records if r.exc_info is not None]
    status, _ = await post(client, "prioritize", {"task": job().tasks[0], "nodes": [node("a0", tor("A"))]})
    assert status == 200, "the extender goes on serving"


async def test_a_forged_session_cache_replaces_nothing_and_drops_what_was_known(
    client: ServedExtender,
) -> None:
    bert = job("bert", 2)
    good = session_open([bert], [node("a0", tor("A")), node("a1", tor("A"))])
    assert (await post(client, "onSessionOpen", good))[0] == 200
    state = client.state
    assert state.session_data
    forged = copy.deepcopy(good)
    forged["Jobs"][bert.job_id]["MinAvailable"] = "all of them"
    status, answer = await post(client, "onSessionOpen", forged)
    assert status == 400
    assert answer["error"].endswith("MinAvailable: expected `int`, got `str`")
    assert not state.session_data  # neither the forged cache nor a stale one is planned from


async def test_session_close_takes_only_a_small_json_object(client: ServedExtender) -> None:
    assert await post(client, "onSessionClose", {}) == (200, {})
    status, answer = await post(client, "onSessionClose", {"Volcano": "sends {}", "pad": "x" * SESSION_CLOSE_MAX_BYTES})
    assert status == 413
    assert "over the 64 KiB limit" in answer["error"]
    status, answer = await post(client, "onSessionClose", b'"close"')
    assert status == 400
    assert answer["error"] == "body: expected a JSON object, got str"


@pytest.mark.parametrize(("milli", "cards"), [(8000, 8), (8000.0, 8), (7999.9999999, 8), (4000, 4), (0, 0)])
def test_npu_requests_are_read_in_milli_units_as_volcano_sends_them(milli: float, cards: int) -> None:
    task = job().tasks[0]
    task["Resreq"]["ScalarResources"][RESOURCE] = milli
    task["InitResreq"] = task["Resreq"]
    assert decoded_task(task).cards == cards


async def test_an_npu_request_that_is_not_a_number_is_a_400(client: ServedExtender) -> None:
    for text in ("8", "8000m", "٨"):
        task = job().tasks[0]
        task["Resreq"]["ScalarResources"][RESOURCE] = text
        status, answer = await post(client, "predicate", {"task": task, "node": node("a0", tor("A"))})
        assert status == 400
        assert answer["error"] == "task.Resreq.ScalarResources[...]: expected `float`, got `str`", text


@pytest.mark.parametrize(
    ("label", "admitted"),
    [
        ("16", True),
        ("+16", True),
        ("9", True),
        ("8", False),
        ("١٦", False),
        (" 16", False),
        ("1_6", False),
        ("", False),
    ],
)
def test_gt_node_affinity_reads_label_values_as_kubernetes_does(label: str, admitted: bool) -> None:
    task = job().tasks[0]
    task["Pod"]["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "npu-count", "operator": "Gt", "values": ["8"]}]}]
            }
        }
    }
    info = decoded_node(node("a0", {**tor("A"), "npu-count": label}))
    assert node_admits(decoded_task(task).constraints, info) is admitted


@pytest.mark.parametrize(("text", "value"), [("8", Decimal(8)), ("8000m", Decimal(8)), ("8e0", Decimal(8))])
def test_the_volcano_model_reads_quantities_as_kubernetes_does(text: str, value: Decimal) -> None:
    assert parse_quantity(text) == value
    assert quantity_milli_value(text) == 8000


@pytest.mark.parametrize("text", ["٨", "²", "8 cards", "0x8", "8\n8"])
def test_the_volcano_model_refuses_what_kubernetes_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="is not a Kubernetes quantity"):
        parse_quantity(text)
