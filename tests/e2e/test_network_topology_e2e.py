"""On real Volcano with HyperNodes (v1.12+, the kit's `up.sh --volcano=1.15`): admission asks Volcano only for the
HyperNode tier that can hold each job and says so, refuses a tier no HyperNode can satisfy, sees a new HyperNode
within seconds, and with the extender in vc-scheduler every job lands on the fewest leaves with its table complete.

The cluster of the report is built for the test and removed afterwards: 24 Node objects `rre2e-NN` in 6 leaves of
4 (kept Ready by this test: status heartbeats and leases; it also plays kubelet and the device plugin for pods bound
to them), HyperNodes `rre2e-leaf-0`..`5` at tier 1 (labelMatch on the leaf label) under `rre2e-spine` at tier 2,
and pods of other work pinned to 8 of the nodes, leaving 2, 3, 2, 4, 1, 4 free per leaf. ringroute's admission (the
shipped webhook configurations pointed at this process and scoped to the test's namespace, with the HyperNode watch
`ringroute serve` runs), controller and scheduler extender run in this process. The extender is added to
vc-scheduler's configuration (the file `RINGROUTE_E2E_SCHEDULER_CONF` names, else the kit's
`<state>/volcano/scheduler.conf` beside the kubeconfig; vc-scheduler reloads it) for the test and put back after.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest
from aiohttp import web

from certs import ServingCertificates, generate_bundle
from tests.e2e.fake_cluster import FakeNodes, clean_up, job_manifest
from tests.e2e.scheduler import extender_in_scheduler, scheduler_conf
from tests.e2e.webhooks import registered_webhooks
from webhook.admission.server import HANDLERS_KEY, admission_app
from webhook.cli.cluster_facts import ClusterFactsWatch
from webhook.common.metrics import Metrics
from webhook.common.settings import ControllerSettings, Settings
from webhook.controller.run import run_controller
from webhook.kube.client import CONFIGMAPS, HYPERNODES, JOBS, PODS, KubeError, KubeRepository, connect

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]
NPU = "huawei.com/ascend-1980"
PREFIX = "rre2e"
LEAF_LABEL = "volcano.sh/tor"
FREE = (2, 3, 2, 4, 1, 4)
MERGE = "application/merge-patch+json"


def node_name(index: int) -> str:
    return f"{PREFIX}-{index:02d}"


def leaf_of(index: int) -> str:
    return f"{PREFIX}-leaf-{index // 4}"


def hypernode(name: str, tier: int, members: list[Obj]) -> Obj:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "members": members},
    }


def leaf_hypernode(leaf: str) -> Obj:
    return hypernode(leaf, 1, [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {LEAF_LABEL: leaf}}}}])


@dataclass
class Live:
    repo: KubeRepository
    namespace: str
    nodes: FakeNodes
    facts: ClusterFactsWatch


async def jobs_take_network_topology(repo: KubeRepository) -> bool:
    """Whether Volcano's Job CRD has `spec.networkTopology` (1.12+): the kit installs the HyperNode CRD with
    Volcano 1.7 too, which ignores it."""
    crd = await repo._call(
        "get crd",
        "GET",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/jobs.batch.volcano.sh",
        missing_ok=True,
    )
    return any(
        "networkTopology"
        in (version.get("schema") or {})
        .get("openAPIV3Schema", {})
        .get("properties", {})
        .get("spec", {})
        .get("properties", {})
        for version in ((crd or {}).get("spec") or {}).get("versions") or []
    )


@contextlib.asynccontextmanager
async def report_cluster() -> AsyncIterator[Live]:
    """The report's cluster (see the module docstring) in a fresh namespace, with ringroute's admission, controller
    and HyperNode watch running; everything undone on exit."""
    api = await connect(os.environ["RINGROUTE_E2E_KUBECONFIG"])
    assert api is not None
    repo = KubeRepository(api, Metrics(), request_timeout_s=10.0)
    if not (await repo.has_resource(HYPERNODES) and await jobs_take_network_topology(repo)):
        await repo.close()
        pytest.skip("the cluster's Volcano has no HyperNodes: needs Volcano 1.12+ (the kit's up.sh --volcano=1.15)")
    namespace = f"{PREFIX}-{uuid.uuid4().hex[:6]}"
    nodes = FakeNodes(repo, PREFIX, leaf_of)
    hypernodes: list[str] = []
    stop = asyncio.Event()
    tasks: list[asyncio.Task[Any]] = []
    try:
        await repo._call("create namespaces", "POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}})
        for index in range(24):
            await nodes.add(index)
        tasks.append(asyncio.create_task(nodes.run(stop)))
        for leaf in range(6):
            hypernodes.append(f"{PREFIX}-leaf-{leaf}")
            await repo.create_object(HYPERNODES, leaf_hypernode(f"{PREFIX}-leaf-{leaf}"))
        members = [{"type": "HyperNode", "selector": {"exactMatch": {"name": name}}} for name in hypernodes]
        hypernodes.append(f"{PREFIX}-spine")
        await repo.create_object(HYPERNODES, hypernode(f"{PREFIX}-spine", 2, members))
        for leaf, free in enumerate(FREE):
            for slot in range(4 - free):
                node = node_name(leaf * 4 + slot)
                filler = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"other-{node}", "namespace": namespace},
                    "spec": {
                        "nodeName": node,
                        "containers": [
                            {
                                "name": "other",
                                "image": "localhost/rr-busybox:1",
                                "resources": {"requests": {NPU: "8"}, "limits": {NPU: "8"}},
                            }
                        ],
                    },
                }
                await repo.create_object(PODS, filler)
        for _ in range(100):  # pods need the namespace's ServiceAccount, which kube-controller-manager makes
            if await repo._call(
                "get", "GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/default", missing_ok=True
            ):
                break
            await asyncio.sleep(0.1)
        settings = msgspec.structs.replace(
            Settings(), controller=ControllerSettings(namespaces=(namespace,), lease_namespace=namespace)
        )
        metrics = Metrics()
        tasks.append(
            asyncio.create_task(
                run_controller(settings, KubeRepository(repo.api, metrics), metrics, identity="e2e", stop=stop)
            )
        )
        async with admission(repo, settings, namespace) as watch:
            yield Live(repo, namespace, nodes, watch)
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        await clean_up(repo, namespace, hypernodes, nodes.names)


@contextlib.asynccontextmanager
async def admission(repo: KubeRepository, settings: Settings, namespace: str) -> AsyncIterator[ClusterFactsWatch]:
    """ringroute's admission over TLS on loopback with the HyperNode watch `ringroute serve` runs, registered with
    the shipped webhook configurations (renamed, pointed at this server, for the test's namespace only)."""
    with tempfile.TemporaryDirectory() as cert_dir:
        bundle = generate_bundle("ringroute-webhook", "ringroute-system", Path(cert_dir), extra_names=("127.0.0.1",))
        certificates = ServingCertificates(Path(cert_dir))
        app = admission_app(settings, Metrics(), certificates=certificates)
        handlers = app[HANDLERS_KEY]

        def publish(facts: Any) -> None:
            handlers.cluster_facts = facts

        watch = ClusterFactsWatch(repo, settings, publish)
        stop = asyncio.Event()
        watcher = asyncio.create_task(watch.run(stop))
        await asyncio.wait_for(watch.synced.wait(), 30)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=certificates.ssl_context())
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            async with registered_webhooks(repo, namespace, port, bundle.ca_cert_pem):
                yield watch
        finally:
            stop.set()
            await asyncio.gather(watcher, return_exceptions=True)
            await runner.cleanup()


async def dry_run_warnings(repo: KubeRepository, job: Obj) -> list[str]:
    """The `Warning:` lines the API server returns for a dry-run create (what kubectl prints)."""
    response = await repo._open(
        "create jobs", "POST", JOBS.path(job["metadata"]["namespace"]), query={"dryRun": "All"}, body=job
    )
    try:
        assert response.status == 201, await response.text()
        return [value.split(" ", 2)[2].strip('"') for value in response.headers.getall("Warning", [])]
    finally:
        response.release()


async def placed_leaves(
    repo: KubeRepository, namespace: str, job: str, size: int, timeout_s: float = 60.0
) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pods, _ = await repo.list_objects(PODS, namespace, label_selector=f"volcano.sh/job-name={job}")
        bound = [p["spec"]["nodeName"] for p in pods if (p.get("spec") or {}).get("nodeName")]
        if len(bound) == size:
            return sorted({leaf_of(int(node.rsplit("-", 1)[1])) for node in bound})
        await asyncio.sleep(0.5)
    raise AssertionError(f"job {namespace}/{job}: not all {size} pods bound within {timeout_s} s")


async def completed_table(repo: KubeRepository, namespace: str, job: str, timeout_s: float = 60.0) -> Obj:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        configmap = await repo.get_object(CONFIGMAPS, namespace, f"configmap1980-{job}")
        table: Obj = json.loads(((configmap or {}).get("data") or {}).get("jobstart_hccl.json", "{}"))
        if table.get("status") == "completed":
            return table
        await asyncio.sleep(0.5)
    raise AssertionError(f"rank table of {namespace}/{job} not completed within {timeout_s} s")


async def test_admission_sizes_refuses_and_sees_a_new_hypernode_within_seconds() -> None:
    async with report_cluster() as live:
        repo, namespace = live.repo, live.namespace
        [warning] = [
            w for w in await dry_run_warnings(repo, job_manifest("llm", namespace, 6)) if "networkTopology" in w
        ]
        assert warning.startswith(
            "spec.networkTopology: ringroute asked Volcano to keep this job within one tier-2 HyperNode (mode hard, "
            f"highestTierAllowed 2): the largest tier-1 HyperNode, {PREFIX}-leaf-0, holds 4 of the 6 nodes"
        )
        with pytest.raises(KubeError) as refused:
            await repo.create_object(
                JOBS, job_manifest("leaf", namespace, 6, {"mode": "hard", "highestTierAllowed": 1})
            )
        assert refused.value.status == 422
        assert f"largest: tier 1 {PREFIX}-leaf-0 4 nodes, tier 2 {PREFIX}-spine 24 nodes" in str(refused.value)
        # A leaf of 8 nodes appears: the next 6-pod job fits one leaf.
        for index in range(24, 32):
            await live.nodes.add(index, f"{PREFIX}-leaf-6")
        created = time.monotonic()
        await repo.create_object(HYPERNODES, leaf_hypernode(f"{PREFIX}-leaf-6"))
        try:
            while True:
                warnings = await dry_run_warnings(repo, job_manifest("llm", namespace, 6))
                if any("within one tier-1 HyperNode" in w for w in warnings):
                    break
                assert time.monotonic() - created < 10.0, warnings
                await asyncio.sleep(0.2)
            print(
                json.dumps({"e2e": "new-hypernode-seen-by-admission", "seconds": round(time.monotonic() - created, 2)})
            )
        finally:
            await repo.delete_object(HYPERNODES, None, f"{PREFIX}-leaf-6")


async def test_with_the_extender_jobs_land_on_the_fewest_leaves_and_their_tables_complete() -> None:
    conf = scheduler_conf()
    if conf is None:
        pytest.skip("vc-scheduler's configuration is not writable here: set RINGROUTE_E2E_SCHEDULER_CONF")
    async with report_cluster() as live, extender_in_scheduler(conf) as metrics:
        repo, namespace = live.repo, live.namespace
        job = await repo.create_object(JOBS, job_manifest("llm", namespace, 6))
        assert job["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}
        leaves = await placed_leaves(repo, namespace, "llm", 6)
        assert len(leaves) == 2, leaves  # 2/3/2/4/1/4 free: 4 + 2 is the fewest
        table = await completed_table(repo, namespace, "llm")
        assert table["server_count"] == "6"
        job = await repo.create_object(JOBS, job_manifest("bert", namespace, 4))
        assert job["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
        assert len(await placed_leaves(repo, namespace, "bert", 4)) == 1
        await completed_table(repo, namespace, "bert")
        plans = {
            outcome: metrics.registry.get_sample_value("ringroute_extender_gang_plans_total", {"outcome": outcome})
            for outcome in ("enforced", "no_fit", "left_to_volcano")
        }
        print(json.dumps({"e2e": "network-topology-leaves", "llm": leaves, "plans": plans}))
        assert plans["enforced"]
        assert not plans["left_to_volcano"]
