"""On a real cluster, the odd cases of how a job asks for route planning are read alike by all three services.

Needs RINGROUTE_E2E_KUBECONFIG of a cluster with Volcano and at least three Ready kubelet nodes with
`huawei.com/ascend-1980: 8` (the real-cluster kit's `up.sh --volcano --nodes 3`, which `make e2e` starts). In a
namespace of its own, with the cluster's NPU nodes held alone (the Lease of `test_training_start_e2e.py`):

- a job that asks for route planning only with the Job annotation `ringroute.io/route-plan: " true"` (a space
  before `true`, no ROUTE_PLAN anywhere) is route-planned by admission (its training command wrapped by the
  launcher, route planning copied onto the pod template), by the scheduler extender in vc-scheduler (it makes the
  job's gang plan from the pods Volcano sends it) and by the controller (a routed table: a plan report, and no
  "route planning not requested");
- a job whose only ROUTE_PLAN is on an init container is refused by admission with the rule's message, so neither
  the extender nor the controller ever sees it.

The extender is added to vc-scheduler's configuration (`RINGROUTE_E2E_SCHEDULER_CONF`, else the kit's
`<state>/volcano/scheduler.conf` beside the kubeconfig; vc-scheduler reloads it) for the test and put back after.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from typing import Any

import msgspec
import pytest

from tests.e2e.scheduler import extender_in_scheduler, scheduler_conf
from tests.e2e.test_training_start_e2e import (
    LEAF_LABEL,
    PODS_IN_JOB,
    cluster,
    completed_at,
    job_manifest,
    play_device_plugin,
)
from tests.e2e.webhooks import serving_admission
from webhook.common.metrics import Metrics
from webhook.common.settings import ControllerSettings, ExtenderSettings, Settings, TopologySettings
from webhook.controller.run import run_controller
from webhook.kube.client import EVENTS, JOBS, PODS, KubeError, KubeRepository

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]
ROUTE_PLAN = "ringroute.io/route-plan"


def facts_settings(namespace: str) -> Settings:
    """Shipped defaults, but: no driver hostPaths and no nodeSelector (the kit's hosts have no Ascend driver), the
    topology from the test's leaf label, the controller in the test's namespace, the extender on loopback."""
    defaults = Settings()
    profile = msgspec.structs.replace(defaults.profiles[0], host_path_volumes=(), node_selector=())
    return msgspec.structs.replace(
        defaults,
        profiles=(profile, *defaults.profiles[1:]),
        topology=TopologySettings(label_keys=(LEAF_LABEL,)),
        controller=ControllerSettings(namespaces=(namespace,), lease_namespace=namespace),
        extender=ExtenderSettings(listen="127.0.0.1:0"),
    )


def annotated_job(name: str, namespace: str) -> Obj:
    """The e2e training job asking for route planning only by the Job annotation `" true"`."""
    job = job_manifest(name, namespace)
    job["metadata"]["annotations"] = {ROUTE_PLAN: " true"}
    for task in job["spec"]["tasks"]:
        for container in task["template"]["spec"]["containers"]:
            container["env"] = [e for e in container.get("env", []) if e["name"] != "ROUTE_PLAN"]
    return job


def init_only_job(name: str, namespace: str) -> Obj:
    """The e2e training job whose only ROUTE_PLAN is on an init container."""
    job = annotated_job(name, namespace)
    del job["metadata"]["annotations"]
    spec = job["spec"]["tasks"][0]["template"]["spec"]
    setup = copy.deepcopy(spec["containers"][0])
    setup.update(name="setup", command=["true"], env=[{"name": "ROUTE_PLAN", "value": "true"}])
    del setup["resources"]
    spec["initContainers"] = [setup]
    return job


async def completed_messages(repo: KubeRepository, namespace: str, job: str, timeout_s: float = 15.0) -> list[str]:
    """The RankTableCompleted Events on the Job, once there is one (posted after the write they report)."""
    for _ in range(int(timeout_s / 0.2)):
        events, _ = await repo.list_objects(EVENTS, namespace)
        found = [
            e["message"]
            for e in events
            if e["reason"] == "RankTableCompleted"
            and e["involvedObject"]["kind"] == "Job"
            and e["involvedObject"]["name"] == job
        ]
        if found:
            return found
        await asyncio.sleep(0.2)
    return []


def gang_plans(metrics: Metrics) -> dict[str, float]:
    """Gang plans the extender made or tried, by outcome (it tries only for jobs it reads as route-planned)."""
    outcomes = ("enforced", "scored", "no_fit", "size_unknown", "no_topology", "left_to_volcano", "placed")
    found = {
        o: metrics.registry.get_sample_value("ringroute_extender_gang_plans_total", {"outcome": o}) for o in outcomes
    }
    return {outcome: value for outcome, value in found.items() if value}


async def test_a_job_annotated_space_true_gets_a_routed_table_and_route_plan_on_an_init_container_is_refused() -> None:
    conf = scheduler_conf()
    if conf is None:
        pytest.skip("vc-scheduler's configuration is not writable here: set RINGROUTE_E2E_SCHEDULER_CONF")
    async with cluster() as live:
        repo, namespace = live.repo, live.namespace
        settings = facts_settings(namespace)
        metrics = Metrics()
        stop = asyncio.Event()
        controller = asyncio.create_task(
            run_controller(settings, KubeRepository(repo.api, metrics), metrics, identity="e2e", stop=stop)
        )
        device_plugin = asyncio.create_task(play_device_plugin(repo, namespace, None, stop))
        try:
            async with (
                extender_in_scheduler(conf, settings, allocate_events=False) as extender,
                serving_admission(repo, settings, namespace),
            ):
                with pytest.raises(KubeError) as refused:
                    await repo.create_object(JOBS, init_only_job("init-only", namespace))
                stored = await repo.create_object(JOBS, annotated_job("spaced", namespace))
                _, configmap = await completed_at(repo, namespace, "configmap1980-spaced", timeout_s=120)
                plans = gang_plans(extender)
            template = stored["spec"]["tasks"][0]["template"]
            pods, _ = await repo.list_objects(PODS, namespace, label_selector="volcano.sh/job-name=spaced")
            completed = await completed_messages(repo, namespace, "spaced")
            data = configmap["data"]
            report = json.loads(data["ringroute-plan.json"])
            print(
                json.dumps(
                    {
                        "e2e": "job-facts-odd-cases",
                        "init_only_refused": refused.value.status,
                        "refusal": str(refused.value)[-300:],
                        "spaced_template_annotations": template["metadata"].get("annotations"),
                        "spaced_command": template["spec"]["containers"][0]["command"][:3],
                        "extender_gang_plans": plans,
                        "table_servers": json.loads(data["jobstart_hccl.json"])["server_count"],
                        "plan_report_servers": report.get("servers"),
                        "completed_event": completed[:1],
                        "plans_total_routed": metrics.registry.get_sample_value(
                            "ringroute_plans_total", {"outcome": "routed"}
                        ),
                    },
                    sort_keys=True,
                )
            )
            # admission: route-planned (launcher, annotation copied for the pods); the init-only job refused
            assert refused.value.status == 422
            assert "initContainers[0].env[0]" in str(refused.value)
            assert "ROUTE_PLAN on an init container asks for nothing" in str(refused.value)
            assert template["metadata"]["annotations"][ROUTE_PLAN] == "true"
            assert template["spec"]["containers"][0]["command"][:3] == [
                "/bin/sh",
                "/user/config/ringroute-launcher.sh",
                "--",
            ]
            assert all(p["metadata"]["annotations"].get(ROUTE_PLAN) == "true" for p in pods), "Volcano copied it"
            # the extender: it planned the gang of the only route-planned job it was shown
            assert plans.get("enforced") or plans.get("scored"), plans
            # the controller: a routed table
            assert json.loads(data["jobstart_hccl.json"])["server_count"] == str(PODS_IN_JOB)
            assert report["servers"] == PODS_IN_JOB
            assert metrics.registry.get_sample_value("ringroute_plans_total", {"outcome": "routed"}) == 1.0
            assert completed, "the controller reported the table"
            assert "route planning not requested" not in completed[0]
        finally:
            stop.set()
            device_plugin.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await device_plugin
            await asyncio.wait_for(controller, 30)
