"""BASELINE and CLIP in every grid at once: private mean and variance (seed 002 §III, eq. (8)).

One implementation, used by the real-data release (:mod:`dpopt.release`, exact discrete noise),
the figure reproductions and the Monte-Carlo simulations (numpy noise): :func:`release_grids`.

Estimators (seed 002 eqs. (3), (4), (6), (7)) from the retained statistics of grid g —
R_g = Σ_ℓ Γ_{g,ℓ} samples, Γ*_g = max_ℓ Γ_{g,ℓ}, S1_g and S2_g their sum and sum of squares:

* ``μ_clip = S1/R``;  ``Var_clip = S2/R − μ_clip²`` (population variance, floored at 0).

BASELINE is CLIP with ``Γ_ℓ = m_ℓ``. Which samples are retained (the first Γ_ℓ of user ℓ) is
fixed from public counts by a plan (:class:`dpopt.plan.GridPlan`).

Sensitivities (from :mod:`dpopt.calculus`): ``Δ_μ = U·Γ*/R`` (eq. (9)) and the exact ``Δ_Var``
of Lemma III.3 / Proposition III.1. Noise: ``Δ/ε_μ`` and ``Δ_Var/ε_Var`` through a
:class:`dpopt.noise.Noise` (the mechanism does not know which sampler runs); a grid's release is
(ε_μ + ε_Var)-DP by basic composition.

Before adding noise the mechanism checks 0 ≤ S1 ≤ U·R and 0 ≤ S2 ≤ U²·R in every grid (the
values must have been clipped to [0, U] with the U the sensitivities use).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import DpoptInputError, as_retained, check_bound
from ..calculus import mean_sensitivity_from_totals, variance_sensitivity_from_totals
from ..noise import Noise, make_noise, summation_error
from ._common import BatchedEstimator, Release, prepare, split_budget

__all__ = ["GridRelease", "release_grids", "grid_release", "baseline_release", "clip_release",
           "clipped_mean_variance_estimator", "grid_sensitivities"]

#: relative slack of the S1 ≤ U·R, S2 ≤ U²·R check (float sums of values in [0, U])
_STATS_RTOL = 1e-9


@dataclass(frozen=True, eq=False)
class GridRelease:
    """Per-grid outcome of :func:`release_grids` (arrays of shape (G,); NaN where not released).

    Attributes
    ----------
    mean, variance : released μ_clip and Var_clip (noisy).
    estimate_mean, estimate_variance : the statistics before noise.
    released : bool, grids with R_g > 0 that the plan releases.
    mean_sensitivity, variance_sensitivity : Δ_μ (eq. (9)) and Δ_Var (Lemma III.3).
    budget_mean, budget_variance : the budgets given (in ``unit``).
    mean_noise_scale, variance_noise_scale : scale of the noise actually drawn (0: no noise).
    noise_abs : E|noise of μ| + E|noise of Var| + the output roundings (inf where not released).
    unit : budget unit of the noise ("epsilon").
    noise : the sampler's one-line label.
    """

    mean: np.ndarray
    variance: np.ndarray
    estimate_mean: np.ndarray
    estimate_variance: np.ndarray
    released: np.ndarray
    mean_sensitivity: np.ndarray
    variance_sensitivity: np.ndarray
    budget_mean: np.ndarray
    budget_variance: np.ndarray
    mean_noise_scale: np.ndarray
    variance_noise_scale: np.ndarray
    noise_abs: np.ndarray
    unit: str
    noise: str


def _check_stats(R: np.ndarray, S1: np.ndarray, S2: np.ndarray, U: float) -> None:
    """0 ≤ S1 ≤ U·R and 0 ≤ S2 ≤ U²·R per grid, else the values were not clipped to [0, U]."""
    tol = _STATS_RTOL * np.maximum(R, 1.0)
    over1 = (S1 > U * R * (1 + tol)) | (S1 < -tol * U)
    over2 = (S2 > U * U * R * (1 + tol)) | (S2 < -tol * U * U)
    bad = np.flatnonzero(over1 | over2)
    if bad.size:
        g = int(bad[0])
        raise DpoptInputError(
            f"`bound` = {U:g} does not bound the retained values: grid {g} has sum {S1[g]:.6g} and "
            f"sum of squares {S2[g]:.6g} over {R[g]:.0f} values, outside [0, U·R] and [0, U²·R] "
            "(release with the bound the values were clipped to)"
        )


def release_grids(*, retained: Any, retained_max: Any, sums: Any, sums_of_squares: Any, bound: float,
                  budget_mean: Any, budget_variance: Any, noise: Noise, released: Any = None,
                  callback: Callable[[int], None] | None = None) -> GridRelease:
    """CLIP (BASELINE when nothing is clipped) in every grid: μ_clip and Var_clip plus noise.

    Parameters
    ----------
    retained, retained_max : array_like, shape (G,)
        R_g and Γ*_g of the retained samples.
    sums, sums_of_squares : array_like, shape (G,)
        S1_g and S2_g of the retained samples (values in [0, U]; checked).
    bound : float
        U.
    budget_mean, budget_variance : array_like, shape (G,) or scalar
        Budget of each grid's mean and variance in ``noise.unit``.
    noise : dpopt.noise.Noise
        The sampler (:func:`dpopt.noise.make_noise`).
    released : array_like of bool, optional
        Grids to release (default all); grids with R_g = 0 are never released.
    callback : callable, optional
        Progress: called with the number of draws done.

    Returns
    -------
    GridRelease
    """
    U = check_bound(bound)
    R, gmax, S1, S2 = _retained_statistics(retained, retained_max, sums, sums_of_squares)
    ok = R > 0
    if released is not None:
        ok &= np.asarray(released, dtype=bool)
    _check_stats(R, S1, S2, U)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(ok, S1 / np.maximum(R, 1), np.nan)
        var = np.where(ok, np.maximum(S2 / np.maximum(R, 1) - mean**2, 0.0), np.nan)
    d_mu = mean_sensitivity_from_totals(R, gmax, U)
    d_var = variance_sensitivity_from_totals(R, gmax, U)
    e_mu = np.broadcast_to(np.asarray(budget_mean, dtype=float), R.shape)
    e_var = np.broadcast_to(np.asarray(budget_variance, dtype=float), R.shape)
    gamma = summation_error(R, 1.0)  # float error bounds of μ̃ and Var̃ (models/release.md)
    mu = noise.add(mean, d_mu, e_mu, value_errors=2.0 * gamma * U, callback=callback)
    va = noise.add(var, d_var, e_var, value_errors=8.0 * gamma * U * U, callback=callback)
    noise_abs = np.where(ok, mu.mean_abs + va.mean_abs + (mu.rounding + va.rounding), np.inf)
    nan = np.float64(np.nan)
    return GridRelease(
        mean=mu.values, variance=va.values, estimate_mean=mean, estimate_variance=var, released=ok,
        mean_sensitivity=np.where(ok, d_mu, nan), variance_sensitivity=np.where(ok, d_var, nan),
        budget_mean=np.where(ok, e_mu, nan), budget_variance=np.where(ok, e_var, nan),
        mean_noise_scale=mu.scale, variance_noise_scale=va.scale, noise_abs=noise_abs,
        unit=noise.unit, noise=noise.label,
    )



def _retained_statistics(retained: Any, retained_max: Any, sums: Any,
                         sums_of_squares: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """R, Γ*, S1 and S2 as float arrays, checked to be 1-D of one shape."""
    R = np.asarray(retained, dtype=float)
    gmax = np.asarray(retained_max, dtype=float)
    S1 = np.asarray(sums, dtype=float)
    S2 = np.asarray(sums_of_squares, dtype=float)
    if not (R.shape == gmax.shape == S1.shape == S2.shape) or R.ndim != 1:
        raise DpoptInputError(f"the retained statistics must be 1-D of one shape; got {R.shape}, "
                              f"{gmax.shape}, {S1.shape}, {S2.shape}")
    return R, gmax, S1, S2

# ----------------------------------------------------------------------------------------------
# one grid, many Monte-Carlo runs (simulations, verify)


def _kept_mask(counts: np.ndarray, retained: np.ndarray) -> np.ndarray:
    offsets = np.concatenate(([0], np.cumsum(counts)[:-1]))
    rank = np.arange(int(counts.sum())) - np.repeat(offsets, counts)
    return rank < np.repeat(retained, counts)


def clipped_mean_variance_estimator(retained: Any | None = None) -> BatchedEstimator:
    """Batched ``samples (B, N), counts -> (B, 2)`` of ``(μ_clip, Var_clip)`` (for verify).

    ``retained=None`` keeps everything (BASELINE).
    """

    def estimator(samples: Any, counts: Any) -> np.ndarray:
        m = np.asarray(counts)
        x = np.atleast_2d(np.asarray(samples, dtype=float))
        g = m if retained is None else np.asarray(retained)
        kept = x[:, _kept_mask(m, g)]
        mu = kept.mean(axis=1)
        var = ((kept - mu[:, None]) ** 2).mean(axis=1)
        return np.stack([mu, var], axis=1)

    return estimator


def grid_sensitivities(retained: Any, bound: float) -> tuple[float, float]:
    """``(Δ_μ_clip, Δ_Var_clip)`` from :mod:`dpopt.calculus` (seed 002 eq. (9), Lemma III.3)."""
    from ..calculus import mean_sensitivity, variance_sensitivity

    return mean_sensitivity(retained, bound), variance_sensitivity(retained, bound)


def grid_release(
    samples: Any, counts: Any, bound: float, epsilon: float, *, retained: Any | None = None,
    rng: np.random.Generator, runs: int | None = None, mean_share: float = 0.5,
) -> Release:
    """CLIP (or BASELINE when ``retained`` is None) for one grid; ``values`` has shape ``(R, 2)``.

    The R runs are released as R grids of :func:`release_grids` with numpy Laplace noise.

    Parameters
    ----------
    samples : array_like, shape (N,) or (R, N)
        The grid's samples in [0, U], users contiguous.
    counts : array_like of int
        m_ℓ of the grid's users.
    bound : float
        U.
    epsilon : float
        Budget of the grid; ``mean_share·ε`` to the mean, the rest to the variance.
    retained : array_like of int, optional
        Γ_ℓ ∈ [0, m_ℓ], not all 0 (a suppressed user has Γ_ℓ = 0).
    rng : numpy.random.Generator
    runs : int, optional
    mean_share : float in (0, 1)
    """
    p = prepare(samples, counts, bound, epsilon, rng=rng, runs=runs)
    eps_mu, eps_var = split_budget(p.epsilon, mean_share, "mean_share")
    g = p.counts if retained is None else as_retained(retained, p.counts)
    kept = np.broadcast_to(p.samples[:, _kept_mask(p.counts, g)], (p.runs, int(g.sum())))
    rel = release_grids(
        retained=np.full(p.runs, float(g.sum())), retained_max=np.full(p.runs, float(g.max())),
        sums=kept.sum(axis=1), sums_of_squares=(kept**2).sum(axis=1), bound=p.bound,
        budget_mean=eps_mu, budget_variance=eps_var, noise=make_noise("laplace", sampler="numpy", rng=p.rng),
    )
    return Release(
        values=np.stack([rel.mean, rel.variance], axis=1),
        estimate=np.stack([rel.estimate_mean, rel.estimate_variance], axis=1),
        sensitivity=np.stack([rel.mean_sensitivity, rel.variance_sensitivity], axis=1),
        noise_scale=np.stack([rel.mean_noise_scale, rel.variance_noise_scale], axis=1),
        epsilon=p.epsilon,
        mechanism="BASELINE" if retained is None else "CLIP",
        budget={"mean": eps_mu, "variance": eps_var},
        details={"retained": g},
    )


def baseline_release(samples: Any, counts: Any, bound: float, epsilon: float, **kw: Any) -> Release:
    """BASELINE (seed 002 §III-A): :func:`grid_release` without clipping."""
    return grid_release(samples, counts, bound, epsilon, retained=None, **kw)


def clip_release(samples: Any, counts: Any, bound: float, epsilon: float, *, retained: Any, **kw: Any) -> Release:
    """CLIP (seed 002 §III-B): :func:`grid_release` keeping the first Γ_ℓ samples of each user."""
    return grid_release(samples, counts, bound, epsilon, retained=retained, **kw)
