"""Crossed random effects (dpopt.hierarchy.crossed) against dense Gaussian references written here,
the tree BLUP as the nested special case, and a simulation of recovery and interval coverage."""

import itertools
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from dpopt import DpoptInputError
from dpopt.hierarchy import crossed
from dpopt.hierarchy.crossed import RESIDUAL, fit_crossed, fit_kernel, gls_posterior
from dpopt.hierarchy.blup import tree_blup

#: agreement of two exact computations (sparse LU vs dense inverse) in floating point
RTOL, ATOL = 1e-7, 1e-9


# ------------------------------------------------------------------ dense references (independent)
def dense_kriging(A, y, s2, prior_cov, cross, c):
    """Universal kriging with one flat mean μ: posterior mean and variance of t = c·μ + ξ_t, where
    ξ ~ N(0, prior_cov) over the grids, y = A(1μ + ξ) + ε, ``cross`` = Cov(ξ_t, ξ) (k × G) and the
    prior variances of ξ_t are diag(cross_tt) given in ``c``'s companion. Returns (mean, var, loglik)."""
    n = y.size
    V = A @ prior_cov @ A.T + np.diag(s2)
    Vi = np.linalg.inv(V)
    X = A.sum(axis=1)
    xvx = X @ Vi @ X
    mu = (X @ Vi @ y) / xvx
    r = y - X * mu
    k = cross @ A.T  # Cov(ξ_t, y)
    mean = c * mu + k @ Vi @ r
    w = c - k @ Vi @ X
    loglik = -0.5 * ((n - 1) * np.log(2 * np.pi) + np.linalg.slogdet(V)[1] + np.log(xvx) + r @ Vi @ r)
    return mean, w, k, Vi, xvx, loglik


def dense_grid_posterior(codes, sig_f, sig_e, A, y, s2):
    """E[θ | y], Var(θ_g | y), E/Var of each factor level, μ's mean/variance and the REML loglik."""
    G = A.shape[1]
    Zs = [np.eye(c.max() + 1)[c] for c in codes]  # G × J one-hot
    prior = sum(s * Z @ Z.T for s, Z in zip(sig_f, Zs)) + sig_e * np.eye(G)
    mean, w, k, Vi, xvx, ll = dense_kriging(A, y, s2, prior, prior, np.ones(G))
    var = np.diag(prior) - np.einsum("ij,jk,ik->i", k, Vi, k) + w * w / xvx
    levels = []
    for s, Z in zip(sig_f, Zs):
        cross = s * Z.T  # Cov(u_f, ξ)
        m, wl, kl, _, _, _ = dense_kriging(A, y, s2, prior, cross, np.zeros(Z.shape[1]))
        levels.append((m, s - np.einsum("ij,jk,ik->i", kl, Vi, kl) + wl * wl / xvx))
    X = A.sum(axis=1)
    mu = (X @ Vi @ y) / xvx
    return mean, var, levels, (mu, 1.0 / xvx), ll


def random_instance(rng, *, n_place=None, n_slot=None):
    """Grids on a place × slot lattice (a random subset), three factors, averaging rows A."""
    P, T = n_place or int(rng.integers(3, 7)), n_slot or int(rng.integers(3, 6))
    flat = np.sort(rng.choice(P * T, size=int(rng.integers(P * T // 2, P * T + 1)), replace=False))
    place, slot = flat // T, flat % T
    codes = [place * 7 + 3, slot, slot % 2]  # any ints; slot parity plays hour-of-day
    G = flat.size
    rows = []
    for key in (place, slot):
        for v in np.unique(key):
            if rng.random() < 0.7:
                rows.append(key == v)
    for g in rng.choice(G, size=max(1, G // 3), replace=False):
        rows.append(np.arange(G) == g)
    rows.append(rng.random(G) < 0.4)
    rows = [r for r in rows if r.any()]
    A = np.array(rows, dtype=float)
    A /= A.sum(axis=1, keepdims=True)
    s2 = rng.uniform(0.2, 2.0, size=A.shape[0])
    y = rng.normal(10.0, 2.0, size=A.shape[0])
    return codes, A, y, s2


# ------------------------------------------------------------------ posterior and REML vs dense
@pytest.mark.parametrize("seed", range(24))
def test_posterior_matches_dense_reference(seed):
    rng = np.random.default_rng(seed)
    codes, A, y, s2 = random_instance(rng)
    residual = seed % 2 == 0
    sig_f = rng.uniform(0.1, 3.0, size=3) * (rng.random(3) > 0.15)  # sometimes a component is exactly 0
    sig_e = float(rng.uniform(0.1, 2.0)) if residual else 0.0
    names = ["place", "slot", "hour_of_day"]
    given = dict(zip(names, sig_f)) | ({RESIDUAL: sig_e} if residual else {})
    fit = fit_crossed(dict(zip(names, codes)), sp.csr_matrix(A), y, s2, residual=residual, sigma2=given,
                      dense_max=0 if seed % 3 == 0 else 4000)  # the core factored sparse or dense
    mean, var, levels, (mu, mu_var), ll = dense_grid_posterior([np.unique(c, return_inverse=True)[1] for c in codes],
                                                               sig_f, sig_e, A, y, s2)
    np.testing.assert_allclose(fit.grid_mean, mean, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(fit.grid_var, var, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose([fit.mu, fit.mu_var], [mu, mu_var], rtol=RTOL, atol=ATOL)
    for name, code, (m, v) in zip(names, codes, levels):
        np.testing.assert_array_equal(fit.effects[name].levels, np.unique(code))
        np.testing.assert_allclose(fit.effects[name].mean, m, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(fit.effects[name].var, v, rtol=RTOL, atol=ATOL)
    assert fit.loglik == pytest.approx(ll, rel=1e-9, abs=1e-8)
    # a node (any weights over grids): mean and variance of w·θ from the dense joint covariance
    W = rng.random((3, A.shape[1])) * (rng.random((3, A.shape[1])) < 0.5)
    node = fit.node(W)
    Zs = [np.eye(c.max() + 1)[np.unique(c, return_inverse=True)[1]] for c in codes]
    prior = sum(s * Z @ Z.T for s, Z in zip(sig_f, Zs)) + sig_e * np.eye(A.shape[1])
    m, w, k, Vi, xvx, _ = dense_kriging(A, y, s2, prior, W @ prior, W.sum(axis=1))
    np.testing.assert_allclose(node.mean, m, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(node.var, np.diag(W @ prior @ W.T) - np.einsum("ij,jk,ik->i", k, Vi, k) + w * w / xvx,
                               rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(node.halfwidth, 1.959963984540054 * np.sqrt(node.var), rtol=1e-12)


@pytest.mark.parametrize("seed", [0, 2, 4])
def test_posterior_with_residuals_alone_local(seed, monkeypatch):
    """No factor eliminated with the residuals (each residual its own block): the same answers."""
    monkeypatch.setattr(crossed, "_local_factor", lambda codes, A, residual=True: None)
    test_posterior_matches_dense_reference(seed)


def _observations_space(monkeypatch) -> list[bool]:
    """Make every kernel call take the observations' space; the list records that it could."""
    used, real = [], crossed._dual

    def dual(*args):
        out = real(*args)
        used.append(out is not None)
        return out

    monkeypatch.setattr(crossed, "_dual_cheaper", lambda *args: True)
    monkeypatch.setattr(crossed, "_dual", dual)
    return used


@pytest.mark.parametrize("seed", [0, 1, 3, 8, 13])
def test_posterior_in_the_observations_space(seed, monkeypatch):
    """V = Cov(y) factored in the observations' space (n × n) instead of the augmented equations:
    the same grids, levels, μ, nodes and likelihood as the dense references."""
    used = _observations_space(monkeypatch)
    test_posterior_matches_dense_reference(seed)
    assert used and all(used)


@pytest.mark.parametrize("seed", [0, 2])
def test_reml_in_the_observations_space(seed, monkeypatch):
    """REML's slopes from the components' traces tr(P H̃_k H̃_kᵀ), its maximum, all in the
    observations' space."""
    used = _observations_space(monkeypatch)
    test_reml_gradient_and_information_against_finite_differences(seed)
    test_reml_fit_maximises_the_dense_restricted_likelihood(seed)
    assert used and all(used)


def _few_observations_of_many_levels():
    """(G, J, level, A, y, s2): 40 node means (rows of A summing to 1) over 2,000 grids of 600 levels."""
    rng = np.random.default_rng(9)
    G, J = 2000, 600
    level = rng.integers(0, J, G)
    A = sp.csr_matrix(rng.random((40, G)) * (rng.random((40, G)) < 0.05))
    A = sp.diags(1.0 / np.asarray(A.sum(axis=1)).ravel()) @ A
    return G, J, level, A, rng.normal(20.0, 3.0, 40), rng.uniform(0.5, 2.0, 40)


def test_few_observations_of_many_levels_take_the_observations_space():
    """40 node means over 2,000 grids of 600 interaction levels: "auto" factors V (40 × 40), and
    the answer equals the augmented form's; a bad ``space`` is a one-line error."""
    G, J, level, A, y, s2 = _few_observations_of_many_levels()
    H = (A @ crossed._design([level], G, True)[0]).tocsr()
    prior = np.concatenate([np.full(J, 2.0), np.full(G, 1.0)])
    auto = gls_posterior(H, y, s2, prior, n_local=G)
    aug = gls_posterior(H, y, s2, prior, n_local=G, space="augmented")
    assert isinstance(auto.system, crossed._DualSystem) and isinstance(aug.system, crossed._System)
    np.testing.assert_allclose(auto.mean, aug.mean, rtol=RTOL, atol=ATOL)
    assert auto.loglik == pytest.approx(aug.loglik, rel=1e-9)
    rows = sp.random(50, H.shape[1], density=0.01, random_state=3, format="csr")
    np.testing.assert_allclose(auto.variance(rows), aug.variance(rows), rtol=1e-6, atol=ATOL)
    with pytest.raises(DpoptInputError, match="`space`"):
        gls_posterior(H, y, s2, prior, n_local=G, space="dual")
    # the blocks' Gram matrices give the same V, posterior, likelihood and REML traces
    grams = crossed.ComponentGrams(H, [J, G])
    fast = gls_posterior(H, y, s2, prior, n_local=G, grams=grams)
    assert fast.system.grams is not None and grams._grams is not None
    np.testing.assert_allclose(fast.mean, auto.mean, rtol=1e-9, atol=1e-12)
    assert fast.loglik == pytest.approx(auto.loglik, rel=1e-12)
    edges = np.array([0, J, J + G])
    np.testing.assert_allclose(fast.system.component_traces(edges, 1), auto.system.component_traces(edges, 1),
                               rtol=1e-9)
    np.testing.assert_allclose(fast.variance(rows), auto.variance(rows), rtol=1e-9, atol=1e-12)
    uneven = prior.copy()
    uneven[0] = 3.0  # not constant within the first block: the Gram matrices cannot build V
    assert grams.block_variances(uneven) is None
    assert gls_posterior(H, y, s2, uneven, n_local=G, grams=grams).system.grams is None
    assert gls_posterior(H.copy(), y, s2, prior, n_local=G, grams=grams).system.grams is None  # another design
    for space in ("auto", "augmented"):
        with pytest.raises(DpoptInputError, match="`grams`"):
            gls_posterior(H, y, s2, prior, n_local=G, grams=[np.eye(40)], space=space)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_components_profile_likelihood_from_one_eigendecomposition(seed, monkeypatch):
    """component_profile (the intervals' likelihood of one component, the others fixed) gives
    gls_posterior's REML log-likelihood at every value: by one eigen-decomposition through the
    Woodbury branch (a block with fewer levels than observations) and the full branch (the grids'
    residuals: more levels than observations), with the Gram matrices formed or not, also for a
    design gls_posterior solves in the augmented form (few effects); and by one gls_posterior per
    value above ``dense_max`` observations or where V is not positive definite (forced)."""
    rng = np.random.default_rng(300 + seed)
    G, J, n = 900, 12, 40
    level = rng.integers(0, J, G)
    A = sp.csr_matrix(rng.random((n, G)) * (rng.random((n, G)) < 0.05))
    A = sp.diags(1.0 / np.asarray(A.sum(axis=1)).ravel()) @ A
    y, s2 = rng.normal(20.0, 3.0, n), rng.uniform(0.5, 2.0, n)
    H = (A @ crossed._design([level], G, True)[0]).tocsr()
    sig, sizes = np.array([2.5, 0.8]), [J, G]
    values = np.concatenate([[0.0, 1e-4, 0.3, 4.0, 250.0], np.geomspace(1e-3, 1e3, 16)])  # more than _EIGEN_WORK
    eigen = []
    profile = crossed.ComponentGrams.profile_loglik
    monkeypatch.setattr(crossed.ComponentGrams, "profile_loglik",
                        lambda self, *a, **k: eigen.append(a[3]) or profile(self, *a, **k))

    def brute(H, sizes, j, n_local, sig=sig):
        out = []
        for v in values:
            trial = sig.copy()
            trial[j] = v
            out.append(gls_posterior(H, y, s2, np.repeat(trial, sizes), n_local=n_local, space="augmented").loglik)
        return np.array(out)

    formed = crossed.ComponentGrams(H, sizes)
    formed.grams()  # REML's search formed them: V is summed from them
    for j in (0, 1):  # J = 12 < n: Woodbury; G = 900 > n: the full eigenproblem
        expect = brute(H, sizes, j, G)
        np.testing.assert_allclose(crossed.component_profile(H, y, s2, sig, sizes, j, values, n_local=G),
                                   expect, rtol=1e-9)
        np.testing.assert_allclose(crossed.component_profile(H, y, s2, sig, sizes, j, values, n_local=G,
                                                             grams=formed), expect, rtol=1e-9)
        np.testing.assert_allclose(crossed.component_profile(H, y, s2, sig, sizes, j, values, n_local=G,
                                                             dense_max=10), expect, rtol=1e-12)  # one per value
        np.testing.assert_allclose(crossed.component_profile(H, y, s2, sig, sizes, j, values[[0, 3]], n_local=G),
                                   expect[[0, 3]], rtol=1e-12)  # two values: one factorisation each
    assert eigen == [0, 0, 1, 1]  # the eigen-decomposition only where it is the cheaper
    small = (A[:, :30] @ sp.identity(30, format="csr")).tocsr()  # 30 effects, 40 observations
    Hs = sp.hstack([sp.csr_matrix(np.ones((n, 1))), small]).tocsr()
    np.testing.assert_allclose(crossed.component_profile(Hs, y, s2, np.array([1.5]), [30], 0, values),
                               brute(Hs, [30], 0, 0, np.array([1.5])), rtol=1e-9)

    def not_pd(*args, **kwargs):
        raise np.linalg.LinAlgError("forced")

    monkeypatch.setattr(crossed.ComponentGrams, "profile_loglik", not_pd)
    np.testing.assert_allclose(crossed.component_profile(H, y, s2, sig, sizes, 1, values, n_local=G),
                               brute(H, sizes, 1, G), rtol=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("dense_max", [0, 6000])
def test_a_components_profile_from_one_factorisation_of_the_augmented_system(seed, dense_max, monkeypatch):
    """The augmented system's profile of one component (``_low_rank_profile``: the system factored
    once with that component at 0, then M = ZᵀP₀Z's eigenproblem) equals one gls_posterior per value,
    for every block of a crossed kernel (the factors and the local grid residuals), over a sparse
    (SuperLU) and a dense core, at 0, tiny, REML-sized and huge values; and component_profile takes
    it exactly where its flops are fewer than one factorisation per value (counted: one call of
    gls_posterior against one per value; here the blocks of a few levels)."""
    rng = np.random.default_rng(2100 + seed)
    codes, A, y, s2 = random_instance(rng, n_place=40)
    factors = dict(zip(["place", "slot", "hour_of_day"], codes))
    fit = fit_crossed(factors, sp.csr_matrix(A), y, s2, residual=True, variances=False)
    H, inner, order, kernel = fit_kernel(fit, sp.csr_matrix(A))
    kernel = {**kernel, "dense_max": dense_max, "grams": None}
    sig = np.array([1.3, 0.4, 0.7, 2.1])[:len(inner)]
    values = np.concatenate([[0.0, 1e-7], np.geomspace(1e-3, 1e3, 9)])
    calls, taken = [], []
    real = crossed.gls_posterior
    monkeypatch.setattr(crossed, "gls_posterior", lambda *a, **k: calls.append(1) or real(*a, **k))
    for j in range(len(inner)):
        brute = []
        for v in values:
            trial = sig.copy()
            trial[j] = v
            brute.append(real(H, y, s2, np.repeat(trial, inner), **kernel).loglik)
        without = sig.copy()
        without[j] = 0.0
        first = real(H, y, s2, np.repeat(without, inner), **kernel)
        np.testing.assert_allclose(crossed._low_rank_profile(first, H, y, inner, j, values), brute, rtol=1e-9)
        factor, solve = first.system.work()
        cheaper = inner[j] * solve + crossed._EIGEN_FLOPS * inner[j] ** 3 < (values.size - 1) * factor
        calls.clear()
        np.testing.assert_allclose(crossed.component_profile(H, y, s2, sig, inner, j, values, **kernel), brute, rtol=1e-9)
        if dense_max == 0:  # else V (observations' space) is dense: ComponentGrams.profile_loglik, no call
            assert len(calls) == (1 if cheaper else values.size)
            taken.append(cheaper)
    assert dense_max or (any(taken) and not all(taken))  # both branches seen
    assert first.system.core_size > 0 and (first.system.core.chol is None) == (dense_max == 0)


@pytest.mark.parametrize("seed", [0, 2])
def test_public_order_of_effects_whatever_the_kernel_order(seed, monkeypatch):
    """``grid_map``, ``posterior.mean`` and ``sigma2`` keep the caller's order (μ, the factors as
    given, the residual) whichever factor the kernel eliminates with the residuals: the plain
    kernel on A·grid_map with the components in that order gives the same fit."""
    rng = np.random.default_rng(900 + seed)
    codes, A, y, s2 = random_instance(rng)
    factors = dict(zip(["place", "slot", "hour_of_day"], codes))
    for k in (None, 0, 1, 2):
        monkeypatch.setattr(crossed, "_local_factor", lambda codes, A, residual=True, k=k: k)
        fit = fit_crossed(factors, A, y, s2, sigma2={"place": 2.0, "slot": 0.5, "hour_of_day": 0.3, RESIDUAL: 0.7})
        assert list(fit.sigma2) == ["place", "slot", "hour_of_day", RESIDUAL]
        sizes = [fit.effects[n].levels.size for n in factors] + [A.shape[1]]
        plain = gls_posterior(sp.csr_matrix(A) @ fit.grid_map, y, s2, np.repeat(list(fit.sigma2.values()), sizes))
        np.testing.assert_allclose(fit.posterior.mean, plain.mean, rtol=RTOL, atol=ATOL)
        assert fit.loglik == pytest.approx(plain.loglik, rel=1e-9)
        np.testing.assert_allclose(fit.grid_var, plain.variance(fit.grid_map), rtol=1e-6, atol=ATOL)


@pytest.mark.parametrize("seed", [0, 2, 5])
def test_without_residual_a_factor_eliminated_alone_gives_the_same_fit(seed, monkeypatch):
    """No grid residual (no grid measured on its own): a factor's levels may still be eliminated as
    local blocks, each level its own block (rows inside one level fold). Every choice (none, each
    factor, and the rule's own) gives the plain kernel's posterior, likelihood and REML fit; and the
    profile of a component over the fit's kernel (:func:`fit_kernel`) is the plain profile."""
    from dpopt.hierarchy.crossed import component_profile, fit_kernel

    rng = np.random.default_rng(1200 + seed)
    codes, A, y, s2 = random_instance(rng)
    factors = dict(zip(["place", "slot", "hour_of_day"], codes))
    given = {"place": 2.0, "slot": 0.5, "hour_of_day": 0.3}
    real = crossed._local_factor
    for k in ("rule", None, 0, 1, 2):
        if k != "rule":
            monkeypatch.setattr(crossed, "_local_factor", lambda codes, A, residual=True, k=k: k)
        fit = fit_crossed(factors, A, y, s2, residual=False, sigma2=given)
        sizes = [fit.effects[n].levels.size for n in factors]
        plain = gls_posterior(sp.csr_matrix(A) @ fit.grid_map, y, s2, np.repeat(list(given.values()), sizes))
        np.testing.assert_allclose(fit.posterior.mean, plain.mean, rtol=RTOL, atol=ATOL)
        assert fit.loglik == pytest.approx(plain.loglik, rel=1e-9)
        np.testing.assert_allclose(fit.grid_var, plain.variance(fit.grid_map), rtol=1e-6, atol=ATOL)
        H, inner, order, kernel = fit_kernel(fit, A)
        values = np.array([0.0, 0.4, 3.0])
        for j in range(len(given)):
            mine = component_profile(H, y, s2, np.array(list(given.values()))[order], inner,
                                     int(np.flatnonzero(order == j)[0]), values, dense_max=0, **{
                                         key: v for key, v in kernel.items() if key != "dense_max"})
            ref = component_profile(sp.csr_matrix(A) @ fit.grid_map, y, s2, np.array(list(given.values())), sizes, j,
                                    values, dense_max=0)
            np.testing.assert_allclose(mine, ref, rtol=1e-9)
        reml = fit_crossed(factors, A, y, s2, residual=False)
        monkeypatch.setattr(crossed, "_local_factor", real)
        base = fit_crossed(factors, A, y, s2, residual=False)
        assert reml.loglik == pytest.approx(base.loglik, abs=1e-6)


@pytest.mark.parametrize("seed", [0, 2, 4])
def test_tiny_noise_agrees_whatever_the_kernel_order(seed, monkeypatch):
    """Noise variances 10⁻⁹ of the components (a huge ε): every choice of local blocks gives the
    same posterior and REML fit (an explicit inverse of the blocks lost the digits here), and the
    grid means follow the data."""
    rng = np.random.default_rng(950 + seed)
    codes, A, _, s2 = random_instance(rng, n_place=6, n_slot=5)
    G = A.shape[1]
    theta = 30 + 8 * rng.normal(size=codes[0].max() + 1)[codes[0]] + 3 * rng.normal(size=G)
    s2 = s2 * 1e-8
    y = A @ theta + rng.normal(size=A.shape[0]) * np.sqrt(s2)
    factors = dict(zip(["place", "slot", "hour_of_day"], codes))
    given = {"place": 64.0, "slot": 1e-6, "hour_of_day": 0.0, RESIDUAL: 9.0}
    fits, reml = [], []
    for k in (None, 0, 1, 2):
        monkeypatch.setattr(crossed, "_local_factor", lambda codes, A, residual=True, k=k: k)
        fits.append(fit_crossed(factors, A, y, s2, sigma2=given))
        reml.append(fit_crossed(factors, A, y, s2))
    for fit, est in zip(fits, reml):  # log-determinants of terms ~10⁹ apart: 10⁻⁷ of them is 10⁻⁴
        assert abs(fit.loglik - fits[0].loglik) < 1e-3
        np.testing.assert_allclose(fit.grid_mean, fits[0].grid_mean, rtol=1e-6)
        np.testing.assert_allclose(fit.grid_var, fits[0].grid_var, rtol=1e-4, atol=1e-12)
        assert est.converged, est.status
        assert abs(est.loglik - reml[0].loglik) < 1e-3  # the same maximum (slopes below 10⁻⁴ there)
    measured = np.flatnonzero(np.asarray((A > 0).sum(axis=0)).ravel() > 0)
    single = [int(np.flatnonzero(row)[0]) for row in A if np.count_nonzero(row) == 1]
    np.testing.assert_allclose(fits[0].grid_mean[single], theta[single], atol=1e-3)
    assert measured.size > 0


@pytest.mark.parametrize("seed", [0, 1, 4])
def test_tiny_noise_agrees_in_the_observations_space(seed, monkeypatch):
    """Noise variances 10⁻⁹ of the components make V = Cov(y) ill-conditioned (≈ 10⁹): the
    observations' space still gives the augmented form's posterior and REML maximum to the
    tolerances that separate two kernel orders there."""
    rng = np.random.default_rng(950 + seed)
    codes, A, _, s2 = random_instance(rng, n_place=6, n_slot=5)
    theta = 30 + 8 * rng.normal(size=codes[0].max() + 1)[codes[0]] + 3 * rng.normal(size=A.shape[1])
    s2 = s2 * 1e-8
    y = A @ theta + rng.normal(size=A.shape[0]) * np.sqrt(s2)
    factors = dict(zip(["place", "slot", "hour_of_day"], codes))
    given = {"place": 64.0, "slot": 1e-6, "hour_of_day": 0.0, RESIDUAL: 9.0}
    out = []
    for dual in (False, True):
        monkeypatch.setattr(crossed, "_dual_cheaper", lambda *args, dual=dual: dual)
        out.append((fit_crossed(factors, A, y, s2, sigma2=given), fit_crossed(factors, A, y, s2)))
    (fit_a, reml_a), (fit_b, reml_b) = out
    assert isinstance(fit_b.posterior.system, crossed._DualSystem)
    assert abs(fit_a.loglik - fit_b.loglik) < 1e-3
    np.testing.assert_allclose(fit_b.grid_mean, fit_a.grid_mean, rtol=1e-6)
    np.testing.assert_allclose(fit_b.grid_var, fit_a.grid_var, rtol=1e-4, atol=1e-12)
    assert reml_b.converged, reml_b.status
    assert abs(reml_a.loglik - reml_b.loglik) < 1e-3


@pytest.mark.parametrize("seed", [0, 5])
def test_gram_budget_changes_the_work_not_the_fit(seed, monkeypatch):
    """REML in the observations' space with the blocks' Gram matrices held, and with a budget of one
    number (V formed by a sparse product at every evaluation): the same components, ℓ_R and grids."""
    rng = np.random.default_rng(970 + seed)
    codes, A, _, s2 = random_instance(rng, n_place=6, n_slot=5)
    theta = 30 + 6 * rng.normal(size=codes[0].max() + 1)[codes[0]] + 2 * rng.normal(size=A.shape[1])
    y = A @ theta + rng.normal(size=A.shape[0]) * np.sqrt(s2)
    factors = dict(zip(["place", "slot", "hour_of_day"], codes))
    monkeypatch.setattr(crossed, "_dual_cheaper", lambda *args: True)
    formed_grams, grams = [], crossed.ComponentGrams.grams
    monkeypatch.setattr(crossed.ComponentGrams, "grams", lambda self: formed_grams.append(1) or grams(self))
    held = fit_crossed(factors, A, y, s2)
    assert formed_grams  # the search summed the held Gram matrices
    monkeypatch.setattr(crossed, "_GRAM_BUDGET", 1)
    formed_grams.clear()
    formed = fit_crossed(factors, A, y, s2)
    assert not formed_grams
    assert isinstance(formed.posterior.system, crossed._DualSystem)
    assert held.sigma2.keys() == formed.sigma2.keys()
    np.testing.assert_allclose(list(formed.sigma2.values()), list(held.sigma2.values()), rtol=1e-6, atol=1e-9)
    assert abs(formed.loglik - held.loglik) < 1e-8
    np.testing.assert_allclose(formed.grid_mean, held.grid_mean, rtol=1e-8)


@pytest.mark.parametrize("seed", [2, 6])
def test_each_factor_as_local_blocks(seed, monkeypatch):
    """Every factor in turn eliminated with the residuals as blocks: the same answers."""
    for k in range(3):
        monkeypatch.setattr(crossed, "_local_factor", lambda codes, A, residual=True, k=k: k)
        test_posterior_matches_dense_reference(seed)


@pytest.mark.parametrize("seed", [3, 4])
def test_posterior_in_tiny_blocks(seed, monkeypatch):
    """A budget of 50 numbers: one or two right-hand sides per block and quadratic forms by the
    sparse-dense product instead of pairs of nonzeros; the same answers."""
    monkeypatch.setattr(crossed, "_RHS_BUDGET", 50)
    test_posterior_matches_dense_reference(seed)


@pytest.mark.parametrize("seed", range(6))
def test_kernel_covariance_and_loglik_with_two_fixed_effects(seed, monkeypatch):
    """The kernel alone: y = X β + Z u + ε with two fixed effects, dense GLS/REML written out; rows
    folded into the precision or kept as duals (``_RHS_BUDGET`` 0: none folded; 30: the rows of at
    most a few effects) give the same posterior."""
    rng = np.random.default_rng(100 + seed)
    n, p, q = 14, 2, 6
    X = np.column_stack([np.ones(n), rng.normal(size=n)])
    Z = rng.normal(size=(n, q)) * (rng.random((n, q)) < 0.5)
    d = rng.uniform(0.0, 2.0, size=q)
    s2 = rng.uniform(0.3, 1.5, size=n)
    y = rng.normal(size=n)
    V = Z @ np.diag(d) @ Z.T + np.diag(s2)
    Vi = np.linalg.inv(V)
    B = np.linalg.inv(X.T @ Vi @ X)
    beta = B @ X.T @ Vi @ y
    r = y - X @ beta
    u = np.diag(d) @ Z.T @ Vi @ r
    # joint covariance of (β̂ − β, û − u) (Henderson 1975): C⁻¹ of the mixed-model equations
    C = np.block([[X.T @ np.diag(1 / s2) @ X, X.T @ np.diag(1 / s2) @ Z],
                  [Z.T @ np.diag(1 / s2) @ X, Z.T @ np.diag(1 / s2) @ Z + np.diag(1 / d)]])
    L = rng.normal(size=(4, p + q))
    ll = -0.5 * ((n - p) * np.log(2 * np.pi) + np.linalg.slogdet(V)[1] + np.linalg.slogdet(X.T @ Vi @ X)[1]
                 + r @ Vi @ r)
    cases = [(0, None, 4000), (0, None, 0), (3, None, 4000), (3, None, 0), (q, None, 4000), (q, None, 0),
             (3, [5, 1, 5], 4000), (q, rng.integers(0, 3, size=q), 4000), (q, rng.integers(0, 3, size=q), 0)]
    for (n_local, blocks, dense_max), budget in itertools.product(cases, (crossed._RHS_BUDGET, 0, 30)):
        monkeypatch.setattr(crossed, "_RHS_BUDGET", budget)  # any blocks: rows across blocks keep their duals
        post = gls_posterior(sp.csr_matrix(np.hstack([X, Z])), y, s2, d, n_fixed=p, n_local=n_local,
                             local_blocks=blocks, dense_max=dense_max)
        np.testing.assert_allclose(post.mean, np.concatenate([beta, u]), rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(post.covariance(L), L @ np.linalg.inv(C) @ L.T, rtol=1e-6, atol=ATOL)
        np.testing.assert_allclose(post.variance(L), np.diag(L @ np.linalg.inv(C) @ L.T), rtol=1e-6, atol=ATOL)
        assert post.loglik == pytest.approx(ll, rel=1e-9)
    post = gls_posterior(sp.csr_matrix(np.hstack([X, Z])), y, s2, d, n_fixed=p, space="observations")
    assert isinstance(post.system, crossed._DualSystem)
    np.testing.assert_allclose(post.mean, np.concatenate([beta, u]), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(post.covariance(L), L @ np.linalg.inv(C) @ L.T, rtol=1e-6, atol=ATOL)
    np.testing.assert_allclose(post.variance(L), np.diag(L @ np.linalg.inv(C) @ L.T), rtol=1e-6, atol=ATOL)
    assert post.loglik == pytest.approx(ll, rel=1e-9)


def _place_slot_instance(seed):
    """(factors, A, y, s2, dense ℓ_R of (σ²_place, σ²_slot, σ²_e)) of a seeded place × slot instance
    with variances 4, 1 and 0.49."""
    rng = np.random.default_rng(200 + seed)
    codes, A, _, s2 = random_instance(rng, n_place=8, n_slot=6)
    G = A.shape[1]
    theta = 10 + 2.0 * rng.normal(size=codes[0].max() + 1)[codes[0]] + rng.normal(size=codes[1].max() + 1)[codes[1]] \
        + 0.7 * rng.normal(size=G)
    y = A @ theta + rng.normal(size=A.shape[0]) * np.sqrt(s2)
    ids = [np.unique(c, return_inverse=True)[1] for c in codes[:2]]

    def dense_ll(sig):
        return dense_grid_posterior(ids, sig[:2], sig[2], A, y, s2)[-1]

    return {"place": codes[0], "slot": codes[1]}, A, y, s2, dense_ll


def _assert_dense_maximum(fit, dense_ll) -> np.ndarray:
    """The fit's ℓ_R is the dense one at its components, and no component ×0.8 or ×1.25 is higher."""
    best = np.array([fit.sigma2["place"], fit.sigma2["slot"], fit.sigma2[RESIDUAL]])
    assert fit.loglik == pytest.approx(dense_ll(best), rel=1e-9, abs=1e-8)
    for i in range(3):
        for factor in (0.8, 1.25):
            other = best.copy()
            other[i] = best[i] * factor if best[i] > 0 else 1e-3 * factor
            assert dense_ll(other) < fit.loglik + 1e-9
    return best


@pytest.mark.parametrize("seed", range(4))
def test_reml_fit_maximises_the_dense_restricted_likelihood(seed):
    factors, A, y, s2, dense_ll = _place_slot_instance(seed)
    fit = fit_crossed(factors, A, y, s2, residual=True)
    assert fit.converged, fit.status
    assert fit.n_evaluations > 0
    _assert_dense_maximum(fit, dense_ll)


@pytest.mark.parametrize("seed", range(4))
def test_reml_search_lifts_a_component_started_near_zero(seed, monkeypatch):
    """The search's steps and its stopping rule hold in any scale of σ² (``_newton``'s Jacobi
    scaling, ``_move``, the predicted rise as the only test): started with every component near its
    lower bound (10⁻⁸ of the spread), it still reaches the REML maximum of the dense restricted
    likelihood. A stopping test on the slopes in log σ², which vanish with σ², ended such a search
    where it began."""
    factors, A, y, s2, dense_ll = _place_slot_instance(seed)
    ref = fit_crossed(factors, A, y, s2, residual=True)
    monkeypatch.setattr(crossed, "_start", lambda y, s2, n, spread: np.full(n, np.log(1e-8)))
    fit = fit_crossed(factors, A, y, s2, residual=True)
    assert fit.converged, fit.status
    best = _assert_dense_maximum(fit, dense_ll)
    assert fit.loglik == pytest.approx(ref.loglik, abs=1e-5)
    np.testing.assert_allclose(best, [ref.sigma2["place"], ref.sigma2["slot"], ref.sigma2[RESIDUAL]], rtol=1e-2, atol=1e-4)


@pytest.mark.parametrize("seed", range(4))
def test_reml_from_a_given_start_reaches_the_same_maximum(seed):
    """``start``: from the REML point itself the search stops at once (a component at 0 starts at
    the lower bound, not free where ℓ_R falls off it); from a far start (every component ×30 + 1,
    the slot's left to the moment share) and from the slot's component at 0 where its REML value is
    not, it ends at the same maximum of the dense restricted likelihood."""
    factors, A, y, s2, dense_ll = _place_slot_instance(seed)
    ref = fit_crossed(factors, A, y, s2, residual=True)
    again = fit_crossed(factors, A, y, s2, residual=True, start=ref.sigma2)
    assert again.converged and again.n_evaluations <= 2 < ref.n_evaluations
    assert again.loglik == pytest.approx(ref.loglik, abs=1e-9)
    far = {k: 30.0 * v + 1.0 for k, v in ref.sigma2.items() if k != "slot"}
    lifted = {**ref.sigma2, "slot": 0.0}
    assert ref.sigma2["slot"] > 0 or seed == 3  # seed 3's slot component is 0 at the maximum
    for start in (far, lifted):
        fit = fit_crossed(factors, A, y, s2, residual=True, start=start)
        assert fit.converged, fit.status
        _assert_dense_maximum(fit, dense_ll)
        assert fit.loglik == pytest.approx(ref.loglik, abs=1e-5)


@pytest.mark.parametrize("seed, scale", [(1, 1e-12), (2, 1e-12), (3, 1e-13), (6, 3e-14), (9, 1e-13)])
def test_reml_refuses_points_that_do_not_factorise_and_says_so(seed, scale):
    """Noise variances 10⁻¹³–10⁻¹² of the spread: some σ² the search tries make the eliminated system
    numerically indefinite (the block Cholesky raised LinAlgError out of fit_crossed on every one of
    these instances). The search takes such a point as ℓ_R = −∞, the fit ends at a point that
    factorises, its status says how many were refused, no RuntimeWarning escapes, and its ℓ_R is the
    one the same components give when fixed."""
    codes, A, y, s2 = random_instance(np.random.default_rng(seed))
    factors = {"p": codes[0], "t": codes[1]}
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        fit = fit_crossed(factors, A, y, s2 * scale, residual=True)
    assert "not factorisable" in fit.status, fit.status
    assert all(np.isfinite(v) and v >= 0 for v in fit.sigma2.values())
    assert np.all(np.isfinite(fit.grid_mean)) and np.all(np.isfinite(fit.grid_var))
    fixed = fit_crossed(factors, A, y, s2 * scale, residual=True, sigma2=fit.sigma2, variances=False)
    assert fixed.loglik == pytest.approx(fit.loglik, rel=1e-9)


def test_noise_variances_below_every_factorisation_are_a_one_line_error():
    """Noise variances 10⁻¹⁶ of the spread (spread over e^±9): no σ² factorises. A one-line error
    naming ``s2``, not a LinAlgError from inside the search."""
    rng = np.random.default_rng(0)
    codes, A, y, s2 = random_instance(rng)
    tiny = s2 * 1e-16 * np.exp(rng.normal(0.0, 3.0, s2.size))
    with pytest.raises(DpoptInputError, match="`s2` is too small"):
        fit_crossed({"p": codes[0], "t": codes[1]}, A, y, tiny, residual=True)


def test_a_fit_keeps_its_factorisation_not_its_gram_matrices(monkeypatch):
    """The blocks' n × n Gram matrices serve REML's search; the fit holds only its factorisation (at
    2·10⁷ records four live fits held 2.3 GiB of them), whose V⁻¹ (LAPACK potri) is the dense inverse
    and whose variances are the augmented form's."""
    G, J, level, A, y, s2 = _few_observations_of_many_levels()
    used = _observations_space(monkeypatch)
    fit = fit_crossed({"level": level}, A, y, s2)
    assert used and all(used)
    system = fit.posterior.system
    assert isinstance(system, crossed._DualSystem) and system.grams is None
    V = system.chol @ system.chol.T
    np.testing.assert_allclose(system._inverse_lower(), np.tril(np.linalg.inv(V)), rtol=1e-9, atol=1e-12)
    H = (A @ crossed._design([np.unique(level, return_inverse=True)[1]], G, True)[0]).tocsr()
    prior = np.repeat([fit.sigma2["level"], fit.sigma2[RESIDUAL]], [np.unique(level).size, G])
    aug = gls_posterior(H, y, s2, prior, n_local=G, space="augmented")
    rows = sp.random(30, H.shape[1], density=0.01, random_state=4, format="csr")
    np.testing.assert_allclose(fit.posterior.variance(rows), aug.variance(rows), rtol=1e-6, atol=ATOL)


@pytest.mark.parametrize("seed", range(4))
def test_reml_gradient_and_information_against_finite_differences(seed):
    """The exact slope of −ℓ_R in log σ² (and the average information's diagonal, which is the
    expected curvature: positive) against central differences of the kernel's loglik."""
    rng = np.random.default_rng(250 + seed)
    codes, A, y, s2 = random_instance(rng, n_place=6, n_slot=5)
    ids = [np.unique(c, return_inverse=True)[1] for c in codes]
    grid_map, sizes = crossed._design(ids, A.shape[1], True)
    H = sp.csr_matrix(A) @ grid_map
    x = np.log(rng.uniform(0.2, 3.0, size=len(sizes)))

    def negll(x):
        return -gls_posterior(H, y, s2, np.repeat(np.exp(x), sizes), n_local=A.shape[1]).loglik

    g, AI = crossed._score(gls_posterior(H, y, s2, np.repeat(np.exp(x), sizes), n_local=A.shape[1]), y, sizes)
    h = 1e-5
    fd = [(negll(x + h * e) - negll(x - h * e)) / (2 * h) for e in np.eye(x.size)]
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7)
    assert np.all(np.linalg.eigvalsh(AI) > -1e-12)


def test_lbfgsb_fallback_also_maximises(monkeypatch):
    """Should the average-information steps not converge, L-BFGS-B takes over from where they
    stopped and still reaches the maximum (checked against the dense likelihood)."""
    monkeypatch.setattr(crossed, "_ai_search", lambda obj, x, **_: (x, False, "forced"))
    test_reml_fit_maximises_the_dense_restricted_likelihood(1)


# ------------------------------------------------------------------ nested special case: the tree BLUP
def random_tree(rng, depth):
    """One root at level depth−1, leaves at level 0 (the layout of dpopt.hierarchy.blup)."""
    parent, level, prev = [-1], [depth - 1], [0]
    for lev in range(depth - 2, -1, -1):
        count = int(rng.integers(len(prev), 3 * len(prev) + 1))
        ids = list(range(len(parent), len(parent) + count))
        parent += list(np.concatenate([prev, rng.choice(prev, size=count - len(prev))]))
        level += [lev] * count
        prev = ids
    return np.array(parent), np.array(level)


@pytest.mark.parametrize("seed", range(10))
def test_nested_special_case_equals_tree_blup(seed):
    rng = np.random.default_rng(300 + seed)
    parent, level = random_tree(rng, depth=int(rng.integers(2, 5)))
    n = parent.size
    tau2 = rng.uniform(0.2, 4.0, size=level.max() + 1) * (rng.random(level.max() + 1) > 0.2)
    path = np.zeros((n, n))  # θ_v = Σ over v and its ancestors of their effects (the root's is μ)
    for v in range(n):
        w = v
        while w >= 0:
            path[v, w] = 1.0
            w = parent[w]
    measured = rng.random(n) < 0.6
    measured[rng.integers(n)] = True
    y = np.where(measured, rng.normal(20, 4, size=n), np.nan)
    s2 = np.where(measured, rng.uniform(0.5, 3.0, size=n), np.nan)
    post = gls_posterior(path[measured], y[measured], s2[measured], tau2[level[1:]], n_fixed=1)
    ref = tree_blup(parent, level, y, s2, tau2)
    np.testing.assert_allclose(path @ post.mean, ref.mean, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(post.variance(path), ref.variance, rtol=1e-6, atol=ATOL)
    assert post.loglik == pytest.approx(ref.loglik, rel=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_nested_factors_of_leaves_equal_tree_blup(seed):
    """Grids = leaves, factors = their ancestors per level, residual = the leaf level: fit_crossed
    with given components equals the tree BLUP when only leaves are measured."""
    rng = np.random.default_rng(400 + seed)
    parent, level = random_tree(rng, depth=4)
    n = parent.size
    leaves = np.flatnonzero(level == 0)
    anc = {1: parent[leaves]}
    anc[2] = parent[anc[1]]
    tau2 = rng.uniform(0.3, 3.0, size=4)
    measured = rng.random(leaves.size) < 0.7
    measured[0] = True
    A = np.eye(leaves.size)[measured]
    y_leaf = rng.normal(5, 2, size=leaves.size)
    s2_leaf = rng.uniform(0.2, 1.5, size=leaves.size)
    fit = fit_crossed({"l1": anc[1], "l2": anc[2]}, A, y_leaf[measured], s2_leaf[measured], residual=True,
                      sigma2={"l1": tau2[1], "l2": tau2[2], RESIDUAL: tau2[0]})
    y, s2 = np.full(n, np.nan), np.full(n, np.nan)
    y[leaves[measured]], s2[leaves[measured]] = y_leaf[measured], s2_leaf[measured]
    ref = tree_blup(parent, level, y, s2, tau2)
    np.testing.assert_allclose(fit.grid_mean, ref.mean[leaves], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(fit.grid_var, ref.variance[leaves], rtol=1e-6, atol=ATOL)
    assert fit.loglik == pytest.approx(ref.loglik, rel=1e-9)


# ------------------------------------------------------------------ recovery and calibration
def simulate(seed, P=40, T=30, sig=(4.0, 1.0, 0.5)):
    rng = np.random.default_rng(seed)
    place, slot = np.repeat(np.arange(P), T), np.tile(np.arange(T), P)
    G = P * T
    draws = [np.sqrt(s) * rng.normal(size=m) for s, m in zip(sig, (P, T, G))]
    theta = 20 + draws[0][place] + draws[1][slot] + draws[2]
    rows = [sp.csr_matrix((np.full(G, 1.0 / T), (place, np.arange(G))), shape=(P, G)),
            sp.csr_matrix((np.full(G, 1.0 / P), (slot, np.arange(G))), shape=(T, G))]
    fine = np.flatnonzero(rng.random(G) < 0.5)
    rows.append(sp.csr_matrix((np.ones(fine.size), (np.arange(fine.size), fine)), shape=(fine.size, G)))
    A = sp.vstack(rows, format="csr")
    s2 = np.concatenate([np.full(P + T, 0.05), rng.uniform(0.2, 1.0, size=fine.size)])
    y = A @ theta + rng.normal(size=A.shape[0]) * np.sqrt(s2)
    drawn = dict(zip(("place", "slot", RESIDUAL), (float(np.var(d, ddof=1)) for d in draws)))
    return {"place": place, "slot": slot}, A, y, s2, theta, drawn


@pytest.mark.slow
def test_recovery_and_coverage_by_simulation():
    """σ² near the variance of the effects actually drawn (what the data can tell; 15 % for the
    factors, 35 % for the residual, seen through noisier single-grid nodes), and the grids' own
    95 % intervals cover their drawn θ_g at 0.93–0.97."""
    covered, total = 0, 0
    for seed in range(4):
        factors, A, y, s2, theta, drawn = simulate(500 + seed)
        fit = fit_crossed(factors, A, y, s2, residual=True, confidence=0.95)
        assert fit.converged, fit.status
        for key, tol in (("place", 0.15), ("slot", 0.15), (RESIDUAL, 0.35)):
            assert abs(fit.sigma2[key] / drawn[key] - 1) < tol, (key, fit.sigma2, drawn)
        covered += int(np.sum(np.abs(fit.grid_mean - theta) <= fit.grid_halfwidth))
        total += theta.size
    assert 0.93 <= covered / total <= 0.97, covered / total


def test_a_component_without_signal_goes_to_zero():
    """Slots drawn with no effect at all: REML puts σ²_slot at (or next to) 0, the others stay."""
    factors, A, y, s2, _, _ = simulate(600, P=30, T=20, sig=(4.0, 0.0, 0.5))
    fit = fit_crossed(factors, A, y, s2)
    assert fit.converged, fit.status
    assert fit.sigma2["slot"] < 0.02 < 1.0 < fit.sigma2["place"]
    assert np.all(fit.effects["slot"].var <= fit.sigma2["slot"] + 1e-12)


def test_unmeasured_grid_and_level_keep_their_prior_spread():
    """A grid in no measured node and a level nobody measured: its variance holds σ²_e and σ²_f."""
    factors, A, y, s2, _, _ = simulate(700, P=10, T=8)
    codes = {k: np.append(v, v.max() + 1) for k, v in factors.items()}  # one extra grid, new place and slot
    A = sp.hstack([A, sp.csr_matrix((A.shape[0], 1))], format="csr")
    sig = {"place": 3.0, "slot": 1.0, RESIDUAL: 0.5}
    fit = fit_crossed(codes, A, y, s2, sigma2=sig)
    assert fit.grid_mean[-1] == pytest.approx(fit.mu)
    assert fit.grid_var[-1] == pytest.approx(fit.mu_var + sum(sig.values()), rel=1e-9)


# ------------------------------------------------------------------ bad input
GOOD = {"factors": {"a": np.array([0, 1, 0])}, "A": np.eye(3), "y": np.ones(3), "s2": np.ones(3)}


@pytest.mark.parametrize("change, name", [
    ({"factors": [1, 2, 3]}, "factors"),
    ({"factors": {"a": np.array([0.5, 1, 0])}}, "factors['a']"),
    ({"factors": {"a": np.array([0, 1])}}, "A"),
    ({"factors": {RESIDUAL: np.array([0, 1, 0])}}, "factors"),
    ({"A": np.ones(3)}, "A"),
    ({"A": np.full((3, 3), np.nan)}, "A"),
    ({"A": np.array([[1.0, -1.0, 0.0]] * 3)}, "A"),
    ({"y": np.ones(2)}, "y"),
    ({"y": np.array([1.0, np.inf, 1.0])}, "y"),
    ({"s2": np.array([1.0, 0.0, 1.0])}, "s2"),
    ({"s2": np.array([1.0, -1.0, 1.0])}, "s2"),
    ({"residual": 1}, "residual"),
    ({"confidence": 1.5}, "confidence"),
    ({"sigma2": {"a": 1.0}}, "sigma2"),
    ({"sigma2": {"a": -1.0, RESIDUAL: 1.0}}, "sigma2"),
    ({"max_iter": 0}, "max_iter"),
    ({"start": [1.0]}, "start"),
    ({"start": {"a": np.nan, RESIDUAL: 1.0}}, "start"),
    ({"start": {"b": 1.0}}, "start"),
    ({"start": {"a": "x"}}, "start"),
    ({"sigma2": {"a": "x", RESIDUAL: 1.0}}, "sigma2"),
])
def test_bad_input_is_a_one_line_error(change, name):
    args = GOOD | change
    with pytest.raises(DpoptInputError) as err:
        fit_crossed(args.pop("factors"), args.pop("A"), args.pop("y"), args.pop("s2"), **args)
    assert f"`{name}`" in str(err.value) and "\n" not in str(err.value)


def test_kernel_bad_input():
    H = np.ones((3, 2))
    for args, name in [((H, np.ones(3), np.ones(3), [-1.0]), "prior_var"),
                       ((np.ones((3, 2)), np.ones(3), np.ones(3), [1.0, 1.0]), "prior_var"),
                       ((H, np.ones(3), np.zeros(3), [1.0]), "s2"),
                       ((np.zeros((3, 2)), np.ones(3), np.ones(3), [1.0]), "H")]:
        with pytest.raises(DpoptInputError, match=f"`{name}`"):
            gls_posterior(*args)
    with pytest.raises(DpoptInputError, match="`local_blocks`"):
        gls_posterior(H, np.ones(3), np.ones(3), [1.0], n_local=1, local_blocks=[0.5])
    with pytest.raises(DpoptInputError, match="`L`"):
        gls_posterior(H, np.ones(3), np.ones(3), [1.0]).variance(np.ones((2, 3)))
    with pytest.raises(DpoptInputError, match="`A_new`"):
        fit_crossed(GOOD["factors"], GOOD["A"], GOOD["y"], GOOD["s2"]).node(np.ones((2, 4)))


@pytest.mark.parametrize("dual", [False, True])
def test_means_only_keeps_the_fit_and_refuses_variances(dual, monkeypatch):
    """A fit without its factorisation: the same components, means, likelihood and the variances
    computed before; a node's variance and the kernel of a profile (what the intervals read) as
    before; a new variance refused in one line."""
    from dpopt.hierarchy.crossed import fit_kernel, means_only

    monkeypatch.setattr(crossed, "_dual_cheaper", lambda *args: dual)
    rng = np.random.default_rng(990)
    codes, A, _, s2 = random_instance(rng, n_place=5, n_slot=4)
    y = A @ (20 + 5 * rng.normal(size=codes[0].max() + 1)[codes[0]]) + rng.normal(size=A.shape[0]) * np.sqrt(s2)
    fit = fit_crossed(dict(zip(["place", "slot", "hour_of_day"], codes)), A, y, s2)
    slim = means_only(fit)
    assert slim.sigma2 == fit.sigma2 and slim.loglik == fit.loglik and slim.mu_var == fit.mu_var
    np.testing.assert_array_equal(slim.grid_mean, fit.grid_mean)
    np.testing.assert_array_equal(slim.grid_var, fit.grid_var)
    H, inner, order, _ = fit_kernel(slim, A)
    H0, inner0, order0, _ = fit_kernel(fit, A)
    assert (H != H0).nnz == 0 and inner == inner0 and np.array_equal(order, order0)
    assert fit.node(A[:2]).var.shape == (2,)  # the original keeps its factor
    with pytest.raises(RuntimeError, match="released"):
        slim.node(A[:2])
    assert "released" in repr(slim.posterior)
    with pytest.raises(DpoptInputError, match="`fit`"):
        means_only(slim.posterior)


def test_within_memory_leaves_out_the_largest_factors_first_and_reraises_when_none_is_left():
    from dpopt.hierarchy.crossed import within_memory

    factors = {"small": np.array([0, 1, 2, 0]), "large": np.arange(4), "middle": np.array([0, 1, 0, 1])}
    calls = []

    def fit(fs):
        calls.append(sorted(fs))
        if "large" in fs or "small" in fs:
            raise MemoryError("Not enough memory to perform factorization.")
        return len(fs)

    assert within_memory(fit, factors) == (1, ["large", "small"])  # 4 levels, then 3; "middle" (2) fits
    assert calls == [["large", "middle", "small"], ["middle", "small"], ["middle"]]
    with pytest.raises(MemoryError):
        within_memory(lambda fs: (_ for _ in ()).throw(MemoryError()), factors)


@pytest.mark.parametrize("seed", range(6))
def test_grid_variances_through_the_shared_effects_equal_the_row_solves(seed, monkeypatch):
    """The observations' space answers many rows of few effects (grids: μ, a level per factor, the
    residual) through L⁻ᵀ's panels and the effects the rows share; the same variances as one
    triangular solve per row (forced by making the streamed work look dear), in panels and blocks of
    rows of any size (a budget of three rows: panels one or two columns wide)."""
    rng = np.random.default_rng(700 + seed)
    codes, A, y, s2 = random_instance(rng, n_place=9, n_slot=8)
    grid_map, sizes = crossed._design(codes, A.shape[1], True)
    H = sp.csr_matrix(A) @ grid_map
    prior = np.repeat(rng.uniform(0.1, 3.0, len(sizes)), sizes)
    post = gls_posterior(H, y, s2, prior, space="observations")
    assert isinstance(post.system, crossed._DualSystem)
    levels = sp.identity(H.shape[1], format="csr")
    mixed = sp.vstack([grid_map, levels, sp.random(5, H.shape[1], density=0.3, random_state=seed)]).tocsr()
    taken = []
    shared = crossed._DualSystem._shared_variance
    monkeypatch.setattr(crossed._DualSystem, "_shared_variance",
                        lambda self, M, parts: taken.append(M.shape[0]) or shared(self, M, parts))
    for rows in (grid_map, levels, mixed):
        with monkeypatch.context() as m:
            m.setattr(crossed, "_STREAMED_COST", 0.0)  # taken wherever there are more rows than observations
            fast = post.variance(rows)
        with monkeypatch.context() as m:
            m.setattr(crossed, "_STREAMED_COST", 1e12)  # never taken
            slow = post.variance(rows)
        with monkeypatch.context() as m:
            m.setattr(crossed, "_STREAMED_COST", 0.0)
            m.setattr(crossed, "_RHS_BUDGET", 3 * post.system.core_size)  # three rows a block
            small = post.variance(rows)
        np.testing.assert_allclose(fast, slow, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(small, slow, rtol=1e-9, atol=1e-12)
    assert taken == [grid_map.shape[0], grid_map.shape[0], levels.shape[0], levels.shape[0],
                     mixed.shape[0], mixed.shape[0]]


# ------------------------------------------------------------------ large cores: probed traces, dense inverse
def _large_instance(seed: int):
    rng = np.random.default_rng(seed)
    codes, A, y, s2 = random_instance(rng, n_place=150, n_slot=12)
    return dict(zip(["place", "slot", "hour_of_day"], codes)), sp.csr_matrix(A), y, s2


@pytest.mark.parametrize("seed", [5, 6])
def test_probed_traces_match_the_exact_ones(seed, monkeypatch):
    """Above ``_EXACT_TRACE_CORE`` core rows REML's score reads each block's trace of the posterior
    covariance by Hutchinson's estimator (64 Rademacher probes, the local part exact); on 150 places
    × 12 slots (a place block of 150 probed whole, 1,500-odd grid residuals probed through the core's
    correction) every trace is within 1 % of the exact one, the small blocks exact."""
    factors, A, y, s2 = _large_instance(seed)
    given = {"place": 1.5, "slot": 0.8, "hour_of_day": 0.3, RESIDUAL: 1.0}
    fit = fit_crossed(factors, A, y, s2, residual=True, sigma2=given, dense_max=0)
    system, nf = fit.posterior.system, fit.posterior.n_fixed
    sizes = [np.unique(c).size for c in factors.values()] + [A.shape[1]]
    edges = np.concatenate([[0], np.cumsum(sizes)])
    exact = system.component_traces(edges, nf)
    monkeypatch.setattr(crossed, "_EXACT_TRACE_CORE", 0)
    probed = system.component_traces(edges, nf)
    assert sizes[0] > crossed._TRACE_PROBES and sizes[1] <= crossed._TRACE_PROBES
    np.testing.assert_allclose(probed, exact, rtol=0.01)
    np.testing.assert_allclose(probed[1:3], exact[1:3], rtol=1e-9)  # blocks of ≤ 64 effects: taken exactly
    np.testing.assert_array_equal(system.component_traces(edges, nf), probed)  # seeded: the same every call


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_reml_on_probed_traces_ends_near_the_exact_maximum(seed, monkeypatch):
    """REML's line search keeps ℓ_R exact; with the score's traces probed the search ends within
    0.01 of the exact maximum's ℓ_R and 2 % of its components."""
    factors, A, y, s2 = _large_instance(seed)
    exact = fit_crossed(factors, A, y, s2, residual=True, dense_max=0, variances=False)
    monkeypatch.setattr(crossed, "_EXACT_TRACE_CORE", 0)
    probed = fit_crossed(factors, A, y, s2, residual=True, dense_max=0, variances=False)
    assert probed.converged and probed.loglik == pytest.approx(exact.loglik, abs=0.01)
    for k, v in exact.sigma2.items():
        assert probed.sigma2[k] == pytest.approx(v, rel=0.02, abs=1e-3 * max(exact.sigma2.values())), k


def test_a_sparse_cores_many_variances_through_its_dense_inverse_are_the_sparse_ones(monkeypatch):
    """A sparse core of at most ``_DENSE_INVERSE_CORE`` rows asked for many quadratic forms is factored
    dense once more for them (R⁻¹); the grids' posterior variances are those of the sparse solves."""
    factors, A, y, s2 = _large_instance(5)
    given = {"place": 1.5, "slot": 0.8, "hour_of_day": 0.3, RESIDUAL: 1.0}
    fit = fit_crossed(factors, A, y, s2, residual=True, sigma2=given, dense_max=0)
    assert fit.posterior.system.core.chol is None and fit.posterior.system.core.cache.get("dense") is not None
    monkeypatch.setattr(crossed, "_DENSE_INVERSE_CORE", 0)
    solved = fit_crossed(factors, A, y, s2, residual=True, sigma2=given, dense_max=0)
    assert "dense" not in solved.posterior.system.core.cache
    np.testing.assert_allclose(fit.grid_var, solved.grid_var, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("budget", [10_000_000, 50_000])
def test_a_sparse_cores_many_quadratic_forms_by_its_inverses_columns_are_the_solved_ones(budget, monkeypatch):
    """A sparse core asked for more quadratic forms than it has rows (and too large to be factored
    dense for them) takes R⁻¹'s columns in blocks, one solve per row it needs
    (``_Core._streamed_quad``; several blocks under a small budget): the same diag(TᵀR⁻¹T) as one
    solve per column, and the grids' variances as the dense inverse's."""
    factors, A, y, s2 = _large_instance(5)
    given = {"place": 1.5, "slot": 0.8, "hour_of_day": 0.3, RESIDUAL: 1.0}
    dense = fit_crossed(factors, A, y, s2, residual=True, sigma2=given, dense_max=0)
    monkeypatch.setattr(crossed, "_DENSE_INVERSE_CORE", 0)
    monkeypatch.setattr(crossed, "_RHS_BUDGET", budget)
    streamed = []
    real = crossed._Core._streamed_quad
    monkeypatch.setattr(crossed._Core, "_streamed_quad", lambda self, T: streamed.append(T.shape) or real(self, T))
    fit = fit_crossed(factors, A, y, s2, residual=True, sigma2=given, dense_max=0)
    assert streamed and all(cols > rows for rows, cols in streamed)
    np.testing.assert_allclose(fit.grid_var, dense.grid_var, rtol=1e-9, atol=1e-12)
    system = fit.posterior.system
    T = system.lift(sp.identity(system.Ht.shape[1], format="csr"))  # every effect: more columns than core rows
    assert T.shape[1] > T.shape[0]
    solved = np.einsum("ij,ij->j", T.toarray(), system.core.solve(T.toarray()))
    np.testing.assert_allclose(system.core.quad(T), solved, rtol=1e-9, atol=1e-12)
