"""`routes.json` is written in pieces (`RoutePlan.json_chunks`) with exactly the text of the whole document, so a
4,096-server pinned plan never holds its 400,000 flows as one list of dicts or one string."""

from __future__ import annotations

import json

import pytest

from planner import Fabric, Layout, job_network, pin_routes, plan_ranks, ring_flows
from tests.support.placements import make_placement, make_topology

NODES = [f"n{leaf:03d}-{i:02d}" for i in range(3) for leaf in range(4)]


@pytest.mark.parametrize("layout", ["tor", "rail"])
@pytest.mark.parametrize("leaves_per_pod", [None, 2], ids=["2-tier", "3-tier"])
@pytest.mark.parametrize("named", [True, False], ids=["pod-names", "no-names"])
def test_the_pieces_join_to_the_whole_document(layout: Layout, leaves_per_pod: int | None, named: bool) -> None:
    fabric = Fabric(layout=layout, nics_per_server=2)
    topology = make_topology([3, 3, 3, 3], leaves_per_pod=leaves_per_pod, fabric=fabric)
    placement = make_placement(NODES)
    routes = plan_ranks(placement, topology, "mixed", "pinned", rng=0).routes
    assert routes is not None
    names = [s.pod_name for s in placement.servers] if named else None
    whole = json.dumps(routes.to_json(names), indent=2)
    chunks = list(routes.json_chunks(names))
    assert "".join(chunks) == whole
    assert len(chunks) > 2, "one piece per step, not the whole text at once"
    assert any('"core": null' in c or '"core": 0' in c for c in chunks)


def test_a_plan_without_cross_leaf_flows_is_an_empty_list() -> None:
    topology = make_topology([3])
    network = job_network(topology, ["n000-00", "n000-01", "n000-02"])
    routes = pin_routes(network, [ring_flows([0, 1, 2])])
    assert "".join(routes.json_chunks()) == json.dumps(routes.to_json(), indent=2)
    assert json.loads("".join(routes.json_chunks()))["flows"] == []
