"""`dpopt release RECORDS` under the default privacy model "user": what the command line
accepts, refuses and publishes; and the API's return type for that model."""

from __future__ import annotations

import json
import re

import h3
import numpy as np
import pandas as pd
import pytest

from dpopt.cli import main
from dpopt.release import Budget, EstimationOptions, NoiseOptions, UserOptions, Release, release

from .conftest import CELLS

U = 100.0
T0 = pd.Timestamp("2020-01-01T10:00:00Z")


def _records(seed: int = 0, users: int = 40) -> pd.DataFrame:
    """Users with records in grids (cell CELLS[i % 3], hour i // 3) for i in 0..5, values in [0, U]."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(users):
        for g in rng.choice(6, size=int(rng.integers(1, 4)), replace=False):
            lat, lng = h3.cell_to_latlng(h3.int_to_str(CELLS[g % 3]))
            for _ in range(int(rng.integers(1, 4))):
                t = T0 + pd.Timedelta(hours=int(g // 3), seconds=int(rng.integers(3600)))
                rows.append((f"u{u:02d}", lat, lng, t.strftime("%Y-%m-%dT%H:%M:%SZ"), float(np.round(U * rng.random(), 2))))
    return pd.DataFrame(rows, columns=["user_id", "latitude", "longitude", "timestamp", "value"])


@pytest.fixture
def csv(tmp_path):
    path = tmp_path / "records.csv"
    _records().to_csv(path, index=False)
    return path


def _run(capsys, *argv):
    code = main(["release", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_error(code, err, flag):
    assert code == 2
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert re.search(re.escape(flag) + r"(?![-\w])", lines[0]), lines[0]


def test_default_is_the_user_model_and_publishes_no_exact_counts(tmp_path, capsys, csv):
    out = tmp_path / "o"
    code, stdout, err = _run(capsys, csv, "--bound", U, "--epsilon-total", 2, "--delta", 1e-6, "--out", out,
                             "--seed", 1, "--json")
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["privacy_model"] == "user"
    assert json.loads(stdout)["privacy_model"] == "user"
    table = pd.read_csv(out / "release.csv")
    assert not {"n_users", "n_records", "max_user_records", "n_users_retained", "n_records_retained"} & set(table)
    # no exact counts of records or users anywhere in the summary (nested dicts included)
    def keys(d):
        for k, v in d.items():
            yield k
            if isinstance(v, dict):
                yield from keys(v)
    counts = [k for k in keys(summary) if re.fullmatch(r"(n_)?(records|users|pairs)(_read)?", k)]
    assert counts == [], counts
    assert 0 < summary["epsilon_total"] <= 2.0


def test_per_grid_epsilon_needs_public_occupancy(tmp_path, capsys, csv):
    code, _, err = _run(capsys, csv, "--bound", U, "--epsilon", 1, "--out", tmp_path / "o")
    _one_line_error(code, err, "--epsilon")
    code, _, err = _run(capsys, csv, "--bound", U, "--epsilon", 1, "--epsilon-total", 2, "--delta", 1e-6,
                        "--out", tmp_path / "o")
    _one_line_error(code, err, "--epsilon")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("flag, value", [("--plan", "greedy"), ("--plan", "budget"), ("--rho", "1"),
                                         ("--target", "5"),
                                         ("--criterion", "worst_case"), ("--time-limit", "3"),
                                         ("--split", "optimal"), ("--pseudo-users", None)])
def test_planner_flags_refused_under_the_user_model(tmp_path, capsys, csv, flag, value):
    extra = (flag,) if value is None else (flag, value)
    code, _, err = _run(capsys, csv, "--bound", U, "--epsilon-total", 2, "--delta", 1e-6, *extra,
                        "--out", tmp_path / "o")
    _one_line_error(code, err, flag)
    assert not (tmp_path / "o").exists()


def test_public_bounds(tmp_path, capsys, csv):
    out = tmp_path / "o"
    code, stdout, err = _run(capsys, csv, "--bound", U, "--epsilon-total", 2, "--delta", 1e-6, "--strategy", "adaptive", "--bounds", "3,2",
                             "--out", out, "--seed", 2, "--json")
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["k"], summary["c"]) == (3, 2)
    code, _, err = _run(capsys, csv, "--bound", U, "--epsilon-total", 2, "--delta", 1e-6, "--bounds", "x",
                        "--out", tmp_path / "o2")
    _one_line_error(code, err, "--bounds")


def test_public_partition_absent_from_the_data_is_released_as_noise(tmp_path, capsys, csv):
    # the data use CELLS[0..2]; (CELLS[4], 10h) has no record
    parts = pd.DataFrame({
        "cell": [h3.int_to_str(CELLS[0]), h3.int_to_str(CELLS[4])],
        "slot": [T0.strftime("%Y-%m-%dT%H:%M:%SZ")] * 2,
    })
    path = tmp_path / "partitions.csv"
    parts.to_csv(path, index=False)
    out = tmp_path / "o"
    code, _, err = _run(capsys, csv, "--bound", U, "--epsilon-total", 2, "--partitions", path, "--out", out,
                        "--seed", 3, "--resolution", "fixed")  # the flat release (adaptive is the default)
    assert code == 0, err
    table = pd.read_csv(out / "release.csv")
    assert len(table) == 2
    empty = table[table["cell"] == h3.int_to_str(CELLS[4])]
    assert len(empty) == 1 and bool(empty["released"].iloc[0])
    assert np.isfinite(empty["mean"].iloc[0]) and 0 <= empty["mean"].iloc[0] <= U
    summary = json.loads((out / "summary.json").read_text())
    assert summary["grids_released"] == 2 and summary["delta"] in (0, 0.0, None)


def test_api_returns_a_user_release():
    res = release(_records(), bound=U, budget=Budget(epsilon_total=2.0, delta=1e-6),
                  model=UserOptions(bounds="select", strategy="fixed"), noise=NoiseOptions(seed=4))
    assert isinstance(res, Release)
    assert res.summary.privacy_model == "user" and 0 < res.summary.epsilon_total <= 2.0
    assert not {"n_users", "n_records"} & set(res.table.columns)


def test_confidence_is_honoured_or_refused_never_ignored(tmp_path, capsys, csv):
    """A confidence the user asked for must not be silently replaced by the default 0.95."""
    from dpopt import DpoptInputError

    try:
        res = release(_records(), bound=U, budget=Budget(epsilon_total=2.0, delta=1e-6),
                      model=UserOptions(bounds="select", strategy="fixed"), estimation=EstimationOptions(confidence=0.5),
                      noise=NoiseOptions(seed=5))
    except DpoptInputError as exc:
        assert "`confidence`" in str(exc)
    else:
        assert res.summary.confidence == 0.5
    out = tmp_path / "o"
    code, _, err = _run(capsys, csv, "--bound", U, "--epsilon-total", 2, "--delta", 1e-6, "--confidence", 0.5,
                        "--out", out, "--seed", 5)
    if code == 0:
        assert json.loads((out / "summary.json").read_text())["confidence"] == 0.5
    else:
        _one_line_error(code, err, "--confidence")


def test_example_with_another_zone_says_its_list_is_of_chicago_hours(tmp_path, capsys):
    """`--example --timezone Asia/Kolkata` failed on the partitions lattice quoting a list the user never
    gave (the example's own, of Chicago hours): now one line saying so; nothing is written."""
    from dpopt.cli import main

    code = main(["release", "--example", "--timezone", "Asia/Kolkata", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "the example's list of grids is of America/Chicago hours" in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()
