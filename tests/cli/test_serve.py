"""`ringroute serve`: flag errors are one line, it serves admission without an API server, and SIGTERM stops it."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from emulation.apiserver import FakeApiServer, Fault
from tests.support.admission import apply_ops, load_example, patch_of, review
from webhook.admission.mutation import ClusterFacts
from webhook.admission.server import AdmissionHandlers
from webhook.cli.errors import CommandError
from webhook.cli.main import main
from webhook.cli.serve import (
    ServeOptions,
    detect_cluster_facts,
    keep_cluster_facts,
    parse_address,
    refresh_cluster_facts,
    run_worker,
)
from webhook.common.metrics import Metrics
from webhook.common.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def no_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """An environment where no API server configuration can be found."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.setenv("HOME", str(tmp_path))
    return dict(os.environ)


def test_addresses_parse_and_bad_ones_name_the_flag() -> None:
    assert parse_address("127.0.0.1:9443", "--listen") == ("127.0.0.1", 9443)
    assert parse_address("[::1]:8443", "--listen") == ("::1", 8443)
    with pytest.raises(CommandError, match="--listen: expected ADDR:PORT"):
        parse_address("localhost", "--listen")
    for port in ("²", "٨", "9" * 5000):  # str.isdigit() holds for the first two; int() refuses "²" and 5,000 digits
        with pytest.raises(CommandError, match="--listen: expected ADDR:PORT"):
            parse_address(f"127.0.0.1:{port}", "--listen")


def test_bad_flags_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--listen", "127.0.0.1:x", "--cert-dir", str(tmp_path)]) == 2
    assert main(["serve", "--listen", "127.0.0.1:1", "--cert-dir", str(tmp_path / "nope")]) == 2
    assert main(["serve", "--cert-dir", str(tmp_path), "--workers", "0"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        "ringroute serve: error: --listen: expected ADDR:PORT such as 0.0.0.0:9443 (got '127.0.0.1:x')",
        f"ringroute serve: error: --cert-dir: {tmp_path / 'nope'} is not a directory; create one with "
        "`ringroute certs generate --out-dir DIR`",
        "ringroute serve: error: --workers: must be at least 1",
    ]


async def mutate_when_ready(port: int, client_ssl: ssl.SSLContext, review_body: dict[str, Any]) -> Any:
    """POST /jobs/mutate once the server on `port` reports ready (within 10 s); the decoded answer."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_ssl)) as session:
        for _ in range(200):
            try:
                async with session.get(f"https://127.0.0.1:{port}/readyz") as resp:
                    assert resp.status == 200
                    break
            except aiohttp.ClientConnectorError:
                await asyncio.sleep(0.05)
        async with session.post(
            f"https://127.0.0.1:{port}/jobs/mutate",
            data=orjson.dumps(review_body),
            headers={"Content-Type": "application/json"},
        ) as resp:
            return await resp.json()


@pytest.mark.usefixtures("no_cluster")
async def test_serve_answers_admission_without_an_api_server_and_stops(
    tls_material: Path, client_ssl: ssl.SSLContext
) -> None:
    port = free_port()
    options = ServeOptions(
        host="127.0.0.1",
        port=port,
        cert_dir=tls_material,
        config=None,
        kubeconfig=None,
        workers=1,
        controller=True,
        extender=True,
        extender_listen=f"127.0.0.1:{free_port()}",
        self_signed_secret=None,
    )
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(options, primary=True, stop=stop))
    try:
        answer = await mutate_when_ready(port, client_ssl, review(load_example("documented.yaml"), uid="serve"))
        assert answer["response"]["uid"] == "serve"
        assert answer["response"]["patchType"] == "JSONPatch"
    finally:
        stop.set()
        assert await asyncio.wait_for(worker, 15) == 0


def test_sigterm_stops_the_server_cleanly(tls_material: Path, no_cluster: dict[str, str]) -> None:
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "webhook",
            "serve",
            "--listen",
            f"127.0.0.1:{port}",
            "--cert-dir",
            str(tls_material),
            "--no-extender",
        ],
        cwd=ROOT,
        env=no_cluster,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        context = ssl.create_default_context(cafile=str(tls_material / "ca.crt"))
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=context, timeout=2) as r:
                    assert r.read() == b"ok"
                    break
            except OSError:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                assert time.monotonic() < deadline
                time.sleep(0.1)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


# -- cluster facts: HyperNodes -------------------------------------------------------------------------------

HYPERNODE = {
    "apiVersion": "topology.volcano.sh/v1alpha1",
    "kind": "HyperNode",
    "metadata": {"name": "leaf-1"},
    "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "node-1"}}}]},
}


def write_kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
        f"clusters: [{{name: fake, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: fake, user: {token: fake-token}}]\n"
        "contexts: [{name: fake, context: {cluster: fake, user: fake}}]\n"
    )
    return path


async def test_a_cluster_without_the_hypernode_crd_or_without_hypernodes_has_none() -> None:
    async with FakeApiServer(hypernodes=False) as server, server.repository() as repository:
        assert await detect_cluster_facts(repository) == ClusterFacts(hypernodes=False)
    async with FakeApiServer(hypernodes=True) as server, server.repository() as repository:
        assert await detect_cluster_facts(repository) == ClusterFacts(hypernodes=False)
        await server.apply("hypernodes", HYPERNODE)
        assert await detect_cluster_facts(repository) == ClusterFacts(hypernodes=True)


async def test_admission_notices_hypernodes_that_appear_later_and_keeps_its_answer_when_a_look_fails() -> None:
    async with FakeApiServer(hypernodes=True) as server, server.repository(request_timeout_s=1.0) as repository:
        handlers = AdmissionHandlers(Settings(), Metrics(), None)
        await refresh_cluster_facts(repository, handlers)
        assert handlers.cluster_facts.hypernodes is False
        stop = asyncio.Event()
        watcher = asyncio.create_task(keep_cluster_facts(repository, handlers, stop, 0.02))
        try:
            await server.apply("hypernodes", HYPERNODE)
            for _ in range(200):
                if handlers.cluster_facts.hypernodes:
                    break
                await asyncio.sleep(0.01)
            assert handlers.cluster_facts.hypernodes is True
            server.faults.append(Fault(method="GET", path_contains="/apis/topology.volcano.sh", status=500, times=-1))
            await refresh_cluster_facts(repository, handlers)
            assert handlers.cluster_facts.hypernodes is True
        finally:
            stop.set()
            await asyncio.wait_for(watcher, 5)


async def test_serve_requests_network_topology_for_route_planned_jobs_once_it_finds_hypernodes(
    tls_material: Path, client_ssl: ssl.SSLContext, tmp_path: Path
) -> None:
    async with FakeApiServer(hypernodes=True) as server:
        await server.apply("hypernodes", HYPERNODE)
        port = free_port()
        options = ServeOptions(
            host="127.0.0.1",
            port=port,
            cert_dir=tls_material,
            config=None,
            kubeconfig=str(write_kubeconfig(tmp_path / "kubeconfig", server.url)),
            workers=1,
            controller=False,
            extender=False,
            extender_listen=None,
            self_signed_secret=None,
        )
        stop = asyncio.Event()
        worker = asyncio.create_task(run_worker(options, primary=True, stop=stop))
        try:
            job = load_example("distributed-route-plan.yaml")
            answer = await mutate_when_ready(port, client_ssl, review(job, uid="topology"))
            mutated = apply_ops(job, patch_of(answer))
            assert mutated["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
        finally:
            stop.set()
            assert await asyncio.wait_for(worker, 15) == 0
