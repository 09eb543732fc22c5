"""The street map of report.html in headless Chromium, both ways: offline (the OpenStreetMap tile host
is blocked in every test browser, as in CI) it shows the hexagons on a plain background with
latitude/longitude lines, the pointer's coordinates and a scale bar; "online" is simulated by a
tile server on 127.0.0.1 that the page's ``tiles`` option points at. Either way it opens on the
cells of the finest published resolution, follows the time control and hovers "mean ± half-width"."""

from __future__ import annotations

import http.server
import io
import math
import re
import threading

import h3
import numpy as np
import pytest

from dpopt.writers.html import DEFAULT_TILES, write_html_report

from ._cdp import Browser, chromium_binary
from .conftest import load, multires

#: waits (in the page) until the street map has settled: tiles loaded, or given up on
_SETTLED = """new Promise(function(res){var t0=Date.now();(function poll(){
  var s=document.getElementById('street-status').textContent;
  if(s.indexOf('Loading')!==0||Date.now()-t0>10000){res(s);}else{setTimeout(poll,50);}})();})"""


def _png() -> bytes:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2.56, 2.56), dpi=100)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_facecolor("#e8e0d0")
    ax.plot([0, 1], [0.3, 0.7], color="white", lw=6)
    ax.set_axis_off()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", facecolor="#e8e0d0")
    return buf.getvalue()


@pytest.fixture(scope="module")
def browser():
    assert chromium_binary() is not None, "headless Chromium is required: apt-get install -y chromium"
    with Browser() as b:
        yield b


@pytest.fixture(scope="module")
def tile_server():
    """A tile server on 127.0.0.1: every GET /z/x/y.png gets the same PNG; requests are recorded."""
    png, seen = _png(), []

    class Tiles(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            seen.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(png)))
            self.end_headers()
            self.wfile.write(png)

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Tiles)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/{{z}}/{{x}}/{{y}}.png", seen
    srv.shutdown()
    srv.server_close()
    thread.join()


def _released(table):
    return table[table["released"].astype(bool)].reset_index(drop=True)


def _finest_extent(table) -> tuple[float, float, float, float]:
    """(south, west, north, east) of the released cells at the finest released resolution, from h3."""
    rel = _released(table)
    res = rel["cell"].map(h3.get_resolution)
    pts = np.concatenate([np.asarray(h3.cell_to_boundary(c)) for c in rel.loc[res == res.max(), "cell"]])
    return pts[:, 0].min(), pts[:, 1].min(), pts[:, 0].max(), pts[:, 1].max()


def _view(browser) -> tuple[float, list[float]]:
    return browser.eval("""(function(){var m=window.dpoptStreetMap,b=m.getBounds();
        return [m.getZoom(),[b.getSouth(),b.getWest(),b.getNorth(),b.getEast()]];})()""")


def _other_errors(browser) -> list:
    """Errors other than the blocked tile host's failed loads (those are the offline case)."""
    return [e for e in browser.errors() if "tile.openstreetmap.org" not in str(e.get("entry", {}).get("url", ""))]


@pytest.mark.parametrize("case", ["user", "adaptive"])
def test_offline_plain_background_with_grid_coordinates_and_scale(browser, tmp_path, case):
    table, summary = load(case)
    browser.open(write_html_report(tmp_path / "r.html", table, summary, unit="km/h"))
    status = browser.eval(_SETTLED)
    assert status.startswith("No street map: its tiles could not be loaded")
    assert browser.eval("document.getElementById('street-map').className").split().count("plain") == 1
    labels = browser.eval("Array.prototype.map.call(document.querySelectorAll('#street-map .grat'),"
                          "function(e){return e.textContent;})")
    lats = [float(x[:-3]) for x in labels if x.endswith("N")]
    lngs = [-float(x[:-3]) for x in labels if x.endswith("W")]
    assert lats and lngs and all(re.fullmatch(r"[\d.]+° [NSEW]", x) for x in labels)
    zoom, (s, w, n, e) = _view(browser)
    assert all(s <= y <= n for y in lats) and all(w <= x <= e for x in lngs)  # lines lie in the view
    assert re.fullmatch(r"\d+ k?m", browser.eval("document.querySelector('.leaflet-control-scale-line').textContent"))
    # the pointer's coordinates: the centre of the map reads as the view's centre
    got = browser.eval("""(function(){var el=document.getElementById('street-map'),r=el.getBoundingClientRect();
        el.dispatchEvent(new MouseEvent('mousemove',{bubbles:true,clientX:r.left+r.width/2,clientY:r.top+r.height/2}));
        return document.querySelector('#street-map .coords').textContent;})()""")
    m = re.fullmatch(r"pointer: ([\d.]+)° N, ([\d.]+)° W", got)
    assert m, got
    assert float(m.group(1)) == pytest.approx((s + n) / 2, abs=0.02 * (n - s) + 1e-3)
    assert -float(m.group(2)) == pytest.approx((w + e) / 2, abs=0.02 * (e - w) + 1e-3)
    assert _other_errors(browser) == []


@pytest.mark.parametrize("case", ["user", "adaptive"])
def test_opens_on_the_finest_published_cells(browser, tmp_path, case):
    """The view holds every finest-resolution released cell and is not much larger than they are
    (a coarse node covering a region does not set the zoom)."""
    table, summary = load(case)
    browser.open(write_html_report(tmp_path / "r.html", table, summary, tiles=None))
    s0, w0, n0, e0 = _finest_extent(table)
    _zoom, (s, w, n, e) = _view(browser)
    assert s <= s0 and w <= w0 and n >= n0 and e >= e0
    # fitted: one side of the view is within 1.6x the extent plus the 16-pixel padding (at most 2 %)
    assert min((n - s) / (n0 - s0), (e - w) / (e0 - w0)) < 1.6
    if case == "adaptive":  # the coarsest node is far larger than the view
        rel = _released(table)
        coarse = rel.loc[rel["h3_resolution"].idxmin(), "cell"]
        ring = np.asarray(h3.cell_to_boundary(coarse))
        assert np.ptp(ring[:, 1]) > 1.5 * (e - w) or np.ptp(ring[:, 0]) > 1.5 * (n - s)


def test_online_tiles_from_a_local_server(browser, tmp_path, tile_server):
    url, seen = tile_server
    table, summary = load("adaptive")
    seen.clear()
    browser.open(write_html_report(tmp_path / "r.html", table, summary, unit="km/h", tiles=url))
    status = browser.eval(_SETTLED)
    assert status.startswith("Street map: OpenStreetMap tiles")
    assert "online" in browser.eval("document.getElementById('street-map').className").split()
    assert browser.eval("document.querySelectorAll('#street-map .grat').length") == 0
    loaded = browser.eval("""Array.prototype.filter.call(document.querySelectorAll('#street-map img.leaflet-tile'),
        function(i){return i.complete&&i.naturalWidth===256;}).length""")
    assert loaded >= 1
    # the tile under the view's centre (slippy-map formula) was asked for, at the map's zoom
    zoom, (s, w, n, e) = _view(browser)
    z = math.floor(zoom + 0.5)  # Leaflet's tile zoom: Math.round (10.5 -> 11)
    lat, lng = (s + n) / 2, (w + e) / 2
    x = int((lng + 180) / 360 * 2**z)
    y = int((1 - math.asinh(math.tan(math.radians(lat))) / math.pi) / 2 * 2**z)
    assert f"/{z}/{x}/{y}.png" in seen, (z, x, y, seen[:5])
    assert {p.split("/")[1] for p in seen} == {str(z)}
    assert "© OpenStreetMap contributors" in browser.eval("document.querySelector('.leaflet-control-attribution').textContent")
    assert _other_errors(browser) == []


def test_street_map_follows_the_time_control_and_hovers_mean_and_half_width(browser, tmp_path):
    """At every step the street map draws exactly the nodes the value panel shows; hovering one
    gives its release.csv mean ± half-width (the newest tooltip: a closed one fades out for 200 ms);
    hostile strings stay text."""
    table, summary = multires()
    browser.open(write_html_report(tmp_path / "r.html", table, summary, unit="km/h", tiles=DEFAULT_TILES))
    rel = _released(table)
    n_steps = browser.eval("+document.getElementById('step').max") + 1
    checked = 0
    for k in range(n_steps):
        street, panel = browser.eval(f"""(function(){{var r=document.getElementById('step'); r.value='{k}';
            r.dispatchEvent(new Event('input'));
            function ids(sel){{return Array.prototype.filter.call(document.querySelectorAll(sel),
              function(e){{return e.style.display!=='none';}}).map(function(e){{return +e.dataset.i;}}).sort();}}
            return [ids('#street-map path.street-node'), ids('#map-value path.node')];}})()""")
        assert street == panel
        for i in street:
            tip = browser.eval(f"""(function(){{var p=document.querySelector('#street-map path.street-node[data-i="{i}"]'),
                b=p.getBoundingClientRect();p.scrollIntoView({{block:'center'}});b=p.getBoundingClientRect();
                p.dispatchEvent(new MouseEvent('mouseover',{{bubbles:true,clientX:b.left+b.width/2,clientY:b.top+b.height/2}}));
                var t=document.querySelectorAll('.leaflet-tooltip'),s=t.length?t[t.length-1].textContent:'';
                p.dispatchEvent(new MouseEvent('mouseout',{{bubbles:true,clientX:0,clientY:0}}));return s;}})()""")
            row = rel.iloc[i]
            assert tip.startswith(row["cell"]), tip
            m = re.search(r"mean ([\d,.]+) km/h ± ([\d,.]+) km/h", tip)
            assert float(m.group(1).replace(",", "")) == pytest.approx(row["mean"], rel=5e-3, abs=5e-3)
            assert float(m.group(2).replace(",", "")) == pytest.approx(row["mean_error_bound"], rel=5e-3, abs=5e-3)
            checked += 1
    assert checked >= len(rel)
    assert browser.eval("document.querySelectorAll('img:not(.leaflet-tile)').length") == 0
    assert _other_errors(browser) == []


def test_tile_url_option_reaches_the_page_through_the_folder_hook(tmp_path, monkeypatch):
    """DPOPT_TILE_URL (documented in dpopt.writers.hooks) sets the street map's tile template of a
    written release; "none" turns the street map off; unset, OpenStreetMap's template is used."""
    import json as _json

    from dpopt.writers.hooks import extra_files

    table, summary = load("user")

    def page(env: str | None) -> dict:
        d = tmp_path / f"f{len(list(tmp_path.iterdir()))}"
        d.mkdir()
        table.to_csv(d / "release.csv", index=False)
        (d / "summary.json").write_text(_json.dumps(summary))
        if env is None:
            monkeypatch.delenv("DPOPT_TILE_URL", raising=False)
        else:
            monkeypatch.setenv("DPOPT_TILE_URL", env)
        extra_files(None, d)
        text = (d / "report.html").read_text()
        m = re.search(r'<script type="application/json" id="street-data">(.*?)</script>', text, re.S)
        return _json.loads(m.group(1))

    assert page(None)["tiles"] == DEFAULT_TILES
    assert page("http://127.0.0.1:9/{z}/{x}/{y}.png")["tiles"] == "http://127.0.0.1:9/{z}/{x}/{y}.png"
    off = page("none")
    assert off["tiles"] is None and off["attribution"] == ""


def test_a_table_row_click_zooms_the_street_map_to_its_hexagon(browser, tmp_path):
    """Look a value up from the table: clicking a row shows its slot, zooms the street map onto the
    row's hexagon (h3's boundary inside the view, the view at most a few hexagons wide) and opens
    its tooltip with the row's mean ± half-width."""
    table, summary = load("adaptive")
    browser.open(write_html_report(tmp_path / "r.html", table, summary, unit="km/h", tiles=None))
    rel = _released(table)
    for i in (0, len(rel) // 2, len(rel) - 1):
        tip = browser.eval(f"""(function(){{var tr=document.querySelector('#table tbody tr[data-i="{i}"]');
            tr.cells[0].click();var t=document.querySelectorAll('.leaflet-tooltip');
            return t.length?t[t.length-1].textContent:'';}})()""")
        row = rel.iloc[i]
        assert tip.startswith(row["cell"]), tip
        m = re.search(r"mean ([\d,.]+) km/h ± ([\d,.]+) km/h", tip)
        assert float(m.group(1).replace(",", "")) == pytest.approx(row["mean"], rel=5e-3, abs=5e-3)
        ring = np.asarray(h3.cell_to_boundary(row["cell"]))
        _zoom, (s, w, n, e) = _view(browser)
        assert s <= ring[:, 0].min() and ring[:, 0].max() <= n and w <= ring[:, 1].min() and ring[:, 1].max() <= e
        assert (e - w) <= 6 * np.ptp(ring[:, 1]) or _zoom >= 14
    assert _other_errors(browser) == []


def _luminance(colour: str) -> float:
    """Relative luminance of "#rrggbb" or "rgb(r, g, b)" (ITU-R BT.709 weights on 0–255 values)."""
    if colour.startswith("#"):
        r, g, b = (int(colour[k:k + 2], 16) for k in (1, 3, 5))
    else:
        r, g, b = (int(x) for x in re.findall(r"\d+", colour)[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def test_colour_by_mean_or_half_width(browser, tmp_path):
    """The street map's colour switch: by mean, brightness rises with the mean (viridis); by
    ± half-width, it falls as the half-width grows (the orange ramp), and the legend follows."""
    table, summary = load("adaptive")
    browser.open(write_html_report(tmp_path / "r.html", table, summary, unit="km/h", tiles=None))
    rel = _released(table)

    def colours(by: str) -> tuple[list[tuple[int, str]], list[bool]]:
        return browser.eval(f"""(function(){{var f=document.querySelector('#street-map .colour-by');
            f.querySelector('input[value="{by}"]').click();
            return [Array.prototype.map.call(document.querySelectorAll('#street-map path.street-node'),
              function(p){{return [+p.dataset.i,p.getAttribute('fill')];}}),
              Array.prototype.map.call(document.querySelectorAll('.street-legend'),function(g){{return g.hidden;}})];}})()""")

    for by, col, sign in (("bound", "mean_error_bound", -1), ("mean", "mean", 1)):
        shapes, hidden = colours(by)
        assert len(shapes) >= 3
        pairs = sorted((rel.loc[i, col], _luminance(c)) for i, c in shapes)
        lum = [lu for _v, lu in pairs]
        vals = [v for v, _lu in pairs]
        for (v0, l0), (v1, l1) in zip(pairs, pairs[1:]):
            if v1 > v0 * (1 + 1e-6):
                assert sign * (l1 - l0) > -1.0, (by, pairs)  # monotone up to rounding of the ramp
        assert sign * (lum[-1] - lum[0]) > 20 or vals[-1] - vals[0] < 1e-6
        assert hidden == ([True, False] if by == "bound" else [False, True])
    assert _other_errors(browser) == []
