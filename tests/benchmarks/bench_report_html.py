"""report.html screenshots in headless Chromium (not part of the default test run).

Renders report.html for the writer fixtures (both privacy models, a multi-resolution table) and,
with ``--release DIR`` (repeatable), for real release folders (e.g. ``dpopt release --example --out
DIR``); loads each in headless Chromium, takes a full-page screenshot and a screenshot of the value
map, checks the map has coloured hexagons (pixels away from the background) and that the page has
no console errors, and writes the sizes and load times to results/report.md.

Run: python tests/benchmarks/bench_report_html.py [--release DIR ...] [--out DIR]
or:  python -m pytest tests/benchmarks/bench_report_html.py
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from dpopt.writers.html import write_html_report  # noqa: E402
from tests.writers._cdp import Browser  # noqa: E402
from tests.writers.conftest import load, multires  # noqa: E402


def _cases(releases: list[Path]) -> dict[str, tuple[pd.DataFrame, dict]]:
    cases = {"fixture-occupancy": load("occupancy"), "fixture-user": load("user"), "fixture-multires": multires()}
    for d in releases:
        cases[f"release-{d.name}"] = (pd.read_csv(d / "release.csv"),
                                      json.loads((d / "summary.json").read_text(encoding="utf-8")))
    return cases


def _coloured_fraction(png: Path) -> float:
    from matplotlib.image import imread

    img = imread(png)[..., :3]
    bg = np.array([0xF6, 0xF6, 0xF4]) / 255
    grey = np.abs(img - img.mean(axis=2, keepdims=True)).max(axis=2) < 0.04
    return float((~grey & (np.abs(img - bg).max(axis=2) > 0.08)).mean())


def shoot(out: Path, releases: list[Path]) -> list[dict]:
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with Browser(width=1280, height=900) as b:
        for name, (table, summary) in _cases(releases).items():
            page = write_html_report(out / f"{name}.html", table, summary, unit="km/h")
            t0 = time.perf_counter()
            b.open(page)
            load_s = time.perf_counter() - t0
            errors = b.errors()
            rect = b.eval("(function(){var r=document.getElementById('map-value').getBoundingClientRect();"
                          "return [r.x, r.y + window.scrollY, r.width, r.height];})()")
            clip = {"x": rect[0], "y": rect[1], "width": rect[2], "height": rect[3], "scale": 1}
            data = b.call("Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=True)["data"]
            map_png = out / f"{name}.map.png"
            map_png.write_bytes(base64.b64decode(data))
            height = b.eval("document.documentElement.scrollHeight")
            b.call("Emulation.setDeviceMetricsOverride", width=1280, height=int(height), deviceScaleFactor=1,
                   mobile=False)
            b.screenshot(out / f"{name}.png")
            b.call("Emulation.clearDeviceMetricsOverride")
            rows.append({"case": name, "bytes": page.stat().st_size, "load_s": round(load_s, 3),
                         "nodes": b.eval("document.querySelectorAll('#map-value path.node').length"),
                         "coloured_map_fraction": round(_coloured_fraction(map_png), 4),
                         "console_errors": len(errors)})
    return rows


def test_screenshots(tmp_path):
    rows = shoot(tmp_path, [])
    for r in rows:
        assert r["console_errors"] == 0, r
        assert r["coloured_map_fraction"] > 0.002, r  # hexagons drawn in colour, not an empty map


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--release", action="append", type=Path, default=[], help="a published release folder")
    ap.add_argument("--out", type=Path, default=Path("report-html-screenshots"))
    args = ap.parse_args(argv)
    rows = shoot(args.out, args.release)
    frame = pd.DataFrame(rows)
    print(frame.to_string(index=False))
    md = ["## report.html in headless Chromium", "",
          "`python tests/benchmarks/bench_report_html.py --release DIR`: page size, load time (navigate to",
          "load event, headless Chromium, 2 shared cores), shapes on the value map, share of the map's",
          "pixels in colour (hexagons drawn), console errors. Screenshots in `--out`.", "",
          "| case | bytes | load (s) | shapes | coloured map | console errors |", "|---|---|---|---|---|---|"]
    md += [f"| {r['case']} | {r['bytes']:,} | {r['load_s']} | {r['nodes']} | {r['coloured_map_fraction']} | "
           f"{r['console_errors']} |" for r in rows]
    (HERE / "results" / "report.md").write_text("\n".join(md) + "\n")
    print(f"screenshots in {args.out.resolve()}")


if __name__ == "__main__":
    main()
