"""The settings tree: defaults, YAML loading with camelCase keys, profile bases, and every problem named at once."""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

from planner import Fabric, InputError, check_fabric
from webhook.cli.main import main
from webhook.common.settings import (
    DEFAULT_PROFILES,
    AcceleratorProfile,
    ControllerSettings,
    PlanningSettings,
    Settings,
    SettingsError,
    load_settings,
    settings_from_mapping,
)

ROOT = Path(__file__).resolve().parents[2]

MANY_MISTAKES = """\
profiles:
  - base: ascend-1980
    allowedCards: [1, 2, 4, 8, 16]
  - labelValue: ascend-1980
planning:
  routing: ecmpp
  qpsPerConnection: "4"
topology:
  fabric: {layout: banana, linkGbps: 400}
controller:
  debounceS: -5
  retryPeriodS: 12
extender:
  planAttempts: 0
  maxBodyMb: 64
volcano:
  version: latest
"""
"""A settings file with ten mistakes of every kind."""

MANY_PROBLEMS = (
    "planning.routing: 'ecmpp' is not one of ecmp, slice, pinned",
    "planning.qpsPerConnection: expected an integer, got '4'",
    "topology.fabric.layout: 'banana' is not one of tor, rail",
    "controller.debounceS: must be zero or more, got -5",
    "extender.planAttempts: must be at least 1, got 0",
    "extender.maxBodyMb: unknown setting; did you mean maxBodyMib?",
    "volcano.version: 'latest' is not auto or a release like 1.7 or 1.10",
    "profiles[0].allowedCards: every count must be in 1..cardsPerNode (8), got 16",
    "profiles[1].labelValue: duplicate profile 'ascend-1980' (also profiles[0])",
    "controller.retryPeriodS: must be shorter than controller.renewDeadlineS (10), got 12",
)


def problems(data: dict[str, Any]) -> tuple[str, ...]:
    with pytest.raises(SettingsError) as info:
        settings_from_mapping(data)
    return info.value.problems


def test_defaults_describe_the_documented_8_card_profile() -> None:
    settings = settings_from_mapping(None)
    profile = settings.profile("ascend-1980")
    assert profile is not None
    assert profile.resource_name == "huawei.com/ascend-1980"
    assert profile.cards_per_node == 8
    assert profile.rank_table_path == "/user/config/jobstart_hccl.json"
    assert profile.configmap_name("yourvcjobname") == "configmap1980-yourvcjobname"
    assert [v.path for v in profile.host_path_volumes] == [
        "/usr/local/Ascend/driver",
        "/usr/local/Ascend/add-ons",
        "/etc/localtime",
        "/etc/hccn.conf",
        "/usr/local/sbin/npu-smi",
    ]
    assert settings.profile("unknown") is None
    assert settings_from_mapping({}) == Settings()


def test_the_16_card_super_pod_profile_uses_rank_table_1_2() -> None:
    profile = Settings().profile("ascend-1980-snt9b23")
    assert profile is not None
    assert profile.cards_per_node == 16
    assert profile.rank_table_version == "1.2"
    assert 16 in profile.allowed_cards


def test_yaml_file_with_camel_case_keys_builds_nested_frozen_settings(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        """
policy:
  belowMinNodes: skip
  ruleModes: {sharedWorkingDir: warn}
  sharedHostPathPrefixes: [/mnt/team]
topology:
  labelKeys: [volcano.sh/hypercluster, volcano.sh/hypernode]
  fabric: {layout: rail, linkGbps: 400, leafOversubscription: 2}
profiles:
  - base: ascend-1980
    gzipRankTable: true
    nodeSelector: {accelerator/huawei-npu: ascend-1980, pool: training}
""",
        encoding="utf-8",
    )
    settings = load_settings(path)
    assert settings.policy.below_min_nodes == "skip"
    assert settings.policy.mode("sharedWorkingDir") == "warn"
    assert settings.policy.mode("cardCount") == "reject"
    assert settings.policy.shared_host_path_prefixes == ("/mnt/team",)
    assert settings.topology.label_keys == ("volcano.sh/hypercluster", "volcano.sh/hypernode")
    assert settings.topology.fabric == Fabric(layout="rail", link_gbps=400.0, leaf_oversubscription=2.0)
    assert isinstance(settings.topology.fabric.link_gbps, float)
    assert len(settings.profiles) == 1
    assert settings.profiles[0].gzip_rank_table is True
    assert settings.profiles[0].cards_per_node == DEFAULT_PROFILES[0].cards_per_node
    assert settings.profiles[0].host_path_volumes == DEFAULT_PROFILES[0].host_path_volumes
    assert settings.profiles[0].node_selector == (("accelerator/huawei-npu", "ascend-1980"), ("pool", "training"))
    with pytest.raises(AttributeError):
        settings.policy.below_min_nodes = "reject"  # type: ignore[misc]


def test_snake_case_keys_build_the_same_settings_as_camel_case() -> None:
    camel = settings_from_mapping(
        {
            "controller": {"debounceS": 0.5, "leaseDurationS": 20},
            "topology": {"fabric": {"nicsPerServer": 4, "leafUplinks": 8}},
            "volcano": {"networkTopology": {"highestTierAllowed": 2}},
            "profiles": [{"base": "ascend-1980-snt9b23", "rankTableVersion": "1.2"}],
        }
    )
    snake = settings_from_mapping(
        {
            "controller": {"debounce_s": 0.5, "lease_duration_s": 20},
            "topology": {"fabric": {"nics_per_server": 4, "leaf_uplinks": 8}},
            "volcano": {"network_topology": {"highest_tier_allowed": 2}},
            "profiles": [{"base": "ascend-1980-snt9b23", "rank_table_version": "1.2"}],
        }
    )
    assert camel == snake
    assert camel.topology.fabric.leaf_uplinks == 8
    assert camel.profiles == (DEFAULT_PROFILES[1],)


def test_a_file_with_many_mistakes_is_refused_with_every_problem_at_once(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(MANY_MISTAKES, encoding="utf-8")
    with pytest.raises(SettingsError) as info:
        load_settings(path)
    assert info.value.problems == MANY_PROBLEMS
    assert info.value.source == str(path)
    assert str(info.value).splitlines() == [f"{path}: 10 problems", *(f"  {line}" for line in MANY_PROBLEMS)]


def test_without_a_file_the_error_text_is_one_line_per_problem() -> None:
    error = SettingsError(["a.b: wrong", "c: unknown setting"])
    assert str(error) == "a.b: wrong\nc: unknown setting"
    assert str(SettingsError("x: wrong", "config.yaml")) == "config.yaml: x: wrong"


def test_problems_name_keys_as_the_user_spelt_them() -> None:
    assert problems({"controller": {"debounce_s": -5, "retry_period_s": 30}}) == (
        "controller.debounce_s: must be zero or more, got -5",
        "controller.retry_period_s: must be shorter than controller.renewDeadlineS (10), got 30",
    )
    assert problems({"extender": {"max_body_mb": 1}}) == (
        "extender.max_body_mb: unknown setting; did you mean max_body_mib?",
    )


def test_a_key_given_in_both_spellings_is_refused() -> None:
    assert problems({"controller": {"debounceS": 1, "debounce_s": 2}}) == (
        "controller.debounce_s: given twice (also as debounceS)",
    )


@pytest.mark.parametrize(
    ("data", "line"),
    [
        ({"policy": {"belowMinNode": "skip"}}, "policy.belowMinNode: unknown setting; did you mean belowMinNodes?"),
        ({"policy": {"belowMinNodes": "maybe"}}, "policy.belowMinNodes: 'maybe' is not one of reject, skip"),
        ({"policy": {"ruleModes": {"x": "ignore"}}}, "policy.ruleModes.x: 'ignore' is not one of reject, warn"),
        (
            {"policy": {"sharedHostPathPrefixes": "/mnt/nfs"}},
            "policy.sharedHostPathPrefixes: expected a list, got '/mnt/nfs'",
        ),
        (
            {"policy": {"sharedHostPathPrefixes": ["mnt"]}},
            "policy.sharedHostPathPrefixes[0]: must be an absolute path, got 'mnt'",
        ),
        ({"planning": {"qpsPerConnection": 0}}, "planning.qpsPerConnection: must be at least 1, got 0"),
        ({"planning": {"qpsPerConnection": "4"}}, "planning.qpsPerConnection: expected an integer, got '4'"),
        ({"planning": {"pattern": True}}, "planning.pattern: expected one of ring, halving-doubling, mixed, got true"),
        ({"planning": {"timeLimitS": 0}}, "planning.timeLimitS: must be positive, got 0"),
        ({"planning": {"seed": -1}}, "planning.seed: must be zero or more, got -1"),
        (
            {"topology": {"torConfigmap": "tor"}},
            "topology.torConfigmap: expected namespace/name such as kube-system/basic-tor-node-cm, got 'tor'",
        ),
        (
            {"topology": {"useHypernodes": "yes please"}},
            "topology.useHypernodes: expected true or false, got 'yes please'",
        ),
        ({"profiles": []}, "profiles: must not be empty"),
        (
            {"profiles": [{"cardsPerNode": 8, "allowedCards": [16]}]},
            "profiles[0].allowedCards: every count must be in 1..cardsPerNode (8), got 16",
        ),
        ({"profiles": [{"allowedCards": [0, 8]}]}, "profiles[0].allowedCards[0]: must be at least 1, got 0"),
        (
            {"profiles": [{"base": "ascend-910z"}]},
            "profiles[0].base: unknown built-in profile 'ascend-910z' (built-in: ascend-1980, ascend-1980-snt9b23)",
        ),
        ({"profiles": [{}, {}]}, "profiles[1].labelValue: duplicate profile 'ascend-1980' (also profiles[0])"),
        (
            {"profiles": [{"rankTableVersion": 1.2}]},
            "profiles[0].rankTableVersion: expected one of 1.0, 1.2, got 1.2 (a number: quote it in YAML)",
        ),
        ({"profiles": [{"hostPathVolumes": [{"name": "driver"}]}]}, "profiles[0].hostPathVolumes[0].path: required"),
        (
            {"profiles": [{"mountPath": "user/config"}]},
            "profiles[0].mountPath: must be an absolute path, got 'user/config'",
        ),
        ({"controller": []}, "controller: expected a mapping, got a list"),
        (
            {"controller": {"namespaces": ["team-a", "Team_B"]}},
            "controller.namespaces[1]: must be a namespace name (at most 63 lowercase letters, digits and '-'), "
            "got 'Team_B'",
        ),
        (
            {"controller": {"namespaces": ["team-a", "team-a"]}},
            "controller.namespaces[1]: duplicate namespace 'team-a'",
        ),
        ({"controller": {"namespace": "team-a"}}, "controller.namespace: unknown setting; did you mean namespaces?"),
        (
            {"configmapCreateTimeoutS": 10},
            "configmapCreateTimeoutS: unknown setting "
            "(known: profiles, policy, topology, planning, controller, extender, volcano, admission)",
        ),
    ],
)
def test_invalid_settings_name_the_key(data: dict[str, Any], line: str) -> None:
    assert problems(data) == (line,)


def test_an_unquoted_version_number_is_refused_with_a_hint_to_quote_it() -> None:
    # YAML reads `version: 1.10` as the number 1.1.
    assert problems({"volcano": {"version": 1.1}}) == (
        "volcano.version: expected a string, got 1.1 (a number: quote it in YAML)",
    )
    assert settings_from_mapping({"volcano": {"version": "1.10"}}).volcano.version == "1.10"


def test_a_refused_value_raises_no_follow_up_problem_in_the_checks_that_read_it() -> None:
    assert problems({"profiles": [{"cardsPerNode": "16", "allowedCards": [1, 16]}]}) == (
        "profiles[0].cardsPerNode: expected an integer, got '16'",
    )
    assert problems({"profiles": [{}, "ascend-1980"]}) == ("profiles[1]: expected a mapping, got 'ascend-1980'",)
    assert problems({"profiles": [{}, {"base": "nope"}]}) == (
        "profiles[1].base: unknown built-in profile 'nope' (built-in: ascend-1980, ascend-1980-snt9b23)",
    )
    assert problems({"controller": {"renewDeadlineS": "10s", "retryPeriodS": 12}}) == (
        "controller.renewDeadlineS: expected a number, got '10s'",
    )


@pytest.mark.parametrize(
    ("controller", "line"),
    [
        ({"retryPeriodS": 12}, "controller.retryPeriodS: must be shorter than controller.renewDeadlineS (10), got 12"),
        ({"retryPeriodS": 10}, "controller.retryPeriodS: must be shorter than controller.renewDeadlineS (10), got 10"),
        (
            {"renewDeadlineS": 15},
            "controller.renewDeadlineS: must be shorter than controller.leaseDurationS (15), got 15",
        ),
        (
            {"leaseDurationS": 5},
            "controller.renewDeadlineS: must be shorter than controller.leaseDurationS (5), got 10",
        ),
        ({"retryPeriodS": 0}, "controller.retryPeriodS: must be positive, got 0"),
    ],
)
def test_lease_timings_nest_retry_inside_renew_deadline_inside_lease_duration(
    controller: dict[str, Any], line: str
) -> None:
    assert problems({"controller": controller}) == (line,)


def test_lease_timings_that_nest_are_accepted() -> None:
    settings = settings_from_mapping({"controller": {"leaseDurationS": 30, "renewDeadlineS": 20, "retryPeriodS": 5}})
    assert (settings.controller.lease_duration_s, settings.controller.renew_deadline_s) == (30.0, 20.0)


@pytest.mark.parametrize(
    ("fabric", "line"),
    [
        ({"layout": "banana"}, "topology.fabric.layout: 'banana' is not one of tor, rail"),
        ({"nicsPerServer": 0}, "topology.fabric.nicsPerServer: must be at least 1, got 0"),
        ({"nicsPerServer": 2.5}, "topology.fabric.nicsPerServer: expected an integer, got 2.5"),
        ({"linkGbps": -1}, "topology.fabric.linkGbps: must be positive, got -1"),
        ({"linkGbps": math.inf}, "topology.fabric.linkGbps: expected a finite number, got inf"),
        ({"leafOversubscription": 0}, "topology.fabric.leafOversubscription: must be positive, got 0"),
        ({"spineOversubscription": "2:1"}, "topology.fabric.spineOversubscription: expected a number, got '2:1'"),
        ({"leafUplinks": 0}, "topology.fabric.leafUplinks: must be at least 1, got 0"),
    ],
)
def test_fabric_values_the_planner_refuses_are_refused_at_start_up(fabric: dict[str, Any], line: str) -> None:
    assert problems({"topology": {"fabric": fabric}}) == (line,)
    (key, value), *_ = fabric.items()
    with pytest.raises(InputError):
        check_fabric(Fabric(**{re.sub("([A-Z])", r"_\1", key).lower(): value}))


def test_every_fabric_field_is_accepted_under_topology_fabric_and_passes_the_planners_check() -> None:
    data = {"layout": "rail", "nicsPerServer": 4, "linkGbps": 100, "spineOversubscription": 3, "leafUplinks": None}
    fabric = settings_from_mapping({"topology": {"fabric": data}}).topology.fabric
    assert fabric == Fabric(layout="rail", nics_per_server=4, link_gbps=100.0, spine_oversubscription=3.0)
    assert check_fabric(fabric) == fabric


def test_an_empty_section_takes_its_defaults(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("controller:\n#  debounceS: 1\nextender:\n  listen: 0.0.0.0:9999\n", encoding="utf-8")
    settings = load_settings(path)
    assert settings.controller == ControllerSettings()
    assert settings.extender.listen == "0.0.0.0:9999"


def test_settings_are_frozen_hashable_and_equal_by_value() -> None:
    one = settings_from_mapping({"planning": {"routing": "pinned"}})
    two = settings_from_mapping({"planning": {"routing": "pinned"}})
    assert one == two
    assert hash(one) == hash(two)
    assert len({one, two, Settings()}) == 2
    with pytest.raises(AttributeError):
        one.planning = PlanningSettings()  # type: ignore[misc]
    assert msgspec.structs.replace(one, planning=PlanningSettings()) == Settings()


def test_overrides_replace_whole_sections_and_are_checked_like_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("controller: {debounceS: 1, leaseName: from-file}\n", encoding="utf-8")
    settings = load_settings(path, controller=ControllerSettings(lease_name="from-flag"))
    assert (settings.controller.lease_name, settings.controller.debounce_s) == ("from-flag", 0.2)
    profile = AcceleratorProfile(label_value="gpu", allowed_cards=(1, 16))
    with pytest.raises(SettingsError) as info:
        load_settings(path, controller=ControllerSettings(debounce_s=-1), profiles=(profile,))
    assert info.value.problems == (
        "controller.debounce_s: must be zero or more, got -1",
        "profiles[0].allowed_cards: every count must be in 1..cards_per_node (8), got 16",
    )


def test_unreadable_non_yaml_or_non_mapping_files_are_settings_errors(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"missing\.yaml: cannot read settings: No such file or directory"):
        load_settings(tmp_path / "missing.yaml")
    bad = tmp_path / "list.yaml"
    bad.write_text("- a\n- b\n", encoding="utf-8")
    with pytest.raises(SettingsError, match="the settings file must be a mapping of sections, got a list"):
        load_settings(bad)
    broken = tmp_path / "broken.yaml"
    broken.write_text("controller:\n  debounceS: [1\n", encoding="utf-8")
    with pytest.raises(SettingsError) as info:
        load_settings(broken)
    assert len(info.value.problems) == 1
    assert info.value.problems[0].startswith("not valid YAML at line 3, column 1:")


def test_serve_refuses_a_bad_config_at_start_up_with_every_problem_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(MANY_MISTAKES, encoding="utf-8")
    assert main(["serve", "--cert-dir", str(tmp_path), "--config", str(config)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"ringroute serve: error: --config {config}: 10 problems",
        *(f"  {line}" for line in MANY_PROBLEMS),
    ]
    assert main(["extender", "--config", str(config)]) == 2
    assert capsys.readouterr().err.splitlines()[0] == f"ringroute extender: error: --config {config}: 10 problems"


def test_plan_refuses_a_bad_settings_file_with_every_problem_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = tmp_path / "settings.yaml"
    settings.write_text(MANY_MISTAKES, encoding="utf-8")
    pods = ROOT / "examples" / "pods" / "llm-pretrain-pods.yaml"
    out = tmp_path / "out"
    argv = ["plan", "--pods", str(pods), "--settings", str(settings), "--out-dir", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"ringroute plan: error: --settings {settings}: 10 problems",
        *(f"  {line}" for line in MANY_PROBLEMS),
    ]
    assert not out.exists()


def test_the_deploy_guide_shows_the_errors_its_example_file_gets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    guide = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    example = guide[guide.rindex("```yaml\n", 0, guide.index("routing: ecmpp")) :]
    config = example.split("```yaml\n", 1)[1].split("```", 1)[0]
    shown = example.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    assert shown[0].startswith("$ ringroute serve ")
    assert shown[-1] == "2"
    (tmp_path / "config.yaml").write_text(config, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["serve", "--cert-dir", str(tmp_path), "--config", "config.yaml"]) == 2
    assert capsys.readouterr().err.splitlines() == shown[1:-1]


def test_every_settings_field_has_a_docstring() -> None:
    tree = ast.parse((ROOT / "webhook" / "common" / "settings" / "_model.py").read_text(encoding="utf-8"))
    structs = [
        node
        for node in tree.body
        if isinstance(node, ast.ClassDef) and any(ast.unparse(base) == "msgspec.Struct" for base in node.bases)
    ]
    assert {node.name for node in structs} >= {"Settings", "AcceleratorProfile", "ControllerSettings"}
    undocumented = []
    for node in structs:
        assert ast.get_docstring(node), node.name
        for field, after in zip(node.body, [*node.body[1:], None], strict=True):
            if not isinstance(field, ast.AnnAssign):
                continue
            documented = (
                isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            )
            if not documented:
                undocumented.append(f"{node.name}.{ast.unparse(field.target)}")
    assert undocumented == []


def test_controller_and_extender_timing_defaults_match_the_documented_values() -> None:
    settings = Settings()
    assert settings.controller.orphan_grace_s == 300.0
    assert settings.controller.pending_event_interval_s == 10.0
    assert (settings.extender.max_body_mib, settings.extender.max_session_open_mib) == (128, 256)
    assert settings.extender.job_memory_ttl_s == 900.0
    assert (settings.extender.plan_attempts, settings.extender.plan_ttl_s) == (2, 30.0)


def test_controller_and_extender_timings_load_from_camel_case_yaml() -> None:
    settings = settings_from_mapping(
        {
            "controller": {"orphanGraceS": 60, "pendingEventIntervalS": 2.5},
            "extender": {"maxBodyMib": 64, "jobMemoryTtlS": 120},
        }
    )
    assert settings.controller.orphan_grace_s == 60.0
    assert isinstance(settings.controller.orphan_grace_s, float)
    assert settings.controller.pending_event_interval_s == 2.5
    assert settings.extender.max_body_mib == 64
    assert settings.extender.job_memory_ttl_s == 120.0


@pytest.mark.parametrize(
    ("data", "line"),
    [
        ({"controller": {"orphanGraceS": 0}}, "controller.orphanGraceS: must be positive, got 0"),
        ({"controller": {"orphanGraceS": "5m"}}, "controller.orphanGraceS: expected a number, got '5m'"),
        (
            {"controller": {"pendingEventIntervalS": -1}},
            "controller.pendingEventIntervalS: must be zero or more, got -1",
        ),
        ({"controller": {"configmapCreateWorkers": 0}}, "controller.configmapCreateWorkers: must be at least 1, got 0"),
        ({"extender": {"maxBodyMib": 0}}, "extender.maxBodyMib: must be at least 1, got 0"),
        ({"extender": {"maxBodyMib": 1.5}}, "extender.maxBodyMib: expected an integer, got 1.5"),
        ({"extender": {"maxStateMib": 0}}, "extender.maxStateMib: must be at least 1, got 0"),
        ({"extender": {"jobMemoryTtlS": 0}}, "extender.jobMemoryTtlS: must be positive, got 0"),
        ({"extender": {"planAttempts": 0}}, "extender.planAttempts: must be at least 1, got 0"),
        ({"extender": {"planTtlS": -1}}, "extender.planTtlS: must be positive, got -1"),
        ({"extender": {"scoreWeight": 0}}, "extender.scoreWeight: must be positive, got 0"),
        ({"extender": {"listen": "8888"}}, "extender.listen: expected ADDR:PORT such as 0.0.0.0:8888, got '8888'"),
        ({"extender": {"listen": ":²"}}, "extender.listen: expected ADDR:PORT such as 0.0.0.0:8888, got ':²'"),
        (
            {"extender": {"listen": ":" + "9" * 5000}},
            f"extender.listen: expected ADDR:PORT such as 0.0.0.0:8888, got {':' + '9' * 5000!r}",
        ),
        ({"volcano": {"version": "latest"}}, "volcano.version: 'latest' is not auto or a release like 1.7 or 1.10"),
        ({"volcano": {"version": "1.6"}}, "volcano.version: ringroute supports Volcano 1.7 and later (got '1.6')"),
    ],
)
def test_invalid_controller_extender_and_volcano_values_name_the_key(data: dict[str, Any], line: str) -> None:
    assert problems(data) == (line,)


def test_the_controller_takes_its_orphan_grace_and_event_interval_from_the_settings() -> None:
    from typing import cast

    from webhook.common.metrics import Metrics
    from webhook.controller.reconciler import Controller

    settings = settings_from_mapping({"controller": {"orphanGraceS": 42, "pendingEventIntervalS": 3}})
    repo = cast(Any, object())  # the constructor only stores the repository
    controller = Controller(settings, repo, Metrics())
    assert (controller.orphan_grace_s, controller.pending_event_interval_s) == (42.0, 3.0)
    overridden = Controller(settings, repo, Metrics(), orphan_grace_s=0.5, pending_event_interval_s=0.0)
    assert (overridden.orphan_grace_s, overridden.pending_event_interval_s) == (0.5, 0.0)


def test_the_extender_body_limits_come_from_the_settings() -> None:
    from webhook.common.metrics import Metrics
    from webhook.extender.app import ExtenderService, extender_endpoints

    settings = settings_from_mapping({"extender": {"maxBodyMib": 3, "maxSessionOpenMib": 5}})
    endpoints = extender_endpoints(ExtenderService(settings, Metrics()))
    assert endpoints["/extender/prioritize"].max_body == 3 * 1024 * 1024
    assert endpoints["/extender/onSessionOpen"].max_body == 5 * 1024 * 1024


def test_the_extender_forgets_jobs_after_the_configured_memory_ttl() -> None:
    from tests.support.extender import decoded_node, decoded_task, job, node, tor
    from webhook.extender.state import ExtenderState

    now = [0.0]
    state = ExtenderState(settings_from_mapping({"extender": {"jobMemoryTtlS": 30}}), clock=lambda: now[0])
    bert = job("bert", 2)
    task = decoded_task(bert.tasks[1])
    state.observe([decoded_node(node("node-1", tor("A"), hosts=[(bert, 0)]))], task)
    state.prune(20.0)
    assert state.hosted_nodes(task) == {"node-1": 1}
    state.prune(31.0)
    assert state.hosted_nodes(task) == {}


@pytest.mark.parametrize(
    ("value", "replaced_by"),
    [("auto", "became sized: the lowest tier that holds the job"), ("always", "(always became fixed)")],
)
def test_network_topology_values_of_earlier_releases_are_refused_naming_what_replaced_them(
    value: str, replaced_by: str
) -> None:
    with pytest.raises(SettingsError) as info:
        settings_from_mapping({"volcano": {"networkTopology": {"inject": value}}})
    [problem] = info.value.problems
    assert problem.startswith(f"volcano.networkTopology.inject: {value!r} is not one of sized, fixed, never (")
    assert replaced_by in problem


def test_the_answer_deadline_leaves_a_margin_under_the_shipped_webhooks_timeout() -> None:
    import yaml

    webhooks = ROOT / "manifests" / "base" / "webhooks.yaml"
    timeouts = {hook["timeoutSeconds"] for doc in yaml.safe_load_all(webhooks.read_text()) for hook in doc["webhooks"]}
    assert timeouts == {5}
    assert Settings().admission.answer_within_s == 4.0, "5 s less 1 s for the network and the API server"
    assert settings_from_mapping({"admission": {"answerWithinS": 2.5}}).admission.answer_within_s == 2.5
    assert problems({"admission": {"answerWithinS": 0}}) == ("admission.answerWithinS: must be positive, got 0",)
    assert problems({"admission": {"answerWithinS": 30}}) == ("admission.answerWithinS: must be at most 29, got 30",)
