"""Reading hardening through the public doors (``dpopt.cli.main`` and :func:`dpopt.release.release`):
text ids that look like "missing" are users, id kinds never merge across files, a column read twice
is refused, only files with a CSV/Parquet suffix are read, naive times need a zone, and polars and
GeoPandas frames are read like pandas ones.

Each test fails on the code before the fix (the behaviour quoted in its docstring).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpopt import DpoptInputError
from dpopt.cli import main
from dpopt.privacy.contributions import InputOptions
from dpopt.release import NoiseOptions, PublicOccupancyOptions, PerGridBudget, release

U = 50.0
LATS = 30.20 + 0.05 * np.arange(4)
NA_TEXTS = ["NA", "null", "None", "nan", "N/A", "#N/A", "NULL", "<NA>", "n/a", "-NaN", "1.#IND", "NaN", "n/a ",
            "-nan", "#NA", "N/A N/A", "#N/A N/A", "-1.#QNAN", "1.#QNAN", "-1.#IND"]


def _frame(users, n_per: int = 3, seed: int = 0, t0: str = "2020-01-01T10:00:00Z") -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.asarray(users, dtype=object), n_per)
    n = ids.size
    times = pd.Timestamp(t0) + pd.to_timedelta(rng.integers(0, 7200, n), unit="s")
    return pd.DataFrame({"user_id": ids, "latitude": LATS[rng.integers(0, 4, n)], "longitude": -97.75,
                         "timestamp": times.strftime("%Y-%m-%dT%H:%M:%SZ"), "value": rng.uniform(0, U, n).round(2)})


def _po(records, **io) -> object:
    """The fast public-occupancy release (per-grid ε, greedy plan): its summary counts users."""
    return release(records, bound=U, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(plan="greedy"),
                   io=InputOptions(**io), noise=NoiseOptions(seed=3))


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["release", *argv, "--privacy", "public-occupancy", "--bound", str(U), "--epsilon", "1", "--plan",
                 "greedy", "--quiet", "--no-map", "--json"])
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------------------------------------- item 4


def test_text_ids_that_look_missing_are_users(tmp_path, capsys):
    """Before: NA, null, None, nan ... as user ids were dropped as missing (20 ids became 9 users)."""
    assert len(set(NA_TEXTS)) == 20
    frame = _frame(NA_TEXTS)
    path = tmp_path / "r.csv"
    frame.to_csv(path, index=False)
    code, out, err = _cli(capsys, str(path), "--out", str(tmp_path / "o"))
    assert code == 0, err
    assert json.loads(out)["users"] == 20 and json.loads(out)["dropped_records"] == 0
    assert _po(path).summary.users == 20
    # only an empty field is missing
    frame.loc[0, "user_id"] = ""
    frame.to_csv(path, index=False)
    assert _po(path, max_dropped=1.0).ingest.missing["user_id"] == 1


# ------------------------------------------------------------------------------- item 5


def test_id_kinds_changing_across_parquet_files_are_refused(tmp_path, capsys):
    """Before: the integer 7 in one Parquet file and the text "7" in another became one user."""
    folder = tmp_path / "pq"
    folder.mkdir()
    a = _frame([7, 8], seed=1)
    a["user_id"] = a["user_id"].astype(np.int64)
    b = _frame(["7", "9"], seed=2)
    a.to_parquet(folder / "a.parquet")
    b.to_parquet(folder / "b.parquet")
    with pytest.raises(DpoptInputError, match="`user` ids are number in some chunks or files and text in others"):
        _po(folder)
    code, _, err = _cli(capsys, str(folder), "--out", str(tmp_path / "o"))
    assert code == 2 and "number in some chunks or files and text" in err and err.count("\n") == 1
    # one kind in every file stays accepted (and 7 in one file is 7 in the other: one user)
    b["user_id"] = [7, 7, 7, 9, 9, 9]
    b.to_parquet(folder / "b.parquet")
    assert _po(folder).summary.users == 3


def test_id_kinds_changing_across_chunks_of_a_frame_are_refused():
    frame = pd.concat([_frame([7, 8]), _frame(["7"])], ignore_index=True)
    with pytest.raises(DpoptInputError, match="`user` ids are number in some chunks"):
        _po(frame, chunksize=6)  # the first chunk holds numbers only, the second text only


# ------------------------------------------------------------------------------- item 7


def test_one_column_for_two_fields_is_refused_before_reading(tmp_path, capsys):
    """Before: --lng-col latitude gave "unexpected KeyError"."""
    path = tmp_path / "r.csv"
    _frame(["a", "b"]).to_csv(path, index=False)
    code, _, err = _cli(capsys, str(path), "--lng-col", "latitude", "--out", str(tmp_path / "o"))
    assert code == 2 and err.count("\n") == 1
    assert "--lat-col latitude" in err and "--lng-col latitude" in err
    with pytest.raises(DpoptInputError, match="reads latitude and longitude from one column 'latitude'"):
        InputOptions(columns={"longitude": "latitude"})


def test_duplicated_column_names_are_refused(tmp_path, capsys):
    """Before: a DataFrame gave a raw TypeError; a CSV header silently used the first copy."""
    frame = _frame(["a", "b"])
    dup = pd.concat([frame, frame[["value"]].rename(columns={"value": "value"}) * 2], axis=1)
    with pytest.raises(DpoptInputError, match="has the column 'value' more than once"):
        _po(dup)
    path = tmp_path / "r.csv"
    path.write_text("user_id,latitude,longitude,timestamp,value,value\n"
                    + "".join(f"{r.user_id},{r.latitude},{r.longitude},{r.timestamp},{r.value},1\n"
                              for r in frame.itertuples()))
    code, _, err = _cli(capsys, str(path), "--out", str(tmp_path / "o"))
    assert code == 2 and "has the column 'value' more than once" in err and err.count("\n") == 1


# ------------------------------------------------------------------------------- item 9


def test_only_files_with_a_csv_suffix_are_read_and_named(tmp_path, capsys):
    """Before: day.csv.bak in the folder was read too (every record counted twice)."""
    folder = tmp_path / "data"
    folder.mkdir()
    frame = _frame(["a", "b", "c"])
    frame.to_csv(folder / "day.csv", index=False)
    frame.to_csv(folder / "day.csv.bak", index=False)
    frame.to_csv(folder / "notes.csv.old", index=False)
    frame.iloc[:3].to_csv(folder / "more.csv.gz", index=False)
    code, out, err = _cli(capsys, str(folder), "--out", str(tmp_path / "o"))
    assert code == 0, err
    assert json.loads(out)["ingest"]["records_read"] == len(frame) + 3
    assert f"read 2 files: {folder / 'day.csv'}, {folder / 'more.csv.gz'}" in err
    assert str(folder) not in (tmp_path / "o" / "summary.json").read_text()  # the holder's paths: never published
    assert json.loads((tmp_path / "o.diagnostics" / "diagnostics.json").read_text())["ingest"]["files"] == [
        str(folder / "day.csv"), str(folder / "more.csv.gz")]
    r = _po(folder)
    assert r.ingest.records_read == len(frame) + 3 and len(r.ingest.files) == 2


def test_parquet_folder_reads_parquet_files_only(tmp_path):
    folder = tmp_path / "pq"
    (folder / "part=1").mkdir(parents=True)
    frame = _frame(["a", "b"])
    frame.to_parquet(folder / "part=1" / "x.parquet")
    (folder / "README.md").write_text("not data")
    frame.to_csv(folder / "part=1" / "copy.csv.bak", index=False)
    r = _po(folder)
    assert r.ingest.records_read == len(frame) and [Path(f).name for f in r.ingest.files] == ["x.parquet"]


# ------------------------------------------------------------------------------- item 10


def test_naive_times_are_refused_without_a_zone_and_read_in_it(tmp_path, capsys):
    """Before: naive timestamps were taken as UTC without a word."""
    frame = _frame(["a", "b", "c"])
    utc = pd.to_datetime(frame["timestamp"], utc=True)
    frame["timestamp"] = utc.dt.tz_convert("America/Chicago").dt.strftime("%Y-%m-%d %H:%M:%S")  # local, naive
    path = tmp_path / "r.csv"
    frame.to_csv(path, index=False)
    code, _, err = _cli(capsys, str(path), "--out", str(tmp_path / "o"))
    assert code == 2 and "--timezone" in err and err.count("\n") == 1
    with pytest.raises(DpoptInputError, match="timezone='Area/City'"):
        _po(path)
    ref = _po(_frame(["a", "b", "c"]))
    for got in (_po(path, timezone="America/Chicago"), _po(frame.assign(timestamp=pd.to_datetime(frame["timestamp"])),
                                                           timezone="America/Chicago")):
        assert got.table["cell"].tolist() == ref.table["cell"].tolist()
        assert got.table["n_records"].tolist() == ref.table["n_records"].tolist()  # the same instants
        assert pd.to_datetime(got.table["slot"], utc=True).tolist() == pd.to_datetime(ref.table["slot"], utc=True).tolist()
    code, _, err = _cli(capsys, str(path), "--timezone", "Mars/Olympus", "--out", str(tmp_path / "o"))
    assert code == 2 and "`--timezone` must be an IANA time zone" in err


def test_compact_dates_and_mixed_iso_unix_columns(tmp_path):
    """Before: 20150906 was read as Unix seconds (1970: dropped), and in a column mixing ISO and
    Unix times the Unix rows vanished."""
    frame = _frame(["a", "b"])
    unix = (pd.to_datetime(frame["timestamp"], utc=True) - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(seconds=1)
    mixed = frame.assign(timestamp=[str(u) if i % 2 else t for i, (u, t) in enumerate(zip(unix, frame["timestamp"]))])
    pd.testing.assert_frame_equal(_po(mixed).table, _po(frame).table)
    compact = frame.assign(timestamp="20150906")
    path = tmp_path / "c.csv"
    compact.to_csv(path, index=False)
    r = _po(path, timezone="UTC")
    assert r.ingest.records_kept == len(frame)
    assert set(r.table["slot"]) == {"2015-09-06T00:00:00+00:00"}  # the zone named: its offset written
    with pytest.raises(DpoptInputError, match="without a UTC offset"):
        _po(path)


# ------------------------------------------------------------------------------- other frame types


def test_polars_frames_are_read_like_pandas():
    """Before: "must be a pandas DataFrame...; got DataFrame"."""
    import polars as pl

    frame = _frame(["a", "b", "c"])
    ref = _po(frame).table
    pd.testing.assert_frame_equal(_po(pl.from_pandas(frame)).table, ref)
    pd.testing.assert_frame_equal(_po(pl.from_pandas(frame).lazy()).table, ref)


def test_geodataframe_point_geometry_gives_latitude_and_longitude():
    """Before: a GeoDataFrame's geometry was ignored (no latitude column: refused)."""
    import geopandas as gpd

    frame = _frame(["a", "b", "c"])
    ref = _po(frame).table
    geo = gpd.GeoDataFrame(frame.drop(columns=["latitude", "longitude"]),
                           geometry=gpd.points_from_xy(frame["longitude"], frame["latitude"]), crs=4326)
    pd.testing.assert_frame_equal(_po(geo).table, ref)
    projected = geo.to_crs(3857)  # metres: converted back to WGS84 degrees
    got = _po(projected).table
    assert got["cell"].tolist() == ref["cell"].tolist() and got["n_records"].tolist() == ref["n_records"].tolist()
    lines = gpd.GeoDataFrame(frame.drop(columns=["latitude", "longitude"]),
                             geometry=projected.geometry.buffer(10.0), crs=3857)
    with pytest.raises(DpoptInputError, match="geometry must be points"):
        _po(lines)


# ------------------------------------------------------------------------------- item 8


def test_out_of_range_refusal_prints_no_private_value(tmp_path, capsys):
    """Before: --out-of-range error printed the offending values' count, min and max on stderr."""
    frame = _frame(["a", "b", "c"])
    frame.loc[[0, 4], "value"] = [61.75, 987.5]
    path = tmp_path / "r.csv"
    frame.to_csv(path, index=False)
    code, _, err = _cli(capsys, str(path), "--out-of-range", "error", "--out", str(tmp_path / "o"))
    assert code == 2 and "values outside [0, bound] = [0, 50]" in err
    with pytest.raises(DpoptInputError) as info:
        _po(frame, out_of_range="error")
    for text in (err, str(info.value)):
        assert not any(v in text for v in ("61.75", "987.5", "987", "61.8", " 2 value")), text
