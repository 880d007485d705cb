"""A per-key debounced work queue for reconcilers."""

from __future__ import annotations

import asyncio
import contextlib
import time


class DebouncedQueue:
    """Per-key debounced work queue: a key is handed out once it has been quiet for `debounce_s` (at most
    `max_delay_s` after its first change), never to two workers at once; changes during processing re-run it."""

    def __init__(self, debounce_s: float, max_delay_s: float) -> None:
        self.debounce_s = debounce_s
        self.max_delay_s = max_delay_s
        self._due: dict[str, tuple[float, float]] = {}
        self._processing: set[str] = set()
        self._wake = asyncio.Event()

    def add(self, key: str, delay: float | None = None) -> None:
        """Schedule `key` (after `delay`, default the debounce); a pending key moves to the later trailing time."""
        now = time.monotonic()
        wait = self.debounce_s if delay is None else delay
        due, first = self._due.get(key, (now + wait, now))
        due = now + wait if wait > 0 else now
        if key in self._due:
            due = min(due, first + self.max_delay_s) if wait > 0 else now
        self._due[key] = (due, first)
        self._wake.set()

    def __len__(self) -> int:
        return len(self._due)

    async def get(self) -> str:
        """The next due key that is not being processed (waits)."""
        while True:
            now = time.monotonic()
            ready = [(due, k) for k, (due, _) in self._due.items() if k not in self._processing]
            if ready:
                due, key = min(ready)
                if due <= now:
                    del self._due[key]
                    self._processing.add(key)
                    return key
                timeout: float | None = due - now
            else:
                timeout = None
            self._wake.clear()
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for returns the inner result when a cancel and a
            # wake-up come in the same loop iteration, and the cancelled worker then never stops.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()

    def done(self, key: str) -> None:
        """Mark `key` processed (it runs again if it was added meanwhile)."""
        self._processing.discard(key)
        self._wake.set()


__all__ = ["DebouncedQueue"]
