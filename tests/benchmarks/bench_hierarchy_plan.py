"""public-occupancy on the embedded Austin day at ε_total = 10: the budget plan vs the hierarchy plan
(coverage and finest-grid error against the truth). Not part of the default test run.

Each occupied finest grid (H3 res 7 × 1 h) is answered by the budget plan where it releases the
grid within τ, by the hierarchy plan by its answering node; its error is |answer's released mean −
the grid's exact mean of all records|. Seeded noise (NOT a real release), 3 seeds averaged.
The map-wide mean (an oracle constant from the truth) is shown for scale.

    PYTHONPATH=. python tests/benchmarks/bench_hierarchy_plan.py
"""

from __future__ import annotations

import time

import numpy as np

from dpopt.privacy.contributions import contributions
from dpopt.privacy.options import Budget, NoiseOptions
from dpopt.privacy.public_occupancy import PublicOccupancyOptions
from dpopt.release import release_aggregate
from dpopt.records.data import EXAMPLE_BOUND, austin_sample_path

RUNS = [("budget", None), ("budget", 6.0), ("hierarchy", 3.0), ("hierarchy", 6.0), ("hierarchy", 10.0)]


def _answers(r, plan: str, G: int) -> np.ndarray:
    if plan == "budget":
        return np.where(r.plan.info["budget_plan"].within_target, np.arange(G), -1)
    return r.plan.info["hierarchy"]["answer"]


def main(seeds: int = 3) -> None:
    agg, ingest = contributions(austin_sample_path(), bound=EXAMPLE_BOUND, keep_samples=True)
    truth = np.bincount(agg.pair_grid, weights=agg.sum, minlength=agg.n_grids) / agg.grid_records()
    users = agg.grid_users()
    const = np.abs(truth - agg.sum.sum() / agg.count.sum())
    print(f"U = {EXAMPLE_BOUND:g}, {agg.n_grids} grids, {(users >= 10).sum()} with >= 10 users")
    print(f"map-wide mean (oracle): median {np.median(const):.2f}, p90 {np.percentile(const, 90):.2f}, "
          f"median on >= 10 users {np.median(const[users >= 10]):.2f}")
    print("| plan | τ | published | grids answered | median | p90 | median (≥ 10 users) on | release s |")
    print("|---|---|---|---|---|---|---|---|")
    for plan, tau in RUNS:
        rows = []
        for seed in range(seeds):
            t = time.perf_counter()
            r = release_aggregate(agg, Budget(epsilon_total=10.0), PublicOccupancyOptions(plan=plan, target=tau),
                                  noise=NoiseOptions(seed=seed), ingest=ingest)
            dt = time.perf_counter() - t
            ans = _answers(r, plan, agg.n_grids)
            ok = ans >= 0
            err = np.abs(r.table["mean"].to_numpy()[np.maximum(ans, 0)] - truth)
            big = ok & (users >= 10)
            rows.append((r.summary.target, r.summary.released_grids, ok.sum(), np.median(err[ok]),
                         np.percentile(err[ok], 90), np.median(err[big]) if big.any() else np.nan, big.sum(), dt))
        a = np.mean(np.asarray(rows, dtype=float), axis=0)
        print(f"| {plan} | {a[0]:.2f} | {a[1]:.0f} | {a[2]:.0f} | {a[3]:.2f} | {a[4]:.2f} | {a[5]:.2f} on {a[6]:.0f} "
              f"| {a[7]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
