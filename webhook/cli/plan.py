"""`ringroute plan`, `ringroute simulate` and `ringroute topology generate`: offline planning from real objects.

Inputs are Kubernetes objects as `kubectl get -o yaml|json` prints them. Every failure is one line naming the
pod, node or field and the fix (exit status 2), and `plan` writes nothing unless every output could be made.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner import (
    DEFAULT_LABEL_KEYS,
    Fabric,
    dump_topology_file,
    generate_topology,
    nodes_for_topology,
)
from webhook.cli import live, plan_budget, running
from webhook.cli.errors import CommandError
from webhook.cli.outputs import replace_directory, replace_file
from webhook.cli.plan_case import PlanCase, guarded
from webhook.cli.plan_view import PlanView, check_target, plan_view, summary_lines, write_plot
from webhook.common.names import HYPERCLUSTER_LABEL, HYPERNODE_LABEL, RING_LABEL, TOR_LABEL
from webhook.common.settings import PlanningSettings
from webhook.controller.plan_files import PLAN_FILES

if TYPE_CHECKING:  # the planner's numeric half loads only when a command plans
    from planner import JobNetwork, OrderEvaluation, PlanResult, SteeringResult
    from webhook.controller.graded_plan import GradedPlan

log = logging.getLogger("ringroute.plan")

SIMULATED_ORDERS = ("pod-index", "hostname", "nslb", "leaf-grouped")


def register(subparsers: Any) -> None:
    """Add the `plan`, `simulate` and `topology` sub-commands."""
    plan = subparsers.add_parser(
        "plan",
        help="write a routed rank table for a placed job",
        description="Read a job's pods and the network topology, plan node ranks, and write jobstart_hccl.json, "
        "ranks.env, ringroute-plan.json (and routes.json with --routing pinned; MultiQpSrcPort.cfg with a hash "
        "model or --qps above 1) into --out-dir.",
    )
    _add_inputs(plan)
    plan.add_argument(
        "--out-dir",
        required=True,
        type=Path,
        metavar="DIR",
        help="directory to write; an existing one is replaced as a whole, and only if it holds nothing but a plan",
    )
    _add_html(plan)
    running.add_argument(plan.add_argument_group("fabric shared with running jobs"))
    plan_budget.add_arguments(plan)
    plan.set_defaults(handler=run_plan)

    simulate = subparsers.add_parser(
        "simulate",
        help="compare rank orders of a placed job on its network",
        description="Evaluate pod-index, hostname, nslb, leaf-grouped and ringroute orders of one job: cross-leaf "
        "ring edges against their bound, max link load against λ*, ring and halving-doubling bus bandwidth.",
    )
    _add_inputs(simulate)
    simulate.add_argument(
        "--seeds",
        type=int,
        metavar="N",
        help="ECMP hash seeds to average over, 0 .. N-1 (default: the seeds plan reports on: up to 64, fewer for "
        "large jobs)",
    )
    simulate.add_argument("--json", action="store_true", help="print JSON instead of a table")
    simulate.add_argument(
        "--plot",
        type=Path,
        metavar="FILE.png",
        help="also draw the link loads of pod-index order and ringroute's order (needs ringroute[plot])",
    )
    _add_html(simulate)
    simulate.set_defaults(handler=run_simulate)

    topology = subparsers.add_parser("topology", help="topology files", description="Topology file tools.")
    topology_commands = topology.add_subparsers(dest="topology_command", metavar="COMMAND")
    generate = topology_commands.add_parser(
        "generate",
        help="write a regular Clos topology file (and matching Node objects)",
        description="Write a ringroute topology file for a regular 2- or 3-tier Clos, for benchmarks and trials.",
    )
    generate.add_argument(
        "--leaves", type=int, required=True, metavar="N", help="leaf switches (rail groups in a rail layout)"
    )
    generate.add_argument("--servers-per-leaf", type=int, required=True, metavar="N", help="servers under each leaf")
    generate.add_argument(
        "--leaves-per-pod",
        type=int,
        metavar="N",
        help="group leaves into pods of this many, for 3 tiers (default: none, 2 tiers)",
    )
    generate.add_argument("--layout", choices=("tor", "rail"), default="tor", help="NIC attachment")
    generate.add_argument("--nics", type=int, default=8, metavar="N", help="NICs per server")
    generate.add_argument("--link-gbps", type=float, default=200.0, metavar="G", help="link rate in Gbit/s")
    generate.add_argument("--oversubscription", type=float, default=1.0, metavar="X", help="leaf down:up ratio")
    generate.add_argument(
        "--spine-oversubscription", type=float, default=1.0, metavar="X", help="spine down:up ratio, 3 tiers"
    )
    generate.add_argument("--name-prefix", default="npu", metavar="PREFIX", help="node name prefix")
    generate.add_argument("--out", type=Path, required=True, metavar="FILE", help="topology file to write")
    generate.add_argument(
        "--nodes-out", type=Path, metavar="FILE", help="also write matching Node objects (a List) to this file"
    )
    generate.add_argument(
        "--topology-labels",
        default=None,
        metavar="K1,K2",
        help="label keys for --nodes-out, top-most first "
        f"(default: {TOR_LABEL}; {HYPERCLUSTER_LABEL},{HYPERNODE_LABEL} in 3 tiers)",
    )
    generate.set_defaults(handler=run_topology_generate)
    topology.set_defaults(handler=lambda _args: _usage(topology))


def _add_html(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--html",
        type=Path,
        metavar="FILE.html",
        help="also write one self-contained page picturing the plan: servers by leaf, the ring before and after, "
        "link loads, bounds (default: no page)",
    )


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _add_inputs(parser: argparse.ArgumentParser) -> None:
    inputs = parser.add_argument_group("inputs")
    pods_or_job = inputs.add_mutually_exclusive_group(required=True)
    pods_or_job.add_argument("--pods", type=Path, metavar="FILE", help="the job's Pods (kubectl get pods -o yaml)")
    live.add_arguments(parser, pods_or_job)
    inputs.add_argument("--nodes", type=Path, metavar="FILE", help="Node objects whose labels carry the topology")
    recognised = " | ".join(_label_family(family) for family in DEFAULT_LABEL_KEYS)
    inputs.add_argument(
        "--topology-labels",
        metavar="K1,K2",
        help="node label keys, top-most first (default: settings topology.labelKeys, else the first of these the "
        f"nodes carry: {recognised})",
    )
    inputs.add_argument("--hypernodes", type=Path, metavar="FILE", help="Volcano HyperNode objects (with --nodes)")
    inputs.add_argument("--tor-configmap", type=Path, metavar="FILE", help="MindCluster basic-tor-node-cm ConfigMap")
    inputs.add_argument("--topology", type=Path, metavar="FILE", help="ringroute topology file")
    inputs.add_argument(
        "--settings",
        type=Path,
        metavar="FILE",
        help="ringroute settings file: profiles, fabric, planning (default: built-in settings)",
    )
    inputs.add_argument(
        "--profile",
        metavar="VALUE",
        help=f"accelerator profile by {RING_LABEL} label value (default: the pods' label)",
    )
    inputs.add_argument("--job-name", help="only pods of this Volcano Job")
    inputs.add_argument(
        "--expected-pods",
        type=int,
        metavar="N",
        help="the job's NPU pod count; fewer pods is an error (default: no check)",
    )

    plans = PlanningSettings()
    planning = parser.add_argument_group(
        "planning", "Unset, each comes from the --settings file's planning section, else it is the default shown."
    )
    planning.add_argument(
        "--pattern",
        choices=("ring", "halving-doubling", "mixed"),
        help=f"collective pattern to optimise for (default: {plans.pattern})",
    )
    planning.add_argument(
        "--routing",
        choices=("ecmp", "slice", "pinned"),
        help=f"routing model: hashed uplinks, static by NSLB slice id, or routes ringroute picks "
        f"(default: {plans.routing})",
    )
    planning.add_argument(
        "--qps",
        type=int,
        metavar="Q",
        help="queue pairs per cross-leaf connection, each with its own UDP source port; above 1 they are written to "
        f"MultiQpSrcPort.cfg (default: {plans.qps_per_connection})",
    )
    planning.add_argument(
        "--hash-model",
        type=Path,
        metavar="FILE",
        help="the fabric's hash model (ringroute fabric calibrate): pinned routes are then steered by per-queue-pair "
        "UDP source ports written to MultiQpSrcPort.cfg (default: the settings' topology.hashModelFile, else none)",
    )
    planning.add_argument(
        "--source-ports",
        metavar="FIRST-LAST",
        help=f"UDP source ports queue pairs may use (default: {plans.source_ports[0]}-{plans.source_ports[1]})",
    )
    planning.add_argument("--seed", type=int, metavar="S", help=f"planner seed (default: {plans.seed})")
    planning.add_argument(
        "--time-limit",
        type=float,
        metavar="SECONDS",
        help=f"planner time budget in seconds (default: {plans.time_limit_s:g})",
    )

    facts = Fabric()
    fabric = parser.add_argument_group(
        "fabric (facts labels do not carry)",
        "Unset, each comes from the --topology file or the --settings file's topology.fabric, else it is the "
        "default shown.",
    )
    fabric.add_argument(
        "--layout",
        choices=("tor", "rail"),
        help=f"NIC attachment: one leaf, or one rail switch per NIC (default: {facts.layout})",
    )
    fabric.add_argument("--nics", type=int, metavar="N", help=f"NICs per server (default: {facts.nics_per_server})")
    fabric.add_argument(
        "--link-gbps", type=float, metavar="G", help=f"link rate in Gbit/s (default: {facts.link_gbps:g})"
    )
    fabric.add_argument(
        "--leaf-uplinks",
        type=int,
        metavar="U",
        help="uplinks per leaf switch (default: derived from the ports under it and the oversubscription)",
    )
    fabric.add_argument(
        "--oversubscription",
        type=float,
        metavar="X",
        help=f"leaf downlink:uplink ratio, 2 = 2:1 (default: {facts.leaf_oversubscription:g})",
    )


def _label_family(keys: Sequence[str]) -> str:
    """`a/x,a/y` as `a/{x,y}`: label keys of one family share their prefix."""
    prefixes = {key.rpartition("/")[0] for key in keys}
    if len(keys) < 2 or len(prefixes) != 1:
        return ",".join(keys)
    return f"{prefixes.pop()}/{{{','.join(key.rpartition('/')[2] for key in keys)}}}"


# -- plan -------------------------------------------------------------------------------------------------------


def write_atomically(out_dir: Path, files: Mapping[str, str | Iterable[str]]) -> None:
    """Make `out_dir` hold exactly `files`: a new directory beside it renamed into place, replacing an existing
    plan as a whole (a routes.json of an earlier pinned plan goes with it), or nothing on failure."""
    replace_directory(out_dir, files, flag="--out-dir", replaceable=PLAN_FILES)


def run_plan(args: argparse.Namespace) -> int:
    """`ringroute plan`: write the routed rank table, ranks.env, the report (and routes) into --out-dir."""
    out_dir: Path = args.out_dir
    if out_dir.exists() and not out_dir.is_dir():
        raise CommandError(f"--out-dir {out_dir}: is a file; give a directory")
    if args.html is not None:
        check_target(args.html, "--html", "plan.html")
    case = PlanCase(args)
    plan = case.budgeted(args)
    result = plan.result
    if plan.fallback is not None:
        log.warning("plan: %s", plan.fallback.message)
    from webhook.controller.plan_files import plan_outputs

    version = case.profile.rank_table_version
    files = guarded("rank table", None, lambda: plan_outputs(case.placement, plan, version, compact=False)).files
    view = None
    if args.html and result is not None:
        view = _view(case, result, {"pod-index": result.before, "ringroute": result.after}, steering=plan.steering)
        view = dataclasses.replace(view, fabric_section=_fabric_section(case, plan))
    elif args.html:
        log.warning("--html %s: not written: %s has no simulated metrics to show", args.html, plan.level)
    write_atomically(out_dir, files)
    if view is not None:
        from webhook.cli.html_report import write_html  # the page's drawing (numpy) loads only when one is asked for

        write_html(args.html, view)
    routing = result.routing if result is not None else case.routing
    print(
        f"wrote {', '.join(files)} to {out_dir}"
        + (f" and {args.html}" if view is not None else "")
        + f": {len(case.placement.servers)} servers x {case.placement.devices_per_server} devices, "
        f"{case.pattern} under {routing} routing, pod-index order -> ringroute's order"
    )
    if result is not None:
        for line in summary_lines(result.before, result.after):
            print(f"  {line}")
    if plan.steering is not None and (plan.steering.mode != "none" or plan.steering.fallback):
        print(f"  source ports: {plan.steering.message}")
    if plan.outlook is not None:
        print(f"  on the shared fabric ({len(case.running)} running jobs): {plan.outlook.sentence()}")
    elif case.running and case.routing != "pinned":
        print(f"  {len(case.running)} running jobs: routes are planned around them only with --routing pinned")
    if plan.fallback is not None:
        print(f"  fallback: {plan.fallback.message}")
    return 0


def _fabric_section(case: PlanCase, plan: GradedPlan) -> str | None:
    """The leaf x spine picture of the running jobs' load with this plan's routes (None when planned alone)."""
    result, steering = plan.result, plan.steering
    if case.ledger is None or result is None or result.routes is None:
        return None
    from planner import job_traffic
    from webhook.cli.fabric_page import fabric_grid

    steered = steering is not None and steering.mode == "steered" and steering.routes is not None
    routes = steering.routes if steered and steering is not None and steering.routes is not None else result.routes
    key = f"{case.placement.namespace}/{case.placement.job_name} (this plan)"
    ledger = running.running_ledger(case.running, case.topology, case.hash_model)
    ledger.put(
        job_traffic(
            ledger.links,
            routes.network,
            list(routes.steps),
            key=key,
            routes=routes,
            delivery="hashed" if steered else "planned",
            qps=routes.qps,
        )
    )
    mine = {ledger.links.name(int(link)).switch for link in ledger.jobs[key].links}
    return "<h2>The shared fabric</h2>" + fabric_grid(ledger, ledger.loads, highlight=frozenset(mine))


def _view(
    case: PlanCase,
    result: PlanResult,
    evaluations: Mapping[str, OrderEvaluation],
    orders: Mapping[str, tuple[int, ...]] | None = None,
    steering: SteeringResult | None = None,
) -> PlanView:
    """What --html and --plot show: the pod-index order and the plan, with `evaluations` of both."""
    from planner import baseline_order

    if orders is None:
        orders = {"pod-index": baseline_order("pod-index", case.placement, case.topology), "ringroute": result.order}
    return guarded(
        "plan",
        None,
        lambda: plan_view(
            case.placement,
            case.topology,
            orders=orders,
            evaluations=evaluations,
            routes=result.routes,
            message=result.message,
            steering=steering,
        ),
    )


# -- simulate ---------------------------------------------------------------------------------------------------


def _evaluations(
    case: PlanCase, seeds: int | None
) -> tuple[dict[str, tuple[int, ...]], dict[str, OrderEvaluation], JobNetwork, PlanResult]:
    """Every order's evaluation on `seeds` (default: the plan report's seeds, so its numbers are the plan's)."""
    from planner import baseline_order, evaluate_order, job_network

    result = case.plan()
    if seeds is None:
        seeds = result.after.seeds
    network = guarded(
        "topology", None, lambda: job_network(case.topology, [s.node_name for s in case.placement.servers])
    )
    orders: dict[str, tuple[int, ...]] = {
        name: baseline_order(name, case.placement, case.topology, case.seed, pattern=case.pattern)
        for name in SIMULATED_ORDERS
    }
    orders["ringroute"] = tuple(result.order)
    evaluations = {
        name: evaluate_order(
            network,
            order,
            pattern=case.pattern,
            routing=case.routing,
            qps=case.qps,
            seeds=seeds,
            routes=result.routes if name == "ringroute" else None,
        )
        for name, order in orders.items()
    }
    return orders, evaluations, network, result


def simulation_table(evaluations: Mapping[str, OrderEvaluation], tiers: int) -> str:
    """The before/after comparison as aligned text columns."""
    from planner import format_fraction, format_load

    tier_names = ["leaf", "pod", "tier3"][:tiers]
    header = ["order", *(f"cross-{t} (bound)" for t in tier_names), "max load (λ*)", "ring busbw", "HD busbw"]
    rows = [header]
    for name, ev in evaluations.items():
        rows.append(
            [
                name,
                *(f"{e} ({b})" for e, b in zip(ev.cross_edges, ev.cross_edge_bounds, strict=False)),
                f"{format_load(ev.max_link_load)} ({ev.max_link_load_bound:g})",
                format_fraction(ev.ring_busbw),
                format_fraction(ev.hd_busbw),
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def run_simulate(args: argparse.Namespace) -> int:
    """`ringroute simulate`: print how each rank order of the job performs on its network."""
    if args.seeds is not None and args.seeds < 1:
        raise CommandError(f"--seeds {args.seeds}: must be at least 1")
    if args.plot is not None:  # before the simulation, which takes a while
        if importlib.util.find_spec("matplotlib") is None:
            raise CommandError(f"--plot {args.plot}: matplotlib is not installed; pip install 'ringroute[plot]'")
        check_target(args.plot, "--plot", "loads.png")
    if args.html is not None:
        check_target(args.html, "--html", "plan.html")
    case = PlanCase(args)
    orders, evaluations, _network, result = _evaluations(case, args.seeds)
    steering = _steering(case, result)
    if steering is not None and steering.predicted is not None:
        evaluations[f"ringroute + {steering.mode} ports"] = steering.predicted
    if args.plot is not None or args.html is not None:
        chosen = {name: evaluations[name] for name in ("pod-index", "ringroute")}
        view = _view(case, result, chosen, orders, steering=steering)
        if args.plot is not None:
            write_plot(args.plot, view)
        if args.html is not None:
            from webhook.cli.html_report import write_html

            write_html(args.html, view)
    summary = {
        "job": case.placement.job_name,
        "servers": len(case.placement.servers),
        "topology": case.topology.source,
        "pattern": case.pattern,
        "routing": case.routing,
        "qps": case.qps,
        "seeds": evaluations["ringroute"].seeds,
        "plan": {"status": result.status, "message": result.message, "wall_time_s": result.wall_time_s},
        "steering": steering.to_report() if steering is not None else None,
    }
    if args.json:
        payload = {**summary, "orders": {name: ev.to_dict() for name, ev in evaluations.items()}}
        print(json.dumps(payload, indent=2))
    else:
        from planner import seed_note

        seeds = seed_note(evaluations["ringroute"])
        print(
            f"job {summary['job']}: {summary['servers']} servers, topology from {summary['topology']}, "
            f"pattern {case.pattern}, routing {case.routing}, qps {case.qps}" + (f", {seeds}" if seeds else "")
        )
        print(simulation_table(evaluations, case.topology.tiers))
        if steering is not None and (steering.mode != "none" or steering.fallback):
            print(f"source ports: {steering.message}")
    return 0


def _steering(case: PlanCase, result: PlanResult) -> SteeringResult | None:
    """The plan's source ports as `plan` would write them: steered with a hash model, spread above one queue pair."""
    if case.hash_model is None and case.qps == 1:
        return None
    from planner import steer_source_ports

    return guarded(
        "source ports",
        None,
        lambda: steer_source_ports(
            case.placement,
            case.topology,
            result,
            case.hash_model,
            port_range=case.source_ports,
            rng=case.seed,
            time_limit=case.settings.planning.steering_time_limit_s,
        ),
    )


# -- topology generate ------------------------------------------------------------------------------------------


def run_topology_generate(args: argparse.Namespace) -> int:
    """`ringroute topology generate`: write a regular Clos as a topology file (and Node objects)."""
    topology = guarded(
        "topology generate",
        None,
        lambda: generate_topology(
            leaves=args.leaves,
            servers_per_leaf=args.servers_per_leaf,
            leaves_per_pod=args.leaves_per_pod,
            layout=args.layout,
            nics_per_server=args.nics,
            leaf_oversubscription=args.oversubscription,
            spine_oversubscription=args.spine_oversubscription,
            link_gbps=args.link_gbps,
            name_prefix=args.name_prefix,
        ),
    )
    files = {("--out", args.out): dump_topology_file(topology)}
    if args.nodes_out is not None:
        if args.topology_labels is not None:
            keys = [k.strip() for k in args.topology_labels.split(",") if k.strip()]
        else:
            keys = [TOR_LABEL] if topology.tiers == 1 else [HYPERCLUSTER_LABEL, HYPERNODE_LABEL]
        nodes = guarded("--topology-labels", None, lambda: nodes_for_topology(topology, keys))
        import yaml

        body = {"apiVersion": "v1", "kind": "List", "items": nodes, "metadata": {"resourceVersion": ""}}
        files[("--nodes-out", args.nodes_out)] = yaml.safe_dump(body, sort_keys=False, width=1000)
    for (flag, path), text in files.items():
        replace_file(path, text, flag=flag)
    print(
        f"wrote {', '.join(str(p) for _, p in files)}: {len(topology.paths)} servers, {topology.tiers + 1} switch tiers"
    )
    return 0
