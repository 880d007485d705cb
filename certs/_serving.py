"""Serve a certificate pair from a directory and pick up rotated files without a restart.

One `ssl.SSLContext` is built once and handed to the HTTP server; a reload calls `load_cert_chain` again on that
same object. OpenSSL copies the certificate and key into each connection when it is created, so connections that
are already open keep working and every new handshake uses the new pair.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import logging
import os
import ssl
import tempfile
from collections.abc import Iterator
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

from certs._generate import CERT_FILE, KEY_FILE, CertificateInfo, certificate_info

log = logging.getLogger("ringroute.certs")

MAX_WATCH_INTERVAL_S = 60.0
"""Rotated files are picked up at most this long after they change."""


class ServingCertificates:
    """The webhook's serving certificate pair (`tls.crt`, `tls.key` in `cert_dir`), reloaded when it changes."""

    def __init__(self, cert_dir: Path) -> None:
        self.cert_dir = Path(cert_dir)
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._context.options |= ssl.OP_NO_COMPRESSION
        self._loaded_digest: str | None = None
        self._rejected_digest: str | None = None
        self._pair: tuple[bytes, bytes] | None = None
        self._info: CertificateInfo | None = None
        self.reload_if_changed()

    @property
    def loaded(self) -> bool:
        """True once a valid pair has been loaded (readiness depends on it)."""
        return self._pair is not None

    @property
    def info(self) -> CertificateInfo | None:
        """The serving certificate in use, if any."""
        return self._info

    def ssl_context(self) -> ssl.SSLContext:
        """The server-side TLS context (TLS >= 1.2); always the same object, updated in place on reload."""
        return self._context

    def reload_if_changed(self) -> bool:
        """Load the pair again if the files' content changed; True when a new pair is now in use.

        A missing, half-written or mismatched pair keeps the previous one and logs an error (once per content).
        """
        cert_path, key_path = self.cert_dir / CERT_FILE, self.cert_dir / KEY_FILE
        try:
            cert_pem = cert_path.read_bytes()
            key_pem = key_path.read_bytes()
        except OSError as exc:
            digest = f"unreadable:{exc.errno}:{exc.filename}"
            self._reject(digest, f"cannot read {exc.filename}: {exc.strerror}")
            return False
        digest = hashlib.sha256(cert_pem + b"\0" + key_pem).hexdigest()
        if digest in (self._loaded_digest, self._rejected_digest):
            return False
        problem = _check_pair(cert_pem, key_pem)
        if problem is not None:
            self._reject(digest, problem)
            return False
        try:
            _load_chain(self._context, cert_pem, key_pem)
        except (ssl.SSLError, OSError) as exc:
            self._reject(digest, f"OpenSSL refused the pair: {exc}")
            if self._pair is not None:
                # A failed load can leave the context with a certificate but no key: put the old pair back.
                _load_chain(self._context, *self._pair)
            return False
        previous = self._info
        self._pair = (cert_pem, key_pem)
        self._info = certificate_info(cert_pem)
        self._loaded_digest, self._rejected_digest = digest, None
        log.info(
            "event=certificate_loaded dir=%s serial=%x not_after=%s previous_serial=%s",
            self.cert_dir,
            self._info.serial,
            self._info.not_after.isoformat(),
            f"{previous.serial:x}" if previous else "none",
        )
        if self._info.remaining() <= dt.timedelta(0):
            log.error("event=certificate_expired dir=%s not_after=%s", self.cert_dir, self._info.not_after)
        return True

    async def watch(self, interval_s: float = 10.0) -> None:
        """Check the files every `interval_s` seconds (0 < interval <= 60) until cancelled."""
        if not 0 < interval_s <= MAX_WATCH_INTERVAL_S:
            raise ValueError(f"interval_s: must be in (0, {MAX_WATCH_INTERVAL_S:g}] seconds (got {interval_s!r})")
        while True:
            await asyncio.sleep(interval_s)
            try:
                self.reload_if_changed()
            except Exception:  # a watcher that dies silently would serve a stale certificate forever
                log.exception("event=certificate_reload_failed dir=%s", self.cert_dir)

    def _reject(self, digest: str, problem: str) -> None:
        if digest == self._rejected_digest:
            return
        self._rejected_digest = digest
        keeping = (
            f"keeping serial {self._info.serial:x}" if self._info else "no certificate loaded, TLS handshakes fail"
        )
        log.error("event=certificate_rejected dir=%s problem=%r action=%r", self.cert_dir, problem, keeping)


def _check_pair(cert_pem: bytes, key_pem: bytes) -> str | None:
    """Why this pair must not be served, or None when the key belongs to the first certificate."""
    try:
        cert = x509.load_pem_x509_certificates(cert_pem)[0]
    except ValueError as exc:
        return f"{CERT_FILE} is not a complete PEM certificate ({exc})"
    try:
        key: PrivateKeyTypes = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as exc:
        return f"{KEY_FILE} is not a complete unencrypted PEM private key ({exc})"
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    cert_public = cert.public_key().public_bytes(serialization.Encoding.DER, spki)
    key_public = key.public_key().public_bytes(serialization.Encoding.DER, spki)
    if cert_public != key_public:
        return f"{KEY_FILE} does not belong to {CERT_FILE} (mismatched pair, possibly mid-rotation)"
    return None


def _load_chain(context: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """`load_cert_chain` from bytes: OpenSSL reads files, so hand it files that no other process can change."""
    with _private_file(cert_pem) as cert_path, _private_file(key_pem) as key_path:
        context.load_cert_chain(cert_path, key_path)


@contextlib.contextmanager
def _private_file(data: bytes) -> Iterator[str]:
    memfd_create = getattr(os, "memfd_create", None)
    if memfd_create is not None:
        # An anonymous in-memory file: works on a read-only root filesystem and leaves no key on disk.
        fd = memfd_create("ringroute-cert", 0)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="ringroute-cert-") as tmp:
        path = Path(tmp) / "pem"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        yield str(path)
