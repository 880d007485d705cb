"""What the offline commands write: `plan --out-dir` replaced as a whole or not at all, files with the modes the
umask gives, and `simulate --plot` into any path, or one line saying why not."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from webhook.cli.main import main
from webhook.cli.plan import write_atomically

ROOT = Path(__file__).resolve().parents[2]
PODS = ROOT / "examples" / "pods" / "llm-pretrain-pods.yaml"
NODES = ROOT / "examples" / "topologies" / "nodes-16.yaml"
CLUSTER = ROOT / "examples" / "topologies" / "cluster-16.yaml"
QUICK = ["--time-limit", "0.2"]


def plan(out: Path, *extra: str) -> int:
    return main(["plan", "--pods", str(PODS), "--topology", str(CLUSTER), *QUICK, *extra, "--out-dir", str(out)])


def contents(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def fail_nth_rename(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """Make the n-th call of os.rename or os.replace (counted together) fail as a full disk would."""
    calls = 0

    def wrap(real: Callable[..., Any]) -> Callable[..., Any]:
        def renamed(*args: Any, **kwargs: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == n:
                raise OSError(28, "No space left on device")
            return real(*args, **kwargs)

        return renamed

    monkeypatch.setattr(os, "rename", wrap(os.rename))
    monkeypatch.setattr(os, "replace", wrap(os.replace))


def test_a_failure_while_replacing_the_out_dir_leaves_the_previous_plan_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    for name in ("jobstart_hccl.json", "ranks.env", "ringroute-plan.json", "routes.json"):
        (out / name).write_text(f"the previous plan's {name}\n")
    before = contents(out)
    fail_nth_rename(monkeypatch, 2)
    assert plan(out) == 2
    assert one_error_line(capsys) == f"ringroute plan: error: --out-dir {out}: cannot write: No space left on device"
    assert contents(out) == before  # not a new jobstart_hccl.json beside the old ranks.env
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # nothing half-written beside it


def test_replacing_the_out_dir_drops_files_of_the_previous_plan(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert plan(out, "--routing", "pinned") == 0
    assert plan(out) == 0
    assert sorted(contents(out)) == ["jobstart_hccl.json", "ranks.env", "ringroute-plan.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_reader_that_opens_the_out_dir_once_never_sees_two_plans_mixed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    names = ("jobstart_hccl.json", "ranks.env", "ringroute-plan.json")
    write_atomically(out, dict.fromkeys(names, "0"))
    stop = threading.Event()
    seen: list[set[str]] = []

    def read() -> None:
        while not stop.is_set():
            try:
                directory = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
            except FileNotFoundError:  # between the two renames of a swap
                continue
            try:
                texts = set()
                for name in names:
                    handle = os.open(name, os.O_RDONLY, dir_fd=directory)
                    with os.fdopen(handle, encoding="utf-8") as stream:
                        texts.add(stream.read())
                seen.append(texts)
            except FileNotFoundError:  # the old directory's files removed after the swap: a retry, not a mix
                pass
            finally:
                os.close(directory)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for generation in range(1, 150):
            write_atomically(out, dict.fromkeys(names, str(generation)))
    finally:
        stop.set()
        reader.join()
    assert seen
    assert all(len(texts) == 1 for texts in seen), [t for t in seen if len(t) > 1][:3]
    assert contents(out) == dict.fromkeys(names, b"149")


def test_an_out_dir_holding_other_files_is_refused_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "ranks.env").write_text("old\n")
    (out / "notes.txt").write_text("mine\n")
    (out / "results").mkdir()
    assert plan(out) == 2
    assert one_error_line(capsys) == (
        f"ringroute plan: error: --out-dir {out}: holds notes.txt, results, which this command does not write; "
        "it replaces the directory as a whole, so give a new directory or one it wrote before"
    )
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "ranks.env", "results"]
    assert (out / "ranks.env").read_text() == "old\n"


def test_out_dir_dot_in_a_working_directory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "pods.yaml").write_bytes(PODS.read_bytes())
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "--pods", "pods.yaml", "--topology", str(CLUSTER), *QUICK, "--out-dir", "."]) == 2
    assert "--out-dir .: holds pods.yaml, which this command does not write" in one_error_line(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pods.yaml"]


def test_new_out_dir_and_files_get_the_umask_modes_and_an_existing_dir_keeps_its_mode(tmp_path: Path) -> None:
    old_mask = os.umask(0o022)
    try:
        out = tmp_path / "out"
        assert plan(out) == 0
        assert stat.S_IMODE(out.stat().st_mode) == 0o755  # not mkdtemp's private 0700
        assert {stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()} == {0o644}
        out.chmod(0o750)
        assert plan(out) == 0
        assert stat.S_IMODE(out.stat().st_mode) == 0o750
    finally:
        os.umask(old_mask)


def test_a_symlinked_out_dir_stays_a_link_to_the_new_plan(tmp_path: Path) -> None:
    real, link = tmp_path / "real", tmp_path / "link"
    assert plan(real) == 0
    link.symlink_to(real)
    assert plan(link, "--seed", "3") == 0
    assert link.is_symlink()
    assert sorted(contents(link)) == ["jobstart_hccl.json", "ranks.env", "ringroute-plan.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]


def test_topology_generate_writes_files_with_the_umask_mode(tmp_path: Path) -> None:
    old_mask = os.umask(0o022)
    try:
        out = tmp_path / "new" / "cluster.yaml"
        argv = ["topology", "generate", "--leaves", "2", "--servers-per-leaf", "2", "--out", str(out)]
        assert main(argv) == 0
        assert stat.S_IMODE(out.stat().st_mode) == 0o644  # not mkstemp's private 0600
        assert sorted(p.name for p in out.parent.iterdir()) == ["cluster.yaml"]
    finally:
        os.umask(old_mask)


def simulate(*extra: str) -> list[str]:
    return ["simulate", "--pods", str(PODS), "--nodes", str(NODES), "--seeds", "1", *QUICK, *extra]


def test_simulate_plot_into_a_missing_directory_creates_it(tmp_path: Path) -> None:
    png = tmp_path / "plots" / "today" / "loads.png"
    assert main(simulate("--plot", str(png))) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in png.parent.iterdir()) == ["loads.png"]


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("plots", "is a directory; give a file name such as"),
        ("a-file/loads.png", "a-file is a file, so no directory can be made there"),
        ("loads.txt", "Format 'txt' is not supported"),
    ],
)
def test_simulate_plot_that_cannot_be_written_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str, expected: str
) -> None:
    (tmp_path / "plots").mkdir()
    (tmp_path / "a-file").write_text("x")
    path = tmp_path / target
    assert main(simulate("--plot", str(path))) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"ringroute simulate: error: --plot {path}: ")
    assert expected in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "plots"]
    assert list((tmp_path / "plots").iterdir()) == []
