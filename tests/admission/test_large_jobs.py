"""Large jobs: the patch grows with distinct templates, not tasks; a job too large to admit is denied with its size
and the limit; large requests are checked off the event loop, waiting for their turn until their deadline."""

from __future__ import annotations

import asyncio
import base64
import copy
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support.admission import Service, apply_ops, bare_job, hold_large_answers, mutate, review, start
from webhook.admission.jobview import read_job
from webhook.admission.mutation import COPY_BUDGET_BYTES, plan_create
from webhook.admission.policy import judge
from webhook.common.settings import AdmissionSettings, Settings


def many_tasks(count: int, *, distinct: bool = False) -> dict[str, Any]:
    """A job of `count` one-container NPU tasks of one pod each (the shape of a job written one task per pod)."""
    job = bare_job()
    first = job["spec"]["tasks"][0]
    tasks = []
    for i in range(count):
        task = copy.deepcopy(first)
        task["name"], task["replicas"] = f"t{i}", 1
        if distinct:
            task["template"]["spec"]["containers"][0]["env"] = [{"name": "SHARD", "value": str(i)}]
        tasks.append(task)
    job["spec"]["tasks"], job["spec"]["minAvailable"] = tasks, count
    return job


def size(value: Any) -> int:
    return len(orjson.dumps(value))


def test_tasks_with_one_template_cost_one_copy_each_and_the_patch_stays_below_the_job() -> None:
    job = many_tasks(400)
    ops = mutate(job, Settings())
    assert size(ops) < size(job), f"a {size(job):,}-byte job got a {size(ops):,}-byte patch"
    assert sum(op["op"] == "copy" for op in ops) == 399
    mutated = apply_ops(job, ops)
    template = mutated["spec"]["tasks"][0]["template"]
    assert template["metadata"]["annotations"]["ringroute.io/npu-pods"] == "400"
    assert len(template["spec"]["volumes"]) == 6
    assert all(task["template"] == template for task in mutated["spec"]["tasks"])
    assert mutate(mutated, Settings()) == []


def test_copies_stop_at_what_the_api_server_lets_a_patch_copy() -> None:
    settings = Settings(admission=AdmissionSettings(max_job_kib=16384))
    job = many_tasks(2000)
    ops = plan_create(read_job(job, settings)).ops
    mutated = apply_ops(job, ops)
    template_bytes = size(mutated["spec"]["tasks"][0]["template"])
    copies = sum(op["op"] == "copy" for op in ops)
    assert 0.95 * COPY_BUDGET_BYTES < copies * template_bytes <= COPY_BUDGET_BYTES
    assert any(op["path"].startswith("/spec/tasks/1999/") and op["op"] == "add" for op in ops)
    assert all(task["template"] == mutated["spec"]["tasks"][0]["template"] for task in mutated["spec"]["tasks"])


def test_a_job_over_the_size_limit_is_denied_with_its_size_and_the_limit_by_both_webhooks() -> None:
    job = many_tasks(12000)  # 1.75 MB: what made a 29.5 MB patch
    verdict = judge(job, None, Settings())
    [denial] = verdict.denials
    assert denial.rule == "job-size"
    assert denial.render().startswith(
        f"spec: Too long: the job is {size(job):,} bytes of JSON; ringroute checks jobs of up to 1,572,864 bytes "
        "(admission.maxJobKib: 1536): run many pods from one task with replicas"
    )
    assert verdict.http_code == 422
    mutation = plan_create(read_job(job, Settings()))
    assert mutation.ops == []


def test_a_job_that_the_additions_would_take_over_the_limit_is_denied_by_mutation() -> None:
    job = many_tasks(3000, distinct=True)  # 0.5 MB, but every task needs about 2.5 kB more
    assert judge(job, None, Settings()).allowed
    mutation = plan_create(read_job(job, Settings()))
    assert mutation.ops == []
    assert mutation.denial is not None
    assert mutation.denial.render().startswith(
        "spec.tasks: Too long: with the volumes, mounts and env ringroute adds to the NPU containers of its 3,000 NPU "
        "tasks the job would be more than "
    )
    assert "over the 1,572,864 bytes (admission.maxJobKib: 1536) ringroute admits" in mutation.denial.render()


def test_the_size_limit_cannot_be_turned_into_a_warning() -> None:
    from webhook.common.settings import PolicySettings

    settings = Settings(policy=PolicySettings(rule_modes=(("job-size", "warn"),)))
    assert not judge(many_tasks(12000), None, settings).allowed


def test_an_update_of_a_job_stored_over_the_limit_is_allowed_with_a_warning() -> None:
    stored = many_tasks(12000)
    scaled = copy.deepcopy(stored)
    scaled["spec"]["minAvailable"] = 11000
    verdict = judge(scaled, stored, Settings())
    assert verdict.allowed
    assert [v.rule for v in verdict.ratcheted] == ["job-size"]


async def test_the_server_denies_an_oversized_job_on_both_endpoints(service: Service) -> None:
    body = review(many_tasks(12000), uid="big")
    for endpoint in ("/jobs/mutate", "/jobs/validate"):
        status, answer = await service.post(endpoint, body)
        assert status == 200
        response = answer["response"]
        assert response["uid"] == "big"
        assert response["allowed"] is False
        assert response["status"]["code"] == 422
        assert "bytes of JSON; ringroute checks jobs of up to 1,572,864 bytes" in response["status"]["message"]
        assert response["status"]["details"]["causes"][0]["reason"] == "FieldValueTooLong"


@pytest.fixture
def blocked_large_requests(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Large requests wait in the worker thread until the returned event is set."""
    release = hold_large_answers(monkeypatch)
    yield release
    release.set()


async def test_a_large_request_being_checked_does_not_hold_up_a_small_one(
    blocked_large_requests: threading.Event, service: Service
) -> None:
    large = asyncio.create_task(service.post("/jobs/mutate", review(many_tasks(600), uid="large")))
    await asyncio.sleep(0.2)
    status, answer = await asyncio.wait_for(service.post("/jobs/mutate", review(bare_job(), uid="small")), 10)
    assert status == 200
    assert answer["response"]["uid"] == "small"
    assert "patch" in answer["response"]
    assert not large.done()
    blocked_large_requests.set()
    status, answer = await large
    assert answer["response"]["uid"] == "large"
    ops = orjson.loads(base64.b64decode(answer["response"]["patch"]))
    assert sum(op["op"] == "copy" for op in ops) == 599


async def test_a_burst_of_large_requests_waits_for_its_turn_and_every_one_is_answered(
    blocked_large_requests: threading.Event, service: Service
) -> None:
    large = review(many_tasks(600), uid="large")
    waiting = [
        asyncio.create_task(service.post("/jobs/validate", {**large, "request": {**large["request"], "uid": f"l{i}"}}))
        for i in range(12)
    ]
    await asyncio.sleep(1.0)  # the first is being checked, the others wait: none is refused for waiting
    assert not any(task.done() for task in waiting)
    blocked_large_requests.set()
    answers = await asyncio.gather(*waiting)
    assert [(status, a["response"]) for status, a in answers] == [
        (200, {"uid": f"l{i}", "allowed": True}) for i in range(12)
    ]
    assert [sample for metric in service.metrics.admission_busy.collect() for sample in metric.samples] == []


async def test_a_large_request_still_waiting_at_its_deadline_is_denied_busy_with_a_retry_after(
    blocked_large_requests: threading.Event, tls_material: Path, client_ssl: Any
) -> None:
    settings = Settings(admission=AdmissionSettings(answer_within_s=0.5))
    running, stop = await start(tls_material, client_ssl, settings)
    try:
        first = asyncio.create_task(running.post("/jobs/mutate", review(many_tasks(600), uid="first")))
        await asyncio.sleep(0.2)
        started = time.monotonic()
        status, answer = await running.post("/jobs/mutate", review(many_tasks(600), uid="second"))
        waited = time.monotonic() - started
        assert status == 200
        response = answer["response"]
        assert response["uid"] == "second"
        assert response["allowed"] is False
        assert response["status"]["code"] == 429
        assert response["status"]["reason"] == "TooManyRequests"
        assert response["status"]["details"] == {"retryAfterSeconds": 1}
        assert response["status"]["message"] == (
            "ringroute is busy: it could not check this job within 0.5 s (admission.answerWithinS), after 1 other "
            "large job; retry in a few seconds"
        )
        assert 0.25 <= waited < 3.0, "answered at its deadline, not before and not much after"
        assert running.metrics.admission_busy.labels("mutate", "denied")._value.get() == 1
        assert running.metrics.admission_requests.labels("mutate", "busy")._value.get() == 1
        blocked_large_requests.set()
        status, answer = await first
        assert answer["response"]["uid"] == "first"
        assert "patch" in answer["response"]
    finally:
        blocked_large_requests.set()
        await stop()
