"""Behaviour of each mechanism: known answers by construction, budget splits, shapes, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpopt import DpoptInputError
from dpopt.mechanisms import (
    akmv,
    array_averaging,
    exponential_mechanism,
    grid_release,
    laplace_mean,
    levy,
    monte_carlo,
    opt_worst_case,
    pack,
    quantile,
    smith_quantile,
    substitute_user_means,
)
from dpopt.mechanisms.array_averaging import array_means
from dpopt.mechanisms.levy import levy_interval, levy_tau
from dpopt.mechanisms.montecarlo import mean_abs_error, summarise
from dpopt.mechanisms.quantile import eps_dependent_alpha

from .conftest import MC_SIGMAS

U = 65.0


def _data(rng, counts):
    return rng.uniform(0, U, int(np.sum(counts)))


def test_laplace_noise_has_the_stated_scale(rng):
    counts = np.array([5, 2, 1, 4])
    x = _data(rng, counts)
    rel = laplace_mean(x, counts, U, 0.5, rng=rng, runs=40_000)
    b = U * 5 / 12 / 0.5
    err = summarise(np.abs(rel.values - x.mean()))
    assert abs(err.value - b) < MC_SIGMAS * err.stderr  # E|Lap(b)| = b
    assert rel.values.shape == (40_000,) and rel.budget == {"mean": 0.5}


def test_stacked_datasets_give_one_release_each(rng):
    counts = np.array([2, 1, 3])
    x = rng.uniform(0, U, (7, 6))
    for mech in (laplace_mean, opt_worst_case, akmv):
        rel = mech(x, counts, U, 1.0, rng=rng)
        assert rel.values.shape == rel.estimate.shape == (7,)
    np.testing.assert_allclose(laplace_mean(x, counts, U, 1.0, rng=rng).estimate, x.mean(axis=1))
    # AKMV with a threshold above every sum releases the plain mean before noise
    big = akmv(x, counts, U, 1.0, rng=rng)
    above = big.details["threshold"] >= (U * counts).max()
    np.testing.assert_allclose(big.estimate[above], x.mean(axis=1)[above])


def test_opt_worst_case_matches_theorem_iii1(rng):
    # T = ceil(2/eps)-th largest of U*m; a = max((U m - T)/(2m), 0), b = U - a (seed 000 Thm III.1)
    counts = np.array([8, 4, 4, 2, 1, 1])
    eps = 0.7  # k = ceil(2/0.7) = 3 -> T = U*4
    T = U * 4
    a = np.maximum((U * counts - T) / (2 * counts), 0)
    b = U - a
    x = _data(rng, counts)
    rel = opt_worst_case(x, counts, U, eps, rng=rng, runs=3)
    assert rel.details["threshold"] == pytest.approx(T)
    np.testing.assert_allclose(rel.details["lower"], a)
    np.testing.assert_allclose(rel.details["upper"], b)
    expect = np.clip(x, np.repeat(a, counts), np.repeat(b, counts)).mean()
    np.testing.assert_allclose(rel.estimate, expect)
    np.testing.assert_allclose(rel.noise_scale, T / counts.sum() / eps)


def test_opt_worst_case_zero_threshold_releases_half_bound(rng):
    counts = np.array([3, 2, 1])
    rel = opt_worst_case(_data(rng, counts), counts, U, 0.1, rng=rng, runs=4)  # ceil(20) > L = 3
    np.testing.assert_allclose(rel.values, U / 2)
    np.testing.assert_allclose(rel.noise_scale, 0.0)


def test_mean_substitution_keeps_sums():
    counts = np.array([2, 3])
    x = np.array([1.0, 3.0, 2.0, 4.0, 6.0])
    np.testing.assert_allclose(substitute_user_means(x, counts), [2, 2, 4, 4, 4])


def test_akmv_threshold_concentrates_at_the_kth_largest_sum(rng):
    # ε large: the private quantile lands next to the k-th largest sum, k = ceil(2/ε) (ERRATA E6)
    counts = np.full(40, 2)
    x = np.repeat(np.linspace(1, 60, 40), 2)  # per-user sums 2..120, distinct
    sums = np.sort(2 * np.linspace(1, 60, 40))[::-1]
    rel = akmv(x, counts, U, 0.5, rng=rng, runs=20)  # ε'' = 0.25 -> k = ceil(4) = 4
    assert rel.details["rank"] == 4
    rel = akmv(x, counts, U, 40.0, rng=rng, runs=2000, quantile_share=0.95)  # ε'' = 2 -> k = 1
    assert rel.details["rank"] == 1
    T = rel.details["threshold"]
    assert np.median(T) >= sums[0] - 1e-9  # gap L - k + 1 = above the largest sum


def test_smith_quantile_targets_the_order_statistic(rng):
    values = np.arange(1.0, 100.0)  # 99 values
    draws = smith_quantile(values, 50, 20.0, lower=0.0, upper=100.0, rng=rng, runs=5000)
    assert np.all((draws >= 0) & (draws <= 100))
    assert abs(np.median(draws) - 50.5) < 1.0  # gap 50 = [z_50, z_51] = [50, 51]


def test_exponential_mechanism_probabilities(rng):
    scores = np.array([0.0, -1.0, -2.0])
    eps = 2.0
    idx = exponential_mechanism(scores, eps, rng=rng, runs=60_000)
    p = np.exp(eps * scores / 2)
    p /= p.sum()
    freq = np.bincount(idx, minlength=3) / idx.size
    se = np.sqrt(p * (1 - p) / idx.size)
    assert np.all(np.abs(freq - p) < MC_SIGMAS * se)


def test_array_averaging_packing_and_sensitivity(rng):
    counts = np.array([5, 4, 3, 2, 2, 1])
    x = _data(rng, counts)
    p = pack(counts, 4, "best_fit")
    rel = array_averaging(x, counts, U, 1.0, length=4, rng=rng, runs=5)
    assert rel.details["num_arrays"] == p.num_arrays
    np.testing.assert_allclose(rel.sensitivity, U / p.num_arrays)
    # by construction: array means under mean substitution
    xbar = np.repeat([np.mean(s) for s in np.split(x, np.cumsum(counts)[:-1])], 1)
    memb = p.source.membership().toarray()  # (L, K)
    expect = (memb * xbar[:, None]).sum(0) / memb.sum(0)
    np.testing.assert_allclose(array_means(x, counts, p)[0], expect)
    rel2 = array_averaging(x, counts, U, 1.0, length=4, grouping="wrap_around", wrap_factor=2.0, rng=rng, runs=5)
    np.testing.assert_allclose(rel2.sensitivity, 2 * U / pack(counts, 4, "wrap_around").num_arrays)


@pytest.mark.parametrize("grouping,raw,substituted", [
    # stream u1 u1 u1 u2 | u2 u2 u3 u3 (Algorithm 1): user 2 is split over both arrays
    ("wrap_around", [2.5, 6.5], [(3 * 2 + 5) / 4, (2 * 5 + 2 * 7.5) / 4]),
    # BestFit (Algorithm 2): 3 + 3 > 4 and 3 + 2 > 4, so every user opens its own array
    ("best_fit", [2.0, 5.0, 7.5], [2.0, 5.0, 7.5]),
])
def test_array_means_by_hand(grouping, raw, substituted):
    counts, length = np.array([3, 3, 2]), 4
    x = np.arange(1.0, 9.0)  # user means 2, 5, 7.5
    p = pack(counts, length, grouping)
    np.testing.assert_allclose(array_means(x, counts, p, substitute_means=False)[0], raw)
    np.testing.assert_allclose(array_means(x, counts, p, substitute_means=True)[0], substituted)
    # and the same as the grouping's own (unvectorised) read-out in dpopt.arrays
    users = np.repeat(np.arange(3), counts)
    np.testing.assert_allclose(p.source.array_means(x, users), raw)
    np.testing.assert_allclose(p.source.array_means(x, users, substitute_user_mean=True), substituted)


def test_levy_tau_and_interval_on_itms():
    from dpopt.experiments.seed003 import itms_dataset

    x, m = itms_dataset()
    p = pack(m, 114, "best_fit")
    q = pack(m, 114, "wrap_around")
    assert q.num_arrays == 110 and p.num_arrays == 111  # notes-003 §IV-B (non-increasing order)
    tau = levy_tau(114, 113, U, 0.2)
    assert tau == pytest.approx(U * math.sqrt(math.log(2 * 113 / 0.2) / 228))
    assert tau == pytest.approx(11.41, abs=0.01)  # notes-003 §IV-B
    means = array_means(x, m, p)
    a, b = levy_interval(means, tau, 0.5, bound=U, rng=np.random.default_rng(0), runs=200)
    np.testing.assert_allclose(b - a, 3 * tau)
    assert np.all((a >= 0) & (b <= U))


def test_levy_and_quantile_budget_and_noise(rng):
    counts = np.array([6, 5, 5, 4, 3, 3, 2, 2, 1, 1, 1, 1])
    x = _data(rng, counts)
    for grouping, phi in (("best_fit", 1), ("wrap_around", 2)):
        rel = levy(x, counts, U, 1.0, length=3, grouping=grouping, rng=rng, runs=100)
        K = rel.details["num_arrays"]
        np.testing.assert_allclose(rel.sensitivity, phi * (rel.details["upper"] - rel.details["lower"]) / K)
        np.testing.assert_allclose(rel.noise_scale, rel.sensitivity / 0.5)
        assert sum(rel.budget.values()) == pytest.approx(1.0)
        relq = quantile(x, counts, U, 1.0, length=3, grouping=grouping, rng=rng, runs=100)
        assert np.all(relq.details["lower"] <= relq.details["upper"])
        assert sum(relq.budget.values()) == pytest.approx(1.0)


def test_eps_dependent_alpha():
    assert eps_dependent_alpha(100, 0.5) == pytest.approx(4 / 100)
    assert eps_dependent_alpha(100, 0.7) == pytest.approx(3 / 100)  # ceil(2.857)
    assert eps_dependent_alpha(100, 0.7, rank_rule="floor") == pytest.approx(2 / 100)
    assert eps_dependent_alpha(4, 0.1) == 0.5


def test_grid_release_baseline_and_clip(rng):
    counts = np.array([4, 2, 2, 1])
    x = _data(rng, counts)
    rel = grid_release(x, counts, U, 1.0, rng=rng, runs=10)
    assert rel.values.shape == (10, 2) and rel.mechanism == "BASELINE"
    np.testing.assert_allclose(rel.estimate[0], [x.mean(), x.var()])
    n = counts.sum()
    np.testing.assert_allclose(rel.noise_scale[0], [2 * U * 4 / n, 2 * U**2 * 4 * (n - 4) / n**2])
    keep = np.array([1, 2, 0, 1])
    rel = grid_release(x, counts, U, 1.0, retained=keep, rng=rng, runs=3)
    kept = np.concatenate([x[0:1], x[4:6], x[8:9]])
    np.testing.assert_allclose(rel.estimate[0], [kept.mean(), kept.var()])


def test_monte_carlo_batches_agree(rng):
    def run(r, g):
        return g.laplace(0, 2.0, r), 0.0

    a = monte_carlo(run, runs=10_000, rng=np.random.default_rng(5), batch=10_000)
    b = monte_carlo(run, runs=10_000, rng=np.random.default_rng(5), batch=3_000)
    assert a.runs == b.runs == 10_000
    assert abs(a.value - 2.0) < MC_SIGMAS * a.stderr and abs(b.value - 2.0) < MC_SIGMAS * b.stderr
    e = mean_abs_error([1.0, -1.0, 3.0], [0.0, 0.0, 0.0])
    assert e.value == pytest.approx(5 / 3) and e.runs == 3


# --------------------------------------------------------------------------- bad input
BAD = [
    (lambda: laplace_mean([1.0, 2.0], [1, 1], U, 1.0, rng=0), "rng"),
    (lambda: laplace_mean([1.0, 2.0], [1, 1], U, -1.0, rng=np.random.default_rng()), "epsilon"),
    (lambda: laplace_mean([1.0, 2.0, 3.0], [1, 1], U, 1.0, rng=np.random.default_rng()), "samples"),
    (lambda: laplace_mean([1.0, 99.0], [1, 1], U, 1.0, rng=np.random.default_rng()), "samples"),
    (lambda: laplace_mean([1.0, np.nan], [1, 1], U, 1.0, rng=np.random.default_rng()), "samples"),
    (lambda: laplace_mean([1.0, 2.0], [1, 0], U, 1.0, rng=np.random.default_rng()), "counts"),
    (lambda: laplace_mean([1.0, 2.0], [1, 1], 0.0, 1.0, rng=np.random.default_rng()), "bound"),
    (lambda: laplace_mean(np.ones((3, 2)), [1, 1], U, 1.0, rng=np.random.default_rng(), runs=5), "runs"),
    (lambda: akmv([1.0, 2.0], [1, 1], U, 1.0, rng=np.random.default_rng(), quantile_share=1.0), "quantile_share"),
    (lambda: array_averaging([1.0, 2.0], [1, 1], U, 1.0, length=1, grouping="first_fit",
                             rng=np.random.default_rng()), "grouping"),
    (lambda: array_averaging([1.0, 2.0], [1, 1], U, 1.0, length=0, rng=np.random.default_rng()), "length"),
    (lambda: array_averaging([1.0, 2.0], [1, 1], U, 1.0, length=5, grouping="wrap_around",
                             rng=np.random.default_rng()), "length"),
    (lambda: levy([1.0, 2.0], [1, 1], U, 1.0, gamma=1.5, rng=np.random.default_rng()), "gamma"),
    (lambda: quantile([1.0, 2.0], [1, 1], U, 1.0, alpha=0.7, rng=np.random.default_rng()), "alpha"),
    (lambda: quantile([1.0, 2.0], [1, 1], U, 1.0, variant="median", rng=np.random.default_rng()), "variant"),
    (lambda: grid_release([1.0, 2.0], [1, 1], U, 1.0, retained=[2, 1], rng=np.random.default_rng()), "retained"),
    (lambda: grid_release([1.0, 2.0], [1, 1], U, 1.0, retained=[0, 0], rng=np.random.default_rng()), "retained"),
    (lambda: grid_release([1.0, 2.0], [1, 1], U, 1.0, mean_share=0.0, rng=np.random.default_rng()), "mean_share"),
    (lambda: smith_quantile([1.0], 0, 1.0, lower=1.0, upper=1.0, rng=np.random.default_rng()), "upper"),
    (lambda: monte_carlo(lambda r, g: (np.zeros(r), 0.0), runs=0, rng=np.random.default_rng()), "runs"),
    # privacy validity conditions: no parameter may shrink a sensitivity below its proven value
    (lambda: array_averaging([1.0, 2.0, 3.0], [2, 1], U, 1.0, length=1, grouping="wrap_around", wrap_factor=0.5,
                             rng=np.random.default_rng()), "wrap_factor"),
    (lambda: smith_quantile([1.0, 2.0], 1, 1.0, lower=0.0, upper=U, sensitivity=0.0,
                            rng=np.random.default_rng()), "sensitivity"),
    (lambda: exponential_mechanism([0.0, 1.0], 1.0, sensitivity=-1.0, rng=np.random.default_rng()), "sensitivity"),
    (lambda: levy([1.0, 2.0], [1, 1], U, 1.0, length=1, width_factor=0.0, rng=np.random.default_rng()),
     "width_factor"),
    (lambda: levy_interval([1.0, 2.0], 5.0, 1.0, bound=U, influence=0, rng=np.random.default_rng()), "influence"),
]


@pytest.mark.parametrize("call,name", BAD, ids=[b[1] + str(i) for i, b in enumerate(BAD)])
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(DpoptInputError, match=f"`{name}`"):
        call()
