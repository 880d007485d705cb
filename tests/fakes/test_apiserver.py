"""The shared fake API server answers the certificate resources the way a kube-apiserver does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.fakes import FakeApiServer, Fault
from webhook.kube import ConflictError, KubeError, KubeRepository
from webhook.kube_certs import MUTATING_WEBHOOKS, SECRETS

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
