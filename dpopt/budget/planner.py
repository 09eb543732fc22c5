"""The budget planner: the most grids released within their error targets under one total budget.

Entry point :func:`plan_budget` (models/budget.md). From public counts only (the occupancy array),
it chooses per grid a pseudo-user cap and a budget from a ladder, per (user, grid) keep/suppress,
and which grids to withhold, so that every user's total spend Σ_{g: ℓ kept in g} ε_g ≤ ε_total and
the weighted number of released grids whose error bound (``noise`` or ``worst_case``, at the stated
confidence) is ≤ τ is largest. It returns a :class:`BudgetPlan` holding the :class:`dpopt.plan.GridPlan`
the release consumes.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._validation import (
    DpoptInputError,
    _fail,
    _finite_real,
    check_bound,
    check_choice,
    check_epsilon,
    check_nonnegative_float,
    solver_seconds,
)
from ..occupancy import Occupancy
from ..plan import GridPlan
from ..solve import Status
from ..solve import solve
from .assemble import assemble
from .configs import CapTable, budget_ladder, cap_table, config_table
from .errors import CRITERIA, Criterion, StatisticBounds
from .frontier import BudgetFrontier, knee_target
from .greedy import Assignment, greedy_assignment
from .isolated import BACKSTOP_SECONDS, solve_isolated
from .milp import build_budget_model
from .noise import LaplaceNoise, NoiseModel

__all__ = ["BudgetPlan", "plan_budget", "make_criterion", "METHODS", "budget_frontier", "smallest_target",
           "DEFAULT_TAUS", "FRONTIER_SHARE", "MIN_MILP_SECONDS", "MILP_COLUMNS_PER_SECOND"]

METHODS = ("milp", "greedy")
#: the frontier's default targets: this many log-spaced values in [U/200, U/2]
DEFAULT_TAUS = 16
#: share of ``time_limit`` the knee frontier may use before the plan itself
FRONTIER_SHARE = 0.5
#: the MILP is skipped when less time than this is left
MIN_MILP_SECONDS = 1.0
#: the MILP is skipped when it would have more columns than this many per second left. Measured
#: (2 shared cores): no time-limited solve of ≥ 1.1e5 columns improved the greedy within
#: a minute — HiGHS's presolve and MIP set-up alone took 11 s+ (1.1e5 columns, killed), 40-110 s
#: (1.9e5) and ≈ 30 s (4.5e5, full Austin); with 300 s the Austin MILP gained 1-2 grids. At 5,000/s
#: the default release (25 s) tries the MILP up to ≈ 6e4 columns and a 300 s plan up to 1.5e6.
MILP_COLUMNS_PER_SECOND = 5_000
#: share of the time left given to HiGHS on large models (its interrupt callback fires there)
SOLVE_SHARE = 0.6
#: share of the time left after which a large model's solver process is killed (hard limit)
KILL_SHARE = 0.9
#: models with more columns are solved in a child process that can be killed (:mod:`.isolated`)
ISOLATE_COLUMNS = 2000


@dataclass(frozen=True, eq=False)
class BudgetPlan:
    """Result of :func:`plan_budget`.

    Attributes
    ----------
    plan : GridPlan
        The contract the release consumes (unit ``noise.unit``, method ``"budget-milp"`` or
        ``"budget-greedy"``, ``error_bound`` = the scalar target if global, ``array_length`` = caps).
    target, target_variance : ndarray (G,) or None
        τ_g of the mean (and of the variance) the plan was made for.
    criterion : {"noise", "worst_case"}
    confidence : float
        Each statistic's bound holds with this probability (with a variance target too, both
        hold together with it: each bound is then at confidence 1 − (1 − q)/2).
    epsilon_total : float
        The budget every user may spend; ``plan.total_cost`` ≤ it (recounted).
    bounds : dict[str, StatisticBounds]
        Per-grid predicted bounds of mean and variance under ``"noise"`` and ``"worst_case"``,
        computed from the plan's retained counts and budgets with the exact sensitivities
        (``inf`` for withheld grids).
    within_target : ndarray of bool (G,)
        Released and mean bound (and variance bound) ≤ target under ``criterion``.
    coverage : float
        Σ weights over ``within_target``.
    coverage_bound : float
        Proven upper bound on the coverage of any plan in the decision space (MILP dual bound, or
        the weight of the grids some configuration serves where the time limit skipped the MILP;
        ``nan`` for the greedy).
    status : Status
    gap : float
        (coverage_bound − coverage)/max(1, coverage); 0 when optimal.
    greedy_coverage : float
        Coverage of the greedy plan (the MILP's warm start).
    degradation : int
        For the greedy, its K (uniform ε_total/K); for the MILP 0.
    solve_time : float
        Total seconds.
    info : dict
        Settings (for :meth:`frontier`), model size, configuration counts.
    """

    plan: GridPlan
    target: np.ndarray
    target_variance: np.ndarray | None
    criterion: str
    confidence: float
    epsilon_total: float
    bounds: dict[str, StatisticBounds]
    within_target: np.ndarray
    coverage: float
    coverage_bound: float
    status: Status
    gap: float
    greedy_coverage: float
    degradation: int
    solve_time: float
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def released(self) -> np.ndarray:
        return np.asarray(self.plan.released, dtype=bool)

    @property
    def n_released(self) -> int:
        return int(np.sum(self.plan.released))

    def frontier(self, taus: Any = None, **kwargs: Any) -> Any:
        """Coverage against τ (and the total budget) for the same occupancy and settings.

        Without arguments, the frontier computed inside the plan's time limit if there is one
        (``plan_budget(frontier=True)`` or the knee mode).
        """
        if taus is None and not kwargs and self.info.get("frontier") is not None:
            return self.info["frontier"]
        s = dict(self.info["settings"])
        s.update(kwargs)
        occ = s.pop("occ")
        s.pop("target", None)  # each point of the frontier sets its own
        bound = s.pop("bound")
        eps = s.pop("epsilon_total")
        return budget_frontier(occ, bound, eps, taus=taus, **s)

    def to_frame(self) -> "pd.DataFrame":
        """One row per grid: the plan's columns (:meth:`GridPlan.to_frame`), the targets, the predicted
        bounds of mean and variance under ``criterion`` and whether the grid is within target."""
        frame = self.plan.to_frame()
        frame["target"] = self.target
        if self.target_variance is not None:
            frame["target_variance"] = self.target_variance
        frame["mean_bound"] = self.bounds[self.criterion].mean
        frame["variance_bound"] = self.bounds[self.criterion].variance
        frame["within_target"] = self.within_target
        return frame

    def summary(self) -> dict[str, Any]:
        return {
            "method": self.plan.method, "status": str(self.status), "gap": self.gap,
            "criterion": self.criterion, "confidence": self.confidence,
            "epsilon_total": self.epsilon_total, "total_cost": self.plan.total_cost,
            "released": self.n_released, "within_target": int(self.within_target.sum()),
            "coverage": self.coverage, "coverage_bound": self.coverage_bound,
            "greedy_coverage": self.greedy_coverage, "solve_time": self.solve_time,
        }


def _per_grid(value: Any, name: str, G: int) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):  # a complex number, a mapping, text
        raise _fail(name, f"must be a number or have one entry per grid ({G})", value) from None
    if arr.ndim == 0:
        arr = np.full(G, float(arr))
    if arr.shape != (G,):
        raise _fail(name, f"must be a number or have one entry per grid ({G})", value)
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise _fail(name, "must hold positive finite numbers", value)
    return arr


def make_criterion(occ: Occupancy, bound: float, *, target: Any, target_variance: Any = None,
                   criterion: str = "noise", confidence: float = 0.95, mean_share: float = 0.5,
                   noise: NoiseModel | None = None) -> Criterion:
    """Validate the targets and build the :class:`Criterion` the planner meets."""
    U = check_bound(bound)
    check_choice(criterion, "criterion", CRITERIA)
    q = check_nonnegative_float(confidence, "confidence")
    if not 0 < q < 1:
        raise _fail("confidence", "must lie strictly between 0 and 1", confidence)
    share = check_nonnegative_float(mean_share, "mean_share")
    if not 0 < share < 1:
        raise _fail("mean_share", "must lie strictly between 0 and 1", mean_share)
    G = occ.n_grids
    return Criterion(
        bound=U, criterion=criterion, confidence=q, target=_per_grid(target, "target", G),
        target_variance=None if target_variance is None else _per_grid(target_variance, "target_variance", G),
        mean_share=share, noise=LaplaceNoise() if noise is None else noise,
    )


def plan_budget(occ: Occupancy, bound: float, epsilon_total: float, *, target: Any = None,
                target_variance: Any = None, criterion: str = "noise", confidence: float = 0.95, weights: Any = None,
                method: str = "milp", mean_share: float = 0.5, max_caps: int | None = 3, ladder_ratio: float = 2.0,
                budget_levels: Any = None, truncate: bool = True, noise: NoiseModel | None = None,
                time_limit: float | None = 60.0, progress: bool = False, frontier: bool = False,
                _criterion: Any = None, _caps: CapTable | None = None) -> BudgetPlan:
    """Plan a release of all grids under one total budget (models/budget.md).

    Parameters
    ----------
    occ, bound, epsilon_total : Occupancy, float, float
        Public user × grid counts; U > 0 (samples lie in [0, U]); ε_total > 0, the budget each user may spend
        over all released grids and both statistics, in ``noise.unit``.
    target, target_variance : float or array_like (G,), optional
        τ > 0, the error bound (data units) a grid's mean (and variance: the failure probability is then split
        in halves) must meet. Default None: τ = the frontier's knee (:func:`knee_target`, ``info["target_rule"]``).
    criterion, confidence : {"noise", "worst_case"}, float; default "noise", 0.95
        The noise's bound only, or worst-case clipping bias + noise (models/budget.md §3; ERRATA E1/E10); the
        bounds hold with probability ≥ q = ``confidence``, in (0, 1).
    weights, method : array_like (G,) or None, {"milp", "greedy"}; default None, "milp"
        Finite grid weights ≥ 0 (None: 1 each), the objective being Σ weights over the grids within target; the
        exact MILP (greedy warm start; never worse than the greedy) or the greedy alone.
    mean_share, ladder_ratio, budget_levels : float, float, array_like or None; default 0.5, 2.0, None
        Share in (0, 1) of a grid's budget spent on the mean (the rest on the variance); ratio > 1 of the geometric
        ladder of K (grid budgets ε_total/K), or explicit levels in (0, ε_total] (``[ε]``: seed 002's fixed budget).
    max_caps, truncate : int or None, bool; default 3, True
        Candidate pseudo-user caps per grid (log-spread distinct counts; None: every count); users above a grid's
        cap are truncated to it (pseudo-users), or suppressed if False (seed 002).
    noise, time_limit : NoiseModel or None, float or None; default None, 60.0
        The noise model (None: :class:`LaplaceNoise`, unit "epsilon"); seconds ≥ 0 for the whole plan, frontier
        included, a hard bound (models/budget.md §7; None: no limit).
    progress, frontier : bool, default False
        A tqdm progress bar over the stages; the coverage–τ frontier (``info["frontier"]``) also with a given
        target, inside the same time limit (the release publishes it).

    Returns
    -------
    BudgetPlan
        The :class:`GridPlan` the release consumes (``plan.total_cost`` ≤ ε_total), its coverage, bounds, status.

    Raises
    ------
    DpoptInputError
        On an invalid argument (``occ`` not an Occupancy, U or ε_total not positive, a bad target, weight, ...).

    Notes
    -----
    Parameters beginning with an underscore are internal (the frontier sweeps pass ``_caps``), not public API."""
    t0 = time.perf_counter()
    U, eps, w, time_limit = _check_plan_inputs(occ, bound, epsilon_total, method, time_limit, weights, ladder_ratio)
    deadline, fdead = (None, None) if time_limit is None else (t0 + time_limit, t0 + FRONTIER_SHARE * time_limit)
    settings = dict(occ=occ, bound=U, epsilon_total=eps, target_variance=target_variance, criterion=criterion,
                    confidence=confidence, weights=weights, mean_share=mean_share, max_caps=max_caps,
                    ladder_ratio=ladder_ratio, budget_levels=budget_levels, truncate=truncate, noise=noise)
    info: dict[str, Any] = {"settings": settings}
    caps = _caps if _caps is not None else cap_table(occ, max_caps=max_caps, truncate=truncate)
    crit = _criterion if _criterion is not None else _plan_criterion(settings, target, frontier, fdead, caps,
                                                                     progress, info)
    out = _plan_stages(occ, crit, caps, settings, w, method=method, deadline=deadline, progress=progress, info=info)
    return _checked_plan(occ, crit, eps, w, out, t0=t0, info=info)


def _plan_criterion(settings: dict, target: Any, frontier: bool, deadline: float | None, caps: CapTable,
                    progress: bool, info: dict) -> Criterion:
    """The :class:`Criterion` for ``target``, or for the knee of the frontier (greedy passes, public
    counts only, stopped at ``deadline``) when it is None; the frontier is computed too when
    ``frontier`` (``info["frontier"]``, and ``info["target_rule"]`` for the knee)."""
    if target is None or frontier:
        fr = _frontier_points(settings, None, "greedy", deadline, caps, progress)
        info["frontier"] = fr
        if target is None:
            target = fr.knee
            info["target_rule"] = fr.knee_rule
    s = settings
    return make_criterion(s["occ"], s["bound"], target=target, target_variance=s["target_variance"],
                          criterion=s["criterion"], confidence=s["confidence"], mean_share=s["mean_share"],
                          noise=s["noise"])


@dataclass(frozen=True, eq=False)
class _Stages:
    """What :func:`_plan_stages` hands to :func:`_checked_plan`: the assembled plan, its bounds,
    retained totals R and largest retained counts Γ*, and the solve's status, gap, coverage bound,
    the greedy's coverage and K (0 for the MILP)."""

    plan: GridPlan
    bounds: dict[str, StatisticBounds]
    retained: np.ndarray
    retained_max: np.ndarray
    status: Status
    gap: float
    coverage_bound: float
    greedy_coverage: float
    degradation: int


def _plan_stages(occ: Occupancy, crit: Criterion, caps: CapTable, settings: dict, w: np.ndarray, *,
                 method: str, deadline: float | None, progress: bool, info: dict) -> _Stages:
    """The configuration table, the greedy, the MILP (``method="milp"``) and the assembled plan."""
    eps = settings["epsilon_total"]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=3 if method == "greedy" else 4, desc="budget plan")
    ladder, Ks = _ladder(occ, eps, settings["ladder_ratio"], settings["budget_levels"])
    table = config_table(occ, crit, ladder, max_caps=settings["max_caps"], truncate=settings["truncate"],
                         caps=caps)
    info.update(n_configs=int(table.cfg_gc.size), ladder=ladder, ladder_K=Ks)
    _tick(bar)
    greedy, K = greedy_assignment(occ, table, Ks, w, eps, deadline=deadline)
    gcov = greedy.coverage(w)
    _tick(bar)
    best, status, gap, cbound, kind = greedy, Status.HEURISTIC, math.nan, math.nan, "budget-greedy"
    if method == "milp":
        best, status, gap, cbound = _milp_stage(occ, table, eps, w, greedy, deadline, info)
        kind, K = "budget-milp", 0
        _tick(bar)
    plan, bounds, R, gmax = assemble(occ, table, best, eps, crit, kind, status, gap)
    _tick(bar)
    if bar is not None:
        bar.close()
    return _Stages(plan=plan, bounds=bounds, retained=R, retained_max=gmax, status=status, gap=gap,
                   coverage_bound=cbound, greedy_coverage=gcov, degradation=K)


def _checked_plan(occ: Occupancy, crit: Criterion, eps: float, w: np.ndarray, out: _Stages, *, t0: float,
                  info: dict) -> BudgetPlan:
    """The :class:`BudgetPlan` of ``out``, re-checked from the plan itself (spend, and every released
    grid within its target from the actual R, Γ* and budgets); ``t0`` is the plan's start time."""
    plan = out.plan
    if plan.total_cost > eps * (1 + 1e-9):
        raise RuntimeError(f"budget plan spends {plan.total_cost} > epsilon_total {eps}")  # pragma: no cover
    within = plan.released & (
        crit.excess(np.arange(occ.n_grids), occ.grid_totals, out.retained, out.retained_max, plan.budget)
        <= 1e-9 * np.maximum(1.0, crit.target))
    if np.any(plan.released & ~within):
        raise RuntimeError("budget plan releases a grid above its target")  # pragma: no cover
    return BudgetPlan(
        plan=plan, target=crit.target, target_variance=crit.target_variance, criterion=crit.criterion,
        confidence=crit.confidence, epsilon_total=eps, bounds=out.bounds, within_target=within,
        coverage=float(w[within].sum()), coverage_bound=out.coverage_bound, status=out.status, gap=out.gap,
        greedy_coverage=out.greedy_coverage, degradation=int(out.degradation),
        solve_time=time.perf_counter() - t0, info=info,
    )


def _check_plan_inputs(occ: Any, bound: float, epsilon_total: float, method: str, time_limit: Any,
                       weights: Any, ladder_ratio: float) -> tuple[float, float, np.ndarray, float | None]:
    """Validate :func:`plan_budget`'s arguments; returns (U, ε_total, weights, time_limit)."""
    U = check_bound(bound)
    eps = check_epsilon(epsilon_total, "epsilon_total")
    check_choice(method, "method", METHODS)
    if time_limit is not None:
        time_limit = check_nonnegative_float(time_limit, "time_limit")
    if not isinstance(occ, Occupancy):
        raise _fail("occ", "must be a dpopt.Occupancy", type(occ).__name__)
    G = occ.n_grids
    w = np.ones(G) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != (G,) or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise _fail("weights", f"must hold {G} finite numbers >= 0", weights)
    if not _finite_real(ladder_ratio, "ladder_ratio", "must be a finite number > 1") > 1:
        raise _fail("ladder_ratio", "must be a finite number > 1", ladder_ratio)
    return U, eps, w, time_limit


def _tick(bar: Any) -> None:
    if bar is not None:
        bar.update()


def _ladder(occ: Occupancy, eps: float, ratio: float, budget_levels: Any) -> tuple[np.ndarray, np.ndarray]:
    """The budget levels (decreasing) and their K = ⌊ε_total/level⌋ (models/budget.md §2)."""
    if budget_levels is None:
        return budget_ladder(eps, int(occ.degradation), ratio=ratio)
    ladder = np.unique(np.asarray(budget_levels, dtype=float))[::-1]
    if ladder.size == 0 or not np.all(np.isfinite(ladder)) or ladder[-1] <= 0 or ladder[0] > eps * (1 + 1e-12):
        raise _fail("budget_levels", "must hold numbers in (0, epsilon_total]", budget_levels)
    return ladder, np.floor(eps / ladder * (1 + 1e-12)).astype(np.int64)


def _milp_stage(occ: Occupancy, table: Any, eps: float, w: np.ndarray, greedy: Assignment,
                deadline: float | None, info: dict) -> tuple[Assignment, Status, float, float]:
    """The exact MILP with the greedy as warm start, in the time left before ``deadline``.

    Returns (assignment, status, gap, coverage bound). With less than :data:`MIN_MILP_SECONDS`
    left the solve is skipped: the greedy is returned with status ``time_limit``, or ``optimal`` where it
    covers the bound of every grid some configuration serves.
    """
    left = None if deadline is None else deadline - time.perf_counter()
    cols = _milp_columns(occ, table)
    if left is not None and (left < MIN_MILP_SECONDS or cols > MILP_COLUMNS_PER_SECOND * left):
        info["solve"] = {"status": "skipped", "columns": cols,
                         "reason": f"{max(left, 0.0):.2f} s left of the time limit for about {cols} columns"}
        cbound = float(w[np.unique(table.cfg_grid)].sum())  # every grid some configuration serves: a bound
        cov = greedy.coverage(w)
        gap = (cbound - cov) / max(1.0, cov)
        # the greedy meeting that bound is proven optimal without the MILP (it covered every grid any
        # configuration serves: 1,000 of 1,000 reported "time_limit" with gap 0 by an outside fuzz run)
        return greedy, Status.OPTIMAL if gap <= 0 else Status.TIME_LIMIT, max(gap, 0.0), cbound
    bm = build_budget_model(occ, table, eps, w)
    info.update(n_cols=bm.model.num_cols, n_rows=bm.model.num_rows, nnz=int(bm.model.A.nnz),
                model=bm.model)  # export: dpopt.solve.write_model(bp.info["model"], "budget.mps")
    large = bm.model.num_cols > ISOLATE_COLUMNS
    warm = bm.point(greedy)
    info["warm_start_violation"] = bm.model.max_violation(warm)
    # the root LP of large instances is degenerate for dual simplex: use the interior point, after
    # presolve (full Austin data, 4.5e5 columns: 0.7 GiB peak and 28 s for a 20 s limit, against
    # 1.6 GiB / 61 s without presolve and 1.9 GiB / 90 s with dual simplex)
    res = solve_by_deadline(bm.model, warm, deadline, info, options={"mip_lp_solver": "ipm"} if large else None)
    best = greedy
    gcov = greedy.coverage(w)
    if res is not None and res.x is not None:
        cand = bm.assignment(res.x)
        if cand.coverage(w) >= gcov:
            best = cand
    status = Status.TIME_LIMIT if res is None else res.status
    res_bound = math.nan if res is None else float(res.bound)
    # bounds valid without the solver: every feasible grid released; the aggregate knapsack
    agg_bound = bm.aggregate_bound(w, eps)
    info["aggregate_bound"] = agg_bound
    trivial = min(float(w[np.unique(table.cfg_grid)].sum()), agg_bound)
    cbound = min(res_bound, trivial) if math.isfinite(res_bound) else trivial
    if np.all(w == np.round(w)):  # integral weights: the coverage is an integer
        cbound = math.floor(cbound + 1e-9)
    cov = best.coverage(w)
    if status is Status.OPTIMAL:
        gap, cbound = 0.0, max(cov, cbound) if math.isfinite(cbound) else cov
    else:
        gap = (cbound - cov) / max(1.0, cov) if math.isfinite(cbound) else math.nan
    return best, status, gap, cbound


def solve_by_deadline(model: Any, warm: np.ndarray, deadline: float | None, info: dict,
                      options: dict | None = None) -> Any:
    """Solve a planner MILP within ``deadline``; ``None`` when the isolated solve was killed.

    Without a deadline: in this process, no limit. With one, HiGHS's interrupt callback fires at
    the deadline (models of ≤ :data:`ISOLATE_COLUMNS` columns: all the time left, in this process;
    larger ones: :data:`SOLVE_SHARE` of it, in a child process killed at :data:`KILL_SHARE` of it,
    :mod:`.isolated`: HiGHS does not check interrupts in presolve and the MIP set-up), so the
    deadline is a hard bound; the rest is left for assembling the plan. Sets ``info["solve"]``.
    """
    large = model.num_cols > ISOLATE_COLUMNS
    if deadline is None:
        res = solve(model, warm_start=warm, options=options)
    else:
        now = time.perf_counter()
        left = max(MIN_MILP_SECONDS / 2, (deadline - now) * (SOLVE_SHARE if large else 1.0))
        if not large:
            res = solve(model, time_limit=left + BACKSTOP_SECONDS, warm_start=warm, options=options,
                        deadline=now + left)
        else:
            kill_at = max(now + left, now + (deadline - now) * KILL_SHARE)
            res, run = solve_isolated(model, deadline=now + left, kill_at=kill_at, options=options, warm_start=warm)
            info["isolated"] = dataclasses.asdict(run)
            if res is None:
                info["solve"] = {"status": "killed", "time": run.seconds,
                                 "reason": f"no answer {kill_at - now:.2f} s into the solve (hard time limit)"}
                return None
    info["solve"] = {"status": str(res.status), "raw": res.raw_status, "time": res.solve_time, **res.info}
    return res


def _milp_columns(occ: Occupancy, table: Any) -> int:
    """Upper bound on the MILP's columns: configurations + pairs × levels of their grid (milp.py)."""
    nl = max(int(table.ladder.size), 1)
    gl = np.unique(table.cfg_grid * nl + table.cfg_level)
    levels = np.bincount(gl // nl, minlength=occ.n_grids)
    return int(table.cfg_gc.size + np.dot(levels, occ.users_per_grid))


# ------------------------------------------------------------------------------------- frontiers
def _frontier_points(settings: dict, taus: Any, method: str, deadline: float | None, caps: CapTable,
                     progress: bool, time_limit: float | None = None) -> BudgetFrontier:
    """Coverage at each τ (default :data:`DEFAULT_TAUS` values in [U/200, U/2]); stops at ``deadline``.

    Each point is one :func:`plan_budget` run (``time_limit`` seconds each, capped by the deadline),
    sharing the τ-independent cap table; no point is started with less time left before the
    deadline than the longest point took. The τ are visited coarse to fine (:func:`spread_order`:
    both ends, the middle, the quarters, ...) so that a frontier cut by the deadline still spans the
    range; the result lists the τ reached in increasing order (all of them: ``complete``).
    """
    s = dict(settings)
    occ, U, eps = s.pop("occ"), s.pop("bound"), s.pop("epsilon_total")
    t = np.geomspace(U / 200, U / 2, DEFAULT_TAUS) if taus is None else np.asarray(taus, dtype=float)
    if t.ndim != 1 or t.size == 0 or np.any(~np.isfinite(t)) or np.any(t <= 0) or np.any(np.diff(t) <= 0):
        raise _fail("taus", "must be increasing positive finite numbers", taus)
    it = spread_order(t.size)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, desc="frontier")
    got: dict[int, tuple[float, int, str]] = {}
    longest = 0.0
    for i in it:
        left = None if deadline is None else deadline - time.perf_counter()
        if left is not None and got and left < longest:
            break  # the next point would likely end past the deadline
        t_point = time.perf_counter()
        lim = left if time_limit is None else (time_limit if left is None else min(time_limit, left))
        lim = None if lim is None else max(lim, 0.0)
        bp = plan_budget(occ, U, eps, target=float(t[i]), method=method, time_limit=lim, _caps=caps, **s)
        got[i] = (bp.coverage, bp.n_released, str(bp.status))
        longest = max(longest, time.perf_counter() - t_point)
    idx = sorted(got)
    done = t[idx]
    cov_a = np.asarray([got[i][0] for i in idx])
    return BudgetFrontier(taus=done, coverage=cov_a, released=np.asarray([got[i][1] for i in idx]),
                          status=[got[i][2] for i in idx], epsilon_total=eps, epsilon_totals=None,
                          coverage_vs_budget=None, budget_tau=None, knee=knee_target(done, cov_a),
                          complete=len(idx) == t.size)


def spread_order(n: int) -> list[int]:
    """0..n−1 coarse to fine: the ends, then breadth-first the midpoints of the gaps (every index once)."""
    if n <= 2:
        return list(range(n))
    out, gaps = [0, n - 1], [(0, n - 1)]
    while gaps:
        nxt = []
        for a, b in gaps:
            if b - a > 1:
                m = (a + b) // 2
                out.append(m)
                nxt += [(a, m), (m, b)]
        gaps = nxt
    return out


def budget_frontier(occ: Any, bound: float, epsilon_total: float, *, taus: Any = None,
                    epsilon_totals: Any = None, budget_tau: float | None = None, method: str = "greedy",
                    time_limit: float | None = 10.0, progress: bool = False, **settings: Any) -> BudgetFrontier:
    """Coverage for each τ in ``taus`` (default 16 log-spaced values in [U/200, U/2]) at ``epsilon_total``,
    and, if ``epsilon_totals`` is given, for each total budget at ``budget_tau`` (default: the knee).

    Each point is one planner run (``method``, ``time_limit`` s each); public counts only (models/budget.md §7).

    Parameters
    ----------
    occ, bound, epsilon_total : Occupancy, float, float
        As :func:`plan_budget`: public user × grid counts, U > 0, and ε_total > 0 (the budget of the τ sweep).
    taus : array_like, optional, keyword-only
        Targets τ, strictly increasing positive finite numbers. Default None: :data:`DEFAULT_TAUS` (16)
        log-spaced values in [U/200, U/2].
    epsilon_totals : array_like, optional, keyword-only
        Total budgets (1-D, positive finite) for a second sweep at the target ``budget_tau``; None: none.
    budget_tau : float, optional, keyword-only
        The target of the budget sweep. Default None: the knee of the τ sweep (:func:`knee_target`).
    method : {"greedy", "milp"}, default "greedy", keyword-only
        The planner of each point (:func:`plan_budget`'s ``method``).
    time_limit : float or None, default 10.0, keyword-only
        Seconds ≥ 0 for each planner run (the sweep as a whole has no limit); None: no limit.
    progress : bool, default False, keyword-only
        A tqdm progress bar over the τ points.
    **settings
        Further :func:`plan_budget` arguments (``criterion``, ``confidence``, ``weights``, ``target_variance``,
        ``mean_share``, ``max_caps``, ``ladder_ratio``, ``budget_levels``, ``truncate``, ``noise``); a
        ``target`` is refused (each point sets its own).

    Returns
    -------
    BudgetFrontier
        ``taus`` with each point's ``coverage`` (Σ weights of the grids within target), ``released`` and
        ``status``, and ``knee``; with ``epsilon_totals`` also ``coverage_vs_budget`` and ``budget_tau``.

    Raises
    ------
    DpoptInputError
        If ``occ`` is not an :class:`Occupancy`, ``bound`` or ``epsilon_total`` is not a positive finite number,
        ``taus`` or ``epsilon_totals`` breaks its rule above, or a planner argument is invalid.
    """
    U = check_bound(bound)
    eps = check_epsilon(epsilon_total, "epsilon_total")
    if "target" in settings:
        raise DpoptInputError("`target` is not an argument of budget_frontier: each point sets its own (`taus`)")
    if not isinstance(occ, Occupancy):
        raise _fail("occ", "must be a dpopt.Occupancy", type(occ).__name__)
    caps = cap_table(occ, max_caps=settings.get("max_caps", 3), truncate=settings.get("truncate", True))
    full = dict(settings, occ=occ, bound=U, epsilon_total=eps)
    fr = _frontier_points(full, taus, method, None, caps, progress, time_limit=solver_seconds(time_limit))
    if epsilon_totals is None:
        return fr
    e_arr = np.asarray(epsilon_totals, dtype=float)
    if e_arr.ndim != 1 or np.any(~np.isfinite(e_arr)) or np.any(e_arr <= 0):
        raise _fail("epsilon_totals", "must be positive finite numbers", epsilon_totals)
    btau = fr.knee if budget_tau is None else float(budget_tau)
    cvb = np.asarray([plan_budget(occ, U, float(e), target=btau, method=method, time_limit=time_limit,
                                  _caps=caps, **settings).coverage for e in e_arr])
    return dataclasses.replace(fr, epsilon_totals=e_arr, coverage_vs_budget=cvb, budget_tau=btau)


def smallest_target(occ: Any, bound: float, epsilon_total: float, coverage: float, *,
                    rtol: float = 0.01, method: str = "greedy", time_limit: float | None = 10.0,
                    **settings: Any) -> tuple[float, Any]:
    """The dual problem: the smallest τ (to relative ``rtol``) whose plan covers ≥ ``coverage``.

    Bisection on log τ over (0, U/2]; coverage of the exact optimum is non-decreasing in τ (a
    larger τ only enlarges every configuration's feasible interval). Returns (τ, BudgetPlan).
    Raises :class:`DpoptInputError` if τ = 2U does not reach it.
    """
    U = check_bound(bound)
    if not isinstance(occ, Occupancy):
        raise _fail("occ", "must be a dpopt.Occupancy", type(occ).__name__)
    caps = cap_table(occ, max_caps=settings.get("max_caps", 3), truncate=settings.get("truncate", True))
    run = lambda tau: plan_budget(occ, U, epsilon_total, target=tau, method=method,  # noqa: E731
                                  time_limit=time_limit, _caps=caps, **settings)
    hi = 2.0 * U
    best = run(hi)
    if best.coverage < coverage:
        raise _fail("coverage", f"is not reachable at epsilon_total={epsilon_total:g} (at most {best.coverage:g})",
                    coverage)
    lo = U * 1e-6
    while hi / lo > 1 + rtol:
        mid = math.sqrt(lo * hi)
        bp = run(mid)
        if bp.coverage >= coverage:
            hi, best = mid, bp
        else:
            lo = mid
    return hi, best
