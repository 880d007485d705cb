"""Walking the plan levels down across planning processes: the loop the controller and `ringroute plan` share.

A level stopped from outside its process (past the time limit, or the process killed) is given up here and the
next cheaper one runs in a new process, with the whole time limit again (`webhook.controller.budget`); a level
that runs out of memory falls further inside the process by itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from webhook.controller.budget import PlanLevel, level_title, next_level
from webhook.controller.isolation import PlanningProcess, PlanningProcessError
from webhook.controller.planning import Planned, plan_table, portable_topology

if TYPE_CHECKING:
    from planner import Placement, Routing, Topology
    from webhook.common.settings import AcceleratorProfile, Settings

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


async def budgeted_table(
    settings: Settings,
    planning: PlanningProcess | None,
    profile: AcceleratorProfile,
    placement: Placement,
    topology: Callable[[], Topology],
    *,
    table: Mapping[str, Any],
    resume: tuple[PlanLevel, tuple[str, ...]] | None,
    on_given_up: Callable[[PlanLevel, tuple[str, ...]], None],
) -> Planned:
    """The completed table: route plans in the planning process when there is one, the rest in a thread.

    The budget is graded (`webhook.controller.budget`): a level that runs out of memory in the planning process
    falls to the next cheaper one there; a level stopped at the time limit (or whose process died) is given up here
    and the next one runs in a new process, each with the whole time limit. `resume` starts from a level given up
    before, with its reasons; `on_given_up(next level, reasons)` is told of each level given up. Pod-index order,
    the last level, needs no planner and is computed in a thread (survivors keep their ranks). `table` holds
    `plan_table`'s keyword arguments about the job (UID, version, route planning, the last table's record).
    """
    routed = table["route_plan"] and len(placement.servers) >= settings.policy.min_route_plan_nodes
    if planning is None or not routed:
        return await asyncio.to_thread(plan_table, settings, profile, placement, topology, **table)
    portable = await asyncio.to_thread(portable_topology, topology)
    memory_limit = f"the {planning.memory_limit_mib} MiB of controller.planningMemoryLimitMib"
    start, reasons = resume if resume is not None else ("as-requested", ())

    async def from_level(level: PlanLevel, so_far: tuple[str, ...]) -> Planned:
        return await planning.call(
            plan_table,
            settings,
            profile,
            placement,
            portable,
            start_level=level,
            budget_reasons=so_far,
            memory_limit=memory_limit,
            **table,
        )

    def given_up(level: PlanLevel, exc: PlanningProcessError, following: PlanLevel, so_far: tuple[str, ...]) -> None:
        job = f"{placement.namespace}/{placement.job_name}"
        log.warning("event=planning_stopped job=%s level=%s error=%s", job, level, exc)
        on_given_up(following, so_far)

    planned, reasons = await plan_by_level(
        from_level,
        start=start,
        reasons=reasons,
        pattern=settings.planning.pattern,
        routing=settings.planning.routing,
        on_given_up=given_up,
    )
    if planned is not None:
        return planned
    return await asyncio.to_thread(
        plan_table, settings, profile, placement, portable, start_level="pod-index", budget_reasons=reasons, **table
    )


__all__ = ["GivenUp", "LevelCall", "budgeted_table", "plan_by_level"]
