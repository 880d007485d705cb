"""The shared fake API server answers the way a kube-apiserver does: certificate resources, ownerReferences and
their garbage collection, the admission chain, a pod's status and binding subresources."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from emulation.apiserver import AdmissionWebhook, FakeApiServer, Fault
from emulation.cluster import NS, annotate_pod, bind_pod, create_pod, make_pod, report_pod_status
from webhook.kube.client import CONFIGMAPS, JOBS, PODS, ConflictError, KubeError, KubeRepository
from webhook.kube.self_signed import MUTATING_WEBHOOKS, SECRETS

CONFIGURATION: dict[str, Any] = {"metadata": {"name": "ringroute"}, "webhooks": [{"name": "a.ringroute.io"}]}
SECRET: dict[str, Any] = {"metadata": {"name": "tls", "namespace": "ns"}, "type": "kubernetes.io/tls", "data": {}}


@pytest.fixture
async def server() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer() as running:
        await running.apply("mutatingwebhookconfigurations", CONFIGURATION)
        yield running


@pytest.fixture
async def repository(server: FakeApiServer) -> AsyncIterator[KubeRepository]:
    async with server.repository() as kube:
        yield kube


async def test_webhook_configurations_are_cluster_scoped_and_merge_patched_under_a_resource_version_guard(
    server: FakeApiServer, repository: KubeRepository
) -> None:
    read = await repository.get_object(MUTATING_WEBHOOKS, None, "ringroute")
    assert read is not None
    assert read["kind"] == "MutatingWebhookConfiguration"
    assert "namespace" not in read["metadata"]
    patch = {"metadata": {"resourceVersion": read["metadata"]["resourceVersion"]}, "webhooks": [{"name": "b"}]}
    await repository.patch_object(MUTATING_WEBHOOKS, None, "ringroute", patch)
    patched = server.get("mutatingwebhookconfigurations", None, "ringroute")
    assert patched is not None
    assert patched["webhooks"] == [{"name": "b"}], "a merge patch replaces a list whole"
    with pytest.raises(ConflictError):
        await repository.patch_object(MUTATING_WEBHOOKS, None, "ringroute", patch)


async def test_creating_a_secret_twice_answers_already_exists(
    server: FakeApiServer, repository: KubeRepository
) -> None:
    await repository.create_object(SECRETS, SECRET)
    with pytest.raises(ConflictError, match="already exists"):
        await repository.create_object(SECRETS, SECRET)
    assert [(w.method, w.status) for w in server.writes("secrets")] == [("POST", 201)]


async def test_an_injected_fault_answers_its_status_once(server: FakeApiServer, repository: KubeRepository) -> None:
    await repository.create_object(SECRETS, SECRET)
    server.faults.append(Fault("GET", "/secrets/", status=503))
    with pytest.raises(KubeError) as failed:
        await repository.get_object(SECRETS, "ns", "tls")
    assert failed.value.status == 503
    assert await repository.get_object(SECRETS, "ns", "tls") is not None


async def test_patches_other_than_merge_patch_answer_unsupported_media_type(repository: KubeRepository) -> None:
    with pytest.raises(KubeError) as failed:
        await repository._call(
            "json-patch",
            "PATCH",
            MUTATING_WEBHOOKS.path(None, "ringroute"),
            body=[{"op": "remove", "path": "/webhooks/0"}],
            content_type="application/json-patch+json",
        )
    assert failed.value.status == 415


def owned_configmap(name: str, *owners: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "ownerReferences": list(owners)}, "data": {}}


def reference(job: dict[str, Any], *, controller: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": job["metadata"]["name"],
        "uid": job["metadata"]["uid"],
        "controller": controller,
        "blockOwnerDeletion": controller,
    }


async def two_jobs(server: FakeApiServer) -> tuple[dict[str, Any], dict[str, Any]]:
    first = await server.apply("jobs", {"metadata": {"name": "a", "namespace": "ns"}})
    second = await server.apply("jobs", {"metadata": {"name": "b", "namespace": "ns"}})
    return first, second


async def test_deleting_an_owner_collects_what_only_it_owns_and_unhooks_what_another_owner_keeps(
    server: FakeApiServer, repository: KubeRepository
) -> None:
    a, b = await two_jobs(server)
    await server.apply("configmaps", owned_configmap("only-a", reference(a, controller=True)))
    await server.apply("configmaps", owned_configmap("shared", reference(a, controller=True), reference(b)))
    assert await repository.delete_object(JOBS, "ns", "a")
    assert server.get("configmaps", "ns", "only-a") is None
    shared = server.get("configmaps", "ns", "shared")
    assert shared is not None, "an object with an owner left is not deleted"
    assert shared["metadata"]["ownerReferences"] == [reference(b)]


async def test_orphan_propagation_keeps_the_dependents_without_the_reference(
    server: FakeApiServer, repository: KubeRepository
) -> None:
    a, _ = await two_jobs(server)
    await server.apply("configmaps", owned_configmap("cm", reference(a, controller=True)))
    await repository._call(
        "delete jobs", "DELETE", JOBS.path("ns", "a"), body={"kind": "DeleteOptions", "propagationPolicy": "Orphan"}
    )
    kept = server.get("configmaps", "ns", "cm")
    assert kept is not None
    assert "ownerReferences" not in kept["metadata"]


async def test_an_object_created_for_an_owner_already_gone_is_collected(
    server: FakeApiServer, repository: KubeRepository
) -> None:
    a, _ = await two_jobs(server)
    await server.remove("jobs", "ns", "a")
    await server.apply("jobs", {"metadata": {"name": "a", "namespace": "ns"}})  # same name, new uid
    created = await repository.create_object(CONFIGMAPS, owned_configmap("late", reference(a, controller=True)))
    assert created["metadata"]["name"] == "late", "the create succeeds; the collector removes it afterwards"
    assert server.get("configmaps", "ns", "late") is None


async def test_two_controller_references_and_a_reference_without_uid_are_invalid(
    server: FakeApiServer, repository: KubeRepository
) -> None:
    a, b = await two_jobs(server)
    with pytest.raises(KubeError, match="Only one reference can have Controller set to true") as failed:
        await repository.create_object(
            CONFIGMAPS, owned_configmap("cm", reference(a, controller=True), reference(b, controller=True))
        )
    assert failed.value.status == 422
    with pytest.raises(KubeError, match=r"ownerReferences\[0\]\.uid: Required value"):
        await repository.create_object(CONFIGMAPS, owned_configmap("cm", {**reference(a), "uid": ""}))


async def test_the_admission_chain_patches_in_order_and_a_denial_or_a_dry_run_stores_nothing(
    server: FakeApiServer, repository: KubeRepository
) -> None:
    seen: list[dict[str, Any]] = []

    async def label(review: dict[str, Any]) -> dict[str, Any]:
        seen.append(review["request"])
        ops = [{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}]
        return {"allowed": True, "patchType": "JSONPatch", "patch": base64.b64encode(json.dumps(ops).encode()).decode()}

    async def refuse_b(review: dict[str, Any]) -> dict[str, Any]:
        job = review["request"]["object"]
        assert job["metadata"]["labels"] == {"mutated": "yes"}, "validation sees the mutated object"
        if job["metadata"]["name"] == "b":
            return {"allowed": False, "status": {"message": "unable to find job plugin: configmap1980"}}
        return {"allowed": True}

    server.admission["jobs"] = [AdmissionWebhook("mutate.test", label), AdmissionWebhook("validatejob.test", refuse_b)]
    created = await repository.create_object(JOBS, {"metadata": {"name": "a", "namespace": "ns"}})
    assert created["metadata"]["labels"] == {"mutated": "yes"}
    with pytest.raises(KubeError, match=r'admission webhook "validatejob\.test" denied the request') as denied:
        await repository.create_object(JOBS, {"metadata": {"name": "b", "namespace": "ns"}})
    assert denied.value.status == 403
    assert server.get("jobs", "ns", "b") is None
    dry = await repository._call(
        "create jobs", "POST", JOBS.path("ns"), query={"dryRun": "All"}, body={"metadata": {"name": "c"}}
    )
    assert dry["metadata"]["labels"] == {"mutated": "yes"}
    assert server.get("jobs", "ns", "c") is None
    assert [(r["operation"], r["name"], r["dryRun"]) for r in seen] == [
        ("CREATE", "a", False),
        ("CREATE", "b", False),
        ("CREATE", "c", True),
    ]


async def test_a_pods_status_and_node_change_only_through_its_status_and_binding_subresources(
    server: FakeApiServer, repository: KubeRepository
) -> None:
    job = await server.apply("jobs", {"metadata": {"name": "j", "namespace": NS}})
    pod = make_pod(job, 0, "npu-3")
    await create_pod(repository.api, pod)
    stored = server.get("pods", NS, "j-worker-0")
    assert stored is not None
    assert stored["status"] == {"phase": "Pending"}, "a created pod's status is the API server's"
    assert "nodeName" not in stored["spec"]
    await bind_pod(repository.api, pod, "npu-3")
    with pytest.raises(aiohttp.ClientResponseError) as bound_twice:
        await bind_pod(repository.api, pod, "npu-4")
    assert bound_twice.value.status == 409
    await annotate_pod(repository.api, pod, {"a": "1"})
    await repository.patch_object(PODS, NS, "j-worker-0", {"status": {"podIP": "10.9.9.9"}})
    await report_pod_status(repository.api, pod, {"phase": "Running", "hostIP": "192.168.0.4"})
    stored = server.get("pods", NS, "j-worker-0")
    assert stored is not None
    assert stored["spec"]["nodeName"] == "npu-3"
    assert stored["metadata"]["annotations"]["a"] == "1"
    assert stored["status"] == {"phase": "Running", "hostIP": "192.168.0.4"}, "only pods/status writes the status"


async def test_pod_merge_patches_answer_as_a_v1_36_api_server_does(
    server: FakeApiServer, repository: KubeRepository
) -> None:
    """Measured on kube-apiserver v1.36: a UID in a merge patch is no precondition but an immutable field (422 on
    another pod), a patch that changes nothing stores nothing (same resourceVersion, no watch event), a stale
    resourceVersion is a 409, a missing pod a 404, and admission sees a patch as an UPDATE."""
    job = await server.apply("jobs", {"metadata": {"name": "j", "namespace": NS}})
    pod = await server.apply("pods", make_pod(job, 0, "npu-3"))
    uid = pod["metadata"]["uid"]
    with pytest.raises(KubeError) as other_uid:
        await repository.patch_object(PODS, NS, "j-worker-0", {"metadata": {"uid": "other", "annotations": {"a": "1"}}})
    assert other_uid.value.status == 422
    assert 'metadata.uid: Invalid value: "other": field is immutable' in str(other_uid.value)
    patched = await repository.patch_object(
        PODS, NS, "j-worker-0", {"metadata": {"uid": uid, "annotations": {"a": "1"}}}
    )
    events = len(server.stores["pods"].history)
    again = await repository.patch_object(PODS, NS, "j-worker-0", {"metadata": {"uid": uid, "annotations": {"a": "1"}}})
    assert again["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
    assert len(server.stores["pods"].history) == events, "no watch event for a patch that changes nothing"
    stale = {"metadata": {"resourceVersion": pod["metadata"]["resourceVersion"], "annotations": {"a": "2"}}}
    with pytest.raises(ConflictError):
        await repository.patch_object(PODS, NS, "j-worker-0", stale)
    with pytest.raises(KubeError) as missing:
        await repository.patch_object(PODS, NS, "nope", {"metadata": {"annotations": {"a": "1"}}})
    assert missing.value.status == 404
    seen: list[str] = []

    async def deny(review: dict[str, Any]) -> dict[str, Any]:
        seen.append(review["request"]["operation"])
        return {"allowed": False, "status": {"message": "no pod updates here"}}

    server.admission["pods"] = [AdmissionWebhook("policy.example.com", deny)]
    with pytest.raises(KubeError) as denied:
        await repository.patch_object(PODS, NS, "j-worker-0", {"metadata": {"annotations": {"a": "3"}}})
    assert denied.value.status == 403
    assert 'admission webhook "policy.example.com" denied the request: no pod updates here' in str(denied.value)
    assert seen == ["UPDATE"]
