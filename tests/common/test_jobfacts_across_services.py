"""Admission, the controller and the extender read every job alike: the example jobs, the seed job, the odd cases
that once read differently, and generated jobs, each through the real services (admission over HTTP in front of
the emulated API server, the controller reconciling it, the extender decoding the pods Volcano makes of the stored
job), against one reading: `webhook.common.jobfacts.job_facts`."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.controller import fast_settings
from tests.support.jobfacts import (
    FIXTURES,
    Outcome,
    admission_reading,
    facts_reading,
    route_plan_jobs,
    services,
    warn_only,
)
from webhook.common.jobfacts import job_facts

SETTINGS = warn_only(fast_settings())


def assert_one_reading(name: str, submitted: dict[str, Any], outcome: Outcome) -> None:
    expected = facts_reading(job_facts(submitted, SETTINGS))
    assert facts_reading(job_facts(outcome.stored, SETTINGS)) == expected, f"{name}: the mutation changed the facts"
    assert outcome.admission == expected, f"{name}: admission"
    assert outcome.controller == expected, f"{name}: controller"
    assert outcome.extender == expected, f"{name}: extender"


async def test_every_fixture_reads_the_same_in_admission_the_controller_and_the_extender() -> None:
    async with services(SETTINGS) as three:
        outcomes = await three.run(FIXTURES)
    for name, job in FIXTURES.items():
        assert_one_reading(name, job, outcomes[name])


@pytest.mark.parametrize(
    ("name", "route_planned"),
    [
        ("annotated-space-true", True),
        ("annotated-upper-true", True),
        ("env-space-true", True),
        ("limits-only", True),
        ("annotated-yes", False),
        ("init-only", False),
        ("cpu-container-only", False),
        ("cpu-task-only", False),
    ],
)
def test_the_odd_cases_are_read_by_the_one_rule(name: str, route_planned: bool) -> None:
    facts = job_facts(FIXTURES[name], SETTINGS)
    assert facts.route_planned is route_planned
    assert admission_reading(FIXTURES[name], SETTINGS).route_planned is route_planned


def test_a_zero_card_task_is_no_npu_task_for_anyone() -> None:
    facts = job_facts(FIXTURES["zero-cards-task"], SETTINGS)
    assert [t.name for t in facts.npu_tasks] == ["w"]
    assert facts.npu_pods == 3


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(jobs=st.tuples(*(route_plan_jobs(f"gen-{i}") for i in range(6))))
async def test_generated_jobs_read_the_same_in_admission_the_controller_and_the_extender(
    jobs: tuple[dict[str, Any], ...],
) -> None:
    batch = {job["metadata"]["name"]: job for job in jobs}
    async with services(SETTINGS) as three:
        outcomes = await three.run(batch)
    for name, job in batch.items():
        assert_one_reading(name, job, outcomes[name])
