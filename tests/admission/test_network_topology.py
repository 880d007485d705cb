"""spec.networkTopology sized to the cluster: admission asks Volcano for the lowest HyperNode tier that can hold the
whole job by capacity, says so (warning and Job annotation), and refuses a job's own hard tier no HyperNode can
ever satisfy, naming the largest HyperNode per tier and the fix."""

from __future__ import annotations

import itertools
from typing import Any

import jsonschema
import orjson
import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from tests.support.admission import (
    apply_ops,
    check_schemas,
    leaf_spine_facts,
    leaf_spine_objects,
    load_example,
    review,
    without_vendor_plugin,
)
from webhook.admission.jobview import read_job
from webhook.admission.mutation import plan_create
from webhook.admission.policy import classify, validate
from webhook.admission.policy.network_topology import (
    NO_FACTS,
    ClusterFacts,
    Demand,
    Domain,
    holds,
    topology_facts,
)
from webhook.admission.server import AdmissionHandlers
from webhook.common.metrics import Metrics
from webhook.common.settings import Settings, settings_from_mapping

NPU = "huawei.com/ascend-1980"
ISSUE_CLUSTER = leaf_spine_facts(6, 4)
"""6 leaves of 4 nodes at tier 1, one tier-2 HyperNode over them (the cluster of the report)."""
DECISION = "ringroute.io/network-topology"


def mutated(job: dict[str, Any], facts: ClusterFacts = ISSUE_CLUSTER, settings: Settings | None = None) -> Any:
    mutation = plan_create(read_job(job, settings or Settings()), facts)
    return apply_ops(job, mutation.ops), mutation.warnings


def test_a_six_pod_job_gets_the_spine_tier_since_no_leaf_holds_six_nodes(
    make_route_planned: Any,
    volcano_job_schema: jsonschema.Draft202012Validator,
    pod_template_schema: jsonschema.Draft202012Validator,
) -> None:
    job, warnings = mutated(make_route_planned(6))
    assert job["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}
    reason = (
        "ringroute asked Volcano to keep this job within one tier-2 HyperNode (mode hard, highestTierAllowed 2): "
        f"the largest tier-1 HyperNode, leaf-0, holds 4 of the 6 nodes with 8 {NPU} cards the job needs; set "
        "spec.networkTopology in the job to choose otherwise"
    )
    assert warnings == (f"spec.networkTopology: {reason}",)
    annotations = job["metadata"]["annotations"]
    assert annotations[DECISION] == reason
    assert "network-topology" in annotations["ringroute.io/injected"].split(",")
    check_schemas(job, volcano_job_schema, pod_template_schema)
    assert validate(job, None, Settings(), facts=ISSUE_CLUSTER) == []
    assert plan_create(read_job(job, Settings()), ISSUE_CLUSTER).ops == []


def test_a_four_pod_job_gets_one_leaf(make_route_planned: Any) -> None:
    job, [warning] = mutated(make_route_planned(4))
    assert job["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    assert warning.endswith(
        f"(mode hard, highestTierAllowed 1): 6 HyperNodes of tier 1 hold the 4 nodes with 8 {NPU} cards it needs; "
        "set spec.networkTopology in the job to choose otherwise"
    )


def test_a_job_larger_than_every_hypernode_gets_no_constraint_and_the_largest_per_tier_is_named(
    make_route_planned: Any,
) -> None:
    job, [warning] = mutated(make_route_planned(30))
    assert "networkTopology" not in job["spec"]
    assert warning == (
        "spec.networkTopology: ringroute did not ask Volcano to keep this job within a HyperNode: no HyperNode "
        f"holds the 30 nodes with 8 {NPU} cards the job needs (largest: tier 1 leaf-0 4 nodes, tier 2 spine 24 nodes)"
    )
    assert job["metadata"]["annotations"][DECISION] == warning.removeprefix("spec.networkTopology: ")
    assert "network-topology" not in job["metadata"]["annotations"]["ringroute.io/injected"]
    soft = settings_from_mapping({"volcano": {"networkTopology": {"unsized": "soft"}}})
    job, [warning] = mutated(make_route_planned(30), settings=soft)
    assert job["spec"]["networkTopology"] == {"mode": "soft"}
    assert "only to prefer keeping this job within one HyperNode (mode soft)" in warning


def test_only_nodes_with_enough_cards_of_the_jobs_resource_count(make_route_planned: Any) -> None:
    nodes, hypernodes = leaf_spine_objects(2, 4)
    for node in nodes[:3]:  # leaf-0 keeps one 8-card node; the others have 4 cards
        node["status"]["allocatable"][NPU] = "4"
    for node in nodes[4:]:  # leaf-1 has no cards at all
        del node["status"]["allocatable"][NPU]
    facts = ClusterFacts(topology=topology_facts(hypernodes, nodes, {NPU}))
    job, [warning] = mutated(make_route_planned(3), facts)
    assert "networkTopology" not in job["spec"]
    assert "(largest: tier 1 leaf-0 1 node, tier 2 spine 1 node)" in warning
    job, [warning] = mutated(make_route_planned(3, cards=4), facts)
    assert job["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}


def test_without_hypernodes_or_route_planning_nothing_is_decided(
    make_route_planned: Any, documented_job: dict[str, Any]
) -> None:
    for facts in (NO_FACTS, ClusterFacts(topology=topology_facts([], [], {NPU}))):
        job, warnings = mutated(make_route_planned(6), facts)
        assert "networkTopology" not in job["spec"]
        assert DECISION not in job["metadata"]["annotations"]
        assert warnings == ()
    job, warnings = mutated(documented_job)
    assert "networkTopology" not in job["spec"]
    assert [w for w in warnings if w.startswith("spec.networkTopology")] == []


def test_a_jobs_own_network_topology_is_left_as_written(make_route_planned: Any) -> None:
    job = make_route_planned(6)
    job["spec"]["networkTopology"] = {"mode": "soft", "highestTierAllowed": 1}
    after, warnings = mutated(job)
    assert after["spec"]["networkTopology"] == {"mode": "soft", "highestTierAllowed": 1}
    assert warnings == ()


def test_a_fixed_tier_no_hypernode_can_satisfy_is_requested_with_a_warning(make_route_planned: Any) -> None:
    settings = settings_from_mapping({"volcano": {"networkTopology": {"inject": "fixed"}}})
    job, [warning] = mutated(make_route_planned(6), settings=settings)
    assert job["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    assert warning == (
        "spec.networkTopology: ringroute asked Volcano to keep this job within one tier-1 HyperNode (mode hard, as "
        "volcano.networkTopology.inject: fixed configures), but no HyperNode of tier 1 or below holds the 6 nodes "
        f"with 8 {NPU} cards it needs (largest: tier 1 leaf-0 4 nodes, tier 2 spine 24 nodes): the job will not "
        "start; ask the cluster admin"
    )
    # ringroute's own request is the admin's choice: validation does not deny it.
    assert validate(job, None, settings, facts=ISSUE_CLUSTER) == []


# -- a job's own hard tier ------------------------------------------------------------------------------------


def own_topology(make_route_planned: Any, replicas: int, topology: dict[str, Any]) -> dict[str, Any]:
    job: dict[str, Any] = make_route_planned(replicas)
    job["spec"]["networkTopology"] = topology
    return job


def test_an_impossible_hard_tier_is_denied_naming_the_largest_hypernode_per_tier_and_the_fix(
    make_route_planned: Any,
) -> None:
    job = own_topology(make_route_planned, 6, {"mode": "hard", "highestTierAllowed": 1})
    [violation] = validate(job, None, Settings(), facts=ISSUE_CLUSTER)
    assert violation.rule == "network-topology-capacity"
    assert violation.render() == (
        "spec.networkTopology.highestTierAllowed: Invalid value: 1: no HyperNode of tier 1 or below holds the 6 "
        f"nodes with 8 {NPU} cards it needs (largest: tier 1 leaf-0 4 nodes, tier 2 spine 24 nodes), so Volcano "
        "would never start the job; raise highestTierAllowed to 2, use mode soft, or remove spec.networkTopology "
        "and ringroute asks for the lowest tier that holds the job"
    )
    assert not classify([violation], Settings()).allowed
    warn = settings_from_mapping({"policy": {"ruleModes": {"network-topology-capacity": "warn"}}})
    verdict = classify(validate(job, None, warn, facts=ISSUE_CLUSTER), warn)
    assert verdict.allowed
    assert verdict.warning_messages() == [violation.render()]


@pytest.mark.parametrize(
    ("topology", "replicas", "version", "denied"),
    [
        ({"highestTierAllowed": 1}, 6, "auto", True),  # mode defaults to hard (the CRD's default)
        ({"mode": "hard", "highestTierName": "leaf"}, 6, "auto", True),
        ({"mode": "hard", "highestTierAllowed": 2}, 6, "auto", False),
        ({"mode": "hard", "highestTierName": "spine"}, 6, "auto", False),
        ({"mode": "soft", "highestTierAllowed": 1}, 6, "auto", False),
        ({"mode": "hard", "highestTierAllowed": 1}, 4, "auto", False),
        ({"mode": "hard", "highestTierAllowed": 2}, 30, "auto", True),
        ({"mode": "hard", "highestTierAllowed": 3}, 24, "1.13", False),
        ({"mode": "hard", "highestTierAllowed": 3}, 25, "1.15", True),
        ({"mode": "hard", "highestTierName": "no-such-tier"}, 6, "auto", False),  # Volcano ignores it
    ],
)
def test_a_jobs_own_hard_tier_is_checked_against_what_the_hypernodes_can_hold(
    make_route_planned: Any, topology: dict[str, Any], replicas: int, version: str, denied: bool
) -> None:
    settings = settings_from_mapping({"volcano": {"version": version}})
    job = own_topology(make_route_planned, replicas, topology)
    found = validate(job, None, settings, facts=ISSUE_CLUSTER)
    assert bool([v for v in found if v.rule == "network-topology-capacity"]) is denied


@pytest.mark.parametrize(("version", "denied"), [("auto", False), ("1.15", False), ("1.14", False), ("1.13", True)])
def test_a_tier_above_every_hypernode_spans_the_cluster_from_volcano_1_14(
    make_route_planned: Any, version: str, denied: bool
) -> None:
    nodes, hypernodes = leaf_spine_objects(3, 4)
    facts = ClusterFacts(topology=topology_facts(hypernodes[:2], nodes, {NPU}))  # two leaves, no spine; 12 nodes
    job = own_topology(make_route_planned, 10, {"mode": "hard", "highestTierAllowed": 2})
    settings = settings_from_mapping({"volcano": {"version": version}})
    assert bool(validate(job, None, settings, facts=facts)) is denied


def test_without_facts_on_update_or_for_ringroutes_own_request_nothing_is_checked(make_route_planned: Any) -> None:
    job = own_topology(make_route_planned, 6, {"mode": "hard", "highestTierAllowed": 1})
    assert validate(job, None, Settings()) == []
    assert [v.rule for v in validate(job, job, Settings(), facts=ISSUE_CLUSTER)] == []
    job["metadata"].setdefault("annotations", {})["ringroute.io/injected"] = "env,network-topology"
    assert validate(job, None, Settings(), facts=ISSUE_CLUSTER) == []


# -- capacity counting ---------------------------------------------------------------------------------------


def brute_force_holds(nodes: list[int], pods: list[int]) -> int:
    """Most pods placeable one per node with enough cards, by trying every assignment order."""
    best = 0
    for order in itertools.permutations(range(len(nodes))):
        placed = 0
        for pod, node in zip(sorted(pods), order, strict=False):
            if nodes[node] < pod:
                break
            placed += 1
        best = max(best, placed)
    for size in range(len(pods), 0, -1):
        for chosen in itertools.combinations(sorted(pods), size):
            for order in itertools.permutations(range(len(nodes)), size):
                if all(nodes[n] >= p for p, n in zip(chosen, order, strict=True)):
                    return max(best, size)
    return best


@hypothesis_settings(max_examples=150, deadline=None)
@given(
    nodes=st.lists(st.sampled_from([0, 2, 4, 8, 16]), min_size=0, max_size=5),
    pods=st.lists(st.sampled_from([1, 2, 4, 8, 16]), min_size=1, max_size=4),
)
def test_the_greedy_count_of_pods_a_hypernode_holds_matches_brute_force(nodes: list[int], pods: list[int]) -> None:
    counts: dict[int, int] = {}
    for cards in nodes:
        if cards:
            counts[cards] = counts.get(cards, 0) + 1
    domain = Domain("h", 1, len(nodes), {NPU: counts})
    assert holds(domain, Demand(NPU, tuple(sorted(pods, reverse=True)))) == brute_force_holds(nodes, pods)


@hypothesis_settings(max_examples=60, deadline=None)
@given(leaves=st.integers(1, 5), per_leaf=st.integers(1, 5), replicas=st.integers(3, 30))
def test_the_tier_asked_for_is_the_lowest_one_a_hypernode_of_which_holds_the_job(
    leaves: int, per_leaf: int, replicas: int
) -> None:
    facts = leaf_spine_facts(leaves, per_leaf)
    job = without_vendor_plugin(load_example("distributed-route-plan.yaml"))
    job["spec"]["tasks"][0]["replicas"] = job["spec"]["minAvailable"] = replicas
    after, _ = mutated(job, facts)
    requested = after["spec"].get("networkTopology")
    if replicas <= per_leaf:
        assert requested == {"mode": "hard", "highestTierAllowed": 1}
    elif replicas <= leaves * per_leaf:
        assert requested == {"mode": "hard", "highestTierAllowed": 2}
    else:
        assert requested is None


# -- over HTTP ------------------------------------------------------------------------------------------------


def test_the_webhook_warns_on_mutate_and_denies_on_validate_with_the_facts_it_was_handed(
    make_route_planned: Any,
) -> None:
    handlers = AdmissionHandlers(Settings(), Metrics(), None)
    handlers.cluster_facts = ISSUE_CLUSTER
    status, body, verdict = handlers.answer("mutate", orjson.dumps(review(make_route_planned(6))))
    answer = orjson.loads(body)["response"]
    assert (status, verdict) == (200, "patched")
    assert answer["warnings"][0].startswith("spec.networkTopology: ringroute asked Volcano to keep this job")
    job = own_topology(make_route_planned, 6, {"mode": "hard", "highestTierAllowed": 1})
    status, body, verdict = handlers.answer("validate", orjson.dumps(review(job)))
    answer = orjson.loads(body)["response"]
    assert (status, verdict, answer["allowed"]) == (200, "denied", False)
    assert "largest: tier 1 leaf-0 4 nodes, tier 2 spine 24 nodes" in answer["status"]["message"]
    assert answer["status"]["details"]["causes"][0]["field"] == "spec.networkTopology.highestTierAllowed"
