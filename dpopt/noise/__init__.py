"""Noise for every mechanism, in one low module.

* :mod:`.additive` — the interface a mechanism uses: :func:`make_noise` returns a :class:`Noise`
  whose :meth:`~Noise.add` puts noise of sensitivity Δ and budget ε on values, whichever sampler
  runs (:class:`DiscreteLaplace` for real releases, :class:`NumpyLaplace` for simulations);
* :mod:`.discrete_laplace` — the exact discrete Laplace sampler (Canonne, Kamath & Steinke,
  NeurIPS 2020) with the float-safe rounding onto λ·ℤ of models/release.md;
* :mod:`.discrete_gaussian` — the exact discrete Gaussian sampler (CKS 2020, Algorithm 3) on λ·ℤ,
  budget ρ of zero-concentrated DP (models/gaussian.md);
* :mod:`.sources` — uniform integers: :class:`SecureRandom` (OS CSPRNG, the default) and the
  seeded :class:`SeededSource` (NOT for a real release);
* :mod:`.continuous` — numpy's continuous Laplace, for Monte-Carlo simulations only.

The sampler function itself is ``dpopt.noise.discrete_laplace.discrete_laplace`` (the package
attribute ``discrete_laplace`` is the module, so that it can be patched in tests).

See models/release.md ("The noise") and models/mechanisms.md.
"""

from __future__ import annotations

from .additive import (
    MECHANISMS,
    SAMPLERS,
    DiscreteGaussian,
    DiscreteLaplace,
    Noise,
    NoisyValues,
    NumpyGaussian,
    NumpyLaplace,
    make_noise,
)
from .continuous import check_rng, laplace, laplace_simulation
from .discrete_laplace import (
    DEFAULT_GRANULARITY_BITS,
    bernoulli,
    bernoulli_exp,
    discrete_laplace_mean_abs,
    epsilon_rational,
    grid_sensitivity,
    release_on_grid,
    remaining_epsilon,
    snap,
    summation_error,
)
from .sources import IntegerSource, SecureRandom, SeededSource, integer_source

__all__ = [
    "make_noise",
    "Noise",
    "NoisyValues",
    "DiscreteLaplace",
    "NumpyLaplace",
    "DiscreteGaussian",
    "NumpyGaussian",
    "MECHANISMS",
    "SAMPLERS",
    "IntegerSource",
    "SecureRandom",
    "SeededSource",
    "integer_source",
    "bernoulli",
    "bernoulli_exp",
    "discrete_laplace_mean_abs",
    "epsilon_rational",
    "grid_sensitivity",
    "release_on_grid",
    "remaining_epsilon",
    "snap",
    "summation_error",
    "DEFAULT_GRANULARITY_BITS",
    "check_rng",
    "laplace",
    "laplace_simulation",
]
