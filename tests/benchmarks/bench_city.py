"""City-scale suppression benchmark: full Austin bus data, H3 res 7 × 1 h, U = 120.

Run: ``nice python tests/benchmarks/bench_city.py [--time-limit 600] [--compact SECONDS]``.
Cases: the full data at ε ∈ {0.5, 1, 2}, and growing windows (the first 1, 3, 7, 21 distinct UTC
days of the data) at ε = 1. Each case runs in its own process (peak RSS per case): CLIP-USER (greedy K),
then ``solve_suppression(strategy="auto", tie_break=False, time_limit=...)`` (K, proven bound, gap,
time) and :func:`verify_lower_bound` on the returned weights (the bound recomputed without a solver).
``--compact S`` also runs the compact MILP (``strategy="milp"``) with S seconds on each case.
Prints a Markdown table for tests/benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent.parent / "shared" / "data" / "austin_bus" / "capmetrics_vehicle_positions_clean.csv.gz"
if not DATA.exists():
    DATA = Path("/work/shared/data/austin_bus/capmetrics_vehicle_positions_clean.csv.gz")
COLUMNS = {"user_id": "vehicle_id", "timestamp": "timestamp_utc", "value": "speed_kmh"}
U = 120.0
CASES = [(0.5, None), (1.0, None), (2.0, None), (1.0, 1), (1.0, 3), (1.0, 7), (1.0, 21)]


def occupancy(days: int | None):
    """The Austin occupancy (all data, or the grids of the first ``days`` distinct UTC days)."""
    import numpy as np
    import scipy.sparse as sp

    sys.path.insert(0, str(ROOT))
    from dpopt import Occupancy
    from dpopt.release import InputOptions, contributions

    agg, _ = contributions(str(DATA), bound=U, io=InputOptions(columns=COLUMNS))
    occ = agg.occupancy()
    if days is None:
        return occ
    day = np.asarray(agg.slots) // (86400 * 10**9)
    keep_days = np.unique(day)[:days]
    grids = np.flatnonzero(np.isin(day, keep_days))
    mat = sp.csr_array(occ.matrix[:, grids])
    users = np.flatnonzero(np.diff(mat.indptr) > 0)
    mat = sp.csr_array(mat[users])
    mat.sort_indices()
    return Occupancy(mat, occ.users[users], occ.grids[grids])


def one_case(eps: float, days: int | None, time_limit: float, compact: float | None) -> dict:
    sys.path.insert(0, str(ROOT))
    from dpopt.suppression import clip_user, solve_suppression, verify_lower_bound

    occ = occupancy(days)
    row: dict = {"epsilon": eps, "days": days or "all", "users": occ.n_users, "grids": occ.n_grids,
                 "pairs": occ.n_pairs, "G1": occ.degradation}
    t0 = time.perf_counter()
    g = clip_user(occ, U, eps)
    row.update(greedy_K=g.degradation, greedy_s=time.perf_counter() - t0)
    t0 = time.perf_counter()
    p = solve_suppression(occ, U, eps, time_limit=time_limit, tie_break=False)
    row.update(K=p.degradation, lower_bound=p.lower_bound, gap=p.gap, status=str(p.status),
               s=time.perf_counter() - t0, feasible=p.feasible)
    w = p.info.get("lower_bound_weights")
    if w is not None:
        t0 = time.perf_counter()
        row.update(verified_bound=verify_lower_bound(occ, U, eps, w), verify_s=time.perf_counter() - t0)
    if compact:
        t0 = time.perf_counter()
        m = solve_suppression(occ, U, eps, time_limit=compact, tie_break=False, strategy="milp",
                              warm_start=g)
        row.update(compact_K=m.degradation, compact_bound=m.lower_bound, compact_status=str(m.status),
                   compact_s=time.perf_counter() - t0)
    row["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--time-limit", type=float, default=600.0)
    ap.add_argument("--compact", type=float, default=None)
    ap.add_argument("--case", nargs=2, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.case is not None:
        eps, days = float(args.case[0]), None if args.case[1] == "all" else int(args.case[1])
        print(json.dumps(one_case(eps, days, args.time_limit, args.compact)))
        return
    rows = []
    print("| ε | days | users | grids | pairs | G_1 | greedy K (s) | K | proven bound (verified) | gap | "
          "status | time s | peak RSS MB |" + (" compact MILP K / bound (s) |" if args.compact else ""))
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if args.compact else ""))
    for eps, days in CASES:
        cmd = [sys.executable, __file__, "--case", str(eps), str(days or "all"),
               "--time-limit", str(args.time_limit)] + (["--compact", str(args.compact)] if args.compact else [])
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        r = json.loads(out)
        rows.append(r)
        line = (f"| {r['epsilon']} | {r['days']} | {r['users']} | {r['grids']} | {r['pairs']} | {r['G1']} | "
                f"{r['greedy_K']} ({r['greedy_s']:.0f}) | {r['K']} | {r['lower_bound']:.0f} "
                f"({r.get('verified_bound', '—')}) | {r['gap']:.2%} | {r['status']} | {r['s']:.1f} | "
                f"{r['peak_rss_mb']:.0f} |")
        if args.compact:
            line += f" {r['compact_K']} / {r['compact_bound']:.0f} ({r['compact_s']:.0f}) |"
        print(line, flush=True)
    Path("/tmp/bench_city.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
