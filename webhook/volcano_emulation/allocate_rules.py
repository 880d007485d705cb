"""Facts of Volcano's allocate action: the candidate cut-off, the node scan, and when the extender is called."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from webhook.extender.volcano_releases import MASTER_RELEASE, normalize_release, release_at_least

# ------------------------------------------------------------------------------------------- the allocate action


def num_feasible_nodes_to_find(
    n_nodes: int,
    release: str = MASTER_RELEASE,
    *,
    percentage: int | None = None,
    minimum: int = 100,
    min_percentage: int = 5,
) -> int:
    """CalculateNumOfFeasibleNodesToFind (pkg/scheduler/util/scheduler_helper.go): how many feasible nodes the
    predicate pass collects before it stops. Flags --percentage-nodes-to-find (default 100 in v1.7/v1.8, 0 =
    adaptive from v1.9), --minimum-feasible-nodes (100), --minimum-percentage-nodes-to-find (5). Adaptive:
    max(50 - n/125, 5) percent, at least 100 nodes."""
    rel = normalize_release(release)
    if percentage is None:
        percentage = 100 if rel in ("1.7", "1.8") else 0
    if n_nodes <= minimum or percentage >= 100:
        return n_nodes
    adaptive = percentage
    if adaptive <= 0:
        adaptive = max(50 - int(n_nodes / 125), min_percentage)
    return max(n_nodes * adaptive // 100, minimum)


def feasible_scan(feasible: Sequence[bool], start: int, to_find: int) -> tuple[list[int], int]:
    """One predicate pass over the session's node list (PredicateNodes): nodes are examined from `start`
    (lastProcessedNodeIndex) round the list until `to_find` feasible ones are found. Returns their indices in
    examination order and the next start index, (start + nodes examined) mod n.

    Sequential model of Volcano's 16 parallel workers, which may examine up to 15 more nodes before the
    cancellation lands; the returned nodes are then the same set but the next start can be further on.
    """
    n = len(feasible)
    found: list[int] = []
    examined = 0
    while examined < n and len(found) < to_find:
        index = (start + examined) % n
        examined += 1
        if feasible[index]:
            found.append(index)
    return found, (start + examined) % n if n else 0


def candidate_lists(release: str) -> tuple[str, ...]:
    """The candidate lists allocate scores in turn; the first list that yields a node wins. v1.7 scores one list
    (nodes whose Idle or FutureIdle fits); v1.8+ score nodes fitting Idle first and FutureIdle
    (Idle + Releasing - Pipelined) only when none does; v1.14+ also split by scheduler shard (soft sharding)."""
    rel = normalize_release(release)
    if rel == "1.7":
        return ("idle_or_future_idle",)
    if not release_at_least(rel, "1.14"):
        return ("idle", "future_idle")
    return ("idle", "idle_other_shards", "future_idle", "future_idle_other_shards")


def prioritize_called(n_candidates: int) -> bool:
    """Volcano scores (and calls prioritize) only when a candidate list holds 2+ nodes; one node is taken as is."""
    return n_candidates >= 2


def predicate_error_cache_key(release: str, job: str, task_role: str) -> str | None:
    """Key under which a failed (task, node) predicate is remembered for the rest of the job's allocate pass, so
    later tasks of the same job and role never ask about that node again; None when the cache is off.

    v1.7 - v1.9: `<job>/<volcano.sh/task-spec>`, always on. v1.10+: `<job>/<TaskRole>`, off when TaskRole is empty
    or the allocate argument predicateErrorCacheEnable is false.
    """
    if not release_at_least(release, "1.10"):
        return f"{job}/{task_role}"
    return f"{job}/{task_role}" if task_role else None


def select_best_node(scores: Mapping[str, float], choice: Callable[[Sequence[str]], str]) -> str | None:
    """SelectBestNode: the highest total score, ties broken at random (`choice`, e.g. `random.Random(0).choice`)."""
    if not scores:
        return None
    best = max(scores.values())
    return choice(sorted(name for name, score in scores.items() if score == best))


@dataclass(frozen=True, slots=True)
class Fact:
    """One scheduler-side fact with its source."""

    topic: str
    releases: str
    statement: str
    source: str


ALLOCATE_FACTS: Final[tuple[Fact, ...]] = (
    Fact(
        "order",
        "1.7-1.16",
        "Resource fit on FutureIdle runs before any plugin predicate; a node a task of the "
        "same job filled earlier in the session fails it and never reaches the extender.",
        "pkg/scheduler/actions/allocate/allocate.go (predicateFn / predicate)",
    ),
    Fact(
        "parallelism",
        "1.7-1.16",
        "Predicates run on 16 goroutines from a rotating start index "
        "(lastProcessedNodeIndex, kept across tasks and sessions) and stop once numNodesToFind nodes passed.",
        "pkg/scheduler/util/predicate_helper.go PredicateNodes",
    ),
    Fact(
        "error cache",
        "1.7-1.16",
        "A failed (task group, node) pair is cached for the job's allocate pass; see "
        "predicate_error_cache_key. v1.10+ also skip further tasks of a role once one found no node "
        "(job.TaskHasFitErrors).",
        "pkg/scheduler/util/predicate_helper.go taskGroupID",
    ),
    Fact(
        "feasible nodes",
        "1.7-1.16",
        "numNodesToFind = num_feasible_nodes_to_find(len(nodes)).",
        "pkg/scheduler/util/scheduler_helper.go CalculateNumOfFeasibleNodesToFind; cmd/scheduler/app/options",
    ),
    Fact(
        "candidates",
        "1.7-1.16",
        "See candidate_lists: prioritize sees only the list being scored.",
        "pkg/scheduler/actions/allocate/allocate.go",
    ),
    Fact(
        "single node",
        "1.7-1.16",
        "A list with one node is used without scoring: no prioritize call.",
        "pkg/scheduler/actions/allocate/allocate.go",
    ),
    Fact(
        "best node",
        "1.7-1.16",
        "Scores of all node-order plugins are summed (extender scores unweighted); the "
        "best total wins, ties at random (rand.Intn).",
        "pkg/scheduler/util/scheduler_helper.go SelectBestNode",
    ),
    Fact(
        "prioritize error",
        "1.7-1.11",
        "A prioritize error (null nodeScore, errorMessage, or a send error "
        "without ignorable) leaves no scores; the nil best node is then dereferenced and vc-scheduler panics.",
        "pkg/scheduler/actions/allocate/allocate.go; pkg/scheduler/util/scheduler_helper.go PrioritizeNodes",
    ),
    Fact(
        "prioritize error",
        "1.12-1.16",
        "Same error: the task is skipped for this session.",
        "pkg/scheduler/actions/allocate/allocate.go allocateResourcesForTasks",
    ),
    Fact(
        "session open",
        "1.7-1.16",
        "onSessionOpen failing without ignorable disables the extender's predicate, "
        "prioritize and event functions for the session.",
        "pkg/scheduler/plugins/extender/extender.go",
    ),
)


__all__ = [
    "ALLOCATE_FACTS",
    "Fact",
    "candidate_lists",
    "feasible_scan",
    "num_feasible_nodes_to_find",
    "predicate_error_cache_key",
    "prioritize_called",
    "select_best_node",
]
