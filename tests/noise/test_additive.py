"""The one noise interface: make_noise(...).add(values, sensitivity, budget)."""

from __future__ import annotations

import numpy as np
import pytest

from dpopt import DpoptInputError
from dpopt.noise import (
    MECHANISMS,
    DiscreteGaussian,
    DiscreteLaplace,
    NumpyGaussian,
    NumpyLaplace,
    SecureRandom,
    SeededSource,
    epsilon_rational,
    make_noise,
)

#: a Monte-Carlo mean lies within this many standard errors
SIGMAS = 4.5


def test_make_noise_picks_the_sampler_and_labels_it():
    d = make_noise("laplace")
    assert isinstance(d, DiscreteLaplace) and isinstance(d.source, SecureRandom)
    assert d.unit == "epsilon" and "CSPRNG" in d.label and d.granularity == 2.0**-12
    s = make_noise("laplace", seed=3)
    assert isinstance(s.source, SeededSource) and not s.source.secure and "NOT for a real release" in s.label
    n = make_noise("laplace", sampler="numpy", seed=3)
    assert isinstance(n, NumpyLaplace) and "NOT for a real release" in n.label and n.granularity == 0.0
    assert MECHANISMS == {"laplace": "epsilon", "gaussian": "rho"}
    g = make_noise("gaussian")
    assert isinstance(g, DiscreteGaussian) and isinstance(g.source, SecureRandom) and g.unit == "rho"
    assert "Gaussian" in g.label and "CSPRNG" in g.label
    ng = make_noise("gaussian", sampler="numpy", seed=3)
    assert isinstance(ng, NumpyGaussian) and ng.unit == "rho" and "NOT for a real release" in ng.label


@pytest.mark.parametrize("kwargs,match", [
    ({"mechanism": "exponential"}, "`mechanism` must be one of"),
    ({"sampler": "float"}, "`sampler` must be one of"),
    ({"sampler": "numpy", "seed": 1, "rng": np.random.default_rng(1)}, "not both"),
    ({"rng": np.random.default_rng(1)}, "`rng` is for sampler='numpy'"),
    ({"seed": 1.5}, "`seed` must be an integer"),
    ({"granularity_bits": -65}, "granularity_bits"),
    ({"granularity_bits": 129}, r"`granularity_bits` must be an integer in -64\.\.128"),
])
def test_make_noise_refuses_bad_options(kwargs, match):
    with pytest.raises(DpoptInputError, match=match):
        make_noise(**kwargs)


@pytest.mark.parametrize("sampler", ["discrete", "numpy"])
def test_no_budget_no_sensitivity_is_released_as_is_and_nan_is_withheld(sampler):
    noise = make_noise(sampler=sampler, seed=1)
    out = noise.add([0.25, np.nan, 3.0], [0.0, 1.0, 1.0], [0.0, 1.0, 1.0])
    assert out.values[0] == 0.25 and np.isnan(out.values[1]) and np.isfinite(out.values[2])
    assert out.scale[0] == 0.0 and np.isnan(out.scale[1]) and out.mean_abs[0] == 0.0


@pytest.mark.parametrize("sampler", ["discrete", "numpy"])
def test_mean_absolute_noise_matches_the_reported_one(sampler):
    """E|noise| over many draws agrees with ``mean_abs`` (Laplace: b; discrete: λ·2r/(1−r²))."""
    n = 20_000
    sens, eps = 0.75, 0.6
    noise = make_noise(sampler=sampler, seed=11, granularity_bits=6)
    vals = np.full(n, 0.5)  # a multiple of 2^-6: the discrete rounding adds nothing
    out = noise.add(vals, np.full(n, sens), np.full(n, eps))
    err = np.abs(out.values - vals)
    assert abs(err.mean() - out.mean_abs[0]) < SIGMAS * err.std() / np.sqrt(n)
    # the scale is Δ/ε (numpy) or the discrete one, never smaller than Δ/ε
    assert out.scale[0] >= sens / eps * (1 - 1e-12)
    if sampler == "discrete":
        t = out.scale[0] * float(epsilon_rational(eps)) / 2.0**-6
        assert t == int(t) and np.all(out.values * 2**6 == np.round(out.values * 2**6))


@pytest.mark.parametrize("sampler", ["discrete", "numpy"])
def test_gaussian_noise_has_the_reported_scale_and_budget(sampler):
    """Gaussian: std of the noise ≈ reported σ ≥ Δ/√(2ρ) (zCDP, CKS Thm 4), E|noise| ≈ mean_abs."""
    n = 20_000
    sens, rho = 0.75, 0.3
    noise = make_noise("gaussian", sampler=sampler, seed=5, granularity_bits=6)
    vals = np.full(n, 0.5)
    out = noise.add(vals, np.full(n, sens), np.full(n, rho))
    err = out.values - vals
    sigma = out.scale[0]
    assert sigma >= sens / np.sqrt(2 * rho) * (1 - 1e-12)
    # sample std within ~4.5 standard errors (std of s² is σ²·√(2/n) for a Gaussian)
    assert abs(err.var() - sigma**2) < SIGMAS * sigma**2 * np.sqrt(2.0 / n) * 1.1
    assert abs(np.abs(err).mean() - out.mean_abs[0]) < SIGMAS * np.abs(err).std() / np.sqrt(n)
    nanout = noise.add([np.nan, 0.25], [1.0, 0.0], [1.0, 0.0])
    assert np.isnan(nanout.values[0]) and nanout.values[1] == 0.25 and nanout.scale[1] == 0.0
