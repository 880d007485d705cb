"""docs/simulator.md, "Hash model": the worked example's every number, computed here by a CRC written from its
definition and by the planner, and the example file loads."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from planner import HashSpec, SwitchHash, compile_switch_hash, load_hash_model
from planner._hash_model import ipv4_int
from planner.fabric._hashing import function_output, hash_output, key_bytes

DOC = Path(__file__).resolve().parents[3] / "docs" / "simulator.md"
SPEC = HashSpec("crc16-ccitt", seed=0x5A5A, bucket="low-bits", members=("spine-2", "spine-0", "spine-3", "spine-1"))
SRC, DST, SPORT = ipv4_int("192.168.1.2"), ipv4_int("192.168.5.9"), 50123


def section() -> str:
    text = DOC.read_text(encoding="utf-8")
    return text[text.index("## Hash model") : text.index("## Code")]


def register_after_each_byte(data: bytes) -> list[int]:
    """CRC-16/CCITT-FALSE by its definition: init 0xFFFF, polynomial 0x1021, MSB first, no final XOR."""
    register, trace = 0xFFFF, []
    for byte in data:
        register ^= byte << 8
        for _ in range(8):
            register = ((register << 1) ^ 0x1021) & 0xFFFF if register & 0x8000 else (register << 1) & 0xFFFF
        trace.append(register)
    return trace


def test_the_worked_example_of_the_docs_is_what_the_planner_computes() -> None:
    doc = section()
    data = key_bytes(SPEC, SRC, DST, SPORT)
    assert data.hex(" ") == "c0 a8 01 02 c0 a8 05 09 11 c3 cb 12 b7"
    assert "`c0 a8 01 02` (src) `c0 a8 05 09` (dst) `11` (proto)\n   `c3 cb` (50123) `12 b7` (4791)" in doc
    trace = register_after_each_byte(data)
    assert " ".join(f"{r:04x}" for r in trace) in doc
    assert trace[-1] == function_output("crc16-ccitt", data) == 0xB553
    assert "the CRC is **0xB553**" in doc
    assert 0xB553 ^ 0x5A5A == hash_output(SPEC, SRC, DST, SPORT) == 0xEF09
    assert "0xB553 ⊕ 0x5A5A = **0xEF09**" in doc
    assert 0xEF09 & 3 == 1
    assert "0xEF09 & 3 = **1**" in doc
    assert "`members[1]` = **spine-0**" in doc
    compiled = compile_switch_hash(SwitchHash(SPEC), "leaf")
    hop = compiled.evaluate(np.array([SRC], dtype=np.uint64), np.array([DST], dtype=np.uint64), np.array([SPORT]), 4)
    assert hop.tolist() == [0]


def test_the_check_values_in_the_docs_table_are_the_functions_check_values() -> None:
    rows = re.findall(r"^\| `([a-z0-9-]+)` \|.*\| (0x[0-9A-F]+) \|$", section(), flags=re.MULTILINE)
    assert len(rows) == 10
    for function, check in rows:
        assert function_output(function, b"123456789") == int(check, 16), function


def test_the_example_file_in_the_docs_loads() -> None:
    doc = section()
    block = doc[doc.index("```yaml\n") + len("```yaml\n") :]
    model = load_hash_model(block[: block.index("```")])
    assert set(model.tiers) == {"leaf", "spine"}
    assert set(model.switches) == {"leaf-03", "leaf-04"}
    assert model.for_switch("leaf-07", "leaf") is None
