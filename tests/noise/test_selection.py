"""Exact permute-and-flip (dpopt.noise.selection): distribution, ε-DP ratio, no zero-probability gaps."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpopt import DpoptInputError
from dpopt.noise import SecureRandom, SeededSource
from dpopt.noise.selection import acceptance_probabilities, permute_and_flip


def test_empirical_distribution_matches_the_exact_one():
    u = np.array([0.0, 1.0, 2.5, 2.5, -3.0])
    eps, du = 1.2, 1.0
    p = acceptance_probabilities(u, eps, sensitivity=du)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    src = SeededSource(11)
    n = 20_000
    counts = np.bincount([permute_and_flip(u, eps, sensitivity=du, source=src) for _ in range(n)], minlength=u.size)
    chi2 = stats.chisquare(counts, n * p)
    assert chi2.pvalue > 1e-4


def test_exact_distribution_against_a_brute_force_over_orders():
    """acceptance_probabilities (subset formula) = the average over all n! orders of the sequential rule."""
    import itertools
    import math

    u = np.array([0.3, 1.7, 1.0, -0.4])
    eps, du = 0.9, 0.5
    q = np.floor(u * 2.0**20)
    dq = math.ceil(du * (1 + 1e-9) * 2.0**20) + 1
    acc = np.exp(-float(int(eps * 2**30) / 2**30) * (q.max() - q) / (2 * dq))
    want = np.zeros(u.size)
    orders = list(itertools.permutations(range(u.size)))
    for order in orders:
        left = 1.0
        for i in order:
            want[i] += left * acc[i] / len(orders)
            left *= 1.0 - acc[i]
    np.testing.assert_allclose(acceptance_probabilities(u, eps, sensitivity=du), want, rtol=1e-12)


def test_neighbouring_utilities_change_each_probability_by_at_most_e_to_the_epsilon():
    """Pure ε-DP: for utilities moving by ≤ Δu, every output probability ratio ≤ e^ε (McKenna–Sheldon)."""
    rng = np.random.default_rng(5)
    eps, du = 0.7, 1.0
    for _ in range(200):
        u = rng.normal(0, 3, size=rng.integers(2, 7))
        v = u + rng.uniform(-du, du, size=u.size)
        p, q = (acceptance_probabilities(x, eps, sensitivity=du) for x in (u, v))
        assert np.all(p <= np.exp(eps) * q * (1 + 1e-9)) and np.all(q <= np.exp(eps) * p * (1 + 1e-9))


def test_far_candidates_keep_a_positive_probability():
    """numpy's Gumbel-max gave probability exactly 0 beyond ~40 log-units; here every candidate can win."""
    p = acceptance_probabilities(np.array([0.0, -200.0]), 1.0, sensitivity=1.0)
    assert p[1] > 0 and p[1] == pytest.approx(np.exp(-100.0) / 2, rel=1e-3)


def test_real_release_source_and_bad_input():
    assert permute_and_flip([1.0, 2.0], 1.0, sensitivity=1.0, source=SecureRandom()) in (0, 1)
    with pytest.raises(DpoptInputError, match="utilities"):
        permute_and_flip([1.0, np.nan], 1.0, sensitivity=1.0, source=SecureRandom())
    with pytest.raises(DpoptInputError, match="sensitivity"):
        permute_and_flip([1.0], 1.0, sensitivity=0.0, source=SecureRandom())


def test_the_user_model_selects_its_bounds_with_the_release_source(monkeypatch):
    """A real user-model release draws the bounds selection from the OS CSPRNG, not numpy."""
    import dpopt.privacy.user.bounds as bounds
    from dpopt.release import Budget, UserOptions, austin_sample_path, release

    seen = []
    real = bounds.permute_and_flip

    def spy(*args, **kwargs):
        seen.append(type(kwargs["source"]).__name__)
        return real(*args, **kwargs)

    monkeypatch.setattr(bounds, "permute_and_flip", spy)
    release(austin_sample_path(), bound=120, budget=Budget(epsilon_total=5.0, delta=1e-6),
            model=UserOptions(bounds="select", strategy="fixed"))
    assert seen and set(seen) == {"SecureRandom"}
