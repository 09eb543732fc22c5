"""The node counts' distribution by NPMLE and the counts read against it (dpopt/hierarchy/count_prior.py):
EM's fit against the convex program solved by an exponential-cone solver (cvxpy, Clarabel) on the
same atoms, the posterior means against their definition, and what they do with concentrated and
with even counts. Random instances from seeded generators."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from dpopt.hierarchy import count_prior
from dpopt.hierarchy.count_prior import ATOMS, BINS_PER_SD, denoised_counts, fit_count_prior
from dpopt.measurements import NoiseLaw


def _law(family: str, sd: float) -> NoiseLaw:
    return NoiseLaw(family, np.array(sd / np.sqrt(2.0) if family.endswith("laplace") else sd))


def _on_bins(x: np.ndarray, family: str, sd: float) -> np.ndarray:
    """Noisy counts moved onto the fit's bin lattice, so that binning changes nothing."""
    width = sd / BINS_PER_SD
    return np.round(x / width) * width


def _kernel(x: np.ndarray, atoms: np.ndarray, law: NoiseLaw) -> np.ndarray:
    d = x[:, None] - atoms[None, :]
    s = float(law.scale)
    return np.exp(-np.abs(d) / s) if law.family.endswith("laplace") else np.exp(-0.5 * (d / s) ** 2)


@pytest.mark.parametrize("family", ["laplace", "discrete_laplace", "gaussian"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_em_reaches_the_convex_programs_optimum_on_the_same_atoms(family, seed):
    rng = np.random.default_rng(seed)
    sd = 500.0
    true = np.r_[np.zeros(rng.integers(20, 60)), rng.uniform(200, 3000, rng.integers(5, 30))]
    noise = rng.laplace(0, sd / np.sqrt(2.0), true.size) if family.endswith("laplace") else rng.normal(0, sd, true.size)
    law = _law(family, sd)
    noisy = _on_bins(true + noise, family, sd)
    prior = fit_count_prior(noisy, law)
    assert prior.converged and prior.gap <= count_prior.TOLERANCE and prior.atoms.size == ATOMS
    assert prior.weights.min() >= 0 and prior.weights.sum() == pytest.approx(1.0)
    K = _kernel(noisy, prior.atoms, law)
    w = cp.Variable(prior.atoms.size, nonneg=True)
    problem = cp.Problem(cp.Maximize(cp.sum(cp.log(K @ w))), [cp.sum(w) == 1])
    problem.solve(solver="CLARABEL")
    em = float(np.sum(np.log(K @ prior.weights)))
    # EM's certificate: within gap nats per observation of the maximum over the atoms
    assert problem.value - prior.gap * noisy.size - 1e-6 <= em <= problem.value + 1e-4
    # the posterior means by their definition, under the solver's optimum: within 5 % of the noise sd
    post = K * np.maximum(w.value, 0.0)[None, :]
    means = post @ prior.atoms / post.sum(axis=1)
    assert np.max(np.abs(prior.posterior_means(noisy) - means)) < 0.05 * sd


@pytest.mark.parametrize("family", ["laplace", "gaussian"])
def test_posterior_means_rise_with_the_noisy_count(family):
    """Under a log-concave noise law the posterior mean is non-decreasing in the observation."""
    rng = np.random.default_rng(3)
    sd = 300.0
    true = np.r_[np.zeros(40), rng.uniform(0, 2000, 20)]
    noisy = true + rng.normal(0, sd, true.size)
    prior = fit_count_prior(noisy, _law(family, sd))
    grid = np.linspace(noisy.min() - 3 * sd, noisy.max() + 3 * sd, 400)
    assert np.all(np.diff(prior.posterior_means(grid)) >= -1e-9 * sd)


def test_concentrated_counts_read_high_where_they_are_and_even_counts_read_alike():
    """35 busy nodes among 217, counts 1,000–4,000 against a noise sd of 1,060 (the big list's cells
    at the pilot's budget): the busy nodes read several times the even spread, the empty ones below
    it. Counts all alike under the same noise read alike on the whole (their mean within a tenth of
    the noise sd of their common value, where the noisy counts scatter by a whole sd)."""
    rng = np.random.default_rng(4)
    sd = 1060.0
    law = _law("laplace", sd)
    busy = rng.uniform(1000, 4000, 35)
    true = np.r_[np.zeros(182), busy]
    means = denoised_counts(true + rng.laplace(0, sd / np.sqrt(2.0), true.size), law)
    even = true.mean()
    assert np.median(means[182:]) > 2.5 * even and np.median(means[:182]) < 0.6 * even
    alike = np.full(200, 600.0)
    means = denoised_counts(alike + rng.laplace(0, sd / np.sqrt(2.0), alike.size), law)
    assert abs(np.mean(means) - 600.0) < 0.1 * sd and np.median(np.abs(means - 600.0)) < 0.2 * sd


def test_without_noise_the_counts_read_as_measured():
    rng = np.random.default_rng(5)
    true = rng.integers(0, 5000, 300).astype(float)
    means = denoised_counts(true, _law("gaussian", 1e-3))
    spacing = true.max() / (ATOMS - 1)
    assert np.max(np.abs(means - true)) <= spacing / 2 + 1e-9


def test_all_noise_below_zero_reads_zero_and_bad_input_is_refused():
    assert np.all(denoised_counts(np.array([-5.0, -1.0, -30.0]), _law("laplace", 10.0)) == 0.0)
    with pytest.raises(ValueError, match="`noisy`"):
        fit_count_prior(np.array([1.0, np.nan]), _law("laplace", 1.0))
    with pytest.raises(ValueError, match="`noisy`"):
        fit_count_prior(np.array([]), _law("laplace", 1.0))


def test_large_marginals_are_read_in_blocks(monkeypatch):
    """The posterior means in blocks of CHUNK rows equal the means in one block."""
    rng = np.random.default_rng(6)
    noisy = rng.uniform(0, 1000, 1000) + rng.normal(0, 50, 1000)
    prior = fit_count_prior(noisy, _law("gaussian", 50.0))
    whole = prior.posterior_means(noisy)
    monkeypatch.setattr(count_prior, "CHUNK", 64)
    assert np.array_equal(prior.posterior_means(noisy), whole)


def test_posterior_quantiles_bracket_the_mean_and_follow_their_definition():
    rng = np.random.default_rng(7)
    true = np.r_[np.zeros(100), rng.uniform(500, 3000, 30)]
    law = _law("laplace", 800.0)
    noisy = true + rng.laplace(0, 800.0 / np.sqrt(2.0), true.size)
    prior = fit_count_prior(noisy, law)
    lo, med, hi = (prior.posterior_quantiles(noisy, q) for q in (0.1, 0.5, 0.9))
    assert np.all(lo <= med) and np.all(med <= hi)
    K = _kernel(noisy, prior.atoms, law) * prior.weights[None, :]
    cdf = np.cumsum(K / K.sum(axis=1, keepdims=True), axis=1)
    for n in range(noisy.size):  # the least atom whose posterior CDF reaches ½
        k = int(np.searchsorted(prior.atoms, med[n]))
        assert cdf[n, k] >= 0.5 - 1e-9 and (k == 0 or cdf[n, k - 1] < 0.5)
    with pytest.raises(ValueError, match="`q`"):
        prior.posterior_quantiles(noisy, 1.0)


def test_one_node_far_out_in_the_noise_does_not_make_five():
    """What the engine's admission rule reads (models/engine.md §5): nodes whose posterior median
    reaches a count. Of 5,000 nodes of equal counts under Laplace noise (sd 10 times the count),
    fewer than five read three times the count, in every one of five draws. Of 35 busy nodes among
    217 (the big list's cells at the pilot's budget, noise sd 1,065), at least five read above 150
    records in every one of six draws, at three times the rate of the empty nodes or more (at this
    noise the median is a weak classifier of one node: 9–32 of the busy, 1–28 of the empty)."""
    sd = 1000.0
    law = _law("laplace", sd)
    for seed in range(5):
        rng = np.random.default_rng(seed)
        noisy = np.full(5000, 100.0) + rng.laplace(0, sd / np.sqrt(2.0), 5000)
        assert np.sum(fit_count_prior(noisy, law).posterior_quantiles(noisy, 0.5) >= 300.0) < 5
    for seed in range(6):
        rng = np.random.default_rng(seed)
        true = np.r_[np.zeros(182), np.sort(rng.uniform(200, 3900, 35))]
        noisy = true + rng.laplace(0, 1065.0 / np.sqrt(2.0), true.size)
        med = fit_count_prior(noisy, _law("laplace", 1065.0)).posterior_quantiles(noisy, 0.5)
        busy, empty = np.sum(med[182:] >= 150.0), np.sum(med[:182] >= 150.0)
        assert busy >= 5 and busy / 35 >= 3 * empty / 182, (busy, empty)
