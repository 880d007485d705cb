"""A busy admission webhook through a real kube-apiserver: the 429 denial of a review that got no turn in time
reaches the client as HTTP 429 with `Retry-After: 1` (which kubectl and client-go follow by themselves), with
ringroute's message, while the review being checked is answered."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from tests.e2e.conftest import KUBECONFIG
from tests.e2e.webhooks import serving_admission
from tests.support.admission import hold_large_answers, load_example
from webhook.common.metrics import Metrics
from webhook.common.settings import AdmissionSettings, Settings
from webhook.kube.client import JOBS, KubeRepository, connect

pytestmark = pytest.mark.e2e


@pytest.fixture
def large_answers_wait(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Large reviews wait in the worker thread until the returned event is set."""
    release = hold_large_answers(monkeypatch)
    yield release
    release.set()


def large_job(name: str, namespace: str) -> dict[str, Any]:
    """The documented job with 48 KiB of env vars: a large review."""
    job = load_example("distributed-route-plan.yaml")
    job["metadata"].update(name=name, namespace=namespace)
    container = job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    container["env"].extend({"name": f"TRAIN_PARAM_{i:03d}", "value": "x" * 480} for i in range(100))
    return job


async def test_a_review_still_waiting_at_its_deadline_reaches_the_client_as_429_with_retry_after(
    large_answers_wait: threading.Event,
) -> None:
    api = await connect(KUBECONFIG)
    assert api is not None
    repo = KubeRepository(api, Metrics())
    namespace = f"rr-busy-{uuid.uuid4().hex[:8]}"
    await repo._call("create namespace", "POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}})
    settings = Settings(admission=AdmissionSettings(answer_within_s=0.5))
    try:
        async with serving_admission(repo, settings, namespace):
            await asyncio.sleep(1.0)  # the API server sees the new configurations
            path, dry_run = JOBS.path(namespace), {"dryRun": "All"}
            first = asyncio.create_task(
                repo._call("create jobs", "POST", path, query=dry_run, body=large_job("first", namespace))
            )
            await asyncio.sleep(0.3)  # being checked: the worker thread waits
            response = await repo._open("create jobs", "POST", path, query=dry_run, body=large_job("second", namespace))
            try:
                status, retry_after = response.status, response.headers.get("Retry-After")
                answer = orjson.loads(await response.read())
            finally:
                response.release()
            assert (status, retry_after) == (429, "1")
            assert answer["reason"] == "TooManyRequests"
            assert answer["details"]["retryAfterSeconds"] == 1
            assert answer["message"] == (
                'admission webhook "mutate.jobs.ringroute.io" denied the request: ringroute is busy: it could not '
                "check this job within 0.5 s (admission.answerWithinS), after 1 other large job; retry in a few seconds"
            )
            large_answers_wait.set()
            created = await asyncio.wait_for(first, 10)
            assert created["metadata"]["name"] == "first"
    finally:
        await repo._call("delete namespace", "DELETE", f"/api/v1/namespaces/{namespace}", missing_ok=True)
        await repo.close()
