"""Shared pieces of the mechanisms: data layout, validation, Laplace noise, the release record.

Data layout (used by every mechanism and by :mod:`dpopt.verify`)
----------------------------------------------------------------
A dataset of one partition is a flat array ``samples`` of length ``N = Σ_ℓ m_ℓ`` holding the
samples of user 1, then user 2, … (user ℓ owns the ``m_ℓ`` consecutive entries after the first
``m_1 + … + m_{ℓ−1}``), together with the public per-user counts ``counts = (m_1, …, m_L)``.
A leading axis stacks datasets: ``samples`` of shape ``(R, N)`` holds ``R`` datasets (one per
Monte-Carlo repetition), shape ``(N,)`` one dataset used by every repetition.

Every mechanism starts the same way: :func:`prepare` checks ε, the generator, the data and the
number of runs at once, and :func:`split_budget` splits ε between two steps (basic composition).
Noise is drawn as arrays of shape ``(R, …)`` from a :class:`numpy.random.Generator` passed in, by
:func:`dpopt.noise.laplace` (numpy, for simulation only, DESIGN.md convention 9): a production
release uses the exact sampler of :mod:`dpopt.noise`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._validation import DpoptInputError, as_counts, check_bound, check_epsilon, check_positive_int
from ..noise import check_rng, laplace

#: ``estimator(samples (B, N), counts) -> values (B,)`` or ``(B, d)``: the batched form of
#: :mod:`dpopt.verify`
BatchedEstimator = Callable[[Any, Any], np.ndarray]

__all__ = [
    "BatchedEstimator",
    "Release",
    "MechanismInput",
    "prepare",
    "split_budget",
    "as_samples",
    "check_rng",
    "resolve_runs",
    "user_sums",
    "user_means",
    "substitute_user_means",
    "laplace",
    "laplace_release",
]


@dataclass(frozen=True)
class Release:
    """Outcome of ``R`` independent runs of a mechanism.

    Attributes
    ----------
    values : ndarray, shape (R,) (or (R, 2) for mean and variance)
        The released (noisy) statistics, one per run.
    estimate : ndarray, same shape as ``values``
        The estimator before noise (the clipped statistic the noise protects).
    sensitivity : ndarray
        The user-level sensitivity used to scale the noise, per run (data-dependent for AKMV,
        Levy and Quantile, where it depends on a privately chosen threshold or interval).
    noise_scale : ndarray
        The Laplace scale ``b`` of the noise actually added (``E|Z| = b``), per run.
    epsilon : float
        Total privacy budget; ``budget`` lists how it was split (basic composition).
    mechanism : str
        Name of the mechanism.
    budget : dict
        Budget of each step, summing to ``epsilon``.
    details : dict
        Mechanism-specific extras (threshold, interval, number of arrays, ...).
    """

    values: np.ndarray
    estimate: np.ndarray
    sensitivity: np.ndarray
    noise_scale: np.ndarray
    epsilon: float
    mechanism: str
    budget: dict[str, float] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def runs(self) -> int:
        """Number of runs ``R``."""
        return int(self.values.shape[0])


def as_samples(
    samples: Any, counts: Any, bound: float, *, name: str = "samples"
) -> tuple[np.ndarray, np.ndarray, float]:
    """Validate ``(samples, counts, bound)``; return ``(samples2d (B, N), counts, U)``.

    ``samples`` has shape ``(N,)`` or ``(B, N)`` with ``N = Σ counts`` and values in ``[0, U]``.
    """
    m = as_counts(counts)
    U = check_bound(bound)
    try:
        arr = np.asarray(samples, dtype=float)
    except (TypeError, ValueError):
        raise DpoptInputError(f"`{name}` must be an array of numbers; got {samples!r:.80}") from None
    n = int(m.sum())
    if arr.ndim not in (1, 2) or arr.shape[-1] != n:
        raise DpoptInputError(
            f"`{name}` must have shape (N,) or (R, N) with N = sum(counts) = {n}; got shape {arr.shape}"
        )
    if arr.ndim == 1:
        arr = arr[None, :]
    if not np.all(np.isfinite(arr)):
        raise DpoptInputError(f"`{name}` must hold finite numbers")
    if arr.size and (arr.min() < 0 or arr.max() > U):
        bad = arr.min() if arr.min() < 0 else arr.max()
        raise DpoptInputError(f"`{name}` must lie in [0, bound] = [0, {U:g}] (found {bad:g})")
    return arr, m, U


def resolve_runs(batch: int, runs: Any) -> int:
    """Number of runs: ``runs`` if given (must equal the batch size unless the batch is 1)."""
    if runs is None:
        return batch
    r = check_positive_int(runs, "runs")
    if batch not in (1, r):
        raise DpoptInputError(
            f"`runs` must equal the number of stacked datasets ({batch}) or samples must be one "
            f"dataset; got runs={r}"
        )
    return r


def user_sums(samples: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per-user sums σ_ℓ, shape ``(B, L)`` (vectorised segment sums)."""
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    return np.add.reduceat(samples, starts, axis=-1)


def user_means(samples: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per-user means x̄_ℓ = σ_ℓ / m_ℓ, shape ``(B, L)``."""
    return user_sums(samples, counts) / counts


def substitute_user_means(samples: Any, counts: Any) -> np.ndarray:
    """Replace every sample of user ℓ by the user's mean (seed 000 §IV, seed 003 §IV-A).

    This leaves the sample mean, every per-user sum and hence vanilla Laplace and AKMV unchanged;
    it is a per-user map into [0, U], so no sensitivity changes.
    """
    arr = np.asarray(samples, dtype=float)
    m = np.asarray(counts)
    return np.repeat(user_means(arr, m), m, axis=-1)


def laplace_release(
    estimate: np.ndarray,
    sensitivity: float,
    epsilon: float,
    *,
    rng: np.random.Generator,
    runs: int,
    mechanism: str,
    details: dict[str, Any] | None = None,
    clip_to: float | None = None,
) -> Release:
    """One Laplace draw per run with a data-independent sensitivity, all of ``epsilon`` to it.

    ``estimate`` (one value per stacked dataset, broadcast to ``runs``) is released as
    ``estimate + Lap(sensitivity/epsilon)``; ``clip_to=U`` clips the release to ``[0, U]``
    (post-processing). Shared by Laplace, OPT-worst-case and Array-Averaging.
    """
    est = np.broadcast_to(np.asarray(estimate, dtype=float), (runs,)).copy()
    scale = sensitivity / epsilon
    values = est + laplace(rng, scale, (runs,))
    if clip_to is not None:
        values = np.clip(values, 0.0, clip_to)
    return Release(
        values=values,
        estimate=est,
        sensitivity=np.full(runs, sensitivity),
        noise_scale=np.full(runs, scale),
        epsilon=epsilon,
        mechanism=mechanism,
        budget={"mean": epsilon},
        details=details or {},
    )


def check_common(epsilon: Any, rng: Any) -> tuple[float, np.random.Generator]:
    """Validate ``epsilon`` and ``rng`` together."""
    return check_epsilon(epsilon), check_rng(rng)


@dataclass(frozen=True, eq=False)
class MechanismInput:
    """Validated input of a mechanism: ``samples`` (B, N), ``counts``, U, ε, generator, runs R."""

    samples: np.ndarray
    counts: np.ndarray
    bound: float
    epsilon: float
    rng: np.random.Generator
    runs: int


def prepare(samples: Any, counts: Any, bound: float, epsilon: float, *, rng: Any, runs: Any) -> MechanismInput:
    """Check ε and ``rng`` (:func:`check_common`), the data (:func:`as_samples`) and the runs."""
    eps, gen = check_common(epsilon, rng)
    x, m, U = as_samples(samples, counts, bound)
    return MechanismInput(x, m, U, eps, gen, resolve_runs(x.shape[0], runs))


def split_budget(epsilon: float, share: float, name: str) -> tuple[float, float]:
    """``(share·ε, ε − share·ε)``: two steps composed (basic composition); ``share`` ∈ (0, 1)."""
    if not 0.0 < share < 1.0:
        raise DpoptInputError(f"`{name}` must lie in (0, 1); got {share!r}")
    first = share * epsilon
    return first, epsilon - first
