"""The body buffer's room for bodies that hold it until answered: a large body leaves room for small ones, waits
for room until its deadline, and is refused at once when more bodies wait than could be read in time."""

from __future__ import annotations

import asyncio

import pytest

from webhook.common.http_server import ROOM_QUEUE_BUFFERS, BodyTimeoutError, BusyError, ConnectionLimiter
from webhook.common.settings import ServerLimits

MIB = 1 << 20


def limiter(buffer_mib: int = 8) -> ConnectionLimiter:
    return ConnectionLimiter(ServerLimits(body_buffer_mib=buffer_mib))


async def test_a_large_body_leaves_the_last_bytes_of_the_buffer_to_small_ones() -> None:
    bodies = limiter(8)
    assert bodies.try_reserve_body(5 * MIB, leave=2 * MIB) == 5 * MIB
    assert bodies.try_reserve_body(2 * MIB, leave=2 * MIB) is None, "it would take the last 2 MiB"
    assert bodies.try_reserve_body(32 * 1024) == 32 * 1024, "a small body takes them"
    bodies.release_body(5 * MIB)
    bodies.release_body(32 * 1024)
    assert bodies.try_reserve_body(20 * MIB, leave=2 * MIB) == 8 * MIB, "the whole buffer, once empty"


async def test_a_body_waits_for_room_until_its_deadline_then_is_busy() -> None:
    bodies = limiter(8)
    held = bodies.try_reserve_body(7 * MIB)
    assert held is not None
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(BusyError) as refused:
        await bodies.reserve_body(4 * MIB, started + 0.3, queue_limited=True)
    assert not refused.value.at_once
    assert loop.time() - started >= 0.29
    assert bodies.waiting_for_room == 0

    waiting = asyncio.create_task(bodies.reserve_body(4 * MIB, loop.time() + 5, queue_limited=True))
    await asyncio.sleep(0.05)
    assert bodies.waiting_for_room == 4 * MIB
    bodies.release_body(held)
    assert await asyncio.wait_for(waiting, 1) == 4 * MIB, "room freed: the waiting body gets it"


async def test_beyond_the_bodies_that_may_wait_a_body_is_refused_at_once() -> None:
    bodies = limiter(8)
    assert bodies.try_reserve_body(8 * MIB) is not None
    deadline = asyncio.get_running_loop().time() + 5
    waiting = [
        asyncio.create_task(bodies.reserve_body(8 * MIB, deadline, queue_limited=True))
        for _ in range(ROOM_QUEUE_BUFFERS)
    ]
    await asyncio.sleep(0.05)
    assert bodies.waiting_for_room == ROOM_QUEUE_BUFFERS * 8 * MIB
    with pytest.raises(BusyError) as refused:
        await asyncio.wait_for(bodies.reserve_body(1024, deadline, queue_limited=True), 0.1)
    assert refused.value.at_once
    with pytest.raises(BodyTimeoutError) as late:  # without the queue limit: waits, as the extender's bodies do
        await bodies.reserve_body(1024, asyncio.get_running_loop().time() + 0.1)
    assert not isinstance(late.value, BusyError)
    for task in waiting:
        task.cancel()
    await asyncio.gather(*waiting, return_exceptions=True)
    assert bodies.waiting_for_room == 0, "a cancelled wait is no longer counted"
