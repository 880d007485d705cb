"""One number per metric: `plan` (summary and report), `simulate` (table and JSON), the plot, the --html page, the
controller's RankTableCompleted message and the README show the same value for the same input."""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from planner import (
    Device,
    Placement,
    Server,
    format_fraction,
    format_load,
    generate_topology,
    link_load_figure,
    plan_ranks,
)
from webhook.cli.html_report import render_page
from webhook.cli.main import main
from webhook.cli.plan_view import plan_view
from webhook.controller.completed_table import _completed_message

ROOT = Path(__file__).resolve().parents[2]
PODS = ROOT / "examples" / "pods" / "llm-pretrain-pods.yaml"
NODES = ROOT / "examples" / "topologies" / "nodes-16.yaml"
INPUTS = ["--pods", str(PODS), "--nodes", str(NODES)]


class Page(HTMLParser):
    """Every element's attributes and the text of elements carrying data-metric/data-order/data-field."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.attributes: list[tuple[str, dict[str, str | None]]] = []
        self.metrics: dict[str, dict[str, str]] = {}
        self.fields: dict[str, str] = {}
        self._metric: str | None = None
        self._order: str | None = None
        self._field: str | None = None
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.attributes.append((tag, found))
        if found.get("data-metric"):
            self._metric = found["data-metric"]
            self.metrics[self._metric or ""] = {}
        if tag == "td" and self._metric and found.get("data-order"):
            self._order = found["data-order"]
        if found.get("data-field"):
            self._field = found["data-field"]
            self.fields[self._field or ""] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr":
            self._metric = None
        if tag == "td":
            self._order = None
        if tag in ("p", "h1"):
            self._field = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._metric and self._order:
            self.metrics[self._metric][self._order] = self.metrics[self._metric].get(self._order, "") + data
        if self._field:
            self.fields[self._field] += data


def parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    page.close()
    return page


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """plan (summary, report, page) and simulate (table, JSON, plot, page) of the sample job, run once."""
    tmp = tmp_path_factory.mktemp("numbers")
    printed: dict[str, str] = {}
    for name, argv in {
        "plan": ["plan", *INPUTS, "--out-dir", str(tmp / "out"), "--html", str(tmp / "plan.html")],
        "table": ["simulate", *INPUTS, "--html", str(tmp / "simulate.html"), "--plot", str(tmp / "loads.png")],
        "json": ["simulate", *INPUTS, "--json"],
    }.items():
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            assert main(argv) == 0
        printed[name] = buffer.getvalue()
    return {
        **printed,
        "report": json.loads((tmp / "out" / "ringroute-plan.json").read_text(encoding="utf-8")),
        "plan_page": parse((tmp / "plan.html").read_text(encoding="utf-8")),
        "plan_html": (tmp / "plan.html").read_text(encoding="utf-8"),
        "simulate_page": parse((tmp / "simulate.html").read_text(encoding="utf-8")),
        "png": (tmp / "loads.png").read_bytes(),
    }


def test_plan_simulate_plot_page_and_event_show_the_same_numbers(outputs: dict[str, Any]) -> None:
    report = outputs["report"]
    before, after = report["before"], report["after"]
    load_before, load_after = format_load(before["max_link_load"]), format_load(after["max_link_load"])
    busbw_before, busbw_after = format_fraction(before["ring_busbw"]), format_fraction(after["ring_busbw"])
    assert (load_before, load_after, busbw_before, busbw_after) == ("3.58", "2.16", "0.288", "0.479")
    assert after["seeds"] == before["seeds"] == 64

    # plan's printed summary
    assert f"max link load {load_before} -> {load_after} flows (bound 1)" in outputs["plan"]
    assert f"ring bus bandwidth {busbw_before} -> {busbw_after} of line rate" in outputs["plan"]
    assert "ECMP hashing cannot reach the bound of 1" in outputs["plan"]
    # the report's own sentences and changes
    assert f"max link load {load_after} flows (mean over ECMP hash seeds 0-63)" in report["message"]
    changes = {c["metric"]: c for c in report["changes"]}
    assert (changes["max_link_load"]["before"], changes["max_link_load"]["after"]) == (load_before, load_after)

    # simulate: table rows and JSON, on the plan's seeds by default
    rows = {line.split()[0]: line.split() for line in outputs["table"].splitlines()[2:]}
    assert rows["pod-index"][3:6] == [load_before, "(1)", busbw_before]
    assert rows["ringroute"][3:6] == [load_after, "(1)", busbw_after]
    orders = json.loads(outputs["json"])["orders"]
    assert json.loads(outputs["json"])["seeds"] == 64
    assert orders["pod-index"]["max_link_load"] == before["max_link_load"]
    assert orders["ringroute"]["max_link_load"] == after["max_link_load"]
    assert orders["ringroute"]["ring_busbw"] == after["ring_busbw"]

    # both pages
    for page in (outputs["plan_page"], outputs["simulate_page"]):
        for key, change in changes.items():
            assert page.metrics[key] == {
                "before": change["before"],
                "after": change["after"],
                "bound": change["bound"],
            }, key
        assert page.fields["headline"] == report["headline"]
    assert outputs["png"][:8] == b"\x89PNG\r\n\x1a\n"


def test_the_plot_data_and_the_event_message_carry_the_report_numbers() -> None:
    from planner import baseline_order, load_kube_objects, read_placement, topology_for_placement, topology_from_nodes

    placement = read_placement(
        load_kube_objects(PODS.read_text(encoding="utf-8")),
        annotation_keys=("cce.kubectl.kubernetes.io/ascend-1980-configuration",),
    ).placement
    assert placement is not None
    topology = topology_for_placement(topology_from_nodes(load_kube_objects(NODES.read_text())), placement)
    result = plan_ranks(placement, topology, "ring", "ecmp", rng=0, time_limit=2.0)
    view = plan_view(
        placement,
        topology,
        orders={"pod-index": baseline_order("pod-index", placement, topology), "ringroute": result.order},
        evaluations={"pod-index": result.before, "ringroute": result.after},
        routes=result.routes,
        message=result.message,
    )
    # the lines of the plot start at the max link loads of the report, exactly
    assert view.loads["pod-index"].ranked()[0] == result.before.max_link_load
    assert view.loads["ringroute"].ranked()[0] == result.after.max_link_load
    figure = link_load_figure(
        view.loads["pod-index"].ranked(),
        view.loads["ringroute"].ranked(),
        bound=result.after.max_link_load_bound,
        title=view.title,
        maxima=(result.before.max_link_load, result.after.max_link_load),
    )
    (axis,) = figure.axes
    drawn = axis.get_legend()
    assert drawn is not None
    legend = [text.get_text() for text in drawn.get_texts()]
    assert legend[:2] == [
        "before: pod-index order: max link load 3.58",
        "after: ringroute's order: max link load 2.16",
    ]
    # the controller's Event
    message = _completed_message(placement, result, 5.0, True)
    assert "ring edges crossing leaves 12 -> 4 (bound 4)" in message
    assert "max link load 3.58 -> 2.16 flows (bound 1)" in message
    assert "ring bus bandwidth 0.288 -> 0.479 of line rate" in message


def test_the_plot_has_a_title_whole_flow_ticks_and_distinct_lines() -> None:
    import numpy as np

    figure = link_load_figure(
        np.array([3.58, 3.0, 2.0, 1.0, 1.0, 1.0]),
        np.array([2.16, 1.0, 1.0, 1.0, 1.0, 1.0]),
        bound=1,
        title="default/llm-pretrain: ring pattern, ecmp routing, qps 1, mean over ECMP hash seeds 0-63",
    )
    (axis,) = figure.axes
    assert axis.get_title() == "default/llm-pretrain: ring pattern, ecmp routing, qps 1, mean over ECMP hash seeds 0-63"
    ticks = [t for t in axis.get_yticks() if axis.get_ylim()[0] <= t <= axis.get_ylim()[1]]
    assert ticks
    assert all(float(t).is_integer() for t in ticks)
    before, after, bound = axis.get_lines()
    styles = {(line.get_linestyle(), line.get_marker(), line.get_color()) for line in (before, after, bound)}
    assert len(styles) == 3
    assert after.get_zorder() > before.get_zorder()  # the after line is drawn over the before line where they meet
    assert before.get_linewidth() > after.get_linewidth()  # ... and the wider before line shows around it


def hostile_placement() -> tuple[Placement, Any]:
    topology = generate_topology(leaves=3, servers_per_leaf=2, name_prefix='n<img src=x onerror="alert(1)">')
    nodes = sorted(topology.paths)
    servers = tuple(
        Server(
            pod_name=f"<script>alert({i})</script>&-{i}",
            node_name=node,
            server_id=f"10.0.0.{i + 1}",
            host_ip=f"10.0.0.{i + 1}",
            pod_ip=f"172.16.0.{i + 1}",
            task_name="worker",
            task_index=i,
            devices=tuple(Device(device_id=d, device_ip=f"192.168.{i}.{d + 1}") for d in range(8)),
        )
        for i, node in enumerate(nodes)
    )
    return Placement(job_name="</title><script>x()</script>", namespace='ns"><b>', servers=servers), topology


def test_the_page_escapes_names_and_fetches_nothing() -> None:
    from planner import baseline_order

    placement, topology = hostile_placement()
    result = plan_ranks(placement, topology, "halving-doubling", "pinned", rng=0, time_limit=1.0)
    view = plan_view(
        placement,
        topology,
        orders={"pod-index": baseline_order("pod-index", placement, topology), "ringroute": result.order},
        evaluations={"pod-index": result.before, "ringroute": result.after},
        routes=result.routes,
        message=result.message,
    )
    text = render_page(view)
    page = parse(text)
    lowered = text.lower()
    assert "<script" not in lowered
    assert "<img" not in lowered
    assert "<b>" not in lowered
    assert "&lt;script&gt;alert(0)&lt;/script&gt;&amp;-0" in text
    assert page.fields["job"] == 'ringroute plan for ns"><b>/</title><script>x()</script>'
    tags = {tag for tag, _ in page.attributes}
    assert not tags & {"script", "link", "img", "iframe", "object", "embed"}
    for _tag, attributes in page.attributes:
        for name, value in attributes.items():
            assert not name.startswith("on")
            assert "://" not in (value or "")
            assert not (name in ("href", "src") and value)
    for fetch in ("://", "@import", "url("):
        assert fetch not in text
    assert page.metrics["max_link_load"]["after"] == format_load(result.after.max_link_load)


def test_plan_page_shows_the_orders_and_the_switches(outputs: dict[str, Any]) -> None:
    page: Page = outputs["plan_page"]
    drawings = {a["data-order"]: a for tag, a in page.attributes if tag == "svg" and a.get("data-order")}
    assert drawings["pod-index"]["data-crossing"] == "12"
    assert drawings["ringroute"]["data-crossing"] == "4"
    text = "".join(page.text)
    for leaf in ("leaf-0", "leaf-1", "leaf-2", "leaf-3"):
        assert leaf in text
    assert "default/llm-pretrain: ring pattern, ecmp routing, qps 1, mean over ECMP hash seeds 0-63" in text
    assert "ECMP hashing cannot reach the bound of 1" in page.fields["bound"]


def demo_output(step: str) -> str:
    """What one step of examples/demo.py (`make demo`) prints."""
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import demo
    finally:
        sys.path.remove(str(ROOT / "examples"))
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        getattr(demo, step)()
    return buffer.getvalue()


def test_readme_numbers_are_what_the_demo_prints() -> None:
    printed = demo_output("planning_demo")
    rows = {
        label: line.split()[-3:]
        for line in printed.splitlines()
        for label in ("ring edges crossing leaves", "max link load (flows)", "ring bus bandwidth (of line rate)")
        if line.strip().startswith(label)
    }
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    found = re.search(
        r"ring edges crossing leaves (\d+) -> (\d+), bound (\d+); max link load ([\d.]+) -> ([\d.]+) flows, bound "
        r"(\d+); ring bus bandwidth ([\d.]+) -> ([\d.]+) of line rate",
        readme,
    )
    assert found is not None
    cross, load, busbw = (
        rows["ring edges crossing leaves"],
        rows["max link load (flows)"],
        rows["ring bus bandwidth (of line rate)"],
    )
    assert list(found.groups()) == [*cross, *load[:2], load[2], *busbw[:2]]


def test_readme_steering_numbers_are_what_the_demo_prints() -> None:
    printed = demo_output("steering_demo")
    busbw = [line.split()[-1] for line in printed.splitlines() if line.strip().startswith(("ECMP,", "4 queue pairs"))]
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    found = re.search(
        r"ring bus bandwidth ([\d.]+) under ECMP, ([\d.]+) with ports spread without a hash model \(expected\), "
        r"([\d.]+) with ports steered",
        readme,
    )
    assert found is not None
    assert list(found.groups()) == busbw
    assert busbw[-1] == "1.000", "steering delivers the pinned plan"
    assert "every queue pair on its planned spine" in printed
