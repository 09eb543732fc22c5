"""Aggregate once, compare plans: the privacy-loss degradation K each plan reaches at the same E.

BASELINE keeps everything (K = G_1); CLIP-USER (seed 002 Algorithm 1) and the exact MILP suppress
(user, grid) contributions while every grid's worst-case error stays <= E; pseudo-user clipping then
lowers grid errors further (eq. (15)).
"""

from dpopt.release import (NoiseOptions, PerGridBudget, PublicOccupancyOptions, austin_sample_path, contributions,
                           release_aggregate)

agg, ingest = contributions(austin_sample_path(), bound=120.0, keep_samples=True)
print(f"{agg.n_users} users, {agg.n_grids} grids, {agg.n_pairs} occupied (user, grid) pairs")
for plan, pseudo in [("baseline", False), ("greedy", False), ("greedy", True), ("milp", False)]:
    r = release_aggregate(agg, PerGridBudget(1.0), PublicOccupancyOptions(plan=plan, pseudo_users=pseudo,
                                                                          time_limit=15 if plan == "milp" else None),
                          bound=120.0, noise=NoiseOptions(seed=0), ingest=ingest)
    s = r.summary
    label = plan + (" + pseudo-users" if pseudo else "")
    mean_err = r.table["error_bound"].mean()
    print(f"{label:<24} K = {s.degradation:>3} ({s.plan_status}), total eps = {s.epsilon_total:6.1f}, "
          f"max E_g = {s.error_bound:7.1f}, mean E_g = {mean_err:7.1f}, suppressed pairs = {s.suppressed_pairs}")
