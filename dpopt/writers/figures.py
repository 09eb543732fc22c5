"""The report's figures as PNG for print: the map (value panel on a scale fitted to the released
values, with the unit on the colour bar; uncertainty panel coloured by the half-width of each
interval) and the coverage–accuracy frontier with τ explained under it.

Like :mod:`dpopt.writers.html` they read only published data (release.csv as a DataFrame,
summary.json as a dict), for either privacy model. Matplotlib is used through ``Figure`` objects,
never pyplot's global state, and no backend is forced.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.collections import PolyCollection
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from .geo import centre_longitude
from ._published import (PublishedView, active_at, active_counts, fmt_number, nice_ticks, privacy_statement,
                         published_view, slot_labels)

__all__ = ["map_figure", "frontier_figure", "write_figures"]


def _busiest(view: PublishedView, slot: Any = None) -> pd.Timestamp:
    if slot is not None:
        return pd.Timestamp(slot).tz_convert("UTC") if pd.Timestamp(slot).tzinfo else \
            pd.Timestamp(slot).tz_localize("UTC")
    return view.steps[int(np.argmax(active_counts(view.nodes, view.steps, view.zone)))]


def _polys(cells: pd.Series, k: float, reference: float) -> list[np.ndarray]:
    """The cells' outlines as (longitude·k, latitude) rows, drawn on ``reference``'s side of the
    antimeridian (:func:`dpopt.writers.geo.display_boundary`)."""
    from .geo import display_boundary

    out = []
    for c in cells:
        b = display_boundary(str(c), reference)
        out.append(np.c_[b[:, 1] * k, b[:, 0]])
    return out


def _degree_axes(ax: Any, k: float) -> None:
    """Longitude and latitude ticks in degrees (x is longitude·k), at most four each, so a print
    can be placed on any map."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    def fmt(v: float, pos: str, neg: str) -> str:
        return f"{abs(v):.2f}° {pos if v >= 0 else neg}"

    ax.xaxis.set_major_locator(MaxNLocator(3))
    ax.yaxis.set_major_locator(MaxNLocator(4))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _i: fmt((v / k + 180.0) % 360.0 - 180.0, "E", "W")))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _i: fmt(v, "N", "S")))
    ax.tick_params(labelsize=8)


def _panel(ax: Any, at: pd.DataFrame, wh: pd.DataFrame, values: np.ndarray, *, cmap: str, lo: float, hi: float,
           ticks: list[float], label: str, k: float, ref: float) -> None:
    """One map panel on ``ax``: the published nodes ``at`` coloured by ``values`` (colour map
    ``cmap`` on [``lo``, ``hi``], bar ``ticks`` and ``label``), coarse and long slots below fine
    and short ones, over the grey outlines of the withheld cells ``wh``; x is longitude·``k``."""
    fig = ax.get_figure()
    if len(wh):
        ax.add_collection(PolyCollection(_polys(wh["cell"], k, ref), facecolors="none", edgecolors="#cccccc",
                                         linewidths=0.4))
    span = (at["t1"] - at["t0"]) // pd.Timedelta(seconds=1)  # coarse first, then longest slot first
    order = np.lexsort((-span.to_numpy(dtype=np.int64), at["res"].to_numpy()))
    polys = _polys(at["cell"], k, ref)
    pc = PolyCollection([polys[i] for i in order], array=values[order], cmap=cmap,
                        norm=Normalize(lo, hi), edgecolors="#333333", linewidths=0.5)
    ax.add_collection(pc)
    pts = np.concatenate(polys)
    pad = 0.15 * np.ptp(pts, axis=0).max()
    ax.set_xlim(pts[:, 0].min() - pad, pts[:, 0].max() + pad)
    ax.set_ylim(pts[:, 1].min() - pad, pts[:, 1].max() + pad)
    ax.set_aspect("equal")
    _degree_axes(ax, k)
    cb = fig.colorbar(pc, ax=ax, orientation="horizontal", fraction=0.05, pad=0.04, ticks=ticks)
    cb.set_label(label)


def map_figure(table: pd.DataFrame, summary: dict[str, Any], *, unit: str | None = None,
               slot: Any = None, view: PublishedView | None = None) -> Figure:
    """Two panels for the time slot ``slot`` (default: the one with most published cells): the
    released means on a colour scale fitted to all released means (unit on the bar), and the
    half-width of each mean's interval. Grey outlines: withheld cells of that slot. ``view``: the
    caller's :func:`published_view` of the same table, summary and unit, if it has one."""
    if view is None:  # else the caller's published_view of the same table, summary and unit
        view = published_view(table, summary, unit=unit)
    fig = Figure(figsize=(11, 6.2), layout="constrained")
    if not len(view.nodes):
        ax = fig.add_subplot()
        ax.text(0.5, 0.5, "no cell was published", ha="center", va="center")
        ax.set_axis_off()
        return fig
    t = _busiest(view, slot)
    at = view.nodes[active_at(view.nodes, t, view.zone)]
    wh = view.withheld[((view.withheld["t0"] <= t) & (t < view.withheld["t1"])).to_numpy()]
    k = float(np.cos(np.radians(view.nodes["cell"].map(_lat).mean())))
    ref = centre_longitude(view.nodes["cell"].tolist())  # every cell on one side of the antimeridian
    m, b = view.nodes["mean"].to_numpy(float), view.nodes["bound"].to_numpy(float)
    lo, hi, ticks = nice_ticks(np.nanmin(m), np.nanmax(m))
    blo, bhi, bticks = nice_ticks(0.0, np.nanmax(b) if np.isfinite(b).any() else 1.0)
    a1, a2 = fig.subplots(1, 2)
    conf = f"{view.confidence * 100:.4g} %"
    _panel(a1, at, wh, at["mean"].to_numpy(float), cmap="viridis", lo=lo, hi=hi, ticks=ticks,
           label=f"mean{view.label}", k=k, ref=ref)
    _panel(a2, at, wh, at["bound"].to_numpy(float), cmap="Oranges", lo=blo, hi=bhi, ticks=bticks,
           label=f"± half-width of the {conf} interval{view.label}", k=k, ref=ref)
    full = view.span if view.span is not None else hi - lo
    wide = np.nan_to_num(at["bound"].to_numpy(float), nan=np.inf) > 0.25 * full
    if wide.any():  # the same rule as report.html: ± more than a quarter of the range
        a1.add_collection(PolyCollection([p for p, w in zip(_polys(at["cell"], k, ref), wide) if w],
                                         facecolors="none", edgecolors="white", hatch="////", linewidths=0))
    a1.set_title("Published mean" + (" (hatched: ± more than a quarter of the range)" if wide.any() else ""),
                 fontsize=11)
    a2.set_title("Uncertainty of the mean", fontsize=11)
    nums, _ = privacy_statement(summary)
    grey = "; grey outlines: withheld" if len(wh) else ""
    mixed = len(set((view.nodes["t1"] - view.nodes["t0"]).tolist())) > 1 or view.nodes["res"].nunique() > 1
    ends = dict(zip(view.steps, view.step_ends))
    when = slot_labels(pd.Series([t]).dt.tz_convert(view.zone),
                       pd.Series([ends.get(t, t + view.slot)]).dt.tz_convert(view.zone)).iloc[0]
    cover = " (each at its own resolution, its slot covering this one)" if mixed else ""
    fig.suptitle(f"{when}: {len(at)} of {len(view.nodes)} published cells{cover} "
                 f"({summary.get('privacy_model', '')}, {nums}){grey}; other slots in report.html",
                 fontsize=10)
    return fig


def _lat(cell: str) -> float:
    import h3

    return float(h3.cell_to_latlng(cell)[0])


def frontier_figure(summary: dict[str, Any], *, frontier: dict[str, Any] | None = None,
                    unit: str | None = None) -> Figure | None:
    """Cells published against the accuracy target τ (log scale), the chosen τ marked and τ
    explained in the caption; None when the release has no frontier (the ``user`` model)."""
    fr = frontier if frontier is not None else summary.get("frontier")
    if not fr or not fr.get("tau"):
        return None
    view_unit = unit or summary.get("unit")
    suffix = f" {view_unit}" if view_unit else ""
    tau = np.asarray(fr["tau"], float)
    cov = np.asarray(fr.get("coverage", fr.get("released")), float)
    fig = Figure(figsize=(7, 4.6), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(tau, cov, "o-", color="#2c728e")
    ax.set_xscale("log")
    nice = [v for v in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
            if tau.min() <= v <= tau.max()]
    if len(nice) >= 2:
        ax.set_xticks(nice, [fmt_number(v) for v in nice])
        ax.set_xticks([], minor=True)
    ax.set_xlabel(f"τ, accuracy target of the mean ({view_unit or 'no unit given: units of the value'})")
    ax.set_ylabel("cells published")
    chosen = summary.get("target")
    if chosen is not None:
        ax.axvline(chosen, color="#d94801", ls="--")
        ax.annotate(f"chosen τ = {fmt_number(chosen)}{suffix}", (chosen, cov.max()), xytext=(4, -4),
                    textcoords="offset points", va="top", color="#d94801")
    conf = f"{float(summary.get('confidence', 0.95)) * 100:.4g} %"
    fig.text(0.01, 0.005, f"τ: a cell is published only if its mean is within ± τ{suffix} of the true mean "
             f"with {conf} probability;\nsmaller τ = more accurate values, fewer cells.", fontsize=9,
             va="bottom")
    fig.get_layout_engine().set(rect=(0, 0.09, 1, 0.91))
    return fig


def write_figures(out: str | Path, table: pd.DataFrame, summary: dict[str, Any], *,
                  unit: str | None = None, frontier: dict[str, Any] | None = None,
                  dpi: int = 150, view: PublishedView | None = None) -> dict[str, Path]:
    """Write ``map.png`` and (when there is a frontier) ``frontier.png`` into ``out`` (``view``: as
    :func:`map_figure`'s)."""
    out = Path(out)
    paths = {"map": out / "map.png"}
    map_figure(table, summary, unit=unit, view=view).savefig(paths["map"], dpi=dpi)
    fig = frontier_figure(summary, frontier=frontier, unit=unit)
    if fig is not None:
        paths["frontier"] = out / "frontier.png"
        fig.savefig(paths["frontier"], dpi=dpi)
    return paths
