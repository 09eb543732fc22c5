"""Tree BLUP (dpopt.hierarchy.blup) against a dense Gaussian posterior and a dense marginal likelihood."""

import numpy as np
import pytest

from dpopt import DpoptInputError
from dpopt.hierarchy.blup import fit_tau2, tree_blup


def random_tree(rng, depth=3, max_children=3):
    """Level-ordered tree (children before parents), every leaf at level 0."""
    parent, level = [], []
    sizes = [1]
    for _ in range(depth - 1):
        sizes.append(int(sum(rng.integers(1, max_children + 1, size=sizes[-1]))))
    sizes = sizes[::-1]  # leaves first
    start = np.concatenate([[0], np.cumsum(sizes)])
    for li, n in enumerate(sizes):
        if li + 1 < len(sizes):
            n_up = sizes[li + 1]
            par = np.sort(np.concatenate([np.arange(n_up), rng.integers(0, n_up, size=n - n_up)]))
            parent += list(start[li + 1] + par)
        else:
            parent += [-1] * n
        level += [li] * n
    return np.array(parent), np.array(level)


def dense(parent, level, y, s2, tau2, root_var=1e6):
    """Dense posterior with a N(0, root_var) root prior, and log N(y_obs; 0, Σ) + ½ log(2π root_var)."""
    n = parent.size
    A = np.zeros((n, n))  # θ = A u, u_root ~ N(0, root_var), u_v ~ N(0, τ²)
    for v in range(n):
        w = v
        while w >= 0:
            A[v, w] = 1.0
            w = parent[w]
    prior = np.array([root_var if parent[v] < 0 else tau2[level[v]] for v in range(n)])
    C = A @ np.diag(prior) @ A.T
    obs = np.flatnonzero(np.isfinite(y))
    Syy = C[np.ix_(obs, obs)] + np.diag(s2[obs])
    K = C[:, obs] @ np.linalg.inv(Syy)
    mean = K @ y[obs]
    # covariance in precision form over the random effects (no cancellation against root_var)
    keep = np.flatnonzero((parent < 0) | (tau2[level] > 0))
    Ak = A[:, keep]
    Q = np.diag([0.0 if parent[j] < 0 else 1.0 / tau2[level[j]] for j in keep]) \
        + Ak[obs].T @ np.diag(1.0 / s2[obs]) @ Ak[obs]
    var = np.diag(Ak @ np.linalg.inv(Q) @ Ak.T)
    sign, logdet = np.linalg.slogdet(Syy)
    ll = -0.5 * (obs.size * np.log(2 * np.pi) + logdet + y[obs] @ np.linalg.solve(Syy, y[obs]))
    return mean, var, ll + 0.5 * np.log(2 * np.pi * root_var)


@pytest.mark.parametrize("seed", range(8))
def test_blup_matches_dense_posterior_and_likelihood(seed):
    rng = np.random.default_rng(seed)
    parent, level = random_tree(rng, depth=int(rng.integers(2, 5)))
    n = parent.size
    y = rng.normal(20, 5, size=n)
    s2 = rng.uniform(0.5, 30, size=n)
    miss = rng.random(n) < 0.3
    miss[parent < 0] = False  # the root is measured (a flat prior needs it or a child)
    y[miss] = np.nan
    s2[miss] = np.inf
    tau2 = rng.uniform(0, 10, size=level.max() + 1)
    tau2[rng.integers(0, level.max() + 1)] = 0.0
    b = tree_blup(parent, level, y, s2, tau2)
    m, v, ll = dense(parent, level, y, s2, tau2)
    np.testing.assert_allclose(b.mean, m, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(b.variance, v, rtol=1e-4, atol=1e-4)
    assert b.loglik == pytest.approx(ll, abs=1e-3)


def leaf_spread_tree(seed, max_children, sd):
    """A 3-level tree whose truths differ only at the leaves (spread ``sd``) around 20."""
    rng = np.random.default_rng(seed)
    parent, level = random_tree(rng, depth=3, max_children=max_children)
    theta = np.zeros(parent.size)
    for v in range(parent.size - 1, -1, -1):
        theta[v] = 20.0 if parent[v] < 0 else theta[parent[v]] + (rng.normal(0, sd) if level[v] == 0 else 0.0)
    return rng, parent, level, theta


def test_noise_only_fine_level_falls_back_to_the_root_and_signal_moves_toward_it():
    rng, parent, level, theta = leaf_spread_tree(3, 6, 4.0)
    n = parent.size
    leaves = level == 0
    y = theta + rng.normal(0, 0.1, size=n)
    s2 = np.full(n, 0.01)
    noisy = np.where(leaves, 1e6, 0.01)
    b_noise = tree_blup(parent, level, y, noisy, np.array([16.0, 0.0, 0.0]))
    np.testing.assert_allclose(b_noise.mean[leaves], b_noise.mean[parent < 0][0], atol=0.05)
    b_sig = tree_blup(parent, level, y, s2, np.array([16.0, 0.0, 0.0]))
    np.testing.assert_allclose(b_sig.mean[leaves], theta[leaves], atol=0.5)


def test_fit_tau2_recovers_the_spread_of_the_level_that_has_one():
    rng, parent, level, theta = leaf_spread_tree(11, 8, 5.0)
    n = parent.size
    y = theta + rng.normal(0, 1, size=n)
    t2 = fit_tau2(parent, level, y, np.ones(n), scale=60.0)
    assert 10 < t2[0] < 50 and t2[1] < 2.0


def test_bad_tau2_is_refused():
    with pytest.raises(DpoptInputError, match="tau2"):
        tree_blup(np.array([1, -1]), np.array([0, 1]), np.zeros(2), np.ones(2), np.array([-1.0, 0.0]))


@pytest.mark.parametrize("seed", range(4))
def test_posterior_variance_with_an_unmeasured_root_matches_dense(seed):
    """As estimate_hierarchical feeds it: an unmeasured map-wide node above the roots (flat prior),
    unmeasured nodes at every level: the posterior variance includes that of the estimated parents."""
    rng = np.random.default_rng(100 + seed)
    parent, level = random_tree(rng, depth=4)
    n = parent.size
    y = rng.normal(20, 5, size=n)
    s2 = rng.uniform(0.5, 30, size=n)
    miss = rng.random(n) < 0.4
    miss[parent < 0] = True
    miss[level == 0] &= rng.random(int((level == 0).sum())) < 0.5  # keep some leaves measured
    y[miss], s2[miss] = np.nan, np.inf
    tau2 = rng.uniform(0.5, 10, size=level.max() + 1)
    b = tree_blup(parent, level, y, s2, tau2)
    m, v, _ = dense(parent, level, y, s2, tau2)
    np.testing.assert_allclose(b.mean, m, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(b.variance, v, rtol=1e-4, atol=1e-4)


def test_posterior_interval_is_calibrated_under_the_model():
    """Frequentist coverage of θ_v ± z·√(posterior variance) at 90 % when data come from the model
    with the τ² used (a posterior variance without the parents' uncertainty under-covers)."""
    rng = np.random.default_rng(5)
    parent, level = random_tree(rng, depth=3, max_children=4)
    n = parent.size
    tau2 = np.array([9.0, 4.0, 0.0])
    s2 = rng.uniform(1.0, 40.0, size=n)
    s2[parent < 0] = np.inf  # root unmeasured: flat prior, the root is estimated from below
    z = 1.6448536269514722
    hits = []
    for _ in range(400):
        theta = np.zeros(n)
        for v in range(n - 1, -1, -1):
            theta[v] = rng.normal(0, 30) if parent[v] < 0 else theta[parent[v]] + rng.normal(0, np.sqrt(tau2[level[v]]))
        y = np.where(np.isfinite(s2), theta + rng.normal(size=n) * np.sqrt(np.where(np.isfinite(s2), s2, 0)), np.nan)
        b = tree_blup(parent, level, y, s2, tau2)
        hits.append(np.abs(b.mean - theta) <= z * np.sqrt(b.variance))
    cov = np.mean(hits)
    assert 0.88 < cov < 0.92
