"""Calibration: hashes learned outright (affine, any member order) and declared functions fitted (seed, member
order) predict the switch's answers beyond the samples; hashes no model explains are refused with the switch and a
contradicting pair of lines; a switch without a model never falls back to its tier's default."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import (
    FabricSwitch,
    HashModel,
    HashSample,
    HashSpec,
    InputError,
    LearnedHash,
    SwitchHash,
    calibrate_hash_model,
    compile_switch_hash,
    samples_to_learn,
)
from planner._hash_model import key_int
from planner.fabric._fitting import family_candidates
from planner.fabric._learning import predictions_to_trust
from planner.fabric._switch_samples import MARGIN
from tests.support.switch_hashes import (
    AffineHash,
    Hop,
    declared,
    multiplicative,
    random_affine,
    random_tuples,
    samples,
)

SPAN_BITS = 78  # random source and destination addresses, and the 14 bits that vary in ports 49152-65535


def predicted(switch: SwitchHash, tuples: list[tuple[int, int, int]], choices: int) -> list[int]:
    compiled = compile_switch_hash(switch, "leaf")
    src = np.array([t[0] for t in tuples], dtype=np.uint64)
    dst = np.array([t[1] for t in tuples], dtype=np.uint64)
    sport = np.array([t[2] for t in tuples], dtype=np.intp)
    return [int(h) for h in compiled.evaluate(src, dst, sport, choices)]


def truth(hop: Hop, tuples: list[tuple[int, int, int]]) -> list[int]:
    return [hop(*t) for t in tuples]


# -- (b) learning ---------------------------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), checks=st.integers(1, 4))
def test_a_random_affine_hash_with_any_member_order_is_learned_and_predicts_fresh_tuples(
    seed: int, checks: int
) -> None:
    rng = np.random.default_rng(seed)
    hop = random_affine(rng, checks)
    count = samples_to_learn(SPAN_BITS, 1 << checks) + 20  # 20 beyond the estimate: a miss is a 1e-6 event
    result = calibrate_hash_model(samples("leaf-7", hop, random_tuples(rng, count)))
    calibration = result.switches["leaf-7"]
    assert calibration.status == "complete", calibration.message
    assert result.success
    assert calibration.hash is not None
    assert calibration.hash.source == "learned"
    assert isinstance(calibration.hash.hash, LearnedHash)
    assert len(calibration.hash.hash.rows) == checks
    assert calibration.span_bits == SPAN_BITS
    assert calibration.samples_needed is not None
    assert calibration.samples_needed <= calibration.samples_used
    fresh = random_tuples(rng, 500)
    assert predicted(calibration.hash, fresh, 1 << checks) == truth(hop, fresh)
    assert calibration.holdout is not None
    assert calibration.holdout.wrong == 0


def test_about_a_hundred_random_samples_learn_a_four_uplink_switch() -> None:
    settled = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        hop = random_affine(rng, 2)
        result = calibrate_hash_model(samples("leaf-0", hop, random_tuples(rng, 120)))
        calibration = result.switches["leaf-0"]
        assert calibration.status == "complete"
        assert calibration.samples_needed is not None
        settled.append(calibration.samples_needed)
    # dim V = 78 and 4 next hops: D must reach dimension 76, which takes 78 + 4 - 2 = 80 samples at the least,
    # and then 10 predictions
    assert min(settled) >= SPAN_BITS + 4 - 2 + predictions_to_trust(4)
    assert max(settled) <= samples_to_learn(SPAN_BITS, 4) == 78 + 4 - 2 + MARGIN + 10 == 102


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), checks=st.integers(1, 3), address_bits=st.integers(2, 3))
def test_a_learned_hash_is_exact_on_every_key_of_a_small_span(seed: int, checks: int, address_bits: int) -> None:
    """Brute force: asked about every key of a small space, the model gives every key of its span (the whole
    space) the switch's own answer."""
    rng = np.random.default_rng(seed)
    hop = random_affine(rng, checks)
    base_src, base_dst = 0x0A000001, 0x0A000101
    space = [
        (base_src ^ (a << 4), base_dst ^ (b << 8), 50000 + port)
        for a in range(1 << address_bits)
        for b in range(1 << address_bits)
        for port in range(4)
    ]
    order = rng.permutation(len(space))
    result = calibrate_hash_model(samples("leaf-1", hop, [space[i] for i in order]))
    calibration = result.switches["leaf-1"]
    assert calibration.status == "complete", calibration.message
    assert calibration.span_bits == 2 * address_bits + 2
    assert calibration.hash is not None
    assert isinstance(calibration.hash.hash, LearnedHash)
    assert predicted(calibration.hash, space, 1 << checks) == truth(hop, space)


def test_keys_outside_the_learned_span_are_unknown() -> None:
    rng = np.random.default_rng(3)
    hop = random_affine(rng, 2)
    inside = [
        (0x0A000000 | int(a), 0x0A010000 | int(b), int(p))
        for a, b, p in zip(
            rng.integers(0, 256, 200), rng.integers(0, 256, 200), rng.integers(49152, 65536, 200), strict=True
        )
    ]
    calibration = calibrate_hash_model(samples("leaf-2", hop, inside)).switches["leaf-2"]
    assert calibration.status == "complete"
    assert calibration.hash is not None
    outside = [(0x0B000001, 0x0A010001, 50000), (0x0A000001, 0x0A020001, 50000)]
    assert predicted(calibration.hash, outside, 4) == [-1, -1]


def test_too_few_samples_need_more_and_say_how_many() -> None:
    rng = np.random.default_rng(11)
    hop = random_affine(rng, 3)
    result = calibrate_hash_model(samples("leaf-4", hop, random_tuples(rng, 40)))
    calibration = result.switches["leaf-4"]
    assert calibration.status == "needs-samples"
    assert calibration.hash is None
    assert calibration.samples_needed is not None
    assert calibration.samples_needed > 40
    assert "learning needs about" in calibration.message
    assert result.status == 1
    assert not result.success
    assert result.model.for_switch("leaf-4", "leaf") is None


def test_a_next_hop_never_answered_leaves_a_partial_table_exact_where_known() -> None:
    rng = np.random.default_rng(5)
    hop = random_affine(rng, 2)
    tuples = [t for t in random_tuples(rng, 400) if hop(*t) != 3][:150]
    calibration = calibrate_hash_model(samples("leaf-5", hop, tuples)).switches["leaf-5"]
    assert calibration.status == "partial", calibration.message
    assert calibration.hash is not None
    fresh = random_tuples(rng, 300)
    for got, want in zip(predicted(calibration.hash, fresh, 4), truth(hop, fresh), strict=True):
        assert got == (want if want != 3 else -1)


# -- (a) fitting a declared function --------------------------------------------------------------------------------


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    function=st.sampled_from(("crc32", "crc32c", "crc16-ccitt", "crc16-ibm", "xor16")),
    members=st.sampled_from((3, 5, 6, 7)),
    window=st.sampled_from(((0, 16), (16, 32), None)),
)
def test_fitting_recovers_a_declared_functions_seed_and_member_order_with_modulo_buckets(
    seed: int, function: str, members: int, window: tuple[int, int] | None
) -> None:
    rng = np.random.default_rng(seed)
    width = 32 if function in ("crc32", "crc32c") else 16
    bits = window if width == 32 else None
    order = tuple(f"spine-{j}" for j in rng.permutation(members))
    secret = HashSpec(function, seed=int(rng.integers(0, 1 << width)), bits=bits, bucket="modulo", members=order)  # type: ignore[arg-type]
    hop = declared(secret)
    model = HashModel(tiers={"leaf": SwitchHash(HashSpec(function, bits=bits, bucket="modulo"))})  # type: ignore[arg-type]
    result = calibrate_hash_model(samples("leaf-9", hop, random_tuples(rng, 80)), model)
    calibration = result.switches["leaf-9"]
    if width == 32 and bits is None:  # a 32-bit window is too wide to search
        assert calibration.status == "refused"
        assert "at most 24" in calibration.message
        return
    assert calibration.status == "complete", calibration.message
    assert calibration.hash is not None
    assert calibration.hash.source == "fitted"
    fresh = random_tuples(rng, 2000)
    assert predicted(calibration.hash, fresh, members) == truth(hop, fresh)
    fitted = calibration.hash.hash
    assert isinstance(fitted, HashSpec)
    # the seed and order found pick what the secret ones pick for every value of the window (2^16 - 1 is a multiple
    # of 3 and 5, so the complemented seed with the negated order is the same hash: the samples cannot tell them apart)
    low, high = bits if bits is not None else (0, width)
    values = np.arange(1 << (high - low), dtype=np.uint64)

    def picks(spec: HashSpec) -> np.ndarray:
        names = np.array([int(name.split("-")[1]) for name in spec.members or ()])
        constant = np.uint64((spec.seed >> low) & ((1 << (high - low)) - 1))
        picked: np.ndarray = names[((values ^ constant) % np.uint64(members)).astype(np.intp)]
        return picked

    assert np.array_equal(picks(fitted), picks(secret))


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    function=st.sampled_from(("crc32", "crc16-ccitt", "xor32")),
    checks=st.integers(1, 4),
)
def test_fitting_a_declared_low_bits_function_recovers_its_member_order(seed: int, function: str, checks: int) -> None:
    rng = np.random.default_rng(seed)
    order = tuple(f"spine-{j}" for j in rng.permutation(1 << checks))
    secret = HashSpec(function, seed=int(rng.integers(0, 1 << 16)), bucket="low-bits", members=order)  # type: ignore[arg-type]
    hop = declared(secret)
    model = HashModel(switches={"leaf-2": SwitchHash(HashSpec(function, bucket="low-bits"))})  # type: ignore[arg-type]
    tuples = random_tuples(rng, 120)
    calibration = calibrate_hash_model(samples("leaf-2", hop, tuples), model).switches["leaf-2"]
    for _ in range(3):  # a member no sample reached: ask the switch again, as an admin does
        if calibration.status not in ("partial", "needs-samples"):
            break
        tuples += random_tuples(rng, 120)
        calibration = calibrate_hash_model(samples("leaf-2", hop, tuples), model).switches["leaf-2"]
    assert calibration.status == "complete", calibration.message
    assert calibration.hash is not None
    fresh = random_tuples(rng, 1000)
    assert predicted(calibration.hash, fresh, 1 << checks) == truth(hop, fresh)
    fitted = calibration.hash.hash
    assert isinstance(fitted, HashSpec)
    # the seed's low bits and the member order are one unknown: the fitted order absorbs them
    low = (1 << checks) - 1
    assert fitted.members == tuple(order[b ^ (secret.seed & low)] for b in range(1 << checks))


def test_a_declared_member_order_is_kept_and_only_the_seed_fitted() -> None:
    rng = np.random.default_rng(8)
    order = ("spine-4", "spine-0", "spine-2", "spine-1", "spine-3")
    secret = HashSpec("crc16-ibm", seed=0xBEEF, bucket="modulo", members=order)
    model = HashModel(tiers={"leaf": SwitchHash(HashSpec("crc16-ibm", bucket="modulo", members=order))})
    calibration = calibrate_hash_model(samples("leaf-3", declared(secret), random_tuples(rng, 60)), model).switches[
        "leaf-3"
    ]
    assert calibration.status == "complete", calibration.message
    assert calibration.hash is not None
    assert calibration.hash.hash == secret


def test_samples_that_contradict_the_declared_function_are_refused_naming_lines() -> None:
    rng = np.random.default_rng(2)
    hop = declared(HashSpec("crc32c", bucket="low-bits"))
    model = HashModel(tiers={"leaf": SwitchHash(HashSpec("crc32", bucket="low-bits"))})
    result = calibrate_hash_model(samples("leaf-6", hop, random_tuples(rng, 100)), model)
    calibration = result.switches["leaf-6"]
    assert calibration.status == "refused"
    assert calibration.contradiction is not None
    a, b = calibration.contradiction
    assert calibration.message.startswith("leaf-6: the samples contradict the declared crc32, low-bits: ")
    assert f"(lines {a} and {b})" in calibration.message
    # the tier default of the declared model no longer applies to the switch that contradicts it
    assert result.model.for_switch("leaf-6", "leaf") is None
    assert result.model.for_switch("leaf-1", "leaf") is not None
    assert "leaf-6" in result.model.unknown
    assert result.status == 2


# -- (c) the family, and hashes no model explains -------------------------------------------------------------------


def test_without_a_declaration_few_samples_of_a_family_function_are_fitted_to_it() -> None:
    rng = np.random.default_rng(4)
    secret = HashSpec(
        "crc16-ccitt", seed=0x1234, bits=(0, 16), bucket="modulo", members=("spine-1", "spine-0", "spine-2")
    )
    hop = declared(secret)
    calibration = calibrate_hash_model(samples("leaf-8", hop, random_tuples(rng, 60))).switches["leaf-8"]
    assert calibration.status == "complete", calibration.message
    assert calibration.hash is not None
    assert calibration.hash.source == "fitted"
    fresh = random_tuples(rng, 2000)
    assert predicted(calibration.hash, fresh, 3) == truth(hop, fresh)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(("crc32 modulo 6", "multiplicative 8", "multiplicative 4")))
def test_samples_of_a_hash_no_model_explains_are_refused_naming_the_switch_and_a_contradicting_pair(
    seed: int, kind: str
) -> None:
    rng = np.random.default_rng(seed)
    if kind == "crc32 modulo 6":  # modulo over the full 32 bits: not affine, and too wide to search
        hop = declared(
            HashSpec(
                "crc32",
                seed=int(rng.integers(0, 1 << 32)),
                bucket="modulo",
                members=tuple(f"spine-{j}" for j in range(6)),
            )
        )
    else:
        hop = multiplicative(int(kind.split()[1]))
    rows = samples("rack-3", hop, random_tuples(rng, 120))
    result = calibrate_hash_model(rows)
    calibration = result.switches["rack-3"]
    assert calibration.status == "refused", calibration.message
    assert calibration.hash is None
    assert calibration.contradiction is not None
    a, b = calibration.contradiction
    assert calibration.message.startswith(f"rack-3: no model explains the samples: lines {a} and {b} ")
    by_line = {sample.line: sample for sample in rows}
    assert by_line[a].next_hop != by_line[b].next_hop
    assert result.model.for_switch("rack-3", "leaf") is None
    assert not result.success


def test_the_family_is_tried_cheap_fits_first() -> None:
    candidates = family_candidates()
    buckets = [spec.bucket for spec in candidates]
    assert buckets == sorted(buckets)  # low-bits (a table) before modulo (a search)
    assert all(spec.bits is None or spec.bits[1] - spec.bits[0] <= 16 for spec in candidates if spec.bucket == "modulo")


# -- the model handed out ----------------------------------------------------------------------------------------


def test_every_returned_model_reproduces_every_sample_of_its_switch() -> None:
    rng = np.random.default_rng(21)
    switches: dict[str, Hop] = {
        "leaf-0": random_affine(rng, 2),
        "leaf-1": declared(
            HashSpec("crc32c", bits=(16, 32), bucket="modulo", members=("spine-2", "spine-0", "spine-1"))
        ),
        "leaf-2": multiplicative(4),
    }
    rows: list[HashSample] = []
    for name, hop in switches.items():
        rows += samples(name, hop, random_tuples(rng, 130), first_line=len(rows) + 1)
    result = calibrate_hash_model(rows)
    assert {name: c.status for name, c in result.switches.items()} == {
        "leaf-0": "complete",
        "leaf-1": "complete",
        "leaf-2": "refused",
    }
    for name, calibration in result.switches.items():
        own = [sample for sample in rows if sample.switch == name]
        switch = result.model.for_switch(name, "leaf")
        if calibration.hash is None:
            assert switch is None
            continue
        assert switch is calibration.hash
        tuples = [(s.src, s.dst, s.sport) for s in own]
        assert predicted(switch, tuples, 4) == [int(s.next_hop.split("-")[1]) for s in own]


def test_declared_entries_without_samples_are_kept() -> None:
    rng = np.random.default_rng(1)
    other = SwitchHash(HashSpec("xor16"))
    model = HashModel(tiers={"spine": SwitchHash(HashSpec("crc32"))}, switches={"leaf-40": other})
    result = calibrate_hash_model(samples("leaf-0", random_affine(rng, 1), random_tuples(rng, 130)), model)
    assert result.model.switches["leaf-40"] is other
    assert result.model.tiers == model.tiers
    assert result.model.switches["leaf-0"].source == "learned"


def test_the_topologys_next_hop_count_makes_an_unseen_member_a_partial_table() -> None:
    rng = np.random.default_rng(6)
    hop = random_affine(rng, 2)
    tuples = [t for t in random_tuples(rng, 400) if hop(*t) in (0, 1, 2)][:150]
    topology = {"leaf-0": FabricSwitch("leaf-0", "leaf", 4)}
    calibration = calibrate_hash_model(samples("leaf-0", hop, tuples), switches=topology).switches["leaf-0"]
    assert calibration.status == "partial"


def test_switches_are_reported_in_natural_name_order_with_a_summary() -> None:
    rng = np.random.default_rng(0)
    rows: list[HashSample] = []
    for name in ("leaf-10", "leaf-9", "leaf-2"):
        rows += samples(name, random_affine(rng, 1), random_tuples(rng, 130), first_line=len(rows) + 1)
    result = calibrate_hash_model(rows)
    assert list(result.switches) == ["leaf-2", "leaf-9", "leaf-10"]
    assert result.message == "every switch calibrated: 3 complete, 0 partial of 3 switches"
    report = result.to_dict()
    assert [row["switch"] for row in report["switches"]] == ["leaf-2", "leaf-9", "leaf-10"]
    assert all(row["source"] == "learned" for row in report["switches"])


def test_a_time_limit_skips_the_switches_it_does_not_reach() -> None:
    rng = np.random.default_rng(0)
    rows: list[HashSample] = []
    for name in ("leaf-1", "leaf-2"):
        rows += samples(name, random_affine(rng, 1), random_tuples(rng, 100), first_line=len(rows) + 1)
    result = calibrate_hash_model(rows, time_limit=1e-9)
    assert {c.status for c in result.switches.values()} == {"skipped"}
    assert result.status == 3
    assert result.model.unknown == {"leaf-1", "leaf-2"}


@pytest.mark.parametrize(
    ("rows", "kwargs", "message"),
    [
        ([], {}, r"^samples: none given; ask the switches about the tuples --print-probes lists$"),
        (
            [HashSample("leaf-1", 1, 2, 3, "spine-0", line=4), HashSample("leaf-1", 1, 2, 4, "core-1", line=9)],
            {},
            r"^line 9: leaf-1 answered core-1 here and spine-0 at line 4: one switch's next hops are all spines",
        ),
        (
            [HashSample("leaf-1", 1, 2, 3, "spine-0", line=4)],
            {"switches": {"leaf-2": FabricSwitch("leaf-2", "leaf", 2)}},
            r"^line 4: switch: 'leaf-1' is not a switch of the topology$",
        ),
        (
            [HashSample("pod-0/spine-1", 1, 2, 3, "spine-0", line=2)],
            {"switches": {"pod-0/spine-1": FabricSwitch("pod-0/spine-1", "spine", 2)}},
            r"^line 2: next_hop: pod-0/spine-1 is a spine switch of the topology, whose next hops are core-<n>, "
            r"not spine-0$",
        ),
        ([HashSample("leaf-1", 1, 2, 3, "spine-0")], {"time_limit": 0}, r"^time_limit: must be a positive number"),
        ([HashSample("leaf-1", 1, 2, 3, "uplink-0")], {}, r"^samples\[0\]: next_hop: next hop 'uplink-0'"),
    ],
)
def test_malformed_input_is_an_input_error_naming_it(
    rows: list[HashSample], kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(InputError, match=message):
        calibrate_hash_model(rows, **kwargs)  # type: ignore[arg-type]


def test_the_affine_test_hash_is_what_it_claims() -> None:
    hop = AffineHash(rows=(1 << 16,), constant=1, order=(1, 0))  # bit 0 of the source port, flipped
    assert [hop(1, 2, port) for port in (0, 1)] == [0, 1]
    assert key_int(0, 0, 1) ^ key_int(0, 0, 0) == 1 << 16
