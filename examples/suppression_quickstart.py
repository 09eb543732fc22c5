"""Grid suppression in 20 lines: greedy CLIP-USER vs the exact MILP, then the frontier.

Run: python examples/suppression_quickstart.py   (a few seconds). The greedy stops at K = 3;
the exact optimum is K = 2.
"""

import numpy as np

from dpopt import Occupancy
from dpopt.suppression import clip_user, pseudo_user_clipping, solve_suppression, suppression_frontier

# users a..f in three grids (counts = samples per user and grid); speeds bounded by U = 65
occ = Occupancy.from_triples(
    users=["a", "a", "a", "b", "c", "d", "e", "e", "f", "f"],
    grids=["g1", "g2", "g3", "g1", "g2", "g3", "g1", "g2", "g2", "g3"],
    counts=[20, 15, 12, 2, 3, 4, 1, 1, 2, 2],
)
U, eps = 65.0, 0.5
greedy = clip_user(occ, U, eps)                 # seed 002 Algorithm 1 (ERRATA E1/E2)
exact = solve_suppression(occ, U, eps)          # least K with every grid error <= E
print(f"E = {exact.error_bound:.3f}; G_1 = {occ.degradation}")
print(f"greedy: K = {greedy.degradation}, suppressed {sorted(greedy.suppressed)}")
print(f"MILP:   K = {exact.degradation} ({exact.status.value}, gap {exact.gap}), suppressed {sorted(exact.suppressed)}")
print("grid errors after the MILP plan:", np.round(exact.grid_errors, 3))
print("pseudo-user clip per grid (eq. 15):", pseudo_user_clipping(occ, U, eps, exact).clip)
fr = suppression_frontier(occ, U, eps, degradations=range(1, occ.degradation + 1))
for p in fr.points:  # least worst-case error for each K
    print(f"K = {p.degradation}: E*(K) = {p.error:.4f} ({p.status.value})")
