"""The settings tree: defaults, YAML loading with camelCase keys, profile bases, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner import Fabric
from webhook.settings import (
    DEFAULT_PROFILES,
    Settings,
    SettingsError,
    load_settings,
    settings_from_mapping,
)


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
    assert len(settings.profiles) == 1
    assert settings.profiles[0].gzip_rank_table is True
    assert settings.profiles[0].cards_per_node == DEFAULT_PROFILES[0].cards_per_node
    with pytest.raises(AttributeError):
        settings.policy.below_min_nodes = "reject"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"policy": {"belowMinNode": "skip"}}, "settings.policy.belowMinNode: unknown setting"),
        ({"policy": {"belowMinNodes": "maybe"}}, "belowMinNodes: must be reject or skip"),
        ({"policy": {"ruleModes": {"x": "ignore"}}}, "ruleModes.x: must be reject or warn"),
        ({"planning": {"qpsPerConnection": 0}}, "qpsPerConnection: must be at least 1"),
        ({"planning": {"qpsPerConnection": "4"}}, "qpsPerConnection: expected an integer"),
        ({"profiles": [{"cardsPerNode": 8, "allowedCards": [16]}]}, "allowedCards: every count must be in"),
        ({"profiles": [{"base": "ascend-910z"}]}, "profiles[0].base: unknown built-in profile"),
        ({"profiles": [{}, {}]}, "duplicate profile 'ascend-1980'"),
        ({"controller": []}, "settings.controller: expected a mapping"),
    ],
)
def test_invalid_settings_name_the_key(data: dict[str, object], message: str) -> None:
    with pytest.raises(SettingsError) as info:
        settings_from_mapping(data)
    assert message in str(info.value)


def test_unreadable_or_non_mapping_file_is_a_settings_error(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="cannot read settings"):
        load_settings(tmp_path / "missing.yaml")
    bad = tmp_path / "list.yaml"
    bad.write_text("- a\n- b\n", encoding="utf-8")
    with pytest.raises(SettingsError, match="must be a mapping"):
        load_settings(bad)


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
    ("data", "message"),
    [
        ({"controller": {"orphanGraceS": 0}}, "settings.controller.orphanGraceS: must be positive"),
        ({"controller": {"orphanGraceS": "5m"}}, "settings.controller.orphanGraceS: expected a number"),
        ({"controller": {"pendingEventIntervalS": -1}}, "pendingEventIntervalS: must be zero or more"),
        ({"extender": {"maxBodyMib": 0}}, "settings.extender.maxBodyMib: must be at least 1"),
        ({"extender": {"maxBodyMib": 1.5}}, "settings.extender.maxBodyMib: expected an integer"),
        ({"extender": {"jobMemoryTtlS": 0}}, "settings.extender.jobMemoryTtlS: must be positive"),
        ({"extender": {"planAttempts": 0}}, "settings.extender.planAttempts: must be at least 1"),
        ({"extender": {"planTtlS": -1}}, "settings.extender.planTtlS: must be positive"),
        ({"extender": {"scoreWeight": 0}}, "settings.extender.scoreWeight: must be positive"),
        ({"volcano": {"version": "latest"}}, "settings.volcano.version: 'latest' is not auto or a release"),
    ],
)
def test_invalid_controller_and_extender_timings_name_the_key(data: dict[str, object], message: str) -> None:
    with pytest.raises(SettingsError) as info:
        settings_from_mapping(data)
    assert message in str(info.value)


def test_the_controller_takes_its_orphan_grace_and_event_interval_from_the_settings() -> None:
    from typing import Any, cast

    from webhook.controller import Controller
    from webhook.metrics import Metrics

    settings = settings_from_mapping({"controller": {"orphanGraceS": 42, "pendingEventIntervalS": 3}})
    repo = cast(Any, object())  # the constructor only stores the repository
    controller = Controller(settings, repo, Metrics())
    assert (controller.orphan_grace_s, controller.pending_event_interval_s) == (42.0, 3.0)
    overridden = Controller(settings, repo, Metrics(), orphan_grace_s=0.5, pending_event_interval_s=0.0)
    assert (overridden.orphan_grace_s, overridden.pending_event_interval_s) == (0.5, 0.0)


def test_the_extender_body_limit_comes_from_the_settings() -> None:
    from webhook.extender import extender_app
    from webhook.metrics import Metrics

    app = extender_app(settings_from_mapping({"extender": {"maxBodyMib": 3, "maxSessionOpenMib": 5}}), Metrics())
    assert app._client_max_size == 5 * 1024 * 1024


def test_the_extender_forgets_jobs_after_the_configured_memory_ttl() -> None:
    from tests.extender.payloads import decoded_node, decoded_task, job, node, tor
    from webhook.extender_state import ExtenderState

    now = [0.0]
    state = ExtenderState(settings_from_mapping({"extender": {"jobMemoryTtlS": 30}}), clock=lambda: now[0])
    bert = job("bert", 2)
    task = decoded_task(bert.tasks[1])
    state.observe([decoded_node(node("node-1", tor("A"), hosts=[(bert, 0)]))], task)
    state.prune(20.0)
    assert state.hosted_nodes(task) == {"node-1": 1}
    state.prune(31.0)
    assert state.hosted_nodes(task) == {}
