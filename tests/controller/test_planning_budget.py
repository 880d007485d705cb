"""Planning under a budget falls back step by step: pinned routes -> the same plan under ECMP -> the ring order
alone -> pod-index order, and the plan report and a RankTableFallback Warning say which plan was taken and why."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np
import pytest

from emulation.cluster import add_job, make_job, make_pod
from planner import PlanResult, RingOrder, plan_ranks, ring_order
from tests.support.controller import fast_settings, running_controller
from tests.support.placements import make_placement, make_topology, ring_crossings
from webhook.common.settings import PlanningSettings, Settings
from webhook.controller import graded_plan as budget
from webhook.controller.graded_plan import graded_plan, next_level, plan_levels, pod_index_fill
from webhook.controller.isolation import PlanningProcessError

# 12 servers over 4 leaves, scattered in pod-index order: every plan level gives a different order.
TOPOLOGY = make_topology([3, 3, 3, 3])
NODES = [f"n{leaf:03d}-{i:02d}" for i in range(3) for leaf in range(4)]
PLACEMENT = make_placement(NODES)
NODES_OF_JOB = ["npu-0", "npu-8", "npu-16", "npu-24", "npu-1", "npu-9"]
"""Six pods over four leaves of the emulated cluster (8 nodes a leaf)."""


def out_of_memory_when(condition: Callable[..., bool], real: Callable[..., Any]) -> Callable[..., Any]:
    """`real`, raising MemoryError (what RLIMIT_DATA gives an allocation past the limit) when `condition` holds."""

    def patched(*args: Any, **kwargs: Any) -> Any:
        if condition(*args, **kwargs):
            raise MemoryError
        return real(*args, **kwargs)

    return patched


def pinned(*args: Any, **_kwargs: Any) -> bool:
    return bool(args[3] == "pinned")


def always(*_args: Any, **_kwargs: Any) -> bool:
    return True


def graded(fixed_ranks: dict[int, int] | None = None, **kwargs: Any) -> budget.GradedPlan:
    request = budget.PlanRequest(
        PLACEMENT,
        TOPOLOGY,
        PlanningSettings(pattern="mixed", routing="pinned"),
        fixed_ranks=tuple(sorted((fixed_ranks or {}).items())),
    )
    return graded_plan(request, memory_limit="the 1 MiB", **kwargs)


def test_the_levels_go_from_the_requested_plan_to_pod_index_order() -> None:
    assert plan_levels("pinned") == ("as-requested", "unpinned", "ring-order", "pod-index")
    assert plan_levels("ecmp") == ("as-requested", "ring-order", "pod-index"), "nothing to unpin"
    assert [next_level(level, "pinned") for level in plan_levels("pinned")] == [
        "unpinned",
        "ring-order",
        "pod-index",
        "pod-index",
    ]
    assert next_level("as-requested", "slice") == "ring-order"


def test_within_budget_the_plan_is_the_one_requested_and_says_so() -> None:
    plan = graded()
    assert (plan.level, plan.fallback) == ("as-requested", None)
    assert plan.result is not None
    assert plan.result.routes is not None
    report = plan.report(PLACEMENT)
    assert (report["plan_level"], report["fallback"], report["routing"]) == ("as-requested", None, "pinned")


def test_pinned_routes_out_of_memory_fall_back_to_the_same_plan_under_ecmp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "plan_ranks", out_of_memory_when(pinned, plan_ranks))
    plan = graded()
    assert plan.level == "unpinned"
    assert plan.result is not None
    assert plan.result.routing == "ecmp"
    assert plan.result.routes is None
    assert plan.result.order == plan_ranks(PLACEMENT, TOPOLOGY, "mixed", "ecmp", rng=0).order
    assert plan.fallback is not None
    assert plan.fallback.reasons == ("mixed/pinned plan: needed more than the 1 MiB",)
    assert plan.fallback.message == (
        "planned with the same plan without pinned routes (ECMP) instead of the mixed/pinned plan: "
        "mixed/pinned plan: needed more than the 1 MiB"
    )
    report = plan.report(PLACEMENT)
    assert report["plan_level"] == "unpinned"
    assert report["routing"] == "ecmp"
    assert report["fallback"] == {
        "plan": "unpinned",
        "requested": "mixed/pinned",
        "reasons": ["mixed/pinned plan: needed more than the 1 MiB"],
        "message": plan.fallback.message,
    }
    assert "after" in report, "the planner's own report, metrics included"


def test_a_plan_out_of_memory_under_ecmp_too_falls_back_to_the_ring_order_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(budget, "plan_ranks", out_of_memory_when(always, plan_ranks))
    plan = graded()
    assert plan.level == "ring-order"
    assert plan.result is None
    assert plan.ring is not None
    assert plan.order[0] == PLACEMENT.master
    codes = np.array([[int(TOPOLOGY.paths[n][0].split("-")[1])] for n in NODES])
    assert ring_crossings(codes, plan.order) == [4], "every ring edge crossing a leaf is one the bound needs"
    assert plan.fallback is not None
    assert plan.fallback.reasons == (
        "mixed/pinned plan: needed more than the 1 MiB",
        "mixed/ecmp plan: needed more than the 1 MiB",
    )
    report = plan.report(PLACEMENT)
    assert report["plan_level"] == "ring-order"
    assert report["after"] == {"order": "ring-order", "cross_edges": [4], "cross_edge_bounds": [4]}
    assert report["order"] == [PLACEMENT.servers[i].pod_name for i in plan.order]
    assert report["fallback"]["message"].startswith("planned with the ring order alone (no search, simulation")


def test_the_ring_order_alone_out_of_memory_falls_back_to_pod_index_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "plan_ranks", out_of_memory_when(always, plan_ranks))
    monkeypatch.setattr(budget, "ring_order", out_of_memory_when(always, ring_order))
    plan = graded(fixed_ranks={5: 3})
    assert plan.level == "pod-index"
    assert plan.result is None
    assert plan.ring is None
    assert plan.order == (0, 1, 2, 5, 3, 4, 6, 7, 8, 9, 10, 11), "survivors keep their ranks"
    assert plan.fallback is not None
    assert plan.fallback.reasons[-1] == "ring order alone: needed more than the 1 MiB"
    assert plan.report(PLACEMENT)["after"] == {"order": "pod-index"}


def test_a_caller_that_gave_up_levels_starts_at_the_next_one_with_its_reasons() -> None:
    plan = graded(start="ring-order", reasons=("mixed/pinned plan: took longer than 60 s",))
    assert plan.level == "ring-order"
    assert plan.fallback is not None
    assert plan.fallback.reasons == ("mixed/pinned plan: took longer than 60 s",)


def test_the_ring_order_alone_keeps_rank_zero_and_survivors() -> None:
    alone: RingOrder = ring_order(PLACEMENT, TOPOLOGY, fixed_ranks={7: 2})
    assert alone.order[0] == 0
    assert alone.order[2] == 7
    assert sorted(alone.order) == list(range(12))
    unconstrained = ring_order(PLACEMENT, TOPOLOGY)
    assert unconstrained.meets_bounds
    assert unconstrained.cross_edges == (4,)


def test_pod_index_fill_keeps_the_master_first() -> None:
    shifted = make_placement(NODES[:4], master=2)
    assert pod_index_fill(shifted, {}) == (2, 0, 1, 3)
    assert pod_index_fill(shifted, {3: 1}) == (2, 3, 0, 1)


# -- through the controller and the emulated API server -------------------------------------------------------------


def pinned_settings(**controller: Any) -> Settings:
    settings = fast_settings(**controller)
    return msgspec.structs.replace(settings, planning=PlanningSettings(pattern="mixed", routing="pinned"))


async def start_job(h: Any, name: str) -> None:
    job = make_job(name, len(NODES_OF_JOB))
    await add_job(h.server, job)
    for i, node in enumerate(NODES_OF_JOB):
        await h.server.apply("pods", make_pod(job, i, node))
    await h.wait_status(name, "completed", timeout_s=30)


async def test_the_controller_writes_the_unpinned_plan_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "plan_ranks", out_of_memory_when(pinned, plan_ranks))
    async with running_controller(settings=pinned_settings()) as h:
        await start_job(h, "budget")
        data = h.data("budget")
        report = json.loads(data["ringroute-plan.json"])
        assert (report["plan_level"], report["routing"]) == ("unpinned", "ecmp")
        assert report["fallback"]["reasons"] == ["mixed/pinned plan: needed more than the memory available"]
        assert "routes.json" not in data, "no pinned routes"
        [fallback] = await h.wait_events("RankTableFallback")
        assert fallback["type"] == "Warning"
        assert fallback["message"] == report["fallback"]["message"]
        [completed] = await h.wait_events("RankTableCompleted")
        assert completed["message"].endswith(
            "; the same plan without pinned routes (ECMP): see the RankTableFallback event"
        )
        assert not h.events("RankTableFailed")


async def test_the_controller_writes_the_ring_order_alone_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "plan_ranks", out_of_memory_when(always, plan_ranks))
    async with running_controller(settings=pinned_settings()) as h:
        await start_job(h, "ringonly")
        report = json.loads(h.data("ringonly")["ringroute-plan.json"])
        assert report["plan_level"] == "ring-order"
        assert report["after"]["cross_edges"] == report["after"]["cross_edge_bounds"] == [4]
        assert h.ranks("ringonly")["ringonly-worker-0"] == 0
        [fallback] = await h.wait_events("RankTableFallback")
        assert "planned with the ring order alone" in fallback["message"]
        assert "mixed/ecmp plan: needed more than the memory available" in fallback["message"]
        [completed] = await h.wait_events("RankTableCompleted")
        assert (
            "ranks in the ring order alone (cross-leaf ring edges 4, bound 4), over the planning budget"
            in (completed["message"])
        )
        assert h.metrics.registry.get_sample_value("ringroute_plans_total", {"outcome": "ring-order"}) == 1


class _StoppedAtTheTimeLimit:
    """A planning process whose pinned plan is stopped at the time limit; the cheaper levels run in a thread."""

    memory_limit_mib = 512

    def __init__(self) -> None:
        self.levels: list[str] = []

    async def call(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self.levels.append(kwargs["start"])
        if kwargs["start"] == "as-requested":
            raise PlanningProcessError("planning took longer than 60 s (controller.planningTimeoutS)")
        return await asyncio.to_thread(function, *args, **kwargs)

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass


async def test_a_plan_stopped_at_the_time_limit_is_retried_one_level_down() -> None:
    async with running_controller(settings=pinned_settings()) as h:
        worker = _StoppedAtTheTimeLimit()
        h.controller.tables.process = worker  # type: ignore[assignment]
        await start_job(h, "timed")
        assert worker.levels[0] == "as-requested"
        assert set(worker.levels[1:]) == {"unpinned"}, "a level stopped for these pods is not tried again"
        report = json.loads(h.data("timed")["ringroute-plan.json"])
        assert report["plan_level"] == "unpinned"
        assert report["fallback"]["reasons"] == [
            "mixed/pinned plan: planning took longer than 60 s (controller.planningTimeoutS)"
        ]
        [fallback] = await h.wait_events("RankTableFallback")
        assert fallback["message"] == report["fallback"]["message"]


def test_the_planner_result_is_unchanged_within_budget() -> None:
    plan = graded()
    assert isinstance(plan.result, PlanResult)
    assert plan.order == plan_ranks(PLACEMENT, TOPOLOGY, "mixed", "pinned", rng=0).order
