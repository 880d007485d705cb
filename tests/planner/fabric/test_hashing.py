"""The switch hash family: check values from the CRC catalogue, byte tables that equal the reference one tuple at a
time for every function and layout, learned hashes evaluated by their parity checks, and specs refused by field."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import (
    FabricSwitch,
    HashFunction,
    HashModel,
    HashSpec,
    InputError,
    LearnedHash,
    SwitchHash,
    tier_of_switch_name,
)
from planner._hash_model import (
    FUNCTION_WIDTHS,
    HASH_FUNCTIONS,
    KEY_BITS,
    TUPLE_FIELDS,
    XOR_FUNCTIONS,
    check_switch_hash,
    key_int,
    spine_switch_name,
    tier1_switch_name,
)
from planner.fabric._gf2 import parity
from planner.fabric._hashing import (
    CRC_CONFIGURATIONS,
    KeyMap,
    bucket_of,
    compile_switch_hash,
    function_output,
    hash_output,
)

# Check values of b"123456789" from the catalogue of parametrised CRC algorithms (Greg Cook's "reveng"
# catalogue: CRC-32/ISO-HDLC, CRC-32/BZIP2, CRC-32/ISCSI, CRC-16/IBM-3740, CRC-16/KERMIT, CRC-16/ARC,
# CRC-16/UMTS); the XOR folds are worked out by hand below.
CHECK_VALUES = {
    "crc32": 0xCBF43926,
    "crc32-msb": 0xFC891918,
    "crc32c": 0xE3069283,
    "crc16-ccitt": 0x29B1,
    "crc16-ccitt-lsb": 0x2189,
    "crc16-ibm": 0xBB3D,
    "crc16-ibm-msb": 0xFEE8,
    # "1234" ^ "5678" ^ "9\0\0\0" = 0x31323334 ^ 0x35363738 ^ 0x39000000
    "xor32": 0x31323334 ^ 0x35363738 ^ 0x39000000,
    # "12" ^ "34" ^ "56" ^ "78" ^ "9\0"
    "xor16": 0x3132 ^ 0x3334 ^ 0x3536 ^ 0x3738 ^ 0x3900,
    "xor8": 0x31 ^ 0x32 ^ 0x33 ^ 0x34 ^ 0x35 ^ 0x36 ^ 0x37 ^ 0x38 ^ 0x39,
}

PADS = ("pad8", "pad16", "pad32")


@pytest.mark.parametrize("function", HASH_FUNCTIONS)
def test_every_function_gives_its_catalogue_check_value_of_123456789(function: str) -> None:
    assert function_output(function, b"123456789") == CHECK_VALUES[function]  # type: ignore[arg-type]


def test_the_check_values_of_the_xor_folds_are_what_the_hand_computation_says() -> None:
    assert CHECK_VALUES["xor32"] == 0x3D04040C
    assert CHECK_VALUES["xor16"] == 0x3908
    assert CHECK_VALUES["xor8"] == 0x31


def test_the_family_widths_are_the_crc_configurations_widths() -> None:
    for function, configuration in CRC_CONFIGURATIONS.items():
        assert FUNCTION_WIDTHS[function] == configuration.width
    assert set(FUNCTION_WIDTHS) == set(HASH_FUNCTIONS)
    assert {FUNCTION_WIDTHS[f] for f in XOR_FUNCTIONS} == {32, 16, 8}


def test_a_crc_with_another_init_differs_from_the_standard_one_by_a_constant_for_a_fixed_length() -> None:
    messages = [bytes([i, 7 * i % 256, 3, 200 - i]) for i in range(40)]
    functions: tuple[HashFunction, ...] = ("crc32", "crc16-ccitt", "crc16-ibm")
    for function in functions:
        standard = [function_output(function, m) for m in messages]
        other = [function_output(function, m, 0x1D0F) for m in messages]
        assert len({a ^ b for a, b in zip(standard, other, strict=True)}) == 1


@st.composite
def specs(draw: st.DrawFn, *, with_members: bool = True) -> HashSpec:
    function = draw(st.sampled_from(HASH_FUNCTIONS))
    width = FUNCTION_WIDTHS[function]
    init = None
    if function not in XOR_FUNCTIONS:
        init = draw(st.none() | st.integers(0, (1 << width) - 1))
    seed = draw(st.integers(0, (1 << width) - 1))
    fields = draw(st.permutations(TUPLE_FIELDS))
    kept = draw(st.integers(1, len(fields)))
    key = list(fields[:kept])
    for _ in range(draw(st.integers(0, 2))):
        key.insert(draw(st.integers(0, len(key))), draw(st.sampled_from(PADS)))
    bits = None
    if draw(st.booleans()):
        low = draw(st.integers(0, width - 1))
        bits = (low, draw(st.integers(low + 1, width)))
    bucket = draw(st.sampled_from(("low-bits", "modulo")))
    members = None
    if with_members and draw(st.booleans()):
        window = (bits[1] - bits[0]) if bits is not None else width
        count = 1 << draw(st.integers(0, min(window, 4))) if bucket == "low-bits" else draw(st.integers(1, 9))
        members = tuple(f"spine-{draw(st.integers(0, 63))}" for _ in range(count))
    return HashSpec(function, init, seed, tuple(key), bits, bucket, members)  # type: ignore[arg-type]


def tuples(rng: np.random.Generator, count: int) -> tuple[np.ndarray, ...]:
    src = rng.integers(0, 1 << 32, count, dtype=np.uint64)
    dst = rng.integers(0, 1 << 32, count, dtype=np.uint64)
    sport = rng.integers(0, 1 << 16, count).astype(np.intp)
    dport = rng.integers(0, 1 << 16, count, dtype=np.uint64)
    proto = rng.integers(0, 256, count, dtype=np.uint64)
    return src, dst, sport, dport, proto


@settings(max_examples=60, deadline=None)
@given(spec=specs(), seed=st.integers(0, 2**32 - 1))
def test_byte_tables_give_the_reference_hash_of_every_tuple(spec: HashSpec, seed: int) -> None:
    check_switch_hash(SwitchHash(spec), "leaf", "spec")
    src, dst, sport, dport, proto = tuples(np.random.default_rng(seed), 64)
    tables = KeyMap.from_spec(spec)(src, dst, sport, dport, proto)
    reference = [
        hash_output(spec, int(s), int(d), int(p), dport=int(q), proto=int(r))
        for s, d, p, q, r in zip(src, dst, sport, dport, proto, strict=True)
    ]
    assert tables.tolist() == reference


@settings(max_examples=60, deadline=None)
@given(spec=specs(), seed=st.integers(0, 2**32 - 1), choices=st.integers(1, 16))
def test_a_compiled_hash_picks_the_reference_bucket_and_its_member(spec: HashSpec, seed: int, choices: int) -> None:
    compiled = compile_switch_hash(SwitchHash(spec), "leaf")
    src, dst, sport, dport, proto = tuples(np.random.default_rng(seed), 64)
    hops = [
        int(compiled.evaluate(s, d, p, choices, dport=int(q), proto=int(r)))
        for s, d, p, q, r in zip(src, dst, sport, dport, proto, strict=True)
    ]
    count = len(spec.members) if spec.members is not None else choices
    for hop, s, d, p, q, r in zip(hops, src, dst, sport, dport, proto, strict=True):
        value = hash_output(spec, int(s), int(d), int(p), dport=int(q), proto=int(r))
        if spec.bucket == "low-bits" and spec.members is None and count & (count - 1):
            assert hop == -1  # low-bit buckets over a group that is not a power of two: not what was declared
            continue
        bucket = bucket_of(spec, value, count)
        expected = bucket if spec.members is None else int(spec.members[bucket].split("-")[1])
        assert hop == expected


def test_the_port_table_and_the_fixed_part_add_up_to_the_whole_value() -> None:
    spec = HashSpec("crc32c", seed=0xDEADBEEF, bits=(3, 19))
    key_map = KeyMap.from_spec(spec)
    src, dst, sport, dport, proto = tuples(np.random.default_rng(5), 200)
    whole = key_map(src, dst, sport, dport, proto)
    assert np.array_equal(key_map.fixed(src, dst, dport, proto) ^ key_map.port_values[sport], whole)
    assert key_map.reads_port()
    assert not KeyMap.from_spec(HashSpec("crc32", key=("src", "dst"))).reads_port()


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(st.integers(1, (1 << KEY_BITS) - 1), min_size=1, max_size=4),
    checks=st.lists(st.integers(1, (1 << KEY_BITS) - 1), max_size=3),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_learned_hash_is_its_table_at_the_rows_values_and_unknown_outside_its_span(
    rows: list[int], checks: list[int], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    table = tuple(None if rng.random() < 0.2 else f"spine-{int(rng.integers(0, 8))}" for _ in range(1 << len(rows)))
    src, dst, sport, dport, proto = tuples(rng, 64)
    origin = key_int(int(src[0]), int(dst[0]), int(sport[0]), int(dport[0]), int(proto[0]))
    learned = SwitchHash(LearnedHash(tuple(rows), table, origin, tuple(checks)), "learned", 10)
    check_switch_hash(learned, "leaf", "learned")
    compiled = compile_switch_hash(learned, "leaf")
    for s, d, p, q, r in zip(src, dst, sport, dport, proto, strict=True):
        key = key_int(int(s), int(d), int(p), int(q), int(r))
        z = sum(parity(row & key) << i for i, row in enumerate(rows))
        inside = all(parity(check & (key ^ origin)) == 0 for check in checks)
        name = table[z]
        expected = int(name.split("-")[1]) if inside and name is not None else -1
        assert int(compiled.evaluate(s, d, p, 8, dport=int(q), proto=int(r))) == expected


def test_key_map_rows_are_parities_of_the_canonical_key() -> None:
    rows = [1 << 103, (1 << 16) - 1, 0xFF << 32]  # the top bit of src, the dport, the proto
    key_map = KeyMap.from_rows(rows)
    src, dst, sport, dport, proto = tuples(np.random.default_rng(9), 100)
    values = key_map(src, dst, sport, dport, proto)
    for value, s, d, p, q, r in zip(values, src, dst, sport, dport, proto, strict=True):
        key = key_int(int(s), int(d), int(p), int(q), int(r))
        assert int(value) == sum(parity(row & key) << i for i, row in enumerate(rows))


# -- checks --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (HashSpec("crc64"), r"^spec\.function: 'crc64' is not one of crc32, "),  # type: ignore[arg-type]
        (HashSpec("xor16", init=1), r"^spec\.init: xor16 has no init value; use seed$"),
        (HashSpec("crc16-ibm", init=1 << 16), r"^spec\.init: must be 0\.\.65535 for crc16-ibm, got 65536$"),
        (HashSpec("crc32", seed=-1), r"^spec\.seed: must be 0\.\.4294967295 for crc32, got -1$"),
        (HashSpec("xor8", bits=(0, 9)), r"^spec\.bits: \[low, high\) within 0\.\.8 of xor8, got \[0, 9\)$"),
        (HashSpec("crc32", bits=(5, 5)), r"^spec\.bits: "),
        (HashSpec("crc32", key=()), r"^spec\.key: list the hashed fields"),
        (HashSpec("crc32", key=("src", "src")), r"^spec\.key\[1\]: src appears twice$"),
        (HashSpec("crc32", key=("src", "vlan")), r"^spec\.key\[1\]: 'vlan' is not one of "),  # type: ignore[arg-type]
        (HashSpec("crc32", bucket="random"), r"^spec\.bucket: 'random' is not one of low-bits, modulo$"),  # type: ignore[arg-type]
        (HashSpec("crc32", members=()), r"^spec\.members: list at least one next hop"),
        (HashSpec("crc32", members=("spine-0", "core-1")), r"^spec\.members\[1\]: next hop 'core-1': a leaf"),
        (
            HashSpec("crc32", bucket="low-bits", members=("spine-0", "spine-1", "spine-2")),
            r"^spec\.members: low-bits buckets need a power-of-two member count, got 3; use modulo$",
        ),
        (
            HashSpec("xor8", bits=(0, 1), bucket="low-bits", members=("spine-0",) * 4),
            r"^spec\.members: 4 members need more than the 1 output bits$",
        ),
    ],
)
def test_a_spec_with_a_bad_field_is_refused_naming_it(spec: HashSpec, message: str) -> None:
    with pytest.raises(InputError, match=message):
        check_switch_hash(SwitchHash(spec), "leaf", "spec")


@pytest.mark.parametrize(
    ("learned", "message"),
    [
        (LearnedHash((1,) * 17, (None,) * (1 << 17), 0, ()), r"^h\.learned\.rows: at most 16 "),
        (LearnedHash((1, 2), ("spine-0",) * 3, 0, ()), r"^h\.learned\.table: 4 entries for 2 rows, got 3$"),
        (LearnedHash((0,), ("spine-0", None), 0, ()), r"^h\.learned\.rows\[0\]: a non-zero mask of the 104 key bits$"),
        (LearnedHash((1,), ("spine-0", None), 0, (1 << 104,)), r"^h\.learned\.checks\[0\]: a non-zero mask"),
        (LearnedHash((1,), ("spine-0", None), -1, ()), r"^h\.learned\.origin: a 104-bit key$"),
        (LearnedHash((1,), ("spine-0", "core-2"), 0, ()), r"^h\.learned\.table\[1\]: next hop 'core-2'"),
    ],
)
def test_a_learned_hash_with_a_bad_field_is_refused_naming_it(learned: LearnedHash, message: str) -> None:
    with pytest.raises(InputError, match=message):
        check_switch_hash(SwitchHash(learned, "learned"), "leaf", "h")


def test_a_negative_sample_count_is_refused() -> None:
    with pytest.raises(InputError, match=r"^h\.samples: must be 0 or more, got -1$"):
        check_switch_hash(SwitchHash(HashSpec("crc32"), "fitted", -1), "leaf", "h")


def test_a_switch_takes_its_own_hash_else_its_tiers_and_an_unknown_switch_none() -> None:
    leaf_default = SwitchHash(HashSpec("crc32"))
    own = SwitchHash(HashSpec("xor16"), "fitted", 100)
    model = HashModel(tiers={"leaf": leaf_default}, switches={"leaf-1": own}, unknown={"leaf-2"})
    assert model.for_switch("leaf-1", "leaf") is own
    assert model.for_switch("leaf-3", "leaf") is leaf_default
    assert model.for_switch("leaf-2", "leaf") is None
    assert model.for_switch("pod-0/spine-1", "spine") is None
    assert not model.is_empty
    assert HashModel().is_empty


def test_switch_names_say_their_tier() -> None:
    assert tier1_switch_name("leaf-3", None) == "leaf-3"
    assert tier1_switch_name("group-3", 5) == "group-3/rail-5"
    assert spine_switch_name("pod-1", None, 2) == "pod-1/spine-2"
    assert spine_switch_name("pod-1", 4, 2) == "pod-1/rail-4/spine-2"
    for name in ("leaf-3", "group-3/rail-5", "spine-7", "spine-x/rail-1"):
        assert tier_of_switch_name(name) == "leaf"
    for name in ("pod-1/spine-2", "pod-1/rail-4/spine-0"):
        assert tier_of_switch_name(name) == "spine"
    assert FabricSwitch("leaf-3", "leaf", 4).next_hops == 4
