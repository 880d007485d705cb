"""The servers of `ringroute serve` and `ringroute extender` under their limits (admission.server, extender.server),
over real sockets: admission over TLS, the extender over plain HTTP, both started as the commands start them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support.admission import hold_large_answers, load_example, review
from webhook.cli.serve import ServeOptions, run_extender, run_worker

MIB = 1 << 20
CLOSED_WITHIN_S = 3.0
"""How long a test waits for the server to close a connection before calling it left open."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(autouse=True)
def no_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No API server configuration can be found: admission serves without one, the controller does not start."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.setenv("HOME", str(tmp_path))


@dataclass(frozen=True)
class Server:
    """A running server: where it listens and how to open a connection to it."""

    port: int
    client_ssl: ssl.SSLContext | None

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(
            "127.0.0.1", self.port, ssl=self.client_ssl, server_hostname="127.0.0.1" if self.client_ssl else None
        )


def settings_file(tmp_path: Path, section: str, limits: dict[str, Any], **keys: Any) -> Path:
    path = tmp_path / f"settings-{section}.yaml"
    path.write_text(json.dumps({section: {"server": limits, **keys}}), encoding="utf-8")  # JSON is YAML
    return path


@asynccontextmanager
async def admission(
    tmp_path: Path, tls_material: Path, client_ssl: ssl.SSLContext, *, answer_within_s: float = 4.0, **limits: Any
) -> AsyncIterator[Server]:
    """`ringroute serve` (admission only) with `admission.server` limits, ready on a free port."""
    port = free_port()
    options = ServeOptions(
        host="127.0.0.1",
        port=port,
        cert_dir=tls_material,
        config=settings_file(tmp_path, "admission", limits, answerWithinS=answer_within_s),
        kubeconfig=None,
        workers=1,
        controller=False,
        extender=False,
        extender_listen=None,
        self_signed_secret=None,
    )
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(options, primary=True, stop=stop))
    server = Server(port, client_ssl)
    try:
        await until_listening(server, worker)
        yield server
    finally:
        stop.set()
        assert await asyncio.wait_for(worker, 15) == 0


@asynccontextmanager
async def extender(tmp_path: Path, **limits: Any) -> AsyncIterator[Server]:
    """`ringroute extender` with `extender.server` limits, ready on a free port."""
    port = free_port()
    options = ServeOptions(
        host="127.0.0.1",
        port=0,
        cert_dir=tmp_path,
        config=settings_file(tmp_path, "extender", limits),
        kubeconfig=None,
        workers=1,
        controller=False,
        extender=True,
        extender_listen=f"127.0.0.1:{port}",
        self_signed_secret=None,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(run_extender(options, stop=stop))
    server = Server(port, None)
    try:
        await until_listening(server, task)
        yield server
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 15) == 0


async def until_listening(server: Server, task: asyncio.Task[int]) -> None:
    for _ in range(200):
        assert not task.done(), task
        try:
            _reader, writer = await server.connect()
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return
    raise AssertionError(f"nothing listens on port {server.port}")


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response (with Content-Length): status, headers (lower-case names), body."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    body = await asyncio.wait_for(reader.readexactly(int(headers.get("content-length", "0"))), 10)
    return int(status_line.split()[1]), headers, body


async def get(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str) -> int:
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    await writer.drain()
    status, _, _ = await read_response(reader)
    return status


async def closed_after(reader: asyncio.StreamReader, limit_s: float = CLOSED_WITHIN_S) -> float | None:
    """Seconds until the server closes the connection (None: still open after `limit_s`); reads what comes."""
    started = time.monotonic()
    deadline = started + limit_s
    while (left := deadline - time.monotonic()) > 0:
        try:
            data = await asyncio.wait_for(reader.read(65536), left)
        except TimeoutError:
            return None
        except (ConnectionError, ssl.SSLError):
            return time.monotonic() - started
        if not data:
            return time.monotonic() - started
    return None


def validate_request(body_length: int | None = None) -> tuple[bytes, bytes]:
    """Headers and body of a POST /jobs/validate with the documented job."""
    body = orjson.dumps(review(load_example("documented.yaml"), uid="limits"))
    length = len(body) if body_length is None else body_length
    head = (
        f"POST /jobs/validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()
    return head, body


async def test_at_the_connection_cap_the_connection_idle_longest_makes_room_for_a_new_one(
    tmp_path: Path, tls_material: Path, client_ssl: ssl.SSLContext
) -> None:
    async with admission(tmp_path, tls_material, client_ssl, maxConnections=3, keepAliveTimeoutS=60) as server:
        connections = []
        for _ in range(3):
            reader, writer = await server.connect()
            assert await get(reader, writer, "/healthz") == 200
            connections.append((reader, writer))
            await asyncio.sleep(0.05)  # a clear order of idleness: the first is idle longest
        newcomer = await asyncio.wait_for(server.connect(), 5)
        head, body = validate_request()
        newcomer[1].write(head + body)
        started = time.monotonic()
        status, _, answer = await read_response(newcomer[0])
        assert status == 200
        assert orjson.loads(answer)["response"]["uid"] == "limits"
        assert time.monotonic() - started < 2.0
        assert await closed_after(connections[0][0], 1.0) is not None  # evicted
        for reader, writer in connections[1:]:
            assert await get(reader, writer, "/healthz") == 200  # kept
        for _, writer in [*connections, newcomer]:
            writer.close()


async def test_the_extender_at_its_cap_closes_the_connection_idle_longest_and_spares_a_busy_one(
    tmp_path: Path,
) -> None:
    async with extender(tmp_path, maxConnections=3, keepAliveTimeoutS=60) as server:
        body = b'{"nodes":[],"task":null}'
        busy_reader, busy = await server.connect()
        busy.write(b"POST /extender/prioritize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n{" % len(body))
        await busy.drain()  # its body is still coming: not idle, never evicted
        idle = []
        for _ in range(2):
            reader, writer = await server.connect()
            assert await get(reader, writer, "/extender/healthz") == 200
            idle.append((reader, writer))
            await asyncio.sleep(0.05)
        newcomer = await asyncio.wait_for(server.connect(), 5)
        assert await asyncio.wait_for(get(*newcomer, "/extender/healthz"), 2.0) == 200
        assert await closed_after(idle[0][0], 1.0) is not None  # evicted: idle longest
        assert await get(*idle[1], "/extender/healthz") == 200  # kept
        busy.write(body[1:])
        status, _, answer = await read_response(busy_reader)
        assert (status, orjson.loads(answer)["error"]) == (
            400,
            "task: missing; a Volcano extender request has 'task' at the top level",
        )
        for _, writer in [*idle, newcomer, (busy_reader, busy)]:
            writer.close()


async def test_a_client_trickling_its_headers_is_cut_after_the_header_timeout(
    tmp_path: Path, tls_material: Path, client_ssl: ssl.SSLContext
) -> None:
    async def trickle(server: Server) -> float | None:
        reader, writer = await server.connect()
        writer.write(b"GET /healthz HTTP/1.1\r\n")
        started = time.monotonic()

        async def one_byte_at_a_time() -> None:
            for _ in range(40):
                await asyncio.sleep(0.1)
                writer.write(b"X")

        dripping = asyncio.create_task(one_byte_at_a_time())
        try:
            closed = await closed_after(reader)
        finally:
            dripping.cancel()
            writer.close()
        return None if closed is None else time.monotonic() - started

    async with admission(tmp_path, tls_material, client_ssl, headerTimeoutS=0.5) as server:
        cut = await trickle(server)
        assert cut is not None
        assert 0.4 <= cut < 1.5
        # A connection that sends nothing after its TLS handshake, or never starts one, is cut alike.
        reader, writer = await server.connect()
        silent = await closed_after(reader)
        assert silent is not None
        assert silent < 1.5
        writer.close()
        raw_reader, raw_writer = await asyncio.open_connection("127.0.0.1", server.port)
        no_handshake = await closed_after(raw_reader)
        assert no_handshake is not None
        assert no_handshake < 1.5
        raw_writer.close()
    async with extender(tmp_path, headerTimeoutS=0.5) as server:
        cut = await trickle(server)
        assert cut is not None
        assert 0.4 <= cut < 1.5


async def test_a_slow_body_is_answered_408_and_cut_after_the_body_timeout(
    tmp_path: Path, tls_material: Path, client_ssl: ssl.SSLContext
) -> None:
    async def slow_body(server: Server, head: bytes, first: bytes) -> tuple[int, float | None]:
        reader, writer = await server.connect()
        writer.write(head + first)
        started = time.monotonic()
        status, _, _ = await read_response(reader)
        took = time.monotonic() - started
        closed = await closed_after(reader)
        writer.close()
        assert closed is not None
        return status, took

    async with admission(tmp_path, tls_material, client_ssl, bodyTimeoutS=0.5) as server:
        head, body = validate_request()
        status, took = await slow_body(server, head, body[:100])
        assert status == 408
        assert took is not None
        assert 0.4 <= took < 1.5
    async with extender(tmp_path, bodyTimeoutS=0.5) as server:
        head = (
            b"POST /extender/predicate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 5000\r\n\r\n"
        )
        status, took = await slow_body(server, head, b'{"task": ')
        assert status == 408
        assert took is not None
        assert 0.4 <= took < 1.5


async def test_idle_connections_are_closed_after_the_keep_alive_timeout_and_not_before(
    tmp_path: Path, tls_material: Path, client_ssl: ssl.SSLContext
) -> None:
    async with admission(tmp_path, tls_material, client_ssl, headerTimeoutS=0.3, keepAliveTimeoutS=1.2) as server:
        reader, writer = await server.connect()
        # The body arrives after the handler started reading it: body bytes, not a next request's headers, so
        # the header timeout (0.3 s) does not apply to the idle connection afterwards.
        head, body = validate_request()
        writer.write(head)
        await asyncio.sleep(0.1)
        writer.write(body)
        status, _, _ = await read_response(reader)
        assert status == 200
        await asyncio.sleep(0.6)  # idle past the header timeout, within the keep-alive timeout
        assert await get(reader, writer, "/healthz") == 200
        started = time.monotonic()
        closed = await closed_after(reader)
        assert closed is not None
        assert 1.0 <= time.monotonic() - started < 2.5
        writer.close()
    async with extender(tmp_path, keepAliveTimeoutS=0.5) as server:
        reader, writer = await server.connect()
        assert await get(reader, writer, "/extender/healthz") == 200
        closed = await closed_after(reader)
        assert closed is not None
        assert 0.4 <= closed < 1.5
        writer.close()


@pytest.fixture
def large_answers_wait(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Large requests wait in the worker thread until the returned event is set."""
    release = hold_large_answers(monkeypatch)
    yield release
    release.set()


def review_of_bytes(size: int, uid: str) -> bytes:
    """A /jobs/validate review of the documented job carrying an annotation that makes it `size` bytes."""
    job = load_example("documented.yaml")
    job["metadata"]["annotations"] = {"padding": ""}
    body = orjson.dumps(review(job, uid=uid))
    job["metadata"]["annotations"]["padding"] = "p" * (size - len(body))
    return orjson.dumps(review(job, uid=uid))


def posted(body: bytes) -> bytes:
    return (
        f"POST /jobs/validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def test_a_large_body_without_room_by_its_deadline_is_answered_429_while_small_reviews_are_not_held_up(
    tmp_path: Path, tls_material: Path, client_ssl: ssl.SSLContext, large_answers_wait: threading.Event
) -> None:
    async with admission(tmp_path, tls_material, client_ssl, answer_within_s=1.0, bodyBufferMib=7) as server:
        first_reader, first = await server.connect()
        first.write(posted(review_of_bytes(5 * MIB, "first")))  # read, then held in the worker with its room
        await asyncio.sleep(0.5)
        second_reader, second = await server.connect()
        second.write(posted(review_of_bytes(3 * MIB, "second")))  # 5 + 3 MiB do not fit in 7 (2 kept for small)
        started = time.monotonic()
        second_answer = asyncio.create_task(read_response(second_reader))
        small_reader, small = await server.connect()
        head, body = validate_request()
        small.write(head + body)
        status, _, answer = await read_response(small_reader)
        assert (status, orjson.loads(answer)["response"]["uid"]) == (200, "limits")
        assert not second_answer.done(), "the small review was read and answered while the large one waits"
        status, headers, answer = await second_answer
        waited = time.monotonic() - started
        assert status == 429
        assert "retry-after" not in headers, "too late to retry within the webhook's timeout"
        assert orjson.loads(answer) == {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "code": 429,
            "reason": "TooManyRequests",
            "message": f"ringroute is busy: it could not read this {3 * MIB}-byte request within 1 s "
            "(admission.answerWithinS); retry in a few seconds",
        }
        assert 0.8 <= waited < 3.0
        assert await closed_after(second_reader) is not None
        large_answers_wait.set()
        status, _, answer = await read_response(first_reader)
        assert (status, orjson.loads(answer)["response"]["uid"]) == (200, "first")
        for writer in (first, second, small):
            writer.close()


async def test_a_refused_request_whose_body_keeps_coming_gets_its_answer_and_is_then_closed(
    tmp_path: Path, tls_material: Path, client_ssl: ssl.SSLContext
) -> None:
    async with admission(tmp_path, tls_material, client_ssl) as server:
        reader, writer = await server.connect()
        writer.write(
            b"POST /jobs/validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (8 * MIB)
        )

        async def keep_sending() -> None:
            with contextlib.suppress(ConnectionError):
                for _ in range(64):
                    writer.write(b" " * (128 * 1024))
                    await writer.drain()

        sending = asyncio.create_task(keep_sending())
        status, _, answer = await read_response(reader)
        assert status == 413
        assert "the limit is 7340032" in orjson.loads(answer)["message"]
        assert await closed_after(reader) is not None, "closed once it dropped what lingering allows"
        sending.cancel()
        writer.close()


async def test_at_the_cap_a_connection_that_has_sent_nothing_yet_makes_room_only_once_a_second_old(
    tmp_path: Path, tls_material: Path, client_ssl: ssl.SSLContext
) -> None:
    async with admission(tmp_path, tls_material, client_ssl, maxConnections=2) as server:
        fresh = [await server.connect() for _ in range(2)]
        opened = time.monotonic()
        newcomer_reader, newcomer = await asyncio.wait_for(server.connect(), 5)
        head, body = validate_request()
        newcomer.write(head + body)
        status, _, _ = await read_response(newcomer_reader)
        assert status == 200
        assert 0.8 <= time.monotonic() - opened < 3.0, "it waited for the oldest to be a second old"
        assert await closed_after(fresh[0][0], 1.0) is not None  # the oldest made room
        for _, writer in [*fresh, (newcomer_reader, newcomer)]:
            writer.close()
