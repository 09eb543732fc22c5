"""Generalised least squares over a tree of noisy node totals (models/hierarchy.md §8).

Model: every node v carries a measurement y_v = x_v + e_v with independent zero-mean noise of
variance σ_v² (∞ or NaN: not measured), and the truths are consistent, x_v = Σ_{children c} x_c.
The GLS (best linear unbiased) estimate of all x is computed in two passes, the unequal-variance
form of Hay, Rastogi, Miklau & Suciu (2010, §4, Theorem 3) — equivalently the Kalman filter and
Rauch–Tung–Striebel smoother on the tree:

* up (leaves → root): z_v, V_v the BLUE of x_v from the measurements in v's subtree;
  leaves z = y, V = σ²; an inner node combines y_v with S_v = Σ_c z_c (variance W_v = Σ_c V_c):
  V_v = (1/σ_v² + 1/W_v)^-1, z_v = V_v·(y_v/σ_v² + S_v/W_v);
* down (root → leaves): x̂_root = z_root, P_root = V_root; for child c of p,
  x̂_c = z_c + (V_c/W_p)·(x̂_p − S_p),  P_c = V_c − V_c²/W_p + (V_c/W_p)²·P_p,

P_v = Var(x̂_v − x_v), the diagonal of the GLS covariance (A'Σ⁻¹A)⁻¹ mapped to node v. The result is
consistent (x̂_p = Σ_c x̂_c exactly, up to rounding) and checked against a dense GLS solve in
tests/hierarchy/test_gls.py. A node with no measurement in its subtree is not identified:
estimate NaN, variance ∞ (and it carries no information upward). Nodes must be ordered so that every parent's row exceeds its
children's (:func:`dpopt.hierarchy.tree.build_hierarchy` does); every inner node needs a child.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import DpoptInputError

__all__ = ["TreeGLS", "tree_gls"]


@dataclass(frozen=True)
class TreeGLS:
    """``estimate`` x̂ per node and ``variance`` P = Var(x̂ − x)."""

    estimate: np.ndarray
    variance: np.ndarray


def _levels(parent: np.ndarray) -> np.ndarray:
    """Height of every node above the leaves (leaves 0), computed bottom-up."""
    n = parent.size
    is_leaf = np.ones(n, dtype=bool)
    is_leaf[parent[parent >= 0]] = False
    h = np.zeros(n, dtype=np.int64)
    for v in range(n):  # rows ascend toward the roots (module doc)
        p = parent[v]
        if p >= 0:
            if p <= v:
                raise DpoptInputError("`parent` must point to later rows (children before parents)")
            h[p] = max(h[p], h[v] + 1)
    return h


def tree_gls(parent: np.ndarray, y: np.ndarray, var: np.ndarray, *, height: np.ndarray | None = None) -> TreeGLS:
    """Two-pass GLS (module doc). ``height`` (optional) the node's level when every leaf is at
    level 0 and every parent one level up (the node table's ``level`` column): then both passes
    are vectorised per level."""
    parent = np.asarray(parent, dtype=np.int64)
    y = np.asarray(y, dtype=float)
    s2 = np.asarray(var, dtype=float)
    n = parent.size
    if y.shape != (n,) or s2.shape != (n,):
        raise DpoptInputError(f"`y` and `var` must have one value per node ({n}); got {y.shape}, {s2.shape}")
    h = _levels(parent) if height is None else np.asarray(height, dtype=np.int64)
    unmeasured = ~np.isfinite(y) | ~np.isfinite(s2)
    if np.any(~unmeasured & (s2 <= 0)):
        raise DpoptInputError("`var` must be positive where a node is measured")
    prec = np.where(unmeasured, 0.0, 1.0 / np.where(unmeasured, 1.0, s2))
    yv = np.where(unmeasured, 0.0, y)
    z, V, S, W = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
    top = int(h.max()) if n else 0
    with np.errstate(invalid="ignore", divide="ignore"):
        for lev in range(top + 1):
            rows = np.flatnonzero(h == lev)
            wp = np.where(W[rows] > 0, 1.0 / W[rows], 0.0)  # 1/∞ = 0: children carry no information
            tot = prec[rows] + wp
            V[rows] = np.where(tot > 0, 1.0 / tot, np.inf)  # ∞: no measurement in the subtree
            z[rows] = np.where(tot > 0, V[rows] * (yv[rows] * prec[rows] + np.where(wp > 0, S[rows] * wp, 0.0)), np.nan)
            up = rows[parent[rows] >= 0]
            np.add.at(S, parent[up], np.where(np.isfinite(V[up]), z[up], 0.0))
            np.add.at(W, parent[up], V[up])
        x, P = z.copy(), V.copy()
        for lev in range(top - 1, -1, -1):
            rows = np.flatnonzero((h == lev) & (parent >= 0) & np.isfinite(V))
            p = parent[rows]
            g = np.where(np.isfinite(W[p]), V[rows] / W[p], 0.0)  # a sibling of infinite variance absorbs the constraint
            x[rows] = z[rows] + np.where(g > 0, g * (x[p] - S[p]), 0.0)
            P[rows] = V[rows] - V[rows] * g + g * g * np.where(g > 0, P[p], 0.0)
    return TreeGLS(estimate=x, variance=P)
