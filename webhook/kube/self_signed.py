"""Self-managed webhook certificates (`ringroute serve --self-signed-secret NAMESPACE/NAME`).

Every replica runs the same loop: read the TLS Secret; create it (new CA + serving pair) when it is missing or
unusable; renew the serving certificate under the same CA before it expires (and the CA itself before *it*
expires, keeping the old CA in the caBundle until it lapses so the API server trusts both while replicas
switch); write `ca.crt`, `tls.crt`, `tls.key` into the serving directory (which `certs.ServingCertificates`
reloads); and patch `caBundle` into ringroute's own Mutating/ValidatingWebhookConfigurations. Writes are guarded
by resourceVersion, so racing replicas converge on one Secret.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization

from certs import (
    CA_FILE,
    CA_KEY_FILE,
    CERT_FILE,
    KEY_FILE,
    certificate_info,
    issue_bundle,
    service_dns_names,
    write_tls_files,
)
from webhook.common.names import ADMISSION_REGISTRATION_GROUP, APP_NAME_LABEL, MANAGED_BY_LABEL, TLS_SECRET_TYPE
from webhook.kube.client import ConflictError, KubeError, KubeRepository, ResourceKind, sleep_or_stop

log = logging.getLogger("ringroute.certs")

SECRETS = ResourceKind("", "v1", "secrets")
MUTATING_WEBHOOKS = ResourceKind(ADMISSION_REGISTRATION_GROUP, "v1", "mutatingwebhookconfigurations", False)
VALIDATING_WEBHOOKS = ResourceKind(ADMISSION_REGISTRATION_GROUP, "v1", "validatingwebhookconfigurations", False)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_MAX_CONFLICT_RETRIES = 5


@dataclass(frozen=True, slots=True)
class SelfSignedSettings:
    """Where the self-managed certificates live and how long they last."""

    secret_namespace: str
    """Namespace of the TLS Secret (ringroute's own namespace)."""
    secret_name: str
    """Name of the TLS Secret holding ca.crt, tls.crt, tls.key and ca.key."""
    cert_dir: Path
    """Directory the server serves tls.crt/tls.key from (an emptyDir in the cluster)."""
    service: str = "ringroute-webhook"
    """Service the API server calls; the certificate names it in its four DNS forms."""
    service_namespace: str | None = None
    """Namespace of that Service; None means the Secret's namespace."""
    webhook_configuration: str = "ringroute"
    """Name of ringroute's MutatingWebhookConfiguration and ValidatingWebhookConfiguration."""
    days: int = 365
    """Validity of a serving certificate."""
    ca_days: int = 3650
    """Validity of a new CA."""
    renew_before: dt.timedelta = dt.timedelta(days=30)
    """Renew a certificate (serving or CA) this long before it expires."""
    check_interval_s: float = 600.0
    """How often the Secret is read again (other replicas may have renewed it)."""

    @property
    def dns_names(self) -> tuple[str, ...]:
        """The names the serving certificate must carry."""
        return service_dns_names(self.service, self.service_namespace or self.secret_namespace)


def parse_secret_ref(value: str) -> tuple[str, str]:
    """`NAMESPACE/NAME` of `--self-signed-secret`; ValueError with a one-line message otherwise."""
    namespace, sep, name = value.partition("/")
    if not sep or not _DNS_LABEL.match(namespace) or not name or not re.match(r"^[a-z0-9][-.a-z0-9]*$", name):
        raise ValueError(
            f"--self-signed-secret: expected NAMESPACE/NAME such as ringroute-system/ringroute-webhook-tls "
            f"(got {value!r})"
        )
    return namespace, name


@dataclass(frozen=True, slots=True)
class _Material:
    """The content of a usable Secret."""

    ca_bundle: bytes
    cert: bytes
    key: bytes
    ca_cert: bytes
    ca_key: bytes


class SelfSignedCertificates:
    """Keeps the TLS Secret, the serving files and the webhooks' caBundle in step (see the module docstring)."""

    def __init__(self, repository: KubeRepository, settings: SelfSignedSettings) -> None:
        self.repository = repository
        self.settings = settings

    async def sync(self, now: dt.datetime | None = None) -> str:
        """One pass; returns what happened to the Secret: "created", "renewed" or "current"."""
        outcome, material = await self._ensure_secret(now or dt.datetime.now(dt.UTC))
        self._write_files(material)
        await self._patch_ca_bundles(material.ca_bundle)
        return outcome

    async def run(self, stop: asyncio.Event) -> None:
        """`sync` every `check_interval_s` until `stop` is set; failures are logged and retried sooner."""
        while not stop.is_set():
            delay = self.settings.check_interval_s
            try:
                outcome = await self.sync()
                if outcome != "current":
                    log.info("event=self_signed_secret_%s secret=%s/%s", outcome, *self._secret_ref())
            except Exception:  # a renewal loop that dies would let the certificate expire: log and retry
                log.exception("event=self_signed_sync_failed secret=%s/%s", *self._secret_ref())
                delay = min(delay, 30.0)
            if await sleep_or_stop(stop, delay):
                return

    # -- the Secret ------------------------------------------------------------------------------------------

    def _secret_ref(self) -> tuple[str, str]:
        return self.settings.secret_namespace, self.settings.secret_name

    async def _ensure_secret(self, now: dt.datetime) -> tuple[str, _Material]:
        namespace, name = self._secret_ref()
        for _ in range(_MAX_CONFLICT_RETRIES):
            secret = await self.repository.get_object(SECRETS, namespace, name)
            if secret is None:
                material = self._issue(None, now)
                try:
                    await self.repository.create_object(SECRETS, self._secret_body(material, None))
                except ConflictError:
                    continue  # another replica created it first: use theirs
                return "created", material
            material_or_none, unusable = _read_secret(secret)
            reason = unusable
            if material_or_none is not None:
                renewal = self._renewal_reason(material_or_none, now)
                if renewal is None:
                    return "current", material_or_none
                reason = renewal
            log.info("event=self_signed_renewing secret=%s/%s reason=%r", namespace, name, reason)
            material = self._issue(material_or_none, now)
            try:
                await self.repository.replace_object(SECRETS, self._secret_body(material, secret))
            except ConflictError:
                continue  # changed under us (another replica renewed): read again
            return "renewed", material
        raise KubeError("sync self-signed secret", 409, f"{namespace}/{name} kept changing; will retry")

    def _renewal_reason(self, material: _Material, now: dt.datetime) -> str | None:
        leaf, ca = certificate_info(material.cert), certificate_info(material.ca_cert)
        if leaf.remaining(now) <= self.settings.renew_before:
            return f"serving certificate expires {leaf.not_after.isoformat()}"
        if ca.remaining(now) <= self.settings.renew_before:
            return f"CA expires {ca.not_after.isoformat()}"
        missing = set(self.settings.dns_names) - set(leaf.dns_names)
        if missing:
            return f"serving certificate lacks {sorted(missing)}"
        return None

    def _issue(self, previous: _Material | None, now: dt.datetime) -> _Material:
        s = self.settings
        reuse_ca = previous is not None and certificate_info(previous.ca_cert).remaining(now) > s.renew_before
        namespace = s.service_namespace or s.secret_namespace
        if previous is not None and reuse_ca:
            bundle = issue_bundle(
                s.service, namespace, days=s.days, ca_cert_pem=previous.ca_cert, ca_key_pem=previous.ca_key, now=now
            )
            ca_bundle = _unexpired(previous.ca_bundle, now) or previous.ca_cert
            return _Material(ca_bundle, bundle.cert_pem, bundle.key_pem, previous.ca_cert, previous.ca_key)
        bundle = issue_bundle(s.service, namespace, days=s.days, ca_days=s.ca_days, now=now)
        ca_bundle = bundle.ca_cert_pem
        if previous is not None and certificate_info(previous.ca_cert).remaining(now) > dt.timedelta(0):
            # Trust the old CA too until it lapses: replicas still serving the old pair keep working meanwhile.
            ca_bundle += previous.ca_cert
        return _Material(ca_bundle, bundle.cert_pem, bundle.key_pem, bundle.ca_cert_pem, bundle.ca_key_pem)

    def _secret_body(self, material: _Material, current: dict[str, Any] | None) -> dict[str, Any]:
        namespace, name = self._secret_ref()
        metadata: dict[str, Any] = {
            "name": name,
            "namespace": namespace,
            "labels": {APP_NAME_LABEL: "ringroute", MANAGED_BY_LABEL: "ringroute"},
        }
        if current is not None:
            current_meta = current.get("metadata") or {}
            metadata["resourceVersion"] = current_meta.get("resourceVersion")
            metadata["labels"] = {**(current_meta.get("labels") or {}), **metadata["labels"]}
            if current_meta.get("annotations"):
                metadata["annotations"] = current_meta["annotations"]
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": metadata,
            "type": TLS_SECRET_TYPE,
            "data": {
                CA_FILE: _b64(material.ca_bundle),
                CERT_FILE: _b64(material.cert),
                KEY_FILE: _b64(material.key),
                CA_KEY_FILE: _b64(material.ca_key),
            },
        }

    # -- files and caBundle ----------------------------------------------------------------------------------

    def _write_files(self, material: _Material) -> None:
        directory = self.settings.cert_dir
        current = {}
        for file in (CA_FILE, CERT_FILE, KEY_FILE):
            try:
                current[file] = (directory / file).read_bytes()
            except OSError:
                current[file] = b""
        wanted = {CA_FILE: material.ca_bundle, CERT_FILE: material.cert, KEY_FILE: material.key}
        if current != wanted:
            write_tls_files(directory, ca_pem=material.ca_bundle, cert_pem=material.cert, key_pem=material.key)

    async def _patch_ca_bundles(self, ca_bundle: bytes) -> None:
        wanted = _b64(ca_bundle)
        for kind in (MUTATING_WEBHOOKS, VALIDATING_WEBHOOKS):
            for _ in range(_MAX_CONFLICT_RETRIES):
                configuration = await self.repository.get_object(kind, None, self.settings.webhook_configuration)
                if configuration is None:
                    log.warning(
                        "event=webhook_configuration_missing kind=%s name=%s detail=%r",
                        kind.plural,
                        self.settings.webhook_configuration,
                        "apply manifests/overlays/self-signed; caBundle is patched once it exists",
                    )
                    break
                webhooks = configuration.get("webhooks") or []
                if all((w.get("clientConfig") or {}).get("caBundle") == wanted for w in webhooks):
                    break
                patched = [
                    {**w, "clientConfig": {**(w.get("clientConfig") or {}), "caBundle": wanted}} for w in webhooks
                ]
                # A merge patch replaces the whole list, so guard it with the resourceVersion it was read at.
                patch = {
                    "metadata": {"resourceVersion": (configuration.get("metadata") or {}).get("resourceVersion")},
                    "webhooks": patched,
                }
                try:
                    await self.repository.patch_object(kind, None, self.settings.webhook_configuration, patch)
                except ConflictError:
                    continue
                log.info("event=ca_bundle_patched kind=%s name=%s", kind.plural, self.settings.webhook_configuration)
                break


def _read_secret(secret: dict[str, Any]) -> tuple[_Material | None, str]:
    """The usable content of the Secret, or None and why it is unusable."""
    data = secret.get("data") or {}
    try:
        decoded = {k: base64.b64decode(data[k], validate=True) for k in (CA_FILE, CERT_FILE, KEY_FILE, CA_KEY_FILE)}
    except KeyError as exc:
        return None, f"data.{exc.args[0]} is missing"
    except (ValueError, TypeError) as exc:
        return None, f"data is not base64: {exc}"
    try:
        cert = x509.load_pem_x509_certificate(decoded[CERT_FILE])
        key = serialization.load_pem_private_key(decoded[KEY_FILE], password=None)
        cas = x509.load_pem_x509_certificates(decoded[CA_FILE])
        ca_key = serialization.load_pem_private_key(decoded[CA_KEY_FILE], password=None)
    except (ValueError, TypeError) as exc:
        return None, f"unreadable PEM: {exc}"
    spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    if key.public_key().public_bytes(*spki) != cert.public_key().public_bytes(*spki):
        return None, f"{KEY_FILE} does not belong to {CERT_FILE}"
    # The signing CA is the one whose key is ca.key (the bundle may also hold the previous CA).
    ca_public = ca_key.public_key().public_bytes(*spki)
    signing = next((c for c in cas if c.public_key().public_bytes(*spki) == ca_public), None)
    if signing is None:
        return None, f"{CA_KEY_FILE} belongs to no certificate in {CA_FILE}"
    try:
        cert.verify_directly_issued_by(signing)
    except (ValueError, TypeError, InvalidSignature) as exc:
        return None, f"{CERT_FILE} is not signed by the CA: {exc!r}"
    return (
        _Material(
            ca_bundle=decoded[CA_FILE],
            cert=decoded[CERT_FILE],
            key=decoded[KEY_FILE],
            ca_cert=signing.public_bytes(serialization.Encoding.PEM),
            ca_key=decoded[CA_KEY_FILE],
        ),
        "",
    )


def _unexpired(pem_bundle: bytes, now: dt.datetime) -> bytes:
    """The certificates of a PEM bundle that are still valid at `now`, in order (a lapsed old CA drops out)."""
    try:
        certificates = x509.load_pem_x509_certificates(pem_bundle)
    except ValueError:
        return b""
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certificates if c.not_valid_after_utc > now)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


__all__ = [
    "MUTATING_WEBHOOKS",
    "SECRETS",
    "VALIDATING_WEBHOOKS",
    "SelfSignedCertificates",
    "SelfSignedSettings",
    "parse_secret_ref",
]
