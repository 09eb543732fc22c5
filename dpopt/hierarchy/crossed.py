"""Crossed random effects of the finest-grid means, fitted from noisy node means (models/crossed.md).

Post-processing only: the inputs are measured nodes' noisy means and their noise variances, never
records. Two layers:

* :func:`gls_posterior`, the kernel: observations y = H b + ε, ε ~ N(0, diag(s2)), effects
  b = (fixed effects with a flat prior, random effects b_k ~ N(0, prior_var_k) independent). It
  solves Henderson's mixed-model equations in their augmented (dual) form, with the grid-level
  effects (blocked with one factor's levels) eliminated exactly first, by one factorisation of
  the remaining core (two dense
  Cholesky factors, or SuperLU), and returns the posterior mean of b, the REML log-likelihood
  (Patterson & Thompson 1971; log det from the factors' diagonals) and, through
  :meth:`GLSPosterior.variance`, the posterior variance of any sparse linear combinations L b.
  Nothing G × G is ever dense. Where the observations are few beside the effects (hundreds of node
  means of tens of thousands of interaction levels) the same posterior is computed in the
  observations' space instead: V = Cov(y), n × n, factored once (``space``, :class:`_DualSystem`).
* :func:`fit_crossed`: θ_g = μ + Σ_f u_f[code_f(g)] + e_g (Fay & Herriot 1979 with crossed factors;
  lme4's ``(1|place) + (1|time)``, Bates et al. 2015), observed as y = A θ + ε. The variance
  components are the REML maximisers over log-variances (average-information steps, Gilmour et
  al. 1995); the result carries the posterior mean and variance of every grid, of μ and of every
  factor level, and answers any other node by :meth:`CrossedFit.node`.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from statistics import NormalDist
from typing import Any, TypeVar

import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize
from scipy.linalg import cho_solve, cholesky, eigh, solve_triangular
from scipy.linalg.blas import dtrsm
from scipy.linalg.lapack import dpotri
from scipy.sparse.linalg import splu

from .._validation import _fail, check_confidence, check_positive_int
from .panels import TrianglePanels

T = TypeVar("T")

__all__ = ["GLSPosterior", "gls_posterior", "component_profile", "ComponentGrams", "FactorEffects", "NodeEstimate", "CrossedFit",
           "fit_crossed", "fit_kernel", "means_only", "within_memory", "RESIDUAL"]

_LOG2PI = math.log(2.0 * math.pi)
#: each fit's evaluations and status at DEBUG (a release's progress lines are INFO, one level up)
_log = logging.getLogger(__name__)
#: the key of the grid-level (residual) component in :attr:`CrossedFit.sigma2`; no factor may use it
RESIDUAL = "residual"
#: at most this many numbers in one block of right-hand sides of the batched solves, or pairs of
#: nonzeros in one block of quadratic forms (80 MB)
_RHS_BUDGET = 10_000_000
#: the blocks' Gram matrices (:class:`ComponentGrams`) are kept for REML's search only while their
#: packed lower triangles hold at most this many numbers (256 MiB): beyond, each evaluation forms V
#: by one sparse product instead (≈ 1.5× the search's time, the same numbers). Memory, never the
#: answer: the release's ≤ 1.5 GiB at 2·10⁷ records, beside the records' ≈ 0.8 GiB (models/crossed.md §2)
_GRAM_BUDGET = 32 * 2 ** 20
#: a factor's levels are eliminated with their grids' residuals only if they hold at most this
#: many grids on average: larger blocks shrink the core but fill the sparse products that build
#: it. It decides the work, never the answer (every choice gives the same posterior, tested)
_LOCAL_MEAN_GRIDS = 8
#: REML searches σ² in [min(spread·10⁻¹⁰, min(s2)·10⁻⁴), spread·10⁴] (spread: the larger of var(y)
#: and mean(s2)); a component ending at the lower bound, negligible beside every noise variance,
#: is reported as 0
_FLOOR, _FLOOR_NOISE, _LOG_HIGH = 1e-10, 1e-4, math.log(1e4)
#: REML is at its maximum when a further average-information step would raise ℓ_R by less than
#: this (a likelihood interval spans ½ unit; rounding of ℓ_R itself can reach 10⁻⁴ when the noise
#: variances are 10⁻⁹ of the components)
_GAIN = 1e-3
#: REML's score takes each block's trace of the posterior covariance exactly (the variance of every
#: random effect) while the factored core has at most this many rows (the size up to which the core
#: is factored dense by default); above it by Hutchinson's estimator (:meth:`_System.component_traces`):
#: the exact pass needs one core solve per random effect, ≈ 15 minutes an average-information step
#: at 33,003 effects over a 6,930-row sparse core (models/engine.md §6, "Where the estimate takes
#: long"). Work, not data: it is a matrix size
_EXACT_TRACE_CORE = 6000
#: Rademacher probes per block of the estimated traces; a block with at most this many effects is
#: taken exactly (as many solves). With the local part of each trace exact, the probes carry only the
#: core's correction, whose variance is 2·Σ_{i≠j} c_ij² per probe (tests/hierarchy/test_crossed.py)
_TRACE_PROBES = 64
#: a sparse core of at most this many rows asked for the variances of more rows than a quarter of
#: its own is factored dense once more for them (:meth:`_Core.quad` through R⁻¹: 51 s at 6,930 rows
#: against ≈ 15 minutes of sparse solves for 33,003 rows, ≈ 1.5 GB). Work, not data
_DENSE_INVERSE_CORE = 8192


# ------------------------------------------------------------------------------------------------ kernel
@dataclass(frozen=True)
class _Core:
    """R, the symmetric system over w = (duals of the rows spanning ≥ 2 local blocks, the other
    scaled effects) left once the local effects are eliminated. Dense, R is quasi-definite
    (R_aa > 0 over the duals, its Schur complement < 0 over the effects) and is factored by two
    Cholesky factors (``chol`` = (L_a, W = L_a⁻¹R_ab, L_b), L_b L_bᵀ = WᵀW − R_bb); else SuperLU
    (``sparse``). A dense core keeps R⁻¹ once asked for many quadratic forms (``cache``)."""

    chol: tuple[np.ndarray, np.ndarray, np.ndarray] | None
    sparse: Any
    cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    #: a sparse core's R and its number of duals, kept where it may be factored dense for many
    #: quadratic forms (:data:`_DENSE_INVERSE_CORE`); None otherwise
    matrix: tuple[sp.spmatrix, int] | None = field(default=None, repr=False, compare=False)

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        if self.chol is not None:
            La, W, Lb = self.chol
            n_a = La.shape[0]
            ua = solve_triangular(La, rhs[:n_a], lower=True, check_finite=False)
            zb = -cho_solve((Lb, True), rhs[n_a:] - W.T @ ua, check_finite=False)
            za = solve_triangular(La, ua - W @ zb, lower=True, trans="T", check_finite=False)
            return np.concatenate([za, zb])
        return self.sparse.solve(rhs)

    def quad(self, T: sp.csc_matrix) -> np.ndarray:
        """diag(Tᵀ R⁻¹ T) for sparse columns T: through R⁻¹ (dense core, more columns than a
        quarter of R's rows, or R⁻¹ already kept) by pairs of nonzeros while they fit the budget,
        else by a sparse-dense product; by solves otherwise."""
        if self.chol is None and self.matrix is not None and 4 * T.shape[1] >= T.shape[0]:
            if "dense" not in self.cache:  # tried once: None where R is not numerically quasi-definite
                self.cache["dense"] = _chol_core(self.matrix[0].toarray(), self.matrix[1])
            if self.cache["dense"] is not None:
                return self.cache["dense"][0].quad(T)
        if self.chol is not None and ("inverse" in self.cache or 4 * T.shape[1] >= T.shape[0]):
            counts = np.diff(T.indptr)
            if int(counts @ counts) <= _RHS_BUDGET:
                return _pair_quad(T, self.inverse())
            return np.asarray(T.T.multiply(T.T @ self.inverse()).sum(axis=1)).ravel()
        if self.chol is None and T.shape[1] > T.shape[0]:
            return self._streamed_quad(T)
        return np.einsum("ij,ij->j", T.toarray(), self.solve(T.toarray()))

    def _streamed_quad(self, T: sp.csc_matrix) -> np.ndarray:
        """diag(Tᵀ R⁻¹ T) of a sparse core with more columns T than rows of R: R⁻¹'s columns J (the
        rows T touches) in blocks, Σ_{j∈J} T_jk (TᵀR⁻¹)_kj accumulated per block — one solve per row
        of R instead of one per column of T (10,153 against 38,252 on an outside check's release),
        each block's numbers within :data:`_RHS_BUDGET`."""
        Tt = sp.csr_matrix(T).T.tocsr()  # columns of T as rows
        rows = np.flatnonzero(np.diff(sp.csr_matrix(T).indptr))
        batch = max(1, _RHS_BUDGET // max(T.shape[0], T.shape[1], 1))
        out = np.zeros(T.shape[1])
        for lo in range(0, rows.size, batch):
            J = rows[lo:lo + batch]
            E = np.zeros((T.shape[0], J.size))
            E[J, np.arange(J.size)] = 1.0
            out += np.asarray(Tt[:, J].multiply(Tt @ self.solve(E)).sum(axis=1)).ravel()
        return out

    def inverse(self) -> np.ndarray:
        """R⁻¹ of a dense core, kept: with Y = L_a⁻ᵀW, Z = Y L_b⁻ᵀ,
        R⁻¹ = [[L_a⁻ᵀL_a⁻¹ − ZZᵀ, Z L_b⁻¹], [L_b⁻ᵀZᵀ, −L_b⁻ᵀL_b⁻¹]] (block inverse, Schur
        complement −L_b L_bᵀ), in matrix products."""
        if "inverse" not in self.cache:
            La, W, Lb = self.chol
            Ia = solve_triangular(La, np.eye(La.shape[0]), lower=True, check_finite=False)
            Ib = solve_triangular(Lb, np.eye(Lb.shape[0]), lower=True, check_finite=False)
            Z = (Ia.T @ W) @ Ib.T
            ZIb = Z @ Ib
            self.cache["inverse"] = np.block([[Ia.T @ Ia - Z @ Z.T, ZIb], [ZIb.T, -(Ib.T @ Ib)]])
        return self.cache["inverse"]


def _pair_quad(T: sp.csc_matrix, Rinv: np.ndarray) -> np.ndarray:
    """diag(Tᵀ R⁻¹ T) as Σ over each column's pairs of nonzeros t_i t_j (R⁻¹)_ij: O(Σ nnz(t)²)."""
    counts = np.diff(T.indptr)
    col = np.repeat(np.arange(T.shape[1]), counts)
    reps = counts[col]
    first = np.repeat(np.arange(T.nnz), reps)
    second = np.repeat(T.indptr[col], reps) + np.arange(first.size) - np.repeat(np.cumsum(reps) - reps, reps)
    vals = T.data[first] * T.data[second] * Rinv[T.indices[first], T.indices[second]]
    return np.bincount(col[first], weights=vals, minlength=T.shape[1])


#: a streamed multiply-add of a sparse-dense product costs about this many of a dense triangular
#: solve's (BLAS): :meth:`_DualSystem.variance` takes :meth:`_DualSystem._shared_variance` where
#: that is cheaper by this measure (0.31 ns against 0.014 ns per flop on the benchmark machine).
#: It decides the work, never the answer
_STREAMED_COST = 16


def _by_shared_effects(MS: sp.csr_matrix, width: int = 8) -> np.ndarray:
    """The rows of ``MS`` ordered by their first ``width`` nonzero columns (lexicographic)."""
    MS.sort_indices()
    counts = np.diff(MS.indptr)
    keys = np.full((min(int(counts.max(initial=0)), width), MS.shape[0]), -1, dtype=np.int64)
    for i in range(keys.shape[0]):
        has = counts > i
        keys[i, has] = MS.indices[MS.indptr[:-1][has] + i]
    return np.lexsort(keys[::-1]) if keys.shape[0] else np.arange(MS.shape[0])


def _chol_core(R: np.ndarray, n_a: int) -> tuple[_Core, float] | None:
    """The two-Cholesky factorisation of a quasi-definite dense R (None if R is not numerically so)."""
    try:
        La = cholesky(R[:n_a, :n_a], lower=True, check_finite=False)
        W = solve_triangular(La, R[:n_a, n_a:], lower=True, check_finite=False)
        Lb = cholesky(W.T @ W - R[n_a:, n_a:], lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        return None
    logdet = 2.0 * float(np.sum(np.log(np.diag(La))) + np.sum(np.log(np.diag(Lb))))
    return _Core(chol=(La, W, Lb), sparse=None), logdet


def _factor(R: sp.spmatrix, n_a: int, dense_max: int) -> tuple[_Core, float]:
    """Factor R (dense up to ``dense_max`` rows: two Cholesky factors; else, or should R not be
    numerically quasi-definite, SuperLU with a symmetric minimum degree order) and log|det R|
    from the factors' diagonals."""
    out = _chol_core(R.toarray(), n_a) if R.shape[0] <= dense_max else None
    if out is not None:
        return out
    lu = splu(sp.csc_matrix(R), permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.1, options={"SymmetricMode": True})
    logdet = float(np.sum(np.log(np.abs(lu.U.diagonal()))) + np.sum(np.log(np.abs(lu.L.diagonal()))))
    keep = (R, n_a) if R.shape[0] <= _DENSE_INVERSE_CORE else None
    return _Core(chol=None, sparse=lu, matrix=keep), logdet


@dataclass(frozen=True)
class _System:
    """The factored system: the core, the eliminated block-diagonal local block D = −L Lᵀ through
    ``Linv`` = L⁻¹ (block-diagonal, lower) and ``KL`` = K_we L⁻ᵀ (so K_we D⁻¹ = −KL L⁻¹), the
    coupling ``K_we``, the scaled design ``Ht`` and the rows kept as duals (``agg``) or folded
    into the effects' precision (``fold``)."""

    core: _Core
    Linv: sp.csr_matrix
    KL: sp.csr_matrix
    K_we: sp.csr_matrix
    Ht: sp.csr_matrix
    s2: np.ndarray
    agg: np.ndarray
    fold: np.ndarray

    def solve(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(v, r) with K [r; v] = [y; 0]: v the scaled effects' posterior mean, r = P y; y one
        right-hand side (n) or many (n × k, as columns)."""
        a, f, n_local = self.agg, self.fold, self.Linv.shape[0]
        q_w = self.Ht.shape[1] - n_local
        Hf, s2f = self.Ht[f], self.s2[f].reshape((-1,) + (1,) * (np.ndim(y) - 1))
        rhs_v = -(Hf.T @ (y[f] / s2f))
        z_w = self.core.solve(np.concatenate([y[a], rhs_v[:q_w]]) + self.KL @ (self.Linv @ rhs_v[q_w:]))
        v = np.concatenate([z_w[a.size:], -(self.Linv.T @ (self.Linv @ (rhs_v[q_w:] - self.K_we.T @ z_w)))])
        r = np.empty(np.shape(y))
        r[a], r[f] = z_w[:a.size], (y[f] - Hf @ v) / s2f
        return v, r

    def project(self, Y: np.ndarray) -> np.ndarray:
        """P Y for the columns of Y (n × k): :meth:`solve`'s r, many right-hand sides at once."""
        return self.solve(Y)[1]

    def work(self) -> tuple[float, float]:
        """(flops of one factorisation of the core, flops of one solve with it): dense, c³/3 and 2c²;
        SuperLU, Σ_k 2·|L's column k|·|U's row k| and 2·(nnz L + nnz U), from the factors' pattern.
        The eliminated local block and the sparse products around the core are left out of both."""
        c = self.core_size
        if self.core.chol is not None:
            return c ** 3 / 3.0, 2.0 * c * c
        L, U = self.core.sparse.L.tocsc(), self.core.sparse.U.tocsr()
        return float(2.0 * np.diff(L.indptr) @ np.diff(U.indptr)), 2.0 * float(L.nnz + U.nnz)

    def lift(self, M: sp.csr_matrix) -> sp.csc_matrix:
        """T = (0, M_wᵀ) − K_we D⁻¹ M_eᵀ: the rows of M (scaled) in the core's coordinates."""
        q_w = M.shape[1] - self.Linv.shape[0]
        lift = sp.vstack([sp.csr_matrix((self.agg.size, M.shape[0])), M[:, :q_w].T])
        return (lift + self.KL @ (self.Linv @ M[:, q_w:].T)).tocsc()

    @property
    def core_size(self) -> int:
        return int(self.K_we.shape[0])

    def covariance(self, M: sp.csr_matrix) -> np.ndarray:
        """M Cov(v | y) Mᵀ, dense (for a few rows)."""
        half = (self.Linv @ M[:, M.shape[1] - self.Linv.shape[0]:].T).toarray()
        T = self.lift(M).toarray()
        return half.T @ half - T.T @ self.core.solve(T)

    def component_traces(self, edges: np.ndarray, n_fixed: int) -> np.ndarray:
        """tr Var(v_k | y) of each random block k (``edges``: the blocks' bounds after the fixed
        effects), from the posterior variance of every random effect; where the core has more than
        :data:`_EXACT_TRACE_CORE` rows, by :meth:`_probed_trace` for the blocks of more than
        :data:`_TRACE_PROBES` effects."""
        if self.core_size <= _EXACT_TRACE_CORE:
            var_v = self.variance(sp.identity(self.Ht.shape[1], format="csr")[n_fixed:])
            return np.array([var_v[lo:hi].sum() for lo, hi in zip(edges[:-1], edges[1:])])
        eye = sp.identity(self.Ht.shape[1], format="csr")
        return np.array([float(self.variance(eye[n_fixed + lo:n_fixed + hi]).sum()) if hi - lo <= _TRACE_PROBES
                         else self._probed_trace(n_fixed + lo, n_fixed + hi, seed=k)
                         for k, (lo, hi) in enumerate(zip(edges[:-1], edges[1:]))])

    def _probed_trace(self, lo: int, hi: int, *, seed: int) -> float:
        """tr Var(v_j | y) over the effects j in [lo, hi), Hutchinson's estimator (Hutchinson 1990,
        Commun. Stat. Simul. Comput. 19(2)) with :data:`_TRACE_PROBES` Rademacher probes z (seeded by
        the block: the same estimate at every call, a release reproducible): Var(v | y) = Λ − TᵀR⁻¹T
        with Λ = (L⁻¹)ᵀL⁻¹ over the local effects (:meth:`variance`), whose trace is taken exactly
        (the squared entries of L⁻¹'s columns), and the core's correction tr(TᵀR⁻¹T) ≈ mean of
        (Tz)ᵀR⁻¹(Tz) — one core solve per probe instead of one per effect."""
        q_w = self.Ht.shape[1] - self.Linv.shape[0]
        local = self.Linv[:, max(lo - q_w, 0):max(hi - q_w, 0)]
        exact = float(local.multiply(local).sum())
        z = np.random.default_rng(seed).choice([-1.0, 1.0], size=(_TRACE_PROBES, hi - lo))
        M = sp.csr_matrix((z.ravel(), (np.repeat(np.arange(_TRACE_PROBES), hi - lo),
                                       np.tile(np.arange(lo, hi), _TRACE_PROBES))), shape=(_TRACE_PROBES, self.Ht.shape[1]))
        return exact - float(np.mean(self.core.quad(self.lift(M))))

    def variance(self, M: sp.csr_matrix) -> np.ndarray:
        """diag(M Cov(v | y) Mᵀ) in blocks of right-hand sides; a sparse core that is not factored dense
        for them and is asked for more rows than its own takes them at once (:meth:`_Core._streamed_quad`
        blocks R⁻¹'s columns instead)."""
        q_w, out = M.shape[1] - self.Linv.shape[0], np.empty(M.shape[0])
        batch = max(1, min(2048, _RHS_BUDGET // max(self.K_we.shape[0], 1)))
        if self.core.chol is None and self.core.matrix is None and M.shape[0] > self.core_size:
            batch = M.shape[0]
        for start in range(0, M.shape[0], batch):
            rows = M[start:start + batch]
            half = self.Linv @ rows[:, q_w:].T
            local = -np.asarray(half.multiply(half).sum(axis=0)).ravel()
            out[start:start + rows.shape[0]] = -(local + self.core.quad(self.lift(rows)))
        return np.maximum(out, 0.0)


class ComponentGrams:
    """The Gram matrix G_k = H_k H_kᵀ (n × n) of each block k of the random columns of one design H
    (``sizes``: the blocks' widths after the ``n_fixed`` fixed columns), formed on first use and held
    by its lower triangle's panels (:class:`~dpopt.hierarchy.panels.TrianglePanels`: half the memory
    of the dense matrices, the same numbers). Many evaluations of :func:`gls_posterior` on one design
    at variances constant within its blocks (REML's search, the intervals' component likelihoods)
    then build V = Σ_k σ²_k G_k + diag(s2) from sums of the panels instead of a sparse product of the
    whole design each (observations' space only). Not for concurrent use: the sums share one buffer."""

    def __init__(self, H: Any, sizes: list[int], n_fixed: int = 1) -> None:
        self.H, self.sizes, self.n_fixed = H, [int(s) for s in sizes], int(n_fixed)
        self.panels = TrianglePanels.of_size(H.shape[0])
        self._grams: list[np.ndarray] | None = None
        self._diags: list[np.ndarray] | None = None
        self._work: np.ndarray | None = None

    def _edges(self) -> np.ndarray:
        """The blocks' first columns in H, and the end of the last."""
        return self.n_fixed + np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)

    def grams(self) -> list[np.ndarray]:
        """Each block's Gram matrix, packed (:attr:`panels`)."""
        if self._grams is None:
            H = sp.csc_matrix(self.H, dtype=float)
            edges = self._edges()
            pairs = [self.panels.gram(H[:, a:b]) for a, b in zip(edges[:-1], edges[1:])]
            self._grams, self._diags = [g for g, _ in pairs], [d for _, d in pairs]
        return self._grams

    def diagonals(self) -> list[np.ndarray]:
        """Each block's diag(G_k)."""
        self.grams()
        assert self._diags is not None
        return self._diags

    def noise_plus(self, s2: np.ndarray, sigma2: Any, skip: int | None = None) -> np.ndarray:
        """diag(s2) + Σ_k σ²_k G_k (k ≠ ``skip``), n × n, column-major, its lower triangle only
        (what a lower Cholesky factorisation reads, in place): the panels summed by BLAS axpy in
        one buffer (each entry the arithmetic of the dense sum), then one pass into the dense array."""
        if self._work is None:
            self._work = np.empty(self.panels.size)
        weights = [float(sig) if (k != skip and sig > 0) else 0.0 for k, sig in enumerate(sigma2)]
        V = self.panels.lower(self.panels.combine(weights, self.grams(), work=self._work))
        V.reshape(-1, order="F")[:: V.shape[0] + 1] += s2
        return V

    def profile_loglik(self, y: np.ndarray, s2: np.ndarray, sigma2: np.ndarray, j: int,
                       values: np.ndarray) -> np.ndarray:
        """The REML log-likelihood of :func:`gls_posterior` (observations' space) with block j's
        variance at each of ``values`` and the other blocks' at ``sigma2``: one factorisation and
        one eigen-decomposition for all values instead of one factorisation each.

        With A = diag(s2) + Σ_{k≠j} σ²_k G_k = LLᵀ and B = L⁻¹H_j (n × r), V(t) = L(I + tBBᵀ)Lᵀ.
        Where r < n, BᵀB = UΛUᵀ and (I + tBBᵀ)⁻¹ = I − B·U diag(t/(1 + tλ)) UᵀBᵀ (Woodbury); else
        BBᵀ = QΛQᵀ and (I + tBBᵀ)⁻¹ = I − Q diag(tλ/(1 + tλ)) Qᵀ. Either way
        log|V(t)| = log|A| + Σ log(1 + tλ_i), and the quadratic forms in y and the fixed columns X
        give XᵀV⁻¹X, β̂ and r'V⁻¹r, so the likelihood −½[(n − p) log 2π + log|V| + log|XᵀV⁻¹X| +
        r'V⁻¹r] is exact at every t (tested against :func:`gls_posterior`)."""
        y, s2 = np.asarray(y, dtype=float), np.asarray(s2, dtype=float)
        sig = np.asarray(sigma2, dtype=float)
        H = sp.csc_matrix(self.H, dtype=float)
        edges = self._edges()
        if self._grams is not None:  # formed already (REML's search): sums of their panels
            L = cholesky(self.noise_plus(s2, sig, skip=j), lower=True, check_finite=False, overwrite_a=True)
        else:  # one sparse product, without keeping every block's n × n Gram matrix
            scale = np.concatenate([np.full(b - a, math.sqrt(max(sk, 0.0)) if k != j else 0.0)
                                    for k, (sk, a, b) in enumerate(zip(sig, edges[:-1], edges[1:]))])
            L = cholesky(_noise_plus_product(H[:, edges[0]:edges[-1]] @ sp.diags(scale), s2), lower=True,
                         check_finite=False, overwrite_a=True)  # in its own memory
        Hj = H[:, edges[j]:edges[j + 1]]
        X = H[:, :self.n_fixed].toarray()
        Yt = solve_triangular(L, np.column_stack([y, X]), lower=True, check_finite=False)  # L⁻¹[y, X]
        if Hj.shape[1] < Hj.shape[0]:
            B = solve_triangular(L, Hj.toarray(), lower=True, check_finite=False)
            lam, U = np.linalg.eigh(B.T @ B)
            P = U.T @ (B.T @ Yt)
            weight = lambda t: t / (1.0 + t * lam)  # noqa: E731
        else:  # L⁻¹G_jL⁻ᵀ from the n × n Gram matrix, never the n × r block: one n × n array, in place
            G = (self.panels.symmetric(self._grams[j]) if self._grams is not None
                 else self.panels.mirror(self.panels.lower_gram(Hj)))
            G = dtrsm(1.0, L, G, lower=1, overwrite_b=1)  # L⁻¹G
            G = dtrsm(1.0, L, G, side=1, lower=1, trans_a=1, overwrite_b=1)  # L⁻¹GL⁻ᵀ
            lam, Q = eigh(G, overwrite_a=True, check_finite=False, driver="evr")
            del G
            P = Q.T @ Yt
            weight = lambda t: t * lam / (1.0 + t * lam)  # noqa: E731
        lam = np.maximum(lam, 0.0)
        base = Yt.T @ Yt
        logdet_a = 2.0 * float(np.sum(np.log(np.diag(L))))
        n, p = y.size, self.n_fixed
        out = np.empty(np.size(values))
        for i, t in enumerate(np.asarray(values, dtype=float).ravel()):
            phi = base - (P * weight(t)[:, None]).T @ P
            W, Xy = phi[1:, 1:], phi[1:, 0]
            Lw = cholesky(W, lower=True, check_finite=False)
            beta = cho_solve((Lw, True), Xy, check_finite=False)
            quad = float(phi[0, 0] - Xy @ beta)
            logdet = logdet_a + float(np.sum(np.log1p(t * lam))) + 2.0 * float(np.sum(np.log(np.diag(Lw))))
            out[i] = -0.5 * ((n - p) * _LOG2PI + logdet + quad)
        return out

    def block_variances(self, prior_var: np.ndarray) -> np.ndarray | None:
        """σ²_k of each block where ``prior_var`` is constant within every block, else None."""
        edges = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        if edges[-1] != prior_var.size:
            return None
        out = np.zeros(len(self.sizes))
        for k, (a, b) in enumerate(zip(edges[:-1], edges[1:])):
            if b > a:
                if not np.all(prior_var[a:b] == prior_var[a]):
                    return None
                out[k] = prior_var[a]
        return out


@dataclass(frozen=True)
class _DualSystem:
    """The same posterior in the observations' space (models/crossed.md §2), for a model with far
    fewer observations than effects: V = H̃_r H̃_rᵀ + diag(s2), n × n dense, factored once
    (``chol``, lower), X = H̃_f the fixed effects' columns, ``VinvX`` = V⁻¹X and ``wchol`` the
    Cholesky factor of W = XᵀV⁻¹X. With P = V⁻¹ − V⁻¹XW⁻¹XᵀV⁻¹: β̂ = W⁻¹XᵀV⁻¹y, v̂_r = H̃_rᵀPy,
    r = Py, and Var(Mv | y) = M_rM_rᵀ − CV⁻¹Cᵀ + (M_f − CV⁻¹X)W⁻¹(M_f − CV⁻¹X)ᵀ with C = M_rH̃_rᵀ
    (Henderson 1975's prediction error variance)."""

    H: sp.csr_matrix
    scale: np.ndarray
    s2: np.ndarray
    n_fixed: int
    chol: np.ndarray
    VinvX: np.ndarray
    wchol: np.ndarray
    #: (σ²_k, ComponentGrams) where V was built from the blocks' Gram matrices
    grams: tuple[np.ndarray, ComponentGrams] | None = None

    @property
    def core_size(self) -> int:
        return int(self.chol.shape[0])

    @cached_property
    def Ht(self) -> sp.csr_matrix:
        """H̃ = H·diag(scale), formed when first asked (a likelihood alone never asks)."""
        return (self.H @ sp.diags(self.scale)).tocsr()

    def _vinv(self, B: np.ndarray) -> np.ndarray:
        return cho_solve((self.chol, True), B, check_finite=False)

    def _winv(self, B: np.ndarray) -> np.ndarray:
        return cho_solve((self.wchol, True), B, check_finite=False)

    def solve(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(v, r): the scaled effects' posterior mean given right-hand side y, and r = P y."""
        beta = self._winv(self.VinvX.T @ y)
        r = self._vinv(y) - self.VinvX @ beta
        return np.concatenate([beta, (self.scale * (self.H.T @ r))[self.n_fixed:]]), r

    def project(self, Y: np.ndarray) -> np.ndarray:
        """P Y for the columns of Y (n × k): :meth:`solve`'s r = P y, many right-hand sides at once."""
        return self._vinv(Y) - self.VinvX @ self._winv(self.VinvX.T @ Y)

    def work(self) -> tuple[float, float]:
        """(flops of one factorisation of V, flops of one solve with it): n³/3 and 2n²."""
        n = self.core_size
        return n ** 3 / 3.0, 2.0 * n * n

    def _parts(self, M: sp.csr_matrix) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
        """(M_r, C = M_r H̃_rᵀ dense, A = M_f − C V⁻¹X) of a block of rows."""
        nf = self.n_fixed
        Mr = M[:, nf:]
        C = (Mr @ self.Ht[:, nf:].T).toarray()
        return Mr, C, M[:, :nf].toarray() - C @ self.VinvX

    def variance(self, M: sp.csr_matrix) -> np.ndarray:
        """diag(M Cov(v | y) Mᵀ), in blocks of rows (each block's C is rows × n, dense): n² per row.
        Rows that are each a sum of a few effects (a grid: μ, one level per factor, its residual),
        more rows than observations, take :meth:`_shared_variance` instead where cheaper (the same numbers)."""
        M = sp.csr_matrix(M)
        if M.shape[0] > self.core_size:
            parts = self._split(M)
            if self._shared_cost(parts) < M.shape[0] * self.core_size:
                return self._shared_variance(M, parts)
        out = np.empty(M.shape[0])
        batch = max(1, _RHS_BUDGET // max(self.core_size, 1))
        for start in range(0, M.shape[0], batch):
            Mr, C, A = self._parts(M[start:start + batch])
            half = solve_triangular(self.chol, C.T, lower=True, check_finite=False)
            fixed = solve_triangular(self.wchol, A.T, lower=True, check_finite=False)
            prior = np.asarray(Mr.multiply(Mr).sum(axis=1)).ravel()
            out[start:start + C.shape[0]] = prior - (half * half).sum(axis=0) + (fixed * fixed).sum(axis=0)
        return np.maximum(out, 0.0)

    def _split(self, M: sp.csr_matrix) -> tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix, sp.csr_matrix]:
        """(M_S, M_O, H̃_Sᵀ, H̃_Oᵀ): M's random columns split into those two or more rows share (S,
        e.g. a factor's levels) and the others (O, e.g. a grid's own residual), with the matching
        columns of H̃ as rows."""
        Mr = M[:, self.n_fixed:].tocsc()
        shared = np.diff(Mr.indptr) >= 2
        Hrows = self.Ht[:, self.n_fixed:].T.tocsr()
        return Mr[:, shared].tocsr(), Mr[:, ~shared].tocsr(), Hrows[shared], Hrows[~shared]

    def _shared_cost(self, parts: tuple[sp.csr_matrix, ...]) -> float:
        """The work of :meth:`_shared_variance` on M's :meth:`_split` ``parts``, in units of the row
        solves' n multiply-adds: :data:`_STREAMED_COST` per streamed row of n (a shared effect's row of
        H̃ᵀL⁻ᵀ, its use by a row of M, an own effect's nonzero of C) and L⁻ᵀ's panels (n row solves)."""
        MS, MO, HS, HO = parts
        own = MO.multiply(MO).sign() @ np.diff(HO.indptr)  # ≥ the nonzeros of each row of C_O
        return _STREAMED_COST * float(HS.nnz + MS.nnz + np.sum(own)) + float(self.core_size) ** 2

    def _shared_variance(self, M: sp.csr_matrix, parts: tuple[sp.csr_matrix, ...]) -> np.ndarray:
        """:meth:`variance` through L⁻ᵀ: with C = M_r H̃_rᵀ = M_S H̃_Sᵀ + C_O (:meth:`_split`), the rows of
        L⁻¹Cᵀ are M_S (H̃_Sᵀ L⁻ᵀ) + C_O L⁻ᵀ, sparse-dense products whose cost is the effects a row
        holds, not n² (a grid: μ, one level per factor and its residual; 127,853 grids of 3,503 node
        means took 40 s of a 137 s release by row solves), and C V⁻¹X = M_S (H̃_Sᵀ V⁻¹X) + C_O V⁻¹X
        (``parts``: M's :meth:`_split`). L⁻ᵀ is taken a panel of columns at a time (a triangular solve
        against those columns of the identity), so that neither L⁻¹ nor H̃_SᵀL⁻ᵀ is ever whole: each
        row's squared norm is summed over the panels. Panels and rows in blocks of :data:`_RHS_BUDGET`
        numbers."""
        MS, MO, HS, HO = parts
        n = self.core_size
        CO = (MO @ HO).tocsr()
        fixed = M[:, :self.n_fixed].toarray() - MS @ (HS @ self.VinvX) - CO @ self.VinvX
        fixed = solve_triangular(self.wchol, fixed.T, lower=True, check_finite=False)
        Mr = M[:, self.n_fixed:]
        out = np.asarray(Mr.multiply(Mr).sum(axis=1)).ravel() + (fixed * fixed).sum(axis=0)
        # rows that share effects taken together: the rows of H̃_SᵀL⁻ᵀ and L⁻ᵀ they stream stay in cache
        order = _by_shared_effects(MS)
        MS, CO = MS[order], CO[order]
        width = max(1, min(n, _RHS_BUDGET // (n + HS.shape[0])))
        batch = max(1, _RHS_BUDGET // width)
        for c0 in range(0, n, width):
            unit = np.zeros((n, min(width, n - c0)), order="F")
            unit[np.arange(c0, c0 + unit.shape[1]), np.arange(unit.shape[1])] = 1.0
            panel = np.ascontiguousarray(solve_triangular(self.chol, unit, lower=True, trans="T",
                                                          overwrite_b=True, check_finite=False))  # L⁻ᵀ's columns
            Yt = HS @ panel  # those columns of H̃_SᵀL⁻ᵀ
            for start in range(0, M.shape[0], batch):
                half = MS[start:start + batch] @ Yt + CO[start:start + batch] @ panel
                out[order[start:start + half.shape[0]]] -= np.einsum("ij,ij->i", half, half)
        return np.maximum(out, 0.0)

    def covariance(self, M: sp.csr_matrix) -> np.ndarray:
        """M Cov(v | y) Mᵀ, dense (for a few rows)."""
        Mr, C, A = self._parts(sp.csr_matrix(M))
        return (Mr @ Mr.T).toarray() - C @ self._vinv(C.T) + A @ self._winv(A.T)

    def component_traces(self, edges: np.ndarray, n_fixed: int) -> np.ndarray:
        """tr Var(v_k | y) = J_k − tr(P H̃_k H̃_kᵀ) of each random block k, with P = V⁻¹ − V⁻¹X W⁻¹ XᵀV⁻¹:
        tr(V⁻¹G) = 2⟨tril V⁻¹, G⟩ − ⟨diag V⁻¹, diag G⟩ for symmetric G, from V⁻¹'s lower triangle
        (LAPACK potri) and the Gram matrices' lower panels (:class:`ComponentGrams`; where V was not
        built from them, each block's panels made and read in turn, :meth:`TrianglePanels.gram_inner`),
        and tr(V⁻¹XW⁻¹XᵀV⁻¹ H̃_kH̃_kᵀ) =
        ‖L_W⁻¹ (H̃_kᵀV⁻¹X)ᵀ‖²_F, a sparse product: n × n passes only over V⁻¹ and the panels."""
        low = self._inverse_lower()
        diag = np.diag(low).copy()
        sizes = [int(d) for d in np.diff(edges)]
        if self.grams is not None and sizes == self.grams[1].sizes:
            scales, grams = [float(v) for v in self.grams[0]], self.grams[1]
            inner, diags = grams.panels.lower_inner(low, grams.grams()), grams.diagonals()
        else:  # the scaled design's own blocks, each Gram matrix's panels read as they are made
            panels = TrianglePanels.of_size(self.core_size)
            scales, inner, diags = [1.0] * len(sizes), [], []
            for lo, hi in zip(edges[:-1], edges[1:]):
                total, d = panels.gram_inner(low, self.Ht[:, n_fixed + lo:n_fixed + hi])
                inner.append(total)
                diags.append(d)
        del low
        out = []
        for k, (lo, hi) in enumerate(zip(edges[:-1], edges[1:])):
            Hk = self.Ht[:, n_fixed + lo:n_fixed + hi]
            fixed = solve_triangular(self.wchol, np.asarray(Hk.T @ self.VinvX).T, lower=True, check_finite=False)
            out.append((hi - lo) - scales[k] * (2.0 * float(inner[k]) - float(diag @ diags[k]))
                       + float(np.vdot(fixed, fixed)))
        return np.array(out)

    def _inverse_lower(self) -> np.ndarray:
        """V⁻¹'s lower triangle (the upper 0) from the stored Cholesky factor: LAPACK potri on one copy
        of the factor (whose upper triangle is 0), no identity solved against."""
        inv, info = dpotri(self.chol, lower=1)
        if info != 0:
            raise np.linalg.LinAlgError(f"potri failed (info {info})")
        return inv


def _noise_plus_product(Hr: sp.spmatrix, s2: np.ndarray) -> np.ndarray:
    """Hr Hrᵀ + diag(s2), n × n dense and column-major, its lower triangle only (what a lower Cholesky
    factorisation reads, in place): the product a panel of columns at a time
    (:meth:`~dpopt.hierarchy.panels.TrianglePanels.lower_gram`; a whole sparse product of a dense
    result held ≈ 1.5× the dense array's memory beside it), the diagonal added in place."""
    V = TrianglePanels.of_size(Hr.shape[0]).lower_gram(Hr)
    V.reshape(-1, order="F")[:: V.shape[0] + 1] += s2
    return V


def _dual(H: sp.csr_matrix, scale: np.ndarray, s2: np.ndarray, n_fixed: int,
          grams: tuple[np.ndarray, ComponentGrams] | None = None) -> tuple[_DualSystem, float] | None:
    """The observations'-space system of :func:`gls_posterior` and log|V| + log|XᵀV⁻¹X|, or None
    where V or W is not numerically positive definite (the caller then takes the augmented form).
    With ``grams`` (the blocks' variances and Gram matrices) V = Σ_k σ²_k G_k + diag(s2)."""
    Ht = None
    if grams is None:
        Ht = (H @ sp.diags(scale)).tocsr()
        V = _noise_plus_product(Ht[:, n_fixed:], s2)
    else:
        V = grams[1].noise_plus(s2, grams[0])  # column-major, its lower triangle
    X = H[:, :n_fixed].toarray()  # the fixed effects' scale is 1
    try:
        L = cholesky(V, lower=True, check_finite=False, overwrite_a=True)  # in V's memory
        VinvX = cho_solve((L, True), X, check_finite=False)
        Lw = cholesky(X.T @ VinvX, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        return None
    logdet = 2.0 * float(np.sum(np.log(np.diag(L))) + np.sum(np.log(np.diag(Lw))))
    system = _DualSystem(H=H, scale=scale, s2=s2, n_fixed=n_fixed, chol=L, VinvX=VinvX, wchol=Lw, grams=grams)
    if Ht is not None:
        system.__dict__["Ht"] = Ht  # already formed: cached_property's slot
    return system, logdet


def _without_grams(system: _DualSystem) -> _DualSystem:
    """``system`` without its Gram matrices (the formed H̃ kept)."""
    out = replace(system, grams=None)
    if "Ht" in system.__dict__:
        out.__dict__["Ht"] = system.__dict__["Ht"]
    return out


def _dual_cheaper(n: int, q: int, n_fixed: int, n_local: int, dense_max: int) -> bool:
    """The observations' space is taken where the n × n system is small (n ≤ ``dense_max``) and no
    larger than the fewest rows the augmented form's core can have (the random effects not
    eliminated as local blocks; its duals come on top): e.g. 627 node means of 17,000 interaction
    levels and 127,853 grids, where every average-information step of the augmented form needs a
    solve per level. 4,437 node means of 8,596 levels at 2·10⁷ records made a sparse core of 9,280
    rows whose traces took 33 s a step against ≈ 4 s for the n × n factor. It decides the work,
    never the answer (both forms are tested against each other)."""
    return n <= dense_max and n <= q - n_fixed - n_local


@dataclass(frozen=True)
class GLSPosterior:
    """Posterior of the effects b of y = H b + ε (:func:`gls_posterior`).

    ``mean`` is E[b | y]; ``loglik`` the REML log-likelihood
    −½[(n − p) log 2π + log|V| + log|X'V⁻¹X| + r'V⁻¹r] (V = Cov(y), r = y − X β̂, p fixed effects);
    :meth:`variance` / :meth:`covariance` give Var(L b | y) from the stored factorisation. With
    ``perm`` the factorisation holds the effects in the order ``perm`` (local ones last) while
    ``mean`` and the columns of L stay in the caller's order.
    """

    mean: np.ndarray
    loglik: float
    n_fixed: int
    n_local: int
    scale: np.ndarray = field(repr=False)
    #: None once released (:func:`means_only`): :meth:`variance` and :meth:`covariance` then refuse
    system: _System | _DualSystem | None = field(repr=False, compare=False)
    perm: np.ndarray | None = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:
        core = "released" if self.system is None else self.system.core_size
        return (f"GLSPosterior(n_effects={self.mean.size}, n_fixed={self.n_fixed}, n_local={self.n_local}, "
                f"core={core}, loglik={self.loglik:.6g})")

    def _factored(self) -> _System | _DualSystem:
        if self.system is None:
            raise RuntimeError("this posterior's factorisation was released (means_only): refit to ask for variances")
        return self.system

    def _scaled(self, L: Any) -> sp.csr_matrix:
        L = sp.csr_matrix(L, dtype=float)
        if L.shape[1] != self.mean.size:
            raise _fail("L", f"must have one column per effect ({self.mean.size})", L.shape)
        if self.perm is not None:
            L = L[:, self.perm]
        return (L @ sp.diags(self.scale)).tocsr()

    def variance(self, L: Any) -> np.ndarray:
        """diag(L Cov(b | y) Lᵀ): the posterior variance of each row of ``L`` (k × q, sparse or
        dense) times b, by solves with the stored factor in blocks of right-hand sides."""
        return self._factored().variance(self._scaled(L))

    def covariance(self, L: Any) -> np.ndarray:
        """L Cov(b | y) Lᵀ, dense k × k (for a few rows)."""
        cov = self._factored().covariance(self._scaled(L))
        return 0.5 * (cov + cov.T)


def _check_kernel(H: Any, y: Any, s2: Any, prior_var: Any, n_fixed: Any, n_local: Any
                  ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, int, int]:
    if not sp.issparse(H):
        H = np.asarray(H, dtype=float)
        if H.ndim != 2:
            raise _fail("H", "must be a 2-D matrix (observations × effects)", H.shape)
    H = sp.csr_matrix(H, dtype=float)
    H.eliminate_zeros()
    n, q = H.shape
    if not np.all(np.isfinite(H.data)):
        raise _fail("H", "must hold finite numbers", H.data[~np.isfinite(H.data)])
    y, s2, prior_var = (np.asarray(v, dtype=float) for v in (y, s2, prior_var))
    if isinstance(n_fixed, bool) or not isinstance(n_fixed, int | np.integer) or not 0 < n_fixed <= q:
        raise _fail("n_fixed", f"must be an int in 1 … {q} (the number of columns of `H`)", n_fixed)
    if isinstance(n_local, bool) or not isinstance(n_local, int | np.integer) or not 0 <= n_local <= q - n_fixed:
        raise _fail("n_local", f"must be an int in 0 … {q - n_fixed} (trailing random effects)", n_local)
    if y.shape != (n,) or not np.all(np.isfinite(y)):
        raise _fail("y", f"must hold {n} finite numbers (one per row of `H`)", y)
    if s2.shape != (n,) or not np.all(np.isfinite(s2) & (s2 > 0)):
        raise _fail("s2", f"must hold {n} finite numbers > 0 (one noise variance per row of `H`)", s2)
    if prior_var.shape != (q - n_fixed,) or not np.all(np.isfinite(prior_var) & (prior_var >= 0)):
        raise _fail("prior_var", f"must hold {q - n_fixed} finite numbers >= 0 (one per random effect)", prior_var)
    if np.linalg.matrix_rank(H[:, :n_fixed].toarray()) < n_fixed:
        raise _fail("H", "must have fixed-effect columns of full rank (μ identifiable from the rows)", H.shape)
    return H, y, s2, prior_var, int(n_fixed), int(n_local)


def _folded(H_local: sp.csr_matrix, blocks: np.ndarray) -> np.ndarray:
    """Rows whose local nonzeros all lie in one block (or none): folded into the precision."""
    counts = np.diff(H_local.indptr)
    fold = counts == 0
    busy = np.flatnonzero(~fold)
    if busy.size:
        lab = blocks[H_local.indices]
        starts = H_local.indptr[busy]
        fold[busy] = np.minimum.reduceat(lab, starts) == np.maximum.reduceat(lab, starts)
    return fold


def _sparse_enough(H_core: sp.csr_matrix) -> np.ndarray:
    """Rows cheap enough to fold into the effects' precision: a folded row of m effects adds an
    m × m block to it (a map-wide node's row touches every level of every factor and would make
    the core dense: 16,830 levels, 2.8·10⁸ nonzeros, 16 GiB at 2·10⁷ synthetic records), so rows are
    folded from the fewest effects up while Σ m² stays within :data:`_RHS_BUDGET`; the others keep
    their dual variable (one row and m nonzeros of the core each). Work, never the answer."""
    m = np.diff(H_core.indptr).astype(np.float64)
    order = np.argsort(m, kind="stable")
    ok = np.zeros(m.size, dtype=bool)
    ok[order] = np.cumsum(m[order] ** 2) <= _RHS_BUDGET
    return ok


def _block_cholesky(D: sp.csr_matrix, blocks: np.ndarray) -> tuple[sp.csr_matrix, float]:
    """L⁻¹ with L Lᵀ = −D, and log|det D|, for the block-diagonal D < 0 (a block: equal
    ``blocks`` labels; −D = I + a Gram matrix, so every block is well inside the definite cone),
    in stacks of blocks of one size (numpy's batched Cholesky). Kept as a factor, not as D⁻¹:
    an explicit inverse of a block whose data terms dwarf its prior loses the digits the Schur
    complement needs when the noise variances are tiny."""
    n = D.shape[0]
    lab = np.unique(blocks, return_inverse=True)[1].ravel()
    order, size = np.argsort(lab, kind="stable"), np.bincount(lab, minlength=1)
    start = np.cumsum(size) - size
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n) - np.repeat(start, size)
    coo = D.tocoo()
    rows, cols, vals, logdet = [], [], [], 0.0
    for s in np.unique(size[size > 0]):
        ids = np.flatnonzero(size == s)
        slot = np.full(size.size, -1)
        slot[ids] = np.arange(ids.size)
        on = slot[lab[coo.row]] >= 0
        stack = np.zeros((ids.size, s, s))
        stack[slot[lab[coo.row[on]]], pos[coo.row[on]], pos[coo.col[on]]] = coo.data[on]
        L = np.linalg.cholesky(-stack)
        logdet += 2.0 * float(np.sum(np.log(np.diagonal(L, axis1=1, axis2=2))))
        members = order[start[ids][:, None] + np.arange(s)]
        rows.append(np.repeat(members, s, axis=1).ravel())
        cols.append(np.tile(members, (1, s)).ravel())
        vals.append(np.linalg.solve(L, np.broadcast_to(np.eye(s), L.shape)).ravel())
    if not rows:
        return sp.csr_matrix((n, n)), 0.0
    return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n)), logdet


def _reduce(H: sp.csr_matrix, s2: np.ndarray, scale: np.ndarray, n_fixed: int, blocks: np.ndarray) -> tuple[Any, ...]:
    """The augmented system with the rows whose local effects lie in one block folded into the
    effects' precision and the local effects (the last ``blocks.size``) eliminated, their block
    then block-diagonal, D = −L Lᵀ: (duals' rows, folded rows, Ht, L⁻¹, log|det D|, K_we, KL = K_we L⁻ᵀ,
    R = K_ww − K_we D⁻¹ K_ew = K_ww + KL KLᵀ)."""
    n, q = H.shape
    q_w = q - blocks.size
    fold = _folded(H[:, q_w:], blocks) & _sparse_enough(H[:, :q_w])
    a, f = np.flatnonzero(~fold), np.flatnonzero(fold)
    Ht = (H @ sp.diags(scale)).tocsr()
    Ha, Hf = Ht[a], Ht[f]
    Kvv = -(sp.diags(np.concatenate([np.zeros(n_fixed), np.ones(q - n_fixed)])) + Hf.T @ sp.diags(1.0 / s2[f]) @ Hf)
    Kvv = Kvv.tocsr()
    Linv, logdet_d = _block_cholesky(Kvv[q_w:, q_w:], blocks)
    K_ww = sp.bmat([[sp.diags(s2[a]), Ha[:, :q_w]], [Ha[:, :q_w].T, Kvv[:q_w, :q_w]]], format="csr")
    K_we = sp.vstack([Ha[:, q_w:], Kvv[:q_w, q_w:]], format="csr")
    KL = (K_we @ Linv.T).tocsr()
    return a, f, Ht, Linv, logdet_d, K_we, KL, K_ww + KL @ KL.T


def gls_posterior(H: Any, y: Any, s2: Any, prior_var: Any, *, n_fixed: int = 1, n_local: int = 0,
                  local_blocks: Any = None, dense_max: int = 6000, space: str = "auto",
                  grams: ComponentGrams | None = None) -> GLSPosterior:
    """Posterior of b in y = H b + ε by the augmented mixed-model equations (models/crossed.md §2).

    Parameters
    ----------
    H : sparse or dense matrix, n × q
        Design: the first ``n_fixed`` columns are fixed effects (flat prior), the others random.
    y, s2 : array-like, n
        Observations and their independent noise variances (> 0).
    prior_var : array-like, q − n_fixed
        Prior variance of each random effect (≥ 0; 0 pins the effect at 0).
    n_fixed : int
        Number of fixed effects (≥ 1; REML needs one).
    n_local : int
        The last ``n_local`` random effects are eliminated exactly first (e.g. the grid-level
        residuals): only rows touching local effects of two or more blocks keep a dual variable.
        Any value gives the same answer; it decides the size of the core system.
    local_blocks : array-like of int, n_local, optional
        Block label of each local effect (default: each its own block), e.g. an interaction level
        and its grids' residuals: the local block is inverted block by block.
    dense_max : int
        The core system is factored dense (two Cholesky factors) up to this many rows, else by SuperLU.
    space : {"auto", "augmented", "observations"}
        Solve the augmented equations (effects' space, below) or factor V = Cov(y), n × n, in the
        observations' space (:class:`_DualSystem`; taken by "auto" where n ≤ ``dense_max`` and n is
        under half the effects left in the augmented core, or asked for; the augmented form is used
        if V is not numerically positive definite). Both give the same posterior and likelihood.
    grams : ComponentGrams, optional
        The Gram matrices of blocks of ``H``'s random columns (of this very object ``H``), used in
        the observations' space where ``prior_var`` is constant within each block; else ignored.

    Returns
    -------
    GLSPosterior
        With v = b / scale (scale = 1 for fixed effects, √prior_var for random ones) the symmetric
        system K = [[diag(s2), H̃], [H̃ᵀ, −diag(0, I)]], H̃ = H·diag(scale), gives
        K [r; v̂] = [y; 0], b̂ = scale·v̂ (Henderson's equations) and r = S⁻¹(y − H b̂), and
        log|det K| + yᵀr = log|V| + log|X'V⁻¹X| + r'V⁻¹r (Harville 1977): REML costs one
        factorisation of K's Schur complement R and no dense n × n matrix.
    """
    given = H
    H, y, s2, prior_var, n_fixed, n_local = _check_kernel(H, y, s2, prior_var, n_fixed, n_local)
    blocks = np.arange(n_local) if local_blocks is None else np.asarray(local_blocks)
    if blocks.shape != (n_local,) or blocks.dtype.kind not in "iu":
        raise _fail("local_blocks", f"must hold {n_local} int labels (one per local effect)", blocks)
    scale = np.concatenate([np.ones(n_fixed), np.sqrt(prior_var)])
    if space not in ("auto", "augmented", "observations"):
        raise _fail("space", "must be 'auto', 'augmented' or 'observations'", space)
    found, block = None, _grams_for(grams, given, n_fixed, prior_var)
    if space == "observations" or (space == "auto" and _dual_cheaper(*H.shape, n_fixed, n_local, dense_max)):
        found = _dual(H, scale, s2, n_fixed, block)
    system, logdet = found if found is not None else _augmented(H, s2, scale, n_fixed, blocks, dense_max)
    v, r = system.solve(y)
    loglik = -0.5 * ((y.size - n_fixed) * _LOG2PI + logdet + float(y @ r))
    return GLSPosterior(mean=scale * v, loglik=loglik, n_fixed=n_fixed, n_local=n_local, scale=scale, system=system)


def component_profile(H: Any, y: Any, s2: Any, sigma2: np.ndarray, sizes: list[int], j: int, values: Any, *,
                      n_local: int = 0, grams: ComponentGrams | None = None, dense_max: int = 6000,
                      local_blocks: Any = None) -> np.ndarray:
    """The REML log-likelihood of :func:`gls_posterior` (one fixed effect) at each of ``values`` for
    block j's variance, the other blocks' at ``sigma2`` (``sizes`` the blocks' widths). Where
    there are at most ``dense_max`` observations (V is n × n dense) and more values than its work
    counts in factorisations (:data:`_EIGEN_WORK`), one eigen-decomposition serves every value
    (:meth:`ComponentGrams.profile_loglik`; taken even where :func:`gls_posterior` itself prefers the
    augmented form); else, or where V is not numerically positive definite, one :func:`gls_posterior`
    per value. The same numbers either way (tested)."""
    sig = np.asarray(sigma2, dtype=float)
    values = np.asarray(values, dtype=float).ravel()
    grams = grams if grams is not None else ComponentGrams(H, sizes)
    n = H.shape[0]
    share = min(int(sizes[j]), n) / max(n, 1)  # the eigenproblem's size against n
    if n <= dense_max and _EIGEN_WORK[0] + _EIGEN_WORK[1] * share + _EIGEN_WORK[2] * share ** 3 < values.size:
        try:
            return grams.profile_loglik(y, s2, sig, j, values)
        except np.linalg.LinAlgError:
            pass
    kernel = dict(n_local=n_local, local_blocks=local_blocks, dense_max=dense_max, grams=_formed(grams))
    first = None
    if values.size > 1 and 0 < sizes[j] <= _LOW_RANK_MAX:
        without = sig.copy()
        without[j] = 0.0
        first = gls_posterior(H, y, s2, np.repeat(without, sizes), **kernel)
        factor, solve = first.system.work()
        if sizes[j] * solve + _EIGEN_FLOPS * sizes[j] ** 3 < (values.size - 1) * factor:
            return _low_rank_profile(first, H, y, sizes, j, values)
    out = []
    for v in values:  # a few values, or the block too large for one eigenproblem: one factorisation each
        trial = sig.copy()
        trial[j] = v
        out.append(first.loglik if v == 0.0 and first is not None
                   else float(gls_posterior(H, y, s2, np.repeat(trial, sizes), **kernel).loglik))
    return np.array(out)


#: a block of at most this many effects may take :func:`_low_rank_profile` (its r × r eigenproblem,
#: 4,096² doubles = 128 MiB, ≈ 3·10¹¹ flops); the flops of LAPACK's symmetric eigensolver with
#: vectors per r³. Work, never the answer
_LOW_RANK_MAX, _EIGEN_FLOPS = 4096, 9.0


def _low_rank_profile(first: GLSPosterior, H: sp.csr_matrix, y: np.ndarray, sizes: list[int], j: int,
                      values: np.ndarray) -> np.ndarray:
    """:func:`component_profile` from one factorisation: ``first`` the posterior with block j's
    variance at 0 (REML projection P₀, likelihood ℓ₀), Z = H_j the block's columns.

    V(t) = V₀ + tZZᵀ. In error contrasts K (KᵀX = 0), P(t) = K(KᵀV(t)K)⁻¹Kᵀ and ℓ_R(t) is the
    likelihood of Kᵀy; the determinant lemma and Woodbury on KᵀV(t)K = KᵀV₀K + tKᵀZZᵀK give, with
    M = ZᵀP₀Z = UΛUᵀ and c = UᵀZᵀP₀y,
    ℓ_R(t) = ℓ₀ − ½[Σ_i log(1 + tλ_i) − Σ_i c_i² t/(1 + tλ_i)] (Harville 1977, §3: the REML
    likelihood's dependence on one variance component). M costs r solves with the factored system
    (:meth:`_System.project`, in blocks of right-hand sides), then one r × r eigenproblem: every
    value is exact (tested against one :func:`gls_posterior` each)."""
    edges = 1 + np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    Z = sp.csc_matrix(H[:, edges[j]:edges[j + 1]], dtype=float)
    system = first.system
    r = Z.shape[1]
    batch = max(1, min(r, _RHS_BUDGET // max(H.shape[0], 1)))
    M = np.empty((r, r))
    for lo in range(0, r, batch):
        M[:, lo:lo + batch] = Z.T @ system.project(Z[:, lo:lo + batch].toarray())
    lam, U = eigh(0.5 * (M + M.T), overwrite_a=True, check_finite=False)
    lam = np.maximum(lam, 0.0)
    c2 = (U.T @ (Z.T @ system.project(y[:, None])[:, 0])) ** 2
    t = np.asarray(values, dtype=float)[:, None]
    return first.loglik - 0.5 * (np.sum(np.log1p(t * lam), axis=1) - np.sum(c2 * t / (1.0 + t * lam), axis=1))


def _formed(grams: ComponentGrams | None) -> ComponentGrams | None:
    """``grams`` where its matrices are formed already, else None: one evaluation of
    :func:`gls_posterior` then costs one sparse product of the design, not every block's Gram matrix."""
    return grams if grams is not None and grams._grams is not None else None


#: the work of :meth:`ComponentGrams.profile_loglik` in factorisations of V (n³/3 each): one, the
#: triangular solves of the block (2n³·share, as six factorisations at share 1) and the symmetric
#: eigenproblem (≈ 4n³·share³: 3.8 s against 0.3 s for a Cholesky factor at n = 3,503). Against one
#: factorisation per value, :func:`component_profile` takes the cheaper. Work, never the answer
_EIGEN_WORK = (1.0, 6.0, 12.0)


def _grams_for(grams: Any, H: Any, n_fixed: int, prior_var: np.ndarray) -> tuple[np.ndarray, ComponentGrams] | None:
    """(σ²_k, ``grams``) where ``grams`` were made for this very design ``H`` and ``prior_var`` is
    constant within each of their blocks; else None (V is then formed from the design)."""
    if grams is not None and not isinstance(grams, ComponentGrams):
        raise _fail("grams", "must be a ComponentGrams of this design or None", type(grams).__name__)
    if grams is None or grams.H is not H or grams.n_fixed != n_fixed:
        return None
    sig = grams.block_variances(prior_var)
    return None if sig is None else (sig, grams)


def _augmented(H: sp.csr_matrix, s2: np.ndarray, scale: np.ndarray, n_fixed: int, blocks: np.ndarray,
               dense_max: int) -> tuple[_System, float]:
    """The augmented form's factored system and log|det K| (the folded rows, the local block, the core)."""
    a, f, Ht, Linv, logdet_d, K_we, KL, R = _reduce(H, s2, scale, n_fixed, blocks)
    core, logdet_r = _factor(R, a.size, dense_max)
    system = _System(core=core, Linv=Linv, KL=KL, K_we=K_we, Ht=Ht, s2=s2, agg=a, fold=f)
    return system, float(np.sum(np.log(s2[f]))) + logdet_d + logdet_r


# ------------------------------------------------------------------------------------------------ crossed
@dataclass(frozen=True)
class FactorEffects:
    """Posterior ``mean`` and ``var`` of u_f[j] for every level (the caller's codes in ``levels``)."""

    levels: np.ndarray
    mean: np.ndarray
    var: np.ndarray


@dataclass(frozen=True)
class NodeEstimate:
    """Posterior ``mean`` and ``var`` of rows of A_new θ, and the interval ``halfwidth`` z·√var."""

    mean: np.ndarray
    var: np.ndarray
    halfwidth: np.ndarray


@dataclass(frozen=True)
class CrossedFit:
    """The fitted crossed model (:func:`fit_crossed`).

    ``sigma2`` maps each factor (and :data:`RESIDUAL` when fitted) to its variance component;
    ``grid_mean``/``grid_var`` are E[θ_g | y] and Var(θ_g | y) (which holds σ²_e and the σ²_f of
    levels the data says nothing about); ``grid_halfwidth`` = z·√grid_var with z the normal
    quantile of (1 + confidence)/2: the grid's own interval before the engine's bounding allowance.
    """

    sigma2: dict[str, float]
    mu: float
    mu_var: float
    effects: dict[str, FactorEffects]
    grid_mean: np.ndarray
    grid_var: np.ndarray
    grid_halfwidth: np.ndarray
    loglik: float
    converged: bool
    status: str
    n_evaluations: int
    confidence: float
    z: float
    posterior: GLSPosterior = field(repr=False)
    grid_map: sp.csr_matrix = field(repr=False, compare=False)

    def __repr__(self) -> str:
        comps = ", ".join(f"{k}={v:.4g}" for k, v in self.sigma2.items())
        return (f"CrossedFit(grids={self.grid_mean.size}, mu={self.mu:.4g}, sigma2=({comps}), "
                f"loglik={self.loglik:.6g}, converged={self.converged})")

    def interval_halfwidth(self, var: Any) -> np.ndarray:
        """z·√var at the fit's confidence (e.g. of :attr:`grid_var`)."""
        return self.z * np.sqrt(np.maximum(np.asarray(var, dtype=float), 0.0))

    def node(self, A_new: Any) -> NodeEstimate:
        """Posterior of every row of ``A_new`` θ (k × G weights over the grids): a node's answer."""
        A_new = _as_design(A_new, "A_new", self.grid_mean.size)
        L = (A_new @ self.grid_map).tocsr()
        var = self.posterior.variance(L)
        return NodeEstimate(mean=A_new @ self.grid_mean, var=var, halfwidth=self.interval_halfwidth(var))


def _as_design(A: Any, name: str, n_grids: int | None) -> sp.csr_matrix:
    if not sp.issparse(A):
        A = np.asarray(A, dtype=float)
        if A.ndim != 2:
            raise _fail(name, "must be a 2-D matrix (nodes × grids)", A.shape)
    A = sp.csr_matrix(A, dtype=float, copy=True)
    A.eliminate_zeros()
    if n_grids is not None and A.shape[1] != n_grids:
        raise _fail(name, f"must have one column per grid ({n_grids})", A.shape)
    if not np.all(np.isfinite(A.data)):
        raise _fail(name, "must hold finite numbers", A.data[~np.isfinite(A.data)])
    return A


def _check_factors(factors: Any) -> tuple[list[str], list[np.ndarray], list[np.ndarray]]:
    """Names, compact codes 0 … J−1 and the caller's level values of every factor."""
    if not isinstance(factors, Mapping):
        raise _fail("factors", "must be a mapping name -> int code array (one code per grid)", factors)
    names, codes, levels, size = [], [], [], None
    for name, raw in factors.items():
        if not isinstance(name, str) or not name or name == RESIDUAL:
            raise _fail("factors", f"must have non-empty str names other than {RESIDUAL!r}", name)
        arr = np.asarray(raw)
        if arr.ndim != 1 or arr.dtype.kind not in "iu" or (size is not None and arr.size != size):
            raise _fail(f"factors[{name!r}]", "must be a 1-D int array of one code per grid, all of one length", arr)
        size = arr.size
        lev, inv = np.unique(arr, return_inverse=True)
        names.append(name), codes.append(inv.ravel()), levels.append(lev)
    return names, codes, levels


def _check_crossed(factors: Any, A: Any, y: Any, s2: Any, residual: bool, confidence: float) -> tuple[Any, ...]:
    names, codes, levels = _check_factors(factors)
    A = _as_design(A, "A", codes[0].size if codes else None)
    n, G = A.shape
    if G == 0 or n == 0:
        raise _fail("A", "must have at least one row and one grid", A.shape)
    if not np.any(np.asarray(A.sum(axis=1)).ravel() != 0):
        raise _fail("A", "must have a row of nonzero weight sum (else μ is not identifiable)", A.shape)
    y, s2 = np.asarray(y, dtype=float), np.asarray(s2, dtype=float)
    if y.shape != (n,) or not np.all(np.isfinite(y)):
        raise _fail("y", f"must hold {n} finite numbers (one per row of `A`)", y)
    if s2.shape != (n,) or not np.all(np.isfinite(s2) & (s2 > 0)):
        raise _fail("s2", f"must hold {n} finite numbers > 0 (one noise variance per row of `A`)", s2)
    if not isinstance(residual, bool):
        raise _fail("residual", "must be True or False", residual)
    return names, codes, levels, A, y, s2, check_confidence(confidence)


def _design(codes: list[np.ndarray], G: int, residual: bool) -> tuple[sp.csr_matrix, list[int]]:
    """grid_map (G × q): θ = grid_map · (μ, u_1 … u_F, e); and the size of each random block."""
    blocks = [sp.csr_matrix(np.ones((G, 1)))]
    sizes = []
    for c in codes:
        J = int(c.max()) + 1
        blocks.append(sp.csr_matrix((np.ones(G), (np.arange(G), c)), shape=(G, J)))
        sizes.append(J)
    if residual:
        blocks.append(sp.identity(G, format="csr"))
        sizes.append(G)
    return sp.hstack(blocks, format="csr"), sizes


def _local_factor(codes: list[np.ndarray], A: sp.csr_matrix, residual: bool = True) -> int | None:
    """The factor whose levels, each with its grids' residuals, make the smallest core when
    eliminated as local blocks (rows inside one level fold; the level's effect leaves the core),
    or None if the residuals alone do better. Only factors of at most :data:`_LOCAL_MEAN_GRIDS`
    grids per level on average qualify, and their blocks must fit the budget (Σ (grids + 1)²).
    Without grid residuals (``residual`` False) the levels are the blocks alone, and a factor pays
    where the rows spanning two of its levels are fewer than its levels (the core sizes are then
    counted against keeping every level in the core)."""
    best, best_core = None, int(np.sum(np.diff(A.indptr) > 1)) if residual else 0
    for i, c in enumerate(codes):
        counts = np.bincount(c)
        if c.size > _LOCAL_MEAN_GRIDS * counts.size or float(np.sum((counts + 1.0) ** 2)) > _RHS_BUDGET:
            continue
        core = int(np.sum(~_folded(A, c))) - counts.size
        if core < best_core:
            best, best_core = i, core
    return best


def _plan(codes: list[np.ndarray], sizes: list[int], A: sp.csr_matrix,
          residual: bool) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """The kernel's order of the components (the local factor, :func:`_local_factor`, moved last
    before the residuals), the matching column permutation of the effects (μ first) and its
    ``n_local``/``local_blocks``: the residuals, with that factor's levels as blocks."""
    comps = np.arange(len(sizes))
    k = _local_factor(codes, A, residual) if codes else None
    if k is not None:
        comps = np.concatenate([comps[(comps != k) & (comps < len(codes))], [k],
                                [len(codes)] if residual else []]).astype(np.int64)
    starts = 1 + np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    perm = np.concatenate([[0]] + [starts[c] + np.arange(sizes[c]) for c in comps]).astype(np.int64)
    if not residual:  # the local factor's levels, each its own block (rows inside one level fold)
        return comps, perm, {"n_local": 0 if k is None else sizes[k]}
    if k is None:
        return comps, perm, {"n_local": A.shape[1]}
    blocks = np.concatenate([np.arange(sizes[k]), codes[k]])
    return comps, perm, {"n_local": sizes[k] + A.shape[1], "local_blocks": blocks}


def _kernel_order(codes: list[np.ndarray], sizes: list[int], A: sp.csr_matrix, grid_map: sp.csr_matrix,
                  residual: bool) -> tuple[sp.csr_matrix, list[int], np.ndarray, np.ndarray, dict[str, Any]]:
    """(H = A·grid_map in the kernel's column order, the blocks' widths in that order, the components'
    order, the column permutation, the kernel's keywords with its Gram matrices): :func:`_plan`
    applied to a design."""
    comps, perm, kernel = _plan(codes, sizes, A, residual)
    H, inner = (A @ grid_map).tocsr()[:, perm], [sizes[c] for c in comps]
    packed = len(inner) * H.shape[0] * (H.shape[0] + 1) // 2
    # formed only if the observations' space is taken, and held only within the budget
    kernel["grams"] = ComponentGrams(H, inner) if packed <= _GRAM_BUDGET else None
    return H, inner, comps, perm, kernel


def fit_kernel(fit: "CrossedFit", A: Any) -> tuple[sp.csr_matrix, list[int], np.ndarray, dict[str, Any]]:
    """The kernel :func:`fit_crossed` used for ``fit`` (its observations' matrix ``A``): (H in the
    kernel's column order, the blocks' widths in that order, ``order`` with ``order[i]`` the
    component (index into ``fit.sigma2``) of block i, and the keywords of :func:`gls_posterior` /
    :func:`component_profile`: ``n_local``, ``local_blocks``, ``grams``). A profile over the same
    elimination as the fit is the same likelihood and costs what the fit's evaluations cost."""
    names = list(fit.sigma2)
    residual = RESIDUAL in fit.sigma2
    sizes = [fit.effects[k].levels.size if k in fit.effects else fit.grid_mean.size for k in names]
    gm = sp.csr_matrix(fit.grid_map)
    starts = 1 + np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    codes = [gm[:, a:a + n].tocsr().indices for k, a, n in zip(names, starts, sizes) if k != RESIDUAL]
    H, inner, comps, _, kernel = _kernel_order(codes, sizes, sp.csr_matrix(A), gm, residual)
    return H, inner, comps, kernel


def _start(y: np.ndarray, s2: np.ndarray, n_comp: int, spread: float) -> np.ndarray:
    """Moment start: the spread of y beyond its mean noise variance, shared equally (log σ²/spread)."""
    excess = max(float(np.var(y)) - float(np.mean(s2)), 0.05 * spread)
    return np.full(n_comp, math.log(excess / n_comp / spread))


@dataclass
class _Objective:
    """ℓ_R as a function of x = log(σ²/spread), counting factorisations."""

    H: sp.csr_matrix
    y: np.ndarray
    s2: np.ndarray
    sizes: list[int]
    kernel: dict[str, int]
    spread: float
    low: float
    calls: int = 0
    singular: int = 0
    best: tuple[np.ndarray, GLSPosterior] | None = None

    def post(self, x: np.ndarray) -> GLSPosterior:
        self.calls += 1
        return gls_posterior(self.H, self.y, self.s2, np.repeat(self.spread * np.exp(x), self.sizes), **self.kernel)

    def admissible(self, x: np.ndarray) -> GLSPosterior | None:
        """:meth:`post`, or None where its factorisation fails: at noise variances many orders below
        the components (10⁻¹⁴ of them on small instances) a trial σ² can make the eliminated system
        numerically indefinite. The search treats such a point as ℓ_R = −∞ and counts it."""
        if not np.all(np.isfinite(x)):  # an optimiser's step from a point of ℓ_R = −∞
            self.singular += 1
            return None
        try:
            post = self.post(x)
        except (np.linalg.LinAlgError, RuntimeError) as e:  # RuntimeError: splu's "Factor is exactly singular"
            if isinstance(e, RuntimeError) and "singular" not in str(e):
                raise
            self.singular += 1
            return None
        if self.best is None or post.loglik >= self.best[1].loglik:
            self.best = (np.array(x, dtype=float), post)
        return post

    def at(self, x: np.ndarray) -> GLSPosterior | None:
        """:meth:`admissible` at x, without a new factorisation where x is the best point so far (a
        search that only climbs returns it)."""
        if self.best is not None and np.array_equal(self.best[0], x):
            return self.best[1]
        return self.admissible(x)

    def negll(self, x: np.ndarray) -> float:
        post = self.admissible(x)
        return math.inf if post is None else -post.loglik


def _score(post: GLSPosterior, y: np.ndarray, sizes: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Gradient of −ℓ_R in x_k = log σ²_k, ½(J_k − tr Var(v_k | y) − |v̂_k|²), and the average
    information ½ f_kᵀ P f_l, f_k = H̃_k v̂_k (Gilmour, Thompson & Cullis 1995), in the same x."""
    system, nf = post.system, post.n_fixed
    v, _ = system.solve(y)
    edges = np.concatenate([[0], np.cumsum(sizes)])
    traces = system.component_traces(edges, nf)
    g, F = np.empty(len(sizes)), np.empty((y.size, len(sizes)))
    for k in range(len(sizes)):
        vk = v[nf + edges[k]:nf + edges[k + 1]]
        g[k] = 0.5 * (sizes[k] - traces[k] - vk @ vk)
        F[:, k] = system.Ht[:, nf + edges[k]:nf + edges[k + 1]] @ vk
    PF = np.column_stack([system.solve(F[:, k])[1] for k in range(len(sizes))])
    return g, 0.5 * F.T @ PF


def _newton(obj: _Objective, x: np.ndarray, post: GLSPosterior) -> tuple[np.ndarray, np.ndarray, float]:
    """At x: the exact slopes g of −ℓ_R, the average-information step on the free coordinates (at
    a bound, a slope pushing outward is not free) and the rise of ℓ_R it predicts, ½ gᵀ AI⁻¹ g."""
    g, AI = _score(post, obj.y, obj.sizes)
    free = ~(((x <= obj.low + 1e-9) & (g > 0)) | ((x >= _LOG_HIGH - 1e-9) & (g < 0)))
    A = AI[np.ix_(free, free)]
    d = np.sqrt(np.maximum(np.diag(A), 1e-300))  # Jacobi scaling: the step is the same in any scale of σ²
    step = np.zeros_like(x)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow leaves a step that is not finite: refused
        step[free] = -np.linalg.solve(A / np.outer(d, d) + 1e-10 * np.eye(A.shape[0]), g[free] / d) / d
    return np.where(free, g, 0.0), step, -0.5 * float(g @ step)


def _move(step: np.ndarray) -> np.ndarray:
    """The change of x = log σ² made by an average-information step ``step`` (:func:`_newton`, in
    x): the step is taken in σ² itself, σ² ← σ²(1 + step) (Gilmour, Thompson & Cullis 1995 step
    in σ²; in x the scaled step is the same to first order), so a step of −1 or below reaches the
    lower bound at once. Taken in log σ² instead, a component whose REML value is 0 approaches it
    geometrically while ℓ_R flattens, each step halved: 47 steps and 354 factorisations on one fit
    of 7 components (amounts_synth at ε = 10, seed 1001) against 9 and 18 this way."""
    return np.log(np.maximum(1.0 + step, 1e-300))


def _ai_search(obj: _Objective, x: np.ndarray, *, max_iter: int) -> tuple[np.ndarray, bool, str]:
    """Average-information (Fisher-scoring) steps (:func:`_move`) within the bounds, halved until
    ℓ_R does not fall; converged when the step would raise ℓ_R by less than 10⁻³·:data:`_GAIN`, or
    when a step predicted to raise it by less than :data:`_GAIN` does not (its halvings could gain
    less than the tolerance: on a large system whose traces are estimated, :meth:`_System._probed_trace`,
    such a step fails by the estimate's noise, and each halving cost a 20 s factorisation, up to 30), or,
    should rounding stop the halving, by less than :data:`_GAIN` (:func:`_newton`). The predicted
    rise ½ gᵀ AI⁻¹ g is the same in any scale of σ²; a slope in log σ² is not (it vanishes with σ²),
    and a test on it stopped the search with a component at 10⁻⁸ where ℓ_R still rose 0.11 towards
    its REML value 0.38 (tests/hierarchy/test_crossed.py, seed 201)."""
    post = obj.admissible(x)
    if post is None:
        return x, False, "average-information search not started (the factorisation failed at its start)"
    for it in range(max_iter):
        g, step, gain = _newton(obj, x, post)
        if not (np.all(np.isfinite(step)) and math.isfinite(gain)):  # AI overflowed: no step to take
            return x, False, f"average-information step not finite after {it} iterations"
        if gain < 1e-3 * _GAIN:
            return x, True, f"average-information steps converged in {it} iterations"
        for _ in range(30):
            trial = np.clip(x + _move(step), obj.low, _LOG_HIGH)
            new = obj.admissible(trial)  # a point whose factorisation fails: ℓ_R = −∞, the step halved
            if new is not None and new.loglik >= post.loglik:
                x, post = trial, new
                break
            new = None  # its n × n factor is released before the next trial's is built
            if gain < _GAIN:  # the whole step predicted less than the tolerance and did not rise: at the maximum
                return x, True, (f"average-information steps converged in {it} iterations (the last step, "
                                 f"predicted to raise ℓ_R by {gain:.1e}, did not)")
            step /= 2.0
        else:
            return x, gain < _GAIN, f"average-information line search stopped by rounding (predicted rise {gain:.1e})"
    return x, False, f"no convergence in {max_iter} average-information iterations"


def _reml(H: sp.csr_matrix, y: np.ndarray, s2: np.ndarray, sizes: list[int], *, max_iter: int,
          kernel: dict[str, int], start: np.ndarray | None = None) -> tuple[np.ndarray, bool, str, int]:
    """σ² per block maximising the REML log-likelihood of :func:`gls_posterior` over log σ²:
    average-information steps from ``start`` (σ² per block: NaN starts at the moment start's share,
    :func:`_start`, 0 at the lower bound) or the moment start, then (if they do not converge) L-BFGS-B in
    the same bounds; a component at the lower bound, or below 10⁻³·spread where 0 is no worse, is 0:
    (σ², converged, status, factorisations)."""
    spread = max(float(np.var(y)), float(np.mean(s2)))
    low = math.log(min(_FLOOR, _FLOOR_NOISE * float(np.min(s2)) / spread))
    obj = _Objective(H=H, y=y, s2=s2, sizes=sizes, kernel=kernel, spread=spread, low=low)
    x0 = _start(y, s2, len(sizes), obj.spread)
    if start is not None:
        x0 = np.where(np.isnan(start), x0, np.log(np.maximum(start, 1e-300) / obj.spread))
    x0 = np.clip(x0, obj.low + 1.0, _LOG_HIGH - 1.0)
    if start is not None:
        x0[start == 0] = obj.low  # at its bound: free only where ℓ_R rises off it (:func:`_newton`)
    x, converged, status = _ai_search(obj, x0, max_iter=max_iter)
    here = obj.at(x)
    if not converged:
        with warnings.catch_warnings():  # differences of ℓ_R = −∞ at points not factorisable: refused below
            warnings.simplefilter("ignore", RuntimeWarning)
            res = minimize(obj.negll, x, method="L-BFGS-B", bounds=[(obj.low, _LOG_HIGH)] * len(sizes),
                           options={"maxiter": max_iter, "ftol": 1e-12, "gtol": 1e-7, "eps": 1e-6})
        end = obj.at(res.x)
        if end is not None and (here is None or end.loglik >= here.loglik):
            x, here = res.x, end  # else the search's own point stands (L-BFGS-B ended lower, or at −∞)
        status = f"{status}; L-BFGS-B: {res.message}"
        converged = here is not None and _stationary(obj, x, here)
    if here is None:
        raise _fail("s2", f"is too small against the spread of `y` for the fit's factorisations (its smallest is "
                          f"{float(np.min(s2)) / spread:.1e} of it: every σ² tried made the system numerically "
                          "singular)", float(np.min(s2)))

    def loglik(sig: np.ndarray) -> float:
        try:
            return gls_posterior(H, y, s2, np.repeat(sig, sizes), **kernel).loglik
        except np.linalg.LinAlgError:  # not factorisable: as the search takes it, ℓ_R = −∞
            return -math.inf

    sig = obj.spread * np.exp(x)
    sig[x <= obj.low + 1e-3] = 0.0
    best = loglik(sig)
    if not math.isfinite(best):  # the bound's components at 0 not factorisable: at the bound itself
        sig, best = obj.spread * np.exp(x), here.loglik
    for k in np.flatnonzero((sig > 0) & (sig < 1e-3 * obj.spread)):  # log σ² crawls towards 0: try 0 itself
        trial = sig.copy()
        trial[k] = 0.0
        ll = loglik(trial)
        if ll >= best:
            sig, best = trial, ll
    if obj.singular:
        status += (f"; {obj.singular} trial point(s) not factorisable (noise variances down to "
                   f"{float(np.min(s2)) / spread:.1e} of the spread), taken as ℓ_R = −∞")
    return sig, converged, status, obj.calls


def _stationary(obj: _Objective, x: np.ndarray, post: GLSPosterior | None = None, *, tol: float = 1e-2) -> bool:
    """The REML search's own test, with no trust in the optimiser's message: every exact free
    slope of −ℓ_R in log σ² is below ``tol`` (a 1 % change of any σ² moves ℓ_R by < 10⁻⁴), or an
    average-information step would raise ℓ_R by less than :data:`_GAIN` (:func:`_newton`);
    ``post`` the posterior at x where the caller has it."""
    g, _, gain = _newton(obj, x, obj.post(x) if post is None else post)
    return bool(np.all(np.abs(g) < tol) or gain < _GAIN)


def _components_of(H: sp.csr_matrix, y: np.ndarray, s2: np.ndarray, inner: list[int], comps: np.ndarray,
                   kernel: dict[str, int], *, names: list[str], residual: bool, sigma2: Mapping[str, float] | None,
                   start: Mapping[str, float] | None, max_iter: int) -> tuple[np.ndarray, bool, str, int]:
    """:func:`fit_crossed`'s variance components in the order of ``names`` (+ the residual): given,
    or REML's (:func:`_reml`, from ``start``): (σ², converged, status, factorisations)."""
    if sigma2 is not None:
        return _fixed_sigma2(sigma2, names, residual), True, "variance components given", 0
    sig = np.zeros(len(inner))
    if not inner:
        return sig, True, "no variance component", 0
    x0 = None if start is None else _start_sigma2(start, names, residual)[comps]
    sig[comps], converged, status, calls = _reml(H, y, s2, inner, max_iter=max_iter, kernel=kernel, start=x0)
    _log.debug("REML of %s over %d observations: %d factorisations, %s", names, y.size, calls, status)
    return sig, converged, status, calls


def _fixed_sigma2(sigma2: Any, names: list[str], residual: bool) -> np.ndarray:
    """``sigma2`` (every component to its variance) in the order of ``names`` (+ the residual)."""
    return _variances_of(sigma2, names, residual, arg="sigma2", every=True)


def _start_sigma2(start: Any, names: list[str], residual: bool) -> np.ndarray:
    """``start`` (some components to variances) in the order of ``names`` (+ the residual), NaN where
    it has none (the moment start's share, :func:`_reml`)."""
    return _variances_of(start, names, residual, arg="start", every=False)


def _variances_of(given: Any, names: list[str], residual: bool, *, arg: str, every: bool) -> np.ndarray:
    """The argument ``arg``'s variances (finite, >= 0) in the order of ``names`` (+ the residual), NaN
    for a component it leaves out (``every``: it must map each, and only those)."""
    keys = names + ([RESIDUAL] if residual else [])
    if not isinstance(given, Mapping) or not (set(given) == set(keys) if every else set(given) <= set(keys)):
        raise _fail(arg, f"must map {'exactly' if every else 'some of'} {keys} to variances", given)
    try:
        values = np.array(list(given.values()), dtype=float)
    except (TypeError, ValueError):
        raise _fail(arg, "must hold finite variances >= 0", given) from None
    if not np.all(np.isfinite(values) & (values >= 0)):
        raise _fail(arg, "must hold finite variances >= 0", given)
    return np.array([given.get(k, np.nan) for k in keys], dtype=float)


def _effects(post: GLSPosterior, names: list[str], levels: list[np.ndarray], variances: bool = True
             ) -> dict[str, FactorEffects]:
    out, start = {}, 1
    for name, lev in zip(names, levels):
        rows = sp.csr_matrix((np.ones(lev.size), (np.arange(lev.size), start + np.arange(lev.size))),
                             shape=(lev.size, post.mean.size))
        var = post.variance(rows) if variances else np.full(lev.size, np.nan)
        out[name] = FactorEffects(levels=lev, mean=post.mean[start:start + lev.size], var=var)
        start += lev.size
    return out


def fit_crossed(factors: Mapping[str, Any], A: Any, y: Any, s2: Any, *, residual: bool = True,
                confidence: float = 0.95, sigma2: Mapping[str, float] | None = None,
                max_iter: int = 200, dense_max: int = 6000, variances: bool = True,
                start: Mapping[str, float] | None = None) -> CrossedFit:
    """Fit θ_g = μ + Σ_f u_f[code_f(g)] + e_g to y = A θ + ε (models/crossed.md).

    Parameters
    ----------
    factors : mapping str -> int array (G,)
        Each factor's level code per grid (e.g. ``"cell"``, ``"slot"``, ``"cell:hour_of_day"``);
        any ints, levels are their distinct values. May be empty (μ and e only).
    A : sparse or dense matrix (n_obs × G)
        Each measured node's weights over the grids (typically its rows sum to 1).
    y, s2 : array-like (n_obs,)
        Noisy node means and their noise variances (finite, > 0).
    residual : bool
        Fit the grid-level component e_g ~ N(0, σ²_e) (key :data:`RESIDUAL` of ``sigma2``).
    confidence : float
        Level of :attr:`CrossedFit.grid_halfwidth` and :meth:`CrossedFit.node` intervals.
    sigma2 : mapping, optional
        Given variance components (every factor, and :data:`RESIDUAL` if fitted): no REML.
    max_iter : int
        Iterations of the REML search (average-information steps, then L-BFGS-B if they do not converge).
    dense_max : int
        Passed to :func:`gls_posterior` (the grid residuals are its local effects).
    variances : bool
        Compute the grids' and levels' posterior variances (False: NaN, for a caller that needs only
        the posterior means and the components; :meth:`CrossedFit.node` still gives variances).
    start : mapping, optional
        Where REML starts: some keys of ``sigma2`` to variances, e.g. a nested model's fit (left out:
        the moment start's share; 0: the lower bound). Near the maximum it saves factorisations
        (minutes each on a large list); a unique maximum is reached from any start. Not with ``sigma2``.
    """
    names, codes, levels, A, y, s2, confidence = _check_crossed(factors, A, y, s2, residual, confidence)
    max_iter = check_positive_int(max_iter, "max_iter")
    dense_max = check_positive_int(dense_max, "dense_max", minimum=0)
    grid_map, sizes = _design(codes, A.shape[1], residual)
    H, inner, comps, perm, kernel = _kernel_order(codes, sizes, A, grid_map, residual)
    kernel["dense_max"] = dense_max
    sig, converged, status, calls = _components_of(H, y, s2, inner, comps, kernel, names=names, residual=residual,
                                                   sigma2=sigma2, start=start, max_iter=max_iter)
    try:  # one evaluation: the Gram matrices only where REML's search formed them (else one sparse product)
        post = gls_posterior(H, y, s2, np.repeat(sig[comps], inner), **{**kernel, "grams": _formed(kernel["grams"])})
    except (np.linalg.LinAlgError, RuntimeError) as e:  # given components a tiny s2 makes singular
        if isinstance(e, RuntimeError) and "singular" not in str(e):
            raise
        raise _fail("s2", "is too small against the variance components for the fit's factorisation (the system "
                          "is numerically singular)", float(np.min(s2))) from None
    post = replace(post, mean=post.mean[np.argsort(perm)], perm=perm)  # the caller's order again
    if isinstance(post.system, _DualSystem) and post.system.grams is not None:
        # the blocks' n × n Gram matrices served the search; the fit keeps only its factorisation (a
        # caller holding several fits at 2·10⁷ records held 2.3 GiB of them)
        post = replace(post, system=_without_grams(post.system))
    grid_var = post.variance(grid_map) if variances else np.full(grid_map.shape[0], np.nan)
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    mu_var = float(post.variance(sp.csr_matrix(([1.0], ([0], [0])), shape=(1, post.mean.size)))[0])
    return CrossedFit(sigma2=dict(zip(names + [RESIDUAL], sig.tolist())), mu=float(post.mean[0]), mu_var=mu_var,
                      effects=_effects(post, names, levels, variances), grid_mean=grid_map @ post.mean, grid_var=grid_var,
                      grid_halfwidth=z * np.sqrt(grid_var), loglik=post.loglik, converged=converged, status=status,
                      n_evaluations=calls, confidence=confidence, z=z, posterior=post, grid_map=grid_map)


def means_only(fit: CrossedFit) -> CrossedFit:
    """``fit`` without its factorisation (in the observations' space an n × n factor: 204 MiB at
    5,168 node means): its components, means, likelihood and any variances already computed stay;
    :meth:`CrossedFit.node` and the posterior's variances then raise. For a caller that holds a fit
    for its means while it fits others (memory only)."""
    if not isinstance(fit, CrossedFit):
        raise _fail("fit", "must be a CrossedFit (of fit_crossed)", type(fit).__name__)
    return replace(fit, posterior=replace(fit.posterior, system=None))


def within_memory(fit: Callable[[dict[str, np.ndarray]], T], factors: Mapping[str, np.ndarray]
                  ) -> tuple[T, list[str]]:
    """(``fit(factors)``, the factors left out): where the model's factorisation does not fit in
    memory (``MemoryError``, e.g. hundreds of thousands of levels of an interaction marginal), the
    factor with the most levels is left out and the fit repeated, the largest first. The caller's
    observations stay as they are (a left-out factor's nodes still observe their grids' means); the
    fit's user says which factors were left out."""
    factors, dropped = dict(factors), []
    while True:
        try:
            return fit(factors), dropped
        except MemoryError:
            if not factors:
                raise
            largest = max(factors, key=lambda f: int(np.max(factors[f])) + 1)
            dropped.append(largest)
            factors = {f: code for f, code in factors.items() if f != largest}
