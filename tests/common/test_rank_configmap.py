"""The rank-table ConfigMap bodies: initial body, completed data, the 1 MiB limit and gzip."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
from typing import Any

import msgspec
import pytest

from emulation.cluster import make_job
from webhook.common.launcher import launcher_script
from webhook.common.names import LAUNCHER_KEY
from webhook.common.rank_configmap import (
    STATE_KEY,
    ConfigMapTooLargeError,
    completed_payload,
    data_size,
    initial_configmap,
    parse_state_record,
    rank_table_status,
    state_record,
)
from webhook.common.settings import AcceleratorProfile, Settings
from webhook.controller.completed_table import fixed_ranks_from_record
from webhook.kube.workqueue import DebouncedQueue

SETTINGS = Settings()
PROFILE = SETTINGS.profiles[0]


def test_initial_configmap_is_named_labelled_initializing_and_controlled_by_the_job() -> None:
    job = make_job("bert", 4)
    body = initial_configmap(job, PROFILE, SETTINGS)
    assert body["metadata"]["name"] == "configmap1980-bert"
    assert body["metadata"]["namespace"] == "team-a"
    assert body["metadata"]["labels"] == {"ring-controller.cce": "ascend-1980"}
    assert json.loads(body["data"]["jobstart_hccl.json"]) == {"status": "initializing"}
    assert "RINGROUTE_LAUNCHER_TIMEOUT:-1800}" in body["data"][LAUNCHER_KEY]
    assert body["metadata"]["annotations"] == {"ringroute.io/created-by": "ringroute"}
    assert "ownerReferences" not in body["metadata"], "a job not stored yet has no uid to refer to"
    job["metadata"]["uid"] = "u-1"
    [owner] = initial_configmap(job, PROFILE, SETTINGS)["metadata"]["ownerReferences"]
    assert owner == {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": "bert",
        "uid": "u-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def test_completed_payload_over_the_limit_names_the_size_and_the_fix() -> None:
    table = json.dumps({"status": "completed", "server_list": ["x" * 3000]})
    with pytest.raises(ConfigMapTooLargeError, match=r"limit 2000\); set gzipRankTable: true"):
        completed_payload(SETTINGS, PROFILE, rank_table=table, ranks_env="", state="{}", limit=2000)


def test_plan_report_is_dropped_before_the_table_would_not_fit() -> None:
    arguments: dict[str, Any] = {"rank_table": '{"status":"completed"}', "ranks_env": "a=0\n", "state": "{}"}
    limit = completed_payload(SETTINGS, PROFILE, **arguments).size + 1000  # the table, the launcher and 1 kB
    payload = completed_payload(SETTINGS, PROFILE, **arguments, plan_report="r" * 5000, limit=limit)
    assert "omitted" in json.loads(payload.data["ringroute-plan.json"])
    assert payload.size == data_size(payload.data, payload.binary_data) <= limit


def test_source_ports_stay_plain_while_the_report_and_routes_make_room() -> None:
    arguments: dict[str, Any] = {"rank_table": '{"status":"completed"}', "ranks_env": "a=0\n", "state": "{}"}
    ports = "".join(f"10.0.{i >> 8}.{i & 255},10.1.0.1=50000,50001\n" for i in range(100))
    limit = completed_payload(SETTINGS, PROFILE, **arguments).size + len(ports) + 2000
    payload = completed_payload(
        SETTINGS, PROFILE, **arguments, plan_report="r" * 3000, routes="x" * 3000, qp_ports=ports, limit=limit
    )
    assert payload.data["MultiQpSrcPort.cfg"] == ports
    assert set(payload.omitted) == {"routes.json", "ringroute-plan.json"}


def test_source_ports_too_large_to_stay_plain_are_gzip_compressed_then_left_out() -> None:
    import base64
    import gzip

    arguments: dict[str, Any] = {"rank_table": '{"status":"completed"}', "ranks_env": "a=0\n", "state": "{}"}
    ports = "".join(f"10.0.{i >> 8}.{i & 255},10.1.0.1=50000,50001\n" for i in range(2000))
    base = completed_payload(SETTINGS, PROFILE, **arguments).size
    squeezed = completed_payload(SETTINGS, PROFILE, **arguments, qp_ports=ports, limit=base + len(ports) // 2)
    assert "MultiQpSrcPort.cfg" not in squeezed.data
    packed = squeezed.binary_data["MultiQpSrcPort.cfg.gz"]
    assert gzip.decompress(base64.b64decode(packed)).decode() == ports
    assert squeezed.omitted == ()
    gone = completed_payload(SETTINGS, PROFILE, **arguments, qp_ports=ports, limit=base + 100)
    assert gone.omitted == ("MultiQpSrcPort.cfg",)
    assert "MultiQpSrcPort.cfg" not in gone.data
    assert not gone.binary_data


def test_pinned_routes_too_large_for_the_configmap_are_left_out_after_the_report_never_the_table() -> None:
    arguments: dict[str, Any] = {"rank_table": '{"status":"completed"}', "ranks_env": "a=0\n", "state": "{}"}
    limit = completed_payload(SETTINGS, PROFILE, **arguments).size + 6000  # the table and the launcher, and 6 kB
    payload = completed_payload(SETTINGS, PROFILE, **arguments, plan_report="r" * 500, routes="x" * 9000, limit=limit)
    assert payload.omitted == ("routes.json",)
    assert payload.data["ringroute-plan.json"] == "r" * 500, "the report fits once the routes are out"
    assert json.loads(payload.data["routes.json"]) == {
        "omitted": f"routes.json of 9000 bytes left out: the ConfigMap is limited to {limit} bytes"
    }
    both = completed_payload(SETTINGS, PROFILE, **arguments, plan_report="r" * 5000, routes="x" * 4000, limit=limit)
    assert both.omitted == ("ringroute-plan.json",), "the report goes first"
    assert both.data["routes.json"] == "x" * 4000


def test_gzip_profile_stores_the_table_compressed_and_the_status_file_says_completed() -> None:
    profile = msgspec.structs.replace(PROFILE, gzip_rank_table=True)
    table = json.dumps({"status": "completed", "server_list": [{"server_id": str(i)} for i in range(400)]})
    launcher = len(launcher_script(SETTINGS.controller.launcher_timeout_s))
    limit = launcher + 2000  # the launcher, and room for the compressed table but not the plain one
    assert len(table) > 2000
    payload = completed_payload(SETTINGS, profile, rank_table=table, ranks_env="", state="{}", limit=limit)
    assert json.loads(payload.data["jobstart_hccl.json"])["status"] == "completed"
    assert gzip.decompress(base64.b64decode(payload.binary_data["jobstart_hccl.json.gz"])).decode() == table
    assert rank_table_status({"data": payload.data}, profile) == "completed"


def test_state_record_round_trips_and_garbage_is_ignored() -> None:
    text = state_record("uid", "2", [("p-0", "n-0"), ("p-1", "n-1")])
    assert parse_state_record(text) == {"jobUid": "uid", "jobVersion": "2", "servers": [["p-0", "n-0"], ["p-1", "n-1"]]}
    assert parse_state_record("{not json") is None
    assert parse_state_record(None) is None
    assert STATE_KEY == "ringroute-state.json"


def test_survivor_ranks_never_give_rank_zero_to_a_pod_other_than_task_index_zero() -> None:
    from planner import Device, Placement, Server

    def server(i: int, node: str) -> Server:
        return Server(f"p-{i}", node, node, None, None, "worker", i, (Device(0, f"10.0.0.{i + 1}"),))

    placement = Placement("j", "ns", (server(0, "n-9"), server(1, "n-1"), server(2, "n-2")), master=0)
    fixed = fixed_ranks_from_record(placement, [["p-0", "n-0"], ["p-2", "n-2"], ["p-1", "n-1"]])
    assert fixed == {2: 1, 1: 2}, "p-0 moved to another node: not a survivor; the others keep their ranks"
    swapped = fixed_ranks_from_record(placement, [["p-1", "n-1"], ["p-0", "n-9"], ["p-2", "n-2"]])
    assert 1 not in swapped
    assert 0 not in swapped


async def test_debounced_queue_hands_out_a_busy_key_once_and_reruns_it_after_done() -> None:
    queue = DebouncedQueue(0.05, 0.5)
    for _ in range(20):
        queue.add("a")
    key = await asyncio.wait_for(queue.get(), 1)
    assert key == "a"
    assert len(queue) == 0
    queue.add("a", 0.0)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(queue.get(), 0.15)
    queue.done("a")
    assert await asyncio.wait_for(queue.get(), 1) == "a"


def test_profile_label_value_selects_the_table_version() -> None:
    profile = SETTINGS.profile("ascend-1980-snt9b23")
    assert isinstance(profile, AcceleratorProfile)
    assert profile.rank_table_version == "1.2"
