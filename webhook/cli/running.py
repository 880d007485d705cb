"""The jobs already running on the fabric, for `ringroute plan --running DIR` and `ringroute fabric load`.

A running job is an earlier plan of a job on the same fabric: a directory `ringroute plan --out-dir` wrote (its
jobstart_hccl.json, with MultiQpSrcPort.cfg or routes.json), or, read live, a completed rank-table ConfigMap.
Every refusal is one line naming the directory (or ConfigMap) and the field: a directory that is not a plan, a
node outside the topology, a node or device IP two jobs claim, or one the planned job shares.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner import QP_PORT_CONFIG_FILE, RANK_TABLE_FILE, REPORT_FILE, ROUTES_FILE, STATE_FILE, InputError
from webhook.cli.errors import CommandError, one_line
from webhook.cli.inputs import read_text

if TYPE_CHECKING:  # the planner's numeric half loads only when a command plans
    from planner import FabricLedger, HashModel, Placement, RunningJob, Topology
    from webhook.common.settings import Settings

log = logging.getLogger("ringroute.plan")

RUNNING_FLAG = "--running"
MAX_PLAN_FILE_BYTES = 64 * 1024 * 1024
"""Largest file of a plan directory read (a 4,096-server job's table is 2.6 MB, its port file 3 MB); a larger
routes.json is skipped (the job then counts by its ports), any other larger file refused."""
PLAN_DIR_FILES = (RANK_TABLE_FILE, REPORT_FILE, STATE_FILE, ROUTES_FILE, QP_PORT_CONFIG_FILE)
"""The files of a plan directory a running job is read from (only the rank table is required)."""


def add_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """`--running PLAN_DIR` (repeatable)."""
    parser.add_argument(
        RUNNING_FLAG,
        action="append",
        type=Path,
        default=None,
        metavar="PLAN_DIR",
        help="a job already running on the same fabric: the --out-dir of its earlier `ringroute plan` (its "
        "jobstart_hccl.json and MultiQpSrcPort.cfg or routes.json); repeat for every running job. Pinned routes "
        "are then planned around their traffic (default: the job is planned alone; with --job, the cluster's "
        "other rank tables)",
    )


def read_plan_dir(directory: Path) -> RunningJob:
    """The running job of a plan directory (CommandError naming it and the file or field)."""
    from planner import read_running_job

    where = f"{RUNNING_FLAG} {directory}"
    if not directory.is_dir():
        raise CommandError(f"{where}: not a directory; give the --out-dir of an earlier ringroute plan")
    files: dict[str, str] = {}
    for name in PLAN_DIR_FILES:
        path = directory / name
        if not path.is_file():
            continue
        if path.stat().st_size > MAX_PLAN_FILE_BYTES:
            if name == ROUTES_FILE:  # a job's ports tell where its queue pairs go; the plan's routes are a courtesy
                log.warning("%s: %s larger than %d MiB, not read", where, name, MAX_PLAN_FILE_BYTES >> 20)
                continue
            raise CommandError(f"{where}: {name} is larger than {MAX_PLAN_FILE_BYTES >> 20} MiB; not a plan file")
        files[name] = read_text(path, where)
    if RANK_TABLE_FILE not in files:
        raise CommandError(f"{where}: no {RANK_TABLE_FILE}; not a plan directory (give an earlier --out-dir)")
    try:
        return read_running_job(files, key=str(directory), where=where)
    except InputError as exc:
        raise CommandError(one_line(str(exc), limit=None)) from None


def running_jobs_of(
    configmaps: Sequence[Mapping[str, Any]], settings: Settings, exclude: str | None
) -> list[RunningJob]:
    """The running jobs of a cluster's completed rank-table ConfigMaps (but the one of job `exclude`); one that
    cannot be read is left out with a warning, as the controller's ledger leaves it out."""
    from webhook.controller.configmap_jobs import running_job_of

    jobs: list[RunningJob] = []
    for configmap in configmaps:
        try:
            found = running_job_of(configmap, settings)
        except InputError as exc:
            log.warning("running job left out: %s", one_line(str(exc), limit=None))
            continue
        if found is not None and found[0] != exclude:
            jobs.append(found[1])
    return jobs


def running_ledger(
    jobs: Sequence[RunningJob], topology: Topology, model: HashModel | None, *, where: str = RUNNING_FLAG
) -> FabricLedger:
    """The ledger of the running jobs on `topology` (CommandError naming the job for what cannot be one fabric)."""
    from planner import fabric_ledger

    try:
        ledger = fabric_ledger(jobs, topology, model)
    except InputError as exc:
        text = one_line(str(exc), limit=None)
        raise CommandError(text if text.startswith(where) else f"{where} {text}") from None
    for traffic in ledger.jobs.values():
        for warning in traffic.warnings:
            log.warning("%s %s: %s", where, traffic.key, warning)
    return ledger


def check_beside(placement: Placement, jobs: Sequence[RunningJob], ledger: FabricLedger) -> None:
    """Refuse a planned job that shares a node or a device IP with a running one (CommandError naming it)."""
    mine = {server.node_name: server for server in placement.servers}
    addresses = {d.device_ip: s.pod_name for s in placement.servers for d in s.devices}
    for job in jobs:
        traffic = ledger.jobs.get(job.key)
        nodes = traffic.nodes if traffic is not None else job.nodes
        for rank, node in enumerate(nodes):
            if node in mine:
                raise CommandError(
                    f"{job.key}: node of rank {rank}: {node} also runs pod {mine[node].pod_name} of the job being "
                    "planned; drop the directory of a job that no longer runs"
                )
            for nic, address in enumerate(job.addresses[rank]):
                if address in addresses:
                    raise CommandError(
                        f"{job.key}: {RANK_TABLE_FILE} server_list[{rank}].device[{nic}].device_ip: {address} is "
                        f"also a device of pod {addresses[address]} of the job being planned"
                    )


__all__ = [
    "PLAN_DIR_FILES",
    "RUNNING_FLAG",
    "add_argument",
    "check_beside",
    "read_plan_dir",
    "running_jobs_of",
    "running_ledger",
]
