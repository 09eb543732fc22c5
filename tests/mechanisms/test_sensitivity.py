"""Privacy tests: brute-force largest change over user-level neighbours <= the sensitivity each
mechanism scales its noise to (dpopt.verify enumerates every dataset on a value grid with 0 and U).

Array mechanisms re-pack the arrays from the counts inside the estimator, so the search goes
through the grouping as well.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpopt import verify
from dpopt.mechanisms import akmv, laplace_mean, opt_worst_case
from dpopt.mechanisms.akmv import sum_clipped_estimator
from dpopt.mechanisms.array_averaging import array_averaging_sensitivity, array_mean_estimator, pack
from dpopt.mechanisms.grid import clipped_mean_variance_estimator, grid_sensitivities
from dpopt.mechanisms.laplace import laplace_sensitivity, mean_estimator
from dpopt.mechanisms.levy import clipped_array_mean_estimator
from dpopt.mechanisms.opt_worst_case import clipped_mean_estimator, opt_worst_case_bounds

from .conftest import SENS_ATOL

U = 1.0
INSTANCES = [np.array([3, 1, 2]), np.array([2, 2, 1, 1]), np.array([4, 1, 1]), np.array([1, 1, 1, 1, 2])]


@pytest.mark.parametrize("counts", INSTANCES, ids=str)
def test_laplace_sensitivity_is_exact(counts):
    found = verify.sensitivity(mean_estimator, counts, U).value
    assert found == pytest.approx(laplace_sensitivity(counts, U), abs=SENS_ATOL)
    rel = laplace_mean(np.zeros(counts.sum()), counts, U, 1.0, rng=np.random.default_rng(0), runs=2)
    assert rel.sensitivity[0] == pytest.approx(laplace_sensitivity(counts, U))


@pytest.mark.parametrize("counts", INSTANCES, ids=str)
@pytest.mark.parametrize("epsilon", [0.3, 0.8, 1.5, 3.0])
@pytest.mark.parametrize("substitute", [False, True])
def test_opt_worst_case_sensitivity(counts, epsilon, substitute):
    lo, hi, T = opt_worst_case_bounds(counts, U, epsilon)
    est = clipped_mean_estimator(lo, hi, substitute_means=substitute)
    found = verify.sensitivity(est, counts, U).value
    rel = opt_worst_case(np.zeros(counts.sum()), counts, U, epsilon, rng=np.random.default_rng(0), runs=1,
                         substitute_means=substitute)
    used = rel.sensitivity[0]
    assert used == pytest.approx(T / counts.sum(), abs=SENS_ATOL)  # seed 000 eq. (14)
    assert found <= used + SENS_ATOL
    assert found == pytest.approx(used, abs=SENS_ATOL)  # tight: the all-a vs all-b user


@pytest.mark.parametrize("counts", INSTANCES, ids=str)
@pytest.mark.parametrize("threshold", [0.5, 1.0, 2.5, 10.0])
def test_akmv_release_sensitivity_given_threshold(counts, threshold):
    found = verify.sensitivity(sum_clipped_estimator(threshold), counts, U).value
    n = counts.sum()
    assert found <= threshold / n + SENS_ATOL  # seed 000 eq. (15)
    assert found == pytest.approx(min(threshold, U * counts.max()) / n, abs=SENS_ATOL)


def test_akmv_uses_T_over_n_with_the_release_budget():
    counts = INSTANCES[0]
    rel = akmv(np.full(counts.sum(), 0.5), counts, U, 1.0, rng=np.random.default_rng(1), runs=50)
    T = rel.details["threshold"]
    np.testing.assert_allclose(rel.sensitivity, T / counts.sum())
    np.testing.assert_allclose(rel.noise_scale, T / counts.sum() / 0.5)


AA_CASES = [
    # counts, length: includes WrapAround users split over two arrays and a discarded tail
    (np.array([3, 3, 2]), 4),
    (np.array([2, 2, 2, 1]), 3),
    (np.array([3, 2, 1, 1]), 2),
    (np.array([4, 2, 1, 1]), 3),
]


@pytest.mark.parametrize("counts,length", AA_CASES, ids=str)
@pytest.mark.parametrize("grouping", ["best_fit", "wrap_around"])
@pytest.mark.parametrize("substitute", [True, False])
def test_array_averaging_sensitivity_with_repacking(counts, length, grouping, substitute):
    p = pack(counts, length, grouping)
    est = array_mean_estimator(length, grouping, substitute_means=substitute)
    found = verify.sensitivity(est, counts, U, levels=3).value
    exact = array_averaging_sensitivity(U, p, wrap_factor=1.0)  # U/K
    assert found <= exact + SENS_ATOL
    # the paper's printed WrapAround constant 2U/K is conservative
    assert found <= array_averaging_sensitivity(U, p, wrap_factor=2.0) + SENS_ATOL


def test_wrap_around_split_user_reaches_its_share():
    # stream u1 u1 u1 | u2 | u2 u2 | u3 u3 -> arrays [u1 u1 u1 u2], [u2 u2 u3 u3]: user 2 is split
    counts, length = np.array([3, 3, 2]), 4
    p = pack(counts, length, "wrap_around")
    assert p.num_arrays == 2 and p.influence == 2
    found = verify.sensitivity(array_mean_estimator(length, "wrap_around"), counts, U, levels=3).value
    # user 1 fills 3 of 4 slots of array 1 -> 3U/4 / K; user 2 moves 1/4 + 2/4 -> 3U/8
    assert found == pytest.approx(3 * U / 8, abs=SENS_ATOL)


@pytest.mark.parametrize("counts,length", AA_CASES, ids=str)
@pytest.mark.parametrize("grouping", ["best_fit", "wrap_around"])
@pytest.mark.parametrize("interval", [(0.25, 0.75), (0.0, 0.5), (0.4, 0.6)])
def test_levy_quantile_clipped_release_sensitivity(counts, length, grouping, interval):
    a, b = interval
    p = pack(counts, length, grouping)
    est = clipped_array_mean_estimator(length, a, b, grouping)
    found = verify.sensitivity(est, counts, U, values=np.array([0.0, 0.25, 0.5, 0.75, 1.0])).value
    phi = 1 if grouping == "best_fit" else 2
    assert found <= phi * (b - a) / p.num_arrays + SENS_ATOL  # seed 003 eq. (6), φ for WrapAround


def test_wrap_around_clipped_needs_factor_two():
    # a user split over two arrays moves both clipped array means: (b - a)/K is not enough
    counts, length = np.array([3, 3, 2]), 4
    a, b = 0.4, 0.6
    p = pack(counts, length, "wrap_around")
    est = clipped_array_mean_estimator(length, a, b, "wrap_around")
    found = verify.sensitivity(est, counts, U, values=np.array([0.0, 1.0])).value
    assert found > (b - a) / p.num_arrays + 1e-6
    assert found <= 2 * (b - a) / p.num_arrays + SENS_ATOL


@pytest.mark.parametrize("counts,length", AA_CASES, ids=str)
@pytest.mark.parametrize("grouping", ["best_fit", "wrap_around"])
def test_rank_scores_move_by_at_most_phi(counts, length, grouping):
    """The exponential-mechanism scores of Algorithm 3 and Smith's rank utility count array means
    below/above a point; one user changes them by at most φ."""
    p = pack(counts, length, grouping)
    phi = p.influence
    for z in (0.3, 0.5, 0.7):
        def below(samples, cnt, z=z):
            am = array_mean_estimator_matrix(samples, cnt, length, grouping)
            return (am < z).sum(axis=1).astype(float)

        def above(samples, cnt, z=z):
            am = array_mean_estimator_matrix(samples, cnt, length, grouping)
            return (am > z).sum(axis=1).astype(float)

        for f in (below, above):
            assert verify.sensitivity(f, counts, U, levels=3).value <= phi + SENS_ATOL


def array_mean_estimator_matrix(samples, counts, length, grouping):
    from dpopt.mechanisms.array_averaging import array_means

    return array_means(samples, np.asarray(counts), pack(counts, length, grouping))


GRID_CASES = [
    (np.array([3, 1, 2]), None),
    (np.array([3, 1, 2]), np.array([1, 1, 2])),
    (np.array([2, 2, 2]), np.array([2, 0, 1])),
    (np.array([4, 1, 1]), np.array([2, 1, 1])),
]


@pytest.mark.parametrize("counts,retained", GRID_CASES, ids=str)
def test_grid_mean_and_variance_sensitivities(counts, retained):
    est = clipped_mean_variance_estimator(retained)
    g = counts if retained is None else retained
    d_mu, d_var = grid_sensitivities(g, U)
    mu = verify.sensitivity(lambda s, c: est(s, c)[:, 0], counts, U).value
    var = verify.sensitivity(lambda s, c: est(s, c)[:, 1], counts, U).value
    assert mu <= d_mu + SENS_ATOL and mu == pytest.approx(d_mu, abs=SENS_ATOL)
    assert var <= d_var + SENS_ATOL
    R = g.sum()
    # variance grid 0..U in quarters reaches the exact value when R > 2Γ* (Prop. III.1 extremes)
    if R > 2 * g.max():
        assert var == pytest.approx(d_var, abs=SENS_ATOL)


def test_akmv_rank_is_ceil_two_over_epsilon():
    from dpopt.mechanisms.akmv import akmv_rank

    for eps in (0.1, 0.3, 0.5, 2 / 3, 1.0, 1.9, 2.0, 4.0):
        assert akmv_rank(eps / 2) == max(1, math.ceil(round(2 / eps, 9)))  # ERRATA E6
