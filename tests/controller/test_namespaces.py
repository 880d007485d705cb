"""controller.namespaces: the controller works in the namespaces it is given, with one watch each and no
cluster-wide request for namespaced resources (RBAC may grant it only those namespaces)."""

from __future__ import annotations

import re
from typing import Any

from emulation.cluster import add_job, make_job, make_pod
from tests.support.controller import fast_settings, running_controller
from webhook.controller.watches import NamespacesInformer
from webhook.kube.informer import Informer

NAMESPACED = ("jobs", "pods", "configmaps", "events")


def in_namespace(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    obj["metadata"]["namespace"] = namespace
    return obj


async def test_the_controller_writes_tables_in_the_namespaces_it_manages_and_nowhere_else() -> None:
    settings = fast_settings(namespaces=("team-a", "team-b"))
    async with running_controller(settings=settings) as h:
        assert isinstance(h.controller.jobs, NamespacesInformer)
        jobs = {ns: in_namespace(make_job("train", 3), ns) for ns in ("team-a", "team-b", "team-c")}
        for job in jobs.values():
            await add_job(h.server, job)
        for index, node in enumerate(["npu-0", "npu-8", "npu-16"]):
            await h.server.apply("pods", in_namespace(make_pod(jobs["team-b"], index, node), "team-b"))
        await h.settle(0.5)
        tables = {ns: h.server.get("configmaps", ns, "configmap1980-train") for ns in jobs}
        assert tables["team-a"] is not None
        assert tables["team-b"] is not None
        assert '"completed"' in tables["team-b"]["data"]["jobstart_hccl.json"]
        assert tables["team-c"] is None, "an unmanaged namespace is never written"
        assert sorted(h.controller.jobs.store) == ["team-a/train", "team-b/train"]

        await h.server.remove("jobs", "team-a", "train")
        await h.settle()
        assert "team-a/train" not in h.controller.jobs.store

    namespaced_paths = [
        r.path
        for r in h.server.requests
        if r.path.rstrip("/").rsplit("/", 1)[-1] in NAMESPACED or "/namespaces/" in r.path
    ]
    assert namespaced_paths
    for path in namespaced_paths:
        match = re.search(r"/namespaces/([^/]+)/", path)
        assert match is not None, f"cluster-wide request {path}"
        assert match.group(1) in ("team-a", "team-b"), path


async def test_one_namespace_or_none_keeps_a_single_watch() -> None:
    async with running_controller(settings=fast_settings(namespaces=("team-a",))) as h:
        assert isinstance(h.controller.jobs, Informer)
        assert h.controller.jobs.namespace == "team-a"
    async with running_controller() as h:
        assert isinstance(h.controller.pods, Informer)
        assert h.controller.pods.namespace is None
