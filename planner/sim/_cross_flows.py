"""Every cross-leaf flow of some steps, flattened, with the switches and pods it runs between: the table route
pinning (alone, and on a shared fabric) works on."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planner.sim._network import JobNetwork


@dataclass(frozen=True, eq=False)
class CrossFlows:
    """Every cross-leaf (step, pair, nic) flow of some steps, flattened, with its switches and pods."""

    step: np.ndarray
    pair: np.ndarray
    nic: np.ndarray
    plane: np.ndarray
    out_switch: np.ndarray
    """(step, tier-1 switch) vertex id of the source end."""
    in_switch: np.ndarray
    leaf_a: np.ndarray
    leaf_b: np.ndarray
    pod_a: np.ndarray
    pod_b: np.ndarray

    @property
    def cross_pod(self) -> np.ndarray:
        mask: np.ndarray = self.pod_a != self.pod_b
        return mask


CROSS_FIELDS = ("step", "pair", "nic", "plane", "out_switch", "in_switch", "leaf_a", "leaf_b", "pod_a", "pod_b")


def cross_flows(network: JobNetwork, steps: Sequence[np.ndarray]) -> CrossFlows:
    nics, planes = network.nics, network.planes
    counts = [s.shape[0] for s in steps]
    step = np.repeat(np.arange(len(steps)), np.asarray(counts, dtype=np.int64) * nics)
    pair = np.concatenate([np.repeat(np.arange(c), nics) for c in counts]) if steps else np.zeros(0, dtype=np.int64)
    nic = np.tile(np.arange(nics), sum(counts))
    pairs = np.concatenate(steps) if steps else np.zeros((0, 2), dtype=np.int64)
    src = np.repeat(pairs[:, 0], nics)
    dst = np.repeat(pairs[:, 1], nics)
    sw_a, sw_b = network.tier1_switch(src, nic), network.tier1_switch(dst, nic)
    cross = np.flatnonzero(sw_a != sw_b)
    switches = len(network.leaf_names) * planes
    plane = nic if network.layout == "rail" else np.zeros_like(nic)
    return CrossFlows(
        step=step[cross],
        pair=pair[cross],
        nic=nic[cross],
        plane=plane[cross],
        out_switch=step[cross] * switches + sw_a[cross],
        in_switch=step[cross] * switches + sw_b[cross],
        leaf_a=network.server_leaf[src[cross]],
        leaf_b=network.server_leaf[dst[cross]],
        pod_a=network.server_pod[src[cross]],
        pod_b=network.server_pod[dst[cross]],
    )


__all__ = ["CROSS_FIELDS", "CrossFlows", "cross_flows"]
