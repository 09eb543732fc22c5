"""Files the report writers add to a release folder: ``report.html``
(:func:`dpopt.writers.html.write_html_report`), and the GIS copies of release.csv
(:data:`dpopt.writers.geo.GEO_FILES`: release.geojson always, release.parquet as GeoParquet where
pyarrow is installed), all rendered from the folder's own published release.csv and summary.json, so
they show nothing the folder does not already publish. The folder writer calls :func:`extra_files`
inside the temporary folder, before it is renamed into place, so these files are written
atomically with the rest.

The page's street map loads its tiles from OpenStreetMap
(:data:`dpopt.writers.html.DEFAULT_TILES`); the environment variable ``DPOPT_TILE_URL`` replaces the
URL template (``{z}/{x}/{y}``, e.g. a local tile server), and ``DPOPT_TILE_URL=none`` turns the street
map off (the hexagons are then drawn on a plain background with coordinates and a scale bar).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["extra_files"]


def extra_files(result: Any, tmp: Path, *, unit: str | None = None, figures: bool = False) -> dict[str, str]:
    """Write report.html into ``tmp`` from ``tmp``/release.csv and ``tmp``/summary.json (already
    written); returns key -> path relative to ``tmp``. ``result`` is read only for the time zone
    the slots are cut in (a public option, added to summary.json): the page is post-processing of
    the published files only. ``unit`` (e.g. "km/h"), when given, is added to
    summary.json as ``unit`` (a public label chosen by the data holder) and names the values' unit in
    the page. ``figures``: also map.png and (where the release has a frontier) frontier.png
    (:func:`dpopt.writers.figures.write_figures`), from the same published files."""
    import os

    from ._published import published_view, read_release_table
    from .folder import folder_mode
    from .html import write_html_report

    table = read_release_table(tmp / "release.csv")
    summary = json.loads((tmp / "summary.json").read_text())
    m = getattr(result, "measurements", None)
    zone = m.info.timezone if m is not None else None
    if unit or zone:  # public labels: the unit the data holder names, the zone slots are cut in
        summary.update({k: str(v) for k, v in (("unit", unit), ("timezone", zone)) if v})
        (tmp / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    from .geo import write_geo_files
    from .html import DEFAULT_TILES

    tiles = os.environ.get("DPOPT_TILE_URL", DEFAULT_TILES)
    view = published_view(table, summary, unit=unit)  # one view for the page and map.png
    page = write_html_report(tmp / "report.html", table, summary, unit=unit,
                             tiles=None if tiles.strip().lower() in ("", "none") else tiles, view=view)
    os.chmod(page, folder_mode() & 0o666)  # written via mkstemp (0600): give it an ordinary file's mode
    files = {"html": "report.html", **write_geo_files(tmp)}
    if figures:
        from .figures import write_figures

        files.update({k: p.name for k, p in write_figures(tmp, table, summary, unit=unit, view=view).items()})
    return files
