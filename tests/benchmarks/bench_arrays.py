"""Benchmarks of the array-length model (seed 003): ``python tests/benchmarks/bench_arrays.py [L]``.

* exact minimax length m_UB(ε) for L = 10^6 users, as a ratio to ``numpy.sort`` of the counts
  (target ≤ 5): the enumeration is one sort, one prefix sum and O(#distinct) arithmetic;
* BestFit (Algorithm 2) for L = 10^6 (target < 5 s), in the paper's order and in a random order;
  WrapAround for comparison;
* the HiGHS models: the "choose one candidate" MILP and the surrogate LP (19).

Counts: log-normal (ITMS-like heavy tail), rounded, clipped to [1, 5000]; seeded.
Prints a Markdown table (paste into tests/benchmarks/results/arrays.md).
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import sys
import time

import numpy as np


def _best(func, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        func()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(L: int = 1_000_000) -> None:
    from importlib.metadata import version

    from dpopt.arrays import (
        best_fit,
        exact_length_path,
        heuristic_length,
        median_length,
        optimal_array_length,
        wrap_around,
    )

    rng = np.random.default_rng(20261122)
    counts = np.clip(np.round(rng.lognormal(3.5, 1.2, size=L)), 1, 5000).astype(np.int64)
    U, eps = 65.0, 1e-3  # m_UB is interior here (1356 of [1, 5000])
    distinct = np.unique(counts).size

    rows: list[tuple[str, str, str]] = []
    t_sort = _best(lambda: np.sort(counts), 7)
    t_exact = _best(lambda: optimal_array_length(counts, U, eps), 7)
    rows.append(("numpy.sort of the counts", f"{t_sort * 1e3:.1f} ms", "reference"))
    rows.append(
        ("exact m_UB (enumeration over {m_l})", f"{t_exact * 1e3:.1f} ms", f"ratio to sort {t_exact / t_sort:.2f} (target <= 5)")
    )
    epsilons = np.geomspace(1e-3, 2, 100)
    t_path = _best(lambda: exact_length_path(counts, U, epsilons), 3)
    rows.append(("exact m_UB for 100 epsilons", f"{t_path * 1e3:.1f} ms", f"ratio to sort {t_path / t_sort:.2f}"))
    plan = optimal_array_length(counts, U, eps)
    for name, m in (("median", median_length(counts)), ("heuristic (9)", heuristic_length(counts)), ("m_UB", plan.length)):
        t_bf = _best(lambda: best_fit(counts, m), 1)
        g = best_fit(counts, m)
        t_bf_rand = _best(lambda: best_fit(counts, m, order=rng.permutation(L)), 1)
        t_wa = _best(lambda: wrap_around(counts, m), 1)
        k_wa = wrap_around(counts, m).num_arrays
        rows.append((f"BestFit, m = {m} ({name}), non-increasing order", f"{t_bf:.2f} s", f"K = {g.num_arrays} (target < 5 s)"))
        rows.append((f"BestFit, m = {m} ({name}), random order", f"{t_bf_rand:.2f} s", "target < 5 s"))
        rows.append((f"WrapAround, m = {m} ({name})", f"{t_wa:.2f} s", f"K = {k_wa}"))
    wide = rng.integers(1, 1_000_001, size=L)
    t_wide = _best(lambda: best_fit(wide, 1_000_000), 1)
    rows.append(("BestFit, counts uniform on [1, 10^6], m = 10^6 (many fill levels)", f"{t_wide:.2f} s", "target < 5 s"))
    t_milp = _best(lambda: optimal_array_length(counts, U, eps, solver="milp"), 1)
    milp = optimal_array_length(counts, U, eps, solver="milp")
    rows.append(
        (f"exact MILP in HiGHS ({distinct} binaries)", f"{t_milp:.2f} s", f"status {milp.status.value}, m = {milp.length} (enumeration {plan.length})")
    )
    t_lp = _best(lambda: optimal_array_length(counts, U, eps, method="surrogate", solver="lp"), 1)
    lp = optimal_array_length(counts, U, eps, method="surrogate", solver="lp")
    closed = optimal_array_length(counts, U, eps, method="surrogate")
    rows.append(
        (f"surrogate (19) LP in HiGHS ({distinct + 1} columns)", f"{t_lp:.2f} s", f"objective {lp.objective:.6f} vs closed form {closed.objective:.6f}")
    )

    print(f"# arrays benchmark, {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC")
    print(
        f"\nL = {L}, counts log-normal(3.5, 1.2) clipped to [1, 5000] ({distinct} distinct), U = {U:g}, eps = {eps:g}; "
        f"Python {platform.python_version()}, numpy {np.__version__}, highspy {version('highspy')}, "
        f"{os.cpu_count()} CPUs, {platform.machine()}. Times: best of several runs.\n"
    )
    print("| task | time | note |\n|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
