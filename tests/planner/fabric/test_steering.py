"""Source-port steering: every queue pair of every cross-leaf flow lands on its planned spine (and core), checked
with the reference hash (the `crc` package, one 5-tuple at a time) on the file as HCCL reads it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import (
    Fabric,
    HashModel,
    HashSpec,
    InputError,
    Layout,
    Pattern,
    Placement,
    SteeringResult,
    SwitchHash,
    Topology,
    plan_ranks,
    steer_source_ports,
)
from planner._hash_model import HASH_FUNCTIONS, BucketRule, HashFunction, SwitchTier, next_hop_index
from planner.fabric._hashing import bucket_of, hash_output
from tests.support import hccl_multi_qp
from tests.support.placements import make_topology, worker_placement
from tests.support.steering import followed_queue_pairs


def _case(
    leaf_uplinks: int, *, leaves_per_pod: int | None = None, servers: int = 24, layout: Layout = "tor", seed: int = 0
) -> tuple[Placement, Topology]:
    fabric = Fabric(layout=layout, nics_per_server=8, leaf_uplinks=leaf_uplinks)
    topology = make_topology([4] * 12, leaves_per_pod=leaves_per_pod, fabric=fabric)
    nodes = sorted(topology.paths)
    chosen = list(np.random.default_rng(seed).permutation(nodes)[:servers])
    return worker_placement("job", chosen), topology


def _model(leaf: HashSpec, spine: HashSpec | None = None) -> HashModel:
    tiers: dict[SwitchTier, SwitchHash] = {"leaf": SwitchHash(leaf)}
    if spine is not None:
        tiers["spine"] = SwitchHash(spine)
    return HashModel(tiers=tiers)


def _reference_hop(spec: HashSpec, src: int, dst: int, sport: int, *, choices: int, tier: SwitchTier) -> int:
    value = hash_output(spec, src, dst, sport)
    members = len(spec.members) if spec.members is not None else choices
    bucket = bucket_of(spec, value, members)
    return next_hop_index(spec.members[bucket], tier) if spec.members is not None else bucket


def _check_every_queue_pair(result: SteeringResult, model: HashModel) -> int:
    """Read the written file as HCCL does and follow every queue pair with the reference hash."""
    checked = 0
    for followed in followed_queue_pairs(result):
        switch = model.for_switch(followed.leaf_switch, "leaf")
        assert switch is not None
        assert isinstance(switch.hash, HashSpec)
        key = (followed.src, followed.dst, followed.sport)
        assert _reference_hop(switch.hash, *key, choices=followed.choices, tier="leaf") == followed.spine
        if followed.spine_switch is not None:
            upper = model.for_switch(followed.spine_switch, "spine")
            assert upper is not None
            assert isinstance(upper.hash, HashSpec)
            core = _reference_hop(upper.hash, *key, choices=followed.core_choices, tier="spine")
            assert core == followed.core
        checked += 1
    return checked


@pytest.mark.parametrize("uplinks", [2, 4, 8])
@pytest.mark.parametrize("pattern", ["ring", "halving-doubling"])
@pytest.mark.parametrize("qps", [1, 4])
def test_every_queue_pair_takes_its_planned_spine_on_two_tiers(uplinks: int, pattern: Pattern, qps: int) -> None:
    placement, topology = _case(uplinks)
    plan = plan_ranks(placement, topology, pattern, "pinned", qps=qps, rng=0)
    model = _model(HashSpec("crc16-ccitt", seed=0x5A5A, bucket="modulo"))
    result = steer_source_ports(placement, topology, plan, model)
    assert result.mode == "steered", result.message
    assert result.off_plan == 0
    assert plan.routes is not None
    assert result.predicted is not None
    assert result.predicted.max_link_load == pytest.approx(plan.routes.bound)
    assert _check_every_queue_pair(result, model) > 0


@pytest.mark.parametrize("pattern", ["ring", "halving-doubling"])
def test_queue_pairs_take_their_planned_spine_and_core_on_three_tiers(pattern: Pattern) -> None:
    placement, topology = _case(4, leaves_per_pod=3, servers=32, seed=3)
    plan = plan_ranks(placement, topology, pattern, "pinned", qps=2, rng=0)
    model = _model(
        HashSpec("crc32", seed=7, bucket="low-bits", bits=(0, 16)),
        HashSpec("crc16-ibm", key=("dst", "src", "sport", "dport", "proto"), bucket="modulo"),
    )
    result = steer_source_ports(placement, topology, plan, model)
    assert result.mode == "steered", result.message
    assert result.routes is not None
    assert any((c >= 0).any() for c in result.routes.cores), "the case has cross-pod queue pairs"
    assert result.off_plan == 0
    assert _check_every_queue_pair(result, model) > 0


def test_rail_switches_are_steered_each_by_their_own_hash() -> None:
    placement, topology = _case(4, layout="rail")
    plan = plan_ranks(placement, topology, "ring", "pinned", qps=2, rng=0)
    switches = {
        f"leaf-{leaf}/rail-{d}": SwitchHash(HashSpec("crc32c", seed=leaf * 8 + d, bucket="modulo"))
        for leaf in range(12)
        for d in range(8)
    }
    model = HashModel(switches=switches)
    result = steer_source_ports(placement, topology, plan, model)
    assert result.mode == "steered", result.message
    assert _check_every_queue_pair(result, model) > 0


@given(
    function=st.sampled_from(HASH_FUNCTIONS),
    seed=st.integers(0, 0xFF),
    bucket=st.sampled_from(["low-bits", "modulo"]),
    uplinks=st.sampled_from([2, 4, 8]),
    qps=st.integers(1, 3),
    placement_seed=st.integers(0, 50),
)
@settings(max_examples=25, deadline=None)
def test_any_declared_function_steers_every_queue_pair(
    *, function: HashFunction, seed: int, bucket: BucketRule, uplinks: int, qps: int, placement_seed: int
) -> None:
    placement, topology = _case(uplinks, servers=12, seed=placement_seed)
    plan = plan_ranks(placement, topology, "ring", "pinned", qps=qps, rng=0)
    model = _model(HashSpec(function, seed=seed, bucket=bucket))
    result = steer_source_ports(placement, topology, plan, model)
    assert result.mode == "steered", result.message
    assert _check_every_queue_pair(result, model) > 0


def test_queue_pairs_no_port_can_steer_to_their_spine_are_pinned_again_on_the_spines_their_ports_reach() -> None:
    # xor32 over the 13-byte key: the port lands in bits 8-23 of the fourth word, the low-bits bucket of two
    # spines is bit 0, which only proto, dport and the addresses reach: every port of a connection takes one
    # spine, so the plan's other spine is out of reach; pinned again with each held to its one spine, every queue
    # pair is where the plan puts it, and the prediction says what the ports really do
    placement, topology = _case(2, servers=12)
    plan = plan_ranks(placement, topology, "ring", "pinned", rng=0)
    spec = HashSpec("xor32", bucket="low-bits")
    buckets = {hash_output(spec, 0x0A000001, 0x0A000102, port) & 1 for port in range(49152, 65536, 7)}
    assert len(buckets) == 1
    result = steer_source_ports(placement, topology, plan, _model(spec))
    assert result.mode == "steered"
    assert result.off_plan == 0
    assert "every queue pair on its planned spine" in result.message
    assert plan.routes is not None
    assert result.routes is not None
    assert any(
        not np.array_equal(mine, planned)
        for mine, planned in zip(result.routes.spines, plan.routes.spines, strict=True)
    ), "the routes were pinned again"
    assert result.predicted is not None
    assert result.routes is not None
    assert result.predicted.max_link_load == pytest.approx(result.routes.max_load)
    assert _check_every_queue_pair(result, _model(spec)) > 0, "the file does what the prediction says"


def test_reverse_connections_get_as_many_queue_pairs() -> None:
    placement, topology = _case(4)
    plan = plan_ranks(placement, topology, "ring", "pinned", qps=4, rng=0)
    result = steer_source_ports(placement, topology, plan, _model(HashSpec("crc32")))
    cache = hccl_multi_qp.load(result.config_text())
    for key, ports in cache.items():
        src, dst = key.split(",")
        assert len(hccl_multi_qp.source_ports(cache, dst, src)) == len(ports) == 4
        assert len(set(ports)) == 4, "the queue pairs of one connection never share a port"


def test_without_a_model_ports_are_spread_and_the_report_promises_an_expectation_only() -> None:
    placement, topology = _case(4)
    plan = plan_ranks(placement, topology, "ring", "ecmp", qps=4, rng=0)
    result = steer_source_ports(placement, topology, plan, None)
    assert result.mode == "spread"
    assert result.fallback is None
    assert result.predicted is not None
    assert result.baseline is not None
    assert result.predicted.routing == "ecmp"
    assert result.predicted.qps == 4
    assert result.baseline.qps == 1
    assert result.predicted.max_link_load < result.baseline.max_link_load
    assert "expected max link load" in result.message
    cache = hccl_multi_qp.load(result.config_text())
    assert len(cache) == result.lines
    assert all(len(set(p)) == 4 and all(49152 <= x <= 65535 for x in p) for p in cache.values())


def test_one_queue_pair_without_a_model_writes_nothing() -> None:
    placement, topology = _case(4)
    plan = plan_ranks(placement, topology, "ring", "ecmp", rng=0)
    result = steer_source_ports(placement, topology, plan, None)
    assert result.mode == "none"
    assert result.config_text() == ""
    assert result.fallback is None


def test_a_switch_the_model_does_not_know_falls_back_naming_it() -> None:
    placement, topology = _case(4)
    plan = plan_ranks(placement, topology, "ring", "pinned", qps=2, rng=0)
    model = HashModel(switches={"leaf-0": SwitchHash(HashSpec("crc32"))})
    result = steer_source_ports(placement, topology, plan, model)
    assert result.mode == "spread"
    assert result.fallback is not None
    assert "does not know switch leaf-" in result.fallback
    assert result.message.startswith("steering fell back")


def test_a_hash_that_ignores_the_source_port_falls_back_saying_so() -> None:
    placement, topology = _case(4)
    plan = plan_ranks(placement, topology, "ring", "pinned", rng=0)
    model = _model(HashSpec("crc32", key=("src", "dst", "proto", "dport")))
    result = steer_source_ports(placement, topology, plan, model)
    assert result.mode == "none"
    assert result.fallback is not None
    assert "does not read the UDP source port" in result.fallback


def test_more_lines_than_hccl_reads_fall_back() -> None:
    placement, topology = _case(4)
    plan = plan_ranks(placement, topology, "ring", "pinned", qps=2, rng=0)
    result = steer_source_ports(placement, topology, plan, _model(HashSpec("crc32")), max_lines=10)
    assert result.mode == "none"
    assert result.fallback is not None
    assert "more lines than the 10 HCCL reads" in result.fallback


def test_steering_needs_pinned_routes() -> None:
    placement, topology = _case(4)
    plan = plan_ranks(placement, topology, "ring", "ecmp", qps=2, rng=0)
    result = steer_source_ports(placement, topology, plan, _model(HashSpec("crc32")))
    assert result.mode == "spread"
    assert result.fallback is not None
    assert "needs pinned routes" in result.fallback


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"qps": 33}, "1 to 32"),
        ({"qps": 0}, "1 to 32"),
        ({"port_range": (0, 10)}, "within 1-65535"),
        ({"port_range": (50000, 50002), "qps": 4}, "too narrow"),
        ({"max_lines": 0}, "max_lines"),
    ],
)
def test_bad_arguments_are_input_errors(arguments: dict[str, Any], message: str) -> None:
    placement, topology = _case(4)
    plan = plan_ranks(placement, topology, "ring", "pinned", rng=0)
    with pytest.raises(InputError, match=message):
        steer_source_ports(placement, topology, plan, None, **arguments)


def test_steered_ports_stay_in_the_configured_range() -> None:
    placement, topology = _case(8)
    plan = plan_ranks(placement, topology, "halving-doubling", "pinned", qps=2, rng=0)
    result = steer_source_ports(placement, topology, plan, _model(HashSpec("crc32c")), port_range=(20000, 20999))
    assert result.mode == "steered", result.message
    assert result.ports is not None
    assert result.ports.ports.min() >= 20000
    assert result.ports.ports.max() <= 20999
