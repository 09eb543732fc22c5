"""Benchmarks of the occupancy and grid errors at scale. Run: python tests/benchmarks/bench_foundation.py

* building an Occupancy from 10^6 (user, grid, count) triples (target < 2 s on 2 cores);
* grid_errors on 10^6 (user, grid) pairs over 10^4 grids (target < 1 s), BASELINE and with
  10^5 suppressed pairs.
Prints a Markdown table (the numbers recorded in tests/benchmarks/RESULTS.md).
"""

from __future__ import annotations

import platform
import sys
import time
from datetime import date

import numpy as np
import scipy

import dpopt


def best_of(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    rng = np.random.default_rng(0)
    n_pairs, n_users, n_grids = 1_000_000, 200_000, 10_000
    # distinct pairs: sample flat indices without replacement
    flat = rng.choice(n_users * n_grids, size=n_pairs, replace=False)
    users, grids = np.divmod(flat, n_grids)
    counts = rng.geometric(0.05, size=n_pairs)
    t_occ_int = best_of(lambda: dpopt.Occupancy.from_triples(users, grids, counts))
    ulab = np.char.add("bus", users.astype(str))
    t_occ_str = best_of(lambda: dpopt.Occupancy.from_triples(ulab, grids, counts), repeat=3)
    occ = dpopt.Occupancy.from_triples(users, grids, counts)
    t_err = best_of(lambda: dpopt.grid_errors(occ, 65.0, 1.0))
    u, g, _ = occ.to_triples()
    pick = rng.choice(occ.n_pairs, size=100_000, replace=False)
    sup = list(zip(u[pick].tolist(), g[pick].tolist()))
    t_sup = best_of(lambda: dpopt.grid_errors(occ, 65.0, 1.0, suppressed=sup), repeat=3)
    print(f"## Foundation ({date.today()}, Python {platform.python_version()}, numpy {np.__version__}, "
          f"scipy {scipy.__version__}, {platform.machine()})\n")
    print("| benchmark | size | time (best of runs) | target |")
    print("|---|---|---|---|")
    print(f"| Occupancy.from_triples, integer labels | 10^6 triples, 10^4 grids | {t_occ_int:.3f} s | < 2 s |")
    print(f"| Occupancy.from_triples, string user labels | 10^6 triples | {t_occ_str:.3f} s | < 2 s |")
    print(f"| grid_errors (BASELINE) | 10^6 pairs, 10^4 grids | {t_err:.3f} s | < 1 s |")
    print(f"| grid_errors with 10^5 suppressed pairs (label lookup included) | 10^6 pairs | {t_sup:.3f} s | - |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
