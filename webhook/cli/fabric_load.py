"""`ringroute fabric load`: every switch link's load over all the jobs running on a fabric, and what each job gets.

From plan directories (`--running DIR`, as `ringroute plan --out-dir` wrote them) on a topology given as files, or
live and read-only from a cluster (`--cluster`: its Nodes, HyperNodes and completed rank-table ConfigMaps). Prints
the fabric's max link load against its bound (λ* over every job's flows together), the busiest links with the jobs
on each, and every job's busiest link, the part of it other jobs put there, and its predicted bus bandwidth;
`--json` prints every loaded link; `--html FILE` draws the leaf x spine loads.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webhook.cli import running
from webhook.cli.errors import CommandError
from webhook.cli.fabric_inputs import add_topology_arguments, read_topology
from webhook.cli.inputs import read_from, read_settings

if TYPE_CHECKING:
    from planner import FabricLedger, FabricReport, RunningJob, Topology
    from webhook.common.settings import Settings

BUSIEST = 10


def register(commands: Any) -> None:
    """Add `fabric load` to the `fabric` commands."""
    load = commands.add_parser(
        "load",
        help="every link's load over the jobs running on the fabric",
        description="Count every running job's queue pairs on every switch link (their ports through the hash "
        "model, else their route plan, else the ECMP expectation) and print the fabric's max link load against its "
        "bound, the busiest links and the jobs on them, and each job's predicted bus bandwidth.",
    )
    sources = load.add_argument_group("running jobs (one of)")
    running.add_argument(sources)
    sources.add_argument(
        "--cluster",
        action="store_true",
        help="read the jobs, Nodes and HyperNodes from the cluster instead (read-only: list requests only)",
    )
    sources.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="with --cluster: kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)",
    )
    sources.add_argument("--context", metavar="NAME", help="with --cluster: kubeconfig context (default: its current)")
    load.add_argument(
        "--hash-model",
        type=Path,
        metavar="FILE",
        help="the fabric's hash model: ports are followed through it (default: the settings' topology.hashModelFile, "
        "else none: steered jobs count as their routes.json says)",
    )
    load.add_argument(
        "--top", type=int, default=BUSIEST, metavar="N", help=f"busiest links printed (default: {BUSIEST}; 0: all)"
    )
    load.add_argument("--json", action="store_true", help="print JSON (every loaded link) instead of text")
    load.add_argument(
        "--html",
        type=Path,
        metavar="FILE.html",
        help="also write a page with the leaf x spine picture of the loads (default: no page)",
    )
    add_topology_arguments(load.add_argument_group("topology (with --running)"))
    load.set_defaults(handler=run_load)


def _from_cluster(args: argparse.Namespace, settings: Settings) -> tuple[Topology, list[RunningJob]]:
    import asyncio

    from webhook.cli.live import cluster_topology, labelled_nodes
    from webhook.kube.whatif import ClusterReadError, KubeconfigChoice, read_fabric

    try:
        cluster = asyncio.run(read_fabric(KubeconfigChoice(args.kubeconfig, args.context)))
    except ClusterReadError as exc:
        raise CommandError(str(exc)) from None
    fabric = settings.topology.fabric
    topology = cluster_topology(cluster, cluster.nodes, fabric)
    if topology is None:
        from planner import topology_from_nodes

        keys = settings.topology.label_keys
        nodes = labelled_nodes(cluster, keys)
        topology = read_from("nodes in the cluster", lambda: topology_from_nodes(nodes, keys, fabric))
    return topology, running.running_jobs_of(cluster.rank_tables, settings, exclude=None)


def run_load(args: argparse.Namespace) -> int:
    """`ringroute fabric load`."""
    if args.top < 0:
        raise CommandError(f"--top {args.top}: give 0 (every link) or more")
    dirs = args.running or []
    if args.cluster == bool(dirs):
        raise CommandError("--running DIR or --cluster: give the running jobs one way")
    if not args.cluster and (args.kubeconfig or args.context):
        raise CommandError("--kubeconfig and --context: only apply with --cluster")
    settings = read_settings(args.settings, "--settings")
    from webhook.cli.plan_case import hash_model_of

    model = hash_model_of(args, settings)
    if args.cluster:
        topology, jobs = _from_cluster(args, settings)
        where = "cluster"
    else:
        given = read_topology(args, settings)
        if given is None:
            raise CommandError("topology: missing; pass --nodes FILE or --topology FILE (the fabric the jobs run on)")
        topology = given
        jobs = [running.read_plan_dir(directory) for directory in dirs]
        where = running.RUNNING_FLAG
    ledger = running.running_ledger(jobs, topology, model, where=where)
    report = ledger.report(busiest=args.top if args.top else len(ledger.loads))
    if args.html is not None:
        from webhook.cli.fabric_page import write_fabric_page

        write_fabric_page(args.html, ledger, report)
    print(json.dumps(load_document(ledger, report), indent=2) if args.json else "\n".join(load_lines(ledger, report)))
    return 0


def load_document(ledger: FabricLedger, report: FabricReport) -> dict[str, Any]:
    """The `--json` form: the fabric, every loaded link with its jobs, every job's outlook."""
    import numpy as np

    loaded = np.flatnonzero(report.loads > 1e-12)
    return {
        "max_link_load": round(report.max_link_load, 6),
        "bound": report.bound,
        "busbw": round(report.busbw, 6) if report.jobs else None,
        "jobs": [job.to_dict() for job in report.jobs],
        "links": [
            {
                "link": use.name.render(),
                "tier": use.name.tier,
                "switch": use.name.switch,
                "hop": use.name.hop,
                "direction": use.name.direction,
                "load": round(use.load, 6),
                "jobs": {share.key: round(share.load, 6) for share in use.jobs},
            }
            for use in ledger.link_uses(loaded[np.argsort(-report.loads[loaded], kind="stable")].tolist())
        ],
    }


def load_lines(ledger: FabricLedger, report: FabricReport) -> list[str]:
    """The text form."""
    from planner import format_load

    net = ledger.links.network
    tiers = net.switch_tiers
    jobs = report.jobs
    deliveries = ", ".join(
        f"{sum(1 for j in jobs if j.delivery == d)} {d}"
        for d in ("hashed", "planned", "ecmp")
        if any(j.delivery == d for j in jobs)
    )
    lines = [
        f"fabric: {len(net.leaf_names)} tier-1 switch groups, {tiers} switch tiers, {report.links_used} links loaded; "
        f"{len(jobs)} running jobs" + (f" ({deliveries})" if deliveries else ""),
        f"max link load {format_load(report.max_link_load)} flows (bound {report.bound:g} over every job's flows "
        "together" + (": each job could run at line rate)" if report.bound <= 1 else ")"),
    ]
    if jobs:
        lines.append(f"aggregate predicted bus bandwidth {report.busbw:.3f} of line rate (server-weighted)")
    if report.busiest:
        lines.append("busiest links:")
        width = max(len(use.name.render()) for use in report.busiest)
        for use in report.busiest:
            on = ", ".join(f"{share.key} {format_load(share.load)}" for share in use.jobs[:4])
            more = f", and {len(use.jobs) - 4} more" if len(use.jobs) > 4 else ""
            lines.append(f"  {use.name.render().ljust(width)}  {format_load(use.load):>6}  {on}{more}")
    if jobs:
        lines.append("jobs:")
        rows = [("job", "servers", "delivery", "qps", "busiest link", "load", "others", "busbw")]
        for job in jobs:
            rows.append(
                (
                    job.key,
                    str(job.servers),
                    job.delivery,
                    str(job.qps),
                    job.bottleneck_link or "-",
                    format_load(job.bottleneck),
                    format_load(job.others),
                    f"{job.busbw:.3f}",
                )
            )
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
        for job in jobs:
            lines += [f"  warning: {job.key}: {warning}" for warning in job.warnings]
    return lines


__all__ = ["load_document", "load_lines", "register", "run_load"]
