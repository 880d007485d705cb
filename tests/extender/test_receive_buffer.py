"""The extender keeps one receive buffer for large bodies: reused, never read past the current body, bounded."""

from __future__ import annotations

import json

from tests.support.extender import ServedExtender, job, node, serve_extender_for_test, tor
from webhook.common.buffered_http import ReceiveBuffer
from webhook.volcano_emulation.cluster_objects import task_info

MIB = 1 << 20


def test_a_large_buffer_given_back_serves_the_next_large_body() -> None:
    buffers = ReceiveBuffer(keep_bytes=64 * MIB)
    first = buffers.take(4 * MIB)
    buffers.give_back(first)
    assert buffers.take(2 * MIB) is first
    assert buffers.take(2 * MIB) is not first, "the kept buffer is lent to one body at a time"


def test_small_bodies_and_buffers_over_the_bound_are_not_kept() -> None:
    buffers = ReceiveBuffer(keep_bytes=8 * MIB)
    small = buffers.take(1024)
    buffers.give_back(small)
    assert buffers.take(2 * MIB) is not small
    huge = buffers.take(16 * MIB)
    buffers.give_back(huge)
    assert buffers.take(2 * MIB) is not huge, "a buffer over keep_bytes is dropped, so memory stays bounded"


def test_the_larger_of_two_returned_buffers_is_kept() -> None:
    buffers = ReceiveBuffer(keep_bytes=64 * MIB)
    smaller, larger = buffers.take(2 * MIB), buffers.take(6 * MIB)
    buffers.give_back(larger)
    buffers.give_back(smaller)
    assert buffers.take(5 * MIB) is larger


def prioritize_body(nodes: int, padding: int) -> bytes:
    """A prioritize request of `nodes` candidates on two leaves; `padding` bytes of label text make it large."""
    sim_job = job("llm", 4)
    filler = {"example.com/padding": "x" * padding}
    infos = [node(f"n{i}", tor("A" if i % 2 else "B") | filler) for i in range(nodes)]
    return json.dumps({"task": task_info(sim_job, 0), "nodes": infos}).encode()


async def test_a_shorter_body_after_a_longer_one_is_read_alone() -> None:
    """The second body fills only part of the kept buffer: what follows it there (the end of the first body)
    must not be read as part of it."""
    client: ServedExtender = await serve_extender_for_test()
    try:
        long_body, short_body = prioritize_body(40, 60_000), prioritize_body(6, 200_000)
        assert len(long_body) > len(short_body) > ReceiveBuffer.SMALL_BYTES
        answers = []
        for body in (long_body, short_body, long_body):
            response = await client.post(
                "/extender/prioritize", data=body, headers={"Content-Type": "application/json"}
            )
            assert response.status == 200, await response.text()
            answers.append(json.loads(await response.read())["nodeScore"])
        assert set(answers[0]) == {f"n{i}" for i in range(40)} == set(answers[2])
        assert set(answers[1]) == {f"n{i}" for i in range(6)}
    finally:
        await client.close()


def test_large_buffers_not_kept_are_unmapped_at_once() -> None:
    import mmap

    buffers = ReceiveBuffer(keep_bytes=8 * MIB)
    kept, bigger_than_kept = buffers.take(2 * MIB), buffers.take(4 * MIB)
    over_bound = buffers.take(16 * MIB)
    assert isinstance(kept, mmap.mmap)
    assert isinstance(bigger_than_kept, mmap.mmap)
    assert isinstance(over_bound, mmap.mmap)
    buffers.give_back(kept)
    buffers.give_back(over_bound)
    assert over_bound.closed, "over keep_bytes: its memory goes back to the system with the body"
    assert not kept.closed
    buffers.give_back(bigger_than_kept)
    assert kept.closed, "the smaller of two returned buffers is unmapped"
    assert buffers.take(3 * MIB) is bigger_than_kept
