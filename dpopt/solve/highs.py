"""The HiGHS back-end: the only module of dpopt that imports :mod:`highspy`.

Models arrive as vectorised CSC arrays (:class:`~dpopt.solve.model.LinearModel`) and are passed with
``Highs.passModel``'s array overload, so building a model with 10^6 columns costs no Python loop.
Statuses are mapped to :class:`~dpopt.solve.result.Status`; a time-limited MIP returns its incumbent,
its proven bound and its gap, never a silent non-optimal answer. Every option set is checked.

Dual sign convention (HiGHS): for a minimisation, the row dual ``y`` satisfies
``c − Aᵀy − z = 0`` with ``y ≥ 0`` on active lower row bounds and ``y ≤ 0`` on active upper ones.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import highspy
import numpy as np

from .._validation import DpoptInputError, solver_options, solver_seconds
from .model import LinearModel
from .result import SolveResult, Status

__all__ = ["solve_highs", "write_model", "merged_options", "DEFAULT_OPTIONS", "HIGHS_VERSION"]



@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
    """Send the process's file descriptor 1 to /dev/null for the duration (C-level prints).

    HiGHS prints its banner ("Running HiGHS ...") from C++ the first time a ``Highs`` object is
    built in a process, before any option can be set; that line would break ``--json`` output.
    """
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # pytest capture, StringIO: no real descriptor
        fd = 1
    try:
        sys.stdout.flush()
        saved = os.dup(fd)
    except (OSError, ValueError):  # no usable descriptor 1 (closed, daemon): nothing to protect
        yield
        return
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), fd)
            try:
                yield
            finally:
                os.dup2(saved, fd)
    finally:
        os.close(saved)


def _new_highs(*, verbose: bool = False) -> highspy.Highs:
    """A ``Highs`` object with all solver output off unless ``verbose``."""
    with _quiet_stdout():
        h = highspy.Highs()
    _set_option(h, "output_flag", bool(verbose))
    return h


def _version() -> str:
    with _quiet_stdout():  # the banner is printed once per process, at the first Highs()
        h = highspy.Highs()
    return str(h.version()) if hasattr(h, "version") else "unknown"


HIGHS_VERSION = _version()

#: Options dpopt sets on every HiGHS solve; the caller's ``options`` are merged over them.
DEFAULT_OPTIONS: dict[str, Any] = {"output_flag": False}

_MS = highspy.HighsModelStatus
_STATUS = {
    _MS.kOptimal: Status.OPTIMAL,
    _MS.kInfeasible: Status.INFEASIBLE,
    _MS.kUnbounded: Status.UNBOUNDED,
    _MS.kUnboundedOrInfeasible: Status.INFEASIBLE_OR_UNBOUNDED,
    _MS.kTimeLimit: Status.TIME_LIMIT,
    _MS.kIterationLimit: Status.ITERATION_LIMIT,
    _MS.kSolutionLimit: Status.SOLUTION_LIMIT,
    _MS.kInterrupt: Status.INTERRUPTED,
    _MS.kModelEmpty: Status.OPTIMAL,
}


def _set_option(h: highspy.Highs, key: str, value: Any) -> None:
    status = h.setOptionValue(key, value)
    if status != highspy.HighsStatus.kOk:
        raise DpoptInputError(f"`options` must hold HiGHS options HiGHS accepts; it rejected {key!r} = {value!r} "
                              f"(status {status})")


def merged_options(
    options: Mapping[str, Any] | None,
    *,
    defaults: Mapping[str, Any] | None = None,
    verbose: bool = False,
) -> dict[str, Any]:
    """``DEFAULT_OPTIONS``, then a model's ``defaults``, then the caller's ``options`` (later wins).

    ``verbose=True`` turns HiGHS's log on (``output_flag``) unless ``options`` sets it explicitly.
    """
    out = {**DEFAULT_OPTIONS, **dict(defaults or {})}
    if verbose:
        out["output_flag"] = True
    out.update(solver_options(options))
    return out


def _highs_for(
    model: LinearModel,
    options: Mapping[str, Any] | None,
    time_limit: float | None,
    *,
    verbose: bool = False,
) -> highspy.Highs:
    opts = merged_options(options, verbose=verbose)
    h = _new_highs(verbose=bool(opts.get("output_flag", False)))
    if time_limit is not None:
        _set_option(h, "time_limit", float(time_limit))
    for key, value in opts.items():
        _set_option(h, key, value)
    inf = highspy.kHighsInf
    clip = lambda a: np.clip(np.asarray(a, float), -inf, inf)  # noqa: E731
    A = model.A
    integrality = (
        np.asarray(model.integrality, dtype=np.int32)
        if model.is_mip
        else np.zeros(model.num_cols, dtype=np.int32)
    )
    sense = highspy.ObjSense.kMaximize if model.sense == "max" else highspy.ObjSense.kMinimize
    status = h.passModel(
        model.num_cols,
        model.num_rows,
        int(A.nnz),
        int(highspy.MatrixFormat.kColwise),
        int(sense),
        float(model.offset),
        np.ascontiguousarray(model.c, dtype=np.float64),
        clip(model.col_lower),
        clip(model.col_upper),
        clip(model.row_lower),
        clip(model.row_upper),
        np.ascontiguousarray(A.indptr, dtype=np.int32),
        np.ascontiguousarray(A.indices, dtype=np.int32),
        np.ascontiguousarray(A.data, dtype=np.float64),
        integrality,
    )
    if status == highspy.HighsStatus.kError:
        parts = (model.c, A.data, model.col_lower, model.col_upper, model.row_lower, model.row_upper)
        big = max(float(np.max(np.abs(a[np.isfinite(a)]), initial=0.0)) for a in map(np.asarray, parts))
        raise DpoptInputError(f"`model` {model.name!r} could not be loaded by HiGHS: its largest coefficient or "
                              f"bound is {big:.3g}, and HiGHS reads 1e20 and above as infinite (scale the data: "
                              "a bound U or U/ε that large)")
    return h


def solve_highs(
    model: LinearModel,
    *,
    time_limit: float | None = None,
    options: Mapping[str, Any] | None = None,
    warm_start: np.ndarray | None = None,
    verbose: bool = False,
    deadline: float | None = None,
    heartbeat: Callable[[], Any] | None = None,
) -> SolveResult:
    """Solve ``model`` with HiGHS.

    Parameters
    ----------
    model : LinearModel
        The standard form.
    time_limit : float, optional
        Total wall-clock seconds of this call, model loading included (what remains is HiGHS's
        ``time_limit``, which HiGHS does not check inside presolve). Every dpopt function that takes
        ``time_limit`` means total seconds of that call.
    options : mapping, optional
        Merged over :data:`DEFAULT_OPTIONS` (output off) and passed to ``Highs.setOptionValue`` one
        by one (e.g. ``{"presolve": "off"}``); an option HiGHS rejects raises :class:`ValueError`.
    verbose : bool
        Print HiGHS's log (off by default, so that dpopt never writes to stdout unasked).
    warm_start : ndarray, optional
        A feasible point handed to the MIP solver as its first incumbent.
    deadline : float, optional
        A :func:`time.perf_counter` instant at which HiGHS is interrupted through its simplex, IPM
        and MIP interrupt callbacks (:func:`_interrupt_at`); ``time_limit`` is then HiGHS's own
        limit, a backstop. An interrupt at the deadline is reported as ``time_limit`` (with the
        incumbent, bound and gap) and ``info["interrupted"] = 1``. HiGHS checks these callbacks
        only where it iterates: presolve and the MIP set-up before the root LP are not interrupted.
    heartbeat : callable, optional
        Called once, at HiGHS's first interrupt check (with ``deadline``): the solve is then past
        presolve and interruptible (:mod:`dpopt.solve.isolated` watches for it).
    """
    t0 = time.perf_counter()
    time_limit = solver_seconds(time_limit)
    h = _highs_for(model, options, time_limit, verbose=verbose)
    if time_limit is not None:  # total seconds: the time spent loading the model counts
        _set_option(h, "time_limit", max(0.0, float(time_limit) - (time.perf_counter() - t0)))
    if warm_start is not None:
        sol = highspy.HighsSolution()
        sol.col_value = list(np.asarray(warm_start, float))
        sol.value_valid = True
        h.setSolution(sol)
    fired = _interrupt_at(h, deadline, heartbeat) if deadline is not None else [False]
    h.run()
    elapsed = time.perf_counter() - t0
    raw = h.getModelStatus()
    status = _STATUS.get(raw, Status.ERROR if raw in (_MS.kLoadError, _MS.kModelError,
                                                       _MS.kPresolveError, _MS.kSolveError,
                                                       _MS.kPostsolveError) else Status.UNKNOWN)
    if fired[0] and status is Status.INTERRUPTED:  # our deadline, not the user's Ctrl-C
        status = Status.TIME_LIMIT
    return _read_result(h, model, status, raw, elapsed=elapsed, interrupted=fired[0])


def _read_result(h: highspy.Highs, model: LinearModel, status: Status, raw: Any, *, elapsed: float,
                 interrupted: bool) -> SolveResult:
    """The :class:`SolveResult` of a HiGHS run that ended with ``status`` (model status ``raw``)."""
    info = h.getInfo()
    sol = h.getSolution()
    has_primal = bool(info.primal_solution_status >= 2) or (
        model.num_cols == 0 and status is Status.OPTIMAL
    )
    x = np.asarray(sol.col_value, dtype=float) if has_primal else None
    objective = float(info.objective_function_value) if has_primal else math.nan
    row_duals = col_duals = None
    if not model.is_mip and sol.dual_valid:
        row_duals = np.asarray(sol.row_dual, dtype=float)
        col_duals = np.asarray(sol.col_dual, dtype=float)
    bound, gap = _bound_and_gap(model, info, status, has_primal, objective)
    return SolveResult(
        status=status,
        objective=objective,
        bound=bound,
        gap=gap,
        x=x,
        row_duals=row_duals,
        col_duals=col_duals,
        solve_time=elapsed,
        backend="highspy",
        raw_status=h.modelStatusToString(raw),
        col_blocks=dict(model.col_blocks),
        row_blocks=dict(model.row_blocks),
        col_labels=dict(model.col_labels),
        row_labels=dict(model.row_labels),
        num_cols=model.num_cols,
        num_rows=model.num_rows,
        info={
            "simplex_iterations": float(info.simplex_iteration_count),
            "mip_nodes": float(getattr(info, "mip_node_count", 0)),
            "interrupted": float(interrupted),
        },
    )


def _bound_and_gap(model: LinearModel, info: Any, status: Status, has_primal: bool,
                   objective: float) -> tuple[float, float]:
    """(bound, gap): HiGHS's dual bound and MIP gap for a MIP; for an LP the objective and 0 when
    optimal, else (nan, inf)."""
    if model.is_mip:
        bound = float(info.mip_dual_bound)
        if status is Status.OPTIMAL:
            gap = float(info.mip_gap) if math.isfinite(info.mip_gap) else 0.0
        elif has_primal and math.isfinite(bound):
            gap = abs(objective - bound) / max(1.0, abs(objective))
        else:
            gap = math.inf
    else:
        bound = objective if status is Status.OPTIMAL else math.nan
        gap = 0.0 if status is Status.OPTIMAL else math.inf
    return bound, gap


def _interrupt_at(h: highspy.Highs, deadline: float, heartbeat: Callable[[], Any] | None = None) -> list[bool]:
    """Interrupt ``h`` at the first simplex/IPM/MIP interrupt check at or after ``deadline``.

    Returns a one-element list that becomes ``[True]`` when the callback interrupted the solve;
    ``heartbeat`` is called at the first check.
    """
    fired = [False]
    beat = [heartbeat]

    def check(event: Any) -> None:
        if beat[0] is not None:
            beat[0]()
            beat[0] = None
        if time.perf_counter() >= deadline:
            fired[0] = True
            event.interrupt()

    h.cbSimplexInterrupt += check
    h.cbIpmInterrupt += check
    h.cbMipInterrupt += check
    return fired




def check_model_path(path: str | Path) -> Path:
    """``path`` as a Path, refused in one line unless it ends in ``.mps`` or ``.lp``."""
    path = Path(path)
    if path.suffix.lower() not in (".mps", ".lp"):
        raise DpoptInputError(f"`path` must end in .mps or .lp (a file name before it); got {str(path)!r}")
    return path


def write_model(model: LinearModel, path: str | Path) -> Path:
    """Write ``model`` to ``.mps`` or ``.lp`` (chosen by the suffix) with ``Highs.writeModel``.

    Columns and rows carry the model's readable names (:meth:`LinearModel.column_names`, e.g.
    ``alpha_u3`` for user 3's variable of the clipping LP), so the file can be read by a person.
    """
    path = check_model_path(path)
    h = _highs_for(model, None, None)
    for j, nm in enumerate(model.column_names()):  # readable names: users, grids, levels
        h.passColName(j, nm)
    for i, nm in enumerate(model.constraint_names()):
        h.passRowName(i, nm)
    status = h.writeModel(str(path))
    if status == highspy.HighsStatus.kError:
        raise OSError(f"HiGHS could not write {str(path)!r}")
    return path
