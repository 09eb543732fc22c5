"""The user-level release end to end: what is published, neighbours, accuracy, coverage, files."""

from __future__ import annotations

import json
from dataclasses import replace

import h3
import numpy as np
import pandas as pd
import pytest

from dpopt._validation import DpoptInputError
from dpopt.release import Budget, NoiseOptions, UserOptions, release, release_user, write_release
from dpopt.writers.geo import GEO_FILES
from dpopt.writers import RELEASE_COLUMNS

from .conftest import CELLS, SLOT_NS, make_agg

U = 10.0


def _records(seed=0, users=12, grids=5):
    rng = np.random.default_rng(seed)
    recs = []
    for u in range(users):
        for g in rng.choice(grids, size=int(rng.integers(1, 4)), replace=False):
            for j in range(int(rng.integers(1, 4))):
                recs.append((f"u{u:02d}", int(g), j, float(np.round(rng.random() * U, 3))))
    return recs


def _plist(grids):
    return pd.DataFrame({"cell": [h3.int_to_str(CELLS[g % 6]) for g in grids],
                         "slot": [pd.Timestamp((g // 6) * SLOT_NS, unit="ns", tz="UTC").strftime("%Y-%m-%dT%H:%M:%SZ")
                                  for g in grids]})


def _truth(recs):
    f = pd.DataFrame(recs, columns=["user", "grid", "t", "value"])
    g = f.groupby("grid")["value"]
    return g.mean(), g.var(ddof=0)


PUBLIC_FIELDS = ["cell", "slot", "slot_end", "repeat_every", "repeat_until", "h3_resolution", "cell_lat", "cell_lng",
                 "released"]


@pytest.mark.parametrize("noise", ["numpy", "discrete"])
def test_neighbours_publish_identical_non_noisy_fields(noise):
    base = _records()
    extra = [("zz", 1, 0, 9.0), ("zz", 1, 1, 8.0), ("zz", 2, 0, 0.5), ("zz", 4, 0, 1.0)]
    plist = _plist([0, 1, 2, 3, 4, 5])  # grid 5 holds no record: released as noise
    out = []
    for recs in (base, base + extra):
        res = release_user(make_agg(recs), Budget(epsilon_total=1.0),
                           UserOptions(partitions=plist, bounds=(2, 2), strategy="fixed"), bound=U,
                           noise=NoiseOptions(noise, seed=11))
        out.append(res)
    a, b = out
    assert list(a.table.columns) == list(b.table.columns)
    assert list(a.table.columns[:len(RELEASE_COLUMNS)]) == RELEASE_COLUMNS
    assert {"mean_raw", "variance_raw", "noisy_count", "mean_pooled", "variance_pooled"} <= set(a.table.columns)
    for col in PUBLIC_FIELDS:
        assert a.table[col].tolist() == b.table[col].tolist()
    sa, sb = a.summary.as_dict(), b.summary.as_dict()
    for key in sa:
        if key not in ("timings", "pooling", "outlook", "outlook_epsilon_needed"):  # post-processing of noisy values
            assert sa[key] == sb[key], key
    # every other column is a noisy value or post-processing of one: they differ between neighbours
    noisy = [c for c in a.table.columns if c not in PUBLIC_FIELDS]
    assert all(not np.allclose(a.table[c], b.table[c]) for c in ("noisy_count", "mean_raw", "variance_raw"))
    assert set(noisy) <= {"mean", "variance", "mean_raw", "variance_raw", "noisy_count", "mean_error_bound",
                          "variance_error_bound", "mean_pooled", "variance_pooled",
                          "variance_released", "variance_withheld_reason"}  # post-processing of noisy values
    # the empty listed grid is released (as noise), every listed grid is there once
    assert len(a.table) == 6 and a.table["released"].all()


def test_nothing_exact_is_published():
    res = release_user(make_agg(_records()), Budget(epsilon_total=1.0, delta=1e-3), UserOptions(strategy="fixed"),
                       bound=U, noise=NoiseOptions("numpy", seed=0))
    text = json.dumps(res.summary.as_dict(), default=str)
    for word in ("n_users", "n_records", "records", "users\"", "pairs", "ingest"):
        assert word not in text
    assert res.summary.privacy_model == "user"
    assert not {"n_users", "n_records", "users", "records"} & set(res.table.columns)


@pytest.mark.slow
def test_private_selection_releases_a_single_user_grid_at_most_delta_over_k():
    # grid 0: one user; grid 1: 300 users. k = 1, δ = 0.1, continuous Laplace: P = δ/k = 0.1 exactly
    recs = [("solo", 0, 0, 1.0)] + [(f"m{i:03d}", 1, 0, 5.0) for i in range(300)]
    agg = make_agg(recs)
    g0 = h3.int_to_str(CELLS[0])
    hits = busy = 0
    n = 800
    for s in range(n):
        t = release_user(agg, Budget(epsilon_total=4.0, delta=0.1),
                         UserOptions(bounds=(1, 1), selection_fraction=0.5, strategy="fixed"), bound=U,
                         noise=NoiseOptions("numpy", seed=s)).table
        hits += int((t["cell"] == g0).any())
        busy += int((t["cell"] == h3.int_to_str(CELLS[1])).any())
    assert hits / n <= 0.1 + 4 * np.sqrt(0.1 * 0.9 / n)
    assert hits / n >= 0.1 - 4 * np.sqrt(0.1 * 0.9 / n)  # and the threshold is not needlessly high
    assert busy == n


def test_accurate_at_huge_epsilon_with_bounds_covering_everything():
    recs = _records(seed=4)
    mean, var = _truth(recs)
    res = release_user(make_agg(recs), Budget(epsilon_total=1e9),
                       UserOptions(partitions=_plist(range(5)), bounds=(10, 10), pool_fraction=0.0, strategy="fixed"),
                       bound=U, noise=NoiseOptions("numpy", seed=0))
    t = res.table
    assert np.allclose(t["mean"].to_numpy(), mean.to_numpy()[_order(t)], atol=1e-3)
    assert np.allclose(t["variance"].to_numpy(), var.to_numpy()[_order(t)], atol=1e-2)
    assert np.all(t["mean_error_bound"] < 1e-3)


def _order(table):
    cells = [h3.int_to_str(c) for c in CELLS]
    return [cells.index(c) for c in table["cell"]]  # grids 0..4 are in slot 0


@pytest.mark.slow
def test_error_bounds_cover_at_least_95_percent():
    recs = _records(seed=2, users=40, grids=5)
    mean, var = _truth(recs)
    agg = make_agg(recs)
    plist = _plist(range(5))
    cover_m = cover_v = total = 0
    for s in range(300):
        t = release_user(agg, Budget(epsilon_total=2.0), UserOptions(partitions=plist, bounds=(5, 3), strategy="fixed"),
                         bound=U, noise=NoiseOptions("numpy", seed=s)).table
        o = _order(t)
        cover_m += int((np.abs(t["mean"].to_numpy() - mean.to_numpy()[o]) <= t["mean_error_bound"].to_numpy()).sum())
        # a withheld variance (NaN) has the whole range [0, U²/4] as interval, which covers
        cover_v += int((np.abs(t["variance"].to_numpy() - var.to_numpy()[o]) <= t["variance_error_bound"].to_numpy()).sum())
        cover_v += int(np.isnan(t["variance"].to_numpy()).sum())
        total += len(t)
    assert cover_m / total >= 0.95 and cover_v / total >= 0.95


@pytest.mark.slow
def test_write_release_folder(tmp_path):
    res = release_user(make_agg(_records()), Budget(epsilon_total=1.0),
                       UserOptions(partitions=_plist(range(5)), strategy="fixed"), bound=U,
                       noise=NoiseOptions("discrete", seed=3))
    paths = write_release(res, tmp_path / "out")
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"release.csv", "answers.csv", "summary.json", "report.md",
                                                              "report.html", "map.png", *GEO_FILES}
    assert sorted(p.name for p in (tmp_path / "out.diagnostics").iterdir()) == ["README.txt", "diagnostics.json"]
    summary = json.loads(paths["summary"].read_text())
    assert "timings" not in summary  # the exact sampler's time depends on the noise drawn
    assert summary["privacy_model"] == "user" and summary["k"] == res.summary.k
    assert pd.read_csv(paths["release"]).shape[0] == 5
    assert "privacy model: user" in paths["report"].read_text()
    with pytest.raises(DpoptInputError, match="overwrite"):
        write_release(res, tmp_path / "out")  # a non-empty folder is not replaced silently
    write_release(res, tmp_path / "out", overwrite=True)  # replaces atomically, leaves no temporary
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "out.diagnostics"]
    # the discrete sampler's counts are integers and its budgets sum to at most ε
    assert np.all(res.table["noisy_count"] == np.round(res.table["noisy_count"]))
    assert res.summary.epsilon_total <= 1.0


def test_bad_inputs():
    agg = make_agg(_records())
    with pytest.raises(DpoptInputError, match="delta"):
        release_user(agg, Budget(epsilon_total=1.0), UserOptions(strategy="fixed"), bound=U)
    with pytest.raises(DpoptInputError, match="bounds"):
        release_user(agg, Budget(epsilon_total=1.0, delta=1e-3), UserOptions(bounds="median", strategy="fixed"), bound=U)
    with pytest.raises(DpoptInputError, match="k"):
        release_user(agg, Budget(epsilon_total=1.0, delta=1e-3), UserOptions(bounds=(0, 2), strategy="fixed"), bound=U)
    with pytest.raises(DpoptInputError, match="pair"):
        release_user(agg, Budget(epsilon_total=1.0, delta=1e-3), UserOptions(bounds=(3,), strategy="fixed"), bound=U)
    with pytest.raises(DpoptInputError, match="delta"):
        release_user(agg, Budget(epsilon_total=1.0, delta="0.1"), UserOptions(strategy="fixed"), bound=U)
    with pytest.raises(DpoptInputError, match="must be < 1"):
        release_user(agg, Budget(epsilon_total=1.0, delta=1e-3),
                     UserOptions(bounds_fraction=0.5, selection_fraction=0.5, strategy="fixed"), bound=U)
    with pytest.raises(DpoptInputError, match="keep_samples"):
        release_user(replace(agg, samples=None), Budget(epsilon_total=1.0, delta=1e-3), UserOptions(strategy="fixed"),
                     bound=U)


def test_from_records_through_ingestion():
    rows = []
    for u in range(6):
        for j in range(3):
            rows.append((f"bus{u}", 30.2672, -97.7431, f"2020-01-01T10:{5 * j + u:02d}:00Z", 10.0 + u))
    rows.append(("bus9", 30.2672, -97.7431, "2020-01-01T10:30:00Z", 500.0))  # clipped to U
    frame = pd.DataFrame(rows, columns=["user_id", "latitude", "longitude", "timestamp", "value"])
    cell = h3.latlng_to_cell(30.2672, -97.7431, 7)
    plist = pd.DataFrame({"cell": [cell], "slot": ["2020-01-01T10:00:00Z"]})
    res = release(frame, bound=100.0, budget=Budget(epsilon_total=1e9),
                  model=UserOptions(partitions=plist, bounds=(1, 3), pool_fraction=0.0, strategy="fixed"),
                  noise=NoiseOptions("numpy", seed=0))
    expected = (sum(3 * (10.0 + u) for u in range(6)) + 100.0) / 19
    assert res.table["mean"].iloc[0] == pytest.approx(expected, abs=1e-3)
    assert res.table["noisy_count"].iloc[0] == pytest.approx(19, abs=1e-3)
