"""Synthetic clusters: large onSessionOpen and prioritize payloads stamped from templates."""

from __future__ import annotations

import gc
import random
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

import orjson

from emulation.volcano_payloads.objects import (
    kube_node,
    name_suffix,
    node_identity,
    stable_hash,
    stable_hex,
    stable_uid,
)
from emulation.volcano_payloads.pods import DAEMONSET_KINDS, daemonset_pod, volcano_job_pod
from emulation.volcano_payloads.sessions import job_info, on_session_open_request, prioritize_request, queue_info
from emulation.volcano_payloads.structs import node_info, node_usage, resource_of, task_info
from webhook.common.names import JOB_TYPE_ANNOTATION, TASK_INDEX_KEY, TOR_LABEL
from webhook.extender.volcano_releases import MASTER_RELEASE, JSONObject, normalize_release

# ------------------------------------------------------------------------------------------ synthetic clusters
# Large payloads are stamped from templates: one object is built with placeholder identity strings, serialised
# once, and each instance swaps those strings for its own and parses the bytes (about 30 us per object instead of
# 400 us), so a 10,000-node onSessionOpen builds in seconds. Every swapped string is derived by the same helper
# the builders use, so an instance equals what the builder would make for it.

_PLACEHOLDER_NODE: Final = "zz-template-node-0"
_PLACEHOLDER_LEAF: Final = "zz-template-leaf"
_PLACEHOLDER_INDEX: Final = 19_999
_PLACEHOLDER_POD_INDEX: Final = 98_765


class _Template:
    """Serialised object cut at its identity strings; `make` joins the pieces with an instance's strings."""

    __slots__ = ("_chunks", "_slots")

    def __init__(self, value: Any, placeholders: Mapping[str, str]) -> None:
        data = orjson.dumps(value)
        by_text = {text.encode(): key for key, text in placeholders.items()}
        # Longest first, so a placeholder that contains another is matched whole.
        pattern = re.compile(b"|".join(re.escape(t) for t in sorted(by_text, key=len, reverse=True)))
        self._chunks: list[bytes] = []
        self._slots: list[str] = []
        last = 0
        for match in pattern.finditer(data):
            self._chunks.append(data[last : match.start()])
            self._slots.append(by_text[match.group(0)])
            last = match.end()
        self._chunks.append(data[last:])

    def render(self, actual: Mapping[str, str]) -> bytes:
        parts = [self._chunks[0]]
        for key, chunk in zip(self._slots, self._chunks[1:], strict=True):
            parts.append(actual[key].encode())
            parts.append(chunk)
        return b"".join(parts)

    def make(self, actual: Mapping[str, str], *, raw: bool) -> Any:
        data = self.render(actual)
        return orjson.Fragment(data) if raw else orjson.loads(data)


_DS_IDENTITY: Final[Mapping[str, tuple[str, str, str]]] = {
    "kube-proxy": ("kube-system", "kube-proxy-", "kube-proxy"),
    "ascend-device-plugin": ("kube-system", "ascend-device-plugin-daemonset-", "device-plugin-01"),
    "node-exporter": ("monitoring", "node-exporter-", "node-exporter"),
}
"""(namespace, generateName, container) per DaemonSet kind, for the per-pod strings daemonset_pod derives."""


def _pod_strings(namespace: str, name: str, container: str) -> dict[str, str]:
    return {
        "name": name,
        "sa": f"kube-api-access-{name_suffix(f'{namespace}/{name}')}",
        "cid": f"containerd://{stable_hex(f'{name}/{container}') * 2}",
    }


def _ds_identity(kind: str, node_name: str, node_ip: str) -> dict[str, str]:
    namespace, prefix, container = _DS_IDENTITY[kind]
    name = prefix + name_suffix(f"{kind}/{node_name}")
    return {
        **_pod_strings(namespace, name, container),
        "uid": stable_uid("pod", namespace, name),
        "rv": str(47_000_000 + stable_hash(name) % 1_000_000),
        "node": f'"{node_name}"',
        "ip": f'"{node_ip}"',
    }


def _job_pod_identity(
    job_name: str, index: int, *, namespace: str, node_name: str, node_ip: str, pod_ip: str
) -> dict[str, str]:
    name = f"{job_name}-worker-{index}"
    return {
        **_pod_strings(namespace, name, "train"),
        "uid": stable_uid("pod", namespace, name, 0),
        "rv": f'"{50_000_000 + index}"',
        "index": f'"{index}"',
        "node": f'"{node_name}"',
        "ip": f'"{node_ip}"',
        "pod_ip": f'"{pod_ip}"',
    }


def _task_like(template: JSONObject, pod: Any, ident: Mapping[str, str]) -> JSONObject:
    """The TaskInfo of a pod stamped from the same template as the pod of `template` (same requests and status);
    `pod` may be a raw fragment, so the per-pod fields come from `ident`."""
    task = dict(template)
    task["UID"] = ident["uid"]
    task["Name"] = ident["name"]
    task["NodeName"] = ident["node"].strip('"')
    task["Pod"] = pod
    annotations = task.get("PodAnnotations")
    if annotations and "index" in ident and TASK_INDEX_KEY in annotations:
        task["PodAnnotations"] = annotations | {TASK_INDEX_KEY: ident["index"].strip('"')}
    return task


def _node_info_like(template: JSONObject, name: str, node: Any, tasks: Sequence[JSONObject]) -> JSONObject:
    """The NodeInfo of a node stamped from the template node of `template` (same allocatable and images)."""
    info = dict(template)
    info["Name"] = name
    info["Node"] = node
    info.update(node_usage(resource_of(template["Allocatable"]), tasks))
    return info


@dataclass(frozen=True, slots=True)
class SyntheticCluster:
    """A scheduling session's view of an NPU cluster, as one release marshals it."""

    release: str
    node_infos: tuple[JSONObject, ...]
    """Every node's NodeInfo (with its tasks), in cluster order."""
    jobs: tuple[JSONObject, ...]
    """JobInfos: the running jobs, then the pending one."""
    queues: tuple[JSONObject, ...]
    pending_tasks: tuple[JSONObject, ...]
    """The pending job's tasks (Pending, unbound), task index order."""
    free_nodes: tuple[str, ...]
    """Nodes running no training pod (all cards free)."""

    def prioritize_request(self, n_candidates: int | None = None, *, free_only: bool = False) -> JSONObject:
        """A prioritize body for the first pending task over the first `n_candidates` nodes (all by default);
        `free_only` keeps to nodes where an 8-card task fits, as a real call would."""
        free = set(self.free_nodes)
        nodes = [n for n in self.node_infos if not free_only or n["Name"] in free]
        return prioritize_request(self.pending_tasks[0], nodes[: n_candidates or len(nodes)])

    def on_session_open_request(self) -> JSONObject:
        """The onSessionOpen body of the whole cluster."""
        return on_session_open_request(jobs=self.jobs, nodes=self.node_infos, queues=self.queues)


def synthetic_cluster(
    n_nodes: int,
    *,
    release: str = MASTER_RELEASE,
    busy_fraction: float = 0.6,
    daemon_pods: bool = True,
    pods_per_job: int = 8,
    pending_job_size: int = 6,
    nodes_per_leaf: int = 8,
    seed: int = 0,
    raw: bool = False,
) -> SyntheticCluster:
    """An NPU cluster of `n_nodes` 8-card nodes (`npu-LLLL-SS`, `volcano.sh/tor: leaf-LLLL`) where a random
    `busy_fraction` of the nodes run one 8-card pod of running Volcano jobs of `pods_per_job` pods, plus one pending
    job of `pending_job_size` pods; with `daemon_pods` every node also runs kube-proxy, the Ascend device plugin and
    node-exporter. Deterministic for a seed.

    With `raw`, Node and Pod objects are pre-serialised `orjson.Fragment`s: `go_json` writes the same bytes, but
    those objects cannot be read as dicts (10,000 nodes build in about two seconds instead of ten).
    """
    with _gc_paused():
        return _build_cluster(
            n_nodes,
            release=release,
            busy_fraction=busy_fraction,
            daemon_pods=daemon_pods,
            pods_per_job=pods_per_job,
            pending_job_size=pending_job_size,
            nodes_per_leaf=nodes_per_leaf,
            seed=seed,
            raw=raw,
        )


@contextmanager
def _gc_paused() -> Iterator[None]:
    # Building allocates millions of acyclic containers; pausing the cyclic GC halves the time.
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _build_cluster(
    n_nodes: int,
    *,
    release: str,
    busy_fraction: float,
    daemon_pods: bool,
    pods_per_job: int,
    pending_job_size: int,
    nodes_per_leaf: int,
    seed: int,
    raw: bool,
) -> SyntheticCluster:
    rel = normalize_release(release)
    rng = random.Random(seed)
    names = [f"npu-{i // nodes_per_leaf:04d}-{i % nodes_per_leaf:02d}" for i in range(n_nodes)]
    busy = sorted(rng.sample(range(n_nodes), round(busy_fraction * n_nodes)))
    ph_ident = node_identity(_PLACEHOLDER_NODE, _PLACEHOLDER_INDEX)
    ph_ip = ph_ident["ip"]
    template_node = kube_node(
        _PLACEHOLDER_NODE, labels={TOR_LABEL: _PLACEHOLDER_LEAF}, index=_PLACEHOLDER_INDEX, release=rel
    )
    node_template = _Template(template_node, {**ph_ident, "name": _PLACEHOLDER_NODE, "leaf": _PLACEHOLDER_LEAF})
    template_info = node_info(template_node, release=rel, image_nodes=n_nodes)
    node_ips = [node_identity(name, i)["ip"] for i, name in enumerate(names)]
    node_tasks: list[list[JSONObject]] = [[] for _ in names]
    if daemon_pods:
        for kind in DAEMONSET_KINDS:
            template_pod = daemonset_pod(kind, _PLACEHOLDER_NODE, ph_ip, release=rel)
            template = _Template(template_pod, _ds_identity(kind, _PLACEHOLDER_NODE, ph_ip))
            template_task = task_info(template_pod, release=rel)
            for i, name in enumerate(names):
                ident = _ds_identity(kind, name, node_ips[i])
                node_tasks[i].append(_task_like(template_task, template.make(ident, raw=raw), ident))
    jobs: list[JSONObject] = []
    pod_counter = 0
    for j in range(0, len(busy), pods_per_job):
        members = busy[j : j + pods_per_job]
        job_name = f"train-{j // pods_per_job:04d}"
        job_uid = stable_uid("job", "team-a", job_name)
        template_pod = volcano_job_pod(
            job_name,
            _PLACEHOLDER_POD_INDEX,
            namespace="team-a",
            job_uid=job_uid,
            node_name=_PLACEHOLDER_NODE,
            node_ip=ph_ip,
            pod_ip="203.0.113.77",
            release=rel,
        )
        template = _Template(
            template_pod,
            _job_pod_identity(
                job_name,
                _PLACEHOLDER_POD_INDEX,
                namespace="team-a",
                node_name=_PLACEHOLDER_NODE,
                node_ip=ph_ip,
                pod_ip="203.0.113.77",
            ),
        )
        template_task = task_info(template_pod, release=rel)
        tasks = []
        for index, node_index in enumerate(members):
            pod_counter += 1
            pod_ip = f"172.{16 + pod_counter // 65536 % 16}.{pod_counter // 256 % 256}.{pod_counter % 256}"
            ident = _job_pod_identity(
                job_name,
                index,
                namespace="team-a",
                node_name=names[node_index],
                node_ip=node_ips[node_index],
                pod_ip=pod_ip,
            )
            task = _task_like(template_task, template.make(ident, raw=raw), ident)
            node_tasks[node_index].append(task)
            tasks.append(task)
        jobs.append(
            job_info(
                tasks,
                pod_group_name=f"{job_name}-{job_uid}",
                namespace="team-a",
                min_task_member={"worker": len(tasks)},
                owner_job=(job_name, job_uid),
                pod_group_annotations={JOB_TYPE_ANNOTATION: "pretrain"},
                release=rel,
            )
        )
    pending_uid = stable_uid("job", "team-b", "llm-pretrain")
    pending = [
        task_info(volcano_job_pod("llm-pretrain", i, namespace="team-b", job_uid=pending_uid, release=rel), release=rel)
        for i in range(pending_job_size)
    ]
    jobs.append(
        job_info(
            pending,
            pod_group_name=f"llm-pretrain-{pending_uid}",
            namespace="team-b",
            min_task_member={"worker": pending_job_size},
            phase="Inqueue",
            owner_job=("llm-pretrain", pending_uid),
            release=rel,
        )
    )
    infos = []
    for i, name in enumerate(names):
        node = node_template.make(
            {**node_identity(name, i), "name": name, "leaf": f"leaf-{i // nodes_per_leaf:04d}"}, raw=raw
        )
        infos.append(_node_info_like(template_info, name, node, node_tasks[i]))
    busy_set = set(busy)
    return SyntheticCluster(
        release=rel,
        node_infos=tuple(infos),
        jobs=tuple(jobs),
        queues=(queue_info(running=len(jobs) - 1, pending=1, release=rel),),
        pending_tasks=tuple(pending),
        free_nodes=tuple(n for i, n in enumerate(names) if i not in busy_set),
    )


__all__ = [
    "SyntheticCluster",
    "synthetic_cluster",
]
