"""Drawing reproduced figures (kept apart from the computations).

Nothing here chooses a matplotlib back-end: :func:`plot_frame` draws on the caller's axes (or on a new
pyplot figure, in the user's own back-end), and :func:`save_figure` renders through a bare
:class:`matplotlib.figure.Figure`, which needs no back-end and leaves pyplot's state alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .base import FigureSpec, figure_title

__all__ = ["plot_frame", "save_figure"]


def pyplot() -> Any:
    """``matplotlib.pyplot``, or an ImportError that says how to get it (figures only; the tables of
    :func:`dpopt.experiments.reproduce` need no matplotlib)."""
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("figures need matplotlib: pip install 'dpopt[release]' (or pip install matplotlib); "
                          "the figure tables (reproduce(...).frame) work without it") from None
    return plt


def plot_frame(frame: pd.DataFrame, spec: FigureSpec, ax: Any = None, *,
               params: Mapping[str, Any] | None = None) -> Any:
    """Draw every series of a tidy figure table on ``ax`` (a new pyplot figure if None); returns the axes.

    Monte-Carlo series get a band of ±2 standard errors (mostly thinner than the line). ``params``
    (a :class:`~dpopt.experiments.base.FigureResult`'s ``params``) fill the title, so that a changed
    parameter is never mislabelled.
    """
    if ax is None:
        plt = pyplot()
        _, ax = plt.subplots(figsize=(6.4, 4.4))
    markers = "osD^v<>ph*"
    for i, (series, part) in enumerate(frame.groupby("series", sort=False)):
        part = part.sort_values("epsilon")
        x = part["epsilon"].to_numpy()
        y = part["value"].to_numpy()
        se = part["stderr"].to_numpy()
        dense = len(x) > 60
        line = ax.plot(x, y, marker=None if dense else markers[i % len(markers)], ms=4, lw=1.4,
                       label=series, drawstyle="steps-post" if dense else "default")[0]
        if np.any(se > 0):
            lo = y - 2 * se
            if spec.yscale == "log":
                lo = np.maximum(lo, y * 1e-3)
            ax.fill_between(x, lo, y + 2 * se, color=line.get_color(), alpha=0.2, lw=0)
    ax.set_xscale(spec.xscale)
    ax.set_yscale(spec.yscale)
    ax.set_xlabel(spec.xlabel)
    ax.set_ylabel(spec.ylabel)
    ax.set_title(figure_title(spec, params or {}), fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return ax


def save_figure(frame: pd.DataFrame, spec: FigureSpec, path: str | Path, *,
                params: Mapping[str, Any] | None = None) -> Path:
    """Plot ``frame`` and write a PNG to ``path`` (no pyplot, no back-end switch)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot()
    plot_frame(frame, spec, ax, params=params)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    return out
