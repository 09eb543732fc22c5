"""release.geojson and release.parquet (GeoParquet) as a GIS user loads them: geopandas reads both,
every release.csv column and value comes back, and each row's polygon is its H3 cell (checked
against h3's own GeoJSON export and the cell's centre, not against the writer's code)."""

from __future__ import annotations

import json

import geopandas as gpd
import h3
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import shapely.geometry
import shapely.wkb

from dpopt.writers.geo import GEO_FILES, cell_ring, polygon_wkb, write_geo_files
from dpopt.writers.hooks import extra_files

from .conftest import load, multires


def _same(a: pd.Series, b: pd.Series) -> bool:
    """Equal as published: numbers to 1e-12 relative, text and booleans exactly, NaN ≡ missing,
    times as the same instant."""
    if isinstance(b.dtype, pd.DatetimeTZDtype):  # GDAL reads ISO 8601 text as a time: the same instant
        t = pd.to_datetime(a, utc=True)
        return bool(((t == b) | (t.isna() & b.isna())).all())
    if pd.api.types.is_numeric_dtype(a) and not pd.api.types.is_bool_dtype(a):
        return bool(np.allclose(a.to_numpy(float), pd.to_numeric(b).to_numpy(float), rtol=1e-12, equal_nan=True))
    return [None if pd.isna(x) else x for x in a] == [None if pd.isna(x) else x for x in b]


def _reference_polygon(cell: str) -> shapely.geometry.Polygon:
    return shapely.geometry.shape(h3.cells_to_geo([cell]))


@pytest.mark.parametrize("case", ["occupancy", "user", "multires", "adaptive"])
def test_geojson_and_geoparquet_load_in_geopandas_with_every_column(tmp_path, case):
    table, _summary = multires() if case == "multires" else load(case)
    table.to_csv(tmp_path / "release.csv", index=False)
    names = write_geo_files(tmp_path)
    assert names == {"geojson": GEO_FILES[0], "geoparquet": GEO_FILES[1]}
    csv = pd.read_csv(tmp_path / "release.csv")
    for name in GEO_FILES:
        gdf = gpd.read_file(tmp_path / name) if name.endswith("geojson") else gpd.read_parquet(tmp_path / name)
        assert gdf.crs is not None and gdf.crs.to_string() in ("OGC:CRS84", "EPSG:4326")  # longitude, latitude
        assert list(gdf.columns) == list(csv.columns) + ["geometry"]
        assert len(gdf) == len(csv)
        for col in csv.columns:  # JSON has no infinity: an infinite value of release.csv is null there
            want = csv[col].replace([np.inf, -np.inf], np.nan) if name.endswith("geojson") else csv[col]
            assert _same(want, gdf[col]), (name, col)
        for cell, geom in zip(csv["cell"], gdf.geometry):
            lat, lng = h3.cell_to_latlng(cell)
            ref = _reference_polygon(cell)
            assert geom.geom_type == "Polygon" and geom.exterior.is_ccw
            assert geom.symmetric_difference(ref).area <= 1e-9 * ref.area
            assert geom.contains(shapely.geometry.Point(lng, lat))


def test_geo_metadata_and_wkb(tmp_path):
    table, _ = load("user")
    table.to_csv(tmp_path / "release.csv", index=False)
    write_geo_files(tmp_path)
    meta = json.loads(pq.read_schema(tmp_path / "release.parquet").metadata[b"geo"])
    assert meta["version"] == "1.0.0" and meta["primary_column"] == "geometry"
    col = meta["columns"]["geometry"]
    assert col["encoding"] == "WKB" and col["geometry_types"] == ["Polygon"]
    rings = np.concatenate([cell_ring(c) for c in table["cell"]])
    assert col["bbox"] == [rings[:, 0].min(), rings[:, 1].min(), rings[:, 0].max(), rings[:, 1].max()]
    # the hand-written WKB reads back as the same polygon in shapely
    ring = cell_ring(table["cell"].iloc[0])
    assert shapely.wkb.loads(polygon_wkb(ring)).equals(shapely.geometry.Polygon(ring))


@pytest.mark.parametrize("cell", [h3.latlng_to_cell(0.0, 179.999, 4), h3.get_pentagons(3)[0]])
def test_ring_closed_ccw_and_continuous_across_the_antimeridian(cell):
    ring = cell_ring(cell)
    assert np.array_equal(ring[0], ring[-1])
    assert shapely.geometry.Polygon(ring).exterior.is_ccw
    assert np.ptp(ring[:, 0]) < 5.0  # a small cell: never a band round the globe
    assert len(ring) == len(h3.cell_to_boundary(cell)) + 1


def test_both_folder_writers_publish_the_geo_files(tmp_path):
    table, summary = load("occupancy")
    table.to_csv(tmp_path / "release.csv", index=False)
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    files = extra_files(None, tmp_path, unit="km/h")
    assert {files["geojson"], files["geoparquet"]} == set(GEO_FILES)
    gdf = gpd.read_file(tmp_path / "release.geojson")
    assert len(gdf) == len(table) and (gdf["released"] == table["released"]).all()


def test_geojson_text_is_json_dumps_of_the_collection():
    """geojson_text encodes each distinct cell's geometry once and joins the features by hand: the
    text is exactly json.dumps of the whole collection (NaN and ±inf as null, booleans, strings)."""
    from dpopt.writers.geo import geojson_text

    cells = [h3.latlng_to_cell(30.27, -97.74, 7), h3.latlng_to_cell(30.30, -97.70, 7)]
    table = pd.DataFrame({"cell": [cells[0], cells[1], cells[0]], "slot": ["2024-03-04T00:00:00Z"] * 3,
                          "released": [True, False, True], "mean": [1.5, np.nan, 2.0],
                          "mean_error_bound": [0.25, np.inf, -np.inf], "method": ["crossed", "w\"ith\nheld", "crossed"],
                          "level": [0, 1, 0]})
    props = [{"cell": c, "slot": s, "released": bool(r), "mean": None if not np.isfinite(m) else float(m),
              "mean_error_bound": None if not np.isfinite(b) else float(b), "method": me, "level": int(lv)}
             for c, s, r, m, b, me, lv in zip(*(table[k] for k in table.columns))]
    feats = [{"type": "Feature", "geometry": {"type": "Polygon", "coordinates": [cell_ring(c).tolist()]},
              "properties": p} for c, p in zip(table["cell"], props)]
    assert geojson_text(table) == json.dumps({"type": "FeatureCollection", "features": feats}, allow_nan=False) + "\n"
