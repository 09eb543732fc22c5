"""Two-pass tree GLS against a dense weighted least-squares solve on random trees."""

import numpy as np
import pytest

from dpopt.hierarchy.gls import tree_gls


def random_tree(rng, n_leaves, depth):
    """Parent array, rows level by level (leaves first), random fan-in."""
    parent, level, rows = [], [], list(range(n_leaves))
    level = [0] * n_leaves
    parent = [-1] * n_leaves
    start = 0
    for d in range(1, depth + 1):
        cur = rows
        n_par = max(1, int(rng.integers(1, len(cur) + 1)) if d < depth else 1)
        assign = rng.integers(0, n_par, size=len(cur))
        assign[:n_par] = np.arange(n_par)  # every parent has a child
        base = len(parent)
        for i, r in enumerate(cur):
            parent[r] = base + int(assign[i])
        parent += [-1] * n_par
        level += [d] * n_par
        rows = list(range(base, base + n_par))
    return np.array(parent), np.array(level)


def dense_gls(parent, y, var):
    n = parent.size
    leaves = [v for v in range(n) if v not in set(parent[parent >= 0])]
    A = np.zeros((n, len(leaves)))
    for j, leaf in enumerate(leaves):
        v = leaf
        while v >= 0:
            A[v, j] = 1.0
            v = parent[v]
    m = np.isfinite(y)
    Wm = np.diag(1.0 / var[m])
    cov = np.linalg.inv(A[m].T @ Wm @ A[m])
    xl = cov @ A[m].T @ Wm @ y[m]
    return A @ xl, np.diag(A @ cov @ A.T)


@pytest.mark.parametrize("seed", range(12))
def test_two_pass_equals_dense_gls(seed):
    rng = np.random.default_rng(seed)
    parent, level = random_tree(rng, int(rng.integers(2, 9)), int(rng.integers(1, 4)))
    n = parent.size
    y = rng.normal(size=n) * 5
    var = rng.uniform(0.1, 10.0, size=n)
    if seed % 3 == 0:  # some inner nodes unmeasured
        inner = np.flatnonzero(level > 0)
        y[inner[: len(inner) // 2]] = np.nan
    ref_x, ref_p = dense_gls(parent, y, var)
    for h in (None, level):
        out = tree_gls(parent, y, var, height=h)
        np.testing.assert_allclose(out.estimate, ref_x, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(out.variance, ref_p, rtol=1e-9, atol=1e-9)
        # consistency: children sum to parent
        sums = np.zeros(n)
        np.add.at(sums, parent[parent >= 0], out.estimate[parent >= 0])
        inner = np.isin(np.arange(n), parent)
        np.testing.assert_allclose(sums[inner], out.estimate[inner], atol=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_unmeasured_leaves_leave_the_level_above_as_leaves(seed):
    """Sums are not measured below the first measured level: those nodes are unidentified (NaN, ∞)
    and the rest equals the GLS of the tree cut at that level."""
    rng = np.random.default_rng(100 + seed)
    parent, level = random_tree(rng, int(rng.integers(3, 9)), 3)
    n = parent.size
    y = rng.normal(size=n) * 5
    var = rng.uniform(0.1, 10.0, size=n)
    y[level == 0] = np.nan
    out = tree_gls(parent, y, var, height=level)
    assert np.isnan(out.estimate[level == 0]).all() and np.isinf(out.variance[level == 0]).all()
    keep = np.flatnonzero(level > 0)
    remap = -np.ones(n, dtype=int)
    remap[keep] = np.arange(keep.size)
    cut_parent = np.where(parent[keep] >= 0, remap[np.maximum(parent[keep], 0)], -1)
    ref_x, ref_p = dense_gls(cut_parent, y[keep], var[keep])
    np.testing.assert_allclose(out.estimate[keep], ref_x, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(out.variance[keep], ref_p, rtol=1e-9, atol=1e-9)
