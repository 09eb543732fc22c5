"""The release planners: each one a function of the public occupancy returning a :class:`GridPlan`.

A plan decides from public counts only (seed 002 §II-C: the occupancy array A is public) which
records of each user enter each grid's release and each grid's budgets (:mod:`dpopt.plan`):

* :func:`baseline_plan` — keep everything (seed 002 §III-A);
* :func:`greedy_plan` — CLIP-USER (seed 002 Algorithm 1, :func:`dpopt.clip_user`);
* :func:`milp_plan` — the least-K suppression MILP (:func:`dpopt.solve_suppression`);
* :func:`pseudo_user_plan` — a step after any of them: per-grid pseudo-user clipping
  (seed 002 eq. (15), :func:`dpopt.pseudo_user_clipping`), truncating Γ to the array length m_g.

Budgets (:func:`grid_budgets`): each released grid gets the per-grid budget b — ε of pure DP for
``mechanism="laplace"`` (seed 002), ρ of zCDP for ``mechanism="gaussian"`` (models/gaussian.md) —
split between mean and variance (``"equal"``: b/2 each, the paper; ``"optimal"``: Laplace
ε_μ = ε·√Δ_μ/(√Δ_μ + √Δ_Var), Gaussian ρ_μ = ρ·Δ_μ^{2/3}/(Δ_μ^{2/3} + Δ_Var^{2/3})), with the
variance's share capped so that the exact sampler's b'_μ + b'_Var ≤ b
(:func:`dpopt.noise.remaining_epsilon`; both samplers round budgets down to multiples of 2^-30).

Gaussian plans of CLIP-USER and the MILP (``split="equal"``): with each statistic given b/2, the
seed-002 grid error with Gaussian noise, bias + √(2/π)·(σ_μ + σ_Var) with σ_i = Δ_i/√ρ, equals
the Laplace grid error bias + 2(Δ_μ + Δ_Var)/ε at ε = √(2πρ) in every grid (both noise terms are
(Δ_μ + Δ_Var) times a constant). So the least-K plan for Gaussian noise at ρ per grid is the
least-K plan for Laplace noise at ε = √(2πρ) (:func:`gaussian_equivalent_epsilon`), and the
suppression models are reused unchanged. The optimal split has no such equivalence and is refused
for those two planners with Gaussian noise.

Options are keyword arguments: an unknown option is a :class:`TypeError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._validation import DpoptInputError, check_bound, check_choice, check_epsilon, check_nonnegative_float
from ..calculus import gaussian_grid_error_terms, grid_error_terms
from ..noise import MECHANISMS, remaining_epsilon
from ..occupancy import Occupancy
from ..plan import GridPlan
from ..solve.result import Status

__all__ = ["PLANNERS", "SPLITS", "baseline_plan", "greedy_plan", "milp_plan", "pseudo_user_plan",
           "grid_budgets", "baseline_error_bound", "gaussian_equivalent_epsilon", "rebudget"]

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


def grid_budgets(occ: Occupancy, retained: sp.csr_array, bound: float, budget: Any, *,
                 split: str = "equal", mechanism: str = "laplace") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(budget_mean, budget_variance, released)`` per grid for retained counts Γ.

    ``budget`` (a scalar or one per grid) is ε (``mechanism="laplace"``) or ρ (``"gaussian"``). A
    grid is released iff it retains a record and has a budget; its budget is split by ``split``
    (seed 002 eq. (8), :func:`dpopt.calculus.grid_error_terms`; Gaussian:
    :func:`dpopt.calculus.gaussian_grid_error_terms`) and the variance's share is capped by
    :func:`remaining_epsilon`(b, b_μ) so that the sampler's rounded budgets add up to ≤ b.
    """
    check_choice(mechanism, "mechanism", tuple(MECHANISMS))
    R, gmax = _retained_totals(retained)
    b = np.broadcast_to(np.asarray(budget, dtype=float), R.shape)
    released = (R > 0) & (b > 0)
    b_safe = np.where(released, b, 1.0)  # withheld grids: any positive budget, discarded below
    if mechanism == "laplace":
        terms = grid_error_terms(occ.grid_totals, R, gmax, bound, b_safe, split=split)
        mu, var = terms.epsilon_mean, terms.epsilon_variance
    else:
        gterms = gaussian_grid_error_terms(occ.grid_totals, R, gmax, bound, b_safe, split=split)
        mu, var = gterms.rho_mean, gterms.rho_variance
    b_mu = np.where(released, mu, 0.0)
    b_var = np.where(released, var, 0.0)
    exact = released & (b_mu >= _MIN_EXACT_BUDGET)
    for value in np.unique(b[exact]):  # b'_μ + b'_Var ≤ b exactly, whatever the float split
        sel = exact & (b == value)
        b_var[sel] = np.minimum(b_var[sel], remaining_epsilon(float(value), b_mu[sel]))
    return b_mu, b_var, released


def gaussian_equivalent_epsilon(rho: float) -> float:
    """ε = √(2πρ): the Laplace budget whose seed-002 grid error (equal split) equals the Gaussian
    one at ρ per grid (module docstring); used to plan CLIP-USER and the MILP for Gaussian noise."""
    return float(np.sqrt(2.0 * np.pi * rho))


def baseline_error_bound(occ: Occupancy, bound: float, epsilon: float, *, split: str = "equal") -> float:
    """E = max_g E_g of BASELINE (seed 002 Algorithm 1, line 3): the default error target."""
    N = occ.grid_totals
    return float(np.max(grid_error_terms(N, N, occ.grid_max, bound, epsilon, split=split).error))


def _plan(occ: Occupancy, retained: sp.csr_array, bound: float, budget: float, *, split: str,
          mechanism: str, method: str, status: Status, gap: float, error_bound: float | None,
          array_length: np.ndarray | None = None, info: dict[str, Any] | None = None) -> GridPlan:
    b_mu, b_var, released = grid_budgets(occ, retained, bound, budget, split=split, mechanism=mechanism)
    return GridPlan(
        retained=sp.csr_array(retained, dtype=np.int64), budget_mean=b_mu, budget_variance=b_var,
        released=released, unit=MECHANISMS[mechanism], method=method, status=status, gap=gap,
        error_bound=error_bound, array_length=array_length,
        info={"budget": budget, "mechanism": mechanism, "split": split, **(info or {})},
    )


def _check(bound: float, budget: float, split: str, error_bound: float | None,
           mechanism: str = "laplace") -> tuple[float, float, str, float | None]:
    check_choice(mechanism, "mechanism", tuple(MECHANISMS))
    U = check_bound(bound)
    b = check_epsilon(budget) if mechanism == "laplace" else check_epsilon(budget, "budget")
    split = check_choice(split, "split", SPLITS)
    if error_bound is not None:
        error_bound = check_nonnegative_float(error_bound, "error_bound")
    return U, b, split, error_bound


def _suppression_epsilon(budget: float, split: str, mechanism: str) -> float:
    """The Laplace ε the suppression models plan with (Gaussian: its equal-split equivalent)."""
    if mechanism == "laplace":
        return budget
    if split != "equal":
        raise DpoptInputError(
            f"`split` must be 'equal' for CLIP-USER and the MILP with Gaussian noise (their grid errors "
            f"equal the Laplace ones only with the equal split); got {split!r}"
        )
    return gaussian_equivalent_epsilon(budget)


def baseline_plan(occ: Occupancy, bound: float, budget: float, *, mechanism: str = "laplace",
                  split: str = "equal", error_bound: float | None = None) -> GridPlan:
    """BASELINE: every record kept, every grid released with the per-grid budget (seed 002 §III-A).

    ``budget`` is ε per grid (Laplace) or ρ per grid (Gaussian). ``error_bound`` is only recorded
    (BASELINE cannot change any grid's error); default E of BASELINE (Laplace).
    """
    U, b, split, E = _check(bound, budget, split, error_bound, mechanism)
    target = E
    if target is None and mechanism == "laplace":
        target = baseline_error_bound(occ, U, b, split=split)
    return _plan(occ, occ.matrix, U, b, split=split, mechanism=mechanism, method="baseline",
                 status=Status.OPTIMAL, gap=0.0, error_bound=target)


def _suppression_plan(occ: Occupancy, result: Any, U: float, budget: float, split: str, mechanism: str,
                      method: str, E: float | None) -> GridPlan:
    """GridPlan of a :class:`dpopt.suppression.SuppressionPlan` (its suppressed pairs get Γ = 0)."""
    retained = occ.retained_matrix(list(result.suppressed) or None)
    eps = _suppression_epsilon(budget, split, mechanism)
    target = float(result.error_bound) if np.isfinite(result.error_bound) else (
        baseline_error_bound(occ, U, eps, split=split) if E is None else E)
    return _plan(occ, retained, U, budget, split=split, mechanism=mechanism, method=method,
                 status=Status(result.status), gap=float(result.gap), error_bound=target,
                 info={"suppression": result})


def greedy_plan(occ: Occupancy, bound: float, budget: float, *, mechanism: str = "laplace",
                split: str = "equal", error_bound: float | None = None) -> GridPlan:
    """CLIP-USER (seed 002 Algorithm 1, :func:`dpopt.clip_user`): every grid's error ≤ E.

    ``budget`` is ε per grid (Laplace) or ρ per grid (Gaussian, planned through
    :func:`gaussian_equivalent_epsilon`).
    """
    from ..suppression import clip_user

    U, b, split, E = _check(bound, budget, split, error_bound, mechanism)
    result = clip_user(occ, U, _suppression_epsilon(b, split, mechanism), error_bound=E, split=split)
    return _suppression_plan(occ, result, U, b, split, mechanism, "greedy", E)


def milp_plan(occ: Occupancy, bound: float, budget: float, *, mechanism: str = "laplace",
              split: str = "equal", error_bound: float | None = None,
              time_limit: float | None = None) -> GridPlan:
    """The least-K suppression MILP (:func:`dpopt.solve_suppression`); time-limited: status + gap.

    ``budget`` is ε per grid (Laplace) or ρ per grid (Gaussian, planned through
    :func:`gaussian_equivalent_epsilon`).
    """
    from ..suppression import solve_suppression

    U, b, split, E = _check(bound, budget, split, error_bound, mechanism)
    result = solve_suppression(occ, U, _suppression_epsilon(b, split, mechanism), error_bound=E,
                               time_limit=time_limit, split=split)
    return _suppression_plan(occ, result, U, b, split, mechanism, "milp", E)


def pseudo_user_plan(plan: GridPlan, occ: Occupancy, bound: float, budget: float, *,
                     split: str = "equal") -> GridPlan:
    """Pseudo-user clipping after ``plan`` (seed 002 eq. (15), :func:`dpopt.pseudo_user_clipping`).

    Per grid, the array length m_g minimising the grid's error given the plan's suppressed pairs
    (at the per-grid ``budget`` in the plan's unit; Gaussian through its equivalent ε); every kept
    pair's Γ becomes min(Γ, m_g). Returns a GridPlan with ``array_length`` = m_g.
    """
    from ..suppression import pseudo_user_clipping

    mechanism = "laplace" if plan.unit == "epsilon" else "gaussian"
    U, b, split, _ = _check(bound, budget, split, None, mechanism)
    plan.check(occ.matrix)
    coo = sp.coo_array(occ.matrix)
    kept = np.asarray(plan.retained[coo.row, coo.col]).ravel() > 0
    suppressed = list(zip(occ.users[coo.row[~kept]], occ.grids[coo.col[~kept]]))
    result = pseudo_user_clipping(occ, U, _suppression_epsilon(b, split, mechanism), suppressed or None,
                                  split=split)
    length = np.asarray(result.clip, dtype=np.int64)
    truncated = sp.csr_array(plan.retained, copy=True)
    truncated.data = np.where(truncated.data > 0, np.minimum(truncated.data, length[truncated.indices]), 0)
    truncated.eliminate_zeros()
    return _plan(occ, truncated, U, b, split=split, mechanism=mechanism, method=plan.method,
                 status=plan.status, gap=plan.gap, error_bound=plan.error_bound, array_length=length,
                 info={**plan.info, "pseudo": result})


def rebudget(plan: GridPlan, occ: Occupancy, bound: float, budget: float, *, split: str = "equal") -> GridPlan:
    """The same retained counts with a new per-grid budget (in the plan's unit), split again.

    Used to spend a total budget B: a plan made at b₀ = B/G₁ keeps each user in at most K grids,
    so every grid may then get B/K (:func:`dpopt.privacy.budgets.per_grid_budget`); a larger budget
    only lowers every grid's error, so the plan's error guarantee still holds.
    """
    mechanism = "laplace" if plan.unit == "epsilon" else "gaussian"
    U, b, split, _ = _check(bound, budget, split, None, mechanism)
    return _plan(occ, plan.retained, U, b, split=split, mechanism=mechanism, method=plan.method,
                 status=plan.status, gap=plan.gap, error_bound=plan.error_bound,
                 array_length=plan.array_length, info={**plan.info, "budget": b})


#: plan name -> planner ``(occ, bound, epsilon, *, split, error_bound, ...) -> GridPlan``
PLANNERS: dict[str, Callable[..., GridPlan]] = {
    "baseline": baseline_plan,
    "greedy": greedy_plan,
    "milp": milp_plan,
}
