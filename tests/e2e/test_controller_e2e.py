"""The controller's Kubernetes I/O against a real kube-apiserver (kind, k3d, ...).

Needs RINGROUTE_E2E_KUBECONFIG; creates and deletes a namespace `ringroute-e2e-<random>`. Volcano is not needed:
the test uses ConfigMaps (also as owners, for the garbage collector), Events and Leases, which every API server
serves.
"""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest

from webhook.common.metrics import Metrics
from webhook.kube.client import CONFIGMAPS, ConflictError, KubeRepository, connect
from webhook.kube.events import EventRecorder
from webhook.kube.leader import LeaderElector

pytestmark = pytest.mark.e2e


async def test_configmap_guarded_update_events_and_lease_against_a_real_api_server() -> None:
    api = await connect(os.environ["RINGROUTE_E2E_KUBECONFIG"])
    assert api is not None
    repo = KubeRepository(api, Metrics())
    namespace = f"ringroute-e2e-{uuid.uuid4().hex[:6]}"
    await repo._call("create namespaces", "POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}})
    try:
        body = {"metadata": {"name": "configmap1980-e2e", "namespace": namespace}, "data": {"a": "1"}}
        await repo.create_object(CONFIGMAPS, body)
        with pytest.raises(ConflictError, match="already exists"):
            await repo.create_object(CONFIGMAPS, body)
        current = await repo.get_configmap(namespace, "configmap1980-e2e")
        assert current is not None
        stale = dict(current)
        current["data"] = {"a": "2"}
        await repo.replace_object(CONFIGMAPS, current)
        stale["data"] = {"a": "3"}
        with pytest.raises(ConflictError):
            await repo.replace_object(CONFIGMAPS, stale)
        await EventRecorder(repo).emit(current, reason="RankTablePending", message="e2e")
        items, resource_version = await repo.list_objects(CONFIGMAPS, namespace)
        assert resource_version
        assert any(i["metadata"]["name"] == "configmap1980-e2e" for i in items)

        # The garbage collector the fake API server emulates: a controller-owned dependent goes with its owner.
        owner = await repo.create_object(CONFIGMAPS, {"metadata": {"name": "owner", "namespace": namespace}})
        reference = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "owner",
            "uid": owner["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        await repo.create_object(
            CONFIGMAPS, {"metadata": {"name": "dependent", "namespace": namespace, "ownerReferences": [reference]}}
        )
        await repo.delete_object(CONFIGMAPS, namespace, "owner")
        for _ in range(300):
            if await repo.get_configmap(namespace, "dependent") is None:
                break
            await asyncio.sleep(0.1)
        assert await repo.get_configmap(namespace, "dependent") is None, "collected within 30 s"

        elector = LeaderElector(
            repo,
            Metrics(),
            name="e2e",
            namespace=namespace,
            identity="e2e-a",
            lease_duration_s=3,
            renew_deadline_s=2,
            retry_period_s=0.5,
        )
        stop = asyncio.Event()
        led = asyncio.Event()

        async def lead() -> None:
            led.set()
            await asyncio.Event().wait()

        task = asyncio.create_task(elector.run(lead, stop))
        await asyncio.wait_for(led.wait(), 10)
        assert elector.is_leader()
        stop.set()
        await asyncio.wait_for(task, 10)
        lease = await repo._call("get leases", "GET", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/e2e")
        assert not lease["spec"].get("holderIdentity"), "released on stop"
    finally:
        await repo._call("delete namespaces", "DELETE", f"/api/v1/namespaces/{namespace}", missing_ok=True)
        await api.close()
