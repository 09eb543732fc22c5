"""OPT-worst-case ("OPT-wc", seed 000 §IV-D, seed 001 §IV-B): the worst-case-optimal clipping.

Clipping (seed 000 Thm III.1, d = 1): every sample of user ℓ is projected onto ``[a_ℓ, b_ℓ]`` with
``a_ℓ = max{(U·m_ℓ − T_ε)/(2m_ℓ), 0}``, ``b_ℓ = U − a_ℓ``, where ``T_ε`` is the ⌈2/ε⌉-th largest of
``{U·m_ℓ}`` (0 if ⌈2/ε⌉ > L). The bounds come from :func:`dpopt.clipping.optimal_clipping`.

Estimator: ``f*(D) = Σ_ℓ Σ_j Π_[a_ℓ,b_ℓ](x_j^(ℓ)) / n``.
Sensitivity: ``Δ_{f*} = max_ℓ m_ℓ·(b_ℓ − a_ℓ)/n = T_ε/n`` (seed 000 eq. (14)): one user's clipped
samples move within an interval of length ``b_ℓ − a_ℓ`` each. Valid for d = 1 (ERRATA E3 for d ≥ 2).
Budget: all of ε to one Laplace draw ``Lap(T_ε/(n·ε))``. When ``T_ε = 0`` no noise is added and
the output is ``U/2`` (every interval is the point ``{U/2}``).

The paper's average-case experiments first replace each user's samples by the user's mean
(``substitute_means=True``); the sensitivity is unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._common import BatchedEstimator, Release, laplace_release, prepare, substitute_user_means

__all__ = ["opt_worst_case", "opt_worst_case_bounds", "clipped_mean_estimator"]


def opt_worst_case_bounds(counts: Any, bound: float, epsilon: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Per-user bounds ``(a, b)`` and threshold ``T_ε`` of seed 000 Theorem III.1 (d = 1).

    Taken from :func:`dpopt.clipping.optimal_clipping` (the clipping model's closed form).
    """
    from ..clipping import optimal_clipping

    plan = optimal_clipping(counts, bound, epsilon)
    return np.asarray(plan.lower, float), np.asarray(plan.upper, float), float(plan.threshold)


def clipped_mean_estimator(lower: Any, upper: Any, *, substitute_means: bool = False) -> BatchedEstimator:
    """Batched estimator ``samples (B, N), counts -> (B,)`` of interval clipping (for verify).

    ``lower``/``upper`` are per-user bounds (length L).
    """
    lo = np.asarray(lower, float)
    hi = np.asarray(upper, float)

    def estimator(samples: Any, counts: Any) -> np.ndarray:
        m = np.asarray(counts)
        x = np.atleast_2d(np.asarray(samples, dtype=float))
        if substitute_means:
            x = substitute_user_means(x, m)
        clipped = np.clip(x, np.repeat(lo, m), np.repeat(hi, m))
        return clipped.mean(axis=-1)

    return estimator


def opt_worst_case(
    samples: Any, counts: Any, bound: float, epsilon: float, *, rng: np.random.Generator, runs: int | None = None,
    substitute_means: bool = False,
    bounds: tuple[Any, Any] | None = None,
) -> Release:
    """Release the OPT-worst-case clipped mean (user-level ε-DP, d = 1).

    Parameters
    ----------
    samples : array_like, shape (N,) or (R, N)
        Samples in [0, U], users contiguous.
    counts : array_like of int
        Public per-user counts m_ℓ.
    bound : float
        U.
    epsilon : float
        Privacy budget (all to the Laplace draw; the bounds depend only on public counts).
    rng : numpy.random.Generator
    runs : int, optional
        Repetitions when ``samples`` is one dataset.
    substitute_means : bool
        Replace each user's samples by their mean before clipping (the papers' experiments).
    bounds : (lower, upper), optional
        Per-user clipping bounds to use instead of Theorem III.1 (any data-independent interval
        clipping; the sensitivity is then ``max_ℓ m_ℓ(b_ℓ − a_ℓ)/n``).
    """
    p = prepare(samples, counts, bound, epsilon, rng=rng, runs=runs)
    x, m, U, eps = p.samples, p.counts, p.bound, p.epsilon
    if bounds is None:
        lo, hi, T = opt_worst_case_bounds(m, U, eps)
    else:
        from .._validation import as_interval_bounds

        lo, hi = as_interval_bounds(bounds[0], bounds[1], m.size, U)
        T = float(np.max(m * (hi - lo)))
    n = float(m.sum())
    est = clipped_mean_estimator(lo, hi, substitute_means=substitute_means)(x, m)
    sens = float(np.max(m * (hi - lo))) / n  # seed 000 eq. (14): T_ε/n for Theorem III.1's bounds
    return laplace_release(est, sens, eps, rng=p.rng, runs=p.runs, mechanism="OPT-worst-case",
                           details={"threshold": T, "lower": lo, "upper": hi})
