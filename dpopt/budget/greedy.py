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


@dataclass(frozen=True, eq=False)
class _Pairs:
    """The occupancy's (user, grid) pairs: CSR ``rows``, ``cols``, ``cnt``; ``csc_order`` lists them
    grid by grid (stable) and ``gstart`` is where each grid starts in it (and the end)."""

    rows: np.ndarray
    cols: np.ndarray
    cnt: np.ndarray
    csc_order: np.ndarray
    gstart: np.ndarray

    @classmethod
    def of(cls, occ: Occupancy) -> _Pairs:
        rows, cols, cnt = pair_arrays(occ)
        csc_order = np.argsort(cols, kind="stable")
        gstart = np.searchsorted(cols[csc_order], np.arange(occ.n_grids + 1))
        return cls(rows=rows, cols=cols, cnt=cnt, csc_order=csc_order, gstart=gstart)


def _contrib(cnt: np.ndarray, cap: int, truncate: bool) -> np.ndarray:
    return np.minimum(cnt, cap) if truncate else np.where(cnt <= cap, cnt, 0)


def greedy_assignment(occ: Occupancy, table: ConfigTable, Ks: np.ndarray, weights: np.ndarray,
                      epsilon_total: float, *, progress: bool = False,
                      deadline: float | None = None) -> tuple[Assignment, int]:
    """Best uniform greedy plan over the ladder, augmented; returns (assignment, K of the uniform pass).

    Levels are tried most promising first (total weight of the grids with a configuration at the
    level, then K ascending) and skipped when an upper bound on their score cannot beat the best so
    far: the same result as trying every level. Past ``deadline`` (a ``time.perf_counter()``
    value) no further level is tried and the augmentation is skipped; without a deadline the result
    does not depend on it.
    """
    pairs = _Pairs.of(occ)
    G = occ.n_grids
    cfg_grid = table.cfg_grid
    best: tuple[float, int, Assignment] | None = None
    levels = np.unique(table.cfg_level)
    sels = {int(k): np.flatnonzero(table.cfg_level == k) for k in levels.tolist()}
    ub = {k: float(weights[_mask(cfg_grid[sel], G)].sum()) for k, sel in sels.items()}
    order = sorted(sels, key=lambda k: (-ub[k], k))
    it = order
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(order, desc="greedy levels", leave=False)
    for k in it:
        if deadline is not None and best is not None and time.perf_counter() > deadline:
            break
        K = int(Ks[k])
        # a level replaces the best only with a strictly larger (coverage, −K): skip it when even
        # an upper bound on its coverage cannot
        if best is not None and (ub[k], -K) <= best[:2]:
            continue
        st = _static_level(table, sels[k], pairs.cnt, pairs.csc_order, pairs.gstart)
        need0 = st.need_grid / np.maximum(weights[st.grids], 1e-300)
        if best is not None and (_level_bound(st.need_grid, weights[st.grids], K * occ.n_users), -K) <= best[:2]:
            continue  # even the fractional knapsack over the users' K slots cannot beat it
        a = _uniform_pass(occ, table, st, need0, K, pairs)
        score = (a.coverage(weights), -K)
        if best is None or score > best[:2]:
            best = (score[0], score[1], a)
    if best is None:
        return Assignment(config=-np.ones(G, dtype=np.int64), keep=np.zeros(pairs.rows.size, dtype=bool)), 0
    if deadline is not None and time.perf_counter() > deadline:
        return best[2], -best[1]
    return _augment(occ, table, best[2], epsilon_total, weights, pairs), -best[1]


@dataclass(frozen=True, eq=False)
class _Level:
    """A ladder level's configurations with everyone available (vectorised over configurations).

    sel: the level's configurations sorted by (grid, cap); grids: their distinct grids; first: where
    each grid's configurations start in ``sel`` (and the end); seg_start: start of each
    configuration's segment in ``order_pairs``, which lists the grid's pairs by contribution decreasing (stable in CSC order); n0: the fewest
    users reaching R_min; need_grid: min over the grid's configurations of n0.
    """

    sel: np.ndarray
    grids: np.ndarray
    first: np.ndarray
    seg_start: np.ndarray
    order_pairs: np.ndarray
    n0: np.ndarray
    need_grid: np.ndarray


def _mask(idx: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, dtype=bool)
    out[idx] = True
    return out


def _static_level(table: ConfigTable, sel: np.ndarray, cnt: np.ndarray, csc_order: np.ndarray,
                  gstart: np.ndarray) -> _Level:
    """Fewest users per configuration with every user available (the greedy's static difficulty)."""
    cfg_grid, cfg_cap = table.cfg_grid, table.cfg_cap
    sel = sel[np.lexsort((cfg_cap[sel], cfg_grid[sel]))]
    gs = cfg_grid[sel]
    first = np.flatnonzero(np.r_[True, gs[1:] != gs[:-1]]) if gs.size else np.zeros(0, np.int64)
    grids = gs[first]
    seg_start, order_pairs, vs = _ordered_segments(cfg_grid[sel], cfg_cap[sel], table.truncate, cnt, csc_order,
                                                   gstart)
    size = np.diff(seg_start)
    seg = np.repeat(np.arange(sel.size), size)
    cs = np.cumsum(vs)
    cs = cs - np.repeat(np.r_[0, cs[seg_start[1:-1] - 1]] if sel.size else np.zeros(0, np.int64), size)
    below = cs < table.cfg_rmin[sel][seg]
    n0 = np.bincount(seg, weights=below, minlength=sel.size).astype(np.int64) + 1
    need_grid = np.minimum.reduceat(n0, first) if sel.size else np.zeros(0, np.int64)
    return _Level(sel=sel, grids=grids, first=np.r_[first, sel.size], seg_start=seg_start,
                  order_pairs=order_pairs, n0=n0, need_grid=need_grid.astype(float))


def _ordered_segments(grid: np.ndarray, cap: np.ndarray, truncate: bool, cnt: np.ndarray, csc_order: np.ndarray,
                      gstart: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each (grid, cap) segment, the grid's pairs by contribution decreasing, ties in CSC order
    (= a stable sort of the contributions, as the greedy's choices use). Returns (segment starts,
    pairs, contributions), vectorised over segments."""
    size = gstart[grid + 1] - gstart[grid]
    seg = np.repeat(np.arange(grid.size), size)
    offs = np.arange(size.sum()) - np.repeat(np.cumsum(size) - size, size)
    pairs = csc_order[np.repeat(gstart[grid], size) + offs]
    v = _contrib(cnt[pairs], cap[seg], truncate)
    o = np.lexsort((-v, seg))
    return np.r_[0, np.cumsum(size)], pairs[o], v[o]


def _level_bound(need: np.ndarray, w: np.ndarray, slots: float) -> float:
    """Fractional knapsack: each released grid uses ≥ need users' slots, ``slots`` = K·(#users)."""
    order = np.argsort(need / np.maximum(w, 1e-300), kind="stable")
    cum = np.cumsum(need[order])
    n = int(np.searchsorted(cum, slots * (1 + 1e-12), side="right"))
    out = float(w[order[:n]].sum())
    if n < order.size:
        out += float(w[order[n]]) * max(slots - (cum[n - 1] if n else 0.0), 0.0) / float(need[order[n]])
    return out


def _uniform_pass(occ: Occupancy, table: ConfigTable, st: _Level, need0: np.ndarray, K: int,
                  pairs: _Pairs) -> Assignment:
    """One level's greedy: grids by static difficulty, each the configuration needing fewest users
    with capacity left (largest contributions first, ties in CSC order; the first cap on a tie).

    Walks each configuration's precomputed order (:class:`_Level`) skipping users without capacity
    and stops as soon as R_min is reached or the count cannot beat the best so far: the same choice
    as sorting the available users' contributions (models/budget.md §5), at Python-scalar speed on
    the few pairs of a grid.
    """
    rows, cnt = pairs.rows, pairs.cnt
    cap_left = [K] * occ.n_users
    config = -np.ones(occ.n_grids, dtype=np.int64)
    keep = np.zeros(rows.size, dtype=bool)
    order = st.order_pairs.tolist()
    user_of = rows[st.order_pairs].tolist()
    seg_v = _contrib(cnt[st.order_pairs], np.repeat(table.cfg_cap[st.sel], np.diff(st.seg_start)),
                     table.truncate).tolist()
    start = st.seg_start.tolist()
    rmin = table.cfg_rmin[st.sel].tolist()
    first = st.first.tolist()
    sel = st.sel.tolist()
    for i in np.argsort(need0, kind="stable").tolist():
        best_n, best_j = None, -1
        for j in range(first[i], first[i + 1]):
            acc, n, need = 0, 0, rmin[j]
            for q in range(start[j], start[j + 1]):
                if best_n is not None and n + 1 >= best_n:
                    break
                if cap_left[user_of[q]] > 0:
                    acc += seg_v[q]
                    n += 1
                    if acc >= need:
                        best_n, best_j = n, j
                        break
        if best_j < 0:
            continue
        taken = []
        for q in range(start[best_j], start[best_j + 1]):
            if len(taken) == best_n:
                break
            if cap_left[user_of[q]] > 0:
                taken.append(q)
        for q in taken:
            cap_left[user_of[q]] -= 1
            keep[order[q]] = True
        config[st.grids[i]] = sel[best_j]
    return Assignment(config=config, keep=keep)


def _augment(occ: Occupancy, table: ConfigTable, a: Assignment, epsilon_total: float, weights: np.ndarray,
             pairs: _Pairs) -> Assignment:
    """Second pass with non-uniform budgets: release further grids at any level from the budget
    the uniform pass left, cheapest total spend (users × level) per unit weight first."""
    config = a.config.copy()
    keep = a.keep & (config[pairs.cols] >= 0)
    rel = config >= 0
    spend = _spend(occ, table, config, keep, pairs)
    cfg_grid = table.cfg_grid
    todo = np.flatnonzero(~rel[cfg_grid])
    if todo.size == 0:
        return Assignment(config=config, keep=keep)
    todo = todo[np.argsort(cfg_grid[todo], kind="stable")]
    gt = cfg_grid[todo]
    starts = np.flatnonzero(np.r_[True, gt[1:] != gt[:-1]])
    grids = gt[starts]
    sp = _spender(table, todo, spend, epsilon_total * (1.0 + 1e-12), pairs)
    todo_l, bounds = todo.tolist(), np.r_[starts, todo.size].tolist()
    group_l = [todo_l[bounds[i]:bounds[i + 1]] for i in range(grids.size)]
    first = [sp.best_choice(cs) for cs in group_l]
    order = sorted(range(grids.size), key=lambda i: (math.inf if first[i] is None
                                                     else first[i][0] / max(weights[grids[i]], 1e-300)))
    for i in order:
        if first[i] is None:
            continue
        ch = sp.best_choice(group_l[i])
        if ch is None:
            continue
        _, cf, n = ch
        e = sp.budget[cf]
        for q in sp.take(cf, n):
            sp.spend[sp.user_of[q]] += e
            keep[sp.order_pairs[q]] = True
        config[grids[i]] = cf
    return Assignment(config=config, keep=keep)


def _spend(occ: Occupancy, table: ConfigTable, config: np.ndarray, keep: np.ndarray, pairs: _Pairs) -> np.ndarray:
    """Each user's total spend under ``config`` and ``keep`` (the uniform pass's assignment)."""
    rel = config >= 0
    bud = np.zeros(occ.n_grids)
    bud[rel] = table.cfg_budget[config[rel]]
    return np.bincount(pairs.rows, weights=bud[pairs.cols] * keep, minlength=occ.n_users)


@dataclass(eq=False)
class _Spender:
    """The augmentation's state: per (grid, cap) row used by a configuration left, its pairs by
    contribution decreasing (stable), as Python lists; ``spend`` (each user's spend so far) is
    updated in place; ``lim`` is ε_total with its tolerance."""

    order_pairs: list
    seg_v: list
    user_of: list
    start: list
    cfg_seg: list
    rmin: list
    budget: list
    spend: list
    lim: float

    def best_choice(self, cs: list) -> tuple[float, int, int] | None:
        """The configuration of ``cs`` (table order) whose fewest affordable users cost least:
        (cost, configuration, users) or None."""
        budget, rmin, cfg_seg, start = self.budget, self.rmin, self.cfg_seg, self.start
        spend_l, user_of, seg_v, lim = self.spend, self.user_of, self.seg_v, self.lim
        best = None
        for cf in cs:
            e, need, sg = budget[cf], rmin[cf], cfg_seg[cf]
            acc, n, hit = 0, 0, False
            for q in range(start[sg], start[sg + 1]):
                if best is not None and (n + 1) * e >= best[0]:
                    break
                if spend_l[user_of[q]] + e <= lim:
                    acc += seg_v[q]
                    n += 1
                    if acc >= need:
                        hit = True
                        break
            if hit:
                best = (n * e, cf, n)
        return best

    def take(self, cf: int, n: int) -> list:
        """The first ``n`` affordable positions of configuration ``cf``'s segment."""
        e, sg, out = self.budget[cf], self.cfg_seg[cf], []
        start, spend_l, user_of, lim = self.start, self.spend, self.user_of, self.lim
        for q in range(start[sg], start[sg + 1]):
            if len(out) == n:
                break
            if spend_l[user_of[q]] + e <= lim:
                out.append(q)
        return out


def _spender(table: ConfigTable, todo: np.ndarray, spend: np.ndarray, lim: float, pairs: _Pairs) -> _Spender:
    """The :class:`_Spender` of the configurations ``todo`` (not empty)."""
    gcs = np.unique(table.cfg_gc[todo])
    gpos = np.full(table.gc_grid.size, -1, dtype=np.int64)
    gpos[gcs] = np.arange(gcs.size)
    seg_start, order, v = _ordered_segments(table.gc_grid[gcs], table.gc_cap[gcs], table.truncate, pairs.cnt,
                                            pairs.csc_order, pairs.gstart)
    return _Spender(order_pairs=order.tolist(), seg_v=v.tolist(), user_of=pairs.rows[order].tolist(),
                    start=seg_start.tolist(), cfg_seg=gpos[table.cfg_gc].tolist(), rmin=table.cfg_rmin.tolist(),
                    budget=table.cfg_budget.tolist(), spend=spend.tolist(), lim=lim)
