"""Jobs with a hard spec.networkTopology: the extender plans them within one domain of their tier (so the plan lies
inside a HyperNode Volcano may choose), or, where the node labels do not name that tier's domains, stays out of
them entirely; its logs and metrics name the real reason."""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest

from emulation import volcano_payloads as payloads
from tests.support.extender import decoded_node, decoded_session, decoded_task, job, leaf_spine, node, session_open, tor
from webhook.common.metrics import Metrics
from webhook.common.settings import Settings
from webhook.extender.app import ExtenderService
from webhook.extender.scoring import predicate, prioritize
from webhook.extender.state import ExtenderState, TierLimit
from webhook.extender.wire import JobInfo, SessionOpenRequest


def with_topology(body: dict[str, Any], job_id: str, topology: dict[str, Any]) -> dict[str, Any]:
    body["Jobs"][job_id]["PodGroup"]["spec"]["networkTopology"] = topology
    return body


def three_tier(free: dict[str, int], spine_of: dict[str, str]) -> list[dict[str, Any]]:
    """Four nodes per leaf, `free[leaf]` of them free, leaf and spine labels."""
    nodes = []
    for leaf, count in free.items():
        for i in range(4):
            nodes.append(node(f"{leaf}-{i}", leaf_spine(leaf, spine_of[leaf]), busy=i >= count))
    return nodes


def opened(body: dict[str, Any]) -> ExtenderState:
    state = ExtenderState(Settings())
    state.open_session(decoded_session(body))
    return state


def test_a_hard_tier_one_job_is_planned_onto_the_single_leaf_that_fits_it_best() -> None:
    four = job("four", 4)
    nodes = [
        node(f"{leaf}-{i}", tor(leaf), busy=i >= free)
        for leaf, free in (("A", 4), ("B", 3), ("C", 4))
        for i in range(5)
    ]
    body = with_topology(session_open([four], nodes), four.job_id, {"mode": "hard", "highestTierAllowed": 1})
    state = opened(body)
    plan = state.plan_for(decoded_task(four.tasks[0]))
    assert plan is not None
    assert plan.plan.leaves == ("A",)  # B is too small; A and C fit exactly (slack 0): the first by name
    assert plan.enforced
    outside = decoded_node(next(n for n in nodes if n["Name"] == "C-0"))
    assert not predicate(decoded_task(four.tasks[0]), outside, state).passes


def test_a_hard_tier_two_job_stays_within_one_spine_even_where_two_spines_would_take_fewer_leaves() -> None:
    six = job("six", 6)
    spine_of = {"a1": "S1", "a2": "S1", "a3": "S1", "b1": "S2", "b2": "S2"}
    nodes = three_tier({"a1": 2, "a2": 2, "a3": 2, "b1": 4, "b2": 1}, spine_of)
    body = session_open([six], nodes)
    free_plan = opened(body).plan_for(decoded_task(six.tasks[0]))
    assert free_plan is not None
    assert free_plan.plan.leaves == ("a1", "b1")  # without a tier: the fewest leaves, across spines
    state = opened(with_topology(session_open([six], nodes), six.job_id, {"mode": "hard", "highestTierAllowed": 2}))
    plan = state.plan_for(decoded_task(six.tasks[0]))
    assert plan is not None
    assert plan.plan.leaves == ("a1", "a2", "a3")
    assert plan.plan.spines == ("S1",)
    assert {n.split("-")[0] for n in plan.allowed} == {"a1", "a2", "a3"}


def test_where_labels_do_not_name_the_tier_the_extender_stays_out_and_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    six = job("six", 6)
    nodes = [
        node(f"{leaf}-{i}", tor(leaf), busy=i >= free)
        for leaf, free in (("A", 2), ("B", 4), ("C", 4))
        for i in range(4)
    ]
    body = with_topology(session_open([six], nodes), six.job_id, {"mode": "hard", "highestTierAllowed": 2})
    metrics = Metrics()
    service = ExtenderService(Settings(), metrics)
    service.session_open(orjson.dumps(body))
    task = six.tasks[0]
    busy = next(n for n in nodes if n["Name"] == "A-3")
    with caplog.at_level(logging.INFO, logger="webhook.extender.app"):
        _, outcome = service.predicate(orjson.dumps({"task": task, "node": busy}))
        scores, scored = service.prioritize(orjson.dumps({"task": task, "nodes": nodes}))
    assert outcome == "fit"
    assert (scores, scored) == ({"nodeScore": {}, "errorMessage": ""}, "neutral")
    assert service.state.left_to_volcano(decoded_task(task))
    lines = [r.getMessage() for r in caplog.records if "extender_gang_unplanned" in r.getMessage()]
    assert len(lines) == 1  # once a session
    assert "reason=left_to_volcano" in lines[0]
    assert "hard networkTopology at tier 2" in lines[0]
    assert metrics.extender_gang_plans.labels("left_to_volcano")._value.get() == 1
    assert metrics.extender_gang_plans.labels("no_fit")._value.get() == 0


def test_a_tier_no_domain_of_which_holds_the_job_is_no_fit_within_that_tier(caplog: pytest.LogCaptureFixture) -> None:
    six = job("six", 6)
    nodes = [node(f"{leaf}-{i}", tor(leaf)) for leaf in ("A", "B") for i in range(4)]
    body = with_topology(session_open([six], nodes), six.job_id, {"mode": "hard", "highestTierAllowed": 1})
    metrics = Metrics()
    service = ExtenderService(Settings(), metrics)
    service.session_open(orjson.dumps(body))
    with caplog.at_level(logging.INFO, logger="webhook.extender.app"):
        service.predicate(orjson.dumps({"task": six.tasks[0], "node": nodes[0]}))
    assert metrics.extender_gang_plans.labels("no_fit")._value.get() == 1
    assert any(
        "reason=no_fit" in r.getMessage() and "within one tier-1 domain" in r.getMessage() for r in caplog.records
    )


def test_a_job_without_network_topology_on_unlabelled_nodes_is_no_topology_not_no_fit() -> None:
    six = job("six", 6)
    nodes = [node(f"n{i}", {}) for i in range(8)]
    metrics = Metrics()
    service = ExtenderService(Settings(), metrics)
    service.session_open(orjson.dumps(session_open([six], nodes)))
    service.predicate(orjson.dumps({"task": six.tasks[0], "node": nodes[0]}))
    assert metrics.extender_gang_plans.labels("no_topology")._value.get() == 1


@pytest.mark.parametrize(
    ("topology", "expected"),
    [
        ({"mode": "soft", "highestTierAllowed": 1}, None),  # a preference: planned like any job
        ({"mode": "hard"}, None),  # no tier: vc-scheduler does not treat it as hard
        ({"highestTierAllowed": 2}, TierLimit(2)),  # hard is the CRD's default mode
        ({"mode": "hard", "highestTierName": "spine"}, TierLimit(None, "spine")),
    ],
)
def test_the_hard_tier_is_read_as_vc_scheduler_reads_it(topology: dict[str, Any], expected: TierLimit | None) -> None:
    six = job("six", 6)
    body = with_topology(session_open([six], [node("n", tor("A"))]), six.job_id, topology)
    facts = opened(body).session_job(six.job_id)
    assert facts is not None
    assert facts.hard_tier == expected


@pytest.mark.parametrize("release", ["1.12", "1.13", "1.14", "1.15"])
def test_the_network_topology_of_every_releases_job_info_is_read(release: str) -> None:
    uid = payloads.stable_uid("job", "team-a", "gpt")
    tasks = [
        payloads.task_info(
            payloads.volcano_job_pod("gpt", i, namespace="team-a", job_uid=uid, release=release), release=release
        )
        for i in range(2)
    ]
    info = payloads.job_info(
        tasks,
        pod_group_name=f"gpt-{uid}",
        namespace="team-a",
        min_task_member={"worker": 2},
        owner_job=("gpt", uid),
        network_topology={"mode": "hard", "highestTierAllowed": 2},
        release=release,
    )
    decoded = SessionOpenRequest(Jobs={"j": orjson_roundtrip(info)}).Jobs
    assert decoded is not None
    pod_group = decoded["j"].PodGroup
    assert pod_group is not None
    spec = pod_group.network_topology
    assert spec is not None
    assert (spec.effective_mode, spec.tier) == ("hard", 2)


def orjson_roundtrip(info: dict[str, Any]) -> JobInfo:
    import msgspec

    return msgspec.json.decode(orjson.dumps(info), type=JobInfo)


def test_a_tier_name_vc_scheduler_translated_is_planned_at_that_tier() -> None:
    six = job("six", 6)
    spine_of = {"a1": "S1", "a2": "S1", "b1": "S2"}
    nodes = three_tier({"a1": 4, "a2": 2, "b1": 3}, spine_of)
    body = with_topology(session_open([six], nodes), six.job_id, {"mode": "hard", "highestTierName": "spine"})
    state = opened(body)
    assert state.left_to_volcano(decoded_task(six.tasks[0]))  # 1.12-1.14 send no translation
    body["Jobs"][six.job_id]["NetworkTopology"] = {"mode": "hard", "highestTierAllowed": 2}  # 1.15 sends it
    state = opened(body)
    plan = state.plan_for(decoded_task(six.tasks[0]))
    assert plan is not None
    assert plan.plan.spines == ("S1",)
    candidates = [decoded_node(n) for n in nodes if n["Name"].startswith("a")]
    scores = prioritize(decoded_task(six.tasks[0]), candidates, state)
    assert min(scores[name] for name in plan.allowed) > max(s for n, s in scores.items() if n not in plan.allowed)
