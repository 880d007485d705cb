"""The reconcilers' debounced work queue."""

from __future__ import annotations

import asyncio

import pytest

from webhook.kube.workqueue import DebouncedQueue


async def test_a_worker_cancelled_while_the_queue_wakes_it_stops() -> None:
    """The cancel and the wake-up land in the same loop iteration (a job added as the controller stops): the
    worker must end, or the controller's shutdown waits for it forever (Python 3.11's wait_for dropped such a
    cancel)."""
    queue = DebouncedQueue(10.0, 100.0)
    queue.add("team-a/waiting")  # due in 10 s: the worker waits with a timeout
    worker = asyncio.create_task(queue.get())
    await asyncio.sleep(0.01)
    queue.add("team-a/train")
    worker.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(worker, 2)


async def test_a_key_is_handed_out_once_quiet_and_to_one_worker_at_a_time() -> None:
    queue = DebouncedQueue(0.05, 1.0)
    queue.add("team-a/train")
    queue.add("team-a/train")
    assert await asyncio.wait_for(queue.get(), 1) == "team-a/train"
    queue.add("team-a/train", 0.0)
    second = asyncio.create_task(queue.get())
    await asyncio.sleep(0.1)
    assert not second.done(), "not while the first worker still holds it"
    queue.done("team-a/train")
    assert await asyncio.wait_for(second, 1) == "team-a/train"
