"""Benchmark: 100 instances × 5 ε through the three models (``python tests/benchmarks/bench_sweep.py``).

Instances: seeded random occupancies (40 users × 6 grids, each pair occupied with probability 0.5,
heavy-tailed counts 1–60), U = 1, ε ∈ {0.25, 0.5, 1, 2, 4}. Three ways, timed end to end:

* ``loop`` — the hand-built loop a researcher wrote before :func:`dpopt.sweep` existed:
  ``optimal_clipping`` and ``optimal_array_length`` on the user totals, ``solve_suppression`` with
  its defaults (tie-break on) on the occupancy. Runs on any dpopt (also an older checkout:
  ``PYTHONPATH=/path/to/old python tests/benchmarks/bench_sweep.py --only loop``);
* ``sweep`` — ``dpopt.sweep(instances, eps, bound=1)`` (suppression tie-break off by default);
* ``sweep+tie`` — the same with ``tie_break=True`` (each tie-break limited to its main solve's time).

Prints one Markdown row per way: seconds, share of the suppression model, and a checksum (sum of K
over all suppression solves) so that runs can be compared.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

EPS = (0.25, 0.5, 1.0, 2.0, 4.0)


def instances(n: int = 100, seed: int = 2026) -> list:
    import dpopt

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        M = np.where(rng.random((40, 6)) < 0.5, np.minimum(rng.pareto(1.2, (40, 6)) * 4 + 1, 60).astype(int), 0)
        M[:, 0] += 1  # every user holds a sample
        out.append(dpopt.Occupancy.from_dense(M))
    return out


def loop(occs: list) -> tuple[float, float, int]:
    import dpopt

    t0 = time.perf_counter()
    sup = 0.0
    ksum = 0
    for occ in occs:
        totals = np.asarray(occ.matrix.sum(axis=1)).ravel()
        for eps in EPS:
            dpopt.optimal_clipping(totals, 1.0, eps)
            dpopt.optimal_array_length(totals, 1.0, eps)
            t = time.perf_counter()
            ksum += dpopt.solve_suppression(occ, 1.0, eps).degradation
            sup += time.perf_counter() - t
    return time.perf_counter() - t0, sup, ksum


def swept(occs: list, tie_break: bool) -> tuple[float, float, int]:
    import dpopt

    t0 = time.perf_counter()
    df = dpopt.sweep(occs, list(EPS), bound=1.0, tie_break=tie_break)
    total = time.perf_counter() - t0
    sup = df[df.model == "suppression"]
    return total, float(sup["seconds"].sum()), int(sup["degradation"].sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("loop", "sweep", "sweep+tie"), default=None)
    parser.add_argument("--instances", type=int, default=100)
    args = parser.parse_args()
    occs = instances(args.instances)
    ways = {"loop": lambda: loop(occs), "sweep": lambda: swept(occs, False),
            "sweep+tie": lambda: swept(occs, True)}
    print(f"| way | instances × ε | seconds | suppression share | Σ K |")
    print("|---|---|---|---|---|")
    for name, run in ways.items():
        if args.only is not None and name != args.only:
            continue
        total, sup, ksum = run()
        print(f"| {name} | {len(occs)} × {len(EPS)} | {total:.1f} | {sup / total:.0%} | {ksum} |", flush=True)


if __name__ == "__main__":
    main()
