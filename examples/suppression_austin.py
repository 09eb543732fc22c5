"""Grid suppression on real data: Austin Capital Metro buses (seed 002's ITMS setting, G = 50).

Grids are H3 resolution-7 cells × one hour; we take the busiest hour (most records) and its 50
grids with the most records, as seed 002 §VI-A1 does for its ITMS data. Users are vehicles; U = 120
km/h. Prints greedy CLIP-USER vs the exact MILP for a range of ε.

Run: python examples/suppression_austin.py   (about 10 s)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpopt import Occupancy
from dpopt.suppression import clip_user, solve_suppression

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "austin_bus" / \
    "capmetrics_vehicle_positions_clean.csv.gz"


def austin_occupancy(path: Path = DATA, *, resolution: int = 7, n_grids: int = 50) -> Occupancy:
    """Occupancy of the busiest hour's ``n_grids`` busiest H3 cells (user = vehicle_id)."""
    import h3
    import pandas as pd

    df = pd.read_csv(path, usecols=["vehicle_id", "timestamp_utc", "latitude", "longitude"])
    df["hour"] = pd.to_datetime(df["timestamp_utc"]).dt.floor("h")
    hour = df["hour"].value_counts().idxmax()
    d = df[df["hour"] == hour]
    cells = [h3.latlng_to_cell(a, b, resolution) for a, b in zip(d["latitude"], d["longitude"])]
    d = d.assign(grid=cells)
    top = d["grid"].value_counts().index[:n_grids]
    d = d[d["grid"].isin(top)]
    counts = d.groupby(["vehicle_id", "grid"]).size().reset_index(name="count")
    return Occupancy.from_triples(counts["vehicle_id"], counts["grid"], counts["count"])


def compare(occ: Occupancy, U: float = 120.0, epsilons=(0.1, 0.2, 0.5, 1.0, 2.0)) -> list[dict]:
    rows = []
    for eps in epsilons:
        g = clip_user(occ, U, eps)
        m = solve_suppression(occ, U, eps, tie_break_time_limit=2.0)
        rows.append({"epsilon": eps, "G1": occ.degradation, "greedy_K": g.degradation,
                     "milp_K": m.degradation, "status": m.status.value, "time": m.solve_time})
    return rows


if __name__ == "__main__":
    occ = austin_occupancy()
    print(f"Austin busiest hour, 50 busiest H3-7 cells: {occ}")
    print(f"{'eps':>5} {'G1':>3} {'greedy K':>8} {'MILP K':>6}  status   time")
    for r in compare(occ):
        print(f"{r['epsilon']:>5} {r['G1']:>3} {r['greedy_K']:>8} {r['milp_K']:>6}  {r['status']:<8} {r['time']:.2f}s")
