"""The exact discrete Laplace sampler and the grid rounding of the sensitivity."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dpopt import DpoptInputError
from dpopt.noise.discrete_laplace import discrete_laplace
from dpopt.noise import (
    SecureRandom,
    bernoulli_exp,
    discrete_laplace_mean_abs,
    epsilon_rational,
    grid_sensitivity,
    integer_source,
    laplace_simulation,
    release_on_grid,
    snap,
)

#: a frequency estimate from n draws lies within this many standard errors
SIGMAS = 4.5


def _within(freq, p, n):
    return abs(freq - p) <= SIGMAS * math.sqrt(p * (1 - p) / n) + 1e-12


@pytest.mark.parametrize("gamma", [Fraction(0), Fraction(1, 3), Fraction(1), Fraction(5, 2)])
def test_bernoulli_exp_frequency(gamma):
    src = integer_source(11)
    n = 20000
    freq = sum(bernoulli_exp(gamma, src) for _ in range(n)) / n
    assert _within(freq, math.exp(-float(gamma)), n)


@pytest.mark.parametrize("scale", [Fraction(1, 2), Fraction(3), Fraction(7, 3)])
@pytest.mark.slow
def test_discrete_laplace_pmf(scale):
    src = integer_source(5)
    n = 30000
    z = np.array([discrete_laplace(scale, src) for _ in range(n)])
    r = math.exp(-1 / float(scale))
    for k in range(-4, 5):
        p = (1 - r) / (1 + r) * r ** abs(k)
        assert _within((z == k).mean(), p, n), k
    # symmetric mean and the closed-form E|Z| = 2r/(1-r^2)
    assert abs(z.mean()) < SIGMAS * z.std() / math.sqrt(n)
    assert abs(np.abs(z).mean() - 2 * r / (1 - r * r)) < SIGMAS * np.abs(z).std() / math.sqrt(n)


def test_mean_abs_helper_matches_formula():
    t = np.array([1.0, 10.0, 1000.0])
    r = np.exp(-0.5 / t)
    np.testing.assert_allclose(discrete_laplace_mean_abs(t, 0.5, 0), 2 * r / (1 - r * r), rtol=1e-12)
    # never above the continuous Laplace value t/eps, and close to it for large t
    assert np.all(discrete_laplace_mean_abs(t, 0.5, 0) <= t / 0.5)
    assert discrete_laplace_mean_abs(np.array([1e6]), 0.5, 0)[0] == pytest.approx(2e6, rel=1e-6)


def test_seeded_is_reproducible_and_secure_runs():
    a = [discrete_laplace(Fraction(10), integer_source(3)) for _ in range(5)]
    b = [discrete_laplace(Fraction(10), integer_source(3)) for _ in range(5)]
    assert a == b
    assert isinstance(integer_source(None), SecureRandom)
    assert isinstance(discrete_laplace(Fraction(10), SecureRandom()), int)


def test_grid_sensitivity_covers_rounded_neighbours(rng):
    """|round(x/λ) − round(y/λ)| ≤ t whenever |x − y| ≤ Δ (the privacy argument of noise.py)."""
    k = 6
    for delta in [0.0, 1e-3, 0.5, 1.0, 3.0, 120.0]:
        t = grid_sensitivity(delta, k)
        x = rng.uniform(-200, 200, 20000)
        y = x + rng.uniform(-delta, delta, x.size)
        # adversarial: points just off the grid midpoints
        mid = (np.floor(x * 2**k) + 0.5) / 2**k
        x2, y2 = mid - 1e-12, mid - 1e-12 + delta
        for a, b in ((x, y), (x2, y2)):
            assert np.max(np.abs(snap(a, k) - snap(b, k))) <= t
        assert t >= delta * 2**k + 1


def test_epsilon_rational_rounds_down():
    for eps in [1.0, 0.1, 0.3, 2.5, 1e-6]:
        e = epsilon_rational(eps)
        assert 0 < e <= Fraction(eps) and float(Fraction(eps) - e) <= 2**-30
    with pytest.raises(DpoptInputError, match="epsilon"):
        epsilon_rational(1e-12)


def test_release_on_grid_outputs_are_grid_multiples_and_nan_passthrough():
    vals = np.array([12.3456789, np.nan, 0.0])
    out, t = release_on_grid(vals, [1.0, 1.0, 0.0], [1e6, 1.0, 1e6], integer_source(1), granularity_bits=10)
    assert np.isnan(out[1]) and t[1] == 0
    assert np.all((out[[0, 2]] * 2**10) == np.round(out[[0, 2]] * 2**10))
    assert abs(out[0] - vals[0]) < 2**-9 + 1e-3  # noise scale t/eps ≈ 1e-3 grid units
    assert t[2] == 1  # zero sensitivity still gets one grid unit (rounding)


def test_bad_inputs():
    with pytest.raises(DpoptInputError, match="`seed` must be an integer"):
        integer_source(1.5)
    with pytest.raises(DpoptInputError, match="`scale` must be positive"):
        discrete_laplace(Fraction(0), integer_source(1))
    with pytest.raises(DpoptInputError, match="`gamma` must be >= 0"):
        bernoulli_exp(Fraction(-1), integer_source(1))
    with pytest.raises(DpoptInputError, match="`sensitivity` must be a finite number >= 0"):
        grid_sensitivity(-1.0)
    with pytest.raises(DpoptInputError, match="`rng` must be a numpy.random.Generator"):
        laplace_simulation(1.0, 42)
    assert laplace_simulation(1.0, np.random.default_rng(0), size=3).shape == (3,)


def test_value_error_widens_sensitivity_and_summation_bound():
    assert grid_sensitivity(1.0, 4, 0.25) == grid_sensitivity(1.5, 4)
    from dpopt.noise import summation_error

    g = summation_error(np.array([0, 10**9]), 1.0)
    assert g[0] == pytest.approx(2 * 2.0**-53) and g[1] == pytest.approx((10**9 + 2) * 2.0**-53, rel=1e-6)
    with pytest.raises(DpoptInputError, match="`value_error` must be a finite number >= 0"):
        grid_sensitivity(1.0, 4, -1.0)


def test_float_statistics_error_within_bound(rng):
    """Computed mean/variance of many values in [0, U] differ from exact rationals by < η."""
    from fractions import Fraction as F

    from dpopt.noise import summation_error

    U = 120.0
    x = np.round(rng.uniform(0, U, 5000), 3)
    R = x.size
    m = x.sum() / R
    v = max((x * x).sum() / R - m * m, 0.0)
    xs = [F(float(a)) for a in x]
    m_exact = sum(xs) / R
    v_exact = sum(a * a for a in xs) / R - m_exact**2
    gam = float(summation_error(np.array([R]), 1.0)[0])
    assert abs(F(m) - m_exact) <= F(2 * gam * U)
    assert abs(F(v) - v_exact) <= F(8 * gam * U * U)


def test_remaining_epsilon_keeps_split_within_budget(rng):
    """ε'_μ + ε'_Var ≤ ε in exact rationals for float splits ε·f, ε·(1 − f), incl. ε with 2^30·ε
    just below an integer and large ε (where float(Fraction) may round up)."""
    from dpopt.noise import remaining_epsilon

    totals = [1.0, 0.1, 1e8 + 0.3, 3.0 - 2.0**-40, math.nextafter(1.0, 0.0)] + list(rng.uniform(1e-6, 50, 20))
    for eps in totals:
        f = rng.random(200)
        e_mu, e_var = eps * f, eps * (1 - f)
        cap = remaining_epsilon(eps, e_mu)
        for a, b, c in zip(e_mu, e_var, cap):
            spent = epsilon_rational(float(a)) + (epsilon_rational(float(min(b, c))) if min(b, c) >= 2**-30 else 0)
            assert spent <= Fraction(eps)
        # the cap never takes more than the float rounding from the variance's share
        assert np.all(cap >= e_var - 2 * 2**-30 - 4 * np.spacing(eps))


def test_real_release_draws_from_the_os(records, monkeypatch):
    """seed=None: the release's random bits come from the OS CSPRNG in bulk (os.urandom), at least
    one 32-bit value per noised statistic; a seeded release reads none."""
    import os

    from dpopt.release import NoiseOptions, PerGridBudget, PublicOccupancyOptions, release
    from tests._spy import record_calls

    calls = record_calls(monkeypatch, os, "urandom")
    r = release(records, bound=100, budget=PerGridBudget(1.0), model=PublicOccupancyOptions())
    assert sum(calls) >= 4 * 2 * r.summary.grids
    assert len(calls) < r.summary.grids  # in bulk, not one call per draw
    assert not r.summary.seeded and "CSPRNG" in r.summary.noise
    calls.clear()
    release(records, bound=100, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(), noise=NoiseOptions(seed=1))
    assert calls == []
