"""The place release at ε = 1 against the oracle constant, and its prior spread τ₀ (the accuracy goal;
models/hierarchy.md §14.3, §14.5).

Two measurements, both scored like results/multires.md (pooled median |error| over the finest
res-7 × 1 h grids with ≥ 10 users and over seeds, truth = the grid's exact mean of clamped values):

* **the floor of a map-only answer**: the exact map-wide mean (the oracle constant) plus Gaussian
  noise of sd 0, 0.5, 0.8, 1.0 km/h, 4,000 draws each (numpy, seed 0). No DP here: it shows what a
  release that measures only the map can reach, however its noise is spent;
* **τ₀ sweep**: the default place release (front door, exact discrete noise) with
  ``PRIOR_SPREAD_DIVISOR`` set to 30, 24 and 20 (τ₀ = U/30, U/24, U/20), at ε = 1 on two seed sets
  (1000+ and 5000+) and at ε = 10 on 1000+; the number of runs that measured the cells.

Run: PYTHONPATH=$PWD python tests/benchmarks/bench_place_choice.py --data day
     PYTHONPATH=$PWD python tests/benchmarks/bench_place_choice.py --data full
(day: 30 + 60 seeds, full: 15 + 40 seeds; about 10 and 20 minutes on the 2-core box). Writes
results/place_choice_<data>.json and results/place_choice.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from bench_multires import labels_of  # noqa: E402
from bench_userdp import U, load  # noqa: E402
from scoring import finest_grids, score_table  # noqa: E402

DIVISORS = (30.0, 24.0, 20.0)
NOISE_SD = (0.0, 0.5, 0.8, 1.0)
SEEDS = {"day": (30, 60), "full": (15, 40)}


def constant_floor(fin) -> dict:
    """Pooled median |error| of the exact map-wide mean plus Gaussian noise of each sd in NOISE_SD."""
    t = fin.truth[fin.scored]
    exact = float(fin.sums.sum() / fin.records.sum())
    rng = np.random.default_rng(0)
    out = {}
    for sd in NOISE_SD:
        m = exact + rng.normal(0.0, sd, 4000)
        out[f"{sd:g}"] = float(np.median(np.abs(t[None, :] - m[:, None])))
    return {"exact_mean": exact, "median_error_by_sd": out}


def sweep(agg, fin, divisor: float, eps: float, base: int, seeds: int) -> dict:
    import dpopt.privacy.user.strategies.place as place
    from dpopt.privacy.options import Budget, NoiseOptions
    from dpopt.privacy.user import UserOptions
    from dpopt.release import release_user

    old, place.PRIOR_SPREAD_DIVISOR = place.PRIOR_SPREAD_DIVISOR, divisor
    try:
        errs, cells = [], 0
        for seed in range(seeds):
            r = release_user(agg, Budget(epsilon_total=eps), UserOptions(partitions=labels_of(agg), resolution="place"),
                             bound=U, noise=NoiseOptions(seed=base + seed))
            errs.append(score_table(r.table, fin).errors)
            cells += int(r.measurements.info["first_level"] == 1)
    finally:
        place.PRIOR_SPREAD_DIVISOR = old
    return {"divisor": divisor, "eps": eps, "seeds": f"{base}+{seeds}", "median": float(np.median(np.concatenate(errs))),
            "cells_measured": cells, "runs": seeds}


def run(data: str) -> dict:
    agg, _ = load(data)
    fin = finest_grids(agg, bound=U)
    n1, n2 = SEEDS[data]
    rows = []
    for d in DIVISORS:
        for eps, base, n in ((1.0, 1000, n1), (1.0, 5000, n2), (10.0, 1000, n1)):
            rows.append(sweep(agg, fin, d, eps, base, n))
            print(data, rows[-1], flush=True)
    return {"data": data, "floor": constant_floor(fin), "sweep": rows}


def write_markdown() -> None:
    lines = ["# The place release at eps = 1 against the oracle, and its prior spread: `tests/benchmarks/bench_place_choice.py`",
             "", "Pooled median |error| (km/h) over the finest res-7 x 1 h grids with >= 10 users and over seeds.", "",
             "**A map-only answer's floor**: the exact map-wide mean (the oracle constant) plus Gaussian noise "
             "of sd 0 / 0.5 / 0.8 / 1.0 km/h (4,000 draws; no DP):", "",
             "| data | exact mean | sd 0 | sd 0.5 | sd 0.8 | sd 1.0 |", "|---|---|---|---|---|---|"]
    outs = [json.loads(p.read_text()) for p in (HERE / "results" / f"place_choice_{d}.json" for d in ("day", "full"))
            if p.exists()]
    for o in outs:
        f = o["floor"]
        lines.append(f"| {o['data']} | {f['exact_mean']:.2f} | " + " | ".join(
            f"{f['median_error_by_sd'][f'{sd:g}']:.3f}" for sd in NOISE_SD) + " |")
    lines += ["", "**Prior spread tau0 = U/divisor of the cells' share rule** (default place release, exact noise; "
              "cells: runs that measured the cells):", "",
              "| data | eps | seeds | U/30 | U/24 | U/20 (default) |", "|---|---|---|---|---|---|"]
    for o in outs:
        keys = sorted({(r["eps"], r["seeds"]) for r in o["sweep"]}, key=lambda k: (k[0], k[1]))
        for eps, seeds in keys:
            cells = {r["divisor"]: r for r in o["sweep"] if r["eps"] == eps and r["seeds"] == seeds}
            lines.append(f"| {o['data']} | {eps:g} | {seeds} | " + " | ".join(
                f"{cells[d]['median']:.3f} (cells {cells[d]['cells_measured']}/{cells[d]['runs']})" for d in DIVISORS)
                + " |")
    (HERE / "results" / "place_choice.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", choices=["day", "full"], default="day")
    args = ap.parse_args()
    out = run(args.data)
    (HERE / "results" / f"place_choice_{args.data}.json").write_text(json.dumps(out, indent=1))
    write_markdown()


if __name__ == "__main__":
    main()
