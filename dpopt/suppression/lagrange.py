"""Per-grid suppression patterns and the Lagrangian lower bound on K (city scale).

The grids of the suppression problem are coupled only through K = max_ℓ G_ℓ. Write S_g for the set
of users a plan *retains* in grid g. A retained set is feasible (its grid error meets E) iff, for
some feasible level u of g (models/suppression.md §4), every user of S_g has count ≤ u and
R(S_g) = Σ_{ℓ∈S_g} m_{g,ℓ} lies in the exact feasible set F_{g,u} (by (M1) an assumed Γ* ≥ the
true one is safe, and a feasible plan has its own Γ* as a level). For any weights λ ≥ 0 on the users,

    Σ_ℓ λ_ℓ · K  ≥  Σ_ℓ λ_ℓ · #{g : ℓ ∈ S_g}  =  Σ_g λ(S_g)  ≥  Σ_g c_g(λ),
    c_g(λ) = min { λ(S) : S a feasible retained set of g },

so K ≥ ⌈Σ_g c_g(λ) / Σ_ℓ λ_ℓ⌉ for every plan (the Lagrangian bound; its best value over λ equals
the LP bound of the per-grid pattern formulation, at least the compact MILP's LP bound). The weights
λ are the proof object: :func:`verify_lower_bound` recomputes the bound from λ alone, with an exact
dynamic programme per grid (a min-weight subset-sum over the retained total, the grid's users in
increasing count order, read off at every level's runs), using no solver and nothing from the search.

Every minimiser (one S_g per grid) is itself a plan meeting E, so the same oracle yields incumbents
(the "Lagrangian heuristic"), improved by :func:`repair_plan`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..calculus import Split
from ..occupancy import Occupancy
from ..solve import SolveResult
from ._kernel import baseline_errors, check_inputs, level_table
from .runs import feasible_runs

__all__ = ["PatternOracle", "PatternPool", "LagrangianBound", "verify_lower_bound", "lagrangian_bound",
           "solve_pattern_lp"]

#: relative slack subtracted before rounding a Lagrangian bound up (float sums of the weights)
_ROUND_TOL = 1e-9


class PatternOracle:
    """Exact least-weight feasible retained set of every grid, for given user weights.

    Parameters
    ----------
    occ : Occupancy
    U, eps, E : float
        Sample bound, per-grid budget and the error bound every grid must meet.
    split : {"equal", "optimal"}

    Notes
    -----
    Built once (levels and exact runs from :func:`dpopt.suppression.milp.feasible_runs`); each
    :meth:`solve` is one dynamic programme per grid with more than one user, O(n_g · N_g) with
    numpy over the retained totals.
    """

    def __init__(self, occ: Occupancy, U: float, eps: float, E: float, split: str = "equal") -> None:
        self.occ = occ
        csr = occ.matrix
        self.n_pairs = int(csr.nnz)
        self.pair_user = np.repeat(np.arange(occ.n_users, dtype=np.int64), np.diff(csr.indptr))
        self.pair_grid = csr.indices.astype(np.int64)
        self.pair_count = csr.data.astype(np.int64)
        # pairs grouped by grid, counts ascending within a grid
        order = np.lexsort((self.pair_count, self.pair_grid))
        self.order = order
        self.grid_ptr = np.searchsorted(self.pair_grid[order], np.arange(occ.n_grids + 1))
        N = occ.grid_totals.astype(np.int64)
        lg, lv, lc = level_table(occ)
        run_level, lo, hi = feasible_runs(N[lg], lv, lc, U, eps, E, split)
        # runs per grid: (level value, lo, hi), sorted by grid then level value ascending
        rg = lg[run_level]
        rv = lv[run_level]
        ro = np.lexsort((lo, rv, rg))
        self.run_grid, self.run_value = rg[ro], rv[ro]
        self.run_lo, self.run_hi = lo[ro], hi[ro]
        self.run_ptr = np.searchsorted(self.run_grid, np.arange(occ.n_grids + 1))
        if np.any(np.diff(self.run_ptr) == 0):
            raise ValueError("some grid has no retained set meeting the error bound")
        self.N = N

    def grid_pattern(self, g: int, pair_weights: np.ndarray, deadline: float | None = None
                     ) -> tuple[float, np.ndarray] | None:
        """(c_g, kept pair indices) of grid ``g``; ``pair_weights`` indexed by pair (CSR order). None
        where ``deadline`` (a ``time.perf_counter()`` instant) passed first (checked every 64 users:
        one grid of thousands of users takes a third of a second)."""
        a, b = int(self.grid_ptr[g]), int(self.grid_ptr[g + 1])
        idx = self.order[a:b]
        if b - a == 1:  # one user: it must be retained (R > 0)
            return float(pair_weights[idx[0]]), idx
        c = self.pair_count[idx]
        wg = pair_weights[idx]
        n_tot = int(self.N[g])
        dp = np.full(n_tot + 1, np.inf)
        dp[0] = 0.0
        took = np.zeros((b - a, n_tot + 1), dtype=bool)
        best, best_item, best_R = math.inf, -1, -1
        r_val, r_lo, r_hi = self.run_value, self.run_lo, self.run_hi
        k, rb = int(self.run_ptr[g]), int(self.run_ptr[g + 1])
        top = 0
        cl = c.tolist()
        for i, m in enumerate(cl):
            if deadline is not None and i % 64 == 63 and time.perf_counter() > deadline:
                return None
            cand = dp[: top + 1] + wg[i]
            seg = dp[m: m + top + 1]
            took[i, m: m + top + 1] = cand < seg
            np.minimum(seg, cand, out=seg)
            top += m
            if i + 1 < b - a and cl[i + 1] == m:
                continue
            # every user with count <= m is in: evaluate the runs of level m
            while k < rb and r_val[k] < m:
                k += 1
            while k < rb and r_val[k] == m:
                seg_r = dp[int(r_lo[k]): int(r_hi[k]) + 1]
                j = int(np.argmin(seg_r))
                if seg_r[j] < best:
                    best, best_item, best_R = float(seg_r[j]), i, int(r_lo[k]) + j
                k += 1
        kept = []
        R = best_R
        for i in range(best_item, -1, -1):
            if took[i, R]:
                kept.append(idx[i])
                R -= cl[i]
        if R != 0 or not kept:  # pragma: no cover - a DP invariant
            raise RuntimeError("pattern oracle: backtracking failed")
        return best, np.asarray(kept, dtype=np.int64)

    def solve(self, weights: np.ndarray, deadline: float | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        """(c_g(λ) per grid, retained mask over the pairs in CSR order) of a minimiser; None where
        ``deadline`` (a ``time.perf_counter()`` instant) passed before every grid was solved — a
        partial answer bounds nothing (the bound sums every grid's least cost)."""
        w = np.asarray(weights, dtype=float)
        G = self.occ.n_grids
        cost = np.zeros(G)
        keep = np.zeros(self.n_pairs, dtype=bool)
        pw = w[self.pair_user]
        for g in range(G):
            if g and deadline is not None and time.perf_counter() > deadline:
                return None
            answer = self.grid_pattern(g, pw, deadline)
            if answer is None:
                return None
            cost[g], kept = answer
            keep[kept] = True
        return cost, keep


@dataclass(frozen=True)
class LagrangianBound:
    """A lower bound on the least K with its proof object.

    Attributes
    ----------
    value : int
        ⌈Σ_g c_g(λ)/Σ_ℓ λ_ℓ − tol⌉: no plan meeting E has a smaller K.
    raw : float
        Σ_g c_g(λ)/Σ_ℓ λ_ℓ before rounding.
    weights : ndarray
        λ ≥ 0 over ``occ.users`` (the certificate; any non-negative non-zero vector is valid).
    """

    value: int
    raw: float
    weights: np.ndarray


def _bound_of(costs: np.ndarray, weights: np.ndarray) -> tuple[int, float]:
    total = float(np.sum(weights))
    raw = float(np.sum(costs)) / total
    return max(1, math.ceil(raw - _ROUND_TOL * max(1.0, raw))), raw


def verify_lower_bound(
    occ: Any,
    bound: float,
    epsilon: float,
    weights: Any,
    *,
    error_bound: float | None = None,
    split: Split = "equal",
) -> int:
    """Recompute the Lagrangian lower bound on K from the user weights λ alone (no solver).

    Parameters
    ----------
    occ : Occupancy
    bound, epsilon : float
        U and the per-grid budget ε.
    weights : array_like, shape (n_users,)
        λ ≥ 0, not all zero (``plan.info["lower_bound_weights"]`` of :func:`solve_suppression`).
    error_bound : float, optional
        E (default max_g E_g of BASELINE).
    split : {"equal", "optimal"}

    Returns
    -------
    int
        ⌈Σ_g c_g(λ) / Σ_ℓ λ_ℓ⌉ (relative tolerance 10⁻⁹): every suppression plan whose grid errors
        meet E has K ≥ this value (models/suppression.md §11). c_g is computed by an exact dynamic
        programme over the grid's retained totals and the exact feasible runs of each level.
    """
    from .._validation import DpoptInputError

    occ, U, eps, E, split = check_inputs(occ, bound, epsilon, error_bound, split)
    if E is None:
        E = float(np.max(baseline_errors(occ, U, eps, split)))
    w = np.asarray(weights, dtype=float)
    if w.shape != (occ.n_users,) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise DpoptInputError(
            f"`weights` must be {occ.n_users} finite non-negative numbers, not all zero; got "
            f"shape {w.shape}"
        )
    costs, _ = PatternOracle(occ, U, eps, E, split).solve(w)
    return _bound_of(costs, w)[0]


def lagrangian_bound(
    oracle: PatternOracle, weights: np.ndarray, costs_keep: tuple[np.ndarray, np.ndarray] | None = None,
    deadline: float | None = None,
) -> tuple[LagrangianBound, np.ndarray, np.ndarray] | None:
    """The bound of ``weights``, the oracle's minimiser (retained mask) and per-user kept counts.

    ``costs_keep``: an oracle answer for these weights already at hand (not recomputed).
    ``deadline``: the oracle's (:meth:`PatternOracle.solve`); None where it passed first.
    """
    answer = oracle.solve(weights, deadline) if costs_keep is None else costs_keep
    if answer is None:
        return None
    costs, keep = answer
    value, raw = _bound_of(costs, weights)
    kept = np.bincount(oracle.pair_user[keep], minlength=oracle.occ.n_users)
    return LagrangianBound(value, raw, np.asarray(weights, float).copy()), keep, kept


class PatternPool:
    """Distinct per-grid retained sets (columns of the pattern LP), stored as (grid, kept pairs)."""

    def __init__(self, oracle: PatternOracle, seed: int = 0) -> None:
        self.oracle = oracle
        rng = np.random.default_rng(seed)
        self._key = rng.random(oracle.n_pairs) + rng.random(oracle.n_pairs) * 1e-7
        self._seen: set[tuple[int, float]] = set()
        self.col_grid: list[np.ndarray] = []  # per added batch: grid of each new column
        self.entry_col: list[np.ndarray] = []  # per batch: column id of each kept pair
        self.entry_user: list[np.ndarray] = []
        self.n = 0

    def add(self, keep: np.ndarray, grids: np.ndarray | None = None) -> int:
        """Add the patterns of a retained mask (only ``grids`` if given); return how many were new."""
        o = self.oracle
        G = o.occ.n_grids
        h = np.bincount(o.pair_grid[keep], weights=self._key[keep], minlength=G)
        cand = np.arange(G) if grids is None else np.asarray(grids, dtype=np.int64)
        new = [g for g, v in zip(cand.tolist(), h[cand].tolist()) if (g, v) not in self._seen]
        if not new:
            return 0
        self._seen.update((g, float(h[g])) for g in new)
        col_of = -np.ones(G, dtype=np.int64)
        col_of[new] = np.arange(self.n, self.n + len(new))
        pk = np.flatnonzero(keep & (col_of[o.pair_grid] >= 0))
        self.col_grid.append(np.asarray(new, dtype=np.int64))
        self.entry_col.append(col_of[o.pair_grid[pk]])
        self.entry_user.append(o.pair_user[pk])
        self.n += len(new)
        return len(new)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(grid of each column, column of each entry, user of each entry)."""
        return (np.concatenate(self.col_grid), np.concatenate(self.entry_col),
                np.concatenate(self.entry_user))


def solve_pattern_lp(pool: PatternPool, *, time_limit: float | None = None) -> SolveResult:
    """The restricted pattern LP (models/suppression.md §11) over the pool, solved by HiGHS.

    ``min K`` s.t. ``Σ_p z_{g,p} = 1`` (row block ``one``, duals π_g) and
    ``K − Σ_{g, p ∋ ℓ} z_{g,p} ≥ 0`` (row block ``user``, duals λ_ℓ ≥ 0, Σ λ = 1 at an optimum).
    """
    from ..solve import ModelBuilder, solve_bounded

    o = pool.oracle
    col_grid, e_col, e_user = pool.arrays()
    L, G = o.occ.n_users, o.occ.n_grids
    b = ModelBuilder(name="suppression_patterns")
    z = b.add_cols("z", pool.n, lower=0.0, upper=1.0)
    K = b.add_cols("K", 1, lower=0.0, upper=np.inf, cost=1.0)
    b.add_rows("one", rows=col_grid, cols=z, vals=1.0, lower=1.0, upper=1.0, count=G)
    b.add_rows("user", rows=np.concatenate([e_user, np.arange(L)]),
               cols=np.concatenate([z[e_col], np.repeat(K, L)]),
               vals=np.concatenate([-np.ones(e_user.size), np.ones(L)]), lower=0.0, upper=np.inf,
               count=L)
    return solve_bounded(b.build(), time_limit=time_limit)
