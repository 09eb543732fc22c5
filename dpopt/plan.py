"""The plan contract: what every release planner returns and the release consumes.

A *plan* decides, from public information only (under the ``public-occupancy`` privacy model: the
occupancy array A of seed 002 §II-C), how much of each user's data enters each grid's release and
how much privacy budget each grid's statistics get:

* ``retained`` Γ_{ℓ,g}: records of user ℓ kept in grid g (0 = suppressed, seed 002 §V-B;
  0 < Γ < m = truncated, e.g. pseudo-user caps, eq. (15));
* ``budget_mean[g]``, ``budget_variance[g]``: the budget of the mean and of the variance of grid g
  in the plan's ``unit`` — ε of pure DP (Laplace noise) or ρ of zero-concentrated DP (Gaussian
  noise); both compose by addition, so a user's cost is Σ over the grids where the user is kept;
* ``released[g]``: grids the plan publishes; the others are *withheld* (reported as withheld, never
  released as pure noise).

Every planner — BASELINE, CLIP-USER, the suppression MILP, pseudo-user clipping, the budget planner —
returns a :class:`GridPlan`; the release (:mod:`dpopt.release`) reads nothing else.

Privacy accounting (seed 002 Theorem II.3 / Proposition V.1, generalised to per-grid budgets): the
release of grid g acts only on grid g's records and is ``budget_g``-DP (or -zCDP) with respect to a
change of one user's values, so a user ℓ loses at most ``Σ_{g : Γ_{ℓ,g} > 0} budget_g``; the
whole release costs :attr:`GridPlan.total_cost` = the max over users. This is recounted here from
``retained`` and the budgets, never taken from a planner's own report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ._validation import DpoptInputError
from .occupancy import UsersByGrids
from .solve.result import Status

__all__ = ["GridPlan", "BUDGET_UNITS"]

#: budget units: "epsilon" (pure ε-DP, Laplace) and "rho" (ρ-zCDP, Gaussian)
BUDGET_UNITS = ("epsilon", "rho")


@dataclass(frozen=True, eq=False)
class GridPlan(UsersByGrids):
    """Retained counts per (user, grid) pair and budgets per grid and statistic.

    Attributes
    ----------
    retained : scipy.sparse.csr_array, shape (L, G), int64
        Γ_{ℓ,g} ≤ m_{ℓ,g}; rows and columns in the order of the occupancy the plan was made for.
    budget_mean, budget_variance : ndarray, shape (G,)
        Budget of each grid's mean and variance in ``unit`` (0 where the grid is withheld, or where
        a statistic gets no budget because its sensitivity is 0).
    released : ndarray of bool, shape (G,)
        Grids the plan publishes.
    unit : {"epsilon", "rho"}
        Pure ε-DP (Laplace noise) or ρ-zCDP (Gaussian noise).
    method : str
        Which planner ("baseline", "greedy", "milp", "budget-greedy", ...).
    status : Status
        ``OPTIMAL`` (proven), a limit status with ``gap`` (incumbent of a time-limited solve),
        ``HEURISTIC`` (greedy, not certified); BASELINE is ``OPTIMAL`` (nothing to choose).
    gap : float
        Relative optimality gap (0 when optimal, ``nan`` when not known).
    error_bound : float or None
        The per-grid error target the plan was made to meet, if any.
    array_length : ndarray of int or None, shape (G,)
        Per-grid cap m_g on a user's records (pseudo-user clipping, seed 002 eq. (15)); None if no cap.
    info : dict
        Planner-specific details (the underlying research result, solve log, frontier...).
    """

    retained: sp.csr_array
    budget_mean: np.ndarray
    budget_variance: np.ndarray
    released: np.ndarray
    unit: str
    method: str
    status: Status
    gap: float = 0.0
    error_bound: float | None = None
    array_length: np.ndarray | None = None
    info: dict[str, Any] = field(default_factory=dict)

    _users_by_grids = "retained"  # n_users, n_grids (UsersByGrids)

    def __post_init__(self) -> None:
        if self.unit not in BUDGET_UNITS:
            raise DpoptInputError(f"`unit` must be one of {BUDGET_UNITS}; got {self.unit!r}")
        G = self.n_grids
        for name in ("budget_mean", "budget_variance", "released"):
            arr = getattr(self, name)
            if np.shape(arr) != (G,):
                raise DpoptInputError(f"`{name}` must have one entry per grid ({G}); got shape {np.shape(arr)}")
        for name in ("budget_mean", "budget_variance"):
            arr = np.asarray(getattr(self, name), dtype=float)
            if not np.all(np.isfinite(arr)) or np.any(arr < 0):
                raise DpoptInputError(f"`{name}` must be finite and >= 0 in every grid")

    @property
    def budget(self) -> np.ndarray:
        """Budget of each grid (mean + variance), in ``unit``."""
        return np.asarray(self.budget_mean, dtype=float) + np.asarray(self.budget_variance, dtype=float)

    # -- accounting --------------------------------------------------------------------------
    def kept(self) -> sp.csr_array:
        """0/1 matrix of the kept pairs (Γ > 0) in released grids."""
        R = sp.csr_array(self.retained, copy=True)
        R.data = ((R.data > 0) & np.asarray(self.released, dtype=bool)[R.indices]).astype(np.int64)
        R.eliminate_zeros()
        return R

    def user_grids(self) -> np.ndarray:
        """Number of released grids each user is kept in (K = its max, seed 002 Prop. V.1)."""
        return np.asarray(self.kept().sum(axis=1)).ravel().astype(np.int64)

    def user_cost(self) -> np.ndarray:
        """Each user's privacy cost Σ_{g: Γ_{ℓ,g} > 0, g released} budget_g, in ``unit``."""
        return np.asarray(self.kept() @ self.budget, dtype=float).ravel()

    @property
    def degradation(self) -> int:
        """K = the most released grids any user is kept in."""
        k = self.user_grids()
        return int(k.max()) if k.size else 0

    @property
    def total_cost(self) -> float:
        """The largest privacy cost of any user: the budget the whole release spends."""
        c = self.user_cost()
        return float(c.max()) if c.size else 0.0

    # -- reading -----------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """The plan in a few numbers: planner, status, gap, unit, grids released, K and total cost."""
        return {"method": self.method, "status": str(self.status), "gap": float(self.gap), "unit": self.unit,
                "grids": int(np.size(self.released)), "released": int(np.sum(self.released)),
                "degradation": self.degradation, "total_cost": self.total_cost, "error_bound": self.error_bound}

    def to_frame(self) -> "pd.DataFrame":
        """One row per grid: released, the budgets of mean and variance, users and samples kept
        (Γ > 0 pairs and Σ Γ), and the array length (cap) where the plan has one."""
        import pandas as pd

        R = sp.csr_array(self.retained)
        frame = pd.DataFrame({
            "released": np.asarray(self.released, dtype=bool),
            "budget_mean": np.asarray(self.budget_mean, dtype=float),
            "budget_variance": np.asarray(self.budget_variance, dtype=float),
            "users_kept": np.asarray((R > 0).sum(axis=0)).ravel().astype(np.int64),
            "samples_kept": np.asarray(R.sum(axis=0)).ravel().astype(np.int64)},
            index=pd.RangeIndex(R.shape[1], name="grid"))
        if self.array_length is not None:
            frame["array_length"] = np.asarray(self.array_length)
        return frame

    # -- consistency -------------------------------------------------------------------------
    def check(self, counts: sp.csr_array) -> None:
        """Raise :class:`DpoptInputError` unless the plan fits the occupancy ``counts`` (L × G)."""
        counts = sp.csr_array(counts)
        if counts.shape != self.retained.shape:
            raise DpoptInputError(
                f"the plan is for {self.retained.shape} users x grids; the data has {counts.shape}"
            )
        diff = sp.csr_array(counts - self.retained)
        if diff.nnz and diff.data.min() < 0:
            raise DpoptInputError("the plan retains more records of a user in a grid than the user has")
        if self.retained.nnz and self.retained.data.min() < 0:
            raise DpoptInputError("the plan has a negative retained count")

    def __repr__(self) -> str:
        return (
            f"GridPlan(method={self.method!r}, status={Status(self.status).value!r}, "
            f"grids={self.n_grids}, released={int(np.sum(self.released))}, users={self.n_users}, "
            f"K={self.degradation}, total_cost={self.total_cost:.6g} {self.unit})"
        )
