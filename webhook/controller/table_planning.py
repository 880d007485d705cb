"""A job's completed table: planned within the budget, around the fabric's other jobs, committed against the ledger.

`TablePlanning.plan` builds the plan request (the settings' `planning`, the hash model, the other jobs' load on the
links the job may use), runs it through the planning driver (`webhook.controller.planning_driver.plan_within_budget`:
the planning process and its fallback levels) and renders the ConfigMap data. `commit` writes it under the ledger's
commit lock, after checking that the links it was planned around did not move meanwhile (another job's table was
written, a job left): then the caller plans again, around the ledger as it is now.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from planner import InputError, Placement, Topology
from webhook.common.metrics import Metrics
from webhook.common.settings import AcceleratorProfile, Settings, settings_hash_model
from webhook.controller.completed_table import (
    Planned,
    completed_table,
    fixed_ranks_from_record,
    planning_failure,
    route_planning_problem,
)
from webhook.controller.graded_plan import PlanLevel, PlanRequest
from webhook.controller.isolation import PlanningProcess, PlanningProcessError
from webhook.controller.ledger import LedgerKeeper
from webhook.controller.planning_driver import plan_within_budget

log = logging.getLogger("ringroute.controller")

MAX_REPLANS = 3
"""Plans made again at most when the links they were planned around moved before the write; the last one is
written as it is (still a valid table, its routes merely planned around an older ledger)."""


@dataclass(frozen=True)
class PlannedTable:
    """A rendered table, and the topology it was planned on (None when the topology could not be built)."""

    planned: Planned
    topology: Topology | None


GivenUp = Callable[[PlanLevel, tuple[str, ...]], None]


def _logged(
    placement: Placement, on_given_up: GivenUp
) -> Callable[[PlanLevel, PlanningProcessError, PlanLevel, tuple[str, ...]], None]:
    """The driver's callback for a level given up: logged, then `on_given_up(next level, reasons so far)`."""

    def given_up(level: PlanLevel, exc: PlanningProcessError, following: PlanLevel, so_far: tuple[str, ...]) -> None:
        job = f"{placement.namespace}/{placement.job_name}"
        log.warning("event=planning_stopped job=%s level=%s error=%s", job, level, exc)
        on_given_up(following, so_far)

    return given_up


class TablePlanning:
    """Plans and commits completed tables for the controller (module docstring)."""

    def __init__(
        self,
        settings: Settings,
        metrics: Metrics,
        *,
        running: Callable[[], tuple[Iterable[Mapping[str, Any]], Iterable[str]]],
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.hash_model = settings_hash_model(settings)
        """The fabric's hash (topology.hashModelFile, read when the settings were): pinned routes are steered."""
        self.ledger = LedgerKeeper(settings, self.hash_model, metrics)
        self._running = running
        """The rank-table ConfigMaps and the Jobs in the caches, for (re)building the ledger."""
        controller = settings.controller
        self.process = (
            PlanningProcess(
                memory_limit_mib=controller.planning_memory_limit_mib,
                timeout_s=controller.planning_timeout_s,
                preload=(plan_within_budget.__module__,),
            )
            if controller.planning_process
            else None
        )
        """The worker process route plans run in (None: they run in a thread of this process)."""

    def ensure_ledger(self, topology: Topology) -> float | None:
        """Build the ledger for `topology` when it was built for another one (in a thread); seconds, or None."""
        return self.ledger.ensure(topology, self._running)

    async def rebuild_ledger(self, topology: Callable[[], Topology]) -> None:
        """Build the ledger for the caches' topology (the changes seen meanwhile are in it)."""
        self.ledger.forget_changes()
        try:
            built = await asyncio.to_thread(topology)
        except InputError as exc:
            log.warning("event=fabric_ledger_unavailable error=%s detail=jobs are planned alone", exc)
            return
        await asyncio.to_thread(self.ensure_ledger, built)

    async def plan(
        self,
        key: str,
        profile: AcceleratorProfile,
        placement: Placement,
        topology: Callable[[], Topology],
        *,
        job_uid: str,
        job_version: str,
        route_plan: bool,
        record_servers: Sequence[Sequence[str]],
        record_valid: bool,
        resume: tuple[PlanLevel, tuple[str, ...]] | None,
        on_given_up: GivenUp,
    ) -> PlannedTable:
        """The job's completed table (pod-index order when not route planned, or when planning failed: the
        Planned's `route_problem` says why). Raises ConfigMapTooLargeError, or InputError when no table can be
        built."""
        started = time.perf_counter()
        settings = self.settings
        fixed = fixed_ranks_from_record(placement, record_servers) if record_valid else {}
        route_problem = route_planning_problem(settings, placement, route_plan)
        graded = None
        built: Topology | None = None
        if route_plan and route_problem is None:
            try:
                built = await asyncio.to_thread(topology)
                background = None
                if settings.planning.routing == "pinned":
                    await asyncio.to_thread(self.ensure_ledger, built)
                    background = self.ledger.background(key, [s.node_name for s in placement.servers])
                request = PlanRequest(
                    placement, built, settings.planning, self.hash_model, background, tuple(sorted(fixed.items()))
                )
                graded = await plan_within_budget(
                    request,
                    self.process,
                    memory_limit=self._memory_limit(),
                    resume=resume,
                    on_given_up=_logged(placement, on_given_up),
                )
            except Exception as exc:  # a plan that fails takes pod-index order: the cheapest table is valid
                route_problem = planning_failure(exc)
                if not isinstance(exc, InputError | MemoryError):
                    log.exception("event=planning_failed job=%s", key)
        planning_ms = (time.perf_counter() - started) * 1000.0
        planned = await asyncio.to_thread(
            completed_table,
            settings,
            profile,
            placement,
            graded,
            job_uid=job_uid,
            job_version=job_version,
            route_plan=route_plan,
            route_problem=route_problem,
            fixed=fixed,
            planning_ms=planning_ms,
        )
        return PlannedTable(planned, built)

    def _memory_limit(self) -> str:
        if self.process is None:
            return "the memory available"
        return f"the {self.process.memory_limit_mib} MiB of controller.planningMemoryLimitMib"

    async def commit(
        self,
        key: str,
        table: PlannedTable,
        placement: Placement,
        write: Callable[[], Awaitable[dict[str, Any]]],
        *,
        last: bool,
    ) -> dict[str, Any] | None:
        """Write the table (`write`) unless the links it was planned around moved since (then None: plan again;
        `last` writes anyway), and put it into the ledger before another plan may commit."""
        planned = table.planned
        async with self.ledger.commit_lock:
            version = planned.background_version
            if version is not None and table.topology is not None and not last:
                nodes = [s.node_name for s in placement.servers]
                if await asyncio.to_thread(self.ledger.moved_since, version, table.topology, nodes):
                    self.metrics.fabric_replans.inc()
                    log.info("event=fabric_moved job=%s planned_at=%d detail=planning again", key, version)
                    return None
            written = await write()
            if self.ledger.ready:  # no ledger (planned alone): nothing to hold, and the pods' updates start at once
                await asyncio.to_thread(self.ledger.update, key, written)
            return written

    def start(self) -> None:
        """Start the planning process (blocks while its interpreter starts: call it in a thread)."""
        if self.process is not None:
            self.process.start()

    def close(self) -> None:
        if self.process is not None:
            self.process.close()


__all__ = ["MAX_REPLANS", "PlannedTable", "TablePlanning"]
