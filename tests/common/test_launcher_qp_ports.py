"""The launcher's verdict on the source-port file: whether HCCL will use MultiQpSrcPort.cfg or ignore it.

HCCL (hcomm `MulQpInfo::Init`) takes, per NPU, hccn_tool's multi_qp ports, then NSLB-DP, then the file. The pod
sees those device settings through `hccn_tool -i <device> -udp -g` and through the record hccn_tool keeps in
`/etc/hccn.conf` (`udp_port_mode_<device>=multi_qp` or `code:nslb_dp`); both are faked here: the record as a
file at RINGROUTE_HCCN_CONF, hccn_tool as a script at RINGROUTE_HCCN_TOOL that answers as the driver's
`tool_show_multi_roce_ports` prints.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.common.test_launcher import dash, write_mount

PODS = ["job-worker-0", "job-worker-1", "job-worker-2"]
DEVICES = [[0, 1], [4, 5], [2, 3]]
"""Physical ids of each pod's NPUs, distinct so a test sees which pod's devices the launcher asks about."""
QP_LINES = "# ringroute steered source ports\n10.0.0.0,10.0.1.0=50001,50002\n10.0.1.0,10.0.0.0=50003,50004\n"
DUMP = 'echo "QP=${HCCL_RDMA_QP_PORT_CONFIG_PATH-unset} PORTS=${RINGROUTE_QP_PORTS-unset}"'
MULTI_QP = "udp_port:50001,50002\nstatus:multi_qp\nqp_count:2\n"
NSLB_DP = "udp_port:calculated by the NSLB-DP algorithm\nstatus:code(nslb_dp)\nlisten_port:16668\n"
AUTO = "udp_port:4791\nstatus:auto\n"


def table(devices: list[list[int]], *, version: str = "1.0") -> dict[str, Any]:
    """A completed table whose server r (node rank r) has the NPUs devices[r]; 1.2 adds super-pod fields."""
    servers = []
    for rank, ids in enumerate(devices):
        entries: list[dict[str, str]] = []
        for local, device_id in enumerate(ids):
            entry = {"device_id": str(device_id)}
            if version == "1.2":
                entry["super_device_id"] = str(900 + rank * 10 + local)
            entry.update(device_ip=f"10.0.{rank}.{device_id}", rank_id=str(rank * len(ids) + local))
            entries.append(entry)
        servers.append(
            {
                "server_id": f"192.168.0.{rank + 10}",
                "host_ip": f"192.168.0.{rank + 10}",
                "container_ip": f"172.16.0.{rank + 10}",
                "device": entries,
            }
        )
    result: dict[str, Any] = {
        "status": "completed",
        "version": version,
        "server_count": str(len(servers)),
        "server_list": servers,
    }
    if version == "1.2":
        result["super_pod_list"] = [
            {"super_pod_id": "0", "server_list": [{"server_id": s["server_id"]} for s in servers]}
        ]
    return result


def steered_mount(mount: Path, devices: list[list[int]] | None = None, *, version: str = "1.0") -> Path:
    """A completed ConfigMap volume with MultiQpSrcPort.cfg, as ringroute writes it when it steers."""
    layout = devices or DEVICES
    write_mount(mount, table(layout, version=version), {f"job-worker-{r}": r for r in range(len(layout))})
    (mount / "MultiQpSrcPort.cfg").write_text(QP_LINES, encoding="utf-8")
    return mount


class FakeHccnTool:
    """An executable standing in for hccn_tool: per device an answer, an exit status, or a hang."""

    def __init__(self, where: Path) -> None:
        self.dir = where
        where.mkdir(parents=True, exist_ok=True)
        self.calls = where / "calls"
        self.path = where / "hccn_tool"
        self.path.write_text(
            "#!/bin/sh\n"
            f'echo "$* LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >>{self.calls}\n'
            f'if [ -f {where}/"$2".hang ]; then echo $$ >{where}/"$2".pid; exec sleep 30; fi\n'
            f'if [ -f {where}/"$2".out ]; then cat {where}/"$2".out; fi\n'
            f'exit "$(cat {where}/"$2".rc 2>/dev/null || echo 0)"\n',
            encoding="utf-8",
        )
        self.path.chmod(0o755)

    def answer(self, device: int, text: str, *, exit_status: int = 0) -> None:
        (self.dir / f"{device}.out").write_text(text, encoding="utf-8")
        (self.dir / f"{device}.rc").write_text(str(exit_status), encoding="utf-8")

    def hang(self, device: int) -> None:
        (self.dir / f"{device}.hang").write_text("", encoding="utf-8")

    def hung_pid(self, device: int) -> int:
        return int((self.dir / f"{device}.pid").read_text(encoding="utf-8"))

    def asked(self) -> list[str]:
        """The arguments of every call, in the order the calls began."""
        if not self.calls.exists():
            return []
        return [line.split(" LD_LIBRARY_PATH=")[0] for line in self.calls.read_text(encoding="utf-8").splitlines()]

    def library_paths(self) -> set[str]:
        return {line.split(" LD_LIBRARY_PATH=")[1] for line in self.calls.read_text(encoding="utf-8").splitlines()}


def launch(
    mount: Path,
    pod: str,
    *,
    hccn_conf: Path,
    tool: FakeHccnTool | str | None = "none",
    env: Mapping[str, str] | None = None,
    preexec: Callable[[], None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the ConfigMap's launcher as pod `pod` with the device settings faked (`tool` None: RINGROUTE_HCCN_TOOL
    unset, so the launcher looks for hccn_tool itself)."""
    variables = {
        "PATH": os.environ["PATH"],
        "POD_NAME": pod,
        "RINGROUTE_LAUNCHER_TIMEOUT": "5",
        "RINGROUTE_LAUNCHER_POLL": "1",
        "RINGROUTE_HCCN_CONF": str(hccn_conf),
        "RINGROUTE_TERMINATION_LOG": "",
        "RINGROUTE_WORK_DIR": str(mount.parent),
    }
    if tool is not None:
        variables["RINGROUTE_HCCN_TOOL"] = str(tool.path) if isinstance(tool, FakeHccnTool) else tool
    variables.update(env or {})
    return subprocess.run(
        [dash(), str(mount / "ringroute-launcher.sh"), "--", "sh", "-c", DUMP],
        env=variables,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        preexec_fn=preexec,
    )


def verdict_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one `qp_ports=` line the launcher logs for a port file."""
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("ringroute-launcher: qp_ports=")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def ports_env(result: subprocess.CompletedProcess[str]) -> str:
    """RINGROUTE_QP_PORTS as the command sees it."""
    return result.stdout.split("PORTS=")[1].strip()


def record(path: Path, text: str | bytes) -> Path:
    """A fake /etc/hccn.conf."""
    if isinstance(text, str):
        text = text.encode()
    path.write_bytes(text)
    return path


HOST_CONFIG = "address_4=10.0.1.4\nnetmask_4=255.255.255.0\naddress_5=10.0.1.5\nnetmask_5=255.255.255.0\n"
"""What /etc/hccn.conf holds on a node whose NPUs only have their addresses set."""


def test_without_a_port_file_the_verdict_is_none_and_no_device_is_asked(tmp_path: Path) -> None:
    write_mount(tmp_path / "m", table(DEVICES), {p: r for r, p in enumerate(PODS)})
    tool = FakeHccnTool(tmp_path / "tool")
    result = launch(tmp_path / "m", "job-worker-1", hccn_conf=record(tmp_path / "hccn.conf", HOST_CONFIG), tool=tool)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "QP=unset PORTS=none"
    assert "qp_ports=none" in result.stderr.splitlines()[-1]
    assert not any(line.startswith("ringroute-launcher: qp_ports=") for line in result.stderr.splitlines())
    assert tool.asked() == []


def test_nothing_set_on_the_pods_devices_means_the_file_is_in_effect(tmp_path: Path) -> None:
    mount = steered_mount(tmp_path / "m")
    result = launch(mount, "job-worker-1", hccn_conf=record(tmp_path / "hccn.conf", HOST_CONFIG))
    line = verdict_line(result)
    assert line.startswith(f"ringroute-launcher: qp_ports=in-effect: HCCL_RDMA_QP_PORT_CONFIG_PATH={mount}: ")
    assert f"device 4: none ({tmp_path}/hccn.conf has no udp_port_mode_4)" in line
    assert f"device 5: none ({tmp_path}/hccn.conf has no udp_port_mode_5)" in line
    assert "HCCL_RDMA_QPS_PER_CONNECTION" not in line
    assert result.stdout.strip() == f"QP={mount} PORTS=in-effect"
    assert result.stderr.splitlines()[-1].endswith(", qp_ports=in-effect")


@pytest.mark.parametrize(
    "hccn_conf",
    [
        "udp_port_mode_5=code:nslb_dp\nnslb_dp_listen_port_5=16668\n",
        HOST_CONFIG + "udp_port_mode_5=code:nslb_dp\nnslb_dp_listen_port_5=16668\n",
        "# NSLB-DP on card 5\nudp_port_mode_5=code:nslb_dp\n",
        "udp_port_mode_5=code:nslb_dp",  # the last line without its newline
        "udp_port_mode_55=multi_qp\nudp_port_mode_5=code:nslb_dp\n",  # another device's key first
        "udp_port_mode_5=code:nslb_dp\nudp_port_mode_5=multi_qp\n",  # the first line with the key counts
    ],
    ids=["alone", "after-addresses", "after-a-comment", "no-newline", "after-device-55", "first-wins"],
)
def test_nslb_dp_recorded_for_a_device_of_the_pod_makes_hccl_ignore_the_file(tmp_path: Path, hccn_conf: str) -> None:
    mount = steered_mount(tmp_path / "m")
    result = launch(mount, "job-worker-1", hccn_conf=record(tmp_path / "hccn.conf", hccn_conf))
    line = verdict_line(result)
    assert line.startswith("ringroute-launcher: qp_ports=ignored:nslb-dp: MultiQpSrcPort.cfg will be ignored by HCCL")
    assert (
        "on device 5: NSLB-DP (hccn_tool -i <device> -udp -s code -t nslb-dp) comes first and gives every connection "
        "one queue pair whose port it chooses"
    ) in line
    assert "steering is not in effect" in line
    assert f"device 5: nslb_dp ({tmp_path}/hccn.conf: udp_port_mode_5=code:nslb_dp)" in line
    assert result.stdout.strip() == f"QP={mount} PORTS=ignored:nslb-dp", "the path is exported all the same"


@pytest.mark.parametrize(
    "hccn_conf",
    [
        " udp_port_mode_5=code:nslb_dp\n",  # hccn_tool matches the key from the first column only
        "\tudp_port_mode_5=code:nslb_dp\n",
        "udp_port_mode_5 = code:nslb_dp\n",  # the first "=" must follow the key
        "udp_port_mode_5 =code:nslb_dp\n",
        "#udp_port_mode_5=code:nslb_dp\n",
        "UDP_PORT_MODE_5=code:nslb_dp\n",  # keys are case-sensitive
        "udp-port-mode-5=code:nslb_dp\n",
        "udp_port_mode_55=code:nslb_dp\nudp_port_mode_50=code:nslb_dp\n",
        "udp_port_mode=code:nslb_dp\n",  # no device suffix
        "udp_port_mode_5\n",
    ],
    ids=["space", "tab", "spaced-equals", "space-before-equals", "comment", "upper", "dashes", "other-devices",
         "no-device", "no-equals"],
)  # fmt: skip
def test_lines_hccn_tool_does_not_read_as_the_key_leave_the_file_in_effect(tmp_path: Path, hccn_conf: str) -> None:
    mount = steered_mount(tmp_path / "m")
    result = launch(mount, "job-worker-1", hccn_conf=record(tmp_path / "hccn.conf", hccn_conf))
    line = verdict_line(result)
    assert line.startswith("ringroute-launcher: qp_ports=in-effect: ")
    assert f"device 5: none ({tmp_path}/hccn.conf has no udp_port_mode_5)" in line
    assert ports_env(result) == "in-effect"


@pytest.mark.parametrize(
    ("hccn_conf", "shown"),
    [
        ("udp_port_mode_5=nslb_dp\n", "nslb_dp"),  # the device-side value: hccn_tool records code:nslb_dp
        ("udp_port_mode_5= code:nslb_dp\n", " code:nslb_dp"),  # nothing is trimmed
        ("udp_port_mode_5=code:nslb_dp \n", "code:nslb_dp "),
        ("udp_port_mode_5=code:nslb_dp\r\n", "code:nslb_dp?"),  # a carriage return stays in the value
        ("udp_port_mode_5=CODE:NSLB_DP\n", "CODE:NSLB_DP"),
        ("udp_port_mode_5=code:nslb_dp # NSLB\n", "code:nslb_dp # NSLB"),  # no comments after a value
        ("udp_port_mode_5=auto\n", "auto"),  # auto and fixed ports clear the key instead
        ("udp_port_mode_5=\n", ""),
    ],
    ids=["device-value", "leading-space", "trailing-space", "crlf", "upper", "comment", "auto", "empty"],
)
def test_a_recorded_value_hccn_tool_never_writes_leaves_the_verdict_unverified(
    tmp_path: Path, hccn_conf: str, shown: str
) -> None:
    mount = steered_mount(tmp_path / "m")
    result = launch(mount, "job-worker-1", hccn_conf=record(tmp_path / "hccn.conf", hccn_conf))
    line = verdict_line(result)
    assert line.startswith(
        f"ringroute-launcher: qp_ports=unverified:device-settings: HCCL_RDMA_QP_PORT_CONFIG_PATH={mount} is exported, "
        "but whether HCCL uses MultiQpSrcPort.cfg could not be checked for device 5: "
    )
    assert f"device 5: unknown ({tmp_path}/hccn.conf: udp_port_mode_5={shown} is no value hccn_tool writes)" in line
    assert "device 4: none" in line
    assert ports_env(result) == "unverified:device-settings"


def test_multi_qp_recorded_for_a_device_makes_hccl_ignore_the_file(tmp_path: Path) -> None:
    mount = steered_mount(tmp_path / "m")
    conf = "udp_port_mode_4=multi_qp\nmulti_qp_count_4=4\nmulti_qp_udp_ports_4=50001,50002,50003,50004\n"
    result = launch(mount, "job-worker-1", hccn_conf=record(tmp_path / "hccn.conf", conf))
    line = verdict_line(result)
    assert line.startswith(
        "ringroute-launcher: qp_ports=ignored:hccn-multi-qp: MultiQpSrcPort.cfg will be ignored by HCCL on device 4: "
        "hccn_tool's multi_qp mode (hccn_tool -i <device> -udp -s multi_qp) comes first and gives every connection of "
        "the device its ports; steering is not in effect"
    )
    assert f"device 4: multi_qp ({tmp_path}/hccn.conf: udp_port_mode_4=multi_qp)" in line
    assert ports_env(result) == "ignored:hccn-multi-qp"


def test_every_overridden_device_is_named_and_the_first_decides_the_reason(tmp_path: Path) -> None:
    mount = steered_mount(tmp_path / "m")
    conf = "udp_port_mode_5=multi_qp\nudp_port_mode_4=code:nslb_dp\n"
    line = verdict_line(launch(mount, "job-worker-1", hccn_conf=record(tmp_path / "hccn.conf", conf)))
    assert line.startswith("ringroute-launcher: qp_ports=ignored:nslb-dp: ")
    assert "will be ignored by HCCL on devices 4 5: " in line
    assert "device 4: nslb_dp (" in line
    assert "device 5: multi_qp (" in line


def test_only_the_devices_of_the_pods_own_server_are_checked(tmp_path: Path) -> None:
    devices = [[r, r + 8] for r in range(5)]
    mount = steered_mount(tmp_path / "m", devices)
    tool = FakeHccnTool(tmp_path / "tool")
    for device in range(16):
        tool.answer(device, AUTO)
    conf = "".join(f"udp_port_mode_{d}=multi_qp\n" for d in range(16) if d not in (3, 11))
    line = verdict_line(launch(mount, "job-worker-3", hccn_conf=record(tmp_path / "hccn.conf", conf), tool=tool))
    assert sorted(tool.asked()) == ["-i 11 -udp -g", "-i 3 -udp -g"]
    assert line.startswith("ringroute-launcher: qp_ports=in-effect: ")
    assert "device 3: none (hccn_tool -i 3 -udp -g: status:auto); device 11: none (hccn_tool -i 11 -udp -g" in line


@pytest.mark.parametrize("rank", [0, 2])
def test_super_device_ids_and_the_super_pod_list_of_a_1_2_table_are_not_taken_for_devices(
    tmp_path: Path, rank: int
) -> None:
    mount = steered_mount(tmp_path / "m", version="1.2")
    tool = FakeHccnTool(tmp_path / "tool")
    for device in range(8):
        tool.answer(device, AUTO)
    line = verdict_line(launch(mount, PODS[rank], hccn_conf=tmp_path / "absent", tool=tool))
    assert sorted(tool.asked()) == sorted(f"-i {d} -udp -g" for d in DEVICES[rank])
    assert line.startswith("ringroute-launcher: qp_ports=in-effect: ")


def test_a_gzip_compressed_table_and_port_file_are_checked_like_plain_ones(tmp_path: Path) -> None:
    mount = tmp_path / "m"
    write_mount(mount, '{"status":"completed","compressed":"jobstart_hccl.json.gz"}', {"job-worker-1": 1})
    (mount / "jobstart_hccl.json.gz").write_bytes(gzip.compress(json.dumps(table(DEVICES)).encode()))
    (mount / "MultiQpSrcPort.cfg.gz").write_bytes(gzip.compress(QP_LINES.encode()))
    result = launch(mount, "job-worker-1", hccn_conf=record(tmp_path / "hccn.conf", "udp_port_mode_5=multi_qp\n"))
    assert verdict_line(result).startswith("ringroute-launcher: qp_ports=ignored:hccn-multi-qp: ")
    assert result.stdout.strip() == f"QP={tmp_path}/ringroute-qp-ports PORTS=ignored:hccn-multi-qp"


def test_a_table_without_device_ids_for_the_pod_leaves_the_verdict_unverified(tmp_path: Path) -> None:
    mount = steered_mount(tmp_path / "m", [[0, 1], [], [2, 3]])
    line = verdict_line(launch(mount, "job-worker-1", hccn_conf=record(tmp_path / "hccn.conf", HOST_CONFIG)))
    assert line == (
        f"ringroute-launcher: qp_ports=unverified:no-devices: HCCL_RDMA_QP_PORT_CONFIG_PATH={mount} is exported, but "
        "whether HCCL uses MultiQpSrcPort.cfg could not be checked: the rank table lists no device_id for this pod "
        "(node rank 1)"
    )


def test_hccn_tool_answers_for_the_device_ahead_of_the_record(tmp_path: Path) -> None:
    mount = steered_mount(tmp_path / "m")
    tool = FakeHccnTool(tmp_path / "tool")
    tool.answer(4, AUTO)
    tool.answer(5, MULTI_QP)
    result = launch(mount, "job-worker-1", hccn_conf=record(tmp_path / "hccn.conf", HOST_CONFIG), tool=tool)
    line = verdict_line(result)
    assert line.startswith("ringroute-launcher: qp_ports=ignored:hccn-multi-qp: ")
    assert "device 4: none (hccn_tool -i 4 -udp -g: status:auto)" in line
    assert "device 5: multi_qp (hccn_tool -i 5 -udp -g: status:multi_qp)" in line
    assert sorted(tool.asked()) == ["-i 4 -udp -g", "-i 5 -udp -g"]
    assert ports_env(result) == "ignored:hccn-multi-qp"


def test_hccn_tool_reporting_nslb_dp_makes_hccl_ignore_the_file(tmp_path: Path) -> None:
    mount = steered_mount(tmp_path / "m")
    tool = FakeHccnTool(tmp_path / "tool")
    tool.answer(4, NSLB_DP)
    tool.answer(5, NSLB_DP)
    line = verdict_line(launch(mount, "job-worker-1", hccn_conf=tmp_path / "absent", tool=tool))
    assert line.startswith("ringroute-launcher: qp_ports=ignored:nslb-dp: ")
    assert "on devices 4 5: NSLB-DP" in line
    assert "device 5: nslb_dp (hccn_tool -i 5 -udp -g: status:code(nslb_dp))" in line


def test_a_live_answer_of_auto_outweighs_a_record_of_multi_qp(tmp_path: Path) -> None:
    """The record is what hccn_tool re-applies after a device reset; the live answer is the device now."""
    mount = steered_mount(tmp_path / "m")
    tool = FakeHccnTool(tmp_path / "tool")
    tool.answer(4, AUTO)
    tool.answer(5, "udp_port:50100\nstatus:custom\n")
    conf = "udp_port_mode_4=multi_qp\nudp_port_mode_5=multi_qp\n"
    line = verdict_line(launch(mount, "job-worker-1", hccn_conf=record(tmp_path / "hccn.conf", conf), tool=tool))
    assert line.startswith("ringroute-launcher: qp_ports=in-effect: ")
    assert "device 5: none (hccn_tool -i 5 -udp -g: status:custom)" in line


@pytest.mark.parametrize(
    ("answer", "exit_status"),
    [
        (MULTI_QP, 1),  # a failed query's output is not believed
        ("udp_port:unknown\n", 0),  # hccn_tool's answer for a multi-port mode it does not know
        ("Unknown udp port\n", 0),
        ("hccn_tool: error while loading shared libraries: libdrvdsmi_host.so\n", 127),
    ],
    ids=["failed", "udp-port-unknown", "unknown-port", "no-libraries"],
)
def test_a_device_hccn_tool_does_not_answer_for_falls_back_to_the_record(
    tmp_path: Path, answer: str, exit_status: int
) -> None:
    mount = steered_mount(tmp_path / "m")
    tool = FakeHccnTool(tmp_path / "tool")
    tool.answer(4, AUTO)
    tool.answer(5, answer, exit_status=exit_status)
    conf = "udp_port_mode_5=code:nslb_dp\n"
    line = verdict_line(launch(mount, "job-worker-1", hccn_conf=record(tmp_path / "hccn.conf", conf), tool=tool))
    assert line.startswith("ringroute-launcher: qp_ports=ignored:nslb-dp: ")
    assert (
        f"device 5: nslb_dp ({tmp_path}/hccn.conf: udp_port_mode_5=code:nslb_dp; hccn_tool -i 5 -udp -g did not answer)"
    ) in line


def test_a_hanging_hccn_tool_is_killed_after_its_time_limit_and_the_record_decides(tmp_path: Path) -> None:
    mount = steered_mount(tmp_path / "m")
    tool = FakeHccnTool(tmp_path / "tool")
    tool.answer(4, AUTO)
    tool.hang(5)
    conf = record(tmp_path / "hccn.conf", "udp_port_mode_5=multi_qp\n")
    started = time.monotonic()
    result = launch(mount, "job-worker-1", hccn_conf=conf, tool=tool, env={"RINGROUTE_HCCN_TOOL_TIMEOUT": "1"})
    elapsed = time.monotonic() - started
    line = verdict_line(result)
    assert 1 <= elapsed < 5, elapsed
    assert line.startswith("ringroute-launcher: qp_ports=ignored:hccn-multi-qp: ")
    assert "device 4: none (hccn_tool -i 4 -udp -g: status:auto)" in line
    assert "udp_port_mode_5=multi_qp; hccn_tool -i 5 -udp -g did not answer)" in line
    hung = tool.hung_pid(5)
    for _ in range(50):
        try:
            os.kill(hung, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the hung query (pid {hung}) is still running")


def test_the_hccn_tool_time_limit_must_be_whole_seconds(tmp_path: Path) -> None:
    mount = steered_mount(tmp_path / "m")
    result = launch(mount, "job-worker-1", hccn_conf=tmp_path / "absent", env={"RINGROUTE_HCCN_TOOL_TIMEOUT": "0.5"})
    assert result.returncode == 1
    assert "RINGROUTE_HCCN_TOOL_TIMEOUT must be a whole number of seconds (got '0.5')" in result.stderr
    assert result.stdout == ""


DRIVER_LIBRARIES = "/usr/local/Ascend/driver/lib64/driver:/usr/local/Ascend/driver/lib64/common"


@pytest.mark.parametrize(
    ("job_path", "seen"), [(None, DRIVER_LIBRARIES), ("/opt/lib", DRIVER_LIBRARIES + ":/opt/lib")], ids=["unset", "set"]
)
def test_hccn_tool_runs_with_the_drivers_libraries_on_the_path(tmp_path: Path, job_path: str | None, seen: str) -> None:
    mount = steered_mount(tmp_path / "m")
    tool = FakeHccnTool(tmp_path / "tool")
    tool.answer(4, AUTO)
    tool.answer(5, AUTO)
    env = {} if job_path is None else {"LD_LIBRARY_PATH": job_path}
    result = launch(mount, "job-worker-1", hccn_conf=tmp_path / "absent", tool=tool, env=env)
    assert verdict_line(result).startswith("ringroute-launcher: qp_ports=in-effect: ")
    assert tool.library_paths() == {seen}


def test_hccn_tool_is_looked_for_on_the_path_unless_turned_off(tmp_path: Path) -> None:
    mount = steered_mount(tmp_path / "m")
    tool = FakeHccnTool(tmp_path / "tool")
    tool.answer(4, NSLB_DP)
    tool.answer(5, AUTO)
    on_path = {"PATH": f"{tool.dir}:{os.environ['PATH']}"}
    off = launch(mount, "job-worker-1", hccn_conf=tmp_path / "absent", tool="", env=on_path)
    assert verdict_line(off).startswith("ringroute-launcher: qp_ports=unverified:device-settings: ")
    assert tool.asked() == [], "an empty RINGROUTE_HCCN_TOOL turns hccn_tool off"
    found = launch(mount, "job-worker-1", hccn_conf=tmp_path / "absent", tool=None, env=on_path)
    assert verdict_line(found).startswith("ringroute-launcher: qp_ports=ignored:nslb-dp: ")
    assert sorted(tool.asked()) == ["-i 4 -udp -g", "-i 5 -udp -g"]


def test_a_named_hccn_tool_that_cannot_run_is_skipped_for_the_record(tmp_path: Path) -> None:
    mount = steered_mount(tmp_path / "m")
    conf = record(tmp_path / "hccn.conf", "udp_port_mode_4=multi_qp\n")
    result = launch(mount, "job-worker-1", hccn_conf=conf, tool=str(tmp_path / "no-such-hccn_tool"))
    line = verdict_line(result)
    assert f"device 4: multi_qp ({tmp_path}/hccn.conf: udp_port_mode_4=multi_qp)" in line
    assert "did not answer" not in line


@pytest.fixture
def world_readable_dir() -> Iterator[Path]:
    """A directory an unprivileged user can enter (pytest's tmp_path is private to its owner)."""
    path = Path(tempfile.mkdtemp(prefix="ringroute-launcher-"))
    path.chmod(0o755)
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=True)


def as_nobody() -> None:
    os.setgid(65534)
    os.setuid(65534)


@pytest.mark.parametrize("kind", ["missing", "directory", "no-permission"])
def test_an_unreadable_hccn_conf_without_hccn_tool_leaves_the_verdict_unverified(
    world_readable_dir: Path, kind: str
) -> None:
    mount = steered_mount(world_readable_dir / "m")
    conf = world_readable_dir / "hccn.conf"
    preexec = None
    if kind == "directory":
        conf.mkdir()  # what kubelet leaves for a hostPath whose file the node lacks
    elif kind == "no-permission":
        record(conf, "udp_port_mode_4=multi_qp\n").chmod(0)
        if os.geteuid() == 0:
            preexec = as_nobody
    result = launch(mount, "job-worker-1", hccn_conf=conf, preexec=preexec)
    line = verdict_line(result)
    assert line.startswith("ringroute-launcher: qp_ports=unverified:device-settings: HCCL_RDMA_QP_PORT_CONFIG_PATH=")
    assert (
        "could not be checked for devices 4 5: hccn_tool's multi_qp or NSLB-DP on a device would make HCCL ignore"
        in line
    )
    assert f"device 4: unknown ({conf} is not a readable file)" in line
    assert ports_env(result) == "unverified:device-settings"


def test_a_path_the_job_sets_itself_is_reported_and_no_device_is_asked(tmp_path: Path) -> None:
    mount = steered_mount(tmp_path / "m")
    tool = FakeHccnTool(tmp_path / "tool")
    own = {"HCCL_RDMA_QP_PORT_CONFIG_PATH": "/opt/site-ports"}
    result = launch(mount, "job-worker-1", hccn_conf=tmp_path / "absent", tool=tool, env=own)
    assert verdict_line(result) == (
        "ringroute-launcher: qp_ports=ignored:job-path: HCCL_RDMA_QP_PORT_CONFIG_PATH=/opt/site-ports is set by the "
        f"job and kept; ringroute's source ports in {mount}/MultiQpSrcPort.cfg are not used"
    )
    assert result.stdout.strip() == "QP=/opt/site-ports PORTS=ignored:job-path"
    assert tool.asked() == []


def test_the_queue_pairs_per_connection_variable_is_said_to_go_unused_while_the_file_is_read(tmp_path: Path) -> None:
    mount = steered_mount(tmp_path / "m")
    qps = {"HCCL_RDMA_QPS_PER_CONNECTION": "4"}
    line = verdict_line(launch(mount, "job-worker-1", hccn_conf=record(tmp_path / "c", HOST_CONFIG), env=qps))
    assert line.endswith(
        "; HCCL_RDMA_QPS_PER_CONNECTION=4 goes unused while HCCL reads the file (pairs the file does not list get "
        "one queue pair)"
    )
    conf = record(tmp_path / "hccn.conf", "udp_port_mode_4=multi_qp\n")
    assert "HCCL_RDMA_QPS_PER_CONNECTION" not in verdict_line(launch(mount, "job-worker-1", hccn_conf=conf, env=qps))


def test_an_ignored_file_is_written_to_an_empty_termination_log(tmp_path: Path) -> None:
    mount = steered_mount(tmp_path / "m")
    log = tmp_path / "termination-log"
    log.write_text("", encoding="utf-8")
    conf = record(tmp_path / "hccn.conf", "udp_port_mode_5=code:nslb_dp\n")
    result = launch(mount, "job-worker-1", hccn_conf=conf, env={"RINGROUTE_TERMINATION_LOG": str(log)})
    assert log.read_text(encoding="utf-8") == verdict_line(result) + "\n"


@pytest.mark.parametrize(
    ("conf", "before"),
    [
        (HOST_CONFIG, ""),  # in effect: nothing to tell
        ("udp_port_mode_5=code:nslb_dp\n", "training failed: out of memory\n"),  # the container's own message
    ],
    ids=["in-effect", "already-written"],
)
def test_the_termination_log_is_left_alone_unless_the_file_is_ignored_and_it_is_empty(
    tmp_path: Path, conf: str, before: str
) -> None:
    mount = steered_mount(tmp_path / "m")
    log = tmp_path / "termination-log"
    log.write_text(before, encoding="utf-8")
    result = launch(
        mount,
        "job-worker-1",
        hccn_conf=record(tmp_path / "hccn.conf", conf),
        env={"RINGROUTE_TERMINATION_LOG": str(log)},
    )
    verdict_line(result)
    assert log.read_text(encoding="utf-8") == before


def test_no_termination_log_is_created_where_kubelet_made_none(tmp_path: Path) -> None:
    mount = steered_mount(tmp_path / "m")
    log = tmp_path / "termination-log"
    conf = record(tmp_path / "hccn.conf", "udp_port_mode_5=code:nslb_dp\n")
    result = launch(mount, "job-worker-1", hccn_conf=conf, env={"RINGROUTE_TERMINATION_LOG": str(log)})
    assert ports_env(result) == "ignored:nslb-dp"
    assert not log.exists()


def test_the_verdicts_own_variables_never_reach_the_commands_environment(tmp_path: Path) -> None:
    mount = steered_mount(tmp_path / "m")
    tool = FakeHccnTool(tmp_path / "tool")
    tool.answer(4, AUTO)
    tool.hang(5)
    names = "devices answers tool overridden first unknown evidence mode said from value qps queries tenths pending dev"
    inherited = {name: f"job's {name}" for name in names.split()}
    conf = record(tmp_path / "hccn.conf", "udp_port_mode_5=code:nslb_dp\n")
    env = {**inherited, "RINGROUTE_HCCN_TOOL_TIMEOUT": "1"}
    result = subprocess.run(
        [dash(), str(mount / "ringroute-launcher.sh"), "--", "env"],
        env={
            "PATH": os.environ["PATH"],
            "POD_NAME": "job-worker-1",
            "RINGROUTE_HCCN_CONF": str(conf),
            "RINGROUTE_HCCN_TOOL": str(tool.path),
            "RINGROUTE_TERMINATION_LOG": "",
            **env,
        },
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert verdict_line(result).startswith("ringroute-launcher: qp_ports=ignored:nslb-dp: ")
    seen = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    assert {name: seen.get(name) for name in inherited} == inherited
