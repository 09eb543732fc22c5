"""Exhaustive search over the budget planner's decision space (tiny instances only).

Decision space (models/budget.md §2): kept pairs x ⊆ pairs; per grid either withheld or a
(cap c, level k) with c a candidate cap of the grid and ε_k a ladder level, such that the kept
users' retained total R = Σ Γ_c(m) ≥ c meets the criterion; every user's spend
Σ_{g released, ℓ kept in g} ε_{k_g} ≤ ε_total. Objective: Σ weights of released grids.
Written independently of the MILP and greedy: plain loops over every subset and every choice.
"""

from __future__ import annotations

import itertools

import numpy as np

from dpopt.budget.configs import candidate_caps, pair_arrays


def exhaustive_coverage(occ, crit, ladder, epsilon_total, weights, *, max_caps=None, truncate=True):
    rows, cols, cnt = pair_arrays(occ)
    P, G = rows.size, occ.n_grids
    gc_grid, gc_cap = candidate_caps(occ, max_caps)
    N = occ.grid_totals
    best = 0.0
    for bits in itertools.product((0, 1), repeat=P):
        keep = np.array(bits, dtype=bool)
        # feasible levels per grid for this kept set
        options = []
        for g in range(G):
            levels = set()
            for c in gc_cap[gc_grid == g].tolist():
                sel = keep & (cols == g)
                if not truncate and np.any(cnt[sel] > c):
                    continue
                R = int(np.minimum(cnt[sel], c).sum())
                if R < c:
                    continue
                for k, eps_k in enumerate(ladder.tolist()):
                    ex = crit.excess(np.array([g]), np.array([N[g]]), np.array([R]), np.array([c]),
                                     np.array([eps_k]))[0]
                    if ex <= 1e-12 * max(1.0, crit.target[g]):
                        levels.add(k)
            options.append([-1] + sorted(levels))
        for choice in itertools.product(*options):
            ch = np.array(choice)
            cov = float(weights[ch >= 0].sum())
            if cov <= best:
                continue
            spend = np.zeros(occ.n_users)
            for p in range(P):
                if keep[p] and ch[cols[p]] >= 0:
                    spend[rows[p]] += ladder[ch[cols[p]]]
            if np.all(spend <= epsilon_total * (1 + 1e-12)):
                best = cov
    return best
