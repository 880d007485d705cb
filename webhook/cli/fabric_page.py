"""The leaf x spine picture of a shared fabric's loads: `ringroute fabric load --html` and the plan page of a job
planned around running ones. One row per tier-1 switch, one cell per spine, up and down side by side, coloured by
the flows every job puts on the link; hovering a cell names the jobs. Self-contained SVG, names escaped."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from webhook.cli.html_report import MAX_STRIP_ROWS, STYLE, colour, escaped, legend
from webhook.cli.outputs import replace_file

if TYPE_CHECKING:
    from planner import FabricLedger, FabricReport

CELL = 11
MAX_SPINES = 128
"""Spines drawn per switch at most (the busiest)."""


def fabric_grid(ledger: FabricLedger, loads: np.ndarray, *, highlight: frozenset[str] = frozenset()) -> str:
    """The picture: rows of tier-1 switches (the busiest MAX_STRIP_ROWS), their uplinks then downlinks."""
    net = ledger.links.network
    rows: list[tuple[str, np.ndarray, np.ndarray]] = []
    rail = net.layout == "rail"
    for leaf, name in enumerate(net.leaf_names):
        spines = np.arange(int(net.leaf_uplinks[leaf]))[:MAX_SPINES]
        for plane in range(net.planes):
            switch = np.full(spines.size, leaf * net.planes + plane)
            label = f"{name}/rail-{plane}" if rail else name
            rows.append((label, net.leaf_link(switch, spines, up=True), net.leaf_link(switch, spines, up=False)))
    busy = [row for row in rows if loads[row[1]].any() or loads[row[2]].any()]
    busy.sort(key=lambda row: -float(max(loads[row[1]].max(), loads[row[2]].max())))
    shown = busy[:MAX_STRIP_ROWS]
    width = max((r[1].size for r in shown), default=1)
    label_w, gap = 150, 24
    height = (CELL + 3) * max(1, len(shown)) + 18
    total = label_w + 2 * width * (CELL + 1) + gap
    drawn = [int(link) for _label, up, down in shown for link in (*up.tolist(), *down.tolist()) if loads[link] > 0]
    uses = {use.link: use for use in ledger.link_uses(drawn)}  # the jobs on every loaded cell, in one pass
    parts = [
        f'<svg width="{total}" height="{height}" viewBox="0 0 {total} {height}" data-field="fabric-grid">',
        f'<text x="{label_w}" y="11">uplinks to spine 0..{width - 1}</text>',
        f'<text x="{label_w + width * (CELL + 1) + gap}" y="11">downlinks from spine 0..{width - 1}</text>',
    ]
    for y, (label, up, down) in enumerate(sorted(shown, key=lambda row: row[0])):
        top = 18 + y * (CELL + 3)
        bold = ' font-weight="bold"' if label in highlight else ""
        parts.append(f'<text x="0" y="{top + CELL - 1}"{bold}>{escaped(label)}</text>')
        for side, ids in enumerate((up, down)):
            left = label_w + side * (width * (CELL + 1) + gap)
            for spine, link in enumerate(ids.tolist()):
                load = float(loads[link])
                jobs = ", ".join(f"{s.key} {s.load:.2f}" for s in uses[link].jobs) if link in uses else "idle"
                parts.append(
                    f'<rect x="{left + spine * (CELL + 1)}" y="{top}" width="{CELL}" height="{CELL}" '
                    f'fill="{colour(load)}"><title>{escaped(ledger.links.name(link).render())}: {load:.2f} flows '
                    f"({escaped(jobs)})</title></rect>"
                )
    parts.append("</svg>")
    note = f" The {MAX_STRIP_ROWS} busiest of {len(busy)} loaded switches are shown." if len(busy) > len(shown) else ""
    keys = "".join(f'<span class="legend"><span style="background:{c}"></span>{t}</span>' for t, c in legend())
    return (
        f'<p class="note">Every job\'s flows on each link between a tier-1 switch and a spine; hover a cell for '
        f'the jobs on it.{note}{keys}</p><div class="scroll">{"".join(parts)}</div>'
    )


def render_fabric_page(ledger: FabricLedger, report: FabricReport) -> str:
    """The whole `fabric load --html` page."""
    rows = "".join(
        f'<tr><td>{escaped(job.key)}</td><td class="num">{job.servers}</td><td>{job.delivery}</td>'
        f'<td>{escaped(job.bottleneck_link or "-")}</td><td class="num">{job.bottleneck:.2f}</td>'
        f'<td class="num">{job.others:.2f}</td><td class="num">{job.busbw:.3f}</td></tr>'
        for job in report.jobs
    )
    return (
        "\n".join(
            [
                "<!DOCTYPE html>",
                '<html lang="en"><head><meta charset="utf-8"><title>ringroute fabric load</title>',
                f"<style>{STYLE}</style></head><body>",
                "<h1>ringroute fabric load</h1>",
                f'<p class="sub" data-field="summary">{len(report.jobs)} running jobs; max link load '
                f"{report.max_link_load:.2f} flows (bound {report.bound:g} over every job's flows together)</p>",
                "<h2>Jobs</h2>",
                "<table><tr><th>job</th><th>servers</th><th>delivery</th><th>busiest link</th><th>load</th>"
                f"<th>other jobs</th><th>predicted bus bandwidth</th></tr>{rows}</table>",
                "<h2>Leaf x spine loads</h2>",
                fabric_grid(ledger, report.loads),
                "</body></html>",
            ]
        )
        + "\n"
    )


def write_fabric_page(path: Path, ledger: FabricLedger, report: FabricReport) -> None:
    """Write the page to `path` atomically."""
    replace_file(path, render_fabric_page(ledger, report), flag="--html")


__all__ = ["fabric_grid", "render_fabric_page", "write_fabric_page"]
