"""The extender endpoints over aiohttp's test client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from tests.extender.payloads import job_task, node, rename_go_keys, session_open, tor
from webhook import extender as extender_module
from webhook import extender_scoring
from webhook.cli_extender import task_info
from webhook.extender import extender_app
from webhook.extender_scoring import ExtenderState, label_path_reader
from webhook.metrics import Metrics
from webhook.settings import Settings


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
async def client(metrics: Metrics) -> AsyncIterator[TestClient[Any, Any]]:
    settings = Settings()
    app = extender_app(settings, metrics, state=ExtenderState(settings, path_reader=label_path_reader()))
    async with TestClient(TestServer(app)) as test_client:
        yield test_client


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


async def post(client: TestClient[Any, Any], verb: str, body: Any) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = await client.post(f"/extender/{verb}", data=data, headers={"Content-Type": "application/json"})
    text = await response.text()
    return response.status, json.loads(text) if text else None


async def test_example_payload_is_scored_over_http(client: TestClient[Any, Any], data_dir: Path) -> None:
    payload = json.loads((data_dir / "extender-prioritize.json").read_text(encoding="utf-8"))
    status, body = await post(client, "prioritize", payload)
    assert status == 200
    assert body["errorMessage"] == ""
    assert body["nodeScore"]["npu-0101"] >= 90.0


async def test_predicate_answers_with_status_and_code_keys(client: TestClient[Any, Any], metrics: Metrics) -> None:
    busy = node("n1", tor("A"), busy=True)
    status, body = await post(client, "predicate", {"task": job_task(0), "node": busy})
    assert status == 200
    assert set(body) == {"status", "code"}
    assert body["code"] == 2
    assert "0 of 8 huawei.com/ascend-1980 free" in body["status"]
    assert sample(metrics, "ringroute_extender_requests_total", verb="predicate", outcome="unfit") == 1.0


async def test_non_ringroute_task_is_neutral_for_both_verbs(client: TestClient[Any, Any], metrics: Metrics) -> None:
    task = task_info(namespace="web", job_name="nginx", index=0, ring_label=None, cards=0)
    status, body = await post(client, "predicate", {"task": task, "node": node("n1", tor("A"), busy=True)})
    assert (status, body) == (200, {"status": "", "code": 0})
    status, body = await post(client, "prioritize", {"task": task, "nodes": [node("n1", tor("A"))]})
    assert (status, body) == (200, {"nodeScore": {}, "errorMessage": ""})
    assert sample(metrics, "ringroute_extender_requests_total", verb="prioritize", outcome="neutral") == 1.0


@pytest.mark.parametrize("style", ["lower-camel", "lower"])
async def test_lower_case_payloads_are_accepted(client: TestClient[Any, Any], style: str) -> None:
    nodes = [node("a-0", tor("A"), hosts=[job_task(0)]), node("a-1", tor("A")), node("b-0", tor("B"))]
    body = {"Task": rename_go_keys(job_task(1), style), "Nodes": rename_go_keys(nodes, style)}
    status, answer = await post(client, "prioritize", body)
    assert status == 200
    assert answer["nodeScore"]["a-1"] > answer["nodeScore"]["b-0"]


async def test_null_nodes_list_gives_empty_scores(client: TestClient[Any, Any]) -> None:
    status, body = await post(client, "prioritize", {"task": job_task(0), "nodes": None})
    assert (status, body) == (200, {"nodeScore": {}, "errorMessage": ""})


@pytest.mark.parametrize(
    ("verb", "body", "message"),
    [
        ("prioritize", b"{not json", "body: not JSON"),
        ("prioritize", b"[1, 2]", "body: expected a JSON object"),
        ("prioritize", {"nodes": []}, "task: missing"),
        ("prioritize", {"task": job_task(0), "nodes": {"n1": {}}}, "nodes: expected a list"),
        ("prioritize", {"task": job_task(0), "nodes": [7]}, "nodes[0]: expected a NodeInfo object"),
        ("predicate", {"task": job_task(0)}, "node: missing"),
        ("predicate", {"task": "worker-0", "node": {}}, "task: expected a TaskInfo object"),
        ("onSessionOpen", {"Jobs": [1]}, "Jobs: expected an object"),
    ],
)
async def test_malformed_bodies_get_400_with_the_field_named(
    client: TestClient[Any, Any], metrics: Metrics, verb: str, body: Any, message: str
) -> None:
    status, answer = await post(client, verb, body)
    assert status == 400
    assert message in answer["error"]
    assert sample(metrics, "ringroute_extender_requests_total", verb=verb, outcome="bad_request") == 1.0


async def test_internal_error_degrades_to_neutral_scores_and_is_counted(
    client: TestClient[Any, Any], metrics: Metrics, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("bug")

    monkeypatch.setattr(extender_scoring, "score_records", broken)
    status, body = await post(client, "prioritize", {"task": job_task(0), "nodes": [node("n1", tor("A"))]})
    assert (status, body) == (200, {"nodeScore": {}, "errorMessage": ""})
    assert sample(metrics, "ringroute_extender_degraded_total", verb="prioritize") == 1.0


async def test_internal_error_in_predicate_lets_the_node_fit(
    client: TestClient[Any, Any], metrics: Metrics, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("bug")

    monkeypatch.setattr(extender_scoring, "node_cards", broken)
    status, body = await post(client, "predicate", {"task": job_task(0), "node": node("n1", tor("A"), busy=True)})
    assert (status, body) == (200, {"status": "", "code": 0})
    assert sample(metrics, "ringroute_extender_degraded_total", verb="predicate") == 1.0


async def test_session_open_teaches_job_size_and_placement(client: TestClient[Any, Any]) -> None:
    hosting = [node("a-0", tor("A"), hosts=[job_task(0)])]
    free = [node("a-1", tor("A"))] + [node(f"big-{i}", tor("big")) for i in range(6)]
    free += [node(f"fit-{i}", tor("fit")) for i in range(3)]
    job = [job_task(0, node="a-0", status=32)] + [job_task(i) for i in (1, 2, 3)]
    status, body = await post(client, "onSessionOpen", session_open(job, hosting + free))
    assert (status, body) == (200, {})
    _, answer = await post(client, "prioritize", {"task": job_task(1), "nodes": free})
    scores = answer["nodeScore"]
    assert scores["a-1"] > scores["fit-0"] > scores["big-0"]
    status, body = await post(client, "onSessionClose", b"")
    assert (status, body) == (200, {})


async def test_session_open_failure_is_degraded_not_an_error(
    client: TestClient[Any, Any], metrics: Metrics, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("bug")

    monkeypatch.setattr(extender_module, "scoring_open", broken)
    status, body = await post(client, "onSessionOpen", {"Jobs": {}, "Nodes": {}})
    assert (status, body) == (200, {})
    assert sample(metrics, "ringroute_extender_degraded_total", verb="onSessionOpen") == 1.0


async def test_a_large_payload_over_the_default_aiohttp_body_limit_is_accepted(client: TestClient[Any, Any]) -> None:
    nodes = [node(f"n{i}", tor(f"leaf-{i // 8}"), busy=i % 3 != 0) for i in range(1000)]
    data = json.dumps({"task": job_task(0), "nodes": nodes}).encode()
    assert len(data) > 1024 * 1024
    status, answer = await post(client, "prioritize", data)
    assert status == 200
    assert len(answer["nodeScore"]) == 1000


async def test_healthz_answers_ok(client: TestClient[Any, Any]) -> None:
    response = await client.get("/extender/healthz")
    assert response.status == 200
