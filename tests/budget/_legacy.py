"""The budget planner's configuration table and greedy before their optimisation (commit e1d8682).

Kept verbatim (only imports adjusted) as the reference the optimised code must reproduce bit for bit:
the plans must stay identical where the algorithm is unchanged (tests/budget/test_speed_identity.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpopt.occupancy import Occupancy


#: relative tolerance of every "bound ≤ target" test
RTOL = 1e-12


def budget_ladder(epsilon_total: float, max_grids: int, *, ratio: float = 1.5) -> tuple[np.ndarray, np.ndarray]:
    """Budget levels ε_total/K for K on a geometric integer ladder 1 = K_0 < K_1 < ... ≤ max_grids.

    Every uniform plan "ε_total/K in each of at most K grids per user" with K on the ladder is a
    point of the model (the greedy planner's plans are). Returns (levels decreasing, K values).
    """
    ks = {1, int(max_grids)}
    k = 1.0
    while k < max_grids:
        k *= ratio
        ks.add(min(int(max_grids), int(round(k))))
    K = np.array(sorted(ks), dtype=np.int64)
    return epsilon_total / K, K


def pair_arrays(occ: Occupancy) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(user, grid, count) of every occupied pair, in CSR order of ``occ.matrix``."""
    csr = occ.matrix
    rows = np.repeat(np.arange(occ.n_users, dtype=np.int64), np.diff(csr.indptr))
    return rows, csr.indices.astype(np.int64), csr.data.astype(np.int64)


def candidate_caps(occ: Occupancy, max_caps: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Per grid, the distinct counts (all, or ``max_caps`` of them spread log-evenly incl. the max).

    Returns (grid, cap) arrays sorted by grid then cap decreasing.
    """
    _, cols, cnt = pair_arrays(occ)
    key = np.unique(cols * (int(cnt.max()) + 1) + cnt)
    g = key // (int(cnt.max()) + 1)
    c = key % (int(cnt.max()) + 1)
    order = np.lexsort((-c, g))
    g, c = g[order], c[order]
    if max_caps is None:
        return g, c
    keep = np.zeros(g.size, dtype=bool)
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    ends = np.r_[starts[1:], g.size]
    for s, e in zip(starts.tolist(), ends.tolist()):
        n = e - s
        if n <= max_caps:
            keep[s:e] = True
        else:
            vals = c[s:e].astype(float)  # decreasing
            targets = np.geomspace(vals[0], vals[-1], max_caps)
            pos = np.unique(np.abs(vals[None, :] - targets[:, None]).argmin(axis=1))
            keep[s + pos] = True
    return g[keep], c[keep]


@dataclass(frozen=True, eq=False)
class ConfigTable:
    """Feasible configurations and the (grid, cap) rows they use.

    Attributes
    ----------
    gc_grid, gc_cap, gc_rmax : (grid, cap) entries and R_max(c) = Σ_ℓ min(m, c) (or Σ_{m ≤ c} m).
    cfg_gc, cfg_level, cfg_rmin : per feasible configuration its (grid, cap) entry, ladder index, R_min.
    cfg_budget : ladder[cfg_level].
    """

    gc_grid: np.ndarray
    gc_cap: np.ndarray
    gc_rmax: np.ndarray
    cfg_gc: np.ndarray
    cfg_level: np.ndarray
    cfg_rmin: np.ndarray
    cfg_budget: np.ndarray
    ladder: np.ndarray
    truncate: bool

    @property
    def cfg_grid(self) -> np.ndarray:
        return self.gc_grid[self.cfg_gc]

    @property
    def cfg_cap(self) -> np.ndarray:
        return self.gc_cap[self.cfg_gc]


def config_table(occ: Occupancy, criterion, ladder: np.ndarray, *, max_caps: int | None = 4,
                 truncate: bool = True) -> ConfigTable:
    """All (grid, cap, level) configurations with a non-empty feasible interval of R."""
    _, cols, cnt = pair_arrays(occ)
    gc_grid, gc_cap = candidate_caps(occ, max_caps)
    # R_max(c): sum over the grid's pairs of min(m, c) (truncate) or m·[m ≤ c] (suppress)
    order = np.lexsort((cnt, cols))
    sc, sm = cols[order], cnt[order]
    start = np.searchsorted(sc, np.arange(occ.n_grids))
    end = np.searchsorted(sc, np.arange(occ.n_grids), side="right")
    csum = np.r_[0, np.cumsum(sm)]
    pos = np.searchsorted(sc * (int(cnt.max()) + 2) + sm, gc_grid * (int(cnt.max()) + 2) + gc_cap, side="right")
    below = csum[pos] - csum[start[gc_grid]]  # sum of counts ≤ c
    n_above = end[gc_grid] - pos
    gc_rmax = below + (n_above * gc_cap if truncate else 0)
    N = occ.grid_totals.astype(np.int64)

    nl = ladder.size
    e_gc = np.repeat(np.arange(gc_grid.size), nl)
    e_lev = np.tile(np.arange(nl), gc_grid.size)
    g = gc_grid[e_gc]
    c = gc_cap[e_gc]
    rmax = gc_rmax[e_gc]
    bud = ladder[e_lev]
    tol = RTOL * np.maximum(1.0, np.abs(criterion.target[g]))

    def ok(R: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return criterion.excess(g[idx], N[g[idx]], R, c[idx], bud[idx]) <= tol[idx]

    idx = np.flatnonzero(rmax >= c)
    idx = idx[ok(rmax[idx], idx)]
    lo = c[idx] - 1  # infeasible sentinel (R ≥ c required)
    hi = rmax[idx].copy()  # feasible
    while True:
        act = np.flatnonzero(hi - lo > 1)
        if act.size == 0:
            break
        mid = (lo[act] + hi[act]) // 2
        good = ok(mid, idx[act])
        hi[act[good]] = mid[good]
        lo[act[~good]] = mid[~good]
    return ConfigTable(
        gc_grid=gc_grid, gc_cap=gc_cap, gc_rmax=gc_rmax,
        cfg_gc=e_gc[idx], cfg_level=e_lev[idx], cfg_rmin=hi, cfg_budget=bud[idx],
        ladder=np.asarray(ladder, dtype=float), truncate=bool(truncate),
    )






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
                      epsilon_total: float, *, progress: bool = False) -> tuple[Assignment, int]:
    """Best uniform greedy plan over the ladder, augmented; returns (assignment, K of the uniform pass)."""
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
