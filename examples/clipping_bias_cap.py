"""Custom clipping problem: no single user may carry more than `cap` of the worst-case bias.

Fairness-style constraint: user l's share m_l max{a_l, U - b_l}/n <= cap. With a large cap the
problem is the base case; tightening it trades noise for a flatter bias profile.
Run: python examples/clipping_bias_cap.py
"""

import numpy as np

import dpopt

counts = np.array([40, 20, 10, 5, 3, 2, 1, 1, 1, 1, 1, 1])
U, eps = 65.0, 0.5
base = dpopt.optimal_clipping(counts, U, eps)
n = counts.sum()
share = counts * np.maximum(base.lower, U - base.upper) / n
print(f"base case: error {base.error:.4f}, largest user bias share {share.max():.4f}")
for cap in (share.max(), 5.0, 2.0, 1.0, 0.5):
    plan = dpopt.clipping_problem(counts, U, eps, bias_cap=cap).solve_plan()
    s = counts * np.maximum(plan.lower, U - plan.upper) / n
    print(f"cap {cap:7.4f}: error {plan.error:8.4f} (bias {plan.bias:7.4f}, noise {plan.noise:7.4f}), "
          f"max share {s.max():.4f}")
