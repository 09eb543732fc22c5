"""A HiGHS solve whose ``time_limit`` is a hard bound, whatever HiGHS does.

HiGHS checks its ``time_limit`` and dpopt's interrupt callback (``deadline`` of
:func:`dpopt.solve.highs.solve_highs`) only where it iterates; presolve (probing) and the MIP set-up
check neither. The suppression MILP of seed 002's own family (``heavy_hitter_occupancy(rng(0),
gamma=3, q=0.01)``, 9 111 columns) stays in presolve for minutes, while the same model with
``presolve="off"`` is solved in about 2 s. So :func:`solve_bounded`, for a MIP of at least
:data:`ISOLATE_COLUMNS` columns under a time limit:

1. solves in a child process (:func:`dpopt.solve.isolated.solve_isolated`), interrupted at the
   deadline by the callback and killed :data:`KILL_GRACE_SECONDS` after it;
2. if HiGHS has made no interrupt check after :data:`STALL_SHARE` of the time left (a stall before
   the first LP), kills it and retries with each of :data:`FALLBACK_OPTIONS` in turn (the last try
   gets all the time left);
3. returns ``Status.TIME_LIMIT`` with no point when every try was killed (the caller keeps its warm
   start or heuristic plan and says so).

Smaller MIPs and LPs are solved in this process with the interrupt callback and HiGHS's own limit
(starting a child costs about 0.5-1 s; those models leave presolve within milliseconds). An LP's
set-up before HiGHS's first check grows with its size: the per-sample clipping LP of 5·10^5 samples
(1.5·10^6 columns) returns ``TIME_LIMIT`` after 2.5 s at ``time_limit=0`` — not a hard bound there.
``info`` of the result: ``"isolated"`` (1 if a child ran), ``"stalled"`` (tries killed as stalled),
``"killed"`` (1 if the last try was killed at the deadline), ``"fallback"`` (index of the try that
answered, 0 = the caller's options).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._validation import solver_options, solver_seconds
from .model import LinearModel
from .result import SolveResult, Status

__all__ = ["solve_bounded", "FALLBACK_OPTIONS", "ISOLATE_COLUMNS", "STALL_SHARE", "KILL_GRACE_SECONDS"]

#: options tried, in order, after a try stalled before HiGHS's first interrupt check
FALLBACK_OPTIONS: tuple[dict[str, Any], ...] = ({"presolve": "off"},)
#: MIPs with at least this many columns are solved in a killable child process under a time limit
ISOLATE_COLUMNS = 1000
#: share of the time left a try may spend before its first interrupt check (else: a stall)
STALL_SHARE = 0.35
#: seconds after the deadline at which a child that has not answered is killed
KILL_GRACE_SECONDS = 2.0


def solve_bounded(
    model: LinearModel,
    *,
    time_limit: float | None = None,
    options: Mapping[str, Any] | None = None,
    warm_start: np.ndarray | None = None,
    fallbacks: Sequence[Mapping[str, Any]] = FALLBACK_OPTIONS,
    isolate: bool | None = None,
) -> SolveResult:
    """Solve ``model`` with HiGHS, returning within ``time_limit`` + :data:`KILL_GRACE_SECONDS`.

    Parameters
    ----------
    model : LinearModel
    time_limit : float, optional
        Total seconds of this call. ``None``: no limit, solved in this process.
    options : mapping, optional
        HiGHS options (as for :func:`dpopt.solve.highs.solve_highs`).
    warm_start : ndarray, optional
        A feasible point handed to HiGHS as its first incumbent (on every try).
    fallbacks : sequence of mappings
        Options merged over ``options`` for the tries after a stall (module docstring).
    isolate : bool, optional
        Force (``True``) or forbid (``False``) the child process; default: MIPs of at least
        :data:`ISOLATE_COLUMNS` columns when a time limit is set.

    Returns
    -------
    SolveResult
        As from :func:`dpopt.solve.solve`; ``status=TIME_LIMIT`` with no point when every try was
        killed; ``raw_status`` says which tries stalled.
    """
    from .highs import solve_highs

    time_limit = solver_seconds(time_limit)
    t0 = time.perf_counter()
    if time_limit is None:
        return solve_highs(model, options=options, warm_start=warm_start)
    deadline = t0 + float(time_limit)
    if isolate is None:
        isolate = model.is_mip and model.num_cols >= ISOLATE_COLUMNS
    if not isolate:
        res = solve_highs(model, time_limit=float(time_limit) + 1.0, options=options,
                          warm_start=warm_start, deadline=deadline)
        return dataclasses.replace(res, info={**res.info, "isolated": 0.0})
    return _isolated_tries(model, t0, deadline, solver_options(options), warm_start, fallbacks)


def _isolated_tries(model: LinearModel, t0: float, deadline: float, options: dict[str, Any],
                    warm_start: np.ndarray | None, fallbacks: Sequence[Mapping[str, Any]]) -> SolveResult:
    """Try ``options`` then each fallback in a child process until one answers (module docstring)."""
    from .isolated import solve_isolated

    tries = [options] + [{**options, **fb} for fb in fallbacks if {**options, **fb} != options]
    notes: list[str] = []
    for i, opts in enumerate(tries):
        now = time.perf_counter()
        last = i == len(tries) - 1
        stall_at = None if last else now + STALL_SHARE * max(deadline - now, 0.0)
        res, run = solve_isolated(model, deadline=deadline, kill_at=deadline + KILL_GRACE_SECONDS,
                                  options=opts, warm_start=warm_start, stall_at=stall_at)
        if res is not None:
            raw = "; ".join(notes + [res.raw_status])
            info = {**res.info, "isolated": 1.0, "stalled": float(len(notes)), "killed": 0.0,
                    "fallback": float(i)}
            return dataclasses.replace(res, raw_status=raw, info=info,
                                       solve_time=time.perf_counter() - t0)
        if run.stalled:
            notes.append(f"no interrupt check within {run.seconds:.1f} s with options {opts} (stalled in "
                         f"presolve or the MIP set-up): killed")
            continue
        notes.append(f"killed at the deadline with options {opts}")
        break
    return _killed_result(model, "; ".join(notes), time.perf_counter() - t0, len(notes))


def _killed_result(model: LinearModel, raw: str, elapsed: float, tries: int) -> SolveResult:
    """A time-limited result with no point and no bound: every try was killed."""
    return SolveResult(
        status=Status.TIME_LIMIT, objective=math.nan, bound=math.nan, gap=math.inf, x=None,
        solve_time=elapsed, backend="highspy", raw_status=raw,
        col_blocks=dict(model.col_blocks), row_blocks=dict(model.row_blocks),
        col_labels=dict(model.col_labels), row_labels=dict(model.row_labels),
        num_cols=model.num_cols, num_rows=model.num_rows,
        info={"isolated": 1.0, "stalled": float(tries - 1), "killed": 1.0, "fallback": math.nan},
    )
