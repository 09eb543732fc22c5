"""Assemble the budget planner's :class:`dpopt.plan.GridPlan` from an assignment (models/budget.md §6).

:func:`fill_and_lift` spends what the assignment leaves (keep more users, raise budgets) and
:func:`assemble` builds the plan and its per-grid predicted bounds under both criteria.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..occupancy import Occupancy
from ..plan import GridPlan
from ..solve import Status
from .configs import ConfigTable, pair_arrays
from .errors import CRITERIA, Criterion, StatisticBounds, statistic_bounds
from .greedy import Assignment

__all__ = ["assemble", "fill_and_lift"]


def fill_and_lift(occ: Occupancy, table: ConfigTable, a: Assignment, epsilon_total: float,
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


def assemble(occ: Occupancy, table: ConfigTable, a: Assignment, epsilon_total: float,
              crit: Criterion, method: str, status: Status, gap: float
              ) -> tuple[GridPlan, dict, np.ndarray, np.ndarray]:
    rows, cols, cnt = pair_arrays(occ)
    G = occ.n_grids
    keep, bud = fill_and_lift(occ, table, a, epsilon_total, crit)
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
