"""report.html as text: what the page says, escaping, units, both privacy models."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from dpopt._validation import DpoptInputError
from dpopt.writers._published import fmt_number, nice_ticks, published_view
from dpopt.writers.html import DEFAULT_TILES, render_html

from .conftest import load, multires


def _section(page: str, sid: str) -> str:
    m = re.search(rf'<section id="{sid}">(.*?)</section>', page, re.S)
    assert m, sid
    return m.group(1)


def test_every_released_cell_is_a_node_and_withheld_ones_are_not(published):
    _name, table, summary = published
    page = render_html(table, summary, unit="km/h")
    rel = table[table["released"].astype(bool)]
    nodes = re.findall(r'<path class="node"[^>]*data-cell="([0-9a-f]+)"', page)
    assert sorted(nodes) == sorted(rel["cell"])
    n_with = len(table) - len(rel)
    assert len(re.findall(r'<path class="withheld"', page)) == 2 * n_with  # value + uncertainty maps


def test_hostile_text_is_escaped():
    table, summary = multires()
    summary = dict(summary, noise="<script>alert(1)</script>")
    page = render_html(table, summary)
    assert "<img" not in page and "<script>alert" not in page and "pooled <b>" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "pooled &lt;b&gt;" in page


def test_summary_never_prints_missing_fields_and_names_units(published):
    _name, table, summary = published
    text = _section(render_html(table, summary, unit="km/h"), "summary")
    assert "None" not in text and "nan" not in text.lower().replace("nanosecond", "")
    assert "km/h" in text
    eps = summary["epsilon_total"]
    assert f"ε = {fmt_number(eps)}" in text
    assert fmt_number(eps) == "10"  # 9.99999999627 (user model) reads as 10, not 10.00


def test_unit_fallback_is_said_once_not_after_every_number():
    table, summary = load("user")
    page = render_html(table, summary)
    assert "km/h" not in page
    assert "No unit was given" in page
    assert re.search(r"mean [\d.,]+ ± [\d.,]+ \(95 % interval", page)
    page = render_html(table, dict(summary, unit="m/s"))
    assert "± 120 m/s" in page


def test_accuracy_sentence_is_the_median_bound_and_flags_whole_range_intervals():
    table, summary = load("user")
    text = _section(render_html(table, summary, unit="km/h"), "summary")
    med = float(np.median(table["mean_error_bound"]))
    assert f"± {fmt_number(med)} km/h</b>" in text
    whole = int(((table["mean"] - table["mean_error_bound"] <= 0)
                 & (table["mean"] + table["mean_error_bound"] >= summary["bound"])).sum())
    assert f"<b>{whole:,}</b> cell(s) have an interval as wide as that whole range" in text


def test_withheld_reason_and_variance_withholding_are_stated():
    table, summary = load("occupancy")
    text = _section(render_html(table, summary, unit="km/h"), "summary")
    assert f"<b>{summary['withheld_grids']:,}</b> cells were withheld" in text
    assert f"± {fmt_number(summary['target'])} km/h (the accuracy target)" in text
    t, s = multires()
    text = _section(render_html(t, s), "summary")
    n = int((~t["variance_released"].astype(bool)).sum())
    assert n == 2 and f"The variance of <b>{n}</b> published cell(s) was withheld" in text


def test_frontier_explains_tau_and_marks_the_chosen_target():
    table, summary = load("occupancy")
    page = render_html(table, summary, unit="km/h")
    fr = _section(page, "frontier")
    assert "τ (tau) is the accuracy target:" in fr
    assert f"chosen τ = {fmt_number(summary['target'])} km/h" in fr
    assert fr.count("<circle") == len(summary["frontier"]["tau"])
    assert 'id="frontier"' not in render_html(*load("user"))  # the user model has no frontier


@pytest.mark.parametrize("lo,hi", [(0.0, 51.3), (13.0, 13.0), (-2.5, 0.1), (1e-3, 7e-3), (0, 4291.7)])
def test_colour_scale_is_fitted_to_the_values(lo, hi):
    a, b, ticks = nice_ticks(lo, hi)
    assert a <= lo and b >= hi and ticks[0] == a and ticks[-1] == pytest.approx(b)
    width = max(hi - lo, 2.0)
    assert b - a <= 2.5 * width  # fitted, not a fixed 0..U scale


def test_mixed_resolutions_read_from_the_cell_ids_when_no_column():
    t, s = multires()
    view = published_view(t.drop(columns="h3_resolution"), s)
    assert sorted(set(view.nodes["res"])) == [6, 7]
    page = render_html(t, s)
    assert "H3 resolution 6 · 2015-09-06 20:00–22:00 UTC" in page


def test_table_must_be_release_csv():
    with pytest.raises(DpoptInputError, match="`table` must be release.csv"):
        render_html(pd.DataFrame({"x": [1]}), {})


@pytest.mark.parametrize("x,want", [(0, "0"), (10.0, "10"), (9.99999999627, "10"), (0.5, "0.5"),
                                    (17.571867, "17.6"), (4291.71, "4,290"), (1449, "1,449"),
                                    (0.000244140625, "0.000244"), (-12.72, "-12.7"), (2.5e7, "2.50e+07"),
                                    (None, "–"), (float("nan"), "–"), (float("inf"), "–"), ("x", "–")])
def test_fmt_number(x, want):
    assert fmt_number(x) == want


def _fetching_attributes(page: str) -> list[tuple[str, str]]:
    from html.parser import HTMLParser

    found: list[tuple[str, str]] = []

    class P(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.extend((tag, k) for k, _v in attrs if k in ("src", "href", "srcset", "action", "poster"))

    P().feed(page)
    return found


def test_page_is_self_contained_and_draws_a_given_basemap(published):
    _name, table, summary = published
    road = {"type": "FeatureCollection", "features": [
        {"type": "Feature", "geometry": {"type": "LineString",
                                         "coordinates": [[-97.76, 30.25], [-97.70, 30.30], [-97.66, 30.42]]}}]}
    page = render_html(table, summary, basemap=road, tiles=None)
    assert re.search(r'<g class="basemap"><path d="M[\d.]+,[\d.]+L[\d.]+,[\d.]+L[\d.]+,[\d.]+"/></g>', page)
    # nothing to fetch at view time: no external resource, no link, no import (Leaflet is inlined)
    assert _fetching_attributes(page) == []
    assert not re.search(r"""@import|url\(\s*['"]?(https?:)?//""", page)
    # the only addresses: SVG's namespace, comments and links in Leaflet's own code (never fetched)
    urls = set(re.findall(r"https?://[^\s\"'<>)\\]+", page))
    assert {u.split("/")[2] for u in urls} <= {"www.w3.org", "leafletjs.com", "bugs.chromium.org",
                                               "bugzilla.mozilla.org"}, urls
    assert "desfontain.es/blog/real-world-differential-privacy.html" in page  # a reference as text, not a link
    assert '<g class="basemap">' not in render_html(table, summary)
    # with the street map on, the tile template is the one address added (and its licence's link)
    added = set(re.findall(r"https?://[^\s\"'<>)\\]+", render_html(table, summary))) - urls
    assert added == {DEFAULT_TILES, "https://www.openstreetmap.org/copyright"} if len(
        table[table["released"].astype(bool)]) else added == set()


def test_recurring_slots_are_said_in_words():
    """Hour-of-day nodes (models/hierarchy.md §2): the resolution sentence says slots recur, each
    such row names its hours, "every day" and its span, and its shapes carry the cycle for the
    time control."""
    from .conftest import profile

    table, summary = profile()
    html = render_html(table, summary, unit="km/h")
    assert "recurring slots: the same hours of every day" in html
    assert html.count("08:00–09:00 UTC every day from 2015-09-06 until 2015-09-09 05:00 UTC") >= 2  # table + tips
    assert html.count('data-c="86400"') == 2 * 2  # two recurring nodes, on the value and the uncertainty map


def test_the_report_says_how_cells_were_chosen():
    """The multi-resolution private release publishes no single threshold (``selection_threshold``
    None) but names private selection in ``partitions``: the report must not claim a public list;
    with a list it says the list."""
    t, s = multires()
    private = {**s, "selection_threshold": None,
               "partitions": "private selection (shared public hash order; Laplace thresholding per level)"}
    text = _section(render_html(t, private), "summary")
    assert "selected privately" in text and "public list" not in text
    listed = {**s, "selection_threshold": None, "partitions": "public list (41 grids)"}
    text = _section(render_html(t, listed), "summary")
    assert "public list of partitions" in text and "selected privately" not in text


def test_privacy_item_says_what_epsilon_1_and_10_mean_with_a_reference():
    import math

    table, summary = load("user")
    text = _section(render_html(table, summary, tiles=None), "summary")
    # the odds factors are e^1 and e^10, written out for people
    assert f"about {math.e:.1f} at ε = 1" in text and f"about {round(math.exp(10), -3):,.0f} at ε = 10" in text
    assert "a strong guarantee" in text and "a weak one" in text
    assert "A list of real-world uses of differential privacy" in text


def test_a_release_larger_than_a_page_draws_its_first_nodes_in_time_order_and_says_so(published, monkeypatch):
    """Past MAX_DRAWN published nodes the maps draw and the table lists the first MAX_DRAWN by
    (start, cell), the time control ends at the last of them, and both sections say so; the
    summary still speaks of every node."""
    import dpopt.writers.html as H

    _name, table, summary = published
    full = render_html(table, summary, unit="km/h")
    n = len(re.findall(r'<path class="node"', full))
    monkeypatch.setattr(H, "MAX_DRAWN", n // 3)
    page = render_html(table, summary, unit="km/h")
    view = published_view(table, summary, unit="km/h")
    first = view.nodes.sort_values(["t0", "cell"], kind="stable").head(n // 3)
    drawn = re.findall(r'<path class="node"[^>]*data-cell="([0-9a-f]+)"', page)
    assert sorted(drawn) == sorted(first["cell"])
    rows = re.findall(r"<tr data-i=", _section(page, "values"))
    assert len(rows) == n // 3
    for sid in ("map-section", "values"):
        assert f"the first {n // 3:,} of the {n:,} published nodes in time order" in _section(page, sid)
    assert _section(page, "summary") == _section(full, "summary")
    steps = re.search(r'id="step" min="0" max="(\d+)"', page)
    assert int(steps.group(1)) <= int(re.search(r'id="step" min="0" max="(\d+)"', full).group(1))
    assert "published nodes in time order" not in full


def test_a_view_given_by_the_caller_draws_the_same_page(published, monkeypatch):
    """The folder writer builds the published view once for report.html and map.png; handed in,
    it gives the page the view built inside would (and the page does not build another)."""
    from dpopt.writers import html

    _name, table, summary = published
    view = published_view(table, summary, unit="km/h")
    own = render_html(table, summary, unit="km/h")
    monkeypatch.setattr(html, "published_view", lambda *a, **k: pytest.fail("the view was built again"))
    assert render_html(table, summary, unit="km/h", view=view) == own


def test_nested_summary_fields_read_as_json_in_the_methods_appendix():
    """Lists and mappings of summary.json (levels, fallback) are shown as summary.json writes them —
    null and double quotes — not as Python's repr (None, single quotes)."""
    from dpopt.writers.html import _methods_section

    html = _methods_section({"levels": [{"level": 0, "repeat_every": None}], "fallback": {"least_tau": {}},
                             "epsilon_total": 1.5}, None)
    assert "&quot;repeat_every&quot;: null" in html and "&#x27;repeat_every&#x27;: None" not in html
    assert "1.5" in html
