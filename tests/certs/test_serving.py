"""ServingCertificates: real TLS handshakes on loopback before and after the files rotate."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import web
from cryptography import x509

from certs import CertBundle, ServingCertificates, issue_bundle

SERVICE, NAMESPACE = "ringroute-webhook", "ringroute-system"
HOSTNAME = f"{SERVICE}.{NAMESPACE}.svc"


@dataclass
class Server:
    port: int
    release: asyncio.Event
    """Set it to let requests to /slow finish."""


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[Server, ServingCertificates, CertBundle]]:
    first = issue_bundle(SERVICE, NAMESPACE)
    first.write(tmp_path)
    certificates = ServingCertificates(tmp_path)
    release = asyncio.Event()

    async def ok(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def slow(_request: web.Request) -> web.Response:
        await release.wait()
        return web.Response(text="slow ok")

    app = web.Application()
    app.router.add_get("/ok", ok)
    app.router.add_get("/slow", slow)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=certificates.ssl_context())
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield Server(port, release), certificates, first
    finally:
        release.set()
        await runner.cleanup()


class Connection:
    """One keep-alive HTTPS/1.1 connection that reports the serial of the certificate it was served."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        self.serial = x509.load_der_x509_certificate(der).serial_number

    @classmethod
    async def open(cls, port: int, ca_pem: bytes, hostname: str = HOSTNAME) -> Connection:
        context = ssl.create_default_context(cadata=ca_pem.decode())
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname=hostname)
        return cls(reader, writer)

    async def get(self, path: str) -> tuple[int, bytes]:
        self.writer.write(f"GET {path} HTTP/1.1\r\nHost: {HOSTNAME}\r\nConnection: keep-alive\r\n\r\n".encode())
        await self.writer.drain()
        status_line = await self.reader.readline()
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        return int(status_line.split()[1]), await self.reader.readexactly(length)

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


def rotate(cert_dir: Path) -> CertBundle:
    bundle = issue_bundle(SERVICE, NAMESPACE)
    bundle.write(cert_dir)
    return bundle


async def test_handshake_verifies_against_the_ca_bundle_for_the_service_name(
    server: tuple[Server, ServingCertificates, CertBundle],
) -> None:
    srv, certificates, first = server
    conn = await Connection.open(srv.port, first.ca_cert_pem)
    assert conn.serial == first.serial
    assert await conn.get("/ok") == (200, b"ok")
    assert conn.writer.get_extra_info("ssl_object").version() in ("TLSv1.2", "TLSv1.3")
    await conn.close()
    assert certificates.loaded


async def test_handshake_for_a_name_outside_the_certificate_fails(
    server: tuple[Server, ServingCertificates, CertBundle],
) -> None:
    srv, _, first = server
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        await Connection.open(srv.port, first.ca_cert_pem, hostname="other.example")


async def test_rotated_files_serve_new_connections_while_an_open_keepalive_connection_keeps_working(
    server: tuple[Server, ServingCertificates, CertBundle], tmp_path: Path
) -> None:
    srv, certificates, first = server
    context_before = certificates.ssl_context()
    old_conn = await Connection.open(srv.port, first.ca_cert_pem)
    assert await old_conn.get("/ok") == (200, b"ok")

    second = rotate(tmp_path)
    assert certificates.reload_if_changed() is True

    new_conn = await Connection.open(srv.port, second.ca_cert_pem)
    assert new_conn.serial == second.serial != first.serial
    assert await new_conn.get("/ok") == (200, b"ok")
    # The connection opened before the rotation still answers, several times.
    assert old_conn.serial == first.serial
    for _ in range(3):
        assert await old_conn.get("/ok") == (200, b"ok")
    assert certificates.ssl_context() is context_before
    assert certificates.info is not None
    assert certificates.info.serial == second.serial
    await old_conn.close()
    await new_conn.close()


async def test_a_request_in_flight_during_rotation_completes(
    server: tuple[Server, ServingCertificates, CertBundle], tmp_path: Path
) -> None:
    srv, certificates, first = server
    conn = await Connection.open(srv.port, first.ca_cert_pem)
    pending = asyncio.create_task(conn.get("/slow"))
    await asyncio.sleep(0.05)
    rotate(tmp_path)
    assert certificates.reload_if_changed()
    srv.release.set()
    assert await asyncio.wait_for(pending, 5) == (200, b"slow ok")
    await conn.close()


async def test_unchanged_files_are_not_reloaded(server: tuple[Server, ServingCertificates, CertBundle]) -> None:
    _, certificates, _ = server
    assert certificates.reload_if_changed() is False


async def test_mismatched_pair_keeps_the_old_certificate_and_logs_an_error(
    server: tuple[Server, ServingCertificates, CertBundle], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    srv, certificates, first = server
    other = issue_bundle(SERVICE, NAMESPACE)
    (tmp_path / "tls.key").write_bytes(other.key_pem)  # new key, old certificate
    with caplog.at_level(logging.ERROR, logger="ringroute.certs"):
        assert certificates.reload_if_changed() is False
    assert "mismatched pair" in caplog.text
    assert "keeping serial" in caplog.text
    conn = await Connection.open(srv.port, first.ca_cert_pem)
    assert conn.serial == first.serial
    assert await conn.get("/ok") == (200, b"ok")
    await conn.close()
    # The same bad content is reported once, not on every check.
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="ringroute.certs"):
        assert certificates.reload_if_changed() is False
    assert caplog.text == ""


async def test_half_written_certificate_keeps_the_old_one(
    server: tuple[Server, ServingCertificates, CertBundle], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    srv, certificates, first = server
    second = issue_bundle(SERVICE, NAMESPACE)
    (tmp_path / "tls.key").write_bytes(second.key_pem)
    (tmp_path / "tls.crt").write_bytes(second.cert_pem[: len(second.cert_pem) // 2])
    with caplog.at_level(logging.ERROR, logger="ringroute.certs"):
        assert certificates.reload_if_changed() is False
    assert "not a complete PEM certificate" in caplog.text
    conn = await Connection.open(srv.port, first.ca_cert_pem)
    assert conn.serial == first.serial
    await conn.close()
    # Finishing the write lets the next check load it.
    (tmp_path / "tls.crt").write_bytes(second.cert_pem)
    assert certificates.reload_if_changed() is True
    conn = await Connection.open(srv.port, second.ca_cert_pem)
    assert conn.serial == second.serial
    await conn.close()


def test_missing_files_leave_it_unloaded_until_they_appear(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="ringroute.certs"):
        certificates = ServingCertificates(tmp_path / "later")
    assert certificates.loaded is False
    assert "no certificate loaded" in caplog.text
    issue_bundle(SERVICE, NAMESPACE).write(tmp_path / "later")
    assert certificates.reload_if_changed() is True
    assert certificates.loaded is True


def test_context_refuses_protocols_older_than_tls_1_2(tmp_path: Path) -> None:
    issue_bundle(SERVICE, NAMESPACE).write(tmp_path)
    context = ServingCertificates(tmp_path).ssl_context()
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert context.protocol == ssl.PROTOCOL_TLS_SERVER


async def test_watch_picks_up_rotated_files(
    server: tuple[Server, ServingCertificates, CertBundle], tmp_path: Path
) -> None:
    srv, certificates, _ = server
    watcher = asyncio.create_task(certificates.watch(interval_s=0.02))
    second = rotate(tmp_path)
    for _ in range(200):
        await asyncio.sleep(0.02)
        if certificates.info is not None and certificates.info.serial == second.serial:
            break
    watcher.cancel()
    conn = await Connection.open(srv.port, second.ca_cert_pem)
    assert conn.serial == second.serial
    await conn.close()


@pytest.mark.parametrize("interval", [0.0, -1.0, 61.0])
async def test_watch_rejects_intervals_outside_zero_to_sixty_seconds(tmp_path: Path, interval: float) -> None:
    certificates = ServingCertificates(tmp_path)
    with pytest.raises(ValueError, match=r"^interval_s: "):
        await certificates.watch(interval)
