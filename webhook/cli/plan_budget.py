"""`ringroute plan --memory-limit MIB --planning-timeout SECONDS`: the controller's planning budget, offline.

With either flag the plan runs as the controller runs it: in a worker process under RLIMIT_DATA (`--memory-limit`)
and a time limit (`--planning-timeout`), falling back one level at a time (`webhook.controller.budget`: pinned
routes, the same plan under ECMP, the ring order alone, pod-index order) when a level does not fit. Without them
the plan runs in this process with no limit of ringroute's own; a MemoryError (a `ulimit -v`, say) still falls to
the next level. Either way the plan report and the command's output say which plan was taken and why.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
from typing import TYPE_CHECKING, Any

from webhook.cli.errors import CommandError
from webhook.common.settings import STEERING_TIME_LIMIT_S

if TYPE_CHECKING:  # the planner's numeric half loads only when a command plans
    from planner import HashModel, Pattern, Placement, Routing, Topology
    from webhook.controller.budget import GradedPlan, PlanLevel
    from webhook.controller.planning import PortableTopology

log = logging.getLogger("ringroute.plan")

MEMORY_FLAG = "--memory-limit"
TIMEOUT_FLAG = "--planning-timeout"
MIN_MEMORY_MIB = 192
"""The smallest --memory-limit, as for controller.planningMemoryLimitMib: numpy and scipy need about 100 MiB."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `planning budget` option group of `plan`."""
    group = parser.add_argument_group(
        "planning budget",
        "Plan as the controller does, in a worker process under these limits (its settings "
        "controller.planningMemoryLimitMib and controller.planningTimeoutS); past one, the next cheaper plan is "
        "taken: the same plan without pinned routes (ECMP), then the ring order alone, then pod-index order.",
    )
    group.add_argument(
        MEMORY_FLAG,
        type=int,
        metavar="MIB",
        help="data-size limit (RLIMIT_DATA) of the planning process in MiB; the controller's default is 512 "
        "(default: none, plan in this process)",
    )
    group.add_argument(
        TIMEOUT_FLAG,
        type=float,
        metavar="SECONDS",
        help="time limit of each plan level in the planning process; the controller's default is 60 "
        "(default: none, plan in this process)",
    )


def _checked(args: argparse.Namespace) -> tuple[int | None, float | None]:
    memory: int | None = getattr(args, "memory_limit", None)
    timeout: float | None = getattr(args, "planning_timeout", None)
    if memory is not None and memory < MIN_MEMORY_MIB:
        raise CommandError(
            f"{MEMORY_FLAG} {memory}: give at least {MIN_MEMORY_MIB} MiB, as controller.planningMemoryLimitMib "
            "(the planning process's libraries take about 100)"
        )
    if timeout is not None and not 0 < timeout < math.inf:
        raise CommandError(f"{TIMEOUT_FLAG} {timeout}: must be a positive number of seconds")
    return memory, timeout


def budgeted_plan(
    args: argparse.Namespace,
    placement: Placement,
    topology: Topology,
    *,
    pattern: Pattern,
    routing: Routing,
    qps: int,
    seed: int,
    time_limit: float,
    hash_model: HashModel | None = None,
    source_ports: tuple[int, int] | None = None,
    steering_time_limit: float = STEERING_TIME_LIMIT_S,
) -> GradedPlan:
    """The plan within the budget of the flags (see the module's docstring), its pinned routes steered through
    `hash_model` by source ports from `source_ports`. Raises InputError for bad input."""
    from webhook.controller.budget import graded_plan

    memory, timeout = _checked(args)
    options: dict[str, Any] = {"pattern": pattern, "routing": routing, "qps": qps, "seed": seed}
    options.update(time_limit=time_limit, hash_model=hash_model, steering_time_limit=steering_time_limit)
    if source_ports is not None:
        options["source_ports"] = source_ports
    if memory is None and timeout is None:
        return graded_plan(placement, topology, **options)
    return asyncio.run(_in_worker(placement, topology, memory, timeout, options))


async def _in_worker(
    placement: Placement, topology: Topology, memory: int | None, limit_s: float | None, options: dict[str, Any]
) -> GradedPlan:
    from webhook.controller.budget import graded_plan
    from webhook.controller.isolation import PlanningProcess, PlanningProcessError
    from webhook.controller.levels import plan_by_level
    from webhook.controller.planning import portable_topology

    worker = PlanningProcess(
        memory_limit_mib=memory or 0,
        timeout_s=limit_s,
        preload=(__name__, "webhook.controller.budget"),
        memory_setting=MEMORY_FLAG,
        timeout_setting=TIMEOUT_FLAG,
    )
    portable = portable_topology(lambda: topology)
    memory_limit = f"the {memory} MiB of {MEMORY_FLAG}" if memory is not None else "the memory available"

    async def from_level(level: PlanLevel, reasons: tuple[str, ...]) -> GradedPlan:
        return await worker.call(
            plan_in_worker, placement, portable, start=level, reasons=reasons, memory_limit=memory_limit, **options
        )

    def given_up(level: PlanLevel, exc: PlanningProcessError, _following: PlanLevel, _so_far: tuple[str, ...]) -> None:
        log.debug("planning stopped at level %s: %s", level, exc)

    try:
        try:
            await asyncio.to_thread(worker.start)  # outside the time limit, as in the controller
        except PlanningProcessError as exc:  # a limit too small for the planner's libraries
            reasons: tuple[str, ...] = (f"the planning process: {exc}",)
        else:
            planned, reasons = await plan_by_level(
                from_level,
                start="as-requested",
                reasons=(),
                pattern=options["pattern"],
                routing=options["routing"],
                on_given_up=given_up,
            )
            if planned is not None:
                return planned
    finally:
        worker.close()
    return graded_plan(placement, topology, start="pod-index", reasons=reasons, **options)


def plan_in_worker(placement: Placement, topology: PortableTopology, **options: Any) -> GradedPlan:
    """`graded_plan` in the planning process (the topology crosses the process boundary in its portable form)."""
    from webhook.controller.budget import graded_plan

    return graded_plan(placement, topology(), **options)


__all__ = ["MEMORY_FLAG", "TIMEOUT_FLAG", "add_arguments", "budgeted_plan", "plan_in_worker"]
