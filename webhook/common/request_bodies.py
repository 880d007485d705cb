"""Reading request bodies within the limits of `webhook.common.http_server`: the body timeout, counted from the
handler's start (right after the request's headers), and room in the server's body buffer.

Without a limiter (an app not served by `http_server.serve`, as in unit tests), bodies are read without limits.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from aiohttp import web

from webhook.common.http_server import LIMITER_KEY, BodyTimeoutError, BusyError


@contextlib.asynccontextmanager
async def held_body(
    request: web.Request, limit: int, *, answer_by: float, leave: int = 0
) -> AsyncIterator[bytes | bytearray]:
    """The request body, at most `limit` bytes (else web.HTTPRequestEntityTooLarge, from Content-Length before
    reading), with its room in the body buffer held until the block ends: bodies waiting for their answer count
    against the buffer as bodies being read do. The room and the body must come by `answer_by` (loop time), or the
    body timeout if sooner; room is waited for behind at most ROOM_QUEUE_BUFFERS buffers of other waiting bodies,
    and is never the last `leave` bytes of the buffer unless it is empty (kept for other requests). BusyError when
    there is no room in time or the body is not read by `answer_by`, BodyTimeoutError when it is not by the body
    timeout."""
    length = _declared_length(request, limit)
    limiter = request.app.get(LIMITER_KEY)
    if limiter is None:
        yield await _read_at_most(request, limit)
        return
    now = asyncio.get_running_loop().time()
    deadline = min(answer_by, now + limiter.limits.body_timeout_s)
    size = limit if length is None else length
    held = await limiter.reserve_body(size, deadline, leave=leave, queue_limited=True)
    try:
        try:
            async with asyncio.timeout_at(deadline):
                body = await _read_at_most(request, limit)
        except TimeoutError:
            if deadline == answer_by:
                raise BusyError("the body was not read in time", at_once=False) from None
            limiter.body_timeouts += 1
            raise BodyTimeoutError(f"the request body did not arrive within {deadline - now:.3g} s") from None
        yield body
    finally:
        limiter.release_body(held)


def _declared_length(request: web.Request, limit: int) -> int | None:
    """The request's Content-Length (None without one); web.HTTPRequestEntityTooLarge when over `limit`."""
    length = request.content_length
    if length is not None and length > limit:
        raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=length)
    return length


async def _read_at_most(request: web.Request, limit: int) -> bytes | bytearray:
    """The body, at most `limit` bytes; with a Content-Length, into one buffer of that size (joining chunks would
    hold the body twice at its end)."""
    length = request.content_length
    if length is not None:
        body = bytearray(length)
        filled = 0
        with memoryview(body) as view:
            while chunk := await request.content.readany():
                if filled + len(chunk) > length:  # aiohttp reads no more than Content-Length
                    raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=filled + len(chunk))
                view[filled : filled + len(chunk)] = chunk
                filled += len(chunk)
        del body[filled:]  # the body ended early: what came is what there is
        return body
    chunks: list[bytes] = []
    received = 0
    while chunk := await request.content.readany():
        received += len(chunk)
        if received > limit:
            raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=received)
        chunks.append(chunk)
    return b"".join(chunks)


__all__ = ["held_body"]
