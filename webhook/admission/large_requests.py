"""Large admission requests take turns at the worker threads: first come, first served, each until its deadline.

The event loop answers small requests itself; a large one is decoded, checked and encoded in a worker thread, so
that the loop keeps answering the small ones meanwhile. A large request waits for a free thread as long as its
answer can still reach the API server in time (its deadline); one still waiting then gets no turn, and its caller
answers it busy. A waiting request holds only its body (counted in the server's body buffer) and its connection, so
what waits is bounded by `admission.server.bodyBufferMib` and `maxConnections`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


class LargeRequests:
    """Worker threads and the requests waiting for one, in order of arrival."""

    def __init__(self, threads: int) -> None:
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="admission-large")
        self._threads = self._idle = threads
        self._waiting: deque[asyncio.Future[None]] = deque()

    @property
    def ahead(self) -> int:
        """Requests a new one would come after: being checked, or waiting for a thread."""
        return self._threads - self._idle + len(self._waiting)

    async def run(self, work: Callable[[], T], deadline: float) -> T | None:
        """`work()` in a worker thread once one is free; None when none was free for it before `deadline` (in the
        running loop's time)."""
        if not await self._turn(deadline):
            return None
        loop = asyncio.get_running_loop()
        running = self._executor.submit(work)

        def done(_future: Future[T]) -> None:
            # The thread is free when the work ends, even if its caller stopped waiting for it.
            with contextlib.suppress(RuntimeError):  # the loop closed at shutdown: nothing waits any more
                loop.call_soon_threadsafe(self._next)

        running.add_done_callback(done)
        return await asyncio.wrap_future(running)

    def close(self) -> None:
        """Stop the threads (waiting for the work they run); requests still waiting get no turn."""
        for turn in self._waiting:
            turn.cancel()
        self._executor.shutdown(wait=True, cancel_futures=True)

    async def _turn(self, deadline: float) -> bool:
        if self._idle and not self._waiting:
            self._idle -= 1
            return True
        turn = asyncio.get_running_loop().create_future()
        self._waiting.append(turn)
        try:
            async with asyncio.timeout_at(deadline):
                await turn
        except TimeoutError:
            self._give_up(turn)
            return False
        except asyncio.CancelledError:
            self._give_up(turn)
            raise
        return True

    def _give_up(self, turn: asyncio.Future[None]) -> None:
        if turn.done() and not turn.cancelled():
            self._next()  # given a thread just as the deadline passed: the next request takes it
        else:
            turn.cancel()
            with contextlib.suppress(ValueError):
                self._waiting.remove(turn)

    def _next(self) -> None:
        """A thread is free: the request waiting longest gets it, else it idles."""
        while self._waiting:
            turn = self._waiting.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        self._idle += 1


__all__ = ["LargeRequests"]
