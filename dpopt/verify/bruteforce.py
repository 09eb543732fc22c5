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
dataset(s) attaining it.

A finite grid only gives a lower bound on a supremum, and the maximiser may lie between the levels
(the signed worst case of Var_clip − Var for four one-sample users keeping three has its dropped
sample at U/3: 0.05556·U², while the 5-level grid finds 0.05425·U²). So, by default, both searches
then **refine** the best grid points continuously: a pattern search over every free coordinate
(each sample value; for d ≥ 2 each coordinate within the simplex), starting with a line search over
the whole range and shrinking the step to 1e-9·U. The result records the grid's value
(``grid_value``), the refined one (``value``) and whether refinement improved on the grid
(``between_levels``); ``agrees`` compares the refined value. With ``refine=False`` the value is the
grid's and the result says it is a lower bound for that level spacing (``spacing``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import DpoptInputError, as_counts, check_bound, check_dim, check_positive_int
from .estimators import mean as _mean_estimator
from .estimators import variance as _variance_estimator

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
    #: the best value on the level grid alone (before refinement)
    grid_value: float = math.nan
    #: whether the continuous refinement ran
    refined: bool = False
    #: the largest gap between consecutive levels (d = 1) or the simplex grid step (d ≥ 2)
    spacing: float = math.nan
    #: ``"both"`` (‖θ − f‖₁), ``"over"`` (f − θ) or ``"under"`` (θ − f); sensitivity: ``"both"``
    side: str = "both"

    @property
    def between_levels(self) -> bool:
        """Whether refinement found a larger value than every dataset of the level grid."""
        return self.refined and self.value > self.grid_value + 1e-12 * max(1.0, abs(self.grid_value))

    @property
    def is_lower_bound(self) -> bool:
        """True when ``value`` is only a grid lower bound (no refinement ran)."""
        return not self.refined

    def summary(self) -> str:
        """One line: the value, how it was found, and the comparison with the formula."""
        how = (f"refined continuously from the grid's {self.grid_value:.6g}" if self.between_levels
               else "grid maximum confirmed by continuous refinement" if self.refined
               else f"lower bound on a grid of spacing {self.spacing:.4g} (no refinement)")
        if self.formula is None:
            return f"worst case {self.value:.6g} ({how})"
        verdict = ("agrees" if self.agrees() and self.refined else
                   "agrees on the grid only (refine to confirm)" if self.agrees() else
                   "formula is an upper bound" if self.respects() else "formula is BROKEN")
        return f"worst case {self.value:.6g} vs formula {self.formula:.6g}: {verdict} ({how})"

    def __repr__(self) -> str:
        return f"BruteForceResult({self.summary()}, datasets={self.n_datasets})"

    def to_frame(self) -> Any:
        """The maximising dataset as a table: one row per sample (``user``, ``sample``, ``value``
        and, for :func:`sensitivity`, ``neighbour``); vector samples give one column per coordinate."""
        import pandas as pd

        rows = []
        for u, xs in enumerate(self.dataset):
            other = None if self.neighbour is None else self.neighbour[u]
            for j, x in enumerate(np.atleast_1d(xs)):
                row: dict[str, Any] = {"user": u, "sample": j}
                xv = np.atleast_1d(x)
                if xv.size == 1:
                    row["value"] = float(xv[0])
                    if other is not None:
                        row["neighbour"] = float(np.atleast_1d(other[j])[0])
                else:
                    row.update({f"value_{i}": float(v) for i, v in enumerate(xv)})
                    if other is not None:
                        row.update({f"neighbour_{i}": float(v) for i, v in enumerate(np.atleast_1d(other[j]))})
                rows.append(row)
        return pd.DataFrame(rows).set_index(["user", "sample"])

    @property
    def gap(self) -> float:
        """``formula − value`` (positive: the formula is larger than anything found)."""
        if self.formula is None:
            raise ValueError("no formula value was given")
        return self.formula - self.value

    def agrees(self, *, rtol: float = 1e-9, atol: float = 1e-12) -> bool:
        """Whether brute force (refined, unless ``refine=False`` was asked) and formula coincide.

        With ``refine=False`` a True answer holds for the level grid only: see :attr:`is_lower_bound`.
        """
        if self.formula is None:
            raise ValueError("no formula value was given")
        return math.isclose(self.value, self.formula, rel_tol=rtol, abs_tol=atol)

    def respects(self, *, atol: float = 1e-12) -> bool:
        """Whether the formula is an upper bound of the brute-force value (``value ≤ formula``)."""
        if self.formula is None:
            raise ValueError("no formula value was given")
        return self.value <= self.formula + atol


def value_grid(bound: float, *, levels: int = 5, dim: int = 1, extra: Sequence[Any] = (),
               geometry: str = "l1") -> np.ndarray:
    """A grid of sample values that contains 0 and U.

    d = 1: ``levels`` equally spaced values ``0, U/(levels−1), …, U``.
    d ≥ 2: the points of the simplex ``{x ≥ 0, ‖x‖₁ ≤ U}`` (``geometry="l1"``) or of the cube
    ``[0, U]^d`` (``geometry="cube"``) whose coordinates are multiples of ``U/(levels−1)``;
    ``extra`` adds points (e.g. ``1e-6·e₂``, near the origin along one axis).
    """
    U = check_bound(bound)
    k = check_positive_int(levels, "levels", minimum=2)
    d = check_dim(dim)
    geometry = check_geometry(geometry)
    step = U / (k - 1)
    if d == 1:
        pts = np.linspace(0.0, U, k)
        if len(extra):
            pts = np.unique(np.concatenate([pts, np.asarray(extra, float).ravel()]))
        return pts
    ticks = np.stack(np.meshgrid(*[np.arange(k)] * d, indexing="ij"), axis=-1).reshape(-1, d)
    pts = (ticks if geometry == "cube" else ticks[ticks.sum(axis=1) <= k - 1]) * step
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
    max_datasets = check_positive_int(max_datasets, "max_datasets")
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



# ------------------------------------------------------------------------------------------------
# continuous refinement (pattern search over the free coordinates)
# ------------------------------------------------------------------------------------------------
_LINE_POINTS = 33


def _spacing(vals: np.ndarray) -> float:
    v = np.asarray(vals, float)
    if v.ndim == 1:
        return float(np.max(np.diff(np.unique(v)), initial=0.0))
    nz = np.abs(v[v != 0])
    return float(nz.min()) if nz.size else 0.0


def _refine(objective: Callable[[np.ndarray], np.ndarray], start: np.ndarray, bound: float, dim: int,
            *, max_sweeps: int = 400, tol: float = 1e-9, geometry: str = "l1") -> tuple[float, np.ndarray]:
    """Maximise ``objective`` (batched over rows of shape ``(B, P·d)``) from ``start`` by pattern search.

    Each sweep evaluates, in one batch, every coordinate moved alone to ``_LINE_POINTS`` points of a
    line within its feasible range ([0, U] for d = 1 and the cube; keeping x ≥ 0 and ‖x‖₁ ≤ U per
    sample for the ℓ1 ball, d ≥ 2) and takes the best move; the step starts at U (a line search over the whole range) and
    shrinks eightfold after a sweep with no improvement, down to ``tol·U``.
    """
    x = np.asarray(start, float).copy()
    best = float(objective(x[None, :])[0])
    P = x.size
    h = bound
    offsets = np.linspace(-1.0, 1.0, _LINE_POINTS)
    cols = np.repeat(np.arange(P), _LINE_POINTS)
    for _ in range(max_sweeps):
        if dim == 1 or geometry == "cube":
            hi = np.full(P, bound)
        else:
            per = x.reshape(-1, dim)
            hi = np.maximum(0.0, bound - (per.sum(axis=1, keepdims=True) - per)).ravel()
        cand = np.clip(x[:, None] + h * offsets[None, :], 0.0, hi[:, None]).ravel()
        batch = np.repeat(x[None, :], cand.size, axis=0)
        batch[np.arange(cand.size), cols] = cand
        vals = np.asarray(objective(batch), float)
        k = int(np.argmax(vals))
        if vals[k] > best + 1e-15 * max(1.0, abs(best)):
            best, x = float(vals[k]), batch[k].copy()
        else:
            h /= 8.0
            if h < tol * bound:
                break
    return best, x


def _check_estimator(f: Any, name: str) -> None:
    """A batched estimator ``f(samples, counts)`` must be callable (a number was a TypeError inside the
    enumeration, a fuzz run)."""
    if not callable(f):
        raise DpoptInputError(f"`{name}` must be a callable f(samples, counts); got {type(f).__name__}")


def sensitivity(estimator: Estimator, counts: Any, bound: float, *, values: np.ndarray | None = None,
                levels: int = 5, dim: int = 1, formula: float | None = None,
                max_datasets: int = DEFAULT_MAX_DATASETS, refine: bool = True,
                geometry: str = "l1") -> BruteForceResult:
    """Largest ``‖f(D) − f(D')‖₁`` over user-level neighbours D ~ D' (brute force).

    ``geometry`` (d ≥ 2): samples in the ℓ1 ball ``{x ≥ 0, ‖x‖₁ ≤ U}`` (``"l1"``) or the cube
    ``[0, U]^d`` (``"cube"``), for the default grid and the refinement.

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
    refine : bool
        Refine the best grid pair continuously (module docstring); ``False``: grid lower bound only.

    Notes
    -----
    The enumeration order makes the function values an array of shape
    ``(k^{m_1}, …, k^{m_L})``; for user ℓ the largest change is ``max − min`` along axis ℓ, and
    for vector outputs ``max_{u,v} ‖u − v‖₁ = max_s (max s·u − min s·v)`` over sign vectors s.
    """
    _check_estimator(estimator, "estimator")
    m = as_counts(counts)
    vals = value_grid(bound, levels=levels, dim=dim, geometry=geometry) if values is None else np.asarray(values, float)
    data = enumerate_datasets(m, vals, max_datasets=max_datasets)
    B = data.shape[0]
    out = _as_2d(estimator(data, m), B)
    d_out = out.shape[1]
    value, user, b_hi, b_lo = _largest_change(out, m, len(vals))
    offsets = split_users(m)
    # the ℓ1 change of the maximising pair (equals `value` by construction)
    change = float(np.abs(out[b_hi] - out[b_lo]).sum())
    grid_value = max(value, change) if d_out > 1 else value
    D, D2 = data[b_hi].astype(float), data[b_lo].astype(float)
    best_value = grid_value
    if refine:
        best_value, D, D2 = _refine_neighbours(estimator, m, D, D2, best_value, bound=bound, user=user,
                                               offsets=offsets, geometry=geometry)
    return BruteForceResult(
        value=best_value, formula=None if formula is None else float(formula), dataset=_users(D, offsets),
        neighbour=_users(D2, offsets), user=int(user), n_datasets=B, grid_value=grid_value,
        refined=bool(refine), spacing=_spacing(vals),
    )


def _largest_change(out: np.ndarray, m: np.ndarray, k: int) -> tuple[float, int, int, int]:
    """Over the enumerated outputs ``out`` (B, d_out) of a grid of ``k`` values: the largest ℓ1
    change of one user's samples, that user and the rows of the two datasets (sensitivity's Notes)."""
    d_out = out.shape[1]
    if d_out == 1:
        signs = np.ones((1, 1))
    else:
        signs = np.stack(np.meshgrid(*[[1.0, -1.0]] * d_out, indexing="ij"), -1).reshape(-1, d_out)
        signs = signs[signs[:, 0] > 0]
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
    return value, user, int(np.ravel_multi_index(full_hi, shape)), int(np.ravel_multi_index(full_lo, shape))


def _refine_neighbours(estimator: Estimator, m: np.ndarray, D: np.ndarray, D2: np.ndarray, best_value: float, *,
                       bound: float, user: int, offsets: np.ndarray,
                       geometry: str) -> tuple[float, np.ndarray, np.ndarray]:
    """Refine the neighbours (D, D2), which differ in ``user``'s samples, continuously (module
    docstring); returns the better of (``best_value``, D, D2) and the refined pair."""
    d = 1 if D.ndim == 1 else D.shape[1]
    N = D.shape[0]
    sl = slice(int(offsets[user]), int(offsets[user + 1]))
    n_free = sl.stop - sl.start

    def pair(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        B_ = z.shape[0]
        a = z[:, : N * d].reshape((B_, N) if d == 1 else (B_, N, d))
        b = a.copy()
        b[:, sl] = z[:, N * d :].reshape((B_, n_free) if d == 1 else (B_, n_free, d))
        return a, b

    def objective(z: np.ndarray) -> np.ndarray:
        a, b = pair(z)
        return np.abs(_as_2d(estimator(a, m), z.shape[0]) - _as_2d(estimator(b, m), z.shape[0])).sum(axis=1)

    z0 = np.concatenate([D.ravel(), D2[sl].ravel()])
    ref_value, z = _refine(objective, z0, check_bound(bound), d, geometry=geometry)
    if ref_value > best_value:
        a, b = pair(z[None, :])
        return ref_value, a[0], b[0]
    return best_value, D, D2


def _target(target: str | Estimator) -> Estimator:
    if callable(target):
        return target
    if target == "mean":
        return _mean_estimator
    if target == "variance":
        return _variance_estimator
    raise DpoptInputError(f"`target` must be 'mean', 'variance' or a callable; got {target!r}")


def worst_case_error(estimator: Estimator, counts: Any, bound: float, *, target: str | Estimator = "mean",
                     values: np.ndarray | None = None, levels: int = 5, dim: int = 1, formula: float | None = None,
                     max_datasets: int = DEFAULT_MAX_DATASETS, side: str = "both", refine: bool = True,
                     starts: int = 1, geometry: str = "l1") -> BruteForceResult:
    """Largest error of an estimator f against a target θ over all datasets (its worst-case bias).

    ``target`` is θ: ``"mean"`` (default), ``"variance"`` (population variance, seed 002 eq. (4)) or
    a batched callable. ``side`` picks the error: ``"both"`` ``‖θ(D) − f(D)‖₁``; ``"over"``
    ``f(D) − θ(D)`` (how far f can lie above θ); ``"under"`` ``θ(D) − f(D)`` (how far below). The
    signed sides need scalar outputs; the seeds' bias statements are often one-sided (e.g. ERRATA E1:
    Var − Var_clip reaches ``U²R(N−R)/N²``, Var_clip − Var only ``(N−R)/N·U²/4``).
    ``refine`` (default True) continues from the best grid datasets by a continuous pattern search
    (module docstring), so a maximiser between the levels is found; ``starts`` is the number of best
    grid datasets it starts from. ``geometry`` (d ≥ 2): ``"l1"`` (the ball) or ``"cube"`` ([0, U]^d).

    Examples
    --------
    >>> from dpopt.verify import estimators as est
    >>> r = worst_case_error(est.clipped_variance([1, 1, 1, 0]), [1, 1, 1, 1], 1.0,
    ...                      target="variance", side="over")
    >>> round(r.grid_value, 5), round(r.value, 5), r.between_levels   # maximiser at U/3
    (0.05425, 0.05556, True)
    """
    side = _check_side(side)
    _check_estimator(estimator, "estimator")
    if not isinstance(target, str):
        _check_estimator(target, "target")
    m = as_counts(counts)
    U = check_bound(bound)
    vals = value_grid(U, levels=levels, dim=dim, geometry=geometry) if values is None else np.asarray(values, float)
    data = enumerate_datasets(m, vals, max_datasets=max_datasets)
    B = data.shape[0]
    error = _error_function(estimator, _target(target), m, side)
    err = error(data)
    order = np.argsort(err)[::-1]
    b = int(order[0])
    grid_value = float(err[b])
    best_value, best_data = grid_value, data[b].astype(float)
    if refine:
        d = 1 if data.ndim == 2 else data.shape[2]
        shape = data.shape[1:]

        def objective(z: np.ndarray) -> np.ndarray:
            return error(z.reshape((z.shape[0],) + shape))

        for i in order[: min(starts, B)]:
            ref_value, z = _refine(objective, data[i].astype(float).ravel(), U, d, geometry=geometry)
            if ref_value > best_value:
                best_value, best_data = ref_value, z.reshape(shape)
    return BruteForceResult(
        value=best_value, formula=None if formula is None else float(formula),
        dataset=_users(best_data, split_users(m)), neighbour=None, user=None, n_datasets=B,
        grid_value=grid_value, refined=bool(refine), spacing=_spacing(vals), side=side,
    )


def _error_function(estimator: Estimator, theta: Estimator, m: np.ndarray,
                    side: str) -> Callable[[np.ndarray], np.ndarray]:
    """The batched error of ``estimator`` against ``theta`` on ``side`` (:func:`worst_case_error`)."""

    def error(samples: np.ndarray) -> np.ndarray:
        n = samples.shape[0]
        est = _as_2d(estimator(samples, m), n)
        tgt = _as_2d(theta(samples, m), n)
        if est.shape != tgt.shape:
            raise DpoptInputError(f"estimator and target shapes differ: {est.shape} vs {tgt.shape}")
        if side == "both":
            return np.abs(tgt - est).sum(axis=1)
        if est.shape[1] != 1:
            raise DpoptInputError(f"`side` = {side!r} needs a scalar estimator; got {est.shape[1]} outputs")
        return (est - tgt)[:, 0] if side == "over" else (tgt - est)[:, 0]

    return error


def _check_side(side: str) -> str:
    if side not in ("both", "over", "under"):
        raise DpoptInputError(f"`side` must be 'both', 'over' (f − θ) or 'under' (θ − f); got {side!r}")
    return side


def batched(func: Callable[[list[np.ndarray]], Any]) -> Estimator:
    """Turn a per-dataset estimator ``func(list of per-user sample arrays)`` into a batched one.

    Convenient for research code; slower than a vectorised estimator (one Python call per dataset).
    """

    def wrapper(samples: np.ndarray, counts: np.ndarray) -> np.ndarray:
        offsets = split_users(np.asarray(counts))
        return np.asarray([np.asarray(func(_users(row, offsets)), float) for row in samples])

    wrapper.__doc__ = func.__doc__
    return wrapper


GEOMETRIES = ("l1", "cube")


def check_geometry(geometry: Any) -> str:
    """``"l1"`` (samples in the ℓ1 ball, seed 001) or ``"cube"`` (samples in [0, U]^d)."""
    if geometry not in GEOMETRIES:
        raise DpoptInputError(f"`geometry` must be 'l1' or 'cube'; got {geometry!r}")
    return str(geometry)
