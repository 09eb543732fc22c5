"""Inputs that could give a silent wrong result or a traceback: each is refused in one line or
handled right (the wrong behaviour each test guards against is quoted in its docstring)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dpopt
from dpopt import DpoptInputError
from dpopt.cli import main
from dpopt.records.ingest import IngestReport, read_records
from dpopt.release import InputOptions, NoiseOptions, PerGridBudget, PublicOccupancyOptions, release

ROW = "30.2672,-97.7431,2020-01-01T10:05:00Z,10\n"
HEADER = "user_id,latitude,longitude,timestamp,value\n"


# ------------------------------------------------------------------------------- grid_error_terms


def test_retained_max_zero_with_retained_records_is_refused():
    """Before: Γ* = 0 with R = 3 gave mean sensitivity U·0/3 = 0 (no noise) silently."""
    with pytest.raises(DpoptInputError, match=r"`retained_max` must be >= 1 where `retained_totals` > 0"):
        dpopt.grid_error_terms([3], [3], [0], 1.0, 1.0)
    # Γ* = 0 with R = 0 (everything suppressed) stays legal: error inf, nothing released
    assert np.isinf(dpopt.grid_error_terms([3], [0], [0], 1.0, 1.0).error[0])


@pytest.mark.parametrize("arg,value", [("totals", [np.nan]), ("totals", [3.5]), ("retained_totals", [np.nan]),
                                       ("retained_totals", [2.5]), ("retained_max", [np.nan]),
                                       ("retained_max", [0.5]), ("totals", [1e19])])
def test_grid_error_terms_refuses_non_integer_counts(arg, value):
    """Before: NaN or 2.5 records per grid went into the formulas (NaN or meaningless errors)."""
    kw = {"totals": [3], "retained_totals": [3], "retained_max": [1], **{arg: value}}
    with pytest.raises(DpoptInputError, match=f"`{arg}`"):
        dpopt.grid_error_terms(kw["totals"], kw["retained_totals"], kw["retained_max"], 1.0, 1.0)


def test_grid_error_terms_still_agrees_with_per_user_formulas():
    """Integer-valued floats are accepted and give the per-user sensitivities (brute-force checked
    in test_calculus.py): U·Γ*/R for the mean."""
    t = dpopt.grid_error_terms(np.array([5.0, 4.0]), np.array([4.0, 4.0]), np.array([2.0, 1.0]), 2.0, 1.0)
    np.testing.assert_allclose(t.mean_sensitivity, [dpopt.mean_sensitivity([2, 2], 2.0),
                                                    dpopt.mean_sensitivity([1, 1, 1, 1], 2.0)])


# ------------------------------------------------------------------------------- labels


def test_nan_user_label_is_refused():
    """Before: NaN was a user label (NaN != NaN: every NaN row its own user)."""
    with pytest.raises(DpoptInputError, match=r"`users` must not hold missing labels"):
        dpopt.Occupancy.from_triples([1.0, np.nan, np.nan], ["a", "a", "b"], [1, 1, 1])
    with pytest.raises(DpoptInputError, match=r"`users` must not hold missing labels"):
        dpopt.Occupancy.from_triples(pd.Series(["u", None]), ["a", "b"], [1, 1])


@pytest.mark.parametrize("users", [[1, 1.0], np.array([7.0, 7.0]), pd.Series([1, 1.0], dtype=object),
                                   np.array([2**60, 2**60], dtype=np.int64)])
def test_one_number_written_two_ways_is_one_user(users):
    """One value of a numeric column is one user (1 and 1.0 are the same number)."""
    occ = dpopt.Occupancy.from_triples(users, ["a", "b"], [1, 1])
    assert occ.n_users == 1 and occ.degradation == 2


@pytest.mark.parametrize("users", [["1", "1.0"], ["1", " 1 "], ["0123", "123"], np.array(["7", "7.0"], dtype=object),
                                   pd.Series([1, "1.0"], dtype=object)])
def test_distinct_text_ids_are_distinct_users(users):
    """Ids read as text stay exact strings (no merging of ids that parse to one number)."""
    occ = dpopt.Occupancy.from_triples(users, ["a", "b"], [1, 1])
    assert occ.n_users == 2 and occ.degradation == 1


def test_csv_user_ids_1_and_1_0_are_two_users(tmp_path):
    """CSV ids are text: "1" and "1.0" are two users under the exact-string rule."""
    path = tmp_path / "r.csv"
    path.write_text(HEADER + "1," + ROW + "1.0," + ROW.replace("30.2672", "30.3500").replace("-97.7431", "-97.7000"))
    r = release(path, bound=100, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(), noise=NoiseOptions(seed=1))
    assert r.summary.users == 2 and r.summary.degradation == 1


# ------------------------------------------------------------------------------- CSV ingest


def test_csv_first_row_with_an_extra_field_is_refused(tmp_path):
    """Before: pandas took the first column as the index: user ids became latitudes, silently."""
    path = tmp_path / "r.csv"
    path.write_text(HEADER + "a," + ROW.strip() + ",99\n" + "b," + ROW)
    with pytest.raises(DpoptInputError, match=r"more fields than its header"):
        list(read_records(path, bound=100))


def test_csv_later_row_with_an_extra_field_is_refused(tmp_path):
    """Before: the extra field was dropped silently (``usecols``)."""
    path = tmp_path / "r.csv"
    path.write_text(HEADER + "a," + ROW + "b," + ROW.strip() + ",99\n")
    with pytest.raises(DpoptInputError, match=r"Expected 5 fields in line 3, saw 6"):
        list(read_records(path, bound=100))


def test_non_utf8_records_file_is_one_line(tmp_path):
    path = tmp_path / "r.csv"
    path.write_bytes((HEADER + "a," + ROW + "\xe9," + ROW).encode("latin-1"))
    with pytest.raises(DpoptInputError, match=r"not UTF-8 text") as info:
        list(read_records(path, bound=100))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("stamp,unit", [("2500-01-01T00:00:00Z", "s"), ("1500-06-01T00:00:00Z", "s"),
                                        ("2262-12-01T00:00:00Z", "s"), ("99999999999", "s"),
                                        ("-99999999999", "s"), ("1e20", "ms")])
def test_timestamp_outside_pandas_range_is_dropped_and_counted(tmp_path, stamp, unit):
    """Before: one such timestamp aborted the whole release with OutOfBoundsDatetime."""
    path = tmp_path / "r.csv"
    good = "2020-01-01T10:05:00Z" if unit == "s" and not stamp.lstrip("-").isdigit() else \
        ("1577873100" if unit == "s" else "1577873100000")
    path.write_text(HEADER + f"a,30.2672,-97.7431,{good},10\n" + f"b,30.2672,-97.7431,{stamp},20\n")
    rep = sum((r for _, r in read_records(path, bound=100, timestamp_unit=unit)), IngestReport())
    assert (rep.records_read, rep.records_kept, rep.missing["timestamp"]) == (2, 1, 1)


def test_frame_timestamps_outside_range_in_every_dtype_are_counted():
    import datetime

    base = pd.DataFrame({"user_id": ["a", "b"], "latitude": [30.26, 30.26], "longitude": [-97.74, -97.74],
                         "value": [1.0, 2.0]})
    for ts in (["2020-01-01T00:00:00Z", "2300-01-01T00:00:00Z"], [1577872800, 1e11],
               [datetime.datetime(2020, 1, 1), datetime.datetime(2300, 1, 1)],
               np.array(["2020-01-01", "2300-01-01"], dtype="datetime64[s]")):
        r = release(base.assign(timestamp=ts), bound=10, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(),
                    noise=NoiseOptions(seed=1), io=InputOptions(max_dropped=1.0, timezone="UTC"))  # 1 of 2 dropped: above the default share; naive: UTC
        assert r.summary.ingest["missing"]["timestamp"] == 1 and r.summary.records == 1


# ------------------------------------------------------------------------------- numbers and CLI


def test_huge_epsilon_refused_before_reading_data(tmp_path, capsys):
    """Before: ε = 1e300 raised OverflowError in the sampler after aggregating and planning. The
    records file here is junk: the ε error must come first."""
    junk = tmp_path / "junk.csv"
    junk.write_bytes(bytes(range(256)))
    for eps in ("1e300", "1e101"):
        code = main(["release", str(junk), "--privacy", "public-occupancy", "--bound", "100", "--epsilon", eps, "--quiet", "--out", str(tmp_path / "o")])
        err = capsys.readouterr().err
        assert code == 2 and "`epsilon`" in err or "`--epsilon`" in err, err
    with pytest.raises(DpoptInputError, match=r"`epsilon` must be a positive finite number <= 1e100"):
        release(pd.DataFrame({"x": [1]}), bound=100, budget=PerGridBudget(1e300), model=PublicOccupancyOptions())


def test_error_bound_inf_is_refused_on_the_release_cli(tmp_path, capsys):
    code = main(["release", "--example", "--privacy", "public-occupancy", "--error-bound", "inf", "--quiet", "--out", str(tmp_path / "o")])
    assert code == 2 and "error-bound" in capsys.readouterr().err


def test_discrete_laplace_nan_scale():
    from dpopt.release.noise import discrete_laplace, integer_source

    for bad in (float("nan"), float("inf"), None, "x"):
        with pytest.raises(DpoptInputError, match=r"`scale` must be a positive finite rational"):
            discrete_laplace(bad, integer_source(1))


@pytest.mark.parametrize("argv,match", [
    (["000-fig2", "--param", "unknown=1"], r"`--param` unknown is not a parameter of 000-fig2; valid keys: "),
    (["000-fig2", "--out", "{file}"], r"`--out` must be a directory path"),
])
def test_reproduce_bad_param_and_out_file(tmp_path, capsys, argv, match):
    """Before: TypeError / FileExistsError tracebacks, after computing the figure."""
    f = tmp_path / "file"
    f.write_text("x")
    argv = [a.format(file=f) for a in argv]
    if "--out" not in argv:
        argv += ["--out", str(tmp_path / "r")]
    code = main(["reproduce", *argv, "--runs", "1", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    import re

    assert re.search(match, err), err


def test_non_utf8_counts_file_every_command(tmp_path, capsys):
    path = tmp_path / "m.txt"
    path.write_bytes("3\n\xe9\n".encode("latin-1"))
    for cmd in ("errors", "clipping", "arrays"):
        code = main([cmd, "--counts", str(path), "--bound", "1", "--epsilon", "1"])
        err = capsys.readouterr().err
        assert code == 2 and "not UTF-8" in err and err.count("\n") == 1, err
