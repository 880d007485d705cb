"""The extender endpoints over HTTP on loopback: answers per Volcano release, errors, sessions, events."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.extender import (
    RESOURCE,
    ServedExtender,
    decoded_task,
    job,
    node,
    serve_extender_for_test,
    session_open,
    tor,
)
from webhook.common.metrics import Metrics
from webhook.common.settings import Settings, settings_from_mapping
from webhook.extender import scoring as extender_scoring
from webhook.volcano_emulation.allocate_action import predicate_passes
from webhook.volcano_emulation.cluster_objects import task_info

RELEASES = [(1, 7), (1, 8), (1, 9), (1, 10), (1, 12), (1, 13), (1, 16)]


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


async def make_client(settings: Settings, metrics: Metrics) -> ServedExtender:
    return await serve_extender_for_test(settings, metrics)


@pytest.fixture
async def client(metrics: Metrics) -> AsyncIterator[ServedExtender]:
    test_client = await make_client(Settings(), metrics)
    yield test_client
    await test_client.close()


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


async def post(client: ServedExtender, verb: str, body: Any) -> tuple[int, bytes]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = await client.post(f"/extender/{verb}", data=data, headers={"Content-Type": "application/json"})
    return response.status, await response.read()


def busy_node() -> dict[str, Any]:
    return node("n1", tor("A"), busy=True)


async def test_example_payload_is_scored_over_http(client: ServedExtender, data_dir: Path) -> None:
    payload = json.loads((data_dir / "extender-prioritize.json").read_text(encoding="utf-8"))
    status, raw = await post(client, "prioritize", payload)
    assert status == 200
    body = json.loads(raw)
    assert body["errorMessage"] == ""
    # Both nodes sit under the leaf that hosts the job's other task.
    assert body["nodeScore"]["npu-0101"] == body["nodeScore"]["npu-0102"] > 0


@pytest.mark.parametrize("version", ["1.7", "1.8", "1.9", "1.10", "1.13", "1.16"])
async def test_a_configured_release_reads_refusals_and_passes_as_meant(metrics: Metrics, version: str) -> None:
    settings = settings_from_mapping({"volcano": {"version": version}})
    release = tuple(int(p) for p in version.split("."))
    client = await make_client(settings, metrics)
    try:
        status, refusal = await post(client, "predicate", {"task": job().tasks[0], "node": busy_node()})
        assert status == 200
        assert not predicate_passes(release, refusal, ignorable=False)  # type: ignore[arg-type]
        _, fits = await post(client, "predicate", {"task": job().tasks[0], "node": node("n2", tor("A"))})
        assert predicate_passes(release, fits, ignorable=False)  # type: ignore[arg-type]
    finally:
        await client.close()


async def test_without_a_configured_release_passes_read_as_passes_everywhere(client: ServedExtender) -> None:
    _, fits = await post(client, "predicate", {"task": job().tasks[0], "node": node("n2", tor("A"))})
    assert all(predicate_passes(release, fits, ignorable=False) for release in RELEASES)


async def test_without_a_configured_release_refusals_read_on_1_7_and_from_1_10_on(client: ServedExtender) -> None:
    _, refusal = await post(client, "predicate", {"task": job().tasks[0], "node": busy_node()})
    body = json.loads(refusal)
    assert body["code"] == 2
    assert body["status"] == body["errorMessage"]
    assert "takes whole nodes only" in body["status"]
    for release in RELEASES:
        refused = not predicate_passes(release, refusal, ignorable=True)
        # 1.8 and 1.9 cannot decode a string status; an ignorable extender then passes the node.
        assert refused == (release < (1, 8) or release >= (1, 10))


async def test_non_ringroute_task_is_neutral_for_both_verbs(client: ServedExtender, metrics: Metrics) -> None:
    task = job().tasks[0]
    del task["Pod"]["metadata"]["labels"]["ring-controller.cce"]
    status, raw = await post(client, "predicate", {"task": task, "node": busy_node()})
    assert status == 200
    assert predicate_passes((1, 10), raw, ignorable=False)
    status, raw = await post(client, "prioritize", {"task": task, "nodes": [busy_node()]})
    assert json.loads(raw) == {"nodeScore": {}, "errorMessage": ""}
    assert sample(metrics, "ringroute_extender_requests_total", verb="predicate", outcome="neutral") == 1


async def test_null_nodes_list_gives_empty_scores(client: ServedExtender) -> None:
    status, raw = await post(client, "prioritize", {"task": job().tasks[0], "nodes": None})
    assert status == 200
    assert json.loads(raw) == {"nodeScore": {}, "errorMessage": ""}


def _with(path: list[Any], value: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"task": job().tasks[0], "nodes": [node("n0", tor("A")), node("n1", tor("A"))]}
    target: Any = body
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return body


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "body: not a JSON object"),
        (b"[1, 2]", "body: expected `object`, got `array`"),
        ({"nodes": []}, "task: missing"),
        (
            _with(["nodes", 1, "Idle", "ScalarResources"], [1]),
            "nodes[1].Idle.ScalarResources: expected `object | null`",
        ),
        (_with(["nodes", 0, "State"], "Ready"), "nodes[0].State: expected `object | null`, got `str`"),
        (_with(["task", "Status"], "Pending"), "task.Status: expected `int`, got `str`"),
        (_with(["nodes", 1, "Idle", "ScalarResources", RESOURCE], "lots"), "expected `float`, got `str`"),
    ],
)
async def test_malformed_bodies_get_400_with_the_field_named(
    client: ServedExtender, metrics: Metrics, body: Any, message: str
) -> None:
    status, raw = await post(client, "prioritize", body)
    assert status == 400
    assert message in json.loads(raw)["error"]
    assert sample(metrics, "ringroute_extender_requests_total", verb="prioritize", outcome="bad_request") == 1


async def test_predicate_without_a_node_is_a_bad_request(client: ServedExtender) -> None:
    status, raw = await post(client, "predicate", {"task": job().tasks[0]})
    assert status == 400
    assert json.loads(raw)["error"].startswith("node: missing")


async def test_internal_error_degrades_to_neutral_scores_and_is_counted(
    client: ServedExtender, metrics: Metrics, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: Any) -> dict[str, float]:
        raise RuntimeError("boom")

    monkeypatch.setattr(extender_scoring, "prioritize", broken)
    status, raw = await post(client, "prioritize", {"task": job().tasks[0], "nodes": [node("n0", tor("A"))]})
    assert status == 200
    assert json.loads(raw) == {"nodeScore": {}, "errorMessage": ""}
    assert sample(metrics, "ringroute_extender_degraded_total", verb="prioritize") == 1


async def test_internal_error_in_predicate_lets_the_node_fit(
    client: ServedExtender, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(extender_scoring, "predicate", broken)
    status, raw = await post(client, "predicate", {"task": job().tasks[0], "node": busy_node()})
    assert status == 200
    assert all(predicate_passes(release, raw, ignorable=False) for release in RELEASES)


async def test_session_open_seeds_the_plan_and_is_measured(client: ServedExtender, metrics: Metrics) -> None:
    bert = job("bert", 2)
    nodes = [node("a0", tor("A")), node("a1", tor("A")), node("b0", tor("B")), node("b1", tor("B")), node("c0", {})]
    nodes[1]["Tasks"] = {}
    body = json.dumps(session_open([bert], nodes)).encode()
    status, raw = await post(client, "onSessionOpen", body)
    assert status == 200
    assert json.loads(raw) == {}
    assert sample(metrics, "ringroute_extender_session_open_bytes") == len(body)
    assert sample(metrics, "ringroute_extender_session_nodes") == 5
    assert sample(metrics, "ringroute_extender_state_bytes") == client.state.stored_bytes > 0
    assert sample(metrics, "process_resident_memory_bytes") > 0
    state = client.state
    assert set(state.jobs) == {bert.job_id}
    _, refusal = await post(client, "predicate", {"task": bert.tasks[0], "node": node("c0", {})})
    assert not predicate_passes((1, 10), refusal, ignorable=False)
    assert sample(metrics, "ringroute_extender_gang_plans_total", outcome="enforced") == 1


async def test_empty_session_bodies_are_accepted(client: ServedExtender) -> None:
    assert (await post(client, "onSessionOpen", b""))[0] == 200
    assert (await post(client, "onSessionClose", b"{}"))[0] == 200
    assert (await post(client, "onSessionClose", b"[]"))[0] == 400


async def test_allocate_and_deallocate_events_update_the_job_memory(client: ServedExtender) -> None:
    bert = job("bert", 2)
    allocated = task_info(bert, 0, node="a0", status=2)
    status, raw = await post(client, "allocate", {"task": allocated})
    assert status == 200
    assert json.loads(raw) == {"errorMessage": ""}
    state = client.state
    view = decoded_task(bert.tasks[1])
    assert state.hosted_nodes(view) == {"a0": 1}
    await post(client, "deallocate", {"task": allocated})
    assert state.hosted_nodes(view) == {}


async def test_a_large_payload_over_the_default_aiohttp_body_limit_is_accepted(client: ServedExtender) -> None:
    nodes = [node(f"n{i:04d}", tor(f"leaf-{i // 8}"), busy=True) for i in range(1000)]
    body = json.dumps({"task": job().tasks[0], "nodes": nodes}).encode()
    assert len(body) > 1024 * 1024
    status, raw = await post(client, "prioritize", body)
    assert status == 200
    assert len(json.loads(raw)["nodeScore"]) == 1000


async def test_healthz_and_metrics_are_served(client: ServedExtender) -> None:
    response = await client.get("/extender/healthz")
    assert response.status == 200
    assert await response.text() == "ok"
    await post(client, "prioritize", {"task": job().tasks[0], "nodes": []})
    response = await client.get("/metrics")
    assert "ringroute_extender_requests_total" in await response.text()


async def test_a_body_over_the_limit_is_refused_unread_with_413(metrics: Metrics) -> None:
    client = await make_client(settings_from_mapping({"extender": {"maxBodyMib": 1}}), metrics)
    try:
        nodes = [node(f"n{i:04d}", tor(f"leaf-{i // 8}"), busy=True) for i in range(1000)]
        status, raw = await post(client, "prioritize", {"task": job().tasks[0], "nodes": nodes})
        assert status == 413
        assert "over the 1 MiB limit" in json.loads(raw)["error"]
        assert sample(metrics, "ringroute_extender_requests_total", verb="prioritize", outcome="too_large") == 1
    finally:
        await client.close()


async def test_a_body_without_content_length_is_refused_with_411(client: ServedExtender) -> None:
    async def chunks() -> Any:
        yield json.dumps({"task": job().tasks[0], "nodes": []}).encode()

    response = await client.post("/extender/prioritize", data=chunks(), headers={"Content-Type": "application/json"})
    assert response.status == 411
    assert "Content-Length is required" in (await response.json())["error"]


async def test_a_session_cache_over_its_limit_leaves_the_extender_without_session_data(metrics: Metrics) -> None:
    client = await make_client(settings_from_mapping({"extender": {"maxSessionOpenMib": 1}}), metrics)
    try:
        bert = job("bert", 2)
        small = session_open([bert], [node("a0", tor("A")), node("a1", tor("A"))])
        assert (await post(client, "onSessionOpen", small))[0] == 200
        state = client.state
        assert state.session_data
        nodes = [node(f"n{i:04d}", tor(f"leaf-{i // 8}"), busy=True) for i in range(1000)]
        status, _ = await post(client, "onSessionOpen", session_open([bert], nodes))
        assert status == 413
        assert not state.session_data
        assert state.jobs == {}
        assert sample(metrics, "ringroute_extender_requests_total", verb="onSessionOpen", outcome="too_large") == 1
    finally:
        await client.close()


async def test_a_malformed_session_cache_is_refused_with_400_and_dropped(
    client: ServedExtender, metrics: Metrics
) -> None:
    bert = job("bert", 2)
    await post(client, "onSessionOpen", session_open([bert], [node("a0", tor("A"))]))
    status, raw = await post(client, "onSessionOpen", {"Jobs": [], "Nodes": {}})
    assert status == 400
    assert json.loads(raw)["error"] == "Jobs: expected `object | null`, got `array`"
    assert not client.state.session_data
    assert sample(metrics, "ringroute_extender_requests_total", verb="onSessionOpen", outcome="bad_request") == 1


async def test_a_session_open_leaves_its_state_out_of_later_cyclic_collections(client: ServedExtender) -> None:
    import gc

    gc.unfreeze()
    bert = job("bert", 2)
    nodes = [node(f"n{i:04d}", tor(f"leaf-{i // 8}")) for i in range(200)]
    assert (await post(client, "onSessionOpen", session_open([bert], nodes)))[0] == 200
    frozen = gc.get_freeze_count()
    state = client.state
    made = [o for o in (state.jobs, *state.jobs.values(), state.path_table, state.path_table.paths) if gc.is_tracked(o)]
    assert frozen > 0
    assert len(made) >= 3
    walked = {id(o) for generation in range(3) for o in gc.get_objects(generation=generation)}
    assert not any(id(o) in walked for o in made), "the session's state is frozen, in no generation walked"
    assert (await post(client, "onSessionOpen", session_open([bert], nodes[:100])))[0] == 200
    assert gc.get_freeze_count() < frozen + 100, "the previous session's objects are thawed and freed, not piled up"
