"""The shipped webhook configurations registered against a real API server for an e2e test: renamed after the
test's namespace, pointed by URL at a server on this machine, scoped to that namespace, deleted on exit; and
ringroute's admission served there for them."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web

from certs import ServingCertificates, generate_bundle
from emulation.admission import local_webhooks
from tests.support.kustomize import VARIANTS, one, render
from webhook.admission.server import admission_app
from webhook.common.metrics import Metrics
from webhook.common.settings import Settings
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
            configuration = local_webhooks(one(render(VARIANTS["base"]), kind, "ringroute"), port, ca_pem, namespace)
            configuration["metadata"]["labels"]["app.kubernetes.io/version"] = "e2e"
            base = f"/apis/admissionregistration.k8s.io/v1/{plural}"
            await repo._call(f"create {plural}", "POST", base, body=configuration)
            created.append(f"{base}/{configuration['metadata']['name']}")
        yield
    finally:
        for path in created:
            await repo._call("delete webhook configuration", "DELETE", path, missing_ok=True)


@contextlib.asynccontextmanager
async def serving_admission(repo: KubeRepository, settings: Settings, namespace: str) -> AsyncIterator[None]:
    """ringroute's admission over TLS on loopback, registered with the shipped webhook configurations (renamed,
    pointed at this server by URL, for the test's namespace only)."""
    with tempfile.TemporaryDirectory() as cert_dir:
        bundle = generate_bundle("ringroute-webhook", "ringroute-system", Path(cert_dir), extra_names=("127.0.0.1",))
        certificates = ServingCertificates(Path(cert_dir))
        runner = web.AppRunner(admission_app(settings, Metrics(), certificates=certificates))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=certificates.ssl_context())
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            async with registered_webhooks(repo, namespace, port, bundle.ca_cert_pem):
                yield
        finally:
            await runner.cleanup()
