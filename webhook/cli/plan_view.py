"""What `ringroute plan` and `simulate` show of one plan: the printed summary, the --plot image and the --html page.

All three read one `PlanView`: the pod-index order and ringroute's order, their evaluations (the plan report's
numbers) and every link's load under the same seeds, so each shows the same value of each metric. The page is drawn
and written by `html_report`, which builds on this module (never the other way round).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from webhook.cli.errors import CommandError, one_line
from webhook.cli.outputs import staged_file

if TYPE_CHECKING:
    from planner import JobNetwork, LinkLoads, OrderEvaluation, Placement, RoutePlan, SteeringResult, Topology

BEFORE, AFTER = "pod-index", "ringroute"


@dataclass(frozen=True, eq=False)
class PlanView:
    """One job's plan as the outputs show it: two orders, their metrics and their link loads."""

    placement: Placement
    topology: Topology
    network: JobNetwork
    orders: Mapping[str, tuple[int, ...]]
    """BEFORE (pod-index) and AFTER (ringroute) orders: `order[r]` = server index of node rank r."""
    evaluations: Mapping[str, OrderEvaluation]
    """The metrics of each order (the plan report's `before` and `after`)."""
    loads: Mapping[str, LinkLoads]
    """Every link's load under each seed the evaluations average, per order."""
    message: str
    """The planner's status message."""
    steering: SteeringResult | None = None
    """The per-queue-pair source ports of the plan (MultiQpSrcPort.cfg), when any were chosen."""
    fabric_section: str | None = None
    """The page's leaf x spine picture of every job's load with this plan's (planned around running jobs)."""

    @property
    def job(self) -> str:
        """`namespace/name` of the job."""
        return f"{self.placement.namespace}/{self.placement.job_name}"

    @property
    def before(self) -> OrderEvaluation:
        return self.evaluations[BEFORE]

    @property
    def after(self) -> OrderEvaluation:
        return self.evaluations[AFTER]

    @property
    def title(self) -> str:
        """Job, pattern, routing, queue pairs and seeds in one line (plot and page titles)."""
        return run_title(self.job, self.after)


def run_title(job: str, evaluation: OrderEvaluation) -> str:
    """What a plot or page shows, in one line: "default/llm-pretrain: ring pattern, ecmp routing, qps 1, mean
    over ECMP hash seeds 0-63"."""
    from planner import seed_note

    seeds = seed_note(evaluation) or f"{evaluation.routing} routes are deterministic (one evaluation)"
    return f"{job}: {evaluation.pattern} pattern, {evaluation.routing} routing, qps {evaluation.qps}, {seeds}"


def plan_view(
    placement: Placement,
    topology: Topology,
    *,
    orders: Mapping[str, tuple[int, ...]],
    evaluations: Mapping[str, OrderEvaluation],
    routes: RoutePlan | None,
    message: str,
    steering: SteeringResult | None = None,
) -> PlanView:
    """Link loads of both orders on the evaluations' seeds (`routes`: the plan's pinned routes, for AFTER)."""
    from planner import job_network, order_link_loads

    network = job_network(topology, [s.node_name for s in placement.servers])
    loads = {
        name: order_link_loads(
            network,
            orders[name],
            pattern=evaluations[name].pattern,  # type: ignore[arg-type]
            routing=evaluations[name].routing,  # type: ignore[arg-type]
            qps=evaluations[name].qps,
            seeds=evaluations[name].seeds,
            routes=routes if name == AFTER else None,
        )
        for name in (BEFORE, AFTER)
    }
    chosen = {n: orders[n] for n in (BEFORE, AFTER)}
    return PlanView(placement, topology, network, chosen, evaluations, loads, message, steering)


def summary_lines(before: OrderEvaluation, after: OrderEvaluation) -> list[str]:
    """The metrics pod-index order -> ringroute's order, then what the max link load's bound means."""
    from planner import explain_max_link_load, metric_changes

    return [*(change.render() for change in metric_changes(before, after)), explain_max_link_load(after)]


def check_target(path: Path, flag: str, example: str) -> None:
    """Refuse a path that cannot become a file before any work is done."""
    if path.is_dir():
        raise CommandError(f"{flag} {path}: is a directory; give a file name such as {path / example}")
    existing = next(parent for parent in path.absolute().parents if parent.exists())
    if not existing.is_dir():
        raise CommandError(f"{flag} {path}: {existing} is a file, so no directory can be made there")


def write_plot(path: Path, view: PlanView) -> None:
    """Draw both orders' link loads, busiest first, averaged over the seeds rank by rank, so that each line
    starts at the max link load the table and report show; a failed drawing leaves no file behind."""
    from planner import InputError, plot_link_loads

    try:
        # The temporary name keeps the suffix: matplotlib picks the image format from it.
        with staged_file(path, flag="--plot") as temporary:
            plot_link_loads(
                view.loads[BEFORE].ranked(),
                view.loads[AFTER].ranked(),
                temporary,
                bound=view.after.max_link_load_bound,
                title=view.title,
                maxima=(view.before.max_link_load, view.after.max_link_load),
            )
    except InputError as exc:
        raise CommandError(f"--plot {path}: {exc}") from None
    except ValueError as exc:  # matplotlib: an image format it does not know
        raise CommandError(f"--plot {path}: {one_line(str(exc))}; give a .png, .svg or .pdf file name") from None
