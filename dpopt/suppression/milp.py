"""The exact MILP for the least privacy-loss degradation K (seed 002 §V, solved by HiGHS).

Decision: which (user, grid) contributions to suppress (Γ_{g,ℓ} ∈ {0, m_{g,ℓ}}, as CLIP-USER does).
Goal: minimise K = max_ℓ (number of grids ℓ keeps) subject to every grid's worst-case error
f_g(R_g, Γ*_g) ≤ E (seed 002 eq. (11)–(13), ERRATA E1). Then, with K fixed at its optimum, a second
solve picks the plan with the fewest suppressed samples (lexicographic tie-break).

Per grid g with distinct counts v_1 > v_2 > ... > v_k the model uses (models/suppression.md):

* ``x[ℓ,g]`` ∈ {0,1}: ℓ is suppressed in g;
* ``y[g,t]`` ∈ {0,1}, a monotone chain y_1 = 1 ≥ y_2 ≥ ... ≥ y_k (y_{k+1} = 0): "every user with
  count > v_t is suppressed" (so the *assumed* largest retained count is v_t for the last t with
  y_t = 1); link x[ℓ,g] ≥ y[g, t(ℓ)+1];
* ``d[g,t,r]`` ∈ {0,1}: R_g lies in run r = [lo, hi] of the exact feasible set
  F_t = {R ∈ [v_t, R_max(t)] : f_g(R, v_t) ≤ E} (computed exactly, parity cases included: it is a
  union of integer runs, usually one), with Σ_r d[g,t,r] = y_t − y_{t+1};
* ``Σ_r lo·d ≤ R_g = N_g − Σ_ℓ m·x ≤ Σ_r hi·d``;
* ``K ≥ G_ℓ − Σ_g x[ℓ,g]`` for every user.

Exactness: f_g is non-decreasing in Γ* for fixed R, so an assumed Γ* ≥ the true one is safe, and
the true plan is always representable (its own level, its R in a run of that level).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._validation import solver_options
from ..calculus import Split
from ..occupancy import Occupancy
from ..solve import LinearModel, ModelBuilder, SolveResult, Status
from ..solve import solve_bounded as _solve
from ._kernel import (
    ERROR_RTOL,
    baseline_errors,
    check_inputs,
    check_time_limit,
    level_table,
    require_reachable,
)
from .plan import SuppressionPlan, label_pairs, recheck, rechecked_plan
from .progress import Progress
from .runs import feasible_runs

__all__ = [
    "solve_suppression",
    "prune_plan",
    "build_suppression_model",
    "SuppressionModel",
    "feasible_runs",
    "level_table",
    "DECOMPOSE_GRIDS",
]


# --------------------------------------------------------------------------------------------
# the model of one occupancy (one connected component in practice)
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class SuppressionModel:
    """A built suppression MILP and what is needed to read a solution back.

    Attributes
    ----------
    model : LinearModel
        Column blocks ``x`` (one per occupied pair, CSR order of ``occ.matrix``), ``y`` (levels),
        ``d`` (runs), ``K``; row blocks ``chain``, ``link``, ``select``, ``retained_lo``,
        ``retained_hi``, ``occupancy``.
    occ : Occupancy
    pair_rows, pair_cols, pair_counts : ndarray
        The (user index, grid index, count) of each ``x`` column.
    level_grid, level_value, level_first : ndarray
        Grid, value v_t and "is level 1 of its grid" for each ``y`` column.
    run_level, run_lo, run_hi : ndarray
        Level and integer interval of each run of the exact feasible sets F_t.
    run_is_col : ndarray of bool
        Whether the run has its own ``d`` column (levels whose only run is [lo, R_max] use
        y_t − y_{t+1} instead).
    pair_kind : ndarray of int
        0: the pair has an ``x`` column; 1: forced (count above every feasible level of its grid);
        2: aggregated (its user needs no occupancy row and its count exceeds every level of its
        grid that has an inner run, so x = y[next level] is optimal and substituted); 3: never
        suppressed (same conditions, count not above any feasible level).
    pair_level : ndarray of int
        The level whose y forces the pair (−1 if none).
    """

    model: LinearModel
    occ: Occupancy
    pair_rows: np.ndarray
    pair_cols: np.ndarray
    pair_counts: np.ndarray
    level_grid: np.ndarray
    level_value: np.ndarray
    level_first: np.ndarray
    run_level: np.ndarray
    run_lo: np.ndarray
    run_hi: np.ndarray
    run_is_col: np.ndarray
    pair_kind: np.ndarray
    pair_level: np.ndarray

    def suppressed_mask(self, x: np.ndarray) -> np.ndarray:
        """Boolean mask over all pairs (CSR order) from a solution vector."""
        cb = self.model.col_blocks
        mask = self.pair_kind == 1  # forced
        xc = np.flatnonzero(self.pair_kind == 0)
        mask[xc] = np.asarray(x[cb["x"]]) > 0.5
        agg = np.flatnonzero(self.pair_kind == 2)
        yv = np.asarray(x[cb["y"]]) > 0.5
        mask[agg] = yv[self.pair_level[agg]]
        return mask

    def point(self, mask: np.ndarray) -> np.ndarray | None:
        """The model point of a suppression mask (``None`` if the plan violates E): a warm start.

        Aggregated pairs (kind 2) are set to what their level implies (suppressed iff the count
        exceeds Γ*); that never raises Γ* and, in grids with one run per level, keeps R feasible.
        """
        occ = self.occ
        G = occ.n_grids
        keep = ~mask
        gmax = np.zeros(G, dtype=np.int64)
        np.maximum.at(gmax, self.pair_cols[keep], self.pair_counts[keep])
        y = (self.level_value >= gmax[self.level_grid]).astype(float)
        mask = mask.copy()
        agg = self.pair_kind == 2
        mask[agg] = self.pair_counts[agg] > gmax[self.pair_cols[agg]]
        mask[self.pair_kind == 3] = False
        keep = ~mask
        R = np.bincount(self.pair_cols, weights=self.pair_counts * keep, minlength=G).astype(np.int64)
        star = np.flatnonzero(self.level_value == gmax[self.level_grid])
        if star.size != G or np.any(mask[self.pair_kind == 1] == 0):
            return None
        d = np.zeros(self.run_level.size)
        Rg = R[self.level_grid[star]]
        for lev, r in zip(star.tolist(), Rg.tolist()):
            cand = np.flatnonzero((self.run_level == lev) & (self.run_lo <= r) & (self.run_hi >= r))
            if cand.size != 1:
                return None
            d[cand[0]] = 1.0
        occupancy = np.bincount(self.pair_rows, weights=keep, minlength=occ.n_users)
        out = np.zeros(self.model.num_cols)
        cb = self.model.col_blocks
        out[cb["x"]] = mask[self.pair_kind == 0].astype(float)
        out[cb["y"]] = y
        out[cb["d"]] = d[self.run_is_col]
        out[cb["K"]] = float(max(1.0, occupancy.max()))
        return out


def _scaled(model: LinearModel, cost_scale: float) -> LinearModel:
    """Divide each retained-total row by its largest coefficient and the objective by ``cost_scale``.

    The rows hold sample counts up to ~10^5 next to 0/1 chain and link rows; equilibrating them (and
    the sample-count objective of the tie-break stage) makes HiGHS's LPs markedly faster. Row
    activities stay integral multiples of 1/scale, and every plan is re-checked from scratch.
    """
    import dataclasses

    rs = np.ones(model.num_rows)
    A = model.A.tocsr()
    for blk in ("retained_lo", "retained_hi"):
        sl = model.row_blocks[blk]
        if sl.stop > sl.start:
            rowmax = np.asarray(abs(A[sl]).max(axis=1).todense()).ravel()
            rs[sl] = 1.0 / np.maximum(rowmax, 1.0)
    A2 = sp.csc_array(sp.diags_array(rs) @ model.A)
    return dataclasses.replace(
        model,
        A=A2,
        row_lower=model.row_lower * rs,
        row_upper=model.row_upper * rs,
        c=model.c / cost_scale,
        offset=model.offset / cost_scale,
    )


def build_suppression_model(
    occ: Any,
    bound: float,
    epsilon: float,
    *,
    error_bound: float | None = None,
    split: Split = "equal",
    objective: str = "degradation",
    max_degradation: int | None = None,
    row_threshold: int | None = None,
) -> SuppressionModel:
    """Build the exact suppression MILP (see module docstring and models/suppression.md).

    Parameters
    ----------
    occ : Occupancy
    bound, epsilon : float
        U and ε.
    error_bound : float, optional
        E (default max_g E_g of BASELINE). ``inf`` drops the error rows (R ≥ Γ* only).
    split : {"equal", "optimal"}
    objective : {"degradation", "samples", "none"}
        Minimise K; or the number of suppressed samples (the tie-break stage); or nothing (a
        feasibility problem, used by the frontier).
    max_degradation : int, optional
        Upper bound on K (fixes K from above in the tie-break stage and the frontier).
    row_threshold : int, optional
        Users with G_ℓ ≤ this get no occupancy row (valid when K ≥ row_threshold is known, or
        when K ≤ max_degradation = row_threshold is imposed). Default 1.

    Returns
    -------
    SuppressionModel
    """
    occ, U, eps, E, split = check_inputs(occ, bound, epsilon, error_bound, split, finite=False)
    if E is None:
        E = float(np.max(baseline_errors(occ, U, eps, split)))
    if objective not in ("degradation", "samples", "none"):
        from .._validation import DpoptInputError

        raise DpoptInputError(
            f"`objective` must be one of 'degradation', 'samples', 'none'; got {objective!r}"
        )
    md = _model_data(occ, U, eps, E, split, row_threshold)
    b = ModelBuilder(name="suppression")
    cc = _add_columns(b, md, objective, max_degradation)
    _add_chain_and_link_rows(b, md, cc)
    _add_select_rows(b, md, cc)
    _add_retained_rows(b, md, cc)
    _add_occupancy_rows(b, md, cc)
    return _assembled(md, _scaled(b.build(), float(md.cnt.max()) if objective == "samples" else 1.0))


@dataclass(frozen=True, eq=False)
class _Levels:
    """The feasible levels of every grid (``y`` columns) and the runs of their exact feasible sets.

    Attributes
    ----------
    grid, value, cap : ndarray of int
        Grid, value v_t and largest retained total R_max(t) of each level whose F_t is not empty
        (grid order, values decreasing within a grid).
    first, last : ndarray of bool
        Whether the level is the first (largest value) or last of its grid.
    run_level, run_lo, run_hi : ndarray of int
        Level and integer interval of each run of the sets F_t.
    simple_run : ndarray of bool
        Whether the run is its level's only run and ends at R_max (then d = y_t − y_{t+1}).
    simple : ndarray of bool
        Whether the level's only run is simple.
    """

    grid: np.ndarray
    value: np.ndarray
    cap: np.ndarray
    first: np.ndarray
    last: np.ndarray
    run_level: np.ndarray
    run_lo: np.ndarray
    run_hi: np.ndarray
    simple_run: np.ndarray
    simple: np.ndarray


def _feasible_levels(occ: Occupancy, N: np.ndarray, U: float, eps: float, E: float, split: str) -> _Levels:
    """The levels of every grid whose exact feasible set F_t is not empty, and the runs of those sets."""
    lev_grid, lev_val, lev_cap = level_table(occ)
    nlev = lev_grid.size
    run_level, run_lo, run_hi = feasible_runs(N[lev_grid], lev_val, lev_cap, U, eps, E, split)
    # keep only feasible levels (a plan whose Γ* sits at a level with empty F_t violates E)
    feas = np.zeros(nlev, dtype=bool)
    feas[run_level] = True
    keep_lev = np.flatnonzero(feas)
    new_id = -np.ones(nlev, dtype=np.int64)
    new_id[keep_lev] = np.arange(keep_lev.size)
    f_grid, f_val, f_cap = lev_grid[keep_lev], lev_val[keep_lev], lev_cap[keep_lev]
    nf = keep_lev.size
    f_first = np.ones(nf, dtype=bool)
    f_first[1:] = f_grid[1:] != f_grid[:-1]
    f_last = np.ones(nf, dtype=bool)
    f_last[:-1] = f_grid[1:] != f_grid[:-1]
    run_level = new_id[run_level]
    # a level is "simple" when its only run is [lo, cap]: then d = y_t − y_{t+1} is substituted
    runs_per_level = np.bincount(run_level, minlength=nf)
    simple_run = (runs_per_level[run_level] == 1) & (run_hi == f_cap[run_level])
    simple = np.zeros(nf, dtype=bool)
    simple[run_level[simple_run]] = True
    return _Levels(grid=f_grid, value=f_val, cap=f_cap, first=f_first, last=f_last, run_level=run_level,
                   run_lo=run_lo, run_hi=run_hi, simple_run=simple_run, simple=simple)


def _link_pairs(
    cols: np.ndarray, cnt: np.ndarray, lv: _Levels, n_grids: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Where each pair (grid ``cols``, count ``cnt``) sits among the feasible levels of its grid.

    Returns
    -------
    (next_level, forced, linked, grid_levels) : arrays
        Per pair: the first feasible level of its grid with value < count (must suppress when that
        level's y is 1); whether it is forced (count above every feasible level of its grid); whether
        it is linked (x ≥ y of that level). Per grid: the number of feasible levels.
    """
    nf = lv.grid.size
    grid_first = -np.ones(n_grids, dtype=np.int64)
    grid_first[lv.grid[lv.first][::-1]] = np.flatnonzero(lv.first)[::-1]
    grid_nf = np.bincount(lv.grid, minlength=n_grids)
    # within grid: f_val decreasing; position of first level with value < count
    M = int(cnt.max()) + 2
    key_lev = lv.grid * M - lv.value  # increasing along the level array
    key_pair = cols * M - cnt + 1  # first level of the pair's grid with value < count
    nxt_lev = np.searchsorted(key_lev, key_pair)
    in_grid = nxt_lev < nf
    if nf:
        in_grid &= lv.grid[np.minimum(nxt_lev, nf - 1)] == cols
        top_val = np.where(grid_nf[cols] > 0, lv.value[np.maximum(grid_first[cols], 0)], 0)
        forced = (grid_nf[cols] > 0) & (cnt > top_val)
    else:
        forced = np.zeros(cols.size, dtype=bool)
    return nxt_lev, forced, in_grid & ~forced, grid_nf


@dataclass(frozen=True, eq=False)
class _ModelData:
    """What :func:`build_suppression_model` derives from the occupancy before adding columns and rows.

    Attributes
    ----------
    occ : Occupancy
    rows, cols, cnt : ndarray of int
        User, grid and count of each occupied pair (CSR order of ``occ.matrix``).
    levels : _Levels
    next_level, linked, kind, pair_level : ndarray
        Per pair: see :func:`_link_pairs` and :class:`SuppressionModel`.
    xc : ndarray of int
        The pairs with an ``x`` column (kind 0).
    grid_levels : ndarray of int
        Number of feasible levels of each grid.
    need_hi : ndarray of bool
        Grids that need the upper retained row (some level has a run below R_max(t)).
    row_user : ndarray of bool
        Users with an occupancy row (G_ℓ above the row threshold).
    forced_samples, forced_pairs : ndarray
        Samples of forced pairs per grid, forced pairs per user.
    agg_weight : ndarray
        Per level: the samples of the aggregated pairs (kind 2) its y stands for.
    """

    occ: Occupancy
    rows: np.ndarray
    cols: np.ndarray
    cnt: np.ndarray
    levels: _Levels
    next_level: np.ndarray
    linked: np.ndarray
    kind: np.ndarray
    pair_level: np.ndarray
    xc: np.ndarray
    grid_levels: np.ndarray
    need_hi: np.ndarray
    row_user: np.ndarray
    forced_samples: np.ndarray
    forced_pairs: np.ndarray
    agg_weight: np.ndarray


def _model_data(
    occ: Occupancy, U: float, eps: float, E: float, split: str, row_threshold: int | None
) -> _ModelData:
    """The levels, runs and pair kinds of the model (see :class:`SuppressionModel` and models/suppression.md §4)."""
    csr = occ.matrix
    rows = np.repeat(np.arange(occ.n_users, dtype=np.int64), np.diff(csr.indptr))
    cols = csr.indices.astype(np.int64)
    cnt = csr.data.astype(np.int64)
    lv = _feasible_levels(occ, occ.grid_totals.astype(np.int64), U, eps, E, split)
    nxt_lev, forced, linked, grid_nf = _link_pairs(cols, cnt, lv, occ.n_grids)
    need_hi = np.zeros(occ.n_grids, dtype=bool)
    need_hi[lv.grid[lv.run_level[~lv.simple_run]]] = True
    thr = 1 if row_threshold is None else int(row_threshold)
    row_user = occ.user_occupancy > thr
    kind = np.zeros(cols.size, dtype=np.int64)
    # a pair can be aggregated when no level that needs an upper retained row can leave it
    # unforced: its count exceeds every such "complex" level of its grid (see models/suppression.md)
    cmax = np.zeros(occ.n_grids, dtype=np.int64)
    np.maximum.at(cmax, lv.grid[~lv.simple], lv.value[~lv.simple])
    free = ~row_user[rows] & ~forced & (cnt > cmax[cols])
    kind[free & linked] = 2
    kind[free & ~linked] = 3
    kind[forced] = 1
    agg = np.flatnonzero(kind == 2)
    return _ModelData(
        occ=occ, rows=rows, cols=cols, cnt=cnt, levels=lv, next_level=nxt_lev, linked=linked, kind=kind,
        pair_level=np.where(linked, nxt_lev, -1), xc=np.flatnonzero(kind == 0), grid_levels=grid_nf,
        need_hi=need_hi, row_user=row_user,
        forced_samples=np.bincount(cols[forced], weights=cnt[forced], minlength=occ.n_grids),
        forced_pairs=np.bincount(rows[forced], minlength=occ.n_users),
        agg_weight=np.bincount(nxt_lev[agg], weights=cnt[agg], minlength=lv.grid.size) if lv.grid.size
        else np.zeros(0),
    )


def _assembled(md: _ModelData, model: LinearModel) -> SuppressionModel:
    """The :class:`SuppressionModel` of a built model and the data it was built from."""
    lv = md.levels
    return SuppressionModel(
        model=model,
        occ=md.occ,
        pair_rows=md.rows,
        pair_cols=md.cols,
        pair_counts=md.cnt,
        level_grid=lv.grid,
        level_value=lv.value,
        level_first=lv.first,
        run_level=lv.run_level,
        run_lo=lv.run_lo,
        run_hi=lv.run_hi,
        run_is_col=~lv.simple_run,
        pair_kind=md.kind,
        pair_level=md.pair_level,
    )


@dataclass(frozen=True, eq=False)
class _Columns:
    """Column indices of the model's blocks ``x``, ``y``, ``d``, ``K``.

    Attributes
    ----------
    x, y, d, K : ndarray of int
        The columns of each block (``d``: one per run in ``runs``).
    xcol : ndarray of int
        The ``x`` column of each pair (−1 if it has none).
    runs : ndarray of int
        The runs with their own ``d`` column (those that are not simple).
    """

    x: np.ndarray
    y: np.ndarray
    d: np.ndarray
    K: np.ndarray
    xcol: np.ndarray
    runs: np.ndarray


def _add_columns(b: ModelBuilder, md: _ModelData, objective: str, max_degradation: int | None) -> _Columns:
    """The columns ``x``, ``y``, ``d``, ``K`` with the costs of ``objective``."""
    lv, xc = md.levels, md.xc
    samples = objective == "samples"
    x = b.add_cols("x", xc.size, lower=0, upper=1, integer=True,
                   cost=md.cnt[xc].astype(float) if samples else 0.0)
    y = b.add_cols("y", lv.grid.size, lower=lv.first.astype(float), upper=1, integer=True,
                   cost=md.agg_weight if samples else 0.0)
    if samples:
        b.offset = float(md.forced_samples.sum())
    cr = np.flatnonzero(~lv.simple_run)
    d = b.add_cols("d", cr.size, lower=0, upper=1, integer=True)
    kmax = int(md.occ.degradation) if max_degradation is None else int(max_degradation)
    K = b.add_cols("K", 1, lower=1, upper=max(1, kmax), integer=True,
                   cost=1.0 if objective == "degradation" else 0.0)
    xcol = -np.ones(md.cnt.size, dtype=np.int64)
    xcol[xc] = x
    return _Columns(x=x, y=y, d=d, K=K, xcol=xcol, runs=cr)


def _add_chain_and_link_rows(b: ModelBuilder, md: _ModelData, cc: _Columns) -> None:
    """Rows ``chain`` (y_t ≤ y_{t−1}), ``link`` (x ≥ y of the pair's next level) and ``no_level``.

    ``no_level`` is one infeasible row, added only when some grid has no feasible level.
    """
    y = cc.y
    ch = np.flatnonzero(~md.levels.first)
    nch = ch.size
    b.add_rows("chain", rows=np.concatenate([np.arange(nch), np.arange(nch)]),
               cols=np.concatenate([y[ch], y[ch - 1]]),
               vals=np.concatenate([np.ones(nch), -np.ones(nch)]),
               lower=-np.inf, upper=0.0, count=nch)
    # link x[l,g] >= y[first feasible level below the count]
    lk = np.flatnonzero(md.linked & (md.kind == 0))
    nlk = lk.size
    b.add_rows("link", rows=np.concatenate([np.arange(nlk), np.arange(nlk)]),
               cols=np.concatenate([cc.xcol[lk], y[md.next_level[lk]]]),
               vals=np.concatenate([np.ones(nlk), -np.ones(nlk)]),
               lower=0.0, upper=np.inf, count=nlk)
    # every grid needs a feasible level
    if np.any(md.grid_levels == 0):
        b.add_rows("no_level", rows=np.zeros(1, np.int64), cols=cc.K, vals=0.0, lower=1.0, upper=1.0,
                   count=1)


def _add_select_rows(b: ModelBuilder, md: _ModelData, cc: _Columns) -> None:
    """Rows ``select``: Σ_r d[t,r] − y_t + y_{t+1} = 0 for the levels with their own run columns."""
    lv, y, cr = md.levels, cc.y, cc.runs
    cl = np.flatnonzero(~lv.simple)
    remap_l = -np.ones(lv.grid.size, dtype=np.int64)
    remap_l[cl] = np.arange(cl.size)
    cl_nl = cl[~lv.last[cl]]
    b.add_rows("select",
               rows=np.concatenate([remap_l[lv.run_level[cr]], remap_l[cl], remap_l[cl_nl]]),
               cols=np.concatenate([cc.d, y[cl], y[cl_nl + 1]]),
               vals=np.concatenate([np.ones(cr.size), -np.ones(cl.size), np.ones(cl_nl.size)]),
               lower=0.0, upper=0.0, count=cl.size)


def _level_weights(md: _ModelData, cc: _Columns) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The level weights w_t = y_t − y_{t+1} (simple levels) or d (runs), as COO pieces.

    Returns
    -------
    (cols, grid, lo, hi) : arrays
        Column, grid and the coefficients of the lower and upper retained rows of each piece.
    """
    lv, y, cr = md.levels, cc.y, cc.runs
    sl = np.flatnonzero(lv.simple)
    sl_lo = np.zeros(lv.grid.size)
    sl_lo[lv.run_level[lv.simple_run]] = lv.run_lo[lv.simple_run]
    sl_nl = sl[~lv.last[sl]]
    w_cols = np.concatenate([y[sl], y[sl_nl + 1], cc.d])
    w_grid = np.concatenate([lv.grid[sl], lv.grid[sl_nl], lv.grid[lv.run_level[cr]]])
    w_lo = np.concatenate([sl_lo[sl], -sl_lo[sl_nl], lv.run_lo[cr].astype(float)])
    w_hi = np.concatenate([lv.cap[sl].astype(float), -lv.cap[sl_nl].astype(float),
                           lv.run_hi[cr].astype(float)])
    return w_cols, w_grid, w_lo, w_hi


def _add_retained_rows(b: ModelBuilder, md: _ModelData, cc: _Columns) -> None:
    """Rows ``retained_lo`` and ``retained_hi``: the run bounds on each grid's retained total R."""
    occ, cols, cnt, xc, agg_w, f_grid = md.occ, md.cols, md.cnt, md.xc, md.agg_weight, md.levels.grid
    w_cols, w_grid, w_lo, w_hi = _level_weights(md, cc)
    Nres = occ.grid_totals.astype(np.int64) - md.forced_samples
    # retained total R = N - suppressed: Σ m x + Σ agg·y + Σ lo w <= N - forced
    b.add_rows("retained_lo",
               rows=np.concatenate([cols[xc], f_grid, w_grid]),
               cols=np.concatenate([cc.x, cc.y, w_cols]),
               vals=np.concatenate([cnt[xc].astype(float), agg_w, w_lo]),
               lower=-np.inf, upper=Nres.astype(float), count=occ.n_grids)
    # ... and Σ m x + Σ hi w >= N - forced, where some level has an inner run
    need_hi = md.need_hi
    gh = np.flatnonzero(need_hi)
    remap = -np.ones(occ.n_grids, dtype=np.int64)
    remap[gh] = np.arange(gh.size)
    px = xc[need_hi[cols[xc]]]
    pw = np.flatnonzero(need_hi[w_grid])
    py = np.flatnonzero(need_hi[f_grid] & (agg_w > 0))
    b.add_rows("retained_hi",
               rows=np.concatenate([remap[cols[px]], remap[f_grid[py]], remap[w_grid[pw]]]),
               cols=np.concatenate([cc.xcol[px], cc.y[py], w_cols[pw]]),
               vals=np.concatenate([cnt[px].astype(float), agg_w[py], w_hi[pw]]),
               lower=Nres[gh].astype(float), upper=np.inf, count=gh.size)


def _add_occupancy_rows(b: ModelBuilder, md: _ModelData, cc: _Columns) -> None:
    """Rows ``occupancy``: Σ_g x[ℓ,g] + K ≥ G_ℓ − forced, for users with G_ℓ above the row threshold."""
    occ, xc = md.occ, md.xc
    us = np.flatnonzero(md.row_user)
    remap_u = -np.ones(occ.n_users, dtype=np.int64)
    remap_u[us] = np.arange(us.size)
    pu = xc[md.row_user[md.rows[xc]]]
    b.add_rows("occupancy", rows=np.concatenate([remap_u[md.rows[pu]], np.arange(us.size)]),
               cols=np.concatenate([cc.xcol[pu], np.repeat(cc.K, us.size)]),
               vals=np.ones(pu.size + us.size),
               lower=(occ.user_occupancy[us] - md.forced_pairs[us]).astype(float), upper=np.inf,
               count=us.size)


# --------------------------------------------------------------------------------------------
# solving, per connected component, with the lexicographic tie-break
# --------------------------------------------------------------------------------------------
def _components(occ: Occupancy) -> list[tuple[np.ndarray, np.ndarray]]:
    """(user indices, grid indices) of each connected component of the user–grid graph (networkx)."""
    import networkx as nx

    L = occ.n_users
    coo = occ.matrix.tocoo()
    graph = nx.Graph()
    graph.add_nodes_from(range(L + occ.n_grids))
    graph.add_edges_from(zip(coo.row.tolist(), (coo.col + L).tolist()))
    out = []
    for comp in nx.connected_components(graph):
        nodes = np.fromiter(comp, dtype=np.int64)
        out.append((np.sort(nodes[nodes < L]), np.sort(nodes[nodes >= L] - L)))
    out.sort(key=lambda c: (-c[1].size, int(c[1][0])))
    return out


def _sub_occupancy(occ: Occupancy, users: np.ndarray, grids: np.ndarray) -> Occupancy:
    mat = sp.csr_array(occ.matrix[users][:, grids])
    mat.sort_indices()
    return Occupancy(mat, occ.users[users], occ.grids[grids])


def _remaining(deadline: float | None) -> float | None:
    if deadline is None:
        return None
    return max(0.0, deadline - time.perf_counter())


def prune_plan(
    sm: SuppressionModel, mask: np.ndarray, K: int, U: float, eps: float, E: float, split: str
) -> np.ndarray:
    """Un-suppress, largest count first, every pair whose return keeps K and its grid's error ≤ E.

    A cheap local improvement for the tie-break stage (fewer suppressed samples, same K); each
    acceptance updates R_g, Γ*_g and G_ℓ. Two passes (an accepted return raises R, which can make
    another return feasible).
    """
    from ._kernel import error_scalar

    mask = mask.copy()
    rows, cols, cnt = sm.pair_rows, sm.pair_cols, sm.pair_counts
    occ = sm.occ
    keep = ~mask
    N = occ.grid_totals.tolist()
    R = np.bincount(cols, weights=cnt * keep, minlength=occ.n_grids).astype(np.int64).tolist()
    gmax_a = np.zeros(occ.n_grids, dtype=np.int64)
    np.maximum.at(gmax_a, cols[keep], cnt[keep])
    gmax = gmax_a.tolist()
    occu = np.bincount(rows, weights=keep, minlength=occ.n_users).astype(np.int64).tolist()
    lim = E * (1.0 + ERROR_RTOL)
    opt = split == "optimal"
    cand = np.flatnonzero(mask)
    cand = cand[np.argsort(-cnt[cand], kind="stable")].tolist()
    rl, cl, nl = rows.tolist(), cols.tolist(), cnt.tolist()
    for _ in range(2):
        changed = False
        for k in cand:
            if not mask[k]:
                continue
            u, g, c = rl[k], cl[k], nl[k]
            if occu[u] + 1 > K:
                continue
            if error_scalar(N[g], R[g] + c, max(gmax[g], c), U, eps, opt) <= lim:
                mask[k] = False
                R[g] += c
                gmax[g] = max(gmax[g], c)
                occu[u] += 1
                changed = True
        if not changed:
            break
    return mask


def _mask_of(sm: SuppressionModel, suppressed: frozenset) -> np.ndarray:
    users_l = sm.occ.users.tolist()
    grids_l = sm.occ.grids.tolist()
    keys = [(users_l[r], grids_l[c]) for r, c in zip(sm.pair_rows.tolist(), sm.pair_cols.tolist())]
    return np.fromiter((k in suppressed for k in keys), dtype=bool, count=len(keys))


@dataclass
class _CompResult:
    status: Status
    K: int
    bound: float
    mask: np.ndarray | None
    time: float
    lagrangian: float = 0.0
    warm: np.ndarray | None = None
    raw: str = ""


#: components with at least this many grids use the decomposition under ``"auto"`` (the paper's
#: synthetic family has 12 grids and ~8 200 pairs, closed by the compact MILP in ~1.5 s; a 3-day
#: Austin window has 1 392 grids and 11 638 pairs: compact MILP 10.7 s, decomposition 1.4 s)
DECOMPOSE_GRIDS = 200
#: the tie-break stage of a component gets the time its main solve took, and at least this
TIE_BREAK_MIN_SECONDS = 0.1


def _solve_decomposed(
    sub: Occupancy, U: float, eps: float, E: float, split: str, deadline: float | None,
    opts: Mapping[str, Any], prog: Progress, *, warm: np.ndarray | None = None,
    pairs: _DecomposedModel | None = None,
) -> tuple[SuppressionModel | None, _CompResult, np.ndarray]:
    """One component by :mod:`.decompose`; the compact MILP closes what is left, if time remains.
    ``warm``: a plan meeting E on this component (the caller's, or CLIP-USER's; suppressed pairs in
    CSR order), kept where the decomposition's own plan is worse — so the result never loses to the
    greedy heuristic (a fuzz run: 6,000 users × 300 grids, time_limit 0.5 s, K = 3 against CLIP-USER's 2).
    ``pairs``: the component's pair arrays, if the caller built them already."""
    import dataclasses

    # looked up at call time (tests substitute them); neither module imports this one
    from .decompose import local_search, pattern_bound
    from .lagrange import PatternOracle

    t0 = time.perf_counter()
    oracle = PatternOracle(sub, U, eps, E, split)
    dec = pattern_bound(oracle, deadline=deadline, progress=prog, fallback=warm is not None)
    if dec.bound is None:  # the deadline passed inside the first oracle call: the warm plan, K ≥ 1 proven
        K = max(1, int(np.bincount(oracle.pair_user[~warm], minlength=sub.n_users).max()))
        sm = pairs if pairs is not None else _DecomposedModel.of(sub)
        status = Status.OPTIMAL if K <= 1 else Status.TIME_LIMIT
        return sm, _CompResult(status, K, 1.0, warm, time.perf_counter() - t0, 1.0), np.zeros(sub.n_users)
    lb = dec.bound.value
    keep = dec.keep
    if dec.K > lb:
        keep = local_search(oracle, keep, lb, deadline=deadline, progress=prog)
    K = max(1, int(np.bincount(oracle.pair_user[keep], minlength=sub.n_users).max()))
    mask = ~keep
    if warm is not None:
        K_warm = max(1, int(np.bincount(oracle.pair_user[~warm], minlength=sub.n_users).max()))
        if K_warm < K:
            mask, K = warm, K_warm
    status = Status.OPTIMAL if K <= lb else Status.TIME_LIMIT
    bound = float(min(lb, K))
    sm = None
    left = _remaining(deadline)
    if K > lb and (left is None or left > 1.0):
        sm = build_suppression_model(sub, U, eps, error_bound=E, split=split)
        kcol = sm.model.col_blocks["K"].start
        lower = sm.model.col_lower.copy()
        lower[kcol] = max(lower[kcol], float(lb))
        sm = dataclasses.replace(sm, model=dataclasses.replace(sm.model, col_lower=lower))
        res = _solve_stage(sm, sm.point(mask), left, opts)
        prog.update("milp", K, max(lb, res.bound) if math.isfinite(res.bound) else lb)
        if res.has_solution:
            m2 = sm.suppressed_mask(res.x)
            K2 = max(1, int(np.bincount(sm.pair_rows[~m2], minlength=sub.n_users).max()))
            if K2 < K:
                mask, K = m2, K2
        if math.isfinite(res.bound):
            bound = float(min(K, max(lb, math.ceil(res.bound - 1e-6))))
        status = Status.OPTIMAL if (res.status is Status.OPTIMAL or bound >= K) else res.status
    if sm is None:
        sm = pairs if pairs is not None else _DecomposedModel.of(sub)
    if status is Status.OPTIMAL:
        bound = float(K)
    return sm, _CompResult(status, K, bound, mask, time.perf_counter() - t0, float(lb)), dec.bound.weights


@dataclass(frozen=True, eq=False)
class _DecomposedModel:
    """The pair arrays (CSR order) of a component solved without building the compact model."""

    occ: Occupancy
    pair_rows: np.ndarray
    pair_cols: np.ndarray

    @classmethod
    def of(cls, occ: Occupancy) -> _DecomposedModel:
        rows = np.repeat(np.arange(occ.n_users, dtype=np.int64), np.diff(occ.matrix.indptr))
        return cls(occ, rows, occ.matrix.indices.astype(np.int64))


def _solve_stage(
    sm: SuppressionModel,
    warm: np.ndarray | None,
    time_limit: float | None,
    options: Mapping[str, Any] | None,
) -> SolveResult:
    res = _solve(sm.model, time_limit=time_limit, options=options, warm_start=warm)
    if warm is not None and res.has_solution:
        # HiGHS 1.16 can report the optimum of a warm-started MIP (solved in presolve) while
        # returning the warm start as its point (seen on a 3-day Austin window: objective 67,
        # point of value 73). Trust only a point whose own objective matches; else solve cold.
        own = sm.model.objective_value(res.x)
        if abs(own - res.objective) > 1e-6 * max(1.0, abs(res.objective)):
            left = None if time_limit is None else max(0.0, time_limit - res.solve_time)
            res = _solve(sm.model, time_limit=left, options=options)
    return res


def _tie_break_limit(main_time: float, cap: float | None, deadline: float | None) -> float:
    """Seconds for a component's tie-break stage: never more than its main solve took (at least
    :data:`TIE_BREAK_MIN_SECONDS`), nor ``cap``, nor the time left."""
    limit = max(main_time, TIE_BREAK_MIN_SECONDS)
    if cap is not None:
        limit = min(limit, cap)
    left = _remaining(deadline)
    return limit if left is None else min(limit, left)


def solve_suppression(
    occ: Any,
    bound: float,
    epsilon: float,
    *,
    error_bound: float | None = None,
    time_limit: float | None = None,
    options: Mapping[str, Any] | None = None,
    split: Split = "equal",
    tie_break: bool = True,
    tie_break_time_limit: float | None = 10.0,
    warm_start: SuppressionPlan | None = None,
    strategy: str = "auto",
    progress: bool = False,
) -> SuppressionPlan:
    """Least privacy-loss degradation K with every grid's worst-case error ≤ E (exact MILP, HiGHS).

    Parameters
    ----------
    occ : Occupancy
        The public user × grid count array (seed 002 §II-C).
    bound, epsilon : float
        U and the per-grid budget ε.
    error_bound : float, optional
        E; default max_g E_g of BASELINE, as in the paper (Algorithm 1, line 3).
    time_limit : float, optional
        Total seconds for all solves, a hard bound (:func:`dpopt.solve.solve_bounded`). A limited solve
        returns its incumbent (or the warm start) with status ``Status.TIME_LIMIT``, the proven lower
        bound on K and the gap. ``None``: no limit.
    options : mapping, optional
        HiGHS options (e.g. ``{"mip_rel_gap": 0}``), checked by the back-end.
    split : {"equal", "optimal"}
        Budget split between mean and variance (the paper: equal).
    tie_break : bool
        After K is optimal, minimise the number of suppressed samples among plans with that K.
    tie_break_time_limit : float or None
        Cap on the seconds of each component's tie-break stage (``None``: no cap); ``info["tie_break"]``
        and ``info["tie_break_gap"]`` report its status and gap.
    warm_start : SuppressionPlan, optional
        A plan to start from (default: CLIP-USER's plan; ``info["greedy_degradation"]``).
    strategy : {"auto", "milp", "decomposition"}
        The compact MILP per component, or :mod:`.decompose`; ``"auto"``: the decomposition for
        components with at least :data:`DECOMPOSE_GRIDS` grids.
    progress : bool
        Show a tqdm bar (incumbent K, bound, gap, elapsed); the events are kept in ``info["log"]``.

    Returns
    -------
    SuppressionPlan
        ``method="milp"``, re-checked from scratch (a failing plan raises ``RuntimeError``); with
        the decomposition ``info["lagrangian_bound"]`` and ``info["lower_bound_weights"]`` (absent if
        the time limit passed in the first oracle call: models/suppression.md §13).

    See models/suppression.md §4 (tie-break, components, statuses) and §13 (strategy, certificate).
    """
    run = _SolveRun.checked(occ, bound, epsilon, error_bound=error_bound, time_limit=time_limit,
                            options=options, split=split, tie_break=tie_break,
                            tie_break_time_limit=tie_break_time_limit, warm_start=warm_start,
                            strategy=strategy, progress=progress)
    return _solve_run(run)


@dataclass(frozen=True, eq=False)
class _SolveRun:
    """The checked inputs and settings of one :func:`solve_suppression` call, shared by its stages.

    Attributes
    ----------
    occ : Occupancy
    U, eps, E : float
    split, strategy : str
    base : ndarray
        BASELINE's grid errors.
    opts : dict
        HiGHS options (exact gaps unless overridden).
    tie_break : bool
    tie_break_time_limit : float or None
    warm_start : SuppressionPlan or None
    t0 : float
        Start (``time.perf_counter``).
    deadline : float or None
        End of the time budget.
    prog : Progress
    greedy_K : list of int
        K of the warm starts (the given plan, or CLIP-USER's plan per component).
    """

    occ: Occupancy
    U: float
    eps: float
    E: float
    split: str
    strategy: str
    base: np.ndarray
    opts: dict[str, Any]
    tie_break: bool
    tie_break_time_limit: float | None
    warm_start: SuppressionPlan | None
    t0: float
    deadline: float | None
    prog: Progress
    greedy_K: list[int]

    @classmethod
    def checked(
        cls, occ: Any, bound: float, epsilon: float, *, error_bound: float | None, time_limit: float | None,
        options: Mapping[str, Any] | None, split: Split, tie_break: bool, tie_break_time_limit: float | None,
        warm_start: SuppressionPlan | None, strategy: str, progress: bool,
    ) -> _SolveRun:
        """Check the arguments of :func:`solve_suppression` and start the clock."""
        from .._validation import DpoptInputError, check_choice

        strategy = check_choice(strategy, "strategy", ("auto", "milp", "decomposition"))
        occ, U, eps, E, split = check_inputs(occ, bound, epsilon, error_bound, split)
        if E is not None:
            require_reachable(occ, U, eps, E, split)
        time_limit = check_time_limit(time_limit)
        tie_break_time_limit = check_time_limit(tie_break_time_limit, "tie_break_time_limit")
        if warm_start is not None and not isinstance(warm_start, SuppressionPlan):
            raise DpoptInputError(f"`warm_start` must be a SuppressionPlan (e.g. clip_user's) or None; got "
                                  f"{type(warm_start).__name__}")
        t0 = time.perf_counter()
        base = baseline_errors(occ, U, eps, split)
        return cls(
            occ=occ, U=U, eps=eps, E=float(np.max(base)) if E is None else E, split=split, strategy=strategy,
            base=base, opts={"mip_rel_gap": 0.0, "mip_abs_gap": 0.0, **solver_options(options)},
            tie_break=tie_break, tie_break_time_limit=tie_break_time_limit, warm_start=warm_start, t0=t0,
            deadline=None if time_limit is None else t0 + time_limit,
            prog=Progress(progress, desc="suppress", total=time_limit),
            greedy_K=[] if warm_start is None else [warm_start.degradation],
        )

    def meets_E(self, grids: np.ndarray) -> bool:
        """Whether BASELINE's errors of ``grids`` all meet E."""
        return bool(np.all(self.base[grids] <= self.E * (1 + ERROR_RTOL)))


#: a component's solve: its model (``None``: nothing to solve), its occupancy and its result
_Solved = tuple[SuppressionModel | _DecomposedModel | None, Occupancy, _CompResult]


def _solve_run(run: _SolveRun) -> SuppressionPlan:
    """Both stages of :func:`solve_suppression` on every component, and the re-checked plan."""
    comps = _components(run.occ)
    results, certificate = _solve_components(run, comps)
    overall, early = _first_stage_status(run, results, len(comps))
    if early is not None:
        return early
    _fall_back_to_warm_starts(results)
    K_star = max(r.K for _, _, r in results)
    K_bound = max(r.bound for _, _, r in results)
    tie = _tie_break(run, results, comps, K_star) if run.tie_break else ("skipped", 0.0)
    run.prog.update("tie-break" if run.tie_break else "done", K_star, K_bound)
    suppressed = frozenset().union(*(label_pairs(sub, sm.pair_rows[np.flatnonzero(r.mask)],
                                                 sm.pair_cols[np.flatnonzero(r.mask)])
                                     for sm, sub, r in results if sm is not None and r.mask is not None))
    checked = recheck(run.occ, suppressed, run.U, run.eps, run.split)
    K_chk, errors = checked[0], checked[1]
    if K_chk > K_star or not np.all(errors <= run.E * (1 + ERROR_RTOL)):
        raise RuntimeError(
            f"suppression MILP returned a plan that fails the re-check: K={K_chk} (model {K_star}), "
            f"max error {float(np.max(errors))!r} > E={run.E!r}"
        )
    all_optimal = overall is Status.OPTIMAL
    run.prog.update("re-checked", K_chk, float(K_chk) if all_optimal else float(K_bound))
    run.prog.close()
    return rechecked_plan(
        run.occ, suppressed, checked, U=run.U, eps=run.eps, error_bound=run.E, status=overall,
        gap=0.0 if all_optimal else float((K_chk - K_bound) / max(1.0, K_chk)),
        lower_bound=float(K_chk) if all_optimal else float(K_bound), method="milp",
        solve_time=time.perf_counter() - run.t0, info=_plan_info(run, results, tie, certificate),
    )


def _solve_components(
    run: _SolveRun, comps: list[tuple[np.ndarray, np.ndarray]]
) -> tuple[list[_Solved], tuple[float, np.ndarray] | None]:
    """The first stage (least K) on each component.

    Returns
    -------
    (results, certificate)
        One ``(model, occupancy, result)`` per component, and the best Lagrangian bound with its user
        weights over ``occ.users`` (``None`` if no component used the decomposition).
    """
    results: list[_Solved] = []
    certificate: tuple[float, np.ndarray] | None = None  # (Lagrangian bound, weights over occ.users)
    for users, grids in comps:
        sub = _sub_occupancy(run.occ, users, grids)
        if sub.degradation == 1 and run.meets_E(grids):
            results.append((None, sub, _CompResult(Status.OPTIMAL, 1, 1.0, None, 0.0)))
            continue
        run.prog.context = {"component": len(results)} if len(comps) > 1 else {}
        if run.strategy == "decomposition" or (run.strategy == "auto" and sub.n_grids >= DECOMPOSE_GRIDS):
            pairs = _DecomposedModel.of(sub)
            sm, r, lam = _solve_decomposed(sub, run.U, run.eps, run.E, run.split, run.deadline, run.opts, run.prog,
                                           warm=_warm_mask(run, pairs, sub, len(results)), pairs=pairs)
            results.append((sm, sub, r))
            if (certificate is None or r.lagrangian > certificate[0]) and np.any(lam > 0):  # λ = 0: no bound
                w = np.zeros(run.occ.n_users)
                w[users] = lam
                certificate = (r.lagrangian, w)
            continue
        results.append(_solve_compact(run, sub, len(results)))
    return results, certificate


def _solve_compact(run: _SolveRun, sub: Occupancy, component: int) -> _Solved:
    """The first stage of component number ``component`` by the compact MILP, from its warm start."""
    sm = build_suppression_model(sub, run.U, run.eps, error_bound=run.E, split=run.split)
    wmask = _warm_mask(run, sm, sub, component)
    warm = sm.point(wmask) if wmask is not None else None
    res = _solve_stage(sm, warm, _remaining(run.deadline), run.opts)
    if res.has_solution:
        mask = sm.suppressed_mask(res.x)
        # K of the point itself (not the reported objective), re-checked again at the end
        Kc = max(1, int(np.bincount(sm.pair_rows[~mask], minlength=sub.n_users).max()))
        lb = float(math.ceil(res.bound - 1e-6)) if math.isfinite(res.bound) else 1.0
        r = _CompResult(res.status, Kc, min(lb, Kc), mask, res.solve_time, warm=wmask, raw=res.raw_status)
    else:
        st = res.status if res.status is not Status.OPTIMAL else Status.ERROR
        r = _CompResult(st, -1, math.inf, None, res.solve_time, warm=wmask, raw=res.raw_status)
    run.prog.update("milp", r.K if r.mask is not None else None, r.bound)
    return sm, sub, r


def _warm_mask(run: _SolveRun, sm: SuppressionModel, sub: Occupancy, component: int) -> np.ndarray | None:
    """The warm start on this component: the given plan, or CLIP-USER on the component (if it meets E)."""
    if run.warm_start is not None:
        return _mask_of(sm, run.warm_start.suppressed) if run.warm_start.feasible else None
    from .greedy import clip_user

    g = clip_user(sub, run.U, run.eps, error_bound=run.E, split=run.split)
    run.greedy_K.append(g.degradation)
    run.prog.update("greedy", g.degradation, None, component=component)
    return _mask_of(sm, g.suppressed) if g.feasible else None


def _first_stage_status(
    run: _SolveRun, results: list[_Solved], n_components: int
) -> tuple[Status, SuppressionPlan | None]:
    """The honest overall status, and the plan that suppresses nothing when there is no plan to return.

    The status is ``OPTIMAL`` only if every component's is; else the first other status. The plan is
    returned when some component is infeasible, or found no incumbent and has no warm start.
    """
    statuses = [r.status for _, _, r in results]
    if any(s in (Status.INFEASIBLE, Status.INFEASIBLE_OR_UNBOUNDED) for s in statuses):
        run.prog.close()
        return Status.INFEASIBLE, _unsuppressed_plan(
            run, Status.INFEASIBLE, math.inf,
            {"components": n_components, "note": "no suppression plan meets the error bound"})
    not_optimal = [s for s in statuses if s is not Status.OPTIMAL]
    overall = not_optimal[0] if not_optimal else Status.OPTIMAL
    if any(r.mask is None and r.warm is None and sm is not None for sm, _, r in results):
        # a component without an incumbent (time limit) nor a warm start to fall back to
        run.prog.close()
        return overall, _unsuppressed_plan(
            run, overall, 1.0, {"components": n_components, "note": "no incumbent within the time limit"})
    return overall, None


def _fall_back_to_warm_starts(results: list[_Solved]) -> None:
    """A component without an incumbent (time limit) takes its warm start, with lower bound 1."""
    for sm, _, r in results:
        if sm is not None and r.mask is None:
            r.mask = r.warm
            kept = np.bincount(sm.pair_rows[~r.mask], minlength=sm.occ.n_users)
            r.K = max(1, int(kept.max()))
            r.bound = 1.0


def _tie_break(
    run: _SolveRun, results: list[_Solved], comps: list[tuple[np.ndarray, np.ndarray]], K_star: int
) -> tuple[str, float]:
    """Lexicographic tie-break: fewest suppressed samples with K ≤ ``K_star`` in every component.

    Replaces each solved component's model and mask in ``results``; returns the stage's status
    (``"optimal"`` or the first limit status) and its largest relative gap.
    """
    tie_status = "optimal"
    tie_gap = 0.0
    for i, (sm, sub, r) in enumerate(results):
        if sm is None:
            continue
        if sub.degradation <= K_star and run.meets_E(comps[i][1]):
            r.mask = np.zeros(sm.pair_rows.size, dtype=bool)
            continue
        limit = _tie_break_limit(r.time, run.tie_break_time_limit, run.deadline)
        if limit <= 0:  # no time left: the first stage's plan as it is (the model's build and HiGHS's
            tie_status = Status.TIME_LIMIT.value  # set-up alone took 0.4 s on 300 grids at time_limit = 0)
            continue
        sm2 = build_suppression_model(sub, run.U, run.eps, error_bound=run.E, split=run.split,
                                      objective="samples", max_degradation=K_star, row_threshold=K_star)
        r.mask = prune_plan(sm2, r.mask, K_star, run.U, run.eps, run.E, run.split)
        warm2 = sm2.point(r.mask)
        res2 = _solve_stage(sm2, warm2, limit, run.opts)
        if res2.has_solution:
            r.mask = sm2.suppressed_mask(res2.x)
            tie_gap = max(tie_gap, res2.gap)
        if res2.status is not Status.OPTIMAL:
            tie_status = res2.status.value
        results[i] = (sm2, sub, r)
    return tie_status, tie_gap


def _plan_info(
    run: _SolveRun, results: list[_Solved], tie: tuple[str, float], certificate: tuple[float, np.ndarray] | None
) -> dict[str, Any]:
    """The ``info`` of the MILP's plan (see :func:`solve_suppression`)."""
    info_extra: dict[str, Any] = {}
    if certificate is not None:
        info_extra = {"lagrangian_bound": int(certificate[0]), "lower_bound_weights": certificate[1]}
    return {
        "components": len(results),
        "tie_break": tie[0],
        "tie_break_gap": tie[1],
        "greedy_degradation": max(run.greedy_K) if run.greedy_K else None,
        "component_times": [r.time for _, _, r in results],
        "solver_status": [r.raw for _, _, r in results],
        "split": run.split,
        "strategy": run.strategy,
        "log": run.prog.log,
        **info_extra,
    }


def _unsuppressed_plan(run: _SolveRun, status: Status, bound: float, info: dict[str, Any]) -> SuppressionPlan:
    """The plan that suppresses nothing (no MILP plan to return), with ``gap = inf``."""
    occ, U, eps = run.occ, run.U, run.eps
    return rechecked_plan(
        occ, frozenset(), recheck(occ, frozenset(), U, eps, run.split), U=U, eps=eps, error_bound=run.E,
        status=status, gap=math.inf, lower_bound=bound, method="milp", solve_time=time.perf_counter() - run.t0,
        info=info,
    )
