"""Naive references for the suppression tests: CLIP-USER recomputing every error from scratch,
and exhaustive search over all suppression sets of a tiny occupancy."""

from __future__ import annotations

import itertools

import numpy as np

from dpopt.calculus import grid_error_terms, grid_errors

#: the same acceptance rule as dpopt.suppression._kernel.ERROR_RTOL (restated, not imported)
RTOL = 1e-12


def clip_user_naive(occ, U, eps, *, error_bound=None, skip_min_error_grid=False, split="equal"):
    """Algorithm 1 of seed 002 (ERRATA E1, E2) with every grid error recomputed by grid_errors."""
    base = grid_errors(occ, U, eps, split=split)
    E = float(base.max()) if error_bound is None else float(error_bound)
    skip = int(np.argmin(base)) if skip_min_error_grid else -1
    dense = occ.to_dense()
    users, grids = occ.users.tolist(), occ.grids.tolist()
    sup = np.zeros(dense.shape, dtype=bool)
    pairs: list = []
    while True:
        occupancy = ((dense > 0) & ~sup).sum(axis=1)
        maxg = occupancy.max()
        halted = False
        for l in np.flatnonzero(occupancy == maxg):
            best_j, best_e = -1, 0.0
            for j in np.flatnonzero((dense[l] > 0) & ~sup[l]):
                if j == skip:
                    continue
                e = grid_errors(occ, U, eps, suppressed=pairs + [(users[l], grids[j])], split=split)[j]
                if best_j < 0 or e < best_e * (1 - 1e-12):
                    best_j, best_e = j, e
            if best_j < 0 or not best_e <= E * (1 + RTOL):
                halted = True
                break
            sup[l, best_j] = True
            pairs.append((users[l], grids[best_j]))
        if halted:
            break
    K = int(((dense > 0) & ~sup).sum(axis=1).max())
    return K, frozenset(pairs), E


def brute_force(occ, U, eps, E, split="equal"):
    """Exhaustive search: (least K, fewest suppressed samples at that K, all (K, max error) pairs).

    Enumerates every subset of suppressed users in every grid (product over grids).
    """
    dense = occ.to_dense()
    L, G = dense.shape
    per_grid = []  # (suppressed indicator [S, L], feasible [S], samples [S], error [S])
    for j in range(G):
        present = np.flatnonzero(dense[:, j] > 0)
        subsets = np.array(list(itertools.product([0, 1], repeat=present.size)), dtype=bool)
        ind = np.zeros((subsets.shape[0], L), dtype=bool)
        ind[:, present] = subsets
        counts = dense[present, j]
        kept = np.where(subsets, 0, counts[None, :])
        R = kept.sum(axis=1)
        gmax = kept.max(axis=1)
        N = np.full(R.size, counts.sum())
        ok = R > 0
        err = np.full(R.size, np.inf)
        err[ok] = grid_error_terms(N[ok], R[ok], gmax[ok], U, eps, split=split).error
        per_grid.append((ind, err, (subsets * counts[None, :]).sum(axis=1)))
    # combine grids
    supp_count = np.zeros((1, L), dtype=np.int64)
    max_err = np.zeros(1)
    samples = np.zeros(1, dtype=np.int64)
    for ind, err, smp in per_grid:
        supp_count = (supp_count[:, None, :] + ind[None, :, :]).reshape(-1, L)
        max_err = np.maximum(max_err[:, None], err[None, :]).reshape(-1)
        samples = (samples[:, None] + smp[None, :]).reshape(-1)
    K = ((dense > 0).sum(axis=1)[None, :] - supp_count).max(axis=1)
    feasible = max_err <= E * (1 + RTOL)
    if not feasible.any():
        return None, None, (K, max_err)
    Kstar = int(K[feasible].min())
    smin = int(samples[feasible & (K == Kstar)].min())
    return Kstar, smin, (K, max_err)


def random_tiny(rng, *, users=6, grids=3, max_count=6, density=0.7):
    """A random occupancy with at most ``users`` × ``grids`` entries (every grid non-empty)."""
    from dpopt.occupancy import Occupancy

    while True:
        dense = rng.integers(1, max_count + 1, size=(users, grids)) * (rng.random((users, grids)) < density)
        if (dense.sum(axis=0) > 0).all() and (dense.sum(axis=1) > 0).all():
            return Occupancy.from_dense(dense)
