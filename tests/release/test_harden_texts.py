"""The small texts of a release say what the release did, through ``dpopt.cli.main`` and
:func:`dpopt.release.release`."""

from __future__ import annotations

import html
import json
import re

import h3
import numpy as np
import pandas as pd
import pytest

from dpopt import DpoptInputError
from dpopt.cli import main
from dpopt.release import Budget, GridOptions, NoiseOptions, UserOptions, release

U = 50.0
T0 = pd.Timestamp("2020-01-01T10:00:00Z")
CELL = h3.latlng_to_cell(30.25, -97.75, 7)


def _frame(seed: int = 0, n: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"user_id": [f"u{i}" for i in rng.integers(0, 30, n)], "latitude": 30.25, "longitude": -97.75,
                         "timestamp": (T0 + pd.to_timedelta(rng.integers(0, 7200, n), unit="s")).strftime(
                             "%Y-%m-%dT%H:%M:%SZ"), "value": rng.uniform(0, U, n).round(2)})


def _list(path, cell: str = CELL):
    pd.DataFrame({"cell": [cell, cell], "slot": ["2020-01-01T10:00:00Z", "2020-01-01T11:00:00Z"]}).to_csv(path,
                                                                                                          index=False)
    return path


@pytest.mark.slow
def test_report_gives_each_withheld_variance_the_reason_release_csv_gives(tmp_path, capsys):
    """Before: report.html said "its interval was as wide as its whole range" for a variance
    withheld because the values were clamped."""
    data = tmp_path / "d.csv"
    _frame().to_csv(data, index=False)
    code = main(["release", str(data), "--privacy", "user", "--bound", str(U), "--epsilon-total", "3", "--seed", "1",
                 "--partitions", str(_list(tmp_path / "p.csv")), "--quiet", "--out", str(tmp_path / "o")])
    assert code == 0, capsys.readouterr().err
    table = pd.read_csv(tmp_path / "o" / "release.csv")
    reasons = set(table.loc[~table["variance_released"].astype(bool), "variance_withheld_reason"].dropna())
    assert reasons, "the fixture must withhold a variance"
    page = html.unescape(re.sub(r"<[^>]+>", "", (tmp_path / "o" / "report.html").read_text()))
    bullet = page[page.index("Withheld:"):]
    for reason in reasons:
        assert reason in bullet
    if not any("interval" in r for r in reasons):
        assert "as wide as its whole range" not in bullet


def test_flat_private_laplace_release_reports_its_selection_delta():
    """Before: delta_selection 0.0 though all of δ goes to the private selection under Laplace."""
    r = release(_frame(), bound=U, budget=Budget(epsilon_total=2.0, delta=1e-6),
                model=UserOptions(resolution="fixed", bounds=(2, 3)), noise=NoiseOptions(seed=1))
    assert r.summary.delta == pytest.approx(1e-6) and r.summary.delta_selection == pytest.approx(1e-6)


def test_h3_resolution_zero_with_a_list_is_refused_first_naming_the_flag_given(tmp_path, capsys):
    """Before: refused after two histograms were drawn, naming --coarsest-resolution (never given).
    The place strategy needs a map above the cells; the optimised engine does not (its map level is
    the cells' own resolution then)."""
    data = tmp_path / "d.csv"
    data.write_bytes(b"\x00\xff not even a CSV")  # never read: the refusal comes first
    plist = _list(tmp_path / "p0.csv", h3.latlng_to_cell(30.25, -97.75, 0))
    code = main(["release", str(data), "--privacy", "user", "--bound", str(U), "--epsilon-total", "1",
                 "--h3-resolution", "0", "--partitions", str(plist), "--strategy", "place", "--quiet",
                 "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "`--h3-resolution` = 0" in err and "coarsest" not in err and err.count("\n") == 1, err
    with pytest.raises(DpoptInputError, match="`h3_resolution` = 0"):
        release(data, bound=U, budget=Budget(epsilon_total=1.0), grid=GridOptions(0, "1h"),
                model=UserOptions(partitions=plist, strategy="place"))


def test_console_says_why_it_spends_less_delta_than_asked(tmp_path, capsys):
    """Before: at ε = 1 without a list the console printed δ = 7.5e-07 for --delta 1e-6 without a word."""
    data = tmp_path / "d.csv"
    _frame().to_csv(data, index=False)
    code = main(["release", str(data), "--privacy", "user", "--bound", str(U), "--epsilon-total", "1", "--delta", "1e-6", "--strategy", "adaptive",
                 "--seed", "1", "--quiet", "--json", "--out", str(tmp_path / "o")])
    out, err = capsys.readouterr()
    assert code == 0, err
    spent = json.loads((tmp_path / "o" / "summary.json").read_text())["delta"]
    assert spent < 1e-6  # the fixture: a level the selection plan leaves out spends no δ
    assert f"spends δ = {spent:g} of the --delta 1e-06 allowed" in err
    printed = json.loads(out)  # --json prints summary.json itself, with where the folder and its files are
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert {k: v for k, v in printed.items() if k not in ("out", "files", "diagnostics")} == summary


@pytest.mark.slow
def test_report_never_shows_the_private_selections_public_bucket_as_the_period(tmp_path, capsys):
    """Before: report.html showed the coarse nodes' fixed 3640-day bucket ("2019-10-31 → 2029-10-18")
    as if it were the data's period; it shows the published slots' period instead."""
    rng = np.random.default_rng(1)
    n = 6000
    frame = pd.DataFrame({"user_id": [f"u{i}" for i in rng.integers(0, 400, n)],
                          "latitude": 30.25 + 0.05 * rng.integers(0, 3, n), "longitude": -97.75,
                          "timestamp": (T0 + pd.to_timedelta(rng.integers(0, 3 * 3600, n), unit="s")).strftime(
                              "%Y-%m-%dT%H:%M:%SZ"), "value": rng.uniform(0, U, n).round(2)})
    data = tmp_path / "d.csv"
    frame.to_csv(data, index=False)
    code = main(["release", str(data), "--privacy", "user", "--bound", str(U), "--epsilon-total", "5", "--delta", "1e-6", "--strategy", "adaptive",
                 "--seed", "1", "--quiet", "--out", str(tmp_path / "o")])
    assert code == 0, capsys.readouterr().err
    table = pd.read_csv(tmp_path / "o" / "release.csv")
    days = 3640
    start = pd.Timestamp(0, tz="UTC") + pd.Timedelta(days=(T0 - pd.Timestamp(0, tz="UTC")).days // days * days)
    bucket = table["slot"] == start.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert bucket.any(), "the fixture must publish a node over the bucket"
    page = (tmp_path / "o" / "report.html").read_text()
    end = start + pd.Timedelta(days=days)
    assert f"{start:%Y-%m-%d}" not in page and f"{end:%Y-%m-%d}" not in page
    assert "the whole period (published slots: 2020-01-01 10:00" in html.unescape(page)


def test_an_empty_partitions_file_is_named_with_a_zone_given_too(tmp_path, capsys):
    """Before: with --timezone a zero-byte --partitions file ended in "unexpected EmptyDataError"
    (the list's wall-clock reader met it first)."""
    data = tmp_path / "d.csv"
    _frame().to_csv(data, index=False)
    (tmp_path / "p.csv").write_bytes(b"")
    code = main(["release", str(data), "--privacy", "user", "--bound", str(U), "--epsilon-total", "1",
                 "--timezone", "Asia/Kolkata", "--partitions", str(tmp_path / "p.csv"), "--quiet",
                 "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "`--partitions` file" in err and "not a readable CSV" in err and "unexpected" not in err, err
    assert err.count("\n") == 1


def test_a_list_with_offsets_and_no_zone_is_told_to_name_the_zone(tmp_path, capsys):
    """Before: a list written on Kolkata's clock (+05:30) without --timezone was refused as off the
    UTC lattice without a word on why."""
    data = tmp_path / "d.csv"
    _frame().to_csv(data, index=False)
    pd.DataFrame({"cell": [CELL], "slot": ["2020-01-01T15:00:00+05:30"]}).to_csv(tmp_path / "p.csv", index=False)
    code = main(["release", str(data), "--privacy", "user", "--bound", str(U), "--epsilon-total", "1",
                 "--partitions", str(tmp_path / "p.csv"), "--quiet", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "offset +05:30" in err and "--timezone Area/City" in err and err.count("\n") == 1, err
    # a list on the UTC lattice written with an offset is read as it is (no hint where none applies)
    pd.DataFrame({"cell": [CELL], "slot": ["2020-01-01T10:30:00Z"]}).to_csv(tmp_path / "q.csv", index=False)
    code = main(["release", str(data), "--privacy", "user", "--bound", str(U), "--epsilon-total", "1",
                 "--partitions", str(tmp_path / "q.csv"), "--quiet", "--out", str(tmp_path / "o2")])
    err = capsys.readouterr().err
    assert code == 2 and "slot lattice" in err and "offset" not in err, err


@pytest.mark.slow
def test_console_warns_when_the_list_is_coarser_than_the_slot_and_when_the_cap_reweights(tmp_path, capsys):
    """An hourly list read with --slot 30min released the :00–:30 half of every hour without a word
    (an outside check: half the records off the list, exit 0); and the cap's re-weighting of users
    with many records, which the intervals leave out, was said in report.md only."""
    rng = np.random.default_rng(3)
    heavy = pd.DataFrame({"user_id": [f"h{i}" for i in rng.integers(0, 60, 9000)], "latitude": 30.25,
                          "longitude": -97.75,
                          "timestamp": (T0 + pd.to_timedelta(rng.integers(0, 7200, 9000), unit="s")).strftime(
                              "%Y-%m-%dT%H:%M:%SZ"), "value": 45.0})
    data = tmp_path / "d.csv"
    pd.concat([_frame(n=600), heavy]).to_csv(data, index=False)
    code = main(["release", str(data), "--privacy", "user", "--bound", str(U), "--epsilon-total", "3", "--seed", "1",
                 "--slot", "30min", "--partitions", str(_list(tmp_path / "p.csv")), "--quiet", "--no-map",
                 "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "every listed slot lies on a 1h lattice while --slot is 30min" in err
    d = json.loads((tmp_path / "o" / "summary.json").read_text())["reweighting"]
    assert d > 0  # the fixture: 60 users of ≈ 150 records beside 30 of ≈ 20
    assert f"the records' weights move by about {d:.2g}" in err
    assert "bins are 4× wide" in err and "is below the histogram's noise" in err  # what the figure cannot see
    code = main(["release", str(data), "--privacy", "user", "--bound", str(U), "--epsilon-total", "3", "--seed", "1",
                 "--partitions", str(_list(tmp_path / "p.csv")), "--quiet", "--no-map", "--out", str(tmp_path / "o2")])
    err = capsys.readouterr().err
    assert code == 0 and "lattice while --slot" not in err, err


def test_a_decimal_mark_equal_to_the_separator_is_one_line_naming_both_flags(tmp_path, capsys):
    data = tmp_path / "d.csv"
    _frame().to_csv(data, index=False)
    code = main(["release", str(data), "--privacy", "user", "--bound", str(U), "--epsilon-total", "1",
                 "--decimal", ",", "--partitions", str(_list(tmp_path / "p.csv")), "--quiet", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "`--decimal`" in err and "`--sep`" in err and err.count("\n") == 1, err


def test_a_slot_that_does_not_divide_a_day_on_a_wall_clock_is_refused_naming_the_slot(tmp_path, capsys):
    """Before: --slot 7min with --timezone was refused as a list slot off "the slot lattice of the
    wall clock (slots of 420 s from midnight)", naming a midnight — the lattice ran from the epoch."""
    data = tmp_path / "d.csv"
    _frame().to_csv(data, index=False)
    code = main(["release", str(data), "--privacy", "user", "--bound", str(U), "--epsilon-total", "1",
                 "--slot", "7min", "--timezone", "Europe/Madrid", "--partitions", str(_list(tmp_path / "p.csv")),
                 "--quiet", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "`--slot` must divide a day" in err and "'7min'" in err and err.count("\n") == 1, err
