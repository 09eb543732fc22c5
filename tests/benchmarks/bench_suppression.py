"""Benchmarks of the grid-suppression model (seed 002). Run: python tests/benchmarks/bench_suppression.py [parts]

Parts (default all): ``tiebreak`` (the second, lexicographic stage), ``frontier`` (E*(K) on
a G = 8 instance), ``family`` (greedy vs exact MILP on the paper's synthetic family: γ ∈ {3,6,9},
q = 0.01, 10 draws each, ε ∈ {0.1, 0.2, 0.5, 1}), ``speed`` (incremental vs naive CLIP-USER; CLIP-USER
on ~10^6 pairs), ``austin`` (the Austin bus data, G = 50). Prints Markdown for
tests/benchmarks/results/suppression.md.
"""

from __future__ import annotations

import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import highspy  # noqa: E402

from dpopt.suppression import clip_user, heavy_hitter_occupancy, solve_suppression  # noqa: E402

U = 65.0
GAMMAS = (3, 6, 9)
EPSILONS = (0.1, 0.2, 0.5, 1.0)
DRAWS = 10


def family() -> None:
    print("## Synthetic family: greedy CLIP-USER vs exact MILP (K = degradation, K·ε = privacy loss)\n")
    print("E = max_g E_g of BASELINE. MILP: first stage (least K), no tie-break; warm-started with the "
          "greedy plan. 'greedy' = Algorithm 1 as published (ERRATA E1/E2); 'greedy-skip' = the paper's "
          "experimental variant (never suppress in the grid of least initial error).\n")
    print("| γ | ε | G_1 | mean greedy K | mean greedy-skip K | mean optimal K | greedy K·ε | optimal K·ε "
          "| all optimal (gap 0) | MILP ≤ greedy | median / max MILP s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    times = []
    all_ok = True
    for gamma in GAMMAS:
        rng = np.random.default_rng(2024 + gamma)
        occs = [heavy_hitter_occupancy(rng, q=0.01, gamma=gamma) for _ in range(DRAWS)]
        for eps in EPSILONS:
            kg, ks, km, t, opt, le = [], [], [], [], True, True
            for occ in occs:
                g = clip_user(occ, U, eps)
                gs = clip_user(occ, U, eps, skip_min_error_grid=True)
                t0 = time.perf_counter()
                m = solve_suppression(occ, U, eps, tie_break=False, warm_start=g)
                t.append(time.perf_counter() - t0)
                kg.append(g.degradation)
                ks.append(gs.degradation)
                km.append(m.degradation)
                opt &= m.status == "optimal" and m.gap == 0
                le &= m.degradation <= min(g.degradation, gs.degradation)
            times += t
            all_ok &= opt and le
            print(f"| {gamma} | {eps} | {occs[0].degradation} | {np.mean(kg):.1f} | {np.mean(ks):.1f} | "
                  f"{np.mean(km):.1f} | {np.mean(kg) * eps:.2f} | {np.mean(km) * eps:.2f} | "
                  f"{'yes' if opt else 'NO'} | {'yes' if le else 'NO'} | "
                  f"{statistics.median(t):.2f} / {max(t):.2f} |", flush=True)
    print(f"\nAll {len(times)} MILP solves proven optimal and never worse than greedy: "
          f"{'yes' if all_ok else 'NO'}. MILP solve time over all {len(times)} instances: median "
          f"{statistics.median(times):.2f} s, max {max(times):.2f} s (targets: < 5 s, < 60 s).\n")


def speed() -> None:
    sys.path.insert(0, str(ROOT / "tests" / "suppression"))
    from _reference import clip_user_naive  # type: ignore[import-not-found]

    print("## CLIP-USER: incremental vs naive (every error recomputed from scratch)\n")
    print("| instance | pairs | naive s | incremental s | speed-up | same plan |")
    print("|---|---|---|---|---|---|")
    for G in (7, 8):
        occ = heavy_hitter_occupancy(np.random.default_rng(G), n_grids=G, q=0.01, gamma=6)
        t0 = time.perf_counter()
        K, pairs, _ = clip_user_naive(occ, U, 1.0)
        tn = time.perf_counter() - t0
        reps = 20
        t0 = time.perf_counter()
        for _ in range(reps):
            plan = clip_user(occ, U, 1.0)
        ti = (time.perf_counter() - t0) / reps
        same = (plan.degradation, plan.suppressed) == (K, pairs)
        print(f"| synthetic G={G}, γ=6, ε=1 ({plan.info['steps']} steps) | {occ.n_pairs} | {tn:.3f} | "
              f"{ti:.4f} | {tn / ti:.0f}× | {'yes' if same else 'NO'} |", flush=True)
    print("\n## CLIP-USER on about 10^6 (user, grid) pairs\n")
    print("| instance | users | pairs | ε | steps | K: G_1 → greedy | seconds |")
    print("|---|---|---|---|---|---|---|")
    occ = heavy_hitter_occupancy(np.random.default_rng(19), n_grids=19, q=0.01, gamma=6)
    for eps in (0.1, 1.0):
        t0 = time.perf_counter()
        plan = clip_user(occ, U, eps)
        t = time.perf_counter() - t0
        print(f"| synthetic G=19, γ=6 | {occ.n_users} | {occ.n_pairs} | {eps} | {plan.info['steps']} | "
              f"{occ.degradation} → {plan.degradation} | {t:.2f} |", flush=True)
    print()


def austin() -> None:
    sys.path.insert(0, str(ROOT / "examples"))
    from suppression_austin import austin_occupancy, compare  # type: ignore[import-not-found]

    occ = austin_occupancy()
    print(f"## Austin buses (busiest hour, 50 busiest H3-7 cells, U = 120 km/h): {occ}\n")
    print("| ε | G_1 | greedy K | optimal K | greedy K·ε | optimal K·ε | status | MILP s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in compare(occ, 120.0, (0.1, 0.2, 0.5, 1.0, 2.0)):
        print(f"| {r['epsilon']} | {r['G1']} | {r['greedy_K']} | {r['milp_K']} | "
              f"{r['greedy_K'] * r['epsilon']:.2f} | {r['milp_K'] * r['epsilon']:.2f} | {r['status']} | "
              f"{r['time']:.2f} |", flush=True)
    print()


def tiebreak() -> None:
    print("## Lexicographic tie-break (fewest suppressed samples at the optimal K), 10 s limit\n")
    print("| γ | ε | optimal K | greedy samples | MILP samples | tie-break status | gap | total s |")
    print("|---|---|---|---|---|---|---|---|")
    for gamma in GAMMAS:
        occ = heavy_hitter_occupancy(np.random.default_rng(2024 + gamma), q=0.01, gamma=gamma)
        for eps in (0.2, 1.0):
            g = clip_user(occ, U, eps)
            t0 = time.perf_counter()
            m = solve_suppression(occ, U, eps, warm_start=g, tie_break_time_limit=10.0)
            t = time.perf_counter() - t0
            print(f"| {gamma} | {eps} | {m.degradation} | {g.suppressed_samples} | {m.suppressed_samples} | "
                  f"{m.info['tie_break']} | {m.info['tie_break_gap']:.2%} | {t:.1f} |", flush=True)
    print()


def frontier() -> None:
    from dpopt.suppression import suppression_frontier

    occ = heavy_hitter_occupancy(np.random.default_rng(8), n_grids=8, q=0.01, gamma=6)
    eps = 0.5
    t0 = time.perf_counter()
    fr = suppression_frontier(occ, U, eps)
    t = time.perf_counter() - t0
    g = clip_user(occ, U, eps)
    print(f"## Frontier E*(K) (exact), synthetic G = 8, γ = 6, ε = {eps}: {occ}\n")
    print(f"Paper's point: E = {fr.error_bound:.1f}; CLIP-USER reaches K = {g.degradation}. "
          f"Total {t:.1f} s.\n")
    print("| K | K·ε | E*(K) | status | feasibility MILPs |")
    print("|---|---|---|---|---|")
    for p in fr.points:
        print(f"| {p.degradation} | {p.degradation * eps:.1f} | {p.error:.2f} | {p.status.value} | {p.solves} |")
    print()
    sys.path.insert(0, str(ROOT / "examples"))
    from suppression_austin import austin_occupancy  # type: ignore[import-not-found]

    occ = austin_occupancy()
    eps, U_a = 1.0, 120.0
    t0 = time.perf_counter()
    fr = suppression_frontier(occ, U_a, eps, degradations=range(1, occ.degradation + 1))
    t = time.perf_counter() - t0
    g = clip_user(occ, U_a, eps)
    print(f"## Frontier E*(K) (exact), Austin, ε = {eps}, U = {U_a}\n")
    print(f"Paper's point: E = {fr.error_bound:.1f} (BASELINE); CLIP-USER reaches K = {g.degradation}. "
          f"Total {t:.1f} s. E*(K) is flat from K = 3: one grid's error cannot be lowered by any "
          "suppression (the floor max_g min E_g).\n")
    print("| K | K·ε | E*(K) | status | feasibility MILPs |")
    print("|---|---|---|---|---|")
    for p in fr.points:
        print(f"| {p.degradation} | {p.degradation * eps:.1f} | {p.error:.2f} | {p.status.value} | {p.solves} |")
    print()


if __name__ == "__main__":
    parts = sys.argv[1:] or ["speed", "austin", "family", "tiebreak", "frontier"]
    print(f"# Suppression benchmarks\n\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; Python "
          f"{platform.python_version()}, numpy {np.__version__}, highspy {highspy.__version__ if hasattr(highspy, '__version__') else '1.15.1'}; "
          f"{platform.machine()}, 2 cores.\n")
    for part in parts:
        {"family": family, "speed": speed, "austin": austin, "tiebreak": tiebreak,
         "frontier": frontier}[part]()
