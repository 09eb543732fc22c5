"""The release planners: each one a function of the public occupancy returning a :class:`GridPlan`.

A plan decides from public counts only (seed 002 §II-C: the occupancy array A is public) which
records of each user enter each grid's release and each grid's budgets (:mod:`dpopt.plan`):

* :func:`baseline_plan` — keep everything (seed 002 §III-A);
* :func:`greedy_plan` — CLIP-USER (seed 002 Algorithm 1, :func:`dpopt.clip_user`);
* :func:`milp_plan` — the least-K suppression MILP (:func:`dpopt.solve_suppression`);
* :func:`pseudo_user_plan` — a step after any of them: per-grid pseudo-user clipping
  (seed 002 eq. (15), :func:`dpopt.pseudo_user_clipping`), truncating Γ to the array length m_g.

Budgets (:func:`grid_budgets`): each released grid gets ε, split between mean and variance
(``"equal"``: ε/2 each, the paper; ``"optimal"``: ε_μ = ε·√Δ_μ/(√Δ_μ + √Δ_Var)), with ε_Var capped
so that the exact sampler's ε'_μ + ε'_Var ≤ ε (:func:`dpopt.noise.remaining_epsilon`).

Options are keyword arguments: an unknown option is a :class:`TypeError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._validation import check_bound, check_choice, check_epsilon, check_nonnegative_float
from ..calculus import grid_error_terms
from ..noise import remaining_epsilon
from ..occupancy import Occupancy
from ..plan import GridPlan
from ..solve.result import Status

__all__ = ["PLANNERS", "SPLITS", "baseline_plan", "greedy_plan", "milp_plan", "pseudo_user_plan",
           "grid_budgets", "baseline_error_bound"]

SPLITS = ("equal", "optimal")
#: smallest budget the exact sampler represents (its budgets are multiples of 2^-30)
_MIN_EXACT_BUDGET = 2.0**-30


def _retained_totals(retained: sp.csr_array) -> tuple[np.ndarray, np.ndarray]:
    """R_g = Σ_ℓ Γ_{ℓ,g} and Γ*_g = max_ℓ Γ_{ℓ,g} per grid."""
    csc = sp.csc_array(retained)
    R = np.asarray(csc.sum(axis=0)).ravel().astype(np.int64)
    gmax = np.zeros(csc.shape[1], dtype=np.int64)
    if csc.nnz:
        gmax = np.asarray(csc.max(axis=0).toarray()).ravel().astype(np.int64)
    return R, gmax


def grid_budgets(occ: Occupancy, retained: sp.csr_array, bound: float, epsilon: float, *,
                 split: str = "equal") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(budget_mean, budget_variance, released)`` per grid for retained counts Γ (unit ε).

    A grid is released iff it retains a record; its ε is split by ``split`` (seed 002 eq. (8),
    :func:`dpopt.calculus.grid_error_terms`) and ε_Var ≤ :func:`remaining_epsilon`(ε, ε_μ).
    """
    R, gmax = _retained_totals(retained)
    terms = grid_error_terms(occ.grid_totals, R, gmax, bound, epsilon, split=split)
    released = R > 0
    e_mu = np.where(released, terms.epsilon_mean, 0.0)
    e_var = np.where(released, terms.epsilon_variance, 0.0)
    exact = released & (e_mu >= _MIN_EXACT_BUDGET)
    if np.any(exact):  # ε'_μ + ε'_Var ≤ ε exactly, whatever the float rounding of the split
        e_var[exact] = np.minimum(e_var[exact], remaining_epsilon(epsilon, e_mu[exact]))
    return e_mu, e_var, released


def baseline_error_bound(occ: Occupancy, bound: float, epsilon: float, *, split: str = "equal") -> float:
    """E = max_g E_g of BASELINE (seed 002 Algorithm 1, line 3): the default error target."""
    N = occ.grid_totals
    return float(np.max(grid_error_terms(N, N, occ.grid_max, bound, epsilon, split=split).error))


def _plan(occ: Occupancy, retained: sp.csr_array, bound: float, epsilon: float, *, split: str,
          method: str, status: Status, gap: float, error_bound: float | None,
          array_length: np.ndarray | None = None, info: dict[str, Any] | None = None) -> GridPlan:
    e_mu, e_var, released = grid_budgets(occ, retained, bound, epsilon, split=split)
    return GridPlan(
        retained=sp.csr_array(retained, dtype=np.int64), budget_mean=e_mu, budget_variance=e_var,
        released=released, unit="epsilon", method=method, status=status, gap=gap,
        error_bound=error_bound, array_length=array_length,
        info={"epsilon": epsilon, "split": split, **(info or {})},
    )


def _check(bound: float, epsilon: float, split: str, error_bound: float | None) -> tuple[float, float, str, float | None]:
    U, eps = check_bound(bound), check_epsilon(epsilon)
    split = check_choice(split, "split", SPLITS)
    if error_bound is not None:
        error_bound = check_nonnegative_float(error_bound, "error_bound")
    return U, eps, split, error_bound


def baseline_plan(occ: Occupancy, bound: float, epsilon: float, *, split: str = "equal",
                  error_bound: float | None = None) -> GridPlan:
    """BASELINE: every record kept, every grid released with budget ε (seed 002 §III-A).

    ``error_bound`` is only recorded (BASELINE cannot change any grid's error); default E of
    BASELINE.
    """
    U, eps, split, E = _check(bound, epsilon, split, error_bound)
    target = baseline_error_bound(occ, U, eps, split=split) if E is None else E
    return _plan(occ, occ.matrix, U, eps, split=split, method="baseline", status=Status.OPTIMAL,
                 gap=0.0, error_bound=target)


def _suppression_plan(occ: Occupancy, result: Any, U: float, eps: float, split: str, method: str,
                      E: float | None) -> GridPlan:
    """GridPlan of a :class:`dpopt.suppression.SuppressionPlan` (its suppressed pairs get Γ = 0)."""
    retained = occ.retained_matrix(list(result.suppressed) or None)
    target = float(result.error_bound) if np.isfinite(result.error_bound) else (
        baseline_error_bound(occ, U, eps, split=split) if E is None else E)
    return _plan(occ, retained, U, eps, split=split, method=method, status=Status(result.status),
                 gap=float(result.gap), error_bound=target, info={"suppression": result})


def greedy_plan(occ: Occupancy, bound: float, epsilon: float, *, split: str = "equal",
                error_bound: float | None = None) -> GridPlan:
    """CLIP-USER (seed 002 Algorithm 1, :func:`dpopt.clip_user`): every grid's error ≤ E."""
    from ..suppression import clip_user

    U, eps, split, E = _check(bound, epsilon, split, error_bound)
    result = clip_user(occ, U, eps, error_bound=E, split=split)
    return _suppression_plan(occ, result, U, eps, split, "greedy", E)


def milp_plan(occ: Occupancy, bound: float, epsilon: float, *, split: str = "equal",
              error_bound: float | None = None, time_limit: float | None = None) -> GridPlan:
    """The least-K suppression MILP (:func:`dpopt.solve_suppression`); time-limited: status + gap."""
    from ..suppression import solve_suppression

    U, eps, split, E = _check(bound, epsilon, split, error_bound)
    result = solve_suppression(occ, U, eps, error_bound=E, time_limit=time_limit, split=split)
    return _suppression_plan(occ, result, U, eps, split, "milp", E)


def pseudo_user_plan(plan: GridPlan, occ: Occupancy, bound: float, epsilon: float, *,
                     split: str = "equal") -> GridPlan:
    """Pseudo-user clipping after ``plan`` (seed 002 eq. (15), :func:`dpopt.pseudo_user_clipping`).

    Per grid, the array length m_g minimising the grid's error given the plan's suppressed pairs;
    every kept pair's Γ becomes min(Γ, m_g). Returns a GridPlan with ``array_length`` = m_g.
    """
    from ..suppression import pseudo_user_clipping

    U, eps, split, _ = _check(bound, epsilon, split, None)
    plan.check(occ.matrix)
    coo = sp.coo_array(occ.matrix)
    kept = np.asarray(plan.retained[coo.row, coo.col]).ravel() > 0
    suppressed = list(zip(occ.users[coo.row[~kept]], occ.grids[coo.col[~kept]]))
    result = pseudo_user_clipping(occ, U, eps, suppressed or None, split=split)
    length = np.asarray(result.clip, dtype=np.int64)
    truncated = sp.csr_array(plan.retained, copy=True)
    truncated.data = np.where(truncated.data > 0, np.minimum(truncated.data, length[truncated.indices]), 0)
    truncated.eliminate_zeros()
    return _plan(occ, truncated, U, eps, split=split, method=plan.method, status=plan.status, gap=plan.gap,
                 error_bound=plan.error_bound, array_length=length, info={**plan.info, "pseudo": result})


#: plan name -> planner ``(occ, bound, epsilon, *, split, error_bound, ...) -> GridPlan``
PLANNERS: dict[str, Callable[..., GridPlan]] = {
    "baseline": baseline_plan,
    "greedy": greedy_plan,
    "milp": milp_plan,
}
