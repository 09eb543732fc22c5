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

from dpopt.writers.geo import GEO_FILES, cell_polygons, display_boundary, geometry_wkb, write_geo_files
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
    rings = np.concatenate([r for c in table["cell"] for r in cell_polygons(c)])
    assert col["bbox"] == [rings[:, 0].min(), rings[:, 1].min(), rings[:, 0].max(), rings[:, 1].max()]
    # the hand-written WKB reads back as the same polygon in shapely
    ring = cell_polygons(table["cell"].iloc[0])[0]
    assert shapely.wkb.loads(geometry_wkb([ring])).equals(shapely.geometry.Polygon(ring))


@pytest.mark.parametrize("where", ["antimeridian", "fiji r7", "north pole r5", "south pole r2", "pentagon"])
def test_polygons_are_rfc7946_across_the_antimeridian_and_round_the_poles(where, tmp_path):
    """Cells across ±180° are split into a MultiPolygon within [−180°, 180°] (they spanned −184.5…180 and a
    GIS layer's extent covered the globe); a cell holding a pole is one valid polygon closed along the
    pole (it was a self-intersecting ring, invalid in shapely). Checked against h3: every corner of the
    cell is on the geometry, its centre is inside, a point near the pole is inside a polar cell, and
    geopandas reads the files back."""
    cell = {"antimeridian": h3.latlng_to_cell(0.0, 179.999, 4), "fiji r7": h3.latlng_to_cell(-16.5, 179.9995, 7),
            "north pole r5": h3.latlng_to_cell(89.99, 0.0, 5), "south pole r2": h3.latlng_to_cell(-89.99, 0.0, 2),
            "pentagon": h3.get_pentagons(3)[0]}[where]
    rings = cell_polygons(cell)
    geom = shapely.wkb.loads(geometry_wkb(rings))
    assert geom.is_valid and all(shapely.geometry.Polygon(r).exterior.is_ccw for r in rings)
    assert all(np.array_equal(r[0], r[-1]) for r in rings)
    assert all((-180.0 <= r[:, 0]).all() and (r[:, 0] <= 180.0).all() for r in rings)
    assert (geom.geom_type == "MultiPolygon") == where.startswith(("antimeridian", "fiji"))
    lat, lng = h3.cell_to_latlng(cell)
    assert geom.buffer(1e-9).contains(shapely.geometry.Point(lng, lat))
    for a, b in h3.cell_to_boundary(cell):  # every corner on the geometry (at ±180°: on one side or the other)
        on = [shapely.geometry.Point(x, a) for x in ({b, -b} if abs(abs(b) - 180.0) < 1e-9 else {b})]
        assert any(geom.distance(p) < 1e-9 for p in on)
    if "pole" in where:
        assert geom.contains(shapely.geometry.Point(37.0, 89.999 if "north" in where else -89.999))
    else:  # the parts together are the small cell: no band round the globe
        assert geom.bounds[2] - geom.bounds[0] < 5.0 or sum(p.bounds[2] - p.bounds[0] for p in geom.geoms) < 5.0
    table = pd.DataFrame({"cell": [cell], "slot": ["2024-03-04T00:00:00Z"], "released": [True], "mean": [1.0]})
    table.to_csv(tmp_path / "release.csv", index=False)
    write_geo_files(tmp_path)
    for name in GEO_FILES:
        gdf = gpd.read_file(tmp_path / name) if name.endswith("geojson") else gpd.read_parquet(tmp_path / name)
        assert gdf.geometry.iloc[0].equals(geom) and gdf.geometry.is_valid.all()
    meta = json.loads(pq.read_schema(tmp_path / "release.parquet").metadata[b"geo"])["columns"]["geometry"]
    assert meta["geometry_types"] == [geom.geom_type] and -180.0 <= meta["bbox"][0] <= meta["bbox"][2] <= 180.0


def test_maps_draw_a_cell_across_the_antimeridian_whole_beside_its_neighbours():
    """For drawing, the cells of a map sit on one side of ±180° (report.html drew Fiji's hexagons as a
    band round the world): every outline within 180° of the map's centre and a few km wide."""
    from dpopt.writers.geo import centre_longitude

    cells = sorted(h3.grid_disk(h3.latlng_to_cell(-16.5, 179.9995, 7), 2))
    ref = centre_longitude(cells)
    assert abs(abs(ref) - 180.0) < 0.05
    for c in cells:
        b = display_boundary(c, ref)
        assert np.ptp(b[:, 1]) < 0.1 and (np.abs(b[:, 1] - ref) < 1.0).all()
        assert np.allclose(np.sort(b[:, 0]), np.sort(np.asarray(h3.cell_to_boundary(c))[:, 0]))


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
    feats = [{"type": "Feature", "geometry": {"type": "Polygon", "coordinates": [cell_polygons(c)[0].tolist()]},
              "properties": p} for c, p in zip(table["cell"], props)]
    assert geojson_text(table) == json.dumps({"type": "FeatureCollection", "features": feats}, allow_nan=False) + "\n"


def test_an_all_empty_time_column_is_text_in_geoparquet(tmp_path):
    """release.parquet stored `repeat_every`/`repeat_until` as float columns of NaN where nothing recurs
    (release.csv leaves them empty): a reader joining on them met floats; they are strings with nulls."""
    cells = [h3.latlng_to_cell(30.27, -97.74, 7), h3.latlng_to_cell(30.30, -97.70, 7)]
    pd.DataFrame({"cell": cells, "slot": ["2024-03-04T00:00:00Z"] * 2, "slot_end": ["2024-03-04T01:00:00Z"] * 2,
                  "repeat_every": ["", ""], "repeat_until": ["", ""], "released": [True, True],
                  "mean": [1.0, 2.0]}).to_csv(tmp_path / "release.csv", index=False)
    write_geo_files(tmp_path)
    schema = pq.read_schema(tmp_path / "release.parquet")
    assert all(str(schema.field(c).type) in ("string", "large_string") for c in ("repeat_every", "repeat_until"))
    assert pq.read_table(tmp_path / "release.parquet").column("repeat_every").null_count == 2
