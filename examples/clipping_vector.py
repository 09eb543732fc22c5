"""Vector samples (d >= 2, l1 bound): the seed's mechanism is not DP; dpopt's corrected one is (ERRATA E3).

Brute force over all small datasets finds neighbours whose clipped means differ by more than the
seed's claimed sensitivity T/n; dpopt's l1-ball strategy (a = 0, b_l = min{U, T/m_l}) has exactly
its stated sensitivity 2T/n. The LP (cvxpy, HiGHS) gives the same optimum 2 E^OPT.
Run: python examples/clipping_vector.py
"""

import numpy as np

import dpopt
from dpopt import verify
from dpopt.verify import estimators

counts, U, eps, d = np.array([2, 1, 1]), 1.0, 2.0, 2
n = counts.sum()
plan = dpopt.optimal_clipping(counts, U, eps, dim=d)
T = plan.threshold

a_seed = np.maximum((U * counts - T) / (2 * counts), 0.0)  # seed 001 Theorem III.1 read for d = 2
seed = verify.sensitivity(estimators.annulus_clipped_mean(a_seed, U - a_seed), counts, U, dim=d, levels=3)
print(f"seed: claimed sensitivity T/n = {T / n:.3f}, brute force finds {seed.value:.3f} for user {seed.user}:")
print("  D  =", [x.tolist() for x in seed.dataset])
print("  D' =", [x.tolist() for x in seed.neighbour])

ours = verify.sensitivity(estimators.annulus_clipped_mean(plan.lower, plan.upper), counts, U, dim=d, levels=3)
print(f"dpopt: stated sensitivity 2T/n = {plan.sensitivity:.3f}, brute force {ours.value:.3f}")

lp = dpopt.clipping_problem(counts, U, eps, dim=d).solve_plan()
print(f"error: closed form {plan.error:.5f} (= 2 E^OPT), LP {lp.error:.5f}")
