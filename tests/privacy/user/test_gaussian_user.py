"""Gaussian noise with zCDP accounting in the ``user`` model (models/gaussian.md, models/user_level.md):
ℓ2 sensitivities by enumeration, the ρ split against numeric minimisation, the accounting, the
noise law, the error-bound coverage, neighbours and the command line."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import h3
import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize

from dpopt._validation import DpoptInputError
from dpopt.accounting import rho_from_epsilon, zcdp_epsilon
from dpopt.noise import SeededSource
from dpopt.noise.discrete_gaussian import discrete_gaussian_pmf
from dpopt.release import Budget, NoiseOptions, UserOptions, release_user, write_release
from dpopt.privacy.user.mechanism import DiscreteGaussian, GaussianSimulation, LaplaceSimulation, l2_squared
from dpopt.privacy.user.sensitivity import sensitivities, sqrt_up
from dpopt.privacy.user.split import split_budget

from .conftest import make_agg
from .test_cli_user import _one_line_error, _run
from .test_cli_user import _records as _cli_records
from .test_release import PUBLIC_FIELDS, _order, _plist, _records, _truth
from .test_sensitivity import BITS, CASES, _base, _stats, _user_configs

U = 10.0


# --- ℓ2 sensitivities -------------------------------------------------------------------------------

@pytest.mark.parametrize(("k", "c", "values", "grids", "extra"), CASES)
@pytest.mark.slow
def test_l2_sensitivities_by_enumeration(k, c, values, grids, extra):
    """max over one added user of Σ_g (change in grid g)², per statistic, is exactly the squared ℓ2
    sensitivity k·c²·(1, H_Y², H_Z²) and k of the users; the floats square to at least that."""
    s = sensitivities(k, c, 4.0, lam=2.0**-BITS)
    base = _stats(_base(), k, c)
    worst = np.zeros(4, dtype=np.int64)
    for user in _user_configs(c, values, grids, extra):
        worst = np.maximum(worst, ((_stats(_base() + user, k, c) - base) ** 2).sum(axis=1))
    hy = hz = 2  # U = 4, λ = 1: H_Y = U/2, H_Z = U²/8
    expected = np.array([k * c * c, k * (c * hy) ** 2, k * (c * hz) ** 2, k])
    assert np.array_equal(worst, expected)  # attained: the bound is exact
    got = [l2_squared(v) for v in (s.count_l2, s.sum_l2_units, s.sumsq_l2_units, s.users_l2)]
    assert got == expected.tolist()
    for v, e in zip((s.count_l2, s.sum_l2_units, s.sumsq_l2_units, s.users_l2), expected):
        assert Fraction(v) ** 2 >= int(e)  # never below the true sensitivity
        assert v == pytest.approx(math.sqrt(int(e)), rel=1e-15)


def test_sqrt_up_is_an_upper_bound_and_tight():
    rng = np.random.default_rng(0)
    for n in [1, 2, 3, 5, 8, 10**6 + 1, 2**53 + 1, 3 * 10**17 + 7, *rng.integers(1, 2**62, size=50).tolist()]:
        x = sqrt_up(int(n))
        assert Fraction(x) ** 2 >= n
        assert Fraction(math.nextafter(x, 0.0)) ** 2 < n  # the smallest such float
    # the value-level ℓ2 of the release's lattice (U = 120, λ = 2^-12) squares back to the integer
    s = sensitivities(37, 5, 120.0)
    hz = math.ceil(120.0**2 / 8 * 2**12)
    assert l2_squared(s.sumsq_l2_units) >= 37 * (5 * hz) ** 2
    assert l2_squared(s.sumsq_l2_units) <= 37 * (5 * hz) ** 2 * (1 + 1e-15)


# --- the ρ split -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("k", "c", "typical", "wm", "wv"), [(1, 1, None, 1.0, 1.0), (9, 3, None, 1.0, 1.0),
                                                            (16, 2, (30.0, 20.0), 1.0, 1.0),
                                                            (4, 5, (90.0, 10.0), 0.3, 2.0)])
@pytest.mark.slow
def test_rho_split_matches_numeric_minimisation(k, c, typical, wm, wv):
    """Σ w_i·Var_i with Var_i = Δ2_i²/(2ρ_i), Δ2 = √k·c·(1, U/2, U²/8), written from scratch and
    minimised numerically on the simplex, against the closed form ρ_i ∝ √(w_i)·Δ2_i."""
    Ub, rho = 120.0, 1.3
    sp = split_budget(rho, bound=Ub, unit="rho", weight_mean=wm, weight_variance=wv, typical=typical)
    mu, sd = (Ub, 0.0) if typical is None else typical  # the worst case: all values at U
    ybar = mu - Ub / 2.0
    zbar = ybar**2 + sd**2 - Ub * Ub / 8.0
    d2 = [math.sqrt(k) * c * f for f in (1.0, Ub / 2.0, Ub * Ub / 8.0)]

    def objective(parts):
        var = [d * d / (2.0 * p) for d, p in zip(d2, parts)]
        mse_mean = var[1] + ybar**2 * var[0]
        mse_var = var[2] + 4 * ybar**2 * var[1] + (2 * ybar**2 - zbar) ** 2 * var[0]
        return wm * mse_mean / Ub**2 + wv * mse_var / (Ub * Ub / 4.0) ** 2

    def f(x):
        return objective(rho * np.exp(x) / np.exp(x).sum())

    best = min((minimize(f, x0, method="Nelder-Mead", options={"xatol": 1e-11, "fatol": 1e-15, "maxiter": 20000})
                for x0 in (np.zeros(3), np.array([1.0, 0.0, -1.0]), np.array([-1.0, 2.0, 0.0]))),
               key=lambda r: r.fun)
    ours = np.array([sp.count, sp.sum, sp.sumsq])
    assert ours.sum() == pytest.approx(rho, rel=1e-12)
    assert objective(ours) <= best.fun * (1 + 1e-9)
    numeric = rho * np.exp(best.x) / np.exp(best.x).sum()
    assert ours == pytest.approx(numeric, rel=2e-3)
    # the rule in words: the weight of statistic i in the objective is w_i·Δ_i² (w = a_i/Δ_i² ·const),
    # and ρ_i ∝ √(w_i)·Δ_i = √(a_i)
    a = np.asarray(sp.coefficients)
    assert ours / ours.sum() == pytest.approx(np.sqrt(a) / np.sqrt(a).sum(), rel=1e-12)


# --- accounting --------------------------------------------------------------------------------------

def _rho_recount(summary) -> Fraction:
    """ρ_total recounted from the published pieces: ρ pieces plus ε²/2 of the pure-ε ones."""
    total = Fraction(0)
    for name, v in summary.budget.items():
        if name.endswith("_rho"):
            total += Fraction(v)
        else:
            assert name.endswith("_epsilon"), name
            total += Fraction(v) ** 2 / 2
    return total


@pytest.mark.parametrize("noise", ["numpy", "discrete"])
@pytest.mark.parametrize("private", [False, True])
@pytest.mark.parametrize("bounds", ["select", (2, 2)])
def test_rho_total_never_exceeds_the_budget(noise, private, bounds):
    agg = make_agg(_records(seed=1, users=30))
    parts = None if private else _plist(range(6))
    for rho in (0.05, 1.0, 7.3):
        res = release_user(agg, Budget(rho=rho, delta=1e-6, mechanism="gaussian"),
                           UserOptions(partitions=parts, bounds=bounds, strategy="fixed"), bound=U,
                           noise=NoiseOptions(noise, seed=5))
        s = res.summary
        assert s.mechanism == "gaussian" and s.privacy_model == "user"
        exact = _rho_recount(s)
        assert exact <= Fraction(rho)
        assert Fraction(s.rho_total) <= Fraction(rho) and s.rho_total == pytest.approx(float(exact), rel=1e-15)
        assert s.rho_total >= rho * (1 - 1e-6)  # (nearly) all of it is spent
        d_sel = 0.5e-6 if private else 0.0
        assert s.delta == 1e-6 and s.delta_selection == d_sel
        assert s.epsilon_total == pytest.approx(zcdp_epsilon(s.rho_total, 1e-6 - d_sel), rel=1e-12)
        assert ("bounds_epsilon" in s.budget) == isinstance(bounds, str)
        assert ("selection_epsilon" in s.budget) == private


@pytest.mark.parametrize("private", [False, True])
def test_epsilon_delta_budget_is_met(private):
    agg = make_agg(_records(seed=1, users=30))
    parts = None if private else _plist(range(6))
    for eps in (1.0, 10.0):
        s = release_user(agg, Budget(epsilon_total=eps, delta=1e-6, mechanism="gaussian"),
                         UserOptions(partitions=parts, strategy="fixed"), bound=U,
                         noise=NoiseOptions("discrete", seed=2)).summary
        d_conv = 1e-6 * (0.5 if private else 1.0)
        assert s.epsilon_total <= eps
        assert s.epsilon_total == pytest.approx(eps, rel=1e-6)
        assert s.rho_total <= rho_from_epsilon(eps, d_conv)
        # the selection's δ_p plus the conversion's δ is the stated δ
        assert s.delta_selection + d_conv == pytest.approx(s.delta, rel=1e-15)


def test_rho_without_delta_states_zcdp_only_and_bad_budgets_are_refused():
    agg = make_agg(_records(seed=1))
    s = release_user(agg, Budget(rho=0.5, mechanism="gaussian"),
                     UserOptions(partitions=_plist(range(5)), strategy="fixed"), bound=U,
                     noise=NoiseOptions("numpy", seed=1)).summary
    assert s.epsilon_total is None and s.delta == 0.0 and s.rho_total <= 0.5
    listed = {"partitions": _plist(range(5))}
    cases = [({"mechanism": "gaussian", "epsilon_total": 1.0}, listed, None, "delta"),
             ({"mechanism": "gaussian", "rho": 1.0}, {}, None, "delta"),  # private selection needs δ
             ({"mechanism": "gaussian", "rho": 1.0, "epsilon_total": 1.0, "delta": 1e-6}, {}, None, "epsilon"),
             ({"mechanism": "gaussian", "rho": -1.0}, listed, None, "rho"),
             ({"mechanism": "laplace", "rho": 1.0}, listed, None, "rho"),
             ({"mechanism": "cauchy", "epsilon_total": 1.0}, listed, None, "mechanism"),
             ({"mechanism": "gaussian", "epsilon_total": 1.0}, listed, LaplaceSimulation(np.random.default_rng(0)),
              "sampler")]
    for budget, options, sampler, name in cases:
        with pytest.raises(DpoptInputError, match=f"`{name}"):
            release_user(agg, Budget(**budget), UserOptions(**options, strategy="fixed"), bound=U,
                         noise=NoiseOptions("numpy"), sampler=sampler)


def test_an_epsilon_total_whose_rho_is_below_the_floor_is_refused_by_its_own_name():
    """Under the Gaussian mechanism ``epsilon_total`` with ``delta`` becomes ρ (rho_from_epsilon); a ρ
    below ``MIN_BUDGET_TOTAL`` is refused naming ``epsilon_total``, its smallest allowed value and
    the ρ, as a given ``rho`` is (a fuzz run: ε = 1e-3, δ = 1e-6 was refused deep inside as
    "`epsilon` must be >= 2^-30 … got 7.6e-10", an option the user never gave)."""
    from dpopt.accounting import rho_from_epsilon, zcdp_epsilon
    from dpopt.privacy.options import MIN_BUDGET_TOTAL

    agg = make_agg(_records(seed=1))
    options = UserOptions(partitions=_plist(range(5)), strategy="fixed")
    with pytest.raises(DpoptInputError, match=r"^`epsilon_total` must be >= 0\.00438 with mechanism='gaussian' and "
                                              r"delta=1e-06: epsilon_total=0\.001 is rho = 6\.55e-08"):
        release_user(agg, Budget(epsilon_total=1e-3, delta=1e-6, mechanism="gaussian"), options, bound=U,
                     noise=NoiseOptions("numpy"))
    need = zcdp_epsilon(MIN_BUDGET_TOTAL, 1e-6)
    assert rho_from_epsilon(1.001 * need, 1e-6) >= MIN_BUDGET_TOTAL > rho_from_epsilon(0.999 * need, 1e-6)
    s = release_user(agg, Budget(epsilon_total=1.001 * need, delta=1e-6, mechanism="gaussian"), options, bound=U,
                     noise=NoiseOptions(seed=1)).summary  # just above the floor: the exact samplers draw
    assert s.rho_total <= rho_from_epsilon(1.001 * need, 1e-6)


def test_a_sampler_object_replaces_the_noise_of_its_budget_unit():
    """An explicit sampler object draws the noise (the same seeded sampler, the same counts) in the
    unit of the budget's mechanism: a Gaussian sampler under ρ, a Laplace one under ε."""
    agg = make_agg(_records(seed=1))
    options = UserOptions(partitions=_plist(range(5)), bounds=(2, 2), strategy="fixed")
    a, b = (release_user(agg, Budget(rho=0.5, mechanism="gaussian"), options, bound=U, noise=NoiseOptions(seed=0),
                         sampler=GaussianSimulation(np.random.default_rng(3))) for _ in range(2))
    assert a.summary.mechanism == b.summary.mechanism == "gaussian"
    assert np.array_equal(a.table["noisy_count"], b.table["noisy_count"])
    c = release_user(agg, Budget(epsilon_total=1.0), options, bound=U, noise=NoiseOptions(),
                     sampler=LaplaceSimulation(np.random.default_rng(3)))
    assert c.summary.mechanism == "laplace" and c.summary.rho_total is None


# --- the noise law -----------------------------------------------------------------------------------

def test_simulation_noise_std_matches_sigma():
    """Sample variance of the numpy mechanism against σ² = Δ2²/(2ρ) (χ²: the ratio has sd √(2/n))."""
    mech = GaussianSimulation(np.random.default_rng(0))
    n = 40_000
    for l2, rho in ((3.0, 0.5), (sqrt_up(8 * 9), 0.02), (1.0, 50.0)):
        sigma = l2 / math.sqrt(2 * rho)
        assert mech.scale(l1=1, l2=l2, budget=rho) == pytest.approx(sigma, rel=1e-15)
        z = mech.integer(np.zeros(n, dtype=np.int64), l1=1, l2=l2, budget=rho)
        ratio = float(np.mean(z**2)) / sigma**2
        assert abs(ratio - 1.0) < 5 * math.sqrt(2.0 / n)


def test_discrete_mechanism_variance_and_exact_sigma2():
    mech = DiscreteGaussian(SeededSource(1), seeded=True)
    l2, rho = sqrt_up(3 * 4), 0.25  # Δ2² = 12: σ² = 12/(2·0.25) = 24
    assert mech.sigma2(l2=l2, budget=rho) == Fraction(24)
    assert mech.scale(l1=6, l2=l2, budget=rho) == pytest.approx(math.sqrt(24), rel=1e-15)
    n = 6000
    z = mech.integer(np.zeros(n, dtype=np.int64), l1=6, l2=l2, budget=rho)
    assert np.all(z == np.round(z))
    sig = math.sqrt(24)
    y = np.arange(-400, 401)
    var_exact = float((discrete_gaussian_pmf(y, sig) * y**2).sum())  # ≈ σ² for σ ≥ 1
    assert abs(float(np.mean(z**2)) / var_exact - 1.0) < 5 * math.sqrt(2.0 / n)
    assert "seeded: NOT for a real release" in mech.label


@pytest.mark.parametrize("sigma", [0.7, 2.0, 9.5, 60.0])
def test_discrete_tail_bounds_hold_against_the_pmf(sigma):
    mech = DiscreteGaussian(SeededSource(0))
    top = math.ceil(40 * sigma) + 40
    z = np.arange(-top, top + 1)
    pmf = discrete_gaussian_pmf(z, sigma)
    for prob in (0.2, 0.05 / 3, 1e-3, 1e-6):
        x = mech.abs_quantile(sigma, prob)
        assert x == int(x) and pmf[np.abs(z) > x].sum() <= prob
        j = mech.upper_quantile(sigma, prob)
        assert j == int(j) and pmf[z >= j].sum() <= prob
    for x in (-3.0, 0.0, 0.5, 2.0, 3 * sigma):
        assert mech.upper_tail(sigma, x) == pytest.approx(pmf[z >= math.ceil(x)].sum(), rel=1e-9, abs=1e-300)


# --- the release -------------------------------------------------------------------------------------

@pytest.mark.slow
def test_error_bounds_cover_at_least_95_percent_with_gaussian_noise():
    recs = _records(seed=2, users=40, grids=5)
    mean, var = _truth(recs)
    agg = make_agg(recs)
    plist = _plist(range(5))
    cover_m = cover_v = total = 0
    for s in range(300):
        t = release_user(agg, Budget(rho=0.5, mechanism="gaussian"),
                         UserOptions(partitions=plist, bounds=(5, 3), strategy="fixed"), bound=U,
                         noise=NoiseOptions("numpy", seed=s)).table
        o = _order(t)
        cover_m += int((np.abs(t["mean"].to_numpy() - mean.to_numpy()[o]) <= t["mean_error_bound"].to_numpy()).sum())
        # a withheld variance (NaN) has the whole range [0, U²/4] as interval, which covers
        cover_v += int((np.abs(t["variance"].to_numpy() - var.to_numpy()[o]) <= t["variance_error_bound"].to_numpy()).sum())
        cover_v += int(np.isnan(t["variance"].to_numpy()).sum())
        total += len(t)
    assert cover_m / total >= 0.95 and cover_v / total >= 0.95


def test_accurate_at_huge_rho():
    recs = _records(seed=3, users=30, grids=5)
    mean, var = _truth(recs)
    t = release_user(make_agg(recs), Budget(rho=1e8, mechanism="gaussian"),
                     UserOptions(partitions=_plist(range(5)), bounds=(5, 10), strategy="fixed"), bound=U,
                     noise=NoiseOptions("discrete", seed=0)).table
    o = _order(t)
    assert np.allclose(t["mean"], mean.to_numpy()[o], atol=1e-2)
    assert np.allclose(t["variance"], var.to_numpy()[o], atol=0.1)


@pytest.mark.parametrize("noise", ["numpy", "discrete"])
def test_neighbours_publish_identical_non_noisy_fields_gaussian(noise):
    base = _records()
    extra = [("zz", 1, 0, 9.0), ("zz", 1, 1, 8.0), ("zz", 2, 0, 0.5), ("zz", 4, 0, 1.0)]
    plist = _plist([0, 1, 2, 3, 4, 5])
    a, b = (release_user(make_agg(recs), Budget(epsilon_total=3.0, delta=1e-6, mechanism="gaussian"),
                         UserOptions(partitions=plist, bounds=(2, 2), strategy="fixed"), bound=U,
                         noise=NoiseOptions(noise, seed=11)) for recs in (base, base + extra))
    assert list(a.table.columns) == list(b.table.columns)
    for col in PUBLIC_FIELDS:
        assert a.table[col].tolist() == b.table[col].tolist()
    sa, sb = a.summary.as_dict(), b.summary.as_dict()
    for key in sa:
        if key not in ("pooling", "outlook", "outlook_epsilon_needed"):  # post-processing of noisy values
            assert sa[key] == sb[key], key
    assert all(not np.allclose(a.table[c], b.table[c]) for c in ("noisy_count", "mean_raw", "variance_raw"))


def test_written_files_state_the_zcdp_accounting(tmp_path):
    res = release_user(make_agg(_records()), Budget(epsilon_total=2.0, delta=1e-6, mechanism="gaussian"),
                       UserOptions(partitions=_plist(range(5)), strategy="fixed"), bound=U,
                       noise=NoiseOptions("discrete", seed=3))
    paths = write_release(res, tmp_path / "out")
    summary = json.loads(paths["summary"].read_text())
    assert summary["mechanism"] == "gaussian" and summary["delta"] == 1e-6
    assert summary["rho_total"] == res.summary.rho_total and summary["epsilon_total"] <= 2.0
    report = paths["report"].read_text()
    assert "rho-zero-concentrated DP" in report and "Corollary 13" in report


# --- the command line --------------------------------------------------------------------------------

@pytest.fixture
def csv(tmp_path):
    path = tmp_path / "records.csv"
    _cli_records().to_csv(path, index=False)
    return path


@pytest.fixture
def partitions(tmp_path):
    from .conftest import CELLS

    rows = [(h3.int_to_str(CELLS[g % 3]), (pd.Timestamp("2020-01-01T10:00:00Z") + pd.Timedelta(hours=g // 3))
             .strftime("%Y-%m-%dT%H:%M:%SZ")) for g in range(6)]
    path = tmp_path / "partitions.csv"
    pd.DataFrame(rows, columns=["cell", "slot"]).to_csv(path, index=False)
    return path


def test_cli_gaussian_end_to_end(tmp_path, capsys, csv, partitions):
    out = tmp_path / "o"
    code, stdout, err = _run(capsys, csv, "--bound", 100, "--mechanism", "gaussian", "--epsilon-total", 10,
                             "--delta", 1e-6, "--partitions", partitions, "--out", out, "--seed", 1, "--json",
                             "--resolution", "fixed")  # the flat release (adaptive is the default)
    assert code == 0, err
    printed = json.loads(stdout)
    summary = json.loads((out / "summary.json").read_text())
    assert printed["mechanism"] == summary["mechanism"] == "gaussian"
    assert summary["privacy_model"] == "user" and summary["delta"] == 1e-6
    assert 0 < summary["rho_total"] <= rho_from_epsilon(10.0, 1e-6)
    assert summary["epsilon_total"] <= 10.0
    assert summary["grids_released"] == 6
    table = pd.read_csv(out / "release.csv")
    assert len(table) == 6 and not {"n_users", "n_records"} & set(table.columns)
    assert np.all(table["noisy_count"] == np.round(table["noisy_count"]))  # the exact sampler
    # --rho, and private selection (δ split between the selection and the conversion)
    code, stdout, err = _run(capsys, csv, "--bound", 100, "--mechanism", "gaussian", "--rho", 2, "--delta", 1e-6,
                             "--out", tmp_path / "o2", "--seed", 1, "--json",
                             "--resolution", "fixed")  # private multi-resolution is Laplace only
    assert code == 0, err
    s2 = json.loads((tmp_path / "o2" / "summary.json").read_text())
    assert s2["rho_total"] <= 2.0 and s2["delta_selection"] == 5e-7


@pytest.mark.parametrize("argv, flag", [
    (("--mechanism", "gaussian", "--epsilon-total", 10), "--delta"),
    (("--rho", 1), "--rho"),
    (("--mechanism", "gaussian", "--rho", 1, "--epsilon-total", 10, "--delta", 1e-6), "--rho"),
])
def test_cli_refuses_incomplete_gaussian_budgets(tmp_path, capsys, csv, argv, flag):
    code, _, err = _run(capsys, csv, "--bound", 100, *argv, "--out", tmp_path / "o")
    _one_line_error(code, err, flag)
    assert not (tmp_path / "o").exists()
