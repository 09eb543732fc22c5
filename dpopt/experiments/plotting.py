"""Drawing reproduced figures (kept apart from the computations; matplotlib with the Agg back-end)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .base import FigureSpec

__all__ = ["plot_frame", "save_figure"]


def plot_frame(frame: pd.DataFrame, spec: FigureSpec, ax: Any = None) -> Any:
    """Draw every series of a tidy figure table on ``ax`` (a new figure if None); returns the axes.

    Monte-Carlo series get a band of ±2 standard errors (mostly thinner than the line).
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    if ax is None:
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
    ax.set_title(f"{spec.figure}: {spec.title}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return ax


def save_figure(frame: pd.DataFrame, spec: FigureSpec, path: str | Path) -> Path:
    """Plot ``frame`` and write a PNG to ``path``."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    ax = plot_frame(frame, spec)
    fig = ax.figure
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
