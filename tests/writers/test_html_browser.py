"""report.html in a real browser: headless Chromium (Debian's ``chromium``) over the DevTools
protocol. Runs in CI (.ci/run installs chromium); it fails, never skips, when chromium is absent."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import h3
import numpy as np
import pandas as pd
import pytest

from dpopt.writers.html import write_html_report

from ._cdp import Browser, chromium_binary
from .conftest import load, multires, profile

#: "adaptive": a real multi-resolution release (``dpopt release <embedded day> --privacy user --bound 120
#: --epsilon-total 100 --partitions <every grid of the day> --seed 1``): 30 nodes at H3 resolutions 3–5
#: over 1 h, 3 h and 24 h slots (at ε = 10 every node is a day long, too uniform to test the control)
CASES = {"occupancy": lambda: load("occupancy"), "user": lambda: load("user"), "multires": multires,
         "adaptive": lambda: load("adaptive"), "profile": profile}


@pytest.fixture(scope="module")
def browser():
    assert chromium_binary() is not None, "headless Chromium is required: apt-get install -y chromium"
    with Browser() as b:
        yield b


def _released(t: pd.DataFrame) -> pd.DataFrame:
    return t[t["released"].astype(bool)].reset_index(drop=True) if "released" in t else t


def _num(s: str) -> float:
    return float(s.replace(",", ""))


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.slow
def test_report_in_chromium(browser, tmp_path, case):
    table, summary = CASES[case]()
    page = write_html_report(tmp_path / "report.html", table, summary, unit="km/h")
    browser.open(page)
    rel = _released(table)
    assert browser.errors() == []
    # one shape per released node, on the value map and on the uncertainty map
    assert browser.eval("document.querySelectorAll('#map-value path.node').length") == len(rel)
    assert browser.eval("document.querySelectorAll('#map-uncertainty path.unode').length") == len(rel)
    text = browser.eval("document.documentElement.outerHTML")
    for cell in rel["cell"]:
        assert cell in text
    # hostile strings from the data stay text (the only images are the street map's tiles)
    assert browser.eval("document.querySelectorAll('img:not(.leaflet-tile), main b + script').length") == 0
    # hover: the tooltip of a few shapes carries the row's value and interval half-width
    for i in range(0, len(rel), max(1, len(rel) // 4)):
        tip = browser.eval(f"""(function(){{var el=document.querySelector('#map-value path.node[data-i="{i}"]');
            el.dispatchEvent(new MouseEvent('mouseover',{{bubbles:true}}));
            var t=document.getElementById('tip'); return [t.hidden, t.textContent];}})()""")
        assert tip[0] is False
        row = rel.iloc[i]
        assert tip[1].startswith(row["cell"])
        m = re.search(r"mean ([\d,.]+) km/h ± ([\d,.]+) km/h", tip[1])
        assert m, tip[1]
        assert _num(m.group(1)) == pytest.approx(row["mean"], rel=5e-3, abs=5e-3)
        assert _num(m.group(2)) == pytest.approx(row["mean_error_bound"], rel=5e-3, abs=5e-3)
        res = int(row["h3_resolution"]) if "h3_resolution" in row else 7
        assert f"H3 resolution {res}" in tip[1]
        if "n_users" in row and pd.notna(row["n_users"]):
            assert f"users {int(row['n_users'])}" in tip[1]


def _spans(table: pd.DataFrame, summary: dict) -> tuple[pd.Series, pd.Series, pd.Series, pd.Series]:
    """(t0, t1, cycle, until) of each row as a reader takes them from release.csv: a row whose
    ``repeat_every`` is set recurs every that many days until ``repeat_until``."""
    t0 = pd.to_datetime(table["slot"], utc=True)
    end = table["slot_end"] if "slot_end" in table else pd.Series(pd.NaT, index=table.index)
    t1 = pd.to_datetime(end, utc=True).fillna(t0 + pd.Timedelta(summary["slot"]))
    every = table["repeat_every"] if "repeat_every" in table else pd.Series("", index=table.index)
    days = every.fillna("").astype(str).str.extract(r"^P(\d+)D$")[0].astype(float)
    until = pd.to_datetime(table["repeat_until"] if "repeat_until" in table else pd.Series(pd.NaT, index=table.index),
                           utc=True, errors="coerce")
    return t0, t1, days, until


def _covers(t0, t1, days, until, t: pd.Timestamp) -> np.ndarray:
    """Rows whose time span (every window of a recurring one) holds the instant ``t``."""
    on = []
    for a, b, d, u in zip(t0, t1, days, until):
        if np.isnan(d):
            on.append(a <= t < b)
        else:
            k = (t - a) // pd.Timedelta(days=d)
            on.append(bool(k >= 0 and a + k * pd.Timedelta(days=d) <= t < b + k * pd.Timedelta(days=d) and t < u))
    return np.array(on, dtype=bool)


def _expected_steps(table: pd.DataFrame, summary: dict) -> list[pd.Timestamp]:
    """One slot length everywhere: the slots holding a row; mixed lengths or recurring windows: every
    finest slot from the first start to the last end (the report's time control, written out
    independently)."""
    slot = pd.Timedelta(summary["slot"])
    t0, t1, days, until = _spans(table, summary)
    if set(t1 - t0) == {slot} and days.isna().all():
        return sorted(set(t0))
    last = until.where(days.notna(), t1)
    return list(pd.date_range(t0.min(), last.max(), freq=slot, inclusive="left"))


@pytest.mark.parametrize("case", ["occupancy", "multires", "adaptive", "profile"])
def test_time_control_shows_the_slot_nodes(browser, tmp_path, case):
    """At every step of the time control the map shows exactly the published nodes whose time span
    holds it (for a profile, every day's window of an hour-of-day node)."""
    table, summary = CASES[case]()
    browser.open(write_html_report(tmp_path / "r.html", table, summary))
    rel = _released(table)
    t0, t1, days, until = _spans(rel, summary)
    n_steps = browser.eval("+document.getElementById('step').max") + 1
    steps = _expected_steps(table, summary)
    assert n_steps == len(steps)
    recurring_shown = 0
    for k, t in enumerate(steps):
        shown = browser.eval(f"""(function(){{var r=document.getElementById('step'); r.value='{k}';
            r.dispatchEvent(new Event('input'));
            return Array.prototype.filter.call(document.querySelectorAll('#map-value path.node'),
              function(e){{return e.style.display!=='none';}}).map(function(e){{return e.dataset.cell;}});}})()""")
        on = _covers(t0, t1, days, until, t)
        assert sorted(shown) == sorted(rel.loc[on, "cell"])
        recurring_shown += int((on & days.notna().to_numpy()).sum())
    if case == "profile":  # both hour-of-day nodes, on each of the three days
        assert recurring_shown == 6
    assert browser.errors() == []


def test_table_sorts_by_mean(browser, tmp_path):
    table, summary = load("occupancy")
    browser.open(write_html_report(tmp_path / "r.html", table, summary, unit="km/h"))
    col = browser.eval("""(function(){var ths=document.querySelectorAll('#table th');
        for(var i=0;i<ths.length;i++){if(ths[i].textContent.indexOf('mean')===0){ths[i].click();return i;}}})()""")
    vals = browser.eval(f"""Array.prototype.map.call(document.querySelectorAll('#table tbody tr'),
        function(r){{return +r.cells[{col}].dataset.v;}})""")
    assert vals == sorted(vals)
    assert vals == sorted(_released(table)["mean"].tolist())
    assert browser.errors() == []


def test_answer_path_value_in_a_hexagon_at_17h(browser, tmp_path):
    """"How accurate is the value in this hexagon at 17:00?": pick 17:00 in the list, hover the
    hexagon, read mean ± half-width; it is the row of release.csv for that cell and hour."""
    table, summary = load("occupancy")
    browser.open(write_html_report(tmp_path / "r.html", table, summary, unit="km/h"))
    got = browser.eval("""(function(){var p=document.getElementById('step-pick');
        for(var i=0;i<p.options.length;i++){if(p.options[i].textContent.indexOf('2015-09-06 17:00')===0){p.value=p.options[i].value;}}
        p.dispatchEvent(new Event('change'));
        var el=Array.prototype.filter.call(document.querySelectorAll('#map-value path.node'),
            function(e){return e.style.display!=='none';})[0];
        el.dispatchEvent(new MouseEvent('mouseover',{bubbles:true}));
        return [el.dataset.cell, document.getElementById('tip').textContent,
                document.getElementById('step-label').textContent];})()""")
    cell, tip, label = got
    assert label == "2015-09-06 17:00–18:00 UTC"
    row = table[(table["cell"] == cell) & (table["slot"] == "2015-09-06T17:00:00Z")].iloc[0]
    assert bool(row["released"])
    assert "17:00–18:00 UTC" in tip
    m = re.search(r"mean ([\d,.]+) km/h ± ([\d,.]+) km/h", tip)
    assert _num(m.group(1)) == pytest.approx(row["mean"], rel=5e-3)
    assert _num(m.group(2)) == pytest.approx(row["mean_error_bound"], rel=5e-3)
    assert browser.errors() == []


def test_a_release_with_nothing_published_renders_without_errors(browser, tmp_path):
    table, summary = load("occupancy")
    table = table.assign(released=False)
    page = write_html_report(tmp_path / "r.html", table, dict(summary, released_grids=0), unit="km/h")
    browser.open(page)
    assert browser.errors() == []
    assert browser.eval("document.querySelectorAll('svg.map path.node').length") == 0
    assert "No cell was published." in browser.eval("document.body.textContent")


def test_adaptive_release_one_shape_per_covering_node_and_hover_matches_release_csv(browser, tmp_path):
    """The real multi-resolution release at 17:00: exactly the nodes whose [slot, slot_end) holds
    17:00 are drawn, one shape each, and each shape's hover text is its release.csv row (value,
    half-width, resolution, its own time span in words: never "05:00–05:00")."""
    table, summary = load("adaptive")
    browser.open(write_html_report(tmp_path / "r.html", table, summary, unit="km/h"))
    t0, t1 = pd.to_datetime(table["slot"], utc=True), pd.to_datetime(table["slot_end"], utc=True)
    assert (t1 - t0).nunique() > 1 and table["h3_resolution"].nunique() > 1  # the fixture mixes both
    t = pd.Timestamp("2015-09-06T17:00:00Z")
    want = table[((t0 <= t) & (t < t1)).to_numpy() & table["released"].astype(bool).to_numpy()]
    assert len(want) >= 2
    got = browser.eval("""(function(){var p=document.getElementById('step-pick');
        for(var i=0;i<p.options.length;i++){if(p.options[i].textContent.indexOf('2015-09-06 17:00')===0){p.value=p.options[i].value;}}
        p.dispatchEvent(new Event('change'));
        return [document.getElementById('step-label').textContent,
          Array.prototype.filter.call(document.querySelectorAll('#map-value path.node'),
            function(e){return e.style.display!=='none';}).map(function(e){
              e.dispatchEvent(new MouseEvent('mouseover',{bubbles:true}));
              return [+e.dataset.i, document.getElementById('tip').textContent];})];})()""")
    label, shapes = got
    assert label == "2015-09-06 17:00–18:00 UTC"
    rel = _released(table)
    r0, r1 = pd.to_datetime(rel["slot"], utc=True), pd.to_datetime(rel["slot_end"], utc=True)
    # one shape per covering node (a cell may be published for 3 h and for its whole day: two nodes)
    assert sorted(i for i, _ in shapes) == list(np.flatnonzero(((r0 <= t) & (t < r1)).to_numpy()))
    assert len(shapes) == len(want)
    for i, tip in shapes:
        row = rel.iloc[i]
        a, b = pd.Timestamp(row["slot"]), pd.Timestamp(row["slot_end"])
        span = (f"{a:%Y-%m-%d %H:%M}–{b:%H:%M} UTC" if b - a < pd.Timedelta(days=1) and a.date() == b.date()
                else f"{a:%Y-%m-%d %H:%M} → {b:%Y-%m-%d %H:%M} UTC ({(b - a) / pd.Timedelta(hours=1):g} h)")
        assert tip.startswith(f"{row['cell']} · H3 resolution {int(row['h3_resolution'])} · {span}"), tip
        m = re.search(r"mean ([\d,.]+) km/h ± ([\d,.]+) km/h", tip)
        assert _num(m.group(1)) == pytest.approx(row["mean"], rel=5e-3)
        assert _num(m.group(2)) == pytest.approx(row["mean_error_bound"], rel=5e-3)
    text = browser.eval("document.body.textContent")
    assert "05:00–05:00" not in text and "00:00–00:00" not in text
    assert "finest resolution the data support" in text and "--h3-resolution" not in text
    assert browser.errors() == []


@pytest.mark.parametrize("case", ["occupancy", "adaptive"])
def test_methods_appendix_wraps_inside_its_card(browser, tmp_path, case):
    """Opened, the appendix (long summary.json fields: budgets, rules, noise) stays inside its card:
    nothing in it reaches past the card's right edge and the card does not scroll sideways."""
    table, summary = CASES[case]()
    summary = dict(summary, noise="x" * 400)  # one unbreakable 400-character field
    browser.open(write_html_report(tmp_path / "r.html", table, summary, tiles=None))
    over = browser.eval("""(function(){var s=document.getElementById('methods');s.querySelector('details').open=true;
        var r=s.getBoundingClientRect().right+0.5;
        var out=Array.prototype.filter.call(s.querySelectorAll('td,th,dd,dt'),function(e){
          return e.getBoundingClientRect().right>r;}).length;
        return [out, s.scrollWidth-s.clientWidth];})()""")
    assert over == [0, 0]
    assert browser.errors() == []


def test_time_control_steps_on_the_local_clock_across_a_clock_change(browser, tmp_path):
    """A release cut in Europe/Berlin over the night clocks skip 02:00 (2026-03-29): the time control
    steps through the local hours (02:00 that night is no step), labels them on that clock, and an
    08:00–09:00 window recurring daily shows at 08:00 local on both days. Before, the steps were UTC
    hours labelled in UTC, and the window showed at 09:00 local after the change."""
    table, summary = load("user")
    summary = dict(summary, slot="1h", timezone="Europe/Berlin", resolution="adaptive")
    cell, parent = "87489e346ffffff", h3.cell_to_parent("87489e346ffffff", 5)
    hours = ["2026-03-28T07:00:00+01:00", "2026-03-28T08:00:00+01:00", "2026-03-29T01:00:00+01:00",
             "2026-03-29T03:00:00+02:00", "2026-03-29T08:00:00+02:00"]
    ends = ["2026-03-28T08:00:00+01:00", "2026-03-28T09:00:00+01:00", "2026-03-29T03:00:00+02:00",
            "2026-03-29T04:00:00+02:00", "2026-03-29T09:00:00+02:00"]
    rows = pd.DataFrame({"cell": [cell] * 5 + [parent], "slot": hours + ["2026-03-28T08:00:00+01:00"],
                         "slot_end": ends + ["2026-03-28T09:00:00+01:00"], "repeat_every": [""] * 5 + ["P1D"],
                         "repeat_until": [""] * 5 + ["2026-03-30T00:00:00+02:00"], "released": True,
                         "mean": [20.0, 21.0, 22.0, 23.0, 24.0, 30.0], "mean_error_bound": 2.0,
                         "h3_resolution": [7] * 5 + [5]})
    browser.open(write_html_report(tmp_path / "r.html", rows, summary))
    zone = ZoneInfo("Europe/Berlin")
    local, wall = [], datetime(2026, 3, 28, 7)
    while wall < datetime(2026, 3, 30, 0):  # every local hour that exists, independently of the code
        back = wall.replace(tzinfo=zone).astimezone(ZoneInfo("UTC")).astimezone(zone)
        if back.replace(tzinfo=None) == wall:
            local.append(back)
        wall += timedelta(hours=1)
    labels = browser.eval("JSON.parse(document.getElementById('steps-data').textContent).map(function(s){return s.label;})")
    assert len(labels) == len(local) == 40
    starts = {pd.Timestamp(h) for h in hours}
    for k, at in enumerate(local):
        assert labels[k].startswith(f"{at:%Y-%m-%d %H:%M}") and "Europe/Berlin" in labels[k], labels[k]
        shown = browser.eval(f"""(function(){{var r=document.getElementById('step'); r.value='{k}';
            r.dispatchEvent(new Event('input'));
            return Array.prototype.filter.call(document.querySelectorAll('#map-value path.node'),
              function(e){{return e.style.display!=='none';}}).map(function(e){{return e.dataset.cell;}});}})()""")
        want = ([cell] if pd.Timestamp(at) in starts else []) + ([parent] if at.hour == 8 else [])
        assert sorted(shown) == sorted(want), (at, shown)
    assert browser.errors() == []
