"""The greedy budget planner: uniform ε_total/K, each user kept in at most K grids (models/budget.md §5).

For every K of the budget ladder: visit grids from the cheapest (fewest users needed to reach its
least R_min at budget ε_total/K) to the dearest, per unit weight; in each, among the configurations
at that level pick the one reachable with the fewest users that still have capacity, keep those
users (largest contributions first) and charge each one grid. The best K (weighted coverage, then
larger budget) wins. A second pass (`_augment`) then releases further grids at any level with the
budget the uniform pass left (non-uniform budgets). Every result is a point of the MILP (the ladder holds ε_total/K), hence its
warm start.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from ..occupancy import Occupancy
from .configs import ConfigTable, pair_arrays

__all__ = ["Assignment", "greedy_assignment"]


@dataclass(frozen=True, eq=False)
class Assignment:
    """A planner's decision: chosen configuration per grid (−1 = withheld) and kept pairs (CSR order)."""

    config: np.ndarray
    keep: np.ndarray

    def coverage(self, weights: np.ndarray) -> float:
        return float(np.sum(weights[self.config >= 0]))


def _contrib(cnt: np.ndarray, cap: int, truncate: bool) -> np.ndarray:
    return np.minimum(cnt, cap) if truncate else np.where(cnt <= cap, cnt, 0)


def greedy_assignment(occ: Occupancy, table: ConfigTable, Ks: np.ndarray, weights: np.ndarray,
                      epsilon_total: float, *, progress: bool = False,
                      deadline: float | None = None) -> tuple[Assignment, int]:
    """Best uniform greedy plan over the ladder, augmented; returns (assignment, K of the uniform pass).

    Past ``deadline`` (a ``time.perf_counter()`` value) no further ladder level is tried (the best
    of those tried is kept, then augmented); without a deadline the result does not depend on it.
    """
    rows, cols, cnt = pair_arrays(occ)
    G = occ.n_grids
    csc_order = np.argsort(cols, kind="stable")
    gstart = np.searchsorted(cols[csc_order], np.arange(G + 1))
    cfg_grid, cfg_cap = table.cfg_grid, table.cfg_cap
    best: tuple[float, int, Assignment] | None = None
    levels = np.unique(table.cfg_level)
    it = levels
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(levels, desc="greedy levels", leave=False)
    for k in it:
        if deadline is not None and best is not None and time.perf_counter() > deadline:
            break
        K = int(Ks[k])
        sel = np.flatnonzero(table.cfg_level == k)
        order = np.lexsort((cfg_cap[sel], cfg_grid[sel]))
        sel = sel[order]
        grids = np.unique(cfg_grid[sel])
        # static difficulty: fewest users needed with everyone available
        need0 = np.empty(grids.size)
        by_grid = np.split(sel, np.searchsorted(cfg_grid[sel], grids[1:]))
        for i, (g, cs) in enumerate(zip(grids.tolist(), by_grid)):
            pp = csc_order[gstart[g]:gstart[g + 1]]
            best_n = np.inf
            for cf in cs.tolist():
                v = np.sort(_contrib(cnt[pp], int(cfg_cap[cf]), table.truncate))[::-1]
                n = int(np.searchsorted(np.cumsum(v), table.cfg_rmin[cf])) + 1
                best_n = min(best_n, n)
            need0[i] = best_n / max(weights[g], 1e-300)
        cap_left = np.full(occ.n_users, K, dtype=np.int64)
        config = -np.ones(G, dtype=np.int64)
        keep = np.zeros(rows.size, dtype=bool)
        for i in np.argsort(need0, kind="stable").tolist():
            g = int(grids[i])
            pp = csc_order[gstart[g]:gstart[g + 1]]
            pp = pp[cap_left[rows[pp]] > 0]
            if pp.size == 0:
                continue
            choice = None
            for cf in by_grid[i].tolist():
                v = _contrib(cnt[pp], int(cfg_cap[cf]), table.truncate)
                o = np.argsort(-v, kind="stable")
                cs = np.cumsum(v[o])
                if cs[-1] < table.cfg_rmin[cf]:
                    continue
                n = int(np.searchsorted(cs, table.cfg_rmin[cf])) + 1
                if choice is None or n < choice[0]:
                    choice = (n, cf, pp[o[:n]])
            if choice is None:
                continue
            _, cf, users_p = choice
            config[g] = cf
            keep[users_p] = True
            cap_left[rows[users_p]] -= 1
        a = Assignment(config=config, keep=keep)
        score = (a.coverage(weights), -K)
        if best is None or score > best[:2]:
            best = (score[0], score[1], a)
    if best is None:
        return Assignment(config=-np.ones(G, dtype=np.int64), keep=np.zeros(rows.size, dtype=bool)), 0
    return _augment(occ, table, best[2], epsilon_total, weights, rows, cols, cnt, csc_order, gstart), -best[1]


def _augment(occ: Occupancy, table: ConfigTable, a: Assignment, epsilon_total: float, weights: np.ndarray,
             rows: np.ndarray, cols: np.ndarray, cnt: np.ndarray, csc_order: np.ndarray,
             gstart: np.ndarray) -> Assignment:
    """Second pass with non-uniform budgets: release further grids at any level from the budget
    the uniform pass left, cheapest total spend (users × level) per unit weight first."""
    config = a.config.copy()
    keep = a.keep & (config[cols] >= 0)
    rel = config >= 0
    bud = np.zeros(occ.n_grids)
    bud[rel] = table.cfg_budget[config[rel]]
    spend = np.bincount(rows, weights=bud[cols] * keep, minlength=occ.n_users)
    lim = epsilon_total * (1.0 + 1e-12)
    cfg_grid = table.cfg_grid
    todo = np.flatnonzero(~rel[cfg_grid])
    if todo.size == 0:
        return Assignment(config=config, keep=keep)
    todo = todo[np.argsort(cfg_grid[todo], kind="stable")]
    grids, starts = np.unique(cfg_grid[todo], return_index=True)
    groups = np.split(todo, starts[1:])

    def best_choice(g: int, cs: np.ndarray):
        pp = csc_order[gstart[g]:gstart[g + 1]]
        choice = None
        for cf in cs.tolist():
            e = table.cfg_budget[cf]
            q = pp[spend[rows[pp]] + e <= lim]
            if q.size == 0:
                continue
            c = int(table.cfg_cap[cf])
            v = np.minimum(cnt[q], c) if table.truncate else np.where(cnt[q] <= c, cnt[q], 0)
            o = np.argsort(-v, kind="stable")
            csum = np.cumsum(v[o])
            if csum[-1] < table.cfg_rmin[cf]:
                continue
            n = int(np.searchsorted(csum, table.cfg_rmin[cf])) + 1
            cost = n * e
            if choice is None or cost < choice[0]:
                choice = (cost, cf, q[o[:n]])
        return choice

    first = [best_choice(int(g), cs) for g, cs in zip(grids.tolist(), groups)]
    order = sorted(range(grids.size), key=lambda i: (math.inf if first[i] is None
                                                     else first[i][0] / max(weights[grids[i]], 1e-300)))
    for i in order:
        if first[i] is None:
            continue
        ch = best_choice(int(grids[i]), groups[i])
        if ch is None:
            continue
        _, cf, users_p = ch
        config[grids[i]] = cf
        keep[users_p] = True
        spend[rows[users_p]] += table.cfg_budget[cf]
    return Assignment(config=config, keep=keep)
