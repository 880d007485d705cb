"""`ringroute plan` under a planning budget (--memory-limit, --planning-timeout), as the controller plans: past a
limit the next cheaper plan is written, and the plan report and the output say which one and why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planner import parse_ranks_env, plan_ranks
from webhook.cli.main import main
from webhook.controller import graded_plan as budget
from webhook.controller import isolation

ROOT = Path(__file__).resolve().parents[2]
PODS = ROOT / "examples" / "pods" / "llm-pretrain-pods.yaml"
NODES = ROOT / "examples" / "topologies" / "nodes-16.yaml"


def run_plan(out: Path, *extra: str) -> int:
    return main(["plan", "--pods", str(PODS), "--nodes", str(NODES), *extra, "--out-dir", str(out)])


def report(out: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((out / "ringroute-plan.json").read_text(encoding="utf-8"))
    return loaded


def test_within_budget_the_requested_plan_is_written(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run_plan(out, "--routing", "pinned", "--memory-limit", "1024", "--planning-timeout", "120") == 0
    written = report(out)
    assert written["plan_level"] == "as-requested"
    assert written["fallback"] is None
    assert (out / "routes.json").exists()


def test_pinned_routes_out_of_memory_write_the_plan_under_ecmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def plan_unless_pinned(*args: Any, **kwargs: Any) -> Any:
        if args[3] == "pinned":
            raise MemoryError
        return plan_ranks(*args, **kwargs)

    monkeypatch.setattr(budget, "plan_ranks", plan_unless_pinned)
    out = tmp_path / "out"
    assert run_plan(out, "--routing", "pinned", "--pattern", "mixed") == 0
    written = report(out)
    assert written["plan_level"] == "unpinned"
    assert written["routing"] == "ecmp"
    assert written["fallback"]["reasons"] == ["mixed/pinned plan: needed more than the memory available"]
    assert not (out / "routes.json").exists()
    printed = capsys.readouterr().out
    assert "under ecmp routing" in printed
    assert (
        "  fallback: planned with the same plan without pinned routes (ECMP) instead of the mixed/pinned plan"
        in printed
    )


class _SlowPlanningProcess(isolation.PlanningProcess):
    """The planning process with every level taking 50 ms (tests/controller/slow_planner.py)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs["preload"] = (*kwargs.get("preload", ()), "tests.controller.slow_planner")
        super().__init__(**kwargs)


def test_every_level_past_the_time_limit_writes_pod_index_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(isolation, "PlanningProcess", _SlowPlanningProcess)
    out = tmp_path / "out"
    assert run_plan(out, "--routing", "pinned", "--planning-timeout", "0.01") == 0
    written = report(out)
    assert written["plan_level"] == "pod-index"
    stopped = "planning took longer than 0.01 s (--planning-timeout); its process was stopped"
    assert written["fallback"]["reasons"] == [
        f"ring/pinned plan: {stopped}",
        f"ring/ecmp plan: {stopped}",
        f"ring order alone: {stopped}",
    ]
    ranks = parse_ranks_env((out / "ranks.env").read_text(encoding="utf-8"))
    assert ranks == {f"llm-pretrain-worker-{i}": i for i in range(12)}
    assert "fallback: planned with pod-index order" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--memory-limit", "100", "--memory-limit 100: give at least 192 MiB"),
        ("--planning-timeout", "0", "--planning-timeout 0.0: must be a positive number of seconds"),
        ("--planning-timeout", "nan", "--planning-timeout nan: must be a positive number of seconds"),
    ],
)
def test_a_bad_budget_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, message: str
) -> None:
    assert run_plan(tmp_path / "out", flag, value) == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
