"""Optimal per-user clipping (seeds 000/001, Theorem III.1): closed form, KKT certificate, LP cross-check.

Run: python examples/clipping_optimal.py
"""

import numpy as np

import dpopt
from dpopt.clipping import optimal_error

U = 65.0  # km/h, the bound of the seeds' experiments
# geometric collection (M = 6): 2^i users with 2^(6-i) samples each
counts = np.concatenate([np.full(2**i, 2 ** (6 - i)) for i in range(7)])

plan = dpopt.optimal_clipping(counts, U, epsilon=0.5)
print(f"T_eps = {plan.threshold:g}, worst-case error E^OPT = {plan.error:.5f} "
      f"(bias {plan.bias:.3f} + noise {plan.noise:.3f}), sensitivity {plan.sensitivity:.4f}")
print("users with m = 64 are clipped to", plan.lower[0], "..", plan.upper[0])
print("KKT certificate (ERRATA E4):", plan.certificate.report())

for formulation in ("per-user", "per-sample"):
    for backend in ("highspy", "cvxpy"):
        lp = dpopt.solve_clipping(counts, U, 0.5, formulation=formulation, backend=backend)
        print(f"LP {formulation:10s} {backend:8s}: {lp.status.value}, error {lp.error:.5f}, "
              f"duals certify optimality: {lp.check(1e-7)}")

eps = np.array([0.01, 0.05, 0.1, 0.5, 1, 2, 5])
print("E^OPT over a grid of eps:", np.round(optimal_error(counts, U, eps), 4))
