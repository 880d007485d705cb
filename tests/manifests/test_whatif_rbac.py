"""The read-only role of `ringroute plan|simulate --job` (manifests/optional/ringroute-whatif-reader.yaml) grants
exactly what those commands request against the emulated API server: every request is allowed, nothing granted goes
unused, and nothing granted writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from emulation.apiserver import Request
from tests.manifests.test_objects import Grant
from tests.manifests.test_rbac import allowed, verb_and_resource
from tests.support.whatif import JOB, NS, ROOT, cluster

READER = ROOT / "manifests" / "optional" / "ringroute-whatif-reader.yaml"
GROUP = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "ringroute-whatif-readers"}


def reader_grants() -> set[Grant]:
    """(scope, API group, resource, verb, resource name) that the manifest grants the readers' group."""
    objects: list[dict[str, Any]] = list(yaml.safe_load_all(READER.read_text(encoding="utf-8")))
    roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in objects}
    grants: set[Grant] = set()
    for binding in (o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        assert binding["subjects"] == [GROUP]
        ref = binding["roleRef"]
        role = roles[
            (ref["kind"], binding["metadata"].get("namespace") if ref["kind"] == "Role" else None, ref["name"])
        ]
        scope = binding["metadata"].get("namespace", "cluster")
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        for name in rule.get("resourceNames", ["*"]):
                            grants.add((scope, group, resource, verb, name))
    assert {(o["kind"], o["metadata"]["name"]) for o in objects if o["kind"].endswith("Role")} == {
        (b["roleRef"]["kind"], b["roleRef"]["name"]) for b in objects if b["kind"].endswith("RoleBinding")
    }, "every role is bound"
    return grants


async def whatif_requests(tmp_path: Path) -> list[Request]:
    """Every request of plan (ECMP and pinned) and simulate --job, on clusters with HyperNodes, with the tor
    ConfigMap, and with neither (no HyperNode CRD)."""
    requests: list[Request] = []
    for index, served in enumerate(({"hypernodes": True}, {"tor": True}, {})):
        async with cluster(tmp_path / str(index), **served) as live:
            out = str(tmp_path / str(index) / "out")
            assert await live.run("plan", "--job", f"{NS}/{JOB}", "--out-dir", out) == 0
            pinned = str(tmp_path / str(index) / "pinned")  # planned around the cluster's other rank tables
            assert await live.run("plan", "--job", f"{NS}/{JOB}", "--routing", "pinned", "--out-dir", pinned) == 0
            assert await live.run("simulate", "--job", f"{NS}/{JOB}", "--seeds", "1") == 0
            requests += live.reads()
    return requests


@pytest.fixture
async def requests(tmp_path: Path) -> list[Request]:
    for index in range(3):
        (tmp_path / str(index)).mkdir()
    return await whatif_requests(tmp_path)


def test_the_reader_role_grants_no_write() -> None:
    assert {verb for _, _, _, verb, _ in reader_grants()} <= {"get", "list"}


async def test_the_reader_role_grants_exactly_what_plan_and_simulate_job_request(requests: list[Request]) -> None:
    grants = reader_grants()
    made: set[tuple[str, str, str]] = set()
    for request in requests:
        assert request.method == "GET", f"{request.method} {request.path}"
        call = verb_and_resource(request)
        if call is None:
            continue  # discovery, which every authenticated user may do
        name = request.path.rstrip("/").rsplit("/", 1)[-1]
        assert allowed(grants, call, name), f"not granted: {request.method} {request.path} {request.query}"
        made.add(call[1:])
    assert made == {(group, resource, verb) for _, group, resource, verb, _ in grants}
    # The one namespaced grant: MindCluster's ConfigMap, by name.
    assert {g for g in grants if g[0] != "cluster"} == {("kube-system", "", "configmaps", "get", "basic-tor-node-cm")}
