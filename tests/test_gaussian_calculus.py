"""Gaussian noise in the error calculus (dpopt.calculus, models/gaussian.md §2-3):
brute force for the pair sensitivity, numeric minimisation for the ρ split, Monte Carlo for the
noise terms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from dpopt import DpoptInputError
from dpopt.calculus import (
    gaussian_grid_error_terms,
    gaussian_grid_errors,
    gaussian_mean_abs,
    gaussian_quantile,
    gaussian_rho_split,
    gaussian_sigma,
    grid_error_terms,
    pair_l2_sensitivity_from_totals,
)
from dpopt.occupancy import Occupancy
from dpopt.verify import estimators as est
from dpopt.verify.bruteforce import enumerate_datasets


def brute_pair_l2(counts, levels: int, weights=(1.0, 1.0), bound: float = 1.0) -> float:
    """max over user-level neighbours of ‖(w₁δμ, w₂δVar)‖₂, all pairs of a user's value vectors."""
    m = np.asarray(counts)
    vals = np.linspace(0, bound, levels)
    data = enumerate_datasets(m, vals)
    mu = est.clipped_mean(m)(data, m)
    var = est.clipped_variance(m)(data, m)
    shape = tuple(levels ** int(mi) for mi in m)
    M, V = mu.reshape(shape), var.reshape(shape)
    best = 0.0
    for u in range(m.size):
        Mu = np.moveaxis(M, u, 0).reshape(shape[u], -1)
        Vu = np.moveaxis(V, u, 0).reshape(shape[u], -1)
        dm = Mu[:, None, :] - Mu[None, :, :]
        dv = Vu[:, None, :] - Vu[None, :, :]
        best = max(best, float(np.sqrt((weights[0] * dm) ** 2 + (weights[1] * dv) ** 2).max()))
    return best


EXACT = [(1, 1), (1, 1, 1), (2, 1), (2, 2), (1, 1, 1, 1), (2, 1, 1), (3, 2), (3, 3), (2, 2, 2), (3, 1, 1, 1), (2, 2, 1)]
STRICT = [(3, 1), (4, 1), (4, 2), (5, 1), (4, 1, 1)]


@pytest.mark.parametrize("counts", EXACT + STRICT)
@pytest.mark.parametrize("weights", [(1.0, 1.0), (1.0, 10.0), (10.0, 1.0)])
def test_pair_l2_sensitivity_exact_iff_R_at_least_2gamma_minus_1(counts, weights):
    R, g = sum(counts), max(counts)
    # pairs along the changed user's axis: levels^(R + Γ*) entries; keep them below ~10⁶
    levels = 5 if 5 ** (R + g) <= 2_000_000 else 3
    brute = brute_pair_l2(counts, levels, weights)
    from dpopt.calculus import mean_sensitivity_from_totals, variance_sensitivity_from_totals

    bound = math.hypot(weights[0] * float(mean_sensitivity_from_totals(R, g, 1.0)),
                       weights[1] * float(variance_sensitivity_from_totals(R, g, 1.0)))
    assert brute <= bound + 1e-12  # always an upper bound
    if R >= 2 * g - 1:
        assert brute == pytest.approx(bound, rel=1e-12)
        assert (counts in EXACT)
    else:
        assert brute < bound - 1e-4  # strictly smaller on the value grid
        assert (counts in STRICT)
    if weights == (1.0, 1.0):
        assert float(pair_l2_sensitivity_from_totals(R, g, 1.0)) == pytest.approx(bound, rel=1e-15)


def test_pair_l2_scales_per_coordinate_with_U():
    # Δ_μ ∝ U, Δ_Var ∝ U²: at U = 2 the pair (1, 1, 1) has Δ_μ = 2/3, Δ_Var = 8/9
    assert float(pair_l2_sensitivity_from_totals(3, 1, 2.0)) == pytest.approx(math.hypot(2 / 3, 8 / 9))


@pytest.mark.parametrize("seed", range(6))
def test_optimal_rho_split_matches_numeric_minimisation(seed):
    rng = np.random.default_rng(seed)
    dmu, dvar = rng.uniform(0.01, 100, 2)
    rho = float(rng.uniform(0.01, 5))
    res = optimize.minimize_scalar(lambda f: dmu / math.sqrt(2 * rho * f) + dvar / math.sqrt(2 * rho * (1 - f)),
                                   bounds=(1e-9, 1 - 1e-9), method="bounded", options={"xatol": 1e-12})
    r_mu, r_var = gaussian_rho_split(dmu, dvar, rho, split="optimal")
    assert float(r_mu + r_var) == pytest.approx(rho, rel=1e-14)
    assert float(r_mu) / rho == pytest.approx(res.x, abs=1e-6)
    closed = (dmu ** (2 / 3) + dvar ** (2 / 3)) ** 1.5 / math.sqrt(2 * rho)
    assert float(gaussian_sigma(dmu, r_mu) + gaussian_sigma(dvar, r_var)) == pytest.approx(res.fun, rel=1e-9)
    assert closed == pytest.approx(res.fun, rel=1e-9)


def test_split_equal_and_zero_sensitivity():
    r_mu, r_var = gaussian_rho_split([1.0, 2.0], [3.0, 0.0], [1.0, 0.4])
    np.testing.assert_array_equal(r_mu, [0.5, 0.2])
    np.testing.assert_array_equal(r_var, [0.5, 0.2])
    r_mu, r_var = gaussian_rho_split([2.0], [0.0], [0.4], split="optimal")  # Var of one sample: no budget
    assert float(r_mu[0]) == 0.4 and float(r_var[0]) == 0.0
    assert float(gaussian_sigma(0.0, 0.0)) == 0.0
    assert float(gaussian_sigma(1.0, 0.0)) == math.inf


def test_sigma_mean_abs_and_quantile_against_monte_carlo():
    rng = np.random.default_rng(7)
    sigma = float(gaussian_sigma(3.0, 0.5))
    assert sigma == 3.0
    z = rng.normal(0, sigma, 400_000)
    m = float(gaussian_mean_abs(sigma))
    assert m == pytest.approx(stats.halfnorm(scale=sigma).mean(), rel=1e-12)
    assert np.abs(z).mean() == pytest.approx(m, abs=5 * np.abs(z).std() / math.sqrt(z.size))
    for q in (0.5, 0.9, 0.95, 0.99):
        x = float(gaussian_quantile(sigma, q))
        assert x == pytest.approx(stats.halfnorm(scale=sigma).ppf(q), rel=1e-12)
        p = np.mean(np.abs(z) <= x)
        assert p == pytest.approx(q, abs=5 * math.sqrt(q * (1 - q) / z.size))
    with pytest.raises(DpoptInputError, match="`q`"):
        gaussian_quantile(1.0, 1.0)


def test_grid_error_terms_by_hand_and_against_laplace_terms():
    N, R, g = np.array([4.0, 6.0, 3.0]), np.array([4.0, 5.0, 3.0]), np.array([2.0, 2.0, 1.0])
    U, rho = 10.0, 0.8
    t = gaussian_grid_error_terms(N, R, g, U, rho)
    lap = grid_error_terms(N, R, g, U, 1.0)  # the bias and sensitivity parts are shared
    np.testing.assert_array_equal(t.mean_bias, lap.mean_bias)
    np.testing.assert_array_equal(t.variance_bias, lap.variance_bias)
    # grid 0 by hand: Δ_μ = 10·2/4 = 5, Δ_Var = 100/4 = 25 (R = 2Γ*); σ_i = Δ_i/√ρ at ρ/2 each
    assert t.sigma_mean[0] == pytest.approx(5 / math.sqrt(0.8))
    assert t.sigma_variance[0] == pytest.approx(25 / math.sqrt(0.8))
    assert t.noise[0] == pytest.approx(math.sqrt(2 / math.pi) * 30 / math.sqrt(0.8))
    assert t.error[0] == pytest.approx(t.noise[0])  # BASELINE grid: no bias
    # grid 1 keeps 5 of 6: bias U/6 + Var bias U²·5·1/36
    assert t.error[1] == pytest.approx(10 / 6 + 100 * 5 / 36 + t.noise[1])
    opt = gaussian_grid_error_terms(N, R, g, U, rho, split="optimal")
    assert np.all(opt.noise <= t.noise + 1e-12)
    np.testing.assert_allclose(opt.rho_mean + opt.rho_variance, rho)
    q = gaussian_grid_error_terms(N, R, g, U, rho, quantile=0.95)
    np.testing.assert_allclose(q.noise, 1.959963984540054 * (q.sigma_mean + q.sigma_variance))


def test_grid_error_noise_against_monte_carlo_release():
    # simulate the CLIP release with Gaussian noise on one fixed dataset: E|released − clipped| per
    # statistic must be σ_i√(2/π)
    rng = np.random.default_rng(3)
    counts = np.array([3, 1, 2])
    t = gaussian_grid_error_terms([6], [6], [3], 1.0, [0.3], split="optimal")
    x = np.array([[0.1, 0.9, 0.4, 0.2, 1.0, 0.0]])
    mu, var = est.mean(x, counts)[0], est.variance(x, counts)[0]
    n = 200_000
    rel_mu = mu + rng.normal(0, t.sigma_mean[0], n)
    rel_var = var + rng.normal(0, t.sigma_variance[0], n)
    e = np.abs(rel_mu - mu).mean() + np.abs(rel_var - var).mean()
    assert e == pytest.approx(t.noise[0], rel=0.01)


def test_grid_errors_on_occupancy_with_suppression():
    occ = Occupancy.from_dense(np.array([[2, 1, 0], [1, 3, 1], [0, 1, 4]]))
    supp = [(occ.users[1], occ.grids[1])]
    out = gaussian_grid_errors(occ, 5.0, 0.2, suppressed=supp, terms=True)
    # by hand: grid totals N = (3, 5, 5); after suppression R = (3, 2, 5), Γ* = (2, 1, 4)
    ref = gaussian_grid_error_terms([3, 5, 5], [3, 2, 5], [2, 1, 4], 5.0, 0.2)
    np.testing.assert_allclose(out.error, ref.error)
    np.testing.assert_allclose(gaussian_grid_errors(occ, 5.0, 0.2), gaussian_grid_error_terms([3, 5, 5], [3, 5, 5], [2, 3, 4], 5.0, 0.2).error)


def test_bad_input():
    with pytest.raises(DpoptInputError, match="rho"):
        gaussian_grid_error_terms([2], [2], [1], 1.0, [-0.1])
    with pytest.raises(DpoptInputError, match="rho"):
        gaussian_grid_error_terms([2, 3], [2, 3], [1, 1], 1.0, [0.1])
    with pytest.raises(DpoptInputError, match="split"):
        gaussian_grid_error_terms([2], [2], [1], 1.0, 0.1, split="half")
    with pytest.raises(DpoptInputError, match="retained"):
        gaussian_grid_error_terms([2], [3], [1], 1.0, 0.1)
    with pytest.raises(DpoptInputError):
        gaussian_sigma(-1.0, 1.0)


@pytest.mark.parametrize("terms", [grid_error_terms, gaussian_grid_error_terms])
@pytest.mark.parametrize("N,R,g", [([3], [3], [0]), ([3.5], [3], [1]), ([3], [np.nan], [1]), ([3], [4], [1])])
def test_laplace_and_gaussian_terms_refuse_the_same_grid_counts(terms, N, R, g):
    """One validation for both noises: before, the Gaussian terms took Γ* = 0 with R = 3 (mean
    sensitivity U·0/3 = 0, no noise) and fractional or NaN counts."""
    with pytest.raises(DpoptInputError):
        terms(N, R, g, 1.0, 1.0)
