"""Pseudo-user post-processing after suppression (seed 002 §V-B3, eq. (15)).

After a suppression plan, grid g keeps Γ_{g,ℓ} ∈ {0, m_{g,ℓ}} samples of each user. Clipping every
retained user to at most m samples, Γ̄_{g,ℓ} = min{Γ_{g,ℓ}, m}, for one m ∈ [Γ_{g,*} : Γ*_g] (the
smallest and largest retained counts) gives the grid error

    Ē_g(m) = E_μ + E_Var + 2Δ̄_μ/ε + 2Δ̄_Var/ε      with R(m) = Σ_ℓ min{Γ_{g,ℓ}, m}, Γ̄* = m,

where the biases are measured against the *original* counts m_{g,ℓ} (seed 002 Theorems IV.1,
IV.2 with ERRATA E1). Eq. (15) takes Ē_g = min_m Ē_g(m); Ē = max_g Ē_g is the new worst error.
Every integer m in the range is evaluated (vectorised), so the minimiser is exact.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import DpoptInputError
from ..calculus import Split
from ._kernel import check_inputs, error_array

__all__ = ["pseudo_user_clipping", "PseudoUserResult"]


@dataclass(frozen=True, eq=False)
class PseudoUserResult:
    """Best per-grid clip after suppression (seed 002 eq. (15)).

    Attributes
    ----------
    grids : ndarray
        Grid labels (``occ.grids`` order).
    clip : ndarray of int
        The minimising m of each grid (0 for a grid with nothing retained).
    grid_errors : ndarray
        Ē_g = min_m Ē_g(m).
    errors_before : ndarray
        The grid errors of the plan itself (m = Γ*_g: no extra clipping).
    max_error : float
        Ē = max_g Ē_g.
    """

    grids: np.ndarray
    clip: np.ndarray
    grid_errors: np.ndarray
    errors_before: np.ndarray
    max_error: float

    def __repr__(self) -> str:  # one line: never the per-grid arrays
        return (f"PseudoUserResult(grids={self.grids.size}, max_error={self.max_error:.6g}, "
                f"max_error_before={float(np.max(self.errors_before, initial=0.0)):.6g})")

    def summary(self) -> dict[str, Any]:
        """A JSON-ready digest."""
        return {"grids": int(self.grids.size), "max_error": float(self.max_error),
                "max_error_before": float(np.max(self.errors_before, initial=0.0))}

    def to_frame(self) -> Any:
        """One row per grid: ``grid``, ``clip``, ``error``, ``error_before`` (pandas on use)."""
        from .._frames import frame

        return frame({"grid": self.grids, "clip": self.clip, "error": self.grid_errors,
                      "error_before": self.errors_before})


def pseudo_user_clipping(
    occ: Any,
    bound: float,
    epsilon: float,
    suppressed: Any = None,
    *,
    split: Split = "equal",
) -> PseudoUserResult:
    """Per grid, the best common clip m ∈ [Γ_{g,*}, Γ*_g] after suppression (seed 002 eq. (15)).

    Parameters
    ----------
    occ : Occupancy
    bound, epsilon : float
        U and ε.
    suppressed : iterable of (user, grid) pairs or SuppressionPlan, optional
        The plan (e.g. ``clip_user(...)``); ``None`` means nothing suppressed.
    split : {"equal", "optimal"}

    Returns
    -------
    PseudoUserResult
    """
    occ, U, eps, _, split = check_inputs(occ, bound, epsilon, None, split)
    if hasattr(suppressed, "suppressed"):
        suppressed = suppressed.suppressed
    if suppressed is not None and not isinstance(suppressed, Iterable):
        raise DpoptInputError(
            "`suppressed` must be a SuppressionPlan, an iterable of (user, grid) pairs or None; "
            f"got {type(suppressed).__name__}"
        )
    retained = occ.retained_matrix(list(suppressed) if suppressed else None).tocsc()
    N = occ.grid_totals
    G = occ.n_grids
    clip = np.zeros(G, dtype=np.int64)
    best = np.full(G, np.inf)
    before = np.full(G, np.inf)
    for g in range(G):
        c = np.sort(retained.data[retained.indptr[g]:retained.indptr[g + 1]])
        c = c[c > 0]
        if c.size == 0:
            continue
        m = np.arange(c[0], c[-1] + 1, dtype=np.int64)
        # R(m) = sum_{c < m} c + m * #{c >= m}
        below = np.searchsorted(c, m, side="left")
        csum = np.concatenate(([0], np.cumsum(c)))
        R = csum[below] + m * (c.size - below)
        e = error_array(np.full(m.size, N[g]), R, m, U, eps, split)
        i = int(np.argmin(e))
        clip[g], best[g], before[g] = m[i], e[i], e[-1]
    return PseudoUserResult(
        grids=occ.grids.copy(),
        clip=clip,
        grid_errors=best,
        errors_before=before,
        max_error=float(best.max()),
    )
