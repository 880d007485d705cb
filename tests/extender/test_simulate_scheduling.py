"""`ringroute simulate-scheduling`: the extender packs jobs into fewer leaves than random-feasible placement."""

from __future__ import annotations

import json

import pytest

from webhook.cli import main
from webhook.cli_extender import JobOutcome, simulate, summarise


def run(scheduler: str, leaves_per_pod: int | None = None) -> list[JobOutcome]:
    """16 leaves of 8 servers, half busy; jobs of 8, 12, 16 and 4 servers."""
    return simulate(
        scheduler,
        leaves=16,
        servers_per_leaf=8,
        leaves_per_pod=leaves_per_pod,
        occupancy=0.5,
        job_sizes=[8, 12, 16, 4],
        seed=3,
    )


def test_extender_reaches_the_leaf_bound_on_a_fragmented_two_tier_cluster() -> None:
    outcomes = run("extender")
    assert [o.size for o in outcomes] == [8, 12, 16, 4]
    assert all(o.leaves == o.leaves_bound for o in outcomes)


def test_random_feasible_placement_spans_more_leaves_than_the_extender() -> None:
    default = summarise(run("default"))
    extender = summarise(run("extender"))
    assert extender["mean_leaves"] < default["mean_leaves"]
    assert default["jobs"] == extender["jobs"] == 4


def test_extender_keeps_a_three_tier_job_in_fewer_spine_domains() -> None:
    default = summarise(run("default", 4))
    extender = summarise(run("extender", 4))
    assert extender["mean_spines"] < default["mean_spines"]


def test_every_placed_node_is_used_once() -> None:
    outcomes = run("extender")
    nodes = [n for o in outcomes for n in o.nodes]
    assert len(nodes) == len(set(nodes))


def test_command_prints_job_lines_and_a_summary_per_scheduler(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate-scheduling", "--leaves", "8", "--jobs", "8,4", "--no-plan", "--seed", "1"])
    assert code == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    summaries = [line["summary"] for line in lines if "summary" in line]
    assert summaries == ["default", "extender"]
    assert sum(1 for line in lines if "job" in line) == 4


def test_command_rejects_a_bad_job_list_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate-scheduling", "--jobs", "8,x"]) == 2
    assert "--jobs" in capsys.readouterr().err
