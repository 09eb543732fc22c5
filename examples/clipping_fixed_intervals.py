"""Custom clipping problem: prescribed intervals for chosen users (and any extra cvxpy constraint).

Example: a trusted reference user is never clipped, and the largest user may not be clipped above
40 km/h. The model prices asymmetric intervals with the exact worst-case bias (ERRATA E9).
Run: python examples/clipping_fixed_intervals.py
"""

import numpy as np

import dpopt

counts = np.array([30, 12, 8, 4, 2, 2, 1, 1, 1])
U, eps = 65.0, 0.5
base = dpopt.optimal_clipping(counts, U, eps)
print(f"base case: error {base.error:.4f}; user 1 interval [{base.lower[1]:.2f}, {base.upper[1]:.2f}]")

prob = dpopt.clipping_problem(counts, U, eps, fixed={1: (0.0, 65.0)})  # user 1 is never clipped
plan = prob.solve_plan()
print(f"user 1 unclipped: error {plan.error:.4f}")

prob2 = prob.with_constraints(prob.upper[0] <= 40.0)  # a researcher's own constraint
plan2 = prob2.solve_plan()
print(f"... and user 0 clipped at most to 40: error {plan2.error:.4f}, "
      f"user 0 interval [{plan2.lower[0]:.2f}, {plan2.upper[0]:.2f}]")
