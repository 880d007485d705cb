"""Volcano's default nodeorder and binpack scores (`webhook.volcano_emulation.default_scores`)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook import volcano_emulation as volcano

# ------------------------------------------------------------------------------------ default scores and allocate


def _npu_input(**overrides: Any) -> volcano.ScoringInput:
    values: dict[str, Any] = {
        "task_cpu_milli": 176_000,
        "task_memory": 1400 * 2**30,
        "node_cpu_allocatable_milli": 190_000,
        "node_memory_allocatable": 1512 * 2**30,
    }
    values.update(overrides)
    return volcano.ScoringInput(**values)


def test_least_allocated_on_an_empty_npu_node_is_hand_computed() -> None:
    # cpu: (190000 - 176000) * 100 // 190000 = 7; memory: (1512 - 1400) * 100 // 1512 = 7; (7*50 + 7*50) // 100
    assert volcano.least_allocated_score(_npu_input()) == 7
    # BestEffort kube-proxy counts 100m / 200 MiB in NonZeroRequested.
    busy = _npu_input(node_cpu_nonzero_requested_milli=10_100, node_memory_nonzero_requested=200 * 2**20)
    assert volcano.least_allocated_score(busy) == (1 * 50 + 7 * 50) // 100


def test_balanced_allocation_is_one_minus_half_the_fraction_gap() -> None:
    # fractions 176/190 = 0.92632 and 1400/1512 = 0.92593: std 0.0002, int(99.98) truncates to 99
    assert volcano.balanced_allocation_score(_npu_input()) == 99
    # cpu 95000/190000 = 0.5, memory 0: std 0.25 -> 75
    lopsided = _npu_input(task_cpu_milli=95_000, task_memory=0)
    assert volcano.balanced_allocation_score(lopsided) == 75


def test_image_locality_scores_a_present_training_image_at_the_maximum_and_a_missing_one_at_zero() -> None:
    present = _npu_input(task_images_on_node=[(24 * 2**30, 500)], total_nodes=1000)
    assert volcano.image_locality_score(present) == 100
    assert volcano.image_locality_score(_npu_input()) == 0
    # 600 MiB on 60 % of nodes: 360 MiB -> 100 * (360 - 23) // (1000 - 23) = 34
    partial = _npu_input(task_images_on_node=[(600 * 2**20, 600)], total_nodes=1000)
    assert volcano.image_locality_score(partial) == 34


def test_binpack_averages_cpu_and_memory_fill_and_zeroes_overflow_from_v1_8() -> None:
    inp = _npu_input(node_cpu_requested_milli=9_500, node_memory_requested=0)
    # cpu (9500 + 176000) / 190000 = 0.976..., memory 1400/1512 = 0.9259...
    expected = ((185_500 / 190_000) + (1400 / 1512)) / 2 * 100
    assert volcano.binpack_score(inp) == pytest.approx(expected)
    overflow = _npu_input(node_cpu_requested_milli=20_000)
    assert volcano.binpack_score(overflow, "1.8") == 0.0
    assert volcano.binpack_score(overflow, "1.7") == pytest.approx((1400 / 1512) / 2 * 100)


def test_default_node_scores_apply_the_release_weights_and_v1_14_loses_image_locality() -> None:
    inp = _npu_input(task_images_on_node=[(24 * 2**30, 1000)], total_nodes=1000)
    scores = volcano.default_node_scores("1.13", inp)
    assert scores["nodeorder.imagelocality"] == 100.0
    assert scores["total"] == pytest.approx(sum(v for k, v in scores.items() if k != "total"))
    assert volcano.default_node_scores("1.14", inp)["nodeorder.imagelocality"] == 0.0
    assert "binpack" not in volcano.default_node_scores("1.13", inp, binpack=False)


@given(
    cpu_used=st.integers(0, 190_000),
    mem_used=st.integers(0, 1512 * 2**30),
    cpu_req=st.integers(1, 190_000),
    mem_req=st.integers(1, 1512 * 2**30),
)
def test_least_requested_and_binpack_together_stay_within_two_points(
    cpu_used: int, mem_used: int, cpu_req: int, mem_req: int
) -> None:
    inp = volcano.ScoringInput(
        task_cpu_milli=cpu_req,
        task_memory=mem_req,
        node_cpu_allocatable_milli=190_000,
        node_memory_allocatable=1512 * 2**30,
        node_cpu_requested_milli=cpu_used,
        node_memory_requested=mem_used,
    )
    if cpu_used + cpu_req > 190_000 or mem_used + mem_req > 1512 * 2**30:
        return  # not a candidate: resource fit fails first
    total = volcano.least_allocated_score(inp) + volcano.binpack_score(inp)
    assert 98.0 < total <= 100.0 + 1e-9


def test_max_score_spread_sums_plugin_ranges_and_the_coupled_bound() -> None:
    spread = volcano.max_score_spread("1.16")
    assert spread.independent == 350.0  # 100 least + 50 balanced + 100 image + 100 binpack
    assert spread.coupled == 152.0  # least + binpack within 2, + 50 + 100
    assert spread.conditional["nodeorder.tainttoleration"] == 300.0
    assert volcano.max_score_spread("1.7").conditional["nodeorder.tainttoleration"] == 100.0
    assert volcano.max_score_spread("1.14").independent == 250.0
    assert volcano.max_score_spread("1.13", binpack=False).independent == 250.0
