"""Hostile input files and flag values: every one ends in exit status 2 and one line naming the flag and the file.

A table of what breaks parsers (deep nesting, numbers too long to convert, binary garbage, objects of the wrong
shape, files that cannot be read, directories where files belong) for every file-reading flag, then Hypothesis
feeding random bytes, random JSON and pod-shaped garbage to the readers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.cli import inputs
from webhook.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
PODS = ROOT / "examples" / "pods" / "llm-pretrain-pods.yaml"
NODES = ROOT / "examples" / "topologies" / "nodes-16.yaml"

DEEP = 100_000

CONTENTS: dict[str, bytes] = {
    "deep-json-array": b"[" * DEEP + b"]" * DEEP,
    "deep-json-object": b'{"a":' * DEEP + b"1" + b"}" * DEEP,
    "json-deep-enough-to-parse": b'{"kind":"Topology","fabric":' + b'{"a":' * 900 + b"1" + b"}" * 900 + b"}",
    "deep-yaml-flow": b"a: " + b"[" * 5000 + b"]" * 5000,  # past every YAML nesting limit, and quicker
    "long-integer-json": b'{"kind":"List","items":[{"metadata":{"name":"x"},"spec":{"n":' + b"9" * 5000 + b"}}]}",
    "long-integer-yaml": b"kind: List\nitems:\n- metadata: {name: x}\n  spec: {n: " + b"9" * 5000 + b"}\n",
    "binary": bytes(range(256)) * 8,
    "nul-bytes": b"apiVersion: v1\x00\x00kind: Pod",
    "utf-16": "kind: List\nitems: []\n".encode("utf-16"),
    "python-tag": b"!!python/object/apply:os.system ['true']\n",
    "self-referencing-alias": b"a: &a [*a]\nkind: Pod\nmetadata: {name: *a}\n",
    "metadata-a-list": b"kind: List\nitems:\n- kind: Pod\n  metadata: [1]\n  spec: 3\n  status: x\n",
    "items-a-mapping": b"kind: List\nitems: {a: 1}\n",
    "a-scalar": b"42\n",
    "a-list-of-numbers": b"[1, 2, 3]",
}

# flag -> argv of `plan` reading `path` through it (everything else valid)
FLAGS: dict[str, Callable[[Path, Path], list[str]]] = {
    "--pods": lambda path, out: ["plan", "--pods", str(path), "--nodes", str(NODES), "--out-dir", str(out)],
    "--nodes": lambda path, out: ["plan", "--pods", str(PODS), "--nodes", str(path), "--out-dir", str(out)],
    "--hypernodes": lambda path, out: [
        "plan", "--pods", str(PODS), "--hypernodes", str(path), "--nodes", str(NODES), "--out-dir", str(out)
    ],
    "--tor-configmap": lambda path, out: [
        "plan", "--pods", str(PODS), "--tor-configmap", str(path), "--out-dir", str(out)
    ],
    "--topology": lambda path, out: ["plan", "--pods", str(PODS), "--topology", str(path), "--out-dir", str(out)],
    "--settings": lambda path, out: [
        "plan", "--pods", str(PODS), "--nodes", str(NODES), "--settings", str(path), "--out-dir", str(out)
    ],
}  # fmt: skip


def assert_refused(capsys: pytest.CaptureFixture[str], argv: list[str], flag: str, path: Path) -> str:
    """Exit 2, no traceback, and one line naming the flag and the file (a settings file may add one indented
    line per problem after it); the line."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.rstrip("\n").split("\n")
    assert "Traceback" not in err
    assert f"{flag} {path}" in lines[0], err
    if flag == "--settings":
        assert all(line.startswith("  ") and line.strip() for line in lines[1:]), err
    else:
        assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("content", CONTENTS, ids=str)
@pytest.mark.parametrize("flag", FLAGS)
def test_hostile_file_is_refused_in_one_line_naming_flag_and_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, content: str
) -> None:
    path = tmp_path / content
    path.write_bytes(CONTENTS[content])
    out = tmp_path / "out"
    assert_refused(capsys, FLAGS[flag](path, out), flag, path)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [content]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("deep-json-array", ("nested too deeply",)),
        ("deep-json-object", ("nested too deeply",)),
        # the reader or the command line may word it
        ("long-integer-json", ("a number longer than 4300 digits", "a number too long to convert")),
        ("long-integer-yaml", ("a number longer than 4300 digits", "a number too long to convert")),
        ("binary", ("not UTF-8 text",)),
    ],
)
def test_deep_nesting_long_numbers_and_binary_are_named_for_what_they_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, expected: tuple[str, ...]
) -> None:
    path = tmp_path / "pods.json"
    path.write_bytes(CONTENTS[content])
    line = assert_refused(capsys, FLAGS["--pods"](path, tmp_path / "out"), "--pods", path)
    assert line.startswith(f"ringroute plan: error: --pods {path}: ")
    assert any(words in line for words in expected), line


def unreadable_paths(tmp_path: Path) -> dict[str, Path]:
    """Paths that exist as something other than a readable file, or not at all."""
    (tmp_path / "a-directory").mkdir()
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "loop-a").symlink_to(tmp_path / "loop-b")
    (tmp_path / "loop-b").symlink_to(tmp_path / "loop-a")
    paths = {
        "directory": tmp_path / "a-directory",
        "missing": tmp_path / "missing.yaml",
        "under-a-file": tmp_path / "a-file" / "pods.yaml",
        "symlink-loop": tmp_path / "loop-a",
    }
    if Path("/proc/self/mem").exists():
        paths["read-error"] = Path("/proc/self/mem")  # opens, then every read at offset 0 fails with EIO
    if os.geteuid() != 0:  # root reads files whatever their mode
        locked = tmp_path / "locked.yaml"
        locked.write_text("kind: List\nitems: []\n")
        locked.chmod(0)
        paths["no-permission"] = locked
    return paths


@pytest.mark.parametrize("flag", FLAGS)
def test_unreadable_paths_are_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    for path in unreadable_paths(tmp_path).values():
        line = assert_refused(capsys, FLAGS[flag](path, tmp_path / "out"), flag, path)
        assert "cannot read" in line
    assert not (tmp_path / "out").exists()


def test_a_file_without_end_is_refused_at_the_size_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inputs, "MAX_INPUT_CHARS", 1 << 16)
    endless = Path("/dev/zero")
    if not endless.exists():
        pytest.skip("no /dev/zero")
    line = assert_refused(capsys, FLAGS["--nodes"](endless, tmp_path / "out"), "--nodes", endless)
    assert line.endswith(f"--nodes {endless}: larger than 65536 characters; pass only the objects needed")


@pytest.mark.parametrize("flag", ["--config"])
def test_serve_and_extender_settings_files_are_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    path = tmp_path / "settings.json"
    path.write_bytes(CONTENTS["deep-json-object"])
    for argv in (["serve", "--cert-dir", str(tmp_path), flag, str(path)], ["extender", flag, str(path)]):
        line = assert_refused(capsys, argv, flag, path)
        assert line.endswith("nested too deeply to read; pass a ringroute settings file (YAML)")
    line = assert_refused(capsys, ["simulate-scheduling", "--settings", str(path)], "--settings", path)
    assert "nested too deeply" in line


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--qps", "0"], "--qps 0: HCCL takes 1 to 32 queue pairs per connection"),
        (["--qps", "99999999999"], "--qps 99999999999: HCCL takes 1 to 32 queue pairs per connection"),
        (["--seed", "-1"], "--seed -1: must be 0 or more"),
        (["--expected-pods", "-5"], "--expected-pods -5: must be at least 1"),
        (["--expected-pods", "9" * 5000], "argument --expected-pods: invalid int value"),
        (["--time-limit", "nan"], "--time-limit nan: must be a positive number of seconds"),
        (["--time-limit", "inf"], "--time-limit inf: must be a positive number of seconds"),
        (["--link-gbps", "inf"], "fabric.linkGbps: must be a positive number, got inf"),
    ],
)
def test_hostile_flag_values_are_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], expected: str
) -> None:
    argv = [*FLAGS["--pods"](PODS, tmp_path / "out"), *flags]
    try:
        code = main(argv)
    except SystemExit as exited:  # argparse refuses values of the wrong type itself
        code = int(str(exited.code))
    assert code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert expected in err
    assert not (tmp_path / "out").exists()


# -- Hypothesis: whatever the bytes, the same promise -------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=30,
)
ANY_VALUE = JSON_VALUES | st.sampled_from(["Pod", "List", "", "-1", "²", "٨"])


def pod_shaped(metadata: Any, spec: Any, status: Any, annotations: Any) -> dict[str, Any]:
    meta = metadata if not isinstance(metadata, dict) else {**metadata, "annotations": annotations, "name": "p"}
    return {"kind": "List", "items": [{"kind": "Pod", "metadata": meta, "spec": spec, "status": status}]}


HYPOTHESIS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


@HYPOTHESIS
@given(data=st.binary(max_size=4000), flag=st.sampled_from(["--pods", "--nodes", "--topology"]))
def test_random_bytes_are_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes, flag: str
) -> None:
    path = tmp_path / "input"
    path.write_bytes(data)
    assert_refused(capsys, FLAGS[flag](path, tmp_path / "out"), flag, path)
    assert not (tmp_path / "out").exists()


@HYPOTHESIS
@given(value=JSON_VALUES, flag=st.sampled_from(["--pods", "--nodes", "--hypernodes", "--tor-configmap", "--topology"]))
def test_random_json_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: Any, flag: str
) -> None:
    path = tmp_path / "input.json"
    path.write_text(json.dumps(value), encoding="utf-8")
    assert_refused(capsys, FLAGS[flag](path, tmp_path / "out"), flag, path)
    assert not (tmp_path / "out").exists()


@HYPOTHESIS
@given(parts=st.tuples(ANY_VALUE, ANY_VALUE, ANY_VALUE, ANY_VALUE))
def test_pods_of_the_wrong_shape_are_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], parts: tuple[Any, Any, Any, Any]
) -> None:
    path = tmp_path / "pods.json"
    path.write_text(json.dumps(pod_shaped(*parts)), encoding="utf-8")
    assert_refused(capsys, FLAGS["--pods"](path, tmp_path / "out"), "--pods", path)
    assert not (tmp_path / "out").exists()
