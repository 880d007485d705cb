"""Rank tables 1.0 and 1.2: exact text, parsing checks, and the invariants every table must keep."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import (
    INITIALIZING_RANK_TABLE,
    Device,
    Placement,
    RankTableError,
    Server,
    build_rank_table,
    parse_rank_table,
    parse_ranks_env,
    render_rank_table,
    render_ranks_env,
)


def server(
    i: int, device_ids: tuple[int, ...] = (0, 1), *, super_pod: str | None = None, pod_ip: bool = True
) -> Server:
    return Server(
        pod_name=f"job-worker-{i}",
        node_name=f"node-{i}",
        server_id=f"10.0.0.{i + 1}",
        host_ip=f"10.0.0.{i + 1}",
        pod_ip=f"172.16.0.{i + 2}" if pod_ip else None,
        task_name="worker",
        task_index=i,
        devices=tuple(
            Device(d, f"192.168.{i}.{d + 10}", str(1000 * (i + 1) + d) if super_pod else None) for d in device_ids
        ),
        super_pod_id=super_pod,
    )


def test_version_1_0_table_has_string_scalars_in_documented_key_order() -> None:
    placement = Placement("job", "default", (server(0), server(1, pod_ip=False), server(2)))
    text = render_rank_table(build_rank_table(placement, (0, 2, 1)))
    assert text == (
        '{"status":"completed","version":"1.0","server_count":"3","server_list":['
        '{"server_id":"10.0.0.1","host_ip":"10.0.0.1","container_ip":"172.16.0.2","device":['
        '{"device_id":"0","device_ip":"192.168.0.10","rank_id":"0"},'
        '{"device_id":"1","device_ip":"192.168.0.11","rank_id":"1"}]},'
        '{"server_id":"10.0.0.3","host_ip":"10.0.0.3","container_ip":"172.16.0.4","device":['
        '{"device_id":"0","device_ip":"192.168.2.10","rank_id":"2"},'
        '{"device_id":"1","device_ip":"192.168.2.11","rank_id":"3"}]},'
        '{"server_id":"10.0.0.2","host_ip":"10.0.0.2","device":['
        '{"device_id":"0","device_ip":"192.168.1.10","rank_id":"4"},'
        '{"device_id":"1","device_ip":"192.168.1.11","rank_id":"5"}]}]}'
    )


def test_version_1_2_table_adds_super_device_ids_and_super_pod_list() -> None:
    placement = Placement("job", "default", (server(0, super_pod="7"), server(1, super_pod="7")), master=1)
    text = render_rank_table(build_rank_table(placement, (1, 0), "1.2"))
    assert text == (
        '{"status":"completed","version":"1.2","server_count":"2","server_list":['
        '{"server_id":"10.0.0.2","host_ip":"10.0.0.2","container_ip":"172.16.0.3","device":['
        '{"device_id":"0","super_device_id":"2000","device_ip":"192.168.1.10","rank_id":"0"},'
        '{"device_id":"1","super_device_id":"2001","device_ip":"192.168.1.11","rank_id":"1"}]},'
        '{"server_id":"10.0.0.1","host_ip":"10.0.0.1","container_ip":"172.16.0.2","device":['
        '{"device_id":"0","super_device_id":"1000","device_ip":"192.168.0.10","rank_id":"2"},'
        '{"device_id":"1","super_device_id":"1001","device_ip":"192.168.0.11","rank_id":"3"}]}],'
        '"super_pod_list":[{"super_pod_id":"7","server_list":[{"server_id":"10.0.0.2"},{"server_id":"10.0.0.1"}]}]}'
    )


def test_version_1_2_without_super_device_id_names_the_pod() -> None:
    placement = Placement("job", "default", (server(0), server(1)))
    with pytest.raises(RankTableError, match="job-worker-0"):
        build_rank_table(placement, (0, 1), "1.2")


def test_rank_zero_must_be_the_master() -> None:
    placement = Placement("job", "default", (server(0), server(1)), master=0)
    with pytest.raises(RankTableError, match=r"order\[0\]"):
        build_rank_table(placement, (1, 0))
    with pytest.raises(RankTableError, match="permutation"):
        build_rank_table(placement, (0, 0))


def test_devices_sort_numerically_so_ten_follows_nine() -> None:
    placement = Placement("job", "default", (server(0, (10, 9, 1, 11)),))
    table = build_rank_table(placement, (0,))
    assert [d["device_id"] for d in table["server_list"][0]["device"]] == ["1", "9", "10", "11"]


def test_initializing_table_parses_and_has_status_only() -> None:
    assert json.loads(INITIALIZING_RANK_TABLE) == {"status": "initializing"}
    assert parse_rank_table(INITIALIZING_RANK_TABLE) == {"status": "initializing"}


def test_parse_accepts_keys_in_any_order_and_render_restores_the_documented_order() -> None:
    placement = Placement("job", "default", (server(0), server(1)))
    text = render_rank_table(build_rank_table(placement, (0, 1)))
    shuffled = json.dumps(dict(reversed(list(json.loads(text).items()))))
    assert render_rank_table(parse_rank_table(shuffled)) == text


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda t: t.update(server_count="3"), "server_count"),
        (lambda t: t["server_list"][0]["device"][0].update(rank_id="3"), "rank_id"),
        (lambda t: t["server_list"][1]["device"][0].update(device_ip="-1"), r"server_list\[1\].device\[0\].device_ip"),
        (lambda t: t["server_list"][0]["device"][1].update(device_id="0"), r"device\[1\].device_id"),
        (lambda t: t["server_list"][0]["device"][0].update(rank_id=0), r"device\[0\].rank_id: must be a JSON string"),
        (lambda t: t["server_list"][1]["device"].pop(), r"server_list\[1\].device"),
        (lambda t: t.update(version="2.0"), "version"),
        (lambda t: t.update(status="done"), "status"),
        (lambda t: t["server_list"][0]["device"][0].update(device_id="²"), r"device\[0\].device_id: .*'²'"),
        (lambda t: t["server_list"][0]["device"][0].update(rank_id="٠"), r"device\[0\].rank_id"),
        (lambda t: t.update(server_count="9" * 5000), r"server_count: .*\(5000 characters\)"),
        (
            lambda t: t["server_list"][1]["device"][1].update(device_ip="192.168.0.10"),
            r"server_list\[1\].device\[1\].device_ip: 192.168.0.10 is also server_list\[0\].device\[0\]",
        ),
        (lambda t: t["server_list"][1].update(server_id="10.0.0.1"), r"server_list\[1\].server_id: .*server_list\[0\]"),
    ],
)
def test_parse_rejects_inconsistent_tables_naming_the_field(mutate: object, field: str) -> None:
    placement = Placement("job", "default", (server(0), server(1)))
    table = json.loads(render_rank_table(build_rank_table(placement, (0, 1))))
    mutate(table)  # type: ignore[operator]
    with pytest.raises(RankTableError, match=field):
        parse_rank_table(json.dumps(table))


def test_parse_rejects_a_1_2_table_whose_super_pod_list_misses_a_server() -> None:
    placement = Placement("job", "default", (server(0, super_pod="1"), server(1, super_pod="1")))
    table = json.loads(render_rank_table(build_rank_table(placement, (0, 1), "1.2")))
    table["super_pod_list"][0]["server_list"].pop()
    with pytest.raises(RankTableError, match="super_pod_list"):
        parse_rank_table(json.dumps(table))


@st.composite
def placements_and_orders(draw: st.DrawFn) -> tuple[Placement, tuple[int, ...]]:
    n = draw(st.integers(1, 12))
    per_server = draw(st.sampled_from((1, 2, 4, 8, 16)))
    servers = []
    for i in range(n):
        ids = draw(st.permutations(range(16)))[:per_server]
        servers.append(server(i, tuple(ids), super_pod=draw(st.sampled_from(("0", "1")))))
    master = draw(st.integers(0, n - 1))
    rest = draw(st.permutations([i for i in range(n) if i != master]))
    return Placement("job", "ns", tuple(servers), master=master), (master, *rest)


@settings(max_examples=60, deadline=None)
@given(placements_and_orders(), st.sampled_from(("1.0", "1.2")))
def test_every_table_keeps_the_rank_invariants(case: tuple[Placement, tuple[int, ...]], version: str) -> None:
    placement, order = case
    text = render_rank_table(build_rank_table(placement, order, version))  # type: ignore[arg-type]
    table = parse_rank_table(text)
    per_server = placement.devices_per_server
    ranks = [int(d["rank_id"]) for s in table["server_list"] for d in s["device"]]
    assert sorted(ranks) == list(range(len(placement.servers) * per_server))
    for position, row in enumerate(table["server_list"]):
        expected = placement.servers[order[position]]
        assert row["server_id"] == expected.server_id
        ids = [int(d["device_id"]) for d in row["device"]]
        assert ids == sorted(ids)
        assert [int(d["rank_id"]) for d in row["device"]] == [position * per_server + k for k in range(per_server)]
    assert table["server_list"][0]["server_id"] == placement.servers[placement.master].server_id
    env = parse_ranks_env(render_ranks_env(placement, order))
    assert env == {placement.servers[index].pod_name: rank for rank, index in enumerate(order)}
    assert render_rank_table(build_rank_table(placement, order, version)) == text  # type: ignore[arg-type]


def test_a_table_with_a_device_ip_or_server_id_twice_is_never_built() -> None:
    twin = server(1)
    same_ip = Placement("job", "default", (server(0), replace(twin, devices=server(0).devices)))
    with pytest.raises(
        RankTableError, match=re.escape("job-worker-1 device 0: device_ip '192.168.0.10' is also the IP of pod")
    ):
        build_rank_table(same_ip, (0, 1))
    same_id = Placement("job", "default", (server(0), replace(twin, server_id=server(0).server_id)))
    with pytest.raises(
        RankTableError, match=re.escape("pod job-worker-1: server_id '10.0.0.1' is also pod job-worker-0's")
    ):
        build_rank_table(same_id, (0, 1))


@pytest.mark.parametrize("rank", ["²", "٣", "9" * 5000, "-1", ""])
def test_ranks_env_with_a_rank_that_is_not_ascii_digits_is_a_rank_table_error(rank: str) -> None:
    with pytest.raises(RankTableError, match=re.escape("ranks.env line 2: expected <pod-name>=<node-rank>")) as raised:
        parse_ranks_env(f"a=0\nb={rank}\n")
    assert len(str(raised.value)) < 200
