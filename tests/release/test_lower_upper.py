"""Values in [L, U]: ``--lower L --upper U`` / ``lower=``/``upper=``.

The implementation reads every value x as x − L and adds L back to every published mean, so the
checks are: (1) the identity release(x, [L, U]) = release(x − L, [0, U − L]) + L, bit for bit with
the same seed, error bounds and variances unchanged, under both privacy models and every user-model
shape; (2) brute force: at a huge ε the published means are the means of np.clip(x, L, U) per grid,
computed here by hand; (3) the CLI runs with signed values and refuses bad combinations in one line
(exit 2); (4) the reports and the console show [L, U]; (5) L = 0 changes no float.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import h3
import numpy as np
import pandas as pd
import pytest

from dpopt._validation import DpoptInputError, value_range
from dpopt.cli import main
from dpopt.release import (Budget, InputOptions, NoiseOptions, PerGridBudget, PublicOccupancyOptions, UserOptions,
                           contributions, release, release_aggregate, release_user)
from dpopt.writers.values import MEAN_COLUMNS, with_value_range

from .conftest import NEAR_EXACT_ATOL

L, U = -20.0, 40.0  # U − L = 60 and x − L are exact for the 3-decimal values below
T0 = pd.Timestamp("2021-06-01T00:00:00Z")
HOURS = 3


def _cells() -> list[str]:
    return [h3.latlng_to_cell(30.25 + 0.03 * i, -97.75 + 0.03 * j, 7) for i in range(2) for j in range(2)]


#: the centre of the values in each of the 4 cells: two cells with negative means
CENTRES = np.array([-12.0, -4.0, 10.0, 25.0])


def signed_records(seed: int, n: int = 3000, users: int = 120) -> pd.DataFrame:
    """Signed values (sd 15 about :data:`CENTRES`: some below L, some above U) in 4 cells x 3 hours."""
    rng = np.random.default_rng(seed)
    cells = _cells()
    which = rng.integers(0, len(cells), n)
    where = np.array([h3.cell_to_latlng(cells[i]) for i in which])
    seconds = rng.integers(0, HOURS * 3600, n)
    return pd.DataFrame({"user_id": rng.integers(0, users, n).astype(str), "latitude": where[:, 0],
                         "longitude": where[:, 1], "timestamp": T0 + pd.to_timedelta(seconds, unit="s"),
                         "value": np.round(CENTRES[which] + rng.normal(0.0, 15.0, n), 3)})


def partition_list() -> pd.DataFrame:
    return pd.DataFrame([(c, (T0 + pd.Timedelta(hours=h)).strftime("%Y-%m-%dT%H:%M:%SZ"))
                         for c in _cells() for h in range(HOURS)], columns=["cell", "slot"])


@pytest.fixture(scope="module")
def signed() -> pd.DataFrame:
    return signed_records(37)


def _shifted(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(value=frame["value"] - L)


def _assert_shifted_by_L(a: pd.DataFrame, b: pd.DataFrame) -> None:
    """``a`` is ``b`` with L added to its mean-like columns, bit for bit; every other column equal."""
    assert list(a.columns) == list(b.columns) and len(a) == len(b) > 0
    shifted = [c for c in a.columns if c in MEAN_COLUMNS]
    assert "mean" in shifted
    for col in a.columns:
        x, y = a[col].to_numpy(), b[col].to_numpy()
        if col in shifted:
            np.testing.assert_array_equal(x, y.astype(float) + L, err_msg=col)
        elif x.dtype.kind == "f":
            np.testing.assert_array_equal(x, y, err_msg=col)  # error bounds, variances: shift-invariant
        else:
            assert (pd.Series(x).astype(str) == pd.Series(y).astype(str)).all(), col


# ----------------------------------------------------------------------------- (1) the identity


@pytest.mark.parametrize("model, budget, source", [
    (PublicOccupancyOptions(plan="greedy"), PerGridBudget(1.0), "frame"),
    (PublicOccupancyOptions(plan="baseline"), PerGridBudget(0.5), "frame"),
    # pseudo-user clipping from a file: the second pass over the records (kept_records) shifts too
    (PublicOccupancyOptions(plan="greedy", pseudo_users=True), PerGridBudget(1.0), "csv"),
], ids=["greedy", "baseline", "pseudo-users-csv"])
def test_public_occupancy_identity(signed, tmp_path, model, budget, source):
    a_in, b_in = signed, _shifted(signed)
    if source == "csv":
        a_in, b_in = tmp_path / "a.csv", tmp_path / "b.csv"
        signed.to_csv(a_in, index=False)
        _shifted(signed).to_csv(b_in, index=False)
    a = release(a_in, lower=L, upper=U, budget=budget, model=model, noise=NoiseOptions(seed=11))
    b = release(b_in, bound=U - L, budget=budget, model=model, noise=NoiseOptions(seed=11))
    _assert_shifted_by_L(a.table, b.table)
    _assert_shifted_by_L(a.estimates.table, b.estimates.table)
    assert (a.table["mean"] < 0).any() and a.table["released"].any()  # signed means were published
    assert (a.summary.lower, a.summary.bound) == (L, U) and (b.summary.lower, b.summary.bound) == (0.0, U - L)
    assert a.summary.error_bound == b.summary.error_bound
    assert a.measurements.info["lower"] == L  # the Measurements stay in the shifted units


@pytest.mark.parametrize("model", [
    UserOptions(partitions=partition_list(), bounds=(2, 3), resolution="fixed"),
    UserOptions(partitions=partition_list(), bounds=(2, 3), resolution="adaptive"),
    UserOptions(partitions=partition_list(), strategy="place"),
    UserOptions(partitions=partition_list()),  # the optimised engine (default)
], ids=["fixed", "adaptive", "place", "optimised"])
def test_user_identity(signed, model):
    budget = Budget(epsilon_total=5.0)
    a = release(signed, lower=L, upper=U, budget=budget, model=model, noise=NoiseOptions(seed=5))
    b = release(_shifted(signed), bound=U - L, budget=budget, model=model, noise=NoiseOptions(seed=5))
    _assert_shifted_by_L(a.table, b.table)
    _assert_shifted_by_L(a.estimates.table, b.estimates.table)
    assert (a.summary.lower, a.summary.bound) == (L, U)
    if b.summary.clamp is not None:  # the DP clamp B: values clamped to [L, L + B]
        assert a.summary.clamp == L + b.summary.clamp
        if b.summary.clamp_histogram is not None:
            assert a.summary.clamp_histogram["clamps"] == [L + c for c in b.summary.clamp_histogram["clamps"]]
            assert a.summary.clamp_histogram["noisy_users"] == b.summary.clamp_histogram["noisy_users"]
    if a.answers is not None:
        assert a.answers.equals(b.answers)


def test_user_identity_with_a_typical_guess(signed):
    """``UserOptions.typical`` is a guess in the values' units: (m, s) on [L, U] is (m − L, s) on [0, U − L]."""
    plist = partition_list()
    a = release(signed, lower=L, upper=U, budget=Budget(epsilon_total=5.0), noise=NoiseOptions(seed=2),
                model=UserOptions(partitions=plist, bounds=(2, 3), resolution="fixed", typical=(10.0, 5.0)))
    b = release(_shifted(signed), bound=U - L, budget=Budget(epsilon_total=5.0), noise=NoiseOptions(seed=2),
                model=UserOptions(partitions=plist, bounds=(2, 3), resolution="fixed", typical=(30.0, 5.0)))
    _assert_shifted_by_L(a.table, b.table)
    assert "public guess mean=10," in a.summary.split_rule and "mean=30," in b.summary.split_rule
    with pytest.raises(DpoptInputError, match=r"`typical` must have mean in \[L, U\] = \[-20, 40\]"):
        release(signed, lower=L, upper=U, budget=Budget(epsilon_total=5.0),
                model=UserOptions(partitions=plist, bounds=(2, 3), resolution="fixed", typical=(45.0, 5.0)))


def test_zero_lower_changes_no_float(signed):
    """L = 0 is the old path: lower=0/upper=U and upper=U alone are bound=U, bit for bit."""
    model = UserOptions(partitions=partition_list(), bounds=(2, 3), resolution="fixed")
    shifted = _shifted(signed)
    runs = [release(shifted, budget=Budget(epsilon_total=5.0), model=model, noise=NoiseOptions(seed=4), **kw)
            for kw in ({"bound": 60.0}, {"upper": 60.0}, {"lower": 0.0, "upper": 60.0}, {"lower": -0.0, "bound": 60.0})]
    for r in runs[1:]:
        pd.testing.assert_frame_equal(r.table, runs[0].table, check_exact=True)
        assert r.summary == runs[0].summary
    assert runs[0].summary.lower == 0.0
    assert with_value_range(runs[0], 0.0, 60.0) is runs[0]


# ----------------------------------------------------------------------------- (2) brute force


def _clamped_means(frame: pd.DataFrame) -> pd.Series:
    """The exact mean of np.clip(value, L, U) per (cell, hour), by hand."""
    cell = [h3.latlng_to_cell(a, b, 7) for a, b in zip(frame["latitude"], frame["longitude"])]
    slot = pd.to_datetime(frame["timestamp"], utc=True).dt.floor("1h").dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    v = np.clip(frame["value"].to_numpy(float), L, U)
    return pd.Series(v).groupby([pd.Series(cell), slot.reset_index(drop=True)]).mean()


@pytest.fixture(scope="module")
def small_signed() -> pd.DataFrame:
    """A few users with many records each, a third of the values outside [L, U]."""
    frame = signed_records(8, n=400, users=6)
    rng = np.random.default_rng(9)
    out = rng.random(len(frame)) < 0.3
    frame.loc[out, "value"] = np.round(rng.choice([-1.0, 1.0], out.sum()) * rng.uniform(25.0, 90.0, out.sum()), 3)
    assert (frame["value"] < L).any() and (frame["value"] > U).any()
    return frame


def _published_means(r) -> pd.Series:
    t = r.table[r.table["released"].astype(bool)]
    return pd.Series(t["mean"].to_numpy(float), index=pd.MultiIndex.from_arrays([t["cell"], t["slot"]]))


def test_brute_force_public_occupancy(small_signed):
    r = release(small_signed, lower=L, upper=U, budget=PerGridBudget(1e6),
                model=PublicOccupancyOptions(plan="baseline"), noise=NoiseOptions(seed=1))
    got, want = _published_means(r), _clamped_means(small_signed)
    assert len(got) == len(want) == 12
    np.testing.assert_allclose(got[want.index].to_numpy(), want.to_numpy(), atol=NEAR_EXACT_ATOL)
    assert want.min() < 0  # signed answers, not a shift of [0, U] ones


def test_brute_force_user(small_signed):
    # public bounds that keep every record: k = all 12 grids, c = the most records of a user in a grid
    cell = [h3.latlng_to_cell(a, b, 7) for a, b in zip(small_signed["latitude"], small_signed["longitude"])]
    hour = small_signed["timestamp"].dt.floor("1h")
    c = int(small_signed.groupby([small_signed["user_id"], pd.Series(cell), hour]).size().max())
    r = release(small_signed, lower=L, upper=U, budget=Budget(epsilon_total=1e6), noise=NoiseOptions(seed=1),
                model=UserOptions(partitions=partition_list(), bounds=(12, c), resolution="fixed"))
    got, want = _published_means(r), _clamped_means(small_signed)
    assert len(got) == len(want) == 12
    np.testing.assert_allclose(got[want.index].to_numpy(), want.to_numpy(), atol=NEAR_EXACT_ATOL)


# ----------------------------------------------------------------------------- the Python front door


@pytest.fixture
def unreadable(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_bytes(b"\x00\xff\xfe not records at all")
    return path


@pytest.mark.parametrize("kwargs, needle", [
    ({"bound": 40.0, "upper": 40.0}, r"give `bound` or `upper`, not both.*bound=40\.0, upper=40\.0"),
    ({"lower": 40.0, "upper": -20.0}, r"`lower` must be less than `upper`; got lower=40\.0, upper=-20\.0"),
    ({"lower": 5.0, "upper": 5.0}, r"`lower` must be less than `upper`; got lower=5\.0, upper=5\.0"),
    ({"lower": -20.0}, r"`lower` needs `upper` \(or `bound`\)"),
    ({"lower": float("nan"), "upper": 4.0}, r"`lower` must be a finite number; got nan"),
    ({"lower": 0.0, "upper": float("inf")}, r"`upper` must be a finite number; got inf"),
    ({"upper": float("-inf")}, r"`upper` must be a positive finite number"),
    ({"lower": -1e100, "upper": 1e100}, r"`upper` - `lower` must be at most 1e100"),
    ({}, r"`bound` \(or `upper`\) is required"),
])
def test_bad_ranges_fail_before_any_record_is_read(unreadable, kwargs, needle):
    for model, budget in ((UserOptions(partitions=partition_list()), Budget(epsilon_total=1.0)),
                          (PublicOccupancyOptions(plan="greedy"), PerGridBudget(1.0))):
        with pytest.raises(ValueError, match=needle) as info:
            release(unreadable, budget=budget, model=model, **kwargs)
        assert "\n" not in str(info.value)


def test_value_range_rules():
    assert value_range(bound=3) == (0.0, 3.0) and value_range(upper=3) == (0.0, 3.0)
    assert value_range(lower=-5, upper=-1) == (-5.0, -1.0)  # a range below 0
    assert value_range(lower=-2, bound=7) == (-2.0, 7.0)
    assert str(value_range(lower=-0.0, upper=1)[0]) == "0.0"
    with pytest.raises(DpoptInputError, match="`bound` must be a positive"):
        value_range(bound=-1)  # alone, U must be positive ([0, U])
    with pytest.raises(DpoptInputError, match="`lower` must be a finite number"):
        value_range(lower=True, upper=3)


def test_tables_carry_their_lower_end(signed):
    """release_user / release_aggregate on a contributions table read with lower=L add L back
    themselves; another range than the table's is refused."""
    parts = partition_list()
    agg, _ = contributions(signed, bound=U - L, lower=L, first_records=3)
    assert agg.lower == L and agg.bound == U - L
    ref, _ = contributions(_shifted(signed), bound=U - L, first_records=3)
    np.testing.assert_array_equal(agg.sum, ref.sum)
    np.testing.assert_array_equal(agg.samples.values, ref.samples.values)
    model = UserOptions(partitions=parts, bounds=(2, 3), resolution="fixed")
    a = release_user(agg, Budget(epsilon_total=5.0), model, noise=NoiseOptions(seed=3))
    b = release_user(ref, Budget(epsilon_total=5.0), model, noise=NoiseOptions(seed=3))
    _assert_shifted_by_L(a.table, b.table)
    assert release_user(agg, Budget(epsilon_total=5.0), model, lower=L, upper=U,
                        noise=NoiseOptions(seed=3)).table.equals(a.table)
    with pytest.raises(DpoptInputError, match=r"`lower` must be the L the contributions table was read with \(-20\)"):
        release_user(agg, Budget(epsilon_total=5.0), model, bound=U - L)
    pa, _ = contributions(signed, bound=U - L, lower=L)
    pb, _ = contributions(_shifted(signed), bound=U - L)
    ra = release_aggregate(pa, PerGridBudget(1.0), PublicOccupancyOptions(plan="greedy"), noise=NoiseOptions(seed=3))
    rb = release_aggregate(pb, PerGridBudget(1.0), PublicOccupancyOptions(plan="greedy"), noise=NoiseOptions(seed=3))
    _assert_shifted_by_L(ra.table, rb.table)
    with pytest.raises(DpoptInputError, match="contributions table was read with"):
        release_aggregate(pa, PerGridBudget(1.0), PublicOccupancyOptions(plan="greedy"), lower=-10.0, upper=50.0)


def test_out_of_range_error_names_the_range(signed):
    with pytest.raises(DpoptInputError, match=r"values outside \[lower, upper\] = \[-20, 40\]"):
        release(signed, lower=L, upper=U, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(plan="greedy"),
                io=InputOptions(out_of_range="error"))


# ----------------------------------------------------------------------------- (3), (4) CLI and reports


def _cli(capsys, *argv):
    code = main(["release", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def signed_csv(tmp_path_factory, signed) -> Path:
    path = tmp_path_factory.mktemp("signed") / "signed.csv"
    signed.to_csv(path, index=False)
    return path


def _check_folder(out: Path, console: str) -> pd.DataFrame:
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["lower"], summary["bound"]) == (L, U)
    table = pd.read_csv(out / "release.csv")
    assert (table["mean"] < 0).any() and table["mean"].min() >= L and table["mean"].max() <= U
    assert "in -20 to 40" in console  # the console's "values" line
    assert "Values lie in -20 to 40" in (out / "report.html").read_text()
    geo = json.loads((out / "release.geojson").read_text())
    means = [f["properties"]["mean"] for f in geo["features"] if f["properties"].get("mean") is not None]
    assert min(means) < 0
    return table


def test_cli_public_occupancy_signed(tmp_path, capsys, signed_csv):
    out = tmp_path / "po"
    code, stdout, err = _cli(capsys, str(signed_csv), "--lower", "-20", "--upper", "40", "--privacy",
                             "public-occupancy", "--epsilon", "1", "--plan", "greedy", "--seed", "1", "--out",
                             str(out), "--quiet", "--no-map")
    assert code == 0, err
    _check_folder(out, stdout)
    md = (out / "report.md").read_text()
    assert "values in [-20, 40]" in md and "[L, U] = [-20, 40] (mean)" in md and "[0, 60]" not in md


def test_cli_user_signed_and_json(tmp_path, capsys, signed_csv):
    plist = tmp_path / "parts.csv"
    partition_list().to_csv(plist, index=False)
    out = tmp_path / "user"
    base = [str(signed_csv), "--lower", "-20", "--upper", "40", "--privacy", "user", "--partitions", str(plist),
            "--strategy", "place", "--epsilon-total", "5", "--seed", "2", "--quiet", "--no-map"]
    code, stdout, err = _cli(capsys, *base, "--out", str(out))
    assert code == 0, err
    _check_folder(out, stdout)
    summary = json.loads((out / "summary.json").read_text())
    md = (out / "report.md").read_text()
    assert f"[L, L + B] = [-20, {summary['clamp']:g}]" in md and "values in [L, U] = [-20, 40]" in md
    code, stdout, err = _cli(capsys, *base, "--out", str(tmp_path / "json"), "--json")
    assert code == 0, err
    payload = json.loads(stdout)
    assert (payload["lower"], payload["bound"]) == (L, U)


@pytest.mark.parametrize("flags, needles", [
    (["--bound", "40", "--upper", "40"], ["`--bound`", "`--upper`", "not both"]),
    (["--lower", "40", "--upper", "-20"], ["`--lower` must be less than `--upper`", "--lower 40.0", "--upper -20.0"]),
    (["--lower", "5", "--upper", "5"], ["`--lower` must be less than `--upper`", "--lower 5.0", "--upper 5.0"]),
    (["--lower", "-20"], ["`--lower` needs `--upper` (or `--bound`)"]),
    (["--lower", "nan", "--upper", "4"], ["`--lower` must be a finite number"]),
    (["--lower", "-1", "--upper", "inf"], ["`--upper` must be a finite number"]),
    (["--upper", "nan"], ["`--upper` must be a positive finite number"]),
])
@pytest.mark.parametrize("privacy", [["--privacy", "public-occupancy", "--epsilon", "1"],
                                     ["--privacy", "user", "--epsilon-total", "1", "--delta", "1e-6"]])
def test_cli_bad_ranges_one_line_exit_2(tmp_path, capsys, signed_csv, flags, needles, privacy):
    code, stdout, err = _cli(capsys, str(signed_csv), *flags, *privacy, "--out", str(tmp_path / "o"), "--quiet")
    assert code == 2 and stdout == ""
    assert err.startswith("dpopt release: error:") and err.count("\n") == 1, err
    for needle in needles:
        assert needle in err, err
    assert not (tmp_path / "o").exists()


def test_example_lower_needs_an_upper(tmp_path, capsys):
    code, _, err = _cli(capsys, "--example", "--lower", "10", "--out", str(tmp_path / "o"), "--quiet")
    assert code == 2 and "`--lower` needs `--upper`" in err


def test_help_names_the_flags_in_plain_words(capsys):
    with pytest.raises(SystemExit):
        main(["release", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--lower L" in text and "--upper U" in text and "--bound U" in text
    assert "--lower -20 --upper 40" in text
    for jargon in ("Thm", "eq. 15", "CLIP-USER", "BLUP", "Kneedle", "seed 002", "models/"):
        assert jargon not in text, jargon
    assert re.search(r"values outside \[L, U\]", text)
