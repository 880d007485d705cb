"""`ringroute plan|simulate --job [NAMESPACE/]NAME`: the same inputs as the files, read from a live cluster.

The Job, its Pods, the Nodes, Volcano HyperNodes and MindCluster's `basic-tor-node-cm` come from the API server
through the kubeconfig, read-only (webhook.kube.whatif makes only get and list requests). Topology flags given as
files still win: `--nodes`, `--hypernodes`, `--tor-configmap`, `--topology` replace what the cluster would give,
and `--topology-labels` picks node labels. Without them the source is chosen as the controller chooses it:
HyperNodes when there are any, else the tor ConfigMap when it exists, else the Nodes' labels.
"""

from __future__ import annotations

import argparse
import asyncio
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from planner import DEFAULT_LABEL_KEYS, Fabric, Topology, topology_from_hypernodes, topology_from_tor_configmap
from webhook.cli.errors import CommandError
from webhook.cli.inputs import read_from

if TYPE_CHECKING:
    from webhook.common.settings import Settings
    from webhook.kube.whatif import ClusterObjects

DEFAULT_TOR_CONFIGMAP_NAME = "kube-system/basic-tor-node-cm"
"""Where MindCluster keeps its NSLB switch ConfigMap (the ConfigMap `--tor-configmap FILE` holds)."""

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_FILE_TOPOLOGY = ("nodes", "hypernodes", "tor_configmap", "topology")
_LIVE_ONLY = ("kubeconfig", "context", "tor_configmap_name")


def add_arguments(parser: argparse.ArgumentParser, pods_or_job: Any) -> None:
    """`--job` (in the `--pods | --job` group) and the options that say how to reach the cluster."""
    pods_or_job.add_argument(
        "--job",
        metavar="[NAMESPACE/]NAME",
        help="read the Volcano Job's pods, and the topology not given as files, from the cluster (read-only; "
        "namespace: the kubeconfig context's, else default)",
    )
    cluster = parser.add_argument_group("cluster (with --job)")
    cluster.add_argument(
        "--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)"
    )
    cluster.add_argument("--context", metavar="NAME", help="kubeconfig context (default: its current context)")
    cluster.add_argument(
        "--tor-configmap-name",
        metavar="NAMESPACE/NAME",
        help="MindCluster's switch ConfigMap, read when there are no HyperNodes (default: settings "
        f"topology.torConfigmap, else {DEFAULT_TOR_CONFIGMAP_NAME})",
    )


def _job_ref(text: str) -> tuple[str | None, str]:
    namespace, _, name = text.rpartition("/")
    if not _DNS_SUBDOMAIN.match(name) or (namespace and not _DNS_LABEL.match(namespace)) or text.count("/") > 1:
        raise CommandError(f"--job {text}: expected NAMESPACE/NAME or NAME of a Volcano Job, such as team-a/llama")
    return (namespace or None), name


def _tor_ref(args: argparse.Namespace, settings: Settings) -> tuple[str, str]:
    flag = "--tor-configmap-name"
    text = args.tor_configmap_name or settings.topology.tor_configmap or DEFAULT_TOR_CONFIGMAP_NAME
    namespace, _, name = text.partition("/")
    if not (_DNS_LABEL.match(namespace) and _DNS_SUBDOMAIN.match(name)):
        raise CommandError(f"{flag} {text}: expected NAMESPACE/NAME, such as {DEFAULT_TOR_CONFIGMAP_NAME}")
    return namespace, name


def check_arguments(args: argparse.Namespace) -> None:
    """Cluster options only go with --job."""
    if args.job is None:
        given = next((flag for flag in _LIVE_ONLY if getattr(args, flag, None) is not None), None)
        if given is not None:
            raise CommandError(f"--{given.replace('_', '-')}: only applies with --job")


def read_cluster(args: argparse.Namespace, settings: Settings) -> ClusterObjects | None:
    """The objects `--job` names, read from the cluster; None without --job."""
    check_arguments(args)
    if args.job is None:
        return None
    from webhook.kube.whatif import ClusterReadError, KubeconfigChoice, ReadRequest, read_job

    namespace, name = _job_ref(args.job)
    explicit = any(getattr(args, flag) is not None for flag in _FILE_TOPOLOGY) or args.topology_labels is not None
    request = ReadRequest(
        namespace=namespace,
        name=name,
        nodes=args.nodes is None and args.topology is None,
        hypernodes=not explicit and settings.topology.use_hypernodes,
        tor_configmap=None if explicit else _tor_ref(args, settings),
        rank_tables=(args.routing or settings.planning.routing) == "pinned",
    )
    choice = KubeconfigChoice(path=args.kubeconfig, context=args.context)
    try:
        return asyncio.run(read_job(choice, request))
    except ClusterReadError as exc:
        raise CommandError(str(exc)) from None


def job_where(cluster: ClusterObjects) -> str:
    """How errors name the job's pods: `--job NAMESPACE/NAME`."""
    name = (cluster.job.get("metadata") or {}).get("name")
    return f"--job {cluster.namespace}/{name}"


def placement_options(args: argparse.Namespace, cluster: ClusterObjects, resource_name: str) -> dict[str, Any]:
    """read_placement's job options from the Job: its name, UID, version, task order and NPU pod count (an
    explicit --expected-pods wins), as the controller reads them."""
    from webhook.common.jobfacts import task_facts

    meta = cluster.job.get("metadata") or {}
    name = str(meta.get("name", ""))
    if args.job_name is not None and args.job_name != name:
        raise CommandError(f"--job-name {args.job_name}: differs from --job {args.job}; give one of them")
    tasks = task_facts(cluster.job, resource_name)
    expected = sum(task.replicas for task in tasks if task.npu)
    task_order = [task.name for task in tasks]
    version = (cluster.job.get("status") or {}).get("version")
    return {
        "expected_pods": args.expected_pods if args.expected_pods is not None else (expected or None),
        "job_name": name,
        "job_uid": str(meta["uid"]) if meta.get("uid") else None,
        "job_version": str(version) if version is not None else None,
        "task_order": task_order,
    }


def cluster_topology(cluster: ClusterObjects, nodes: Sequence[Mapping[str, Any]], fabric: Fabric) -> Topology | None:
    """The topology of the cluster's HyperNodes, else of its tor ConfigMap; None when it has neither."""
    hint = "check the objects in the cluster, or pass the topology as a file"
    if cluster.hypernodes:
        hypernodes = cluster.hypernodes
        return read_from("HyperNodes in the cluster", lambda: topology_from_hypernodes(hypernodes, nodes, fabric), hint)
    if cluster.tor_configmap is not None:
        configmap = cluster.tor_configmap
        meta = configmap.get("metadata") or {}
        return read_from(
            f"ConfigMap {meta.get('namespace')}/{meta.get('name')}",
            lambda: topology_from_tor_configmap(configmap, fabric, nodes=nodes),
            hint,
        )
    return None


def labelled_nodes(cluster: ClusterObjects, keys: Sequence[str]) -> list[dict[str, Any]]:
    """The cluster's Nodes for a topology from labels: those that run a pod of the job, and the others that carry a
    topology label (CPU and unlabelled nodes are left out, as the controller leaves them out)."""
    used = {str((pod.get("spec") or {}).get("nodeName") or "") for pod in cluster.pods}
    wanted = list(keys) or [key for family in DEFAULT_LABEL_KEYS for key in family]
    kept = []
    for node in cluster.nodes:
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        if meta.get("name") in used or any(_carries(labels, key) for key in wanted):
            kept.append(node)
    return kept


def _carries(labels: Mapping[str, Any], key: str) -> bool:
    if key.endswith("/tier-N"):  # topograph: every tier-<n> key
        prefix = key[:-1]
        return any(k.startswith(prefix) and k[len(prefix) :].isdigit() for k in labels)
    return key in labels


__all__ = [
    "DEFAULT_TOR_CONFIGMAP_NAME",
    "add_arguments",
    "check_arguments",
    "cluster_topology",
    "job_where",
    "labelled_nodes",
    "placement_options",
    "read_cluster",
]
