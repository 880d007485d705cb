"""`ringroute plan --memory-limit MIB --planning-timeout SECONDS`: the controller's planning budget, offline.

With either flag the plan runs as the controller runs it: in a worker process under RLIMIT_DATA (`--memory-limit`)
and a time limit (`--planning-timeout`), falling back one level at a time (`webhook.controller.graded_plan`: pinned
routes, the same plan under ECMP, the ring order alone, pod-index order) when a level does not fit. Without them
the plan runs in this process with no limit of ringroute's own; a MemoryError (a `ulimit -v`, say) still falls to
the next level. Either way the plan report and the command's output say which plan was taken and why.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
from typing import TYPE_CHECKING

from webhook.cli.errors import CommandError

if TYPE_CHECKING:  # the planner's numeric half loads only when a command plans
    from webhook.controller.graded_plan import GradedPlan, PlanLevel, PlanRequest

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


def budgeted_plan(args: argparse.Namespace, request: PlanRequest) -> GradedPlan:
    """The plan of `request` within the budget of the flags (see the module's docstring), through the planning
    driver the controller uses (`webhook.controller.planning_driver.plan_within_budget`). Raises InputError for bad
    input."""
    from webhook.controller.graded_plan import graded_plan

    memory, timeout = _checked(args)
    if memory is None and timeout is None:
        return graded_plan(request)
    return asyncio.run(_in_worker(request, memory, timeout))


async def _in_worker(request: PlanRequest, memory: int | None, limit_s: float | None) -> GradedPlan:
    from webhook.controller.graded_plan import graded_plan
    from webhook.controller.isolation import PlanningProcess, PlanningProcessError
    from webhook.controller.planning_driver import plan_within_budget

    worker = PlanningProcess(
        memory_limit_mib=memory or 0,
        timeout_s=limit_s,
        preload=(plan_within_budget.__module__,),
        memory_setting=MEMORY_FLAG,
        timeout_setting=TIMEOUT_FLAG,
    )
    memory_limit = f"the {memory} MiB of {MEMORY_FLAG}" if memory is not None else "the memory available"

    def given_up(level: PlanLevel, exc: PlanningProcessError, _following: PlanLevel, _so_far: tuple[str, ...]) -> None:
        log.debug("planning stopped at level %s: %s", level, exc)

    try:
        try:
            await asyncio.to_thread(worker.start)  # outside the time limit, as in the controller
        except PlanningProcessError as exc:  # a limit too small for the planner's libraries
            return graded_plan(request, start="pod-index", reasons=(f"the planning process: {exc}",))
        return await plan_within_budget(request, worker, memory_limit=memory_limit, on_given_up=given_up)
    finally:
        worker.close()


__all__ = ["MEMORY_FLAG", "TIMEOUT_FLAG", "add_arguments", "budgeted_plan"]
