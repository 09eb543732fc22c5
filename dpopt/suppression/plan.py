"""The result type shared by CLIP-USER, the MILP and the frontier: :class:`SuppressionPlan`."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..calculus import grid_errors as _grid_errors
from ..occupancy import Occupancy
from ..solve import Status
from ._kernel import ERROR_RTOL

__all__ = ["SuppressionPlan", "recheck", "label_pairs", "rechecked_plan"]


@dataclass(frozen=True, eq=False)
class SuppressionPlan:
    """Which (user, grid) contributions to suppress, and what that costs (seed 002 §V-B).

    Attributes
    ----------
    degradation : int
        K = max_ℓ G_ℓ after suppression: the release is K·ε user-level DP (Proposition V.1).
    error_bound : float
        E, the bound every grid's worst-case error must meet.
    suppressed : frozenset of (user label, grid label)
        Contributions set to Γ_{g,ℓ} = 0.
    grid_errors : ndarray, shape (G,)
        Worst-case error of each grid after suppression (``occ.grids`` order), recomputed from
        scratch with :func:`dpopt.grid_errors`.
    status : Status
        The :class:`dpopt.solve.Status` (a ``str`` enum, so ``status == "optimal"`` works):
        ``OPTIMAL`` (MILP, proven), ``TIME_LIMIT`` or another limit status of the solver (MILP
        incumbent with a gap), ``INFEASIBLE`` (no plan meets E), ``HEURISTIC`` (CLIP-USER: a heuristic,
        optimality not certified; ``method="greedy"``).
    gap : float
        (K − lower_bound)/max(1, K) for the MILP (0 when optimal); ``nan`` for the greedy plan.
    lower_bound : float
        Proven lower bound on the least K (MILP); ``nan`` for the greedy plan. (:attr:`bound` is its
        deprecated alias: deprecated in 0.4, removed in 0.5.)
    method : str
        ``"greedy"`` or ``"milp"``.
    epsilon, U : float
        The per-grid privacy budget and the sample bound.
    suppressed_samples : int
        Σ m_{g,ℓ} over the suppressed pairs (the MILP's tie-break minimises it for the optimal K).
    original_degradation : int
        G_1 = max_ℓ G_ℓ before suppression.
    solve_time : float
        Wall-clock seconds.
    info : dict
        Method-specific details (stages, halting reason, component count, objective bounds...).
    """

    degradation: int
    error_bound: float
    suppressed: frozenset
    grid_errors: np.ndarray
    status: Status
    gap: float
    lower_bound: float
    method: str
    epsilon: float
    U: float
    suppressed_samples: int
    original_degradation: int
    solve_time: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def bound(self) -> float:
        """Deprecated alias of :attr:`lower_bound` (renamed: ``bound`` means U elsewhere)."""
        warnings.warn(
            "SuppressionPlan.bound is deprecated in 0.4 and will be removed in 0.5; "
            "use SuppressionPlan.lower_bound",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.lower_bound

    @property
    def max_error(self) -> float:
        """max_g E_g after suppression."""
        return float(np.max(self.grid_errors)) if self.grid_errors.size else 0.0

    @property
    def privacy_loss(self) -> float:
        """K·ε, the composed privacy loss (seed 002 Proposition V.1)."""
        return self.degradation * self.epsilon

    @property
    def feasible(self) -> bool:
        """Every grid error meets E (within :data:`ERROR_RTOL`)."""
        return bool(np.all(self.grid_errors <= self.error_bound * (1 + ERROR_RTOL)))

    @property
    def is_optimal(self) -> bool:
        """The plan is a proven optimum (``status is Status.OPTIMAL``)."""
        return self.status is Status.OPTIMAL

    def to_frame(self) -> Any:
        """One row per suppressed (user, grid) pair, columns ``user``, ``grid`` (pandas on use)."""
        from .._frames import frame

        pairs = sorted(self.suppressed, key=repr)
        return frame([{"user": u, "grid": g} for u, g in pairs], columns=["user", "grid"])

    def summary(self) -> dict[str, Any]:
        """A JSON-ready digest (used by the CLI)."""
        return {
            "method": self.method,
            "status": Status(self.status).value,
            "degradation": self.degradation,
            "original_degradation": self.original_degradation,
            "privacy_loss": self.privacy_loss,
            "error_bound": self.error_bound,
            "max_error": self.max_error,
            "lower_bound": self.lower_bound,
            "gap": self.gap,
            "n_suppressed": len(self.suppressed),
            "suppressed_samples": self.suppressed_samples,
            "solve_time": self.solve_time,
        }


def recheck(
    occ: Occupancy, suppressed: frozenset, U: float, eps: float, split: str = "equal"
) -> tuple[int, np.ndarray, int]:
    """K, per-grid errors and suppressed samples of a plan, recomputed from scratch.

    Uses :func:`dpopt.grid_errors` (the foundation's calculus), independent of the model code.
    """
    pairs = sorted(suppressed, key=repr)
    errors = _grid_errors(occ, U, eps, suppressed=pairs or None, split=split)
    retained = occ.retained_matrix(pairs or None)
    occupancy = np.diff(retained.indptr)
    K = int(occupancy.max()) if occupancy.size else 0
    samples = int(occ.matrix.sum() - retained.sum())
    return K, np.asarray(errors, dtype=float), samples


def label_pairs(occ: Any, rows: Any, cols: Any) -> frozenset:
    """The (user label, grid label) pairs at matrix positions ``(rows[k], cols[k])`` of ``occ``."""
    users_l, grids_l = occ.users.tolist(), occ.grids.tolist()
    return frozenset((users_l[r], grids_l[c]) for r, c in zip(np.asarray(rows).tolist(), np.asarray(cols).tolist()))


def rechecked_plan(
    occ: Occupancy,
    suppressed: frozenset,
    checked: tuple[int, np.ndarray, int],
    *,
    U: float,
    eps: float,
    error_bound: float,
    status: Status,
    gap: float,
    lower_bound: float,
    method: str,
    solve_time: float,
    info: dict[str, Any],
) -> SuppressionPlan:
    """The :class:`SuppressionPlan` of ``suppressed`` with K, grid errors and suppressed samples
    taken from its :func:`recheck` (``checked``), never from the model that chose it."""
    K, errors, samples = checked
    return SuppressionPlan(
        degradation=K, error_bound=error_bound, suppressed=suppressed, grid_errors=errors, status=status,
        gap=gap, lower_bound=lower_bound, method=method, epsilon=eps, U=U, suppressed_samples=samples,
        original_degradation=occ.degradation, solve_time=solve_time, info=info,
    )
