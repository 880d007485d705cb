"""MASTER_ADDR never names the wrong host: a table completes only once every pod-network pod has its pod IP.

Pods go through their life as a cluster writes it, each step a request of its own component through the real
kubernetes_asyncio client: created Pending, bound by the scheduler, annotated by the device plugin, then kubelet
reports the host IP and, later, the pod IP (on a real kube-apiserver the annotation came 5 s before the pod IP).
"""

from __future__ import annotations

from typing import Any

from emulation.cluster import (
    NS,
    add_job,
    annotate_pod,
    bind_pod,
    create_pod,
    device_annotation,
    make_job,
    make_pod,
    node_ip,
    pod_ip,
    report_pod_status,
)
from planner import parse_rank_table
from tests.support.controller import Harness, running_controller, wait_for

NODES = ["npu-0", "npu-9", "npu-17"]


def completed_tables_written(h: Harness, job: str) -> list[dict[str, Any]]:
    """Every completed table the API server stored for the job's ConfigMap, oldest first."""
    tables = []
    for _, event_type, obj in h.server.stores["configmaps"].history:
        if event_type == "DELETED" or obj["metadata"]["name"] != f"configmap1980-{job}":
            continue
        table = parse_rank_table(obj["data"]["jobstart_hccl.json"])
        if table["status"] == "completed":
            tables.append(dict(table))
    return tables


async def test_device_annotations_before_pod_ips_keep_the_table_initializing_until_rank_zero_has_its_ip() -> None:
    async with running_controller() as h, h.server.repository(agent="cluster") as cluster:
        job = make_job("ipwait", 3)
        await add_job(h.server, job)
        pods = [make_pod(job, i, None) for i in range(3)]
        for pod, node in zip(pods, NODES, strict=True):
            await create_pod(cluster.api, pod)
            await bind_pod(cluster.api, pod, node)
            await annotate_pod(cluster.api, pod, device_annotation(pod["metadata"]["name"], node))
            await report_pod_status(cluster.api, pod, {"phase": "Pending", "hostIP": node_ip(node)})

        def waits_for_pod_ips() -> bool:
            return any("status.podIP" in e["message"] for e in h.events("RankTablePending"))

        await wait_for(lambda: waits_for_pod_ips() or h.status("ipwait") == "completed")
        assert h.status("ipwait") == "initializing", "completed before the pods had their IPs"
        pending = [e for e in h.events("RankTablePending") if "status.podIP" in e["message"]][-1]
        assert "missing-pod-ip x3" in pending["message"]
        assert f"pod {NS}/ipwait-worker-0: status.podIP: not set yet" in pending["message"]
        assert pending["type"] == "Normal", "waiting for kubelet needs no fix"

        for index in (1, 2):
            await report_pod_status(cluster.api, pods[index], {"phase": "Running", "podIP": pod_ip(index)})
        await wait_for(lambda: any("missing-pod-ip x1" in e["message"] for e in h.events("RankTablePending")))
        assert h.status("ipwait") == "initializing", "rank 0 has no pod IP yet"

        await report_pod_status(cluster.api, pods[0], {"phase": "Running", "podIP": pod_ip(0)})
        await h.wait_status("ipwait", "completed")
        table = parse_rank_table(h.data("ipwait")["jobstart_hccl.json"])
        assert table["server_list"][0]["server_id"] == node_ip(NODES[0]), "rank 0 stays on task index 0"
        assert table["server_list"][0]["container_ip"] == pod_ip(0)
        ips = {s["server_id"]: s.get("container_ip") for s in table["server_list"]}
        assert ips == {node_ip(node): pod_ip(i) for i, node in enumerate(NODES)}
        assert all("container_ip" in s for t in completed_tables_written(h, "ipwait") for s in t["server_list"])


async def test_a_pod_ip_changed_after_completion_rewrites_the_table_keeping_the_ranks() -> None:
    async with running_controller() as h, h.server.repository(agent="kubelet") as kubelet:
        job = make_job("moved", 4)
        await add_job(h.server, job)
        nodes = ["npu-0", "npu-8", "npu-16", "npu-24"]
        pods = [make_pod(job, i, node) for i, node in enumerate(nodes)]
        for pod in pods:
            await h.server.apply("pods", pod)
        await h.wait_status("moved", "completed")
        ranks = h.ranks("moved")
        await h.wait_events("RankTableCompleted")

        # The pod's sandbox was recreated: kubelet reports a new IP for the same pod on the same node.
        await report_pod_status(kubelet.api, pods[0], {"podIP": "172.16.9.9"})

        def master_ip() -> str | None:
            table = parse_rank_table(h.data("moved")["jobstart_hccl.json"])
            return table["server_list"][0].get("container_ip") if table["status"] == "completed" else None

        await wait_for(lambda: master_ip() == "172.16.9.9")
        assert h.ranks("moved") == ranks, "a new pod IP is no reason to move ranks"
        await wait_for(lambda: len(h.events("RankTableCompleted")) == 2)


async def test_a_pod_ip_withdrawn_after_completion_sends_the_table_back_to_initializing() -> None:
    async with running_controller() as h, h.server.repository(agent="kubelet") as kubelet:
        job = make_job("lost-ip", 3)
        await add_job(h.server, job)
        pods = [make_pod(job, i, node) for i, node in enumerate(NODES)]
        for pod in pods:
            await h.server.apply("pods", pod)
        await h.wait_status("lost-ip", "completed")
        await report_pod_status(kubelet.api, pods[0], {"podIP": None})
        await h.wait_status("lost-ip", "initializing")
        await report_pod_status(kubelet.api, pods[0], {"podIP": pod_ip(0)})
        await h.wait_status("lost-ip", "completed")


async def test_host_network_pods_never_wait_for_a_pod_ip_and_their_container_ip_is_the_node_ip() -> None:
    async with running_controller() as h:
        job = make_job("hostnet", 3)
        await add_job(h.server, job)
        for i, node in enumerate(NODES):
            await h.server.apply("pods", make_pod(job, i, node, host_network=True, with_pod_ip=False))
        await h.wait_status("hostnet", "completed")
        table = parse_rank_table(h.data("hostnet")["jobstart_hccl.json"])
        assert all(s.get("container_ip") == s["server_id"] for s in table["server_list"]), "each its node's IP"
        assert table["server_list"][0]["container_ip"] == node_ip(NODES[0])
