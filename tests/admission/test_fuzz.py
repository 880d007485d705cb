"""Hypothesis fuzz of AdmissionReview bodies over TLS: never a 500, always a valid answer, uid echoed."""

from __future__ import annotations

import asyncio
import base64
import http.client
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from certs import ServingCertificates
from planner import read_quantity
from tests.support.admission import bare_job, damaged_jobs, json_values, review
from webhook.admission.server import admission_app
from webhook.common.metrics import Metrics
from webhook.common.settings import Settings


class ThreadedServer:
    """The admission app on its own event loop in a thread, so synchronous Hypothesis tests can call it."""

    def __init__(self, tls_material: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.certificates = ServingCertificates(tls_material)
        self.port = 0
        ready = threading.Event()

        async def serve() -> None:
            app = admission_app(Settings(), Metrics(), certificates=self.certificates)
            self.runner = web.AppRunner(app)
            await self.runner.setup()
            site = web.TCPSite(self.runner, "127.0.0.1", 0, ssl_context=self.certificates.ssl_context())
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            ready.set()

        self.thread = threading.Thread(target=self._run, args=(serve,), daemon=True)
        self.thread.start()
        assert ready.wait(10)

    def _run(self, serve: Any) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(serve())
        self.loop.run_forever()

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def server(tls_material: Path) -> Iterator[ThreadedServer]:
    running = ThreadedServer(tls_material)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def connection(server: ThreadedServer, tls_material: Path) -> Iterator[http.client.HTTPSConnection]:
    context = ssl.create_default_context(cafile=str(tls_material / "ca.crt"))
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=10)
    yield conn
    conn.close()


def post(conn: http.client.HTTPSConnection, path: str, body: bytes) -> tuple[int, bytes]:
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, response.read()


@st.composite
def reviews(draw: st.DrawFn) -> tuple[bytes, str | None]:
    uid = draw(st.one_of(st.just("fuzz-uid"), st.text(min_size=1, max_size=12)))
    operation = draw(st.sampled_from(["CREATE", "UPDATE", "DELETE"]))
    old = draw(st.none() | damaged_jobs() | damaged_jobs(admitted=True)) if operation == "UPDATE" else None
    body = review(draw(damaged_jobs()), uid=uid, operation=operation, old=old)
    request = body["request"]
    for key in draw(st.lists(st.sampled_from(sorted(request)), max_size=2)):
        request[key] = draw(json_values)
    if draw(st.integers(0, 9)) == 0:
        return orjson.dumps(draw(json_values)), None
    expected = request.get("uid") if isinstance(request.get("uid"), str) and request.get("uid") else None
    return orjson.dumps(body), expected


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(case=reviews(), endpoint=st.sampled_from(["/jobs/validate", "/jobs/mutate"]))
def test_any_review_gets_a_4xx_or_a_valid_answer_with_the_uid(
    case: tuple[bytes, str | None], endpoint: str, connection: http.client.HTTPSConnection
) -> None:
    body, uid = case
    status, raw = post(connection, endpoint, body)
    assert status in (200, 400), raw
    answer = orjson.loads(raw)
    if status == 400:
        assert answer["code"] == 400
        assert answer["message"]
        return
    assert uid is not None
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == uid
    assert isinstance(response["allowed"], bool)
    if not response["allowed"]:
        assert response["status"]["code"] in (403, 422)
        assert response["status"]["message"]


npu_quantities = (
    st.text(alphabet="0123456789.+-eEmkKMGTPin ²٨８", max_size=10)
    | st.text(max_size=6)
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.builds(lambda digit, n: digit * n, st.sampled_from("18²٨"), st.integers(300, 6000))
    | st.builds(lambda n: f"1e{n}", st.integers(-5000, 5000))
)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(request=st.none() | npu_quantities, limit=npu_quantities)
def test_no_npu_quantity_gets_a_500_or_a_mutation_without_its_additions(
    request: Any, limit: Any, connection: http.client.HTTPSConnection
) -> None:
    """A quantity of zero cards asks for none: the container is not an NPU container and gets nothing added."""
    job = bare_job()
    resources = job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]
    resources["limits"]["huawei.com/ascend-1980"] = limit
    if request is not None:
        resources["requests"] = {"huawei.com/ascend-1980": request}
    body = orjson.dumps(review(job, uid="q"))
    status, raw = post(connection, "/jobs/validate", body)
    assert status == 200, raw
    response = orjson.loads(raw)["response"]
    assert response["allowed"] or response["status"]["code"] in (403, 422), response
    status, raw = post(connection, "/jobs/mutate", body)
    assert status == 200, raw
    response = orjson.loads(raw)["response"]
    assert response["allowed"] is True
    ops = orjson.loads(base64.b64decode(response["patch"]))
    if all(read_quantity(q) == 0 for q in (request, limit) if q is not None):
        assert not any("/spec/tasks/" in op["path"] for op in ops), "zero cards: not an NPU container"
    else:
        assert len(ops) > 3, "the additions are never skipped"


@pytest.mark.parametrize("depth", [250, 600, 1000, 1030])
@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
@pytest.mark.parametrize("endpoint", ["/jobs/validate", "/jobs/mutate"])
def test_values_nested_up_to_what_json_allows_get_an_answer_not_a_500(
    depth: int, operation: str, endpoint: str, connection: http.client.HTTPSConnection
) -> None:
    job, old = bare_job(), bare_job()
    job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["args"] = "NEW"
    old["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["args"] = "OLD"
    old["metadata"]["annotations"] = {"ringroute.io/injected": "env"}
    body = orjson.dumps(review(job, operation=operation, old=old if operation == "UPDATE" else None))
    body = body.replace(b'"NEW"', b"[" * depth + b"1" + b"]" * depth).replace(
        b'"OLD"', b"[" * depth + b"2" + b"]" * depth
    )
    status, raw = post(connection, endpoint, body)
    assert status in (200, 400), raw
    answer = orjson.loads(raw)
    if status == 200:
        response = answer["response"]
        assert response["allowed"] or response["status"]["code"] in (403, 422), response
        if endpoint == "/jobs/mutate" and operation == "CREATE":
            assert "patch" in response
