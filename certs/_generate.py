"""Make a CA and an ECDSA P-256 serving certificate for the webhook Service, in memory or on disk."""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_FILE = "ca.crt"
"""The CA certificate: the webhook configurations' caBundle (key name of a Kubernetes TLS Secret)."""
CERT_FILE = "tls.crt"
"""The serving certificate (key name of a Kubernetes TLS Secret)."""
KEY_FILE = "tls.key"
"""The serving private key, PKCS#8 PEM, file mode 0600 (key name of a Kubernetes TLS Secret)."""
CA_KEY_FILE = "ca.key"
"""The CA private key; only the self-managed Secret keeps it (to renew the serving certificate)."""

_CLOCK_SKEW = dt.timedelta(minutes=5)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_NAME = re.compile(r"^(\*\.)?[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$")


class CertificateError(ValueError):
    """Bad input for certificate generation, or unreadable certificate files; the message names the field."""


@dataclass(frozen=True, slots=True)
class CertificateInfo:
    """What a PEM certificate says about itself (for logs, the CLI and renewal decisions)."""

    subject: str
    """RFC 4514 subject."""
    issuer: str
    """RFC 4514 issuer."""
    serial: int
    """Serial number."""
    not_before: dt.datetime
    """Start of validity (UTC)."""
    not_after: dt.datetime
    """End of validity (UTC)."""
    dns_names: tuple[str, ...]
    """DNS subject alternative names."""
    ip_addresses: tuple[str, ...]
    """IP subject alternative names."""
    is_ca: bool
    """True for a CA certificate (basicConstraints CA:TRUE)."""

    def remaining(self, now: dt.datetime | None = None) -> dt.timedelta:
        """Time left until `not_after` (negative once expired)."""
        return self.not_after - (now or _utcnow())


@dataclass(frozen=True, slots=True)
class CertBundle:
    """A CA and a serving certificate signed by it, as PEM bytes (keys never appear in repr)."""

    ca_cert_pem: bytes
    """CA certificate: the caBundle of the webhook configurations."""
    cert_pem: bytes
    """Serving certificate."""
    key_pem: bytes = field(repr=False)
    """Serving private key (PKCS#8, unencrypted)."""
    ca_key_pem: bytes = field(repr=False)
    """CA private key (PKCS#8, unencrypted); not written by `write`."""
    dns_names: tuple[str, ...]
    """DNS names the serving certificate is valid for."""
    serial: int
    """Serial number of the serving certificate."""
    not_after: dt.datetime
    """Expiry of the serving certificate (UTC)."""

    @property
    def ca_bundle_b64(self) -> str:
        """`caBundle` value for a webhook configuration (base64 of the CA PEM)."""
        return base64.b64encode(self.ca_cert_pem).decode("ascii")

    def write(self, out_dir: Path) -> None:
        """Write `ca.crt`, `tls.crt` and `tls.key` (mode 0600) into `out_dir`, each file replaced atomically."""
        write_tls_files(out_dir, ca_pem=self.ca_cert_pem, cert_pem=self.cert_pem, key_pem=self.key_pem)


def write_tls_files(out_dir: Path, *, ca_pem: bytes, cert_pem: bytes, key_pem: bytes) -> None:
    """Write `ca.crt`, `tls.crt`, `tls.key` (mode 0600) into `out_dir`, each replaced atomically."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # The key goes first: a watcher that sees the new key with the old certificate rejects the pair and waits.
    _write_atomic(out_dir / KEY_FILE, key_pem, 0o600)
    _write_atomic(out_dir / CERT_FILE, cert_pem, 0o644)
    _write_atomic(out_dir / CA_FILE, ca_pem, 0o644)


def service_dns_names(service: str, namespace: str) -> tuple[str, ...]:
    """The names the API server may use to reach a Service: `S`, `S.N`, `S.N.svc`, `S.N.svc.cluster.local`."""
    _check_label("service", service)
    _check_label("namespace", namespace)
    return (
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    )


def issue_bundle(
    service: str,
    namespace: str,
    *,
    days: int = 365,
    extra_names: Sequence[str] = (),
    ca_cert_pem: bytes | None = None,
    ca_key_pem: bytes | None = None,
    ca_days: int | None = None,
    now: dt.datetime | None = None,
) -> CertBundle:
    """Make a serving certificate for the Service (and a new CA unless one is given), in memory.

    `extra_names` adds DNS names or IP addresses (e.g. `localhost`, `127.0.0.1` for a loopback demo).
    Passing `ca_cert_pem`/`ca_key_pem` renews the serving certificate under an existing CA; otherwise a new CA
    valid for `ca_days` (default: `days`) is made.
    """
    for what, value in (("days", days), ("ca_days", days if ca_days is None else ca_days)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise CertificateError(f"{what}: must be a whole number of days >= 1 (got {value!r})")
    if (ca_cert_pem is None) != (ca_key_pem is None):
        raise CertificateError("ca_cert_pem/ca_key_pem: give both to reuse a CA, or neither to make a new one")
    dns_names = list(service_dns_names(service, namespace))
    ips: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = []
    for i, name in enumerate(extra_names):
        try:
            ips.append(ipaddress.ip_address(name))
            continue
        except ValueError:
            pass
        if not _DNS_NAME.match(name) or len(name) > 253:
            raise CertificateError(f"extra_names[{i}]: {name!r} is neither a DNS name nor an IP address")
        if name not in dns_names:
            dns_names.append(name)
    start = (now or _utcnow()).replace(microsecond=0) - _CLOCK_SKEW
    end = start + _CLOCK_SKEW + dt.timedelta(days=days)

    if ca_cert_pem is None or ca_key_pem is None:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_end = start + _CLOCK_SKEW + dt.timedelta(days=days if ca_days is None else ca_days)
        ca_cert = _make_ca(ca_key, f"ringroute-ca {service}.{namespace}", start, max(end, ca_end))
        ca_key_pem = _key_pem(ca_key)
        ca_cert_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    else:
        ca_cert = _load_one_cert(ca_cert_pem, "ca_cert_pem")
        loaded_key = serialization.load_pem_private_key(ca_key_pem, password=None)
        if not isinstance(loaded_key, ec.EllipticCurvePrivateKey):
            raise CertificateError("ca_key_pem: expected an ECDSA private key")
        if _public_der(loaded_key.public_key()) != _public_der(ca_cert.public_key()):
            raise CertificateError("ca_key_pem: the key does not belong to ca_cert_pem")
        ca_key = loaded_key
        # A leaf must not outlive its CA: clients would reject it once the CA expires.
        end = min(end, ca_cert.not_valid_after_utc)

    key = ec.generate_private_key(ec.SECP256R1())
    serial = x509.random_serial_number()
    san: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    san += [x509.IPAddress(ip) for ip in ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[2])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(serial)
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(san), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return CertBundle(
        ca_cert_pem=ca_cert_pem,
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=_key_pem(key),
        ca_key_pem=ca_key_pem,
        dns_names=tuple(dns_names),
        serial=serial,
        not_after=end,
    )


def generate_bundle(
    service: str,
    namespace: str,
    out_dir: Path,
    *,
    days: int = 365,
    extra_names: Sequence[str] = (),
) -> CertBundle:
    """Make a new CA and serving certificate and write `ca.crt`, `tls.crt`, `tls.key` into `out_dir`."""
    bundle = issue_bundle(service, namespace, days=days, extra_names=extra_names)
    bundle.write(Path(out_dir))
    return bundle


def certificate_info(pem: bytes) -> CertificateInfo:
    """Describe the first certificate of a PEM blob (raises CertificateError when there is none)."""
    cert = _load_one_cert(pem, "certificate")
    dns: tuple[str, ...] = ()
    ips: tuple[str, ...] = ()
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns = tuple(san.get_values_for_type(x509.DNSName))
        ips = tuple(str(ip) for ip in san.get_values_for_type(x509.IPAddress))
    except x509.ExtensionNotFound:
        pass
    try:
        is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        is_ca = False
    return CertificateInfo(
        subject=cert.subject.rfc4514_string(),
        issuer=cert.issuer.rfc4514_string(),
        serial=cert.serial_number,
        not_before=cert.not_valid_before_utc,
        not_after=cert.not_valid_after_utc,
        dns_names=dns,
        ip_addresses=ips,
        is_ca=is_ca,
    )


def _make_ca(
    key: ec.EllipticCurvePrivateKey, common_name: str, start: dt.datetime, end: dt.datetime
) -> x509.Certificate:
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "ringroute"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64]),
        ]
    )
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )


def _load_one_cert(pem: bytes, what: str) -> x509.Certificate:
    try:
        certs = x509.load_pem_x509_certificates(pem)
    except ValueError as exc:
        raise CertificateError(f"{what}: not a PEM certificate ({exc})") from exc
    return certs[0]


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _public_der(public_key: object) -> bytes:
    if not isinstance(public_key, ec.EllipticCurvePublicKey):
        return b""
    return public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _check_label(what: str, value: str) -> None:
    if not isinstance(value, str) or not _DNS_LABEL.match(value):
        raise CertificateError(
            f"{what}: {value!r} is not a DNS label (lowercase letters, digits and '-', at most 63 characters)"
        )


def _write_atomic(path: Path, data: bytes, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)  # the umask may have narrowed or a previous file widened it
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
