"""Print figures (PNG) from published data: units on the colour bars, fitted scales, one hexagon per
published cell of the slot shown, the frontier only where there is one."""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection

from dpopt.writers.figures import frontier_figure, map_figure, write_figures

from .conftest import load


def _filled(ax) -> PolyCollection:
    cols = [c for c in ax.collections if isinstance(c, PolyCollection) and c.get_array() is not None]
    assert len(cols) == 1
    return cols[0]


def test_map_figure_panels_units_and_fitted_scale(published):
    _name, table, summary = published
    fig = map_figure(table, summary, unit="km/h")
    value_ax, unc_ax = fig.axes[:2]
    rel = table[table["released"].astype(bool)]
    t = pd.to_datetime(rel["slot"], utc=True)
    busiest = t.value_counts().max() if "slot_end" not in rel else None
    pc = _filled(value_ax)
    if busiest is not None:
        assert len(pc.get_paths()) == busiest
    lo, hi = pc.norm.vmin, pc.norm.vmax
    assert lo <= rel["mean"].min() and hi >= rel["mean"].max()
    assert hi - lo <= 2.5 * max(rel["mean"].max() - rel["mean"].min(), 2.0)
    labels = [a.get_xlabel() for a in fig.axes[2:]]
    assert labels == ["mean (km/h)", "± half-width of the 95 % interval (km/h)"]
    assert np.allclose(np.sort(_filled(unc_ax).get_array()), np.sort(
        rel.loc[(t == t.value_counts().idxmax()).to_numpy(), "mean_error_bound"])) or busiest is None


def test_map_figure_without_unit_has_no_made_up_unit():
    table, summary = load("user")
    fig = map_figure(table, summary)
    assert [a.get_xlabel() for a in fig.axes[2:]] == ["mean", "± half-width of the 95 % interval"]


def test_frontier_figure_marks_tau_and_explains_it():
    table, summary = load("occupancy")
    fig = frontier_figure(summary, unit="km/h")
    texts = " ".join(t.get_text() for t in fig.texts)
    assert "τ: a cell is published only if its mean is within ± τ km/h" in texts
    ax = fig.axes[0]
    assert any(np.allclose(line.get_xdata(), summary["target"]) for line in ax.lines[1:])
    assert frontier_figure(load("user")[1]) is None


def test_write_figures_pngs_without_forcing_a_backend(tmp_path):
    backend = matplotlib.get_backend()
    paths = write_figures(tmp_path, *load("occupancy"), unit="km/h", dpi=40)
    assert sorted(paths) == ["frontier", "map"]
    for p in paths.values():
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(write_figures(tmp_path, *load("user"), dpi=40)) == ["map"]
    assert matplotlib.get_backend() == backend


@pytest.mark.parametrize("model", ["occupancy", "user"])
def test_map_figure_for_a_given_slot(model):
    table, summary = load(model)
    rel = table[table["released"].astype(bool)]
    slot = sorted(rel["slot"])[0]
    fig = map_figure(table, summary, slot=slot)
    assert len(_filled(fig.axes[0]).get_paths()) == int((rel["slot"] == slot).sum())


def test_frontier_axis_names_the_unit_and_map_axes_are_in_degrees():
    """frontier.png names the value's unit (never "data units"); map.png's axes read in degrees and
    span the published cells' own latitudes and longitudes (h3 centres), so the print can be placed."""
    import h3

    table, summary = load("occupancy")
    assert frontier_figure(summary, unit="km/h").axes[0].get_xlabel() == "τ, accuracy target of the mean (km/h)"
    label = frontier_figure(summary).axes[0].get_xlabel()
    assert "no unit given" in label and "data units" not in label
    fig = map_figure(table, summary, unit="km/h")
    fig.canvas.draw()
    ax = fig.axes[0]
    lats = [float(t.get_text().split("°")[0]) for t in ax.get_yticklabels() if t.get_text()]
    lngs = [-float(t.get_text().split("°")[0]) for t in ax.get_xticklabels() if t.get_text()]
    assert all(t.get_text().endswith("N") for t in ax.get_yticklabels() if t.get_text())
    assert all(t.get_text().endswith("W") for t in ax.get_xticklabels() if t.get_text())
    centres = np.array([h3.cell_to_latlng(c) for c in table.loc[table["released"].astype(bool), "cell"]])
    assert len(lats) >= 2 and len(lngs) >= 2
    span_lat, span_lng = np.ptp(centres[:, 0]), np.ptp(centres[:, 1])
    assert centres[:, 0].min() - span_lat <= min(lats) and max(lats) <= centres[:, 0].max() + span_lat
    assert centres[:, 1].min() - span_lng <= min(lngs) and max(lngs) <= centres[:, 1].max() + span_lng
