"""On real kubelets: the training command starts within 5 s of the completed rank table, with the right ranks.

Needs RINGROUTE_E2E_KUBECONFIG of a cluster with Volcano and at least three Ready kubelet nodes that advertise
`huawei.com/ascend-1980: 8` and hold the image `localhost/rr-busybox:1`: the real-cluster kit's
`up.sh --volcano --nodes 3`, which `make e2e` starts when no kubeconfig is given. Per trial, in a namespace
`ringroute-e2e-<random>` (deleted afterwards):

- ringroute's admission (the shipped webhook configurations, pointed at this process over TLS and scoped to the
  namespace) admits and mutates a route-planned 3-pod job whose command prints its start time and environment;
  the controller runs in this process, its watches limited to the namespace;
- Volcano creates and binds the pods, kubelets run them with the rank-table ConfigMap mounted, and the launcher in
  each pod waits for the table; this test plays the device plugin: it writes each pod's device annotation once the
  pod is bound. In the second trial one node starts its pod late: that pod's annotation comes 8 s after its
  binding and its containers start 8 s late (an init container waits), so the table completes while that pod is
  still starting;
- the table completes (with pinned routes steered by 2 queue pairs' source ports through a declared leaf hash), the
  controller annotates the pods, and each kubelet rewrites its pod's files.

Asserted for every pod: table completed -> training command started <= 5 s (the completion time is taken as the
start of the last poll that still saw the table unfinished, so the figure errs long), RANK_AFTER_ACC and NODE_RANK
as in ranks.env, its own table entry by rank, MASTER_ADDR the rank-0 pod's IP, WORLD_SIZE the table's
server_count, the table file byte-equal to the ConfigMap's, and HCCL_RDMA_QP_PORT_CONFIG_PATH pointing at a
MultiQpSrcPort.cfg byte-equal to the ConfigMap's (which HCCL's parsing rules read with 2 ports a line). Node
labels `ringroute-e2e.io/leaf` (the topology) are set for the test and removed afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest

from emulation.cluster import device_annotation
from tests.e2e.webhooks import serving_admission
from tests.support import hccl_multi_qp
from tests.support.tools import in_ci
from webhook.common.metrics import Metrics
from webhook.common.names import RANK_TABLE_VERSION_ANNOTATION
from webhook.common.settings import ControllerSettings, PlanningSettings, Settings, TopologySettings
from webhook.controller.run import run_controller
from webhook.kube.client import CONFIGMAPS, JOBS, NODES, PODS, KubeError, KubeRepository, connect
from webhook.kube.leader import LeaderElector

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]
PODS_IN_JOB = 3
NPU = "huawei.com/ascend-1980"
LEAF_LABEL = "ringroute-e2e.io/leaf"
LATE_S = 8.0
"""How much later the late node's pod gets its device annotation."""
TARGET_S = 5.0
LOCK_WAIT_S = 600.0
"""How long a run waits for another run on the same cluster to finish."""
TRAINING = r"""
now=$(adjtimex | awk '/tv_sec/ {s = $2} /tv_usec/ {u = $2} END {printf "%d.%06d", s, u}')
sum=$(sha256sum "$RANK_TABLE_FILE" | cut -d " " -f 1)
qp=${HCCL_RDMA_QP_PORT_CONFIG_PATH:-unset}
qp_sum=$(sha256sum "$qp/MultiQpSrcPort.cfg" 2>/dev/null | cut -d " " -f 1)
echo "ringroute-e2e started=$now pod=$POD_NAME rank=$RANK_AFTER_ACC node_rank=$NODE_RANK" \
    "master=$MASTER_ADDR world=$WORLD_SIZE table=$RANK_TABLE_FILE table_sha256=$sum qp=$qp qp_sha256=${qp_sum:-none}"
trap "exit 0" TERM
sleep 3600 &
wait
"""
"""The job's command (busybox sh): its first act is to read the clock, microseconds included."""


def job_manifest(name: str, namespace: str, late_pod: str | None = None) -> Obj:
    """The documented route-planned job, three pods of 8 cards, on the kit's busybox image; with `late_pod`, that
    pod's containers start LATE_S late (an init container waits), as on a node that starts its pod late."""
    template = {
        "metadata": {"labels": {"ring-controller.cce": "ascend-1980"}},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 5,
            "containers": [
                {
                    "name": "train",
                    "image": "localhost/rr-busybox:1",
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["sh", "-c", TRAINING],
                    "env": [{"name": "ROUTE_PLAN", "value": "true"}],
                    "resources": {"requests": {NPU: "8"}, "limits": {NPU: "8"}},
                }
            ],
        },
    }
    if late_pod is not None:
        wait = f'if [ "$HOSTNAME" = {late_pod} ]; then sleep {LATE_S:g}; fi'
        template["spec"]["initContainers"] = [  # type: ignore[index]
            {
                "name": "node-start",
                "image": "localhost/rr-busybox:1",
                "imagePullPolicy": "IfNotPresent",
                "command": ["sh", "-c", wait],
            }
        ]
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {"ring-controller.cce": "ascend-1980"}},
        "spec": {
            "minAvailable": PODS_IN_JOB,
            "schedulerName": "volcano",
            "queue": "default",
            "tasks": [{"name": "worker", "replicas": PODS_IN_JOB, "template": template}],
        },
    }


HASH_MODEL = """apiVersion: ringroute.io/v1alpha1
kind: HashModel
tiers:
  leaf: {function: crc16-ccitt, seed: 0x1d0f, bucket: modulo}
"""
"""The leaves' ECMP hash as the settings declare it: pinned routes are steered by per-queue-pair source ports."""


def e2e_settings(namespace: str, hash_model_file: Path) -> Settings:
    """Shipped defaults, but: no driver hostPaths (the kit's hosts have no Ascend driver, and a missing hostPath
    would be created on the host), no nodeSelector, the topology from this test's leaf label, the controller
    limited to the test's namespace with its Lease there, and pinned routes with 2 queue pairs steered through
    HASH_MODEL (MultiQpSrcPort.cfg in the ConfigMap, HCCL_RDMA_QP_PORT_CONFIG_PATH from the launcher)."""
    defaults = Settings()
    profile = msgspec.structs.replace(defaults.profiles[0], host_path_volumes=(), node_selector=())
    hash_model_file.write_text(HASH_MODEL, encoding="utf-8")
    return msgspec.structs.replace(
        defaults,
        profiles=(profile, *defaults.profiles[1:]),
        topology=TopologySettings(label_keys=(LEAF_LABEL,), hash_model_file=str(hash_model_file)),
        planning=PlanningSettings(routing="pinned", qps_per_connection=2),
        controller=ControllerSettings(namespaces=(namespace,), lease_namespace=namespace),
    )


@contextlib.asynccontextmanager
async def exclusive(repo: KubeRepository) -> AsyncIterator[None]:
    """The trial needs the cluster's NPU nodes to itself: one run at a time per cluster, by a Lease in `default`
    (released at the end; a run that dies frees it within 30 s)."""
    elector = LeaderElector(
        repo,
        Metrics(),
        name="ringroute-e2e-kubelets",
        namespace="default",
        identity=f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}",
        lease_duration_s=30,
        renew_deadline_s=20,
        retry_period_s=2,
    )
    held = asyncio.Event()
    stop = asyncio.Event()

    async def hold() -> None:
        held.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(elector.run(hold, stop))
    try:
        await asyncio.wait_for(held.wait(), LOCK_WAIT_S)
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


@dataclass
class Cluster:
    repo: KubeRepository
    namespace: str
    nodes: list[str]


@contextlib.asynccontextmanager
async def cluster() -> AsyncIterator[Cluster]:
    """A namespace on the e2e cluster, held alone (`exclusive`), its nodes labelled with two leaves; all of it
    undone on exit, the namespace's pods gone before the next run may start."""
    api = await connect(os.environ["RINGROUTE_E2E_KUBECONFIG"])
    assert api is not None
    repo = KubeRepository(api, Metrics(), request_timeout_s=10.0)
    namespace = f"ringroute-e2e-{uuid.uuid4().hex[:6]}"
    namespace_path = f"/api/v1/namespaces/{namespace}"
    labelled: list[str] = []
    try:
        async with exclusive(repo):
            try:
                nodes = await npu_nodes(repo)
                for index, node in enumerate(nodes):
                    await repo.patch_object(
                        NODES, None, node, {"metadata": {"labels": {LEAF_LABEL: f"leaf-{index % 2}"}}}
                    )
                    labelled.append(node)
                await repo._call(
                    "create namespaces", "POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}}
                )
                for _ in range(100):  # pods need the namespace's ServiceAccount, which kube-controller-manager makes
                    if await repo._call("get", "GET", f"{namespace_path}/serviceaccounts/default", missing_ok=True):
                        break
                    await asyncio.sleep(0.1)
                yield Cluster(repo, namespace, nodes)
            finally:
                await repo._call("delete namespaces", "DELETE", namespace_path, missing_ok=True)
                for node in labelled:
                    with contextlib.suppress(KubeError):
                        await repo.patch_object(NODES, None, node, {"metadata": {"labels": {LEAF_LABEL: None}}})
                for _ in range(600):  # its pods free the NPUs for the next run
                    if await repo._call("get", "GET", namespace_path, missing_ok=True) is None:
                        break
                    await asyncio.sleep(0.1)
    finally:
        await repo.close()


async def npu_nodes(repo: KubeRepository) -> list[str]:
    """The Ready nodes with 8 NPUs; skips the test (fails it under CI=true) when there are fewer than the job's."""
    items, _ = await repo.list_objects(NODES)
    nodes = sorted(
        node["metadata"]["name"]
        for node in items
        if int((node.get("status") or {}).get("allocatable", {}).get(NPU, "0")) >= 8
        and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (node.get("status") or {}).get("conditions") or []
        )
    )
    if len(nodes) < PODS_IN_JOB:
        message = f"needs {PODS_IN_JOB} Ready nodes with {NPU}: 8 (the kit's up.sh --volcano --nodes 3); has {nodes}"
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    return nodes


async def play_device_plugin(repo: KubeRepository, namespace: str, late_pod: str | None, stop: asyncio.Event) -> None:
    """Annotate each pod with device info once it is bound, as the device plugin does when kubelet allocates the
    NPUs; `late_pod` LATE_S later than its binding would have it."""
    bound_at: dict[str, float] = {}
    done: set[str] = set()
    while not stop.is_set():
        pods, _ = await repo.list_objects(PODS, namespace)
        for pod in pods:
            name, node = pod["metadata"]["name"], (pod.get("spec") or {}).get("nodeName")
            if not node or name in done:
                continue
            bound_at.setdefault(name, time.monotonic())
            if name == late_pod and time.monotonic() - bound_at[name] < LATE_S:
                continue
            await repo.patch_object(PODS, namespace, name, {"metadata": {"annotations": device_annotation(name, node)}})
            done.add(name)
        await asyncio.sleep(0.1)


async def completed_at(repo: KubeRepository, namespace: str, configmap: str, timeout_s: float) -> tuple[float, Obj]:
    """(wall-clock time when the table may have completed at the earliest, the completed ConfigMap): the start of
    the last poll that still saw it unfinished."""
    deadline = time.monotonic() + timeout_s
    unfinished_at = time.time()
    while time.monotonic() < deadline:
        poll_started = time.time()
        current = await repo.get_object(CONFIGMAPS, namespace, configmap)
        table = json.loads(((current or {}).get("data") or {}).get("jobstart_hccl.json", "{}"))
        if current is not None and table.get("status") == "completed":
            return unfinished_at, current
        unfinished_at = poll_started
        await asyncio.sleep(0.05)
    raise AssertionError(
        f"ConfigMap {namespace}/{configmap} not completed within {timeout_s}s (its job's events say why; pods of an "
        "earlier run that died may still hold the nodes' NPUs: kubectl get pods -A)"
    )


async def started_lines(
    repo: KubeRepository, namespace: str, pods: list[str], timeout_s: float
) -> dict[str, dict[str, str]]:
    """Each pod's `ringroute-e2e started=...` line from its log, parsed into fields."""
    found: dict[str, dict[str, str]] = {}
    deadline = time.monotonic() + timeout_s
    while len(found) < len(pods) and time.monotonic() < deadline:
        for pod in pods:
            if pod in found:
                continue
            response = await repo._open("read log", "GET", PODS.path(namespace, pod) + "/log")
            try:
                text = (await response.read()).decode("utf-8", "replace") if response.status == 200 else ""
            finally:
                response.release()
            for line in text.splitlines():
                if line.startswith("ringroute-e2e started="):
                    found[pod] = dict(field.split("=", 1) for field in line.split()[1:])
        await asyncio.sleep(0.2)
    missing = sorted(set(pods) - set(found))
    assert not missing, f"no start line within {timeout_s}s from {missing}"
    return found


@pytest.mark.parametrize("late", [False, True], ids=["together", "one-node-late"])
async def test_training_starts_within_5_s_of_the_completed_table_with_the_right_ranks(
    late: bool, tmp_path: Path
) -> None:
    async with cluster() as live:
        repo, namespace = live.repo, live.namespace
        settings = e2e_settings(namespace, tmp_path / "hash-model.yaml")
        metrics = Metrics()
        stop = asyncio.Event()
        controller = asyncio.create_task(
            run_controller(settings, KubeRepository(repo.api, metrics), metrics, identity="e2e", stop=stop)
        )
        job_name = "train-late" if late else "train"
        pods = [f"{job_name}-worker-{index}" for index in range(PODS_IN_JOB)]
        late_pod = pods[2] if late else None
        device_plugin = asyncio.create_task(play_device_plugin(repo, namespace, late_pod, stop))
        try:
            async with serving_admission(repo, settings, namespace):
                job = await repo.create_object(JOBS, job_manifest(job_name, namespace, late_pod))
            command = job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["command"]
            assert command[:3] == ["/bin/sh", "/user/config/ringroute-launcher.sh", "--"], "admission wrapped it"
            earliest, configmap = await completed_at(repo, namespace, f"configmap1980-{job_name}", timeout_s=120)
            lines = await started_lines(repo, namespace, pods, timeout_s=60)

            data = configmap["data"]
            table = json.loads(data["jobstart_hccl.json"])
            ranks = dict(line.split("=", 1) for line in data["ranks.env"].splitlines() if line)
            pod_ips = {}
            versions = {}
            for pod in pods:
                stored = await repo.get_object(PODS, namespace, pod)
                assert stored is not None
                pod_ips[pod] = stored["status"]["podIP"]
                versions[pod] = stored["metadata"].get("annotations", {}).get(RANK_TABLE_VERSION_ANNOTATION)
            table_sha = hashlib.sha256(data["jobstart_hccl.json"].encode()).hexdigest()
            ports_sha = hashlib.sha256(data["MultiQpSrcPort.cfg"].encode()).hexdigest()
            report = json.loads(data["ringroute-plan.json"])
            delays = {pod: round(float(lines[pod]["started"]) - earliest, 3) for pod in pods}
            pods_updated_s = metrics.registry.get_sample_value("ringroute_rank_table_pods_updated_seconds_sum")
            print(
                json.dumps(
                    {
                        "e2e": "table-completed-to-training-started",
                        "trial": "one-node-late" if late else "together",
                        "late_pod": late_pod,
                        "seconds": delays,
                        "max_seconds": max(delays.values()),
                        "target_seconds": TARGET_S,
                        "table_written_to_last_pod_updated_seconds": pods_updated_s,
                        "ranks": {pod: lines[pod]["rank"] for pod in pods},
                        "master": lines[pods[0]]["master"],
                        "source_ports": report["steering"]["message"],
                    },
                    sort_keys=True,
                )
            )
            assert table["status"] == "completed"
            assert int(table["server_count"]) == PODS_IN_JOB
            written = configmap["metadata"]
            version = f"{written['resourceVersion']}-{written['annotations']['ringroute.io/data-sha256'][:16]}"
            for pod in pods:
                line = lines[pod]
                assert delays[pod] <= TARGET_S, f"{pod}: command started {delays[pod]} s after the table"
                assert line["pod"] == pod
                assert line["rank"] == line["node_rank"] == ranks[pod]
                assert table["server_list"][int(ranks[pod])]["container_ip"] == pod_ips[pod], "its own entry"
                assert line["master"] == table["server_list"][0]["container_ip"] == pod_ips[pods[0]]
                assert line["world"] == str(PODS_IN_JOB)
                assert line["table"] == "/user/config/jobstart_hccl.json"
                assert line["table_sha256"] == table_sha, f"{pod} read another table than the ConfigMap's"
                assert versions[pod] == version, "the controller annotated the pod for this write"
                assert line["qp"] == "/user/config", "the launcher pointed HCCL at the source ports"
                assert line["qp_sha256"] == ports_sha, f"{pod} sees another MultiQpSrcPort.cfg than the ConfigMap's"
            assert report["steering"]["mode"] == "steered", report["steering"]["message"]
            assert report["steering"]["off_plan_queue_pairs"] == 0
            cache = hccl_multi_qp.load(data["MultiQpSrcPort.cfg"])
            assert cache, "cross-leaf connections have lines"
            assert all(len(ports) == 2 for ports in cache.values())
            assert sorted(ranks.values()) == [str(r) for r in range(PODS_IN_JOB)]
            assert ranks[pods[0]] == "0", "rank 0 stays on task index 0"
        finally:
            stop.set()
            device_plugin.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await device_plugin
            await asyncio.wait_for(controller, 30)
