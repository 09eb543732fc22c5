"""Figure 5 of seed 003: the exact minimax array length m_UB(eps) on ITMS, a staircase in eps.

m_UB is non-decreasing in eps (Lemma V.3), equals m_* below the first switch point and m^* above the
last (Lemma V.4 / Corollary V.1). Run: python examples/arrays_figure5.py [figure.png]
(the figure is written only when a path is given).
"""

import sys

import numpy as np

from dpopt.arrays import exact_length_path, lemma_v4_thresholds, switch_points
from dpopt.datasets import ITMS_BOUND, load_itms_counts

counts = load_itms_counts()
eps = np.arange(0.001, 2.0, 0.001)
path = exact_length_path(counts, ITMS_BOUND, eps)
lo, hi = switch_points(counts)
e1, e2 = lemma_v4_thresholds(counts)
print(f"m_UB = m_* = {counts.min()} for eps <= {lo:.5f} (Lemma V.4 guarantees it for eps <= {e1:.2e})")
print(f"m_UB = m^* = {counts.max()} for eps >  {hi:.5f} (Lemma V.4 guarantees it for eps >= {e2:g})")
steps = np.flatnonzero(np.diff(path)) + 1
print(f"{steps.size} steps; first ones:", ", ".join(f"eps={eps[i]:.3f}->{path[i]}" for i in steps[:8]))
assert np.all(np.diff(path) >= 0)
if len(sys.argv) > 1:
    from matplotlib.figure import Figure  # renders without choosing a back-end

    fig = Figure(figsize=(5, 3.5))
    ax = fig.add_subplot()
    ax.step(eps, path, where="post")
    ax.set_xscale("log")
    ax.set_xlabel("epsilon")
    ax.set_ylabel("m_UB(epsilon)")
    ax.set_title("ITMS: exact minimax array length (seed 003, Fig. 5)")
    fig.tight_layout()
    fig.savefig(sys.argv[1], dpi=120)
    print("saved", sys.argv[1])
