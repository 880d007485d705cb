"""At the connection cap, only idle connections make room: not one whose client has sent what the server has not
read yet (a request the kernel holds while the loop is busy), and not one without a request before it is a second
old."""

from __future__ import annotations

import asyncio

from webhook.common.http_server import FRESH_GRACE_S, Connection, ConnectionLimiter
from webhook.common.settings import ServerLimits


class Unread(asyncio.Protocol):
    """aiohttp's place, not reading: as when the loop has not come to the connection yet."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.ReadTransport)
        transport.pause_reading()


async def test_a_connection_with_unread_bytes_is_not_idle_and_one_without_a_request_is_evicted_once_old() -> None:
    limiter = ConnectionLimiter(ServerLimits(max_connections=2))
    accepted: asyncio.Queue[Connection] = asyncio.Queue()

    def connection() -> Connection:
        conn = limiter.connection(Unread())
        accepted.put_nowait(conn)
        return conn

    server = await asyncio.get_running_loop().create_server(connection, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        _, sending = await asyncio.open_connection("127.0.0.1", port)
        _, silent = await asyncio.open_connection("127.0.0.1", port)
        first, second = await accepted.get(), await accepted.get()
        sending.write(b"POST /jobs/validate HTTP/1.1\r\n")
        await sending.drain()
        await asyncio.sleep(0.05)
        assert not limiter.evict_one(), "both are younger than the grace"
        await asyncio.sleep(FRESH_GRACE_S)
        assert limiter.evict_one(), "the silent one is old enough to make room"
        assert limiter.evictions == 1
        assert not limiter.evict_one(), "the one whose request waits unread is not idle"
        assert limiter.open == 1
        assert first.released is False
        assert second.released is True
        sending.close()
        silent.close()
    finally:
        server.close()
        await server.wait_closed()
