"""Link-load plots for `ringroute simulate --plot` (matplotlib is optional: the `plot` extra)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from planner._errors import InputError


def plot_link_loads(
    before: np.ndarray,
    after: np.ndarray,
    path: str | Path,
    *,
    bound: int | None = None,
    labels: tuple[str, str] = ("before (pod-index order)", "after (ringroute)"),
) -> Path:
    """Draw the switch-link loads of two plans, each sorted from most to least loaded, into a PNG file.

    `before`/`after` are `link_loads` arrays (usually restricted to switch links); `bound` draws λ* as a line.
    Raises InputError when matplotlib is not installed.
    """
    try:
        import matplotlib as mpl

        mpl.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise InputError("--plot: matplotlib is not installed; pip install 'ringroute[plot]'") from error
    target = Path(path)
    figure, axis = plt.subplots(figsize=(8, 4))
    for loads, label in zip((before, after), labels, strict=True):
        used = np.sort(np.asarray(loads, dtype=float))[::-1]
        used = used[used > 0]
        axis.step(np.arange(used.size), used, where="post", label=f"{label}: max {used.max(initial=0):g}")
    if bound is not None:
        axis.axhline(bound, color="black", linestyle="--", linewidth=1, label=f"bound λ* = {bound}")
    axis.set_xlabel("switch links carrying traffic, most loaded first")
    axis.set_ylabel("flows on the link")
    axis.legend()
    figure.tight_layout()
    figure.savefig(target, dpi=100)
    plt.close(figure)
    return target
