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
from tests.support.admission import apply_ops, leaf_spine_objects, load_example, patch_of, review
from webhook.admission.policy.network_topology import ClusterFacts
from webhook.cli.cluster_facts import ClusterFactsWatch
from webhook.cli.errors import CommandError
from webhook.cli.main import main
from webhook.cli.serve import ServeOptions, parse_address, run_worker
from webhook.common.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
NPU = "huawei.com/ascend-1980"


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


def write_kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
        f"clusters: [{{name: fake, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: fake, user: {token: fake-token}}]\n"
        "contexts: [{name: fake, context: {cluster: fake, user: fake}}]\n"
    )
    return path


async def leaf_spine_cluster(server: FakeApiServer, leaves: int = 6, per_leaf: int = 4) -> None:
    nodes, hypernodes = leaf_spine_objects(leaves, per_leaf)
    for obj in nodes:
        await server.apply("nodes", obj)
    for obj in hypernodes:
        await server.apply("hypernodes", obj)


async def published(seen: list[ClusterFacts], check: Any, within_s: float = 10.0) -> float:
    """Seconds until a published snapshot satisfies `check` (fails after `within_s`)."""
    started = time.monotonic()
    while not (seen and check(seen[-1])):
        assert time.monotonic() - started < within_s, f"not published within {within_s} s: {seen[-1:]}"
        await asyncio.sleep(0.02)
    return time.monotonic() - started


def hypernode_names(facts: ClusterFacts) -> set[str]:
    return {d.name for d in facts.topology.domains} if facts.topology is not None else set()


async def test_a_cluster_without_the_hypernode_crd_gives_admission_no_facts_and_is_looked_at_again() -> None:
    async with FakeApiServer(hypernodes=False) as server, server.repository() as repository:
        seen: list[ClusterFacts] = []
        watch = ClusterFactsWatch(repository, Settings(), seen.append, crd_check_interval_s=0.05)
        stop = asyncio.Event()
        task = asyncio.create_task(watch.run(stop))
        await asyncio.wait_for(watch.synced.wait(), 5)
        looks = len([r for r in server.requests if r.path.startswith("/apis/topology.volcano.sh")])
        await asyncio.sleep(0.3)
        assert len([r for r in server.requests if r.path.startswith("/apis/topology.volcano.sh")]) > looks
        assert seen == []
        stop.set()
        await asyncio.wait_for(task, 5)


async def test_admission_sees_a_new_hypernode_within_seconds_and_ignores_node_heartbeats() -> None:
    async with FakeApiServer(hypernodes=True) as server, server.repository(request_timeout_s=2.0) as repository:
        await leaf_spine_cluster(server)
        seen: list[ClusterFacts] = []
        watch = ClusterFactsWatch(repository, Settings(), seen.append, rebuild_delay_s=0.05)
        stop = asyncio.Event()
        task = asyncio.create_task(watch.run(stop))
        try:
            await published(seen, lambda f: len(hypernode_names(f)) == 7)
            first = seen[-1].topology
            assert first is not None
            assert first.tiers == (1, 2)
            assert first.cluster.nodes == 24
            await server.apply("nodes", leaf_spine_objects(7, 4)[0][24])  # node-24 of a seventh leaf
            new_leaf = leaf_spine_objects(7, 4)[1][6]
            await server.apply("hypernodes", new_leaf)
            waited = await published(seen, lambda f: "leaf-6" in hypernode_names(f))
            assert waited < 10.0
            leaf6 = next(d for d in seen[-1].topology.domains if d.name == "leaf-6")  # type: ignore[union-attr]
            assert leaf6.cards == {"huawei.com/ascend-1980": {8: 1}}
            # A status heartbeat changes nothing admission reads: no rebuild.
            rebuilds = watch.rebuilds
            await server.mutate("nodes", None, "node-03", lambda n: n["status"].update(conditions=[{"type": "Ready"}]))
            await asyncio.sleep(0.5)
            assert watch.rebuilds == rebuilds
            # Fewer cards is a change.
            await server.mutate("nodes", None, "node-03", lambda n: n["status"]["allocatable"].update({NPU: "4"}))
            await published(seen, lambda f: f.topology.domains[0].cards[NPU] == {8: 3, 4: 1})
            await server.remove("hypernodes", None, "leaf-6")
            await published(seen, lambda f: "leaf-6" not in hypernode_names(f))
        finally:
            stop.set()
            await asyncio.wait_for(task, 5)


async def test_a_failing_watch_keeps_the_last_snapshot() -> None:
    async with FakeApiServer(hypernodes=True) as server, server.repository(request_timeout_s=1.0) as repository:
        await leaf_spine_cluster(server, 2, 2)
        seen: list[ClusterFacts] = []
        watch = ClusterFactsWatch(repository, Settings(), seen.append, rebuild_delay_s=0.05)
        stop = asyncio.Event()
        task = asyncio.create_task(watch.run(stop))
        try:
            await published(seen, lambda f: len(hypernode_names(f)) == 3)
            server.faults.append(Fault(method="GET", path_contains="/apis/topology.volcano.sh", status=500, times=-1))
            await server.drop_watches()
            await asyncio.sleep(0.5)
            assert hypernode_names(seen[-1]) == {"leaf-0", "leaf-1", "spine"}
        finally:
            stop.set()
            await asyncio.wait_for(task, 5)


async def test_serve_asks_for_the_tier_that_holds_the_job_and_sees_hypernodes_that_appear_later(
    tls_material: Path, client_ssl: ssl.SSLContext, tmp_path: Path
) -> None:
    async with FakeApiServer(hypernodes=True) as server:
        await leaf_spine_cluster(server)
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
            job["spec"]["tasks"][0]["replicas"] = job["spec"]["minAvailable"] = 6
            answer = await mutate_when_ready(port, client_ssl, review(job, uid="topology"))
            mutated = apply_ops(job, patch_of(answer))
            assert mutated["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}
            assert "the largest tier-1 HyperNode, leaf-0, holds 4 of the 6 nodes" in answer["response"]["warnings"][-1]
            # A leaf of 8 nodes appears: the next 6-pod job fits one leaf, within seconds.
            nodes, hypernodes = leaf_spine_objects(7, 8)
            for node in nodes[48:]:
                await server.apply("nodes", node)
            await server.apply("hypernodes", hypernodes[6])
            started = time.monotonic()
            while True:
                answer = await mutate_when_ready(port, client_ssl, review(job, uid="later"))
                if apply_ops(job, patch_of(answer))["spec"]["networkTopology"]["highestTierAllowed"] == 1:
                    break
                assert time.monotonic() - started < 10.0
                await asyncio.sleep(0.1)
        finally:
            stop.set()
            assert await asyncio.wait_for(worker, 15) == 0
