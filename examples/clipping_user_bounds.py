"""Custom clipping problem: heterogeneous ranges, user l's samples lie in [0, U_l].

The reduced LP keeps its form with right-hand sides U_l m_l, so the optimum is the closed form with
{U_l m_l} in place of {U m_l}; the cvxpy model finds it without being told.
Run: python examples/clipping_user_bounds.py
"""

import numpy as np

import dpopt

counts = np.array([12, 7, 5, 3, 3, 2, 1, 1, 1, 1])
U = 65.0
user_bounds = np.array([65, 65, 30, 65, 20, 65, 65, 10, 65, 65], dtype=float)  # e.g. slow vehicles

prob = dpopt.clipping_problem(counts, U, 0.5, user_bounds=user_bounds)
plan = prob.solve_plan()
print("status", plan.status.value, "error", round(plan.error, 5))
print("lower", np.round(plan.lower, 3))
print("upper", np.round(plan.upper, 3))

v = user_bounds * counts
closed = min(np.maximum(v - t, 0).sum() / 2 + t / 0.5 for t in np.r_[0.0, v]) / counts.sum()
print("closed form with U_l m_l:", round(closed, 5))
print("same U for everyone (base case):", round(dpopt.optimal_clipping(counts, U, 0.5).error, 5))
