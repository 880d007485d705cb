"""A running job as the files of its plan describe it: what the fabric load ledger needs to count its traffic.

The files are those `ringroute plan --out-dir` writes and the rank-table ConfigMap holds: `jobstart_hccl.json`
(servers in rank order, their device IPs), `ringroute-plan.json` (the collective it was planned for, its servers'
nodes), `ringroute-state.json` (ConfigMap only: pod and node of every rank), `MultiQpSrcPort.cfg` (the source
port of every queue pair, as HCCL reads them) and `routes.json` (the route plan). Only the table is required: a
job whose ports or routes cannot be read is still a running job, counted as unsteered (`routes_problem` says
why). Pure: the caller reads the files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, get_args

from planner._errors import InputError, RankTableError
from planner._model import Pattern
from planner.io._qp_ports import MAX_PORTS_PER_LINE, QP_PORT_CONFIG_FILE, QpPortLine, read_qp_port_config
from planner.io._ranktable import parse_rank_table

RANK_TABLE_FILE = "jobstart_hccl.json"
REPORT_FILE = "ringroute-plan.json"
STATE_FILE = "ringroute-state.json"
ROUTES_FILE = "routes.json"
MAX_ROUTE_ENTRIES = 2_000_000
"""routes.json entries read at most (4,096 servers x 8 NICs x 32 queue pairs x 2 is past any real job)."""


@dataclass(frozen=True, slots=True)
class RouteRecord:
    """One pinned cross-leaf queue pair of `routes.json`."""

    step: int
    src_node: str
    dst_node: str
    nic: int
    qp: int
    spine: int
    core: int
    """-1 for a queue pair that stays in its pod."""
    sport: int
    """-1 when ringroute chose no port for it."""


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A job on the fabric: its servers in rank order, their NICs' addresses, what it runs, and its routes."""

    key: str
    """What names the job in reports (`namespace/job`, or the plan directory)."""
    nodes: tuple[str, ...]
    """Node of every server in rank order: from the state record or the plan report, else the table's
    `server_id` (the node's IP on most device plugins), which the topology resolves."""
    server_ids: tuple[str, ...]
    host_ips: tuple[str | None, ...]
    addresses: tuple[tuple[str, ...], ...]
    """device_ip of NIC d (devices by numeric device_id) of every server, in rank order."""
    pattern: Pattern
    qps: int
    """Queue pairs per connection of its port file (or route plan); 1 without either."""
    port_lines: tuple[QpPortLine, ...] | None
    routes: tuple[RouteRecord, ...] | None
    routes_problem: str | None = None
    """Why its ports or routes were not read (the job then counts as unsteered), or None."""
    nodes_known: bool = True
    """Whether `nodes` come from the plan's own records (else they are the table's server ids)."""


def _json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{where}: not JSON ({str(exc)[:120]})") from None


def _nodes_from_records(
    files: Mapping[str, str], count: int, where: str
) -> tuple[tuple[str, ...] | None, Pattern | None]:
    """Nodes in rank order from the state record or the plan report, and the report's pattern."""
    pattern: Pattern | None = None
    nodes: tuple[str, ...] | None = None
    if STATE_FILE in files:
        state = _json(files[STATE_FILE], f"{where} {STATE_FILE}")
        servers = state.get("servers") if isinstance(state, dict) else None
        if isinstance(servers, list) and len(servers) == count:
            pairs = [s for s in servers if isinstance(s, list) and len(s) == 2 and all(isinstance(v, str) for v in s)]
            if len(pairs) == count:
                nodes = tuple(str(node) for _pod, node in pairs)
    if REPORT_FILE in files:
        report = _json(files[REPORT_FILE], f"{where} {REPORT_FILE}")
        if not isinstance(report, dict):
            raise InputError(f"{where} {REPORT_FILE}: must be a JSON object (a ringroute plan report)")
        given = report.get("pattern")
        if given in get_args(Pattern):
            pattern = given
        listed = report.get("nodes")
        if (
            nodes is None
            and isinstance(listed, list)
            and len(listed) == count
            and all(isinstance(n, str) and n for n in listed)
        ):
            nodes = tuple(listed)
    return nodes, pattern


def _routes(text: str, where: str) -> tuple[tuple[RouteRecord, ...] | None, int]:
    """routes.json's queue pairs and its queue pairs per flow; (None, 1) for a routes file left out as too big."""
    data = _json(text, where)
    if not isinstance(data, dict):
        raise InputError(f"{where}: must be a JSON object")
    if "omitted" in data and "flows" not in data:
        return None, 1
    qps = data.get("qps", 1)
    if isinstance(qps, bool) or not isinstance(qps, int) or not 1 <= qps <= MAX_PORTS_PER_LINE:
        raise InputError(f"{where}: qps: {qps!r} is not 1 to {MAX_PORTS_PER_LINE}")
    flows = data.get("flows")
    if not isinstance(flows, list):
        raise InputError(f"{where}: flows: must be a list")
    if len(flows) > MAX_ROUTE_ENTRIES:
        raise InputError(f"{where}: flows: {len(flows)} entries, more than {MAX_ROUTE_ENTRIES}")
    out: list[RouteRecord] = []
    for i, entry in enumerate(flows):
        at = f"{where}: flows[{i}]"
        if not isinstance(entry, dict):
            raise InputError(f"{at}: must be an object")

        def number(key: str, *, optional: bool = False, at: str = at, entry: dict[str, Any] = entry) -> int:
            value = entry.get(key)
            if value is None and optional:
                return -1
            if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value > 65535:
                raise InputError(f"{at}.{key}: {value!r} is not a whole number 0-65535")
            return value

        src, dst = entry.get("src_node"), entry.get("dst_node")
        if not isinstance(src, str) or not isinstance(dst, str) or not src or not dst:
            raise InputError(f"{at}: src_node and dst_node must be node names")
        record = RouteRecord(
            number("step"),
            src,
            dst,
            number("nic"),
            number("qp", optional=True) if "qp" in entry else 0,
            number("spine"),
            number("core", optional=True),
            number("sport", optional=True),
        )
        if record.qp >= qps or record.qp < 0:
            raise InputError(f"{at}.qp: {record.qp} is not below the file's qps {qps}")
        if record.sport == 0:
            raise InputError(f"{at}.sport: 0 is not a source port")
        out.append(record)
    return tuple(out), qps


def read_running_job(
    files: Mapping[str, str], *, key: str, where: str | None = None, ports_first: bool = False
) -> RunningJob:
    """The running job the files of its plan describe (module docstring). `ports_first`: routes.json is not read
    when MultiQpSrcPort.cfg is (a reader with a hash model follows the ports, not the plan).

    Raises InputError naming `where` (default: `key`) and the file and field when the rank table is missing,
    unreadable or not completed, or the records contradict it. Ports and routes that cannot be read are reported
    in `routes_problem`, not raised: the job is then counted as unsteered.
    """
    where = where or key
    if RANK_TABLE_FILE not in files:
        raise InputError(f"{where}: no {RANK_TABLE_FILE}; not a plan of a running job")
    try:
        table = parse_rank_table(files[RANK_TABLE_FILE])
    except RankTableError as exc:
        raise InputError(f"{where} {RANK_TABLE_FILE}: {exc}") from None
    if table.get("status") != "completed":
        raise InputError(f"{where} {RANK_TABLE_FILE}: status is {table.get('status')!r}; a running job's is completed")
    servers = list(table.get("server_list") or [])
    # the table is checked: every id a count, so int() reads it
    ranked = sorted(range(len(servers)), key=lambda i: min(int(d["rank_id"]) for d in servers[i]["device"]))
    server_ids = tuple(servers[i]["server_id"] for i in ranked)
    host_ips = tuple(servers[i].get("host_ip") for i in ranked)
    addresses = tuple(
        tuple(d["device_ip"] for d in sorted(servers[i]["device"], key=lambda d: int(d["device_id"]))) for i in ranked
    )
    nodes, pattern = _nodes_from_records(files, len(servers), where)
    problem: str | None = None
    port_lines: tuple[QpPortLine, ...] | None = None
    routes: tuple[RouteRecord, ...] | None = None
    qps = 1
    if QP_PORT_CONFIG_FILE in files:
        try:
            port_lines = tuple(read_qp_port_config(files[QP_PORT_CONFIG_FILE]))
        except InputError as exc:
            problem = f"{QP_PORT_CONFIG_FILE}: {exc}"
        else:
            counts = {len(line.ports) for line in port_lines}
            if len(counts) > 1:
                problem = f"{QP_PORT_CONFIG_FILE}: lines with {sorted(counts)} ports; ringroute writes one count"
                port_lines = None
            elif counts:
                qps = counts.pop()
    if ROUTES_FILE in files and not (ports_first and port_lines is not None):
        try:
            routes, route_qps = _routes(files[ROUTES_FILE], f"{ROUTES_FILE}")
        except InputError as exc:
            problem = problem or str(exc)
        else:
            if port_lines is None:
                qps = route_qps
            elif routes is not None and route_qps != qps:
                problem = f"{ROUTES_FILE}: {route_qps} queue pairs per flow, {QP_PORT_CONFIG_FILE} has {qps}"
                routes = None
    return RunningJob(
        key=key,
        nodes=nodes if nodes is not None else server_ids,
        server_ids=server_ids,
        host_ips=host_ips,
        addresses=addresses,
        pattern=pattern or "ring",
        qps=qps,
        port_lines=port_lines,
        routes=routes,
        routes_problem=problem,
        nodes_known=nodes is not None,
    )


__all__ = [
    "RANK_TABLE_FILE",
    "REPORT_FILE",
    "ROUTES_FILE",
    "STATE_FILE",
    "RouteRecord",
    "RunningJob",
    "read_running_job",
]
