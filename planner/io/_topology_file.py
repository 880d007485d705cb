"""ringroute's own topology file, synthetic topologies for benchmarks, and the checks every topology source shares.

The file is YAML (see docs/planner-cli.md):

    apiVersion: ringroute.io/v1alpha1
    kind: Topology
    fabric: {layout: tor, nicsPerServer: 8, linkGbps: 200, leafOversubscription: 1, spineOversubscription: 1}
    leaves:
      - name: leaf-0
        pod: pod-0                      # only in 3-tier fabrics, then on every leaf
        servers: [node-0, node-1, {name: node-2, slot: 5}]

In a rail layout each `leaves` entry is a rail group: NIC d of every server in it is on rail switch d of the group.
A server's slot (NSLB slice id, its port on the leaf) is its position in `servers` unless given.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import yaml

from planner._errors import InputError, TopologyError
from planner._model import Fabric, Layout, Topology, frozen_mapping
from planner.io._numbers import shown

TOPOLOGY_API_VERSION = "ringroute.io/v1alpha1"
TOPOLOGY_KIND = "Topology"

_FABRIC_FIELDS: dict[str, str] = {
    "layout": "layout",
    "nicsPerServer": "nics_per_server",
    "linkGbps": "link_gbps",
    "leafOversubscription": "leaf_oversubscription",
    "spineOversubscription": "spine_oversubscription",
    "leafUplinks": "leaf_uplinks",
}
_DIGITS = re.compile(r"([0-9]+)")  # ASCII: str.isdigit() is also true for "²", which int() refuses
MAX_NICS_PER_SERVER = 64
"""Most NICs per server a fabric may declare (Ascend servers have 8 or 16); the simulator's arrays grow with it."""
MAX_LEAF_UPLINKS = 4096
"""Most uplinks per tier-1 switch a fabric may declare (more than any switch has ports)."""
MAX_GENERATED_SERVERS = 1_000_000
"""Most servers `generate_topology` builds (a synthetic cluster far above any real one)."""
MAX_SLOT = 65_535
"""Largest port slot (NSLB slice id) of a server on its leaf."""
DEFAULT_FABRIC = Fabric()
"""The fabric of sources that give none: a 1:1 Clos of 200 Gbit/s links, ToR layout, 8 NICs per server."""


def natural_key(name: str) -> tuple[tuple[int, int, str], ...]:
    """Sort key that puts `node-9` before `node-10`.

    Digit runs compare by length, then text, once their leading zeros are gone: the numeric order, without
    converting a run that may be thousands of digits long.
    """
    key: list[tuple[int, int, str]] = []
    for part in _DIGITS.split(name):
        if not part:
            continue
        if _DIGITS.fullmatch(part):
            digits = part.lstrip("0") or "0"
            key.append((0, len(digits), digits))
        else:
            key.append((1, 0, part))
    return tuple(key)


def check_fabric(fabric: Fabric, where: str = "fabric") -> Fabric:
    """Return the fabric after checking its values; raise InputError naming the bad field."""
    if fabric.layout not in ("tor", "rail"):
        raise InputError(f"{where}.layout: must be tor or rail, got {fabric.layout!r}")
    if not _bounded_int(fabric.nics_per_server, MAX_NICS_PER_SERVER):
        raise InputError(
            f"{where}.nicsPerServer: must be an integer 1..{MAX_NICS_PER_SERVER}, got {shown(fabric.nics_per_server)}"
        )
    for name, value in (
        ("linkGbps", fabric.link_gbps),
        ("leafOversubscription", fabric.leaf_oversubscription),
        ("spineOversubscription", fabric.spine_oversubscription),
    ):
        if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0 or math.isinf(value):
            raise InputError(f"{where}.{name}: must be a positive number, got {shown(value)}")
    if fabric.leaf_uplinks is not None and not _bounded_int(fabric.leaf_uplinks, MAX_LEAF_UPLINKS):
        raise InputError(
            f"{where}.leafUplinks: must be an integer 1..{MAX_LEAF_UPLINKS}, got {shown(fabric.leaf_uplinks)}"
        )
    return fabric


def _bounded_int(value: object, maximum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= maximum


def validated_topology(
    paths: Mapping[str, Sequence[str]],
    slots: Mapping[str, int] | None = None,
    *,
    fabric: Fabric = DEFAULT_FABRIC,
    source: str,
    drop_single_top: bool = False,
) -> Topology:
    """A Topology after the checks every source shares.

    Every node must list the same number of tiers; a domain must have one parent (ids are unique per tier);
    slots must be unique per leaf; nodes without a slot get their rank in natural name order after the given
    ones. With `drop_single_top`, a top tier that is one domain holding every node is the implicit switch layer
    and is dropped (a HyperNode or label for "the whole spine").
    """
    check_fabric(fabric)
    if not paths:
        raise TopologyError(f"{source}: the topology has no nodes")
    tiered = {node: tuple(str(d) for d in path) for node, path in paths.items()}
    depth_of: dict[int, str] = {}
    for node, path in tiered.items():
        depth_of.setdefault(len(path), node)
    if 0 in depth_of:
        raise TopologyError(f"{source}: node {depth_of[0]} has no topology domain; give it a leaf")
    if len(depth_of) > 1:
        (a_depth, a_node), (b_depth, b_node) = sorted(depth_of.items())[:2]
        raise TopologyError(
            f"{source}: inconsistent tier counts: node {a_node} has {a_depth} tier(s) "
            f"({'/'.join(tiered[a_node])}) but node {b_node} has {b_depth} ({'/'.join(tiered[b_node])}); "
            "every node needs the same topology levels"
        )
    tiers = next(iter(depth_of))
    while drop_single_top and tiers > 1 and len({path[-1] for path in tiered.values()}) == 1:
        tiered = {node: path[:-1] for node, path in tiered.items()}
        tiers -= 1
    for tier in range(tiers - 1):
        parent: dict[str, tuple[str, str]] = {}
        for node, path in tiered.items():
            above = path[tier + 1 :]
            seen = parent.setdefault(path[tier], (above[0], node))
            if seen[0] != above[0]:
                raise TopologyError(
                    f"{source}: domain {path[tier]} (tier {tier + 1}) is under both {seen[0]} (node {seen[1]}) "
                    f"and {above[0]} (node {node}); domain names must be unique per tier"
                )
    given = dict(slots or {})
    unknown = sorted(set(given) - set(tiered), key=natural_key)
    if unknown:
        raise TopologyError(f"{source}: slot given for node {unknown[0]}, which has no topology domain")
    by_leaf: dict[str, list[str]] = {}
    for node in sorted(tiered, key=natural_key):
        by_leaf.setdefault(tiered[node][0], []).append(node)
    full_slots: dict[str, int] = {}
    for leaf, members in by_leaf.items():
        used: dict[int, str] = {}
        for node in members:
            if node in given:
                slot = given[node]
                if not isinstance(slot, int) or isinstance(slot, bool) or not 0 <= slot <= MAX_SLOT:
                    raise TopologyError(
                        f"{source}: node {node}: slot must be an integer 0..{MAX_SLOT}, got {shown(slot)}"
                    )
                if slot in used:
                    raise TopologyError(
                        f"{source}: nodes {used[slot]} and {node} both use slot {slot} on {leaf}; slots "
                        "(slice ids) must be unique per leaf"
                    )
                used[slot] = node
                full_slots[node] = slot
        free = (s for s in range(len(members) + len(used)) if s not in used)
        for node in members:
            if node not in given:
                full_slots[node] = next(free)
    return Topology(paths=frozen_mapping(tiered), slots=frozen_mapping(full_slots), fabric=fabric, source=source)


def _fabric_from_mapping(data: Any, where: str) -> Fabric:
    if data is None:
        return Fabric()
    if not isinstance(data, Mapping):
        raise TopologyError(f"{where}: expected a mapping of fabric fields")
    kwargs: dict[str, Any] = {}
    snake_to_camel = {v: k for k, v in _FABRIC_FIELDS.items()}
    for key, value in data.items():
        name = _FABRIC_FIELDS.get(str(key)) or (str(key) if str(key) in snake_to_camel else None)
        if name is None:
            raise TopologyError(f"{where}.{key}: unknown field (known: {', '.join(_FABRIC_FIELDS)})")
        numeric = name in ("link_gbps", "leaf_oversubscription", "spine_oversubscription")
        kwargs[name] = float(value) if numeric and isinstance(value, int) and not isinstance(value, bool) else value
    try:
        return check_fabric(Fabric(**kwargs), where)
    except InputError as exc:
        raise TopologyError(str(exc)) from None


def load_topology_file(text: str) -> Topology:
    """Parse a ringroute topology file (YAML or JSON); raise TopologyError naming the bad field."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "cannot parse"
        raise TopologyError(f"topology file: malformed YAML{where}: {problem}; fix the file") from exc
    except RecursionError:
        raise TopologyError("topology file: nested too deeply; fix the file") from None
    except ValueError as exc:  # PyYAML's int() of a number of over 4,300 digits
        raise TopologyError(f"topology file: unreadable ({str(exc).splitlines()[0][:120]}); fix the file") from None
    if not isinstance(data, Mapping):
        raise TopologyError("topology file: expected a mapping with fabric and leaves")
    kind = data.get("kind", TOPOLOGY_KIND)
    if kind != TOPOLOGY_KIND:
        raise TopologyError(f"kind: expected {TOPOLOGY_KIND}, got {shown(kind)}")
    known = {"apiVersion", "kind", "metadata", "fabric", "leaves"}
    for key in data:
        if key not in known:
            raise TopologyError(f"{key}: unknown field (known: {', '.join(sorted(known))})")
    fabric = _fabric_from_mapping(data.get("fabric"), "fabric")
    leaves = data.get("leaves")
    if not isinstance(leaves, list) or not leaves:
        raise TopologyError("leaves: expected a non-empty list of {name, servers}")
    paths: dict[str, tuple[str, ...]] = {}
    slots: dict[str, int] = {}
    with_pod: set[bool] = set()
    leaf_names: set[str] = set()
    for i, leaf in enumerate(leaves):
        where = f"leaves[{i}]"
        if not isinstance(leaf, Mapping):
            raise TopologyError(f"{where}: expected a mapping with name and servers")
        for key in leaf:
            if key not in ("name", "pod", "servers"):
                raise TopologyError(f"{where}.{key}: unknown field (known: name, pod, servers)")
        name = leaf.get("name")
        if not isinstance(name, str | int) or str(name) == "":
            raise TopologyError(f"{where}.name: required (the leaf switch or rail group name)")
        name = str(name)
        if name in leaf_names:
            raise TopologyError(f"{where}.name: leaf {name} is listed twice; merge its servers into one entry")
        leaf_names.add(name)
        pod = leaf.get("pod")
        with_pod.add(pod is not None)
        if len(with_pod) > 1:
            raise TopologyError(f"{where}.pod: give a pod on every leaf (3 tiers) or on none (2 tiers)")
        path = (name,) if pod is None else (name, str(pod))
        servers = leaf.get("servers")
        if not isinstance(servers, list) or not servers:
            raise TopologyError(f"{where}.servers: expected a non-empty list of node names")
        for j, server in enumerate(servers):
            node, slot = _leaf_server(server, j, f"{where}.servers[{j}]", paths)
            paths[node] = path
            slots[node] = slot
    return validated_topology(paths, slots, fabric=fabric, source="file")


def _leaf_server(server: Any, index: int, where: str, paths: Mapping[str, tuple[str, ...]]) -> tuple[str, int]:
    """A leaf's server entry (a node name, or `{name, slot}`; the slot defaults to the position) as (node, slot)."""
    if isinstance(server, Mapping):
        node, slot = server.get("name"), server.get("slot", index)
        extra = set(server) - {"name", "slot"}
        if extra:
            raise TopologyError(f"{where}.{sorted(extra)[0]}: unknown field (known: name, slot)")
    else:
        node, slot = server, index
    if not isinstance(node, str | int) or str(node) == "":
        raise TopologyError(f"{where}: expected a node name or {{name, slot}}")
    node = str(node)
    if node in paths:
        raise TopologyError(f"{where}: node {node} is already on {paths[node][0]}; list it once")
    if not isinstance(slot, int) or isinstance(slot, bool) or not 0 <= slot <= MAX_SLOT:
        raise TopologyError(f"{where}.slot: must be an integer 0..{MAX_SLOT}, got {shown(slot)}")
    return node, slot


def _fabric_to_mapping(fabric: Fabric) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for camel, snake in _FABRIC_FIELDS.items():
        value = getattr(fabric, snake)
        if snake == "leaf_uplinks" and value is None:
            continue
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        out[camel] = value
    return out


def dump_topology_file(topology: Topology) -> str:
    """The topology as a ringroute topology file (deterministic: leaves and servers in natural order by slot)."""
    tiers = topology.tiers
    if tiers not in (1, 2):
        raise TopologyError(
            f"topology: the file format holds 2- or 3-tier fabrics (1 or 2 listed tiers), this one lists {tiers}"
        )
    filled = validated_topology(topology.paths, topology.slots, fabric=topology.fabric, source=topology.source)
    by_leaf: dict[str, list[str]] = {}
    for node in sorted(filled.paths, key=natural_key):
        by_leaf.setdefault(filled.paths[node][0], []).append(node)
    leaves: list[dict[str, Any]] = []
    for leaf in sorted(by_leaf, key=natural_key):
        members = sorted(by_leaf[leaf], key=lambda n: (filled.slots[n], natural_key(n)))
        servers: list[Any] = [
            node if filled.slots[node] == position else {"name": node, "slot": filled.slots[node]}
            for position, node in enumerate(members)
        ]
        entry: dict[str, Any] = {"name": leaf}
        if tiers == 2:
            entry["pod"] = filled.paths[members[0]][1]
        entry["servers"] = servers
        leaves.append(entry)
    document = {
        "apiVersion": TOPOLOGY_API_VERSION,
        "kind": TOPOLOGY_KIND,
        "fabric": _fabric_to_mapping(topology.fabric),
        "leaves": leaves,
    }
    header = "# ringroute topology file (docs/planner-cli.md)\n"
    return header + yaml.safe_dump(document, sort_keys=False, default_flow_style=None, width=100_000)


def generate_topology(
    *,
    leaves: int,
    servers_per_leaf: int,
    leaves_per_pod: int | None = None,
    layout: Layout = "tor",
    nics_per_server: int = 8,
    leaf_oversubscription: float = 1.0,
    spine_oversubscription: float = 1.0,
    link_gbps: float = 200.0,
    name_prefix: str = "npu",
) -> Topology:
    """A regular Clos for benchmarks: `leaves` leaves (rail groups in a rail layout) of `servers_per_leaf` servers.

    With `leaves_per_pod`, leaves are grouped into pods of that many under a core layer (3 tiers).
    Servers are `<prefix>-<n>` numbered leaf by leaf, zero-padded; slots are positions on the leaf.
    """
    for name, value in (("leaves", leaves), ("servers_per_leaf", servers_per_leaf)):
        if not _bounded_int(value, MAX_GENERATED_SERVERS):
            raise InputError(f"{name}: must be an integer 1..{MAX_GENERATED_SERVERS}, got {shown(value)}")
    if leaves * servers_per_leaf > MAX_GENERATED_SERVERS:
        raise InputError(
            f"leaves x servers_per_leaf: {leaves * servers_per_leaf} servers; at most {MAX_GENERATED_SERVERS}"
        )
    if leaves_per_pod is not None and not _bounded_int(leaves_per_pod, MAX_GENERATED_SERVERS):
        raise InputError(f"leaves_per_pod: must be an integer 1..{MAX_GENERATED_SERVERS}, got {shown(leaves_per_pod)}")
    if not name_prefix:
        raise InputError("name_prefix: must not be empty")
    fabric = check_fabric(
        Fabric(
            layout=layout,
            nics_per_server=nics_per_server,
            link_gbps=float(link_gbps),
            leaf_oversubscription=float(leaf_oversubscription),
            spine_oversubscription=float(spine_oversubscription),
        )
    )
    total = leaves * servers_per_leaf
    node_width = len(str(total - 1))
    leaf_width = len(str(leaves - 1))
    leaf_word = "leaf" if layout == "tor" else "rail-group"
    pods = 0 if leaves_per_pod is None else -(-leaves // leaves_per_pod)
    pod_width = len(str(max(pods - 1, 0)))
    paths: dict[str, tuple[str, ...]] = {}
    slots: dict[str, int] = {}
    for leaf in range(leaves):
        leaf_name = f"{leaf_word}-{leaf:0{leaf_width}d}"
        path: tuple[str, ...] = (leaf_name,)
        if leaves_per_pod is not None:
            path = (leaf_name, f"pod-{leaf // leaves_per_pod:0{pod_width}d}")
        for position in range(servers_per_leaf):
            node = f"{name_prefix}-{leaf * servers_per_leaf + position:0{node_width}d}"
            paths[node] = path
            slots[node] = position
    return Topology(paths=frozen_mapping(paths), slots=frozen_mapping(slots), fabric=fabric, source="generated")


def node_ip(index: int) -> str:
    """A deterministic private IPv4 address for the index-th synthetic node."""
    return f"10.{(index >> 16) & 255}.{(index >> 8) & 255}.{index & 255}"


def nodes_for_topology(
    topology: Topology,
    label_keys: Sequence[str] = ("volcano.sh/tor",),
    *,
    resource_name: str = "huawei.com/ascend-1980",
    extra_labels: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Node objects (as `kubectl get nodes -o yaml` items) whose labels carry the topology.

    `label_keys` are top-most first, one per listed tier; each node also gets an InternalIP, its hostname label
    and `nics_per_server` allocatable NPUs of `resource_name`.
    """
    keys = list(label_keys)
    if len(keys) != topology.tiers:
        raise InputError(
            f"label_keys: the topology lists {topology.tiers} tier(s); "
            f"give {topology.tiers} label key(s), top-most first"
        )
    nodes: list[dict[str, Any]] = []
    ordered = sorted(topology.paths, key=lambda n: (natural_key(topology.paths[n][0]), natural_key(n)))
    cards = str(topology.fabric.nics_per_server)
    for index, name in enumerate(ordered):
        path = topology.paths[name]
        labels = {"kubernetes.io/hostname": name, **dict(extra_labels or {})}
        for position, key in enumerate(keys):
            labels[key] = path[len(keys) - 1 - position]
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels},
                "status": {
                    "addresses": [
                        {"type": "InternalIP", "address": node_ip(index + 1)},
                        {"type": "Hostname", "address": name},
                    ],
                    "allocatable": {resource_name: cards},
                    "capacity": {resource_name: cards},
                },
            }
        )
    return nodes


def node_address_pairs(nodes: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(address, node name) of every address (InternalIP, ExternalIP, Hostname) of every node, in input order."""
    pairs: list[tuple[str, str]] = []
    for node in nodes:
        metadata = node.get("metadata") if isinstance(node, Mapping) else None
        name = str(metadata.get("name") or "") if isinstance(metadata, Mapping) else ""
        status = node.get("status") if isinstance(node, Mapping) else None
        addresses = status.get("addresses") if isinstance(status, Mapping) else None
        if not name or not isinstance(addresses, list):
            continue
        for address in addresses:
            value = address.get("address") if isinstance(address, Mapping) else None
            if value:
                pairs.append((str(value), name))
    return pairs


__all__ = [
    "DEFAULT_FABRIC",
    "MAX_GENERATED_SERVERS",
    "MAX_LEAF_UPLINKS",
    "MAX_NICS_PER_SERVER",
    "MAX_SLOT",
    "TOPOLOGY_API_VERSION",
    "TOPOLOGY_KIND",
    "check_fabric",
    "dump_topology_file",
    "generate_topology",
    "load_topology_file",
    "natural_key",
    "node_address_pairs",
    "node_ip",
    "nodes_for_topology",
    "validated_topology",
]
