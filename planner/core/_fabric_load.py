"""The fabric load of running jobs, from the files of their plans: the ledger a new job is planned around.

`running_job_traffic` follows a running job's queue pairs the way the fabric does: the ports of its
MultiQpSrcPort.cfg (or routes.json's `sport`s) through the hash model when the model knows its switches, else
the route plan as written (a fabric controller follows routes.json), else the ECMP expectation. `fabric_ledger`
puts many of them together and refuses what cannot be one fabric (a node of two jobs, a device IP of two jobs, a
node the topology does not know) with a message naming the job, the file and the field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from planner._errors import InputError
from planner._hash_model import HashModel
from planner._model import Topology
from planner.fabric._hashed_routes import hashed_routes
from planner.fabric._port_search import CompiledModel, SourcePorts, device_addresses
from planner.io._qp_ports import QP_PORT_CONFIG_FILE, QpPortLine
from planner.io._running_job import RANK_TABLE_FILE, ROUTES_FILE, RunningJob
from planner.sim._fabric_links import FabricLinks, fabric_links
from planner.sim._ledger import FabricLedger, JobTraffic, job_traffic
from planner.sim._network import JobNetwork, job_network
from planner.sim._patterns import pattern_steps
from planner.sim._pinning import routes_from_assignment
from planner.sim._route_plan import RoutePlan


def resolve_nodes(job: RunningJob, topology: Topology) -> tuple[str, ...]:
    """The topology's node of every server of the job (its recorded node, else its server id or host IP)."""
    paths = topology.paths
    out: list[str] = []
    for rank, node in enumerate(job.nodes):
        found = next(
            (n for n in (node, job.server_ids[rank], job.host_ips[rank]) if n is not None and n in paths), None
        )
        if found is None:
            field = f"{RANK_TABLE_FILE} server_list[{rank}]" if not job.nodes_known else f"node of rank {rank}"
            raise InputError(
                f"{job.key}: {field}: node {node!r} (server_id {job.server_ids[rank]!r}) is not in the topology; "
                "pass the job's nodes too (--nodes), or drop it from --running"
            )
        out.append(found)
    return tuple(out)


def _port_lines_of(job: RunningJob) -> Sequence[QpPortLine] | None:
    """The job's ports as HCCL reads them: its MultiQpSrcPort.cfg, else routes.json's source ports."""
    if job.port_lines is not None:
        return job.port_lines
    if job.routes is None or not job.routes or any(r.sport < 0 for r in job.routes):
        return None
    index = {node: rank for rank, node in enumerate(job.nodes)}
    by_pair: dict[tuple[str, str], dict[int, int]] = {}
    for record in job.routes:
        src, dst = index.get(record.src_node), index.get(record.dst_node)
        if src is None or dst is None or record.nic >= len(job.addresses[src]):
            return None
        pair = (job.addresses[src][record.nic], job.addresses[dst][record.nic])
        by_pair.setdefault(pair, {})[record.qp] = record.sport
    if any(sorted(ports) != list(range(job.qps)) for ports in by_pair.values()):
        return None
    return [QpPortLine(src, dst, tuple(ports[q] for q in range(job.qps))) for (src, dst), ports in by_pair.items()]


def _source_ports(network: JobNetwork, job: RunningJob, lines: Sequence[QpPortLine]) -> SourcePorts:
    """The port lines as the connections (server, server, NIC) of the job's network."""
    where: dict[str, tuple[int, int]] = {}
    for server, row in enumerate(job.addresses):
        for nic, address in enumerate(row):
            where[address] = (server, nic)
    keys: list[int] = []
    ports: list[tuple[int, ...]] = []
    servers, nics = network.servers, network.nics
    for line in lines:
        src, dst = where.get(line.src), where.get(line.dst)
        if src is None or dst is None or src[1] != dst[1]:
            continue  # a line for other addresses (HCCL looks up only its own pairs)
        keys.append((src[0] * servers + dst[0]) * nics + src[1])
        ports.append(line.ports)
    order = np.argsort(np.asarray(keys, dtype=np.int64), kind="stable")
    sorted_keys = np.asarray(keys, dtype=np.int64)[order]
    pair, nic_of = np.divmod(sorted_keys, nics)
    connections = np.stack([pair // servers, pair % servers, nic_of], axis=1).reshape(-1, 3)
    table = np.asarray(ports, dtype=np.int64).reshape(len(ports), -1)[order] if ports else np.zeros((0, job.qps))
    return SourcePorts(connections.astype(np.int64), table.astype(np.int64), np.ones(sorted_keys.size, dtype=bool))


def _planned_routes(network: JobNetwork, job: RunningJob, steps: Sequence[np.ndarray]) -> RoutePlan:
    """routes.json's spines and cores as a route plan of the job's steps (InputError where it has a gap)."""
    assert job.routes is not None
    q, nics = job.qps, network.nics
    index = {node: rank for rank, node in enumerate(job.nodes)}
    spines = [np.full((s.shape[0] * q, nics), -1, dtype=np.int64) for s in steps]
    cores = [np.full_like(a, -1) for a in spines]
    rows = [{(int(a), int(b)): r for r, (a, b) in enumerate(s.tolist())} for s in steps]
    for record in job.routes:
        src, dst = index.get(record.src_node), index.get(record.dst_node)
        if src is None or dst is None or record.step >= len(steps) or record.nic >= nics:
            raise InputError(f"{ROUTES_FILE}: a queue pair of step {record.step} names servers or NICs of no step")
        row = rows[record.step].get((src, dst))
        if row is None:
            raise InputError(f"{ROUTES_FILE}: step {record.step} has no flow {record.src_node} -> {record.dst_node}")
        spines[record.step][row * q + record.qp, record.nic] = record.spine
        cores[record.step][row * q + record.qp, record.nic] = record.core
    return routes_from_assignment(network, steps, spines, cores, q)


def running_job_traffic(
    job: RunningJob,
    topology: Topology,
    links: FabricLinks,
    model: HashModel | CompiledModel | None,
    *,
    nodes: Sequence[str] | None = None,
) -> JobTraffic:
    """The job's load on every fabric link, with `delivery` saying how it is known (module docstring). `nodes`:
    the job's nodes when already resolved (`resolve_nodes`). A port file or routes the model or the topology
    cannot follow count the job as ECMP, with a warning; InputError only for a node the topology lacks."""
    network = job_network(topology, list(nodes) if nodes is not None else resolve_nodes(job, topology))
    steps = pattern_steps(np.arange(network.servers), job.pattern)
    warnings = [f"{job.routes_problem}; counted as unsteered (ECMP)"] if job.routes_problem else []
    lines = _port_lines_of(job)
    usable = model is not None and not (isinstance(model, HashModel) and model.is_empty)
    if lines is not None and usable and network.nics == len(job.addresses[0]):
        assert model is not None
        try:
            addresses = device_addresses(job.addresses, network.nics)
            routes = hashed_routes(network, steps, _source_ports(network, job, lines), addresses, model)
        except InputError as exc:
            warnings.append(f"{QP_PORT_CONFIG_FILE} through the hash model: {exc}; counted as unsteered (ECMP)")
        else:
            return job_traffic(
                links, network, steps, key=job.key, routes=routes, delivery="hashed", qps=routes.qps, warnings=warnings
            )
    if job.routes is not None and job.routes_problem is None and (lines is None or not usable):
        try:
            planned = _planned_routes(network, job, steps)
        except InputError as exc:
            warnings.append(f"{exc}; counted as unsteered (ECMP)")
        else:
            return job_traffic(
                links, network, steps, key=job.key, routes=planned, delivery="planned", qps=job.qps, warnings=warnings
            )
    return job_traffic(links, network, steps, key=job.key, routes=None, delivery="ecmp", qps=job.qps, warnings=warnings)


def check_one_fabric(jobs: Iterable[tuple[RunningJob, tuple[str, ...]]]) -> None:
    """Refuse jobs that cannot share one fabric: a node or a device IP of two jobs (InputError naming both)."""
    node_of: dict[str, str] = {}
    address_of: dict[str, str] = {}
    for job, nodes in jobs:
        for rank, node in enumerate(nodes):
            other = node_of.setdefault(node, job.key)
            if other != job.key:
                raise InputError(f"{job.key}: node of rank {rank}: {node} also runs {other}; a node runs one job")
            for nic, address in enumerate(job.addresses[rank]):
                other = address_of.setdefault(address, job.key)
                if other != job.key:
                    raise InputError(
                        f"{job.key}: {RANK_TABLE_FILE} server_list[{rank}].device[{nic}].device_ip: {address} is "
                        f"also a device of {other}; device IPs are unique on a fabric"
                    )


def fabric_ledger(
    jobs: Sequence[RunningJob],
    topology: Topology,
    model: HashModel | None = None,
    *,
    links: FabricLinks | None = None,
) -> FabricLedger:
    """The ledger of `jobs` on `topology` (InputError for jobs that cannot share it: `check_one_fabric`)."""
    links = links if links is not None else fabric_links(topology)
    resolved = [(job, resolve_nodes(job, topology)) for job in jobs]
    check_one_fabric(resolved)
    ledger = FabricLedger(links)
    compiled = CompiledModel(model) if model is not None and not model.is_empty else None
    for job, nodes in resolved:
        ledger.put(running_job_traffic(job, topology, links, compiled, nodes=nodes))
    return ledger


def running_addresses(jobs: Iterable[RunningJob]) -> Mapping[str, str]:
    """Every device IP of the jobs, and the job it belongs to."""
    return {address: job.key for job in jobs for row in job.addresses for address in row}


__all__ = [
    "check_one_fabric",
    "fabric_ledger",
    "resolve_nodes",
    "running_addresses",
    "running_job_traffic",
]
