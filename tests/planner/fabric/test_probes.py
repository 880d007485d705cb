"""Probes: every switch of a topology named with its next-hop count, its source and destination addresses from the
job's NICs, and tuples that span every key bit steering can vary (brute force on small pools), enough of them for
calibration to learn the switch's hash from the answers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import (
    AddressPool,
    Fabric,
    HashSample,
    InputError,
    address_pool,
    calibrate_hash_model,
    fabric_switches,
    probe_tuples,
    samples_to_learn,
    switch_pools,
)
from planner._hash_model import key_int
from planner.fabric._gf2 import XorBasis
from planner.fabric._probes import _port_span
from tests.support.placements import make_placement, make_topology
from tests.support.switch_hashes import random_affine, samples


def test_every_switch_of_a_two_tier_fabric_is_named_with_its_uplinks() -> None:
    topology = make_topology([2, 3], fabric=Fabric(nics_per_server=2, leaf_oversubscription=2.0))
    switches = fabric_switches(topology)
    assert {name: (s.tier, s.next_hops) for name, s in switches.items()} == {
        "leaf-0": ("leaf", 2),  # 2 servers x 2 NICs at 2:1
        "leaf-1": ("leaf", 3),
    }


def test_rail_switches_and_spines_of_a_three_tier_fabric_are_named() -> None:
    fabric = Fabric(layout="rail", nics_per_server=2, spine_oversubscription=2.0)
    topology = make_topology([4, 4, 4, 4], leaves_per_pod=2, fabric=fabric)
    switches = fabric_switches(topology)
    tier1 = sorted(name for name, s in switches.items() if s.tier == "leaf")
    assert tier1 == [f"leaf-{g}/rail-{d}" for g in range(4) for d in range(2)]
    assert all(switches[name].next_hops == 4 for name in tier1)  # rail switches: one port per server
    spines = sorted(name for name, s in switches.items() if s.tier == "spine")
    assert spines == sorted(f"pod-{p}/rail-{d}/spine-{j}" for p in range(2) for d in range(2) for j in range(4))
    assert all(switches[name].next_hops == 1 for name in spines)  # two leaves per pod at 2:1


def test_a_switchs_sources_are_the_nics_under_it_and_its_destinations_the_rest_of_its_plane() -> None:
    topology = make_topology([2, 2], leaves_per_pod=1, fabric=Fabric(layout="rail", nics_per_server=2))
    nodes = sorted(topology.paths)
    placement = make_placement(nodes, devices=2)  # device d of pod i: 10.2.<i>.<d + 1>
    pools = switch_pools(topology, placement)
    assert set(pools) == {
        "leaf-0/rail-0",
        "leaf-0/rail-1",
        "leaf-1/rail-0",
        "leaf-1/rail-1",
        "pod-0/rail-0/spine-0",
        "pod-0/rail-0/spine-1",
        "pod-0/rail-1/spine-0",
        "pod-0/rail-1/spine-1",
        "pod-1/rail-0/spine-0",
        "pod-1/rail-0/spine-1",
        "pod-1/rail-1/spine-0",
        "pod-1/rail-1/spine-1",
    }
    ip = {f"10.2.{i}.{d + 1}": (i, d) for i in range(4) for d in range(2)}

    def shown(pool: AddressPool) -> set[tuple[int, int]]:
        return {ip[f"{a >> 24}.{a >> 16 & 255}.{a >> 8 & 255}.{a & 255}"] for a in pool.addresses}

    sources, destinations = pools["leaf-0/rail-1"]
    assert shown(sources) == {(0, 1), (1, 1)}
    assert shown(destinations) == {(2, 1), (3, 1)}
    sources, destinations = pools["pod-1/rail-0/spine-1"]
    assert shown(sources) == {(2, 0), (3, 0)}
    assert shown(destinations) == {(0, 0), (1, 0)}


def brute_span(keys: list[int]) -> int:
    return len(XorBasis(key ^ keys[0] for key in keys))


@settings(max_examples=30, deadline=None)
@given(
    sources=st.lists(st.integers(0x0A000000, 0x0A0000FF), min_size=1, max_size=6, unique=True),
    destinations=st.lists(st.integers(0x0A000100, 0x0A0001FF), min_size=1, max_size=6, unique=True),
    low=st.integers(1, 65535 - 40),
    width=st.integers(0, 40),
    seed=st.integers(0, 1000),
)
def test_probes_span_every_key_bit_the_pools_and_ports_vary(
    sources: list[int], destinations: list[int], low: int, width: int, seed: int
) -> None:
    pools = {"leaf-0": (AddressPool(addresses=tuple(sources)), AddressPool(addresses=tuple(destinations)))}
    (probes,) = probe_tuples(pools, ports=(low, low + width), rng=seed).values()
    every = [key_int(s, d, p) for s in sources for d in destinations for p in range(low, low + width + 1)]
    assert probes.span_bits == brute_span(every)
    assert probes.covered_bits == probes.span_bits
    assert brute_span([probe.key for probe in probes.probes]) == probes.span_bits
    assert all(p.src in sources and p.dst in destinations and low <= p.sport <= low + width for p in probes.probes)
    assert len(probes.probes) == probes.needed


@settings(max_examples=40, deadline=None)
@given(low=st.integers(1, 65535), width=st.integers(0, 3000))
def test_the_port_span_is_the_brute_force_span_of_the_range(low: int, width: int) -> None:
    high = min(low + width, 65535)
    assert len(_port_span(low, high)) == brute_span(list(range(low, high + 1)))


def test_probes_over_networks_span_their_host_bits_and_avoid_network_and_broadcast_addresses() -> None:
    pool = address_pool(["192.168.4.0/24", "192.168.9.0/24"])
    (probes,) = probe_tuples({"leaf-3": (pool, pool)}, rng=7).values()
    assert probes.span_bits == (8 + 1) * 2 + 14  # host bits and the network bit, twice; 14 port bits
    assert probes.covered_bits == probes.span_bits
    for probe in probes.probes:
        assert probe.src != probe.dst
        assert probe.src & 0xFF not in (0, 255)
        assert probe.dst & 0xFF not in (0, 255)
        assert 49152 <= probe.sport <= 65535


def test_probes_are_seeded_per_switch_and_a_count_overrides_the_estimate() -> None:
    pool = address_pool(["10.0.0.0/16"])
    first = probe_tuples({"a": (pool, pool), "b": (pool, pool)}, rng=3)
    again = probe_tuples({"b": (pool, pool)}, rng=3)
    assert first["b"] == again["b"]
    assert first["a"].probes != first["b"].probes
    assert probe_tuples({"b": (pool, pool)}, rng=4)["b"] != first["b"]
    assert len(probe_tuples({"a": (pool, pool)}, count=5, rng=3)["a"].probes) == 5
    assert first["a"].needed == samples_to_learn(16 + 16 + 14, 16)


def test_answers_to_the_probes_learn_each_switch() -> None:
    topology = make_topology([4, 4, 4, 4], fabric=Fabric(nics_per_server=2, leaf_uplinks=4))
    placement = make_placement(sorted(topology.paths), devices=2)
    switches = fabric_switches(topology)
    probes = probe_tuples(switch_pools(topology, placement), switches=switches, rng=1)
    rng = np.random.default_rng(0)
    rows: list[HashSample] = []
    for name, planned in probes.items():
        hop = random_affine(rng, 2)
        rows += samples(name, hop, [(p.src, p.dst, p.sport) for p in planned.probes], first_line=len(rows) + 1)
    result = calibrate_hash_model(rows, switches=switches)
    assert {c.status for c in result.switches.values()} == {"complete"}, result.message
    for name, calibration in result.switches.items():
        assert calibration.span_bits == probes[name].span_bits
        assert calibration.samples_needed is not None
        assert calibration.samples_needed <= len(probes[name].probes)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: address_pool(["10.0.0.0/33"]), r"^--addresses 10\.0\.0\.0/33: not an IPv4 address or network"),
        (lambda: address_pool(["fd00::/64"]), r"^--addresses fd00::/64: IPv6; "),
        (lambda: address_pool([]), r"^--addresses: give at least one address or network$"),
        (AddressPool, r"^addresses: an address pool needs at least one address or network$"),
        (lambda: probe_tuples({}), r"^switches: none to probe; "),
        (
            lambda: probe_tuples({"a": (address_pool(["10.0.0.0/24"]),) * 2}, ports=(9, 3)),
            r"^ports: a range low-high within 1-65535, got 9-3$",
        ),
        (lambda: probe_tuples({"a": (address_pool(["10.0.0.0/24"]),) * 2}, count=0), r"^count: 1\.\.100000 "),
    ],
)
def test_bad_probe_requests_are_input_errors(call: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        call()  # type: ignore[operator]
