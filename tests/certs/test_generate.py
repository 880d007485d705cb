"""Certificate generation: names, key usage, expiry, files, and the `ringroute certs generate` command."""

from __future__ import annotations

import datetime as dt
import json
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from certs import (
    CertificateError,
    certificate_info,
    generate_bundle,
    issue_bundle,
    service_dns_names,
)
from webhook.cli.main import main

SERVICE, NAMESPACE = "ringroute-webhook", "ringroute-system"


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_generate_writes_the_tls_secret_file_names_with_a_private_key_mode(tmp_path: Path) -> None:
    generate_bundle(SERVICE, NAMESPACE, tmp_path / "out")
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["ca.crt", "tls.crt", "tls.key"]
    assert stat.S_IMODE((tmp_path / "out" / "tls.key").stat().st_mode) == 0o600
    assert b"BEGIN PRIVATE KEY" in (tmp_path / "out" / "tls.key").read_bytes()


def test_serving_certificate_names_the_service_in_all_four_forms(tmp_path: Path) -> None:
    generate_bundle(SERVICE, NAMESPACE, tmp_path)
    cert = load(tmp_path / "tls.crt")
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [
        "ringroute-webhook",
        "ringroute-webhook.ringroute-system",
        "ringroute-webhook.ringroute-system.svc",
        "ringroute-webhook.ringroute-system.svc.cluster.local",
    ]
    assert service_dns_names("a", "b") == ("a", "a.b", "a.b.svc", "a.b.svc.cluster.local")


def test_serving_certificate_is_a_p256_server_leaf_signed_by_the_ca(tmp_path: Path) -> None:
    generate_bundle(SERVICE, NAMESPACE, tmp_path)
    cert, ca = load(tmp_path / "tls.crt"), load(tmp_path / "ca.crt")
    public = cert.public_key()
    assert isinstance(public, ec.EllipticCurvePublicKey)
    assert public.curve.name == "secp256r1"
    cert.verify_directly_issued_by(ca)
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage)
    assert usage.critical
    assert usage.value.digital_signature
    assert not usage.value.key_cert_sign
    assert not usage.value.key_encipherment
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False


def test_ca_certificate_may_only_sign_certificates(tmp_path: Path) -> None:
    generate_bundle(SERVICE, NAMESPACE, tmp_path)
    ca = load(tmp_path / "ca.crt")
    constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert constraints.ca is True
    assert constraints.path_length == 0
    usage = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign
    assert usage.crl_sign
    assert certificate_info((tmp_path / "ca.crt").read_bytes()).is_ca


def test_validity_covers_the_requested_days_with_clock_skew_allowance() -> None:
    now = dt.datetime(2030, 1, 1, 12, 0, tzinfo=dt.UTC)
    bundle = issue_bundle(SERVICE, NAMESPACE, days=30, now=now)
    info = certificate_info(bundle.cert_pem)
    assert info.not_before < now
    assert info.not_after == now + dt.timedelta(days=30)
    assert bundle.not_after == info.not_after
    assert info.remaining(now) == dt.timedelta(days=30)
    assert info.remaining(now + dt.timedelta(days=31)) < dt.timedelta(0)


@pytest.mark.parametrize("days", [0, -1, True, 1.5])
def test_days_below_one_or_not_whole_is_rejected_naming_the_field(days: object) -> None:
    with pytest.raises(CertificateError, match=r"^days: "):
        issue_bundle(SERVICE, NAMESPACE, days=days)  # type: ignore[arg-type]


@pytest.mark.parametrize(("service", "namespace", "field"), [("Web_hook", "ns", "service"), ("ok", "", "namespace")])
def test_names_that_are_not_dns_labels_are_rejected(service: str, namespace: str, field: str) -> None:
    with pytest.raises(CertificateError, match=rf"^{field}: .* is not a DNS label"):
        issue_bundle(service, namespace)


def test_extra_names_add_dns_and_ip_alternative_names() -> None:
    bundle = issue_bundle(SERVICE, NAMESPACE, extra_names=["localhost", "127.0.0.1", "::1"])
    info = certificate_info(bundle.cert_pem)
    assert info.dns_names[-1] == "localhost"
    assert info.ip_addresses == ("127.0.0.1", "::1")
    with pytest.raises(CertificateError, match=r"^extra_names\[0\]: "):
        issue_bundle(SERVICE, NAMESPACE, extra_names=["not a name"])


def test_renewal_under_an_existing_ca_keeps_the_ca_and_changes_the_leaf() -> None:
    first = issue_bundle(SERVICE, NAMESPACE, days=10)
    renewed = issue_bundle(SERVICE, NAMESPACE, days=400, ca_cert_pem=first.ca_cert_pem, ca_key_pem=first.ca_key_pem)
    assert renewed.ca_cert_pem == first.ca_cert_pem
    assert renewed.serial != first.serial
    leaf = x509.load_pem_x509_certificate(renewed.cert_pem)
    leaf.verify_directly_issued_by(x509.load_pem_x509_certificate(first.ca_cert_pem))
    # The leaf cannot outlive the CA that vouches for it.
    assert renewed.not_after <= certificate_info(first.ca_cert_pem).not_after


def test_renewal_with_a_ca_key_of_another_ca_is_refused() -> None:
    first, other = issue_bundle(SERVICE, NAMESPACE), issue_bundle(SERVICE, NAMESPACE)
    with pytest.raises(CertificateError, match="does not belong"):
        issue_bundle(SERVICE, NAMESPACE, ca_cert_pem=first.ca_cert_pem, ca_key_pem=other.ca_key_pem)


def test_bundle_repr_never_shows_private_keys() -> None:
    bundle = issue_bundle(SERVICE, NAMESPACE)
    assert "PRIVATE" not in repr(bundle)
    assert bundle.ca_bundle_b64.startswith("LS0tLS1CRUdJTi")  # base64 of "-----BEGIN"


def test_cli_generate_writes_files_and_prints_a_json_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["certs", "generate", "--service", "s", "--namespace", "n", "--out", str(tmp_path), "--days", "7"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["dnsNames"] == ["s", "s.n", "s.n.svc", "s.n.svc.cluster.local"]
    assert summary["caBundle"] == str(tmp_path / "ca.crt")
    info = certificate_info((tmp_path / "tls.crt").read_bytes())
    assert f"{info.serial:x}" == summary["serial"]
    assert dt.timedelta(days=6) < info.remaining() <= dt.timedelta(days=7)


def test_cli_generate_names_the_bad_flag_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["certs", "generate", "--service", "S!", "--namespace", "n", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("ringroute certs generate: error: --service: 'S!' is not a DNS label")
    assert "\n" not in err
    assert not any(tmp_path.iterdir())


def test_cli_generate_refuses_an_out_path_that_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    code = main(["certs", "generate", "--service", "s", "--namespace", "n", "--out", str(target)])
    assert code == 2
    assert "--out-dir: " in capsys.readouterr().err
