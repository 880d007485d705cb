"""The controller delivers pinned routes as source ports: MultiQpSrcPort.cfg in the rank-table ConfigMap, planned
in the planning process too, and a warning Event when steering falls back."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from emulation.cluster import add_job, make_job, make_pod
from tests.support import hccl_multi_qp
from tests.support.controller import fast_settings, running_controller
from webhook.common.settings import Settings, load_settings

DECLARED = """apiVersion: ringroute.io/v1alpha1
kind: HashModel
tiers:
  leaf: {function: crc32c, seed: 0x5eed, bucket: low-bits}
"""
UNRELATED = """apiVersion: ringroute.io/v1alpha1
kind: HashModel
switches:
  some-other-leaf: {function: crc32}
"""
NODES = ["npu-0", "npu-8", "npu-16", "npu-24"]


def steering_settings(tmp_path: Path, model: str, *, planning_process: bool = False) -> Settings:
    (tmp_path / "hash-model.yaml").write_text(model, encoding="utf-8")
    (tmp_path / "settings.yaml").write_text(
        "planning: {routing: pinned, qpsPerConnection: 2}\ntopology: {hashModelFile: hash-model.yaml}\n",
        encoding="utf-8",
    )
    loaded = load_settings(tmp_path / "settings.yaml")
    assert loaded.topology.hash_model_file == str(tmp_path / "hash-model.yaml")
    controller = fast_settings(planning_process=planning_process).controller
    return msgspec.structs.replace(loaded, controller=controller)


@pytest.mark.parametrize("planning_process", [False, True], ids=["thread", "planning-process"])
async def test_the_completed_configmap_carries_the_steered_ports(tmp_path: Path, planning_process: bool) -> None:
    settings = steering_settings(tmp_path, DECLARED, planning_process=planning_process)
    async with running_controller(settings=settings) as h:
        job = make_job("steered", 4)
        await add_job(h.server, job)
        for i, node in enumerate(NODES):
            await h.server.apply("pods", make_pod(job, i, node))
        await h.wait_status("steered", "completed", timeout_s=30)
        data = h.data("steered")
        cache = hccl_multi_qp.load(data["MultiQpSrcPort.cfg"])
        assert len(cache) == 2 * 4 * 8, "4 cross-leaf ring edges x 8 NICs, both directions"
        assert all(len(ports) == 2 for ports in cache.values())
        [completed] = await h.wait_events("RankTableCompleted")
        assert "source ports steer 64 address pairs x 2 queue pairs" in completed["message"]
        assert not h.events("RankTableFallback")


async def test_a_model_that_does_not_know_the_leaves_falls_back_with_a_warning(tmp_path: Path) -> None:
    async with running_controller(settings=steering_settings(tmp_path, UNRELATED)) as h:
        job = make_job("unsteered", 4)
        await add_job(h.server, job)
        for i, node in enumerate(NODES):
            await h.server.apply("pods", make_pod(job, i, node))
        await h.wait_status("unsteered", "completed", timeout_s=30)
        [fallback] = await h.wait_events("RankTableFallback")
        assert fallback["type"] == "Warning"
        assert fallback["message"].startswith("pinned routes not steered by source ports: the hash model does not know")
        cache = hccl_multi_qp.load(h.data("unsteered")["MultiQpSrcPort.cfg"])
        assert all(len(ports) == 2 for ports in cache.values()), "two queue pairs still get spread ports"


def test_a_settings_file_naming_a_broken_hash_model_is_refused_at_start_up(tmp_path: Path) -> None:
    from webhook.common.settings import SettingsError

    (tmp_path / "hash-model.yaml").write_text("tiers: {leaf: {function: md5}}\n", encoding="utf-8")
    (tmp_path / "settings.yaml").write_text("topology: {hashModelFile: hash-model.yaml}\n", encoding="utf-8")
    with pytest.raises(SettingsError, match=r"topology.hashModelFile: .*tiers.leaf.function: 'md5' is not one of"):
        load_settings(tmp_path / "settings.yaml")
    (tmp_path / "settings.yaml").write_text("topology: {hashModelFile: missing.yaml}\n", encoding="utf-8")
    with pytest.raises(SettingsError, match=r"topology.hashModelFile: .*missing.yaml: cannot read"):
        load_settings(tmp_path / "settings.yaml")
