"""The vectorised discrete Laplace for reduced numerators a in [2^56, 2^63) .

Without it, a ≥ 2^56 (e.g. a release with t ≥ 2^26 grid units and an odd ⌊ε·2^30⌋, or a `user` sum of
squares) took the scalar sampler at ~20,000 draws/s. The pieces that make the int64 path exact up
to 2^63 are checked against Python integers (brute force), the law by χ² against the exact pmf at
small scales with huge numerators and by tails at large ones; the seeded stream below 2^56 is the
one of ``bernoulli_exp_ratio`` (unchanged), and a ≥ 2^63 still takes the scalar sampler.
"""

from __future__ import annotations

import math
import os
import random
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpopt.noise import discrete_laplace as dl
from dpopt.noise import SecureRandom, exact, integer_source
from dpopt.noise.discrete_laplace import discrete_laplace_array, discrete_laplace_rational, release_on_grid
from tests.noise.test_exact import chi2_binned, laplace_pmf
from tests.noise.test_exact_whitebox import _forbid_numpy_rngs
from tests._spy import record_calls

I64 = 2**63 - 1


def _edge_pairs(rnd: random.Random) -> list[tuple[int, int]]:
    """(num, den), 0 ≤ num < den < 2^63: random widths, den near 2^63, 64·num/den an exact integer."""
    pairs = []
    for _ in range(3000):
        den = rnd.randrange(2, 2 ** rnd.randrange(2, 64))
        pairs.append((rnd.randrange(den), den))
    for den in (I64, I64 - 1, 2**62, 2**62 + 1, 2**56, 2**56 - 1, 64 * (2**56 + 3), 2):
        for num in (0, 1, den - 1, den // 2, den // 64, (den // 64) * 63):
            pairs.append((num, den))
    for k in (1, 3, 2**50 + 1, (2**63 - 1) // 64):
        den = 64 * k
        for j in (1, 17, 63):  # 64·num/den = j exactly
            pairs.append((j * k, den))
            pairs.append((j * k - 1, den))
    return pairs


def test_ratio_split_equals_python_integers():
    pairs = _edge_pairs(random.Random(1))
    num = np.array([p[0] for p in pairs], dtype=np.int64)
    den = np.array([p[1] for p in pairs], dtype=np.int64)
    j, r = exact._ratio_split(num, den)
    for (n, d), jj, rr in zip(pairs, j.tolist(), r.tolist()):
        assert (jj, rr) == divmod(64 * n, d), (n, d)


def test_bit_mask_equals_python_bit_length():
    ns = [1, 2, 3, 4, 5, 2**31, 2**31 + 1, 2**32, 2**53 - 1, 2**53, 2**53 + 1, 2**53 + 2, 2**54 + 1,
          2**62 - 1, 2**62, 2**62 + 1, 2**63 - 2, I64]
    ns += [random.Random(2).randrange(1, I64) for _ in range(500)]
    mask = exact._bit_mask(np.array(ns, dtype=np.int64).astype(np.uint64))
    assert [int(m) for m in mask] == [(1 << (n - 1).bit_length()) - 1 for n in ns]
    small = exact._bit_mask(np.array([1, 2, 3, 2**31], dtype=np.uint32))
    assert small.dtype == np.uint32 and small.tolist() == [0, 1, 3, 2**31 - 1]


@pytest.mark.parametrize("n", [2**62 + 5, 2**63 - 25, I64])
def test_uniform_below_near_2_63(n):
    u = exact.uniform_below(np.full(40_000, n, np.int64), integer_source(6))
    assert u.min() >= 0 and int(u.max()) < n
    counts = np.bincount((u // (n // 16 + 1)).astype(np.int64), minlength=16)
    assert stats.chisquare(counts).pvalue > 1e-3


def test_geometric_floor_equals_python_integers():
    rnd = random.Random(3)
    rows = []
    for _ in range(4000):
        a = rnd.randrange(2, 2 ** rnd.randrange(2, 64))
        b = rnd.randrange(1, 2 ** rnd.randrange(1, 64))
        v = rnd.choice([0, 1, 2, 5, 40, rnd.randrange(200)])
        if (rnd.randrange(a) + a * v) // b <= I64:
            rows.append((rnd.randrange(a), a, b, v))
    rows += [(5, I64, 2**62 + 1, 3), (I64 - 1, I64, 2**62 + 1, 2), (0, I64, I64, 1), (7, 2**62 + 3, 2**30 + 1, 9),
             (0, I64, 1, 1)]  # exactly 2^63 − 1
    u, a, b, v = (np.array(c, dtype=np.int64) for c in zip(*rows))
    y = exact._geometric_floor(u, a, b, v)
    assert y.tolist() == [(uu + aa * vv) // bb for uu, aa, bb, vv in rows]
    for case in ((0, I64, 3, 5), (1, I64, 1, 1), (I64 - 1, I64, 1, 2)):  # results beyond int64
        with pytest.raises(OverflowError):
            exact._geometric_floor(*(np.array([x], dtype=np.int64) for x in case))


def test_below_one_matches_bernoulli_exp_ratio_stream_below_2_56():
    # the same decisions and random bits as before for the numerators that were vectorised before
    rnd = random.Random(4)
    den = np.array([rnd.randrange(2, 2**56) for _ in range(20_000)], dtype=np.int64)
    num = (den.astype(float) * np.array([rnd.random() for _ in range(den.size)])).astype(np.int64)
    old = exact.bernoulli_exp_ratio(num, den, integer_source(8))
    new = exact._bernoulli_exp_below_one(num, den, integer_source(8))
    np.testing.assert_array_equal(old, new)


@pytest.mark.parametrize("num,den", [(2**62, 2**62 + 1), (3 * 2**60 + 7, 2**62 + 5), (2**58 + 1, I64)])
def test_below_one_frequency_with_huge_denominators(num, den):
    n = 60_000
    x = exact._bernoulli_exp_below_one(np.full(n, num, np.int64), np.full(n, den, np.int64), integer_source(2))
    p = math.exp(-num / den)
    assert abs(x.mean() - p) <= 5 * math.sqrt(p * (1 - p) / n)


# small scales whose reduced numerator is ≥ 2^56: the χ² against the exact pmf applies
WIDE_SCALES = [Fraction(2**60 + 1, 2**58 + 3), Fraction(I64 - 24, 2**61 + 1), Fraction(2**56 + 1, 2**57 - 1)]


@pytest.mark.parametrize("scale", WIDE_SCALES, ids=lambda s: f"{float(s):.4g}")
def test_wide_numerator_laplace_chi2(scale, monkeypatch):
    assert 2**56 <= scale.numerator < 2**63
    monkeypatch.setattr(dl, "discrete_laplace", None)  # the scalar fallback is not used
    x = discrete_laplace_array(scale, 40_000, integer_source(11))
    z, p = laplace_pmf(scale)
    assert chi2_binned(x, z, p) > 1e-3
    var = float((z.astype(float) ** 2 * p).sum())
    assert abs(x.mean()) < 5 * math.sqrt(var / x.size)


def _tail(scale: Fraction, y: float) -> float:
    r = math.exp(-1 / float(scale))
    return 2 * math.exp(-math.ceil(y) / float(scale)) / (1 + r)


@pytest.mark.parametrize("t,m", [(20_000 * 4096, 751619277), (5 * 10**8, 751619277), (2**31 + 1, 1073741823)])
def test_release_with_wide_numerator_is_vectorised_and_exact(t, m, monkeypatch):
    # the review's performance cliff: t ≥ 2^26 with an odd m; release_on_grid now stays vectorised
    scale = Fraction(t) * 2**30 / m
    assert scale.numerator >= 2**56
    monkeypatch.setattr(dl, "discrete_laplace", None)
    n = 40_000
    x = discrete_laplace_rational(np.full(n, t << 30, np.int64), np.full(n, m, np.int64), integer_source(12))
    for q in (0.25, 0.5, 0.75, 0.95):  # P(|Z| ≥ y) at four quantiles
        y = float(scale) * math.log(1 / (1 - q))
        p = _tail(scale, y)
        assert abs(np.mean(np.abs(x) >= math.ceil(y)) - p) < 5 * math.sqrt(p * (1 - p) / n)
    eps = m / 2**30
    out, tg = release_on_grid(np.zeros(50), np.full(50, (t - 1.5) / (1 + 1e-9) / 4096), eps, integer_source(1))
    assert np.all(tg == t) and np.all(np.isfinite(out))


def test_numerators_beyond_2_126_still_use_the_scalar_sampler(monkeypatch):
    calls = record_calls(monkeypatch, dl, "discrete_laplace")
    scale = Fraction(2**126 + 1, 2**100 + 1)  # reduced numerator beyond the wide path
    x = discrete_laplace_array(scale, 5, integer_source(1))
    assert len(calls) == 5 and x.dtype == np.int64
    for sc in (Fraction(2**62 + 1, 2**30 + 1), Fraction(2**63 + 1, 2**30 + 1), Fraction(2**125 + 1, 2**100 + 1)):
        assert discrete_laplace_array(sc, 5, integer_source(1)).dtype == np.int64
    assert len(calls) == 5  # int64 and wide paths: vectorised


# the wide path (Python ints over object arrays): numerators or denominators in [2^63, 2^126)
WIDER_SCALES = [Fraction(2**64 + 1, 2**62 + 3), Fraction(2**62 + 1, 2**64 + 1), Fraction(2**120 + 3, 2**118 + 1)]


@pytest.mark.parametrize("scale", WIDER_SCALES, ids=lambda s: f"{float(s):.4g}")
def test_wide_path_laplace_chi2(scale, monkeypatch):
    assert max(scale.numerator, scale.denominator) >= 2**63
    monkeypatch.setattr(dl, "discrete_laplace", None)
    x = discrete_laplace_array(scale, 40_000, integer_source(13))
    z, p = laplace_pmf(scale)
    assert chi2_binned(x, z, p) > 1e-3


@pytest.mark.parametrize("eps_num", [751619277, 858993459])
def test_wide_path_at_a_user_sum_of_squares_scale(eps_num, monkeypatch):
    # l1 = 2^35 lattice units (a `user` sum of squares with a large value bound) at ε' = m/2^30:
    # the reduced numerator is ≥ 2^63; tails at four quantiles
    scale = Fraction(2**35 * 2**30, eps_num)
    assert scale.numerator >= 2**63
    monkeypatch.setattr(dl, "discrete_laplace", None)
    n = 40_000
    x = discrete_laplace_array(scale, n, integer_source(14))
    for q in (0.25, 0.5, 0.75, 0.95):
        y = float(scale) * math.log(1 / (1 - q))
        p = _tail(scale, y)
        assert abs(np.mean(np.abs(x) >= math.ceil(y)) - p) < 5 * math.sqrt(p * (1 - p) / n)


def test_uniform_wide_is_uniform_with_mixed_bounds():
    n = 2**100 + 7
    u = exact._uniform_wide(np.full(40_000, n, dtype=object), integer_source(15))
    assert min(u) >= 0 and max(u) < n
    counts = np.bincount(np.array([v * 16 // n for v in u], dtype=np.int64), minlength=16)
    assert stats.chisquare(counts).pvalue > 1e-3
    bounds = np.array([1, 2, 3, 2**64, 2**64 + 1, 2**126 - 1] * 2000, dtype=object)
    v = exact._uniform_wide(bounds, integer_source(16))
    assert all(0 <= x < b for x, b in zip(v, bounds)) and all(v[0::6] == 0)
    assert abs(np.mean(v[1::6] == 1) - 0.5) < 0.05 and abs(np.mean(v[2::6] == 2) - 1 / 3) < 0.05


def test_gcd_arrays_equals_numpy():
    x = np.array([12, 18, 7, 2**40, 0], dtype=np.int64)
    y = np.array([8, 27, 5, 2**20 * 3, 9], dtype=np.int64)
    np.testing.assert_array_equal(exact.gcd_arrays(x, y), np.gcd(x, y))
    c = exact.gcd_arrays(np.full((2, 3), 4097 << 30, np.int64), np.full((2, 3), 858993459 * 4, np.int64))
    assert c.shape == (2, 3) and np.all(c == math.gcd(4097 << 30, 858993459 * 4))
    assert exact.gcd_arrays(np.zeros(0, np.int64), np.zeros(0, np.int64)).size == 0


@pytest.mark.parametrize("scale", [Fraction(5 * 10**8 * 2**30, 751619277), Fraction(2**35 * 2**30, 751619277)],
                         ids=["int64-wide", "object-arrays"])
def test_wide_paths_draw_only_from_the_os(scale, monkeypatch):
    # the `user` release's sampler (SecureRandom) at the new paths: a deterministic function of the
    # OS byte stream (scripted here), no numpy generator created, the scalar sampler not used
    def run(seed: int) -> np.ndarray:
        gen = np.random.Generator(np.random.PCG64(seed))
        with monkeypatch.context() as m:
            m.setattr(os, "urandom", lambda k: gen.bytes(k))
            m.setattr(dl, "discrete_laplace", None)
            _forbid_numpy_rngs(m)
            return discrete_laplace_array(scale, 2000, SecureRandom())

    a, b, c = run(1), run(1), run(2)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("family", ["laplace", "gaussian"])
def test_draws_beyond_int64_stay_exact_python_integers(family):
    """The user model's noise (``draws``) at a scale past 2^63 — a value range of width 1e-12 puts
    the lattice sensitivity near 4·10^18 — is Python integers, never a float cast to int64 (which
    wrapped every draw past 2^63 to −2^63), and ``integer`` adds exactly those draws."""
    from dpopt.noise.mechanism import make_mechanism

    l1 = 4 * 10**18
    kw = dict(l1=l1, l2=float(l1), budget=1e-3)
    a, b = make_mechanism(family, seed=5), make_mechanism(family, seed=5)
    z = a.draws(64, **kw)
    assert z.dtype == object and all(type(v) is int for v in z)
    assert max(abs(v) for v in z) >= 2**63  # the scale is ≈ 4·10^21: nearly every draw is past int64
    assert len({v for v in z}) == z.size  # no wrapped constant
    scale = a.scale(**kw)
    assert 0.2 * scale < float(np.median(np.abs(np.array(z, dtype=float)))) < 5 * scale
    noisy = b.integer(np.zeros(64, dtype=np.int64), **kw)  # the same stream: the same draws, rounded once
    assert np.array_equal(noisy, np.array([float(v) for v in z]))


def test_draws_within_int64_are_an_int64_array():
    from dpopt.noise.mechanism import make_mechanism

    z = make_mechanism("laplace", seed=2).draws(1000, l1=256, l2=256.0, budget=1.0)
    assert z.dtype == np.int64 and z.shape == (1000,)
    assert np.array_equal(z, make_mechanism("laplace", seed=2).integer(np.zeros(1000, dtype=np.int64), l1=256, l2=256.0,
                                                                            budget=1.0).astype(np.int64))
