"""`ringroute fabric calibrate` and `fabric show` end to end: probes printed, answered by a switch hash, calibrated
into a model file that predicts the switches; bad samples and model files are one line naming line and field,
exit 2, and nothing written."""

from __future__ import annotations

import json
import logging
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from planner import HashSpec, SwitchHash, compile_switch_hash, load_hash_model
from planner._hash_model import ipv4_int
from tests.cli.test_hostile_inputs import CONTENTS, unreadable_paths
from tests.support.switch_hashes import multiplicative, random_tuples
from webhook.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
PODS = ROOT / "examples" / "pods" / "llm-pretrain-pods.yaml"
TOPOLOGY = ROOT / "examples" / "topologies" / "cluster-16.yaml"
NODES = ROOT / "examples" / "topologies" / "nodes-16.yaml"
SWITCH = HashSpec("crc32c", seed=0xABCDEF, bucket="low-bits", members=tuple(f"spine-{(5 * j) % 32}" for j in range(32)))


def one_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.rstrip("\n").split("\n")
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def answered(probes: Path, out: Path, spec: HashSpec = SWITCH, choices: int = 32) -> Path:
    """The probes with next_hop filled in as a switch hashing with `spec` answers."""
    compiled = compile_switch_hash(SwitchHash(spec), "leaf")
    lines = []
    for text in probes.read_text(encoding="utf-8").splitlines():
        record = json.loads(text)
        src = np.array([ipv4_int(record["src"])], dtype=np.uint64)
        dst = np.array([ipv4_int(record["dst"])], dtype=np.uint64)
        hop = int(compiled.evaluate(src, dst, np.array([record["sport"]]), choices)[0])
        record["next_hop"] = f"spine-{hop}"
        lines.append(json.dumps(record))
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def print_probes(tmp_path: Path, *extra: str) -> Path:
    probes = tmp_path / "probes.jsonl"
    argv = ["fabric", "calibrate", "--print-probes", "--topology", str(TOPOLOGY), "--pods", str(PODS), *extra]
    assert main([*argv, "--out", str(probes)]) == 0
    return probes


def test_probes_answered_by_the_switches_calibrate_a_model_that_predicts_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    probes = print_probes(tmp_path)
    records = [json.loads(line) for line in probes.read_text(encoding="utf-8").splitlines()]
    assert {r["switch"] for r in records} == {"leaf-0", "leaf-1", "leaf-2", "leaf-3"}
    assert all(r["next_hop"] is None and r["dport"] == 4791 and 49152 <= r["sport"] <= 65535 for r in records)
    capsys.readouterr()
    samples = answered(probes, tmp_path / "samples.jsonl")
    model_file = tmp_path / "model.yaml"
    argv = ["fabric", "calibrate", "--samples", str(samples), "--topology", str(TOPOLOGY), "--out", str(model_file)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["switch", "status", "source", "samples", "needed", "span", "hold-out"]
    assert "every switch calibrated: 4 complete, 0 partial of 4 switches" in out
    model = load_hash_model(model_file.read_text(encoding="utf-8"))
    assert set(model.switches) == {"leaf-0", "leaf-1", "leaf-2", "leaf-3"}
    switch = model.for_switch("leaf-2", "leaf")
    assert switch is not None
    assert switch.source == "learned"
    # new tuples of the job's NICs (other ports) go where the switch sends them
    fresh = print_probes(tmp_path, "--seed", "99", "--switch", "leaf-2")
    truth = compile_switch_hash(SwitchHash(SWITCH), "leaf")
    learned = compile_switch_hash(switch, "leaf")
    for line in fresh.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        key = (
            np.array([ipv4_int(record["src"])], dtype=np.uint64),
            np.array([ipv4_int(record["dst"])], dtype=np.uint64),
            np.array([record["sport"]]),
        )
        assert int(learned.evaluate(*key, 32)[0]) == int(truth.evaluate(*key, 32)[0])
    assert main(["fabric", "show", "--hash-model", str(model_file)]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[0] == (
        "leaf-0 (leaf): learned: 5 parity checks on a 28-dimensional span, 32 of 32 values known "
        f"(learned from {sum(r['switch'] == 'leaf-0' for r in records)} samples)"
    )


def test_a_declared_function_is_fitted_and_written_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    secret = HashSpec("crc16-ibm", seed=0x4321, bucket="modulo", members=("spine-2", "spine-0", "spine-1"))
    probes = tmp_path / "probes.jsonl"
    assert main(["fabric", "calibrate", "--print-probes", "--switch", "leaf-0", "--addresses", "10.1.0.0/16",
                 "--count", "40", "--out", str(probes)]) == 0  # fmt: skip
    samples = answered(probes, tmp_path / "samples.jsonl", secret, 3)
    declared = tmp_path / "declared.yaml"
    declared.write_text("tiers:\n  leaf: {function: crc16-ibm, bucket: modulo}\n", encoding="utf-8")
    out = tmp_path / "model.json"
    assert (
        main(["fabric", "calibrate", "--samples", str(samples), "--hash-model", str(declared), "--out", str(out)]) == 0
    )
    model = json.loads(out.read_text(encoding="utf-8"))
    entry = model["switches"]["leaf-0"]
    assert entry["function"] == "crc16-ibm"
    assert entry["source"] == "fitted"
    assert model["tiers"]["leaf"] == {"function": "crc16-ibm", "bucket": "modulo", "source": "declared"}
    assert "fitted the declared crc16-ibm, modulo" in capsys.readouterr().out


def test_probes_go_to_stdout_and_the_summary_to_the_log(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ringroute")
    argv = ["fabric", "calibrate", "--print-probes", "--switch", "pod-1/spine-0", "--addresses", "192.168.0.0/24",
            "--source-ports", "50000-50015", "--seed", "3"]  # fmt: skip
    assert main(argv) == 0
    captured = capsys.readouterr()
    records = [json.loads(line) for line in captured.out.splitlines()]
    assert records
    assert all(r["switch"] == "pod-1/spine-0" and 50000 <= r["sport"] <= 50015 for r in records)
    assert f"{len(records)} probes for 1 switches (20 key bits vary)" in caplog.text
    assert main(argv) == 0
    assert capsys.readouterr().out == captured.out  # seeded


def test_a_switch_no_model_explains_is_refused_and_nothing_written_unless_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hop = multiplicative(4)
    rng = np.random.default_rng(1)
    lines = []
    for src, dst, sport in random_tuples(rng, 120, bits=24):
        record = {"switch": "leaf-5", "src": str(IPv4Address(src)), "dst": str(IPv4Address(dst)), "sport": sport,
                  "dport": 4791, "next_hop": f"spine-{hop(src, dst, sport)}"}  # fmt: skip
        lines.append(json.dumps(record))
    samples = tmp_path / "samples.jsonl"
    samples.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "model.yaml"
    out.write_text("previous\n", encoding="utf-8")
    line = one_error(capsys, ["fabric", "calibrate", "--samples", str(samples), "--out", str(out)])
    assert line.startswith(f"ringroute fabric calibrate: error: --samples {samples}: leaf-5: no model explains the "
                           "samples: lines ")  # fmt: skip
    assert line.endswith("nothing written (--allow-unknown writes the others and lists these as unknown)")
    assert out.read_text(encoding="utf-8") == "previous\n"
    assert main(["fabric", "calibrate", "--samples", str(samples), "--out", str(out), "--allow-unknown"]) == 0
    model = load_hash_model(out.read_text(encoding="utf-8"))
    assert model.unknown == {"leaf-5"}
    assert not model.switches


def sample_line(**changes: Any) -> str:
    record = {"switch": "leaf-0", "src": "192.168.1.2", "dst": "192.168.5.9", "sport": 50123, "dport": 4791,
              "next_hop": "spine-2", **changes}  # fmt: skip
    return json.dumps(record)


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (["# ok", "this is not json"], "line 2: not JSON (Expecting value); one JSON object per line"),
        ([sample_line(switch="leaf-9")], "line 1: switch: 'leaf-9' is not a switch of the topology (4 switches"),
        (
            [sample_line(), "", sample_line(next_hop="spine-3")],
            "lines 1 and 3: leaf-0 answered spine-2 and spine-3 for the same 5-tuple",
        ),
        ([sample_line(src="fe80::1")], "line 1: src: 'fe80::1' is IPv6; "),
        ([sample_line(sport=70000)], "line 1: sport: 70000 is out of range 0..65535"),
        ([sample_line(dport=-1)], "line 1: dport: -1 is out of range 0..65535"),
        ([sample_line(next_hop="spine-40")], "line 1: next_hop: spine-40: leaf-0 has 32 equal-cost next hops"),
        ([sample_line(extra=1)], "line 1: 'extra': unknown field"),
        ([json.dumps({"switch": "leaf-0"})], "line 1: src: missing"),
        (["x" * 5000], "line 1: longer than 4096 characters"),
    ],
)
def test_a_bad_samples_file_is_one_line_naming_line_and_field_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: list[str], expected: str
) -> None:
    samples = tmp_path / "samples.jsonl"
    samples.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "model.yaml"
    argv = ["fabric", "calibrate", "--samples", str(samples), "--topology", str(TOPOLOGY), "--out", str(out)]
    line = one_error(capsys, argv)
    assert line.startswith(f"ringroute fabric calibrate: error: --samples {samples}: {expected}"), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["samples.jsonl"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "tiers:\n  leaf:\n    function: crc64\n",
            "hash model: line 3: tiers.leaf.function: 'crc64' is not one of crc32, crc32-msb, crc32c, ",
        ),
        ("tiers:\n  leaf: {function: crc32, seed: [1]}\n", "hash model: line 2: tiers.leaf.seed: expected a 32-bit"),
        (
            "switches:\n  leaf-0: {function: xor8, init: 3}\n",
            "hash model: line 2: switches.leaf-0.init: xor8 has no init",
        ),
    ],
)
def test_a_bad_model_file_is_one_line_naming_line_and_field_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    samples = tmp_path / "samples.jsonl"
    samples.write_text(sample_line() + "\n", encoding="utf-8")
    model = tmp_path / "declared.yaml"
    model.write_text(text, encoding="utf-8")
    out = tmp_path / "model.yaml"
    line = one_error(capsys, ["fabric", "calibrate", "--samples", str(samples), "--hash-model", str(model),
                              "--out", str(out)])  # fmt: skip
    assert line.startswith(f"ringroute fabric calibrate: error: --hash-model {model}: {expected}"), line
    assert not out.exists()
    line = one_error(capsys, ["fabric", "show", "--hash-model", str(model)])
    assert line.startswith(f"ringroute fabric show: error: --hash-model {model}: {expected}"), line


@pytest.mark.parametrize("content", CONTENTS, ids=str)
@pytest.mark.parametrize("flag", ["--samples", "--hash-model"])
def test_hostile_files_are_one_line_naming_the_flag_and_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, flag: str
) -> None:
    path = tmp_path / content
    path.write_bytes(CONTENTS[content])
    samples = tmp_path / "samples.jsonl"
    samples.write_text(sample_line() + "\n", encoding="utf-8")
    out = tmp_path / "model.yaml"
    argv = ["fabric", "calibrate", "--samples", str(samples), "--out", str(out)]
    argv[argv.index(flag) + 1 if flag == "--samples" else len(argv) :] = (
        [str(path), "--out", str(out)] if flag == "--samples" else ["--hash-model", str(path)]
    )
    line = one_error(capsys, argv)
    assert f"{flag} {path}" in line
    assert not out.exists()


@pytest.mark.parametrize("flag", ["--samples", "--hash-model"])
def test_unreadable_paths_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str) -> None:
    samples = tmp_path / "samples.jsonl"
    samples.write_text(sample_line() + "\n", encoding="utf-8")
    for path in unreadable_paths(tmp_path).values():
        argv = ["fabric", "calibrate", "--samples", str(samples), "--out", str(tmp_path / "m.yaml")]
        argv += [flag, str(path)] if flag == "--hash-model" else []
        if flag == "--samples":
            argv[3] = str(path)
        line = one_error(capsys, argv)
        assert f"{flag} {path}" in line


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--print-probes", "--switch", "leaf-0"], "addresses: give --pods FILE (the job's NICs, under each switch)"),
        (["--print-probes", "--addresses", "10.0.0.0/8"], "switches: give --topology FILE or --nodes FILE"),
        (["--print-probes", "--switch", "a", "--addresses", "fd00::/8"], "--addresses fd00::/8: IPv6; "),
        (
            ["--print-probes", "--switch", "a", "--addresses", "10.0.0.0/8", "--source-ports", "9-x"],
            "--source-ports 9-x: give",
        ),
        (
            ["--print-probes", "--topology", str(TOPOLOGY), "--switch", "leaf-7", "--addresses", "10.0.0.0/8"],
            "--switch leaf-7: not a switch of the topology (4 switches)",
        ),
        (["--print-probes", "--pods", str(PODS), "--switch", "x"], "--pods: also give --topology FILE or --nodes"),
        (["--out", "m.yaml"], "--samples: missing; give the switches' answers"),
        (["--samples", "s.jsonl"], "--out: missing; give the hash model file to write"),
        (["--samples", "s.jsonl", "--out", "m.yaml", "--count", "3"], "--count: only applies with --print-probes"),
    ],
)
def test_incomplete_requests_are_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], expected: str) -> None:
    line = one_error(capsys, ["fabric", "calibrate", *argv])
    assert line.startswith(f"ringroute fabric calibrate: error: {expected}"), line


def test_probes_from_node_labels_name_the_same_switches(tmp_path: Path) -> None:
    probes = tmp_path / "probes.jsonl"
    argv = ["fabric", "calibrate", "--print-probes", "--nodes", str(NODES), "--pods", str(PODS), "--count", "5",
            "--out", str(probes)]  # fmt: skip
    assert main(argv) == 0
    records = [json.loads(line) for line in probes.read_text(encoding="utf-8").splitlines()]
    assert len(records) == 5 * len({r["switch"] for r in records})
    assert {r["switch"] for r in records} <= {"leaf-0", "leaf-1", "leaf-2", "leaf-3"}
