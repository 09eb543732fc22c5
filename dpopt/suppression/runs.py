"""Exact feasible retained totals per (grid, level) of the suppression model (models/suppression.md).

:func:`feasible_runs` is shared by the MILP (:mod:`.milp`) and the Lagrangian pattern oracle
(:mod:`.lagrange`); it lives here so that neither imports the other.
"""

from __future__ import annotations

import math

import numpy as np

from ._kernel import ERROR_RTOL, error_array, low_region, smallest_within

__all__ = ["feasible_runs"]


def feasible_runs(
    total: np.ndarray,
    level_value: np.ndarray,
    retained_cap: np.ndarray,
    bound: float,
    epsilon: float,
    error_bound: float,
    split: str = "equal",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact sets F = {R ∈ [v, R_max] : f(R, v) ≤ E} as integer runs, for many (grid, level) entries.

    On [2v, R_max] every term of f is non-increasing in R and the mean bias strictly decreasing,
    so F ∩ [2v, R_max] = [a, R_max] (found by vectorised bisection). On [v, 2v − 1] the variance
    sensitivity depends on the parity of R (seed 002 Lemma III.3) and f need not be monotone, so
    those R are enumerated, after a lower bound on the noise rules most entries out.

    Returns
    -------
    (entry, lo, hi) : arrays
        Run r of entry ``entry[r]`` is the integer interval [lo[r], hi[r]]; runs of one entry are
        disjoint, sorted and separated by at least one infeasible R.
    """
    N = np.asarray(total, dtype=np.int64)
    v = np.asarray(level_value, dtype=np.int64)
    cap = np.asarray(retained_cap, dtype=np.int64)
    n = v.size
    ids = np.arange(n, dtype=np.int64)
    lim = error_bound * (1.0 + ERROR_RTOL)
    # every term is bounded: biases by U and U²/4, Δ_μ by U, Δ_Var by U²/4
    top_noise = 2 * (bound + bound**2 / 4) / epsilon
    if not math.isfinite(error_bound) or lim >= bound + bound**2 / 4 + top_noise:
        return ids, v.copy(), cap.copy()
    f = lambda R, idx: error_array(N[idx], R, v[idx], bound, epsilon, split)  # noqa: E731

    # tail [2v, cap]: f strictly decreasing -> smallest feasible R by bisection
    tail = ids[(2 * v <= cap)]
    tail = tail[f(cap[tail], tail) <= lim]
    # 2v − 1 is an exclusive sentinel, cap is feasible
    hi = smallest_within(f, tail, 2 * v[tail] - 1, cap[tail], lim)
    seg_e = [tail]
    seg_lo = [hi]
    seg_hi = [cap[tail]]

    # low region [v, min(2v − 1, cap)]: enumerate where a noise lower bound allows feasibility
    rep, R = low_region(v, cap, bound, epsilon, split, lim)
    if rep.size:
        ok = f(R, rep) <= lim
        seg_e.append(rep[ok])
        seg_lo.append(R[ok])
        seg_hi.append(R[ok])

    return _merged_runs(np.concatenate(seg_e), np.concatenate(seg_lo), np.concatenate(seg_hi))


def _merged_runs(e: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sort the feasible segments [a, b] of entries ``e`` and merge touching ones into runs.

    Parameters
    ----------
    e, a, b : ndarray of int
        Entry, first and last feasible R of each segment (in any order; segments may touch).

    Returns
    -------
    (entry, lo, hi) : arrays
        As :func:`feasible_runs`: disjoint sorted runs per entry, separated by an infeasible R.
    """
    order = np.lexsort((a, e))
    e, a, b = e[order], a[order], b[order]
    if e.size == 0:
        return e, a, b
    start = np.ones(e.size, dtype=bool)
    start[1:] = (e[1:] != e[:-1]) | (a[1:] > b[:-1] + 1)
    group = np.cumsum(start) - 1
    run_hi = np.zeros(int(group[-1]) + 1, dtype=np.int64)
    np.maximum.at(run_hi, group, b)
    return e[start], a[start], run_hi
