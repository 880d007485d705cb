"""Volcano-shaped payload helpers for the extender tests (TaskInfo/NodeInfo dicts as Volcano marshals them)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec
import orjson
from aiohttp import ClientSession

from webhook.common.buffered_http import BufferedServer
from webhook.common.metrics import Metrics
from webhook.common.settings import Settings
from webhook.extender.app import ExtenderService, serve_extender
from webhook.extender.fit import TaskView, read_task
from webhook.extender.state import ExtenderState
from webhook.extender.wire import NodeInfo, SessionOpenRequest, TaskInfo
from webhook.volcano_emulation.cluster_objects import SimJob, SimNode, make_job, node_info, task_info

RESOURCE = "huawei.com/ascend-1980"
NPU_LABELS = {"accelerator/huawei-npu": "ascend-1980"}


def job(name: str = "bert", size: int = 6, *, route_planned: bool = True, namespace: str = "team-a") -> SimJob:
    """A Volcano Job of `size` 8-card pods."""
    return make_job(namespace, name, size, cards=8, resource=RESOURCE, route_planned=route_planned)


def tor(leaf: str) -> dict[str, str]:
    """2-tier labels."""
    return {"volcano.sh/tor": leaf}


def leaf_spine(leaf: str, spine: str) -> dict[str, str]:
    """3-tier labels (NVIDIA topology label family)."""
    return {"network.topology.nvidia.com/leaf": leaf, "network.topology.nvidia.com/spine": spine}


def sim_node(
    name: str,
    labels: Mapping[str, str],
    *,
    hosts: Iterable[tuple[SimJob, int]] = (),
    busy: bool = False,
    cards: int = 8,
) -> SimNode:
    """A node with `cards` NPUs; `hosts` are (job, task index) running on it, `busy` adds a one-node job of
    other work."""
    node = SimNode(name, {**NPU_LABELS, **labels}, cards, RESOURCE)
    for owner, index in hosts:
        task = task_info(owner, index, node=name, status=32)
        node.tasks[task["UID"]] = task
    if busy:
        other = make_job("other", f"other-{name}", 1, cards=cards, resource=RESOURCE, route_planned=False)
        task = task_info(other, 0, node=name, status=32)
        node.tasks[task["UID"]] = task
    return node


def node(name: str, labels: Mapping[str, str], **kwargs: Any) -> dict[str, Any]:
    """A NodeInfo dict (see `sim_node`)."""
    return node_info(sim_node(name, labels, **kwargs))


def session_open(
    jobs: Sequence[SimJob], nodes: Sequence[Mapping[str, Any]], placed: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """An OnSessionOpenRequest with `jobs` and `nodes`; `placed` maps task names (`<job>-worker-<i>`) to the node
    they run on (the others are pending)."""
    job_infos: dict[str, Any] = {}
    for sim_job in jobs:
        tasks = {}
        for task in sim_job.tasks:
            where = (placed or {}).get(task["Name"], "")
            tasks[task["UID"]] = dict(task, NodeName=where, Status=32 if where else 1)
        job_infos[sim_job.job_id] = {
            "UID": sim_job.job_id,
            "Name": f"{sim_job.name}-pg",
            "Namespace": sim_job.namespace,
            "MinAvailable": sim_job.size,
            "Tasks": tasks,
            "PodGroup": {"metadata": {"name": f"{sim_job.name}-pg"}, "spec": {"minMember": sim_job.size}},
        }
    return {"Jobs": job_infos, "Nodes": {n["Name"]: n for n in nodes}, "Queues": {}, "NodeList": None}


def decoded_task(task: Mapping[str, Any], settings: Settings | None = None) -> TaskView:
    """A TaskInfo dict as the extender reads it (through JSON, as it arrives)."""
    return read_task(msgspec.json.decode(orjson.dumps(task), type=TaskInfo), settings or Settings())


def decoded_node(info: Mapping[str, Any]) -> NodeInfo:
    """A NodeInfo dict as the extender decodes it."""
    return msgspec.json.decode(orjson.dumps(info), type=NodeInfo)


def decoded_session(body: Mapping[str, Any]) -> SessionOpenRequest:
    """An OnSessionOpenRequest dict as the extender decodes it."""
    return msgspec.json.decode(orjson.dumps(body), type=SessionOpenRequest)


class ServedExtender:
    """The extender's endpoints served on a free loopback port by the server `ringroute extender` runs, with an
    aiohttp client session whose relative URLs go to it (`post("/extender/prioritize", ...)`)."""

    def __init__(self, service: ExtenderService, server: BufferedServer, session: ClientSession) -> None:
        self.service = service
        self.server = server
        self.session = session

    @property
    def state(self) -> ExtenderState:
        """The served ExtenderState."""
        return self.service.state

    def post(self, path: str, **options: Any) -> Any:
        return self.session.post(path, **options)

    def get(self, path: str, **options: Any) -> Any:
        return self.session.get(path, **options)

    async def close(self) -> None:
        await self.session.close()
        await self.server.close(grace_s=1.0)


async def serve_extender_for_test(
    settings: Settings | None = None, metrics: Metrics | None = None, state: ExtenderState | None = None
) -> ServedExtender:
    """Serve a fresh ExtenderService on 127.0.0.1 (close with `close()`)."""
    service = ExtenderService(settings or Settings(), metrics or Metrics(), state)
    server = await serve_extender(service, "127.0.0.1", 0)
    return ServedExtender(service, server, ClientSession(base_url=f"http://127.0.0.1:{server.port}"))
