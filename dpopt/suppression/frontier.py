"""The privacy–error frontier of grid suppression: E*(K) for every degradation K.

E*(K) = min over suppression plans with max_ℓ G_ℓ ≤ K of max_g E_g — the least worst-case error
a release with privacy loss K·ε can have (seed 002 gives one point of this curve per run of
CLIP-USER). It is non-increasing in K, and E*(G_1) = max_g min_{plans of g} E_g because with
K = G_1 the grids decouple.

Why a search over E and not one MILP: the grid error f_g(R, Γ*) is a non-linear function of the
integer retained total R (1/R, R², parity cases), so "minimise the largest error" would need one
binary per (grid, level, R) to be exact. The feasibility MILP of :mod:`.milp` is exact for any fixed
E, and feasibility is monotone in E; moreover E*(K) is one of the finitely many values
f_g(R, v) (v a level of grid g, R ∈ [v, R_max(v)]). So we bisect on E (each feasible answer lowers
the upper end to the plan's actual max error) and finish exactly: when no candidate value lies
strictly between the proven lower end and the achieved upper end, E*(K) is the upper end; the
largest candidate below the upper end is computed exactly (:func:`largest_error_below`) and tested.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import DpoptInputError, check_positive_int, solver_options
from ..calculus import Split
from ..occupancy import Occupancy
from ..solve import Status
from ..solve import solve_bounded as _solve
from ._kernel import (
    ERROR_RTOL,
    check_inputs,
    check_time_limit,
    error_array,
    least_grid_errors,
    level_table,
    low_region,
    smallest_within,
)
from .milp import build_suppression_model, solve_suppression
from .plan import SuppressionPlan, label_pairs, recheck, rechecked_plan

#: default total seconds of :func:`suppression_frontier`
DEFAULT_TIME_LIMIT = 600.0

__all__ = ["suppression_frontier", "DEFAULT_TIME_LIMIT", "SuppressionFrontier", "FrontierPoint", "largest_error_below",
           "least_grid_errors"]


@dataclass(frozen=True, eq=False)
class FrontierPoint:
    """One point (K, E*(K)) of the frontier.

    Attributes
    ----------
    degradation : int
        K.
    error : float
        E*(K) when ``status is Status.OPTIMAL``; otherwise the best error found (an upper bound).
    lower : float
        Proven lower bound on E*(K) (equal to ``error`` when optimal; ``inf`` if infeasible).
    status : Status
        ``OPTIMAL``; ``INFEASIBLE`` (no plan reaches K at any E); ``ITERATION_LIMIT`` (the
        ``max_solves`` cap was reached) or the solver's limit status (e.g. ``TIME_LIMIT``): then
        E*(K) ∈ [lower, error].
    plan : SuppressionPlan or None
        A plan achieving ``error`` with degradation ≤ K (where a limit stopped the point, the plan
        of a smaller K may serve). The plan carries the point's status and its bracket's relative
        gap (error − lower)/error (0 where the point is ``OPTIMAL``).
    solves : int
        Feasibility MILPs solved for this point.
    """

    degradation: int
    error: float
    lower: float
    status: Status
    plan: SuppressionPlan | None
    solves: int

    @property
    def privacy_loss(self) -> float:
        return self.degradation * (self.plan.epsilon if self.plan is not None else math.nan)


@dataclass(frozen=True, eq=False)
class SuppressionFrontier:
    """E*(K) for a range of K (see :func:`suppression_frontier`)."""

    points: tuple[FrontierPoint, ...]
    epsilon: float
    U: float
    error_bound: float
    solve_time: float
    log: tuple[dict[str, Any], ...] = ()

    @property
    def degradations(self) -> np.ndarray:
        return np.array([p.degradation for p in self.points], dtype=np.int64)

    @property
    def errors(self) -> np.ndarray:
        return np.array([p.error for p in self.points], dtype=float)

    def to_frame(self) -> Any:
        """:meth:`table` as a pandas DataFrame (pandas imported on use)."""
        from .._frames import frame

        return frame(self.table())

    def summary(self) -> dict[str, Any]:
        """A JSON-ready digest: ε, E, the number of points and the solve time."""
        return {"epsilon": self.epsilon, "error_bound": self.error_bound, "points": len(self.points),
                "solve_time": self.solve_time}

    def table(self) -> list[dict[str, Any]]:
        return [
            {"K": p.degradation, "privacy_loss": p.degradation * self.epsilon, "error": p.error,
             "lower": p.lower, "status": Status(p.status).value, "solves": p.solves}
            for p in self.points
        ]


def largest_error_below(occ: Occupancy, U: float, eps: float, value: float, split: str = "equal") -> float:
    """max{f_g(R, v) < value} over grids g, levels v and R ∈ [v, R_max(v)] (``-inf`` if none).

    Every plan's max grid error is one of these candidate values, so if a plan with max error
    ``value`` exists and the feasibility MILP at this candidate is infeasible, ``value`` = E*(K).
    """
    g, v, cap = level_table(occ)
    N = occ.grid_totals[g]
    lim = value * (1.0 - 4 * ERROR_RTOL)
    f = lambda R, idx: error_array(N[idx], R, v[idx], U, eps, split)  # noqa: E731
    best = -math.inf
    ids = np.flatnonzero(2 * v <= cap)
    ids = ids[f(cap[ids], ids) <= lim]
    hi = smallest_within(f, ids, 2 * v[ids] - 1, cap[ids], lim)
    if ids.size:
        best = max(best, float(np.max(f(hi, ids))))
    rep, R = low_region(v, cap, U, eps, split, lim)
    if rep.size:
        vals = f(R, rep)
        vals = vals[vals <= lim]
        if vals.size:
            best = max(best, float(vals.max()))
    return best


def _feasible_plan(
    occ: Occupancy, U: float, eps: float, E: float, K: int, split: str,
    time_limit: float | None, options: Mapping[str, Any] | None,
) -> tuple[Status, SuppressionPlan | None]:
    """A plan with K ≤ ``K`` and every grid error ≤ ``E`` (feasibility MILP), or why there is none.

    Returns ``(Status.OPTIMAL, plan)`` when HiGHS proves the point feasible, ``(status, plan)`` for
    a limited solve with an incumbent, ``(Status.INFEASIBLE, None)``, or ``(status, None)``.
    """
    sm = build_suppression_model(occ, U, eps, error_bound=E, split=split, objective="none",
                                 max_degradation=K, row_threshold=K)
    res = _solve(sm.model, time_limit=time_limit, options=options)
    if res.status in (Status.INFEASIBLE, Status.INFEASIBLE_OR_UNBOUNDED):
        return Status.INFEASIBLE, None
    if not res.has_solution:
        return res.status, None
    mask = sm.suppressed_mask(res.x)
    sup = label_pairs(occ, sm.pair_rows[mask], sm.pair_cols[mask])
    checked = recheck(occ, sup, U, eps, split)
    if checked[0] > K or not np.all(checked[1] <= E * (1 + ERROR_RTOL)):
        raise RuntimeError(f"frontier feasibility plan fails the re-check at K={K}, E={E!r}")
    plan = rechecked_plan(
        occ, sup, checked, U=U, eps=eps, error_bound=E, status=res.status, gap=math.nan,
        lower_bound=math.nan, method="milp", solve_time=res.solve_time, info={"split": split},
    )
    return res.status, plan


def suppression_frontier(
    occ: Any,
    bound: float,
    epsilon: float,
    *,
    error_bound: float | None = None,
    degradations: Iterable[int] | None = None,
    time_limit: float | None = DEFAULT_TIME_LIMIT,
    options: Mapping[str, Any] | None = None,
    split: Split = "equal",
    max_solves: int = 60,
    progress: bool = False,
) -> SuppressionFrontier:
    """Least worst-case error E*(K) for each K (exact, by a search over E with feasibility MILPs).

    Parameters
    ----------
    occ, bound, epsilon, options, split
        As in :func:`solve_suppression` (the occupancy, U, ε, HiGHS options, the budget split).
    error_bound : float, optional
        E used to choose the default range of K: from the least K meeting E (the optimum of
        :func:`solve_suppression`) up to G_1. Default max_g E_g of BASELINE.
    degradations : iterable of int, optional
        The K values to compute instead (each in [1, G_1]).
    time_limit : float or None
        Total seconds for the whole frontier (default :data:`DEFAULT_TIME_LIMIT` = 600; ``None``:
        no limit). Every solve gets what is left; once it is spent, the remaining points report
        ``Status.TIME_LIMIT`` with their proven bracket [lower, error] (``error`` from the
        previous point's plan, valid because E* is non-increasing in K).
    max_solves : int
        Safety cap on feasibility MILPs per point (a capped point reports ``"iteration_limit"`` with
        its proven bracket [lower, error]).
    progress : bool
        Show a tqdm bar over the points (K, bracket, elapsed); the same events are kept in
        ``SuppressionFrontier.log``.

    Returns
    -------
    SuppressionFrontier
        Points in increasing K; ``error`` is non-increasing.
    """
    occ, U, eps, E, split = check_inputs(occ, bound, epsilon, error_bound, split)
    time_limit = check_time_limit(time_limit)
    max_solves = check_positive_int(max_solves, "max_solves")
    t0 = time.perf_counter()
    fr = _FrontierRun(occ, U, eps, split, {"mip_rel_gap": 0.0, **solver_options(options)}, max_solves,
                      None if time_limit is None else t0 + time_limit)
    ks, E, incumbent = _degradation_range(fr, E, degradations, options)
    floor = float(np.max(least_grid_errors(occ, U, eps, split)))
    points: list[FrontierPoint] = []
    log: list[dict[str, Any]] = []
    bar = _progress_bar(progress, len(ks))
    for K in ks:
        point, incumbent = _frontier_point(fr, K, incumbent, floor)
        points.append(_plan_as_proven(point))
        _note(log, bar, points[-1], t0)
    if bar is not None:
        bar.close()
    return SuppressionFrontier(points=tuple(points), epsilon=eps, U=U, error_bound=float(E),
                               solve_time=time.perf_counter() - t0, log=tuple(log))


def _plan_as_proven(point: FrontierPoint) -> FrontierPoint:
    """``point`` whose plan says what the point proves: where E*(K) is not proven (a limit stopped
    it), the plan carries the point's status and the relative gap (error − lower)/error of its
    bracket, not the status of the feasibility solve that found it (which read as "optimal"); a
    proven point's plan has gap 0 (its feasibility solve reported none)."""
    if point.plan is None:
        return point
    if point.status is Status.OPTIMAL:
        gap = 0.0
    else:
        gap = (point.error - point.lower) / point.error if math.isfinite(point.lower) and point.error > 0 else math.inf
    return dataclasses.replace(point, plan=dataclasses.replace(point.plan, status=point.status, gap=gap))


@dataclass(frozen=True, eq=False)
class _FrontierRun:
    """The checked inputs, HiGHS options, solve cap and deadline shared by every point of a frontier."""

    occ: Occupancy
    U: float
    eps: float
    split: str
    opts: dict[str, Any]
    max_solves: int
    deadline: float | None

    def left(self) -> float | None:
        """Seconds left of the total budget (``None``: no limit)."""
        return None if self.deadline is None else max(0.0, self.deadline - time.perf_counter())

    def feasible_plan(self, E: float, K: int) -> tuple[Status, SuppressionPlan | None]:
        """:func:`_feasible_plan` at (``E``, ``K``) with the time left."""
        return _feasible_plan(self.occ, self.U, self.eps, E, K, self.split, self.left(), self.opts)


def _degradation_range(
    fr: _FrontierRun, E: float | None, degradations: Iterable[int] | None, options: Mapping[str, Any] | None
) -> tuple[list[int], float, SuppressionPlan | None]:
    """The K values of the frontier, E (its default filled in) and the first incumbent plan.

    Without ``degradations`` the range starts at the optimum of :func:`solve_suppression` at E,
    whose plan is the first incumbent (none if no plan meets E: then the range starts at 1).
    """
    occ = fr.occ
    G1 = occ.degradation
    if degradations is None:
        first_plan = solve_suppression(occ, fr.U, fr.eps, error_bound=E, tie_break=False,
                                       time_limit=fr.left(), options=options, split=fr.split)
        if first_plan.status is Status.INFEASIBLE:
            return list(range(1, G1 + 1)), first_plan.error_bound, None
        return list(range(first_plan.degradation, G1 + 1)), first_plan.error_bound, first_plan
    ks = sorted({int(k) for k in degradations})
    if not ks or ks[0] < 1 or ks[-1] > G1:
        raise DpoptInputError(f"`degradations` must be integers in [1, G_1={G1}]; got {ks}")
    if E is None:
        from ._kernel import baseline_errors

        E = float(np.max(baseline_errors(occ, fr.U, fr.eps, fr.split)))
    return ks, E, None


def _progress_bar(progress: bool, total: int) -> Any:
    """A tqdm bar over the frontier's points (``None`` when ``progress`` is off)."""
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="frontier", unit="K", leave=False)


def _frontier_point(
    fr: _FrontierRun, K: int, incumbent: SuppressionPlan | None, floor: float
) -> tuple[FrontierPoint, SuppressionPlan | None]:
    """The point of degradation ``K`` and the incumbent plan for the next K.

    ``incumbent`` is the best plan so far (of a smaller K, so its error bounds E*(K) from above);
    ``floor`` is the universal lower bound max_g min_S E_g(S).
    """
    if fr.left() == 0.0:
        # budget spent: report the proven bracket without solving
        err = incumbent.max_error if incumbent is not None and incumbent.degradation <= K else math.inf
        return FrontierPoint(K, err, floor, Status.TIME_LIMIT, incumbent if math.isfinite(err) else None,
                             0), incumbent
    solves = 0
    if incumbent is None or incumbent.degradation > K:
        st, incumbent = fr.feasible_plan(math.inf, K)
        solves += 1
        if incumbent is None:
            return FrontierPoint(K, math.inf, math.inf if st is Status.INFEASIBLE else floor, st, None,
                                 solves), None
    return _bisect(fr, K, incumbent, floor, solves)


def _bisect(
    fr: _FrontierRun, K: int, incumbent: SuppressionPlan, floor: float, solves: int
) -> tuple[FrontierPoint, SuppressionPlan]:
    """E*(K) by bisection on E between ``floor`` and the incumbent's error, finished exactly.

    ``solves`` feasibility MILPs were already spent on this point. Returns the point and the
    incumbent (the plan of least error found).
    """
    status = Status.OPTIMAL
    hi = incumbent.max_error
    lo = floor  # E*(K) >= lo (and > lo once lo is a failed test)
    lo_strict = False
    while True:
        if hi <= lo * (1 + ERROR_RTOL) and not lo_strict:
            break  # hi attains the universal floor
        below = largest_error_below(fr.occ, fr.U, fr.eps, hi, fr.split)
        if below < lo or (lo_strict and below <= lo):
            break  # no candidate value strictly between the bracket ends: hi is exact
        if solves >= fr.max_solves:
            status = Status.ITERATION_LIMIT
            break
        mid = 0.5 * (lo + hi)
        target = below if below <= mid * (1 + 1e-9) or (hi - lo) <= 1e-6 * hi else mid
        if fr.left() == 0.0:
            status = Status.TIME_LIMIT
            break
        st, plan = fr.feasible_plan(target, K)
        solves += 1
        if plan is not None:  # any incumbent of the feasibility MILP is a plan meeting target
            incumbent, hi = plan, plan.max_error
        elif st is Status.INFEASIBLE:
            lo, lo_strict = target, True
        else:
            status = st
            break
    return FrontierPoint(K, hi, hi if status is Status.OPTIMAL else lo, status, incumbent, solves), incumbent


def _note(log: list[dict[str, Any]], bar: Any, p: FrontierPoint, t0: float) -> None:
    """Log a finished point (K, bracket, status, elapsed) and advance the bar."""
    event = {"K": p.degradation, "error": p.error, "lower": p.lower, "status": Status(p.status).value,
             "solves": p.solves, "elapsed": round(time.perf_counter() - t0, 3)}
    log.append(event)
    if bar is not None:
        bar.set_postfix({"K": p.degradation, "E*": f"{p.error:.4g}", "status": event["status"]},
                        refresh=False)
        bar.update(1)
