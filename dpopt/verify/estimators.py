"""Batched reference estimators for :mod:`dpopt.verify` (``f(samples, counts) -> values``).

These are direct transcriptions of the estimators' definitions, independent of the closed forms
they are used to check: the plain mean and population variance (seed 002 eq. (3)–(4)), the
clipped mean and variance that keep the first Γ_ℓ samples of each user (eq. (6)–(7)), interval
clipping of every sample of user ℓ to [a_ℓ, b_ℓ] (seed 000 §III) and the ℓ1 projection onto the
annulus ``a_ℓ ≤ ‖y‖₁ ≤ b_ℓ`` (seed 001 §III-A, canonical scaling rule, ERRATA E8).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._validation import DpoptInputError, as_counts, as_retained

__all__ = [
    "mean",
    "variance",
    "clipped_mean",
    "clipped_variance",
    "interval_clipped_mean",
    "annulus_clipped_mean",
    "kept_mask",
]

Estimator = Callable[[np.ndarray, np.ndarray], np.ndarray]


def mean(samples: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Sample mean of all N samples (vector mean for d ≥ 2)."""
    return samples.mean(axis=1)


def variance(samples: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Population variance ``(1/N)·Σ (x − μ)²`` of all samples (scalar samples)."""
    return samples.var(axis=1)


def kept_mask(counts: Any, retained: Any) -> np.ndarray:
    """Boolean mask over the N samples: the first Γ_ℓ samples of each user."""
    m = as_counts(counts)
    g = as_retained(retained, m)
    pos = np.arange(int(m.sum())) - np.repeat(np.concatenate([[0], np.cumsum(m)[:-1]]), m)
    return pos < np.repeat(g, m)


def clipped_mean(retained: Any) -> Estimator:
    """μ_clip: the mean of the first Γ_ℓ samples of each user (seed 002 eq. (6))."""

    def f(samples: np.ndarray, counts: np.ndarray) -> np.ndarray:
        mask = kept_mask(counts, retained)
        return samples[:, mask].mean(axis=1)

    return f


def clipped_variance(retained: Any) -> Estimator:
    """Var_clip: the population variance of the kept samples (seed 002 eq. (7))."""

    def f(samples: np.ndarray, counts: np.ndarray) -> np.ndarray:
        mask = kept_mask(counts, retained)
        return samples[:, mask].var(axis=1)

    return f


def _per_sample(values: Any, counts: np.ndarray) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim == 0:
        return np.full(int(counts.sum()), float(arr))
    if arr.shape[0] == counts.shape[0] and (arr.ndim == 2 or arr.shape == counts.shape):
        return np.repeat(arr, counts, axis=0)
    return arr  # already per sample


def _per_coordinate(bounds: np.ndarray, d: int) -> np.ndarray:
    """Per-sample bounds ``(N,)`` or ``(N, d)`` as ``(N, d)``; any other shape is refused."""
    if bounds.ndim == 1:
        return np.repeat(bounds[:, None], d, axis=1)
    if bounds.ndim == 2 and bounds.shape[1] == d:
        return bounds
    raise DpoptInputError(f"clipping bounds of shape {bounds.shape} do not fit samples of dimension {d}: "
                          f"give one bound per user or sample, or one per (user or sample, coordinate)")


def interval_clipped_mean(lower: Any, upper: Any) -> Estimator:
    """Mean after clipping each sample of user ℓ to ``[a_ℓ, b_ℓ]`` (per-user or per-sample bounds).

    Vector samples (``samples`` of shape ``(B, N, d)``, e.g. a cube grid, ``value_grid(...,
    geometry="cube")``) are clipped coordinate by coordinate: bounds per user or per sample apply to
    every coordinate, bounds of shape ``(L, d)`` or ``(N, d)`` per coordinate.
    """

    def f(samples: np.ndarray, counts: np.ndarray) -> np.ndarray:
        lo = _per_sample(lower, counts)
        hi = _per_sample(upper, counts)
        if samples.ndim == 3:
            lo, hi = _per_coordinate(lo, samples.shape[2]), _per_coordinate(hi, samples.shape[2])
        return np.clip(samples, lo, hi).mean(axis=1)

    return f


def annulus_clipped_mean(lower: Any, upper: Any) -> Estimator:
    """Mean after the ℓ1 projection of each sample of user ℓ onto ``a_ℓ ≤ ‖y‖₁ ≤ b_ℓ`` (y ≥ 0).

    Scaling rule of seed 001 App. A: ``y = (b/‖x‖₁)·x`` above, ``(a/‖x‖₁)·x`` below, and the
    fixed point ``a·e₁`` for ``x = 0`` (ERRATA E8: any point of the face has the same error).
    """

    def f(samples: np.ndarray, counts: np.ndarray) -> np.ndarray:
        lo = _per_sample(lower, counts)[None, :]
        hi = _per_sample(upper, counts)[None, :]
        s = samples.sum(axis=2)
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where(s > hi, hi / s, np.where((s < lo) & (s > 0), lo / s, 1.0))
        y = samples * scale[..., None]
        zero = (s == 0) & (lo > 0)
        if np.any(zero):
            e1 = np.zeros(samples.shape[2])
            e1[0] = 1.0
            y = np.where(zero[..., None], np.broadcast_to(lo[..., None], s.shape + (1,)) * e1, y)
        return y.mean(axis=1)

    return f
