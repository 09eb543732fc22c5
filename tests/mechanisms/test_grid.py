"""The per-grid CLIP mechanism over many grids (release_grids) against brute force."""

from __future__ import annotations

import numpy as np
import pytest

from dpopt import DpoptInputError
from dpopt.mechanisms import release_grids
from dpopt.noise import make_noise

U = 10.0
SIGMAS = 4.5


def _grids(rng, G=60):
    """G grids; each: a few users with counts 1..5 and values in [0, U]; users' retained counts."""
    out = []
    for _ in range(G):
        counts = rng.integers(1, 6, rng.integers(1, 5))
        keep = np.minimum(counts, rng.integers(1, 6, counts.size))
        vals = [rng.uniform(0, U, c) for c in counts]
        kept = np.concatenate([v[:k] for v, k in zip(vals, keep)])
        out.append((keep, kept))
    return out


def _stats(grids):
    R = np.array([k.sum() for k, _ in grids], float)
    gmax = np.array([k.max() for k, _ in grids], float)
    S1 = np.array([x.sum() for _, x in grids])
    S2 = np.array([(x**2).sum() for _, x in grids])
    return R, gmax, S1, S2


def _dvar(R, g):
    """Δ_Var of Lemma III.3 written out case by case."""
    if R > 2 * g:
        return U * U * g * (R - g) / R**2
    return U * U / 4 if R % 2 == 0 else U * U / 4 * (1 - 1 / R**2)


@pytest.mark.parametrize("sampler", ["discrete", "numpy"])
def test_release_grids_statistics_and_sensitivities_by_brute_force(rng, sampler):
    grids = _grids(rng)
    R, gmax, S1, S2 = _stats(grids)
    rel = release_grids(retained=R, retained_max=gmax, sums=S1, sums_of_squares=S2, bound=U,
                        budget_mean=1e9, budget_variance=1e9, noise=make_noise(sampler=sampler, seed=2))
    np.testing.assert_allclose(rel.estimate_mean, [x.mean() for _, x in grids], rtol=1e-12)
    np.testing.assert_allclose(rel.estimate_variance, [x.var() for _, x in grids], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(rel.mean, [x.mean() for _, x in grids], atol=1e-3)
    np.testing.assert_allclose(rel.mean_sensitivity, U * gmax / R, rtol=1e-15)
    np.testing.assert_allclose(rel.variance_sensitivity, [_dvar(r, g) for r, g in zip(R, gmax)], rtol=1e-12)
    assert rel.released.all() and rel.unit == "epsilon"


def test_release_grids_noise_scale_is_sensitivity_over_budget(rng):
    grids = _grids(rng, 400)
    R, gmax, S1, S2 = _stats(grids)
    e_mu, e_var = rng.uniform(0.2, 1.0, R.size), rng.uniform(0.2, 1.0, R.size)
    rel = release_grids(retained=R, retained_max=gmax, sums=S1, sums_of_squares=S2, bound=U,
                        budget_mean=e_mu, budget_variance=e_var, noise=make_noise(sampler="numpy", seed=4))
    np.testing.assert_allclose(rel.mean_noise_scale, U * gmax / R / e_mu, rtol=1e-12)
    # standardised noise |Z|/b has mean 1 under Laplace
    z = np.abs(rel.mean - rel.estimate_mean) / rel.mean_noise_scale
    assert abs(z.mean() - 1) < SIGMAS * z.std() / np.sqrt(z.size)
    np.testing.assert_allclose(rel.noise_abs, rel.mean_noise_scale + rel.variance_noise_scale, rtol=1e-12)


def test_release_grids_withholds_empty_and_unreleased_grids():
    rel = release_grids(retained=[0, 2, 3], retained_max=[0, 1, 3], sums=[0, 5, 6], sums_of_squares=[0, 13, 14],
                        bound=U, budget_mean=0.5, budget_variance=0.5, released=[True, True, False],
                        noise=make_noise(seed=1))
    np.testing.assert_array_equal(rel.released, [False, True, False])
    assert np.isnan(rel.mean[[0, 2]]).all() and np.isfinite(rel.mean[1]) and np.isinf(rel.noise_abs[[0, 2]]).all()


@pytest.mark.parametrize("sums,sumsq", [([25.0], [100.0]), ([5.0], [101.0]), ([-1.0], [1.0])])
def test_release_grids_refuses_sums_outside_the_bound(sums, sumsq):
    """Last line of defence: S1 ≤ U·R and S2 ≤ U²·R (U = 10, R = 2), S1, S2 ≥ 0."""
    with pytest.raises(DpoptInputError, match="does not bound the retained values"):
        release_grids(retained=[2], retained_max=[1], sums=sums, sums_of_squares=np.array(sumsq) * 2,
                      bound=U, budget_mean=1.0, budget_variance=1.0, noise=make_noise(seed=1))
