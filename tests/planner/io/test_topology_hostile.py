"""Topology input as a careless admin writes it: a node listed twice with other labels, numbers that are not ASCII
or have thousands of digits, fabrics too large to simulate. Each is a one-line TopologyError (or InputError) that
names the object, never a silently chosen switch and never an exception of another kind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import (
    Fabric,
    InputError,
    TopologyError,
    check_fabric,
    generate_topology,
    load_kube_objects,
    load_topology_file,
    topology_from_hypernodes,
    topology_from_nodes,
    topology_from_tor_configmap,
)

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "topologies"
HUGE = "9" * 5000


def node(name: str, *addresses: str, **labels: str) -> dict[str, Any]:
    status = {"addresses": [{"type": "InternalIP", "address": a} for a in addresses]}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "status": status}


def tor(name: str, *more: str) -> dict[str, Any]:
    return node(name, **{"volcano.sh/tor": "leaf-0", **dict(zip(more[::2], more[1::2], strict=True))})


def one_line(raised: pytest.ExceptionInfo[Exception]) -> str:
    message = str(raised.value)
    assert "\n" not in message
    assert len(message) < 400
    return message


# -- a node listed twice ----------------------------------------------------------------------------------------


def test_a_node_listed_twice_with_other_topology_labels_is_an_error_naming_both_entries() -> None:
    nodes = [node(f"n{i}", **{"volcano.sh/tor": f"leaf-{i // 2}"}) for i in range(4)]
    nodes.append(node("n1", **{"volcano.sh/tor": "leaf-1"}))
    with pytest.raises(TopologyError) as raised:
        topology_from_nodes(nodes)
    message = one_line(raised)
    assert message.startswith("node n1: listed twice with different topology labels")
    assert "nodes[1]: volcano.sh/tor='leaf-0'" in message
    assert "nodes[4]: volcano.sh/tor='leaf-1'" in message


def test_a_node_listed_twice_with_the_same_topology_labels_is_read_once() -> None:
    nodes = [node(f"n{i}", **{"volcano.sh/tor": f"leaf-{i // 2}"}) for i in range(4)]
    nodes.append(node("n1", **{"volcano.sh/tor": "leaf-0", "other": "label"}))
    topology = topology_from_nodes(nodes)
    assert topology.paths["n1"] == ("leaf-0",)
    assert len(topology.paths) == 4


def test_a_node_listed_twice_once_without_its_label_is_named() -> None:
    nodes = [tor("a"), tor("b"), node("a")]
    with pytest.raises(TopologyError, match=r"node a: listed twice .*nodes\[2\]: no volcano.sh/tor"):
        topology_from_nodes(nodes)


def test_a_node_listed_twice_with_other_labels_a_hypernode_selects_on_is_an_error() -> None:
    members = [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "r1"}}}}]
    hypernode = {"kind": "HyperNode", "metadata": {"name": "s0"}, "spec": {"tier": 1, "members": members}}
    nodes = [node("a", rack="r1"), node("b", rack="r1"), node("a", rack="r2")]
    with pytest.raises(TopologyError, match=r"node a: listed twice .*rack='r1'.*rack='r2'"):
        topology_from_hypernodes([hypernode], nodes)
    assert set(topology_from_hypernodes([hypernode], [*nodes[:2], node("a", rack="r1", x="y")]).paths) == {"a", "b"}


def tor_info(**server: Any) -> dict[str, Any]:
    return {"server_list": [{"tor_id": 0, "server": [{"server_ip": "10.0.0.1", "slice_id": 0, **server}]}]}


def test_two_nodes_with_the_address_a_tor_configmap_names_are_an_error_naming_both() -> None:
    nodes = [node("a", "10.0.0.1"), node("b", "10.0.0.1")]
    with pytest.raises(TopologyError) as raised:
        topology_from_tor_configmap(tor_info(), nodes=nodes)
    assert "10.0.0.1 is the address of both node a and node b" in one_line(raised)
    assert topology_from_tor_configmap(tor_info(), nodes=[nodes[0], nodes[0]]).paths == {"a": ("tor-0",)}


# -- numbers ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tier", ["²", "1", HUGE, 2**40, -1, 1.5, True, None])
def test_a_hypernode_tier_that_is_not_a_bounded_integer_is_named(tier: Any) -> None:
    members = [{"type": "Node", "selector": {"exactMatch": {"name": "a"}}}]
    hypernode = {"kind": "HyperNode", "metadata": {"name": "s0"}, "spec": {"tier": tier, "members": members}}
    with pytest.raises(TopologyError) as raised:
        topology_from_hypernodes([hypernode], [node("a")])
    assert one_line(raised).startswith("HyperNode s0: spec.tier:")


@pytest.mark.parametrize("slice_id", ["²", "٨", HUGE, 70_000, -1, 1.5, " 1"])
def test_a_tor_configmap_slice_id_that_is_not_a_bounded_ascii_integer_is_named(slice_id: Any) -> None:
    with pytest.raises(TopologyError) as raised:
        topology_from_tor_configmap(tor_info(slice_id=slice_id))
    assert ".server_list[0].server[0].slice_id:" in one_line(raised)


@pytest.mark.parametrize("tor_id", ["²", HUGE, -1, None])
def test_a_tor_configmap_tor_id_that_is_not_a_bounded_integer_is_named(tor_id: Any) -> None:
    info = tor_info()
    info["server_list"][0]["tor_id"] = tor_id
    with pytest.raises(TopologyError) as raised:
        topology_from_tor_configmap(info)
    assert ".server_list[0].tor_id:" in one_line(raised)


def test_a_tor_configmap_with_a_number_too_long_to_convert_is_one_line() -> None:
    configmap = load_kube_objects((EXAMPLES / "basic-tor-node-cm.yaml").read_text(encoding="utf-8"))[0]
    configmap["data"]["tor_info"] = configmap["data"]["tor_info"].replace('"tor_id": 0', f'"tor_id": {HUGE}')
    with pytest.raises(TopologyError) as raised:
        topology_from_tor_configmap(configmap)
    assert "unreadable JSON" in one_line(raised)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("leaves: [{name: l, servers: [{name: a, slot: 99999999999999999999999}]}]", r"servers\[0\]\.slot"),
        ("leaves: [{name: l, servers: [{name: a, slot: -1}]}]", r"servers\[0\]\.slot"),
        ("fabric: {nicsPerServer: 100000}\nleaves: [{name: l, servers: [a]}]", r"fabric\.nicsPerServer"),
        ("fabric: {leafUplinks: 10000000}\nleaves: [{name: l, servers: [a]}]", r"fabric\.leafUplinks"),
        ("fabric: {nicsPerServer: true}\nleaves: [{name: l, servers: [a]}]", r"fabric\.nicsPerServer"),
        (f"leaves: [{{name: l, servers: [{{name: a, slot: {HUGE}}}]}}]", "unreadable"),
        ("leaves: " + "[" * 50_000 + "]" * 50_000, "nested too deeply|malformed YAML"),
        (f"kind: {'x' * 5000}\n", "kind: expected Topology"),
    ],
)
def test_topology_file_numbers_out_of_bounds_are_one_line_errors_naming_the_field(text: str, match: str) -> None:
    with pytest.raises(TopologyError, match=match) as raised:
        load_topology_file(text)
    one_line(raised)


def test_fabrics_with_more_nics_or_uplinks_than_any_switch_has_are_refused() -> None:
    for fabric in (Fabric(nics_per_server=65), Fabric(leaf_uplinks=4097), Fabric(nics_per_server=True)):
        with pytest.raises(InputError):
            check_fabric(fabric)
    assert check_fabric(Fabric(nics_per_server=64, leaf_uplinks=4096)).nics_per_server == 64


def test_the_generator_refuses_a_cluster_it_could_not_hold() -> None:
    with pytest.raises(InputError, match="at most 1000000"):
        generate_topology(leaves=10**6, servers_per_leaf=10**6)


def test_node_names_with_superscripts_and_thousand_digit_numbers_sort_without_error() -> None:
    names = ["n-1²", f"n-{HUGE}", "n-٨", "n-10", "n-9", "n-09x"]
    topology = topology_from_nodes([node(n, **{"volcano.sh/tor": "leaf-0"}) for n in names])
    slots = topology.slots
    assert slots["n-9"] < slots["n-10"] < slots[f"n-{HUGE}"]


@settings(max_examples=100, deadline=None)
@given(
    value=st.one_of(
        st.text(st.characters(categories=("Nd", "No")), min_size=1, max_size=8),
        st.text("0123456789", min_size=1, max_size=5000),
        st.integers(),
        st.floats(),
        st.text(max_size=6),
    ),
    where=st.sampled_from(["tier", "slice_id", "tor_id", "slot"]),
)
def test_any_value_in_any_topology_integer_is_accepted_or_a_topology_error(value: Any, where: str) -> None:
    message = ""
    try:
        if where == "tier":
            members = [{"type": "Node", "selector": {"exactMatch": {"name": "a"}}}]
            spec = {"tier": value, "members": members}
            topology_from_hypernodes([{"kind": "HyperNode", "metadata": {"name": "s"}, "spec": spec}], [node("a")])
        elif where == "slice_id":
            topology_from_tor_configmap({"data": {"tor_info": json.dumps(tor_info(slice_id=value))}})
        elif where == "tor_id":
            info = tor_info()
            info["server_list"][0]["tor_id"] = value
            topology_from_tor_configmap({"data": {"tor_info": json.dumps(info)}})
        else:
            load_topology_file(json.dumps({"leaves": [{"name": "l", "servers": [{"name": "a", "slot": value}]}]}))
    except TopologyError as exc:
        message = str(exc)
    assert "\n" not in message
