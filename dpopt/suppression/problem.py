"""Custom suppression problems: the exact MILP of seed 002 as a cvxpy model with labelled variables.

:func:`suppression_problem` returns a :class:`SuppressionProblem` (a ``cvxpy.Problem``), the sibling
of :func:`dpopt.clipping_problem`. Its variables are those of the compact MILP of
models/suppression.md, without the pair aggregation of :func:`solve_suppression` so that every
(user, grid) pair has its own variable::

    minimise    degradation                                   (K)
    variables   suppress[p] ∈ {0,1}, one per occupied pair p = (user, grid) (``problem.pairs``)
                level[t] ∈ {0,1}, run[r] ∈ {0,1}               (the exact error rows, eq. (11)-(13))
                degradation ∈ {1, ..., G_1}
    subject to  every grid's worst-case error ≤ E,  K ≥ G_ℓ − Σ_g suppress[ℓ,g]

Add constraints with :meth:`SuppressionProblem.with_constraints`, e.g.
``p.with_constraints(p.suppressed(7, "g3") == 0)`` (never suppress user 7 in grid g3) or
``p.with_constraints(cp.sum(p.suppress) <= 5)`` (at most five suppressed pairs), and solve with
:meth:`SuppressionProblem.solve_plan`. What the solve keeps:

* no added constraint: :func:`solve_suppression` itself (components, reductions, greedy warm start,
  tie-break, decomposition);
* added constraints: one MILP over the whole occupancy (an added constraint may couple components,
  and the pair aggregation would hide pairs it names), solved by :func:`dpopt.solve.solve_bounded`
  (hard time limit); CLIP-USER's plan is the warm start when it satisfies the added constraints;
  the tie-break (fewest suppressed samples at the optimal K, under the same constraints) gets at
  most the main solve's time. ``info["kept"]`` and ``info["dropped"]`` say which applied.

Every plan is re-checked with the exact calculus (:func:`dpopt.grid_errors`) and against the added
constraints before it is returned.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from typing import Any

import cvxpy as cp
import numpy as np

from .._validation import DpoptInputError, solver_options
from ..calculus import Split
from ..solve import SolveResult, Status, solve_bounded
from ..solve.cvxpy_backend import DataProblem, from_cvxpy, point_of, named_variable
from ._kernel import ERROR_RTOL, baseline_errors, check_inputs, check_time_limit, require_reachable
from .plan import SuppressionPlan, label_pairs, recheck, rechecked_plan

__all__ = ["SuppressionProblem", "suppression_problem", "solve_suppression_problem"]

#: the data a SuppressionProblem remembers besides its cvxpy model
_META = ("occ", "bound", "epsilon", "error_bound", "split", "pairs", "base_constraints", "_sm")
#: tolerance on an added constraint at the re-checked plan
CONSTRAINT_TOL = 1e-6



class SuppressionProblem(DataProblem):
    """A ``cvxpy.Problem`` for grid suppression that remembers its data (module docstring).

    Named variables ``suppress`` (one per pair, ``pairs`` order: the CSR order of ``occ.matrix``),
    ``level``, ``run``, ``degradation``. Attributes ``occ``, ``bound``, ``epsilon``,
    ``error_bound`` (E), ``split``, ``pairs`` (tuple of (user label, grid label)).
    """

    META = _META

    suppress = named_variable("suppress", "suppress[p] = 1: pair p = pairs[p] is suppressed (cp.Variable)")
    level = named_variable("level", "the assumed-largest-count chain of each grid (cp.Variable)")
    run = named_variable("run", "which run of the exact feasible set holds R_g (cp.Variable)")
    degradation = named_variable("degradation", "K, the largest number of grids a user keeps (cp.Variable)")


    def pair_index(self, user: Any, grid: Any) -> int:
        """Index in ``suppress`` of the pair (user label, grid label); ``KeyError`` if not occupied."""
        index = getattr(self, "_index", None)
        if index is None:
            index = {p: i for i, p in enumerate(self.pairs)}
            self._index = index
        try:
            return index[(user, grid)]
        except KeyError:
            raise DpoptInputError(f"(user, grid) = ({user!r}, {grid!r}) is not an occupied pair") from None

    def suppressed(self, user: Any, grid: Any) -> cp.Expression:
        """The variable of one (user, grid) pair: ``p.suppressed(7, "g3") == 0`` forbids it."""
        return self.suppress[self.pair_index(user, grid)]

    def with_constraints(self, *constraints: cp.Constraint | Iterable[cp.Constraint]) -> SuppressionProblem:
        """A new problem with extra constraints on the named variables."""
        extra = self._flattened(constraints)
        return SuppressionProblem(self.objective, list(self.constraints) + extra)._attach(self._meta())

    @property
    def added_constraints(self) -> list[cp.Constraint]:
        """The constraints added to the base model."""
        return list(self.constraints[self.base_constraints:])

    def solve_plan(self, *, time_limit: float | None = None, options: Mapping[str, Any] | None = None,
                   tie_break: bool = True) -> SuppressionPlan:
        """Solve with HiGHS and return a re-checked :class:`SuppressionPlan` (module docstring)."""
        return solve_suppression_problem(self, time_limit=time_limit, options=options, tie_break=tie_break)


def suppression_problem(occ: Any, bound: float, epsilon: float, *, error_bound: float | None = None,
                        split: Split = "equal") -> SuppressionProblem:
    """The suppression MILP (seed 002 §V) as a cvxpy model with one variable per (user, grid) pair.

    Parameters
    ----------
    occ : Occupancy
    bound, epsilon : float
        U and the per-grid ε.
    error_bound : float, optional
        E; default max_g E_g of BASELINE (seed 002 Algorithm 1, line 3).
    split : {"equal", "optimal"}

    Returns
    -------
    SuppressionProblem
        Unsolved; add constraints and call ``.solve_plan()``.
    """
    from .milp import build_suppression_model

    occ, U, eps, E, split = check_inputs(occ, bound, epsilon, error_bound, split)
    if E is None:
        E = float(np.max(baseline_errors(occ, U, eps, split)))
    require_reachable(occ, U, eps, E, split)
    sm = build_suppression_model(occ, U, eps, error_bound=E, split=split, row_threshold=0)
    lm = sm.model
    P = sm.pair_rows.size
    cb = lm.col_blocks
    suppress = cp.Variable(P, boolean=True, name="suppress")
    level = cp.Variable(max(cb["y"].stop - cb["y"].start, 1), boolean=True, name="level")
    run = cp.Variable(max(cb["d"].stop - cb["d"].start, 1), boolean=True, name="run")
    K = cp.Variable(integer=True, name="degradation")
    xc = np.flatnonzero(sm.pair_kind == 0)
    parts = [(cb["x"], suppress[xc] if xc.size else None), (cb["y"], level), (cb["d"], run), (cb["K"], K)]
    cons = _row_constraints(lm, parts)
    forced = np.flatnonzero(sm.pair_kind == 1)
    if forced.size:
        cons.append(suppress[forced] == 1)
    ylo = lm.col_lower[cb["y"]]
    if np.any(ylo > 0):
        cons.append(level[np.flatnonzero(ylo > 0)] == 1)
    cons += [K >= lm.col_lower[cb["K"]][0], K <= lm.col_upper[cb["K"]][0]]
    prob = SuppressionProblem(cp.Minimize(K), cons)
    return prob._attach({"occ": occ, "bound": U, "epsilon": eps, "error_bound": E, "split": split,
                         "pairs": tuple(_pair_labels(sm)), "base_constraints": len(cons), "_sm": sm})


def _pair_labels(sm: Any) -> list[tuple[Any, Any]]:
    users, grids = sm.occ.users.tolist(), sm.occ.grids.tolist()
    return [(users[r], grids[c]) for r, c in zip(sm.pair_rows.tolist(), sm.pair_cols.tolist())]


def _row_constraints(lm: Any, parts: list[tuple[slice, Any]]) -> list[cp.Constraint]:
    """``row_lower ≤ A·x ≤ row_upper`` of a standard form, with its column blocks as cvxpy expressions
    (rows scaled by the model, as HiGHS sees them)."""
    A = lm.A.tocsr()
    rl, ru = lm.row_lower, lm.row_upper
    eq = np.isfinite(rl) & (rl == ru)
    lo = np.flatnonzero(np.isfinite(rl) & ~eq)
    up = np.flatnonzero(np.isfinite(ru) & ~eq)
    cons = []
    if np.any(eq):
        cons.append(_rows(A, parts, np.flatnonzero(eq)) == rl[eq])
    if lo.size:
        cons.append(_rows(A, parts, lo) >= rl[lo])
    if up.size:
        cons.append(_rows(A, parts, up) <= ru[up])
    return cons


def _rows(A: Any, parts: list[tuple[slice, Any]], rows: np.ndarray) -> cp.Expression:
    Ar = A[rows]
    expr = 0
    for sl, var in parts:
        if var is not None and sl.stop > sl.start:
            expr = expr + Ar[:, sl] @ (cp.reshape(var, (1,), order="F") if var.ndim == 0 else var)
    return expr


def _values_of(sm: Any, point: np.ndarray | None, mask: np.ndarray) -> dict[str, np.ndarray] | None:
    """Per-variable values (names of :func:`suppression_problem`) of a plan point of the compact model."""
    if point is None:
        return None
    cb = sm.model.col_blocks
    pad = lambda v: v if v.size else np.zeros(1)  # noqa: E731 (empty blocks are a 1-vector)
    return {"suppress": mask.astype(float), "level": pad(point[cb["y"]]), "run": pad(point[cb["d"]]),
            "degradation": point[cb["K"]]}


def _set_values(problem: SuppressionProblem, lm: Any, x: np.ndarray) -> None:
    for v in problem.variables():
        sl = lm.col_blocks.get(v.name())
        if sl is not None:
            v.value = np.reshape(x[sl], v.shape, order="F") if v.shape else float(x[sl][0])


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.perf_counter())


def _warm_start(problem: SuppressionProblem, lm: Any, notes: dict[str, list[str]]) -> np.ndarray | None:
    """CLIP-USER's plan as a point of ``lm``, when it meets E and the added constraints."""
    from .greedy import clip_user
    from .milp import _mask_of

    sm = problem._sm
    g = clip_user(problem.occ, problem.bound, problem.epsilon, error_bound=problem.error_bound,
                  split=problem.split)
    mask = _mask_of(sm, g.suppressed) if g.feasible else None
    values = _values_of(sm, sm.point(mask), mask) if mask is not None else None
    point = point_of(lm, values, tol=CONSTRAINT_TOL) if values is not None else None
    (notes["kept"] if point is not None else notes["dropped"]).append(
        "warm start (CLIP-USER)" if point is not None else
        "warm start (CLIP-USER's plan violates the added constraints or misses an added variable)")
    return point


def _tie_break(problem: SuppressionProblem, lm: Any, x: np.ndarray, K: int, limit: float | None,
               options: Mapping[str, Any]) -> tuple[SolveResult, Any]:
    """Fewest suppressed samples with K kept, under the same constraints, warm-started at ``x``."""
    counts = problem._sm.pair_counts.astype(float)
    tie = cp.Problem(cp.Minimize(counts @ problem.suppress),
                     list(problem.constraints) + [problem.degradation <= K])
    lm2 = from_cvxpy(tie, name="suppression_tie_break")
    warm = point_of(lm2, {name: x[sl] for name, sl in lm.col_blocks.items()})
    return solve_bounded(lm2, time_limit=limit, options=options, warm_start=warm), lm2


def solve_suppression_problem(problem: SuppressionProblem, *, time_limit: float | None = None,
                              options: Mapping[str, Any] | None = None, tie_break: bool = True) -> SuppressionPlan:
    """Solve a :class:`SuppressionProblem` (module docstring); the plan is re-checked from scratch.

    ``status`` is ``OPTIMAL`` (proven, under the added constraints), ``TIME_LIMIT`` (incumbent or
    warm start, with ``lower_bound`` and ``gap``) or ``INFEASIBLE`` (no plan meets E and the added
    constraints; the plan then suppresses nothing and says so in ``info["note"]``).
    """
    if not isinstance(problem, SuppressionProblem):
        raise DpoptInputError(f"`problem` must be a SuppressionProblem (from suppression_problem); got "
                              f"{type(problem).__name__}")
    time_limit = check_time_limit(time_limit)
    if not problem.added_constraints:
        from .milp import solve_suppression

        plan = solve_suppression(problem.occ, problem.bound, problem.epsilon, error_bound=problem.error_bound,
                                 time_limit=time_limit, options=options, split=problem.split, tie_break=tie_break)
        plan.info.update(kept=["components", "reductions", "warm start", "tie-break"], dropped=[])
        return plan
    t0 = time.perf_counter()
    deadline = None if time_limit is None else t0 + time_limit
    opts = {"mip_rel_gap": 0.0, "mip_abs_gap": 0.0, **solver_options(options)}
    notes: dict[str, list[str]] = {"kept": [], "dropped": ["components", "pair aggregation"]}
    lm = from_cvxpy(problem, name="suppression_custom")
    warm = _warm_start(problem, lm, notes)
    res = solve_bounded(lm, time_limit=_remaining(deadline), options=opts, warm_start=warm)
    if res.status in (Status.INFEASIBLE, Status.INFEASIBLE_OR_UNBOUNDED) or (res.x is None and warm is None):
        st = Status.INFEASIBLE if res.status in (Status.INFEASIBLE, Status.INFEASIBLE_OR_UNBOUNDED) else res.status
        note = "no plan meets E and the added constraints" if st is Status.INFEASIBLE else "no incumbent"
        # infeasible: no K is attainable (bound inf); stopped without an incumbent: what the search proved
        # (K ≥ 1 at least), never above the plan returned (an inf bound beside K = 12, a fuzz run)
        lb = math.inf if st is Status.INFEASIBLE else (
            float(math.ceil(res.bound - 1e-6)) if math.isfinite(res.bound) else 1.0)
        return _plan(problem, frozenset(), st, lb, t0, {**notes, "note": note, "feasible_plan": False})
    x = res.x if res.x is not None else warm
    K = int(round(float(x[lm.col_blocks["degradation"]][0])))
    lb = float(math.ceil(res.bound - 1e-6)) if math.isfinite(res.bound) else 1.0
    status = res.status if res.x is not None else Status.TIME_LIMIT
    tie = "skipped"
    if tie_break and status is Status.OPTIMAL:
        limit = max(res.solve_time, 0.1)
        left = _remaining(deadline)
        res2, lm2 = _tie_break(problem, lm, x, K, limit if left is None else min(limit, left), opts)
        tie = res2.status.value
        if res2.x is not None:
            x, lm = res2.x, lm2
        notes["kept"].append("tie-break")
    mask = x[lm.col_blocks["suppress"]] > 0.5
    _set_values(problem, lm, x)
    problem.suppress.value = mask.astype(float)
    rows = problem._sm.pair_rows[mask]
    cols = problem._sm.pair_cols[mask]
    info = {**notes, "tie_break": tie, "solver_status": res.raw_status, "model_degradation": K}
    return _plan(problem, label_pairs(problem.occ, rows, cols), status, min(lb, K), t0, info, check_K=K)


def _plan(problem: SuppressionProblem, suppressed: frozenset, status: Status, lower_bound: float, t0: float,
          info: dict[str, Any], check_K: int | None = None) -> SuppressionPlan:
    """The re-checked plan; raises ``RuntimeError`` if it breaks E, its K or an added constraint."""
    occ, U, eps, E = problem.occ, problem.bound, problem.epsilon, problem.error_bound
    checked = recheck(occ, suppressed, U, eps, problem.split)
    if check_K is not None:
        viol = max((float(np.max(c.violation())) for c in problem.added_constraints), default=0.0)
        if checked[0] > check_K or not np.all(checked[1] <= E * (1 + ERROR_RTOL)) or viol > CONSTRAINT_TOL:
            raise RuntimeError(f"the custom suppression plan fails the re-check: K={checked[0]} (model {check_K}), "
                               f"max error {float(np.max(checked[1]))!r} (E={E!r}), constraint violation {viol!r}")
    K = checked[0]
    optimal = status is Status.OPTIMAL
    gap = 0.0 if optimal else (math.inf if not math.isfinite(lower_bound) else (K - lower_bound) / max(1.0, K))
    return rechecked_plan(occ, suppressed, checked, U=U, eps=eps, error_bound=E, status=status, gap=gap,
                          lower_bound=float(K) if optimal else float(lower_bound), method="milp",
                          solve_time=time.perf_counter() - t0, info={"split": problem.split, **info})
