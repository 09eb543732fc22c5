"""The vectorised exact samplers (dpopt/noise/exact.py, discrete_laplace_array, discrete_gaussian_array):
χ² against the exact pmf, moments, the exact table against mpmath, the tie and fallback paths forced,
the bulk OS source."""

from __future__ import annotations

import functools
import math
import os
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpopt import DpoptInputError
from dpopt.noise import SecureRandom, SeededSource, integer_source, random_words
from dpopt.noise import exact
from dpopt.noise.discrete_gaussian import discrete_gaussian_array, grid_sigma2, release_on_grid_gaussian
from dpopt.noise.discrete_laplace import (
    discrete_laplace_array,
    discrete_laplace_rational,
    epsilon_numerators,
    epsilon_rational,
    grid_sensitivities,
    grid_sensitivity,
)
from tests.test_discrete_gaussian import chi2_pvalue
from tests._spy import record_calls

N = 40_000


def laplace_pmf(scale: Fraction) -> tuple[np.ndarray, np.ndarray]:
    """Support |z| ≤ 40·scale + 40 and P[Z = z] ∝ exp(−|z|/scale) (float64, independent of the code)."""
    s = float(scale)
    z = np.arange(-math.ceil(40 * s) - 40, math.ceil(40 * s) + 41)
    w = np.exp(-np.abs(z) / s)
    return z, w / w.sum()


def chi2_binned(samples: np.ndarray, z: np.ndarray, p: np.ndarray, bins: int = 40) -> float:
    """χ² on bins of consecutive integers with ≈ equal exact probability (ends absorb the tails)."""
    label = np.minimum((np.cumsum(p) * bins).astype(int), bins - 1)
    expected = np.bincount(label, weights=p, minlength=bins)
    keep = expected > 0
    observed = np.bincount(label[np.clip(samples - z[0], 0, z.size - 1)], minlength=bins)
    return float(stats.chisquare(observed[keep], expected[keep] / expected[keep].sum() * samples.size).pvalue)


@functools.lru_cache(maxsize=None)
def lap(scale: Fraction, seed: int = 3) -> np.ndarray:
    return discrete_laplace_array(scale, N, integer_source(seed))


@functools.lru_cache(maxsize=None)
def gauss(sigma2: Fraction, seed: int = 3) -> np.ndarray:
    return discrete_gaussian_array(sigma2, N, integer_source(seed))


# release-style parameters: t grid units over ε' = m/2^30 (big denominators)
LAPLACE_SCALES = [Fraction(1, 2), Fraction(3), Fraction(7, 3), Fraction(40), Fraction(1000),
                  Fraction(4097 * 2**30, 858993459), Fraction(4097 * 2**30, 1073741823)]
SIGMA2 = [Fraction(1, 4), Fraction(9), Fraction(7, 3), Fraction(1600), Fraction(10**6),
          grid_sigma2(4097, 0.5), grid_sigma2(41, 0.3)]


@pytest.mark.parametrize("scale", LAPLACE_SCALES, ids=str)
def test_laplace_chi2_and_moments(scale):
    x = lap(scale)
    z, p = laplace_pmf(scale)
    assert chi2_binned(x, z, p) > 1e-3
    zf = z.astype(float)
    var = float((zf**2 * p).sum())
    m4 = float((zf**4 * p).sum())
    assert abs(x.mean()) < 5 * math.sqrt(var / N)
    assert abs(x.astype(float).var() - var) < 5 * math.sqrt((m4 - var * var) / N)


def test_laplace_chi2_detects_a_wrong_scale():
    z, p = laplace_pmf(Fraction(44))
    assert chi2_binned(lap(Fraction(40)), z, p) < 1e-6


@pytest.mark.parametrize("scale", [Fraction(10**7), Fraction(10**12), Fraction(10**12 * 2**30 + 1, 2**30 - 1)],
                         ids=["1e7", "1e12", "1e12-big-denominator"])
def test_laplace_huge_scales_are_exact_and_do_not_hang(scale):
    # P(|Z| ≥ y) = 2r^y/(1 + r), r = e^{-1/scale}: check the quartile-ish tail and the variance
    x = discrete_laplace_array(scale, 4000, integer_source(9))
    r = math.exp(-1 / float(scale))
    var = 2 * r / (1 - r) ** 2
    assert x.dtype == np.int64 and np.all(np.abs(x) < 2**62)
    y = float(scale) * math.log(2)
    tail = 2 * math.exp(-y / float(scale)) / (1 + r)
    assert abs(np.mean(np.abs(x) >= y) - tail) < 5 * math.sqrt(tail * (1 - tail) / x.size)
    assert x.astype(float).var() / var == pytest.approx(1.0, abs=0.25)


@pytest.mark.parametrize("sigma2", SIGMA2, ids=lambda s: f"s2={float(s):.6g}")
def test_gaussian_chi2_and_moments(sigma2):
    x = gauss(sigma2)
    assert chi2_pvalue(x, sigma2) > 1e-3
    s = math.sqrt(float(sigma2))
    z = np.arange(-math.ceil(12 * s) - 12, math.ceil(12 * s) + 13).astype(float)
    w = np.exp(-(z**2) / (2 * float(sigma2)))
    p = w / w.sum()
    var, m4 = float((z**2 * p).sum()), float((z**4 * p).sum())
    assert abs(x.mean()) < 5 * math.sqrt(var / N)
    assert abs(x.astype(float).var() - var) < 5 * math.sqrt((m4 - var * var) / N)


def test_gaussian_chi2_detects_a_wrong_scale():
    assert chi2_pvalue(gauss(Fraction(9)), Fraction(3.3**2)) < 1e-6


def test_gaussian_huge_sigma_falls_back_exactly():
    x = discrete_gaussian_array(Fraction(2**82), 50, integer_source(1))  # σ = 2^41: scalar path
    assert x.dtype == np.int64 and np.std(x) == pytest.approx(2**41, rel=0.5)


def test_release_gaussian_noise_distribution_float_path():
    # release parameters (σ² = t²·2^29/m, big denominator): the certified-float acceptance path
    n, k = N, 8
    out, t, _ = release_on_grid_gaussian(np.full(n, 0.5), 3.0, 0.7, integer_source(21), granularity_bits=k)
    z = np.rint(out * 2**k).astype(np.int64) - 128
    assert chi2_pvalue(z, grid_sigma2(int(t[0]), 0.7)) > 1e-3


# ---------------------------------------------------------------------------------------------
# the building blocks
# ---------------------------------------------------------------------------------------------
def dexp(x: Fraction, scale_bits: int) -> Decimal:
    """e^{-x}·2^scale_bits by the decimal module (exp is correctly rounded there), 80 digits."""
    with localcontext() as ctx:
        ctx.prec = 80
        return (-(Decimal(x.numerator) / Decimal(x.denominator))).exp() * Decimal(2) ** scale_bits


def test_exact_table_against_decimal():
    table = exact._table()
    for j in list(range(0, 200)) + list(range(200, table.size, 37)) + [table.size - 2, table.size - 1]:
        v = dexp(Fraction(j, 64), 64)
        want = 2**64 - 1 if j == 0 else int(v)  # floor (v > 0)
        assert int(table[j]) == want, j
    assert table[-1] == 0 and table[-2] > 0


@pytest.mark.parametrize("x", [Fraction(0), Fraction(1, 64), Fraction(1), Fraction(7, 3), Fraction(123, 4)])
def test_exp_bracket_against_decimal(x):
    lo, hi = exact._exp_neg_fixed(x, 150)
    v = dexp(x, 150)
    assert lo <= v <= hi and hi - lo <= 4


def test_uniform_below_is_uniform():
    src = integer_source(4)
    for n in (1, 3, 1000, 2**31, 2**40 + 5):
        u = exact.uniform_below(np.full(30_000, n, np.int64), src)
        assert u.min() >= 0 and u.max() < n
        bins = min(n, 16)
        counts = np.bincount((u * bins // n).astype(np.int64) if n < 2**40 else (u // (n // bins + 1)), minlength=bins)
        if n > 1:
            assert stats.chisquare(counts[:bins]).pvalue > 1e-3
    mixed = exact.uniform_below(np.array([1, 2, 5, 2**50]), src)
    assert mixed[0] == 0 and 0 <= mixed[1] < 2 and 0 <= mixed[2] < 5


@pytest.mark.parametrize("num,den", [(0, 1), (1, 3), (1, 1), (5, 2), (63, 64), (10**15, 10**15 + 7)])
def test_bernoulli_exp_ratio_frequency(num, den):
    n = 60_000
    x = exact.bernoulli_exp_ratio(np.full(n, num, np.int64), np.full(n, den, np.int64), integer_source(2))
    p = math.exp(-num / den)
    assert abs(x.mean() - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-12


@pytest.mark.parametrize("gamma", [Fraction(0), Fraction(3, 7), Fraction(5, 64), Fraction(29, 3)])
def test_bernoulli_exp_filtered_exact_fallbacks(gamma):
    # err so large that nothing is certified (J ambiguous), and err that certifies J but no chain
    # comparison: both fall back to exact rational decisions, and the frequency is e^{-γ}
    n = 4000
    g = np.full(n, float(64 * gamma))
    p = math.exp(-gamma)
    for err in (np.full(n, 0.75), np.full(n, 0.49) if (64 * gamma) % 1 == Fraction(1, 2) else np.full(n, 1e-9)):
        x = exact.bernoulli_exp_filtered(g, err, lambda i: gamma, integer_source(5))
        assert abs(x.mean() - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-12


def test_bernoulli_exp_filtered_chain_refinement():
    # 64γ = 32.5: J = 32 is certified with err = 0.49, while every chain comparison W < R/(64k)
    # (R = 1/2) is inside the error interval and is refined exactly
    gamma, n = Fraction(65, 128), 20_000
    x = exact.bernoulli_exp_filtered(np.full(n, 32.5), np.full(n, 0.49), lambda i: gamma, integer_source(6))
    p = math.exp(-65 / 128)
    assert abs(x.mean() - p) <= 5 * math.sqrt(p * (1 - p) / n)


class _Scripted:
    """A source whose first 32-bit value is given, then PCG64 words (forces a table tie)."""

    def __init__(self, first32: int, rest: SeededSource) -> None:
        self.first, self.rest = first32, rest

    def randbelow(self, n: int) -> int:
        return self.rest.randbelow(n)

    def random_words(self, n: int) -> np.ndarray:
        w = self.rest.random_words(n).copy()
        if self.first is not None:
            w.view(np.uint32)[0] = self.first
            self.first = None
        return w


@pytest.mark.parametrize("j", [1, 64, 300])
def test_table_tie_is_refined_exactly(j):
    # W's 32 leading bits equal ⌊e^{-J/64}·2^32⌋: P(W < e^{-J/64} | tie) = frac(e^{-J/64}·2^32)
    t32 = int(exact._table32()[j])
    v = dexp(Fraction(j, 64), 32)
    want = float(v - int(v))
    n, rest = 1000, SeededSource(j)
    hits = sum(bool(exact._table_bernoulli(np.array([j]), _Scripted(t32, rest))[0]) for _ in range(n))
    assert abs(hits / n - want) <= 5 * math.sqrt(want * (1 - want) / n)


def test_geometric_e_law_and_tie():
    v = exact._geometric_e(100_000, integer_source(8))
    # P(V = v) = (1 - e^{-1}) e^{-v}
    k = np.arange(8)
    p = (1 - math.exp(-1)) * np.exp(-k)
    obs = np.bincount(np.minimum(v, 7), minlength=8)
    exp_counts = np.append(p[:7], 1 - p[:7].sum()) * v.size
    assert stats.chisquare(obs, exp_counts).pvalue > 1e-3
    # a forced tie with ⌊e^{-2}·2^32⌋: V is 1 or 2 (≥ 1 for sure, 2 iff W < e^{-2})
    t = int(exact._table32()[128])
    rest = SeededSource(0)
    outs = {int(exact._geometric_e(1, _Scripted(t, rest))[0]) for _ in range(200)}
    assert outs == {1, 2}


def test_rational_scales_per_entry_and_input_errors():
    num = np.array([1, 6, 10**17, 7 * 2**30], np.int64)
    den = np.array([2, 2, 3, 107374182], np.int64)
    z = discrete_laplace_rational(num, den, integer_source(1))  # 10**17/3: scalar fallback entry
    assert z.shape == (4,) and z.dtype == np.int64
    with pytest.raises(DpoptInputError, match="positive integers"):
        discrete_laplace_rational(np.array([0]), np.array([1]), integer_source(1))
    with pytest.raises(DpoptInputError, match="scale"):
        discrete_laplace_array(Fraction(0), 3, integer_source(1))
    with pytest.raises(DpoptInputError, match="sigma2"):
        discrete_gaussian_array(Fraction(-1), 3, integer_source(1))
    assert discrete_laplace_array(Fraction(5), 0, integer_source(1)).shape == (0,)


def test_vectorised_parameters_equal_the_scalar_ones():
    rng = np.random.default_rng(0)
    sens = np.concatenate([rng.uniform(0, 50, 500), [0.0, 1e-300, 1e6, 3.0]])
    eta = rng.uniform(0, 1e-9, sens.size)
    t = grid_sensitivities(sens, 12, eta)
    assert all(int(a) == grid_sensitivity(float(s), 12, float(e)) for a, s, e in zip(t, sens, eta))
    eps = np.concatenate([rng.uniform(2**-30, 20, 500), [2**-30, 1.0, 2.0**32]])
    m = epsilon_numerators(eps)
    assert all(Fraction(int(a), 2**30) == epsilon_rational(float(e)) for a, e in zip(m, eps))
    with pytest.raises(DpoptInputError, match="epsilon"):
        epsilon_numerators(np.array([1.0, np.nan]))
    with pytest.raises(DpoptInputError, match="sensitivity"):
        grid_sensitivities(np.array([1.0, -1.0]))


# ---------------------------------------------------------------------------------------------
# sources
# ---------------------------------------------------------------------------------------------
def test_secure_source_reads_the_os_in_bulk(monkeypatch):
    calls = record_calls(monkeypatch, os, "urandom")
    z = discrete_laplace_array(Fraction(1000), 50_000, SecureRandom())
    g = discrete_gaussian_array(Fraction(1600), 50_000, SecureRandom())
    assert z.size == g.size == 50_000
    assert sum(calls) >= 4 * 100_000  # at least 32 random bits per draw, all from the OS
    assert len(calls) < 2000  # in bulk: batches, not one call per draw
    calls.clear()
    discrete_laplace_array(Fraction(1000), 1000, integer_source(1))
    assert calls == []  # the seeded source never touches the OS


def test_seeded_source_is_reproducible_and_any_source_works():
    a = discrete_laplace_array(Fraction(10), 1000, integer_source(5))
    b = discrete_laplace_array(Fraction(10), 1000, integer_source(5))
    c = discrete_laplace_array(Fraction(10), 1000, integer_source(6))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert integer_source(-5).random_words(4).dtype == np.uint64

    class OnlyRandbelow:  # a source without bulk words still drives the array samplers
        def __init__(self):
            self.inner = SeededSource(1)

        def randbelow(self, n):
            return self.inner.randbelow(n)

    assert random_words(OnlyRandbelow(), 3).dtype == np.uint64
    assert discrete_laplace_array(Fraction(3), 20, OnlyRandbelow()).shape == (20,)
    src = integer_source(3)
    draws = [src.randbelow(3**50) for _ in range(2000)]
    assert 0 <= min(draws) and max(draws) < 3**50 and max(draws) > 3**50 // 2
