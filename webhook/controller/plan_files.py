"""The files a plan writes, rendered once for both places they go: `ringroute plan --out-dir` (indented, routes.json
streamed in pieces) and the rank-table ConfigMap (compact, routes.json left out past what the ConfigMap holds).

`jobstart_hccl.json` (the rank table), `ranks.env` (pod -> node rank), `ringroute-plan.json` (the report),
`routes.json` (pinned routes, with every queue pair's source port when steered) and `MultiQpSrcPort.cfg` (the
ports HCCL reads). Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from planner import (
    QP_PORT_CONFIG_FILE,
    RANK_TABLE_FILE,
    REPORT_FILE,
    ROUTES_FILE,
    Placement,
    build_rank_table,
    render_rank_table,
    render_ranks_env,
)

if TYPE_CHECKING:
    from webhook.controller.graded_plan import GradedPlan  # the planner's numeric half loads only when a plan is made

RANKS_ENV_FILE = "ranks.env"
PLAN_FILES = (RANK_TABLE_FILE, RANKS_ENV_FILE, REPORT_FILE, ROUTES_FILE, QP_PORT_CONFIG_FILE)
"""Every file a plan may write."""
ROUTE_ENTRY_MIN_BYTES = 60
"""A compact `routes.json` entry takes at least this much (168 bytes measured): a route plan with more entries
than fit a limit is never rendered for it."""


@dataclass(frozen=True)
class PlanOutputs:
    """File name -> content (routes.json as pieces when indented), and what was left out."""

    files: dict[str, str | Iterable[str]]
    omitted: tuple[str, ...] = ()


def plan_outputs(
    placement: Placement,
    plan: GradedPlan,
    rank_table_version: Literal["1.0", "1.2"],
    *,
    compact: bool,
    routes_limit: int | None = None,
) -> PlanOutputs:
    """Every file of the plan. `compact`: one-line JSON (the ConfigMap) instead of indented files with routes.json
    in pieces (a directory). `routes_limit` (bytes): routes.json is replaced by a note saying why when its entries
    cannot fit. Raises InputError when the rank table cannot be built."""
    order = tuple(plan.order)
    table = build_rank_table(placement, order, rank_table_version)
    report = plan.report(placement)
    files: dict[str, str | Iterable[str]] = {
        RANK_TABLE_FILE: render_rank_table(table),
        RANKS_ENV_FILE: render_ranks_env(placement, order),
        REPORT_FILE: json.dumps(report, separators=(",", ":")) if compact else json.dumps(report, indent=2) + "\n",
    }
    omitted: list[str] = []
    result, steering = plan.result, plan.steering
    if steering is not None and steering.ports is not None:
        files[QP_PORT_CONFIG_FILE] = steering.config_text()
    routes = result.routes if result is not None else None
    if routes is not None:
        entries = sum(int((spines >= 0).sum()) for spines in routes.spines)
        pods = [s.pod_name for s in placement.servers]
        addresses = steering.addresses if steering is not None else None
        ports = steering.step_ports(routes) if steering is not None else None
        if routes_limit is not None and entries * ROUTE_ENTRY_MIN_BYTES > routes_limit:
            # rendering them would cost seconds and hundreds of MB for a file the ConfigMap cannot hold
            note = f"{ROUTES_FILE}: {entries} pinned routes left out, too many for {routes_limit // 1024} KiB"
            files[ROUTES_FILE] = json.dumps({"omitted": note})
            omitted.append(ROUTES_FILE)
        elif compact:
            files[ROUTES_FILE] = json.dumps(
                routes.to_json(pods, addresses=addresses, step_ports=ports), separators=(",", ":")
            )
        else:
            files[ROUTES_FILE] = _lines(routes.json_chunks(pods, addresses=addresses, step_ports=ports))
    return PlanOutputs(files, tuple(omitted))


def _lines(chunks: Iterable[str]) -> Iterator[str]:
    yield from chunks
    yield "\n"


__all__ = [
    "PLAN_FILES",
    "RANKS_ENV_FILE",
    "RANK_TABLE_FILE",
    "REPORT_FILE",
    "ROUTES_FILE",
    "ROUTE_ENTRY_MIN_BYTES",
    "PlanOutputs",
    "plan_outputs",
]
