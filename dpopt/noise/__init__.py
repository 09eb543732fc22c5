"""Noise for every mechanism, in one low module.

* :mod:`.mechanism` — the one noise interface of both privacy models: the integer-lattice
  :class:`~.mechanism.NoiseMechanism` (ℓ1/ℓ2 sensitivity in lattice units and a budget → the scale
  and exact law of the noise, a noisy integer vector, its tails) with four implementations (exact
  discrete Laplace and Gaussian, numpy's continuous laws for simulations), and
  :func:`make_mechanism`, the one place samplers are built (the ``user`` model's statistics and
  selection, and :func:`make_noise`);
* :mod:`.additive` — the value-space form the grid release uses: :func:`make_noise` returns a
  :class:`Noise` whose :meth:`~Noise.add` puts noise of sensitivity Δ and budget ε on values,
  whichever sampler runs (:class:`DiscreteLaplace` for real releases, :class:`NumpyLaplace` for
  simulations), a thin adapter that snaps values and Δ to the lattice λ·ℤ and calls the mechanism;
* :mod:`.discrete_laplace` — the exact discrete Laplace sampler (Canonne, Kamath & Steinke,
  NeurIPS 2020) with the float-safe rounding onto λ·ℤ of models/release.md;
* :mod:`.discrete_gaussian` — the exact discrete Gaussian sampler (CKS 2020, Algorithm 3) on λ·ℤ,
  budget ρ of zero-concentrated DP (models/gaussian.md);
* :mod:`.exact` — the vectorised exact building blocks (uniforms from 64-bit words, Bernoulli(exp(−γ)),
  geometrics, discrete Laplace) behind :func:`discrete_laplace_array` and :func:`discrete_gaussian_array`;
* :mod:`.sources` — uniform integers and bulk 64-bit words: :class:`SecureRandom` (OS CSPRNG via
  ``os.urandom``, the default) and the seeded :class:`SeededSource` (numpy PCG64, NOT for a real release);
* :mod:`.continuous` — numpy's continuous Laplace, for Monte-Carlo simulations only.

The sampler function itself is ``dpopt.noise.discrete_laplace.discrete_laplace`` (the package
attribute ``discrete_laplace`` is the module, so that it can be patched in tests). The package's
``DiscreteLaplace`` and friends are the value-space :class:`Noise` samplers of :mod:`.additive`; the
lattice mechanisms of the same names are in :mod:`.mechanism` (and re-exported by
:mod:`dpopt.privacy.user`).

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
from .mechanism import FAMILIES, NoiseMechanism, make_mechanism
from .discrete_gaussian import discrete_gaussian_array, rho_rational
from .discrete_laplace import (
    DEFAULT_GRANULARITY_BITS,
    check_granularity_bits,
    lattice_bits,
    discrete_laplace_array,
    discrete_laplace_rational,
    epsilon_rational_array,
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
from .sources import IntegerSource, SecureRandom, SeededSource, integer_source, random_words

__all__ = [
    "make_noise",
    "make_mechanism",
    "NoiseMechanism",
    "FAMILIES",
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
    "random_words",
    "discrete_laplace_array",
    "discrete_laplace_rational",
    "discrete_gaussian_array",
    "epsilon_rational_array",
    "rho_rational",
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
    "check_granularity_bits",
    "lattice_bits",
    "check_rng",
    "laplace",
    "laplace_simulation",
]
