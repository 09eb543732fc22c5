"""The ``user`` model's names for the noise mechanism, kept importable from here.

The mechanism itself (the integer-lattice interface, its four samplers and the factory that builds
them) is :mod:`dpopt.noise.mechanism`, shared by both privacy models; this module re-exports it
(models/user_level.md §5).
"""

from __future__ import annotations

from ...noise.mechanism import (
    DiscreteGaussian,
    DiscreteLaplace,
    GaussianSimulation,
    LaplaceSimulation,
    NoiseMechanism,
    discrete_gaussian_quantile,
    discrete_gaussian_upper_tail,
    discrete_laplace_abs_quantile,
    discrete_laplace_upper_quantile,
    discrete_laplace_upper_tail,
    l2_squared,
    make_mechanism,
    user_histogram,
)

__all__ = ["NoiseMechanism", "DiscreteLaplace", "user_histogram", "LaplaceSimulation", "DiscreteGaussian",
           "GaussianSimulation", "l2_squared", "make_mechanism", "discrete_laplace_abs_quantile",
           "discrete_laplace_upper_quantile", "discrete_laplace_upper_tail", "discrete_gaussian_upper_tail",
           "discrete_gaussian_quantile"]
