"""Configurations of the budget planner, precomputed from public counts (models/budget.md §3).

A configuration of grid g is (cap c, budget level k): every kept user contributes Γ = min(m, c)
records (pseudo-user cap; with ``truncate=False`` users with m > c must be suppressed instead, seed
002's decision space), the grid's budget is ``ladder[k]``, and the planner assumes Γ* = c (the
error is non-decreasing in Γ*, so the true bound is never larger). Its feasible retained totals are
an interval [R_min, R_max(c)] because the criterion is non-increasing in R; R ≥ c is required.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from functools import cached_property

import numpy as np

from .._validation import check_positive_int
from ..occupancy import Occupancy

__all__ = ["CapTable", "ConfigTable", "budget_ladder", "candidate_caps", "cap_table", "config_table", "pair_arrays"]

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

    Returns (grid, cap) arrays sorted by grid then cap decreasing. A grid with more distinct counts
    than ``max_caps`` keeps, for each of ``max_caps`` log-spaced targets between its largest and its
    smallest count, the count nearest the target (the larger one on a tie), vectorised over grids.
    """
    _, cols, cnt = pair_arrays(occ)
    base = int(cnt.max()) + 1
    key = np.unique(cols * base + cnt)
    g = key // base
    c = key % base
    order = np.lexsort((-c, g))
    g, c = g[order], c[order]
    if max_caps is None:
        return g, c
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    ends = np.r_[starts[1:], g.size]
    n = ends - starts
    keep = np.repeat(n <= max_caps, n)
    big = np.flatnonzero(n > max_caps)
    if big.size:
        s, e = starts[big], ends[big]
        # targets (max_caps × groups), exactly np.geomspace(first, last, max_caps) of each group
        t = np.geomspace(c[s].astype(float), c[e - 1].astype(float), int(max_caps), axis=0).T.ravel()
        grp = np.repeat(np.arange(big.size), int(max_caps))
        s_q, e_q = s[grp], e[grp]
        # values decrease along [s, e): position of the last value >= t (the nearest from above)
        neg = -c.astype(float)
        hi = _last_at_least(neg, s_q, e_q, -t)
        has_hi = hi >= s_q
        has_lo = hi + 1 < e_q
        up = np.where(has_hi, c[np.maximum(hi, 0)] - t, np.inf)
        down = np.where(has_lo, t - c[np.minimum(hi + 1, c.size - 1)], np.inf)
        pick = np.where(up <= down, hi, hi + 1)
        keep[pick] = True
    return g[keep], c[keep]


def _last_at_least(neg: np.ndarray, start: np.ndarray, end: np.ndarray, neg_t: np.ndarray) -> np.ndarray:
    """Per query i, the last index j in [start_i, end_i) with neg[j] <= neg_t[i] (start_i − 1 if none).

    ``neg`` is non-decreasing inside every [start, end) segment; bisection vectorised over queries.
    """
    lo = start - 1  # invariant: neg[lo] <= neg_t (or lo = start − 1)
    hi = end.copy()  # invariant: neg[hi] > neg_t (or hi = end)
    while True:
        act = np.flatnonzero(hi - lo > 1)
        if act.size == 0:
            return lo
        mid = (lo[act] + hi[act]) // 2
        ok = neg[mid] <= neg_t[act]
        lo[act[ok]] = mid[ok]
        hi[act[~ok]] = mid[~ok]


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

    @cached_property
    def cfg_grid(self) -> np.ndarray:
        """Grid of every configuration (built once: the greedy reads it in its inner loops)."""
        return self.gc_grid[self.cfg_gc]

    @cached_property
    def cfg_cap(self) -> np.ndarray:
        """Cap of every configuration (built once: rebuilding it per access cost 43 % of the planner's time)."""
        return self.gc_cap[self.cfg_gc]


@dataclass(frozen=True, eq=False)
class CapTable:
    """The τ-independent part of the configurations: candidate (grid, cap) rows and their R_max(c).

    Built once per occupancy and settings (:func:`cap_table`) and shared by every plan of a frontier.
    """

    gc_grid: np.ndarray
    gc_cap: np.ndarray
    gc_rmax: np.ndarray
    max_caps: int | None
    truncate: bool


def cap_table(occ: Occupancy, *, max_caps: int | None = 4, truncate: bool = True) -> CapTable:
    """Candidate caps per grid (:func:`candidate_caps`) and R_max(c) = Σ_ℓ min(m, c) (or Σ_{m ≤ c} m)."""
    if max_caps is not None:  # "3" or -1 were numpy's type error and "Number of samples" (a fuzz run)
        max_caps = check_positive_int(max_caps, "max_caps")
    _, cols, cnt = pair_arrays(occ)
    gc_grid, gc_cap = candidate_caps(occ, max_caps)
    order = np.lexsort((cnt, cols))
    sc, sm = cols[order], cnt[order]
    start = np.searchsorted(sc, np.arange(occ.n_grids))
    end = np.searchsorted(sc, np.arange(occ.n_grids), side="right")
    csum = np.r_[0, np.cumsum(sm)]
    pos = np.searchsorted(sc * (int(cnt.max()) + 2) + sm, gc_grid * (int(cnt.max()) + 2) + gc_cap, side="right")
    below = csum[pos] - csum[start[gc_grid]]  # sum of counts ≤ c
    n_above = end[gc_grid] - pos
    gc_rmax = below + (n_above * gc_cap if truncate else 0)
    return CapTable(gc_grid=gc_grid, gc_cap=gc_cap, gc_rmax=gc_rmax, max_caps=max_caps, truncate=bool(truncate))


def config_table(occ: Occupancy, criterion: Any, ladder: np.ndarray, *, max_caps: int | None = 4,
                 truncate: bool = True, caps: CapTable | None = None) -> ConfigTable:
    """All (grid, cap, level) configurations with a non-empty feasible interval of R.

    ``caps`` (from :func:`cap_table` with the same ``max_caps`` and ``truncate``) skips the
    τ-independent part, e.g. across the plans of a frontier.
    """
    if caps is None or caps.max_caps != max_caps or caps.truncate != bool(truncate):
        caps = cap_table(occ, max_caps=max_caps, truncate=truncate)
    gc_grid, gc_cap, gc_rmax = caps.gc_grid, caps.gc_cap, caps.gc_rmax
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
    guess = _mean_noise_guess(criterion, gc_cap[e_gc[idx]], bud[idx], criterion.target[g[idx]])
    if guess is not None:  # narrow the bracket; the bisection's answer is the same (monotone test)
        for r in (np.clip(guess, lo + 1, hi), np.clip(guess - 1, lo + 1, hi)):
            inside = (r > lo) & (r < hi)
            k = np.flatnonzero(inside)
            good = ok(r[k], idx[k])
            hi[k[good]] = r[k[good]]
            lo[k[~good]] = r[k[~good]]
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


def _mean_noise_guess(criterion: Any, cap: np.ndarray, budget: np.ndarray, target: np.ndarray) -> np.ndarray | None:
    """R at which the mean's noise bound alone reaches τ (noise error linear in Δ_μ = U·c/R):
    ⌈U·c·t(1, s·b, q)/τ⌉, the exact R_min of the ``noise`` criterion on the mean, a lower bound
    otherwise. Only a starting bracket for the bisection; None for a criterion without these fields."""
    try:
        t1 = criterion.noise.error(1.0, budget * criterion.mean_share, criterion.planning_confidence)
        val = criterion.bound * cap * t1 / target
    except AttributeError:
        return None
    val = np.where(np.isfinite(val), val, 2.0**62)
    return np.ceil(np.minimum(val, 2.0**62)).astype(np.int64)
