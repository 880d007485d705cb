"""`ringroute simulate-scheduling`: place jobs on a fragmented cluster with Volcano alone and with the extender.

Both runs see the same cluster (a share of nodes busy with other work, chosen at random, daemon load on every node)
and the same stream of route-planned jobs, submitted one after another. Scheduling is Volcano's allocate action
emulated call for call (`webhook.volcano_emulation.allocate_action`: resource fit before plugin predicates, the
rotating node scan that stops at `numFeasibleNodesToFind`, nodeorder and binpack scores at their default weights,
gang commit or discard), with the extender answering over its real decode/encode path in the shape the chosen
Volcano release reads. Each placed job is planned with `planner.plan_ranks` and the ring bus bandwidth of its
pod-index order and of the planned order is simulated. One JSON line per job and scheduler, a summary line per
scheduler, then the leaves per job for Volcano alone, with ringroute, and the optimum
(`webhook.volcano_emulation.experiment`).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from webhook.cli.errors import CommandError
from webhook.cli.inputs import read_settings
from webhook.common.settings import Settings, volcano_release

SCHEDULER_ALIASES = {"default": "volcano", "extender": "ringroute"}
"""Names earlier releases used for --scheduler."""


def register(subparsers: Any) -> None:
    """Add `simulate-scheduling` to the `ringroute` parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "simulate-scheduling",
        help="compare Volcano's placement with and without the extender's gang plans",
        description=(
            "Place route-planned jobs on a fragmented cluster with Volcano's allocate action (emulated call for "
            "call) without and with the scheduler extender, plan ranks, and print leaves spanned and simulated ring "
            "bus bandwidth per job as JSON lines, a summary per scheduler, and leaves per job against the optimum."
        ),
    )
    parser.add_argument(
        "--scheduler",
        choices=("volcano", "ringroute", "both", *SCHEDULER_ALIASES),
        default="both",
        metavar="{volcano,ringroute,both}",
        help="volcano: Volcano's own plugins alone; ringroute: Volcano with the ringroute extender; both: one run "
        "each (default: both). The older names default (for volcano) and extender (for ringroute) still work.",
    )
    parser.add_argument("--leaves", type=int, default=32, metavar="N", help="leaf switches")
    parser.add_argument("--servers-per-leaf", type=int, default=8, metavar="N", help="servers under each leaf")
    parser.add_argument(
        "--leaves-per-pod",
        type=int,
        default=None,
        metavar="N",
        help="leaves per spine domain, for a 3-tier fabric (default: none, a 2-tier fabric)",
    )
    parser.add_argument(
        "--occupancy", type=float, default=0.5, metavar="SHARE", help="share of nodes busy before the jobs arrive"
    )
    parser.add_argument(
        "--jobs",
        default="16,8,24,12,32,8,16",
        metavar="N,N,...",
        help="comma-separated job sizes in servers, submitted in this order",
    )
    parser.add_argument(
        "--seed", type=int, default=0, metavar="S", help="seed of the cluster and of Volcano's tie breaks"
    )
    parser.add_argument(
        "--volcano-version", default="1.10", metavar="X.Y", help="Volcano release whose extender protocol is used"
    )
    parser.add_argument(
        "--no-session-open", action="store_true", help="leave extender.onSessionOpenVerb out of Volcano's config"
    )
    parser.add_argument(
        "--allocate-events", action="store_true", help="configure allocateFuncVerb/deallocateFuncVerb (1.13+)"
    )
    parser.add_argument(
        "--settings",
        type=Path,
        metavar="FILE",
        help="ringroute settings YAML whose extender section the extender uses (default: built-in settings)",
    )
    parser.add_argument("--no-plan", action="store_true", help="skip rank planning and bandwidth simulation")
    parser.set_defaults(handler=_run)


def _parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise CommandError(f"--jobs: {text!r} is not a comma-separated list of integers, e.g. 16,8,32") from None
    if not sizes or any(s < 1 for s in sizes):
        raise CommandError("--jobs: give at least one job size, each at least 1")
    return sizes


def _run(args: argparse.Namespace) -> int:
    from webhook.common.metrics import Metrics
    from webhook.extender.app import ExtenderService
    from webhook.volcano_emulation.allocate_action import VolcanoConfig
    from webhook.volcano_emulation.experiment import ClusterSpec, build_cluster, simulate, summarise, with_bandwidth

    sizes = _parse_sizes(args.jobs)
    if args.leaves < 1 or args.servers_per_leaf < 1:
        raise CommandError("--leaves and --servers-per-leaf must be at least 1")
    if args.leaves_per_pod is not None and args.leaves_per_pod < 1:
        raise CommandError("--leaves-per-pod must be at least 1 (or left out for a 2-tier fabric)")
    if not 0.0 <= args.occupancy < 1.0:
        raise CommandError("--occupancy must be in [0, 1), e.g. 0.5")
    release = volcano_release(args.volcano_version)
    if release is None or release < (1, 7):
        raise CommandError(
            f"--volcano-version: expected a release from 1.7 on, such as 1.10 (got {args.volcano_version!r})"
        )
    settings = _settings(args.settings)
    scheduler = SCHEDULER_ALIASES.get(args.scheduler, args.scheduler)
    schedulers = ("volcano", "ringroute") if scheduler == "both" else (scheduler,)
    spec = ClusterSpec(args.leaves, args.servers_per_leaf, args.leaves_per_pod, args.occupancy)
    _, paths = build_cluster(spec, args.seed)
    plan = not args.no_plan
    config = VolcanoConfig(release=release, session_open=not args.no_session_open, events=args.allocate_events)
    # The extender's per-plan log lines would drown the JSON output.
    logging.getLogger("webhook.extender.app").setLevel(logging.WARNING)
    leaves: dict[str, list[int]] = {}
    for name in schedulers:
        service = ExtenderService(settings, Metrics()) if name == "ringroute" else None
        outcomes = simulate(name, spec, sizes, seed=args.seed, config=config, service=service)
        if plan:
            outcomes = [with_bandwidth(o, paths, seed=args.seed, settings=settings) for o in outcomes]
        for outcome in outcomes:
            print(json.dumps(outcome.to_dict()))
        print(json.dumps({"summary": name, **summarise(outcomes)}))
        leaves[name] = [o.leaves for o in outcomes]
        # The optimum follows the run that reaches it job after job; Volcano's own run leaves other free nodes.
        if name == "ringroute" or "optimum" not in leaves:
            leaves["optimum"] = [o.leaves_bound for o in outcomes]
    print(json.dumps({"leaves_per_job": leaves, "sizes": sizes}))
    return 0


def _settings(path: Path | None) -> Settings:
    return read_settings(path, "--settings")


__all__ = ["register"]
