"""Shared pieces of the grid-suppression model: the per-grid error f_g(R, Γ*), tolerances, validation.

The worst-case error of the CLIP mechanism in one grid (seed 002 eq. (11)–(13), ERRATA E1) depends
only on the grid total ``N``, the retained total ``R`` and the largest retained count ``Γ*``:

    f(R, Γ*) = U(1 − R/N) + E_Var(N, R) + noise(Δ_μ(R, Γ*), Δ_Var(R, Γ*))

with ``noise = 2Δ_μ/ε + 2Δ_Var/ε`` (equal split, the paper) or ``(√Δ_μ + √Δ_Var)²/ε`` (best split).
:func:`error_array` evaluates it with the vectorised kernels of :mod:`dpopt.calculus`;
:func:`error_scalar` is the same formula in plain Python for the inner loop of CLIP-USER (one call
per candidate grid; the tests check the two agree).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .._validation import (
    DpoptInputError,
    check_bound,
    check_choice,
    check_noise_scale,
    check_epsilon,
    check_nonnegative_float,
)
from ..calculus import (
    mean_bias_from_totals,
    mean_sensitivity_from_totals,
    variance_bias_from_totals,
    variance_sensitivity_from_totals,
)
from ..occupancy import Occupancy

__all__ = [
    "ERROR_RTOL",
    "error_array",
    "error_scalar",
    "within",
    "check_occupancy",
    "check_inputs",
    "check_time_limit",
    "low_region",
    "smallest_within",
]

#: a grid error ``e`` meets the bound ``E`` iff ``e <= E·(1 + ERROR_RTOL)`` (one rule everywhere:
#: greedy, MILP run tables, brute force and the re-check), so float rounding never decides a plan.
ERROR_RTOL = 1e-12


def within(error: Any, bound: float) -> Any:
    """``error <= bound·(1 + ERROR_RTOL)`` (vectorised); ``inf`` never is."""
    return np.asarray(error) <= bound * (1.0 + ERROR_RTOL)


def error_array(
    total: Any, retained: Any, retained_max: Any, bound: float, epsilon: float, split: str = "equal"
) -> np.ndarray:
    """f(R, Γ*) for arrays of (N, R, Γ*) (no validation; R = 0 gives ``inf``)."""
    N = np.asarray(total, dtype=float)
    R = np.asarray(retained, dtype=float)
    g = np.asarray(retained_max, dtype=float)
    dmu = mean_sensitivity_from_totals(R, g, bound)
    dvar = variance_sensitivity_from_totals(R, g, bound)
    if split == "equal":
        noise = 2.0 * (dmu + dvar) / epsilon
    else:
        with np.errstate(invalid="ignore"):
            noise = (np.sqrt(dmu) + np.sqrt(dvar)) ** 2 / epsilon
    out = mean_bias_from_totals(N, R, bound) + variance_bias_from_totals(N, R, bound) + noise
    return np.where(R > 0, out, np.inf)


def error_scalar(N: int, R: int, G: int, U: float, eps: float, optimal_split: bool = False) -> float:
    """f(R, Γ*) for one grid, in plain Python (same formula as :func:`error_array`)."""
    if R <= 0:
        return math.inf
    U2 = U * U
    e_mu = U * (1.0 - R / N)
    k = min(N - R, N // 2)
    e_var = U2 * k * (N - k) / (N * N)
    d_mu = U * G / R
    if R > 2 * G:
        d_var = U2 * G * (R - G) / (R * R)
    elif R % 2 == 0:
        d_var = 0.25 * U2
    else:
        d_var = 0.25 * U2 * (1.0 - 1.0 / (R * R))
    if optimal_split:
        noise = (math.sqrt(d_mu) + math.sqrt(d_var)) ** 2 / eps
    else:
        noise = 2.0 * (d_mu + d_var) / eps
    return e_mu + e_var + noise


def low_region(
    v: np.ndarray, cap: np.ndarray, U: float, eps: float, split: str, lim: float
) -> tuple[np.ndarray, np.ndarray]:
    """All (entry, R) with R in the low region [v, min(2v − 1, cap)] of entries that may meet ``lim``.

    On R ∈ [v, 2v − 1] (Γ* = v) the variance sensitivity is capped (seed 002 Lemma III.3), so the
    noise is at least that of Δ_μ = Uv/(2v − 1) and Δ_Var = U²/4·(1 − 1/v²); entries whose lower
    bound exceeds ``lim`` are skipped, the others enumerated (f need not be monotone there).
    """
    top = np.minimum(2 * v - 1, cap)
    vf = v.astype(float)
    dmu_lb = U * vf / np.maximum(2 * vf - 1, 1)
    dvar_lb = U * U / 4 * (1 - 1 / vf**2)
    if split == "equal":
        noise_lb = 2 * (dmu_lb + dvar_lb) / eps
    else:
        noise_lb = (np.sqrt(dmu_lb) + np.sqrt(dvar_lb)) ** 2 / eps
    need = np.flatnonzero((top >= v) & (noise_lb <= lim))
    length = top[need] - v[need] + 1
    rep = np.repeat(need, length)
    offs = np.arange(rep.size) - np.repeat(np.cumsum(length) - length, length)
    return rep, v[rep] + offs


def smallest_within(
    f: Callable[[np.ndarray, np.ndarray], np.ndarray],
    ids: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    lim: float,
) -> np.ndarray:
    """Vectorised bisection: for each entry, the smallest R in (lo, hi] with f(R) ≤ lim.

    Requires f decreasing in R on [lo + 1, hi] (models/suppression.md, (M2)), f(lo) > lim or lo
    excluded, and f(hi) ≤ lim. ``f(R, ids)`` evaluates the entries ``ids``.
    """
    lo, hi = lo.copy(), hi.copy()
    while True:
        active = hi - lo > 1
        if not np.any(active):
            return hi
        mid = (lo + hi) // 2
        ok = f(mid, ids) <= lim
        hi = np.where(active & ok, mid, hi)
        lo = np.where(active & ~ok, mid, lo)


def check_occupancy(occ: Any, name: str = "occ") -> Occupancy:
    """``occ`` must be an :class:`~dpopt.occupancy.Occupancy` (a DataFrame/triples are converted)."""
    if isinstance(occ, Occupancy):
        return occ
    if hasattr(occ, "columns"):
        return Occupancy.from_frame(occ)
    raise DpoptInputError(
        f"`{name}` must be a dpopt.Occupancy (or a DataFrame with user, grid, count); got {type(occ).__name__}"
    )


def check_inputs(
    occ: Any, bound: Any, epsilon: Any, error_bound: Any, split: Any = "equal", *, finite: bool = True
) -> tuple[Occupancy, float, float, float | None, str]:
    """Validate the common arguments of every suppression entry point."""
    occ = check_occupancy(occ)
    U = check_bound(bound)
    eps = check_epsilon(epsilon)
    check_noise_scale(2.0 * (U + U * U / 4.0), eps, f"2(U + U²/4)/ε of a grid at U = {U!r}")  # bounds every grid's
    split = check_choice(split, "split", ("equal", "optimal"))
    E: float | None
    if error_bound is None:
        E = None
    else:
        try:
            E = float(error_bound)
        except (TypeError, ValueError):
            raise DpoptInputError(
                f"`error_bound` must be a positive finite number or None; got {error_bound!r}"
            ) from None
        if not (E > 0) or math.isnan(E) or (finite and math.isinf(E)):  # inf: "suppress everything"
            raise DpoptInputError(f"`error_bound` must be a positive finite number or None; got {error_bound!r}")
    return occ, U, eps, E, split


def check_time_limit(value: Any, name: str = "time_limit") -> float | None:
    """A solver time limit: ``None`` (no limit) or a finite number of seconds ≥ 0."""
    return None if value is None else check_nonnegative_float(value, name)


def baseline_errors(occ: Occupancy, U: float, eps: float, split: str = "equal") -> np.ndarray:
    """E_g of BASELINE (nothing suppressed), seed 002 eq. (12)."""
    return error_array(occ.grid_totals, occ.grid_totals, occ.grid_max, U, eps, split)


def level_table(occ: Occupancy) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (grid, count) levels: grid, value v_t (decreasing within a grid) and R_max(t).

    R_max(t) = N_g − Σ{m_{g,ℓ} : m_{g,ℓ} > v_t}, the largest retained total when every user
    above v_t is suppressed.
    """
    csr = occ.matrix
    cols = csr.indices.astype(np.int64)
    cnt = csr.data.astype(np.int64)
    N = occ.grid_totals.astype(np.int64)
    order = np.lexsort((-cnt, cols))
    sc, sg = cnt[order], cols[order]
    new_level = np.ones(sc.size, dtype=bool)
    new_level[1:] = (sg[1:] != sg[:-1]) | (sc[1:] != sc[:-1])
    above_sorted = np.cumsum(sc) - sc  # samples before this entry in sorted order
    grid_start = np.concatenate(([0], np.cumsum(np.bincount(sg, minlength=occ.n_grids))))[:-1]
    cum_before_grid = np.concatenate(([0], np.cumsum(sc)))[grid_start]
    above = (above_sorted - cum_before_grid[sg])[new_level]
    lev_grid = sg[new_level]
    return lev_grid, sc[new_level], N[lev_grid] - above


def least_grid_errors(occ: Occupancy, U: float, eps: float, split: str = "equal") -> np.ndarray:
    """min over suppression sets of each grid's error, per grid (grids decoupled: E*(G_1) = max)."""
    g, v, cap = level_table(occ)
    N = occ.grid_totals[g]
    f_cap = error_array(N, cap, v, U, eps, split)
    best = np.full(occ.n_grids, np.inf)
    np.minimum.at(best, g, f_cap)  # the tail minimum sits at R = R_max (f decreasing there)
    rep, R = low_region(v, cap, U, eps, split, float(np.max(best)))
    if rep.size:
        np.minimum.at(best, g[rep], error_array(N[rep], R, v[rep], U, eps, split))
    return best


def require_reachable(occ: Occupancy, U: float, eps: float, E: float, split: str = "equal") -> None:
    """Refuse an error bound E that no suppression plan can meet.

    Grids are independent once K is free, so some plan meets E exactly when every grid can:
    ``E ≥ max_g min_{suppression sets} E_g`` (:func:`least_grid_errors`, exact). Below that the
    problem is infeasible by construction: bad input, reported as :class:`DpoptInputError`.
    """
    floor = float(np.max(least_grid_errors(occ, U, eps, split)))
    if E < floor * (1 - ERROR_RTOL):
        raise DpoptInputError(
            f"`error_bound` must be at least {floor:.6g}, the least worst-case error any suppression "
            f"plan reaches (max over grids of each grid's best error); got {E!r}"
        )
