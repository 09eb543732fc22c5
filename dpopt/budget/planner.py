"""The budget planner: the most grids released within their error targets under one total budget.

Entry point :func:`plan_budget` (models/budget.md). From public counts only (the occupancy array),
it chooses per grid a pseudo-user cap and a budget from a ladder, per (user, grid) keep/suppress,
and which grids to withhold, so that every user's total spend Σ_{g: ℓ kept in g} ε_g ≤ ε_total and
the weighted number of released grids whose error bound (``noise`` or ``worst_case``, at the stated
confidence) is ≤ τ is largest. It returns a :class:`BudgetPlan` holding the :class:`dpopt.plan.GridPlan`
the release consumes.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._validation import (
    _fail,
    check_bound,
    check_choice,
    check_epsilon,
    check_nonnegative_float,
)
from ..occupancy import Occupancy
from ..plan import GridPlan
from ..solve import Status
from .configs import ConfigTable, budget_ladder, config_table, pair_arrays
from .errors import CRITERIA, Criterion, StatisticBounds, statistic_bounds
from .greedy import Assignment, greedy_assignment
from .noise import LaplaceNoise, NoiseModel

__all__ = ["BudgetPlan", "plan_budget", "make_criterion", "METHODS"]

METHODS = ("milp", "greedy")


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
        Proven upper bound on the coverage of any plan in the decision space (MILP dual bound;
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
        """Coverage against τ (and the total budget) for the same occupancy and settings."""
        from .frontier import budget_frontier

        s = dict(self.info["settings"])
        s.update(kwargs)
        occ = s.pop("occ")
        bound = s.pop("bound")
        eps = s.pop("epsilon_total")
        return budget_frontier(occ, bound, eps, taus=taus, **s)

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
    arr = np.asarray(value, dtype=float)
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


def _fill_and_lift(occ: Occupancy, table: ConfigTable, a: Assignment, epsilon_total: float,
                   crit: Criterion) -> tuple[np.ndarray, np.ndarray]:
    """Spend what the assignment leaves: keep more users in released grids, then raise budgets.

    Returns (keep mask over pairs, per-grid budget). Both steps keep every user's spend ≤ ε_total
    and only raise R or b, so every released grid stays within its target (models/budget.md §6).
    """
    rows, cols, cnt = pair_arrays(occ)
    G = occ.n_grids
    rel = a.config >= 0
    bud = np.zeros(G)
    bud[rel] = table.cfg_budget[a.config[rel]]
    cap = np.zeros(G, dtype=np.int64)
    cap[rel] = table.cfg_cap[a.config[rel]]
    keep = a.keep & rel[cols]
    cost = np.bincount(rows, weights=bud[cols] * keep, minlength=occ.n_users)
    lim = epsilon_total * (1.0 + 1e-12)
    # fill: candidate pairs in released grids, cheapest grid first
    cand = np.flatnonzero(~keep & rel[cols] & (table.truncate | (cnt <= cap[cols])))
    cand = cand[np.argsort(bud[cols[cand]], kind="stable")]
    for p in cand.tolist():
        u = rows[p]
        c = bud[cols[p]]
        if cost[u] + c <= lim:
            keep[p] = True
            cost[u] += c
    # lift: give each released grid the least slack of its kept users, worst grids first
    csc = sp.csc_array((keep.astype(float), (rows, cols)), shape=(occ.n_users, G))
    csc.eliminate_zeros()
    R = np.bincount(cols, weights=np.minimum(cnt, cap[cols]) * keep, minlength=G)
    gmax = np.zeros(G)
    np.maximum.at(gmax, cols, np.minimum(cnt, cap[cols]) * keep)
    sb = crit.bounds(occ.grid_totals, R, gmax, np.where(rel, bud, 1.0), envelope=False)
    order = np.argsort(-np.where(rel, sb.mean / crit.target, -np.inf), kind="stable")
    for g in order[: int(rel.sum())].tolist():
        us = csc.indices[csc.indptr[g]:csc.indptr[g + 1]]
        if us.size == 0:
            continue
        room = epsilon_total - cost[us].max()
        if room > 0:
            bud[g] += room
            cost[us] += room
    return keep, bud


def _assemble(occ: Occupancy, table: ConfigTable, a: Assignment, epsilon_total: float,
              crit: Criterion, method: str, status: Status, gap: float
              ) -> tuple[GridPlan, dict, np.ndarray, np.ndarray]:
    rows, cols, cnt = pair_arrays(occ)
    G = occ.n_grids
    keep, bud = _fill_and_lift(occ, table, a, epsilon_total, crit)
    rel = a.config >= 0
    cap = occ.grid_max.astype(np.int64).copy()
    cap[rel] = table.cfg_cap[a.config[rel]]
    gamma = np.where(keep & rel[cols], np.minimum(cnt, cap[cols]), 0).astype(np.int64)
    retained = sp.csr_array((gamma, (rows, cols)), shape=(occ.n_users, G))
    retained.eliminate_zeros()
    R = np.bincount(cols, weights=gamma, minlength=G)
    gmax = np.zeros(G)
    np.maximum.at(gmax, cols, gamma)
    bud = np.where(rel, bud, 0.0)
    scalar = float(crit.target[0]) if np.all(crit.target == crit.target[0]) else None
    plan = GridPlan(
        retained=retained, budget_mean=bud * crit.mean_share, budget_variance=bud * (1 - crit.mean_share),
        released=rel.copy(), unit=crit.noise.unit, method=method, status=status, gap=gap,
        error_bound=scalar, array_length=cap,
        info={"criterion": crit.criterion, "confidence": crit.confidence},
    )
    bounds = {}
    for name in CRITERIA:
        sb = statistic_bounds(occ.grid_totals, R, gmax, plan.budget_mean, plan.budget_variance, crit.bound,
                              criterion=name, confidence=crit.planning_confidence, noise=crit.noise)
        bounds[name] = StatisticBounds(mean=np.where(rel, sb.mean, np.inf),
                                       variance=np.where(rel, sb.variance, np.inf))
    return plan, bounds, R, gmax


def plan_budget(
    occ: Occupancy,
    bound: float,
    epsilon_total: float,
    *,
    target: Any = None,
    target_variance: Any = None,
    criterion: str = "noise",
    confidence: float = 0.95,
    weights: Any = None,
    method: str = "milp",
    mean_share: float = 0.5,
    max_caps: int | None = 3,
    ladder_ratio: float = 2.0,
    budget_levels: Any = None,
    truncate: bool = True,
    noise: NoiseModel | None = None,
    time_limit: float | None = 60.0,
    progress: bool = False,
    _criterion: Any = None,
) -> BudgetPlan:
    """Plan a release of all grids under one total budget (models/budget.md).

    Parameters
    ----------
    occ : Occupancy
        Public user × grid counts.
    bound : float
        U: samples lie in [0, U].
    epsilon_total : float
        The budget each user may spend over all released grids and both statistics (``noise.unit``).
    target : float or array_like (G,), optional
        τ: the mean's error bound a grid must meet (data units). Default: the knee of the
        coverage–τ frontier (:func:`dpopt.budget.knee_target`), recorded in ``info["target_rule"]``.
    target_variance : float or array_like, optional
        A target for the variance too (then the failure probability is split in halves).
    criterion : {"noise", "worst_case"}
        ``noise``: the noise's bound only (kept users a sample of the grid's users);
        ``worst_case``: worst-case clipping bias + noise (seed 002, ERRATA E1/E10).
    confidence : float
        q in (0, 1); bounds hold with probability ≥ q.
    weights : array_like (G,), optional
        Grid weights (default 1): the objective is Σ weights over grids within target.
    method : {"milp", "greedy"}
        The exact MILP (greedy warm start; never worse than the greedy) or the greedy alone.
    mean_share : float
        Fraction of a grid's budget spent on the mean (the rest on the variance).
    max_caps : int or None
        Candidate pseudo-user caps per grid (log-spread distinct counts); None = every count.
    ladder_ratio : float
        Ratio of the geometric ladder of K: grid budgets are ε_total/K.
    budget_levels : array_like, optional
        Explicit per-grid budget levels (each in (0, ε_total]) instead of the ladder; e.g. ``[ε]``
        gives seed 002's fixed per-grid budget.
    truncate : bool
        Users above a grid's cap are truncated to it (pseudo-users); False = suppressed (seed 002).
    noise : NoiseModel, optional
        Default :class:`LaplaceNoise` (unit "epsilon").
    time_limit : float or None
        Total seconds for planning (the MILP gets what remains after the tables and the greedy).
    progress : bool
        Show a tqdm progress bar over the stages.

    Returns
    -------
    BudgetPlan
    """
    t0 = time.perf_counter()
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
    if ladder_ratio <= 1 or not math.isfinite(ladder_ratio):
        raise _fail("ladder_ratio", "must be a finite number > 1", ladder_ratio)
    settings = dict(occ=occ, bound=U, epsilon_total=eps, target_variance=target_variance,
                    criterion=criterion, confidence=confidence, weights=weights, mean_share=mean_share,
                    max_caps=max_caps, ladder_ratio=ladder_ratio, budget_levels=budget_levels,
                    truncate=truncate, noise=noise)
    info: dict[str, Any] = {"settings": settings}
    if target is None and _criterion is None:
        from .frontier import budget_frontier

        fr = budget_frontier(occ, U, eps, method="greedy", **{k: v for k, v in settings.items()
                                                              if k not in ("occ", "bound", "epsilon_total")})
        target = fr.knee
        info["target_rule"] = fr.knee_rule
        info["frontier"] = fr
    crit = _criterion if _criterion is not None else make_criterion(
        occ, U, target=target, target_variance=target_variance, criterion=criterion,
        confidence=confidence, mean_share=mean_share, noise=noise)

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=3 if method == "greedy" else 4, desc="budget plan")
    if budget_levels is None:
        ladder, Ks = budget_ladder(eps, int(occ.degradation), ratio=ladder_ratio)
    else:
        ladder = np.unique(np.asarray(budget_levels, dtype=float))[::-1]
        if ladder.size == 0 or not np.all(np.isfinite(ladder)) or ladder[-1] <= 0 or ladder[0] > eps * (1 + 1e-12):
            raise _fail("budget_levels", "must hold numbers in (0, epsilon_total]", budget_levels)
        Ks = np.floor(eps / ladder * (1 + 1e-12)).astype(np.int64)
    table = config_table(occ, crit, ladder, max_caps=max_caps, truncate=truncate)
    info.update(n_configs=int(table.cfg_gc.size), ladder=ladder, ladder_K=Ks)
    if bar is not None:
        bar.update()
    greedy, K = greedy_assignment(occ, table, Ks, w, eps)
    gcov = greedy.coverage(w)
    if bar is not None:
        bar.update()
    best, status, gap, cbound, kind = greedy, Status.HEURISTIC, math.nan, math.nan, "budget-greedy"
    if method == "milp":
        from ..solve import solve
        from .milp import build_budget_model

        bm = build_budget_model(occ, table, eps, w)
        info.update(n_cols=bm.model.num_cols, n_rows=bm.model.num_rows, nnz=int(bm.model.A.nnz),
                    model=bm.model)  # export: dpopt.solve.write_model(bp.info["model"], "budget.mps")
        left = None if time_limit is None else max(1.0, time_limit - (time.perf_counter() - t0))
        warm = bm.point(greedy)
        info["warm_start_violation"] = bm.model.max_violation(warm)
        # the root LP of large instances is degenerate for dual simplex: use the interior point
        opts = {"presolve": "off", "mip_lp_solver": "ipm"} if bm.model.num_cols > 2000 else None
        res = solve(bm.model, time_limit=left, warm_start=warm, options=opts)
        info["solve"] = {"status": str(res.status), "raw": res.raw_status, "time": res.solve_time, **res.info}
        kind = "budget-milp"
        if res.x is not None:
            cand = bm.assignment(res.x)
            if cand.coverage(w) >= gcov:
                best = cand
        status = res.status
        # bounds valid without the solver: every feasible grid released; the aggregate knapsack
        agg_bound = bm.aggregate_bound(w, eps)
        info["aggregate_bound"] = agg_bound
        trivial = min(float(w[np.unique(table.cfg_grid)].sum()), agg_bound)
        cbound = min(float(res.bound), trivial) if math.isfinite(res.bound) else trivial
        if np.all(w == np.round(w)):  # integral weights: the coverage is an integer
            cbound = math.floor(cbound + 1e-9)
        cov = best.coverage(w)
        if status is Status.OPTIMAL:
            gap, cbound = 0.0, max(cov, cbound) if math.isfinite(cbound) else cov
        else:
            gap = (cbound - cov) / max(1.0, cov) if math.isfinite(cbound) else math.nan
        K = 0
        if bar is not None:
            bar.update()
    plan, bounds, R, gmax = _assemble(occ, table, best, eps, crit, kind, status, gap)
    if bar is not None:
        bar.update()
        bar.close()
    if plan.total_cost > eps * (1 + 1e-9):
        raise RuntimeError(f"budget plan spends {plan.total_cost} > epsilon_total {eps}")  # pragma: no cover
    # re-check from the plan itself (actual R, Γ*, budgets): every released grid must be within
    within = plan.released & (
        crit.excess(np.arange(G), occ.grid_totals, R, gmax, plan.budget) <= 1e-9 * np.maximum(1.0, crit.target))
    if np.any(plan.released & ~within):
        raise RuntimeError("budget plan releases a grid above its target")  # pragma: no cover
    return BudgetPlan(
        plan=plan, target=crit.target, target_variance=crit.target_variance, criterion=crit.criterion,
        confidence=crit.confidence, epsilon_total=eps, bounds=bounds, within_target=within,
        coverage=float(w[within].sum()), coverage_bound=cbound, status=status, gap=gap,
        greedy_coverage=gcov, degradation=int(K), solve_time=time.perf_counter() - t0, info=info,
    )
