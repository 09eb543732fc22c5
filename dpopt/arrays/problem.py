"""Custom array-length problems: the exact problem (13) of seed 003 as a cvxpy model over labelled lengths.

:func:`array_length_problem` returns an :class:`ArrayLengthProblem` (a ``cvxpy.Problem``), the
sibling of :func:`dpopt.clipping_problem`::

    minimise    Σ_j E_ε(v_j)·choose[j]                    (eq. (15) tabulated exactly)
    variables   choose[j] ∈ {0,1}, one per candidate length v_j (``problem.candidates``)
    subject to  Σ_j choose[j] = 1
    read-outs   length = Σ v_j choose[j],  retained = Σ Γ_{v_j} choose[j],  bias, noise, error

Candidates default to every integer in [m_*, m^*] (:data:`MAX_CANDIDATES` at most; beyond, the
distinct counts, where Lemma V.2 puts the unconstrained minimiser — an added constraint can then
exclude a better integer between counts, so pass ``candidates=`` explicitly). Add constraints with
:meth:`ArrayLengthProblem.with_constraints` (``p.length <= 12``, ``p.chosen(7) == 0``,
``p.retained >= 0.9 * p.total``) and solve with :meth:`ArrayLengthProblem.solve_plan`:

* no added constraint: :func:`dpopt.optimal_array_length` (the reduction to the distinct counts of
  Lemma V.2 and the O(L log L) enumeration) where its length is among the candidates, else the least
  tabulated error among them;
* added constraints: the MILP through :func:`dpopt.solve.solve_bounded` (hard time limit), warm-started
  at the unconstrained optimum when it satisfies them, with gaps 0 and every row and the objective in
  their own units (``_in_units``: HiGHS's absolute tolerances are then relative, at any U).

The returned :class:`~dpopt.arrays.ArrayLengthPlan` is re-evaluated with
:func:`dpopt.array_averaging_error` at the chosen length and the added constraints are re-checked.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from .._validation import DpoptInputError, _show, check_nonnegative_float, solver_options
from ..solve import Status, solve_bounded
from ..solve.cvxpy_backend import DataProblem, from_cvxpy, point_of
from ..solve.model import LinearModel
from .length import ArrayLengthPlan, CountProfile, _error_from_gamma, _setup, optimal_array_length

__all__ = ["ArrayLengthProblem", "ArrayLengthInfeasible", "array_length_problem", "solve_array_length_problem",
           "MAX_CANDIDATES"]

#: the default candidates are every integer in [m_*, m^*] up to this many
MAX_CANDIDATES = 100_000
#: tolerance on an added constraint at the re-checked plan
CONSTRAINT_TOL = 1e-6
_META = ("counts", "bound", "epsilon", "candidates", "total", "base_constraints")


class ArrayLengthProblem(DataProblem):
    """A ``cvxpy.Problem`` choosing the array length, that remembers its data (module docstring).

    Variable ``choose`` (one per ``candidates`` entry); expressions ``length``, ``retained``
    (Γ_m), ``bias``, ``noise``, ``error``; attributes ``counts``, ``bound``, ``epsilon``,
    ``candidates``, ``total`` (M).
    """

    META = _META

    @property
    def choose(self) -> cp.Variable:
        """choose[j] = 1: the array length is ``candidates[j]`` (cp.Variable)."""
        return self.var_dict["choose"]

    def _table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        prof = CountProfile.from_counts(self.counts, validated=True)
        v = self.candidates
        gamma = prof.gamma(v).astype(float)
        bias, noise = _error_from_gamma(gamma, v, prof.total, self.bound, self.epsilon)
        return gamma, bias, noise

    @property
    def length(self) -> cp.Expression:
        """m = Σ v_j choose[j]."""
        return self.candidates.astype(float) @ self.choose

    @property
    def retained(self) -> cp.Expression:
        """Γ_m = Σ_ℓ min{m_ℓ, m} at the chosen m."""
        return self._table()[0] @ self.choose

    @property
    def bias(self) -> cp.Expression:
        """U(1 − Γ_m/M) at the chosen m."""
        return self._table()[1] @ self.choose

    @property
    def noise(self) -> cp.Expression:
        """U·m/(ε·Γ_m) at the chosen m."""
        return self._table()[2] @ self.choose

    @property
    def error(self) -> cp.Expression:
        """E_ε(m) of eq. (15) at the chosen m."""
        _, bias, noise = self._table()
        return (bias + noise) @ self.choose


    def chosen(self, length: int) -> cp.Expression:
        """The variable of one candidate length: ``p.chosen(7) == 0`` forbids m = 7."""
        hit = np.flatnonzero(self.candidates == length)
        if hit.size != 1:
            raise DpoptInputError(f"`length` must be one of the candidates "
                                  f"[{int(self.candidates[0])}, ..., {int(self.candidates[-1])}]; got {length!r}")
        return self.choose[int(hit[0])]

    @property
    def added_constraints(self) -> list[cp.Constraint]:
        return list(self.constraints[self.base_constraints:])

    def with_constraints(self, *constraints: cp.Constraint | Iterable[cp.Constraint]) -> ArrayLengthProblem:
        """A new problem with extra constraints."""
        extra = self._flattened(constraints)
        return ArrayLengthProblem(self.objective, list(self.constraints) + extra)._attach(self._meta())

    def solve_plan(self, *, time_limit: float | None = None,
                   options: Mapping[str, Any] | None = None) -> ArrayLengthPlan:
        """Solve and return a re-checked :class:`ArrayLengthPlan` (module docstring)."""
        return solve_array_length_problem(self, time_limit=time_limit, options=options)


def _candidates(prof: CountProfile, candidates: Any) -> np.ndarray:
    if candidates is None:
        if prof.max_count - prof.min_count + 1 <= MAX_CANDIDATES:
            return np.arange(prof.min_count, prof.max_count + 1, dtype=np.int64)
        return prof.values.astype(np.int64)
    arr = np.asarray(candidates)
    if arr.ndim != 1 or arr.size == 0 or arr.dtype.kind not in "iu" and not (
            arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))):
        raise DpoptInputError(f"`candidates` must be a non-empty 1-D array of whole numbers; got {_show(candidates)}")
    if arr.dtype.kind == "f" and np.max(np.abs(arr)) >= 2.0 ** 62:  # the cast to int64 would wrap (a warning first)
        raise DpoptInputError(f"`candidates` must be whole numbers below 2^62; got {_show(candidates)}")
    arr = np.unique(arr.astype(np.int64))
    if arr[0] < 1:
        raise DpoptInputError(f"`candidates` must be integers >= 1; got {_show(candidates)}")
    return arr


def array_length_problem(counts: Any, bound: float, epsilon: float, *, candidates: Any = None) -> ArrayLengthProblem:
    """The array-length problem (13) of seed 003 as a cvxpy MILP over labelled candidate lengths.

    Parameters
    ----------
    counts : array_like of int
        m_ℓ ≥ 1 (public).
    bound, epsilon : float
        U and ε.
    candidates : array_like of int, optional
        The lengths to choose from (default: module docstring).

    Returns
    -------
    ArrayLengthProblem
        Unsolved; add constraints and call ``.solve_plan()``.
    """
    U, eps, prof = _setup(counts, bound, epsilon)
    v = _candidates(prof, candidates)
    choose = cp.Variable(v.size, boolean=True, name="choose")
    cons = [cp.sum(choose) == 1]
    gamma = prof.gamma(v).astype(float)
    bias, noise = _error_from_gamma(gamma, v, prof.total, U, eps)
    prob = ArrayLengthProblem(cp.Minimize((bias + noise) @ choose), cons)
    return prob._attach({"counts": prof.sorted_counts, "bound": U, "epsilon": eps, "candidates": v,
                         "total": prof.total, "base_constraints": len(cons)})


def solve_array_length_problem(problem: ArrayLengthProblem, *, time_limit: float | None = None,
                               options: Mapping[str, Any] | None = None) -> ArrayLengthPlan:
    """Solve an :class:`ArrayLengthProblem` (module docstring).

    ``status``: ``OPTIMAL``, or a limit status (the incumbent or the warm start, with the gap).
    ``method="custom"``, ``solver="milp"``; ``optimal_length``/``optimal_error`` are the
    unconstrained optimum, so ``excess`` is what the added constraints cost.

    Raises
    ------
    ArrayLengthInfeasible
        (a :class:`DpoptInputError`) no candidate length satisfies the added constraints.
    RuntimeError
        No length found within the time limit and no feasible warm start.
    """
    if not isinstance(problem, ArrayLengthProblem):
        raise DpoptInputError(f"`problem` must be an ArrayLengthProblem (from array_length_problem); got "
                              f"{type(problem).__name__}")
    if time_limit is not None:
        time_limit = check_nonnegative_float(time_limit, "time_limit")
    free = optimal_array_length(problem.counts, problem.bound, problem.epsilon, method="exact")
    lm, unit = _in_units(from_cvxpy(problem, name="array_length_custom"))
    cost = lm.c[lm.col_blocks["choose"]]
    if not problem.added_constraints:  # Σ choose = 1 alone: the least cost among the candidates
        if free.length in problem.candidates:  # the free optimum over every length is among them
            return free
        j = int(np.argmin(cost))
        return _plan(problem, int(problem.candidates[j]), Status.OPTIMAL, float(cost[j]) * unit, free, 0.0)
    onehot = (problem.candidates == free.length).astype(float)
    warm = point_of(lm, {"choose": onehot}, tol=CONSTRAINT_TOL) if onehot.any() else None
    opts = {"mip_rel_gap": 0.0, "mip_abs_gap": 0.0, **solver_options(options)}
    res = solve_bounded(lm, time_limit=time_limit, options=opts, warm_start=warm)
    x = res.x if res.x is not None else warm
    if x is None:
        raise _no_plan(res.status)
    j = int(np.argmax(x[lm.col_blocks["choose"]]))
    m = int(problem.candidates[j])
    problem.choose.value = (np.arange(problem.candidates.size) == j).astype(float)
    _recheck(problem, m)
    status = res.status if res.x is not None else Status.TIME_LIMIT
    return _plan(problem, m, status, float(res.objective) * unit if res.x is not None else math.nan,
                 free, float(res.gap))


def _in_units(lm: LinearModel) -> tuple[LinearModel, float]:
    """The model with every row divided by its largest |coefficient| and the objective by its
    largest |cost| (the unit returned): exact (a row's feasible set and the argmin do not change),
    and it makes HiGHS's absolute tolerances (feasibility 10⁻⁶ on a row, ``mip_abs_gap``) relative.
    A row of errors at U = 10⁻⁶ lies inside those tolerances as written: an outside fuzz run found
    plans "optimal" at 1.6–38× the optimum and a noise cap exceeded by 26 %. The columns are
    the binaries ``choose``, which are not scaled."""
    A = sp.csr_array(lm.A)
    big = np.zeros(A.shape[0])
    np.maximum.at(big, np.repeat(np.arange(A.shape[0]), np.diff(A.indptr)), np.abs(A.data))
    r = np.where(big > 0, big, 1.0)
    unit = float(np.max(np.abs(lm.c), initial=0.0)) or 1.0
    scaled = dataclasses.replace(lm, A=sp.csc_array(sp.diags(1.0 / r) @ A), row_lower=lm.row_lower / r,
                                 row_upper=lm.row_upper / r, c=lm.c / unit, offset=lm.offset / unit)
    return scaled, unit


def _recheck(problem: ArrayLengthProblem, m: int) -> None:
    """Every added constraint holds at the plan to :data:`CONSTRAINT_TOL` of its own terms' size
    (relative: at U = 10⁻⁶ an absolute 10⁻⁶ admitted any plan)."""
    for c in problem.added_constraints:
        size = max((float(np.max(np.abs(a.value), initial=0.0)) for a in c.args if a.value is not None), default=1.0)
        viol = float(np.max(c.violation()))
        if viol > CONSTRAINT_TOL * max(size, np.finfo(float).tiny):
            raise RuntimeError(f"the custom array-length plan m={m} violates an added constraint by {viol!r} "
                               f"(its terms' size {size!r})")


class ArrayLengthInfeasible(DpoptInputError):
    """No candidate length satisfies the added constraints."""


def _no_plan(status: Status) -> Exception:
    if status in (Status.INFEASIBLE, Status.INFEASIBLE_OR_UNBOUNDED):
        return ArrayLengthInfeasible("no candidate length satisfies the added constraints (status infeasible)")
    return RuntimeError(f"no array length found within the time limit (status {status.value})")


def _plan(problem: ArrayLengthProblem, m: int, status: Status, objective: float, free: ArrayLengthPlan,
          gap: float) -> ArrayLengthPlan:
    """The plan at length ``m``, its error re-evaluated with eq. (15) (:func:`array_averaging_error`)."""
    from .length import array_averaging_error

    prof = CountProfile.from_counts(problem.counts, validated=True)
    gamma = int(prof.gamma(np.asarray([m]))[0])
    bias, noise = _error_from_gamma(np.asarray([gamma]), np.asarray([m]), prof.total, problem.bound, problem.epsilon)
    error = float(array_averaging_error(problem.counts, problem.bound, problem.epsilon, m))
    return ArrayLengthPlan(length=m, error=error, bias=float(bias[0]), noise=float(noise[0]), retained_total=gamma,
                           method="custom", solver="milp", status=status, objective=objective,
                           optimal_length=free.optimal_length, optimal_error=free.optimal_error,
                           bound=problem.bound, epsilon=problem.epsilon, num_users=prof.num_users,
                           total_samples=prof.total, gap=0.0 if status is Status.OPTIMAL else gap)
