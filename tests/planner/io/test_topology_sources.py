"""Every topology source normalises to the same Topology; bad topology input is one line naming the object."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import (
    Fabric,
    InputError,
    Placement,
    Server,
    TopologyError,
    dump_topology_file,
    generate_topology,
    load_kube_objects,
    load_topology_file,
    nodes_for_topology,
    topology_for_placement,
    topology_from_hypernodes,
    topology_from_nodes,
    topology_from_tor_configmap,
)

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "topologies"
SIXTEEN = {f"npu-{i:02d}": (f"leaf-{i // 4}",) for i in range(16)}


@pytest.fixture(scope="module")
def nodes() -> list[dict[str, Any]]:
    return load_kube_objects((EXAMPLES / "nodes-16.yaml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def hypernode_validator(data_dir: Path) -> jsonschema.protocols.Validator:
    crd = yaml.safe_load((data_dir / "schemas" / "topology.volcano.sh_hypernodes.yaml").read_text(encoding="utf-8"))
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return jsonschema.Draft7Validator(schema)


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def hypernode(name: str, tier: int, members: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "members": members},
    }


def member(kind: str, **selector: Any) -> dict[str, Any]:
    return {"type": kind, "selector": selector}


# -- labels ------------------------------------------------------------------------------------------------------


def test_volcano_tor_labels_are_recognised_without_keys(nodes: list[dict[str, Any]]) -> None:
    topology = topology_from_nodes(nodes)
    assert dict(topology.paths) == SIXTEEN
    assert topology.source == "labels"
    assert topology.slots["npu-05"] == 1


def test_a3_label_keys_top_most_first_give_three_tiers() -> None:
    labelled = [
        node(f"n{i}", **{"volcano.sh/hypercluster": f"hc-{i // 4}", "volcano.sh/hypernode": f"hn-{i // 2}"})
        for i in range(8)
    ]
    topology = topology_from_nodes(labelled, ["volcano.sh/hypercluster", "volcano.sh/hypernode"])
    assert topology.paths["n5"] == ("hn-2", "hc-1")
    assert topology.tiers == 2


def test_a_top_tier_shared_by_every_node_is_the_spine_layer_and_is_dropped() -> None:
    labelled = [
        node(f"n{i}", **{"volcano.sh/hypercluster": "hc-0", "volcano.sh/hypernode": f"hn-{i // 2}"}) for i in range(4)
    ]
    assert topology_from_nodes(labelled).paths["n3"] == ("hn-1",)


def test_nvidia_and_topograph_label_families_are_recognised() -> None:
    nvidia = [
        node(
            f"g{i}",
            **{
                "network.topology.nvidia.com/core": "core-0",
                "network.topology.nvidia.com/spine": f"spine-{i // 4}",
                "network.topology.nvidia.com/leaf": f"leaf-{i // 2}",
            },
        )
        for i in range(8)
    ]
    assert topology_from_nodes(nvidia).paths["g7"] == ("leaf-3", "spine-1")
    topograph = [
        node(f"t{i}", **{"fabric.topograph.run/tier-1": f"sw-{i // 2}", "fabric.topograph.run/tier-2": f"b-{i // 4}"})
        for i in range(8)
    ]
    assert topology_from_nodes(topograph).paths["t6"] == ("sw-3", "b-1")


def test_natural_slot_order_puts_node_9_before_node_10() -> None:
    labelled = [node(f"node-{i}", **{"volcano.sh/tor": "leaf"}) for i in (10, 9, 1)]
    slots = topology_from_nodes(labelled).slots
    assert (slots["node-1"], slots["node-9"], slots["node-10"]) == (0, 1, 2)


def test_a_node_without_topology_labels_is_named_with_the_fix(nodes: list[dict[str, Any]]) -> None:
    broken = copy.deepcopy(nodes)
    del broken[5]["metadata"]["labels"]["volcano.sh/tor"]
    with pytest.raises(TopologyError, match=r"^node npu-05: has no topology label volcano.sh/tor; label it") as raised:
        topology_from_nodes(broken)
    assert "\n" not in str(raised.value)
    assert "npu-05" not in topology_from_nodes(broken, skip_unlabelled=True).paths


def test_no_recognised_labels_at_all_names_a_node_and_the_families() -> None:
    with pytest.raises(TopologyError, match=r"node a: has no topology labels \(looked for .*volcano.sh/tor"):
        topology_from_nodes([node("a", rack="r1")])


def test_unknown_label_key_is_reported_with_the_keys_nodes_carry(nodes: list[dict[str, Any]]) -> None:
    with pytest.raises(TopologyError, match=r"label key example.com/tor: no node carries it.*volcano.sh/tor"):
        topology_from_nodes(nodes, ["example.com/tor"])


def test_inconsistent_tier_counts_name_the_node() -> None:
    labelled = [
        node("a", **{"volcano.sh/hypercluster": "hc-0", "volcano.sh/hypernode": "hn-0"}),
        node("b", **{"volcano.sh/hypernode": "hn-1"}),
    ]
    with pytest.raises(TopologyError, match=r"node b: inconsistent tier counts"):
        topology_from_nodes(labelled, ["volcano.sh/hypercluster", "volcano.sh/hypernode"])


def test_a_leaf_under_two_parents_is_rejected() -> None:
    labelled = [
        node("a", **{"volcano.sh/hypercluster": "hc-0", "volcano.sh/hypernode": "hn-0"}),
        node("b", **{"volcano.sh/hypercluster": "hc-1", "volcano.sh/hypernode": "hn-0"}),
    ]
    with pytest.raises(TopologyError, match=r"domain hn-0 .* is under both hc-0"):
        topology_from_nodes(labelled)


# -- HyperNodes --------------------------------------------------------------------------------------------------


def test_example_hypernodes_validate_against_the_crd_and_match_the_labels(
    nodes: list[dict[str, Any]], hypernode_validator: jsonschema.protocols.Validator
) -> None:
    hypernodes = load_kube_objects((EXAMPLES / "hypernodes-16.yaml").read_text(encoding="utf-8"))
    for obj in hypernodes:
        hypernode_validator.validate(obj)
    selectors = {next(iter(m["selector"])) for h in hypernodes for m in h["spec"]["members"]}
    assert selectors == {"exactMatch", "regexMatch", "labelMatch"}
    topology = topology_from_hypernodes(hypernodes, nodes)
    assert dict(topology.paths) == SIXTEEN
    assert topology.source == "hypernodes"


def test_hypernodes_nest_by_tier_into_three_tiers(hypernode_validator: jsonschema.protocols.Validator) -> None:
    cluster = [node(f"n{i}", rack=f"r{i // 2}") for i in range(8)]
    objects = [
        *(hypernode(f"leaf-{r}", 1, [member("Node", labelMatch={"matchLabels": {"rack": f"r{r}"}})]) for r in range(4)),
        hypernode(
            "pod-0",
            2,
            [member("HyperNode", exactMatch={"name": "leaf-0"}), member("HyperNode", exactMatch={"name": "leaf-1"})],
        ),
        hypernode("pod-1", 2, [member("HyperNode", regexMatch={"pattern": "^leaf-[23]$"})]),
        hypernode("core", 3, [member("HyperNode", regexMatch={"pattern": "^pod-"})]),
    ]
    for obj in objects:
        hypernode_validator.validate(obj)
    topology = topology_from_hypernodes(objects, cluster)
    assert topology.paths["n5"] == ("leaf-2", "pod-1")
    assert topology.tiers == 2


def test_label_match_expressions_support_not_in_exists_and_does_not_exist() -> None:
    cluster = [node("a", zone="x", gpu="yes"), node("b", zone="y"), node("c", zone="z")]
    expressions = [
        {"key": "zone", "operator": "NotIn", "values": ["z"]},
        {"key": "zone", "operator": "Exists"},
        {"key": "gpu", "operator": "DoesNotExist"},
    ]
    objects = [
        hypernode("h1", 1, [member("Node", labelMatch={"matchExpressions": expressions})]),
        hypernode("h2", 1, [member("Node", exactMatch={"name": "a"}), member("Node", exactMatch={"name": "c"})]),
    ]
    paths = topology_from_hypernodes(objects, cluster).paths
    assert dict(paths) == {"b": ("h1",), "a": ("h2",), "c": ("h2",)}


def test_hypernode_cycle_is_named() -> None:
    objects = [
        hypernode("leaf", 1, [member("Node", exactMatch={"name": "a"})]),
        hypernode(
            "x", 2, [member("HyperNode", exactMatch={"name": "leaf"}), member("HyperNode", exactMatch={"name": "y"})]
        ),
        hypernode("y", 3, [member("HyperNode", exactMatch={"name": "x"})]),
    ]
    with pytest.raises(TopologyError, match=r"HyperNodes x -> y -> x: form a cycle"):
        topology_from_hypernodes(objects, [node("a")])


@pytest.mark.parametrize(
    ("objects", "match"),
    [
        (
            [
                hypernode(
                    "h", 1, [member("Node", exactMatch={"name": "a"}), member("Node", regexMatch={"pattern": "a"})]
                ),
                hypernode("g", 1, [member("Node", exactMatch={"name": "a"})]),
            ],
            "Node a: member of both HyperNode g and h",
        ),
        ([hypernode("h", 1, [member("HyperNode", exactMatch={"name": "missing"})])], "no HyperNode named missing"),
        ([hypernode("h", 1, [member("Node", regexMatch={"pattern": "("})])], "invalid regular expression"),
        ([hypernode("h", 1, [member("Node")])], "give exactly one of exactMatch"),
        ([hypernode("h", 1, [member("Rack", exactMatch={"name": "a"})])], "must be Node or HyperNode"),
        (
            [
                hypernode("leaf", 2, [member("Node", exactMatch={"name": "a"})]),
                hypernode("top", 1, [member("HyperNode", exactMatch={"name": "leaf"})]),
            ],
            "HyperNode top: spec.tier 1 must be above",
        ),
        ([{"kind": "HyperNode", "metadata": {"name": "h"}, "spec": {"members": []}}], "HyperNode h: spec.tier"),
    ],
)
def test_bad_hypernodes_are_one_line_errors_naming_the_object(objects: list[dict[str, Any]], match: str) -> None:
    with pytest.raises(TopologyError, match=match) as raised:
        topology_from_hypernodes(objects, [node("a"), node("b")])
    assert "\n" not in str(raised.value)


# -- basic-tor-node-cm -------------------------------------------------------------------------------------------


def tor_configmap() -> dict[str, Any]:
    return load_kube_objects((EXAMPLES / "basic-tor-node-cm.yaml").read_text(encoding="utf-8"))[0]


def test_tor_configmap_gives_leaves_and_slice_ids_mapped_to_node_names(nodes: list[dict[str, Any]]) -> None:
    topology = topology_from_tor_configmap(tor_configmap(), nodes=nodes)
    assert {n: p[0].replace("tor-", "leaf-") for n, p in topology.paths.items()} == {
        n: p[0] for n, p in SIXTEEN.items()
    }
    assert topology.slots["npu-06"] == 2
    assert topology.source == "tor-configmap"


def test_tor_configmap_without_nodes_is_keyed_by_ip_and_realigned_to_a_placement() -> None:
    topology = topology_from_tor_configmap(tor_configmap())
    assert topology.paths["10.0.0.6"] == ("tor-1",)
    servers = (Server("p0", "npu-05", "10.0.0.6", "10.0.0.6", None, "w", 0, ()),)
    aligned = topology_for_placement(topology, Placement("j", "ns", servers))
    assert aligned.paths["npu-05"] == ("tor-1",)
    assert aligned.slots["npu-05"] == 1
    stranger = (Server("p0", "elsewhere", "10.9.9.9", "10.9.9.9", None, "w", 0, ()),)
    with pytest.raises(TopologyError, match=r"node elsewhere \(pod p0\): not in the topology"):
        topology_for_placement(topology, Placement("j", "ns", stranger))


def test_tor_configmap_accepts_the_parsed_tor_info_and_checks_slices() -> None:
    info = json.loads(tor_configmap()["data"]["tor_info"])
    assert len(topology_from_tor_configmap(info).paths) == 16
    info["server_list"][0]["server"][1]["slice_id"] = 0
    with pytest.raises(TopologyError, match="both use slot 0 on tor-0"):
        topology_from_tor_configmap(info)
    with pytest.raises(TopologyError, match=r"data\.tor_info: missing"):
        topology_from_tor_configmap({"kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {}})


# -- topology file and generator ---------------------------------------------------------------------------------


def test_example_topology_file_matches_the_labels() -> None:
    topology = load_topology_file((EXAMPLES / "cluster-16.yaml").read_text(encoding="utf-8"))
    assert dict(topology.paths) == SIXTEEN
    assert topology.fabric == Fabric()


def test_topology_file_expresses_rail_layout_three_tiers_oversubscription_and_link_rate() -> None:
    text = """
kind: Topology
fabric: {layout: rail, nicsPerServer: 8, linkGbps: 400, leafOversubscription: 2, leafUplinks: 4}
leaves:
  - {name: rail-group-0, pod: pod-0, servers: [a, b, {name: c, slot: 7}]}
  - {name: rail-group-1, pod: pod-1, servers: [d]}
"""
    topology = load_topology_file(text)
    assert topology.fabric == Fabric(layout="rail", link_gbps=400.0, leaf_oversubscription=2.0, leaf_uplinks=4)
    assert topology.paths["c"] == ("rail-group-0", "pod-0")
    assert topology.slots["c"] == 7
    assert load_topology_file(dump_topology_file(topology)) == topology


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("leaves: [{name: l, servers: [a}", "malformed YAML at line"),
        ("fabric: {linkGpbs: 100}\nleaves: [{name: l, servers: [a]}]", r"fabric.linkGpbs: unknown field"),
        ("fabric: {layout: mesh}\nleaves: [{name: l, servers: [a]}]", "fabric.layout: must be tor or rail"),
        ("fabric: {linkGbps: -1}\nleaves: [{name: l, servers: [a]}]", "fabric.linkGbps: must be a positive"),
        ("leaves: [{name: l, servers: [a]}, {name: m, servers: [a]}]", r"leaves\[1\].servers\[0\]: node a is already"),
        ("leaves: [{name: l, pod: p, servers: [a]}, {name: m, servers: [b]}]", r"leaves\[1\].pod"),
        ("leaves: []", "leaves: expected a non-empty list"),
    ],
)
def test_bad_topology_files_are_one_line_errors_naming_the_field(text: str, match: str) -> None:
    with pytest.raises(TopologyError, match=match) as raised:
        load_topology_file(text)
    assert "\n" not in str(raised.value)


@settings(max_examples=25, deadline=None)
@given(
    leaves=st.integers(1, 9),
    per_leaf=st.integers(1, 6),
    per_pod=st.one_of(st.none(), st.integers(1, 4)),
    layout=st.sampled_from(("tor", "rail")),
    oversubscription=st.sampled_from((1.0, 2.0, 4.0)),
)
def test_generated_topologies_round_trip_through_the_file_and_node_labels(
    leaves: int, per_leaf: int, per_pod: int | None, layout: str, oversubscription: float
) -> None:
    topology = generate_topology(
        leaves=leaves,
        servers_per_leaf=per_leaf,
        leaves_per_pod=per_pod,
        layout=layout,  # type: ignore[arg-type]
        leaf_oversubscription=oversubscription,
    )
    assert len(topology.paths) == leaves * per_leaf
    assert topology.tiers == (1 if per_pod is None else 2)
    again = load_topology_file(dump_topology_file(topology))
    assert (dict(again.paths), dict(again.slots), again.fabric) == (
        dict(topology.paths),
        dict(topology.slots),
        topology.fabric,
    )
    keys = ["volcano.sh/tor"] if per_pod is None else ["example.com/pod", "volcano.sh/tor"]
    from_labels = topology_from_nodes(nodes_for_topology(topology, keys), keys)
    if per_pod is None or -(-leaves // per_pod) > 1:
        assert dict(from_labels.paths) == dict(topology.paths)


def test_generator_and_node_writer_reject_bad_arguments() -> None:
    with pytest.raises(InputError, match="servers_per_leaf"):
        generate_topology(leaves=2, servers_per_leaf=0)
    with pytest.raises(InputError, match="label_keys: the topology lists 2 tier"):
        nodes_for_topology(generate_topology(leaves=2, servers_per_leaf=2, leaves_per_pod=1))
