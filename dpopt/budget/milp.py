"""The budget-planner MILP (models/budget.md §4), built with :class:`dpopt.solve.ModelBuilder`.

Configurations j = (g, c, k) of :mod:`.configs` (cap c, budget level ε_k, least retained total
R_min(j)). Columns: y_j ∈ {0,1} (grid g released in configuration j) and, for every pair p = (ℓ, g)
of a *binding* user and every level k used by a configuration of g, x_{p,k} ∈ {0,1} (ℓ kept in g,
which is released at level k).

    maximise   Σ_g w_g Σ_{j ∈ C(g)} y_j
    subject to Σ_{j ∈ C(g)} y_j ≤ 1                                         (one)      per grid
               x_{p,k} − Σ_{j ∈ C(g,k): ok(p, j)} y_j ≤ 0                    (link)     per (p, k)
               Σ_{p ∈ g} Γ_j(m_p)·x_{p,k} + (F_j − R_min(j))·y_j ≥ 0         (retained) per j
               Σ_{p ∈ ℓ} Σ_k ε_k·x_{p,k} ≤ ε_total                            (user)     per binding user

Γ_j(m) = min(m, c) with truncation (``ok`` always true); without truncation Γ_j(m) = m and
ok(p, j) = [m_p ≤ c] (users above the cap are suppressed: seed 002's decision space). A user is
*binding* when keeping it in every grid at that grid's largest level could exceed ε_total; the other
users are kept wherever their grid is released (that never hurts: R only grows), so their records
enter as the constant F_j = Σ_{non-binding p ∈ g, ok(p, j)} Γ_j(m_p) on y_j, with no column.

Disaggregating x by level makes the spend Σ ε_k x_{p,k} exact without a big-M (a big-M spend
e_p ≥ b_g − B_g(1 − x_p) gave an LP bound 20× the optimum on the Austin day).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..occupancy import Occupancy
from ..solve import LinearModel, ModelBuilder
from .configs import RTOL, ConfigTable, pair_arrays
from .greedy import Assignment

__all__ = ["BudgetModel", "build_budget_model"]


@dataclass(frozen=True, eq=False)
class BudgetModel:
    """A built budget MILP and what is needed to read a point back (see module docstring)."""

    model: LinearModel
    table: ConfigTable
    x_pair: np.ndarray  # pair (CSR order) of each x column
    x_level: np.ndarray  # level of each x column
    free_pairs: np.ndarray  # pairs of non-binding users (kept wherever allowed)
    pair_grid: np.ndarray  # grid of every pair
    pair_count: np.ndarray  # m of every pair
    n_grids: int
    cfg_users_min: np.ndarray  # ν_j: fewest binding users any plan needs in configuration j
    n_binding_users: int

    def aggregate_bound(self, weights: np.ndarray, epsilon_total: float) -> float:
        """An upper bound on the coverage without any solve (models/budget.md §4).

        A plan releasing grid g in configuration j keeps ≥ ν_j binding users there, each paying ε_j,
        so the binding users' total spend is ≥ Σ_released min_j ν_j·ε_j and ≤ (#binding)·ε_total.
        The fractional knapsack over the grids with these costs bounds the weighted coverage.
        """
        G = self.n_grids
        cost = np.full(G, np.inf)
        np.minimum.at(cost, self.table.cfg_grid, self.cfg_users_min * self.table.cfg_budget)
        g = np.flatnonzero(np.isfinite(cost) & (weights > 0))
        free = g[cost[g] <= 0]
        paid = g[cost[g] > 0]
        out = float(weights[free].sum())
        budget = self.n_binding_users * epsilon_total
        order = paid[np.argsort(cost[paid] / weights[paid], kind="stable")]
        cum = np.cumsum(cost[order])
        n = int(np.searchsorted(cum, budget * (1 + 1e-12), side="right"))
        out += float(weights[order[:n]].sum())
        if n < order.size:
            left = budget - (cum[n - 1] if n else 0.0)
            out += float(weights[order[n]] * max(left, 0.0) / cost[order[n]])
        return out

    def _allowed(self, pairs: np.ndarray, config: np.ndarray) -> np.ndarray:
        g = self.pair_grid[pairs]
        j = config[g]
        ok = j >= 0
        if not self.table.truncate:
            ok &= self.pair_count[pairs] <= np.where(ok, self.table.cfg_cap[np.maximum(j, 0)], 0)
        return ok

    def assignment(self, x: np.ndarray) -> Assignment:
        cb = self.model.col_blocks
        y = np.asarray(x[cb["y"]]) > 0.5
        config = -np.ones(self.n_grids, dtype=np.int64)
        j = np.flatnonzero(y)
        config[self.table.cfg_grid[j]] = j
        keep = np.zeros(self.pair_grid.size, dtype=bool)
        xv = np.asarray(x[cb["x"]]) > 0.5
        keep[self.x_pair[xv]] = True
        keep[self.free_pairs] = self._allowed(self.free_pairs, config)
        return Assignment(config=config, keep=keep)

    def point(self, a: Assignment) -> np.ndarray:
        """The model point of an assignment (warm start)."""
        cb = self.model.col_blocks
        out = np.zeros(self.model.num_cols)
        chosen = np.flatnonzero(a.config >= 0)
        out[cb["y"].start + a.config[chosen]] = 1.0
        g = self.pair_grid[self.x_pair]
        j = a.config[g]
        lev = np.where(j >= 0, self.table.cfg_level[np.maximum(j, 0)], -1)
        on = a.keep[self.x_pair] & (lev == self.x_level) & self._allowed(self.x_pair, a.config)
        out[cb["x"]] = on
        return out


def _members(key: np.ndarray, n_keys: int, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All (i, j) with ``key[j] == query[i]``, i ascending and j ascending within each i (vectorised).

    ``key`` and ``query`` hold integers in ``[0, n_keys)``. Returns the i (positions in ``query``)
    and the j (positions in ``key``) as two aligned arrays.
    """
    order = np.argsort(key, kind="stable")
    start = np.searchsorted(key[order], np.arange(n_keys + 1))
    k = start[query + 1] - start[query]
    offs = np.arange(k.sum()) - np.repeat(np.cumsum(k) - k, k)
    return np.repeat(np.arange(query.size), k), order[np.repeat(start[query], k) + offs]


def build_budget_model(occ: Occupancy, table: ConfigTable, epsilon_total: float,
                       weights: np.ndarray) -> BudgetModel:
    """Build the MILP of the module docstring for ``table`` (see :func:`config_table`)."""
    rows, cols, cnt = pair_arrays(occ)
    G = occ.n_grids
    cfg_grid, cfg_cap, cfg_lev = table.cfg_grid, table.cfg_cap, table.cfg_level
    nc = cfg_grid.size
    nl = table.ladder.size
    grids, gpos, bpairs, free = _binding_pairs(occ, table, epsilon_total, rows, cols)

    # (grid, level) entries used by configurations; x columns = binding pairs × their grid's levels
    gl = np.unique(cfg_grid * nl + cfg_lev)
    gl_grid, gl_lev = gl // nl, gl % nl
    x_of, x_gl = _members(gl_grid, G, cols[bpairs])
    x_pair = bpairs[x_of]
    x_level = gl_lev[x_gl]

    b = ModelBuilder(name="budget", sense="max")
    y = b.add_cols("y", nc, lower=0, upper=1, integer=True, cost=weights[cfg_grid])
    nx = x_pair.size
    x = b.add_cols("x", nx, lower=0, upper=1, integer=True)

    b.add_rows("one", rows=gpos[cfg_grid], cols=y, vals=1.0, lower=-np.inf, upper=1.0, count=grids.size)

    # link: per x column, the configurations of its (grid, level) that allow the pair
    cfg_gl = np.searchsorted(gl, cfg_grid * nl + cfg_lev)
    lr, lj = _members(cfg_gl, gl.size, x_gl)
    if not table.truncate:
        okm = cnt[x_pair[lr]] <= cfg_cap[lj]
        lr, lj = lr[okm], lj[okm]
    b.add_rows("link", rows=np.concatenate([np.arange(nx), lr]), cols=np.concatenate([x, y[lj]]),
               vals=np.concatenate([np.ones(nx), -np.ones(lr.size)]), lower=-np.inf, upper=0.0, count=nx)

    rj, rx, coef, need = _retained_terms(table, cnt, cols, free, n_grids=G, x_pair=x_pair, x_gl=x_gl,
                                         cfg_gl=cfg_gl, n_gl=gl.size)
    nz = coef > 0
    b.add_rows("retained", rows=np.concatenate([rj[nz], np.arange(nc)]),
               cols=np.concatenate([x[rx[nz]], y]),
               vals=np.concatenate([coef[nz].astype(float), -need]),
               lower=0.0, upper=np.inf, count=nc)
    # cardinality cut per (grid, level): the x columns of (g, k) are shared by the caps at level k,
    # so one row Σ_p x_{p,k} ≥ Σ_{j ∈ C(g,k)} n_min(j)·y_j (valid: at most one j is chosen); per-cap
    # rows alone let the LP spread y over the caps and reuse the same fractional x for each
    n_min = _fewest_users(coef, rj, need)
    b.add_rows("cardinality", rows=np.concatenate([x_gl, cfg_gl]), cols=np.concatenate([x, y]),
               vals=np.concatenate([np.ones(nx), -n_min]), lower=0.0, upper=np.inf, count=gl.size)

    users = np.unique(rows[x_pair])
    upos = np.searchsorted(users, rows[x_pair])
    b.add_rows("user", rows=upos, cols=x, vals=table.ladder[x_level], lower=-np.inf,
               upper=float(epsilon_total), count=users.size)
    return BudgetModel(model=b.build(), table=table, x_pair=x_pair, x_level=x_level, free_pairs=free,
                       pair_grid=cols, pair_count=cnt, n_grids=G, cfg_users_min=n_min,
                       n_binding_users=int(users.size))


def _binding_pairs(occ: Occupancy, table: ConfigTable, epsilon_total: float, rows: np.ndarray,
                   cols: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The grids with a configuration, their position (−1 elsewhere), and the pairs in them of
    binding users and of the other (free) users, CSR order (module docstring)."""
    G = occ.n_grids
    cfg_grid = table.cfg_grid
    has = np.zeros(G, dtype=bool)
    has[cfg_grid] = True
    grids = np.flatnonzero(has)
    gpos = -np.ones(G, dtype=np.int64)
    gpos[grids] = np.arange(grids.size)
    Bg = np.zeros(G)
    np.maximum.at(Bg, cfg_grid, table.cfg_budget)
    pairs = np.flatnonzero(has[cols])
    reach = np.bincount(rows[pairs], weights=Bg[cols[pairs]], minlength=occ.n_users)
    binding_user = reach > epsilon_total * (1.0 + RTOL)
    bpairs = pairs[binding_user[rows[pairs]]]
    free = pairs[~binding_user[rows[pairs]]]
    return grids, gpos, bpairs, free


def _retained_terms(table: ConfigTable, cnt: np.ndarray, cols: np.ndarray, free: np.ndarray, *, n_grids: int,
                    x_pair: np.ndarray, x_gl: np.ndarray, cfg_gl: np.ndarray,
                    n_gl: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Terms of the retained rows: binding pairs' x at the configuration's level, free pairs as a
    constant. Returns (configuration, x column, Γ_j(m) tightened to the need, need R_min − F_j)."""
    cfg_grid, cfg_cap = table.cfg_grid, table.cfg_cap
    nc = cfg_grid.size
    # the x columns of (grid, level) gl, expanded over the configurations j of that gl
    rj, rx = _members(x_gl, n_gl, cfg_gl)
    m_r = cnt[x_pair[rx]]
    cap_r = cfg_cap[rj]
    coef = np.minimum(m_r, cap_r) if table.truncate else np.where(m_r <= cap_r, m_r, 0)
    # free pairs: constant F_j
    fj, f_of = _members(cols[free], n_grids, cfg_grid)
    fm = cnt[free[f_of]]
    fcap = cfg_cap[fj]
    fval = np.minimum(fm, fcap) if table.truncate else np.where(fm <= fcap, fm, 0)
    F = np.bincount(fj, weights=fval, minlength=nc)
    need = np.maximum(table.cfg_rmin - F, 0.0)
    # coefficient tightening (valid for binary x): no single pair counts for more than the need
    return rj, rx, np.minimum(coef, need[rj]), need


def _fewest_users(coef: np.ndarray, rj: np.ndarray, need: np.ndarray) -> np.ndarray:
    """n_min(j): the fewest binding users whose largest contributions ``coef`` (of configuration
    ``rj``) cover the need of j (0 where the need is 0 or j has no binding pair)."""
    nc = need.size
    n_min = np.zeros(nc)
    o = np.lexsort((-coef, rj))
    cs = np.cumsum(coef[o])
    first = np.searchsorted(rj[o], np.arange(nc))
    last = np.searchsorted(rj[o], np.arange(nc), side="right")
    base = np.where(first > 0, cs[np.maximum(first - 1, 0)], 0.0) if cs.size else np.zeros(nc)
    for jj in np.flatnonzero((need > 0) & (last > first)).tolist():
        seg = cs[first[jj]:last[jj]] - base[jj]
        n_min[jj] = min(int(np.searchsorted(seg, need[jj] * (1 - 1e-12))) + 1, last[jj] - first[jj])
    return n_min
