"""City-scale suppression: Lagrangian/column-generation bound plus a pattern local search.

For a component with many pairs the compact MILP of :mod:`.milp` is slow to close (on three weeks of
Austin buses HiGHS proves 202 ≤ K* and finds K = 411 in 600 s). The grids are coupled only through
K, so (models/suppression.md §11–§12):

1. **Bound.** A few projected supergradient steps on the user weights λ (simplex) seed a pool of
   per-grid retained sets (patterns); then column generation on the pattern LP
   ``min K : Σ_p z_{g,p} = 1 ∀g, K ≥ Σ_{g,p ∋ ℓ} z_{g,p} ∀ℓ`` (HiGHS) with exact pricing by the
   per-grid dynamic programme of :class:`.lagrange.PatternOracle`. Each LP's user duals λ give the
   Lagrangian bound ⌈Σ_g c_g(λ)⌉ (Σλ = 1), recomputable by :func:`.lagrange.verify_lower_bound`.
2. **Incumbent.** Every oracle answer is a plan meeting E. A local search re-chooses one grid's
   retained set at a time by the same oracle, with weights exp(β(load_ℓ + 1 − K_target)) on the
   users' current loads (other grids): a best response that never raises the potential
   Σ_ℓ exp(β load_ℓ). Target K_target = the bound.
3. **Closing.** If the incumbent meets the bound, it is optimal. Otherwise the compact MILP runs with
   the remaining time, warm-started with the incumbent and with K ≥ bound.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from .lagrange import LagrangianBound, PatternOracle, PatternPool, lagrangian_bound, solve_pattern_lp
from .progress import Progress

__all__ = ["pattern_bound", "local_search", "DecompositionResult"]


def _project_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection onto {λ ≥ 0, Σλ = 1} (sort-based)."""
    u = np.sort(v)[::-1]
    css = np.cumsum(u)
    r = np.flatnonzero(u * np.arange(1, u.size + 1) > css - 1)[-1]
    return np.maximum(v - (css[r] - 1) / (r + 1), 0.0)


@dataclass
class DecompositionResult:
    """Best bound (with its weights), best plan (retained mask over the pairs) and their K; no bound,
    no plan and K = inf where the deadline passed inside the first oracle call (``pattern_bound``'s
    ``fallback``)."""

    bound: LagrangianBound | None
    keep: np.ndarray | None
    K: float
    lp_value: float
    lp_solves: int
    oracle_calls: int


def _left(deadline: float | None) -> float:
    return math.inf if deadline is None else deadline - time.perf_counter()


@dataclass(eq=False)
class _Best:
    """The best Lagrangian bound and the best plan (least K) seen so far, and the oracle calls made."""

    bound: LagrangianBound | None = None
    keep: np.ndarray | None = None
    K: float = math.inf
    calls: int = 0

    def consider(self, lb: LagrangianBound, keep: np.ndarray, kept: np.ndarray) -> None:
        """Keep ``lb`` if it is the best bound, and the plan ``keep`` (loads ``kept``) if it has least K."""
        if self.bound is None or lb.raw > self.bound.raw:
            self.bound = lb
        if kept.max() < self.K:
            self.K, self.keep = int(kept.max()), keep


def pattern_bound(
    oracle: PatternOracle,
    *,
    deadline: float | None = None,
    progress: Progress | None = None,
    subgradient_steps: int = 10,
    max_lp_solves: int = 200,
    fallback: bool = False,
) -> DecompositionResult:
    """Lagrangian bound on K by supergradient steps, then column generation on the pattern LP.

    Stops when the bound can no longer rise by column generation (⌈best Lagrangian value⌉ equals
    ⌈restricted LP value⌉, or pricing finds no column), at ``deadline`` or after ``max_lp_solves``.
    An oracle call stops at ``deadline`` between grids (a call is one exact programme per grid, seconds
    on hundreds of grids), its partial answer dropped, once a bound is held — or from the first call
    where ``fallback`` says the caller holds a plan of its own (then the result may have no bound).
    """
    pool = PatternPool(oracle)
    best = _Best()
    _supergradient_steps(oracle, pool, best, subgradient_steps, deadline, progress, fallback)
    if best.bound is None:
        return DecompositionResult(None, None, math.inf, math.inf, 0, best.calls)
    lp_value, solves = _column_generation(oracle, pool, best, max_lp_solves, deadline, progress)
    return DecompositionResult(best.bound, best.keep, int(best.K), lp_value, solves, best.calls)


def _supergradient_steps(
    oracle: PatternOracle, pool: PatternPool, best: _Best, steps: int, deadline: float | None,
    progress: Progress | None, fallback: bool = False,
) -> None:
    """Projected supergradient steps on the user weights λ (from uniform), seeding ``pool``."""
    L = oracle.occ.n_users
    lam = np.full(L, 1.0 / L)
    for _ in range(steps):
        answer = lagrangian_bound(oracle, lam, deadline=deadline if fallback or best.bound is not None else None)
        best.calls += 1
        if answer is None:  # the deadline passed inside the call
            break
        lb, keep, kept = answer
        best.consider(lb, keep, kept)
        pool.add(keep)
        if progress is not None:
            progress.update("subgradient", best.K, best.bound.value)
        if best.bound.value >= best.K or _left(deadline) <= 0:
            break
        d = kept - kept.mean()
        step = (best.K - lb.raw) / max(float(d @ d), 1e-12)
        lam = _project_simplex(lam + step * d)


def _column_generation(
    oracle: PatternOracle, pool: PatternPool, best: _Best, max_lp_solves: int, deadline: float | None,
    progress: Progress | None,
) -> tuple[float, int]:
    """Column generation on the pattern LP, priced by the oracle at the LP's user duals.

    Returns
    -------
    (lp_value, solves) : (float, int)
        The last restricted LP value (``inf`` if none was solved) and the number of LP solves.
    """
    lp_value, solves = math.inf, 0
    while best.bound.value < best.K and solves < max_lp_solves and _left(deadline) > 1.0:
        res = solve_pattern_lp(pool, time_limit=max(1.0, _left(deadline)))
        solves += 1
        if res.row_duals is None:
            break
        lp_value = float(res.objective)
        lam = np.maximum(res.dual("user"), 0.0)
        if lam.sum() <= 0:
            break
        pi = res.dual("one")
        answer = oracle.solve(lam, deadline)
        best.calls += 1
        if answer is None:  # the deadline passed inside the call
            break
        costs, keep = answer
        lb, keep, kept = lagrangian_bound(oracle, lam, (costs, keep))
        best.consider(lb, keep, kept)
        if progress is not None:
            progress.update("column generation", best.K, best.bound.value, lp=round(lp_value, 4))
        if best.bound.value >= math.ceil(lp_value - 1e-9 * max(1.0, lp_value)):
            break  # the LP optimum is within the bound's integer step: no better bound here
        if pool.add(keep, np.flatnonzero(costs < pi - 1e-9)) == 0:
            break
    return lp_value, solves


def local_search(
    oracle: PatternOracle,
    keep: np.ndarray,
    target: int,
    *,
    deadline: float | None = None,
    progress: Progress | None = None,
    beta: float = 0.3,
    max_sweeps: int = 30,
    patience: int = 3,
    seed: int = 0,
) -> np.ndarray:
    """Re-choose each grid's retained set (best response on exponential load weights) until K ≤ target.

    Returns the best retained mask seen (least max load, then least excess over ``target``); every
    mask is a plan meeting E (each grid's set comes from the exact oracle).
    """
    rng = np.random.default_rng(seed)
    keep = keep.copy()
    pu = oracle.pair_user
    load = np.bincount(pu[keep], minlength=oracle.occ.n_users).astype(np.int64)
    gp, order = oracle.grid_ptr, oracle.order
    multi = np.flatnonzero(np.diff(gp) > 1)
    pw = np.zeros(oracle.n_pairs)

    def score(ld: np.ndarray) -> tuple[int, int]:
        return int(ld.max()), int(np.maximum(ld - target, 0).sum())

    best_score, best_keep = score(load), keep.copy()
    stall = 0
    for sweep in range(max_sweeps):
        if best_score[0] <= target or _left(deadline) <= 0:
            break
        for g in rng.permutation(multi).tolist():
            if _left(deadline) <= 0:  # between grids the mask is a plan meeting E
                break
            idx = order[gp[g]: gp[g + 1]]
            cur = idx[keep[idx]]
            load[pu[cur]] -= 1
            keep[cur] = False
            pw[idx] = np.exp(np.minimum(beta * (load[pu[idx]] + 1 - target), 50.0))
            _, kp = oracle.grid_pattern(g, pw)
            keep[kp] = True
            load[pu[kp]] += 1
        s = score(load)
        if s < best_score:
            best_score, best_keep, stall = s, keep.copy(), 0
        else:
            stall += 1
        if progress is not None:
            progress.update("local search", best_score[0], None, sweep=sweep, excess=s[1])
        if stall >= patience:
            break
    return best_keep
