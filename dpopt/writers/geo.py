"""GIS copies of release.csv: ``release.geojson`` (always) and ``release.parquet`` as GeoParquet
(when pyarrow is installed), one feature per row, the row's H3 hexagon as its polygon and every
release.csv column as its properties.

Both are post-processing of the published release.csv (read back from the folder), so they publish
nothing more than it does. They need neither geopandas nor shapely: the polygon is the cell's
boundary from ``h3.cell_to_boundary``, written by hand as GeoJSON (RFC 7946: [longitude, latitude],
exterior ring counter-clockwise, first point repeated; JSON has no infinity, so a value infinite in
release.csv, such as the error bound of a withheld grid, is null there) and as ISO WKB (little-endian Polygon) with
the GeoParquet 1.0.0 ``geo`` metadata (encoding WKB, CRS omitted = OGC:CRS84, longitude/latitude).
A hexagon crossing the antimeridian is split there into a MultiPolygon of two parts (RFC 7946 §3.1.9;
every longitude within ±180°), and a cell holding a pole is the polygon bounded by the pole's line
of latitude and the ±180° meridians (its boundary in longitude/latitude winds once round the pole).
The maps draw such cells whole with :func:`display_boundary` instead.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ._published import read_release_table, row_dicts

__all__ = ["GEO_FILES", "cell_polygons", "display_boundary", "geometry_wkb", "geojson_text", "write_geo_files",
           "centre_longitude"]

#: the published GIS files, in the order written (release.parquet only where pyarrow is installed)
GEO_FILES = ("release.geojson", "release.parquet")


def _continuous(cell: str) -> np.ndarray:
    """The boundary of H3 ``cell`` as (longitude, latitude) rows (not closed), each longitude within
    180° of the one before (so a cell crossing ±180° has no jump; a polar cell's end differs from
    its start by ±360°)."""
    import h3

    ring = np.asarray(h3.cell_to_boundary(str(cell)), dtype=float)[:, ::-1].copy()
    step = (np.diff(ring[:, 0]) + 180.0) % 360.0 - 180.0
    ring[1:, 0] = ring[0, 0] + np.cumsum(step)
    return ring


def _winds_round_a_pole(ring: np.ndarray) -> bool:
    """Does the continuous boundary (:func:`_continuous`) go once round a pole?"""
    closing = (ring[0, 0] - ring[-1, 0] + 180.0) % 360.0 - 180.0
    return abs(ring[-1, 0] + closing - ring[0, 0]) > 180.0


def _closed_ccw(ring: np.ndarray) -> np.ndarray:
    """``ring`` counter-clockwise (shoelace) with its first point repeated at the end."""
    x, y = ring[:, 0], ring[:, 1]
    if float(np.dot(x, np.roll(y, -1)) - np.dot(np.roll(x, -1), y)) < 0:
        ring = ring[::-1]
    return np.vstack([ring, ring[:1]])


def _polar(cell: str) -> np.ndarray:
    """A cell holding a pole: its boundary ordered by longitude from −180° to +180° (the latitude at
    ±180° interpolated between the vertices either side), closed along the pole's line of latitude."""
    import h3

    pts = np.asarray(h3.cell_to_boundary(str(cell)), dtype=float)[:, ::-1]
    pts = pts[np.argsort(pts[:, 0])]
    first, last = pts[0], pts[-1]
    cross = last[1] + (180.0 - last[0]) * (first[1] - last[1]) / (first[0] + 360.0 - last[0])
    pole = 90.0 if pts[:, 1].mean() > 0 else -90.0
    ring = np.vstack([[-180.0, cross], pts, [180.0, cross], [180.0, pole], [-180.0, pole]])
    return _closed_ccw(ring)


def _clip(ring: np.ndarray, x: float, left: bool) -> np.ndarray:
    """The part of the (convex, open) ring on one side of the meridian ``x`` (Sutherland–Hodgman)."""
    out = []
    for p, q in zip(ring, np.roll(ring, -1, axis=0)):
        p_in, q_in = (p[0] <= x, q[0] <= x) if left else (p[0] >= x, q[0] >= x)
        if p_in:
            out.append(p)
        if p_in != q_in:
            out.append([x, p[1] + (x - p[0]) * (q[1] - p[1]) / (q[0] - p[0])])
    return np.asarray(out, dtype=float)


def cell_polygons(cell: str) -> list[np.ndarray]:
    """The hexagon (or pentagon) of H3 ``cell`` as RFC 7946 polygons: closed counter-clockwise rings of
    (longitude, latitude) rows with every longitude in [−180°, 180°] — one ring, two where the cell
    crosses the antimeridian (split there), and for a cell holding a pole the ring of :func:`_polar`."""
    ring = _continuous(cell)
    if _winds_round_a_pole(ring):
        return [_polar(cell)]
    ring[:, 0] -= 360.0 * np.round(ring[:, 0].mean() / 360.0)  # the centre within ±180°
    for edge in (180.0, -180.0):
        if (ring[:, 0].min() < edge < ring[:, 0].max()):
            inside, outside = _clip(ring, edge, left=edge > 0), _clip(ring, edge, left=edge < 0)
            outside[:, 0] -= np.sign(edge) * 360.0
            return [_closed_ccw(inside), _closed_ccw(outside)]
    return [_closed_ccw(ring)]


def centre_longitude(cells: Any) -> float:
    """The circular mean of the cells' centre longitudes (degrees): where a map of them is centred."""
    import h3

    lng = np.radians([h3.cell_to_latlng(str(c))[1] for c in cells]) if len(cells) else np.zeros(1)
    return float(np.degrees(np.arctan2(np.sin(lng).mean(), np.cos(lng).mean())))


def display_boundary(cell: str, reference: float) -> np.ndarray:
    """The boundary of ``cell`` for drawing, as (latitude, longitude) rows (h3's order, not closed):
    longitudes continuous and within 180° of ``reference`` (:func:`centre_longitude`), so a map
    across the antimeridian draws each cell whole and beside its neighbours; a cell holding a pole
    is the band of :func:`_polar`, shifted alike."""
    ring = _continuous(cell)
    if _winds_round_a_pole(ring):
        ring = _polar(cell)[:-1]
    ring[:, 0] -= 360.0 * np.round((ring[:, 0].mean() - reference) / 360.0)
    return ring[:, ::-1].copy()


def geometry_wkb(rings: list[np.ndarray]) -> bytes:
    """ISO WKB (little-endian) of one-ring polygons: a Polygon (type 3) for one, else a MultiPolygon
    (type 6) of them."""
    def polygon(ring: np.ndarray) -> bytes:
        pts = np.ascontiguousarray(ring, dtype="<f8")
        return struct.pack("<BIII", 1, 3, 1, len(pts)) + pts.tobytes()

    if len(rings) == 1:
        return polygon(rings[0])
    return struct.pack("<BII", 1, 6, len(rings)) + b"".join(polygon(r) for r in rings)


def _geojson_geometry(rings: list[np.ndarray]) -> dict[str, Any]:
    if len(rings) == 1:
        return {"type": "Polygon", "coordinates": [rings[0].tolist()]}
    return {"type": "MultiPolygon", "coordinates": [[r.tolist()] for r in rings]}


def geojson_text(table: pd.DataFrame) -> str:
    """release.csv (as read back) as a GeoJSON FeatureCollection: one Polygon feature per row. The
    text is ``json.dumps`` of the collection; each distinct cell's geometry is encoded once (a cell
    recurs in every slot: most of the encoding was its coordinates)."""
    props = row_dicts(table, finite_or_none=True)  # Python scalars; NaN, ±inf → None
    cells = table["cell"].astype(str)
    geometry = {c: json.dumps(_geojson_geometry(cell_polygons(c))) for c in pd.unique(cells)}
    encode = json.JSONEncoder(allow_nan=False).encode
    feats = ", ".join('{"type": "Feature", "geometry": ' + geometry[c] + ', "properties": ' + encode(p) + "}"
                      for c, p in zip(cells, props))
    return '{"type": "FeatureCollection", "features": [' + feats + "]}\n"


def _geo_metadata(polygons: list[list[np.ndarray]]) -> bytes:
    rings = [r for rs in polygons for r in rs]
    allp = np.concatenate(rings) if rings else np.zeros((0, 2))
    bbox = [float(allp[:, 0].min()), float(allp[:, 1].min()), float(allp[:, 0].max()),
            float(allp[:, 1].max())] if len(allp) else []
    kinds = sorted({"Polygon" if len(rs) == 1 else "MultiPolygon" for rs in polygons}) or ["Polygon"]
    col: dict[str, Any] = {"encoding": "WKB", "geometry_types": kinds, "orientation": "counterclockwise"}
    if bbox:
        col["bbox"] = bbox
    return json.dumps({"version": "1.0.0", "primary_column": "geometry", "columns": {"geometry": col}}).encode()


def _write_parquet(table: pd.DataFrame, path: Path) -> bool:
    """release.parquet as GeoParquet; False (nothing written) where pyarrow is not installed."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return False
    once = {c: cell_polygons(c) for c in pd.unique(table["cell"].astype(str))}
    wkb = {c: geometry_wkb(r) for c, r in once.items()}
    rings = list(once.values())
    at = pa.Table.from_pandas(table, preserve_index=False)
    at = at.append_column("geometry", pa.array([wkb[c] for c in table["cell"].astype(str)], type=pa.binary()))
    at = at.replace_schema_metadata({**(at.schema.metadata or {}), b"geo": _geo_metadata(rings)})
    pq.write_table(at, path)
    return True


def write_geo_files(folder: str | Path) -> dict[str, str]:
    """Write release.geojson and (with pyarrow) release.parquet into ``folder`` from its
    release.csv; returns key → file name relative to ``folder``."""
    folder = Path(folder)
    table = read_release_table(folder / "release.csv")
    (folder / GEO_FILES[0]).write_text(geojson_text(table), encoding="utf-8")
    out = {"geojson": GEO_FILES[0]}
    if _write_parquet(table, folder / GEO_FILES[1]):
        out["geoparquet"] = GEO_FILES[1]
    return out
