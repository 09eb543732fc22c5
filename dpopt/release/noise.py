"""Moved to :mod:`dpopt.noise`. This re-export is deprecated in 0.4 and removed in 0.5."""

from __future__ import annotations

from ..noise.discrete_laplace import discrete_laplace  # noqa: F401
from ..noise import (  # noqa: F401
    DEFAULT_GRANULARITY_BITS,
    IntegerSource,
    SecureRandom,
    bernoulli,
    bernoulli_exp,
    discrete_laplace_mean_abs,
    epsilon_rational,
    grid_sensitivity,
    integer_source,
    laplace_simulation,
    release_on_grid,
    remaining_epsilon,
    snap,
    summation_error,
)
