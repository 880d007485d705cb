"""Held out end to end: switches hash with functions calibration is never told (a random affine hash or a seeded
CRC per switch, random member orders); calibration learns them from the switches' answers to the probes alone;
steering with the learned model puts every queue pair of every cross-leaf flow on its planned spine (and core),
as the secret hashes and HCCL's reading of the written file say."""

from __future__ import annotations

import numpy as np
import pytest

from planner import (
    Fabric,
    HashSample,
    HashSpec,
    Pattern,
    calibrate_hash_model,
    fabric_switches,
    plan_ranks,
    probe_tuples,
    steer_source_ports,
    switch_pools,
    tier_of_switch_name,
)
from tests.support.placements import make_topology, worker_placement
from tests.support.steering import followed_queue_pairs
from tests.support.switch_hashes import Hop, declared, random_affine, samples


def secret_hashes(names: list[str], next_hops: dict[str, int], rng: np.random.Generator) -> dict[str, Hop]:
    """A different unnamed hash per switch, with a random member order: over a power-of-two group every other leaf
    a random affine map and the rest CRC-32C with a random seed and low-bit buckets, every spine a random affine
    map; over other groups CRC-16/ARC with a random seed, modulo the group. (Spines hashing the low bits of the
    leaves' function would be polarised: their bucket bits equal to the leaves' up to the seed, some spine and
    core pairs could not be reached by any port.)"""
    hashes: dict[str, Hop] = {}
    for i, name in enumerate(names):
        m = next_hops[name]
        order = tuple(f"spine-{j}" for j in rng.permutation(m))
        if m & (m - 1):
            spec = HashSpec("crc16-ibm", seed=int(rng.integers(0, 1 << 16)), bucket="modulo", members=order)
            hashes[name] = declared(spec, m)
        elif i % 2 or tier_of_switch_name(name) == "spine":
            hashes[name] = random_affine(rng, (m - 1).bit_length())
        else:
            spec = HashSpec("crc32c", seed=int(rng.integers(0, 1 << 32)), bucket="low-bits", members=order)
            hashes[name] = declared(spec, m)
    return hashes


@pytest.mark.parametrize(
    ("uplinks", "leaves_per_pod", "pattern"),
    # 3 leaves a pod: spines with 3 core uplinks, a modulo hash learning cannot take and the family fit finds
    [(2, None, "ring"), (4, None, "ring"), (8, None, "halving-doubling"), (4, 3, "ring"), (2, 2, "halving-doubling")],
)
def test_a_learned_model_steers_every_queue_pair_onto_its_planned_spine(
    uplinks: int, leaves_per_pod: int | None, pattern: Pattern
) -> None:
    rng = np.random.default_rng(uplinks)
    topology = make_topology([4] * 12, leaves_per_pod=leaves_per_pod, fabric=Fabric(leaf_uplinks=uplinks))
    nodes = list(rng.permutation(sorted(topology.paths))[:24])
    placement = worker_placement("job", nodes)
    switches = fabric_switches(topology)
    pools = switch_pools(topology, placement)
    probes = probe_tuples(pools, switches=switches, rng=1)
    secrets = secret_hashes(sorted(probes), {name: switches[name].next_hops for name in probes}, rng)
    answers: list[HashSample] = []
    for name, planned in probes.items():
        tuples = [(p.src, p.dst, p.sport) for p in planned.probes]
        answers += samples(name, secrets[name], tuples, first_line=len(answers) + 1)
    calibration = calibrate_hash_model(answers, switches=switches)
    assert calibration.success, calibration.message
    sources = {name: c.hash.source for name, c in calibration.switches.items() if c.hash is not None}
    assert all(sources[name] == ("fitted" if switches[name].next_hops == 3 else "learned") for name in sources)

    plan = plan_ranks(placement, topology, pattern, "pinned", qps=2, rng=0)
    result = steer_source_ports(placement, topology, plan, calibration.model)
    assert result.mode == "steered", result.message
    assert result.off_plan == 0
    assert plan.routes is not None
    assert result.predicted is not None
    assert result.predicted.max_link_load == pytest.approx(plan.routes.bound)

    # every queue pair, followed through the secret hashes on the ports HCCL reads from the written file
    checked = 0
    for followed in followed_queue_pairs(result):
        key = (followed.src, followed.dst, followed.sport)
        assert secrets[followed.leaf_switch](*key) == followed.spine
        if followed.spine_switch is not None:
            assert secrets[followed.spine_switch](*key) == followed.core
        checked += 1
    assert checked > 0
    if leaves_per_pod is not None:
        assert result.routes is not None
        assert any((c >= 0).any() for c in result.routes.cores), "the case has cross-pod queue pairs"
