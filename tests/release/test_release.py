"""The release pipeline: known answers by construction, accounting recounted independently."""

from __future__ import annotations

import json

import h3
import numpy as np
import pandas as pd
import pytest

from dpopt import DpoptInputError
from dpopt.release import (GridOptions, InputOptions, NoiseOptions, PerGridBudget, PublicOccupancyOptions, contributions,
                           load_austin_sample, release, release_aggregate, write_release)

from .conftest import NEAR_EXACT_ATOL

BIG_EPS = 1e8


def _by_key(result):
    t = result.table.set_index(["cell", "slot"])
    return t


def test_tiny_baseline_near_exact(tiny_records, cells):
    r = release(tiny_records, bound=100, budget=PerGridBudget(BIG_EPS), model=PublicOccupancyOptions(),
                noise=NoiseOptions(seed=1))
    t = _by_key(r)
    c1, c2 = cells
    want = {
        (c1, "2020-01-01T10:00:00Z"): (20.0, 200 / 3, 3, 2, 2),
        (c2, "2020-01-01T10:00:00Z"): (65.0, 125.0, 4, 3, 2),
        (c1, "2020-01-01T11:00:00Z"): (40.0, 0.0, 1, 1, 1),
    }
    for key, (mean, var, n, users, mstar) in want.items():
        row = t.loc[key]
        assert row["mean"] == pytest.approx(mean, abs=NEAR_EXACT_ATOL)
        assert row["variance"] == pytest.approx(var, abs=NEAR_EXACT_ATOL)
        assert (row["n_records"], row["n_users"], row["max_user_records"]) == (n, users, mstar)
    s = r.summary
    assert (s.users, s.grids, s.records, s.pairs) == (3, 3, 8, 6)
    assert s.degradation == s.degradation_baseline == 3  # user a is in all three grids
    assert s.epsilon_total == 3 * BIG_EPS and s.suppressed_pairs == 0 and s.seeded


def test_tiny_error_bound_by_hand(tiny_records, cells):
    """U = 100, ε = 1. Grid (P1,10h): N=3, m*=2: Δμ = 200/3, ΔVar = 2500(1 − 1/9) (R ≤ 2Γ*, odd).
    Grid (P2,10h): N=4, m*=2: Δμ = 50, ΔVar = 2500 (R ≤ 2Γ*, even). Grid (P1,11h): Δμ = 100, ΔVar = 0.
    E_g = 2Δμ/ε + 2ΔVar/ε (seed 002 eq. (12))."""
    r = release(tiny_records, bound=100, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(),
                noise=NoiseOptions(seed=2))
    t = _by_key(r)
    c1, c2 = cells
    dmu = {(c1, "2020-01-01T10:00:00Z"): 200 / 3, (c2, "2020-01-01T10:00:00Z"): 50.0, (c1, "2020-01-01T11:00:00Z"): 100.0}
    dvar = {(c1, "2020-01-01T10:00:00Z"): 2500 * 8 / 9, (c2, "2020-01-01T10:00:00Z"): 2500.0, (c1, "2020-01-01T11:00:00Z"): 0.0}
    for key in dmu:
        assert t.loc[key, "mean_sensitivity"] == pytest.approx(dmu[key])
        assert t.loc[key, "variance_sensitivity"] == pytest.approx(dvar[key])
        assert t.loc[key, "error_bound"] == pytest.approx(2 * dmu[key] + 2 * dvar[key])
        # noise scale: sensitivity rounded up to the 2^-12 grid, divided by ε/2
        assert dmu[key] / 0.5 <= t.loc[key, "mean_noise_scale"] <= (dmu[key] + 2 * 2**-12) / 0.5
    assert r.summary.error_bound == pytest.approx(5100.0)
    assert r.summary.error_bound <= r.summary.error_bound_released <= 5100.0 + 1e-2


def _recount(frame: pd.DataFrame, suppressed: pd.DataFrame, res=7, slot="1h") -> int:
    """Independent K: per-row h3 + pandas floor, minus suppressed (user, cell, slot), max grids per user."""
    d = pd.DataFrame({
        "user": frame["user_id"].astype(str),
        "cell": [h3.latlng_to_cell(a, b, res) for a, b in zip(frame.latitude, frame.longitude)],
        "slot": pd.to_datetime(frame.timestamp, utc=True).dt.floor(slot).dt.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }).drop_duplicates()
    drop = set(zip(suppressed.user.astype(str), suppressed.cell, suppressed.slot))
    keep = [k not in drop for k in zip(d.user, d.cell, d.slot)]
    return int(d[keep].groupby("user").size().max())


@pytest.mark.parametrize("plan", ["baseline", "greedy", "milp"])
def test_plans_accounting_matches_independent_recount(records, plan):
    r = release(records, bound=100, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(plan=plan, time_limit=20),
                noise=NoiseOptions(seed=4))
    s = r.summary
    assert s.degradation == _recount(records, r.suppressed_frame())
    assert s.epsilon_total == s.degradation * s.epsilon
    assert s.suppressed_pairs == len(r.suppressed_frame())
    # every grid keeps its worst-case error within the plan's E
    assert s.error_bound <= s.error_bound_target * (1 + 1e-9)
    if plan != "baseline":
        assert s.degradation == r.plan.info["suppression"].degradation
        assert s.degradation <= s.degradation_baseline


@pytest.mark.slow
def test_milp_no_worse_than_greedy(records):
    agg, ing = contributions(records, bound=100)
    g = release_aggregate(agg, PerGridBudget(1.0), PublicOccupancyOptions(plan="greedy"), bound=100,
                          noise=NoiseOptions(seed=1), ingest=ing)
    m = release_aggregate(agg, PerGridBudget(1.0), PublicOccupancyOptions(plan="milp", time_limit=20), bound=100,
                          noise=NoiseOptions(seed=1), ingest=ing)
    assert m.summary.degradation <= g.summary.degradation


def test_pseudo_users_release_first_samples(records):
    r = release(records, bound=100, budget=PerGridBudget(BIG_EPS),
                model=PublicOccupancyOptions(plan="greedy", pseudo_users=True), noise=NoiseOptions(seed=5))
    agg = r.aggregate
    clip = r.plan.array_length
    gamma = r.gamma()
    assert clip is not None and np.all(clip[agg.pair_grid][gamma > 0] >= gamma[gamma > 0])
    # brute force: keep min(count, m_g) first samples (by time, then value) of each unsuppressed pair
    d = records.copy()
    d["cell"] = [h3.latlng_to_cell(a, b, 7) for a, b in zip(d.latitude, d.longitude)]
    d["slot"] = d.timestamp.dt.floor("1h").dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    sup = r.suppressed_frame()
    drop = set(zip(sup.user, sup.cell, sup.slot))
    d = d[[k not in drop for k in zip(d.user_id, d.cell, d.slot)]]
    d = d.sort_values(["timestamp", "value"], kind="stable")
    d["rank"] = d.groupby(["user_id", "cell", "slot"]).cumcount()
    t = r.table.set_index(["cell", "slot"])
    d["m"] = t.loc[list(zip(d.cell, d.slot)), "array_length"].to_numpy()
    kept = d[d["rank"] < d["m"]]
    g = kept.groupby(["cell", "slot"]).value
    mean = g.mean()
    var = g.var(ddof=0)
    np.testing.assert_allclose(t.loc[mean.index, "mean"], mean, atol=NEAR_EXACT_ATOL)
    np.testing.assert_allclose(t.loc[var.index, "variance"], var, atol=NEAR_EXACT_ATOL)
    assert r.summary.truncated_records == len(d) - len(kept)
    assert r.summary.degradation == _recount(records, sup)


def test_numpy_noise_is_seeded_simulation(records):
    a = release(records, bound=100, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(),
                noise=NoiseOptions("numpy", seed=9))
    b = release(records, bound=100, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(),
                noise=NoiseOptions("numpy", seed=9))
    np.testing.assert_array_equal(a.table["mean"], b.table["mean"])
    assert "simulation only" in a.summary.noise


def test_discrete_noise_seeded_reproducible_and_on_grid(records):
    a = release(records, bound=100, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(),
                noise=NoiseOptions(seed=9, granularity_bits=8))
    b = release(records, bound=100, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(),
                noise=NoiseOptions(seed=9, granularity_bits=8))
    np.testing.assert_array_equal(a.table["mean"], b.table["mean"])
    v = a.table["variance"].dropna().to_numpy() * 2**8
    assert len(v) and np.all(v == np.round(v))
    assert "NOT for a real release" in a.summary.noise


@pytest.mark.slow
def test_example_sample_end_to_end(tmp_path):
    frame = load_austin_sample()
    assert len(frame) == 53569 and frame.user_id.nunique() == 146
    r = release(frame, bound=120, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(plan="greedy"),
                noise=NoiseOptions(seed=1))
    s = r.summary
    assert s.degradation == _recount(frame, r.suppressed_frame()) < s.degradation_baseline
    paths = write_release(r, tmp_path / "out")
    table = pd.read_csv(paths["release"])
    for col in ["grid", "cell", "slot", "n_users", "n_records", "mean", "variance"]:
        assert col in table.columns
    assert len(table) == s.grids and table["n_records"].sum() == len(frame)
    summary = json.loads(paths["summary"].read_text())
    for key in ["users", "grids", "degradation", "epsilon", "epsilon_total", "error_bound",
                "suppressed_pairs", "dropped_records"]:
        assert key in summary
    assert summary["epsilon_total"] == summary["degradation"] * summary["epsilon"]
    assert paths["map"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"{s.epsilon_total:g}" in paths["report"].read_text()
    assert len(pd.read_csv(paths["suppressed"])) == s.suppressed_pairs


def test_dropped_records_reach_summary(tiny_records):
    df = tiny_records.copy()
    df.loc[0, "value"] = np.nan
    df.loc[1, "value"] = 500.0
    r = release(df, bound=100, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(), noise=NoiseOptions(seed=1),
                io=InputOptions(out_of_range="drop", max_dropped=0.3))  # 2 of 8 dropped: above the default share
    assert r.summary.dropped_records == 2
    assert r.summary.ingest["missing"]["value"] == 1 and r.diagnostics["ingest"]["dropped_out_of_range"] == 1


@pytest.mark.parametrize(
    "options,match",
    [
        (lambda: {"model": PublicOccupancyOptions(plan="best")}, r"`plan` must be one of"),
        (lambda: {"budget": PerGridBudget(0)}, r"`epsilon` must be a positive finite number"),
        (lambda: {"bound": float("nan")}, r"`bound` must be a positive finite number"),
        (lambda: {"noise": NoiseOptions(noise="gauss")}, r"`noise` must be one of"),
        (lambda: {"noise": NoiseOptions(granularity_bits=129)}, r"`granularity_bits` must be an integer in -64\.\.128"),
        (lambda: {"model": PublicOccupancyOptions(error_bound=-1.0)}, r"`error_bound` must be a finite number >= 0"),
        (lambda: {"io": InputOptions(backend="spark")}, r"`backend` must be one of"),
        (lambda: {"model": PublicOccupancyOptions(split="half")}, r"`split` must be one of"),
        (lambda: {"grid": GridOptions(slot="often")}, r"`slot` must be a duration"),
        (lambda: {"grid": GridOptions(h3_resolution=16)}, r"`h3_resolution` must be an integer in 0..15"),
        (lambda: {"noise": NoiseOptions(seed="x")}, r"`seed` must be an integer or None"),
    ],
)
def test_bad_release_options(tiny_records, options, match):
    with pytest.raises(DpoptInputError, match=match):
        release(tiny_records, **{"bound": 100, "budget": PerGridBudget(1.0), "model": PublicOccupancyOptions(),
                                 **options()})


def test_pseudo_users_from_file_second_pass_equals_in_memory(records, tmp_path):
    path = tmp_path / "r.csv"
    records.assign(timestamp=records.timestamp.dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")).to_csv(path, index=False)
    kw = dict(bound=100, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(plan="greedy", pseudo_users=True),
              noise=NoiseOptions("numpy", seed=2))
    a = release(records, **kw)
    b = release(path, io=InputOptions(chunksize=300), **kw)
    assert a.aggregate.samples is not None and b.aggregate.samples is None
    assert a.summary.truncated_records == b.summary.truncated_records > 0
    np.testing.assert_allclose(a.table["mean"], b.table["mean"], rtol=1e-9)
    np.testing.assert_allclose(a.table["variance"], b.table["variance"], rtol=1e-9, atol=1e-9)


def test_granularity_too_fine_for_bound(tiny_records):
    with pytest.raises(DpoptInputError, match=r"the value range 1e\+09 does not fit the exact lattice 2\^-12"):
        release(tiny_records, bound=1e9, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(),
                noise=NoiseOptions(granularity_bits=12))


def test_the_default_lattice_follows_the_bound_so_a_wide_range_releases(tiny_records):
    """The same records in a unit 2^30 times smaller (bound 100·2^30): refused above on the lattice
    2^-12, released on the default lattice (2^-(18 - 36)), with the same grids and means in that unit."""
    s = 2.0**30
    scaled = tiny_records.assign(value=tiny_records["value"] * s)
    a = release(tiny_records, bound=100, budget=PerGridBudget(1e4), model=PublicOccupancyOptions(plan="baseline"),
                noise=NoiseOptions(seed=1))
    b = release(scaled, bound=100 * s, budget=PerGridBudget(1e4), model=PublicOccupancyOptions(plan="baseline"),
                noise=NoiseOptions(seed=1))
    assert b.summary.granularity == 2.0**18 and a.summary.granularity == 2.0**-12
    assert len(a.table) == len(b.table) > 0
    np.testing.assert_allclose(b.table["mean"] / s, a.table["mean"], atol=1e-3)


@pytest.mark.parametrize("plan", ["baseline", "greedy", "milp"])
def test_unreachable_error_bound_is_refused(tiny_records, plan):
    # grid (P1, 11h) holds one record: its error survives any plan that keeps it (and emptying it is
    # not a plan), so no plan meets E = 10; greedy/milp refuse it in dpopt.suppression, baseline here
    with pytest.raises(DpoptInputError, match=r"`error_bound`( = 10 cannot be met| must be at least [0-9.]+, .*; got 10\.0)"):
        release(tiny_records, bound=100, budget=PerGridBudget(1.0),
                model=PublicOccupancyOptions(plan=plan, error_bound=10.0), noise=NoiseOptions(seed=1))


def test_reachable_error_bound_is_met(records):
    base = release(records, bound=100, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(),
                   noise=NoiseOptions(seed=1))
    target = 1.5 * base.summary.error_bound
    r = release(records, bound=100, budget=PerGridBudget(1.0),
                model=PublicOccupancyOptions(plan="greedy", error_bound=target), noise=NoiseOptions(seed=1))
    assert r.summary.error_bound <= target and r.summary.error_bound_target == target
    greedy = release(records, bound=100, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(plan="greedy"),
                     noise=NoiseOptions(seed=1))
    assert r.summary.degradation <= greedy.summary.degradation


@pytest.mark.parametrize("noise", ["discrete", "numpy"])
def test_optimal_split_single_record_grid(tiny_records, cells, noise):
    """A grid with one record has Δ_Var = 0: the optimal split gives the variance no budget and
    its released variance is exactly 0 (data-independent), the mean gets all of ε."""
    r = release(tiny_records, bound=100, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(split="optimal"),
                noise=NoiseOptions(noise, seed=1))
    row = r.table.set_index(["cell", "slot"]).loc[(cells[0], "2020-01-01T11:00:00Z")]
    assert row["variance"] == 0.0 and row["epsilon_variance"] == 0.0 and row["epsilon_mean"] == 1.0
    assert row["error_bound"] == pytest.approx(100.0)  # (√Δμ + 0)²/ε = U/ε
    assert np.all(np.isfinite(r.table["mean"]))


@pytest.mark.parametrize("pseudo", [False, True])
def test_grid_errors_agree_with_the_plan_objects(records, pseudo):
    """The per-grid errors of the released retained counts equal those the planners computed
    (dpopt.grid_errors for the suppression plan, eq. (15) minimisers for pseudo-users)."""
    r = release(records, bound=100, budget=PerGridBudget(1.0),
                model=PublicOccupancyOptions(plan="greedy", pseudo_users=pseudo), noise=NoiseOptions(seed=1))
    want = r.plan.info["pseudo"].grid_errors if pseudo else r.plan.info["suppression"].grid_errors
    np.testing.assert_allclose(r.table["error_bound"], want, rtol=1e-12)
    if pseudo:
        assert np.all(r.table["error_bound"] <= r.plan.info["suppression"].grid_errors * (1 + 1e-12))


def test_suppressed_pairs_are_removed_from_the_statistics(records, monkeypatch):
    """Greedy plan at ε = 1 (it suppresses pairs; at a huge ε it would not), no pseudo-users, the
    sampler replaced by Z = 0: each grid's released mean/variance equal, up to the output grid, the
    brute-force statistics of the records whose (user, cell, slot) is not in suppressed.csv."""
    from dpopt.noise import discrete_laplace as noise_module

    monkeypatch.setattr(noise_module, "discrete_laplace_rational", lambda num, den, rng: np.zeros(np.shape(num), int))
    r = release(records, bound=100, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(plan="greedy"),
                noise=NoiseOptions(seed=6))
    sup = r.suppressed_frame()
    assert len(sup) > 0
    d = records.copy()
    d["cell"] = [h3.latlng_to_cell(a, b, 7) for a, b in zip(d.latitude, d.longitude)]
    d["slot"] = d.timestamp.dt.floor("1h").dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    drop = set(zip(sup.user, sup.cell, sup.slot))
    kept = d[[k not in drop for k in zip(d.user_id, d.cell, d.slot)]]
    g = kept.groupby(["cell", "slot"]).value
    # the noisy variance before release.csv withholds those whose interval is the whole range
    t = r.table.assign(variance=r.measurements.statistics["variance"].value).set_index(["cell", "slot"])
    np.testing.assert_allclose(t.loc[g.mean().index, "mean"], g.mean(), atol=NEAR_EXACT_ATOL)
    np.testing.assert_allclose(t.loc[g.mean().index, "variance"], g.var(ddof=0), atol=NEAR_EXACT_ATOL)
    np.testing.assert_array_equal(t.loc[g.mean().index, "n_records_retained"], g.size())
    # grids that lost every pair are withheld, not released
    withheld = ~t.index.isin(g.mean().index)
    assert np.all(~t.loc[withheld, "released"]) and r.summary.withheld_grids == int(withheld.sum())
    assert r.summary.suppressed_records == len(d) - len(kept)


def test_epsilon_too_small_for_discrete_sampler_is_refused_before_reading(tiny_records):
    with pytest.raises(DpoptInputError, match=r"`epsilon` must be >= 2\^-29"):
        release(tiny_records.assign(value="oops"), bound=100, budget=PerGridBudget(1e-12),
                model=PublicOccupancyOptions())


def test_neighbours_snapped_statistics_differ_by_at_most_t(records, monkeypatch):
    """End to end, sampler replaced by Z = 0: for neighbours (one user's values all 0 vs all U, same
    occupancy) every grid's snapped mean and variance differ by at most the integer sensitivity t
    the sampler used (t = scale·ε'/λ), so the discrete Laplace noise covers them."""
    from dpopt.noise import discrete_laplace as noise_module

    monkeypatch.setattr(noise_module, "discrete_laplace_rational", lambda num, den, rng: np.zeros(np.shape(num), int))
    lam = 2.0**-12
    user = records.user_id.value_counts().index[0]
    lo = records.assign(value=np.where(records.user_id == user, 0.0, records.value))
    hi = records.assign(value=np.where(records.user_id == user, 100.0, records.value))
    def noisy(r):  # the noisy statistics, before post-processing and before withholding
        return r.table.assign(**{s: r.measurements.statistics[s].value for s in ("mean", "variance")})

    a = noisy(release(lo, bound=100, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(plan="greedy"),
                      noise=NoiseOptions(seed=1)))
    b = noisy(release(hi, bound=100, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(plan="greedy"),
                      noise=NoiseOptions(seed=1)))
    np.testing.assert_array_equal(a["n_records_retained"], b["n_records_retained"])
    ok = a["released"].to_numpy()
    for stat in ("mean", "variance"):
        eps_used = np.array([float(noise_module.epsilon_rational(e)) for e in a[f"epsilon_{stat}"][ok]])
        t = np.rint(a[f"{stat}_noise_scale"][ok].to_numpy() * eps_used / lam)
        diff = np.abs(a[stat][ok].to_numpy() - b[stat][ok].to_numpy()) / lam
        assert np.all(diff <= t) and np.any(diff > 0), stat
        # t is the sensitivity rounded up by at most a few grid units (rounding + float slack)
        sens = a[f"{stat}_sensitivity"][ok].to_numpy() / lam
        assert np.all(t >= sens + 1) and np.all(t <= sens + 3)


def test_a_gaussian_public_occupancy_release_refuses_a_range_its_sampler_cannot_hold(tiny_records):
    """The discrete Gaussian takes the variance's sensitivity U²/4 on the lattice as an exact float
    integer (≤ 2^53): at a bound of 1.3e11 (the default lattice 2^18) a release stopped in the sampler
    with "`t` must be an integer >= 1 and <= 2^53". It is refused before reading, naming the unit; a
    range of 6.7e9 releases."""
    from dpopt.privacy.options import Budget

    gauss = Budget(epsilon_total=10.0, delta=1e-6, mechanism="gaussian")
    with pytest.raises(DpoptInputError, match=r"express the values in a unit where the range is below 1e10"):
        release("/nonexistent/records.csv", bound=100 * 2.0**30, budget=gauss,
                model=PublicOccupancyOptions(plan="greedy"))
    s = 2.0**26
    r = release(tiny_records.assign(value=tiny_records["value"] * s), bound=100 * s, budget=gauss,
                model=PublicOccupancyOptions(plan="greedy"), noise=NoiseOptions(seed=1))
    assert r.summary.granularity == 2.0**14 and len(r.table) > 0
