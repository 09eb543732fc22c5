"""White-box checks of the exact samplers (models/samplers.md, "Review").

The places where a wrong decision would change the law by far less than a χ²
test can see (table boundaries and ties, the float filter's error bound, the exact fallbacks and
their index bookkeeping), exact tail probabilities against frequencies, and the randomness: a real
release draws every bit from the OS, a seeded one never touches it. Longer statistical checks (1 %
relative bias on tail events): tests/benchmarks/bench_sampler_exactness.py.
"""

from __future__ import annotations

import math
import os
import random
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

from dpopt import DpoptInputError
from dpopt.noise import SecureRandom, SeededSource, exact, integer_source, make_noise
from dpopt.noise import discrete_gaussian as dg
from dpopt.noise.discrete_gaussian import discrete_gaussian_array, grid_sigma2
from dpopt.noise.discrete_laplace import discrete_laplace_array


def dexp(x: Fraction, scale_bits: int = 0, prec: int = 60) -> Decimal:
    """e^{-x}·2^scale_bits by the decimal module (correctly rounded exp), ``prec`` digits."""
    with localcontext() as ctx:
        ctx.prec = prec
        return (-(Decimal(x.numerator) / Decimal(x.denominator))).exp() * Decimal(2) ** scale_bits


class Words:
    """A source whose next words are given (as 32-bit halves, in the order ``_bits32`` reads them),
    then PCG64 words."""

    def __init__(self, first32: np.ndarray, seed: int) -> None:
        self.first = np.asarray(first32, dtype=np.uint32)
        self.rest = SeededSource(seed)

    def randbelow(self, n: int) -> int:
        return self.rest.randbelow(n)

    def random_words(self, n: int) -> np.ndarray:
        w = self.rest.random_words(n).copy()
        if self.first is not None:
            k = min(self.first.size, 2 * n)
            w.view(np.uint32)[:k] = self.first[:k]
            self.first = None
        return w


def within(hits: int, n: int, p: float, z: float = 5.0) -> bool:
    return abs(hits / n - p) <= z * math.sqrt(max(p * (1 - p), 1e-12) / n) + 1e-12


# ---------------------------------------------------------------------------------------------
# Bernoulli(e^{-J/64}): the table's boundaries, exactly
# ---------------------------------------------------------------------------------------------
J_EDGES = np.array([1, 63, 64, 65, 700, 1418, 1419, 1420, 1421, 2839, 2840, 2841, 5000, 10**6], np.int64)


def test_table_decides_neighbours_of_every_threshold():
    # W's 32 leading bits one below ⌊e^{-J/64}·2^32⌋ must say yes, one above must say no, for J
    # across the table, at its last non-zero 32-bit entry (J = 1419) and beyond its end
    t32 = exact._table32()
    assert int(t32[1419]) == 1 and int(t32[1420]) == 0  # e^{-J/64}·2^32 crosses 1 there
    tj = t32[np.minimum(J_EDGES, t32.size - 1)].astype(np.int64)
    pos = tj > 0
    yes = exact._table_bernoulli(J_EDGES[pos], Words(tj[pos] - 1, 1))
    assert yes.all()
    no = exact._table_bernoulli(J_EDGES, Words(tj + 1, 2))
    assert not no.any()


@pytest.mark.parametrize("j", [1419, 1420, 1500, 3000])
def test_table_tie_at_the_end_of_the_table(j):
    # tie: W's 32 leading bits equal the table entry (0 from J = 1420 on, also past the table's
    # end): P(yes | tie) = frac(e^{-J/64}·2^32), decided from more bits and exact brackets
    n = 3000
    t = int(exact._table32()[min(j, exact._table32().size - 1)])
    v = dexp(Fraction(j, 64), 32)
    want = float(v - int(v))
    x = exact._table_bernoulli(np.full(n, j, np.int64), Words(np.full(n, t, np.uint32), j))
    assert within(int(x.sum()), n, want)


def test_geometric_tie_beyond_the_table():
    # W's 32 leading bits all 0: V ≥ 22 for sure (e^{-22} > 2^-32), then V ≥ v iff W < e^{-v}:
    # P(V ≥ v | W < 2^-32) = e^{-v}·2^32 for v ≥ 23 (the loop past the 32-bit table)
    n = 1500
    src = Words(np.zeros(n, np.uint32), 4)
    v = exact._geometric_e(n, src)
    assert v.min() >= 22
    for k in (23, 24, 25):
        assert within(int((v >= k).sum()), n, float(dexp(Fraction(k), 32)))


@pytest.mark.parametrize("num,den", [(1, 64), (127, 128), (1, 128), (2**55 - 1, 2**55), (2**55 + 3, 2**55 + 5)])
def test_bernoulli_exp_ratio_at_j_boundaries(num, den):
    # 64γ an integer (R = 0: the chain must accept at once), or just below one (J = 63)
    n = 200_000
    x = exact.bernoulli_exp_ratio(np.full(n, num, np.int64), np.full(n, den, np.int64), integer_source(7))
    assert within(int(x.sum()), n, math.exp(-num / den))


# ---------------------------------------------------------------------------------------------
# the Gaussian's float filter
# ---------------------------------------------------------------------------------------------
def _filter_cases(rnd: random.Random):
    """(σ², L, c̃, h̃, ys) as the two callers compute them, over their whole domains."""
    for _ in range(400):  # discrete_gaussian_array: any rational σ² in [2^-40, 2^80)
        e = rnd.uniform(-40, 79)
        s2 = Fraction(2.0**e) * Fraction(rnd.randrange(1, 2**40), rnd.randrange(1, 2**40))
        if not dg._MIN_SIGMA2 <= s2:
            continue
        L = math.isqrt(s2.numerator // s2.denominator) + 1
        if L < dg._MAX_L:
            c = s2 / L
            yield s2, L, float(c), float(32 / s2), [0, int(c), int(c) + 1, rnd.randrange(60 * L), rnd.randrange(2**52)]
    for _ in range(400):  # the release: σ² = t²·2^29/m, t < 2^33, m ≤ 2^62, floats as _release_noise
        t, m = float(rnd.randrange(1, 2**33)), float(rnd.randrange(1, 2**62))
        lf = math.floor(math.sqrt(t * t * 2.0**29 / m)) + 1.0
        if lf < dg._MAX_L:
            s2 = Fraction(int(t) ** 2 * 2**29, int(m))
            c = s2 / int(lf)
            yield (s2, int(lf), t * t * 2.0**29 / (m * lf), 32.0 * m / (t * t * 2.0**29),
                   [0, int(c), int(c) + 1, rnd.randrange(60 * int(lf))])
    yield dg._MIN_SIGMA2, 1, float(dg._MIN_SIGMA2), float(32 / dg._MIN_SIGMA2), [0, 1, 2, 2**51]


def test_gamma64_filter_bound_is_rigorous():
    worst = 0.0
    for s2, L, c, h, ys in _filter_cases(random.Random(11)):
        x = np.array(ys, dtype=float)
        g, err = dg._gamma64_filter(x, np.full(x.size, c), np.full(x.size, h))
        for y, gi, ei in zip(ys, g, err):
            true = 32 * (y - s2 / L) ** 2 / s2
            if np.isfinite(gi):
                worst = max(worst, float(abs(Fraction(float(gi)) - true) / Fraction(float(ei))))
    assert worst <= 1.0  # measured ≈ 0.27: the bound holds with room


def test_tiny_sigma2_uses_the_scalar_sampler(monkeypatch):
    # below 2^-40 the filter's floats could be subnormal (its bound would not hold) and 32/σ²
    # overflows a double below 2^-1019 (OverflowError before the review); the scalar path is exact
    x = discrete_gaussian_array(Fraction(3, 2**1030), 200, integer_source(1))
    assert x.dtype == np.int64 and not x.any()

    def no_filter(*a, **k):
        raise AssertionError("the float filter must not run below _MIN_SIGMA2")

    monkeypatch.setattr(dg, "_gaussian_core", no_filter)
    assert discrete_gaussian_array(Fraction(1, 2**41), 50, integer_source(2)).shape == (50,)


def _dg_pmf(s2: Fraction, zmax: int) -> np.ndarray:
    """P(Z = z), z = 0..zmax, for N_ℤ(0, σ²) with decimal exps (60 digits; the normaliser sums
    |z| < zmax + 40σ + 40, the rest is below e^{-800})."""
    top = zmax + 40 * math.isqrt(s2.numerator // s2.denominator + 1) + 40
    w = [dexp(Fraction(z * z) / (2 * s2)) for z in range(top)]
    norm = w[0] + 2 * sum(w[1:])
    return np.array([float(v / norm) for v in w[: zmax + 1]])


@pytest.mark.parametrize("s2", [1 + Fraction(1, 2**80), 1 - Fraction(1, 2**80)], ids=["1+2^-80", "1-2^-80"])
def test_gaussian_filter_undecidable_everywhere(monkeypatch, s2):
    # σ² = 1 ± 2^-80 is not "small" (p·q ≈ 2^160), and 64γ = 32(|y| − σ²/L)²/σ² lies within
    # ~2^-75 of an integer for every y: no J can be certified, every acceptance takes the exact
    # rational path (with the γ of its own entry: a mixed-up index would change the law)
    calls = []
    real = exact.bernoulli_exp
    monkeypatch.setattr(exact, "bernoulli_exp", lambda g, src: calls.append(g) or real(g, src))
    n = 6000
    z = np.abs(discrete_gaussian_array(s2, n, integer_source(13)))
    assert len(calls) >= n  # at least one exact decision per draw
    p = _dg_pmf(s2, 3)
    for k, pk in ((0, p[0]), (1, 2 * p[1]), (2, 2 * p[2])):
        assert within(int((z == k).sum()), n, pk), k


def test_filtered_bernoulli_uses_each_entrys_own_gamma():
    # per-entry γ, error bounds that certify J but leave most chain comparisons undecided (and a
    # group left ambiguous): every exact fallback must be asked for its own entry's γ
    gam = [Fraction(1, 128), Fraction(33, 640), Fraction(647, 640), Fraction(401, 256), Fraction(71, 640)]
    errs = [0.49, 0.29, 0.29, 0.24, 0.2]  # 64γ = 0.5, 3.3, 64.7, 100.25 (certified); 7.1 (ambiguous)
    n = 30_000
    grp = np.arange(n) % len(gam)
    g = np.array([float(64 * gam[i]) for i in grp])
    err = np.array([errs[i] for i in grp])
    asked = []

    def exact_gamma(i: int) -> Fraction:
        gi = gam[grp[i]]
        assert abs(float(64 * gi) - g[i]) <= err[i]  # the entry's own γ, not a neighbour's
        asked.append(int(grp[i]))
        return gi

    x = exact.bernoulli_exp_filtered(g, err, exact_gamma, integer_source(17))
    assert set(asked) == set(range(len(gam)))  # ambiguous group and refined chains both exercised
    for k, gk in enumerate(gam):
        assert within(int(x[grp == k].sum()), int((grp == k).sum()), math.exp(-gk)), k


# ---------------------------------------------------------------------------------------------
# exact tail probabilities against frequencies (1 % relative: the benchmark)
# ---------------------------------------------------------------------------------------------
def test_laplace_exact_tail_at_release_scale():
    # scale t/ε' = 4097·2^30/858993459: P(Z = 0) = (1 − r)/(1 + r), P(|Z| ≥ y) = 2r^y/(1 + r)
    a, b = 4097 * 2**30, 858993459
    n = 1_000_000
    z = np.abs(discrete_laplace_array(Fraction(a, b), n, integer_source(19)))
    r = dexp(Fraction(b, a))
    y = 15_000  # P ≈ 0.054
    assert within(int((z >= y).sum()), n, float(2 * r**y / (1 + r)), z=5)
    assert within(int((z == 0).sum()), n, float((1 - r) / (1 + r)), z=5)


def test_gaussian_exact_tail_at_release_sigma():
    s2 = grid_sigma2(41, 0.3)  # σ ≈ 52.9, big-denominator rational: the float filter's path
    n = 400_000
    z = np.abs(dg.discrete_gaussian_array(s2, n, integer_source(23)))
    p = _dg_pmf(s2, 106)
    assert within(int((z >= 106).sum()), n, 1 - p[0] - 2 * p[1:106].sum())  # ≈ 0.045
    assert within(int((z == 0).sum()), n, p[0])


# ---------------------------------------------------------------------------------------------
# randomness: the OS for a real release, nothing else; a seeded source never touches the OS
# ---------------------------------------------------------------------------------------------
def _forbid_numpy_rngs(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("a numpy generator in the exact noise path")

    for name in ("default_rng", "PCG64", "SeedSequence", "random", "randint", "Generator"):
        monkeypatch.setattr(np.random, name, boom)


def _release_all_paths(noise) -> np.ndarray:
    """Both releases' vectorised, scalar-fallback and no-noise entries (granularity 2^-12)."""
    vals = np.array([0.3, 1.7, np.nan, 5.0, 2.0, 0.0])
    sens = np.array([1.0, 2.0**22, 1.0, 0.0, 3.0, 0.5])  # 2^22: t ≥ 2^33, the scalar path
    budget = np.array([0.5, 0.5, 0.5, 0.0, 2.0**33 if noise.unit == "epsilon" else 0.4, 1.0])
    return noise.add(vals, sens, budget).values


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_unseeded_release_draws_only_from_the_os(monkeypatch, mechanism):
    # os.urandom (bulk words) and random._urandom (what secrets.randbelow reads) replaced by one
    # scripted byte stream: the same stream gives the same release, another stream another one,
    # and no numpy generator is created: the OS is the release's only randomness
    noise = make_noise(mechanism)
    assert isinstance(noise.source, SecureRandom)

    def run(seed: int) -> tuple[np.ndarray, int]:
        gen = np.random.Generator(np.random.PCG64(seed))  # built before numpy's are forbidden
        used = [0]

        def fake(k: int) -> bytes:
            used[0] += k
            return gen.bytes(k)

        with monkeypatch.context() as m:
            m.setattr(os, "urandom", fake)
            m.setattr(random, "_urandom", fake)
            _forbid_numpy_rngs(m)
            out = _release_all_paths(noise)
        return out, used[0]

    a, used = run(1)
    b, _ = run(1)
    c, _ = run(2)
    assert used > 0
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(np.nan_to_num(a), np.nan_to_num(c))


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_seeded_release_never_touches_the_os(monkeypatch, mechanism):
    def boom(k: int) -> bytes:
        raise AssertionError("the seeded source read the OS")

    noise = make_noise(mechanism, seed=5)
    again = make_noise(mechanism, seed=5)
    monkeypatch.setattr(os, "urandom", boom)
    monkeypatch.setattr(random, "_urandom", boom)
    np.testing.assert_array_equal(_release_all_paths(noise), _release_all_paths(again))


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_values_beyond_the_int64_grid_are_an_input_error(mechanism):
    # round(f/λ) of f ≥ 2^(63−k) overflowed int64 silently (a garbage released value) before the review
    noise = make_noise(mechanism, seed=1)
    with pytest.raises(DpoptInputError, match="values"):
        noise.add(np.array([1.0, 2.0**52]), 1.0, 0.5)
    assert np.isfinite(noise.add(np.array([1.0, 2.0**49, np.nan]), 1.0, 0.5).values[:2]).all()


def test_filtered_bernoulli_rejects_negative_error_bounds():
    with pytest.raises(DpoptInputError, match="err"):
        exact.bernoulli_exp_filtered(np.array([1.5]), np.array([-0.1]), lambda i: Fraction(3, 128), integer_source(1))
