"""Ingestion refuses or explains what would otherwise go wrong silently: a refused share of dropped
rows, a wrong timestamp unit named, ±inf clipped like any out-of-range number (not dropped as
missing), a --sep hint, a diagnosis of timestamps that parse to nothing, ``columns=`` given the
other way round (our name → theirs is the rule) named as such instead of accepted as unknown keys,
and the release's --help showing the default columns."""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
import pytest

from dpopt import DpoptInputError
from dpopt.records import GridOptions, InputOptions, contributions, read_options_from_args

from .conftest import BOUND, random_records

GRID = GridOptions(7, "1h")


def _run(source, **read):
    return contributions(source, GRID, InputOptions(**read), bound=BOUND)


def test_unparseable_values_are_counted_and_refused_beyond_the_share(records):
    bad = records.copy().astype({"value": object})
    bad.loc[bad.index[::10], "value"] = "n/a"  # 10 % non-numeric
    with pytest.raises(DpoptInputError, match=r"--max-dropped 0.01\): 300 of 3000 records \(10.00 %\).*"
                                               r"unparseable value: 300"):
        _run(bad)
    agg, rep = _run(bad, max_dropped=0.1)
    assert rep.unparseable["value"] == 300 == rep.dropped_records and rep.records_kept == 2700
    assert agg.n_records == 2700
    assert rep.dropped_by_cause() == {"unparseable value": 300}


def test_one_instant_written_as_epoch_text_float_or_iso_is_one_record_key(records):
    """Fractional epoch seconds or milliseconds are read to the microsecond: "1441515647.123" (text)
    and its float64 are the instant of "…47.123Z". Read through float64 at nanoseconds they were
    1441515647122999907 ns, and the keyed sample (which hashes the instant) kept other records: all
    3,435 means of the embedded day moved (up to 4.3 km/h) with how the time was written."""
    rng = np.random.default_rng(2)
    ns = pd.to_datetime(records["timestamp"], utc=True).dt.as_unit("ns").astype("int64").to_numpy() // 10**9 * 10**9
    ns = ns + rng.integers(0, 1000, ns.size) * 10**6  # whole milliseconds
    iso = records.assign(timestamp=pd.to_datetime(ns, utc=True).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
    secs = ns // 10**9
    text = records.assign(timestamp=[f"{q}.{r // 10**6:03d}" for q, r in zip(secs, ns - secs * 10**9)])
    flt = records.assign(timestamp=ns / 1e9)
    millis = records.assign(timestamp=ns / 1e6)
    from dpopt.records.sample_key import SampleKey

    runs = [contributions(frame, GRID, InputOptions(timestamp_unit=unit), bound=BOUND, first_records=64,
                          sample_key=SampleKey.from_seed(1))[0]
            for frame, unit in ((iso, "s"), (text, "s"), (flt, "s"), (millis, "ms"))]
    assert runs[0].samples.keys is not None
    for agg in runs[1:]:
        np.testing.assert_array_equal(agg.samples.keys, runs[0].samples.keys)
        np.testing.assert_array_equal(agg.samples.values, runs[0].samples.values)


def test_integer_epoch_nanoseconds_are_read_exactly(records):
    """Integer epochs in ns (or µs) were read through float64, which rounds an epoch in ns by up to
    256 ns: 1441519199999999999 became …200000000000, the next slot. As int64, as text or as ISO with
    nine decimals, one instant is one record key."""
    from dpopt.records.sample_key import SampleKey

    rng = np.random.default_rng(3)
    ns = pd.to_datetime(records["timestamp"], utc=True).dt.as_unit("ns").astype("int64").to_numpy()
    ns = ns // 10**9 * 10**9 + rng.integers(0, 10**9, ns.size)  # every nanosecond digit used
    ns[: ns.size // 3] = ns[: ns.size // 3] // 3_600_000_000_000 * 3_600_000_000_000 + 3_599_999_999_999  # 1 ns before an hour
    iso = records.assign(timestamp=[f"{pd.Timestamp(v, tz='UTC').strftime('%Y-%m-%dT%H:%M:%S')}.{v % 10**9:09d}Z" for v in ns])
    forms = ((iso, "s"), (records.assign(timestamp=ns), "ns"), (records.assign(timestamp=[str(v) for v in ns]), "ns"))
    runs = [contributions(frame, GRID, InputOptions(timestamp_unit=unit), bound=BOUND, first_records=64,
                          sample_key=SampleKey.from_seed(1))[0] for frame, unit in forms]
    for agg in runs[1:]:
        np.testing.assert_array_equal(agg.slots, runs[0].slots)
        np.testing.assert_array_equal(agg.samples.keys, runs[0].samples.keys)


def test_a_wrong_timestamp_unit_is_refused_naming_the_flag(records):
    secs = ((pd.to_datetime(records["timestamp"]) - pd.Timestamp(0, tz="UTC")) // pd.Timedelta("1s")).to_numpy()
    as_ms = records.assign(timestamp=secs)  # seconds read as milliseconds: January 1970
    with pytest.raises(DpoptInputError, match=r"--timestamp-unit \(now 'ms'\) or widen --time-window"):
        _run(as_ms, timestamp_unit="ms")
    agg, rep = _run(as_ms, timestamp_unit="ms", time_window=(1960, 2100))  # widened: accepted
    assert rep.outside_time_window == 0 and agg.n_records == len(records)
    assert pd.Timestamp(int(agg.slots.min()), tz="UTC").year == 1970
    agg_s, rep_s = _run(as_ms, timestamp_unit="s")
    assert rep_s.outside_time_window == 0 and agg_s.n_records == len(records)


def test_a_few_implausible_timestamps_are_dropped_and_counted(records):
    odd = records.copy()
    odd.loc[odd.index[:3], "timestamp"] = "1970-01-01T00:00:00Z"
    agg, rep = _run(odd)
    assert rep.outside_time_window == 3 and agg.n_records == len(records) - 3
    assert rep.as_dict()["time_window"] == ["1990-01-01T00:00:00Z", "2100-01-01T00:00:00Z"]


def test_a_timestamp_column_that_parses_to_nothing_names_it_and_shows_two_values(records):
    bad = records.rename(columns={"timestamp": "when"}).assign(when=[f"day {i}" for i in range(len(records))])
    with pytest.raises(DpoptInputError, match=r"column 'when' \(the timestamp\) parses to no timestamp "
                                               r"\(e.g. 'day 0', 'day 1'\)"):
        _run(bad, columns={"timestamp": "when"})


@pytest.mark.parametrize("inf", [np.inf, -np.inf])
def test_infinite_values_are_out_of_range_like_any_number(records, inf):
    """Under the clip policy ±inf is clipped (the counts do not change), as 1e9 is."""
    big = records.copy()
    big.loc[big.index[:5], "value"] = 1e9 if inf > 0 else -1e9
    inf_frame = records.copy()
    inf_frame.loc[inf_frame.index[:5], "value"] = inf
    a, ra = _run(big)
    b, rb = _run(inf_frame)
    assert np.array_equal(a.count, b.count) and np.array_equal(a.sum, b.sum)
    assert rb.clipped == ra.clipped and rb.dropped_records == 0
    _, rd = _run(inf_frame, out_of_range="drop", max_dropped=0.5)
    assert rd.dropped_out_of_range == ra.clipped
    with pytest.raises(DpoptInputError, match="outside \\[0, bound\\]"):
        _run(inf_frame, out_of_range="error")


def test_semicolon_file_gets_a_sep_hint_and_reads_with_sep(tmp_path, records):
    path = tmp_path / "r.csv"
    records.to_csv(path, sep=";", index=False)
    with pytest.raises(DpoptInputError, match=r"looks ';'-separated: pass sep=';' \(CLI: --sep ';'\)"):
        _run(path)
    agg, _ = _run(path, sep=";")
    assert agg.n_records == len(records)


def test_columns_given_the_other_way_round_names_both_forms(records):
    frame = records.rename(columns={"user_id": "vehicle"})
    with pytest.raises(DpoptInputError, match=r"maps \{dpopt_name: your_column\}.*got \{'vehicle': 'user_id'\}.*"
                                               r"pass \{'user_id': 'vehicle'\}"):
        _run(frame, columns={"vehicle": "user_id"})
    agg, _ = _run(frame, columns={"user_id": "vehicle"})
    assert agg.n_records == len(records)


@pytest.mark.parametrize("kwargs,match", [
    ({"sep": ";;"}, "`sep` must be one character"),
    ({"max_dropped": 1.5}, "`max_dropped`"),
    ({"max_dropped": True}, "`max_dropped`"),
    ({"time_window": (2100, 1990)}, "START < END"),
    ({"time_window": ("soon", 2100)}, "`time_window` must be a year or an ISO date"),
    ({"time_window": (1990,)}, "two years or dates"),
    ({"chunksize": 0}, "`chunksize`"),
    ({"timestamp_unit": "h"}, "`timestamp_unit`"),
    ({"out_of_range": "keep"}, "`out_of_range`"),
])
def test_read_options_validate(kwargs, match):
    with pytest.raises(DpoptInputError, match=match):
        InputOptions(**kwargs)


def test_grid_spec_validates_and_normalises():
    assert GridOptions(9, 900).slot == "15min" and GridOptions(9, "15min").slot_ns == 900 * 10**9
    with pytest.raises(DpoptInputError, match="h3_resolution"):
        GridOptions(16)
    with pytest.raises(DpoptInputError, match="slot"):
        GridOptions(7, "0.5s")


def test_release_help_shows_the_default_columns_and_new_flags():
    from dpopt.cli.release import _add_input_arguments

    parser = argparse.ArgumentParser(prog="dpopt release")
    _add_input_arguments(parser)
    text = " ".join(parser.format_help().split())
    for flag, name in (("--user-col", "user_id"), ("--lat-col", "latitude"), ("--lng-col", "longitude"),
                       ("--time-col", "timestamp"), ("--value-col", "value")):
        assert f"{flag} NAME" in text and f"(default: {name})" in text
    assert "--sep" in text and "--max-dropped" in text and "--time-window" in text
    args = parser.parse_args(["--user-col", "vehicle", "--sep", ";", "--max-dropped", "0.05",
                              "--time-window", "1970,2100"])
    read = read_options_from_args(args)
    assert read.column_map().user_id == "vehicle" and read.sep == ";" and read.max_dropped == 0.05
    assert read.time_window == ("1970-01-01T00:00:00Z", "2100-01-01T00:00:00Z")
    assert read_options_from_args(parser.parse_args(["--time-window", "none"])).time_window is None


def test_csv_reads_with_other_separators(tmp_path):
    frame = random_records(3, n=200)
    frame.to_csv(tmp_path / "r.tsv", sep="\t", index=False)
    with pytest.raises(DpoptInputError, match=r"pass sep='\\t' \(CLI: --sep '\\t'\)"):
        _run(tmp_path / "r.tsv")
    assert _run(tmp_path / "r.tsv", sep="\t")[0].n_records == 200
    assert _run(tmp_path / "r.tsv", sep="\\t")[0].n_records == 200  # as typed on the command line


@pytest.mark.parametrize("write, expect", [
    (lambda df, p: df.to_parquet(p), r"is not a CSV: it is a Parquet file \(it starts with PAR1\): give it the suffix "
                                     r"\.parquet"),
    (lambda df, p: df.to_csv(p, index=False, compression="gzip"), r"is not a CSV: it is gzip-compressed: give it the "
                                                                  r"suffix \.csv\.gz"),
])
def test_a_binary_file_without_its_suffix_is_named_for_what_it_is(tmp_path, write, expect):
    """A Parquet or gzip file without its suffix went to the CSV reader: the Parquet one was refused
    with its binary header shown as "available columns: 'PAR1…'", the gzip one as "not UTF-8". The
    first bytes say what it is; a .csv.gz file (the compressor's bytes by name) still reads."""
    from dpopt.records.ingest import read_records

    df = pd.DataFrame({"user_id": ["a", "b"], "latitude": [30.27, 30.28], "longitude": [-97.74, -97.74],
                       "timestamp": ["2020-01-01T10:00:00Z"] * 2, "value": [1.0, 2.0]})
    bare = tmp_path / "records"
    write(df, bare)
    with pytest.raises(DpoptInputError, match=expect):
        list(read_records(bare, bound=10))
    gz = tmp_path / "records.csv.gz"
    df.to_csv(gz, index=False, compression="gzip")
    assert sum(len(c) for c in read_records(gz, bound=10)) == 2
