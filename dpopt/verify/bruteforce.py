"""Brute-force worst-case search over small datasets (the ground truth for every formula).

A dataset has L users with public counts m_ℓ; every sample takes a value from a finite grid of
values in ``[0, U]`` (d = 1) or in the simplex ``{x ≥ 0, ‖x‖₁ ≤ U}`` (d ≥ 2), a grid that always
contains 0 and U (resp. 0 and the vertices U·e_i). All ``k^N`` datasets are enumerated at once
(``N = Σ m_ℓ``), so keep ``k^N`` below a few million.

Estimators are **batched** callables ``f(samples, counts) -> values``: ``samples`` has shape
``(B, N)`` (or ``(B, N, d)``), user ℓ's samples are the consecutive block
``offsets[ℓ]:offsets[ℓ+1]``, and the result has shape ``(B,)`` or ``(B, d_out)``. Wrap a
per-dataset function with :func:`batched`. Vector outputs are compared in the ℓ1 norm.

Two searches:

* :func:`sensitivity` — the largest change ``‖f(D) − f(D')‖₁`` over user-level neighbours (same
  counts, one user's samples replaced), i.e. Definition II.2 of seeds 001/002;
* :func:`worst_case_error` — the largest ``‖θ(D) − f(D)‖₁`` over datasets, the worst-case bias of an
  estimator f of a target θ (the plain mean or variance by default).

Both return a :class:`BruteForceResult` with the value, the formula's value if one is given, and the
dataset(s) attaining it. A finite grid gives a lower bound on a supremum; the grid includes the
extreme points where the papers' maximisers lie.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import DpoptInputError, as_counts, check_bound, check_dim, check_positive_int

__all__ = [
    "BruteForceResult",
    "value_grid",
    "enumerate_datasets",
    "sensitivity",
    "worst_case_error",
    "batched",
    "split_users",
    "DEFAULT_MAX_DATASETS",
]

DEFAULT_MAX_DATASETS = 4_000_000

Estimator = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class BruteForceResult:
    """Outcome of a brute-force search.

    Attributes
    ----------
    value : float
        The largest change (``sensitivity``) or error (``worst_case_error``) found.
    formula : float or None
        The closed form being checked, if given.
    dataset : list of ndarray
        Per-user samples of a maximising dataset.
    neighbour : list of ndarray or None
        Its maximising neighbour (``sensitivity`` only).
    user : int or None
        Index of the user whose samples differ (``sensitivity`` only).
    n_datasets : int
        Number of datasets enumerated.
    """

    value: float
    formula: float | None
    dataset: list[np.ndarray]
    neighbour: list[np.ndarray] | None
    user: int | None
    n_datasets: int

    @property
    def gap(self) -> float:
        """``formula − value`` (positive: the formula is larger than anything found)."""
        if self.formula is None:
            raise ValueError("no formula value was given")
        return self.formula - self.value

    def agrees(self, *, rtol: float = 1e-9, atol: float = 1e-12) -> bool:
        """Whether brute force and formula coincide to the tolerance."""
        if self.formula is None:
            raise ValueError("no formula value was given")
        return math.isclose(self.value, self.formula, rel_tol=rtol, abs_tol=atol)

    def respects(self, *, atol: float = 1e-12) -> bool:
        """Whether the formula is an upper bound of the brute-force value (``value ≤ formula``)."""
        if self.formula is None:
            raise ValueError("no formula value was given")
        return self.value <= self.formula + atol


def value_grid(bound: float, *, levels: int = 5, dim: int = 1, extra: Sequence[Any] = ()) -> np.ndarray:
    """A grid of sample values that contains 0 and U.

    d = 1: ``levels`` equally spaced values ``0, U/(levels−1), …, U``.
    d ≥ 2: the points of the simplex ``{x ≥ 0, ‖x‖₁ ≤ U}`` whose coordinates are multiples of
    ``U/(levels−1)``; ``extra`` adds points (e.g. ``1e-6·e₂``, near the origin along one axis).
    """
    U = check_bound(bound)
    k = check_positive_int(levels, "levels", minimum=2)
    d = check_dim(dim)
    step = U / (k - 1)
    if d == 1:
        pts = np.linspace(0.0, U, k)
        if len(extra):
            pts = np.unique(np.concatenate([pts, np.asarray(extra, float).ravel()]))
        return pts
    ticks = np.stack(np.meshgrid(*[np.arange(k)] * d, indexing="ij"), axis=-1).reshape(-1, d)
    pts = ticks[ticks.sum(axis=1) <= k - 1] * step
    if len(extra):
        pts = np.unique(np.concatenate([pts, np.asarray(extra, float).reshape(-1, d)]), axis=0)
    return pts


def split_users(counts: np.ndarray) -> np.ndarray:
    """Offsets of each user's block of samples: user ℓ is ``offsets[ℓ]:offsets[ℓ+1]``."""
    return np.concatenate([[0], np.cumsum(counts)])


def enumerate_datasets(counts: Any, values: np.ndarray, *, max_datasets: int = DEFAULT_MAX_DATASETS) -> np.ndarray:
    """All datasets with the given counts and per-sample values from ``values``.

    Returns an array of shape ``(k^N, N)`` (or ``(k^N, N, d)``) in lexicographic order, user 1's
    samples most significant.
    """
    m = as_counts(counts)
    N = int(m.sum())
    k = len(values)
    total = k**N
    if total > max_datasets:
        raise DpoptInputError(
            f"brute force over {k}^{N} = {total} datasets exceeds `max_datasets` = {max_datasets}; "
            "use fewer samples or fewer grid values"
        )
    idx = np.stack(np.unravel_index(np.arange(total), (k,) * N), axis=1) if N else np.zeros((1, 0), int)
    return np.asarray(values)[idx]


def _as_2d(values: np.ndarray, B: int) -> np.ndarray:
    out = np.asarray(values, dtype=float)
    if out.shape[0] != B:
        raise DpoptInputError(f"estimator must return one value per dataset ({B}); got shape {out.shape}")
    return out.reshape(B, -1)


def _users(samples_row: np.ndarray, offsets: np.ndarray) -> list[np.ndarray]:
    return [samples_row[offsets[i] : offsets[i + 1]].copy() for i in range(offsets.size - 1)]


def sensitivity(
    estimator: Estimator,
    counts: Any,
    bound: float,
    *,
    values: np.ndarray | None = None,
    levels: int = 5,
    dim: int = 1,
    formula: float | None = None,
    max_datasets: int = DEFAULT_MAX_DATASETS,
) -> BruteForceResult:
    """Largest ``‖f(D) − f(D')‖₁`` over user-level neighbours D ~ D' (brute force).

    Parameters
    ----------
    estimator : callable
        Batched estimator ``f(samples, counts)`` (see module docstring).
    counts : array_like of int
        Public m_ℓ.
    bound : float
        U.
    values : ndarray, optional
        The grid of sample values (default :func:`value_grid` with ``levels`` and ``dim``).
    formula : float, optional
        The closed form to compare with.

    Notes
    -----
    The enumeration order makes the function values an array of shape
    ``(k^{m_1}, …, k^{m_L})``; for user ℓ the largest change is ``max − min`` along axis ℓ, and
    for vector outputs ``max_{u,v} ‖u − v‖₁ = max_s (max s·u − min s·v)`` over sign vectors s.
    """
    m = as_counts(counts)
    vals = value_grid(bound, levels=levels, dim=dim) if values is None else np.asarray(values, float)
    data = enumerate_datasets(m, vals, max_datasets=max_datasets)
    B = data.shape[0]
    out = _as_2d(estimator(data, m), B)
    d_out = out.shape[1]
    if d_out == 1:
        signs = np.ones((1, 1))
    else:
        signs = np.stack(np.meshgrid(*[[1.0, -1.0]] * d_out, indexing="ij"), -1).reshape(-1, d_out)
        signs = signs[signs[:, 0] > 0]
    k = len(vals)
    shape = tuple(int(k**mi) for mi in m)
    best = (-np.inf, 0, 0, 0)
    for s in signs:
        h = (out @ s).reshape(shape)
        for user in range(m.size):
            hi = h.max(axis=user)
            lo = h.min(axis=user)
            diff = hi - lo
            pos = int(np.argmax(diff))
            if diff.flat[pos] > best[0]:
                other = np.unravel_index(pos, diff.shape)
                col = np.moveaxis(h, user, 0)[(slice(None),) + tuple(other)]
                best = (float(diff.flat[pos]), user, tuple(other), (int(np.argmax(col)), int(np.argmin(col))))
    value, user, other, (i_hi, i_lo) = best
    full_hi = list(other[:user]) + [i_hi] + list(other[user:])
    full_lo = list(other[:user]) + [i_lo] + list(other[user:])
    b_hi = int(np.ravel_multi_index(full_hi, shape))
    b_lo = int(np.ravel_multi_index(full_lo, shape))
    offsets = split_users(m)
    # the ℓ1 change of the maximising pair (equals `value` by construction)
    change = float(np.abs(out[b_hi] - out[b_lo]).sum())
    return BruteForceResult(
        value=max(value, change) if d_out > 1 else value,
        formula=None if formula is None else float(formula),
        dataset=_users(data[b_hi], offsets),
        neighbour=_users(data[b_lo], offsets),
        user=int(user),
        n_datasets=B,
    )


def _target(target: str | Estimator) -> Estimator:
    if callable(target):
        return target
    from . import estimators

    if target == "mean":
        return estimators.mean
    if target == "variance":
        return estimators.variance
    raise DpoptInputError(f"`target` must be 'mean', 'variance' or a callable; got {target!r}")


def worst_case_error(
    estimator: Estimator,
    counts: Any,
    bound: float,
    *,
    target: str | Estimator = "mean",
    values: np.ndarray | None = None,
    levels: int = 5,
    dim: int = 1,
    formula: float | None = None,
    max_datasets: int = DEFAULT_MAX_DATASETS,
) -> BruteForceResult:
    """Largest ``‖θ(D) − f(D)‖₁`` over all datasets (the worst-case bias of f), by brute force.

    ``target`` is θ: ``"mean"`` (default), ``"variance"`` (population variance, seed 002 eq. (4)) or
    a batched callable.
    """
    m = as_counts(counts)
    vals = value_grid(bound, levels=levels, dim=dim) if values is None else np.asarray(values, float)
    data = enumerate_datasets(m, vals, max_datasets=max_datasets)
    B = data.shape[0]
    est = _as_2d(estimator(data, m), B)
    tgt = _as_2d(_target(target)(data, m), B)
    if est.shape != tgt.shape:
        raise DpoptInputError(f"estimator and target shapes differ: {est.shape} vs {tgt.shape}")
    err = np.abs(tgt - est).sum(axis=1)
    b = int(np.argmax(err))
    return BruteForceResult(
        value=float(err[b]),
        formula=None if formula is None else float(formula),
        dataset=_users(data[b], split_users(m)),
        neighbour=None,
        user=None,
        n_datasets=B,
    )


def batched(func: Callable[[list[np.ndarray]], Any]) -> Estimator:
    """Turn a per-dataset estimator ``func(list of per-user sample arrays)`` into a batched one.

    Convenient for research code; slower than a vectorised estimator (one Python call per dataset).
    """

    def wrapper(samples: np.ndarray, counts: np.ndarray) -> np.ndarray:
        offsets = split_users(np.asarray(counts))
        return np.asarray([np.asarray(func(_users(row, offsets)), float) for row in samples])

    wrapper.__doc__ = func.__doc__
    return wrapper
