"""Serving an aiohttp application with the limits aiohttp lacks, once for both of ringroute's servers.

aiohttp closes idle keep-alive connections, but it accepts every connection, waits for headers forever and lets a
handler wait for a body forever. `serve` adds, per `ServerLimits`:

- a connection cap: at the cap the listening socket is not read, so new connections wait in the kernel's backlog
  (which refuses them when full); while one waits, the connection idle longest is closed to make room, so idle
  connections cannot lock clients out (as nginx reuses its idle keep-alive connections);
- a header timeout: a request's headers must arrive within `header_timeout_s` of its first byte (of the connection,
  for the first request; a TLS handshake has as long);
- a body timeout and a body buffer: `webhook.common.request_bodies` reads a body only when it fits in
  `body_buffer_mib` together with the bodies being read (or held until answered), and only for `body_timeout_s`
  after the request's headers; a late body is answered 408 and its connection closed;
- the keep-alive timeout, handed to aiohttp.

Connections are served by aiohttp's own protocol, wrapped to see data arrive. A connection is busy from the start
of a request's handler until aiohttp has written its response (the handler's task is done), idle otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import fcntl
import logging
import resource
import socket
import ssl
import struct
import termios
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from aiohttp import web

from webhook.common.settings import ServerLimits

log = logging.getLogger("ringroute.http")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

CONNECTING, IDLE, HEADERS, BUSY = "connecting", "idle", "headers", "busy"
"""A connection's states: in its TLS handshake; waiting for a request; reading a request's headers; in a handler."""


LINGER_S = 2.0
"""After refusing a request whose rest is still coming, its bytes are read and dropped for up to LINGER_S (and a
number of bytes) before the connection is closed: closing a socket with unread input makes the kernel reset the
connection, and the client may then lose the answer that says why (Go's servers and nginx linger the same way)."""
LINGER_BYTES = 256 * 2**10
"""How much a connection here drops while it lingers: over TLS every byte is decrypted first, and a client has its
answer long before (Go's HTTP server drops as much of a body its handler left unread)."""

FRESH_GRACE_S = 1.0
"""A connection that has not sent a request yet may be closed to make room only once it is this old: its request
may be on its way, and an idle one is as old soon enough."""

ROOM_QUEUE_BUFFERS = 4
"""Bodies wait for room in the body buffer (`queue_limited`) behind at most this many buffers of other waiting
bodies; a body beyond is refused at once. Waiting bodies are not in memory yet: the bound frees a flood's
connections at once, where their wait could not end in time (bodies are read and checked at about 100 MiB/s, so
four buffers of 64 MiB take about the webhook timeout to drain)."""

_EVICTION_RETRY_S = 0.2
"""At the cap with no connection evictable, how often to look again while a client waits in the backlog."""


LimitedConnectionT = TypeVar("LimitedConnectionT", bound="LimitedConnection")


class BodyTimeoutError(TimeoutError):
    """A request body did not arrive within the body timeout (or room for it did not free up)."""


class BusyError(BodyTimeoutError):
    """Too busy to take a request body in time: no room in the body buffer, or the body not read, by its deadline;
    or (`at_once`) refused without waiting, as more bodies wait for room than could be read in time."""

    def __init__(self, message: str, *, at_once: bool) -> None:
        super().__init__(message)
        self.at_once = at_once


def unread_bytes(transport: asyncio.BaseTransport) -> int:
    """Bytes the kernel holds for the transport's socket that have not been read yet (0 when it cannot tell)."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return 0
    try:
        count: int = struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]
    except (OSError, ValueError):
        return 0
    return count


class LimitedConnection(asyncio.BaseProtocol):
    """What a ConnectionLimiter needs of a connection: its state, whether it may be closed to make room, how to
    close it. `Connection` (aiohttp's protocol inside) and `webhook.common.buffered_http`'s connections are ones."""

    state: str
    released: bool
    transport: asyncio.BaseTransport | None
    limiter: ConnectionLimiter
    timer: asyncio.TimerHandle | None

    def arm(self, delay: float, callback: Callable[[], None]) -> None:
        """Call `callback` after `delay` seconds unless disarmed (one timer per connection)."""
        self.disarm()
        self.timer = asyncio.get_running_loop().call_later(delay, callback)

    def disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def headers_late(self) -> None:
        """The header timeout passed: close the connection if a request's head is still coming, or if the
        connection has sent no request at all yet."""
        self.timer = None
        if self.state == HEADERS or (self.state == IDLE and self.limiter.first_request_pending(self)):
            self.limiter.header_timeouts += 1
            self.abort("header_timeout")

    def evictable(self) -> bool:
        """Idle: nothing of a response left to write, and nothing the client sent left unread (a request that the
        kernel holds while the loop is busy with others is not idleness)."""
        transport = self.transport
        return (
            isinstance(transport, asyncio.WriteTransport)
            and transport.get_write_buffer_size() == 0
            and unread_bytes(transport) == 0
        )

    def abort(self, why: str) -> None:
        """Close at once (a TLS connection without its closing handshake)."""
        transport = self.transport
        if isinstance(transport, asyncio.WriteTransport) and not transport.is_closing():
            log.debug("event=connection_closed reason=%s peer=%s", why, transport.get_extra_info("peername"))
            transport.abort()


class Connection(LimitedConnection, asyncio.Protocol):
    """One client connection: aiohttp's protocol inside, the limiter's bookkeeping around it."""

    def __init__(self, limiter: ConnectionLimiter, inner: asyncio.Protocol) -> None:
        self.limiter = limiter
        self.inner = inner
        self.transport: asyncio.Transport | None = None
        self.state = CONNECTING
        self.timer: asyncio.TimerHandle | None = None
        self.pending = False
        """Bytes of a next request arrived while a handler ran (pipelining)."""
        self.request: web.BaseRequest | None = None
        """The request being handled: bytes that arrive before its body is complete are body, not a next request."""
        self.close_when_sent = False
        """The response closes the connection: once it is sent, linger (LINGER_S, LINGER_BYTES) and close,
        instead of letting aiohttp read (for up to 10 s) the rest of a body that was refused or came too slowly."""
        self.lingering = -1
        """Bytes dropped since the response that closes the connection was sent (-1: not lingering)."""
        self.released = False

    # -- asyncio.Protocol ------------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.inner.connection_made(transport)
        # The first request's headers are due a header timeout after the connection (Go's ReadHeaderTimeout).
        self.limiter.idle(self)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self.lingering >= 0:
            self.lingering += len(data)
            if self.lingering > LINGER_BYTES:
                self._close("linger_limit")
            return
        if self.state == IDLE and data:
            self.limiter.busy(self, HEADERS)
            self._arm()
        elif self.state == BUSY and data and (self.request is None or self.request.content.is_eof()):
            self.pending = True
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        if self.lingering >= 0:
            return False  # the client has read the answer and is done sending: close
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.disarm()
        self.limiter.release(self)
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    # -- the limiter's side ----------------------------------------------------------------------------------------

    def request_started(self, request: web.BaseRequest) -> None:
        self.disarm()
        self.limiter.busy(self, BUSY)
        self.pending = False
        self.request = request

    def request_finished(self) -> None:
        """The response is written (or the request failed): wait for the next request."""
        self.request = None
        if self.transport is None or self.transport.is_closing() or self.released:
            return
        if self.close_when_sent:
            # Drop what the client still sends for a moment, so that the kernel does not reset the connection
            # (losing the response) as it would when closing it with input unread.
            self.lingering = 0
            self.transport.resume_reading()
            self.arm(LINGER_S, lambda: self._close("linger_timeout"))
            return
        self.limiter.idle(self)
        if self.pending:  # the next request's bytes are here already: its headers are due
            self.limiter.busy(self, HEADERS)
            self._arm()

    def _arm(self) -> None:
        self.arm(self.limiter.limits.header_timeout_s, self.headers_late)

    def _close(self, why: str) -> None:
        """Close after what is buffered (the response) is written."""
        self.disarm()
        if self.transport is not None and not self.transport.is_closing():
            log.debug("event=connection_closed reason=%s", why)
            self.transport.close()


class ConnectionLimiter:
    """The connections of one server: their count against the cap, who is idle, and the body buffer."""

    def __init__(self, limits: ServerLimits) -> None:
        self.limits = limits
        self.open = 0
        self._idle: OrderedDict[LimitedConnection, float] = OrderedDict()
        """Idle connections and since when (loop time), longest idle first."""
        self._fresh: set[LimitedConnection] = set()
        """Connections that have not started a request yet."""
        self._changed = asyncio.Event()
        self._by_handler: dict[object, Connection] = {}
        self._buffered = 0
        self._buffer_freed = asyncio.Event()
        self.waiting_for_room = 0
        """Bytes of the bodies waiting for room in the body buffer."""
        self.header_timeouts = 0
        """Connections closed because headers came too slowly (for tests and metrics)."""
        self.body_timeouts = 0
        self.evictions = 0
        """Idle connections closed to make room for a new one."""

    # -- connections -----------------------------------------------------------------------------------------------

    def connection(self, inner: asyncio.Protocol) -> Connection:
        """A new connection around aiohttp's protocol `inner` (counted against the cap until released)."""
        conn = Connection(self, inner)
        self._by_handler[inner] = conn
        return self.add(conn)

    def add(self, conn: LimitedConnectionT) -> LimitedConnectionT:
        """Count a new connection against the cap until it is released."""
        self.open += 1
        self._fresh.add(conn)
        return conn

    def release(self, conn: LimitedConnection) -> None:
        if conn.released:
            return
        conn.released = True
        self.open -= 1
        self._idle.pop(conn, None)
        self._fresh.discard(conn)
        if isinstance(conn, Connection):
            self._by_handler.pop(conn.inner, None)
        self._changed.set()

    def idle(self, conn: LimitedConnection) -> None:
        conn.state = IDLE
        self._idle[conn] = asyncio.get_running_loop().time()
        self._idle.move_to_end(conn)
        self._changed.set()

    def busy(self, conn: LimitedConnection, state: str) -> None:
        conn.state = state
        self._idle.pop(conn, None)
        if state == BUSY:
            self._fresh.discard(conn)

    def first_request_pending(self, conn: LimitedConnection) -> bool:
        """The connection has not started its first request."""
        return conn in self._fresh

    def of(self, request: web.Request) -> Connection | None:
        """The connection a request arrived on."""
        return self._by_handler.get(request.protocol)

    def evict_one(self) -> bool:
        """Close the connection idle longest (one without a request yet once FRESH_GRACE_S old); False when none
        is."""
        now = asyncio.get_running_loop().time()
        for conn, since in self._idle.items():
            if conn in self._fresh and now - since < FRESH_GRACE_S:
                continue
            if conn.evictable():
                self.evictions += 1
                conn.abort("evicted_at_connection_cap")
                self.release(conn)
                return True
        return False

    async def room(self, listening: socket.socket) -> None:
        """Return once a new connection may be accepted: below the cap, or after closing an idle connection for a
        client that is waiting in the backlog."""
        while self.open >= self.limits.max_connections:
            await _readable(listening)
            if self.evict_one():
                continue
            self._changed.clear()
            # A connection whose response is still being sent becomes evictable without notice: look again soon.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_EVICTION_RETRY_S):
                    await self._changed.wait()

    # -- request bodies --------------------------------------------------------------------------------------------

    def try_reserve_body(self, size: int, *, leave: int = 0) -> int | None:
        """Hold room for a body of `size` bytes in the body buffer now: the bytes held (give them back with
        `release_body`), or None when it does not fit beside the bodies being read without taking the last `leave`
        bytes of the buffer. A body larger than that gets it, once no other is being read."""
        size = min(size, self.limits.body_buffer_mib * 2**20)
        if self._buffered and self._buffered + size > self.limits.body_buffer_mib * 2**20 - leave:
            return None
        self._buffered += size
        return size

    async def reserve_body(self, size: int, deadline: float, *, leave: int = 0, queue_limited: bool = False) -> int:
        """`try_reserve_body`, waiting for room until `deadline` (then BodyTimeoutError). `queue_limited`: raise
        BusyError instead, and at once when the bodies waiting for room would fill ROOM_QUEUE_BUFFERS buffers."""
        held = self.try_reserve_body(size, leave=leave)
        if held is not None:
            return held
        buffer = self.limits.body_buffer_mib * 2**20
        size = min(size, buffer)
        if queue_limited and self.waiting_for_room + size > ROOM_QUEUE_BUFFERS * buffer:
            raise BusyError(f"{self.waiting_for_room} bytes of request bodies wait for room already", at_once=True)
        loop = asyncio.get_running_loop()
        self.waiting_for_room += size
        try:
            while (held := self.try_reserve_body(size, leave=leave)) is None:
                if loop.time() >= deadline:
                    if queue_limited:
                        raise BusyError("no room to read the body in time", at_once=False)
                    raise BodyTimeoutError("no room to read the body within the body timeout")
                self._buffer_freed.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout_at(deadline):
                        await self._buffer_freed.wait()
        finally:
            self.waiting_for_room -= size
        return held

    def release_body(self, held: int) -> None:
        """Give back room held for a body."""
        self._buffered -= held
        self._buffer_freed.set()


async def _readable(sock: socket.socket) -> None:
    """Wait until a listening socket has a connection to accept."""
    loop = asyncio.get_running_loop()
    ready = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    fd = sock.fileno()
    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)  # by number: a server that stops at its cap has closed the socket already


LIMITER_KEY = web.AppKey("connection_limiter", ConnectionLimiter)
"""The app's ConnectionLimiter (set by `serve`)."""


@web.middleware
async def _track(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Mark the connection busy from the handler's start until aiohttp has sent the response (the end of the task
    that runs the handler), and answer a body that came too late with 408, closing its connection."""
    limiter = request.app.get(LIMITER_KEY)
    conn = limiter.of(request) if limiter is not None else None
    if conn is not None:
        conn.request_started(request)
        task = asyncio.current_task()
        if task is not None:
            task.add_done_callback(lambda _task: conn.request_finished())
    try:
        response = await handler(request)
    except BodyTimeoutError as exc:
        log.info("event=body_timeout method=%s path=%s peer=%s", request.method, request.path, request.remote)
        response = web.json_response({"error": str(exc)}, status=408)
        response.force_close()
    if conn is not None and response.keep_alive is False:  # force_close(): refused unread, or too slow
        conn.close_when_sent = True
    return response


class _Listener(asyncio.AbstractServer):
    """The listening sockets of a LimitedSite and their accept loops (what BaseSite keeps as `_server`)."""

    def __init__(self, sockets: list[socket.socket], tasks: list[asyncio.Task[None]]) -> None:
        self.sockets = sockets
        self._tasks = tasks

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for sock in self.sockets:
            sock.close()

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    def is_serving(self) -> bool:
        return any(not task.done() for task in self._tasks)

    async def start_serving(self) -> None:
        return None

    async def serve_forever(self) -> None:
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def wait_closed(self) -> None:
        await asyncio.gather(*self._tasks, return_exceptions=True)


class LimitedSite(web.BaseSite):
    """A TCP site (TLS when given a context) that accepts connections within the limiter's cap."""

    __slots__ = ("_connecting", "_host", "_limiter", "_port", "_reuse_port")

    def __init__(
        self,
        runner: web.AppRunner,
        host: str,
        port: int,
        limiter: ConnectionLimiter,
        *,
        ssl_context: ssl.SSLContext | None = None,
        backlog: int = 1024,
        reuse_port: bool = False,
    ) -> None:
        super().__init__(runner, ssl_context=ssl_context, backlog=backlog)
        self._host, self._port, self._limiter, self._reuse_port = host, port, limiter, reuse_port
        self._connecting: set[asyncio.Task[None]] = set()

    @property
    def name(self) -> str:
        scheme = "https" if self._ssl_context else "http"
        return f"{scheme}://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(self._host, self._port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        sockets = listening_sockets(infos, backlog=self._backlog, reuse_port=self._reuse_port)
        tasks = [asyncio.create_task(self._accept(sock), name=f"accept-{self.name}") for sock in sockets]
        self._server = _Listener(sockets, tasks)

    async def stop(self) -> None:
        await super().stop()
        for task in list(self._connecting):
            task.cancel()

    async def _accept(self, sock: socket.socket) -> None:
        server = self._runner.server
        assert server is not None
        await accept_connections(
            sock,
            self._limiter,
            lambda: self._limiter.connection(server()),
            ssl_context=self._ssl_context,
            connecting=self._connecting,
        )


async def accept_connections(
    sock: socket.socket,
    limiter: ConnectionLimiter,
    new_connection: Callable[[], LimitedConnection],
    *,
    ssl_context: ssl.SSLContext | None,
    connecting: set[asyncio.Task[None]],
) -> None:
    """Accept connections on a listening socket within the limiter's cap, forever; `new_connection` makes the
    protocol of each (already counted by the limiter), `connecting` holds the tasks still in their handshake."""
    loop = asyncio.get_running_loop()
    while True:
        await limiter.room(sock)
        try:
            client, _ = await loop.sock_accept(sock)
        except OSError as exc:  # out of file descriptors, or the client gave up: wait a moment, go on
            log.warning("event=accept_failed error=%r", exc)
            await asyncio.sleep(0.1)
            continue
        # Counted now, not when the handshake task runs: the next turn of this loop checks the cap.
        task = asyncio.create_task(_connect(client, new_connection(), limiter, ssl_context))
        connecting.add(task)
        task.add_done_callback(connecting.discard)


async def _connect(
    client: socket.socket, conn: LimitedConnection, limiter: ConnectionLimiter, ssl_context: ssl.SSLContext | None
) -> None:
    timeout = limiter.limits.header_timeout_s
    try:
        await asyncio.get_running_loop().connect_accepted_socket(
            lambda: conn,
            client,
            ssl=ssl_context,
            ssl_handshake_timeout=timeout if ssl_context else None,
            ssl_shutdown_timeout=timeout if ssl_context else None,
        )
    except (OSError, ssl.SSLError, TimeoutError, ConnectionError) as exc:
        log.debug("event=handshake_failed error=%r", exc)
        client.close()
        limiter.release(conn)
    except asyncio.CancelledError:
        client.close()
        limiter.release(conn)
        raise


def listening_sockets(infos: list[Any], *, backlog: int, reuse_port: bool) -> list[socket.socket]:
    """Bound, listening, non-blocking sockets for the addresses `getaddrinfo` gave for host:port."""
    sockets = []
    for family, kind, proto, _name, address in dict.fromkeys(infos):
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(backlog)
        sock.setblocking(False)
        sockets.append(sock)
    return sockets


def keep_freed_memory_returnable() -> None:
    """Keep glibc from moving large buffers into its heap: each TLS connection holds a 256 KiB read buffer, which
    glibc maps on its own and unmaps on close until its dynamic threshold rises past that size after the first
    unmap; from then on every buffer comes from the heap, zeroed (so resident), and stays there after the
    connection closes. Fixing the threshold keeps them mapped on their own, so closed connections give their memory
    back. Nothing happens where the C library has no mallopt."""
    name = ctypes.util.find_library("c")
    if name is None:
        return
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return
    m_mmap_threshold = -3
    mallopt(ctypes.c_int(m_mmap_threshold), ctypes.c_int(128 * 1024))


def ensure_open_files(max_connections: int) -> None:
    """Raise the soft limit of open files towards the hard one when the cap would not fit under it (Go programs,
    such as kube-apiserver, do so at start): at the soft limit, accepting fails before the cap is reached."""
    with contextlib.suppress(ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = max_connections + _SPARE_FILES
        if soft != resource.RLIM_INFINITY and soft < wanted:
            raised = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))


_SPARE_FILES = 256
"""Files a server needs besides its connections (listening sockets, certificates, pipes, the planning process)."""


async def serve(
    app: web.Application,
    host: str,
    port: int,
    limits: ServerLimits,
    *,
    ssl_context: ssl.SSLContext | None = None,
    reuse_port: bool = False,
    shutdown_timeout: float = 10.0,
    backlog: int = 1024,
) -> web.AppRunner:
    """Start serving `app` on host:port within `limits`; stop it with `await runner.cleanup()`. The bound port is
    `runner.addresses[0][1]` (for port 0)."""
    keep_freed_memory_returnable()
    ensure_open_files(limits.max_connections)
    limiter = ConnectionLimiter(limits)
    app[LIMITER_KEY] = limiter
    app.middlewares.insert(0, _track)  # outermost: the connection is busy for every handler and middleware
    runner = web.AppRunner(
        app, access_log=None, shutdown_timeout=shutdown_timeout, keepalive_timeout=limits.keep_alive_timeout_s
    )
    await runner.setup()
    site = LimitedSite(runner, host, port, limiter, ssl_context=ssl_context, backlog=backlog, reuse_port=reuse_port)
    await site.start()
    return runner


__all__ = [
    "LIMITER_KEY",
    "BodyTimeoutError",
    "Connection",
    "ConnectionLimiter",
    "LimitedConnection",
    "LimitedSite",
    "BusyError",
    "accept_connections",
    "ensure_open_files",
    "keep_freed_memory_returnable",
    "listening_sockets",
    "serve",
]
