"""`ringroute plan --running DIR` and `ringroute fabric load`: a job planned around the jobs already on the fabric,
their loads read back from the files as HCCL reads them, and every bad directory refused in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from planner import load_kube_objects
from tests.support.pods import pod, pod_list, sample_job_pods
from webhook.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
PODS = ROOT / "examples" / "pods" / "llm-pretrain-pods.yaml"
NODES = ROOT / "examples" / "topologies" / "nodes-16.yaml"
MODEL = """apiVersion: ringroute.io/v1alpha1
kind: HashModel
tiers:
  leaf: {function: crc16-ccitt, seed: 0x1d0f, bucket: modulo}
"""
SECOND_NODES = (3, 7, 11, 15)
"""The four nodes the sample job leaves free: one under each of the 4 leaves, so every ring edge crosses a leaf."""


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    model = tmp_path / "hash-model.yaml"
    model.write_text(MODEL, encoding="utf-8")
    second = tmp_path / "second-pods.yaml"
    second.write_text(yaml.safe_dump(pod_list(sample_job_pods("second", SECOND_NODES))), encoding="utf-8")
    return {"model": model, "second": second}


def plan(pods: Path, out: Path, model: Path, *extra: str) -> int:
    args = ["plan", "--pods", str(pods), "--nodes", str(NODES), "--routing", "pinned", "--hash-model", str(model)]
    return main([*args, *extra, "--out-dir", str(out)])


def fabric(*dirs: Path, model: Path, json_out: bool = True) -> int:
    running = [arg for d in dirs for arg in ("--running", str(d))]
    args = ["fabric", "load", *running, "--nodes", str(NODES), "--hash-model", str(model)]
    return main([*args, "--json"] if json_out else args)


def loads(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


@pytest.mark.parametrize("qps", ["1", "4"])
def test_a_job_planned_around_a_running_one_shares_no_spine_with_it(
    tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str], qps: str
) -> None:
    first, alone, around = tmp_path / "first", tmp_path / "alone", tmp_path / "around"
    assert plan(PODS, first, inputs["model"], "--qps", qps) == 0
    written = {p.name: p.read_bytes() for p in first.iterdir()}
    assert plan(inputs["second"], alone, inputs["model"], "--qps", qps) == 0
    assert plan(inputs["second"], around, inputs["model"], "--qps", qps, "--running", str(first)) == 0
    printed = capsys.readouterr().out
    assert "on the shared fabric (1 running jobs): busiest link" in printed
    assert "predicted bus bandwidth 1.000 of line rate" in printed
    assert {p.name: p.read_bytes() for p in first.iterdir()} == written, "a running job's files never change"

    # both jobs alone on the same lowest spines; around the first, the second takes other ones
    assert fabric(first, alone, model=inputs["model"]) == 0
    collided = loads(capsys)
    # each leaf: 8 flows out of each job over 32 uplinks; alone, both on the same 8 spines (the lowest-numbered)
    assert collided["max_link_load"] == pytest.approx(2 / int(qps))
    assert fabric(first, around, model=inputs["model"]) == 0
    shared = loads(capsys)
    # around the first: every link carries one flow, or with 4 queue pairs the 64 of a leaf two a link
    assert shared["max_link_load"] == pytest.approx(1.0 if qps == "1" else 0.5)
    assert shared["bound"] == 1.0
    jobs = {job["job"]: job for job in shared["jobs"]}
    assert {job["delivery"] for job in jobs.values()} == {"hashed"}, "ports followed through the hash model"
    assert all(job["predicted_busbw"] == 1.0 for job in jobs.values())
    report = json.loads((around / "ringroute-plan.json").read_text(encoding="utf-8"))
    assert report["fabric"]["other_jobs"] == 1
    assert report["fabric"]["other_jobs_load"] == (0.0 if qps == "1" else 0.25), "the other job's share of its link"
    assert report["fabric"]["predicted_busbw"] == 1.0
    assert sorted(report["nodes"]) == [f"npu-{n:02d}" for n in SECOND_NODES], "each rank's node, in rank order"
    assert report["nodes"][0] == "npu-03", "rank 0 on task index 0"


def test_fabric_load_prints_the_busiest_links_and_the_jobs_on_them(
    tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    first, alone = tmp_path / "first", tmp_path / "alone"
    assert plan(PODS, first, inputs["model"]) == 0
    assert plan(inputs["second"], alone, inputs["model"]) == 0
    capsys.readouterr()
    page = tmp_path / "fabric.html"
    args = ["fabric", "load", "--running", str(first), "--running", str(alone), "--nodes", str(NODES)]
    assert main([*args, "--hash-model", str(inputs["model"]), "--top", "3", "--html", str(page)]) == 0
    text = capsys.readouterr().out
    assert "max link load 2.00 flows (bound 1 over every job's flows together: each job could run at line" in text
    assert "aggregate predicted bus bandwidth 0.500 of line rate" in text
    busiest = text.split("busiest links:\n", 1)[1].split("jobs:\n", 1)[0].splitlines()
    assert len(busiest) == 3
    assert all(line.split()[4:] == [str(alone), "1.00,", str(first), "1.00"] for line in busiest), busiest
    assert 'data-field="fabric-grid"' in page.read_text(encoding="utf-8")


def test_a_running_dir_that_is_not_a_plan_is_one_line_exit_2_and_nothing_is_written(
    tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "out"
    assert plan(inputs["second"], out, inputs["model"], "--running", str(empty)) == 2
    error = capsys.readouterr().err.strip()
    assert error == (
        f"ringroute plan: error: --running {empty}: no jobstart_hccl.json; not a plan directory (give an earlier "
        "--out-dir)"
    )
    assert not out.exists()
    (empty / "jobstart_hccl.json").write_text('{"status":"initializing"}', encoding="utf-8")
    assert plan(inputs["second"], out, inputs["model"], "--running", str(empty)) == 2
    assert "jobstart_hccl.json: status is 'initializing'; a running job's is completed" in capsys.readouterr().err
    assert not out.exists()


def test_a_running_job_on_nodes_outside_the_topology_is_refused_naming_the_directory(
    tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    first = tmp_path / "first"
    assert plan(PODS, first, inputs["model"]) == 0
    nodes = [n for n in load_kube_objects(NODES.read_text(encoding="utf-8")) if n["metadata"]["name"] != "npu-00"]
    fewer = tmp_path / "nodes.yaml"
    fewer.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes}), encoding="utf-8")
    out = tmp_path / "out"
    args = ["plan", "--pods", str(inputs["second"]), "--nodes", str(fewer), "--routing", "pinned"]
    assert main([*args, "--running", str(first), "--out-dir", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"ringroute plan: error: --running {first}: node of rank ")
    assert "node 'npu-00'" in error
    assert "is not in the topology" in error
    assert not out.exists()


def test_running_jobs_that_share_a_device_ip_are_refused_naming_the_field(
    tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    first, copy = tmp_path / "first", tmp_path / "copy"
    assert plan(PODS, first, inputs["model"]) == 0
    # a job on the free nodes whose first server claims the device IPs of the first job's node 0
    clashing = [
        pod("third", "worker", i, node, device_ips=[f"192.168.0.{d + 10}" for d in range(8)] if i == 0 else None)
        for i, node in enumerate(SECOND_NODES)
    ]
    third = tmp_path / "third-pods.yaml"
    third.write_text(yaml.safe_dump(pod_list(clashing)), encoding="utf-8")
    assert plan(third, copy, inputs["model"]) == 0
    out = tmp_path / "out"
    assert plan(inputs["second"], out, inputs["model"], "--running", str(first), "--running", str(copy)) == 2
    error = capsys.readouterr().err.strip()
    assert "server_list[" in error
    assert "].device_ip: " in error
    assert "device IPs are unique on a fabric" in error
    assert not out.exists()
    # the job being planned on a running job's nodes
    assert plan(PODS, out, inputs["model"], "--running", str(first)) == 2
    assert "also runs pod llm-pretrain-worker-" in capsys.readouterr().err
    assert not out.exists()


def test_a_running_job_whose_routes_cannot_be_read_counts_as_unsteered_with_a_warning(
    tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    first = tmp_path / "first"
    assert plan(PODS, first, inputs["model"]) == 0
    (first / "MultiQpSrcPort.cfg").write_text("not,a=port file\n", encoding="utf-8")
    (first / "routes.json").write_text("{broken", encoding="utf-8")
    out = tmp_path / "out"
    assert plan(inputs["second"], out, inputs["model"], "--running", str(first)) == 0
    assert any("counted as unsteered (ECMP)" in r.getMessage() for r in caplog.records)
    capsys.readouterr()
    assert fabric(first, out, model=inputs["model"]) == 0
    jobs = {job["job"]: job for job in loads(capsys)["jobs"]}
    assert jobs[str(first)]["delivery"] == "ecmp"
    assert jobs[str(out)]["delivery"] == "hashed"


async def test_live_plans_around_the_clusters_rank_tables_and_fabric_load_reads_them(
    tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.support.whatif import JOB, NS, cluster

    second = tmp_path / "second"
    assert plan(inputs["second"], second, inputs["model"]) == 0
    data = {p.name: p.read_text(encoding="utf-8") for p in second.iterdir()}
    async with cluster(tmp_path) as live:
        meta = {"name": "configmap1980-second", "namespace": NS, "labels": {"ring-controller.cce": "ascend-1980"}}
        await live.server.apply("configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data})
        capsys.readouterr()
        out = tmp_path / "out"
        argv = ["plan", "--job", f"{NS}/{JOB}", "--routing", "pinned", "--hash-model", str(inputs["model"])]
        assert await live.run(*argv, "--out-dir", str(out)) == 0
        assert "on the shared fabric (1 running jobs)" in capsys.readouterr().out
        report = json.loads((out / "ringroute-plan.json").read_text(encoding="utf-8"))
        assert report["fabric"]["other_jobs"] == 1
        assert report["fabric"]["other_jobs_load"] == 0.0
        assert await live.run("fabric", "load", "--cluster", "--hash-model", str(inputs["model"]), "--json") == 0
        document = loads(capsys)
        assert [job["job"] for job in document["jobs"]] == [f"{NS}/second"]
        assert document["jobs"][0]["delivery"] == "hashed"
        assert all(r.method == "GET" for r in live.reads()), "read-only"


def test_the_plan_page_pictures_the_shared_fabric_with_the_new_jobs_routes(
    tmp_path: Path, inputs: dict[str, Path]
) -> None:
    first, around, page = tmp_path / "first", tmp_path / "around", tmp_path / "plan.html"
    assert plan(PODS, first, inputs["model"]) == 0
    assert plan(inputs["second"], around, inputs["model"], "--running", str(first), "--html", str(page)) == 0
    text = page.read_text(encoding="utf-8")
    assert "<h2>The shared fabric</h2>" in text
    grid = text.split('data-field="fabric-grid"', 1)[1]
    assert "default/second (this plan)" in grid, "hovering a cell of this plan's links names it"
    assert str(first) in grid


def test_a_huge_file_in_a_running_dir_is_refused_or_skipped_before_it_is_read(
    tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    first, out = tmp_path / "first", tmp_path / "out"
    assert plan(PODS, first, inputs["model"]) == 0
    with (first / "routes.json").open("r+b") as routes:  # sparse: 300 MiB on paper, nothing on disk
        routes.truncate(300 * 1024 * 1024)
    assert plan(inputs["second"], out, inputs["model"], "--running", str(first)) == 0
    assert any("routes.json larger than 64 MiB, not read" in r.getMessage() for r in caplog.records)
    with (first / "ringroute-plan.json").open("r+b") as report:
        report.truncate(300 * 1024 * 1024)
    capsys.readouterr()
    assert plan(inputs["second"], tmp_path / "again", inputs["model"], "--running", str(first)) == 2
    assert capsys.readouterr().err.strip() == (
        f"ringroute plan: error: --running {first}: ringroute-plan.json is larger than 64 MiB; not a plan file"
    )
    assert not (tmp_path / "again").exists()


def test_a_running_dir_whose_report_nests_100000_deep_is_one_line(
    tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    first = tmp_path / "first"
    assert plan(PODS, first, inputs["model"]) == 0
    (first / "ringroute-plan.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    capsys.readouterr()
    assert plan(inputs["second"], tmp_path / "out", inputs["model"], "--running", str(first)) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"ringroute plan: error: --running {first} ringroute-plan.json: not JSON")
    assert "\n" not in error
