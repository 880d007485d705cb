"""Every topology source, normalised to one `Topology`: node labels, Volcano HyperNodes, MindCluster's
`basic-tor-node-cm` ConfigMap, and ringroute's own topology file (read and written in `_topology_file`).

Errors are TopologyError with one line naming the node or object and the fix.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from planner._errors import InputError, TopologyError
from planner._model import Fabric, Placement, Topology, frozen_mapping
from planner.io._numbers import parse_count, shown
from planner.io._topology_file import (
    DEFAULT_FABRIC,
    MAX_SLOT,
    natural_key,
    node_address_pairs,
    validated_topology,
)

TOPOGRAPH_TIER = re.compile(r"^fabric\.topograph\.run/tier-(\d+)$")

DEFAULT_LABEL_KEYS: tuple[tuple[str, ...], ...] = (
    ("volcano.sh/hypercluster", "volcano.sh/hypernode"),
    ("volcano.sh/tor",),
    ("network.topology.nvidia.com/core", "network.topology.nvidia.com/spine", "network.topology.nvidia.com/leaf"),
    ("fabric.topograph.run/tier-N",),
)
"""Label families recognised when no keys are configured, each top-most first, tried in this order.
`fabric.topograph.run/tier-N` stands for every `tier-<N>` key present (tier-1 = leaf, higher N above)."""

TOR_INFO_KEY = "tor_info"
"""Key of `basic-tor-node-cm` holding the leaves, their servers and slice ids (JSON)."""


def _metadata_name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}


def _node_objects(nodes: Iterable[Mapping[str, Any]]) -> list[tuple[str, Mapping[str, str]]]:
    """(name, labels) of every Node, in input order (a node listed twice appears twice)."""
    out: list[tuple[str, Mapping[str, str]]] = []
    for position, node in enumerate(nodes):
        if not isinstance(node, Mapping):
            raise InputError(f"nodes[{position}]: expected a Node object")
        kind = node.get("kind")
        name = _metadata_name(node)
        if kind not in (None, "Node"):
            raise InputError(f"{shown(kind)} {name or position}: expected Node objects (kubectl get nodes -o yaml)")
        if not name:
            raise InputError(f"nodes[{position}].metadata.name: required")
        out.append((name, _labels(node)))
    return out


def _unique_nodes(
    objects: Sequence[tuple[str, Mapping[str, str]]], keys: Iterable[str]
) -> dict[str, Mapping[str, str]]:
    """Labels by node name. A node listed twice (two `kubectl get` outputs joined) must agree on every label in
    `keys`, or which switch it hangs under would depend on input order: raise TopologyError naming both."""
    wanted = sorted(set(keys))
    first: dict[str, tuple[int, Mapping[str, str]]] = {}
    for position, (name, labels) in enumerate(objects):
        seen = first.setdefault(name, (position, labels))
        if seen[0] == position:
            continue
        differing = next((k for k in wanted if seen[1].get(k) != labels.get(k)), None)
        if differing is not None:
            raise TopologyError(
                f"node {name}: listed twice with different topology labels (nodes[{seen[0]}]: "
                f"{_label_text(seen[1], differing)}; nodes[{position}]: {_label_text(labels, differing)}); "
                "pass each Node once, from one kubectl get nodes -o yaml"
            )
    return {name: labels for name, (_, labels) in first.items()}


def _label_text(labels: Mapping[str, str], key: str) -> str:
    return f"{key}={shown(labels[key])}" if key in labels else f"no {key}"


def _topograph_keys(keys: Iterable[str]) -> list[str]:
    tiers = sorted(((int(m.group(1)), k) for k in keys if (m := TOPOGRAPH_TIER.match(k))), reverse=True)
    return [k for _, k in tiers]


def _family_keys(family: Sequence[str], present: set[str]) -> list[str]:
    if family == ("fabric.topograph.run/tier-N",):
        return _topograph_keys(present)
    return [k for k in family if k in present]


def _looks_topological(key: str) -> bool:
    name = key.rsplit("/", 1)[-1]
    words = ("tor", "tier", "hypernode", "hypercluster", "spine", "leaf", "rack", "core", "switch")
    return "topology" in key or any(word in name for word in words)


def topology_from_nodes(
    nodes: Iterable[Mapping[str, Any]],
    label_keys: Sequence[str] = (),
    fabric: Fabric = DEFAULT_FABRIC,
    *,
    skip_unlabelled: bool = False,
) -> Topology:
    """The topology carried by Node labels.

    `label_keys` are top-most first, as Volcano's label-based HyperNode discovery takes them (e.g.
    `volcano.sh/hypercluster,volcano.sh/hypernode` on A3, `volcano.sh/tor` on A2). Without keys, the first
    family of DEFAULT_LABEL_KEYS present on the nodes is used. Every node must carry every key in use
    (`skip_unlabelled` leaves out nodes that carry none of them, such as CPU nodes). A top tier with a single
    value on every node is the spine layer itself and is dropped.
    """
    objects = _node_objects(nodes)
    if not objects:
        raise TopologyError("nodes: no Node objects given; pass kubectl get nodes -o yaml")
    present = {key for _, labels in objects for key in labels}
    keys = [str(k).strip() for k in label_keys if str(k).strip()]
    if keys:
        for key in keys:
            if key not in present:
                seen = sorted(k for k in present if _looks_topological(k)) or sorted(present)[:5]
                raise TopologyError(
                    f"label key {key}: no node carries it; check the topology label keys "
                    f"(the nodes carry {', '.join(seen) or 'no labels'})"
                )
        described = " or ".join([",".join(keys)])
    else:
        for family in DEFAULT_LABEL_KEYS:
            keys = _family_keys(family, present)
            if keys:
                break
        if not keys:
            families = ", ".join(",".join(f) for f in DEFAULT_LABEL_KEYS)
            raise TopologyError(
                f"node {objects[0][0]}: has no topology labels (looked for {families}); label the nodes "
                "(e.g. kubectl label node <node> volcano.sh/tor=<leaf>) or give the label keys"
            )
        described = ",".join(keys)
    paths: dict[str, tuple[str, ...]] = {}
    for name, labels in _unique_nodes(objects, keys).items():
        carried = [k for k in keys if labels.get(k)]
        if not carried:
            if skip_unlabelled:
                continue
            raise TopologyError(
                f"node {name}: has no topology label {described}; label it "
                f"(kubectl label node {name} {keys[-1]}=<switch>) or leave it out of the nodes"
            )
        if len(carried) != len(keys):
            missing = next(k for k in keys if k not in carried)
            raise TopologyError(
                f"node {name}: inconsistent tier counts: carries {', '.join(carried)} but not {missing}; "
                "every node needs every topology label"
            )
        paths[name] = tuple(labels[k] for k in reversed(keys))
    if not paths:
        raise TopologyError(f"nodes: no node carries the topology labels {described}")
    return validated_topology(paths, fabric=fabric, source="labels", drop_single_top=True)


# -- Volcano HyperNodes ---------------------------------------------------------------------------------------


def _selector_matches_labels(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(str(key)) != str(value):
            return False
    for expression in selector.get("matchExpressions") or []:
        key = str(expression.get("key"))
        operator = expression.get("operator")
        values = [str(v) for v in expression.get("values") or []]
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def _compile(pattern: str, where: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise TopologyError(f"{where}: invalid regular expression {shown(pattern)} ({exc}); fix the pattern") from None


def topology_from_hypernodes(
    hypernodes: Iterable[Mapping[str, Any]],
    nodes: Iterable[Mapping[str, Any]],
    fabric: Fabric = DEFAULT_FABRIC,
) -> Topology:
    """The topology described by Volcano HyperNode objects (topology.volcano.sh/v1alpha1).

    Members are Nodes (by exactMatch, regexMatch over node names, or labelMatch over node labels) or HyperNodes
    (by exactMatch or regexMatch over HyperNode names); a parent's `spec.tier` is above its members'. Only nodes
    inside some HyperNode are in the topology. A root HyperNode holding everything is the top switch layer and is
    not listed as a tier.
    """
    objects = _hypernode_objects(hypernodes)
    node_labels = _unique_nodes(_node_objects(nodes), _selector_keys(objects))
    node_parent: dict[str, str] = {}
    hyper_parent: dict[str, str] = {}
    for name in sorted(objects, key=natural_key):
        for i, member in enumerate(objects[name][1]):
            where = f"HyperNode {name}: spec.members[{i}]"
            member_type, matched = _hypernode_members(where, member, objects, node_labels)
            parents = node_parent if member_type == "Node" else hyper_parent
            for child in matched:
                if member_type == "HyperNode" and child == name:
                    raise TopologyError(f"{where}: HyperNode {name} lists itself as a member")
                previous = parents.setdefault(child, name)
                if previous != name:
                    raise TopologyError(
                        f"{member_type} {child}: member of both HyperNode {previous} and {name}; "
                        "a member belongs to one HyperNode (fix the selectors)"
                    )
    _check_hypernode_tree(objects, hyper_parent)
    if not node_parent:
        raise TopologyError("hypernodes: no HyperNode has Node members matching the given nodes")
    paths: dict[str, tuple[str, ...]] = {}
    for node, leaf in node_parent.items():
        chain = [leaf]
        while chain[-1] in hyper_parent:
            chain.append(hyper_parent[chain[-1]])
        paths[node] = tuple(chain)
    return validated_topology(paths, fabric=fabric, source="hypernodes", drop_single_top=True)


def _selector_keys(objects: Mapping[str, tuple[int, list[Mapping[str, Any]]]]) -> set[str]:
    """Label keys the HyperNodes' labelMatch selectors read: the labels that place a node."""
    keys: set[str] = set()
    for _, members in objects.values():
        for member in members:
            selector = member.get("selector") if isinstance(member, Mapping) else None
            match = selector.get("labelMatch") if isinstance(selector, Mapping) else None
            if not isinstance(match, Mapping):
                continue
            labels = match.get("matchLabels")
            keys.update(str(k) for k in (labels if isinstance(labels, Mapping) else {}))
            expressions = match.get("matchExpressions")
            for expression in expressions if isinstance(expressions, list) else []:
                if isinstance(expression, Mapping) and expression.get("key") is not None:
                    keys.add(str(expression["key"]))
    return keys


def _hypernode_objects(hypernodes: Iterable[Mapping[str, Any]]) -> dict[str, tuple[int, list[Mapping[str, Any]]]]:
    """Each HyperNode's tier and members by name, checked."""
    objects: dict[str, tuple[int, list[Mapping[str, Any]]]] = {}
    for position, hypernode in enumerate(hypernodes):
        if not isinstance(hypernode, Mapping):
            raise InputError(f"hypernodes[{position}]: expected a HyperNode object")
        name = _metadata_name(hypernode)
        kind = hypernode.get("kind")
        if kind not in (None, "HyperNode"):
            raise InputError(
                f"{shown(kind)} {name or position}: expected HyperNode objects (kubectl get hypernodes -o yaml)"
            )
        if not name:
            raise TopologyError(f"hypernodes[{position}].metadata.name: required")
        if name in objects:
            raise TopologyError(f"HyperNode {name}: listed twice; pass each HyperNode once")
        spec = hypernode.get("spec") or {}
        try:
            tier = spec.get("tier")
            if isinstance(tier, str):  # the CRD's tier is an integer; a quoted one never came from the API server
                raise ValueError(f"{shown(tier)} is a string, not an integer")
            tier = parse_count(tier)
        except ValueError as exc:
            raise TopologyError(f"HyperNode {name}: spec.tier: {exc}; give the tier as a small integer") from None
        members = spec.get("members")
        if not isinstance(members, list) or not members:
            raise TopologyError(f"HyperNode {name}: spec.members: needs at least one member")
        objects[name] = (tier, members)
    if not objects:
        raise TopologyError("hypernodes: no HyperNode objects given; pass kubectl get hypernodes -o yaml")
    return objects


def _hypernode_members(
    where: str,
    member: Any,
    objects: Mapping[str, tuple[int, list[Mapping[str, Any]]]],
    node_labels: Mapping[str, Mapping[str, str]],
) -> tuple[str, list[str]]:
    """A member's type (Node or HyperNode) and the names its selector matches."""
    if not isinstance(member, Mapping):
        raise TopologyError(f"{where}: expected a mapping with type and selector")
    member_type = member.get("type")
    if member_type not in ("Node", "HyperNode"):
        raise TopologyError(f"{where}.type: must be Node or HyperNode, got {shown(member_type)}")
    selector = member.get("selector") or {}
    given = [k for k in ("exactMatch", "regexMatch", "labelMatch") if selector.get(k) is not None]
    if len(given) != 1:
        raise TopologyError(f"{where}.selector: give exactly one of exactMatch, regexMatch, labelMatch")
    how = given[0]
    body = selector[how]
    candidates = list(node_labels) if member_type == "Node" else list(objects)
    if how == "exactMatch":
        target = str(body.get("name") or "")
        if not target:
            raise TopologyError(f"{where}.selector.exactMatch.name: required")
        if member_type == "HyperNode" and target not in objects:
            raise TopologyError(f"{where}.selector.exactMatch.name: no HyperNode named {target}; pass every HyperNode")
        return member_type, [target]
    if how == "regexMatch":
        pattern = _compile(str(body.get("pattern") or ""), f"{where}.selector.regexMatch.pattern")
        return member_type, [c for c in candidates if pattern.search(c)]
    if member_type != "Node":
        raise TopologyError(f"{where}.selector.labelMatch: only takes effect for members of type Node")
    return member_type, [c for c in candidates if _selector_matches_labels(body, node_labels[c])]


def _check_hypernode_tree(
    objects: Mapping[str, tuple[int, list[Mapping[str, Any]]]], hyper_parent: Mapping[str, str]
) -> None:
    """HyperNodes contain no cycle, and each sits on a higher tier than its HyperNode members."""
    for start in sorted(hyper_parent, key=natural_key):
        seen = [start]
        current = start
        while current in hyper_parent:
            current = hyper_parent[current]
            if current in seen:
                loop = [*seen[seen.index(current) :], current]
                raise TopologyError(f"HyperNodes {' -> '.join(loop)}: form a cycle; a HyperNode cannot contain itself")
            seen.append(current)
    for child, parent in hyper_parent.items():
        if objects[parent][0] <= objects[child][0]:
            raise TopologyError(
                f"HyperNode {parent}: spec.tier {objects[parent][0]} must be above the tier {objects[child][0]} "
                f"of its member {child}"
            )


# -- MindCluster basic-tor-node-cm ----------------------------------------------------------------------------


def topology_from_tor_configmap(
    configmap: Mapping[str, Any],
    fabric: Fabric = DEFAULT_FABRIC,
    *,
    nodes: Iterable[Mapping[str, Any]] = (),
) -> Topology:
    """The leaves and slice ids of MindCluster's `basic-tor-node-cm` ConfigMap (as prepared for Huawei NSLB).

    `data.tor_info` is JSON: `{"version": "1.0", "tor_count": N, "server_list": [{"tor_id": 0, "tor_ip": "...",
    "server": [{"server_ip": "...", "npu_count": 8, "slice_id": 0}, ...]}, ...]}`. Servers are named by IP;
    with `nodes`, each IP is mapped to the node with that address (otherwise the IP is the node name).
    The parsed `tor_info` object itself is accepted too.
    """
    if not isinstance(configmap, Mapping):
        raise TopologyError("basic-tor-node-cm: expected a ConfigMap object")
    name = _metadata_name(configmap) or "basic-tor-node-cm"
    if "server_list" in configmap:
        tor_info: Any = configmap
    else:
        data = configmap.get("data") or {}
        raw = data.get(TOR_INFO_KEY)
        if raw is None:
            raise TopologyError(
                f"ConfigMap {name}: data.{TOR_INFO_KEY}: missing; pass the basic-tor-node-cm ConfigMap "
                "(kubectl get cm -n kube-system basic-tor-node-cm -o yaml)"
            )
        try:
            tor_info = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError as exc:
            raise TopologyError(
                f"ConfigMap {name}: data.{TOR_INFO_KEY}: not JSON ({exc.msg} at line {exc.lineno}); fix the ConfigMap"
            ) from None
        except (ValueError, RecursionError):  # a number of over 4,300 digits, or nesting past the stack
            raise TopologyError(
                f"ConfigMap {name}: data.{TOR_INFO_KEY}: unreadable JSON (nested too deeply or a number too long); "
                "fix the ConfigMap"
            ) from None
    if not isinstance(tor_info, Mapping) or not isinstance(tor_info.get("server_list"), list):
        raise TopologyError(f"ConfigMap {name}: data.{TOR_INFO_KEY}.server_list: expected a list of switches")
    by_address = _nodes_by_address(nodes)
    paths: dict[str, tuple[str, ...]] = {}
    slots: dict[str, int] = {}
    for i, tor in enumerate(tor_info["server_list"]):
        where = f"ConfigMap {name}: data.{TOR_INFO_KEY}.server_list[{i}]"
        if not isinstance(tor, Mapping):
            raise TopologyError(f"{where}: expected an object with tor_id and server")
        try:
            tor_id = parse_count(tor.get("tor_id"))
        except ValueError as exc:
            raise TopologyError(f"{where}.tor_id: {exc}; give the switch number") from None
        leaf = f"tor-{tor_id}"
        servers = tor.get("server")
        if not isinstance(servers, list):
            raise TopologyError(f"{where}.server: expected a list of servers")
        for j, server in enumerate(servers):
            swhere = f"{where}.server[{j}]"
            if not isinstance(server, Mapping):
                raise TopologyError(f"{swhere}: expected an object with server_ip and slice_id")
            ip = server.get("server_ip")
            if not ip or not isinstance(ip, str):
                raise TopologyError(f"{swhere}.server_ip: required, as a string")
            named = by_address.get(ip, [])
            if len(named) > 1 and not server.get("server_name"):
                raise TopologyError(
                    f"{swhere}.server_ip: {ip} is the address of both node {named[0]} and node {named[1]}; "
                    "fix the nodes' addresses or name the server (server_name)"
                )
            node = str(server.get("server_name") or (named[0] if named else ip))
            if node in paths:
                raise TopologyError(f"{swhere}: server {ip} is already under {paths[node][0]}; list it once")
            try:
                slot = parse_count(server.get("slice_id", j), maximum=MAX_SLOT)
            except ValueError as exc:
                raise TopologyError(f"{swhere}.slice_id: {exc}") from None
            paths[node] = (leaf,)
            slots[node] = slot
    if not paths:
        raise TopologyError(f"ConfigMap {name}: data.{TOR_INFO_KEY}: lists no servers")
    return validated_topology(paths, slots, fabric=fabric, source="tor-configmap")


def _nodes_by_address(nodes: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Address (InternalIP, ExternalIP, Hostname) -> the names of the nodes that have it, each name once."""
    names: dict[str, list[str]] = {}
    for address, name in node_address_pairs(nodes):
        owners = names.setdefault(address, [])
        if name not in owners:
            owners.append(name)
    return names


# -- matching a topology to a placement -----------------------------------------------------------------------


def topology_for_placement(topology: Topology, placement: Placement) -> Topology:
    """The topology keyed by the placement's node names.

    Sources that name servers by IP (the tor ConfigMap) are re-keyed through each server's host IP or server id.
    Raises TopologyError naming the first node (and its pod) the topology does not know.
    """
    renames: dict[str, str] = {}
    for server in placement.servers:
        if server.node_name in topology.paths:
            continue
        alias = next(
            (a for a in (server.host_ip, server.server_id) if a is not None and a in topology.paths),
            None,
        )
        if alias is None:
            raise TopologyError(
                f"node {server.node_name} (pod {server.pod_name}): not in the topology ({topology.source}); "
                "add the node to the topology source or check the node names"
            )
        renames[alias] = server.node_name
    if not renames:
        return topology
    clash = next((new for new in renames.values() if new in topology.paths), None)
    if clash is not None:
        raise TopologyError(f"node {clash}: named twice in the topology (by name and by IP); list it once")
    paths = {renames.get(node, node): path for node, path in topology.paths.items()}
    slots = {renames.get(node, node): slot for node, slot in topology.slots.items()}
    return replace(topology, paths=frozen_mapping(paths), slots=frozen_mapping(slots))


__all__ = [
    "DEFAULT_LABEL_KEYS",
    "TOR_INFO_KEY",
    "topology_for_placement",
    "topology_from_hypernodes",
    "topology_from_nodes",
    "topology_from_tor_configmap",
]
