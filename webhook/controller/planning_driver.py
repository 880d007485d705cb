"""The planning driver the controller and `ringroute plan` share: the plan levels walked down across planning
processes.

A level stopped from outside its process (past the time limit, or the process killed) is given up here and the
next cheaper one runs in a new process, with the whole time limit again (`webhook.controller.graded_plan`); a level
that runs out of memory falls further inside the process by itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from webhook.controller.graded_plan import GradedPlan, PlanLevel, PlanRequest, graded_plan, level_title, next_level
from webhook.controller.isolation import PlanningProcess, PlanningProcessError

if TYPE_CHECKING:
    from planner import Routing

log = logging.getLogger("ringroute.controller")

T = TypeVar("T")

LevelCall = Callable[[PlanLevel, tuple[str, ...]], Awaitable[T]]
"""Plans from a level with the reasons so far, in a planning process (raising PlanningProcessError when stopped)."""
GivenUp = Callable[[PlanLevel, PlanningProcessError, PlanLevel, tuple[str, ...]], None]
"""Told of each level given up: the level, why, the level tried next, and the reasons so far."""


async def plan_by_level(
    call: LevelCall[T],
    *,
    start: PlanLevel,
    reasons: Sequence[str],
    pattern: str,
    routing: Routing,
    on_given_up: GivenUp | None = None,
) -> tuple[T | None, tuple[str, ...]]:
    """`call` from `start` down to the level above pod-index: (its result, reasons), or (None, every reason) when
    each was given up, for the caller to fill pod-index order (which needs no planning process)."""
    level, given = start, list(reasons)
    while level != "pod-index":
        try:
            return await call(level, tuple(given)), tuple(given)
        except PlanningProcessError as exc:
            given.append(f"{level_title(level, pattern, routing)}: {exc}")
            following = next_level(level, routing)
            if on_given_up is not None:
                on_given_up(level, exc, following, tuple(given))
            level = following
    return None, tuple(given)


async def plan_within_budget(
    request: PlanRequest,
    process: PlanningProcess | None,
    *,
    memory_limit: str = "the memory available",
    resume: tuple[PlanLevel, tuple[str, ...]] | None = None,
    on_given_up: GivenUp | None = None,
) -> GradedPlan:
    """The plan of `request` within the budget: the one planning driver of the controller and `ringroute plan`.

    With a planning process, each level runs there (a level out of memory falls to the next cheaper one inside it;
    a level stopped at the time limit, or whose process died, is given up here and the next one runs in a new
    process, each with the whole time limit); without one, in a thread of this process. `resume` starts from a
    level given up before, with its reasons; `on_given_up` is told of each level given up. Pod-index order, the
    last level, needs no planner and is taken here. Raises InputError for bad input.
    """
    start, reasons = resume if resume is not None else ("as-requested", ())
    if process is None:
        return await asyncio.to_thread(graded_plan, request, start=start, reasons=reasons, memory_limit=memory_limit)

    async def from_level(level: PlanLevel, so_far: tuple[str, ...]) -> GradedPlan:
        return await process.call(graded_plan, request, start=level, reasons=so_far, memory_limit=memory_limit)

    planning = request.planning
    planned, given = await plan_by_level(
        from_level,
        start=start,
        reasons=reasons,
        pattern=planning.pattern,
        routing=planning.routing,
        on_given_up=on_given_up,
    )
    if planned is not None:
        return planned
    return await asyncio.to_thread(graded_plan, request, start="pod-index", reasons=given)


__all__ = ["GivenUp", "LevelCall", "plan_by_level", "plan_within_budget"]
