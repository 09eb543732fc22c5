"""Grid suppression on real data: Austin Capital Metro buses (seed 002's ITMS setting, G = 50).

Grids are H3 resolution-7 cells × one hour (9–10 h local time, on the day with the most buses in that
hour); we keep the 50 grids with the most records, as seed 002 §VI-A1 does for its ITMS data. Users
are vehicles; U = 120 km/h. Prints greedy CLIP-USER vs the exact MILP for a range of ε.

By default it uses the one-day Austin sample embedded in dpopt (works on a clean clone); pass the path
of the full records (columns vehicle_id,timestamp_utc,latitude,longitude or the sample's layout) to
use them instead:

    python examples/suppression_austin.py [RECORDS.csv[.gz]]     (about 10 s)
"""

from __future__ import annotations

import sys

from dpopt.experiments.seed002 import austin_occupancy
from dpopt.suppression import clip_user, solve_suppression


def compare(occ, U: float = 120.0, epsilons=(0.1, 0.2, 0.5, 1.0, 2.0)) -> list[dict]:
    rows = []
    for eps in epsilons:
        g = clip_user(occ, U, eps)
        m = solve_suppression(occ, U, eps, tie_break_time_limit=2.0)
        rows.append({"epsilon": eps, "G1": occ.degradation, "greedy_K": g.degradation,
                     "milp_K": m.degradation, "status": m.status.value, "time": m.solve_time})
    return rows


if __name__ == "__main__":
    data = sys.argv[1] if len(sys.argv) > 1 else None  # None: the embedded sample
    occ, info = austin_occupancy(data, hour=9, n_grids=50)
    print(f"Austin {info['day']} {info['hour']}:00-{info['hour'] + 1}:00, {info['grids']} busiest H3-7 cells, "
          f"{info['users']} buses, G_1 = {info['G1']} ({info['source']})")
    print(f"{'eps':>5} {'G1':>3} {'greedy K':>8} {'MILP K':>6}  status   time")
    for r in compare(occ):
        print(f"{r['epsilon']:>5} {r['G1']:>3} {r['greedy_K']:>8} {r['milp_K']:>6}  {r['status']:<8} {r['time']:.2f}s")
