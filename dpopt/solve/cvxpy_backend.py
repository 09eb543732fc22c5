"""The cvxpy back-end: readable models that users extend, solved with HiGHS through cvxpy.

Three pieces (DESIGN convention 1, "model ≠ solve"):

* :func:`map_status` maps cvxpy's status strings to :class:`~dpopt.solve.result.Status`;
* :func:`solve_cvxpy` solves any cvxpy ``Problem`` with HiGHS and returns a
  :class:`~dpopt.solve.result.SolveResult` (primal values by variable name; duals in cvxpy's own
  convention, one block per constraint);
* :func:`to_cvxpy` translates a :class:`~dpopt.solve.model.LinearModel` (the standard form every
  dpopt model builds) into a cvxpy ``Problem``, and :func:`solve_linear_model` solves it and maps
  the duals to HiGHS's convention (``c − Aᵀy − z = 0``, see :mod:`dpopt.solve.highs`), so the same
  checks run on both back-ends.

cvxpy's dual convention: ``expr ≥ 0`` and ``expr ≤ 0`` have duals ≥ 0; for ``Ax ≥ l`` the HiGHS row
dual is ``+dual``, for ``Ax ≤ u`` it is ``−dual``, for ``Ax == b`` it is ``−dual``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import cvxpy as cp
import cvxpy.settings as cps
import numpy as np

from .model import LinearModel
from .result import SolveResult, Status

__all__ = ["map_status", "solve_cvxpy", "to_cvxpy", "CvxpyModel", "solve_linear_model"]

_STATUS = {
    cps.OPTIMAL: Status.OPTIMAL,
    cps.INFEASIBLE: Status.INFEASIBLE,
    cps.UNBOUNDED: Status.UNBOUNDED,
    cps.INFEASIBLE_OR_UNBOUNDED: Status.INFEASIBLE_OR_UNBOUNDED,
    cps.SOLVER_ERROR: Status.ERROR,
    # "inaccurate" answers are never reported as optimal
    cps.OPTIMAL_INACCURATE: Status.UNKNOWN,
    cps.INFEASIBLE_INACCURATE: Status.UNKNOWN,
    cps.UNBOUNDED_INACCURATE: Status.UNKNOWN,
}


def map_status(status: str | None, *, time_limit: float | None = None) -> Status:
    """Map a cvxpy status string to :class:`Status`.

    ``user_limit`` (HiGHS hit a limit) becomes ``TIME_LIMIT`` when a time limit was set, else
    ``ITERATION_LIMIT``; ``optimal_inaccurate`` and the other inaccurate answers become ``UNKNOWN``.
    """
    if status is None:
        return Status.UNKNOWN
    if status == cps.USER_LIMIT:
        return Status.TIME_LIMIT if time_limit is not None else Status.ITERATION_LIMIT
    return _STATUS.get(status, Status.UNKNOWN)


def _solve(problem: cp.Problem, time_limit: float | None, options: Mapping[str, Any] | None,
           verbose: bool) -> tuple[Status, str, float]:
    opts = dict(options or {})
    if time_limit is not None:
        opts["time_limit"] = float(time_limit)
    t0 = time.perf_counter()
    try:
        # nested dict: HiGHS option names such as "solver" clash with cvxpy's keywords
        problem.solve(solver=cp.HIGHS, verbose=verbose, highs_options=opts)
        raw = str(problem.status)
        status = map_status(problem.status, time_limit=time_limit)
    except cp.error.SolverError as exc:
        raw = f"solver_error: {exc}"
        status = Status.ERROR
    return status, raw, time.perf_counter() - t0


def solve_cvxpy(
    problem: cp.Problem,
    *,
    time_limit: float | None = None,
    options: Mapping[str, Any] | None = None,
    verbose: bool = False,
) -> SolveResult:
    """Solve a cvxpy ``Problem`` with HiGHS; return a :class:`SolveResult`.

    Parameters
    ----------
    problem : cvxpy.Problem
        Any LP/MILP cvxpy can hand to HiGHS.
    time_limit : float, optional
        Seconds (HiGHS option ``time_limit``).
    options : mapping, optional
        HiGHS options passed through cvxpy (e.g. ``{"presolve": "off"}``).

    Returns
    -------
    SolveResult
        ``x`` concatenates the flattened (column-major) values of ``problem.variables()``;
        ``col_blocks`` names them by variable name; ``row_duals`` concatenates the constraints'
        duals in cvxpy's convention, blocks ``"constraint_<i>"``. ``objective`` is
        ``problem.value``.
    """
    status, raw, elapsed = _solve(problem, time_limit, options, verbose)
    variables = problem.variables()
    col_blocks: dict[str, slice] = {}
    parts, start = [], 0
    have_x = status is Status.OPTIMAL or all(v.value is not None for v in variables)
    for v in variables:
        size = int(np.prod(v.shape)) if v.shape else 1
        name = v.name()
        if name in col_blocks:
            name = f"{name}#{v.id}"
        col_blocks[name] = slice(start, start + size)
        start += size
        if have_x and v.value is not None:
            parts.append(np.ravel(np.asarray(v.value, float), order="F"))
        else:
            have_x = False
    x = np.concatenate(parts) if have_x and parts else (np.zeros(0) if have_x else None)
    row_blocks: dict[str, slice] = {}
    dparts, start, have_dual = [], 0, status is Status.OPTIMAL
    for i, con in enumerate(problem.constraints):
        size = int(np.prod(con.shape)) if con.shape else 1
        row_blocks[f"constraint_{i}"] = slice(start, start + size)
        start += size
        dv = con.dual_value
        if dv is None:
            have_dual = False
        else:
            dparts.append(np.ravel(np.asarray(dv, float), order="F"))
    row_duals = np.concatenate(dparts) if have_dual and dparts else None
    objective = float(problem.value) if x is not None and problem.value is not None else math.nan
    ok = status is Status.OPTIMAL
    return SolveResult(
        status=status,
        objective=objective,
        bound=objective if ok else math.nan,
        gap=0.0 if ok else math.inf,
        x=x,
        row_duals=row_duals,
        col_duals=None,
        solve_time=elapsed,
        backend="cvxpy",
        raw_status=raw,
        col_blocks=col_blocks,
        row_blocks=row_blocks,
    )


@dataclass(frozen=True, eq=False)
class CvxpyModel:
    """A :class:`LinearModel` translated to cvxpy (see :func:`to_cvxpy`).

    ``x`` is the single vector variable; the constraint objects are kept so their duals can be
    mapped back to rows (``eq_rows``, ``lo_rows``, ``up_rows`` index into the model's rows) and
    columns (``lo_cols``, ``up_cols``).
    """

    problem: cp.Problem
    x: cp.Variable
    model: LinearModel
    eq: cp.Constraint | None
    lo: cp.Constraint | None
    up: cp.Constraint | None
    col_lo: cp.Constraint | None
    col_up: cp.Constraint | None
    eq_rows: np.ndarray
    lo_rows: np.ndarray
    up_rows: np.ndarray
    lo_cols: np.ndarray
    up_cols: np.ndarray


def to_cvxpy(model: LinearModel) -> CvxpyModel:
    """Translate a standard-form :class:`LinearModel` into a cvxpy ``Problem`` (vectorised).

    Rows with equal finite bounds become one equality block; the other finite row bounds become
    ``A_lo x ≥ l`` and ``A_up x ≤ u``; finite column bounds become ``x[J] ≥ lo``, ``x[K] ≤ up``.
    LPs only: a model with integer columns raises :class:`ValueError`.
    """
    if model.is_mip:
        raise ValueError("to_cvxpy translates LPs only; the model has integer columns")
    A = model.A.tocsr()
    n = model.num_cols
    x = cp.Variable(n, name="x")
    rl, ru = model.row_lower, model.row_upper
    eq_mask = np.isfinite(rl) & (rl == ru)
    eq_rows = np.flatnonzero(eq_mask)
    lo_rows = np.flatnonzero(np.isfinite(rl) & ~eq_mask)
    up_rows = np.flatnonzero(np.isfinite(ru) & ~eq_mask)
    lo_cols = np.flatnonzero(np.isfinite(model.col_lower))
    up_cols = np.flatnonzero(np.isfinite(model.col_upper))
    eq = lo = up = clo = cup = None
    cons: list[cp.Constraint] = []
    if eq_rows.size:
        eq = A[eq_rows] @ x == rl[eq_rows]
        cons.append(eq)
    if lo_rows.size:
        lo = A[lo_rows] @ x >= rl[lo_rows]
        cons.append(lo)
    if up_rows.size:
        up = A[up_rows] @ x <= ru[up_rows]
        cons.append(up)
    if lo_cols.size:
        clo = (x >= model.col_lower) if lo_cols.size == n else (x[lo_cols] >= model.col_lower[lo_cols])
        cons.append(clo)
    if up_cols.size:
        cup = (x <= model.col_upper) if up_cols.size == n else (x[up_cols] <= model.col_upper[up_cols])
        cons.append(cup)
    obj = model.c @ x + model.offset
    objective = cp.Maximize(obj) if model.sense == "max" else cp.Minimize(obj)
    return CvxpyModel(cp.Problem(objective, cons), x, model, eq, lo, up, clo, cup,
                      eq_rows, lo_rows, up_rows, lo_cols, up_cols)


def _dual(con: cp.Constraint | None) -> np.ndarray | None:
    if con is None:
        return None
    return None if con.dual_value is None else np.ravel(np.asarray(con.dual_value, float))


def solve_linear_model(
    model: LinearModel | CvxpyModel,
    *,
    time_limit: float | None = None,
    options: Mapping[str, Any] | None = None,
    verbose: bool = False,
) -> SolveResult:
    """Solve a :class:`LinearModel` through cvxpy + HiGHS; duals in HiGHS's sign convention.

    The returned :class:`SolveResult` has the model's ``col_blocks``/``row_blocks``, so
    ``result.value("alpha")`` and ``result.dual("range")`` work as with :func:`dpopt.solve.solve`.
    ``solve_time`` includes cvxpy's compilation (and the translation, when a LinearModel is given).
    """
    t0 = time.perf_counter()
    cm = model if isinstance(model, CvxpyModel) else to_cvxpy(model)
    lm = cm.model
    status, raw, _ = _solve(cm.problem, time_limit, options, verbose)
    elapsed = time.perf_counter() - t0
    xv = cm.x.value
    x = None if xv is None else np.asarray(xv, float).ravel()
    row_duals = col_duals = None
    if status is Status.OPTIMAL:
        y = np.zeros(lm.num_rows)
        z = np.zeros(lm.num_cols)
        sign = -1.0 if lm.sense == "max" else 1.0  # cvxpy negates a Maximize objective
        complete = True
        for con, idx, s, target in (
            (cm.eq, cm.eq_rows, -1.0, y),
            (cm.lo, cm.lo_rows, 1.0, y),
            (cm.up, cm.up_rows, -1.0, y),
            (cm.col_lo, cm.lo_cols, 1.0, z),
            (cm.col_up, cm.up_cols, -1.0, z),
        ):
            if idx.size == 0:
                continue
            d = _dual(con)
            if d is None:
                complete = False
                break
            target[idx] += s * sign * d
        if complete:
            row_duals, col_duals = y, z
    objective = float(lm.objective_value(x)) if x is not None else math.nan
    ok = status is Status.OPTIMAL
    return SolveResult(
        status=status,
        objective=objective,
        bound=objective if ok else math.nan,
        gap=0.0 if ok else math.inf,
        x=x,
        row_duals=row_duals,
        col_duals=col_duals,
        solve_time=elapsed,
        backend="cvxpy",
        raw_status=raw,
        col_blocks=dict(lm.col_blocks),
        row_blocks=dict(lm.row_blocks),
    )
