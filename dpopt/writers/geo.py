"""GIS copies of release.csv: ``release.geojson`` (always) and ``release.parquet`` as GeoParquet
(when pyarrow is installed), one feature per row, the row's H3 hexagon as its polygon and every
release.csv column as its properties.

Both are post-processing of the published release.csv (read back from the folder), so they publish
nothing more than it does. They need neither geopandas nor shapely: the polygon is the cell's
boundary from ``h3.cell_to_boundary``, written by hand as GeoJSON (RFC 7946: [longitude, latitude],
exterior ring counter-clockwise, first point repeated; JSON has no infinity, so a value infinite in
release.csv, such as the error bound of a withheld grid, is null there) and as ISO WKB (little-endian Polygon) with
the GeoParquet 1.0.0 ``geo`` metadata (encoding WKB, CRS omitted = OGC:CRS84, longitude/latitude).
A hexagon crossing the antimeridian keeps continuous longitudes (beyond ±180°) rather than being
split as RFC 7946 asks; no such cell occurs outside the Pacific.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ._published import read_release_table, row_dicts

__all__ = ["GEO_FILES", "cell_ring", "polygon_wkb", "geojson_text", "write_geo_files"]

#: the published GIS files, in the order written (release.parquet only where pyarrow is installed)
GEO_FILES = ("release.geojson", "release.parquet")


def cell_ring(cell: str) -> np.ndarray:
    """The hexagon (or pentagon) of H3 ``cell`` as a closed counter-clockwise ring of
    (longitude, latitude) rows, first point repeated; longitudes kept continuous across ±180°."""
    import h3

    ring = np.asarray(h3.cell_to_boundary(str(cell)), dtype=float)[:, ::-1].copy()
    lng = ring[:, 0]
    lng[lng - lng[0] > 180.0] -= 360.0
    lng[lng - lng[0] < -180.0] += 360.0
    x, y = ring[:, 0], ring[:, 1]
    if float(np.dot(x, np.roll(y, -1)) - np.dot(np.roll(x, -1), y)) < 0:  # shoelace: clockwise
        ring = ring[::-1]
    return np.vstack([ring, ring[:1]])


def polygon_wkb(ring: np.ndarray) -> bytes:
    """ISO WKB of a one-ring Polygon: byte order 1 (little-endian), type 3, one ring, its points."""
    pts = np.ascontiguousarray(ring, dtype="<f8")
    return struct.pack("<BIII", 1, 3, 1, len(pts)) + pts.tobytes()


def geojson_text(table: pd.DataFrame) -> str:
    """release.csv (as read back) as a GeoJSON FeatureCollection: one Polygon feature per row. The
    text is ``json.dumps`` of the collection; each distinct cell's geometry is encoded once (a cell
    recurs in every slot: most of the encoding was its coordinates)."""
    props = row_dicts(table, finite_or_none=True)  # Python scalars; NaN, ±inf → None
    cells = table["cell"].astype(str)
    geometry = {c: json.dumps({"type": "Polygon", "coordinates": [cell_ring(c).tolist()]}) for c in pd.unique(cells)}
    encode = json.JSONEncoder(allow_nan=False).encode
    feats = ", ".join('{"type": "Feature", "geometry": ' + geometry[c] + ', "properties": ' + encode(p) + "}"
                      for c, p in zip(cells, props))
    return '{"type": "FeatureCollection", "features": [' + feats + "]}\n"


def _geo_metadata(rings: list[np.ndarray]) -> bytes:
    allp = np.concatenate(rings) if rings else np.zeros((0, 2))
    bbox = [float(allp[:, 0].min()), float(allp[:, 1].min()), float(allp[:, 0].max()),
            float(allp[:, 1].max())] if len(allp) else []
    col: dict[str, Any] = {"encoding": "WKB", "geometry_types": ["Polygon"], "orientation": "counterclockwise"}
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
    once = {c: cell_ring(c) for c in pd.unique(table["cell"].astype(str))}
    wkb = {c: polygon_wkb(r) for c, r in once.items()}
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
