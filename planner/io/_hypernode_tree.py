"""Volcano HyperNodes resolved the way vc-scheduler resolves them: every HyperNode's tier, tier name, parent,
children and the real nodes under it (`RealNodesSet`), for callers that size jobs against the HyperNodes.

Unlike `topology_from_hypernodes`, which builds a planning topology and refuses inconsistent objects, this reader
keeps going as vc-scheduler does (`pkg/scheduler/api/hyper_node_info.go`, v1.12 through v1.15): a member it
cannot read is skipped and reported in `HyperNodeTree.problems`, a HyperNode being deleted is left out, and a
HyperNode member is found by exact name only. A labelMatch with neither matchLabels nor matchExpressions selects
nothing. Name and label selectors are answered from an index of the nodes' names and labels; a regexMatch
scans every node name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from planner.io._numbers import shown

_SELECTOR_KINDS = ("exactMatch", "regexMatch", "labelMatch")


@dataclass(frozen=True, slots=True)
class HyperNodeInfo:
    """One HyperNode as vc-scheduler sees it."""

    name: str
    tier: int
    """`spec.tier`: 1 for a leaf switch's HyperNode, higher above it."""
    tier_name: str
    """`spec.tierName` (Volcano 1.14+; `highestTierName` names it), "" when unset."""
    parent: str | None
    """The HyperNode listing this one as a member."""
    children: tuple[str, ...]
    """HyperNode members, sorted."""
    nodes: frozenset[str]
    """Names of the real nodes under it, through its HyperNode members too."""


@dataclass(frozen=True, slots=True)
class HyperNodeTree:
    """Every HyperNode by name, and what could not be read."""

    hypernodes: Mapping[str, HyperNodeInfo] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    """One line per member or object skipped, naming it."""

    @property
    def tiers(self) -> tuple[int, ...]:
        """The tiers present, lowest first."""
        return tuple(sorted({h.tier for h in self.hypernodes.values()}))

    def tier_of_name(self, tier_name: str) -> int | None:
        """The tier a `spec.tierName` stands for (the highest one when HyperNodes disagree, as vc-scheduler's
        map keeps the last it read), None when no HyperNode carries that name."""
        tiers = [h.tier for h in self.hypernodes.values() if h.tier_name and h.tier_name == tier_name]
        return max(tiers) if tiers else None

    def leaf_of(self, node: str) -> str | None:
        """The lowest-tier HyperNode holding `node` (vc-scheduler's FindHyperNodeForNode), None outside all."""
        best: HyperNodeInfo | None = None
        for info in self.hypernodes.values():
            if node in info.nodes and (best is None or (info.tier, info.name) < (best.tier, best.name)):
                best = info
        return best.name if best is not None else None


@dataclass(slots=True)
class _NodeIndex:
    """Node names and labels, with each (key, value) pair's nodes for selectors that name values."""

    names: list[str]
    labels: dict[str, Mapping[str, str]]
    by_pair: dict[tuple[str, str], set[str]]
    by_key: dict[str, set[str]]


def _node_index(nodes: Iterable[Mapping[str, Any]]) -> _NodeIndex:
    index = _NodeIndex([], {}, {}, {})
    for node in nodes:
        if not isinstance(node, Mapping):
            continue
        metadata = node.get("metadata")
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        if not isinstance(name, str) or not name or name in index.labels:
            continue
        raw = metadata.get("labels") if isinstance(metadata, Mapping) else None
        labels = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}
        index.names.append(name)
        index.labels[name] = labels
        for key, value in labels.items():
            index.by_pair.setdefault((key, value), set()).add(name)
            index.by_key.setdefault(key, set()).add(name)
    return index


class _SelectorError(ValueError):
    """A selector vc-scheduler cannot convert: it then matches nothing."""


def _label_members(selector: Mapping[str, Any], index: _NodeIndex) -> set[str]:
    """Nodes a labelMatch selects (metav1.LabelSelectorAsSelector semantics); nothing for an empty selector."""
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping) or not isinstance(expressions, list):
        raise _SelectorError("matchLabels must be a mapping and matchExpressions a list")
    if not match_labels and not expressions:
        return set()
    # Narrow with the terms an index answers, then check the rest node by node.
    candidates: set[str] | None = None
    for key, value in match_labels.items():
        found = index.by_pair.get((str(key), str(value)), set())
        candidates = set(found) if candidates is None else candidates & found
    checks: list[tuple[str, str, frozenset[str]]] = []
    for expression in expressions:
        if not isinstance(expression, Mapping):
            raise _SelectorError("a matchExpressions entry must be a mapping")
        key = str(expression.get("key") or "")
        operator = expression.get("operator")
        values = frozenset(str(v) for v in expression.get("values") or [])
        if not key:
            raise _SelectorError("a matchExpressions entry needs a key")
        if operator in ("In", "NotIn") and not values:
            raise _SelectorError(f"operator {operator} needs values")
        if operator in ("Exists", "DoesNotExist") and values:
            raise _SelectorError(f"operator {operator} takes no values")
        if operator == "In":
            found = set().union(*(index.by_pair.get((key, v), set()) for v in values))
            candidates = found if candidates is None else candidates & found
        elif operator == "Exists":
            found = index.by_key.get(key, set())
            candidates = set(found) if candidates is None else candidates & found
        elif operator in ("NotIn", "DoesNotExist"):
            checks.append((key, str(operator), values))
        else:
            raise _SelectorError(f"unknown operator {shown(operator)}")
    pool: Iterable[str] = candidates if candidates is not None else index.names
    out: set[str] = set()
    for name in pool:
        labels = index.labels[name]
        if all(
            (labels.get(key) not in values) if operator == "NotIn" else (key not in labels)
            for key, operator, values in checks
        ):
            out.add(name)
    return out


def _node_members(selector: Mapping[str, Any], index: _NodeIndex, patterns: dict[str, re.Pattern[str]]) -> set[str]:
    """Node names a member selector matches (vc-scheduler's GetMembers: the union of the kinds given)."""
    members: set[str] = set()
    exact = selector.get("exactMatch")
    if isinstance(exact, Mapping) and exact.get("name"):
        members.add(str(exact["name"]))
    regex = selector.get("regexMatch")
    if isinstance(regex, Mapping):
        pattern = str(regex.get("pattern") or "")
        compiled = patterns.get(pattern)
        if compiled is None:
            try:
                compiled = patterns[pattern] = re.compile(pattern)
            except re.error as exc:
                raise _SelectorError(f"invalid regular expression {shown(pattern)} ({exc})") from None
        members.update(name for name in index.names if compiled.search(name))
    label = selector.get("labelMatch")
    if isinstance(label, Mapping):
        members |= _label_members(label, index)
    return members


def _read_specs(hypernodes: Iterable[Mapping[str, Any]], problems: list[str]) -> dict[str, tuple[int, str, list[Any]]]:
    """Tier, tier name and members of every HyperNode vc-scheduler would keep, by name."""
    specs: dict[str, tuple[int, str, list[Any]]] = {}
    for position, obj in enumerate(hypernodes):
        if not isinstance(obj, Mapping):
            problems.append(f"hypernodes[{position}]: not an object")
            continue
        raw_metadata = obj.get("metadata")
        metadata: Mapping[str, Any] = raw_metadata if isinstance(raw_metadata, Mapping) else {}
        name = metadata.get("name")
        if not isinstance(name, str) or not name:
            problems.append(f"hypernodes[{position}]: no metadata.name")
            continue
        if metadata.get("deletionTimestamp"):
            continue  # vc-scheduler drops a HyperNode being deleted
        raw_spec = obj.get("spec")
        spec: Mapping[str, Any] = raw_spec if isinstance(raw_spec, Mapping) else {}
        tier = spec.get("tier")
        if isinstance(tier, bool) or not isinstance(tier, int) or tier < 0:
            problems.append(f"HyperNode {name}: spec.tier {shown(tier)} is not a tier number; left out")
            continue
        members = spec.get("members")
        tier_name = spec.get("tierName")
        specs[name] = (
            tier,
            tier_name if isinstance(tier_name, str) else "",
            members if isinstance(members, list) else [],
        )
    return specs


def _hypernode_member(where: str, selector: Mapping[str, Any], name: str, parent: dict[str, str]) -> str | None:
    """The HyperNode a member names (exactMatch only), recording its parent; None (with why) when skipped."""
    exact = selector.get("exactMatch")
    child = str(exact.get("name") or "") if isinstance(exact, Mapping) else ""
    if not child:
        return f"{where}.selector: a HyperNode member is found by exactMatch only; skipped"
    if child == name or parent.get(child, name) != name:
        return f"{where}: HyperNode {child} already has a parent ({parent.get(child, name)}); skipped"
    parent[child] = name
    return None


def hypernode_tree(hypernodes: Iterable[Mapping[str, Any]], nodes: Iterable[Mapping[str, Any]]) -> HyperNodeTree:
    """Resolve HyperNode objects (topology.volcano.sh/v1alpha1) against Node objects as vc-scheduler does.

    Never raises for the objects' content: what cannot be read is left out and named in `problems`.
    """
    index = _node_index(nodes)
    problems: list[str] = []
    specs = _read_specs(hypernodes, problems)
    patterns: dict[str, re.Pattern[str]] = {}
    direct: dict[str, set[str]] = {}
    parent: dict[str, str] = {}
    for name in sorted(specs):
        direct[name] = set()
        for i, member in enumerate(specs[name][2]):
            where = f"HyperNode {name}: spec.members[{i}]"
            kind = member.get("type") if isinstance(member, Mapping) else None
            selector = member.get("selector") if isinstance(member, Mapping) else None
            if not isinstance(selector, Mapping):
                problems.append(f"{where}: no selector; skipped")
            elif kind == "Node":
                try:
                    direct[name] |= _node_members(selector, index, patterns)
                except _SelectorError as exc:
                    problems.append(f"{where}.selector: {exc}; matches nothing")
            elif kind == "HyperNode":
                skipped = _hypernode_member(where, selector, name, parent)
                if skipped is not None:
                    problems.append(skipped)
            else:
                problems.append(f"{where}.type: {shown(kind)} is neither Node nor HyperNode; skipped")
    children: dict[str, set[str]] = {name: set() for name in specs}
    for child, name in parent.items():
        if child in specs:  # a member named but not created (yet) adds nothing, as in vc-scheduler
            children[name].add(child)

    real: dict[str, frozenset[str]] = {}

    def resolve(name: str, chain: tuple[str, ...]) -> frozenset[str]:
        if name in real:
            return real[name]
        found = set(direct[name])
        for child in sorted(children[name]):
            if child in chain:
                problems.append(f"HyperNodes {' -> '.join((*chain, child))}: form a cycle; {child} left out of {name}")
                continue
            found |= resolve(child, (*chain, child))
        real[name] = frozenset(found)
        return real[name]

    tree = {
        name: HyperNodeInfo(
            name=name,
            tier=tier,
            tier_name=tier_name,
            parent=parent.get(name) if parent.get(name) in specs else None,
            children=tuple(sorted(children[name])),
            nodes=resolve(name, (name,)),
        )
        for name, (tier, tier_name, _) in specs.items()
    }
    return HyperNodeTree(hypernodes=MappingProxyType(tree), problems=tuple(problems))


__all__ = ["HyperNodeInfo", "HyperNodeTree", "hypernode_tree"]
