"""Large requests take turns at the worker threads in order of arrival, each until its deadline."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable

import pytest

from webhook.admission.large_requests import LargeRequests


@pytest.fixture
async def one_thread() -> AsyncIterator[LargeRequests]:
    large = LargeRequests(1)
    try:
        yield large
    finally:
        await asyncio.to_thread(large.close)


def blocked(release: threading.Event, result: str) -> Callable[[], str]:
    def work() -> str:
        assert release.wait(10)
        return result

    return work


def later(seconds: float) -> float:
    return asyncio.get_running_loop().time() + seconds


async def test_waiting_requests_are_served_in_order_of_arrival(one_thread: LargeRequests) -> None:
    release = threading.Event()
    order: list[str] = []

    def record(name: str) -> Callable[[], str]:
        def work() -> str:
            order.append(name)
            return name

        return work

    first = asyncio.create_task(one_thread.run(blocked(release, "first"), later(10)))
    await asyncio.sleep(0.05)
    waiting = []
    for name in ("a", "b", "c"):
        waiting.append(asyncio.create_task(one_thread.run(record(name), later(10))))
        await asyncio.sleep(0.01)
    assert one_thread.ahead == 4, "one being checked, three waiting"
    release.set()
    assert await first == "first"
    assert await asyncio.gather(*waiting) == ["a", "b", "c"]
    assert order == ["a", "b", "c"]
    assert one_thread.ahead == 0


async def test_a_request_still_waiting_at_its_deadline_gets_no_turn_and_the_next_one_does(
    one_thread: LargeRequests,
) -> None:
    release = threading.Event()
    first = asyncio.create_task(one_thread.run(blocked(release, "first"), later(10)))
    await asyncio.sleep(0.05)
    loop = asyncio.get_running_loop()
    started = loop.time()
    hurried = asyncio.create_task(one_thread.run(lambda: "hurried", later(0.2)))
    patient = asyncio.create_task(one_thread.run(lambda: "patient", later(10)))
    assert await hurried is None
    assert 0.19 <= loop.time() - started < 2.0
    assert one_thread.ahead == 2, "the hurried one left the queue"
    release.set()
    assert (await first, await patient) == ("first", "patient")


async def test_a_caller_that_stops_waiting_frees_the_thread_only_when_its_work_ends(one_thread: LargeRequests) -> None:
    release = threading.Event()
    abandoned = asyncio.create_task(one_thread.run(blocked(release, "abandoned"), later(10)))
    await asyncio.sleep(0.05)
    abandoned.cancel()
    next_one = asyncio.create_task(one_thread.run(lambda: "next", later(10)))
    await asyncio.sleep(0.1)
    assert not next_one.done(), "the thread still runs the abandoned work"
    release.set()
    assert await asyncio.wait_for(next_one, 5) == "next"
    with pytest.raises(asyncio.CancelledError):
        await abandoned


async def test_two_threads_check_two_requests_at_once() -> None:
    large = LargeRequests(2)
    both = threading.Barrier(2, timeout=5)
    try:
        results = await asyncio.gather(
            large.run(lambda: both.wait() >= 0, later(10)), large.run(lambda: both.wait() >= 0, later(10))
        )
        assert list(results) == [True, True]
    finally:
        await asyncio.to_thread(large.close)
