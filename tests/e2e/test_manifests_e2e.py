"""The image placeholder against a real kube-apiserver: the shipped Deployment and webhook configuration are
refused with the message that names `make image`, and accepted once `make deploy`'s image and version are set.

Needs RINGROUTE_E2E_KUBECONFIG; every create is a server-side dry run (nothing is stored) except the namespace
`ringroute-e2e-<random>` the Deployment is tried in, which is deleted afterwards.
"""

from __future__ import annotations

import copy
import os
import uuid
from typing import Any

import pytest

from tests.manifests.test_deploy import api_server_refusal
from tests.support.kustomize import VARIANTS, one, render
from webhook.common.metrics import Metrics
from webhook.kube.client import KubeError, KubeRepository, connect

pytestmark = pytest.mark.e2e


def deployed(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as `make deploy IMAGE=registry.example.com/ringroute:0.1.0` sets it."""
    obj = copy.deepcopy(obj)
    obj["metadata"]["labels"]["app.kubernetes.io/version"] = "0.1.0"
    for container in obj.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
        container["image"] = "registry.example.com/ringroute:0.1.0"
    return obj


async def test_the_api_server_refuses_the_placeholder_with_the_message_the_guide_shows() -> None:
    api = await connect(os.environ["RINGROUTE_E2E_KUBECONFIG"])
    assert api is not None
    repo = KubeRepository(api, Metrics())
    namespace = f"ringroute-e2e-{uuid.uuid4().hex[:6]}"
    await repo._call("create namespaces", "POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}})
    try:
        objects = render(VARIANTS["base"])
        deployment = copy.deepcopy(one(objects, "Deployment", "ringroute"))
        deployment["metadata"]["namespace"] = namespace
        webhook = one(objects, "MutatingWebhookConfiguration", "ringroute")
        for obj, path in (
            (deployment, f"/apis/apps/v1/namespaces/{namespace}/deployments"),
            (webhook, "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"),
        ):
            with pytest.raises(KubeError) as refused:
                await repo._call("create", "POST", path, query={"dryRun": "All"}, body=obj)
            assert refused.value.status == 422
            assert str(api_server_refusal(obj)).split(": ", 1)[1][:60] in str(refused.value)
            assert "run make image, then make deploy IMAGE=" in str(refused.value)
            await repo._call("create", "POST", path, query={"dryRun": "All"}, body=deployed(obj))
    finally:
        await repo._call("delete namespaces", "DELETE", f"/api/v1/namespaces/{namespace}", missing_ok=True)
        await api.close()
