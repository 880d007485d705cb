"""`hypernode_tree`: HyperNodes resolved as vc-scheduler resolves them, never raising for their content."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from planner import hypernode_tree, load_kube_objects, topology_from_hypernodes

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "topologies"


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def hypernode(name: str, tier: int, members: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"kind": "HyperNode", "metadata": {"name": name}, "spec": {"tier": tier, "members": members, **spec}}


def member(kind: str, **selector: Any) -> dict[str, Any]:
    return {"type": kind, "selector": selector}


def leaves_and_spine(leaves: int = 6, per_leaf: int = 4) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [node(f"n{i:02d}", tor=f"t{i // per_leaf}") for i in range(leaves * per_leaf)]
    objects = [
        hypernode(f"leaf-{t}", 1, [member("Node", labelMatch={"matchLabels": {"tor": f"t{t}"}})], tierName="leaf")
        for t in range(leaves)
    ]
    objects.append(
        hypernode("spine", 2, [member("HyperNode", exactMatch={"name": f"leaf-{t}"}) for t in range(leaves)])
    )
    return nodes, objects


def test_the_example_hypernodes_give_the_leaves_the_planner_reads() -> None:
    nodes = load_kube_objects((EXAMPLES / "nodes-16.yaml").read_text(encoding="utf-8"))
    objects = load_kube_objects((EXAMPLES / "hypernodes-16.yaml").read_text(encoding="utf-8"))
    tree = hypernode_tree(objects, nodes)
    paths = topology_from_hypernodes(objects, nodes).paths
    leaves = {h.name: h.nodes for h in tree.hypernodes.values() if h.tier == 1}
    assert leaves == {
        leaf: frozenset(n for n, path in paths.items() if path[0] == leaf) for leaf in {p[0] for p in paths.values()}
    }
    assert tree.tier_of_name("leaf") == 1


def test_a_spine_holds_every_node_of_its_leaves_and_each_leaf_names_it_as_parent() -> None:
    nodes, objects = leaves_and_spine()
    tree = hypernode_tree(objects, nodes)
    assert tree.tiers == (1, 2)
    assert tree.hypernodes["spine"].nodes == frozenset(f"n{i:02d}" for i in range(24))
    assert tree.hypernodes["spine"].children == tuple(f"leaf-{t}" for t in range(6))
    assert {h.parent for h in tree.hypernodes.values() if h.tier == 1} == {"spine"}
    assert len(tree.hypernodes["leaf-3"].nodes) == 4
    assert tree.leaf_of("n13") == "leaf-3"
    assert tree.leaf_of("elsewhere") is None
    assert tree.problems == ()


def test_an_empty_label_match_selects_nothing_as_in_volcano() -> None:
    tree = hypernode_tree([hypernode("h", 1, [member("Node", labelMatch={})])], [node("a", x="1")])
    assert tree.hypernodes["h"].nodes == frozenset()


def test_a_hypernode_member_found_by_pattern_is_skipped_as_vc_scheduler_skips_it() -> None:
    nodes, objects = leaves_and_spine(2, 2)
    objects[-1] = hypernode("spine", 2, [member("HyperNode", regexMatch={"pattern": "^leaf-"})])
    tree = hypernode_tree(objects, nodes)
    assert tree.hypernodes["spine"].nodes == frozenset()
    assert tree.problems == (
        "HyperNode spine: spec.members[0].selector: a HyperNode member is found by exactMatch only; skipped",
    )


def test_unreadable_members_and_objects_are_named_and_the_rest_still_resolves() -> None:
    objects = [
        hypernode("bad-regex", 1, [member("Node", regexMatch={"pattern": "("})]),
        hypernode(
            "bad-operator", 1, [member("Node", labelMatch={"matchExpressions": [{"key": "x", "operator": "Near"}]})]
        ),
        hypernode("no-tier", "one", [member("Node", exactMatch={"name": "a"})]),  # type: ignore[arg-type]
        hypernode("good", 1, [member("Node", exactMatch={"name": "a"}), {"type": "Switch", "selector": {}}]),
        {"metadata": {"name": "gone", "deletionTimestamp": "2026-01-01T00:00:00Z"}, "spec": {"tier": 1, "members": []}},
        "not an object",
    ]
    tree = hypernode_tree(objects, [node("a", x="1")])  # type: ignore[arg-type]
    assert set(tree.hypernodes) == {"bad-regex", "bad-operator", "good"}
    assert tree.hypernodes["good"].nodes == frozenset({"a"})
    assert tree.hypernodes["bad-regex"].nodes == frozenset()
    text = "\n".join(tree.problems)
    for named in (
        "bad-regex",
        "invalid regular expression",
        "unknown operator 'Near'",
        "no-tier",
        "Switch",
        "hypernodes[5]",
    ):
        assert named in text


def test_a_cycle_is_cut_and_named() -> None:
    objects = [
        hypernode("a", 2, [member("HyperNode", exactMatch={"name": "b"}), member("Node", exactMatch={"name": "x"})]),
        hypernode("b", 3, [member("HyperNode", exactMatch={"name": "a"}), member("Node", exactMatch={"name": "y"})]),
    ]
    tree = hypernode_tree(objects, [node("x"), node("y")])
    assert tree.hypernodes["a"].nodes == frozenset({"x", "y"})
    assert any("form a cycle" in p for p in tree.problems)


def test_a_member_named_by_two_hypernodes_stays_with_the_first() -> None:
    objects = [
        hypernode("leaf", 1, [member("Node", exactMatch={"name": "x"})]),
        hypernode("p1", 2, [member("HyperNode", exactMatch={"name": "leaf"})]),
        hypernode("p2", 2, [member("HyperNode", exactMatch={"name": "leaf"})]),
    ]
    tree = hypernode_tree(objects, [node("x")])
    assert tree.hypernodes["leaf"].parent == "p1"
    assert tree.hypernodes["p2"].nodes == frozenset()
    assert any("already has a parent (p1)" in p for p in tree.problems)


def _naive(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A label selector evaluated term by term, as metav1.LabelSelectorAsSelector reads it."""
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and labels.get(key) in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


KEYS = st.sampled_from(["rack", "zone", "gpu"])
VALUES = st.sampled_from(["a", "b", "c"])
EXPRESSION = st.one_of(
    st.builds(lambda k, v: {"key": k, "operator": "In", "values": v}, KEYS, st.lists(VALUES, min_size=1, max_size=2)),
    st.builds(
        lambda k, v: {"key": k, "operator": "NotIn", "values": v}, KEYS, st.lists(VALUES, min_size=1, max_size=2)
    ),
    st.builds(lambda k: {"key": k, "operator": "Exists"}, KEYS),
    st.builds(lambda k: {"key": k, "operator": "DoesNotExist"}, KEYS),
)


@settings(max_examples=200, deadline=None)
@given(
    labels=st.lists(st.dictionaries(KEYS, VALUES, max_size=3), min_size=1, max_size=12),
    match_labels=st.dictionaries(KEYS, VALUES, max_size=2),
    expressions=st.lists(EXPRESSION, max_size=3),
)
def test_indexed_label_matching_agrees_with_evaluating_every_node(
    labels: list[dict[str, str]], match_labels: dict[str, str], expressions: list[dict[str, Any]]
) -> None:
    nodes = [node(f"n{i}", **ls) for i, ls in enumerate(labels)]
    selector = {"matchLabels": match_labels, "matchExpressions": expressions}
    tree = hypernode_tree([hypernode("h", 1, [member("Node", labelMatch=selector)])], nodes)
    expected = {f"n{i}" for i, ls in enumerate(labels) if _naive(selector, ls)}
    assert tree.hypernodes["h"].nodes == expected
