"""Ingestion: column mapping, counted cleaning, timestamps, chunking, file formats, bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpopt import DpoptInputError
from dpopt.records.ingest import IngestReport, read_records
from dpopt.records.options import InputOptions


def _read(source, **kw):
    chunks, reps = zip(*read_records(source, **kw))
    return chunks, sum(reps, IngestReport())


def test_clean_input_kept_entirely(tiny_records):
    chunks, rep = _read(tiny_records, bound=100)
    assert rep.records_read == rep.records_kept == 8
    assert rep.dropped_records == 0 and rep.chunks == 1
    assert list(chunks[0].user) == list(tiny_records.user_id)


def test_missing_fields_counted_per_field_and_once_per_record(tiny_records):
    df = tiny_records.copy()
    df.loc[0, "user_id"] = None
    df.loc[1, "latitude"] = np.nan
    df.loc[1, "value"] = np.nan  # same record: two fields, one dropped record
    df.loc[2, "timestamp"] = "not a time"
    df.loc[3, "value"] = np.inf  # a number out of range: clipped, not missing
    df.loc[4, "user_id"] = "   "
    chunks, rep = _read(df, bound=100)
    assert rep.dropped_missing == 4
    assert rep.missing == {"user_id": 2, "latitude": 1, "longitude": 0, "timestamp": 1, "value": 1}
    assert rep.clipped == 1
    assert rep.records_kept == 4 == len(chunks[0])
    assert rep.records_read == rep.records_kept + rep.dropped_records


def test_invalid_coordinates_dropped(tiny_records):
    df = tiny_records.copy()
    df.loc[0, "latitude"] = 91.0
    df.loc[1, "longitude"] = -180.5
    _, rep = _read(df, bound=100)
    assert rep.invalid_coordinates == 2 and rep.records_kept == 6


@pytest.mark.parametrize("policy,kept,clipped,dropped", [("clip", 8, 2, 0), ("drop", 6, 0, 2)])
def test_out_of_range_clip_or_drop(tiny_records, policy, kept, clipped, dropped):
    df = tiny_records.copy()
    df.loc[0, "value"] = -5.0
    df.loc[1, "value"] = 150.0
    chunks, rep = _read(df, bound=100, out_of_range=policy)
    assert (rep.records_kept, rep.clipped, rep.dropped_out_of_range, rep.out_of_range) == (kept, clipped, dropped, 2)
    assert rep.out_of_range_policy == policy
    v = chunks[0].value
    assert v.min() >= 0 and v.max() <= 100
    if policy == "clip":
        assert v[0] == 0.0 and v[1] == 100.0


def test_out_of_range_error_names_the_bound_and_no_value(tiny_records):
    """The message names the public bound, never a private value or count."""
    df = tiny_records.copy()
    df.loc[[0, 1], "value"] = [150.0, 173.25]
    with pytest.raises(DpoptInputError, match=r"values outside \[0, bound\] = \[0, 100\]") as info:
        _read(df, bound=100, out_of_range="error")
    assert "150" not in str(info.value) and "173" not in str(info.value) and " 2 " not in str(info.value)


def test_timestamps_iso_offsets_epoch_and_text_epoch(tiny_records):
    want = pd.Timestamp("2020-01-01T10:05:00Z").value
    for ts, zone in [("2020-01-01T11:05:00+01:00", None), ("2020-01-01T10:05:00", "UTC"),
                     ("2020-01-01 10:05:00Z", None), ("2020-01-01T04:05:00", "America/Chicago")]:
        df = tiny_records.iloc[:1].copy()
        df["timestamp"] = [ts]
        chunks, _ = _read(df, bound=100, timezone=zone)
        assert chunks[0].timestamp[0] == want, ts
    sec = want // 1_000_000_000
    for col, unit in [([sec], "s"), ([sec * 1000], "ms"), ([str(sec)], "s")]:
        df = tiny_records.iloc[:1].copy()
        df["timestamp"] = col
        chunks, _ = _read(df, bound=100, timestamp_unit=unit)
        assert chunks[0].timestamp[0] == want


def test_float_user_ids_match_integer_labels(tiny_records):
    df = tiny_records.copy()
    df["user_id"] = [7.0, 7.0, 8.0, 7.0, np.nan, 8.0, 8.0, 9.0]
    chunks, rep = _read(df, bound=100)
    assert set(chunks[0].user) == {"7", "8", "9"} and rep.missing["user_id"] == 1


def test_chunked_equals_whole(records):
    whole, rep1 = _read(records, bound=100)
    parts, rep2 = _read(records, bound=100, chunksize=333)
    assert rep2.chunks == -(-len(records) // 333)
    assert rep1.records_kept == rep2.records_kept
    np.testing.assert_array_equal(whole[0].value, np.concatenate([c.value for c in parts]))
    np.testing.assert_array_equal(whole[0].timestamp, np.concatenate([c.timestamp for c in parts]))


def test_csv_and_parquet_and_mapped_names(tmp_path, records):
    df = records.rename(columns={"user_id": "vehicle", "value": "speed"})
    df["timestamp"] = df["timestamp"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    csv = tmp_path / "r.csv.gz"
    df.to_csv(csv, index=False)
    pq = tmp_path / "r.parquet"
    df.to_parquet(pq)
    cols = {"user_id": "vehicle", "value": "speed"}
    base, _ = _read(records, bound=100)
    for src in (csv, pq):
        chunks, rep = _read(src, bound=100, columns=cols, chunksize=500)
        assert rep.records_kept == len(records) and rep.chunks == 4
        np.testing.assert_array_equal(np.concatenate([c.value for c in chunks]), base[0].value)
        np.testing.assert_array_equal(np.concatenate([c.timestamp for c in chunks]), base[0].timestamp)
        assert list(np.concatenate([c.user for c in chunks])) == list(base[0].user)


def test_bad_value_text_counted_not_raised(tmp_path, tiny_records):
    df = tiny_records.copy()
    df["value"] = df["value"].astype(object)
    df.loc[2, "value"] = "fast"
    path = tmp_path / "bad.csv"
    df.to_csv(path, index=False)
    _, rep = _read(path, bound=100)
    assert rep.missing["value"] == 1 and rep.records_kept == 7


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"columns": {"user_id": "who"}}, r"lacks the column\(s\) user_id -> 'who'"),
        ({"columns": {"speed": "value"}}, r"looks like \{your_column: dpopt_name\}: pass \{'value': 'speed'\}"),
        ({"columns": {"speed": "velocity"}}, r"`columns` keys must be among"),
        ({"columns": ["user_id"]}, r"`columns` must be a mapping"),
        ({"out_of_range": "ignore"}, r"`out_of_range` must be one of"),
        ({"chunksize": 0}, r"`chunksize` must be an integer >= 1"),
        ({"bound": -1}, r"`bound` must be a positive finite number"),
        ({"timestamp_unit": "h"}, r"`timestamp_unit` must be one of"),
    ],
)
def test_bad_options(tiny_records, kwargs, match):
    opts = {"bound": 100, **kwargs}
    with pytest.raises(DpoptInputError, match=match):
        _read(tiny_records, **opts)


def test_bad_sources(tmp_path):
    with pytest.raises(DpoptInputError, match="not found"):
        _read(tmp_path / "nope.csv", bound=1)
    with pytest.raises(DpoptInputError, match=r"must be a DataFrame \(pandas, polars or GeoPandas\) or a path"):
        _read(42, bound=1)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(DpoptInputError, match="0 bytes"):  # no header row: the columns cannot be checked
        list(read_records(empty, bound=1))
    junk = tmp_path / "junk.parquet"
    junk.write_text("not parquet")
    with pytest.raises(DpoptInputError, match="not readable Parquet"):
        _read(junk, bound=1)


def test_public_occupancy_publishes_one_summary_however_the_input_is_chunked(tiny_records):
    """The number of chunks read is a fact of the input's layout (one file or four, --chunksize), not
    of the data: summary.json carried it under public-occupancy, so one data set gave different
    published folders. It stays in the owner-only diagnostics (Release.ingest)."""
    from dpopt.release import NoiseOptions, PerGridBudget, PublicOccupancyOptions, release
    from dpopt.writers.release_folder import published_summary

    runs = [release(tiny_records, bound=100, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(plan="baseline"),
                    noise=NoiseOptions(seed=1), io=InputOptions(chunksize=size)) for size in (1, 100)]
    assert [r.ingest.chunks for r in runs] == [len(tiny_records), 1]
    a, b = (published_summary(r) for r in runs)
    assert "chunks" not in a["ingest"] and a == b


@pytest.mark.parametrize("leave_out", [0, 1, 2])
def test_the_diagnostics_count_the_records_the_public_list_leaves_out(tiny_records, leave_out):
    """Records whose grid is not on the public list are neither measured nor mentioned by the release
    (an outside check's EV chargers: 416 records jittered into unlisted cells, silently); the owner-only
    diagnostics count them, by brute force over the records here, and the published summary does not."""
    import h3

    from dpopt.release import Budget, NoiseOptions, UserOptions, release
    from dpopt.writers.release_folder import published_summary

    cells = [h3.latlng_to_cell(a, b, 7) for a, b in zip(tiny_records.latitude, tiny_records.longitude)]
    slots = pd.to_datetime(tiny_records.timestamp, utc=True).dt.floor("1h").dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    grids = pd.DataFrame({"cell": cells, "slot": slots})
    listed = grids.drop_duplicates().reset_index(drop=True).iloc[leave_out:]
    on = grids.merge(listed.assign(on=True), how="left", on=["cell", "slot"])["on"].notna().to_numpy()
    r = release(tiny_records, bound=100, budget=Budget(epsilon_total=5.0), model=UserOptions(partitions=listed),
                noise=NoiseOptions(seed=1))
    assert r.diagnostics["partition_list"] == {
        "records_on_list": int(on.sum()), "records_off_list": int((~on).sum()),
        "grids_off_list": int(grids[~on].drop_duplicates().shape[0])}
    assert ((~on).sum() > 0) == (leave_out > 0)  # the cases do leave records out
    assert "partition_list" not in published_summary(r)
