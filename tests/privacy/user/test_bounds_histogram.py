"""The "histogram" bounds rule: sensitivity of the contribution histogram by brute force, the
predicted-error objective against a from-scratch scalar version, the optimiser against exhaustive
evaluation, and the stability of the choice across noise draws."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpopt.noise import SeededSource
from dpopt.privacy.user.bounding import grid_ranks
from dpopt.privacy.user.bounds import (
    DEFAULT_TOLERANCE,
    BoundsRule,
    choose_bounds,
    contribution_bins,
    histogram_bins,
    measure_contributions,
    optimise_bounds,
)
from dpopt.privacy.user.predict import (
    ContributionHistogram,
    NoiseBudgets,
    denoise_histogram,
    predicted_release_error,
    project_histogram,
)

from .conftest import make_agg

GE, RE = histogram_bins(4), histogram_bins(4)  # edges 1, 2, 4 (+ overflow)


def _hist(agg, mask=None):
    ranks = grid_ranks(agg, np.random.default_rng(0), mask=mask)
    i, j = contribution_bins(agg, ranks, GE, RE)
    out = np.zeros((GE.size + 1, RE.size + 1), dtype=np.int64)
    np.add.at(out, (i, j), 1)
    return out


def _base(rng, users=4, grids=6):
    recs = []
    for u in range(users):
        for g in rng.choice(grids, size=int(rng.integers(1, grids)), replace=False):
            recs += [(f"u{u}", int(g), t, 1.0) for t in range(int(rng.integers(1, 7)))]
    return recs


def _all_users(grids=(0, 2, 4), counts=(1, 3, 5)):
    """Every user holding 1..3 of ``grids`` with counts from ``counts`` (exhaustive, 63 users;
    counts 1, 3, 5 hit the three record bins, 1..3 grids the first two grid bins; with the
    base users' own 1..5 grids every bin boundary is crossed)."""
    for r in (1, 2, 3):
        for gs in itertools.combinations(grids, r):
            for cs in itertools.product(counts, repeat=r):
                yield [("zz", g, t, 2.0) for g, c in zip(gs, cs) for t in range(c)]


@pytest.mark.parametrize("listed", [None, (0, 1, 2)])
def test_histogram_moves_by_exactly_one_bin_when_a_user_is_added(listed):
    rng = np.random.default_rng(11)
    seen = set()
    for trial in range(1):
        base = _base(rng)
        a0 = make_agg(base)
        for extra in _all_users():
            a1 = make_agg(base + extra)
            m0 = None if listed is None else np.isin(a0.pair_grid, [_g(a0, g) for g in listed])
            m1 = None if listed is None else np.isin(a1.pair_grid, [_g(a1, g) for g in listed])
            d = np.abs(_hist(a1, m1) - _hist(a0, m0)).sum()
            eligible = any(g in (listed or range(6)) for (_, g, _, _) in extra)
            assert d == (1 if eligible else 0)
            seen.add(d)
    assert seen == ({1} if listed is None else {0, 1})


def _g(agg, g):
    from .conftest import grid_of

    return grid_of(agg, g)


def test_histogram_bins_are_the_users_grid_count_and_median_records():
    agg = make_agg([("a", 0, t, 1.0) for t in range(3)] + [("a", 1, 0, 1.0)]  # G = 2, median 2
                   + [("b", g, 0, 1.0) for g in range(5)]                     # G = 5 (overflow), median 1
                   + [("c", 2, t, 1.0) for t in range(9)])                    # G = 1, median 9 (overflow)
    h = _hist(agg)
    want = np.zeros_like(h)
    want[1, 1] += 1  # G=2 -> edge 2 (index 1); median 2 -> index 1
    want[3, 0] += 1  # G=5 > 4 -> overflow (3); median 1 -> index 0
    want[0, 3] += 1
    np.testing.assert_array_equal(h, want)


def test_measured_histogram_is_exact_at_huge_epsilon_and_noisy_at_small():
    rng = np.random.default_rng(5)
    agg = make_agg(_base(rng, users=30))
    ranks = grid_ranks(agg, np.random.default_rng(0))
    exact = _hist(agg)
    h = measure_contributions(agg, ranks, 1e9, source=SeededSource(3), max_grids=4, max_records=4)
    np.testing.assert_array_equal(h.noisy, exact)
    diffs = np.concatenate([(measure_contributions(agg, ranks, 0.5, source=SeededSource(s), max_grids=4,
                                                   max_records=4).noisy - exact).ravel() for s in range(40)])
    # discrete Laplace of scale 1/ε = 2: E|Z| = 2r/(1 − r²), r = e^{-1/2}
    r = math.exp(-0.5)
    assert abs(np.mean(np.abs(diffs)) - 2 * r / (1 - r * r)) < 0.25


def test_projection_keeps_the_total_and_is_the_nearest_nonnegative_histogram():
    rng = np.random.default_rng(2)
    for _ in range(50):
        h = rng.laplace(size=(4, 3)) * 3 + rng.integers(0, 4, size=(4, 3))
        p = project_histogram(h)
        assert np.all(p >= 0) and abs(p.sum() - max(h.sum(), 0)) < 1e-9
        # from scratch: the nearest point of the scaled simplex by bisection on the shift θ
        lo, hi = h.min() - 100, h.max() + 1
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if np.maximum(h - mid, 0).sum() > max(h.sum(), 0) else (lo, mid)
        if h.sum() > 0:
            np.testing.assert_allclose(p, np.maximum(h - lo, 0), atol=1e-7)
    d = denoise_histogram(np.array([[50.0, 1.0], [-3.0, 2.0]]), 1.0)  # t = ln 4 ≈ 1.39
    np.testing.assert_array_equal(d, [[50.0, 0.0], [0.0, 2.0]])


def _scalar_objective(G, M, H, k, c, *, U, budgets, priority, refs, s, Q):
    """From scratch, one candidate: models/user_level.md §11 term by term."""
    h = U / 2
    wsum = sum(H[i][j] * G[i] for i in range(len(G)) for j in range(len(M)))
    total = 0.0
    for L in refs:
        acc = 0.0
        qs = [0.5] if priority == "own" else [(t + 0.5) / Q for t in range(Q)]
        for q in qs:
            ku = kr = allr = 0.0
            for i, g in enumerate(G):
                if priority == "own":
                    p = min(1.0, k / g)
                else:  # integer G: the binomial sum
                    n = int(round(g)) - 1
                    p = sum(math.comb(n, x) * q**x * (1 - q) ** (n - x) for x in range(min(k, n + 1)))
                for j, m in enumerate(M):
                    w = H[i][j] * g / wsum
                    ku += w * p
                    kr += w * p * min(m, c)
                    allr += w * m
            p0 = math.exp(-L * ku)
            n_, lk = L * kr / (1 - p0), L * ku / (1 - p0)
            if budgets.unit == "epsilon":
                vn, vy = 2 * (k * c) ** 2 / budgets.count**2, 2 * (k * c * U / 2) ** 2 / budgets.sum**2
            else:
                vn, vy = k * c * c / (2 * budgets.count), k * c * c * (U / 2) ** 2 / (2 * budgets.sum)
            v = (vy + h * h * vn) / n_**2 + s * s * max(1 / lk - 1 / L, 0) + s * s * max(1 / n_ - 1 / (L * allr), 0)
            e = math.sqrt(v) * h / math.sqrt(v + h * h)
            if budgets.selection is not None:
                eps_p, delta = budgets.selection
                b = k / eps_p
                T = 1 + b * math.log(k / (2 * delta))
                d = lk - T
                pr = 1 - 0.5 * math.exp(-abs(d) / b) if d >= 0 else 0.5 * math.exp(-abs(d) / b)
                e = pr * e + (1 - pr) * h
            e = p0 * h + (1 - p0) * e
            acc += e
        total += acc / len(qs)
    return total / len(refs)


@pytest.mark.parametrize("priority", ["own", "shared"])
@pytest.mark.parametrize("unit,selection", [("epsilon", None), ("epsilon", (1.0, 1e-4)), ("rho", None)])
def test_objective_matches_a_scalar_from_scratch_version(priority, unit, selection):
    G = np.array([1.0, 3.0, 8.0, 20.0])
    M = np.array([1.0, 2.0, 5.0])
    H = np.array([[3, 0, 1], [5, 2, 0], [10, 4, 2], [1, 0, 6]], dtype=float)
    hist = ContributionHistogram(grids=G, records=M, noisy=H.astype(np.int64), counts=H, epsilon=1.0)
    b = NoiseBudgets(count=2.0, sum=3.0, unit=unit, selection=selection)
    ks, cs = np.array([1, 2, 4, 8, 16]), np.array([1, 2, 4])
    got = predicted_release_error(hist, ks, cs, bound=10.0, budgets=b, priority=priority, reference_users=(5, 30),
                                  spread=1.5, quantiles=6)
    for a, k in enumerate(ks):
        for bb, c in enumerate(cs):
            want = _scalar_objective(G, M, H, int(k), int(c), U=10.0, budgets=b, priority=priority, refs=(5, 30),
                                     s=1.5, Q=6)
            assert got[a, bb] == pytest.approx(want, rel=1e-9)


def test_optimiser_is_the_exhaustive_rule_and_ignores_the_scale_of_u():
    rng = np.random.default_rng(4)
    G = np.array([1.0, 2.0, 5.0, 11.0, 23.0])
    M = np.array([1.0, 3.0, 6.0])
    ks, cs = np.array([1, 2, 4, 8, 16, 32]), np.array([1, 2, 4, 8])
    for trial in range(20):
        H = rng.integers(0, 30, size=(5, 3)).astype(float)
        hist = ContributionHistogram(grids=G, records=M, noisy=H.astype(np.int64), counts=H, epsilon=1.0)
        b = NoiseBudgets(count=float(rng.uniform(0.5, 5)), sum=float(rng.uniform(0.5, 5)),
                         selection=None if trial % 2 else (1.0, 1e-5))
        k, c, obj = optimise_bounds(hist, ks, cs, bound=1.0, budgets=b, priority="own")
        # exhaustive, written out: every pair, the near-optimal band, the lower median of its k,
        # the best c there
        pairs = [(obj[i, j], int(ks[i]), int(cs[j])) for i in range(ks.size) for j in range(cs.size)]
        best = min(p[0] for p in pairs)
        band_k = sorted({kk for v, kk, cc in pairs if v <= best + DEFAULT_TOLERANCE / 2})
        kk = band_k[(len(band_k) - 1) // 2]
        cc = min((v, c2) for v, k2, c2 in pairs if k2 == kk)[1]
        assert (k, c) == (kk, cc)
        k2, c2, obj2 = optimise_bounds(hist, ks, cs, bound=120.0, budgets=b, priority="own")
        assert (k2, c2) == (k, c)
        np.testing.assert_allclose(obj2, 120.0 * obj, rtol=1e-9)


def _synthetic(rng, users=250):
    """Heavy-tailed users: G ~ 1 + geometric, records per grid ~ 1 + Poisson(2), over 60 grids
    with popularity ∝ 1/rank (the busy grids are shared)."""
    pop = 1.0 / np.arange(1, 61)
    pop /= pop.sum()
    recs = []
    for u in range(users):
        G = min(1 + int(rng.geometric(0.15)), 40)
        for g in rng.choice(60, size=G, replace=False, p=pop):
            recs += [(f"u{u:04d}", int(g), t, float(rng.uniform(0, 50))) for t in range(1 + int(rng.poisson(2)))]
    return make_agg(recs)


@pytest.mark.parametrize("priority", ["own", "shared"])
def test_the_chosen_k_is_stable_across_noise_draws(priority):
    agg = _synthetic(np.random.default_rng(0))
    if priority == "own":
        ranks = grid_ranks(agg, np.random.default_rng(1))
    else:
        from dpopt.privacy.user.priority import hash_priority, priority_ranks

        ranks = priority_ranks(agg, hash_priority(agg))
    b = NoiseBudgets(count=3.0, sum=4.0)
    ks = [choose_bounds(agg, ranks, 1.0, rng=np.random.default_rng(s), options=BoundsRule(
                        budgets=b, bound=50.0, priority=priority, max_grids=64, max_records=16)).k for s in range(8)]
    grid = list(histogram_bins(64))
    idx = sorted({grid.index(k) for k in ks})
    assert idx[-1] - idx[0] <= 1, ks


def test_histogram_choice_follows_the_model_on_extreme_data():
    # every user in exactly 2 grids with 6 records each, huge budget: no reason to drop anything
    recs = [(f"u{u}", g, t, 1.0) for u in range(200) for g in (u % 5, 5 + u % 3) for t in range(6)]
    agg = make_agg(recs)
    ranks = grid_ranks(agg, np.random.default_rng(0))
    ch = choose_bounds(agg, ranks, 50.0, rng=np.random.default_rng(0), options=BoundsRule(
                       budgets=NoiseBudgets(count=1e4, sum=1e4), bound=10.0, max_grids=16, max_records=16,
                       model={"tolerance": 0.0}))
    assert (ch.k, ch.c) == (2, 8)  # the smallest candidates keeping all: k ≥ 2 grids, c ≥ 6 records
    assert ch.rule == "histogram" and ch.histogram is not None and ch.objective.shape == (5, 5)
