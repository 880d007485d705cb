"""Read-only reads of one Volcano Job and its network from a live cluster, for `ringroute plan|simulate --job`.

Only GET requests (get and list): the Job, its Pods (label `volcano.sh/job-name`), the Nodes, Volcano HyperNodes
(when the CRD is served) and MindCluster's `basic-tor-node-cm` ConfigMap. Every failure is a ClusterReadError whose
text is one line for the user: which cluster could not be reached, which verb on which resource was forbidden,
which Job does not exist or has no pods yet.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient, Configuration

from webhook.common.metrics import Metrics
from webhook.common.names import JOB_NAME_LABEL, RING_LABEL
from webhook.kube.client import CONFIGMAPS, HYPERNODES, JOBS, NODES, PODS, KubeError, KubeRepository, ResourceKind

log = logging.getLogger("ringroute.kube.whatif")

DEFAULT_TOR_CONFIGMAP = ("kube-system", "basic-tor-node-cm")
"""Where MindCluster keeps the NSLB switch ConfigMap (namespace, name)."""

REQUEST_TIMEOUT_S = 60.0
"""Per request: listing the Nodes of a large cluster takes a while."""

READER_ROLE_HINT = "grant the read-only role shown in docs/planner-cli.md (ringroute-whatif-reader)"

Obj = dict[str, Any]


class ClusterReadError(Exception):
    """A live read failed; the text is the user's one-line message."""


@dataclass(frozen=True, slots=True)
class ReadRequest:
    """What to read for one job. `nodes`, `hypernodes` and `tor_configmap` are read only when asked for; the
    ConfigMap only when no HyperNode exists (HyperNodes win over it, as in the controller)."""

    namespace: str | None
    """None: the kubeconfig context's namespace, else `default` (as kubectl takes it)."""
    name: str
    nodes: bool = True
    hypernodes: bool = True
    tor_configmap: tuple[str, str] | None = DEFAULT_TOR_CONFIGMAP
    rank_tables: bool = False
    """Also list every rank-table ConfigMap (label ring-controller.cce, all namespaces): the jobs running on the
    fabric. Refused (403), the plan is made without them and `rank_tables_refused` says why."""


@dataclass(frozen=True, slots=True)
class ClusterObjects:
    """Objects read from the cluster, as plain dicts (what `kubectl get -o json` prints)."""

    server: str
    namespace: str
    job: Obj
    pods: list[Obj]
    nodes: list[Obj] = field(default_factory=list)
    hypernodes: list[Obj] = field(default_factory=list)
    tor_configmap: Obj | None = None
    rank_tables: list[Obj] = field(default_factory=list)
    rank_tables_refused: str | None = None
    """Why the rank-table ConfigMaps could not be listed (None: they were, or were not asked for)."""


@dataclass(frozen=True, slots=True)
class KubeconfigChoice:
    """Which kubeconfig and context to use; None means the defaults ($KUBECONFIG, ~/.kube/config; its context)."""

    path: str | None = None
    context: str | None = None


def kubeconfig_files(choice: KubeconfigChoice) -> str | None:
    """The kubeconfig path(s) to load (as `kubectl` picks them), or None when there is none; a given path that is
    not a file is a ClusterReadError."""
    if choice.path:
        if not Path(choice.path).is_file():
            raise ClusterReadError(f"--kubeconfig {choice.path}: no such file")
        return choice.path
    listed = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        existing = [p for p in listed if Path(p).is_file()]
        return os.pathsep.join(existing) if existing else None
    default = Path.home() / ".kube" / "config"
    return str(default) if default.is_file() else None


async def connect_readonly(choice: KubeconfigChoice) -> tuple[ApiClient, str | None]:
    """An API client from the kubeconfig (or in-cluster config when there is none) and the context's namespace."""
    from kubernetes_asyncio import config

    configuration = Configuration()
    files = kubeconfig_files(choice)
    if files is None:
        if choice.context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            return ApiClient(configuration), None
        where = "$KUBECONFIG" if os.environ.get("KUBECONFIG") else "~/.kube/config"
        raise ClusterReadError(f"kubeconfig: no file at {where}; pass --kubeconfig FILE")
    try:
        loader = await config.load_kube_config(
            config_file=files, context=choice.context, client_configuration=configuration, persist_config=False
        )
    except Exception as exc:  # a malformed file, an unknown context, a failing exec credential plugin
        detail = " ".join(str(exc).split()) or type(exc).__name__
        flag = f"--context {choice.context}" if choice.context and "context" in detail.lower() else "kubeconfig"
        raise ClusterReadError(f"{flag}: cannot load {files}: {detail}") from None
    current = loader.current_context
    context = current.get("context") if isinstance(current, Mapping) else None
    namespace = context.get("namespace") if isinstance(context, Mapping) else None
    return ApiClient(configuration), (str(namespace) if namespace else None)


def _refused(exc: KubeError, server: str, verb: str, kind: ResourceKind, namespace: str | None) -> ClusterReadError:
    """The user's line for a failed read."""
    resource = kind.plural if not kind.group else f"{kind.plural}.{kind.group}"
    where = f" in namespace {namespace}" if kind.namespaced and namespace else ""
    detail = str(exc).split(": ", 1)[-1]
    if exc.status == 0:
        return ClusterReadError(
            f"cluster {server}: unreachable ({detail}); check --kubeconfig and --context (kubectl cluster-info)"
        )
    if exc.status == 401:
        return ClusterReadError(
            f"cluster {server}: HTTP 401 Unauthorized: the kubeconfig's credentials were refused; log in again"
        )
    if exc.status == 403:
        return ClusterReadError(
            f"forbidden: cannot {verb} {resource}{where} ({detail}); {READER_ROLE_HINT}, or pass that input as a file"
        )
    return ClusterReadError(f"cluster {server}: {verb} {resource}{where} failed ({detail})")


class _Reader:
    """Reads through a KubeRepository, turning failures into ClusterReadError."""

    def __init__(self, repo: KubeRepository, server: str) -> None:
        self.repo = repo
        self.server = server

    async def get(self, kind: ResourceKind, namespace: str | None, name: str) -> Obj | None:
        try:
            return await self.repo.get_object(kind, namespace, name)
        except KubeError as exc:
            raise _refused(exc, self.server, "get", kind, namespace) from None

    async def list(self, kind: ResourceKind, namespace: str | None = None, selector: str | None = None) -> list[Obj]:
        try:
            items, _ = await self.repo.list_objects(kind, namespace, label_selector=selector)
        except KubeError as exc:
            raise _refused(exc, self.server, "list", kind, namespace) from None
        return items

    async def served(self, kind: ResourceKind) -> bool:
        try:
            return await self.repo.has_resource(kind)
        except KubeError as exc:
            if exc.status in (401, 403) or exc.status == 0:
                raise _refused(exc, self.server, "discover", kind, None) from None
            log.debug("discovery of %s failed: %s", kind.plural, exc)
            return False


async def read_job_objects(api: ApiClient, request: ReadRequest, default_namespace: str = "default") -> ClusterObjects:
    """The Job, its Pods and the asked-for topology objects, read (get and list only) through `api`."""
    server = str(api.configuration.host)
    reader = _Reader(KubeRepository(api, Metrics(), request_timeout_s=REQUEST_TIMEOUT_S), server)
    namespace = request.namespace or default_namespace
    job_ref = f"{namespace}/{request.name}"
    job = await reader.get(JOBS, namespace, request.name)
    if job is None:
        raise ClusterReadError(
            f"--job {job_ref}: no Volcano Job {request.name} in namespace {namespace}; "
            f"check the name (kubectl get vcjob -n {namespace})"
        )
    pods = await reader.list(PODS, namespace, f"{JOB_NAME_LABEL}={request.name}")
    if not pods:
        raise ClusterReadError(
            f"--job {job_ref}: no pods yet (label {JOB_NAME_LABEL}={request.name}); wait until Volcano creates "
            "them and the scheduler places them"
        )
    for pod in pods:
        pod.setdefault("kind", "Pod")
    nodes = await reader.list(NODES) if request.nodes else []
    for node in nodes:
        node.setdefault("kind", "Node")
    hypernodes: list[Obj] = []
    if request.hypernodes and await reader.served(HYPERNODES):
        hypernodes = await reader.list(HYPERNODES)
        for hypernode in hypernodes:
            hypernode.setdefault("kind", "HyperNode")
    tor: Obj | None = None
    if request.tor_configmap is not None and not hypernodes:
        tor = await reader.get(CONFIGMAPS, *request.tor_configmap)
    rank_tables, refused = await _rank_tables(reader) if request.rank_tables else ([], None)
    return ClusterObjects(
        server=server,
        namespace=namespace,
        job=job,
        pods=pods,
        nodes=nodes,
        hypernodes=hypernodes,
        tor_configmap=tor,
        rank_tables=rank_tables,
        rank_tables_refused=refused,
    )


async def _rank_tables(reader: _Reader) -> tuple[list[Obj], str | None]:
    """Every rank-table ConfigMap of the cluster, or why they could not be listed (RBAC often refuses it)."""
    try:
        items = await reader.list(CONFIGMAPS, None, RING_LABEL)
    except ClusterReadError as exc:
        return [], str(exc)
    for item in items:
        item.setdefault("kind", "ConfigMap")
    return items, None


async def read_fabric(choice: KubeconfigChoice, *, hypernodes: bool = True) -> ClusterObjects:
    """Nodes, HyperNodes and every rank-table ConfigMap of the cluster (`ringroute fabric load`, read-only)."""
    api, namespace = await connect_readonly(choice)
    try:
        server = str(api.configuration.host)
        reader = _Reader(KubeRepository(api, Metrics(), request_timeout_s=REQUEST_TIMEOUT_S), server)
        nodes = await reader.list(NODES)
        found = await reader.list(HYPERNODES) if hypernodes and await reader.served(HYPERNODES) else []
        rank_tables, refused = await _rank_tables(reader)
        if refused is not None:
            raise ClusterReadError(refused)
        return ClusterObjects(
            server=server,
            namespace=namespace or "default",
            job={},
            pods=[],
            nodes=nodes,
            hypernodes=found,
            rank_tables=rank_tables,
        )
    finally:
        await api.close()


async def read_job(choice: KubeconfigChoice, request: ReadRequest) -> ClusterObjects:
    """Connect with `choice` and read what `request` asks for; the client is closed afterwards."""
    api, namespace = await connect_readonly(choice)
    try:
        return await read_job_objects(api, request, namespace or "default")
    finally:
        await api.close()


__all__ = [
    "DEFAULT_TOR_CONFIGMAP",
    "ClusterObjects",
    "ClusterReadError",
    "KubeconfigChoice",
    "ReadRequest",
    "connect_readonly",
    "kubeconfig_files",
    "read_fabric",
    "read_job",
    "read_job_objects",
]
