"""Link-load plots for `ringroute simulate --plot` (matplotlib is optional: the `plot` extra)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from planner._errors import InputError
from planner.sim._summary import format_load

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DEFAULT_LABELS = ("before: pod-index order", "after: ringroute's order")
_STYLES: tuple[dict[str, Any], ...] = (
    # before: thick solid red with circles; after: thinner dashed blue with squares, drawn on top, so where
    # both lie at the same load (often 1) each stays visible
    {"color": "tab:red", "linestyle": "-", "linewidth": 3.0, "marker": "o", "zorder": 2},
    {"color": "tab:blue", "linestyle": "--", "linewidth": 1.6, "marker": "s", "zorder": 3},
)


def _pyplot() -> Any:
    try:
        import matplotlib as mpl

        mpl.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise InputError("--plot: matplotlib is not installed; pip install 'ringroute[plot]'") from error
    return plt


def link_load_figure(
    before: np.ndarray,
    after: np.ndarray,
    *,
    bound: float | None = None,
    labels: tuple[str, str] = DEFAULT_LABELS,
    title: str | None = None,
    maxima: tuple[float, float] | None = None,
) -> Figure:
    """The figure `plot_link_loads` saves (matplotlib's, for callers that show or inspect it).

    `before`/`after` are link loads busiest first (`LinkLoads.ranked()`), each drawn as a step line; `maxima`
    are the max link loads the legend names (default: each series' first value), `bound` draws λ* as a line.
    The y axis ticks whole flow counts.
    """
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    series = [np.sort(np.asarray(loads, dtype=float).ravel())[::-1] for loads in (before, after)]
    if maxima is None:
        maxima = (float(series[0].max(initial=0)), float(series[1].max(initial=0)))
    figure, axis = plt.subplots(figsize=(9, 4.5))
    for loads, label, largest, style in zip(series, labels, maxima, _STYLES, strict=True):
        used = loads[loads > 0]
        x = np.arange(used.size)
        every = max(1, used.size // 12)
        axis.step(
            x,
            used,
            where="post",
            label=f"{label}: max link load {format_load(largest)}",
            markevery=every,
            markersize=6,
            **style,
        )
    top = max([*(float(s.max(initial=0)) for s in series), float(bound or 0), 1.0])
    if bound is not None:
        axis.axhline(bound, color="black", linestyle=":", linewidth=1.2, zorder=1, label=f"bound λ* = {bound:g}")
    axis.set_ylim(0, math.ceil(top) + 0.5)
    axis.yaxis.set_major_locator(MaxNLocator(integer=True))
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.set_xlabel("links carrying traffic, busiest first")
    axis.set_ylabel("flows on the link")
    axis.grid(axis="y", color="0.9")
    if title:
        axis.set_title(title, fontsize=10)
    axis.legend(loc="upper right")
    figure.tight_layout()
    drawn: Figure = figure
    return drawn


def plot_link_loads(
    before: np.ndarray,
    after: np.ndarray,
    path: str | Path,
    *,
    bound: float | None = None,
    labels: tuple[str, str] = DEFAULT_LABELS,
    title: str | None = None,
    maxima: tuple[float, float] | None = None,
) -> Path:
    """Draw the link loads of two plans, each busiest first, into an image file (format from its suffix).

    See `link_load_figure`. Raises InputError when matplotlib is not installed.
    """
    plt = _pyplot()
    target = Path(path)
    figure = link_load_figure(before, after, bound=bound, labels=labels, title=title, maxima=maxima)
    try:
        figure.savefig(target, dpi=100)
    finally:
        plt.close(figure)
    return target
