"""HCCL rank tables (`jobstart_hccl.json`, versions 1.0 and 1.2) and the `ranks.env` file next to them.

Every scalar is a JSON string. Key order: `status`, `version`, `server_count`, `server_list` (each `server_id`,
`host_ip`?, `container_ip`?, `device` [`device_id`, `super_device_id`? (1.2), `device_ip`, `rank_id`]), then
`super_pod_list` (1.2). rank_id = server position x devices per server + local index, devices sorted by their
numeric device_id. The table is rendered compact: a 1,024-server table must fit a 1 MiB ConfigMap.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NotRequired, TypedDict

from planner._errors import RankTableError
from planner._hash_model import CANONICAL_IPV4, canonical_ipv4
from planner._model import Placement
from planner.io._numbers import parse_count, shown

RankTableVersion = Literal["1.0", "1.2"]


class RankTableDevice(TypedDict):
    """One NPU: `device_id`, `super_device_id` (1.2 only), `device_ip`, `rank_id` (all strings)."""

    device_id: str
    super_device_id: NotRequired[str]
    device_ip: str
    rank_id: str


class RankTableServer(TypedDict):
    """One server (pod) of the table, in rank order."""

    server_id: str
    host_ip: NotRequired[str]
    container_ip: NotRequired[str]
    device: list[RankTableDevice]


class RankTableSuperPodServer(TypedDict):
    """A server reference inside `super_pod_list`."""

    server_id: str


class RankTableSuperPod(TypedDict):
    """A super-pod and its servers (1.2)."""

    super_pod_id: str
    server_list: list[RankTableSuperPodServer]


class RankTable(TypedDict):
    """`jobstart_hccl.json`; an initializing table carries `status` only."""

    status: str
    version: NotRequired[str]
    server_count: NotRequired[str]
    server_list: NotRequired[list[RankTableServer]]
    super_pod_list: NotRequired[list[RankTableSuperPod]]


INITIALIZING_RANK_TABLE: str = '{"status":"initializing"}'
"""What the ConfigMap holds until the controller writes the completed table (launchers wait on it)."""

DEFAULT_SUPER_POD_ID = "0"
"""super_pod_id of servers whose pods carry none (a single super-pod)."""


def check_order(placement: Placement, order: Sequence[int]) -> tuple[int, ...]:
    """The order as a tuple, after checking it is a permutation of the servers with the master at rank 0."""
    n = len(placement.servers)
    result = tuple(int(i) for i in order)
    if sorted(result) != list(range(n)):
        raise RankTableError(f"order: must be a permutation of the {n} server indices, got {list(result)[:16]}")
    if n and result[0] != placement.master:
        raise RankTableError(
            f"order[0]: rank 0 must be the master server {placement.master} "
            f"({placement.servers[placement.master].pod_name}), got {result[0]}"
        )
    return result


def build_rank_table(placement: Placement, order: Sequence[int], version: RankTableVersion = "1.0") -> RankTable:
    """The completed rank table of a placement with servers in `order` (order[r] = server index of node rank r)."""
    if version not in ("1.0", "1.2"):
        raise RankTableError(f'version: must be "1.0" or "1.2", got {version!r}')
    ranked = check_order(placement, order)
    _check_unique(placement)
    per_server = placement.devices_per_server
    server_list: list[RankTableServer] = []
    super_pods: dict[str, list[RankTableSuperPodServer]] = {}
    for position, index in enumerate(ranked):
        server = placement.servers[index]
        if len(server.devices) != per_server:
            raise RankTableError(
                f"pod {server.pod_name}: has {len(server.devices)} devices, the others {per_server}; "
                "every pod must request the same number of NPUs"
            )
        devices: list[RankTableDevice] = []
        for local, device in enumerate(sorted(server.devices, key=lambda d: d.device_id)):
            entry: RankTableDevice
            if version == "1.2":
                if device.super_device_id is None:
                    raise RankTableError(
                        f"pod {server.pod_name}: device {device.device_id} has no super_device_id; rank table 1.2 "
                        "needs a super-pod device plugin, or use a profile with rankTableVersion 1.0"
                    )
                entry = {
                    "device_id": str(device.device_id),
                    "super_device_id": device.super_device_id,
                    "device_ip": device.device_ip,
                    "rank_id": str(position * per_server + local),
                }
            else:
                entry = {
                    "device_id": str(device.device_id),
                    "device_ip": device.device_ip,
                    "rank_id": str(position * per_server + local),
                }
            devices.append(entry)
        row: RankTableServer = {"server_id": server.server_id, "device": devices}
        if server.host_ip is not None:
            row["host_ip"] = server.host_ip
        if server.pod_ip is not None:
            row["container_ip"] = server.pod_ip
        server_list.append(row)
        super_pod = server.super_pod_id if server.super_pod_id is not None else DEFAULT_SUPER_POD_ID
        super_pods.setdefault(super_pod, []).append({"server_id": server.server_id})
    table: RankTable = {
        "status": "completed",
        "version": version,
        "server_count": str(len(server_list)),
        "server_list": server_list,
    }
    if version == "1.2":
        table["super_pod_list"] = [
            {"super_pod_id": pod_id, "server_list": servers} for pod_id, servers in super_pods.items()
        ]
    return table


def _check_unique(placement: Placement) -> None:
    """HCCL refuses a table with a server_id or a device IP twice; `read_placement` reports these as problems,
    and placements built otherwise (by hand, by the extender's experiments) are checked here."""
    servers: dict[str, str] = {}
    ips: dict[str, str] = {}
    for server in placement.servers:
        other = servers.setdefault(server.server_id, server.pod_name)
        if other != server.pod_name:
            raise RankTableError(
                f"pod {server.pod_name}: server_id {shown(server.server_id)} is also pod {other}'s; "
                "HCCL needs a distinct server_id per server"
            )
        for device in server.devices:
            key = _normalised_ip(device.device_ip)
            where = f"pod {server.pod_name} device {device.device_id}"
            first = ips.setdefault(key, where)
            if first != where:
                raise RankTableError(
                    f"{where}: device_ip {shown(device.device_ip)} is also the IP of {first}; "
                    "HCCL needs a distinct IP per NPU"
                )


def _normalised_ip(text: str) -> str:
    if canonical_ipv4(text) is not None:
        return text
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return text


def _ordered(table: Mapping[str, Any]) -> dict[str, Any]:
    """A copy with the keys in the documented order (tables parsed from elsewhere may come in any order)."""
    out: dict[str, Any] = {"status": table["status"]}
    for key in ("version", "server_count"):
        if key in table:
            out[key] = table[key]
    if "server_list" in table:
        servers = []
        for server in table["server_list"]:
            row: dict[str, Any] = {"server_id": server["server_id"]}
            for key in ("host_ip", "container_ip"):
                if key in server:
                    row[key] = server[key]
            row["device"] = [
                {k: d[k] for k in ("device_id", "super_device_id", "device_ip", "rank_id") if k in d}
                for d in server["device"]
            ]
            servers.append(row)
        out["server_list"] = servers
    if "super_pod_list" in table:
        out["super_pod_list"] = [
            {
                "super_pod_id": pod["super_pod_id"],
                "server_list": [{"server_id": s["server_id"]} for s in pod["server_list"]],
            }
            for pod in table["super_pod_list"]
        ]
    return out


def render_rank_table(table: RankTable, *, indent: int | None = None) -> str:
    """The table as JSON text in the documented key order; compact unless `indent` is given."""
    ordered = _ordered(table)
    if indent is None:
        return json.dumps(ordered, separators=(",", ":"), ensure_ascii=False)
    return json.dumps(ordered, indent=indent, ensure_ascii=False)


def _expect_str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise RankTableError(f"{where}: must be a JSON string, got {json.dumps(value)}")
    return value


def _expect_int_str(value: Any, where: str) -> int:
    text = _expect_str(value, where)
    try:
        return parse_count(text)
    except ValueError as exc:
        raise RankTableError(f"{where}: must be a non-negative integer in a string: {exc}") from None


def parse_rank_table(text: str) -> RankTable:
    """Parse and check a rank table; raise RankTableError naming the first bad field.

    Checks: every scalar a string; `server_count` = servers; every server the same device count; device ids
    unique per server; device IPs are IPs; rank ids a permutation of 0..N-1; 1.2 super-pod fields consistent.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RankTableError(f"rank table: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from exc
    if not isinstance(data, dict):
        raise RankTableError("rank table: must be a JSON object")
    status = _expect_str(data.get("status"), "status")
    if status not in ("initializing", "completed"):
        raise RankTableError(f'status: must be "initializing" or "completed", got {status!r}')
    if status == "initializing" and "server_list" not in data:
        return {"status": status}
    version = _expect_str(data.get("version"), "version")
    if version not in ("1.0", "1.2"):
        raise RankTableError(f'version: must be "1.0" or "1.2", got {version!r}')
    count = _expect_int_str(data.get("server_count"), "server_count")
    servers = data.get("server_list")
    if not isinstance(servers, list):
        raise RankTableError("server_list: must be a list")
    if count != len(servers):
        raise RankTableError(f"server_count: says {count} but server_list has {len(servers)} servers")
    ranks: list[int] = []
    per_server: int | None = None
    server_ids: list[str] = []
    device_ips: dict[str, str] = {}
    for i, server in enumerate(servers):
        where = f"server_list[{i}]"
        if not isinstance(server, dict):
            raise RankTableError(f"{where}: must be an object")
        server_id = _expect_str(server.get("server_id"), f"{where}.server_id")
        if server_id in server_ids:
            raise RankTableError(
                f"{where}.server_id: {shown(server_id)} is also server_list[{server_ids.index(server_id)}]'s; "
                "HCCL needs a distinct server_id per server"
            )
        server_ids.append(server_id)
        for key in ("host_ip", "container_ip"):
            if key in server:
                _expect_str(server[key], f"{where}.{key}")
        devices = server.get("device")
        if not isinstance(devices, list) or not devices:
            raise RankTableError(f"{where}.device: must be a non-empty list")
        if per_server is None:
            per_server = len(devices)
        elif len(devices) != per_server:
            raise RankTableError(f"{where}.device: has {len(devices)} devices, server_list[0] has {per_server}")
        ranks += _device_ranks(devices, where, version, device_ips)
    if sorted(ranks) != list(range(len(ranks))):
        missing = sorted(set(range(len(ranks))) - set(ranks))[:5]
        raise RankTableError(
            f"rank_id: must be a permutation of 0..{len(ranks) - 1}; missing {missing} (a rank is repeated)"
        )
    if version == "1.2":
        _check_super_pods(data.get("super_pod_list"), server_ids)
    table: RankTable = data  # type: ignore[assignment]
    return table


_COUNT = r"(?:0|[1-9][0-9]{0,8})"
_COUNTS = re.compile(rf"{_COUNT}(?:\x00{_COUNT})*")
_ADDRESSES = re.compile(rf"{CANONICAL_IPV4}(?:\x00{CANONICAL_IPV4})*")


def _well_formed_ranks(devices: list[Any], version: str, device_ips: dict[str, str], where: str) -> list[int] | None:
    """The rank ids of a server whose devices are all as ringroute writes them (checked in bulk), recording their
    IPs in `device_ips`; None when any is not, for the device-by-device check to name it."""
    try:
        ids = [d["device_id"] for d in devices]
        ips = [d["device_ip"] for d in devices]
        ranks = [d["rank_id"] for d in devices]
        extra = [d["super_device_id"] for d in devices] if version == "1.2" else []
    except (KeyError, TypeError):
        return None
    if not all(type(v) is str for v in (*ids, *ips, *ranks, *extra)):
        return None
    if not (_COUNTS.fullmatch("\x00".join(ids)) and _COUNTS.fullmatch("\x00".join(ranks))):
        return None
    if not _ADDRESSES.fullmatch("\x00".join(ips)) or len(set(ids)) != len(ids):
        return None
    if any(ip in device_ips for ip in ips) or len(set(ips)) != len(ips):
        return None
    for j, ip in enumerate(ips):
        device_ips[ip] = f"{where}.device[{j}].device_ip"
    return [int(rank) for rank in ranks]


def _device_ranks(devices: list[Any], where: str, version: str, device_ips: dict[str, str]) -> list[int]:
    """The rank ids of one server's devices, each device checked (unique id, an IP unique in the table as
    `device_ips` records it, super_device_id in 1.2)."""
    fast = _well_formed_ranks(devices, version, device_ips, where)
    if fast is not None:
        return fast
    ranks: list[int] = []
    seen: set[int] = set()
    for j, device in enumerate(devices):
        dwhere = f"{where}.device[{j}]"
        if not isinstance(device, dict):
            raise RankTableError(f"{dwhere}: must be an object")
        device_id = _expect_int_str(device.get("device_id"), f"{dwhere}.device_id")
        if device_id in seen:
            raise RankTableError(f"{dwhere}.device_id: device {device_id} appears twice on the server")
        seen.add(device_id)
        ip = _expect_str(device.get("device_ip"), f"{dwhere}.device_ip")
        try:
            normalised = ip if canonical_ipv4(ip) is not None else str(ipaddress.ip_address(ip))
        except ValueError:
            raise RankTableError(f"{dwhere}.device_ip: {shown(ip)} is not an IP address") from None
        first = device_ips.setdefault(normalised, f"{dwhere}.device_ip")
        if first != f"{dwhere}.device_ip":
            raise RankTableError(f"{dwhere}.device_ip: {ip} is also {first}; HCCL needs a distinct IP per NPU")
        if version == "1.2":
            _expect_str(device.get("super_device_id"), f"{dwhere}.super_device_id")
        ranks.append(_expect_int_str(device.get("rank_id"), f"{dwhere}.rank_id"))
    return ranks


def _check_super_pods(pods: Any, server_ids: Sequence[str]) -> None:
    """A 1.2 table's super_pod_list lists every server exactly once."""
    if not isinstance(pods, list):
        raise RankTableError("super_pod_list: version 1.2 needs a list of super-pods")
    listed: list[str] = []
    for i, pod in enumerate(pods):
        if not isinstance(pod, dict) or not isinstance(pod.get("server_list"), list):
            raise RankTableError(f"super_pod_list[{i}]: must be an object with a server_list")
        _expect_str(pod.get("super_pod_id"), f"super_pod_list[{i}].super_pod_id")
        for j, member in enumerate(pod["server_list"]):
            if not isinstance(member, dict):
                raise RankTableError(f"super_pod_list[{i}].server_list[{j}]: must be an object")
            listed.append(_expect_str(member.get("server_id"), f"super_pod_list[{i}].server_list[{j}].server_id"))
    if sorted(listed) != sorted(server_ids):
        raise RankTableError("super_pod_list: must list every server_id of server_list exactly once")


def ranks_of(order: Sequence[int]) -> tuple[int, ...]:
    """Inverse of an order: ranks[i] = node rank of server i."""
    ranks = [0] * len(order)
    for rank, index in enumerate(order):
        ranks[index] = rank
    return tuple(ranks)


def render_ranks_env(placement: Placement, order: Sequence[int]) -> str:
    """`<pod-name>=<node-rank>` lines in rank order; the launcher exports its own line as RANK_AFTER_ACC."""
    ranked = check_order(placement, order)
    return "".join(f"{placement.servers[index].pod_name}={rank}\n" for rank, index in enumerate(ranked))


def parse_ranks_env(text: str) -> dict[str, int]:
    """Pod name -> node rank, from `ranks.env` text."""
    ranks: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, sep, value = line.partition("=")
        try:
            rank = parse_count(value.strip()) if sep else None
        except ValueError:
            rank = None
        if rank is None:
            raise RankTableError(f"ranks.env line {number}: expected <pod-name>=<node-rank>, got {shown(line)}")
        ranks[name.strip()] = rank
    return ranks


__all__ = [
    "INITIALIZING_RANK_TABLE",
    "RankTable",
    "RankTableDevice",
    "RankTableServer",
    "RankTableSuperPod",
    "RankTableSuperPodServer",
    "RankTableVersion",
    "build_rank_table",
    "check_order",
    "parse_rank_table",
    "parse_ranks_env",
    "ranks_of",
    "render_rank_table",
    "render_ranks_env",
]
