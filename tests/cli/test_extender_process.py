"""The extender runs in a process of its own, supervised by `ringroute serve`: restarted when it dies, stopped
with the server."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import signal
import socket
import urllib.request
from pathlib import Path

from tests.support.extender import job, node, tor
from webhook.cli.serve import ServeOptions, supervise_extender


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def options(port: int) -> ServeOptions:
    return ServeOptions(
        host="127.0.0.1",
        port=0,
        cert_dir=Path("."),
        config=None,
        kubeconfig=None,
        workers=1,
        controller=False,
        extender=True,
        extender_listen=f"127.0.0.1:{port}",
        self_signed_secret=None,
    )


async def healthy(port: int, timeout_s: float = 30.0) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while asyncio.get_running_loop().time() < deadline:
        try:
            body = await asyncio.to_thread(
                lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/extender/healthz", timeout=1).read()
            )
            if body == b"ok":
                return True
        except OSError:
            await asyncio.sleep(0.1)
    return False


def extender_children() -> list[multiprocessing.process.BaseProcess]:
    return [child for child in multiprocessing.active_children() if child.name == "ringroute-extender"]


async def test_the_extender_runs_in_its_own_process_and_is_restarted_when_it_dies() -> None:
    port = free_port()
    stop = asyncio.Event()
    supervisor = asyncio.create_task(supervise_extender(options(port), stop))
    try:
        assert await healthy(port)
        (first,) = extender_children()
        assert first.pid != os.getpid()
        body = json.dumps({"task": job().tasks[0], "nodes": [node("n0", tor("A"))]}).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/extender/prioritize", data=body, headers={"Content-Type": "application/json"}
        )
        answer = await asyncio.to_thread(lambda: json.loads(urllib.request.urlopen(request, timeout=10).read()))
        assert set(answer["nodeScore"]) == {"n0"}
        assert first.pid is not None
        os.kill(first.pid, signal.SIGKILL)
        await asyncio.to_thread(first.join, 10)
        assert await healthy(port)
        (second,) = extender_children()
        assert second.pid != first.pid
    finally:
        stop.set()
        await asyncio.wait_for(supervisor, 30)
    assert extender_children() == []


async def test_stopping_the_server_stops_the_extender_process_cleanly() -> None:
    port = free_port()
    stop = asyncio.Event()
    supervisor = asyncio.create_task(supervise_extender(options(port), stop))
    assert await healthy(port)
    (child,) = extender_children()
    stop.set()
    await asyncio.wait_for(supervisor, 30)
    assert not child.is_alive()
    assert child.exitcode == 0
