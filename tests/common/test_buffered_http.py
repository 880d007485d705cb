"""The extender's HTTP/1.1 server over real sockets: framing (pipelining, bodies in any pieces), refusals (400,
404, 405, 411, 413, 431), Expect: 100-continue, HTTP/1.0, handler failures, the shared body buffer."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.common import buffered_http
from webhook.common.buffered_http import BufferedServer, Endpoint, Reply, Request
from webhook.common.settings import ServerLimits

MIB = 1 << 20


def echo(request: Request) -> Reply:
    body = bytes(request.body)
    return Reply(200, json.dumps({"bytes": len(body), "sha": hashlib.sha256(body).hexdigest()}).encode())


def fail(_request: Request) -> Reply:
    raise RuntimeError("boom")


def routes(refused: list[tuple[int, int]] | None = None) -> dict[str, Endpoint]:
    def on_refused(status: int, length: int) -> None:
        if refused is not None:
            refused.append((status, length))

    return {
        "/echo": Endpoint(echo, max_body=4 * MIB, on_refused=on_refused),
        "/fail": Endpoint(fail, max_body=1024),
        "/ok": Endpoint(lambda _r: Reply(200, b"ok", "text/plain"), methods=frozenset({"GET"})),
    }


async def start(limits: ServerLimits | None = None, refused: list[tuple[int, int]] | None = None) -> BufferedServer:
    return await buffered_http.serve(
        routes(refused), "127.0.0.1", 0, limits or ServerLimits(), keep_buffer_bytes=8 * MIB
    )


@pytest.fixture
async def server() -> AsyncIterator[BufferedServer]:
    served = await start()
    yield served
    await served.close(grace_s=0.5)


def post(path: str, body: bytes, *extra: str) -> bytes:
    head = [f"POST {path} HTTP/1.1", "Host: x", f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def read_answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return status, headers, body


async def closed(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), 5) == b""
    except ConnectionResetError:
        return True


def digest(body: bytes) -> dict[str, Any]:
    return {"bytes": len(body), "sha": hashlib.sha256(body).hexdigest()}


async def test_pipelined_requests_with_bodies_in_any_pieces_are_answered_in_order(server: BufferedServer) -> None:
    bodies = [b"a" * 10, b"", b"x" * (2 * MIB + 3), b"{}"]
    stream = b"".join(post("/echo", body) for body in bodies) + b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n"
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    for start_at in range(0, len(stream), 7919):  # pieces that cut heads and bodies anywhere
        writer.write(stream[start_at : start_at + 7919])
    await writer.drain()
    for body in bodies:
        status, _, answer = await read_answer(reader)
        assert (status, json.loads(answer)) == (200, digest(body))
    assert (await read_answer(reader))[::2] == (200, b"ok")
    writer.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    bodies=st.lists(st.binary(max_size=3000), min_size=1, max_size=4),
    cuts=st.lists(st.integers(min_value=1, max_value=5000), min_size=1, max_size=30),
)
async def test_any_split_of_a_request_stream_gives_the_same_answers(
    server: BufferedServer, bodies: list[bytes], cuts: list[int]
) -> None:
    stream = b"".join(post("/echo", body) for body in bodies)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    at = 0
    for cut in cuts:
        writer.write(stream[at : at + cut])
        await writer.drain()
        at += cut
    writer.write(stream[at:])
    await writer.drain()
    for body in bodies:
        status, _, answer = await read_answer(reader)
        assert (status, json.loads(answer)) == (200, digest(body))
    writer.close()


@pytest.mark.parametrize(
    ("request_bytes", "status", "message"),
    [
        (b"GET /missing HTTP/1.1\r\nHost: x\r\n\r\n", 404, "/missing: not found"),
        (b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n", 405, "method not allowed (POST)"),
        (b"POST /echo HTTP/1.1\r\nHost: x\r\n\r\n", 411, "Content-Length is required"),
        (
            b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
            411,
            "Content-Length is required",
        ),
        (post("/echo", b"", f"X: {'y' * 5}").replace(b"Content-Length: 0", b"Content-Length: 99999999"), 413, "over"),
        (b"POST /echo HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400, "request head"),
        (b"BREW /echo HTCPCP/1.0\r\n\r\n", 400, "request head"),
        (b"GET /ok HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", 400, "upgrades"),
    ],
)
async def test_requests_it_cannot_serve_get_a_status_naming_why_and_the_connection_closes(
    server: BufferedServer, request_bytes: bytes, status: int, message: str
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(request_bytes)
    answer_status, headers, body = await read_answer(reader)
    assert answer_status == status
    assert message in json.loads(body)["error"]
    assert headers["connection"] == "close"
    if status == 405:
        assert headers["allow"] == "POST"
    assert await closed(reader)
    writer.close()


async def test_a_head_longer_than_64_kib_is_refused_with_431(server: BufferedServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET /ok HTTP/1.1\r\nX-Long: " + b"a" * (70 * 1024))
    status, _, _ = await read_answer(reader)
    assert status == 431
    assert await closed(reader)
    writer.close()


async def test_refusals_of_a_body_are_reported_to_the_endpoint() -> None:
    refused: list[tuple[int, int]] = []
    served = await start(refused=refused)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
        writer.write(b"POST /echo HTTP/1.1\r\nContent-Length: 9999999\r\n\r\n")
        assert (await read_answer(reader))[0] == 413
        writer.close()
        assert refused == [(413, 9999999)]
    finally:
        await served.close(grace_s=0.5)


async def test_head_expect_continue_http10_and_handler_failures(server: BufferedServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"HEAD /ok HTTP/1.1\r\nHost: x\r\n\r\n")
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 200 OK")
    assert b"Content-Length: 2" in head
    writer.write(b"POST /echo HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
    assert await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5) == b"HTTP/1.1 100 Continue\r\n\r\n"
    writer.write(b"{}")
    assert (await read_answer(reader))[0] == 200
    writer.write(post("/fail", b"{}"))
    status, headers, _ = await read_answer(reader)
    assert status == 500
    assert "connection" not in headers, "a failing handler does not cost the connection"
    writer.write(post("/echo", b"{}"))
    assert (await read_answer(reader))[0] == 200
    writer.close()

    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET /ok HTTP/1.0\r\n\r\n")
    status, headers, _ = await read_answer(reader)
    assert (status, headers["connection"]) == (200, "close")
    assert await closed(reader)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET /ok HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    assert (await read_answer(reader))[1]["connection"] == "keep-alive"
    writer.write(b"GET /ok HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert (await read_answer(reader))[1]["connection"] == "close"
    assert await closed(reader)
    writer.close()


async def test_a_body_waits_for_room_in_the_body_buffer_until_a_body_completes_or_times_out() -> None:
    limits = ServerLimits(body_buffer_mib=1, body_timeout_s=0.5)
    refused: list[tuple[int, int]] = []
    served = await start(limits, refused)
    try:
        body = b"z" * (700 * 1024)
        first_reader, first = await asyncio.open_connection("127.0.0.1", served.port)
        first.write(post("/echo", body)[:-10])  # holds room for its body, not complete
        await first.drain()
        await asyncio.sleep(0.1)
        second_reader, second = await asyncio.open_connection("127.0.0.1", served.port)
        second.write(post("/echo", body))
        await second.drain()
        await asyncio.sleep(0.1)
        first.write(body[-10:])  # the first completes: its room goes to the second
        assert json.loads((await read_answer(first_reader))[2]) == digest(body)
        assert json.loads((await read_answer(second_reader))[2]) == digest(body)

        first.write(post("/echo", body)[:-10])
        await first.drain()
        await asyncio.sleep(0.1)
        second.write(post("/echo", body))
        await second.drain()
        assert (await read_answer(first_reader))[0] == 408, "its body did not complete within the body timeout"
        assert await closed(first_reader)
        status, _, answer = await read_answer(second_reader)
        assert (status, json.loads(answer)) == (200, digest(body)), "the room the late body held is given on"
        assert refused == [(408, len(body))]
        assert served.limiter._buffered == 0, "room is given back"
        first.close()
        second.close()
    finally:
        await served.close(grace_s=0.5)


async def test_a_client_gone_mid_body_gives_back_its_room_and_buffer(server: BufferedServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(post("/echo", b"q" * (3 * MIB))[: 2 * MIB])
    await writer.drain()
    await asyncio.sleep(0.1)
    assert server.limiter._buffered > 0
    writer.close()
    for _ in range(50):
        if server.limiter.open == 0:
            break
        await asyncio.sleep(0.02)
    assert (server.limiter.open, server.limiter._buffered) == (0, 0)
    assert server.buffers.take(3 * MIB) is not None
    del reader


REQUEST_LINES = [
    b"POST /echo HTTP/1.1\r\n",
    b"POST /fail HTTP/1.1\r\n",
    b"GET /ok HTTP/1.1\r\n",
    b"GET /ok HTTP/1.0\r\n",
    b"HEAD /ok HTTP/1.1\r\n",
    b"PUT /echo HTTP/1.1\r\n",
    b"GET /nothing HTTP/1.1\r\n",
    b"POST http://x/echo?q=1 HTTP/1.1\r\n",
    b"POST /echo HTTP/9.9\r\n",
    b"\x00\xff /echo\r\n",
]
HEADER_LINES = [
    b"Content-Length: 3\r\n",
    b"Content-Length: 0\r\n",
    b"Content-Length: -1\r\n",
    b"Content-Length: 99999999999999999999999\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"Expect: 100-continue\r\n",
    b"Connection: close\r\n",
    b"Connection: keep-alive\r\n",
    b"Host: x\r\n",
    b"X: \x01\r\n",
    b"no colon\r\n",
]
requests = st.builds(
    lambda line, headers, body: line + b"".join(headers) + b"\r\n" + body,
    st.sampled_from(REQUEST_LINES),
    st.lists(st.sampled_from(HEADER_LINES), max_size=4),
    st.binary(max_size=8),
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stream=st.lists(st.one_of(requests, st.binary(max_size=40)), max_size=5))
async def test_any_bytes_get_answers_or_a_close_and_leave_nothing_behind(
    server: BufferedServer, caplog: pytest.LogCaptureFixture, stream: list[bytes]
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"".join(stream))
    await writer.drain()
    writer.write_eof()
    received = b""
    try:
        while chunk := await asyncio.wait_for(reader.read(65536), 5):
            received += chunk
    except ConnectionResetError:
        pass
    for line in received.split(b"\r\n"):
        if line.startswith(b"HTTP/"):
            assert int(line.split()[1]) in {100, 200, 400, 404, 405, 411, 413, 431, 500}, received
    writer.close()
    for _ in range(100):
        if server.limiter.open == 0:
            break
        await asyncio.sleep(0.01)
    assert (server.limiter.open, server.limiter._buffered) == (0, 0), "every connection and its body room released"
    assert not [r for r in caplog.records if r.name == "asyncio"], "no exception escaped into the event loop"
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await read_answer(reader))[::2] == (200, b"ok")
    writer.close()
