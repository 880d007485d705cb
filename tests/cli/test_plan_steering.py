"""`ringroute plan --routing pinned --hash-model FILE`: the MultiQpSrcPort.cfg HCCL reads, every queue pair of
routes.json on its planned spine by the reference hash, and the settings' hash model file."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest

from planner import HashSpec
from planner.fabric._hashing import hash_output
from tests.support import hccl_multi_qp
from webhook.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
PODS = ROOT / "examples" / "pods" / "llm-pretrain-pods.yaml"
NODES = ROOT / "examples" / "topologies" / "nodes-16.yaml"
LEAF_HASH = HashSpec("crc16-ccitt", seed=0x1D0F, bucket="modulo")
MODEL = """apiVersion: ringroute.io/v1alpha1
kind: HashModel
tiers:
  leaf: {function: crc16-ccitt, seed: 0x1d0f, bucket: modulo}
"""


def plan(out: Path, *extra: str) -> int:
    return main(["plan", "--pods", str(PODS), "--nodes", str(NODES), *extra, "--out-dir", str(out)])


@pytest.mark.parametrize("qps", [1, 4])
def test_every_queue_pair_of_the_written_plan_takes_its_planned_spine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], qps: int
) -> None:
    model = tmp_path / "hash-model.yaml"
    model.write_text(MODEL, encoding="utf-8")
    out = tmp_path / "out"
    assert plan(out, "--routing", "pinned", "--qps", str(qps), "--hash-model", str(model)) == 0
    printed = capsys.readouterr().out
    assert "source ports steer 64 address pairs" in printed
    assert "ring bus bandwidth 1.000 of line rate" in printed
    cache = hccl_multi_qp.load((out / "MultiQpSrcPort.cfg").read_text(encoding="utf-8"))
    routes = json.loads((out / "routes.json").read_text(encoding="utf-8"))
    assert routes["version"] == "2"
    assert routes["qps"] == qps
    uplinks = 32  # 4 servers x 8 NICs under each leaf of nodes-16, 1:1
    for flow in routes["flows"]:
        ports = hccl_multi_qp.source_ports(cache, flow["src_ip"], flow["dst_ip"])
        assert ports[flow["qp"]] == flow["sport"]
        src, dst = (int(ipaddress.IPv4Address(flow[k])) for k in ("src_ip", "dst_ip"))
        assert hash_output(LEAF_HASH, src, dst, flow["sport"]) % uplinks == flow["spine"]
    assert len(routes["flows"]) == 32 * qps  # 4 ring edges cross leaves, 8 NICs each
    report = json.loads((out / "ringroute-plan.json").read_text(encoding="utf-8"))
    assert report["steering"]["mode"] == "steered"
    assert report["steering"]["off_plan_queue_pairs"] == 0
    assert report["steering"]["predicted"]["ring_busbw"] == pytest.approx(1.0)


def test_the_settings_hash_model_file_is_read_relative_to_the_settings_file(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "hash-model.yaml").write_text(MODEL, encoding="utf-8")
    settings = conf / "settings.yaml"
    settings.write_text(
        "planning: {routing: pinned, qpsPerConnection: 2, sourcePorts: [30000, 39999]}\n"
        "topology: {hashModelFile: hash-model.yaml}\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    assert plan(out, "--settings", str(settings)) == 0
    cache = hccl_multi_qp.load((out / "MultiQpSrcPort.cfg").read_text(encoding="utf-8"))
    assert cache
    assert all(len(ports) == 2 and all(30000 <= p <= 39999 for p in ports) for ports in cache.values())


def test_without_a_model_more_than_one_queue_pair_gets_spread_ports_and_an_expectation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert plan(out, "--qps", "4") == 0
    assert "ECMP still hashes them, expected max link load 2.16 -> 1.09 flows" in capsys.readouterr().out
    cache = hccl_multi_qp.load((out / "MultiQpSrcPort.cfg").read_text(encoding="utf-8"))
    assert len(cache) == 64
    assert not (out / "routes.json").exists()


def test_one_queue_pair_without_a_model_writes_no_port_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert plan(out, "--routing", "pinned") == 0
    assert not (out / "MultiQpSrcPort.cfg").exists()
    assert json.loads((out / "routes.json").read_text(encoding="utf-8"))["flows"][0]["sport"] is None


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("tiers: {leaf: {function: crc64}}", "tiers.leaf.function: 'crc64' is not one of"),
        ("tiers: [", "malformed YAML"),
    ],
)
def test_a_bad_hash_model_is_one_line_naming_the_flag_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str, message: str
) -> None:
    path = tmp_path / "hash-model.yaml"
    path.write_text(model, encoding="utf-8")
    out = tmp_path / "out"
    assert plan(out, "--routing", "pinned", "--hash-model", str(path)) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"ringroute plan: error: --hash-model {path}: ")
    assert message in error
    assert "\n" not in error
    assert not out.exists()


@pytest.mark.parametrize("ports", ["49152", "60000-50000", "0-10", "1-99999", "a-b"])
def test_a_bad_source_port_range_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], ports: str) -> None:
    assert plan(tmp_path / "out", "--qps", "2", "--source-ports", ports) == 2
    assert f"--source-ports {ports}:" in capsys.readouterr().err


def test_simulate_adds_the_steered_prediction(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "hash-model.yaml"
    model.write_text(MODEL, encoding="utf-8")
    argv = ["simulate", "--pods", str(PODS), "--nodes", str(NODES), "--routing", "pinned", "--qps", "4"]
    assert main([*argv, "--hash-model", str(model), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    steered = printed["orders"]["ringroute + steered ports"]
    assert steered["max_link_load"] == steered["max_link_load_bound"] == 1
    assert printed["steering"]["switches"][0]["model"] == "declared"


def test_the_page_shows_the_switches_and_the_queue_pairs_with_their_ports(tmp_path: Path) -> None:
    model = tmp_path / "hash-model.yaml"
    model.write_text(MODEL, encoding="utf-8")
    page = tmp_path / "plan.html"
    assert plan(tmp_path / "out", "--routing", "pinned", "--hash-model", str(model), "--html", str(page)) == 0
    html = page.read_text(encoding="utf-8")
    assert "Source ports (MultiQpSrcPort.cfg)" in html
    assert 'data-switch="leaf-0"' in html
    routes = json.loads((tmp_path / "out" / "routes.json").read_text(encoding="utf-8"))
    first = routes["flows"][0]
    assert f'<td class="num">{first["sport"]}</td>' in html
