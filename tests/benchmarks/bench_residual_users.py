"""How much of a grid's mean the place + time model leaves unexplained, by the grid's users.

The engine's interval for a grid not measured on its own holds the model's residual e_g with one
variance σ²_e for every grid (models/engine.md §4), read from the record-weighted between-grid
statistic. This benchmark measures, without noise, how the residual's size depends on how many
users a grid holds: the exact grid means (all records, values clamped at U) are fitted by the
additive model μ + cell + slot (weighted least squares, weights = records; the floor of
bench_engine.py), and the squared residuals are averaged per class of users per grid. Two one-
parameter-pair laws are fitted to the per-grid squared residuals by least squares, a + b/users
and a + b/records, and their R² over the class means is reported: which count the residual's
variance follows decides what a heteroscedastic interval would have to know about a grid.

No DP anywhere: a statement about the data sets, not about a release.

Run: PYTHONPATH=$PWD python tests/benchmarks/bench_residual_users.py [--data D ...]
Writes results/residual_users.md.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from bench_engine import EXTRA_SETS, additive_floor  # noqa: E402
from bench_userdp import load  # noqa: E402
from scoring import finest_grids  # noqa: E402

#: the classes of users per grid (inclusive bounds); the last is open
CLASSES = ((1, 1), (2, 2), (3, 4), (5, 9), (10, 19), (20, 49), (50, None))
DEFAULT_SETS = ("day", "full", "day_timeset", "full_dayset", "sensors_synth", "payments_synth", "amounts_synth",
                "aircraft_a", "aircraft_b")


def law_fit(r2: np.ndarray, count: np.ndarray) -> tuple[float, float]:
    """(a, b) of the least-squares fit r² ≈ a + b/count over the grids."""
    X = np.column_stack([np.ones(count.size), 1.0 / np.asarray(count, dtype=float)])
    (a, b), *_ = np.linalg.lstsq(X, np.asarray(r2, dtype=float), rcond=None)
    return float(a), float(b)


def class_r2(means: np.ndarray, predicted: np.ndarray, sizes: np.ndarray) -> float:
    """R² of ``predicted`` against the class means, each class weighted by its grids."""
    w = sizes / sizes.sum()
    centre = float(np.sum(w * means))
    total = float(np.sum(w * (means - centre) ** 2))
    return 1.0 - float(np.sum(w * (means - predicted) ** 2)) / total if total > 0 else float("nan")


def measure(name: str) -> dict:
    agg, _ = EXTRA_SETS.get(name, lambda: load(name))()
    fin = finest_grids(agg, bound=agg.bound)
    r2 = (fin.truth - additive_floor(fin, [fin.cells, fin.slots])) ** 2
    users, records = fin.users.astype(float), fin.records
    rows, means, sizes, by_users, by_records = [], [], [], [], []
    a_u, b_u = law_fit(r2, users)
    a_r, b_r = law_fit(r2, records)
    for lo, hi in CLASSES:
        m = (users >= lo) & (users <= (np.inf if hi is None else hi))
        if not m.any():
            continue
        means.append(float(r2[m].mean()))
        sizes.append(float(m.sum()))
        by_users.append(float(np.mean(a_u + b_u / users[m])))
        by_records.append(float(np.mean(a_r + b_r / records[m])))
        rows.append({"users": f"{lo}" if hi == lo else (f"{lo}–{hi}" if hi else f"≥ {lo}"), "grids": int(m.sum()),
                     "mean_r2": means[-1], "median_abs": float(np.median(np.sqrt(r2[m]))),
                     "records": float(np.median(records[m]))})
    means_a, sizes_a = np.array(means), np.array(sizes)
    return {"data": name, "grids": int(fin.truth.size), "rows": rows,
            "users_law": (a_u, b_u, class_r2(means_a, np.array(by_users), sizes_a)),
            "records_law": (a_r, b_r, class_r2(means_a, np.array(by_records), sizes_a))}


def markdown(results: list[dict]) -> str:
    out = ["# The residual of the place + time model, by users per grid (`tests/benchmarks/bench_residual_users.py`)",
           "",
           f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; Python {platform.python_version()}; no DP (exact "
           "grid means, values clamped at U). r = a grid's exact mean less the noise-free additive fit μ + cell + slot "
           "(weights = records). Per class of users per grid: the mean of r², the median |r| and the median records. "
           "Laws fitted to every grid's r² by least squares; R² over the class means (weights = grids).",
           ""]
    for res in results:
        a_u, b_u, q_u = res["users_law"]
        a_r, b_r, q_r = res["records_law"]
        out += [f"## {res['data']} ({res['grids']} grids)", "",
                "| users per grid | grids | mean r² | median abs r | median records |", "|---|---|---|---|---|"]
        out += [f"| {r['users']} | {r['grids']} | {r['mean_r2']:.2f} | {r['median_abs']:.2f} | {r['records']:.0f} |"
                for r in res["rows"]]
        out += ["", f"r² ≈ {a_u:.3g} + {b_u:.3g}/users (R² over classes {q_u:.3f}); "
                    f"r² ≈ {a_r:.3g} + {b_r:.3g}/records (R² {q_r:.3f}).", ""]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", nargs="+", default=list(DEFAULT_SETS))
    args = ap.parse_args()
    results = []
    for name in args.data:
        results.append(measure(name))
        print(name, results[-1]["users_law"], results[-1]["records_law"], flush=True)
    (HERE / "results" / "residual_users.md").write_text(markdown(results) + "\n")


if __name__ == "__main__":
    main()
