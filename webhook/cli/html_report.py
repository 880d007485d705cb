"""`--html FILE` of `ringroute plan` and `simulate`: one self-contained page picturing a plan.

Inline CSS and SVG drawn here; no script, font, image or style sheet is fetched, so the page works offline and
shows the same in any browser. Every name that comes from the input (job, pods, nodes, switches) is escaped.
The numbers come from the same `OrderEvaluation`s and formatting helpers as the plan report.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from webhook.cli.outputs import replace_file
from webhook.cli.plan_view import AFTER, BEFORE, PlanView

if TYPE_CHECKING:
    from planner import JobNetwork

MAX_DRAWN_SERVERS = 256
"""Above this many servers the ring drawings are left out (the tables stay)."""
MAX_STRIP_ROWS = 48
"""Switches whose links are drawn; with more, the busiest ones."""
MAX_STRIP_CELLS = 128
"""Links drawn per switch and direction; with more, the busiest ones."""
BUSIEST_LINKS = 10

_CELL = 9
_BOX_W, _BOX_H, _GAP = 112, 34, 8
_COLUMN_W = _BOX_W + 56

_LOAD_COLOURS = ((0.0, "#f2f2f2"), (1.0, "#cde8c9"), (2.0, "#ffd58a"), (3.0, "#ff9c5b"), (math.inf, "#d8432a"))
"""Upper limit of a load band and its colour: idle, at most 1 flow, up to 2, up to 3, more."""

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#1d1d1d;max-width:1400px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.sub{color:#555;margin:0 0 16px}
.headline{background:#f3f7ff;border:1px solid #c9d8f5;border-radius:6px;padding:12px 16px}
.headline .gain{font-size:20px;font-weight:600;margin:0 0 6px}.headline p{margin:4px 0}
table{border-collapse:collapse;margin:8px 0}th,td{border:1px solid #ddd;padding:4px 10px;text-align:left}
th{background:#f6f6f6}td.num{text-align:right;font-variant-numeric:tabular-nums}
.scroll{overflow-x:auto;border:1px solid #eee;padding:6px;margin:6px 0}
.legend span{display:inline-block;width:14px;height:14px;vertical-align:middle;margin:0 4px 0 12px;
border:1px solid #bbb}
.note{color:#555;font-size:13px}
svg text{font:11px system-ui,sans-serif}
"""


def escaped(value: object) -> str:
    """Text for the page, escaped (every name from the input goes through this)."""
    return escape(str(value), quote=True)


def colour(load: float) -> str:
    """The colour of a link carrying `load` flows."""
    return next(found for limit, found in _LOAD_COLOURS if load <= limit + 1e-9)


_e = escaped
_colour = colour


# -- the page ----------------------------------------------------------------------------------------------------


def write_html(path: Path, view: PlanView) -> None:
    """Write the page (`render_page`) to `path` atomically."""
    replace_file(path, render_page(view), flag="--html")


def render_page(view: PlanView) -> str:
    """The whole page as text."""
    from planner import explain_max_link_load, headline

    title = view.title
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>ringroute plan: {_e(title)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f'<h1 data-field="job">ringroute plan for {_e(view.job)}</h1>',
        f'<p class="sub" data-field="title">{_e(title)}</p>',
        '<section class="headline">',
        f'<p class="gain" data-field="headline">{_e(headline(view.before, view.after))}</p>',
        f'<p data-field="bound">{_e(explain_max_link_load(view.after))}</p>',
        f'<p data-field="message">Planner: {_e(view.message)}</p>',
        "</section>",
        _metrics_table(view),
        _bounds_note(view),
        _ports_section(view),
        _servers_section(view),
        _links_section(view),
        _busiest_section(view),
        view.fabric_section or "",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _metrics_table(view: PlanView) -> str:
    from planner import metric_changes

    rows = [
        "<h2>Before and after</h2>",
        '<table class="metrics"><tr><th>metric</th><th>pod-index order</th><th>ringroute\'s order</th>'
        "<th>bound</th><th>gain</th></tr>",
    ]
    for change in metric_changes(view.before, view.after):
        unit = f" ({_e(change.unit)})" if change.unit else ""
        rows.append(
            f'<tr data-metric="{_e(change.key)}"><td>{_e(change.label)}{unit}</td>'
            f'<td class="num" data-order="before">{_e(change.before_text)}</td>'
            f'<td class="num" data-order="after">{_e(change.after_text)}</td>'
            f'<td class="num" data-order="bound">{_e(change.bound_text)}</td>'
            f'<td class="num">{_e(change.gain)}</td></tr>'
        )
    rows.append("</table>")
    return "\n".join(rows)


def _bounds_note(view: PlanView) -> str:
    from planner import seed_note

    seeds = seed_note(view.after)
    averaged = (
        f" Under ECMP each hash seed sends flows over different uplinks: the max link load is the busiest link of "
        f"each seed, {_e(seeds)}."
        if seeds
        else ""
    )
    return (
        '<p class="note">Bounds: a ring over servers under k leaves crosses between leaves at least k times; no '
        "routing puts fewer flows on the busiest link than λ* (the flows a leaf must send out or take in, over its "
        "uplinks); bus bandwidth is at most the line rate (1). Pinned routes reach λ* in a two-tier Clos."
        f"{averaged}</p>"
    )


# -- source ports ------------------------------------------------------------------------------------------------

MAX_PATH_ROWS = 64
"""Queue pairs listed with their ports and paths; the file has them all."""


def _ports_section(view: PlanView) -> str:
    """What MultiQpSrcPort.cfg does: predicted loads, the switches whose hash it relies on, per-QP paths."""
    from planner import format_fraction, format_load

    steering = view.steering
    if steering is None or (steering.mode == "none" and steering.fallback is None):
        return ""
    out = [
        "<h2>Source ports (MultiQpSrcPort.cfg)</h2>",
        f'<p data-field="steering">{_e(steering.message)}</p>',
    ]
    rows = []
    for label, evaluation in (("predicted", steering.predicted), ("compared with", steering.baseline)):
        if evaluation is None:
            continue
        what = f"{evaluation.routing}, {evaluation.qps} queue pair{'s' if evaluation.qps > 1 else ''}" + (
            f", mean over {evaluation.seeds} hash seeds" if evaluation.routing == "ecmp" else ""
        )
        busbw = evaluation.ring_busbw if not math.isnan(evaluation.ring_busbw) else evaluation.hd_busbw
        rows.append(
            f'<tr data-row="{_e(label)}"><td>{_e(label)}</td><td>{_e(what)}</td>'
            f'<td class="num">{_e(format_load(evaluation.max_link_load))}</td>'
            f'<td class="num">{_e(f"{evaluation.max_link_load_bound:g}")}</td>'
            f'<td class="num">{_e(format_fraction(busbw))}</td></tr>'
        )
    if rows:
        out.append(
            '<table class="ports"><tr><th></th><th>routing</th><th>max link load (flows)</th><th>bound</th>'
            f"<th>{_e(view.after.pattern)} bus bandwidth</th></tr>{''.join(rows)}</table>"
        )
    if steering.switches:
        out.append(
            '<table class="switches"><tr><th>switch</th><th>tier</th><th>hash model</th><th>calibrated from</th>'
            "<th>queue pairs steered</th></tr>"
        )
        for use in steering.switches:
            samples = f"{use.samples} samples" if use.samples else "declared"
            out.append(
                f'<tr data-switch="{_e(use.name)}"><td>{_e(use.name)}</td><td>{_e(use.tier)}</td>'
                f'<td>{_e(use.source)}</td><td>{_e(samples)}</td><td class="num">{use.queue_pairs}</td></tr>'
            )
        out.append("</table>")
    out.append(_paths_table(view))
    return "\n".join(out)


def _paths_table(view: PlanView) -> str:
    """The first queue pairs of the file with their port and the path the hash model gives them."""
    steering = view.steering
    if steering is None or steering.routes is None or steering.ports is None:
        return ""
    routes, network, names = steering.routes, view.network, [s.pod_name for s in view.placement.servers]
    rows: list[str] = []
    total = 0
    for step, ports in zip(routes.steps, steering.step_ports(routes), strict=True):
        found = routes.assignment_for(step)
        if found is None:
            continue
        spines, cores = found
        pairs, nics = np.nonzero(spines >= 0)
        total += pairs.size
        for row, nic in zip(pairs.tolist(), nics.tolist(), strict=True):
            if len(rows) >= MAX_PATH_ROWS:
                break
            pair, qp = divmod(row, routes.qps)
            src, dst = int(step[pair, 0]), int(step[pair, 1])
            core = int(cores[row, nic])
            rows.append(
                f"<tr><td>{_e(names[src])} NIC {nic}</td><td>{_e(steering.addresses[src][nic])}</td>"
                f"<td>{_e(names[dst])} NIC {nic}</td><td>{_e(steering.addresses[dst][nic])}</td>"
                f'<td class="num">{qp}</td><td class="num">{int(ports[row, nic])}</td>'
                f"<td>{_e(network.leaf_names[network.server_leaf[src]])}</td>"
                f'<td class="num">spine-{int(spines[row, nic])}</td>'
                f'<td class="num">{"core-" + str(core) if core >= 0 else ""}</td></tr>'
            )
    shown = f"the first {len(rows)} of {total}" if total > len(rows) else f"all {total}"
    return (
        f'<p class="note">Queue pairs of cross-leaf flows, {shown} (every step), with the UDP source port written '
        "and the path the hash model gives it:</p>"
        '<div class="scroll"><table class="paths"><tr><th>from</th><th>address</th><th>to</th><th>address</th>'
        "<th>QP</th><th>source port</th><th>leaf</th><th>spine</th><th>core</th></tr>"
        + "".join(rows)
        + "</table></div>"
    )


# -- servers and the ring ----------------------------------------------------------------------------------------


def _pairs(view: PlanView, order: Sequence[int]) -> tuple[str, list[tuple[int, int]]]:
    """What is drawn for an order: the ring (ring, mixed) or the halving-doubling partners, as server pairs."""
    from planner import halving_doubling_steps, ring_flows

    if view.after.pattern == "halving-doubling":
        seen: set[tuple[int, int]] = set()
        for step in halving_doubling_steps(list(order)):
            for a, b in step.tolist():
                seen.add((min(a, b), max(a, b)))
        return "halving-doubling partners", sorted(seen)
    return "ring", [(int(a), int(b)) for a, b in ring_flows(list(order)).tolist()]


def _servers_section(view: PlanView) -> str:
    network = view.network
    leaves = network.leaf_names
    counts = np.bincount(network.server_leaf, minlength=len(leaves))
    out = ["<h2>Servers by spine and leaf</h2>"]
    pods = network.pod_names if network.listed_tiers == 2 else ()
    out.append(
        '<table class="leaves"><tr>'
        + ("<th>pod (spine group)</th>" if pods else "")
        + "<th>leaf</th><th>servers of the job</th><th>uplinks</th></tr>"
    )
    for leaf, name in enumerate(leaves):
        pod = f"<td>{_e(pods[int(network.leaf_pod[leaf])])}</td>" if pods else ""
        out.append(
            f"<tr>{pod}<td>{_e(name)}</td><td class='num'>{int(counts[leaf])}</td>"
            f"<td class='num'>{int(network.leaf_uplinks[leaf])}</td></tr>"
        )
    out.append("</table>")
    if network.servers > MAX_DRAWN_SERVERS:
        out.append(f'<p class="note">The drawings are left out above {MAX_DRAWN_SERVERS} servers.</p>')
        return "\n".join(out)
    for name, heading in ((BEFORE, "pod-index order"), (AFTER, "ringroute's order")):
        out.append(_order_drawing(view, name, heading))
    return "\n".join(out)


def _server_positions(network: JobNetwork) -> tuple[dict[int, tuple[float, float]], list[tuple[int, float]], float]:
    """Box position of every server (columns by leaf, leaves grouped by pod), leaf column x, drawing height."""
    order = sorted(range(len(network.leaf_names)), key=lambda leaf: (int(network.leaf_pod[leaf]), leaf))
    columns: list[tuple[int, float]] = []
    positions: dict[int, tuple[float, float]] = {}
    x = 20.0
    previous_pod = None
    tallest = 0
    for leaf in order:
        pod = int(network.leaf_pod[leaf])
        if previous_pod is not None and pod != previous_pod:
            x += 24.0  # a gap between pods
        previous_pod = pod
        members = [int(s) for s in np.flatnonzero(network.server_leaf == leaf)]
        for row, server in enumerate(members):
            positions[server] = (x, 84.0 + row * (_BOX_H + _GAP))
        tallest = max(tallest, len(members))
        columns.append((leaf, x))
        x += _COLUMN_W
    height = 84.0 + tallest * (_BOX_H + _GAP) + 30.0
    return positions, columns, max(height, 160.0)


def _order_drawing(view: PlanView, name: str, heading: str) -> str:
    network = view.network
    order = view.orders[name]
    rank_of = {server: rank for rank, server in enumerate(order)}
    what, pairs = _pairs(view, order)
    positions, columns, height = _server_positions(network)
    width = (columns[-1][1] + _COLUMN_W + 20.0) if columns else 200.0
    crossing = sum(1 for a, b in pairs if network.server_leaf[a] != network.server_leaf[b])
    svg = [
        f'<svg width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" role="img" '
        f'data-order="{_e(name)}" data-crossing="{crossing}">',
        f"<title>{_e(what)} in {_e(heading)}</title>",
        f'<rect x="10" y="8" width="{width - 20:.0f}" height="24" fill="#e9e3f5" rx="4"/>',
        f'<text x="{width / 2:.0f}" y="24" text-anchor="middle">'
        f"{_e('spines' if network.listed_tiers == 1 else 'spines per pod, core above')}</text>",
    ]
    pods = network.pod_names if network.listed_tiers == 2 else ()
    for leaf, x in columns:
        label = network.leaf_names[leaf]
        if pods:
            label = f"{pods[int(network.leaf_pod[leaf])]} / {label}"
        svg.append(
            f'<rect x="{x - 6:.0f}" y="44" width="{_BOX_W + 12}" height="{height - 54:.0f}" fill="#f7f7f7" '
            'stroke="#ccc" rx="5"/>'
        )
        svg.append(f'<text x="{x + _BOX_W / 2:.0f}" y="62" text-anchor="middle">{_e(_short(label, 22))}</text>')
    for a, b in pairs:
        svg.append(_edge(positions[a], positions[b], bool(network.server_leaf[a] != network.server_leaf[b])))
    for server, (x, y) in positions.items():
        pod = view.placement.servers[server]
        svg.append(
            f"<g><title>{_e(pod.pod_name)} on {_e(pod.node_name)}: rank {rank_of[server]}</title>"
            f'<rect x="{x:.0f}" y="{y:.0f}" width="{_BOX_W}" height="{_BOX_H}" fill="#fff" stroke="#555" rx="4"/>'
            f'<text x="{x + 6:.0f}" y="{y + 14:.0f}">rank {rank_of[server]}</text>'
            f'<text x="{x + 6:.0f}" y="{y + 28:.0f}" fill="#666">{_e(_short(pod.node_name, 17))}</text></g>'
        )
    svg.append("</svg>")
    total = len(pairs)
    return (
        f"<h3>{_e(what.capitalize())} in {_e(heading)}: {crossing} of {total} cross between leaves</h3>"
        '<p class="note"><span style="color:#d8432a">red</span>: crosses between leaves (over a spine); '
        '<span style="color:#888">grey</span>: stays under one leaf.</p>'
        f'<div class="scroll">{"".join(svg)}</div>'
    )


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _edge(a: tuple[float, float], b: tuple[float, float], crossing: bool) -> str:
    (xa, ya), (xb, yb) = a, b
    if crossing:
        start = (xa + _BOX_W, ya + _BOX_H / 2) if xb > xa else (xa, ya + _BOX_H / 2)
        end = (xb, yb + _BOX_H / 2) if xb > xa else (xb + _BOX_W, yb + _BOX_H / 2)
        lift = min(60.0, abs(xb - xa) / 4)
        control = ((start[0] + end[0]) / 2, min(start[1], end[1]) - lift)
        colour, width = "#d8432a", 2.2
    else:
        start = (xa + _BOX_W, ya + _BOX_H / 2)
        end = (xb + _BOX_W, yb + _BOX_H / 2)
        control = (xa + _BOX_W + 18 + abs(yb - ya) / 6, (start[1] + end[1]) / 2)
        colour, width = "#888888", 1.4
    return (
        f'<path d="M{start[0]:.1f},{start[1]:.1f} Q{control[0]:.1f},{control[1]:.1f} {end[0]:.1f},{end[1]:.1f}" '
        f'fill="none" stroke="{colour}" stroke-width="{width}" opacity="0.85"/>'
    )


# -- link loads --------------------------------------------------------------------------------------------------


def _switch_links(network: JobNetwork) -> list[tuple[str, str, np.ndarray]]:
    """(switch name, direction, link ids) of every tier-1 switch's uplinks and downlinks."""
    rows: list[tuple[str, str, np.ndarray]] = []
    for leaf, name in enumerate(network.leaf_names):
        spines = np.arange(int(network.leaf_uplinks[leaf]))
        for plane in range(network.planes):
            switch = np.full(spines.size, leaf * network.planes + plane)
            label = name if network.planes == 1 else f"{name} rail {plane}"
            rows.append((label, "up", network.leaf_link(switch, spines, up=True)))
            rows.append((label, "down", network.leaf_link(switch, spines, up=False)))
    return rows


def _strip(loads: np.ndarray, label: str, when: str) -> str:
    cells = []
    for index, load in enumerate(loads.tolist()):
        cells.append(
            f'<rect x="{index * (_CELL + 1)}" y="0" width="{_CELL}" height="14" fill="{_colour(load)}">'
            f"<title>{_e(label)} link {index}: {load:.2f} flows {when}</title></rect>"
        )
    width = max(1, loads.size * (_CELL + 1))
    return f'<svg width="{width}" height="14" viewBox="0 0 {width} 14">{"".join(cells)}</svg>'


def _links_section(view: PlanView) -> str:
    network = view.network
    before, after = view.loads[BEFORE].mean, view.loads[AFTER].mean
    rows = [row for row in _switch_links(network) if row[2].size]
    out = [
        "<h2>Leaf uplink and downlink loads</h2>",
        '<p class="note">One cell per link between a leaf (or rail switch) and a spine, coloured by the flows it '
        "carries, averaged over the seeds; hover a cell for its value."
        + "".join(f'<span class="legend"><span style="background:{c}"></span>{t}</span>' for t, c in legend())
        + "</p>",
    ]
    if len(rows) > MAX_STRIP_ROWS:
        rows.sort(key=lambda row: -max(float(before[row[2]].max()), float(after[row[2]].max())))
        out.append(f'<p class="note">The {MAX_STRIP_ROWS} busiest of {len(rows)} switch directions are shown.</p>')
        rows = rows[:MAX_STRIP_ROWS]
    out.append(
        '<div class="scroll"><table class="links"><tr><th>switch</th><th>direction</th><th>pod-index order</th>'
        "<th>ringroute's order</th><th>busiest before</th><th>busiest after</th></tr>"
    )
    for label, direction, links in rows:
        b, a = before[links], after[links]
        if links.size > MAX_STRIP_CELLS:
            keep = np.argsort(-np.maximum(b, a), kind="stable")[:MAX_STRIP_CELLS]
            b, a = b[keep], a[keep]
        out.append(
            f"<tr><td>{_e(label)}</td><td>{direction}</td><td>{_strip(b, f'{label} {direction}', 'before')}</td>"
            f"<td>{_strip(a, f'{label} {direction}', 'after')}</td>"
            f'<td class="num">{b.max(initial=0):.2f}</td><td class="num">{a.max(initial=0):.2f}</td></tr>'
        )
    out.append("</table></div>")
    return "\n".join(out)


def legend() -> list[tuple[str, str]]:
    """(text, colour) of every load band."""
    return [
        ("idle", _LOAD_COLOURS[0][1]),
        ("≤ 1 flow", _LOAD_COLOURS[1][1]),
        ("≤ 2", _LOAD_COLOURS[2][1]),
        ("≤ 3", _LOAD_COLOURS[3][1]),
        ("more", _LOAD_COLOURS[4][1]),
    ]


def _link_name(network: JobNetwork, link: int) -> str:
    first = network.first_switch_link
    nic_links = first // 2
    if link < first:
        direction, local = ("up", link) if link < nic_links else ("down", link - nic_links)
        server, nic = divmod(local, network.nics)
        return f"{network.nodes[server]} NIC {nic} {direction}"
    tier1 = len(network.leaf_names) * network.planes * network.max_uplinks
    local = link - first
    if local < 2 * tier1:
        direction = "up" if local < tier1 else "down"
        switch, spine = divmod(local % tier1, network.max_uplinks)
        leaf, plane = divmod(switch, network.planes)
        rail = f" rail {plane}" if network.planes > 1 else ""
        return f"{network.leaf_names[leaf]}{rail} {direction}link to spine {spine}"
    return f"spine-core link {local - 2 * tier1}"


def _busiest_section(view: PlanView) -> str:
    network = view.network
    out = [
        "<h2>Busiest links</h2>",
        '<p class="note">Mean flows on each link over the seeds; the max link load above is the busiest link of '
        "each seed, averaged, so it is at least the first row.</p>",
        '<table class="busiest"><tr><th>pod-index order: link</th><th>flows</th><th>ringroute\'s order: link</th>'
        "<th>flows</th></tr>",
    ]
    tops: list[list[tuple[int, float]]] = []
    for name in (BEFORE, AFTER):
        mean = view.loads[name].mean
        busiest = np.argsort(-mean, kind="stable")[:BUSIEST_LINKS]
        tops.append([(int(link), float(mean[link])) for link in busiest if mean[link] > 0])
    for row in range(max(len(t) for t in tops)):
        cells = []
        for top in tops:
            if row < len(top):
                link, load = top[row]
                cells.append(f"<td>{_e(_link_name(network, link))}</td><td class='num'>{load:.2f}</td>")
            else:
                cells.append("<td></td><td></td>")
        out.append(f"<tr>{''.join(cells)}</tr>")
    out.append("</table>")
    return "\n".join(out)
