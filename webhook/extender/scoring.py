"""Predicate and prioritize decisions of the Volcano scheduler extender (no HTTP here).

Only tasks whose pod carries the `ring-controller.cce` label of a known accelerator profile are judged; every
other task passes every node and gets no scores.

A route-planned job whose PodGroup has a hard `networkTopology` (Volcano 1.12+) is planned within one domain of
its tier (the leaves under one tier-N label value), so the plan lies inside one of the HyperNodes Volcano may
choose and Volcano's trial of that HyperNode succeeds; when no node's labels name the domains of that tier, the
extender stays out of the job (every node fits, no scores) and Volcano places it alone.

- predicate: a route-planned task (`webhook.common.jobfacts`: `ROUTE_PLAN=true` on its NPU container, or the pod
  annotation `ringroute.io/route-plan: "true"`) fits a node only when every NPU card of the profile's resource on
  it is free ("free" is Volcano's future idle: Idle + Releasing - Pipelined). While the job's gang plan is
  enforced (exact session data from onSessionOpen), nodes outside the planned leaves are refused too: Volcano
  offers prioritize only a share of the feasible nodes on clusters of over 100 nodes, so scores alone could not
  reach the planned leaves.
- prioritize, before `extender.scoreWeight` (default 100, so one point here is 100 of Volcano's points and every
  step below outweighs the at most 350 points nodeorder and binpack add at their default weights):
  - 90 and up: nodes of the job's gang plan, 5 more per leaf that is to be filled earlier (leaves the job already
    uses first, then leaves the plan empties, the one leaf it uses partly last), so Volcano's task-by-task greedy
    allocation follows the plan leaf after leaf;
  - otherwise leaf tiers, best first: 75-85 the leaf already hosting the job; 50-70 a leaf with room for the
    rest of the job, tightest fit highest (+5 under a spine domain hosting the job); 30-45 a leaf under a spine
    domain hosting the job; 0-25 any other leaf (+10 when its spine domain has room for the rest of the job);
    0 for nodes without topology labels.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat

from webhook.extender.fit import TaskView, node_cards
from webhook.extender.node_paths import Path
from webhook.extender.state import ExtenderState, JobPlan
from webhook.extender.wire import (
    CODE_SUCCESS,
    CODE_UNSCHEDULABLE,
    CODE_UNSCHEDULABLE_AND_UNRESOLVABLE,
    NodeInfo,
    NodeName,
    NodeView,
)

PLAN_BASE = 90.0
"""Score of a planned node before its leaf-order bonus (PLAN_LEAF_STEP per leaf filled earlier)."""
SAME_LEAF = (75.0, 10.0)
LEAF_WITH_ROOM = (50.0, 15.0)
SAME_SPINE_BONUS = 5.0
SAME_SPINE = (30.0, 15.0)
OTHER = (0.0, 15.0)
OTHER_SPINE_ROOM_BONUS = 10.0


@dataclass(frozen=True, slots=True)
class Verdict:
    """A predicate decision: code 0 (Success) with an empty reason passes the node."""

    code: int
    reason: str = ""

    @property
    def passes(self) -> bool:
        """Whether the node fits."""
        return self.code == CODE_SUCCESS


FITS = Verdict(CODE_SUCCESS)


def predicate(task: TaskView, node: NodeInfo, state: ExtenderState) -> Verdict:
    """Whole free nodes for route-planned ringroute tasks, inside the job's enforced plan; every other task fits."""
    if task.profile is None:
        return FITS
    state.observe((node,), task)
    if not task.route_planned:
        return FITS
    if state.left_to_volcano(task):
        state.plan_for(task)  # records (and logs, once a session) why the extender stays out
        return FITS
    name = node.Name
    resource = task.profile.resource_name
    who = task.job or task.name
    cards = node_cards(node, task)
    if cards.total <= 0:
        return Verdict(
            CODE_UNSCHEDULABLE_AND_UNRESOLVABLE,
            f"node {name} has no {resource} cards; route-planned job {who} needs whole NPU nodes",
        )
    if cards.free < cards.total:
        return Verdict(
            CODE_UNSCHEDULABLE,
            f"node {name} has {cards.free} of {cards.total} {resource} free; route-planned job {who} takes whole "
            f"nodes only (all {cards.total} cards free)",
        )
    # Without session data the first calls come before the extender has seen the candidates: plan in prioritize.
    plan = state.plan_for(task, create=state.session_data)
    if plan is not None and plan.enforced and name not in plan.allowed:
        leaves = ", ".join(plan.plan.leaves[:6]) + (", ..." if len(plan.plan.leaves) > 6 else "")
        path = state.path_of(name, node)
        where = f"leaf {path[0]}" if path else "no leaf label"
        return Verdict(
            CODE_UNSCHEDULABLE,
            f"node {name} ({where}) is outside the leaves ringroute planned for route-planned job {who}: {leaves} "
            f"(the fewest leaves that hold its {plan.plan.need} pending pods)",
        )
    return FITS


def prioritize(
    task: TaskView,
    nodes: Sequence[NodeName],
    state: ExtenderState,
    *,
    names_only: bool = False,
    path_ids: Sequence[int] | None = None,
    names: Sequence[str] | None = None,
) -> dict[str, float]:
    """Scores per node name for a judged task (weighted by `extender.scoreWeight`); empty for any other task.

    `nodes` are NodeViews (their labels give the topology), or, while a session's cache is known, bare names
    whose topology comes from the session or `path_ids` (numbers in `state.path_table`; `names_only` says so
    without looking at each). Volcano offers prioritize only nodes whose future idle fits the task (for a
    route-planned task: every card free), so each candidate counts as room under its leaf. Scores are computed
    per path and spread to the candidates by path number with C-level loops: at 10,000 candidates Python-level
    work per node would be a third of the call.
    """
    if task.profile is None:
        return {}
    if task.route_planned and state.left_to_volcano(task):
        state.plan_for(task)
        return {}
    views = [] if names_only else [n for n in nodes if isinstance(n, NodeView)]
    if views and not state.session_data:
        # Without onSessionOpen the candidates are the freshest view of the nodes the extender gets.
        state.observe(views, task)
    if names is None:
        names = [info.Name for info in nodes]
    table = state.path_table
    if path_ids is not None:
        ids = list(path_ids)
    elif views:
        read_path, number_of = state.read_path, table.number
        ids = [number_of(read_path(_labels(info))) if isinstance(info, NodeView) else 0 for info in nodes]
    else:
        # Names only (the session's cache has the labels): the lookups and counts below run in C.
        ids = list(map(state.session_path_ids.get, names, repeat(0)))
    counts = Counter(ids)
    paths = {number: table.paths[number] for number in counts}
    room: dict[str, int] = {}
    spine_room: dict[str, int] = {}
    for number, count in counts.items():
        path = paths[number]
        if path:
            room[path[0]] = room.get(path[0], 0) + count
            if len(path) > 1:
                spine_room[path[1]] = spine_room.get(path[1], 0) + count
    weight = state.settings.extender.score_weight
    weighted = [0.0] * len(table)
    for number, score in _leaf_scores(task, state, paths, room=room, spine_room=spine_room).items():
        weighted[number] = weight * score
    scores = dict(zip(names, map(weighted.__getitem__, ids), strict=True))
    plan = state.plan_for(task)
    if plan is not None:
        plan_score = weight * PLAN_BASE
        for name, bonus in plan.bonus.items():
            if name in scores:
                scores[name] = plan_score + weight * bonus
    return scores


def _labels(info: NodeView) -> Mapping[str, str] | None:
    meta = info.Node.metadata if info.Node is not None else None
    return meta.labels if meta is not None else None


def _leaf_scores(
    task: TaskView,
    state: ExtenderState,
    paths: Mapping[int, Path | None],
    *,
    room: Mapping[str, int],
    spine_room: Mapping[str, int],
) -> dict[int, float]:
    """Leaf-tier score (0-85) per path number (a node without topology labels: 0)."""
    hosted_leaves: dict[str, int] = {}
    hosted_spines: dict[str, int] = {}
    for node_name, count in state.hosted_nodes(task).items():
        path = state.path_of(node_name)
        if not path:
            continue
        hosted_leaves[path[0]] = hosted_leaves.get(path[0], 0) + count
        if len(path) > 1:
            hosted_spines[path[1]] = hosted_spines.get(path[1], 0) + count
    need = _remaining(task, state, sum(hosted_leaves.values()))
    max_room = max(room.values(), default=1) or 1
    max_hosted = max(hosted_leaves.values(), default=1) or 1
    scores: dict[int, float] = {}
    for number, path in paths.items():
        scores[number] = (
            _leaf_score(
                path,
                room=room,
                spine_room=spine_room,
                hosted_leaves=hosted_leaves,
                hosted_spines=hosted_spines,
                need=need,
                max_room=max_room,
                max_hosted=max_hosted,
            )
            if path
            else 0.0
        )
    return scores


def _remaining(task: TaskView, state: ExtenderState, hosted: int) -> int | None:
    """Tasks of the job still to place, this one included (None when the size is unknown)."""
    facts = state.session_job(task.job)
    if facts is not None:
        return max(1, facts.pending)
    if task.npu_pods is not None:
        return max(1, task.npu_pods - hosted)
    return None


def _leaf_score(
    path: Path,
    *,
    room: Mapping[str, int],
    spine_room: Mapping[str, int],
    hosted_leaves: Mapping[str, int],
    hosted_spines: Mapping[str, int],
    need: int | None,
    max_room: int,
    max_hosted: int,
) -> float:
    leaf = path[0]
    spine = path[1] if len(path) > 1 else None
    leaf_room = room.get(leaf, 0)
    hosted = hosted_leaves.get(leaf, 0)
    if hosted:
        base, span = SAME_LEAF
        score = base + span * hosted / max_hosted
    elif need is not None and leaf_room >= need:
        base, span = LEAF_WITH_ROOM
        slack = leaf_room - need
        score = base + span * (1.0 - slack / (max_room - need + 1))
        if spine is not None and hosted_spines.get(spine):
            score += SAME_SPINE_BONUS
    elif spine is not None and hosted_spines.get(spine):
        base, span = SAME_SPINE
        score = base + span * leaf_room / max_room
    else:
        base, span = OTHER
        score = base + span * leaf_room / max_room
        if need is not None and spine is not None and spine_room.get(spine, 0) >= need:
            score += OTHER_SPINE_ROOM_BONUS
    return round(score, 3)


def plan_summary(plan: JobPlan) -> str:
    """One log line's worth of a plan."""
    gang = plan.plan
    return (
        f"job={plan.job} need={gang.need} leaves={','.join(gang.leaves)} leaves_bound={gang.leaves_bound} "
        f"spines={len(gang.spines)} slack={gang.slack} enforced={str(plan.enforced).lower()}"
    )


__all__ = ["FITS", "PLAN_BASE", "Verdict", "plan_summary", "predicate", "prioritize"]
