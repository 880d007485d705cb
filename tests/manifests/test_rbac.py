"""RBAC as the guide states it, as the manifests grant it, and as the controller uses it: the guide's table equals
the roles; the namespaced overlay the guide shows grants the rank-table work in its namespaces only; and every
request the controller makes against the emulated API server is one the rendered RBAC allows."""

from __future__ import annotations

import asyncio
import contextlib
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import msgspec
import yaml

from emulation.apiserver import FakeApiServer, Request
from emulation.cluster import add_job, cluster_nodes, make_job, make_pod
from tests.manifests.conftest import GUIDE
from tests.manifests.test_objects import NAMESPACE, Grant, grants_of_service_account
from tests.support.controller import wait_for
from tests.support.kustomize import one, render
from webhook.common.metrics import Metrics
from webhook.common.names import RANK_TABLE_VERSION_ANNOTATION
from webhook.common.settings import ControllerSettings, Settings, settings_from_mapping
from webhook.controller.run import run_controller
from webhook.kube.client import KubeRepository

MANAGED = ("team-a", "team-b")
"""The namespaces of the guide's namespaced overlay."""


def roles_in_the_guide() -> dict[str, set[tuple[str, str, str]]]:
    """The guide's RBAC table (section 6) as {role name: {(API group, resource, verb)}}."""
    roles: dict[str, set[tuple[str, str, str]]] = {}
    row = re.compile(
        r"^\| (?:Cluster)?Role `(?P<role>[\w-]+)`[^|]* \| (?P<group>[^|]+) \| "
        r"`(?P<resource>[^`]+)` \| (?P<verbs>[^|]+) \|"
    )
    for line in GUIDE.read_text(encoding="utf-8").splitlines():
        match = row.match(line)
        if match is None:
            continue
        group = match["group"].strip().strip("`")
        for verb in match["verbs"].split(","):
            roles.setdefault(match["role"], set()).add(
                ("" if group == "core" else group, match["resource"], verb.strip())
            )
    return roles


def test_the_guides_rbac_table_is_the_roles_rule_for_rule(renders: dict[str, list[dict[str, Any]]]) -> None:
    rendered = {
        role["metadata"]["name"]: {
            (group, resource, verb)
            for rule in role["rules"]
            for group in rule["apiGroups"]
            for resource in rule["resources"]
            for verb in rule["verbs"]
        }
        for role in renders["base"]
        if role["kind"] in ("Role", "ClusterRole")
    }
    assert roles_in_the_guide() == rendered


def test_the_base_binds_the_rank_table_work_cluster_wide_and_the_component_takes_that_away(
    renders: dict[str, list[dict[str, Any]]], documented: dict[str, Path]
) -> None:
    jobs_role = "ringroute-jobs"
    cluster_bindings = {b["roleRef"]["name"] for b in renders["base"] if b["kind"] == "ClusterRoleBinding"}
    assert cluster_bindings == {"ringroute", jobs_role}
    namespaced = render(documented["my-ringroute-namespaced"])
    assert {b["roleRef"]["name"] for b in namespaced if b["kind"] == "ClusterRoleBinding"} == {"ringroute"}
    assert {
        (b["metadata"]["namespace"], b["roleRef"]["kind"])
        for b in namespaced
        if b["kind"] == "RoleBinding" and b["roleRef"]["name"] == jobs_role
    } == {(namespace, "ClusterRole") for namespace in MANAGED}


def test_the_guides_namespaced_overlay_names_the_same_namespaces_in_settings_rolebindings_and_webhooks(
    renders: dict[str, list[dict[str, Any]]], documented: dict[str, Path]
) -> None:
    objects = render(documented["my-ringroute-namespaced"])
    settings = settings_from_mapping(
        yaml.safe_load(one(objects, "ConfigMap", "ringroute-settings")["data"]["config.yaml"])
    )
    assert settings.controller.namespaces == MANAGED
    bound = {
        b["metadata"]["namespace"]
        for b in objects
        if b["kind"] == "RoleBinding" and b["roleRef"]["name"] == "ringroute-jobs"
    }
    assert bound == set(MANAGED)
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        (hook,) = one(objects, kind, "ringroute")["webhooks"]
        assert hook["namespaceSelector"] == {
            "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(MANAGED)}]
        }
    # Only the namespaces differ from the settings the manifests ship.
    shipped = settings_from_mapping(
        yaml.safe_load(one(renders["base"], "ConfigMap", "ringroute-settings")["data"]["config.yaml"])
    )
    assert (
        msgspec.structs.replace(shipped, controller=msgspec.structs.replace(shipped.controller, namespaces=MANAGED))
        == settings
    )


def test_in_namespaced_mode_nothing_is_written_outside_the_managed_namespaces(documented: dict[str, Path]) -> None:
    grants = grants_of_service_account(render(documented["my-ringroute-namespaced"]))
    cluster = {(group, resource, verb) for scope, group, resource, verb, _ in grants if scope == "cluster"}
    assert cluster == {
        (g, r, v) for g, r in (("", "nodes"), ("topology.volcano.sh", "hypernodes")) for v in ("list", "watch")
    }
    writes = {scope for scope, _, _, verb, _ in grants if verb in ("create", "update", "patch", "delete")}
    assert writes == {*MANAGED, NAMESPACE}


# -- the controller's requests against the rendered RBAC --------------------------------------------------------


def verb_and_resource(request: Request) -> tuple[str | None, str, str, str] | None:
    """(namespace or None, API group, resource, verb) of a request; None for discovery, which RBAC does not gate."""
    parts = [unquote(p) for p in request.path.strip("/").split("/")]
    if parts[0] == "api":
        group, rest = "", parts[2:]
    else:
        group, rest = parts[1], parts[3:]
    if not rest:
        return None
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    resource = rest[0] if len(rest) < 3 else f"{rest[0]}/{rest[2]}"
    named = len(rest) >= 2
    verb = {
        "GET": ("get" if named else "watch" if request.query.get("watch") == "true" else "list"),
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete",
    }[request.method]
    return namespace, group, resource, verb


def allowed(grants: set[Grant], call: tuple[str | None, str, str, str], name: str) -> bool:
    namespace, group, resource, verb = call
    return any(
        g == group and r == resource and v == verb and n in ("*", name) and scope in ("cluster", namespace)
        for scope, g, r, v, n in grants
    )


async def controller_requests(settings: Settings) -> list[Request]:
    """Every request the leader makes while a route-planned job is created, placed, completed (its pods updated so
    kubelet rewrites their table file) and deleted, and an orphaned ConfigMap is swept: a full life, with
    HyperNodes served and the Lease taken."""
    namespace = settings.controller.namespaces[0] if settings.controller.namespaces else "team-a"
    async with FakeApiServer(hypernodes=True, bookmark_interval_s=0.5) as server:
        for node in cluster_nodes(4, 8):
            await server.apply("nodes", node)
        api = server.client()
        repo = KubeRepository(api, Metrics(), request_timeout_s=2.0)
        stop = asyncio.Event()
        task = asyncio.create_task(
            run_controller(
                settings,
                repo,
                Metrics(),
                identity="rbac-test",
                stop=stop,
                orphan_grace_s=0.3,
                pending_event_interval_s=0.0,
            )
        )
        try:
            job = make_job("train", 3)
            job["metadata"]["namespace"] = namespace
            await add_job(server, job)
            await wait_for(lambda: server.get("configmaps", namespace, "configmap1980-train") is not None)
            for index, node_name in enumerate(["npu-0", "npu-8", "npu-16"]):
                pod = make_pod(job, index, node_name)
                pod["metadata"]["namespace"] = namespace
                await server.apply("pods", pod)

            def completed() -> bool:
                table = server.get("configmaps", namespace, "configmap1980-train")
                return table is not None and '"completed"' in table["data"]["jobstart_hccl.json"]

            await wait_for(completed, timeout_s=15)

            def pods_updated() -> bool:
                pods = [server.get("pods", namespace, f"train-worker-{index}") for index in range(3)]
                return all(
                    RANK_TABLE_VERSION_ANNOTATION in (p or {}).get("metadata", {}).get("annotations", {}) for p in pods
                )

            await wait_for(pods_updated, timeout_s=8)
            orphan = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": "configmap1980-never",
                    "namespace": namespace,
                    "labels": {"ring-controller.cce": "ascend-1980"},
                    "annotations": {"ringroute.io/created-by": "ringroute"},
                },
                "data": {"jobstart_hccl.json": '{"status":"initializing"}'},
            }
            await server.apply("configmaps", orphan)
            await wait_for(lambda: server.get("configmaps", namespace, "configmap1980-never") is None, timeout_s=8)
            await server.remove("jobs", namespace, "train")
            await asyncio.sleep(0.3)
        finally:
            stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(task, timeout=10)
            await api.close()
        return list(server.requests)


def assert_every_request_is_granted(requests: list[Request], grants: set[Grant]) -> set[tuple[str, str, str]]:
    made: set[tuple[str, str, str]] = set()
    for request in requests:
        call = verb_and_resource(request)
        if call is None:
            continue
        _, group, resource, verb = call
        name = request.path.rstrip("/").rsplit("/", 1)[-1]
        assert allowed(grants, call, name), f"not granted: {request.method} {request.path} {request.query}"
        made.add((group, resource, verb))
    return made


EXERCISED = {
    ("batch.volcano.sh", "jobs", "list"),
    ("batch.volcano.sh", "jobs", "watch"),
    ("", "pods", "watch"),
    ("", "pods", "patch"),
    ("", "nodes", "watch"),
    ("topology.volcano.sh", "hypernodes", "watch"),
    ("", "configmaps", "create"),
    ("", "configmaps", "update"),
    ("", "configmaps", "delete"),
    ("", "events", "create"),
    ("coordination.k8s.io", "leases", "create"),
    ("coordination.k8s.io", "leases", "update"),
}
"""Calls the scenario must make, so that a test that checks nothing cannot pass."""


async def test_every_request_the_controller_makes_is_granted_by_the_base(
    renders: dict[str, list[dict[str, Any]]],
) -> None:
    settings = msgspec.structs.replace(
        Settings(), controller=ControllerSettings(debounce_s=0.05, lease_namespace=NAMESPACE)
    )
    requests = await controller_requests(settings)
    made = assert_every_request_is_granted(requests, grants_of_service_account(renders["base"]))
    assert made >= EXERCISED


async def test_every_request_the_controller_makes_in_namespaced_mode_is_granted_by_the_guides_overlay(
    documented: dict[str, Path],
) -> None:
    settings = msgspec.structs.replace(
        Settings(), controller=ControllerSettings(debounce_s=0.05, lease_namespace=NAMESPACE, namespaces=MANAGED)
    )
    requests = await controller_requests(settings)
    made = assert_every_request_is_granted(
        requests, grants_of_service_account(render(documented["my-ringroute-namespaced"]))
    )
    assert made >= EXERCISED
