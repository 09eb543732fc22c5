"""What any node of the hierarchy could score, before and after user-level noise (to
report where dpopt loses): a floor for the finest-grid metric on each benchmark data set.

For every candidate node shape (H3 resolution r ≤ R) × (time: the finest slot, 3 h, day, the whole
period, hour-of-day) each scored finest grid (≥ 10 users) is answered by the exact mean of all
records of its node (no noise, no cap, no clamp): the **noise-free error** of that shape. Beside it
the node's **effective users** n_eff = Σ_ℓ (share of user ℓ's records inside the node), which sets
the noise of any per-user-capped Laplace mean: with every user capped at T records, a node's sum
noise has scale T·(B/2)/ε and its record count is ≈ T·n_eff, so the mean's noise sd is at least

    sd_min = √2·(B/2)/(ε·n_eff),   B = U/2 (on these sets the clamp's least value), all of ε on that one sum,

an optimistic bound for the mechanisms dpopt and its peers use (no count noise, no other level, no
bounds budget). The **floor** of a shape at ε is the median over scored grids of |e_g + Z|, e_g the
grid's noise-free error and Z ~ Laplace of sd sd_min(n_eff of its node) (200 draws). A release whose
answers come from one shape cannot beat that shape's floor in expectation; the best floor over shapes
against the exact map-wide mean says whether the accuracy goal (≤ 0.9× / 1.0× of it, models/hierarchy.md) is reachable.

Run: PYTHONPATH=$PWD python tests/benchmarks/bench_node_floor.py [--data day full aircraft_a aircraft_b]
Writes results/node_floor.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from bench_userdp import DATASETS, load  # noqa: E402
from scoring import finest_grids  # noqa: E402

HOUR = 3_600 * 10**9
#: time shapes: name → (slot length in hours, cycle in hours; 0 = none); slot 0 = the whole period
TIMES = {"1h": (1, 0), "3h": (3, 0), "day": (24, 0), "period": (0, 0), "hour-of-day": (1, 24)}
EPS = (1.0, 10.0)
DRAWS = 200


def node_keys(fin, agg, r: int, slot_h: int, cycle_h: int) -> np.ndarray:
    """Each finest grid's node index at (resolution r, time shape)."""
    from dpopt.hierarchy.tree import cell_parents

    cells = cell_parents(fin.cells, r) if r < fin.resolution else fin.cells
    if slot_h == 0:
        t = np.zeros_like(fin.slots)
    elif cycle_h:
        t = (fin.slots % (cycle_h * HOUR)) // (slot_h * HOUR)
    else:
        t = fin.slots // (slot_h * HOUR)
    return np.unique(np.stack([cells, t]), axis=1, return_inverse=True)[1].ravel()


def shape_row(fin, agg, key: np.ndarray, rng) -> dict:
    """Noise-free error, effective users and the floors at each ε of one node shape."""
    sc = fin.scored
    S, N = np.bincount(key, weights=fin.sums), np.bincount(key, weights=fin.records)
    err = (S[key] / N[key] - fin.truth)[sc]
    user_records = np.bincount(agg.pair_user, weights=agg.count)
    neff = np.bincount(key[agg.pair_grid], weights=agg.count / user_records[agg.pair_user], minlength=key.max() + 1)
    n = neff[key[sc]]
    row = {"error": float(np.median(np.abs(err))), "neff": float(np.median(n))}
    for eps in EPS:
        sd = np.sqrt(2.0) * (fin.bound / 4.0) / (eps * n)  # B/2 with B = U/2
        z = rng.laplace(0.0, sd / np.sqrt(2.0), size=(DRAWS, n.size))
        row[f"floor_{eps:g}"] = float(np.median(np.abs(err[None, :] + z)))
    return row


def run(which: str) -> dict:
    agg, _ = load(which)
    fin = finest_grids(agg, bound=agg.bound)
    rng = np.random.default_rng(0)
    constant = float(fin.sums.sum() / fin.records.sum())
    out = {"data": which, "users": int(agg.n_users), "scored": int(fin.scored.sum()), "bound": float(fin.bound),
           "constant": float(np.median(np.abs(constant - fin.truth[fin.scored]))), "rows": []}
    for r in range(fin.resolution, -1, -1):
        for name, (slot_h, cycle_h) in TIMES.items():
            if r == fin.resolution and name == "1h":
                continue  # the finest grid itself: error 0, n_eff of a grid
            row = shape_row(fin, agg, node_keys(fin, agg, r, slot_h, cycle_h), rng)
            out["rows"].append({"resolution": r, "time": name, **row})
    return out


def markdown(results: list[dict]) -> str:
    lines = ["# Node floors: what one node shape could score (`tests/benchmarks/bench_node_floor.py`)", "",
             __doc__.split("Run:")[0].strip(), "",
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {DRAWS} noise draws per shape.", ""]
    for res in results:
        c = res["constant"]
        lines += [f"## {res['data']}: {res['users']} users, {res['scored']} scored grids, U = {res['bound']:g}; "
                  f"exact map-wide mean (oracle) {c:.2f}", "",
                  "| node shape | noise-free error | n_eff (median) | floor ε = 1 | floor ε = 10 |", "|---|---|---|---|---|"]
        best = {eps: min(res["rows"], key=lambda r: r[f"floor_{eps:g}"]) for eps in EPS}
        for r in res["rows"]:
            mark = "".join(f" **best at ε = {e:g}**" for e in EPS if r is best[e])
            lines.append(f"| ({r['resolution']}, {r['time']}){mark} | {r['error']:.2f} | {r['neff']:.1f} | "
                         f"{r['floor_1']:.2f} | {r['floor_10']:.2f} |")
        lines += ["", "Best floor: " + "; ".join(
            f"ε = {eps:g}: ({best[eps]['resolution']}, {best[eps]['time']}) {best[eps][f'floor_{eps:g}']:.2f} = "
            f"{best[eps][f'floor_{eps:g}'] / c:.2f}× the oracle constant" for eps in EPS), ""]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", nargs="+", choices=DATASETS, default=list(DATASETS))
    args = ap.parse_args()
    results = [run(w) for w in args.data]
    (HERE / "results" / "node_floor.md").write_text(markdown(results))
    print(markdown(results))


if __name__ == "__main__":
    main()
