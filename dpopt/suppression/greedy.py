"""CLIP-USER, seed 002 Algorithm 1 (with ERRATA E1 and E2), as an incremental algorithm.

Algorithm 1 proceeds in stages. In stage t it takes the users of largest current occupancy
``L(t) = {ℓ : G_ℓ ≥ G_j for all j}`` (ERRATA E2: line 6 of the pseudo-code is garbled) in increasing
user order; for each such user ℓ it computes, for every grid g the user still occupies, the grid's
worst-case error E_g(ℓ) after suppressing all of ℓ's samples there (eq. (13)), picks the grid of
*smallest* error (ERRATA E2: eq. (14) says arg max, the prose and line 11 say arg min), and
suppresses ℓ there if E_g(ℓ) ≤ E; otherwise it halts. It returns K = max_ℓ G_ℓ.

Incremental bookkeeping (what makes one step cheap): for every grid we keep the retained total R_g
and the grid's counts sorted in decreasing order, with a "next retained position" union-find over
the sorted array. The largest retained count Γ*_g is the count at the first retained position, and
Γ*_g after removing user ℓ is either unchanged or the count at the next retained position, so
evaluating a candidate grid costs O(α(n)) amortised and a step costs O(G_ℓ). The naive reference in
``tests/suppression/_reference.py`` recomputes every grid error from scratch and must agree.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..calculus import Split
from ..occupancy import Occupancy
from ..solve import Status
from ._kernel import ERROR_RTOL, baseline_errors, check_inputs, error_scalar, require_reachable
from .plan import SuppressionPlan, label_pairs, recheck, rechecked_plan

__all__ = ["clip_user", "TIE_RTOL"]

#: two candidate grids whose errors differ by less than this relative amount are a tie, broken by
#: the lower grid index (so float rounding never decides between mathematically equal grids)
TIE_RTOL = 1e-12


def clip_user(
    occ: Any,
    bound: float,
    epsilon: float,
    *,
    error_bound: float | None = None,
    skip_min_error_grid: bool = False,
    split: Split = "equal",
) -> SuppressionPlan:
    """Greedy suppression CLIP-USER (seed 002 §V-B1, Algorithm 1; ERRATA E1, E2).

    Parameters
    ----------
    occ : Occupancy
        The public user × grid count array A (seed 002 §II-C).
    bound : float
        U, the upper bound of the samples.
    epsilon : float
        ε, the budget of each grid's release (split ε/2 + ε/2 between mean and variance).
    error_bound : float, optional
        E. Defaults to max_g E_g of BASELINE (Algorithm 1, lines 2–3).
    skip_min_error_grid : bool
        Never suppress in the grid of smallest initial error (what the paper's experiments do,
        §VI-A3). Off by default.
    split : {"equal", "optimal"}
        Budget split between mean and variance (the paper: equal).

    Returns
    -------
    SuppressionPlan
        ``status=Status.HEURISTIC`` (feasible for its own E, optimality not certified); ``info`` holds the
        number of stages, steps and the halting reason (``"error_bound"``: the chosen grid would
        exceed E; ``"no_candidate"``: the user occupies no grid that may be suppressed).

    Notes
    -----
    Users are processed in row order of ``occ`` (the "increasing order of their indices"); ties
    between grids go to the lower grid index. The plan is exactly the published one: suppressions
    made in the stage in which the algorithm halts are kept even though they do not lower K.
    An ``error_bound`` below max_g E_g of BASELINE leaves the grids already above it untouched
    (Algorithm 1 only checks the grid it suppresses in); such a plan has ``feasible == False``.
    """
    occ, U, eps, E, split = check_inputs(occ, bound, epsilon, error_bound, split)
    if E is not None:
        require_reachable(occ, U, eps, E, split)
    t0 = time.perf_counter()
    base = baseline_errors(occ, U, eps, split)
    if E is None:
        E = float(np.max(base))
    skip = int(np.argmin(base)) if skip_min_error_grid else -1
    state = _GreedyState.of(occ)
    stages, reason = _run_stages(state, skip, E * (1.0 + ERROR_RTOL), U, eps, split == "optimal")
    return _greedy_plan(occ, state, U=U, eps=eps, E=E, split=split, t0=t0, stages=stages, reason=reason,
                        skip=skip)


@dataclass(eq=False)
class _GreedyState:
    """CLIP-USER's incremental bookkeeping (module docstring), as Python lists for fast scalar access.

    Attributes
    ----------
    rows, cols : ndarray
        User and grid index of each pair (CSR order of ``occ.matrix``).
    scounts : list of int
        The counts sorted by (grid, count descending, user), with a trailing 0.
    gstart, gend : list of int
        Each grid's segment of ``scounts``.
    pos : list of int
        Position in ``scounts`` of each pair.
    indptr, gridof, count : list of int
        The CSR row pointer, each pair's grid and count.
    N, R : list of int
        Each grid's total and retained total.
    nxt : list of int
        The "next retained position" union-find over ``scounts``.
    alive : bytearray
        Whether each pair is still retained.
    gcur : ndarray
        Each user's current occupancy G_ℓ.
    removed : list of int
        The suppressed pairs, in order.
    """

    rows: np.ndarray
    cols: np.ndarray
    scounts: list[int]
    gstart: list[int]
    gend: list[int]
    pos: list[int]
    indptr: list[int]
    gridof: list[int]
    count: list[int]
    N: list[int]
    R: list[int]
    nxt: list[int]
    alive: bytearray
    gcur: np.ndarray
    removed: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, occ: Occupancy) -> _GreedyState:
        """The state before any suppression."""
        csr = occ.matrix
        nnz = int(csr.nnz)
        rows = np.repeat(np.arange(occ.n_users), np.diff(csr.indptr))
        cols = csr.indices.astype(np.int64)
        data = csr.data.astype(np.int64)
        # grid segments of the count array sorted by (grid, count desc, user)
        order = np.lexsort((rows, -data, cols))
        pos_np = np.empty(nnz, dtype=np.int64)
        pos_np[order] = np.arange(nnz)
        gstart_np = np.concatenate(([0], np.cumsum(np.bincount(cols, minlength=occ.n_grids))))
        N = occ.grid_totals.tolist()
        return cls(
            rows=rows, cols=cols, scounts=data[order].tolist() + [0], gstart=gstart_np[:-1].tolist(),
            gend=gstart_np[1:].tolist(), pos=pos_np.tolist(), indptr=csr.indptr.tolist(), gridof=cols.tolist(),
            count=data.tolist(), N=N, R=list(N), nxt=list(range(nnz + 1)), alive=bytearray(b"\x01") * nnz,
            gcur=occ.user_occupancy.astype(np.int64).copy(),
        )

    def find(self, i: int) -> int:
        """The first retained position at or after ``i`` (with path compression)."""
        nxt = self.nxt
        root = i
        while nxt[root] != root:
            root = nxt[root]
        while nxt[i] != root:
            nxt[i], i = root, nxt[i]
        return root

    def suppress(self, k: int, user: int) -> None:
        """Suppress pair ``k`` of ``user``."""
        self.alive[k] = 0
        self.R[self.gridof[k]] -= self.count[k]
        self.nxt[self.pos[k]] = self.pos[k] + 1
        self.gcur[user] -= 1
        self.removed.append(k)


def _best_grid(
    st: _GreedyState, user: int, skip: int, U: float, eps: float, optimal_split: bool
) -> tuple[int, float]:
    """The pair of ``user`` whose suppression leaves its grid the smallest error, and that error.

    Returns ``(-1, 0.0)`` when the user occupies no grid that may be suppressed (all suppressed, or
    only the skipped grid).
    """
    best_k = -1
    best_e = 0.0
    alive, gridof, pos, gstart, gend = st.alive, st.gridof, st.pos, st.gstart, st.gend
    scounts, N, R, count = st.scounts, st.N, st.R, st.count
    for k in range(st.indptr[user], st.indptr[user + 1]):
        if not alive[k]:
            continue
        j = gridof[k]
        if j == skip:
            continue
        p = pos[k]
        head = st.find(gstart[j])
        if head == p:
            nh = st.find(p + 1)
            newmax = scounts[nh] if nh < gend[j] else 0
        else:
            newmax = scounts[head]
        e = error_scalar(N[j], R[j] - count[k], newmax, U, eps, optimal_split)
        if best_k < 0 or e < best_e * (1.0 - TIE_RTOL):
            best_k, best_e = k, e
    return best_k, best_e


def _run_stages(
    st: _GreedyState, skip: int, limit: float, U: float, eps: float, optimal_split: bool
) -> tuple[int, str]:
    """Algorithm 1's stages until it halts; returns the number of stages and the halting reason."""
    stages = 0
    while True:
        stages += 1
        maxg = int(st.gcur.max())
        for user in np.flatnonzero(st.gcur == maxg).tolist():
            best_k, best_e = _best_grid(st, user, skip, U, eps, optimal_split)
            if best_k < 0:
                return stages, "no_candidate"
            if not best_e <= limit:
                return stages, "error_bound"
            st.suppress(best_k, user)


def _greedy_plan(
    occ: Occupancy, st: _GreedyState, *, U: float, eps: float, E: float, split: str, t0: float, stages: int,
    reason: str, skip: int,
) -> SuppressionPlan:
    """The re-checked plan of the suppressed pairs, with CLIP-USER's ``info``."""
    removed_k = np.asarray(st.removed, dtype=np.int64)
    suppressed = label_pairs(occ, st.rows[removed_k], st.cols[removed_k])
    checked = recheck(occ, suppressed, U, eps, split)
    if checked[0] != int(st.gcur.max()):  # pragma: no cover - internal consistency
        raise RuntimeError(f"CLIP-USER bookkeeping error: K={int(st.gcur.max())}, recomputed {checked[0]}")
    return rechecked_plan(
        occ, suppressed, checked, U=U, eps=eps, error_bound=E, status=Status.HEURISTIC, gap=float("nan"),
        lower_bound=float("nan"), method="greedy", solve_time=time.perf_counter() - t0,
        info={
            "stages": stages,
            "steps": len(st.removed),
            "halt_reason": reason,
            "skipped_grid": occ.grids.tolist()[skip] if skip >= 0 else None,
            "split": split,
        },
    )
