"""The launcher script run by dash against ConfigMap files as kubelet mounts them."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.tools import require_tool
from webhook.common.launcher import LAUNCHER_TIMEOUT_PLACEHOLDER, launcher_script


def dash() -> str:
    """Debian's POSIX sh, stricter than bash: what the launcher must run under."""
    return require_tool("dash", "apt-get install dash")


ENV_DUMP = 'echo "NODE_RANK=$NODE_RANK RANK_AFTER_ACC=$RANK_AFTER_ACC MASTER_ADDR=$MASTER_ADDR '
ENV_DUMP += 'WORLD_SIZE=$WORLD_SIZE RANK_TABLE_FILE=$RANK_TABLE_FILE ARGS=$* QP=${HCCL_RDMA_QP_PORT_CONFIG_PATH-unset}"'


def completed_table(pods: list[str], *, host_network: bool = False, pod_ips: bool = True) -> dict[str, Any]:
    """A completed table as the controller writes it: a hostNetwork pod's container_ip is its node's IP."""
    servers = []
    for rank in range(len(pods)):
        server: dict[str, Any] = {"server_id": f"192.168.0.{rank + 10}", "host_ip": f"192.168.0.{rank + 10}"}
        if pod_ips:
            server["container_ip"] = f"192.168.0.{rank + 10}" if host_network else f"172.16.0.{rank + 10}"
        server["device"] = [
            {"device_id": str(d), "device_ip": f"10.0.{rank}.{d}", "rank_id": str(rank * 2 + d)} for d in range(2)
        ]
        servers.append(server)
    return {"status": "completed", "version": "1.0", "server_count": str(len(pods)), "server_list": servers}


def write_mount(mount: Path, table: dict[str, Any] | str, ranks: dict[str, int], *, indent: int | None = None) -> None:
    mount.mkdir(parents=True, exist_ok=True)
    text = table if isinstance(table, str) else json.dumps(table, indent=indent)
    (mount / "jobstart_hccl.json").write_text(text, encoding="utf-8")
    (mount / "ranks.env").write_text("".join(f"{p}={r}\n" for p, r in ranks.items()), encoding="utf-8")
    (mount / "ringroute-launcher.sh").write_text(launcher_script(30), encoding="utf-8")


def run_launcher(
    mount: Path, pod: str | None, *, timeout: int = 5, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "RINGROUTE_LAUNCHER_TIMEOUT": str(timeout), "RINGROUTE_LAUNCHER_POLL": "1"}
    # Nothing of this machine's: no hccn_tool, no /etc/hccn.conf, no termination message.
    env.update(
        RINGROUTE_HCCN_TOOL="none", RINGROUTE_HCCN_CONF=str(mount / "no-hccn.conf"), RINGROUTE_TERMINATION_LOG=""
    )
    if pod is not None:
        env["POD_NAME"] = pod
    env.update(extra_env or {})
    return subprocess.run(
        [dash(), str(mount / "ringroute-launcher.sh"), "--", "sh", "-c", ENV_DUMP, "cmd", "a b", "c"],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout + 10,
        check=False,
    )


PODS = ["job-worker-0", "job-worker-1", "job-worker-2"]


@pytest.mark.parametrize("indent", [None, 2])
def test_completed_table_exports_the_routed_rank_and_execs_the_command(tmp_path: Path, indent: int | None) -> None:
    write_mount(
        tmp_path,
        completed_table(["job-worker-0", "job-worker-2", "job-worker-1"]),
        {
            "job-worker-0": 0,
            "job-worker-2": 1,
            "job-worker-1": 2,
        },
        indent=indent,
    )
    result = run_launcher(tmp_path, "job-worker-1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        f"NODE_RANK=2 RANK_AFTER_ACC=2 MASTER_ADDR=172.16.0.10 WORLD_SIZE=3 "
        f"RANK_TABLE_FILE={tmp_path}/jobstart_hccl.json ARGS=a b c QP=unset"
    )


def test_host_network_pods_use_the_node_ip_the_table_names_as_container_ip(tmp_path: Path) -> None:
    write_mount(tmp_path, completed_table(PODS, host_network=True), {p: i for i, p in enumerate(PODS)})
    result = run_launcher(tmp_path, "job-worker-0")
    assert result.returncode == 0, result.stderr
    assert "NODE_RANK=0 " in result.stdout
    assert "MASTER_ADDR=192.168.0.10 " in result.stdout


def test_a_completed_table_without_the_rank_zero_pod_ip_never_falls_back_to_the_host_ip(tmp_path: Path) -> None:
    write_mount(tmp_path, completed_table(PODS, pod_ips=False), {p: i for i, p in enumerate(PODS)})
    started = time.monotonic()
    result = run_launcher(tmp_path, "job-worker-1", timeout=1)
    assert result.returncode == 1
    assert time.monotonic() - started >= 1, "it waits for the pod IP first"
    assert result.stdout == "", "the command never runs with a guessed MASTER_ADDR"
    assert "its rank-0 server (192.168.0.10) has no container_ip after 1s" in result.stderr
    assert "MASTER_ADDR must be the rank-0 pod's IP" in result.stderr


def test_the_rank_zero_pod_ip_written_during_the_wait_releases_the_launcher(tmp_path: Path) -> None:
    ranks = {p: i for i, p in enumerate(PODS)}
    write_mount(tmp_path, completed_table(PODS, pod_ips=False), ranks)
    env = {"PATH": os.environ["PATH"], "POD_NAME": "job-worker-2", "RINGROUTE_LAUNCHER_TIMEOUT": "20"}
    env["RINGROUTE_LAUNCHER_POLL"] = "1"
    process = subprocess.Popen(
        [dash(), str(tmp_path / "ringroute-launcher.sh"), "--", "sh", "-c", ENV_DUMP, "cmd"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.2)
    assert process.poll() is None, "still waiting for the rank-0 pod IP"
    write_mount(tmp_path, completed_table(PODS), ranks)
    out, err = process.communicate(timeout=15)
    assert process.returncode == 0, err
    assert "MASTER_ADDR=172.16.0.10 " in out


def test_initializing_table_times_out_with_a_clear_message(tmp_path: Path) -> None:
    write_mount(tmp_path, '{\n    "status":"initializing"\n}\n', {})
    started = time.monotonic()
    result = run_launcher(tmp_path, "job-worker-0", timeout=1)
    assert result.returncode == 1
    assert time.monotonic() - started < 8
    assert "still says status 'initializing' after 1s" in result.stderr
    assert "RINGROUTE_LAUNCHER_TIMEOUT" in result.stderr
    assert result.stdout == ""


def test_missing_pod_entry_fails_after_the_timeout_naming_the_pod(tmp_path: Path) -> None:
    write_mount(tmp_path, completed_table(PODS), {p: i for i, p in enumerate(PODS)})
    result = run_launcher(tmp_path, "job-worker-7", timeout=1)
    assert result.returncode == 1
    assert "has no entry for pod job-worker-7" in result.stderr


def test_table_completed_during_the_wait_releases_the_launcher(tmp_path: Path) -> None:
    write_mount(tmp_path, '{"status":"initializing"}', {})
    env = {
        "PATH": os.environ["PATH"],
        "POD_NAME": "job-worker-2",
        "RINGROUTE_LAUNCHER_TIMEOUT": "20",
        "RINGROUTE_LAUNCHER_POLL": "1",
    }
    process = subprocess.Popen(
        [dash(), str(tmp_path / "ringroute-launcher.sh"), "--", "sh", "-c", ENV_DUMP, "cmd"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.2)
    assert process.poll() is None
    write_mount(tmp_path, completed_table(PODS), {p: i for i, p in enumerate(PODS)})
    out, err = process.communicate(timeout=15)
    assert process.returncode == 0, err
    assert "NODE_RANK=2 " in out
    assert "WORLD_SIZE=3 " in out


def test_missing_pod_name_is_an_immediate_error(tmp_path: Path) -> None:
    write_mount(tmp_path, completed_table(PODS), {p: i for i, p in enumerate(PODS)})
    result = run_launcher(tmp_path, None)
    assert result.returncode == 1
    assert "POD_NAME is not set" in result.stderr


def test_a_rank_table_file_elsewhere_is_honoured(tmp_path: Path) -> None:
    write_mount(tmp_path / "mount", completed_table(PODS), {p: i for i, p in enumerate(PODS)})
    (tmp_path / "mount" / "ringroute-launcher.sh").rename(tmp_path / "ringroute-launcher.sh")
    result = run_launcher(
        tmp_path, "job-worker-1", extra_env={"RANK_TABLE_FILE": str(tmp_path / "mount" / "jobstart_hccl.json")}
    )
    assert result.returncode == 0, result.stderr
    assert "NODE_RANK=1 " in result.stdout


def test_gzip_compressed_table_is_decompressed_for_the_command(tmp_path: Path) -> None:
    import gzip

    table = completed_table(PODS)
    write_mount(tmp_path / "m", '{"status":"completed","compressed":"jobstart_hccl.json.gz"}', {"job-worker-1": 1})
    (tmp_path / "m" / "jobstart_hccl.json.gz").write_bytes(gzip.compress(json.dumps(table).encode()))
    work = tmp_path / "work"
    work.mkdir()
    result = run_launcher(tmp_path / "m", "job-worker-1", extra_env={"RINGROUTE_WORK_DIR": str(work)})
    assert result.returncode == 0, result.stderr
    assert f"RANK_TABLE_FILE={work}/jobstart_hccl.json " in result.stdout
    assert "MASTER_ADDR=172.16.0.10 WORLD_SIZE=3 " in result.stdout
    assert json.loads((work / "jobstart_hccl.json").read_text()) == table


QP_LINES = "# ringroute steered source ports\n10.0.0.0,10.0.1.0=50001,50002\n10.0.1.0,10.0.0.0=50003,50004\n"


def test_the_source_port_file_is_handed_to_hccl_only_when_the_configmap_has_it(tmp_path: Path) -> None:
    write_mount(tmp_path / "m", completed_table(PODS), {"job-worker-1": 1})
    without = run_launcher(tmp_path / "m", "job-worker-1")
    assert without.returncode == 0, without.stderr
    assert "QP=unset" in without.stdout
    (tmp_path / "m" / "MultiQpSrcPort.cfg").write_text(QP_LINES, encoding="utf-8")
    with_ports = run_launcher(tmp_path / "m", "job-worker-1")
    assert with_ports.returncode == 0, with_ports.stderr
    assert f"QP={tmp_path / 'm'}" in with_ports.stdout
    assert "qp_ports=unverified:device-settings" in with_ports.stderr


def test_a_gzip_compressed_source_port_file_is_decompressed_for_hccl(tmp_path: Path) -> None:
    import gzip

    write_mount(tmp_path / "m", completed_table(PODS), {"job-worker-1": 1})
    (tmp_path / "m" / "MultiQpSrcPort.cfg.gz").write_bytes(gzip.compress(QP_LINES.encode()))
    work = tmp_path / "work"
    work.mkdir()
    result = run_launcher(tmp_path / "m", "job-worker-1", extra_env={"RINGROUTE_WORK_DIR": str(work)})
    assert result.returncode == 0, result.stderr
    assert f"QP={work}/ringroute-qp-ports" in result.stdout
    assert (work / "ringroute-qp-ports" / "MultiQpSrcPort.cfg").read_text(encoding="utf-8") == QP_LINES


def test_a_source_port_path_the_job_sets_itself_is_kept_and_the_launcher_says_so(tmp_path: Path) -> None:
    write_mount(tmp_path / "m", completed_table(PODS), {"job-worker-1": 1})
    (tmp_path / "m" / "MultiQpSrcPort.cfg").write_text(QP_LINES, encoding="utf-8")
    own = {"HCCL_RDMA_QP_PORT_CONFIG_PATH": "/opt/site-ports"}
    result = run_launcher(tmp_path / "m", "job-worker-1", extra_env=own)
    assert result.returncode == 0, result.stderr
    assert "QP=/opt/site-ports" in result.stdout
    assert "qp_ports=ignored:job-path: HCCL_RDMA_QP_PORT_CONFIG_PATH=/opt/site-ports is set by the job and kept" in (
        result.stderr
    )


def test_launcher_has_its_timeout_default_filled_in_and_uses_no_bashisms() -> None:
    script = launcher_script(1234)
    assert LAUNCHER_TIMEOUT_PLACEHOLDER not in script
    assert "RINGROUTE_LAUNCHER_TIMEOUT:-1234}" in script
    assert script.startswith("#!/bin/sh\n")
    for bashism in ("[[ ", "function ", "local ", "$'", "<<<", "pipefail", "${!"):
        assert bashism not in script
    check = subprocess.run([dash(), "-n"], input=script, capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stderr


def test_the_launcher_polls_its_local_file_every_second_by_default(tmp_path: Path) -> None:
    """A read of a local file costs nothing: the default poll is 1 s, so the command starts within a second of
    kubelet writing the table (a `sleep` on PATH before the real one records each wait)."""
    write_mount(tmp_path, '{"status":"initializing"}', {})
    shims = tmp_path / "bin"
    shims.mkdir()
    waits = tmp_path / "waits"
    real_sleep = require_tool("sleep", "apt-get install coreutils")
    (shims / "sleep").write_text(f'#!/bin/sh\necho "$@" >>{waits}\nexec {real_sleep} "$@"\n', encoding="utf-8")
    (shims / "sleep").chmod(0o755)
    env = {"PATH": f"{shims}:{os.environ['PATH']}", "POD_NAME": "job-worker-1", "RINGROUTE_LAUNCHER_TIMEOUT": "2"}
    result = subprocess.run(
        [dash(), str(tmp_path / "ringroute-launcher.sh"), "--", "true"],
        check=False,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert "still says status 'initializing' after 2s" in result.stderr
    assert waits.read_text(encoding="utf-8").split() == ["1", "1"]
