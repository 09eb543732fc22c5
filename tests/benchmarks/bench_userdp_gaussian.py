"""Benchmark: the ``user`` model with Gaussian noise at (ε, δ = 1e-6) vs Laplace at pure ε.

Same data, grids and scoring as :mod:`bench_userdp` (Austin buses, U = 120 km/h, H3 resolution 7 x
1 h, the true occupied grids passed as a public partition list, errors against the raw truth on grids
with >= 10 / >= 20 users). Rows:

* "auto": ``bounds="select"`` (10 % of the budget; under Gaussian 10 % of ρ, run at ε_b = √(2ρ_b));
* "fixed (k, c)": the same public bounds for both mechanisms, isolating the noise (the bounds
  PipelineDP's sweep found best in bench_userdp, (64, 1)).

dpopt's numpy samplers (simulation); the unpooled ``mean`` column and the pooled ``mean_pooled``.

Run: PYTHONPATH=$PWD python tests/benchmarks/bench_userdp_gaussian.py --data day --reps 10
Writes results/userdp_gaussian_<data>.json and results/userdp_gaussian.txt, which
``bench_userdp.write_markdown`` appends to results/userdp.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from bench_userdp import U, load, pooled, score, truth, write_markdown  # noqa: E402

DELTA = 1e-6
FIXED = (64, 1)


def run(agg, labels, eps, rep, mechanism, bounds):
    from dpopt.release import Budget, NoiseOptions, UserOptions, release_user

    budget = Budget(epsilon_total=eps, delta=DELTA if mechanism == "gaussian" else None, mechanism=mechanism)
    options = UserOptions(partitions=labels, bounds=bounds, strategy="fixed")
    t0 = time.perf_counter()
    res = release_user(agg, budget, options, bound=U, noise=NoiseOptions("numpy", seed=2000 + rep))
    wall = time.perf_counter() - t0
    key = pd.MultiIndex.from_arrays([labels["cell"], labels["slot"]])
    idx = key.get_indexer(pd.MultiIndex.from_arrays([res.table["cell"], res.table["slot"]]))
    m, v, mp, vp = (np.full(agg.n_grids, np.nan) for _ in range(4))
    m[idx], v[idx] = res.table["mean"].to_numpy(), res.table["variance"].to_numpy()
    mp[idx], vp[idx] = res.table["mean_pooled"].to_numpy(), res.table["variance_pooled"].to_numpy()
    rel = np.zeros(agg.n_grids, dtype=bool)
    rel[idx] = True
    return m, v, mp, vp, rel, wall, res.summary


def main() -> None:
    from dpopt.records.grid import cell_strings, slot_strings

    ap = argparse.ArgumentParser()
    ap.add_argument("--data", choices=["day", "full"], default="day")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0, 10.0])
    args = ap.parse_args()
    agg, _ = load(args.data)
    tmean, tvar, users = truth(agg)
    labels = pd.DataFrame({"cell": cell_strings(agg.cells), "slot": slot_strings(agg.slots)})
    rows = []
    for eps in args.eps:
        for bounds in ("select", FIXED):
            for mechanism in ("laplace", "gaussian"):
                runs, runs_p, chosen = [], [], []
                for rep in range(args.reps):
                    m, v, mp, vp, rel, wall, s = run(agg, labels, eps, rep, mechanism, bounds)
                    runs.append({"score": score(m, v, rel, tmean, tvar, users), "wall": wall})
                    runs_p.append({"score": score(mp, vp, rel, tmean, tvar, users), "wall": wall})
                    chosen.append((s.k, s.c))
                acct = {"epsilon_total": s.epsilon_total, "rho_total": s.rho_total, "delta": s.delta,
                        "budget": s.budget}
                label = "auto" if bounds == "select" else f"fixed {FIXED}"
                rows.append({"eps": eps, "bounds_rule": label, "mechanism": mechanism, "bounds": chosen,
                             "account": acct, "unpooled": pooled(runs), "pooled": pooled(runs_p)})
                print(eps, label, mechanism, rows[-1]["unpooled"]["ge10"]["median_mean"],
                      rows[-1]["unpooled"]["ge20"]["median_mean"], flush=True)
    out = {"data": args.data, "users": agg.n_users, "grids": agg.n_grids,
           "grids_ge10": int((users >= 10).sum()), "grids_ge20": int((users >= 20).sum()), "rows": rows,
           "meta": {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "python": platform.python_version(),
                    "numpy": np.__version__, "reps": args.reps, "delta": DELTA}}
    (HERE / "results" / f"userdp_gaussian_{args.data}.json").write_text(json.dumps(out, indent=1))
    write_section()
    write_markdown()


def write_section() -> None:
    """results/userdp_gaussian.txt (not *.md: appended to userdp.md by bench_userdp.write_markdown)."""
    lines = ["## Gaussian (zCDP) vs Laplace in the `user` model", "",
             "`python tests/benchmarks/bench_userdp_gaussian.py --data day|full`: the same releases as above "
             "with public (oracle) partitions, Laplace at pure eps against Gaussian at (eps, delta = 1e-6) "
             "(rho = the largest rho whose tight conversion, CKS 2020 Cor. 13, is <= eps; bounds choice at "
             "eps_b with eps_b^2/2 = 10 % of rho). numpy samplers; median / p90 |error| of the mean in km/h "
             "on grids with >= 10 / >= 20 users, pooled over repetitions; `mean` = the unpooled column, "
             "`pooled` = `mean_pooled`.", ""]
    for data in ("day", "full"):
        p = HERE / "results" / f"userdp_gaussian_{data}.json"
        if not p.exists():
            continue
        r = json.loads(p.read_text())
        m = r["meta"]
        lines += [f"### {'Embedded Austin day' if data == 'day' else 'Full Austin data'}: {r['grids']} grids, "
                  f"{r['grids_ge10']} with >= 10 users, {r['grids_ge20']} with >= 20 ({m['date']}, "
                  f"{m['reps']} repetitions)", "",
                  "| eps | bounds | mechanism | (k, c) chosen | rho_total | >=10: mean median / p90 | pooled median "
                  "| >=20: mean median / p90 | pooled median | Gaussian/Laplace median (>=10, >=20) |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        lap = {}
        for row in r["rows"]:
            u, pl = row["unpooled"], row["pooled"]
            key = (row["eps"], row["bounds_rule"])
            if row["mechanism"] == "laplace":
                lap[key] = u
                ratio = ""
            else:
                lu = lap.get(key)
                ratio = (f"{u['ge10']['median_mean'] / lu['ge10']['median_mean']:.2f}, "
                         f"{u['ge20']['median_mean'] / lu['ge20']['median_mean']:.2f}") if lu else ""
            kc = sorted(set(tuple(b) for b in row["bounds"]))
            kc_text = ", ".join(f"({k},{c})" for k, c in kc[:4]) + (" ..." if len(kc) > 4 else "")
            rho = row["account"]["rho_total"]
            lines.append(
                f"| {row['eps']:g} | {row['bounds_rule']} | {row['mechanism']} | {kc_text} | "
                f"{'' if rho is None else f'{rho:.4g}'} | "
                f"{u['ge10']['median_mean']:.1f} / {u['ge10']['p90_mean']:.1f} | {pl['ge10']['median_mean']:.1f} | "
                f"{u['ge20']['median_mean']:.1f} / {u['ge20']['p90_mean']:.1f} | {pl['ge20']['median_mean']:.1f} | "
                f"{ratio} |")
        lines.append("")
    notes = HERE / "results" / "userdp_gaussian_notes.txt"
    if notes.exists():
        lines += [notes.read_text().strip(), ""]
    (HERE / "results" / "userdp_gaussian.txt").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
