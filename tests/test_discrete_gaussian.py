"""The exact discrete Gaussian sampler and its λ·ℤ release (dpopt/noise/discrete_gaussian.py,
models/gaussian.md §1): χ² against the exact pmf, moments, tails, a likelihood-ratio audit that
catches half the claimed σ."""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpopt import DpoptInputError
from dpopt.accounting import zcdp_epsilon
from dpopt.noise.discrete_gaussian import (
    discrete_gaussian,
    discrete_gaussian_mean_abs,
    discrete_gaussian_pmf,
    gaussian_simulation,
    grid_sigma2,
    release_on_grid_gaussian,
    rho_rational,
)
from dpopt.noise import grid_sensitivity, integer_source


def exact_pmf(sigma2: Fraction) -> tuple[np.ndarray, np.ndarray]:
    """Support |z| ≤ 12σ + 12 and P[Z = z] ∝ exp(−z²/(2σ²)), in float64 (independent of the code)."""
    s = math.sqrt(float(sigma2))
    z = np.arange(-math.ceil(12 * s) - 12, math.ceil(12 * s) + 13)
    w = np.exp(-(z.astype(float) ** 2) / (2 * float(sigma2)))
    return z, w / w.sum()


def chi2_pvalue(samples: np.ndarray, sigma2: Fraction, bins: int = 40) -> float:
    """χ² goodness of fit on bins of consecutive integers with ≈ equal exact probability."""
    z, p = exact_pmf(sigma2)
    cdf = np.cumsum(p)
    # bin b holds the integers whose cdf falls in ((b-1)/bins, b/bins]; the ends absorb the tails
    label = np.minimum((cdf * bins).astype(int), bins - 1)
    expected = np.bincount(label, weights=p, minlength=bins)
    keep = expected > 0
    idx = np.clip(samples - z[0], 0, z.size - 1)
    observed = np.bincount(label[idx], minlength=bins)
    exp_counts = expected[keep] / expected[keep].sum() * samples.size
    return float(stats.chisquare(observed[keep], exp_counts).pvalue)


@functools.lru_cache(maxsize=None)
def draw(sigma2: Fraction, n: int, seed: int) -> np.ndarray:
    """n seeded samples (cached: the χ², moment and tail tests share them)."""
    rng = integer_source(seed)
    out = np.array([discrete_gaussian(sigma2, rng) for _ in range(n)])
    out.setflags(write=False)
    return out


SIGMA2 = [Fraction(1, 4), Fraction(9), Fraction(7, 3), Fraction(1600), Fraction(10**6)]


@pytest.mark.parametrize("sigma2", SIGMA2, ids=lambda s: f"s2={s}")
@pytest.mark.slow
def test_chi2_against_exact_pmf(sigma2):
    x = draw(sigma2, 20_000, seed=11)
    assert chi2_pvalue(x, sigma2) > 1e-3


def test_chi2_detects_a_wrong_scale():
    # the test above can fail: σ = 3 samples against the σ = 3.3 pmf
    x = draw(Fraction(9), 20_000, seed=11)
    assert chi2_pvalue(x, Fraction(3.3**2)) < 1e-6


@pytest.mark.parametrize("sigma2", SIGMA2, ids=lambda s: f"s2={s}")
def test_mean_and_variance(sigma2):
    x = draw(sigma2, 20_000, seed=11).astype(float)
    z, p = exact_pmf(sigma2)
    var = float((z.astype(float) ** 2 * p).sum())
    m4 = float((z.astype(float) ** 4 * p).sum())
    assert var <= float(sigma2) * (1 + 1e-12)  # CKS Prop. 5/Cor. 9: Var ≤ σ²
    n = x.size
    assert abs(x.mean()) < 5 * math.sqrt(var / n)
    assert abs(x.var() - var) < 5 * math.sqrt((m4 - var * var) / n)


def test_small_sigma_is_mostly_zero_and_variance_below_sigma2():
    # σ = 1/2: P[0] = 1/(1 + 2e^{-2} + 2e^{-8} + ...) ≈ 0.7870, visibly non-Gaussian
    z, p = exact_pmf(Fraction(1, 4))
    assert p[z == 0][0] == pytest.approx(1 / (1 + 2 * math.exp(-2) + 2 * math.exp(-8) + 2 * math.exp(-18)), rel=1e-12)
    x = draw(Fraction(1, 4), 20_000, seed=11)
    assert np.mean(x == 0) == pytest.approx(p[z == 0][0], abs=5 * math.sqrt(0.787 * 0.213 / x.size))


@pytest.mark.parametrize("k", [2.0, 3.0, 3.5])
def test_tails(k):
    sigma2 = Fraction(9)
    x = draw(sigma2, 20_000, seed=11)
    z, p = exact_pmf(sigma2)
    tail = float(p[np.abs(z) >= k * 3].sum())
    obs = np.mean(np.abs(x) >= k * 3)
    assert obs == pytest.approx(tail, abs=5 * math.sqrt(tail * (1 - tail) / x.size) + 1e-5)


def test_pmf_helper_and_mean_abs():
    z, p = exact_pmf(Fraction(9))
    np.testing.assert_allclose(discrete_gaussian_pmf(z, 3.0), p, rtol=1e-12)
    for s in (0.5, 3.0, 40.0):
        z, p = exact_pmf(Fraction(s * s))
        assert float(discrete_gaussian_mean_abs(s)) == pytest.approx(float((np.abs(z) * p).sum()), rel=1e-10)
    # above σ = 1000 the continuous σ√(2/π) is used: the gap at σ = 1000 is < 1e-7 relative
    z, p = exact_pmf(Fraction(10**6))
    exact = float((np.abs(z) * p).sum())
    assert float(discrete_gaussian_mean_abs(1000.0)) == pytest.approx(exact, rel=1e-12)
    assert 1000 * math.sqrt(2 / math.pi) == pytest.approx(exact, rel=1e-7)
    assert float(discrete_gaussian_mean_abs(1000.5)) == pytest.approx(1000.5 * math.sqrt(2 / math.pi))


def test_bad_input():
    rng = integer_source(0)
    with pytest.raises(DpoptInputError, match="sigma2"):
        discrete_gaussian(Fraction(0), rng)
    with pytest.raises(DpoptInputError, match="rho"):
        rho_rational(1e-12)
    with pytest.raises(DpoptInputError, match="rho"):
        rho_rational(float("nan"))
    with pytest.raises(DpoptInputError, match="rng"):
        gaussian_simulation(1.0, rng, size=3)  # type: ignore[arg-type]
    with pytest.raises(DpoptInputError, match="sigma"):
        discrete_gaussian_pmf(0, -1.0)


# ---------------------------------------------------------------------------------------------
# the release on λ·ℤ
# ---------------------------------------------------------------------------------------------
def test_release_on_grid_scale_and_sensitivity():
    vals = np.array([1.23456, np.nan, 7.0, 3.0])
    sens = np.array([2.0, 1.0, 0.5, 0.0])
    rhos = np.array([0.3, 0.3, 0.07, 0.0])
    out, t, sigma = release_on_grid_gaussian(vals, sens, rhos, integer_source(5), granularity_bits=10)
    lam = 2.0**-10
    assert np.isnan(out[1]) and np.isnan(sigma[1]) and t[1] == 0
    assert out[3] == 3.0 and sigma[3] == 0.0  # no budget, no sensitivity: exact (caller's promise)
    for i in (0, 2):
        assert out[i] / lam == int(out[i] / lam)  # on the grid
        assert t[i] == grid_sensitivity(sens[i], 10)
        rr = Fraction(math.floor(rhos[i] * 2**30), 2**30)
        assert Fraction(t[i] * t[i]) / (2 * rr) == grid_sigma2(int(t[i]), rhos[i])
        assert sigma[i] == pytest.approx(lam * t[i] / math.sqrt(2 * float(rr)), rel=1e-15)
        # ≈ Δ/√(2ρ): t·λ ≤ Δ + 2λ and ρ' ≥ ρ − 2^-30
        assert sens[i] / math.sqrt(2 * rhos[i]) <= sigma[i] <= (sens[i] + 2 * lam) / math.sqrt(2 * (rhos[i] - 2**-30))
    # the budget spent: t²/(2σ_Z²) = ρ' ≤ ρ (CKS Thm 4 with integer sensitivity t)
    assert float(Fraction(int(t[0]) ** 2) / (2 * grid_sigma2(int(t[0]), 0.3))) <= 0.3


def test_release_on_grid_recovers_values_at_huge_rho():
    vals = np.array([20.0, 200 / 3, 65.0, 0.125])
    out, _, _ = release_on_grid_gaussian(vals, [1.0] * 4, 1e12, integer_source(1))
    np.testing.assert_allclose(out, vals, atol=2.0**-12)


def test_release_noise_distribution():
    # many releases of one value: (released/λ − q) ~ N_ℤ(0, σ_Z²), checked by χ²
    n, k = 20_000, 6
    out, t, _ = release_on_grid_gaussian(np.full(n, 0.5), 0.25, 0.5, integer_source(21), granularity_bits=k)
    z = np.rint(out * 2**k).astype(np.int64) - 32
    assert chi2_pvalue(z, grid_sigma2(int(t[0]), 0.5)) > 1e-3


def test_progress_callback():
    calls = []
    release_on_grid_gaussian(np.zeros(2500), 1.0, 1.0, integer_source(0), callback=calls.append)
    assert calls == [1000, 1000, 500]


def test_simulation_is_gaussian():
    x = gaussian_simulation(2.0, np.random.default_rng(0), size=100_000)
    assert x.std() == pytest.approx(2.0, rel=0.02)


# ---------------------------------------------------------------------------------------------
# audit: an (ε, δ) likelihood-ratio test on threshold events
# ---------------------------------------------------------------------------------------------
def threshold_audit(x0: np.ndarray, x1: np.ndarray, epsilon: float, delta: float, *, alpha: float = 1e-3) -> bool:
    """True when (ε, δ)-DP is refuted: some event S = {X ≥ c} (or {X < c}) has
    P₁[S] > e^ε·P₀[S] + δ with confidence 1 − α (Clopper–Pearson bounds, Bonferroni over the
    thresholds and both directions). A truly (ε, δ)-DP mechanism is refuted with probability ≤ α."""
    cands = np.unique(np.quantile(np.concatenate([x0, x1]), np.linspace(0.02, 0.98, 25)))
    tests = 4 * cands.size  # thresholds × {≥, <} × {(x1 vs x0), (x0 vs x1)}
    a = alpha / tests
    for c in cands:
        for s0, s1 in ((x0 >= c, x1 >= c), (x0 < c, x1 < c)):
            for k_hi, n_hi, k_lo, n_lo in ((s1.sum(), s1.size, s0.sum(), s0.size), (s0.sum(), s0.size, s1.sum(), s1.size)):
                lower = stats.beta.ppf(a / 2, k_hi, n_hi - k_hi + 1) if k_hi > 0 else 0.0
                upper = stats.beta.ppf(1 - a / 2, k_lo + 1, n_lo - k_lo) if k_lo < n_lo else 1.0
                if lower > math.exp(epsilon) * upper + delta:
                    return True
    return False


@pytest.mark.parametrize("factor,refuted", [(1.0, False), (0.5, True)])
def test_audit_catches_half_sigma(factor, refuted):
    # neighbours: one statistic 0 vs 1 (sensitivity Δ = 1), claimed ρ = 0.2; the broken release
    # uses 4ρ, i.e. half the claimed σ. Claim checked at δ = 10⁻², ε = ε(ρ, δ) = 1.525 (CKS Cor. 13);
    # the broken one (true shift 16 of t = 18 grid units) is only (1.525, 0.087)-DP by the exact
    # Gaussian profile (the honest one: 0.0012), visible with 8000 releases
    rho, delta, n, k = 0.2, 1e-2, 8_000, 4
    eps = zcdp_epsilon(rho, delta)
    used = rho / factor**2
    x0, _, s0 = release_on_grid_gaussian(np.zeros(n), 1.0, used, integer_source(31), granularity_bits=k)
    x1, _, s1 = release_on_grid_gaussian(np.ones(n), 1.0, used, integer_source(32), granularity_bits=k)
    assert s0[0] == pytest.approx(factor / math.sqrt(2 * rho), rel=0.2)  # ≈ factor·Δ/√(2ρ)
    assert threshold_audit(x0, x1, eps, delta) is refuted
