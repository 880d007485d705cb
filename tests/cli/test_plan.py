"""`ringroute plan`, `simulate` and `topology generate` end to end, run through `webhook.cli.main`."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from planner import load_kube_objects, parse_rank_table, parse_ranks_env
from tests.support.pods import ANNOTATION_1980, pod, pod_list, sample_job_pods
from webhook.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
PODS = ROOT / "examples" / "pods" / "llm-pretrain-pods.yaml"
TOPOLOGIES = ROOT / "examples" / "topologies"
NODES = TOPOLOGIES / "nodes-16.yaml"


def write(path: Path, objects: Any) -> Path:
    path.write_text(yaml.safe_dump(objects, sort_keys=False), encoding="utf-8")
    return path


def run_plan(out: Path, *extra: str, pods: Path = PODS) -> int:
    return main(["plan", "--pods", str(pods), *extra, "--out-dir", str(out)])


@pytest.mark.parametrize(
    "source",
    [
        ["--nodes", str(NODES)],
        ["--nodes", str(NODES), "--topology-labels", "volcano.sh/tor"],
        ["--hypernodes", str(TOPOLOGIES / "hypernodes-16.yaml"), "--nodes", str(NODES)],
        ["--tor-configmap", str(TOPOLOGIES / "basic-tor-node-cm.yaml")],
        ["--topology", str(TOPOLOGIES / "cluster-16.yaml")],
    ],
)
def test_plan_writes_table_ranks_and_report_that_agree(tmp_path: Path, source: list[str]) -> None:
    out = tmp_path / "out"
    assert run_plan(out, *source) == 0
    assert sorted(p.name for p in out.iterdir()) == ["jobstart_hccl.json", "ranks.env", "ringroute-plan.json"]
    table = parse_rank_table((out / "jobstart_hccl.json").read_text(encoding="utf-8"))
    ranks = parse_ranks_env((out / "ranks.env").read_text(encoding="utf-8"))
    report = json.loads((out / "ringroute-plan.json").read_text(encoding="utf-8"))
    pods = {p["metadata"]["name"]: p for p in load_kube_objects(PODS.read_text(encoding="utf-8"))}
    assert table["status"] == "completed"
    assert sorted(ranks.values()) == list(range(12))
    assert ranks["llm-pretrain-worker-0"] == 0
    by_rank = sorted(ranks, key=ranks.__getitem__)
    assert [row["container_ip"] for row in table["server_list"]] == [pods[n]["status"]["podIP"] for n in by_rank]
    assert report["order"] == by_rank
    after = report["after"]
    assert after["cross_edges"][0] == after["cross_edge_bounds"][0] == 4


def test_same_inputs_give_byte_identical_outputs(tmp_path: Path) -> None:
    assert run_plan(tmp_path / "a", "--nodes", str(NODES)) == 0
    assert run_plan(tmp_path / "b", "--nodes", str(NODES)) == 0
    for name in ("jobstart_hccl.json", "ranks.env"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    first, second = (json.loads((tmp_path / d / "ringroute-plan.json").read_text()) for d in "ab")
    first.pop("wall_time_s", None)
    second.pop("wall_time_s", None)
    assert first["order"] == second["order"]


def test_pinned_routing_also_writes_routes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run_plan(out, "--topology", str(TOPOLOGIES / "cluster-16.yaml"), "--routing", "pinned") == 0
    routes = json.loads((out / "routes.json").read_text(encoding="utf-8"))
    assert routes
    assert run_plan(out, "--topology", str(TOPOLOGIES / "cluster-16.yaml")) == 0
    assert not (out / "routes.json").exists()


def test_super_pod_profile_writes_a_1_2_table(tmp_path: Path) -> None:
    pods = [pod("big", "worker", i, i * 4, devices=16, super_pod=True) for i in range(4)]
    for p in pods:
        p["metadata"]["labels"]["ring-controller.cce"] = "ascend-1980-snt9b23"
    path = write(tmp_path / "pods.yaml", pod_list(pods))
    out = tmp_path / "out"
    assert run_plan(out, "--nodes", str(NODES), pods=path) == 0
    table = parse_rank_table((out / "jobstart_hccl.json").read_text(encoding="utf-8"))
    assert table["version"] == "1.2"
    assert len(table["server_list"][0]["device"]) == 16
    assert table["super_pod_list"][0]["super_pod_id"] == "0"


def broken_pods(case: str) -> list[dict[str, Any]]:
    pods = sample_job_pods()
    if case == "missing-annotation":
        del pods[3]["metadata"]["annotations"][ANNOTATION_1980]
    elif case == "unbound":
        pods[3] = pod("llm-pretrain", "worker", 3, None)
    elif case == "device-failed":
        pods[3] = pod("llm-pretrain", "worker", 3, 12, device_ips=["-1"] + [f"192.168.12.{d}" for d in range(7)])
    elif case == "not-an-ip":
        pods[3] = pod("llm-pretrain", "worker", 3, 12, device_ips=["300.1.1.1"] + [f"192.168.12.{d}" for d in range(7)])
    elif case == "duplicate-device":
        pods[3] = pod("llm-pretrain", "worker", 3, 12, device_ids=["0", "1", "2", "3", "4", "5", "6", "6"])
    elif case == "two-pods-one-node":
        pods[3] = pod("llm-pretrain", "worker", 3, 0)
    return pods


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("missing-annotation", f"pod default/llm-pretrain-worker-3: metadata.annotations[{ANNOTATION_1980}]: missing"),
        ("unbound", "pod default/llm-pretrain-worker-3: spec.nodeName: not bound"),
        (
            "device-failed",
            "llm-pretrain-worker-3: metadata.annotations[" + ANNOTATION_1980 + '].devices[0].device_ip: "-1"',
        ),
        ("not-an-ip", "devices[0].device_ip: '300.1.1.1' is not an IP address"),
        ("duplicate-device", "devices[7].device_id: device 6 is listed twice"),
        ("two-pods-one-node", "spec.nodeName: node npu-00 runs 2 pods"),
    ],
)
def test_bad_pods_fail_in_one_line_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, expected: str
) -> None:
    path = write(tmp_path / "pods.yaml", pod_list(broken_pods(case)))
    out = tmp_path / "out"
    assert run_plan(out, "--nodes", str(NODES), pods=path) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert err.startswith(f"ringroute plan: error: --pods {path}: ")
    assert expected in err
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["pods.yaml"]


def assert_fails(capsys: pytest.CaptureFixture[str], out: Path, argv: list[str], expected: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err, err
    assert expected in err
    assert not out.exists()


def test_fewer_pods_than_expected_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    argv = ["plan", "--pods", str(PODS), "--nodes", str(NODES), "--expected-pods", "16", "--out-dir", str(out)]
    assert_fails(capsys, out, argv, "job: pods: found 12 of 16 NPU pods")


def test_node_without_labels_fails_naming_the_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = load_kube_objects(NODES.read_text(encoding="utf-8"))
    broken = copy.deepcopy(nodes)
    del broken[4]["metadata"]["labels"]["volcano.sh/tor"]
    path = write(tmp_path / "nodes.yaml", {"apiVersion": "v1", "kind": "List", "items": broken})
    out = tmp_path / "out"
    argv = ["plan", "--pods", str(PODS), "--nodes", str(path), "--out-dir", str(out)]
    assert_fails(capsys, out, argv, "node npu-04: has no topology label volcano.sh/tor")


def test_unknown_label_keys_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    argv = [
        "plan",
        "--pods",
        str(PODS),
        "--nodes",
        str(NODES),
        "--topology-labels",
        "example.com/rack",
        "--out-dir",
        str(out),
    ]
    assert_fails(capsys, out, argv, "label key example.com/rack: no node carries it")


def test_malformed_yaml_fails_with_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pods.yaml"
    path.write_text("apiVersion: v1\nkind: List\nitems:\n  - metadata: {name: x\n", encoding="utf-8")
    out = tmp_path / "out"
    argv = ["plan", "--pods", str(path), "--nodes", str(NODES), "--out-dir", str(out)]
    assert_fails(capsys, out, argv, f"--pods {path}: malformed YAML at line")


def test_missing_topology_source_and_missing_file_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert_fails(capsys, out, ["plan", "--pods", str(PODS), "--out-dir", str(out)], "topology: missing")
    assert_fails(
        capsys,
        out,
        ["plan", "--pods", str(tmp_path / "none.yaml"), "--nodes", str(NODES), "--out-dir", str(out)],
        "cannot read",
    )


def test_existing_out_dir_gets_every_file_replaced(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "jobstart_hccl.json").write_text('{"status":"initializing"}', encoding="utf-8")
    assert run_plan(out, "--nodes", str(NODES)) == 0
    assert parse_rank_table((out / "jobstart_hccl.json").read_text())["status"] == "completed"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_simulate_prints_a_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "--pods", str(PODS), "--topology", str(TOPOLOGIES / "cluster-16.yaml"), "--seeds", "3"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    for name in ("pod-index", "hostname", "nslb", "leaf-grouped", "ringroute"):
        assert name in text
    assert "12 (4)" in text  # pod-index order crosses a leaf on every ring edge
    assert main([*argv, "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["orders"]["ringroute"]["cross_edges"] == [4]
    assert payload["orders"]["pod-index"]["cross_edges"] == [12]


def test_topology_generate_writes_a_file_and_matching_nodes(tmp_path: Path) -> None:
    out, nodes_out = tmp_path / "t.yaml", tmp_path / "nodes.yaml"
    argv = [
        "topology",
        "generate",
        "--leaves",
        "6",
        "--servers-per-leaf",
        "4",
        "--leaves-per-pod",
        "3",
        "--oversubscription",
        "2",
        "--out",
        str(out),
        "--nodes-out",
        str(nodes_out),
    ]
    assert main(argv) == 0
    from planner import load_topology_file, topology_from_nodes

    topology = load_topology_file(out.read_text(encoding="utf-8"))
    assert topology.tiers == 2
    assert topology.fabric.leaf_oversubscription == 2.0
    nodes = load_kube_objects(nodes_out.read_text(encoding="utf-8"))
    assert dict(topology_from_nodes(nodes).paths) == dict(topology.paths)


def test_simulate_plot_writes_a_png(tmp_path: Path) -> None:
    png = tmp_path / "loads.png"
    argv = ["simulate", "--pods", str(PODS), "--nodes", str(NODES), "--seeds", "2", "--plot", str(png)]
    assert main(argv) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
