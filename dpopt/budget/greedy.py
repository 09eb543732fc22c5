"""The greedy budget planner: uniform ε_total/K, each user kept in at most K grids (models/budget.md §5).

For every K of the budget ladder: visit grids from the cheapest (fewest users needed to reach its
least R_min at budget ε_total/K) to the dearest, per unit weight; in each, among the configurations
at that level pick the one reachable with the fewest users that still have capacity, keep those
users (largest contributions first) and charge each one grid. The best K (weighted coverage, then
larger budget) wins. Every result is a point of the MILP (the ladder holds ε_total/K), hence its
warm start.
"""

from __future__ import annotations

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
                      *, progress: bool = False) -> tuple[Assignment, int]:
    """Best uniform greedy plan over the ladder; returns (assignment, K)."""
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
    return best[2], -best[1]
