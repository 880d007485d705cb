"""The example job placed on the example 16-node cluster, served by the emulated API server, for
`ringroute plan|simulate --job` (tests/cli/test_live.py) and the read-only role those commands need
(tests/manifests/test_whatif_rbac.py)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from emulation.apiserver import FakeApiServer, Request
from emulation.cluster import make_job
from planner import load_kube_objects
from webhook.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGIES = ROOT / "examples" / "topologies"
PODS = ROOT / "examples" / "pods" / "llm-pretrain-pods.yaml"
NS = "default"
JOB = "llm-pretrain"
JOB_UID = "5d0c3a86-3f5e-4a57-9b1c-2f0a9e1c7d41"
"""The owner UID the example pods carry."""

CPU_NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "cpu-0", "labels": {"kubernetes.io/hostname": "cpu-0"}},
    "status": {"addresses": [{"type": "InternalIP", "address": "10.9.0.1"}]},
}
"""A node without topology labels, running nothing of the job (the controller leaves such nodes out)."""


def example(name: str) -> list[dict[str, Any]]:
    return load_kube_objects((TOPOLOGIES / name).read_text(encoding="utf-8"))


def the_job() -> dict[str, Any]:
    job = make_job(JOB, 12)
    job["metadata"].update(namespace=NS, uid=JOB_UID)
    return job


def write_kubeconfig(path: Path, server: str, *, namespace: str | None = None) -> Path:
    context = f"{{cluster: emulated, user: reader{', namespace: ' + namespace if namespace else ''}}}"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: emulated\n"
        f"clusters: [{{name: emulated, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: reader, user: {token: reader-token}}]\n"
        f"contexts: [{{name: emulated, context: {context}}}]\n",
        encoding="utf-8",
    )
    return path


@dataclass
class Cluster:
    server: FakeApiServer
    kubeconfig: Path
    tmp: Path

    async def run(self, *argv: str) -> int:
        """`ringroute ARGV --kubeconfig ...` in a thread (the command runs its own event loop)."""
        return await asyncio.to_thread(main, [*argv, "--kubeconfig", str(self.kubeconfig)])

    def dump(self, name: str, plural: str, namespace: str | None = None, *, labelled: str | None = None) -> Path:
        """What `kubectl get PLURAL -o yaml` prints (optionally only objects carrying label `labelled`)."""
        items = [
            o
            for o in self.server.list(plural, namespace)
            if labelled is None or labelled in (o["metadata"].get("labels") or {})
        ]
        path = self.tmp / name
        body = {"apiVersion": "v1", "kind": "List", "items": items}
        path.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
        return path

    def reads(self, since: int = 0) -> list[Request]:
        return self.server.requests[since:]


@contextlib.asynccontextmanager
async def cluster(tmp_path: Path, *, hypernodes: bool = False, tor: bool = False) -> AsyncIterator[Cluster]:
    """The example job placed on the example 16-node cluster (plus a CPU node), served by the emulated API server;
    with HyperNodes and/or MindCluster's tor ConfigMap when asked."""
    async with FakeApiServer(hypernodes=True) as server:
        if not hypernodes:
            del server.served[("topology.volcano.sh", "hypernodes")]  # no HyperNode CRD
        await server.apply("jobs", the_job())
        for pod in load_kube_objects(PODS.read_text(encoding="utf-8")):
            await server.apply("pods", pod)
        for node in [*example("nodes-16.yaml"), CPU_NODE]:
            await server.apply("nodes", node)
        if hypernodes:
            for hypernode in example("hypernodes-16.yaml"):
                await server.apply("hypernodes", hypernode)
        if tor:
            (configmap,) = example("basic-tor-node-cm.yaml")
            await server.apply("configmaps", configmap)
        yield Cluster(server, write_kubeconfig(tmp_path / "kubeconfig", server.url), tmp_path)
