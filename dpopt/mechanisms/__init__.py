"""Mechanisms of the seed papers, vectorised over Monte-Carlo repetitions.

Every mechanism takes ``samples`` (shape ``(N,)`` or ``(R, N)``, users contiguous), the public
``counts``, the bound ``U`` and ``epsilon``, a :class:`numpy.random.Generator` and ``runs``, and
returns a :class:`Release` (values, estimate, the sensitivity and noise scale used, the budget split).

=========================  ============================  =========================================
mechanism                  sensitivity of the release    budget
=========================  ============================  =========================================
``laplace_mean``           U·m*/n                        ε
``opt_worst_case``         T_ε/n (seed 000 Thm III.1)    ε
``akmv``                   T/n, T private                ε/2 quantile (rank ⌈2/ε⌉), ε/2 mean
``array_averaging``        U/K (·wrap_factor for WA)     ε
``levy``                   φ(b−a)/K                      ε/2 interval (Alg. 3), ε/2 mean
``quantile``               φ(b−a)/K                      ε/4 + ε/4 quantiles, ε/2 mean
``grid_release``           U·Γ*/R and exact Δ_Var        ε/2 mean, ε/2 variance
=========================  ============================  =========================================

The per-grid CLIP/BASELINE mechanism of seed 002 over many grids at once, with any sampler of
:mod:`dpopt.noise` (the exact one for real releases), is :func:`release_grids`; ``grid_release``
is its one-grid, many-runs form for simulations. The shared opening of every mechanism (argument
checks, runs, budget split) is :func:`._common.prepare` / :func:`._common.split_budget`.
"""

from __future__ import annotations

from ._common import Release, substitute_user_means
from .akmv import akmv
from .array_averaging import array_averaging, median_array_length, pack
from .grid import GridRelease, baseline_release, clip_release, grid_release, release_grids
from .laplace import laplace_mean
from .levy import levy, levy_array_length
from .montecarlo import MCEstimate, mean_abs_error, monte_carlo
from .opt_worst_case import opt_worst_case
from .private_quantile import exponential_mechanism, smith_quantile
from .quantile import quantile

__all__ = [
    "Release", "substitute_user_means", "laplace_mean", "opt_worst_case", "akmv", "array_averaging",
    "median_array_length", "pack", "levy", "levy_array_length", "quantile", "grid_release",
    "release_grids", "GridRelease", "baseline_release", "clip_release", "exponential_mechanism", "smith_quantile", "MCEstimate",
    "mean_abs_error", "monte_carlo",
]
