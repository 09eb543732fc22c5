"""Laplace noise reduction (dpopt.noise.reduction): the identity behind it, the exact sampler's joint
law against that identity, the privacy loss of the pair, and the continuous simulation's law."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpopt._validation import DpoptInputError
from dpopt.noise.discrete_laplace import discrete_laplace_array
from dpopt.noise.mechanism import DiscreteLaplace, LaplaceSimulation
from dpopt.noise.reduction import _keep_ratio, refine_discrete_laplace, refine_laplace
from dpopt.noise.sources import SeededSource

K = 2500  # pmf window: mass beyond |z| > K is below 1e-20 at the scales used here (≤ 50)


def dl_pmf(scale: float, z: np.ndarray) -> np.ndarray:
    r = math.exp(-1.0 / scale)
    return (1 - r) / (1 + r) * r ** np.abs(z)


def w_of(s_from: float, s_to: float) -> float:
    r_f, r_t = math.exp(-1 / s_from), math.exp(-1 / s_to)
    return (r_t / r_f) * ((1 - r_f) / (1 - r_t)) ** 2


@pytest.mark.parametrize("s_from, s_to", [(3.0, 1.2), (10.0, 9.0), (2.5, 0.4), (50.0, 5.0)])
def test_the_mixture_identity_holds_for_the_discrete_law(s_from, s_to):
    """Z_to + Bernoulli(1 − w)·L(s_from) has exactly the law L(s_from), by convolution of the pmfs."""
    z = np.arange(-K, K + 1)
    w = w_of(s_from, s_to)
    assert 0 < w < 1
    mixed = w * dl_pmf(s_to, z) + (1 - w) * np.convolve(dl_pmf(s_to, z), dl_pmf(s_from, z))[K:3 * K + 1]
    np.testing.assert_allclose(mixed, dl_pmf(s_from, z), rtol=1e-9, atol=1e-15)


def joint_pmf(s_from: float, s_to: float, window: int) -> np.ndarray:
    """P(Z_from = c, Z_to = a) on [−window, window]²: L_to(a)·(w·1{c = a} + (1 − w)·L_from(c − a))."""
    z = np.arange(-window, window + 1)
    w = w_of(s_from, s_to)
    a, c = np.meshgrid(z, z)  # rows c, columns a
    return dl_pmf(s_to, a) * (w * (c == a) + (1 - w) * dl_pmf(s_from, c - a))


@pytest.mark.parametrize("s_from, s_to, seed", [(Fraction(3), Fraction(6, 5), 1), (Fraction(4), Fraction(7, 2), 2)])
def test_the_exact_sampler_draws_the_joint_law_of_the_identity(s_from, s_to, seed):
    """Z_from drawn exactly, Z_to by the forward conditional sampler: the pair's frequencies match the
    joint pmf of the identity (chi-square over the cells of expected count ≥ 20, the rest pooled) —
    the property the privacy argument rests on: the earlier answer is a post-processing of the later."""
    src = SeededSource(seed)
    n = 20000
    c = discrete_laplace_array(s_from, n, src)
    a = refine_discrete_laplace(c, scale_from=s_from, scale_to=s_to, source=src)
    window = 12
    p = joint_pmf(float(s_from), float(s_to), window)
    inside = (np.abs(c) <= window) & (np.abs(a) <= window)
    counts = np.zeros_like(p)
    np.add.at(counts, (c[inside] + window, a[inside] + window), 1)
    expected = n * p
    big = expected >= 20
    obs = np.r_[counts[big], n - counts[big].sum()]
    exp = np.r_[expected[big], n - expected[big].sum()]
    assert stats.chisquare(obs, exp).pvalue > 1e-3
    # and the refined noise alone is the discrete Laplace at the smaller scale
    z = np.arange(-8, 9)
    obs_m = np.r_[[np.sum(a == k) for k in z], np.sum(np.abs(a) > 8)]
    pm = dl_pmf(float(s_to), z)
    assert stats.chisquare(obs_m, n * np.r_[pm, 1 - pm.sum()]).pvalue > 1e-3


@pytest.mark.parametrize("s_from, s_to", [(3.0, 1.2), (8.0, 2.0), (1.5, 1.4)])
def test_the_pair_costs_only_the_later_budget(s_from, s_to):
    """The released pair (x + Z_from, x + Z_to) against (x + 1 + ·): the log-ratio of the joint pmf
    over every outcome of the window is at most 1/s_to, the later answer's ε for sensitivity 1 —
    not 1/s_from + 1/s_to as for two independent answers."""
    window = 40
    p = joint_pmf(s_from, s_to, window)
    shifted = np.roll(np.roll(p, 1, axis=0), 1, axis=1)  # the same outcomes under x + 1
    ok = (p > 1e-300) & (shifted > 1e-300)
    ok[0, :] = ok[:, 0] = False  # rolled-in edge
    worst = float(np.max(np.abs(np.log(p[ok]) - np.log(shifted[ok]))))
    assert worst <= 1 / s_to + 1e-9
    assert worst > 1 / s_to - 1e-6  # attained: the bound is tight, not loose


@pytest.mark.parametrize("x, y", [(Fraction(1, 3), Fraction(1, 2)), (Fraction(3, 2), Fraction(5, 2)),
                                  (Fraction(1, 2**38), Fraction(3, 2**38)), (Fraction(2, 5), Fraction(2, 5))])
def test_the_ratio_coin_is_exact_and_fast_at_any_scale(x, y):
    src = SeededSource(5)
    n = 6000
    hits = sum(_keep_ratio(x, y, src) for _ in range(n))
    p = (1 - math.exp(-float(x))) / (1 - math.exp(-float(y))) if x != y else 1.0
    assert abs(hits / n - p) <= 4 * math.sqrt(p * (1 - p) / n) + 1e-12


def test_huge_scales_refine_in_constant_time():
    """Sums in lattice units have scales of 2^40 and more: each refined entry costs a few coins."""
    src = SeededSource(3)
    s_from, s_to = Fraction(2**41, 3), Fraction(2**40, 7)
    c = discrete_laplace_array(s_from, 200, src)
    a = refine_discrete_laplace(c, scale_from=s_from, scale_to=s_to, source=src)
    assert a.dtype == np.int64 and a.shape == c.shape
    assert np.median(np.abs(a)) < np.median(np.abs(c))


def test_refining_to_the_same_scale_changes_nothing_and_bad_input_is_one_line():
    src = SeededSource(1)
    c = np.array([3, -2, 0], dtype=np.int64)
    np.testing.assert_array_equal(refine_discrete_laplace(c, scale_from=2, scale_to=2, source=src), c)
    with pytest.raises(DpoptInputError, match="scale_to"):
        refine_discrete_laplace(c, scale_from=1, scale_to=2, source=src)
    with pytest.raises(DpoptInputError, match="noise"):
        refine_discrete_laplace(np.array([0.5]), scale_from=2, scale_to=1, source=src)
    with pytest.raises(DpoptInputError, match="scale_to"):
        refine_laplace(np.zeros(2), scale_from=1.0, scale_to=2.0, rng=np.random.default_rng(0))


def test_the_continuous_simulation_has_the_same_joint_law():
    """Laplace(b_from) refined to b_to: Z_to ~ Laplace(b_to) (Kolmogorov–Smirnov), Z_from − Z_to is
    0 with probability w = (b_to/b_from)² and otherwise Laplace(b_from) independent of Z_to."""
    rng = np.random.default_rng(9)
    b_from, b_to, n = 3.0, 1.2, 40000
    c = rng.laplace(0, b_from, n)
    a = refine_laplace(c, scale_from=b_from, scale_to=b_to, rng=rng)
    assert stats.kstest(a, stats.laplace(scale=b_to).cdf).pvalue > 1e-3
    d = c - a
    w = (b_to / b_from) ** 2
    assert abs(np.mean(d == 0) - w) < 4 * math.sqrt(w * (1 - w) / n)
    moved = d[d != 0]
    assert stats.kstest(moved, stats.laplace(scale=b_from).cdf).pvalue > 1e-3
    assert abs(stats.spearmanr(a[d != 0], moved).statistic) < 0.03


def test_the_mechanisms_refine_at_their_own_scales():
    """DiscreteLaplace.refine works at the sampler's rational ε (2^-30 lattice), LaplaceSimulation's
    at the float ε: the refined noise has the later budget's spread."""
    mech = DiscreteLaplace(SeededSource(4))
    c = np.rint(mech.integer(np.zeros(4000, dtype=np.int64), l1=8, l2=8.0, budget=0.5)).astype(np.int64)
    a = mech.refine(c, l1=8, budget_from=0.5, budget_to=2.0)
    assert np.var(a) == pytest.approx(2 * 4.0**2, rel=0.15)
    sim = LaplaceSimulation(np.random.default_rng(2))
    cs = sim.integer(np.zeros(4000), l1=8, l2=8.0, budget=0.5)
    assert np.var(sim.refine(cs, l1=8, budget_from=0.5, budget_to=2.0)) == pytest.approx(2 * 4.0**2, rel=0.15)


def conditional_pmf(c: int, s_from: float, s_to: float, window: int) -> tuple[np.ndarray, np.ndarray]:
    """P(Z_to = a | Z_from = c, B = 1) ∝ r_to^|a|·r_from^|c − a| on [c − window, c + window] ∪ [−window, window]."""
    a = np.arange(min(-window, c - window), max(window, c + window) + 1)
    p = np.exp(-np.abs(a) / s_to - np.abs(c - a) / s_from)
    return a, p / p.sum()


@pytest.mark.parametrize("s_from, s_to", [(Fraction(3), Fraction(6, 5)), (Fraction(10), Fraction(9)),
                                          (Fraction(40), Fraction(5))])
@pytest.mark.parametrize("c", [0, 4, 60])
def test_both_proposals_draw_the_conditional_law(s_from, s_to, c):
    """The rejection step alone (branch B = 1), from the proposal the sampler picks for this c and
    from the other one: each matches the conditional pmf ∝ r_to^|a|·r_from^|c − a| (chi-square)."""
    from dpopt.noise.reduction import _rejoin

    gamma, inv_from = 1 / s_to - 1 / s_from, 1 / s_from
    a_grid, p = conditional_pmf(c, float(s_from), float(s_to), 400)
    r_f = math.exp(-1 / float(s_from))
    S = float(np.sum(np.exp(-np.abs(a_grid) / float(s_to) - (np.abs(c - a_grid) - abs(c)) / float(s_from))))
    near_acceptance = math.tanh(0.5 / float(s_to)) * r_f ** abs(c) * S
    far_acceptance = math.tanh(float(gamma) / 2.0) * S
    assert 0 < near_acceptance <= 1 and 0 < far_acceptance <= 1
    # the near proposal needs about 1/its acceptance draws: e^20 for c = 60 at s_from = 3 (why the far one exists)
    for far in (False, True) if near_acceptance > 1e-3 else (True,):
        src = SeededSource(7 + far)
        n = 4000
        draws = np.array([_rejoin(c, s_to, gamma, inv_from, far=far, source=src) for _ in range(n)])
        expected = n * p
        big = expected >= 15
        counts = np.array([np.sum(draws == v) for v in a_grid[big]])
        obs = np.r_[counts, n - counts.sum()]
        exp = np.r_[expected[big], n - expected[big].sum()]
        assert stats.chisquare(obs, exp).pvalue > 1e-4, (far, c)


def test_a_far_out_noise_needs_few_proposals(monkeypatch):
    """Z_from = c far in the tail (|c| = 60·s_from): the sampler takes the far proposal, whose
    acceptance is at least 1/2 there; the near one would need about e^60 proposals."""
    import dpopt.noise.reduction as reduction

    calls = []
    real = reduction.discrete_laplace
    monkeypatch.setattr(reduction, "discrete_laplace", lambda scale, source: calls.append(1) or real(scale, source))
    s_from, s_to = Fraction(5), Fraction(2)
    c = np.full(300, 300, dtype=np.int64)
    a = refine_discrete_laplace(c, scale_from=s_from, scale_to=s_to, source=SeededSource(4))
    assert len(calls) < 3 * 300 and np.median(np.abs(a)) < 300
