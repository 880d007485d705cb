"""The shipped webhook configurations registered against a real API server for an e2e test: renamed after the
test's namespace, pointed by URL at a server on this machine, scoped to that namespace, deleted on exit."""

from __future__ import annotations

import base64
import contextlib
import copy
from collections.abc import AsyncIterator

from tests.support.kustomize import VARIANTS, one, render
from webhook.kube.client import KubeRepository

KINDS = (
    ("MutatingWebhookConfiguration", "mutatingwebhookconfigurations"),
    ("ValidatingWebhookConfiguration", "validatingwebhookconfigurations"),
)


@contextlib.asynccontextmanager
async def registered_webhooks(repo: KubeRepository, namespace: str, port: int, ca_pem: bytes) -> AsyncIterator[None]:
    """The base overlay's Mutating and Validating webhook configurations, calling https://127.0.0.1:PORT for jobs
    of `namespace` only (CA `ca_pem`), while the context lasts."""
    created: list[str] = []
    try:
        for kind, plural in KINDS:
            configuration = copy.deepcopy(one(render(VARIANTS["base"]), kind, "ringroute"))
            configuration["metadata"]["name"] = f"ringroute-{namespace}"
            configuration["metadata"]["labels"]["app.kubernetes.io/version"] = "e2e"
            for hook in configuration["webhooks"]:
                path = hook["clientConfig"]["service"]["path"]
                hook["clientConfig"] = {
                    "url": f"https://127.0.0.1:{port}{path}",
                    "caBundle": base64.b64encode(ca_pem).decode(),
                }
                only = {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [namespace]}
                hook["namespaceSelector"] = {"matchExpressions": [only]}
            base = f"/apis/admissionregistration.k8s.io/v1/{plural}"
            await repo._call(f"create {plural}", "POST", base, body=configuration)
            created.append(f"{base}/{configuration['metadata']['name']}")
        yield
    finally:
        for path in created:
            await repo._call("delete webhook configuration", "DELETE", path, missing_ok=True)
