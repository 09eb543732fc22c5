"""BASELINE and CLIP for one grid: private sample mean and variance (seed 002 §III).

Estimators (seed 002 eqs. (3), (4), (6), (7)): CLIP keeps the first ``Γ_ℓ`` samples of user ℓ
(a rule fixed from public counts, e.g. the suppression plan of CLIP-USER) and releases

* ``μ_clip = Σ_ℓ Σ_{j≤Γ_ℓ} x_j^(ℓ) / R``, ``R = Σ_ℓ Γ_ℓ``;
* ``Var_clip = Σ_ℓ Σ_{j≤Γ_ℓ} (x_j^(ℓ) − μ_clip)² / R`` (population variance).

BASELINE is CLIP with ``Γ_ℓ = m_ℓ``.

Sensitivities (from :mod:`dpopt.calculus`): ``Δ_μ = U·Γ*/R`` (eq. (9)) and the exact
``Δ_Var`` of Lemma III.3 / Proposition III.1 (``U²Γ*(R − Γ*)/R²`` if ``R > 2Γ*``, else ``U²/4``
or ``U²/4·(1 − 1/R²)``).

Budget: ``ε/2`` to each release, ``Lap(2Δ_μ/ε)`` and ``Lap(2Δ_Var/ε)`` (basic composition);
``mean_share`` changes the split (seed 002 §III-A remark).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import DpoptInputError, as_retained
from ._common import BatchedEstimator, Release, as_samples, check_common, laplace, resolve_runs

__all__ = ["grid_release", "baseline_release", "clip_release", "clipped_mean_variance_estimator",
           "grid_sensitivities"]


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
    samples: Any,
    counts: Any,
    bound: float,
    epsilon: float,
    *,
    retained: Any | None = None,
    rng: np.random.Generator,
    runs: int | None = None,
    mean_share: float = 0.5,
) -> Release:
    """CLIP (or BASELINE when ``retained`` is None) for one grid; ``values`` has shape ``(R, 2)``.

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
    eps, rng = check_common(epsilon, rng)
    if not 0.0 < mean_share < 1.0:
        raise DpoptInputError(f"`mean_share` must lie in (0, 1); got {mean_share!r}")
    x, m, U = as_samples(samples, counts, bound)
    R = resolve_runs(x.shape[0], runs)
    g = m if retained is None else as_retained(retained, m)
    est = np.broadcast_to(clipped_mean_variance_estimator(g)(x, m), (R, 2)).copy()
    d_mu, d_var = grid_sensitivities(g, U)
    eps_mu = mean_share * eps
    eps_var = eps - eps_mu
    scale = np.array([d_mu / eps_mu, d_var / eps_var])
    values = est + laplace(rng, scale, (R, 2))
    return Release(
        values=values,
        estimate=est,
        sensitivity=np.tile([d_mu, d_var], (R, 1)),
        noise_scale=np.tile(scale, (R, 1)),
        epsilon=eps,
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
