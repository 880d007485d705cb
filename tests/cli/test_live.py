"""`ringroute plan|simulate --job NAMESPACE/NAME` against the emulated API server, through a kubeconfig and the real
kubernetes_asyncio client: the same output as the file inputs on the same objects, read-only, one-line errors."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import tomllib
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest
import yaml

from emulation.apiserver import Fault, Request
from emulation.cluster import make_job
from tests.support.whatif import JOB, NS, PODS, ROOT, TOPOLOGIES, cluster, write_kubeconfig
from webhook.cli.main import main, program_name


def outputs(directory: Path) -> dict[str, Any]:
    """The files of a plan; the report parsed, without the planner's wall times (the one thing that varies)."""
    files: dict[str, Any] = {p.name: p.read_text(encoding="utf-8") for p in sorted(directory.iterdir())}
    files["ringroute-plan.json"] = report = json.loads(files["ringroute-plan.json"])
    report.pop("wall_time_s")
    if report.get("steering") is not None:
        report["steering"].pop("wall_time_s")
    return files


def no_writes(requests: list[Request]) -> None:
    assert requests, "no request reached the API server"
    assert {r.method for r in requests} == {"GET"}, [f"{r.method} {r.path}" for r in requests if r.method != "GET"]


# -- same output as the files -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("served", "file_topology", "source"),
    [
        ({}, ["--nodes", "nodes.yaml"], "labels"),
        ({"hypernodes": True}, ["--hypernodes", "hypernodes.yaml", "--nodes", "nodes.yaml"], "hypernodes"),
        ({"tor": True}, ["--tor-configmap", "tor.yaml", "--nodes", "nodes.yaml"], "basic-tor-node-cm"),
    ],
)
async def test_plan_job_writes_what_plan_writes_from_the_same_objects_as_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], served: dict[str, bool], file_topology: list[str], source: str
) -> None:
    async with cluster(tmp_path, **served) as live:
        assert await live.run("plan", "--job", f"{NS}/{JOB}", "--out-dir", str(tmp_path / "live")) == 0
        live_line = capsys.readouterr().out.strip()
        requests = live.reads()
        live.dump("pods.yaml", "pods", NS)
        live.dump("nodes.yaml", "nodes", labelled="volcano.sh/tor")  # kubectl get nodes -l volcano.sh/tor
        if served.get("hypernodes"):
            live.dump("hypernodes.yaml", "hypernodes")
        if served.get("tor"):
            tor = live.server.get("configmaps", "kube-system", "basic-tor-node-cm")
            (tmp_path / "tor.yaml").write_text(yaml.safe_dump(tor), encoding="utf-8")
    files = [str(tmp_path / arg) if arg.endswith(".yaml") else arg for arg in file_topology]
    pods = str(tmp_path / "pods.yaml")
    assert main(["plan", "--pods", pods, *files, "--out-dir", str(tmp_path / "files")]) == 0
    file_line = capsys.readouterr().out.strip()
    assert outputs(tmp_path / "live") == outputs(tmp_path / "files")
    assert live_line.replace(str(tmp_path / "live"), "DIR") == file_line.replace(str(tmp_path / "files"), "DIR")
    report = json.loads((tmp_path / "live" / "ringroute-plan.json").read_text(encoding="utf-8"))
    assert report["after"]["cross_edges"][0] == 4
    no_writes(requests)
    read = {r.path for r in requests}
    assert ("/apis/topology.volcano.sh/v1alpha1/hypernodes" in read) == (source == "hypernodes")
    assert ("/api/v1/namespaces/kube-system/configmaps/basic-tor-node-cm" in read) == (source != "hypernodes")


async def test_simulate_job_prints_what_simulate_prints_from_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with cluster(tmp_path, hypernodes=True) as live:
        assert await live.run("simulate", "--job", f"{NS}/{JOB}", "--json", "--seeds", "3") == 0
        from_cluster = json.loads(capsys.readouterr().out)
        no_writes(live.reads())
    argv = ["simulate", "--pods", str(PODS), "--hypernodes", str(TOPOLOGIES / "hypernodes-16.yaml")]
    assert main([*argv, "--nodes", str(TOPOLOGIES / "nodes-16.yaml"), "--json", "--seeds", "3"]) == 0
    from_files = json.loads(capsys.readouterr().out)
    for summary in (from_cluster, from_files):
        summary["plan"].pop("wall_time_s")
    assert from_cluster == from_files
    assert from_cluster["topology"] == "hypernodes"


async def test_the_namespace_defaults_to_the_kubeconfig_contexts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with cluster(tmp_path) as live:
        for namespace in (NS, "team-b"):
            kubeconfig = write_kubeconfig(tmp_path / namespace, live.server.url, namespace=namespace)
            argv = ["plan", "--job", JOB, "--out-dir", str(tmp_path / "out"), "--kubeconfig", str(kubeconfig)]
            assert await asyncio.to_thread(main, argv) == (0 if namespace == NS else 2)
        printed = capsys.readouterr()
        assert "12 servers x 8 devices" in printed.out
        assert f"--job team-b/{JOB}: no Volcano Job {JOB} in namespace team-b" in printed.err


async def test_topology_flags_given_as_files_win_and_the_cluster_is_not_asked_for_them(tmp_path: Path) -> None:
    async with cluster(tmp_path, hypernodes=True, tor=True) as live:
        topology = str(TOPOLOGIES / "cluster-16.yaml")
        assert (
            await live.run("plan", "--job", f"{NS}/{JOB}", "--topology", topology, "--out-dir", str(tmp_path / "t"))
            == 0
        )
        paths = [r.path for r in live.reads()]
        assert not any("/nodes" in p or "hypernodes" in p or "configmaps" in p for p in paths), paths
        since = len(live.reads())
        out = str(tmp_path / "labels")
        labels = ("--topology-labels", "volcano.sh/tor")
        assert await live.run("plan", "--job", f"{NS}/{JOB}", *labels, "--out-dir", out) == 0
        paths = [r.path for r in live.reads(since)]
        assert any(p.endswith("/nodes") for p in paths)
        assert not any("hypernodes" in p or "configmaps" in p for p in paths), paths
        report = json.loads((tmp_path / "labels" / "ringroute-plan.json").read_text(encoding="utf-8"))
        assert report["after"]["cross_edges"][0] == 4


# -- one-line errors, exit status 2 ------------------------------------------------------------------------------


def the_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err, err
    assert "Traceback" not in err
    return err


async def test_a_missing_job_an_empty_job_and_a_bad_reference_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "out")
    async with cluster(tmp_path) as live:
        assert await live.run("plan", "--job", f"{NS}/nope", "--out-dir", out) == 2
        assert the_error(capsys) == (
            "ringroute plan: error: --job default/nope: no Volcano Job nope in namespace default; check the name "
            "(kubectl get vcjob -n default)"
        )
        empty = make_job("empty", 4)
        empty["metadata"]["namespace"] = NS
        await live.server.apply("jobs", empty)
        assert await live.run("simulate", "--job", f"{NS}/empty") == 2
        assert the_error(capsys) == (
            "ringroute simulate: error: --job default/empty: no pods yet (label volcano.sh/job-name=empty); wait "
            "until Volcano creates them and the scheduler places them"
        )
        assert await live.run("plan", "--job", "a/b/c", "--out-dir", out) == 2
        assert "--job a/b/c: expected NAMESPACE/NAME or NAME" in the_error(capsys)
        no_writes(live.reads())
    assert not (tmp_path / "out").exists()


async def test_pods_the_planner_refuses_give_the_error_the_file_gives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with cluster(tmp_path) as live:

        def unbind(pod: dict[str, Any]) -> None:
            del pod["spec"]["nodeName"]

        await live.server.mutate("pods", NS, f"{JOB}-worker-3", unbind)
        assert await live.run("plan", "--job", f"{NS}/{JOB}", "--out-dir", str(tmp_path / "out")) == 2
        from_cluster = the_error(capsys)
        pods = live.dump("pods.yaml", "pods", NS)
    nodes = str(TOPOLOGIES / "nodes-16.yaml")
    assert main(["plan", "--pods", str(pods), "--nodes", nodes, "--out-dir", str(tmp_path / "out")]) == 2
    from_files = the_error(capsys)
    assert from_cluster.startswith("ringroute plan: error: --job default/llm-pretrain: pod default/llm-pretrain-")
    assert "spec.nodeName: not bound to a node yet" in from_cluster
    assert from_cluster.partition(": pod ")[2] == from_files.partition(": pod ")[2]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/pods", "cannot list pods in namespace default (HTTP 403: injected fault)"),
        ("/jobs/", "cannot get jobs.batch.volcano.sh in namespace default (HTTP 403: injected fault)"),
        ("/api/v1/nodes", "cannot list nodes (HTTP 403: injected fault)"),
        ("/hypernodes", "cannot list hypernodes.topology.volcano.sh (HTTP 403: injected fault)"),
    ],
)
async def test_a_forbidden_read_names_the_verb_and_the_resource(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str, expected: str
) -> None:
    async with cluster(tmp_path, hypernodes=True) as live:
        live.server.faults.append(Fault("GET", path, status=403, times=-1))
        assert await live.run("plan", "--job", f"{NS}/{JOB}", "--out-dir", str(tmp_path / "out")) == 2
        err = the_error(capsys)
        assert err.startswith(f"ringroute plan: error: forbidden: {expected}; grant the read-only role"), err
        no_writes(live.reads())


def test_an_unreachable_cluster_and_a_missing_kubeconfig_or_context_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{port}")
    out = str(tmp_path / "out")
    argv = ["plan", "--job", f"{NS}/{JOB}", "--out-dir", out]
    assert main([*argv, "--kubeconfig", str(kubeconfig)]) == 2
    err = the_error(capsys)
    assert err.startswith(f"ringroute plan: error: cluster http://127.0.0.1:{port}: unreachable ("), err
    assert err.endswith("check --kubeconfig and --context (kubectl cluster-info)")
    assert main([*argv, "--kubeconfig", str(tmp_path / "absent")]) == 2
    assert the_error(capsys) == f"ringroute plan: error: --kubeconfig {tmp_path / 'absent'}: no such file"
    assert main([*argv, "--kubeconfig", str(kubeconfig), "--context", "other"]) == 2
    assert the_error(capsys).startswith("ringroute plan: error: --context other: cannot load ")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert main(argv) == 2
    assert the_error(capsys) == "ringroute plan: error: kubeconfig: no file at ~/.kube/config; pass --kubeconfig FILE"
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))  # $KUBECONFIG is read as kubectl reads it
    assert main(argv) == 2
    assert "unreachable" in the_error(capsys)


def test_cluster_options_need_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--pods", str(PODS), "--nodes", str(TOPOLOGIES / "nodes-16.yaml"), "--out-dir", str(tmp_path)]
    assert main([*argv, "--context", "x"]) == 2
    assert the_error(capsys) == "ringroute plan: error: --context: only applies with --job"
    with pytest.raises(SystemExit) as exited:
        main(["plan", "--job", "a/b", "--pods", str(PODS), "--out-dir", str(tmp_path)])
    assert exited.value.code == 2
    assert "argument --pods: not allowed with argument --job" in the_error(capsys)


# -- kubectl plugin ------------------------------------------------------------------------------------------------


def test_kubectl_ringroute_is_an_installed_command_that_runs_main() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert scripts["kubectl-ringroute"] == scripts["ringroute"] == "webhook.cli.main:main"
    (entry,) = entry_points(group="console_scripts", name="kubectl-ringroute")
    assert entry.load() is main
    executable = Path(sys.executable).with_name("kubectl-ringroute")  # where pip put it, next to this python
    done = subprocess.run([str(executable), "plan", "--help"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: kubectl ringroute plan ")
    assert "--job [NAMESPACE/]NAME" in done.stdout


def test_as_a_kubectl_plugin_errors_and_help_name_kubectl_ringroute(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert program_name("/usr/local/bin/kubectl-ringroute") == "kubectl ringroute"
    assert program_name("/home/me/.local/bin/ringroute") == "ringroute"
    monkeypatch.setattr(sys, "argv", ["/usr/local/bin/kubectl-ringroute"])
    with pytest.raises(SystemExit):
        main(["plan", "--job", "team-a/llama"])
    assert the_error(capsys) == (
        "kubectl ringroute plan: error: the following arguments are required: --out-dir; "
        "see kubectl ringroute plan --help"
    )
    assert main(["plan", "--job", "a/b/c", "--out-dir", "x"]) == 2
    assert the_error(capsys).startswith("kubectl ringroute plan: error: --job a/b/c: ")
