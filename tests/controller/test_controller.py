"""The controller against an emulated API server through the real kubernetes_asyncio client."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import pytest

from emulation.apiserver import Fault
from emulation.cluster import NS, add_job, cluster_nodes, make_job, make_pod
from planner import parse_rank_table
from tests.support.controller import Harness, running_controller, wait_for

Obj = dict[str, Any]


async def place_all(h: Harness, job: Obj, nodes: list[str], *, order: list[int] | None = None) -> None:
    for index in order if order is not None else range(len(nodes)):
        await h.server.apply("pods", make_pod(job, index, nodes[index]))


async def assert_complete_table(h: Harness, job: str, pods: int, devices: int = 8) -> dict[str, Any]:
    data = h.data(job)
    table = parse_rank_table(data["jobstart_hccl.json"])
    assert table["status"] == "completed"
    assert int(table["server_count"]) == pods
    assert all(len(s["device"]) == devices for s in table["server_list"])
    ranks = h.ranks(job)
    assert sorted(ranks.values()) == list(range(pods))
    assert ranks[f"{job}-worker-0"] == 0, "rank 0 stays on task index 0"
    assert "ringroute-launcher.sh" in data
    ips = [d["device_ip"] for s in table["server_list"] for d in s["device"]]
    assert "-1" not in ips
    return dict(table)


@pytest.mark.parametrize("pods", [3, 16, 128])
async def test_pods_arriving_in_random_order_complete_the_table_once(pods: int) -> None:
    leaves = max(4, pods // 8 + 2)
    async with running_controller(nodes=cluster_nodes(leaves, 8)) as h:
        job = make_job("train", pods)
        await add_job(h.server, job)
        rng = random.Random(pods)
        nodes = rng.sample([f"npu-{i}" for i in range(leaves * 8)], pods)
        order = list(range(pods))
        rng.shuffle(order)
        await h.wait_status("train", "initializing")
        for index in order:
            await h.server.apply("pods", make_pod(job, index, nodes[index]))
            if rng.random() < 0.3:
                await asyncio.sleep(0.01)
        await h.wait_status("train", "completed", timeout_s=20)
        await h.settle()
        table = await assert_complete_table(h, "train", pods)
        cm_writes = h.server.writes("configmaps")
        completed_writes = [w for w in cm_writes if w.method == "PUT"]
        assert len(completed_writes) <= 2, "at most adoption + the one completed update"
        assert not h.events("RankTableFailed"), [e["message"] for e in h.events("RankTableFailed")]
        report = json.loads(h.data("train")["ringroute-plan.json"])
        assert report["servers"] == pods
        completed = await h.wait_events("RankTableCompleted")
        assert completed[0]["message"].startswith(f"{pods} servers, {pods * 8} devices")
        assert table["server_list"][0]["container_ip"] == "172.16.0.1"
        owner = h.configmap("train")["metadata"]["ownerReferences"]  # type: ignore[index]
        assert owner[0]["uid"] == job["metadata"]["uid"]


async def test_late_device_annotations_keep_the_table_initializing_with_a_pending_event() -> None:
    async with running_controller() as h:
        job = make_job("late", 4)
        await add_job(h.server, job)
        nodes = ["npu-0", "npu-9", "npu-17", "npu-25"]
        for i, node in enumerate(nodes):
            await h.server.apply("pods", make_pod(job, i, node, annotated=i != 2))
        await h.settle()
        assert h.status("late") == "initializing"
        # The Event follows the ConfigMap write it reports: wait for it, never read it right after the status.
        await wait_for(lambda: any("missing-annotation" in e["message"] for e in h.events("RankTablePending")))
        pending = [e for e in h.events("RankTablePending") if "missing-annotation" in e["message"]]
        assert "late-worker-2" in pending[-1]["message"]
        await h.server.apply("pods", make_pod(job, 2, nodes[2]))
        await h.wait_status("late", "completed")
        await assert_complete_table(h, "late", 4)


async def test_pods_waiting_on_a_hard_network_topology_get_a_pending_event_naming_the_constraint() -> None:
    async with running_controller() as h:
        job = make_job("sized", 6)
        job["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 2}
        job["metadata"]["annotations"] = {"ringroute.io/network-topology": "ringroute asked Volcano ..."}
        await add_job(h.server, job)
        for i in range(6):
            await h.server.apply("pods", make_pod(job, i, None))
        await wait_for(lambda: any("unbound" in e["message"] for e in h.events("RankTablePending")))
        [pending] = [e for e in h.events("RankTablePending") if "unbound" in e["message"]]
        assert pending["message"].endswith(
            "; Volcano places this job only within one HyperNode of tier 2 or below (spec.networkTopology: mode hard, "
            "highestTierAllowed 2) and waits until one has room for all its pods (why: annotation "
            "ringroute.io/network-topology)"
        )
        assert pending["type"] == "Normal"


async def test_a_change_too_soon_after_the_last_pending_event_is_still_reported_once_one_may_be_posted() -> None:
    # Pods created a second after their Job, then waiting for Volcano: nothing changes again, yet the Event must not
    # stay at "found 0 of 6 NPU pods".
    async with running_controller(pending_event_interval_s=1.0) as h:
        job = make_job("later", 6)
        job["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 2}
        await add_job(h.server, job)
        await wait_for(lambda: any("found 0 of 6" in e["message"] for e in h.events("RankTablePending")))
        for i in range(6):
            await h.server.apply("pods", make_pod(job, i, None))
        await wait_for(lambda: any("HyperNode of tier 2" in e["message"] for e in h.events("RankTablePending")), 5.0)


async def test_pods_of_a_job_without_network_topology_get_no_such_note() -> None:
    async with running_controller() as h:
        job = make_job("plain", 3)
        await add_job(h.server, job)
        for i in range(3):
            await h.server.apply("pods", make_pod(job, i, None))
        await wait_for(lambda: any("unbound" in e["message"] for e in h.events("RankTablePending")))
        assert not [e for e in h.events("RankTablePending") if "HyperNode" in e["message"]]


async def test_minus_one_device_ips_are_never_written() -> None:
    async with running_controller() as h:
        job = make_job("bad-ip", 3)
        await add_job(h.server, job)
        await h.server.apply("pods", make_pod(job, 0, "npu-0"))
        await h.server.apply("pods", make_pod(job, 1, "npu-8", device_ip="-1"))
        await h.server.apply("pods", make_pod(job, 2, "npu-16"))
        await h.settle()
        assert h.status("bad-ip") == "initializing"
        assert "-1" not in h.data("bad-ip")["jobstart_hccl.json"]
        await wait_for(lambda: any("bad-ip-worker-1" in e["message"] for e in h.events("RankTablePending")))
        await h.server.apply("pods", make_pod(job, 1, "npu-8"))
        await h.wait_status("bad-ip", "completed")
        await assert_complete_table(h, "bad-ip", 3)


async def test_pod_deleted_resets_at_once_and_its_replacement_takes_the_freed_rank() -> None:
    async with running_controller() as h:
        job = make_job("rep", 8)
        await add_job(h.server, job)
        nodes = [f"npu-{i}" for i in (0, 1, 8, 9, 16, 17, 24, 25)]
        await place_all(h, job, nodes)
        await h.wait_status("rep", "completed")
        before = h.ranks("rep")
        await h.server.remove("pods", NS, "rep-worker-5")
        await h.wait_status("rep", "initializing", timeout_s=2)
        assert "ranks.env" not in h.data("rep")
        await h.server.apply("pods", make_pod(job, 5, "npu-30"))
        await h.wait_status("rep", "completed")
        after = h.ranks("rep")
        survivors = {p: r for p, r in before.items() if p != "rep-worker-5"}
        assert {p: after[p] for p in survivors} == survivors, "survivors keep their ranks"
        assert after["rep-worker-5"] == before["rep-worker-5"], "the replacement takes the freed rank"
        table = parse_rank_table(h.data("rep")["jobstart_hccl.json"])
        assert table["server_list"][after["rep-worker-5"]]["server_id"] == "192.168.0.31"


async def test_job_version_bump_replans_and_never_mixes_versions() -> None:
    async with running_controller() as h:
        job = make_job("ver", 4)
        await add_job(h.server, job)
        nodes = ["npu-0", "npu-8", "npu-16", "npu-24"]
        await place_all(h, job, nodes)
        await h.wait_status("ver", "completed")

        def bump(obj: Obj) -> None:
            obj["status"]["version"] = 1

        await h.server.mutate("jobs", NS, "ver", bump)
        await h.wait_status("ver", "initializing", timeout_s=3)
        new_nodes = ["npu-1", "npu-9", "npu-17", "npu-25"]
        for i in range(3):
            await h.server.apply("pods", make_pod(job, i, new_nodes[i], version=1))
        await h.settle()
        assert h.status("ver") == "initializing", "three new pods and one old one never make a table"
        await h.server.apply("pods", make_pod(job, 3, new_nodes[3], version=1))
        await h.wait_status("ver", "completed")
        table = parse_rank_table(h.data("ver")["jobstart_hccl.json"])
        assert {s["server_id"] for s in table["server_list"]} == {
            "192.168.0.2",
            "192.168.0.10",
            "192.168.0.18",
            "192.168.0.26",
        }


async def test_configmap_deleted_by_a_user_is_recreated_with_the_same_ranks() -> None:
    async with running_controller() as h:
        job = make_job("del", 6)
        await add_job(h.server, job)
        await place_all(h, job, [f"npu-{i}" for i in (0, 8, 16, 24, 1, 9)])
        await h.wait_status("del", "completed")
        ranks = h.ranks("del")
        await h.server.remove("configmaps", NS, "configmap1980-del")
        await h.wait_status("del", "completed")
        assert h.ranks("del") == ranks


async def test_configmap_edited_by_a_user_is_restored() -> None:
    async with running_controller() as h:
        job = make_job("edit", 3)
        await add_job(h.server, job)
        await place_all(h, job, ["npu-0", "npu-8", "npu-16"])
        await h.wait_status("edit", "completed")
        original = h.data("edit")

        def scribble(obj: Obj) -> None:
            obj["data"]["ranks.env"] = "edit-worker-0=2\n"

        await h.server.mutate("configmaps", NS, "configmap1980-edit", scribble)
        await h.settle(0.4)
        assert h.data("edit")["ranks.env"] == original["ranks.env"]
        assert h.data("edit")["jobstart_hccl.json"] == original["jobstart_hccl.json"]


async def test_user_made_configmap_is_adopted_and_gets_the_launcher() -> None:
    async with running_controller() as h:
        user_made: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "configmap1980-mine",
                "namespace": NS,
                "labels": {"ring-controller.cce": "ascend-1980"},
            },
            "data": {"jobstart_hccl.json": '{\n    "status":"initializing"\n}\n'},
        }
        await h.server.apply("configmaps", user_made)
        job = make_job("mine", 3, route_plan=False)
        await add_job(h.server, job)
        await h.settle()
        adopted = h.configmap("mine")
        assert adopted is not None
        [owner] = adopted["metadata"]["ownerReferences"]
        assert (owner["uid"], owner["controller"], owner["blockOwnerDeletion"]) == (job["metadata"]["uid"], True, True)
        assert adopted["data"]["jobstart_hccl.json"] == user_made["data"]["jobstart_hccl.json"]
        assert "ringroute-launcher.sh" in adopted["data"]
        await place_all(h, job, ["npu-0", "npu-8", "npu-16"])
        await h.wait_status("mine", "completed")
        assert h.ranks("mine") == {"mine-worker-0": 0, "mine-worker-1": 1, "mine-worker-2": 2}
        assert "ringroute-plan.json" not in h.data("mine"), "no route planning was asked for"
        assert "pod-index order" in (await h.wait_events("RankTableCompleted"))[-1]["message"]


async def test_job_deleted_takes_its_configmap_and_orphans_of_never_created_jobs_are_deleted() -> None:
    async with running_controller(orphan_grace_s=0.3) as h:
        job = make_job("gone", 3)
        await add_job(h.server, job)
        await h.wait_status("gone", "initializing")
        await h.server.remove("jobs", NS, "gone")
        await h.settle()
        assert h.configmap("gone") is None, "owned by the Job: garbage-collected with it"

        orphan: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "configmap1980-never",
                "namespace": NS,
                "labels": {"ring-controller.cce": "ascend-1980"},
                "annotations": {"ringroute.io/created-by": "ringroute"},
            },
            "data": {"jobstart_hccl.json": '{"status":"initializing"}'},
        }
        users = {**orphan, "metadata": {**orphan["metadata"], "name": "configmap1980-users", "annotations": {}}}
        await h.server.apply("configmaps", orphan)
        await h.server.apply("configmaps", users)
        await asyncio.sleep(1.8)  # creationTimestamp has a resolution of one second
        assert h.configmap("never") is None
        assert h.configmap("users") is not None, "a ConfigMap a user made is never deleted"


async def test_api_conflicts_errors_and_timeouts_are_retried_until_the_table_completes() -> None:
    async with running_controller() as h:
        job = make_job("flaky", 3)
        await add_job(h.server, job)
        await h.wait_status("flaky", "initializing")
        h.server.faults += [
            Fault("PUT", "/configmaps/", status=409, times=1),
            Fault("PUT", "/configmaps/", status=500, times=2),
            Fault("PUT", "/configmaps/", status=0, delay_s=2.5, times=1),
            Fault("GET", "/pods", status=500, times=2, query_contains="watch=true"),
        ]
        await place_all(h, job, ["npu-0", "npu-8", "npu-16"])
        await h.wait_status("flaky", "completed", timeout_s=15)
        await assert_complete_table(h, "flaky", 3)
        assert h.metrics.api_errors.labels("update configmaps", "500")._value.get() >= 1
        assert h.metrics.api_errors.labels("update configmaps", "409")._value.get() >= 1


async def test_watch_expiry_relists_and_resumes() -> None:
    async with running_controller() as h:
        job = make_job("relist", 3)
        await add_job(h.server, job)
        await h.wait_status("relist", "initializing")
        relists = h.controller.pods.relists
        h.server.compact()
        await h.server.drop_watches()
        await place_all(h, job, ["npu-0", "npu-8", "npu-16"])
        await h.wait_status("relist", "completed", timeout_s=10)
        assert h.controller.pods.relists > relists


async def test_a_table_too_large_for_a_configmap_is_a_failed_event_not_a_truncated_file() -> None:
    async with running_controller() as h:
        job = make_job("huge", 3, cards=16)
        await add_job(h.server, job)
        from webhook.common import rank_configmap

        original = rank_configmap.CONFIGMAP_DATA_LIMIT
        defaults = rank_configmap.completed_payload.__kwdefaults__
        assert defaults is not None
        defaults["limit"] = 2000
        try:
            for i, node in enumerate(["npu-0", "npu-8", "npu-16"]):
                await h.server.apply("pods", make_pod(job, i, node, devices=16))
            failed = await h.wait_events("RankTableFailed")  # posted after the reset it reports: wait for it
            await h.settle(0.5)
        finally:
            defaults["limit"] = original
        assert h.status("huge") == "initializing"
        assert "limit 2000" in failed[-1]["message"]
        assert "gzipRankTable" in failed[-1]["message"]
        assert failed[-1]["type"] == "Warning"
