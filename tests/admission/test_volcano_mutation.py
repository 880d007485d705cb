"""Mutation for the Volcano users run: the vendor plugin removed (one writer of the rank table, said in a warning),
the writer recorded, the gang size on the NPU templates, and spec.networkTopology where Volcano has HyperNodes.
Every patch applies with jsonpatch, gives a Job valid against the vendored CRD, and mutating again adds nothing."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Literal

import jsonschema
import msgspec
import pytest
import yaml
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from tests.support.admission import (
    apply_ops,
    bare_job,
    check_schemas,
    leaf_spine_facts,
    load_example,
    mutate,
    npu_jobs,
    volcano_defaults,
)
from webhook.admission.jobview import read_job
from webhook.admission.mutation import NO_FACTS, ClusterFacts, Mutation, plan_create, plan_update
from webhook.admission.policy import judge, validate
from webhook.common.settings import (
    NetworkTopologySettings,
    Settings,
    SettingsError,
    VolcanoSettings,
    settings_from_mapping,
)

ROOT = Path(__file__).resolve().parents[2]
WRITER = "ringroute.io/rank-table-writer"
NPU_PODS = "ringroute.io/npu-pods"
HYPERNODES = leaf_spine_facts()
"""6 leaves of 4 nodes at tier 1 under one tier-2 spine: the 4-pod job of make_route_planned fits a leaf."""


def seed_job() -> dict[str, Any]:
    """The Volcano Job of the product documentation, as users copy it (tests/data/vcjob-seed.yaml)."""
    [job] = [
        d for d in yaml.safe_load_all((ROOT / "tests" / "data" / "vcjob-seed.yaml").read_text()) if d["kind"] == "Job"
    ]
    assert isinstance(job, dict)
    return job


def volcano(
    configmap_plugin: Literal["absent", "installed"] = "absent",
    inject: Literal["sized", "fixed", "never"] = "sized",
    version: str = "auto",
    **topology: Any,
) -> Settings:
    request = NetworkTopologySettings(inject=inject, **topology)
    return Settings(
        volcano=VolcanoSettings(version=version, configmap_plugin=configmap_plugin, network_topology=request)
    )


def create(job: dict[str, Any], settings: Settings, facts: ClusterFacts = NO_FACTS) -> Mutation:
    return plan_create(read_job(job, settings), facts)


# -- the configmap1980 plugin and the rank-table writer -----------------------------------------------------------


def test_the_documented_job_loses_only_the_vendor_plugin_and_kubectl_is_told_why(
    volcano_job_schema: jsonschema.Draft202012Validator, pod_template_schema: jsonschema.Draft202012Validator
) -> None:
    job = seed_job()
    settings = volcano()
    mutation = create(job, settings)
    assert {"op": "remove", "path": "/spec/plugins/configmap1980"} in mutation.ops
    mutated = apply_ops(job, mutation.ops)
    assert mutated["spec"]["plugins"] == {"env": [], "svc": ["--publish-not-ready-addresses=true"]}
    assert mutated["metadata"]["annotations"][WRITER] == "ringroute"
    assert mutation.warnings == (
        "spec.plugins[configmap1980]: removed by ringroute: open-source Volcano refuses jobs that name this plugin of "
        "the cloud vendor's fork (unable to find job plugin); ringroute writes the rank table "
        "configmap1980-yourvcjobname itself",
    )
    check_schemas(mutated, volcano_job_schema, pod_template_schema)
    assert mutate(mutated, settings) == []
    assert validate(mutated, None, settings) == []
    assert [v.rule for v in validate(job, None, settings)] == ["volcano-job-plugins"]  # Volcano would refuse it


def test_a_job_whose_only_plugin_is_the_vendor_plugin_keeps_an_empty_plugin_map() -> None:
    job = bare_job()
    job["spec"]["plugins"] = {"configmap1980": []}
    mutated = apply_ops(job, mutate(job, volcano()))
    assert mutated["spec"]["plugins"] == {}
    assert mutate(mutated, volcano()) == []


def test_with_the_fork_installed_a_route_planned_job_gets_its_table_from_ringroute_alone(
    distributed_job: dict[str, Any],
) -> None:
    job = distributed_job
    mutation = create(job, volcano("installed"))
    mutated = apply_ops(job, mutation.ops)
    assert "configmap1980" not in mutated["spec"]["plugins"]
    assert mutated["metadata"]["annotations"][WRITER] == "ringroute"
    [warning] = mutation.warnings
    assert warning == (
        "spec.plugins[configmap1980]: removed by ringroute: this job is route-planned, so ringroute writes its rank "
        "table configmap1980-bert-4x8 and the plugin would be a second writer"
    )
    assert validate(mutated, None, volcano("installed")) == []


def test_with_the_fork_installed_a_job_without_route_planning_keeps_the_plugin_as_the_only_writer() -> None:
    job = seed_job()
    mutation = create(job, volcano("installed"))
    mutated = apply_ops(job, mutation.ops)
    assert mutated["spec"]["plugins"]["configmap1980"] == ["--rank-table-version=v2"]
    assert mutated["metadata"]["annotations"][WRITER] == "volcano-plugin"
    assert mutation.warnings == ()
    # the plugin mounts its own table: ringroute adds no second volume of it
    assert "configmap1980-yourvcjobname" not in str(mutated["spec"]["tasks"])
    assert validate(mutated, None, volcano("installed")) == []
    assert mutate(mutated, volcano("installed")) == []


def test_jobs_that_do_not_name_the_plugin_are_written_by_ringroute_whatever_the_setting() -> None:
    for settings in (volcano(), volcano("installed")):
        mutated = apply_ops(bare_job(), mutate(bare_job(), settings))
        assert mutated["metadata"]["annotations"][WRITER] == "ringroute"


def test_a_wrong_writer_annotation_is_corrected_on_create() -> None:
    job = bare_job()
    job["metadata"]["annotations"] = {WRITER: "volcano-plugin"}
    mutated = apply_ops(job, mutate(job, volcano()))
    assert mutated["metadata"]["annotations"][WRITER] == "ringroute"


# -- the gang size on NPU templates ----------------------------------------------------------------------------------


def test_every_npu_template_carries_the_jobs_total_npu_pods_and_cpu_templates_do_not() -> None:
    job = bare_job()
    second = copy.deepcopy(job["spec"]["tasks"][0])
    second["name"] = "worker-b"
    second["replicas"] = 2
    cpu = {"name": "loader", "replicas": 4, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}
    job["spec"]["tasks"] += [second, cpu]
    mutated = apply_ops(job, mutate(job, volcano()))
    annotations = [t["template"].get("metadata", {}).get("annotations") for t in mutated["spec"]["tasks"]]
    assert annotations == [{NPU_PODS: "5"}, {NPU_PODS: "5"}, None]


def test_a_stale_npu_pods_value_is_corrected_on_create_and_kept_on_update(documented_job: dict[str, Any]) -> None:
    documented_job["spec"]["tasks"][0]["template"]["metadata"]["annotations"] = {NPU_PODS: "9"}
    stored = apply_ops(documented_job, mutate(documented_job, volcano()))
    assert stored["spec"]["tasks"][0]["template"]["metadata"]["annotations"] == {NPU_PODS: "1"}
    scaled = copy.deepcopy(stored)
    scaled["spec"]["tasks"][0]["replicas"] = 3
    assert plan_update(read_job(scaled, volcano()), stored) == Mutation()  # Volcano refuses template changes


# -- networkTopology ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("inject", "facts", "expected"),
    [
        ("sized", NO_FACTS, None),
        ("sized", HYPERNODES, {"mode": "hard", "highestTierAllowed": 1}),
        ("fixed", NO_FACTS, {"mode": "hard", "highestTierAllowed": 1}),
        ("never", HYPERNODES, None),
    ],
)
def test_route_planned_jobs_request_network_topology_when_the_settings_and_cluster_say_so(
    *,
    inject: Literal["sized", "fixed", "never"],
    facts: ClusterFacts,
    expected: dict[str, Any] | None,
    make_route_planned: Any,
    volcano_job_schema: jsonschema.Draft202012Validator,
    pod_template_schema: jsonschema.Draft202012Validator,
) -> None:
    job = make_route_planned()
    settings = volcano(inject=inject)
    mutated = apply_ops(job, create(job, settings, facts).ops)
    assert mutated["spec"].get("networkTopology") == expected
    assert ("network-topology" in mutated["metadata"]["annotations"]["ringroute.io/injected"]) is (expected is not None)
    check_schemas(mutated, volcano_job_schema, pod_template_schema)
    assert create(mutated, settings, facts).ops == []
    assert validate(mutated, None, settings, facts=facts) == []


def test_the_topology_request_takes_mode_and_tier_from_the_settings(make_route_planned: Any) -> None:
    job = make_route_planned()
    settings = volcano(inject="fixed", mode="soft", highest_tier_allowed=2)
    mutated = apply_ops(job, create(job, settings).ops)
    assert mutated["spec"]["networkTopology"] == {"mode": "soft", "highestTierAllowed": 2}


def test_jobs_without_route_planning_or_with_their_own_topology_get_none(
    documented_job: dict[str, Any], make_route_planned: Any
) -> None:
    settings = volcano(inject="fixed")
    assert "networkTopology" not in apply_ops(documented_job, create(documented_job, settings).ops)["spec"]
    job = make_route_planned()
    job["spec"]["networkTopology"] = {"mode": "soft", "highestTierName": "spine"}
    assert apply_ops(job, create(job, settings).ops)["spec"]["networkTopology"] == job["spec"]["networkTopology"]


def test_a_volcano_release_before_1_12_gets_no_topology_even_where_hypernodes_exist(make_route_planned: Any) -> None:
    job = make_route_planned()
    assert "networkTopology" not in apply_ops(job, create(job, volcano(version="1.10"), HYPERNODES).ops)["spec"]


# -- after Volcano's own mutating webhook ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["documented.yaml", "distributed-route-plan.yaml", "bare"])
def test_a_job_after_volcanos_mutating_webhook_needs_nothing_more(name: str) -> None:
    job = bare_job() if name == "bare" else load_example(name)
    for settings, facts in ((volcano(), NO_FACTS), (volcano("installed", "fixed"), HYPERNODES)):
        once = apply_ops(job, create(job, settings, facts).ops)
        assert create(volcano_defaults(once), settings, facts).ops == []
        assert validate(volcano_defaults(once), None, settings) == []


# -- properties ------------------------------------------------------------------------------------------------


@st.composite
def jobs_with_plugins(draw: st.DrawFn) -> dict[str, Any]:
    job = draw(npu_jobs())
    plugins: dict[str, list[str]] = draw(
        st.dictionaries(st.sampled_from(["configmap1980", "svc", "env"]), st.just([]), max_size=3)
    )
    empty_map: bool = draw(st.booleans())
    if plugins or empty_map:
        job["spec"]["plugins"] = plugins
    if draw(st.booleans()):
        job["spec"]["networkTopology"] = {"mode": "soft", "highestTierAllowed": 2}
    if draw(st.booleans()):
        job["metadata"].setdefault("annotations", {})[WRITER] = draw(st.sampled_from(["ringroute", "volcano-plugin"]))
    return job


SETTINGS_VARIANTS = [
    (volcano(), NO_FACTS),
    (volcano("installed"), NO_FACTS),
    (volcano("installed", "sized"), HYPERNODES),
    (volcano(inject="fixed", mode="soft", highest_tier_allowed=3), NO_FACTS),
]


@hypothesis_settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs_with_plugins(), st.sampled_from(range(len(SETTINGS_VARIANTS))))
def test_any_job_is_patched_to_one_writer_and_patching_again_adds_nothing(job: dict[str, Any], variant: int) -> None:
    settings, facts = SETTINGS_VARIANTS[variant]
    original = copy.deepcopy(job)
    mutation = create(job, settings, facts)
    assert job == original
    once = apply_ops(job, mutation.ops)
    assert create(once, settings, facts).ops == []
    if not mutation.ops:
        return
    writer = once["metadata"]["annotations"][WRITER]
    named = "configmap1980" in (once["spec"].get("plugins") or {})
    assert named is (writer == "volcano-plugin")
    assert not [v for v in validate(once, None, settings) if v.rule in ("rank-table-writer", "volcano-job-plugins")]
    plugin_warnings = [w for w in mutation.warnings if w.startswith("spec.plugins")]
    assert bool(plugin_warnings) is any(op["op"] == "remove" for op in mutation.ops)


@hypothesis_settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs_with_plugins(), st.sampled_from(range(len(SETTINGS_VARIANTS))))
def test_any_stored_job_applied_again_as_its_file_is_restored_and_volcano_sees_no_change(
    job: dict[str, Any], variant: int
) -> None:
    settings, facts = SETTINGS_VARIANTS[variant]
    stored = apply_ops(job, create(job, settings, facts).ops)
    update = plan_update(read_job(job, settings), stored)
    result = apply_ops(job, update.ops)
    if not create(job, settings, facts).ops:
        return
    assert result == stored
    assert not [v for v in judge(result, stored, settings).denials if v.rule == "volcano-update"]


def test_the_settings_refuse_a_fixed_tier_on_a_volcano_without_the_field() -> None:
    with pytest.raises(SettingsError, match=r"inject: fixed needs Volcano 1\.12 or later"):
        settings_from_mapping({"volcano": {"version": "1.10", "networkTopology": {"inject": "fixed"}}})
    with pytest.raises(SettingsError, match=r"ringroute supports Volcano 1\.7 and later"):
        settings_from_mapping({"volcano": {"version": "1.6"}})
    assert msgspec.structs.replace(volcano(), volcano=VolcanoSettings(version="1.7")).volcano.version == "1.7"
