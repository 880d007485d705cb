"""Self-managed certificates against an in-process API server: create, adopt, renew, race, patch caBundle."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from certs import ServingCertificates, certificate_info
from emulation.apiserver import FakeApiServer, Fault
from tests.support.self_signed import NS, SECRET, webhook_configuration
from webhook.kube.client import KubeRepository
from webhook.kube.self_signed import SelfSignedCertificates, SelfSignedSettings, parse_secret_ref

SECRETS_PATH = f"/api/v1/namespaces/{NS}/secrets"
NOW = dt.datetime.now(dt.UTC)


@pytest.fixture
async def api() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer() as server:
        await server.apply("mutatingwebhookconfigurations", webhook_configuration("ringroute", 1))
        await server.apply("validatingwebhookconfigurations", webhook_configuration("ringroute", 2))
        await server.apply("mutatingwebhookconfigurations", webhook_configuration("someone-else", 1))
        yield server


@pytest.fixture
async def repository(api: FakeApiServer) -> AsyncIterator[KubeRepository]:
    async with api.repository() as kube:
        yield kube


def manager(repository: KubeRepository, cert_dir: Path, **overrides: Any) -> SelfSignedCertificates:
    return SelfSignedCertificates(repository, SelfSignedSettings(NS, SECRET, cert_dir, **overrides))


def secret_data(api: FakeApiServer) -> dict[str, bytes]:
    secret = api.get("secrets", NS, SECRET)
    assert secret is not None
    return {k: base64.b64decode(v) for k, v in secret["data"].items()}


def ca_bundles(api: FakeApiServer, kind: str, name: str = "ringroute") -> list[str | None]:
    configuration = api.get(kind, None, name)
    assert configuration is not None
    return [w["clientConfig"].get("caBundle") for w in configuration["webhooks"]]


async def test_first_start_creates_the_secret_writes_files_and_patches_every_webhook(
    api: FakeApiServer, repository: KubeRepository, tmp_path: Path
) -> None:
    assert await manager(repository, tmp_path).sync() == "created"
    secret = api.get("secrets", NS, SECRET)
    assert secret is not None
    assert secret["type"] == "kubernetes.io/tls"
    data = secret_data(api)
    assert sorted(data) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    for file in ("ca.crt", "tls.crt", "tls.key"):
        assert (tmp_path / file).read_bytes() == data[file]
    assert stat.S_IMODE((tmp_path / "tls.key").stat().st_mode) == 0o600
    leaf = x509.load_pem_x509_certificate(data["tls.crt"])
    leaf.verify_directly_issued_by(x509.load_pem_x509_certificate(data["ca.crt"]))
    assert "ringroute-webhook.ringroute-system.svc" in certificate_info(data["tls.crt"]).dns_names
    expected = base64.b64encode(data["ca.crt"]).decode()
    assert ca_bundles(api, "mutatingwebhookconfigurations") == [expected]
    assert ca_bundles(api, "validatingwebhookconfigurations") == [expected, expected]
    # Only ringroute's own configurations are touched.
    assert ca_bundles(api, "mutatingwebhookconfigurations", "someone-else") == [None]
    assert ServingCertificates(tmp_path).loaded


async def test_a_current_secret_is_adopted_without_writing_to_the_api(
    api: FakeApiServer, repository: KubeRepository, tmp_path: Path
) -> None:
    await manager(repository, tmp_path / "first").sync()
    writes = len(api.writes())
    assert await manager(repository, tmp_path / "second").sync() == "current"
    assert len(api.writes()) == writes
    assert (tmp_path / "second" / "tls.crt").read_bytes() == secret_data(api)["tls.crt"]


async def test_serving_certificate_near_expiry_is_renewed_under_the_same_ca(
    api: FakeApiServer, repository: KubeRepository, tmp_path: Path
) -> None:
    await manager(repository, tmp_path, days=10).sync()
    before = secret_data(api)
    assert await manager(repository, tmp_path, days=10).sync() == "renewed"  # 10 days < 30 days renewal window
    after = secret_data(api)
    assert after["ca.crt"] == before["ca.crt"]
    assert after["ca.key"] == before["ca.key"]
    assert certificate_info(after["tls.crt"]).serial != certificate_info(before["tls.crt"]).serial
    assert (tmp_path / "tls.crt").read_bytes() == after["tls.crt"]


async def test_expiring_ca_is_replaced_and_the_old_one_stays_trusted_until_it_lapses(
    api: FakeApiServer, repository: KubeRepository, tmp_path: Path
) -> None:
    await manager(repository, tmp_path, days=20, ca_days=20).sync()
    old_ca = secret_data(api)["ca.crt"]
    assert await manager(repository, tmp_path).sync() == "renewed"
    data = secret_data(api)
    trusted = x509.load_pem_x509_certificates(data["ca.crt"])
    assert len(trusted) == 2
    assert trusted[1].public_bytes(serialization.Encoding.PEM) == old_ca
    leaf = x509.load_pem_x509_certificate(data["tls.crt"])
    leaf.verify_directly_issued_by(trusted[0])
    assert ca_bundles(api, "mutatingwebhookconfigurations") == [base64.b64encode(data["ca.crt"]).decode()]


async def test_an_unusable_secret_is_replaced(api: FakeApiServer, repository: KubeRepository, tmp_path: Path) -> None:
    await api.apply("secrets", {"metadata": {"name": SECRET, "namespace": NS}, "data": {"tls.crt": "bm90IGEgY2VydA=="}})
    assert await manager(repository, tmp_path).sync() == "renewed"
    assert sorted(secret_data(api)) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]


async def test_two_replicas_starting_together_converge_on_one_secret(
    api: FakeApiServer, repository: KubeRepository, tmp_path: Path
) -> None:
    outcomes = await asyncio.gather(
        manager(repository, tmp_path / "a").sync(), manager(repository, tmp_path / "b").sync()
    )
    assert sorted(outcomes) == ["created", "current"]
    assert (tmp_path / "a" / "tls.crt").read_bytes() == (tmp_path / "b" / "tls.crt").read_bytes()
    assert (tmp_path / "a" / "tls.crt").read_bytes() == secret_data(api)["tls.crt"]
    # One create, of the Secret (the other replica's create answered 409 AlreadyExists).
    assert [(w.method, w.path) for w in api.writes() if w.method == "POST"] == [("POST", SECRETS_PATH)]


async def test_conflicting_update_reads_again_and_adopts_what_the_other_replica_wrote(
    api: FakeApiServer, repository: KubeRepository, tmp_path: Path
) -> None:
    await manager(repository, tmp_path, days=10).sync()
    api.faults += [Fault("PUT", "", status=409), Fault("PATCH", "", status=409)]
    assert await manager(repository, tmp_path, days=10).sync() == "renewed"
    assert api.faults[0].times == 0, "the injected update conflict was answered"
    assert (tmp_path / "tls.crt").read_bytes() == secret_data(api)["tls.crt"]
    assert (
        ca_bundles(api, "validatingwebhookconfigurations")
        == [base64.b64encode(secret_data(api)["ca.crt"]).decode()] * 2
    )


async def test_run_stops_when_asked(repository: KubeRepository, tmp_path: Path) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(manager(repository, tmp_path, check_interval_s=0.01).run(stop))
    for _ in range(100):
        await asyncio.sleep(0.01)
        if (tmp_path / "tls.crt").exists():
            break
    stop.set()
    await asyncio.wait_for(task, 2)
    assert (tmp_path / "tls.crt").exists()


@pytest.mark.parametrize("value", ["no-slash", "/name", "Bad_NS/name", "ns/"])
def test_secret_reference_must_be_namespace_slash_name(value: str) -> None:
    with pytest.raises(ValueError, match=r"^--self-signed-secret: expected NAMESPACE/NAME"):
        parse_secret_ref(value)


def test_secret_reference_splits_namespace_and_name() -> None:
    assert parse_secret_ref("ringroute-system/ringroute-webhook-tls") == ("ringroute-system", "ringroute-webhook-tls")


async def test_renewal_drops_a_lapsed_old_ca_from_the_bundle(
    api: FakeApiServer, repository: KubeRepository, tmp_path: Path
) -> None:
    from certs import issue_bundle

    current = issue_bundle("ringroute-webhook", NS, days=10, ca_days=3650)
    lapsed = issue_bundle("ringroute-webhook", NS, days=1, now=NOW - dt.timedelta(days=800))

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    await api.apply(
        "secrets",
        {
            "metadata": {"name": SECRET, "namespace": NS},
            "type": "kubernetes.io/tls",
            "data": {
                "ca.crt": b64(current.ca_cert_pem + lapsed.ca_cert_pem),
                "tls.crt": b64(current.cert_pem),
                "tls.key": b64(current.key_pem),
                "ca.key": b64(current.ca_key_pem),
            },
        },
    )
    assert await manager(repository, tmp_path).sync() == "renewed"
    assert secret_data(api)["ca.crt"] == current.ca_cert_pem
