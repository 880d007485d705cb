"""Small Volcano payloads the release tests share: a pending task, a busy node, a running gang, a small cluster,
each as a given release marshals it (`emulation.volcano_payloads`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from emulation import volcano_payloads as payloads


def pending_task(release: str) -> dict[str, Any]:
    """A pending worker of Volcano Job team-a/bert."""
    pod = payloads.volcano_job_pod("bert", 0, namespace="team-a", release=release)
    return payloads.task_info(pod, release=release)


def busy_node(release: str, *, daemon: bool = True) -> dict[str, Any]:
    """An NPU node running a worker of another job and, with `daemon`, the DaemonSet pods of an NPU node."""
    node = payloads.kube_node("npu-0001-02", labels={"volcano.sh/tor": "leaf-0001"}, index=10, release=release)
    tasks = [
        payloads.task_info(
            payloads.volcano_job_pod("gpt", 3, node_name="npu-0001-02", release=release), release=release
        )
    ]
    if daemon:
        tasks += [
            payloads.task_info(
                payloads.daemonset_pod(kind, "npu-0001-02", "10.20.0.11", release=release), release=release
            )
            for kind in payloads.DAEMONSET_KINDS
        ]
    return payloads.node_info(node, tasks, release=release, image_nodes=24)


def gang_job(release: str, *, network_topology: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JobInfo of team-a/gpt, two workers bound to n0 and n1."""
    uid = payloads.stable_uid("job", "team-a", "gpt")
    tasks = [
        payloads.task_info(
            payloads.volcano_job_pod("gpt", i, namespace="team-a", job_uid=uid, node_name=f"n{i}", release=release),
            release=release,
        )
        for i in range(2)
    ]
    return payloads.job_info(
        tasks,
        pod_group_name=f"gpt-{uid}",
        namespace="team-a",
        min_task_member={"worker": 2},
        owner_job=("gpt", uid),
        network_topology=network_topology,
        release=release,
    )


def small_cluster(release: str) -> payloads.SyntheticCluster:
    """24 nodes in 3 leaves, 60 % of them running a pod of another job, and a pending 6-pod gang."""
    return payloads.synthetic_cluster(24, release=release, seed=3)
