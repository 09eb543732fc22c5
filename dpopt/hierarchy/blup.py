"""Empirical-Bayes (BLUP) estimation of node means on a tree of nested random effects
(models/hierarchy.md §11). Post-processing only: it reads noisy node means and their noise
variances, never the data.

Model (a Gaussian tree, the hierarchical Fay–Herriot model): the root's mean θ_root has a flat
prior; every other node v has θ_v = θ_parent(v) + u_v, u_v ~ N(0, τ²_{ℓ(v)}) independent, τ²_ℓ the
between-sibling variance of level ℓ; a measured node reports y_v = θ_v + e_v, e_v ~ N(0, s_v²)
independent. All measured levels (the root's and the finest level's included) enter one posterior:

* **up** (leaves → root): the likelihood of v's subtree as a function of θ_v is Gaussian with mean
  a_v and variance A_v (precision π_v = 1/A_v): π_v = 1/s_v² + Σ_c 1/(A_c + τ²_c),
  a_v = (y_v/s_v² + Σ_c a_c/(A_c + τ²_c))/π_v (a child with π_c = 0 sends nothing);
* **down** (root → leaves): the root's posterior is its up message; for a child c of p, the
  information about θ_p from outside c's subtree is the posterior of p minus c's message, passed
  down through τ²_c and combined with c's up message. This is the Kalman filter / RTS smoother on
  the tree; it equals the dense Gaussian posterior (checked in tests/hierarchy/test_blup.py).
* **log marginal likelihood** log p(y | τ²) (flat root prior): the sum over nodes of the
  normalisers of the Gaussian products of the up pass (same test). :func:`fit_tau2` maximises it
  over τ² per level (coordinate search on a log grid): variance components estimated from the
  measurements only (never from the truth).

A node with no measurement in its subtree gets its parent's posterior mean and variance + τ²
(the prior); so where the fine measurements are noise (s_v² ≫ τ²) the answer falls back to the
best-supported coarser estimate, and if τ² of the coarse levels is estimated ≈ 0 that is the root.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from typing import Any

import numpy as np

from .._validation import DpoptInputError

__all__ = ["TreeBLUP", "tree_blup", "fit_tau2", "count_snr_threshold", "MIN_COUNT_SNR"]

#: a node's own mean enters the BLUP only where its GLS count is at least this many noise sds
MIN_COUNT_SNR = 1.5


def count_snr_threshold(n_nodes: int) -> float:
    """The count SNR a node must reach to count as measured in the BLUP, per level: at least
    :data:`MIN_COUNT_SNR`, and high enough that among the level's ``n_nodes`` measured nodes with no records fewer than
    one half passes by noise alone under a Laplace tail (½·exp(−t·√2) per node, the heaviest noise
    law of the release): t = ln(N)/√2. A public function of the node count. With thousands of noisy
    fine nodes a fixed 1.5 sds let hundreds of noise-only nodes in, whose ratio means Ŷ/n̂ sit near
    the centre U/2 and outweighed the roots (models/hierarchy.md §11)."""
    return max(MIN_COUNT_SNR, math.log(max(int(n_nodes), 1)) / math.sqrt(2.0))

_LOG2PI = float(np.log(2.0 * np.pi))


@dataclass(frozen=True)
class TreeBLUP:
    """Posterior ``mean`` and ``variance`` of θ_v per node, the up-pass ``up_mean``/``up_precision``
    and ``loglik`` = log p(y | τ²)."""

    mean: np.ndarray
    variance: np.ndarray
    up_mean: np.ndarray
    up_precision: np.ndarray
    loglik: float


def _check(parent: Any, level: Any, y: Any, s2: Any, tau2: Any
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    parent = np.asarray(parent, dtype=np.int64)
    level = np.asarray(level, dtype=np.int64)
    y, s2, tau2 = (np.asarray(v, dtype=float) for v in (y, s2, tau2))
    n = parent.size
    if level.shape != (n,) or y.shape != (n,) or s2.shape != (n,):
        raise DpoptInputError(f"`level`, `y`, `s2` must have one value per node ({n}); got {level.shape}, "
                              f"{y.shape}, {s2.shape}")
    if n and (tau2.ndim != 1 or tau2.size <= int(level.max()) or np.any(~(tau2 >= 0))):
        raise DpoptInputError(f"`tau2` must hold one value >= 0 per level (0 … {int(level.max())}); got {tau2!r}")
    has_parent = parent >= 0
    if np.any(level[parent[has_parent]] != level[has_parent] + 1):
        raise DpoptInputError("every parent must be exactly one level above its child")
    return parent, level, y, s2, tau2


def _up(parent: np.ndarray, level: np.ndarray, prec: np.ndarray, yv: np.ndarray, tau2: np.ndarray
        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Up pass: (a, π, log-likelihood contributions, message precision w_c and mean a_c per child)."""
    n = parent.size
    P, S, cnt = prec.copy(), yv * prec, (prec > 0).astype(float)  # precision, precision-weighted mean, #factors
    sum_log_var = np.where(prec > 0, -np.log(np.where(prec > 0, prec, 1.0)), 0.0)  # Σ log A_i of the factors
    sum_sq = np.where(prec > 0, yv * yv * prec, 0.0)                              # Σ a_i²/A_i
    a, pi, w = np.zeros(n), np.zeros(n), np.zeros(n)
    ll = 0.0
    for lev in range(int(level.max()) + 1 if n else 0):
        rows = np.flatnonzero(level == lev)
        pi[rows] = P[rows]
        with np.errstate(invalid="ignore", divide="ignore"):
            a[rows] = np.where(P[rows] > 0, S[rows] / np.where(P[rows] > 0, P[rows], 1.0), np.nan)
        j = cnt[rows]
        on = j > 0
        # log ∏_i N(a_i; θ, A_i) = log N(a*; θ, A*) + log Z (module doc)
        ll += float(np.sum(np.where(on, -0.5 * ((j - 1.0) * _LOG2PI + sum_log_var[rows] + np.log(
            np.where(on, P[rows], 1.0)) + sum_sq[rows] - np.where(on, S[rows] * a[rows], 0.0)), 0.0)))
        p = parent[rows]
        up = (p >= 0) & (pi[rows] > 0)
        r, pp = rows[up], p[up]
        var_msg = 1.0 / pi[r] + tau2[lev]
        w[r] = 1.0 / var_msg
        np.add.at(P, pp, w[r])
        np.add.at(S, pp, a[r] * w[r])
        np.add.at(cnt, pp, 1.0)
        np.add.at(sum_log_var, pp, np.log(var_msg))
        np.add.at(sum_sq, pp, a[r] * a[r] * w[r])
    return a, pi, ll, w


def tree_blup(parent: np.ndarray, level: np.ndarray, y: np.ndarray, s2: np.ndarray, tau2: np.ndarray) -> TreeBLUP:
    """Posterior of every node's mean under the module's model.

    Parameters
    ----------
    parent, level : np.ndarray
        The tree (``-1`` for roots; every parent exactly one level above its child).
    y, s2 : np.ndarray
        Noisy node means and their noise variances (NaN/∞ or ≤ 0 variance: not measured).
    tau2 : np.ndarray
        τ²_ℓ per level (τ²_ℓ is the variance of a level-ℓ node around its parent).
    """
    parent, level, y, s2, tau2 = _check(parent, level, y, s2, tau2)
    ok = np.isfinite(y) & np.isfinite(s2) & (s2 > 0)
    prec = np.where(ok, 1.0 / np.where(ok, s2, 1.0), 0.0)
    yv = np.where(ok, y, 0.0)
    a, pi, ll, w = _up(parent, level, prec, yv, tau2)
    n = parent.size
    mean, var = np.full(n, np.nan), np.full(n, np.inf)
    top = int(level.max()) if n else -1
    for lev in range(top, -1, -1):
        rows = np.flatnonzero(level == lev)
        p = parent[rows]
        root = p < 0
        r0 = rows[root]
        mean[r0] = np.where(pi[r0] > 0, a[r0], np.nan)
        var[r0] = np.where(pi[r0] > 0, 1.0 / np.where(pi[r0] > 0, pi[r0], 1.0), np.inf)
        r, pp = rows[~root], p[~root]
        # outside information about θ_p (posterior of p without c's own message), then through τ²_c
        post_prec = 1.0 / var[pp]
        out_prec = np.maximum(post_prec - w[r], 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            out_mean = np.where(out_prec > 0, (post_prec * mean[pp] - w[r] * np.nan_to_num(a[r])) / out_prec, np.nan)
            out_var = np.where(out_prec > 0, 1.0 / out_prec, np.inf) + tau2[lev]
            out_p = np.where(np.isfinite(out_var), 1.0 / out_var, 0.0)
            tot = out_p + pi[r]
            mean[r] = np.where(tot > 0, (out_p * np.nan_to_num(out_mean) + pi[r] * np.nan_to_num(a[r])) / tot, np.nan)
            var[r] = np.where(tot > 0, 1.0 / tot, np.inf)
    return TreeBLUP(mean=mean, variance=var, up_mean=a, up_precision=pi, loglik=ll)


def fit_tau2(parent: np.ndarray, level: np.ndarray, y: np.ndarray, s2: np.ndarray, *, scale: float,
             grid: int = 25, sweeps: int = 3) -> np.ndarray:
    """τ² per level maximising the log marginal likelihood of :func:`tree_blup` (coordinate search
    over {0} ∪ a log grid from (scale·10⁻⁴)² to scale², ``sweeps`` passes over the levels from the
    top). ``scale`` is a public spread (e.g. U/2). Levels without a measured node get 0 (the prior
    of an unmeasured node then carries no spread: conservative intervals come from the caller)."""
    parent = np.asarray(parent, dtype=np.int64)
    level = np.asarray(level, dtype=np.int64)
    L = int(level.max()) + 1 if level.size else 0
    cand = np.concatenate([[0.0], (float(scale) * np.logspace(-4, 0, grid)) ** 2])
    tau2 = np.zeros(max(L, 1))
    measured = np.isfinite(np.asarray(y, dtype=float)) & np.isfinite(np.asarray(s2, dtype=float))
    for _ in range(sweeps):
        for lev in range(L - 2, -1, -1):  # the roots' level has no τ²
            if not np.any(measured & (level <= lev)):
                continue
            lls = []
            for t in cand:
                tau2[lev] = t
                lls.append(tree_blup(parent, level, y, s2, tau2).loglik)
            tau2[lev] = cand[int(np.argmax(lls))]
    return tau2
