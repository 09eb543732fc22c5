"""AKMV: Amin, Kulesza, Muñoz & Vassilvitskii (ICML 2019) as instantiated in seed 000 §IV-A.

Reduction to item level: user ℓ's sum ``σ_ℓ = Σ_j x_j^(ℓ) ∈ [0, U·m_ℓ]``; ``f(D) = Σ_ℓ σ_ℓ / n``.

Steps (budget ``ε = ε' + ε''``, the papers use ``ε' = ε'' = ε/2``):

1. With ``ε'``: privately estimate the ``k``-th largest ``σ_ℓ``, ``k = ⌈1/ε''⌉`` (= ⌈2/ε⌉ for the
   equal split, ERRATA E6), by Smith's exponential-mechanism quantile
   (:func:`~dpopt.mechanisms.private_quantile.smith_quantile`) on the public range
   ``[0, U·m*]``, target gap ``t = L − k + 1`` (a point just above the k-th largest value; when
   ``k > L`` the target is below every value and ``T`` is pulled towards 0), rank-utility
   sensitivity 1 (one user changes one σ). Call the estimate ``T``.
2. With ``ε''``: release ``ĝ_T = Σ_ℓ Π_[0,T](σ_ℓ)/n + Lap(T/(n·ε''))``.

Sensitivity of step 2 given T: ``Δ_{ĝ_T} = T/n`` (seed 000 eq. (15)). The paper leaves the
"modification" of Smith's algorithm, the rank convention and the behaviour for ``k > L``
unspecified; the choices above are parameters (``target_offset``, ``quantile_share``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._common import BatchedEstimator, Release, laplace, prepare, split_budget, user_sums
from .private_quantile import smith_quantile

__all__ = ["akmv", "akmv_rank", "akmv_threshold", "sum_clipped_estimator"]

_RANK_TOL = 1e-9


def akmv_rank(epsilon_release: float) -> int:
    """``k = ⌈1/ε''⌉`` (ERRATA E6), robust to ε given by floating-point arithmetic."""
    return max(1, math.ceil(1.0 / epsilon_release - _RANK_TOL))


def akmv_threshold(
    sums: Any, bound_sum: float, epsilon_quantile: float, k: int, *, rng: np.random.Generator, runs: int = 1,
    target_offset: float = 1.0,
) -> np.ndarray:
    """Private estimate ``T`` of the k-th largest per-user sum (Smith 2011, Alg. 2).

    ``sums`` shape ``(L,)`` or ``(B, L)``; target gap ``L − k + target_offset``.
    """
    s = np.atleast_2d(np.asarray(sums, dtype=float))
    L = s.shape[1]
    return smith_quantile(
        s, L - k + target_offset, epsilon_quantile, lower=0.0, upper=bound_sum,
        sensitivity=1.0, rng=rng, runs=runs,
    )


def sum_clipped_estimator(threshold: float) -> BatchedEstimator:
    """Batched estimator ``Σ_ℓ Π_[0,T](σ_ℓ)/n``, ``samples (B, N), counts -> (B,)`` (for verify)."""

    def estimator(samples: Any, counts: Any) -> np.ndarray:
        m = np.asarray(counts)
        x = np.atleast_2d(np.asarray(samples, dtype=float))
        return np.clip(user_sums(x, m), 0.0, threshold).sum(axis=-1) / m.sum()

    return estimator


def akmv(
    samples: Any, counts: Any, bound: float, epsilon: float, *, rng: np.random.Generator, runs: int | None = None,
    quantile_share: float = 0.5,
    target_offset: float = 1.0,
) -> Release:
    """Release the AKMV estimate of the mean (user-level ε-DP by basic composition).

    Parameters
    ----------
    samples, counts, bound, epsilon, rng, runs
        As for :func:`dpopt.mechanisms.laplace.laplace_mean`; per-user sums lie in ``[0, U·m*]``;
        ``quantile_share·ε`` to the quantile, the rest to the release.
    quantile_share : float in (0, 1)
        ε'/ε (papers: 1/2).
    target_offset : float
        Target gap ``L − k + target_offset`` of the private quantile (1: just above the k-th
        largest sum; 0: just below it).
    """
    p = prepare(samples, counts, bound, epsilon, rng=rng, runs=runs)
    eps_q, eps_r = split_budget(p.epsilon, quantile_share, "quantile_share")
    n = float(p.counts.sum())
    k = akmv_rank(eps_r)
    sums = user_sums(p.samples, p.counts)  # (B, L)
    T = akmv_threshold(sums, p.bound * float(p.counts.max()), eps_q, k, rng=p.rng, runs=p.runs,
                       target_offset=target_offset)
    est = np.clip(sums, 0.0, T[:, None]).sum(axis=-1) / n
    sens = T / n
    scale = sens / eps_r
    values = est + laplace(p.rng, scale, (p.runs,))
    return Release(values=values, estimate=est, sensitivity=sens, noise_scale=scale, epsilon=p.epsilon,
                   mechanism="AKMV", budget={"quantile": eps_q, "mean": eps_r}, details={"threshold": T, "rank": k})
