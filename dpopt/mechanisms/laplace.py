"""Vanilla Laplace mechanism on the user-level sample mean (seed 000 Thm II.1, seed 003 Baseline).

Estimator: the sample mean ``f(D) = Σ_ℓ Σ_j x_j^(ℓ) / n`` with ``n = Σ_ℓ m_ℓ``.
Sensitivity: ``Δ_f = U·m*/n`` (seed 000 eq. (6) with d = 1; seed 003 eq. (2); seed 002 eq. (5)):
one user moves at most ``m*`` samples by at most ``U`` each.
Budget: all of ε to one Laplace draw, ``Lap(Δ_f/ε)``; average error ``E|Z| = U·m*/(ε·n)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._common import Release, laplace_release, prepare

__all__ = ["laplace_mean", "mean_estimator", "laplace_sensitivity"]


def mean_estimator(samples: Any, counts: Any) -> np.ndarray:
    """The sample mean of each stacked dataset, ``samples (B, N) -> (B,)`` (for :mod:`dpopt.verify`)."""
    arr = np.atleast_2d(np.asarray(samples, dtype=float))
    return arr.mean(axis=-1)


def laplace_sensitivity(counts: Any, bound: float) -> float:
    """``Δ_f = U·m*/n``, the user-level sensitivity of the sample mean."""
    m = np.asarray(counts)
    return float(bound) * float(m.max()) / float(m.sum())


def laplace_mean(
    samples: Any, counts: Any, bound: float, epsilon: float, *, rng: np.random.Generator, runs: int | None = None,
) -> Release:
    """Release the sample mean with Laplace noise of scale ``U·m*/(n·ε)`` (user-level ε-DP).

    Parameters
    ----------
    samples : array_like, shape (N,) or (R, N)
        Samples in [0, U], users contiguous (see :mod:`dpopt.mechanisms._common`).
    counts : array_like of int
        Public per-user counts m_ℓ ≥ 1.
    bound : float
        U.
    epsilon : float
        Privacy budget ε (all of it to the one Laplace draw).
    rng : numpy.random.Generator
    runs : int, optional
        Number of repetitions R when ``samples`` is one dataset.
    """
    p = prepare(samples, counts, bound, epsilon, rng=rng, runs=runs)
    return laplace_release(p.samples.mean(axis=-1), laplace_sensitivity(p.counts, p.bound), p.epsilon, rng=p.rng,
                           runs=p.runs, mechanism="Laplace")
