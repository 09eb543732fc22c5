"""Pseudo-user arrays on the ITMS bus speeds (seed 003): grouping, array means, choice of m.

Run: python examples/arrays_itms.py
"""

import numpy as np

from dpopt.arrays import best_fit, optimal_array_length, wrap_around
from dpopt.datasets import ITMS_BOUND, load_itms

df = load_itms()
labels, user_index, counts = np.unique(df["user"].to_numpy(), return_inverse=True, return_counts=True)
values = df["value"].to_numpy()
print(f"{counts.size} buses, {counts.sum()} speed records, true mean {values.mean():.4f} km/h")

# the heuristic (9) of the paper, and both groupings at that length
m = optimal_array_length(counts, ITMS_BOUND, 1.0, method="heuristic").length
for group in (wrap_around(counts, m), best_fit(counts, m)):
    means = group.array_means(values, user_index, substitute_user_mean=True)
    print(
        f"{group.method:11s} m = {m}: K = {group.num_arrays:3d} arrays, fills {group.fills.min()}..{group.fills.max()}, "
        f"max arrays per user {group.arrays_per_user.max()}, mean of array means {means.mean():.4f}"
    )

# the four choices of m and their worst-case errors (eq. (15))
print("\neps   method     m    E(m)     bias    noise   excess over exact")
for eps in (0.5, 1.0, 2.0):
    for method in ("exact", "surrogate", "heuristic", "median"):
        p = optimal_array_length(counts, ITMS_BOUND, eps, method=method)
        print(f"{eps:<5g} {method:9s} {p.length:4d} {p.error:7.3f} {p.bias:7.3f} {p.noise:7.3f}  {p.excess:7.3f}")
