"""The cvxpy back-end: readable models that users extend, solved with HiGHS through cvxpy.

Three pieces (DESIGN convention 1, "model ≠ solve"):

* :func:`map_status` maps cvxpy's status strings to :class:`~dpopt.solve.result.Status`;
* :func:`solve_cvxpy` solves any cvxpy ``Problem`` with HiGHS and returns a
  :class:`~dpopt.solve.result.SolveResult` (primal values by variable name; duals in cvxpy's own
  convention, one block per constraint);
* :func:`from_cvxpy` goes the other way (any LP/MILP cvxpy can hand to HiGHS → standard form,
  columns named by variable), so custom cvxpy models can be exported with
  :func:`dpopt.solve.write_model`;
* :func:`to_cvxpy` translates a :class:`~dpopt.solve.model.LinearModel` (the standard form every
  dpopt model builds) into a cvxpy ``Problem``, and :func:`solve_linear_model` solves it and maps
  the duals to HiGHS's convention (``c − Aᵀy − z = 0``, see :mod:`dpopt.solve.highs`), so the same
  checks run on both back-ends.

cvxpy's dual convention: ``expr ≥ 0`` and ``expr ≤ 0`` have duals ≥ 0; for ``Ax ≥ l`` the HiGHS row
dual is ``+dual``, for ``Ax ≤ u`` it is ``−dual``, for ``Ax == b`` it is ``−dual``.
"""

from __future__ import annotations

import contextlib
import dataclasses

import math
import time
import types
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import cvxpy as cp
import cvxpy.settings as cps
import numpy as np

from .._validation import DpoptInputError, solver_options, solver_seconds
from .highs import _quiet_stdout
from .model import LinearModel
from .result import SolveResult, Status

__all__ = ["map_status", "solve_cvxpy", "to_cvxpy", "from_cvxpy", "CvxpyModel", "solve_linear_model", "point_of",
           "DataProblem", "named_variable"]


def named_variable(name: str, doc: str) -> property:
    """A read-only property returning the problem's cvxpy variable ``name`` (``var_dict[name]``)."""

    def get(self: cp.Problem) -> cp.Variable:
        return self.var_dict[name]

    return property(get, doc=doc)


class DataProblem(cp.Problem):
    """A ``cvxpy.Problem`` that remembers the data it was built from: the attributes named in the
    subclass's ``META`` travel to every problem derived from it (``with_*`` methods)."""

    META: tuple[str, ...] = ()

    def _attach(self, src: Mapping[str, Any]) -> Any:
        for key in self.META:
            setattr(self, key, src[key])
        return self

    def _meta(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.META}

    @staticmethod
    def _flattened(constraints: tuple[Any, ...]) -> list[cp.Constraint]:
        """``with_constraints``' arguments as one list: each a cvxpy constraint (or a bool, which cvxpy
        reads as a trivial one) or a list or tuple of them; anything else is refused by name."""
        extra: list[cp.Constraint] = []
        for c in constraints:
            extra.extend(c if isinstance(c, (list, tuple)) else [c])
        for c in extra:
            if not isinstance(c, (cp.Constraint, bool, np.bool_)):
                raise DpoptInputError(f"`constraints` must be cvxpy constraints on the problem's variables or lists of "
                                      f"them; got {type(c).__name__} {str(c)[:60]!r}")
        return extra

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
           verbose: bool, scale: float = 1.0) -> tuple[Status, str, float]:
    opts = solver_options(options)
    if time_limit is not None:
        opts["time_limit"] = float(time_limit)
    t0 = time.perf_counter()
    try:
        # cvxpy warns ("Solution may be inaccurate") on limits: the status says it, keep it quiet
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # nested dict: HiGHS option names such as "solver" clash with cvxpy's keywords
            # HiGHS prints from C++ (its banner at a process's first Highs(), before any option can
            # be set): fd 1 goes to /dev/null unless the caller asked for the solver's log
            with contextlib.nullcontext() if verbose else _quiet_stdout():
                if scale == 1.0:
                    problem.solve(solver=cp.HIGHS, verbose=verbose, highs_options=opts)
                else:
                    _solve_in_units(problem, scale, verbose, opts)
        raw = str(problem.status)
        if caught:
            raw += "; " + "; ".join(str(w.message) for w in caught)
        status = map_status(problem.status, time_limit=time_limit)
    except cp.error.SolverError as exc:
        raw = f"solver_error: {exc}"
        status = Status.ERROR
    except cp.error.DCPError as exc:  # a user's objective or constraint cvxpy cannot prove convex
        first = " ".join(line.strip() for line in str(exc).splitlines()[:3])
        raise DpoptInputError(f"`problem` must be convex by cvxpy's rules (DCP): {first[:240]}") from None
    except ValueError as exc:  # cvxpy's "Cannot unpack invalid solution": HiGHS ended without one (data
        if "returned status kError for option" in str(exc):  # an option HiGHS refuses, as highs.py says it
            raise DpoptInputError(f"`options` must hold HiGHS options HiGHS accepts; {exc}") from None
        if "invalid solution" not in str(exc):  # beyond its 1e20 infinity, e.g. U/ε of 1e30): reported
            raise
        raw = f"solver_error: HiGHS returned no valid solution (coefficients beyond its 1e20 infinity?): {exc}"[:400]
        status = Status.ERROR
    return status, raw, time.perf_counter() - t0


class _ScaledInfo:
    """HiGHS's ``HighsInfo`` of a solve in units of ``scale`` with the objective's value put back in
    the problem's own units (every other field read through)."""

    def __init__(self, info: Any, factor: float) -> None:
        self._info = info
        self.objective_function_value = float(info.objective_function_value) * factor

    def __getattr__(self, name: str) -> Any:
        return getattr(self._info, name)


def _solve_in_units(problem: cp.Problem, scale: float, verbose: bool, opts: dict[str, Any]) -> None:
    """Solve ``problem`` with HiGHS in units of ``scale`` and unpack the solution in its own units.

    The standard form cvxpy hands to HiGHS (min ½xᵀPx + qᵀx over rows Ax ≤/= b and bounds l ≤ x ≤ u)
    is rewritten with x = D·y, D = ``scale`` on every continuous column and 1 on an integer or
    boolean one (an integer stays an integer): the columns of A by D, every row and right-hand side
    by 1/``scale``, the bounds by 1/D, the objective by 1/k, k = scale (linear) or scale² (with a
    quadratic part) — exact for any model: the same optimum, x* = D·y*, the objective's value k times
    the scaled one, the rows' duals k/scale times. Solved in its own units, a model whose values are all
    of the order of 10⁻⁷ lies inside HiGHS's absolute feasibility tolerances (a clipping plan at
    U = 10⁻⁷ came back "optimal" at 1.9× the optimum), and a QP whose values are of order 10⁶ never met
    HiGHS's optimality tolerance (the ``"mse"`` clipping objective ran until its time limit at U = 10⁶)."""
    import scipy.sparse as sp

    data, chain, inverse = problem.get_problem_data(cp.HIGHS)
    quadratic = data.get("P") is not None and bool(data["P"].count_nonzero())
    k = scale * scale if quadratic else scale
    data = dict(data)
    n = int(np.size(data["c"] if data.get("c") is not None else data["q"]))
    D = np.full(n, scale)
    whole = np.concatenate([np.asarray(data.get(key, []) or [], dtype=np.int64).ravel()
                            for key in ("bool_vars_idx", "int_vars_idx")])
    D[whole] = 1.0
    for key in ("A", "F"):  # rows (conic: A; QP: A and F), column by column, when D is not uniform
        if whole.size and data.get(key) is not None:
            data[key] = (sp.csc_matrix(data[key]) @ sp.diags(D / scale)).tocsc()
    for key in ("b", "G"):  # right-hand sides (conic: b; QP: b, G)
        if data.get(key) is not None:
            data[key] = np.asarray(data[key], dtype=float) / scale
    for key in ("lower_bounds", "upper_bounds"):
        if data.get(key) is not None:
            data[key] = np.asarray(data[key], dtype=float) / D
    for key in ("c", "q"):  # the linear cost (conic: c; QP: q)
        if data.get(key) is not None:
            data[key] = np.asarray(data[key], dtype=float) * D / k
    if quadratic:
        data["P"] = (sp.diags(D) @ sp.csc_matrix(data["P"]) @ sp.diags(D) / k).tocsc()
    raw = chain.solver.solve_via_data(data, False, verbose, {"highs_options": dict(opts)})
    sol = raw["solution"]
    raw = {**raw, "info": _ScaledInfo(raw["info"], k),
           "solution": types.SimpleNamespace(col_value=np.asarray(sol.col_value, dtype=float) * D,
                                             row_dual=np.asarray(sol.row_dual, dtype=float) * (k / scale))}
    problem.unpack_results(raw, chain, inverse)


def _result(status: Status, raw: str, elapsed: float, objective: float, *, x: np.ndarray | None,
            row_duals: np.ndarray | None, col_duals: np.ndarray | None, col_blocks: dict[str, slice],
            row_blocks: dict[str, slice]) -> SolveResult:
    """A cvxpy-back-end :class:`SolveResult`: bound = objective and gap 0 only when optimal."""
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
        col_blocks=col_blocks,
        row_blocks=row_blocks,
    )


def solve_cvxpy(
    problem: cp.Problem,
    *,
    time_limit: float | None = None,
    options: Mapping[str, Any] | None = None,
    verbose: bool = False,
    scale: float = 1.0,
) -> SolveResult:
    """Solve a cvxpy ``Problem`` with HiGHS; return a :class:`SolveResult`.

    Parameters
    ----------
    problem : cvxpy.Problem
        Any LP/MILP cvxpy can hand to HiGHS.
    time_limit : float, optional
        Total seconds for the solve (HiGHS option ``time_limit``; cvxpy's compilation is not
        interruptible and comes on top).
    options : mapping, optional
        HiGHS options passed through cvxpy (e.g. ``{"presolve": "off"}``).
    scale : float
        The order of the variables' values (e.g. the bound U of a clipping model): the model is
        solved in units of it (x = scale·y, exact; :func:`_solve_in_units`) so that HiGHS's absolute
        tolerances mean the same at any U. 1 (the default) solves it as written.

    Returns
    -------
    SolveResult
        ``x`` concatenates the flattened (column-major) values of ``problem.variables()``;
        ``col_blocks`` names them by variable name; ``row_duals`` concatenates the constraints'
        duals in cvxpy's convention, blocks ``"constraint_<i>"``. ``objective`` is
        ``problem.value``.
    """
    time_limit = solver_seconds(time_limit)
    if not (isinstance(scale, (int, float, np.floating)) and math.isfinite(scale) and scale > 0):
        raise DpoptInputError(f"`scale` must be a finite number > 0; got {scale!r}")
    status, raw, elapsed = _solve(problem, time_limit, options, verbose, float(scale))
    return _collected(problem, status, raw, elapsed)


def _collected(problem: cp.Problem, status: Status, raw: str, elapsed: float) -> SolveResult:
    """:func:`solve_cvxpy`'s result from the solved ``problem``: its variables' values and its
    constraints' duals, each in one named block."""
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
    return _result(status, raw, elapsed, objective, x=x, row_duals=row_duals, col_duals=None,
                   col_blocks=col_blocks, row_blocks=row_blocks)


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
    ``A_lo x ≥ l`` and ``A_up x ≤ u``; column bounds become cvxpy variable bounds
    (``cp.Variable(bounds=...)``), which cvxpy passes to HiGHS as bounds (``col_lo``/``col_up`` are
    None; kept for compatibility).
    LPs only: a model with integer columns raises :class:`ValueError`.
    """
    if model.is_mip:
        raise ValueError("to_cvxpy translates LPs only; the model has integer columns")
    A = model.A.tocsr()
    n = model.num_cols
    rl, ru = model.row_lower, model.row_upper
    eq_mask = np.isfinite(rl) & (rl == ru)
    eq_rows = np.flatnonzero(eq_mask)
    lo_rows = np.flatnonzero(np.isfinite(rl) & ~eq_mask)
    up_rows = np.flatnonzero(np.isfinite(ru) & ~eq_mask)
    lo_cols = np.flatnonzero(np.isfinite(model.col_lower))
    up_cols = np.flatnonzero(np.isfinite(model.col_upper))
    # column bounds as variable bounds (HiGHS gets them as bounds, not as rows: ~15x faster on
    # the clipping LP at L = 10^5); their duals are recovered from stationarity, z = c − Aᵀy
    x = cp.Variable(n, name="x", bounds=[model.col_lower.astype(float), model.col_upper.astype(float)])
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

    Row duals come from cvxpy's constraint duals; column duals (reduced costs) from
    ``z = c − Aᵀy``, since cvxpy reports no duals for variable bounds — so the stationarity residual
    of :func:`dpopt.clipping.standard_form_kkt` is zero by construction for this back-end, while
    dual signs and complementary slackness on the bounds are still checked.
    The returned :class:`SolveResult` has the model's ``col_blocks``/``row_blocks``, so
    ``result.value("alpha")`` and ``result.dual("range")`` work as with :func:`dpopt.solve.solve`.
    ``solve_time`` includes cvxpy's compilation (and the translation, when a LinearModel is given).
    """
    t0 = time.perf_counter()
    cm = model if isinstance(model, CvxpyModel) else to_cvxpy(model)
    lm = cm.model
    remaining = None if time_limit is None else max(0.0, float(time_limit) - (time.perf_counter() - t0))
    status, raw, _ = _solve(cm.problem, remaining, options, verbose)
    elapsed = time.perf_counter() - t0
    xv = cm.x.value
    x = None if xv is None else np.asarray(xv, float).ravel()
    if x is not None and status is not Status.OPTIMAL:
        # a point returned at a limit is kept only when it is primal feasible (like HiGHS's
        # primal_solution_status), never as a silent non-optimal answer
        scale = max(1.0, float(np.max(np.abs(lm.row_lower[np.isfinite(lm.row_lower)]), initial=0.0)))
        if lm.max_violation(x) > 1e-7 * scale:
            x = None
    row_duals = col_duals = None
    if status is Status.OPTIMAL:
        y = np.zeros(lm.num_rows)
        sign = -1.0 if lm.sense == "max" else 1.0  # cvxpy negates a Maximize objective
        complete = True
        for con, idx, s, target in (
            (cm.eq, cm.eq_rows, -1.0, y),
            (cm.lo, cm.lo_rows, 1.0, y),
            (cm.up, cm.up_rows, -1.0, y),
        ):
            if idx.size == 0:
                continue
            d = _dual(con)
            if d is None:
                complete = False
                break
            target[idx] += s * sign * d
        if complete:
            # reduced costs of the bounded columns from stationarity (cvxpy reports no bound duals)
            z = lm.c - lm.A.T @ y
            row_duals, col_duals = y, z
    objective = float(lm.objective_value(x)) if x is not None else math.nan
    res = _result(status, raw, elapsed, objective, x=x, row_duals=row_duals, col_duals=col_duals,
                  col_blocks=dict(lm.col_blocks), row_blocks=dict(lm.row_blocks))
    return dataclasses.replace(res, col_labels=dict(lm.col_labels), row_labels=dict(lm.row_labels),
                               num_cols=lm.num_cols, num_rows=lm.num_rows)


def from_cvxpy(problem: cp.Problem, *, name: str = "cvxpy") -> LinearModel:
    """The standard form cvxpy hands to HiGHS, as a :class:`LinearModel` (for export or inspection).

    Uses ``problem.get_problem_data("HIGHS")``: equality rows (zero cone) become ``Ax = b``,
    inequality rows (non-negative cone) ``Ax ≤ b``; variable bounds and integrality are kept; column
    blocks are named after the cvxpy variables (flattened column-major, as cvxpy stores them).
    A ``Maximize`` problem is returned with ``sense="max"`` and the original objective.
    """
    from cvxpy.reductions.dcp2cone.cone_matrix_stuffing import ConeMatrixStuffing

    import scipy.sparse as sp

    data, chain, inverse = problem.get_problem_data(cp.HIGHS)
    dims = data["dims"]
    if dims.exp or dims.soc or dims.psd or dims.p3d:
        raise DpoptInputError("`problem`: from_cvxpy handles linear problems only (the problem has conic constraints)")
    if data.get("P") is not None and sp.csc_array(data["P"]).nnz:
        raise DpoptInputError("`problem`: from_cvxpy handles linear problems only (the objective is quadratic)")
    c = np.asarray(data["c"], float).ravel()
    _, offset, _, _ = data["param_prob"].apply_parameters()
    A = sp.csc_array(data["A"])
    b = np.asarray(data["b"], float).ravel()
    nz, nn = int(dims.zero), int(dims.nonneg)
    row_lower = np.concatenate([b[:nz], np.full(nn, -np.inf)])
    row_upper = b[: nz + nn].copy()
    n = c.size
    lo = data.get("lower_bounds")
    up = data.get("upper_bounds")
    col_lower = np.full(n, -np.inf) if lo is None else np.asarray(lo, float)
    col_upper = np.full(n, np.inf) if up is None else np.asarray(up, float)
    integ = np.zeros(n, dtype=bool)
    bidx = np.asarray(data.get("bool_vars_idx", []), dtype=np.int64)
    integ[bidx] = True
    integ[np.asarray(data.get("int_vars_idx", []), dtype=np.int64)] = True
    if bidx.size:  # boolean variables are integers in [0, 1]
        col_lower[bidx] = np.maximum(col_lower[bidx], 0.0)
        col_upper[bidx] = np.minimum(col_upper[bidx], 1.0)
    stuffing = next(inv for red, inv in zip(chain.reductions, inverse) if isinstance(red, ConeMatrixStuffing))
    names = {v.id: v.name() for v in problem.variables()}
    blocks: dict[str, slice] = {}
    for vid, off in sorted(stuffing.var_offsets.items(), key=lambda kv: kv[1]):
        size = int(np.prod(stuffing.var_shapes[vid])) if stuffing.var_shapes[vid] else 1
        key = names.get(vid, f"var{vid}")
        blocks[key if key not in blocks else f"{key}#{vid}"] = slice(off, off + size)
    flip = isinstance(problem.objective, cp.Maximize)
    return LinearModel(
        c=-c if flip else c,
        A=A,
        row_lower=row_lower,
        row_upper=row_upper,
        col_lower=col_lower,
        col_upper=col_upper,
        integrality=integ if integ.any() else None,
        sense="max" if flip else "min",
        offset=float(-offset if flip else offset),
        col_blocks=blocks,
        row_blocks={"equalities": slice(0, nz), "inequalities": slice(nz, nz + nn)},
        name=name,
    )


def point_of(model: LinearModel, values: Mapping[str, Any], *, tol: float = 1e-6) -> np.ndarray | None:
    """A point of ``model`` (from :func:`from_cvxpy`) from values by variable name, for a warm start.

    ``None`` when a column block has no value (a variable the caller did not name) or the point
    violates a row, a bound or integrality by more than ``tol``.
    """
    x = np.zeros(model.num_cols)
    covered = np.zeros(model.num_cols, dtype=bool)
    for name, sl in model.col_blocks.items():
        if name not in values:
            return None
        x[sl] = np.ravel(np.asarray(values[name], float), order="F")
        covered[sl] = True
    if not covered.all() or model.max_violation(x) > tol:
        return None
    return x
