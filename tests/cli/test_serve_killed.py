"""`kill -9` of `ringroute serve` leaves no process behind: its workers, the extender, the planning process the
controller starts, and multiprocessing's resource tracker all end within 5 s."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from emulation.apiserver import FakeApiServer
from tests.support.processes import descendants, kill_all, left_after_kill, running
from tests.support.whatif import write_kubeconfig

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_kill_9_of_serve_with_two_workers_the_controller_and_the_extender_leaves_no_process(
    tls_material: Path, tmp_path: Path
) -> None:
    async with FakeApiServer() as server:
        log = tmp_path / "serve.log"
        command = [
            sys.executable, "-m", "webhook", "serve", "--listen", f"127.0.0.1:{free_port()}",
            "--cert-dir", str(tls_material), "--kubeconfig", str(write_kubeconfig(tmp_path / "kubeconfig", server.url)),
            "--extender-listen", f"127.0.0.1:{free_port()}", "--workers", "2",
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
        with log.open("wb") as out:
            parent = await asyncio.create_subprocess_exec(
                *command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        processes: set[int] = set()
        try:
            deadline = time.monotonic() + 90
            wanted = ("event=planning_process_started", "event=extender_listening", "event=leader_acquired")
            while not all(event in log.read_text() for event in wanted):
                assert parent.returncode is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                await asyncio.sleep(0.1)  # the emulated API server answers meanwhile
            processes = descendants(parent.pid)
            # 2 workers, the extender and the planning process (children of the first), the resource tracker.
            assert len(processes) == 5, processes
            assert left_after_kill(parent.pid, processes) == set()
        finally:
            if parent.returncode is None:
                parent.kill()
                await parent.wait()
            kill_all(processes)
            assert not any(running(pid) for pid in processes)
