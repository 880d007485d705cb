"""The admission service over real TLS on loopback: answers, HTTP errors, no side effects, metrics."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import aiohttp
import jsonpatch
import pytest
from aiohttp import web

from certs import ServingCertificates
from tests.support import admission as conftest
from tests.support.admission import Service, patch_of, review, start, without_vendor_plugin
from webhook.admission.server import MAX_BODY_BYTES, admission_app
from webhook.common.metrics import Metrics
from webhook.common.settings import Settings


def load_example(name: str) -> dict[str, Any]:
    """An example job as the validating webhook sees it (ringroute's mutation removed the vendor plugin)."""
    return without_vendor_plugin(conftest.load_example(name))


async def test_the_documented_job_is_admitted_and_patched_over_tls(
    service: Service, documented_job: dict[str, Any]
) -> None:
    status, answer = await service.post("/jobs/mutate", review(documented_job, uid="u-1"))
    assert status == 200
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == "u-1"
    assert response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    assert response["warnings"] == [
        "spec.plugins[configmap1980]: removed by ringroute: open-source Volcano refuses jobs that name this plugin "
        "of the cloud vendor's fork (unable to find job plugin); ringroute writes the rank table "
        "configmap1980-bert-single itself"
    ]
    mutated = jsonpatch.apply_patch(documented_job, patch_of(answer))
    assert mutated["metadata"]["annotations"]["ringroute.io/injected"] == (
        "configmap-volume,configmap1980-plugin-removed,env,npu-pods"
    )
    assert "configmap1980" not in mutated["spec"]["plugins"]

    status, answer = await service.post("/jobs/validate", review(mutated, uid="u-2"))
    assert status == 200
    assert answer["response"] == {"uid": "u-2", "allowed": True}


async def test_a_non_conforming_job_is_denied_with_422_and_the_rendered_violations(service: Service) -> None:
    status, answer = await service.post("/jobs/validate", review(load_example("rejected-two-nodes.yaml"), uid="u-3"))
    assert status == 200
    response = answer["response"]
    assert response["uid"] == "u-3"
    assert response["allowed"] is False
    assert response["status"]["code"] == 422
    assert response["status"]["reason"] == "Invalid"
    assert response["status"]["message"] == (
        "spec.tasks[0].replicas: Invalid value: 2: route planning needs at least 3 nodes (got 2); "
        "raise replicas or remove ROUTE_PLAN"
    )
    assert response["status"]["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "message": response["status"]["message"], "field": "spec.tasks[0].replicas"}
    ]


async def test_forbidden_only_denials_answer_403(service: Service) -> None:
    _, answer = await service.post("/jobs/validate", review(load_example("rejected-workdir-nfs.yaml")))
    assert answer["response"]["status"]["code"] == 403


async def test_warn_mode_admits_with_warnings(tls_material: Path, client_ssl: ssl.SSLContext) -> None:
    from webhook.common.settings import PolicySettings

    settings = Settings(policy=PolicySettings(below_min_nodes="skip"))
    running, stop = await start(tls_material, client_ssl, settings)
    try:
        _, answer = await running.post("/jobs/validate", review(load_example("rejected-two-nodes.yaml")))
    finally:
        await stop()
    assert answer["response"]["allowed"] is True
    [warning] = answer["response"]["warnings"]
    assert warning.startswith("spec.tasks[0].replicas: Invalid value: 2: route planning needs at least 3 nodes")


async def test_dry_run_mutates_but_creates_nothing(service: Service, documented_job: dict[str, Any]) -> None:
    _, dry = await service.post("/jobs/mutate", review(documented_job, dry_run=True, uid="u"))
    _, real = await service.post("/jobs/mutate", review(documented_job, uid="u"))
    assert dry["response"]["patch"]
    assert dry == real, "with no side effects a dry run answers exactly as the real create"
    page = service.metrics.registry.get_sample_value
    assert page("ringroute_configmap_creates_total", {"outcome": "created"}) is None, "admission creates nothing"


async def test_without_an_api_server_admission_answers_the_same(
    tls_material: Path, client_ssl: ssl.SSLContext, documented_job: dict[str, Any]
) -> None:
    running, stop = await start(tls_material, client_ssl)
    try:
        _, answer = await running.post("/jobs/mutate", review(documented_job))
    finally:
        await stop()
    assert answer["response"]["allowed"] is True
    assert answer["response"]["patch"]


async def test_other_resources_are_allowed_without_a_patch(service: Service, documented_job: dict[str, Any]) -> None:
    for body in (
        review(documented_job, uid="pods", resource=("", "v1", "pods")),
        review(documented_job, uid="delete", operation="DELETE"),
    ):
        status, answer = await service.post("/jobs/mutate", body)
        assert status == 200
        assert answer["response"] == {"uid": body["request"]["uid"], "allowed": True}


async def test_unlabelled_jobs_are_allowed_without_a_patch(service: Service, documented_job: dict[str, Any]) -> None:
    del documented_job["metadata"]["labels"]["ring-controller.cce"]
    _, answer = await service.post("/jobs/mutate", review(documented_job, uid="plain"))
    assert answer["response"] == {"uid": "plain", "allowed": True}


async def test_malformed_json_and_reviews_are_400(service: Service, documented_job: dict[str, Any]) -> None:
    no_uid = review(documented_job)
    del no_uid["request"]["uid"]
    v1beta1 = review(documented_job)
    v1beta1["apiVersion"] = "admission.k8s.io/v1beta1"
    cases: list[tuple[Any, str]] = [
        (b"{not json", "request body is not valid JSON"),
        ([], "request body must be a JSON object"),
        (no_uid, "request.uid: Required value"),
        (v1beta1, "set admissionReviewVersions: [v1]"),
        ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}, "request: Required value"),
    ]
    for body, message in cases:
        status, answer = await service.post("/jobs/validate", body)
        assert status == 400
        assert message in answer["message"]


async def test_non_json_content_type_is_415(service: Service, documented_job: dict[str, Any]) -> None:
    status, answer = await service.post("/jobs/validate", review(documented_job), content_type="text/plain")
    assert status == 415
    assert "application/json" in answer["message"]


async def test_bodies_over_7_mib_are_413(service: Service) -> None:
    status, answer = await service.post("/jobs/mutate", b" " * (MAX_BODY_BYTES + 1))
    assert status == 413
    assert str(MAX_BODY_BYTES) in answer["message"]


async def test_health_readiness_and_metrics(service: Service) -> None:
    assert await service.get("/healthz") == (200, "ok")
    assert await service.get("/readyz") == (200, "ok")
    await service.post("/jobs/validate", review(load_example("rejected-two-nodes.yaml")))
    status, page = await service.get("/metrics")
    assert status == 200
    assert 'ringroute_admission_requests_total{endpoint="validate",verdict="denied"} 1.0' in page
    assert 'ringroute_admission_violations_total{rule="route-plan-min-nodes"} 1.0' in page
    assert "ringroute_admission_latency_seconds_bucket" in page


async def test_not_ready_without_a_certificate(tmp_path: Path) -> None:
    app = admission_app(Settings(), Metrics(), certificates=ServingCertificates(tmp_path))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/readyz") as resp:
            assert resp.status == 503
    finally:
        await runner.cleanup()


async def test_a_bug_in_policy_denies_cleanly_and_a_bug_in_mutation_admits_unpatched(
    service: Service, documented_job: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from webhook.admission import server

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("bug")

    monkeypatch.setattr(server, "validate", broken)
    monkeypatch.setattr(server, "plan_create", broken)
    status, answer = await service.post("/jobs/validate", review(documented_job, uid="v"))
    assert status == 200
    assert answer["response"]["allowed"] is False
    assert "internal error" in answer["response"]["status"]["message"]
    status, answer = await service.post("/jobs/mutate", review(documented_job, uid="m"))
    assert status == 200
    assert answer["response"] == {"uid": "m", "allowed": True}
