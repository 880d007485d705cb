"""An HTTP/1.1 server that receives each request body straight into one kept buffer (the extender's server).

A 10,000-node prioritize call is a 16 MB body. aiohttp receives a body in 256 KiB pieces of fresh memory, its
parser copies each piece, its stream queues them and the handler copies them again: at that size the copies and
the page faults of fresh memory cost as much as decoding the body. Here the request head is parsed by httptools
(llhttp, the parser aiohttp and Node.js use) and the body, framed by its Content-Length, is received by the kernel
directly into a buffer kept between calls (`asyncio.BufferedProtocol`): one copy, into memory already mapped.

The server keeps the limits of `webhook.common.http_server` (ServerLimits, with the same ConnectionLimiter):
a connection cap that closes the connection idle longest to make room; a request head within `header_timeout_s`
of its first byte (of the connection, for the first request); a body within `body_timeout_s` of its head, inside
the shared body buffer, else 408 and the connection closed; idle connections closed after
`keep_alive_timeout_s`. A body must have a Content-Length (411 otherwise; Volcano's Go client always sends one)
within the endpoint's limit (413 from the header, unread, the connection closed).

Endpoints are synchronous: the extender's work is CPU-bound and short, so each runs on the event loop as soon as
its body is complete, one request per connection at a time (pipelined requests are answered in order).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import http
import logging
import mmap
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import httptools
import orjson

from webhook.common.http_server import (
    BUSY,
    HEADERS,
    IDLE,
    LINGER_S,
    BodyTimeoutError,
    ConnectionLimiter,
    LimitedConnection,
    accept_connections,
    ensure_open_files,
    listening_sockets,
)
from webhook.common.settings import ServerLimits

log = logging.getLogger("ringroute.http")

LINGER_BYTES = 4 * 2**20
"""How much a refused request's connection drops while it lingers (LINGER_S) before it is closed: plain HTTP, where
a byte dropped costs only its copy."""

MAX_HEAD_BYTES = 64 * 1024
"""Longest request head (request line and headers) read; a longer one is answered 431 (Go's servers allow 1 MiB,
kube-apiserver's requests to a webhook and Volcano's to an extender send well under 1 KiB)."""


@dataclass(frozen=True, slots=True)
class Request:
    """A request whose body has arrived: `body` is a view of the receive buffer, valid during the call only."""

    method: str
    path: str
    body: memoryview
    started: float
    """time.perf_counter() when the head was read (request latency counts from there, as aiohttp's handlers did)."""


@dataclass(frozen=True, slots=True)
class Reply:
    """An answer: status, body, content type; `close` ends the connection once it is sent."""

    status: int
    body: bytes = b""
    content_type: str = "application/json"
    close: bool = False


@dataclass(frozen=True, slots=True)
class Endpoint:
    """What a path answers: `handle` for `methods` (GET implies HEAD), bodies up to `max_body` bytes;
    `on_refused(status, content_length)` hears of requests refused before `handle` (408, 411, 413)."""

    handle: Callable[[Request], Reply]
    methods: frozenset[str] = frozenset({"POST"})
    max_body: int = 0
    on_refused: Callable[[int, int], None] | None = None


Buffer = bytearray | mmap.mmap
"""A receive buffer: bytearray for small bodies, an anonymous mapping for large ones."""

_POPULATE = getattr(mmap, "MAP_POPULATE", 0)


class ReceiveBuffer:
    """Keeps the buffer of the largest body read so far (up to `keep_bytes`) for the next large body.

    A fresh multi-megabyte buffer is memory the kernel maps page by page as it is first written, one fault per
    4 KiB page: at 10,000 candidates (16 MB) that costs more than receiving the body. Calls that size come one after
    another from one scheduler, so one kept buffer serves them; a body arriving while it is in use gets a buffer of
    its own. Large buffers are anonymous mappings populated at once (MAP_POPULATE: half the cost of faulting a
    zero-filled bytearray in page by page, 140 against 280 ms for a 249 MiB onSessionOpen) and unmapped as soon as
    they are given back, so a large body's memory leaves with it.
    """

    SMALL_BYTES = 1 << 20
    """Bodies below this get a bytearray of their own (cheap), and never displace the kept buffer."""

    def __init__(self, keep_bytes: int) -> None:
        self.keep_bytes = keep_bytes
        self._idle: Buffer | None = None

    def take(self, length: int) -> Buffer:
        """A buffer of at least `length` bytes, owned by the caller until `give_back`."""
        if length < self.SMALL_BYTES:
            return bytearray(length)
        kept = self._idle
        if kept is not None and len(kept) >= length:
            self._idle = None
            return kept
        return mmap.mmap(-1, length, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _POPULATE)

    def give_back(self, buffer: Buffer) -> None:
        """Return a buffer from `take` once no view of it is left."""
        dropped: Buffer | None = buffer
        if self.SMALL_BYTES <= len(buffer) <= self.keep_bytes and (self._idle is None or len(buffer) > len(self._idle)):
            dropped, self._idle = self._idle, buffer  # the larger is kept
        if isinstance(dropped, mmap.mmap):
            with contextlib.suppress(BufferError):  # a view of it is still alive: unmapped when that goes
                dropped.close()


class _Head:
    """httptools callbacks: the request target, headers, method and keep-alive of one request head (read when
    the head is complete: llhttp resets them once a message without a body ends)."""

    __slots__ = ("complete", "headers", "http10", "keep_alive", "method", "parser", "url")

    def __init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.complete = False
        self.method = b""
        self.keep_alive = False
        self.http10 = False

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.complete = True
        self.method = self.parser.get_method()
        self.keep_alive = self.parser.should_keep_alive()
        self.http10 = self.parser.get_http_version() == "1.0"


class _BadRequestError(ValueError):
    """A request head that cannot be served: answered with `status` and the connection closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class BufferedConnection(LimitedConnection, asyncio.BufferedProtocol):
    """One client connection of a BufferedServer."""

    def __init__(self, server: BufferedServer) -> None:
        self.server = server
        self.limiter = server.limiter
        self.limits = server.limiter.limits
        self.transport: asyncio.Transport | None = None
        self.state = IDLE
        self.released = False
        self.timer: asyncio.TimerHandle | None = None
        self.head = bytearray(MAX_HEAD_BYTES)
        self.head_len = 0
        self.scanned = 0
        """Bytes of `head` already searched for the end of the head."""
        # The request whose body is being received.
        self.endpoint: Endpoint | None = None
        self.method = ""
        self.path = ""
        self.keep_alive = True
        self.http10 = False
        self.started = 0.0
        self.buffer: Buffer | None = None
        self.view: memoryview | None = None
        self.length = 0
        self.filled = 0
        self.held: int | None = None
        """Bytes of the server's body buffer held for this body."""
        self.waiting: asyncio.Task[None] | None = None
        """Waiting for room in the body buffer (reading paused meanwhile)."""
        self.pipelined = b""
        """Bytes of the next request that arrived with this one's head."""
        self.closing = False
        self.lingering = -1
        """Bytes dropped after a refusal (-1: not lingering)."""
        self.reading_paused: set[str] = set()

    # -- asyncio.BufferedProtocol ----------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.limiter.idle(self)
        self.arm(self.limits.header_timeout_s, self.headers_late)

    def get_buffer(self, sizehint: int) -> memoryview:  # noqa: ARG002 (the body's length decides)
        if self.lingering >= 0:
            return memoryview(self.head)
        if self.view is not None:
            return self.view[self.filled : self.length]
        return memoryview(self.head)[self.head_len :]

    def buffer_updated(self, nbytes: int) -> None:
        if self.lingering >= 0:
            self.lingering += nbytes
            if self.lingering > LINGER_BYTES:
                self.abort("linger_limit")
            return
        if self.closing:
            return
        if self.view is not None:
            self.filled += nbytes
            if self.filled >= self.length:
                self._dispatch()
            return
        if self.state == IDLE:
            self.limiter.busy(self, HEADERS)
            self.arm(self.limits.header_timeout_s, self.headers_late)
        self.head_len += nbytes
        self._read_head()

    def eof_received(self) -> bool | None:
        return False

    def connection_lost(self, exc: Exception | None) -> None:  # noqa: ARG002 (nothing to report)
        self.closing = True
        self.disarm()
        if self.waiting is not None:
            self.waiting.cancel()
            self.waiting = None
        self._drop_body()
        self.limiter.release(self)
        self.server.connections.discard(self)
        self.transport = None

    def pause_writing(self) -> None:
        self._pause("writing")  # a client that does not read its answers gets no more of them

    def resume_writing(self) -> None:
        self._resume("writing")

    # -- requests ----------------------------------------------------------------------------------------------------

    def _read_head(self) -> None:
        end = self.head.find(b"\r\n\r\n", max(0, self.scanned - 3), self.head_len)
        if end < 0:
            self.scanned = self.head_len
            if self.head_len >= len(self.head):
                self._refuse(431, f"request head: over {MAX_HEAD_BYTES // 1024} KiB", None)
            return
        size = end + 4
        try:
            self._start_request(memoryview(self.head)[:size])
        except _BadRequestError as exc:
            self._refuse(exc.status, str(exc), self.endpoint)
            return
        # Bytes after the head: the body's first bytes, then (pipelining) the next request's.
        after = bytes(memoryview(self.head)[size : self.head_len])
        self.head_len = self.scanned = 0
        if self.view is None:  # waiting for room in the body buffer
            self.pipelined = after
            return
        self._take_body_bytes(after)

    def _start_request(self, raw_head: memoryview) -> None:
        self.method = self.path = ""
        self.endpoint = None
        self.length = 0
        head = _Head()
        try:
            head.parser.feed_data(raw_head)
        except httptools.HttpParserUpgrade:
            raise _BadRequestError(400, "request: protocol upgrades are not served") from None
        except httptools.HttpParserError as exc:
            raise _BadRequestError(400, f"request head: {exc}") from None
        if not head.complete:
            raise _BadRequestError(400, "request head: incomplete")
        self.started = time.perf_counter()
        self.method = head.method.decode("ascii", "replace")
        self.keep_alive = head.keep_alive
        self.http10 = head.http10
        try:
            self.path = httptools.parse_url(head.url).path.decode("latin-1")
        except httptools.HttpParserInvalidURLError:
            raise _BadRequestError(400, "request target: not a path") from None
        self.disarm()
        self.limiter.busy(self, BUSY)
        headers = dict(head.headers)
        endpoint = self.server.routes.get(self.path)
        self.endpoint = endpoint
        if endpoint is None:
            raise _BadRequestError(404, f"{self.path}: not found")
        allowed = endpoint.methods | ({"HEAD"} if "GET" in endpoint.methods else set())
        if self.method not in allowed:
            raise _BadRequestError(405, f"{self.method} {self.path}: method not allowed ({', '.join(sorted(allowed))})")
        if b"transfer-encoding" in headers or (self.method == "POST" and b"content-length" not in headers):
            raise _BadRequestError(411, "body: Content-Length is required (Volcano always sends it)")
        # llhttp has checked the value: digits only, and one value however often the header repeats.
        length = self.length = int(headers.get(b"content-length", b"0"))
        self.filled = 0
        if length > endpoint.max_body:
            raise _BadRequestError(413, f"body: {length} bytes is over the {_shown(endpoint.max_body)} limit")
        held = self.limiter.try_reserve_body(length)
        if held is None:
            self._pause("room")
            self.waiting = asyncio.get_running_loop().create_task(self._wait_for_room(length))
        else:
            self._open_body(held)
        if headers.get(b"expect", b"").lower() == b"100-continue" and self.transport is not None:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _open_body(self, held: int) -> None:
        self.held = held
        self.buffer = self.server.buffers.take(self.length)
        self.view = memoryview(self.buffer)
        self.arm(self.limits.body_timeout_s, self._body_late)

    async def _wait_for_room(self, length: int) -> None:
        deadline = asyncio.get_running_loop().time() + self.limits.body_timeout_s
        try:
            held = await self.limiter.reserve_body(length, deadline)
        except BodyTimeoutError:
            self.waiting = None
            self.limiter.body_timeouts += 1
            self._refuse(408, f"the request body did not arrive within {self.limits.body_timeout_s:g} s", self.endpoint)
            return
        self.waiting = None
        if self.closing:
            self.limiter.release_body(held)
            return
        self._open_body(held)
        after, self.pipelined = self.pipelined, b""
        self._resume("room")
        self._take_body_bytes(after)

    def _take_body_bytes(self, after: bytes) -> None:
        """Bytes received with the head: the body's start; what is beyond the body waits for its turn."""
        assert self.view is not None
        taken = min(len(after), self.length)
        self.view[:taken] = after[:taken]
        self.filled = taken
        self.pipelined = after[taken:]
        if self.filled >= self.length:
            self._dispatch()

    def _dispatch(self) -> None:
        """The body is complete: answer, then read the next request."""
        self.disarm()
        endpoint, view = self.endpoint, self.view
        assert endpoint is not None
        assert view is not None
        body = view[: self.length]
        try:
            reply = endpoint.handle(Request(self.method, self.path, body, self.started))
        except Exception:
            log.exception("event=request_failed method=%s path=%s", self.method, self.path)
            reply = Reply(500, b'{"error":"internal error"}')
        finally:
            body.release()
            self._drop_body()
        self._send(reply)
        if self.closing:
            return
        self.endpoint = None
        self.state = IDLE
        self.limiter.idle(self)
        self.arm(self.limits.keep_alive_timeout_s, self._idle_too_long)
        pipelined, self.pipelined = self.pipelined, b""
        if pipelined:  # the next request's bytes are here already: read them as if just received
            self.head[: len(pipelined)] = pipelined
            self.limiter.busy(self, HEADERS)
            self.arm(self.limits.header_timeout_s, self.headers_late)
            self.head_len = len(pipelined)
            self._read_head()

    def _drop_body(self) -> None:
        if self.view is not None:
            self.view.release()
            self.view = None
        if self.buffer is not None:
            self.server.buffers.give_back(self.buffer)
            self.buffer = None
        if self.held is not None:
            self.limiter.release_body(self.held)
            self.held = None

    def _send(self, reply: Reply, *, linger: bool = False) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            self.closing = True
            return
        close = reply.close or not self.keep_alive
        phrase = http.HTTPStatus(reply.status).phrase
        head = [
            f"HTTP/1.1 {reply.status} {phrase}",
            f"Date: {_http_date()}",
            f"Content-Type: {reply.content_type}",
            f"Content-Length: {len(reply.body)}",
        ]
        if close:
            head.append("Connection: close")
        elif self.http10:
            head.append("Connection: keep-alive")
        if reply.status == 405 and self.endpoint is not None:
            methods = self.endpoint.methods | ({"HEAD"} if "GET" in self.endpoint.methods else set())
            head.append(f"Allow: {', '.join(sorted(methods))}")
        payload = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
        transport.write(payload if self.method == "HEAD" else payload + reply.body)
        if close:
            self.closing = True
            self.disarm()
            if linger and transport.can_write_eof():
                # Half-close once the answer is out, read what the client still sends, close when it does.
                transport.write_eof()
                self.lingering = 0
                self._resume_all()
                self.arm(LINGER_S, lambda: self.abort("linger_timeout"))
                return
            transport.close()  # after what is buffered (the answer) is written

    def _refuse(self, status: int, message: str, endpoint: Endpoint | None) -> None:
        """Answer without reading the rest of the request, and close the connection."""
        log.info("event=request_refused status=%d path=%s error=%r", status, self.path or "-", message[:300])
        if endpoint is not None and endpoint.on_refused is not None and status in (408, 411, 413):
            endpoint.on_refused(status, self.length)
        self._drop_body()
        self.pipelined = b""
        self._send(Reply(status, orjson.dumps({"error": message}), close=True), linger=True)

    # -- timers and flow -------------------------------------------------------------------------------------------

    def _body_late(self) -> None:
        self.timer = None
        self.limiter.body_timeouts += 1
        self._refuse(408, f"the request body did not arrive within {self.limits.body_timeout_s:g} s", self.endpoint)

    def _idle_too_long(self) -> None:
        self.timer = None
        if self.state == IDLE and self.transport is not None:
            self.closing = True
            self.transport.close()

    def _pause(self, why: str) -> None:
        if not self.reading_paused and self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()
        self.reading_paused.add(why)

    def _resume_all(self) -> None:
        for why in list(self.reading_paused):
            self._resume(why)

    def _resume(self, why: str) -> None:
        self.reading_paused.discard(why)
        if not self.reading_paused and self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()


class BufferedServer:
    """Listening sockets, their connections and the kept receive buffer; stop with `close()`."""

    def __init__(self, routes: Mapping[str, Endpoint], limits: ServerLimits, *, keep_buffer_bytes: int) -> None:
        self.routes = dict(routes)
        self.limiter = ConnectionLimiter(limits)
        self.buffers = ReceiveBuffer(keep_buffer_bytes)
        self.sockets: list[socket.socket] = []
        self._accepting: list[asyncio.Task[None]] = []
        self._connecting: set[asyncio.Task[None]] = set()
        self.connections: set[BufferedConnection] = set()

    @property
    def port(self) -> int:
        """The bound port (of the first socket)."""
        return int(self.sockets[0].getsockname()[1])

    def _connection(self) -> BufferedConnection:
        conn = self.limiter.add(BufferedConnection(self))
        self.connections.add(conn)
        return conn

    async def start(self, host: str, port: int, *, backlog: int = 1024, reuse_port: bool = False) -> None:
        ensure_open_files(self.limiter.limits.max_connections)
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        self.sockets = listening_sockets(infos, backlog=backlog, reuse_port=reuse_port)
        self._accepting = [
            asyncio.create_task(
                accept_connections(sock, self.limiter, self._connection, ssl_context=None, connecting=self._connecting),
                name=f"accept-{host}:{port}",
            )
            for sock in self.sockets
        ]

    async def close(self, grace_s: float = 10.0) -> None:
        """Stop accepting, close idle connections, give busy ones `grace_s` to finish, then close the rest."""
        for task in [*self._accepting, *self._connecting]:
            task.cancel()
        for sock in self.sockets:
            sock.close()
        await asyncio.gather(*self._accepting, *self._connecting, return_exceptions=True)
        deadline = time.monotonic() + grace_s
        while True:
            open_now = [c for c in self.connections if c.transport is not None]
            for conn in open_now:
                if conn.state == IDLE and conn.transport is not None:
                    conn.transport.close()
            if not any(c.transport is not None for c in self.connections) or time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.05)
        for conn in self.connections:
            conn.abort("server_stopped")
        self.connections.clear()


async def serve(
    routes: Mapping[str, Endpoint],
    host: str,
    port: int,
    limits: ServerLimits,
    *,
    keep_buffer_bytes: int,
    backlog: int = 1024,
    reuse_port: bool = False,
) -> BufferedServer:
    """Start serving `routes` (path -> Endpoint) on host:port within `limits`; stop with `await server.close()`."""
    server = BufferedServer(routes, limits, keep_buffer_bytes=keep_buffer_bytes)
    await server.start(host, port, backlog=backlog, reuse_port=reuse_port)
    return server


def _shown(limit: int) -> str:
    return f"{limit // 2**20} MiB" if limit >= 2**20 else f"{limit // 1024} KiB"


_date_cache: tuple[int, str] = (0, "")


def _http_date() -> str:
    global _date_cache  # noqa: PLW0603 (one formatted date per second)
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache = (now, email.utils.formatdate(now, usegmt=True))
    return _date_cache[1]


__all__ = [
    "MAX_HEAD_BYTES",
    "BufferedConnection",
    "BufferedServer",
    "Endpoint",
    "ReceiveBuffer",
    "Reply",
    "Request",
    "serve",
]
