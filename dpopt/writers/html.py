"""report.html: one self-contained page (inline SVG, CSS and JS, Leaflet included; no CDN) that a
manager reads in a minute and an analyst uses to look a value up. The only request at view time is
for the street map's tiles (:mod:`.streetmap`); offline the page works the same on a plain
background.

It takes only what is published — release.csv as a DataFrame and summary.json as a dict — so it is
post-processing of DP outputs and public data and cannot reveal more than those files. Every string
taken from the data (cell ids, column values, summary fields) is HTML-escaped; the page's script
reads only attributes the server wrote and sets text with ``textContent``.

Sections: the one-minute summary (what, privacy in words and numbers, accuracy in the data's unit,
what was withheld and why, how to get more coverage); the map of released nodes (H3 hexagons at
their own resolution over a street map, coloured by value on a scale fitted to the released values,
then the value and a second panel coloured by the interval's half-width side by side, hover = value
± interval, a time control over the slots);
the coverage–accuracy frontier with τ in one sentence; the sortable table; the methods appendix.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ._published import (PublishedView, active_counts, answers_vary_text, fmt_number, nice_ticks, privacy_statement,
                         published_view, released_count, row_dicts, slot_labels, span_text)
from ..records.grid import wall_clock
from .streetmap import DEFAULT_TILES, STREET_JS, leaflet_assets, street_map_html

__all__ = ["render_html", "write_html_report", "DEFAULT_TILES", "variance_published", "variance_reasons"]

_E = html.escape
#: viridis, 9 stops (value panel) and a light-to-dark orange ramp (uncertainty panel)
_VIRIDIS = ["#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962", "#addc30",
            "#fde725"]
_UNCERT = ["#fff5eb", "#fee6ce", "#fdd0a2", "#fdae6b", "#fd8d3c", "#f16913", "#d94801", "#a63603",
           "#7f2704"]
_W = 520.0  # map panel width in SVG units


def _ramp(stops: list[str], t: np.ndarray) -> list[str]:
    """Colours of ``t`` in [0, 1] by linear interpolation between ``stops`` (NaN → grey)."""
    rgb = np.array([[int(s[i:i + 2], 16) for i in (1, 3, 5)] for s in stops], dtype=float)
    pos = np.clip(np.nan_to_num(t, nan=0.0), 0, 1) * (len(stops) - 1)
    i = np.minimum(pos.astype(int), len(stops) - 2)
    f = (pos - i)[:, None]
    c = np.rint(rgb[i] * (1 - f) + rgb[i + 1] * f).astype(int)
    out = [f"#{r:02x}{g:02x}{b:02x}" for r, g, b in c]
    return [("#bbbbbb" if not np.isfinite(v) else col) for v, col in zip(t, out)]


class _Projection:
    """Equirectangular projection (x = lng·cos φ₀, y = −lat) fitted into a ``_W``-wide panel."""

    def __init__(self, cells: list[str], focus: list[str] | None = None, margin: float = 0.15) -> None:
        from .geo import centre_longitude, display_boundary

        reference = centre_longitude(cells)  # one side of the antimeridian for every cell of the map
        self.rings = {c: display_boundary(c, reference) for c in cells}
        self.paths: dict[str, str] = {}
        fit = [self.rings[c] for c in (focus or cells)]
        allp = np.concatenate(fit) if fit else np.zeros((1, 2))
        pad = margin * np.ptp(allp, axis=0).max()
        allp = np.vstack([allp, allp.min(axis=0) - pad, allp.max(axis=0) + pad])
        self.k = math.cos(math.radians(float(allp[:, 0].mean())))
        x, y = allp[:, 1] * self.k, -allp[:, 0]
        self.x0, self.y0 = x.min(), y.min()
        xs, ys = max(x.max() - self.x0, 1e-9), max(y.max() - self.y0, 1e-9)
        self.s = min((_W - 20) / xs, (1.3 * _W - 20) / ys)
        self.width = float(xs * self.s + 20)
        self.height = float(ys * self.s + 20)

    def xy(self, latlng: np.ndarray) -> np.ndarray:
        return np.c_[(latlng[:, 1] * self.k - self.x0) * self.s + 10,
                     (-latlng[:, 0] - self.y0) * self.s + 10]

    def path(self, cell: str) -> str:
        d = self.paths.get(cell)  # a cell is drawn once per slot: format its outline once
        if d is None:
            p = self.xy(self.rings[cell])
            d = self.paths[cell] = "M" + "L".join(f"{a:.1f},{b:.1f}" for a, b in p) + "Z"
        return d


def _basemap_paths(basemap: dict[str, Any] | None, proj: _Projection) -> str:
    """Thin grey lines of a GeoJSON FeatureCollection (LineString, MultiLineString, Polygon,
    MultiPolygon; coordinates [lng, lat]) given by the user; nothing is fetched."""
    if not basemap:
        return ""
    out = []
    for feat in basemap.get("features", []):
        geom = feat.get("geometry") or {}
        kind, coords = geom.get("type"), geom.get("coordinates") or []
        lines = {"LineString": [coords], "MultiLineString": coords, "Polygon": coords,
                 "MultiPolygon": [r for poly in coords for r in poly]}.get(kind, [])
        for line in lines:
            a = np.asarray(line, dtype=float)
            if a.ndim == 2 and len(a) >= 2:
                p = proj.xy(a[:, ::-1])
                out.append("M" + "L".join(f"{x:.1f},{y:.1f}" for x, y in p))
    return f'<g class="basemap"><path d="{" ".join(out)}"/></g>'


# ----------------------------------------------------------------------------- text helpers

def _sq(view: PublishedView) -> str:
    return f" ({view.unit})²" if view.unit_known else ""


def _pm(x: Any, view: PublishedView) -> str:
    return f"± {fmt_number(x)}{view.suffix}"


def _conf(view: PublishedView) -> str:
    return f"{view.confidence * 100:.4g} %"


def _is_true(v: Any) -> bool:
    return str(v).strip().lower() in ("true", "1", "1.0", "yes")


def _variance_shown(rows: pd.DataFrame) -> np.ndarray:
    """Which released rows publish a variance: a value, and not marked withheld."""
    if "variance" not in rows.columns:
        return np.zeros(len(rows), dtype=bool)
    shown = pd.to_numeric(rows["variance"], errors="coerce").notna().to_numpy().copy()
    if "variance_released" in rows.columns:
        shown &= rows["variance_released"].map(_is_true).to_numpy(dtype=bool)
    return shown


def variance_published(rows: pd.DataFrame) -> bool:
    """Whether any of the released ``rows`` (release.csv) publishes a variance."""
    return bool(_variance_shown(rows).any())


def variance_reasons(rows: pd.DataFrame) -> dict[str, int]:
    """Reason → number of released ``rows`` whose variance is withheld, in release.csv's own words
    (``variance_withheld_reason``; "not published" where a row gives none)."""
    if "variance" not in rows.columns and "variance_released" not in rows.columns:
        return {}
    hidden = ~_variance_shown(rows)
    why = rows["variance_withheld_reason"] if "variance_withheld_reason" in rows.columns else pd.Series(
        "", index=rows.index)
    why = why.where(why.notna() & (why.astype(str).str.strip() != ""), "not published").astype(str)
    return {str(k): int(v) for k, v in why[hidden].value_counts(sort=True).items()}


def _tip(row: Any, view: PublishedView) -> str:
    """Hover text of one released node (a row as a dict or a Series; plain text, escaped when written)."""
    lines = [f"{row['cell']} · H3 resolution {int(row['res'])} · {row['slot_label']}",
             f"mean {fmt_number(row['mean'])}{view.suffix} {_pm(row['bound'], view)} "
             f"({_conf(view)} interval {fmt_number(row['lo'])} to {fmt_number(row['hi'])})"]
    if "variance" in row:
        if "variance_released" in row and not _is_true(row["variance_released"]):
            why = row.get("variance_withheld_reason")
            lines.append("variance withheld" + (f": {why}" if isinstance(why, str) and why else ""))
        elif pd.notna(row["variance"]):
            vb = row.get("variance_error_bound")
            lines.append(f"variance {fmt_number(row['variance'])}{_sq(view)} ± {fmt_number(vb)}")
    pub = [f"{lab} {int(row[c])}" for c, lab in (("n_users", "users"), ("n_records", "records"))
           if c in row and pd.notna(row[c])]
    if pub:
        lines.append(" · ".join(pub) + " (public)")
    if "noisy_count" in row and pd.notna(row["noisy_count"]):
        lines.append(f"noisy record count {fmt_number(row['noisy_count'])} (DP)")
    if "method" in row and isinstance(row["method"], str):
        lines.append(f"estimate: {row['method']}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- one-minute summary

def _what(view: PublishedView, summary: dict[str, Any]) -> str:
    import h3

    n = len(view.nodes)
    res = sorted(set(view.nodes["res"].tolist()) | set(view.withheld["res"].tolist()))
    size = ", ".join(f"resolution {r} (≈ {2 * h3.average_hexagon_edge_length(r, 'km'):.2g} km across)"
                     for r in res)
    grids = summary.get("grids")
    of = f" of the {int(grids):,} with data" if grids else ""
    span = ""
    if view.steps:
        t0 = pd.concat([view.nodes["t0"], view.withheld["t0"]])
        t1 = pd.concat([view.nodes["until"].where(view.nodes["cycle"].notna(), view.nodes["t1"]), view.withheld["t1"]])
        lengths = sorted(set((view.nodes["t1"] - view.nodes["t0"]).tolist()))
        if len(lengths) > 1:
            slots = f"in slots of {_E(span_text(lengths[0]))} to {_E(span_text(lengths[-1]))}"
        elif not lengths or lengths[0] == view.slot:
            slots = f"in {_E(str(summary.get('slot', '')))} slots"
        else:
            slots = f"in {_E(span_text(lengths[0]))} slots"
        span = f", {_when(min(t0), view)} to {_when(max(t1), view)} {slots}"
    what = "mean" + (" and variance" if variance_published(view.nodes) else "")
    src = ""
    if summary.get("records") and summary.get("users"):
        src = f" from {int(summary['records']):,} records of {int(summary['users']):,} users"
    return (f"<li><b>What:</b> the {what} of the value in <b>{n:,}</b> hexagon × time-slot cells{of}"
            f"{_E(src)} (H3 hexagons, {_E(size)}{span}).</li>")


def _mixed(view: PublishedView) -> tuple[bool, bool]:
    """(several H3 resolutions, several slot lengths) among the published nodes."""
    n = view.nodes
    return n["res"].nunique() > 1, (n["t1"] - n["t0"]).nunique() > 1


def _shape(view: PublishedView, summary: dict[str, Any]) -> str:
    """The multi-resolution release in one sentence (when resolutions or slot lengths mix, or the
    release chose them adaptively)."""
    if not len(view.nodes):
        return ""
    res_mixed, slot_mixed = _mixed(view)
    if not (res_mixed or slot_mixed or summary.get("resolution") == "adaptive"):
        return ""
    n = view.nodes
    lengths = n["t1"] - n["t0"]
    levels = summary.get("levels") or []
    finest = (f" (the finest level is H3 resolution {_E(str(levels[0].get('h3_resolution')))} × "
              f"{_E(str(levels[0].get('slot')))} slots)") if levels and isinstance(levels[0], dict) else ""
    rs = sorted(set(n["res"].tolist()))
    here = [f"H3 resolution{'s' if len(rs) > 1 else ''} {', '.join(str(r) for r in rs)}",
            "slots of " + " to ".join(dict.fromkeys(span_text(x) for x in (lengths.min(), lengths.max())))]
    if n["cycle"].notna().any():
        here.append("recurring slots: the same hours of every "
                    + ("week" if (n["cycle"] >= pd.Timedelta(days=7)).any() else "day"))
    return ("<li><b>Resolution:</b> values are published at the finest resolution the data support"
            f"{finest}; where data are thin a coarser hexagon or a longer slot is published instead "
            f"(here: {_E('; '.join(here))}). A larger hexagon or a longer slot answers for every smaller "
            "cell and slot it contains: for the slot you pick, the map shows every published cell whose "
            "own time span covers it.</li>")


def _accuracy(view: PublishedView) -> str:
    b = view.nodes["bound"].to_numpy(float)
    b = b[np.isfinite(b)]
    if not len(view.nodes):
        return "<li><b>Accuracy:</b> nothing was published, so there is no value to be accurate.</li>"
    if not len(b):
        return "<li><b>Accuracy:</b> no error bounds were published.</li>"
    unit = _E(view.unit)
    txt = (f"<li><b>Accuracy:</b> a published mean is within <b>± {fmt_number(np.median(b))} {unit}</b> "
           f"of the true mean in the typical published row (the median over the rows, grids and coarser nodes; "
           f"from ± {fmt_number(b.min())} to "
           f"± {fmt_number(b.max())} {unit}), with {_conf(view)} probability")
    if view.bound is not None:
        wide = int(((view.nodes["lo"] <= view.lower) & (view.nodes["hi"] >= view.bound)).sum())
        txt += f". Values lie in {fmt_number(view.lower)} to {fmt_number(view.bound)} {unit}"
        if wide:
            txt += (f"; <b>{wide:,}</b> cell(s) have an interval as wide as that whole range — "
                    "read them as “no information”")
    return txt + ". Hover a hexagon for its own interval.</li>"


def _withheld(view: PublishedView, summary: dict[str, Any]) -> str:
    model = summary.get("privacy_model")
    out = []
    nw = summary.get("withheld_grids", len(view.withheld) or None)
    if model == "public-occupancy" and nw:
        tau = summary.get("target")
        why = (f"at this budget their mean could not be published within ± {fmt_number(tau)} "
               f"{_E(view.unit)} (the accuracy target)" if tau is not None else
               "the plan kept no contribution in them")
        out.append(f"<b>{int(nw):,}</b> cells were withheld: {why}. Publishing them would publish "
                   "noise, not information.")
    elif model == "user":
        # the flat release states its threshold; the multi-resolution one names private selection
        if summary.get("selection_threshold") is not None or str(summary.get("partitions", "")).startswith("private"):
            out.append("Cells were selected privately: a cell is published only if its noisy number "
                       "of users passed a threshold, so rare cells cannot reveal anyone; the others "
                       "are not listed at all.")
        else:
            out.append("Only the cells of the public list of partitions given were considered; cells "
                       "outside it are not published.")
    reasons = variance_reasons(view.nodes)
    if reasons:
        said = "; ".join(f"{_E(why)} ({k:,} cell{'s' if k > 1 else ''})" for why, k in reasons.items())
        out.append(f"The variance of <b>{sum(reasons.values()):,}</b> published cell(s) was withheld "
                   f"(one reason each, as in release.csv): {said}.")
    if not out:
        return ""
    return "<li><b>Withheld:</b> " + " ".join(out) + "</li>"


def _more(view: PublishedView, summary: dict[str, Any], frontier: dict[str, Any] | None) -> str:
    tips = []
    if frontier and summary.get("target") is not None:
        tau, cov = np.asarray(frontier.get("tau", []), float), np.asarray(frontier.get("coverage", []), float)
        bigger = [(t, c) for t, c in zip(tau, cov) if t > float(summary["target"]) * 1.0001][:2]
        if bigger:
            tips.append("accept a larger error: " + "; ".join(
                f"± {fmt_number(t)} {_E(view.unit)} would publish about {int(c):,} cells" for t, c in bigger)
                + " (<code>--target</code>)")
    if summary.get("resolution") == "adaptive":  # the release already coarsens where data are thin
        tips.append("a larger total ε (<code>--epsilon-total</code>; weaker privacy) or data from more "
                    "users: the release then publishes smaller hexagons and shorter slots where it now "
                    "falls back to coarser ones")
        return "<li><b>For more detail or coverage:</b> " + "; ".join(tips) + ".</li>"
    res = int(view.nodes["res"].min()) if len(view.nodes) else int(summary.get("h3_resolution", 7))
    tips.append(f"use larger hexagons (<code>--h3-resolution {max(res - 1, 0)}</code>) or longer time "
                "slots (<code>--slot 2h</code>), so that more users share a cell")
    tips.append("a larger total ε (weaker privacy) or data from more users")
    return "<li><b>For more coverage:</b> " + "; ".join(tips) + ".</li>"


#: what ε = 1 and ε = 10 mean in practice, with where the numbers come from (plain text, no link)
EPSILON_IN_PRACTICE = (
    "In practice: whatever anyone concludes from the release, one person's data can change the odds of that "
    "conclusion by a factor of at most e<sup>ε</sup>: about 2.7 at ε = 1, a strong guarantee by common "
    "practice, and about 22,000 at ε = 10, a weak one, though deployed releases have used such values and "
    "more (the US Census Bureau's 2020 redistricting data used about ε = 17 for persons). Published "
    "deployments and their ε: D. Desfontaines, “A list of real-world uses of differential privacy”, "
    "desfontain.es/blog/real-world-differential-privacy.html.")


def _summary_section(view: PublishedView, summary: dict[str, Any], frontier: dict[str, Any] | None) -> str:
    nums, words = privacy_statement(summary)
    model = _E(str(summary.get("privacy_model", "")))
    accuracy = _accuracy(view)
    items = [_what(view, summary), _shape(view, summary),
             f"<li><b>Privacy:</b> user-level differential privacy, model <i>{model}</i>, "
             f"<b>{_E(nums)}</b>. {_E(words)} {EPSILON_IN_PRACTICE}</li>",
             accuracy, _withheld(view, summary), _more(view, summary, frontier),
             "<li><b>Look up one value:</b> on the street map below, pick the time slot (slider or list), "
             "then hover the hexagon: it shows the mean ± its interval; or type the cell id in the table's "
             "search box. Below the street map, the right-hand panel shows how uncertain each hexagon is.</li>"]
    vary = answers_vary_text(summary)
    if vary:  # one map-wide mean for every grid is said first; the factors after the accuracy line
        items.insert(0 if not summary.get("answers_vary_by") else items.index(accuracy) + 1,
                     f"<li><b>What the answers show:</b> {_E(vary[0].upper() + vary[1:])}.</li>")
    if summary.get("outlook"):  # a release with nothing worth reading says so first
        items.insert(0, f"<li><b>Nothing worth reading:</b> {_E(str(summary['outlook']))}</li>")
    unit_note = ("" if view.unit_known else
                 '<p class="note">No unit was given for the values: numbers are in the units of '
                 "the data.</p>")
    return ('<section id="summary"><h2>In one minute</h2><ul>' + "".join(items) + "</ul>"
            + unit_note + "</section>")


# ----------------------------------------------------------------------------- map

def _legend(stops: list[str], lo: float, hi: float, ticks: list[float], title: str, gid: str) -> str:
    w, x0 = 300.0, 10.0
    g = "".join(f'<stop offset="{i / (len(stops) - 1):.3f}" stop-color="{c}"/>' for i, c in enumerate(stops))
    tk = "".join(
        f'<line x1="{x:.1f}" x2="{x:.1f}" y1="26" y2="31"/><text x="{x:.1f}" y="43">{_E(fmt_number(t))}</text>'
        for t in ticks for x in [x0 + (t - lo) / (hi - lo) * w])
    return (f'<svg class="legend" viewBox="0 0 {w + 30:.0f} 50" width="{w + 30:.0f}" height="50">'
            f'<defs><linearGradient id="{gid}">{g}</linearGradient></defs>'
            f'<text x="{x0}" y="11" class="lt">{_E(title)}</text>'
            f'<rect x="{x0}" y="15" width="{w}" height="11" fill="url(#{gid})"/>{tk}</svg>')


def _epoch(ts: pd.Series) -> np.ndarray:
    t = pd.to_datetime(ts, utc=True)
    return ((t - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(seconds=1)).to_numpy(dtype=np.int64)


def _node_times(view: PublishedView) -> tuple[np.ndarray, ...]:
    """(t0, t1, recurring, cycle, until) of the nodes in epoch seconds for the time control: instants
    for contiguous slots; a recurring window's start, end and last end on the wall clock of the zone
    its windows were cut in (the steps carry both, ``t`` and ``w``), so an 08:00 window stays at
    08:00 across a clock change."""
    nodes = view.nodes
    rep = nodes["cycle"].notna().to_numpy()
    t0, t1 = _epoch(nodes["t0"]), _epoch(nodes["t1"])
    until = np.where(rep, _epoch(nodes["until"].fillna(nodes["t1"])), 0)
    if rep.any():
        t0, t1, until = (np.where(rep, _wall_seconds(x, view.zone), x) for x in (t0, t1, until))
    cyc = np.where(rep, nodes["cycle"].fillna(pd.Timedelta(0)) // pd.Timedelta(seconds=1), 0)
    return t0, t1, rep, cyc, until


def _wall_seconds(epoch_s: np.ndarray, zone: str) -> np.ndarray:
    """Epoch seconds of instants on the wall clock of ``zone``."""
    return wall_clock(np.asarray(epoch_s, dtype=np.int64) * 10**9, zone) // 10**9


def _when(t: pd.Timestamp, view: PublishedView) -> str:
    """An instant as the report writes times: on the clock of the release's zone, named."""
    return f"{pd.Timestamp(t).tz_convert(view.zone):%Y-%m-%d %H:%M} {view.zone}"


def _draw_order(nodes: pd.DataFrame) -> np.ndarray:
    """Coarse first, fine on top: by resolution, then longest slot first (a cell published both for
    3 h and for its whole day shows the 3 h node above the day's)."""
    span = (nodes["t1"] - nodes["t0"]) // pd.Timedelta(seconds=1)
    return np.lexsort((-span.to_numpy(dtype=np.int64), nodes["res"].to_numpy()))


def _tips(view: PublishedView) -> list[str]:
    """The hover text of every node, in the nodes' order (one dict per row: a Series per row cost
    most of a report's time at 60,000 published rows)."""
    return [_tip(r, view) for r in row_dicts(view.nodes)]


def _panel(view: PublishedView, proj: _Projection, fills: list[str], cls: str, base: str,
           hatch: np.ndarray | None, svg_id: str, tips: list[str]) -> str:
    nodes = view.nodes
    cells = nodes["cell"].tolist()
    t0, t1, rep, cyc, until = _node_times(view)
    w0, w1 = _epoch(view.withheld["t0"]), _epoch(view.withheld["t1"])
    wh = "".join(
        f'<path class="withheld" d="{proj.path(c)}" data-t0="{a}" data-t1="{b}" '
        f'data-tip="{_E(c)} · {_E(lab)}&#10;withheld (not published)"/>'
        for c, a, b, lab in zip(view.withheld["cell"], w0, w1, view.withheld["slot_label"]))
    order = _draw_order(nodes)
    shapes, hatches = [], []
    for i in order:
        d = proj.path(cells[i])
        when = f' data-t0="{t0[i]}" data-t1="{t1[i]}"' + (f' data-c="{cyc[i]}" data-u="{until[i]}"' if rep[i] else "")
        shapes.append(f'<path class="{cls}" d="{d}" fill="{fills[i]}" data-i="{i}" data-cell="{_E(cells[i])}"'
                      f'{when} data-tip="{_E(tips[i])}"/>')
        if hatch is not None and hatch[i]:
            hatches.append(f'<path class="hatch" d="{d}"{when}/>')
    defs = ('<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
            'patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="#fff" '
            'stroke-width="2"/></pattern></defs>') if hatch is not None else ""
    return (f'<svg id="{svg_id}" class="map" viewBox="0 0 {proj.width:.0f} {proj.height:.0f}" '
            f'role="img">{defs}{base}<g>{wh}</g><g>{"".join(shapes)}</g><g>{"".join(hatches)}</g></svg>')


def _finest(view: PublishedView) -> list[str]:
    """The published cells at the finest published resolution: the map opens on their extent."""
    n = view.nodes
    return sorted(set(n.loc[n["res"] == n["res"].max(), "cell"]))


def _street_nodes(view: PublishedView, proj: _Projection, fills: tuple[list[str], list[str]],
                  full: float, tips: list[str]) -> list[dict[str, Any]]:
    """The street map's nodes in drawing order (coarse first): ring, colours (``fills``: by mean,
    by half-width), opacity fading with the half-width (0.8 at 0 down to 0.25 from half the
    range), dashed where uncertain."""
    nodes = view.nodes
    t0, t1, _, cyc, until = _node_times(view)
    b = np.nan_to_num(nodes["bound"].to_numpy(float), nan=np.inf)
    opacity = 0.8 - 0.55 * np.minimum(1.0, b / (0.5 * full))
    out = []
    cells = nodes["cell"].tolist()
    for i in _draw_order(nodes):
        out.append({"ring": np.round(proj.rings[cells[i]], 6).tolist(), "fill": fills[0][i], "ufill": fills[1][i],
                    "opacity": round(float(opacity[i]), 3), "dashed": bool(b[i] > 0.25 * full),
                    "tip": tips[i], "i": int(i), "t0": int(t0[i]), "t1": int(t1[i]),
                    "c": int(cyc[i]), "u": int(until[i])})
    return out


def _map_section(view: PublishedView, basemap: dict[str, Any] | None, tiles: str | None = DEFAULT_TILES,
                 note: str = "") -> str:
    nodes = view.nodes
    if not len(nodes):
        return '<section id="map-section"><h2>Map</h2><p>No cell was published.</p></section>'
    proj = _Projection(sorted(set(nodes["cell"]) | set(view.withheld["cell"])), _finest(view))
    base = _basemap_paths(basemap, proj)
    m = nodes["mean"].to_numpy(float)
    lo, hi, ticks = nice_ticks(np.nanmin(m), np.nanmax(m))
    fills = _ramp(_VIRIDIS, (m - lo) / (hi - lo))
    b = nodes["bound"].to_numpy(float)
    blo, bhi, bticks = nice_ticks(0.0, np.nanmax(b) if np.isfinite(b).any() else 1.0)
    ufills = _ramp(_UNCERT, (b - blo) / (bhi - blo))
    full = view.span if view.span is not None else (hi - lo)
    hatch = np.nan_to_num(b, nan=np.inf) > 0.25 * full
    tips = _tips(view)
    left = _panel(view, proj, fills, "node", base, hatch, "map-value", tips)
    right = _panel(view, proj, ufills, "unode", base, None, "map-uncertainty", tips)
    street = street_map_html(_street_nodes(view, proj, (fills, ufills), full, tips),
                             [proj.rings[c] for c in _finest(view)], tiles=tiles)
    conf = _conf(view)
    cut = "" if view.steps_cut is None else (
        f" The time control stops at {_when(view.steps_cut, view)}: some slots recur every day over a longer "
        "period than it can step through; after that the same hours repeat, and every published cell is in the "
        "table below.")
    return f"""<section id="map-section"><h2>Map of the published values</h2>
<p>Each coloured hexagon is one published cell for the time slot chosen below; hover (or tap) it for
its value, interval and resolution. The street map opens on the cells of the finest published
resolution; drag and zoom it to place them. Its colour is the mean; a faded hexagon with a dashed
outline is uncertain (its {conf} interval is wider than ± a quarter of the range of values).{cut}{_E(note)}</p>
<div class="controls"><button type="button" id="prev" aria-label="previous slot">◀</button>
<input type="range" id="step" min="0" max="{len(view.steps) - 1}" value="0" aria-label="time slot">
<button type="button" id="next" aria-label="next slot">▶</button>
<select id="step-pick" aria-label="jump to a time slot"></select>
<b id="step-label"></b> <span id="step-count"></span></div>
{street}<div class="street-legend" data-show="mean">{_legend(_VIRIDIS, lo, hi, ticks, f"mean{view.label}", "gs")}</div>
<div class="street-legend" data-show="bound" hidden>{_legend(_UNCERT, blo, bhi, bticks, f"± half-width of the {conf} interval{view.label}", "gsu")}</div>
<p>The same cells side by side, value and uncertainty (hatched: uncertain; grey outlines: cells with
data that were withheld):</p>
<div class="panels"><figure><figcaption>Mean{_E(view.label)}</figcaption>{left}
{_legend(_VIRIDIS, lo, hi, ticks, f"mean{view.label}", "gv")}</figure>
<figure><figcaption>Uncertainty: ± half-width of the {conf} interval{_E(view.label)}</figcaption>{right}
{_legend(_UNCERT, blo, bhi, bticks, f"±{view.suffix}", "gu")}</figure></div>
<div id="tip" role="tooltip" hidden></div></section>"""


# ----------------------------------------------------------------------------- frontier

def _frontier_section(view: PublishedView, summary: dict[str, Any], frontier: dict[str, Any] | None) -> str:
    if not frontier or not frontier.get("tau"):
        return ""
    tau = np.asarray(frontier["tau"], float)
    cov = np.asarray(frontier.get("coverage", frontier.get("released", [])), float)
    ok = np.isfinite(tau) & (tau > 0) & np.isfinite(cov)
    tau, cov = tau[ok], cov[ok]
    if len(tau) < 2:
        return ""
    W, H, L, B = 560.0, 300.0, 60.0, 40.0
    lx = np.log10(tau)
    x = L + (lx - lx.min()) / max(np.ptp(lx), 1e-12) * (W - L - 20)
    cmax = max(cov.max(), 1.0)
    y = H - B - cov / cmax * (H - B - 20)
    pts = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(x, y))
    dots = "".join(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3"><title>± {_E(fmt_number(t))}{_E(view.suffix)}: '
                   f'{int(c)} cells</title></circle>' for a, b, t, c in zip(x, y, tau, cov))
    chosen = summary.get("target")
    mark = ""
    if chosen is not None and chosen > 0:
        cx = L + (math.log10(chosen) - lx.min()) / max(np.ptp(lx), 1e-12) * (W - L - 20)
        mark = (f'<line class="chosen" x1="{cx:.1f}" x2="{cx:.1f}" y1="20" y2="{H - B}"/>'
                f'<text x="{cx + 4:.1f}" y="32">chosen τ = {_E(fmt_number(chosen))}{_E(view.suffix)}</text>')
    xt = "".join(f'<text x="{a:.1f}" y="{H - B + 16}" text-anchor="middle">{_E(fmt_number(t, 2))}</text>'
                 for a, t in list(zip(x, tau))[::3])
    yt = "".join(f'<text x="{L - 6}" y="{H - B - c / cmax * (H - B - 20) + 4:.1f}" text-anchor="end">'
                 f'{int(c)}</text>' for c in np.unique(np.linspace(0, cmax, 5).round()))
    conf = _conf(view)
    crit = ("noise only" if summary.get("criterion", "noise") == "noise"
            else "clipping bias plus noise")
    return f"""<section id="frontier"><h2>Coverage against accuracy</h2>
<p><b>τ (tau) is the accuracy target:</b> a cell is published only if its mean is within
± τ{_E(view.suffix)} of the true mean with {conf} probability ({crit}); a smaller τ gives more accurate
values but fewer published cells.</p>
<svg viewBox="0 0 {W:.0f} {H:.0f}" class="chart" role="img">
<line x1="{L}" y1="{H - B}" x2="{W - 10}" y2="{H - B}" class="axis"/><line x1="{L}" y1="20" x2="{L}"
 y2="{H - B}" class="axis"/>{xt}{yt}
<text x="{(W + L) / 2:.0f}" y="{H - 6}" text-anchor="middle">τ{_E(view.label)} (log scale)</text>
<text x="14" y="{(H - B) / 2:.0f}" transform="rotate(-90 14 {(H - B) / 2:.0f})" text-anchor="middle">cells published</text>
{mark}<polyline points="{pts}" class="line"/>{dots}</svg>
<p class="note">Computed from public information before any noise was drawn; the chosen τ is
{_E(_chosen_by(summary, frontier))}.</p></section>"""


def _chosen_by(summary: dict[str, Any], frontier: dict[str, Any]) -> str:
    knee, chosen = frontier.get("knee"), summary.get("target")
    if knee is not None and chosen is not None and math.isclose(float(knee), float(chosen), rel_tol=1e-9):
        return "the knee of this curve, chosen by a fixed rule from public counts (methods appendix)"
    return "the target given by the data holder"


# ----------------------------------------------------------------------------- table

def _table_columns(view: PublishedView) -> list[tuple[str, str, Any]]:
    """(header, kind, getter) of the table's columns that the release published."""
    n, u = view.nodes.columns, view.label
    cols: list[tuple[str, str, Any]] = [
        ("cell", "s", lambda r: r["cell"]), ("resolution", "n", lambda r: r["res"]),
        ("time slot", "s", lambda r: r["slot_label"]),
        (f"mean{u}", "n", lambda r: r["mean"]), (f"± ({_conf(view)})", "n", lambda r: r["bound"]),
        ("interval", "s", lambda r: f"{fmt_number(r['lo'])} – {fmt_number(r['hi'])}")]
    if "variance" in n:
        sq = _sq(view)
        cols.append((f"variance{sq}", "n", lambda r: r["variance"] if (
            "variance_released" not in n or _is_true(r["variance_released"])) else np.nan))
        if "variance_error_bound" in n:
            cols.append(("± variance", "n", lambda r: r["variance_error_bound"] if (
                "variance_released" not in n or _is_true(r["variance_released"])) else np.nan))
    if "variance_withheld_reason" in n:
        cols.append(("variance withheld because", "s", lambda r: r["variance_withheld_reason"]
                     if isinstance(r["variance_withheld_reason"], str) else ""))
    for c, lab in (("n_users", "users (public)"), ("n_records", "records (public)"),
                   ("noisy_count", "records (noisy)"), ("method", "estimate")):
        if c in n:
            cols.append((lab, "n" if c != "method" else "s", lambda r, c=c: r[c]))
    return cols


def _as_number(v: Any) -> float:
    """``v`` as a float, NaN where it is not a number (what ``pd.to_numeric(errors="coerce")`` gives
    for one value)."""
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return float("nan")
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def _table_section(view: PublishedView, note: str = "") -> str:
    cols = _table_columns(view)
    head = "".join(f'<th data-k="{k}" tabindex="0">{_E(h)}</th>' for h, k, _ in cols)
    order = view.nodes.sort_values(["t0", "cell"]).index
    rows = []
    # one dict per row (a Series per row and per cell cost a minute at 60,000 published rows)
    for i, r in zip(order, row_dicts(view.nodes.loc[order])):
        cells = []
        for _h, k, get in cols:
            v = get(r)
            if k == "n":
                fv = _as_number(v)
                txt = fmt_number(fv) if pd.notna(fv) else "–"
                cells.append(f'<td data-v="{"" if pd.isna(fv) else repr(float(fv))}">{_E(txt)}</td>')
            else:
                cells.append(f"<td>{_E(str(v) if pd.notna(v) else '')}</td>")
        rows.append(f'<tr data-i="{i}">{"".join(cells)}</tr>')
    return (f'<section id="values"><h2>Published values</h2><p>Click a column to sort, a row to show '
            f'its hexagon on the map.{_E(note)} <input type="search" id="find" placeholder="find a cell id" '
            f'aria-label="find a cell"></p><div class="scroll"><table id="table"><thead><tr>{head}</tr>'
            f'</thead><tbody>{"".join(rows)}</tbody></table></div></section>')


# ----------------------------------------------------------------------------- methods appendix

_TERMS = [
    ("ε (epsilon)", "The privacy budget: how much one user's data can change what the release shows "
                    "(smaller is more private); summed over every statistic published."),
    ("user-level differential privacy", "The guarantee holds for everything one user contributed, not "
                                        "for each record separately."),
    ("τ (tau)", "The accuracy target: the largest ± (at the stated probability) a published mean may have."),
    ("H3", "Uber's hierarchical grid of hexagons; a resolution number sets their size (7: about 2.8 km "
           "across, each step coarser is about 2.6 times wider)."),
    ("public-occupancy model", "Who holds records in which grid is treated as public (for data whose "
                               "occupancy is public anyway, such as broadcast vehicle positions); only the "
                               "values are protected. From Rameshwar & Tandon, “On Improving the Composition "
                               "Privacy Loss in Differential Privacy for Fixed Estimation Error” (arXiv "
                               "2405.06261)."),
    ("knee rule", "Without a target τ, dpopt takes the knee of the coverage-against-τ curve: the τ farthest "
                  "from the straight line joining the curve's ends (τ on a log scale; Satopää et al. 2011); "
                  "the exact rule is the knee_rule field below."),
    ("CKS sampler", "Exact discrete Laplace and Gaussian noise of Canonne, Kamath & Steinke, “The Discrete "
                    "Gaussian for Differential Privacy” (NeurIPS 2020), fed by the OS CSPRNG: safe against "
                    "floating-point attacks."),
    ("contribution bounding", "Each user's values are clamped to the public range and its records capped in "
                              "number, so that one user's influence (the sensitivity) is bounded before noise "
                              "is added."),
]


#: the multi-resolution release in words (models/hierarchy.md §1–§10, §13)
_MULTIRES = ("multi-resolution release", (
    "The listed cells and slots are grouped into a public hierarchy: each H3 cell's parents at coarser "
    "resolutions, crossed with longer time slots (for example 1 h, 3 h, a day, the whole period). Every "
    "level is measured separately with its own share of the budget: noisy record count, sum and sum of "
    "squares of the bounded records (each user keeps at most k cells and c records per cell). A "
    "generalised least squares fit over the tree makes each node consistent with its children and "
    "parent; empirical-Bayes shrinkage pulls a noisy node toward its parent by as much as the noise "
    "warrants. Which nodes are published is decided from the noisy measurements alone; each listed "
    "finest cell and slot is answered by one published node (answers.csv). What the interval covers: the ± of mean_direct covers the mean of the node's "
    "bounded records (those the bounding kept) with the stated probability, up to a normal/Laplace "
    "approximation of the combined noise; the published mean's interval contains it. Both also carry "
    "an allowance for the bias of dropping records, calibrated on benchmarks: coverage of the mean of "
    "all records is measured (at least 93 % in the benchmark settings), not proven. The variance is "
    "published only where its interval is narrower than its whole range."))


#: the engine's release in words (models/engine.md §1–§5)
_ENGINE = ("optimised release (the engine)", (
    "Each person keeps at most T of their records in the listed cells and slots (a sample spread over the "
    "places and times they visited in proportion) and values are counted between a lower clamp and an "
    "upper clamp B inside the declared range; T and the two clamps are chosen from the data under "
    "differential privacy (summary.json record_histogram, clamp_histogram and clamp_low_histogram). The "
    "release then measures a few place x time marginals (for "
    "example each cell over the whole period, the map for each hour, the map for each day): noisy record "
    "counts and sums of the same kept records. Which marginals, and with what share of the budget, is "
    "decided by an optimisation model (a linear/mixed-integer program solved with HiGHS) from a small first "
    "measurement, so that the predicted error of the listed cells and slots is least. One crossed "
    "random-effects model (an overall mean + place effects + time effects + the measured interactions) is "
    "fitted to the measurements alone, and every listed cell and slot is answered by its own row "
    "(answers.csv). Its interval is for that cell and slot's own mean: it holds the model's uncertainty "
    "and the variation the model does not explain. Means are of the clamped values: where values beyond "
    "the clamps are common, a mean moves toward the clamp by up to their distance to it, which the "
    "intervals leave out; variances are not published. Coverage of the 95 % intervals is "
    "measured on benchmark data sets (median over releases 0.97 to 1.00; a few releases of one synthetic "
    "set below 0.90), not proven."))


_PLACE = ("place release", (
    "Where a value was measured matters more than when: each H3 cell of the finest resolution is "
    "measured over the whole period, and so is the whole map; every listed cell and slot is answered by "
    "its cell, or by the map where the budget was too small for cells or the cell too thin "
    "(answers.csv). Each person keeps at most T of their records (spread over the places they visited "
    "in proportion) and values are counted up to a clamp B no larger than the declared bound; T and B "
    "are chosen from the data under differential privacy. A cell's published mean borrows from the map "
    "where its own measurement is noisy (hierarchical empirical Bayes). Means are of values clamped at "
    "B, so low where values above B are common (by up to their distance to B, which the intervals leave "
    "out); variances are therefore not published when B "
    "is below the declared bound. The interval of each mean is conservative: in the benchmark settings "
    "the 95 % intervals covered the truth of at least 99 % of the published nodes, and 90 % intervals "
    "at least 99 % (measured on two bus data sets, not proven). It is the node's interval, not the listed "
    "cell and slot's: a slot's own mean also differs from its cell's mean over the period by how much the "
    "hour or the day moves the value, which the interval does not hold (where they move it, far fewer "
    "than 95 % of the slots' own means lie inside)."))


def _field_text(value: Any) -> str:
    """A summary.json field as summary.json writes it: a number for people, lists and mappings as
    JSON (null, double quotes), not as Python's repr (None, single quotes)."""
    if isinstance(value, float):
        return fmt_number(value)
    if isinstance(value, (dict, list, tuple)):
        import json

        return json.dumps(value, allow_nan=True, default=str)
    return str(value)


def _methods_section(summary: dict[str, Any], frontier: dict[str, Any] | None) -> str:
    shape = [_ENGINE] if summary.get("shape") == "optimised marginals" else [_PLACE] if summary.get("shape") == "place" \
        else [_MULTIRES] if summary.get("resolution") == "adaptive" else []
    terms = "".join(f"<dt>{_E(t)}</dt><dd>{_E(d)}</dd>" for t, d in shape + _TERMS)
    flat = {k: v for k, v in summary.items() if k != "frontier" and v is not None}
    if frontier and frontier.get("knee_rule"):
        flat["knee_rule"] = frontier["knee_rule"]
    rows = "".join(f"<tr><th>{_E(str(k))}</th><td>{_E(_field_text(v))}</td></tr>" for k, v in flat.items())
    return (f'<section id="methods"><h2>Methods appendix</h2><details><summary>Terms, papers and every '
            f'field of summary.json</summary><dl>{terms}</dl><table class="kv">{rows}</table></details>'
            "</section>")


# ----------------------------------------------------------------------------- page

_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#222;margin:0;background:#fafafa}
main{max-width:1120px;margin:0 auto;padding:18px 22px 60px}
h1{font-size:1.5em;margin:.3em 0}h2{font-size:1.2em;margin:1.4em 0 .4em;border-bottom:1px solid #ddd}
section{background:#fff;padding:4px 16px 12px;border-radius:6px;box-shadow:0 1px 2px #0001;margin-top:14px}
#summary li{margin:.35em 0}.note{color:#555;font-size:.92em}code{background:#f1f1f1;padding:0 3px}
.panels{display:flex;flex-wrap:wrap;gap:12px}.panels figure{margin:0;flex:1 1 440px;min-width:320px}
figcaption{font-weight:600;margin:4px 0}
svg.map{width:100%;height:auto;max-height:620px;background:#f6f6f4;border:1px solid #e2e2e2}
svg.map path.node,svg.map path.unode{stroke:#333;stroke-width:.6;cursor:pointer}
svg.map path.withheld{fill:none;stroke:#c9c9c9;stroke-width:.5}
svg.map path.hatch{fill:url(#hatch);pointer-events:none;stroke:none}
svg.map .basemap path{fill:none;stroke:#b8b8b8;stroke-width:.7}
svg.map path.hl{stroke:#e00;stroke-width:2.5}
.legend text{font-size:11px;text-anchor:middle}.legend .lt{text-anchor:start;font-weight:600}
.legend line{stroke:#333}
.controls{display:flex;align-items:center;gap:8px;margin:6px 0 10px}.controls input{flex:0 1 360px}
#tip{position:fixed;z-index:9;background:#222;color:#fff;padding:6px 9px;border-radius:4px;
font-size:13px;white-space:pre-line;pointer-events:none;max-width:420px}
.chart{width:100%;max-width:640px;height:auto}.chart text{font-size:11px}.chart .axis{stroke:#444}
.chart .line{fill:none;stroke:#2c728e;stroke-width:2}.chart circle{fill:#2c728e}
.chart .chosen{stroke:#d94801;stroke-dasharray:4 3}
.scroll{max-height:480px;overflow:auto}table{border-collapse:collapse;font-size:13px}
#table th{position:sticky;top:0;background:#eee;cursor:pointer;user-select:none}
th,td{padding:3px 8px;border-bottom:1px solid #eee;text-align:left}td{white-space:nowrap}td[data-v]{text-align:right}
#table tbody tr:hover{background:#f3f7ff;cursor:pointer}
th.asc::after{content:" ▲"}th.desc::after{content:" ▼"}table.kv th{font-weight:500;color:#444}
dt{font-weight:600}dd{margin:0 0 .5em 1em}
#methods table.kv{table-layout:fixed;width:100%}#methods table.kv th{width:14em}
#methods td,#methods th,#methods dd{white-space:normal;overflow-wrap:anywhere}
#street-map{height:500px;border:1px solid #d8d8d8;border-radius:4px;background:#f2efe9}
#street-map.plain{background:#f7f7f5}#street-map .grat{color:#555;font-size:11px;white-space:nowrap}
#street-map .grat-lat span{position:absolute;right:4px;top:0}
#street-map .coords{background:#fffd;padding:1px 6px;font-size:12px;border-radius:3px}
.leaflet-tooltip .street-tip{white-space:pre-line;max-width:420px}
#street-map .colour-by{background:#fff;padding:4px 8px;border-radius:4px;box-shadow:0 1px 4px #0003;font-size:13px}
#street-map .colour-by label{display:block;cursor:pointer}
"""

_JS = """
(function(){'use strict';
var steps=JSON.parse(document.getElementById('steps-data').textContent);
var range=document.getElementById('step');if(!range){return;}
var label=document.getElementById('step-label'),count=document.getElementById('step-count');
var tip=document.getElementById('tip'),pick=document.getElementById('step-pick');
steps.forEach(function(s,j){var o=document.createElement('option');o.value=String(j);o.textContent=s.label;pick.appendChild(o);});
pick.addEventListener('change',function(){show(+pick.value);});
var shapes=Array.prototype.slice.call(document.querySelectorAll('svg.map [data-t0]'));
function show(k){k=Math.max(0,Math.min(steps.length-1,k));var t=steps[k].t,w=steps[k].w,n=0;
 shapes.forEach(function(el){var a=+el.dataset.t0,b=+el.dataset.t1,c=+(el.dataset.c||0);
  var on=c?(a<=w&&w<+el.dataset.u&&((w-a)%c)<b-a):(a<=t&&t<b);
  el.style.display=on?'':'none';if(on&&el.classList.contains('node')){n++;}});
 range.value=String(k);pick.value=String(k);label.textContent=steps[k].label;
 count.textContent='('+n+' published cell'+(n===1?'':'s')+')';
 document.dispatchEvent(new CustomEvent('dpopt-step',{detail:{t:t,w:w}}));}
range.addEventListener('input',function(){show(+range.value);});
document.getElementById('prev').addEventListener('click',function(){show(+range.value-1);});
document.getElementById('next').addEventListener('click',function(){show(+range.value+1);});
function twins(i){return document.querySelectorAll('svg.map path[data-i="'+i+'"]');}
function mark(i,on){twins(i).forEach(function(el){el.classList.toggle('hl',on);});}
document.querySelectorAll('svg.map').forEach(function(svg){
 svg.addEventListener('mouseover',function(e){var el=e.target;if(!el.dataset||!el.dataset.tip){return;}
  tip.textContent=el.dataset.tip;tip.hidden=false;if(el.dataset.i!==undefined){mark(el.dataset.i,true);}});
 svg.addEventListener('mousemove',function(e){tip.style.left=(e.clientX+14)+'px';tip.style.top=(e.clientY+14)+'px';});
 svg.addEventListener('mouseout',function(e){var el=e.target;tip.hidden=true;
  if(el.dataset&&el.dataset.i!==undefined){mark(el.dataset.i,false);}});});
var table=document.getElementById('table');
if(table){var body=table.tBodies[0];
 table.querySelectorAll('th').forEach(function(th,c){th.addEventListener('click',function(){
  var asc=!th.classList.contains('asc');table.querySelectorAll('th').forEach(function(h){h.classList.remove('asc','desc');});
  th.classList.add(asc?'asc':'desc');var num=th.dataset.k==='n';
  var rows=Array.prototype.slice.call(body.rows);
  rows.sort(function(a,b){var x=a.cells[c],y=b.cells[c],r;
   if(num){var p=x.dataset.v===''?Infinity:+x.dataset.v,q=y.dataset.v===''?Infinity:+y.dataset.v;r=p-q;}
   else{r=x.textContent.localeCompare(y.textContent);}return asc?r:-r;});
  rows.forEach(function(r){body.appendChild(r);});});});
 body.addEventListener('click',function(e){var tr=e.target.closest('tr');if(!tr){return;}
  var el=document.querySelector('svg.map path.node[data-i="'+tr.dataset.i+'"]');if(!el){return;}
  var t0=+el.dataset.t0,rc=+(el.dataset.c||0),k=0;steps.forEach(function(s,j){if((rc?s.w:s.t)<=t0){k=j;}});show(k);
  document.querySelectorAll('svg.map path.hl').forEach(function(p){p.classList.remove('hl');});mark(tr.dataset.i,true);
  document.dispatchEvent(new CustomEvent('dpopt-focus',{detail:+tr.dataset.i}));
  document.getElementById('map-section').scrollIntoView({behavior:'smooth'});});
 var find=document.getElementById('find');find.addEventListener('input',function(){var q=find.value.trim().toLowerCase();
  Array.prototype.forEach.call(body.rows,function(r){r.hidden=q!==''&&r.cells[0].textContent.toLowerCase().indexOf(q)<0;});});}
show(steps.length?steps[0].start:0);
})();
"""


def _steps_json(view: PublishedView) -> str:
    import json

    ts = [int(v) for v in _epoch(pd.Series(list(view.steps), dtype=object))] if view.steps else []
    ws = [int(v) for v in _wall_seconds(np.asarray(ts, dtype=np.int64), view.zone)] if ts else []
    local = [pd.to_datetime(pd.Series(list(x), dtype=object), utc=True).dt.tz_convert(view.zone)
             for x in (view.steps, view.step_ends)]
    labels = list(slot_labels(local[0], local[1])) if view.steps else []
    counts = active_counts(view.nodes, view.steps, view.zone)
    start = int(np.argmax(counts)) if counts.size else 0
    data = [{"t": t, "w": w, "label": lab, "start": start} for t, w, lab in zip(ts, ws, labels)]
    return json.dumps(data).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


#: the most published nodes the page draws (on both maps) and lists (in its table). A page-size
#: limit, not a property of the data: 10,000 hexagons make a page of about 18 MB that a browser
#: opens; the 128,474 nodes of a release of 2·10^7 records made 228 MB and took 1.7 GiB to write.
#: Beyond it the page draws and lists the first MAX_DRAWN nodes in time order and says so; every
#: node is in release.csv, release.geojson and release.parquet
MAX_DRAWN = 10_000


def _drawn(view: PublishedView) -> tuple[PublishedView, str]:
    """(the view the maps and the table draw, the sentence that says what was left out): the whole
    view up to :data:`MAX_DRAWN` nodes, else its first MAX_DRAWN nodes by (start, cell) with the
    time control ending at the last of them."""
    from dataclasses import replace

    nodes = view.nodes
    if len(nodes) <= MAX_DRAWN:
        return view, ""
    keep = nodes.sort_values(["t0", "cell"], kind="stable").index[:MAX_DRAWN]
    drawn = nodes.loc[keep].reset_index(drop=True)
    span = drawn["t1"] - drawn["t0"]
    end = drawn.loc[(span == span.min()).to_numpy(), "t1"].max()  # the finest drawn slots' last end
    steps = [(a, b) for a, b in zip(view.steps, view.step_ends or view.steps) if a < end]
    if steps and len(steps) < len(view.steps):
        view = replace(view, steps=tuple(a for a, _ in steps), step_ends=tuple(b for _, b in steps)
                       if view.step_ends else (), steps_cut=None)
    note = (f" This page draws and lists the first {MAX_DRAWN:,} of the {len(nodes):,} published nodes in time "
            f"order (its finest slots up to {_when(end, view)}): a page of all of them would be too large for a browser. "
            "Every node is in release.csv, release.geojson and release.parquet.")
    return replace(view, nodes=drawn), note


def render_html(table: pd.DataFrame, summary: dict[str, Any], *, frontier: dict[str, Any] | None = None,
                basemap: dict[str, Any] | None = None, unit: str | None = None,
                title: str | None = None, tiles: str | None = DEFAULT_TILES,
                view: PublishedView | None = None) -> str:
    """The report page as a string (see the module docstring).

    Parameters
    ----------
    table : release.csv as published (either privacy model; withheld rows allowed).
    summary : summary.json as a dict; ``summary["frontier"]`` is used when ``frontier`` is None.
    frontier : the coverage–accuracy frontier (``tau``, ``coverage``, ``knee``, ``knee_rule``).
    basemap : optional GeoJSON FeatureCollection (lines/polygons, [lng, lat]) drawn under the
        hexagons of the side-by-side panels; nothing is ever fetched for them.
    unit : unit of the values (else ``summary["unit"]``, else "units of the value").
    title : the page's heading (default: the number of published cells).
    tiles : the street map's tile URL template (``{z}``, ``{x}``, ``{y}``; default OpenStreetMap's,
        :data:`DEFAULT_TILES`), fetched by the viewer's browser only; e.g.
        ``"http://127.0.0.1:8080/{z}/{x}/{y}.png"`` for a local tile server, or None for no street
        map (a plain background with coordinates and a scale bar, as when the browser is offline).
    view : :func:`published_view` of the same ``table``, ``summary`` and ``unit``, where the caller
        has it already (the folder writer builds it once for the page and map.png).
    """
    if view is None:
        view = published_view(table, summary, unit=unit)
    if frontier is None:
        frontier = summary.get("frontier")
    n = released_count(summary)
    head = title or f"Differentially private release: {len(view.nodes):,} published cells"
    if n is not None and n != len(view.nodes):
        head += f" (summary.json says {n:,})"
    drawn, note = _drawn(view)
    body = "".join([
        _summary_section(view, summary, frontier), _map_section(drawn, basemap, tiles, note),
        _frontier_section(view, summary, frontier), _table_section(drawn, note),
        _methods_section(summary, frontier)])
    css, js = leaflet_assets()
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            f"<title>{_E(head)}</title><style>{css}</style><style>{_CSS}</style></head><body><main>"
            f"<h1>{_E(head)}</h1>{body}</main>"
            f'<script type="application/json" id="steps-data">{_steps_json(drawn)}</script>'
            f"<script>{js}</script><script>{STREET_JS}</script><script>{_JS}</script></body></html>\n")


def write_html_report(path: str | Path, table: pd.DataFrame, summary: dict[str, Any], *,
                      frontier: dict[str, Any] | None = None, basemap: dict[str, Any] | None = None,
                      unit: str | None = None, tiles: str | None = DEFAULT_TILES,
                      view: PublishedView | None = None) -> Path:
    """Write :func:`render_html` to ``path`` (UTF-8; a directory gets ``report.html``) and return
    the file's path. Atomic: written beside the target, then renamed."""
    import os
    import tempfile

    p = Path(path)
    if p.is_dir():
        p = p / "report.html"
    text = render_html(table, summary, frontier=frontier, basemap=basemap, unit=unit, tiles=tiles, view=view)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".report-", suffix=".html")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, p)
    return p
