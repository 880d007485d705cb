"""The hash model file: dumped and loaded back it predicts the same next hops, and every mistake is one line naming
the field path and the file's line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import (
    HashModel,
    HashSpec,
    InputError,
    LearnedHash,
    SwitchHash,
    dump_hash_model,
    load_hash_model,
    read_hash_model,
)
from planner._hash_model import KEY_BITS
from planner.fabric._hashing import compile_switch_hash
from planner.io._hash_model_file import MAX_HASH_MODEL_CHARS, hash_model_document, render_path
from tests.planner.fabric.test_hashing import specs, tuples


def one_line(raised: pytest.ExceptionInfo[InputError]) -> str:
    message = str(raised.value)
    assert "\n" not in message
    return message


@st.composite
def learned_hashes(draw: st.DrawFn) -> SwitchHash:
    rows = draw(st.lists(st.integers(1, (1 << KEY_BITS) - 1), min_size=1, max_size=3))
    names = st.none() | st.integers(0, 15).map(lambda j: f"spine-{j}")
    table = tuple(draw(names) for _ in range(1 << len(rows)))
    checks = draw(st.lists(st.integers(1, (1 << KEY_BITS) - 1), max_size=4))
    origin = draw(st.integers(0, (1 << KEY_BITS) - 1))
    samples = draw(st.integers(0, 500))
    return SwitchHash(LearnedHash(tuple(rows), table, origin, tuple(checks)), "learned", samples)


@st.composite
def models(draw: st.DrawFn) -> HashModel:
    declared = st.builds(SwitchHash, specs(), st.sampled_from(("declared", "fitted")), st.integers(0, 500))
    leaf = draw(st.none() | declared)
    names = draw(st.lists(st.integers(0, 40).map(lambda i: f"leaf-{i}"), max_size=4, unique=True))
    switches = {name: draw(declared | learned_hashes()) for name in names[:-1]}
    unknown = set(names[-1:])
    return HashModel(tiers={"leaf": leaf} if leaf is not None else {}, switches=switches, unknown=unknown)


def predictions(model: HashModel, seed: int) -> dict[str, list[int]]:
    src, dst, sport, dport, proto = tuples(np.random.default_rng(seed), 32)
    out: dict[str, list[int]] = {}
    entries = dict(model.switches)
    if "leaf" in model.tiers:
        entries["(leaf)"] = model.tiers["leaf"]
    for name, switch in entries.items():
        compiled = compile_switch_hash(switch, "leaf")
        out[name] = [
            int(compiled.evaluate(s, d, p, 4, dport=int(q), proto=int(r)))
            for s, d, p, q, r in zip(src, dst, sport, dport, proto, strict=True)
        ]
    return out


@settings(max_examples=40, deadline=None)
@given(model=models(), as_json=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_a_dumped_model_loads_back_equal_and_predicts_the_same_next_hops(
    model: HashModel, as_json: bool, seed: int
) -> None:
    text = dump_hash_model(model, as_json=as_json)
    loaded = load_hash_model(text)
    assert loaded == model
    assert predictions(loaded, seed) == predictions(model, seed)
    assert dump_hash_model(loaded, as_json=as_json) == text
    assert read_hash_model(hash_model_document(model)) == model


def test_a_hand_written_model_reads_hex_numbers_and_defaults() -> None:
    text = """
apiVersion: ringroute.io/v1alpha1
kind: HashModel
tiers:
  leaf: {function: crc16-ccitt, seed: 0x5a5a, bucket: low-bits}
  spine: {function: crc32, init: "0x1d0f", bits: [16, 32]}
switches:
  leaf-03: {function: crc32c, seed: 4660, bucket: modulo, members: [spine-2, spine-0, spine-1], source: fitted,
            samples: 120}
  "0042": {function: xor16}
  7: {function: xor8}
unknown: [leaf-07]
"""
    model = load_hash_model(text)
    assert model.tiers["leaf"] == SwitchHash(HashSpec("crc16-ccitt", seed=0x5A5A, bucket="low-bits"))
    assert model.tiers["spine"].hash == HashSpec("crc32", init=0x1D0F, bits=(16, 32))
    leaf = model.switches["leaf-03"]
    assert leaf == SwitchHash(
        HashSpec("crc32c", seed=0x1234, bucket="modulo", members=("spine-2", "spine-0", "spine-1")), "fitted", 120
    )
    assert set(model.switches) == {"leaf-03", "0042", "7"}
    assert model.for_switch("leaf-07", "leaf") is None
    assert model.for_switch("leaf-09", "leaf") is model.tiers["leaf"]


def test_an_empty_mapping_is_an_empty_model() -> None:
    assert load_hash_model("kind: HashModel\n").is_empty
    assert read_hash_model({}).is_empty


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "kind: HashModel\ntiers:\n  leaf:\n    function: crc64\n",
            "hash model: line 4: tiers.leaf.function: 'crc64' is not one of crc32, crc32-msb, crc32c, crc16-ccitt, "
            "crc16-ccitt-lsb, crc16-ibm, crc16-ibm-msb, xor32, xor16, xor8",
        ),
        (
            "tiers:\n  leaf: {function: crc32, colour: red}\n",
            "hash model: line 2: tiers.leaf.colour: unknown field (known: function, init, seed, key, bits, bucket, "
            "members, source, samples)",
        ),
        ("tiers:\n  core: {function: crc32}\n", "hash model: line 2: tiers.core: 'core' is not one of leaf, spine"),
        (
            "switches:\n  leaf-1:\n    function: crc32\n    members:\n    - spine-0\n    - core-1\n",
            "hash model: line 6: switches.leaf-1.members[1]: next hop 'core-1': a leaf switch's next hops are named "
            "spine-<n>, as routes.json numbers them",
        ),
        (
            "switches:\n  pod-0/spine-1: {function: crc32, members: [spine-1]}\n",
            "hash model: line 2: switches.pod-0/spine-1.members[0]: next hop 'spine-1': a spine switch's next hops "
            "are named core-<n>, as routes.json numbers them",
        ),
        (
            "tiers:\n  leaf: {function: crc16-ibm, seed: 0x10000}\n",
            "hash model: line 2: tiers.leaf.seed: must be 0..65535 for crc16-ibm, got 65536",
        ),
        (
            "tiers:\n  leaf: {function: crc32, seed: '0xzz'}\n",
            "hash model: line 2: tiers.leaf.seed: expected a 32-bit integer (a number, or a string such as "
            "\"0x1d0f\"), got '0xzz'",
        ),
        (
            "tiers:\n  leaf: {function: crc32, bits: [0, 8, 16]}\n",
            "hash model: line 2: tiers.leaf.bits: at most 2 entries, got 3",
        ),
        ("tiers:\n  leaf: {seed: 1}\n", "hash model: line 2: tiers.leaf: give function (one of the family, or "),
        (
            "switches:\n  leaf-1:\n    learned: {rows: ['0x1'], table: [spine-0, spine-1], origin: '0x0'}\n",
            "hash model: line 3: switches.leaf-1.learned.checks: missing; a learned hash has rows, table, origin "
            "and checks",
        ),
        (
            "switches:\n  leaf-1:\n    learned:\n      rows: ['0x1']\n      table: [spine-0, spine-1]\n"
            "      origin: '0x0'\n      checks: ['0x1" + "0" * 26 + "']\n",
            "hash model: line 7: switches.leaf-1.learned.checks[0]: a mask of the 104 key bits, got 105 bits",
        ),
        (
            "switches:\n  leaf-1:\n    learned: {rows: [1], table: [spine-0], origin: 0, checks: []}\n",
            "hash model: line 3: switches.leaf-1.learned.table: 2 entries for 1 rows, got 1",
        ),
        (
            "switches:\n  leaf-1: {function: crc32}\nunknown: [leaf-2, leaf-1]\n",
            "hash model: line 3: unknown[1]: leaf-1 has a hash under switches; list it in one place",
        ),
        ("kind: Topology\n", "hash model: line 1: kind: expected HashModel, got 'Topology'"),
        ("apiVersion: v2\n", "hash model: line 1: apiVersion: expected ringroute.io/v1alpha1, got 'v2'"),
        ("- tiers\n", "hash model: line 1: expected a mapping of tiers, switches and unknown, got ['tiers']"),
        ("", "hash model: the file is empty; give apiVersion, kind: HashModel, tiers, switches"),
        ("tiers: {leaf: [\n", "hash model: line 2 column 1: malformed YAML: "),
        (
            "tiers:\n  leaf: &h {function: crc32}\n  spine: *h\n",
            "hash model: line 2: tiers.leaf: anchors and aliases (& and *) are not read in a hash model; write the "
            "value out",
        ),
    ],
)
def test_a_bad_model_file_is_one_error_naming_the_line_and_the_field(text: str, message: str) -> None:
    with pytest.raises(InputError) as raised:
        load_hash_model(text)
    assert one_line(raised).startswith(message)


def test_a_json_model_file_names_fields_and_lines_too() -> None:
    document = {"kind": "HashModel", "tiers": {"leaf": {"function": "crc32", "bucket": "hash"}}}
    text = json.dumps(document, indent=2)
    with pytest.raises(InputError) as raised:
        load_hash_model(text)
    assert one_line(raised) == "hash model: line 6: tiers.leaf.bucket: 'hash' is not one of low-bits, modulo"


def test_a_mapping_from_a_settings_file_names_its_key_and_no_line() -> None:
    with pytest.raises(InputError) as raised:
        read_hash_model({"tiers": {"leaf": {"function": "crc64"}}}, "settings fabric.hashModel")
    assert one_line(raised).startswith("settings fabric.hashModel: tiers.leaf.function: 'crc64' is not one of crc32")


def test_a_file_over_the_size_limit_is_refused_before_parsing() -> None:
    with pytest.raises(InputError, match=r"^hash model: larger than 16 MiB; is this a hash model file\?$"):
        load_hash_model(" " * (MAX_HASH_MODEL_CHARS + 1))


def test_a_billion_laughs_file_is_refused_without_expanding_it() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 12)]
    with pytest.raises(InputError, match="anchors and aliases"):
        load_hash_model("\n".join(lines) + "\n")


def test_a_deeply_nested_file_is_one_error() -> None:
    with pytest.raises(InputError, match=r"^hash model: "):
        load_hash_model("tiers: " + "[" * 100_000 + "]" * 100_000 + "\n")


def test_field_paths_quote_names_with_other_characters() -> None:
    assert render_path(("switches", "leaf-03", "members", 2)) == "switches.leaf-03.members[2]"
    assert render_path(("switches", "leaf.03", "seed")) == 'switches["leaf.03"].seed'


def test_the_dumped_file_is_yaml_with_hex_masks_and_seeds() -> None:
    model = HashModel(
        tiers={"leaf": SwitchHash(HashSpec("crc16-ccitt", seed=0x5A5A, bucket="low-bits"))},
        switches={"leaf-1": SwitchHash(LearnedHash((3,), ("spine-0", "spine-1"), 0, (1 << 103,)), "learned", 9)},
    )
    document = yaml.safe_load(dump_hash_model(model))
    assert document["tiers"]["leaf"] == {
        "function": "crc16-ccitt",
        "seed": "0x5a5a",
        "bucket": "low-bits",
        "source": "declared",
    }
    learned = document["switches"]["leaf-1"]
    assert learned["learned"]["rows"] == ["0x" + "0" * 25 + "3"]
    assert learned["learned"]["checks"] == ["0x8" + "0" * 25]
    assert learned["samples"] == 9
