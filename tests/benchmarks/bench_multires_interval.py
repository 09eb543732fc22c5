"""Calibration of the multi-resolution ``user`` release's ``mean`` intervals:
coverage of each published node's all-records truth by [mean ± mean_error_bound] at 90 %, and the
median stated half-width, over nodes and seeds, for ``estimate_hierarchical(interval="direct")``
(the default: direct Fieller + bias allowance widened by |BLUP − direct|) and
``interval="posterior"`` (z·√(tree-BLUP posterior variance) + the same allowance, capped), and as
a diagnostic the latter with no bias allowance (κ = 0; then the cap is the direct interval at κ = 0).

Measurements: the front door's defaults, exact discrete noise, seeds 1000+rep: with a public list
at pure ε the place release (``measure_place``, models/hierarchy.md §14) and, as a comparison row,
``resolution="adaptive"`` (``measure_multires``); without a list private selection at δ = 1e-6.
Scored by ``scoring.score_table`` (node truths from every occupied finest grid inside the node).

Run: PYTHONPATH=$PWD python tests/benchmarks/bench_multires_interval.py --data day --reps 20
     (``--settings 3``: only the adaptive release with ``--profile day``, other rows kept)
Writes results/multires_interval_<data>.json and results/multires_interval.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from bench_multires import DELTA, labels_of  # noqa: E402
from bench_userdp import DATASETS, load  # noqa: E402
from scoring import finest_grids, score_table  # noqa: E402


SETTINGS = ("public list (place, default)", "public list (adaptive)", "private selection",
            "public list (adaptive, --profile day)")


def measurements(agg, eps, setting, seed):
    from dpopt.privacy.options import Budget, NoiseOptions
    from dpopt.privacy.user import UserOptions
    from dpopt.privacy.user.strategies.adaptive import measure_multires
    from dpopt.privacy.user.strategies.place import measure_place

    noise = NoiseOptions(seed=seed)
    if setting == SETTINGS[0]:
        return measure_place(agg, Budget(epsilon_total=eps), UserOptions(partitions=labels_of(agg)), U=agg.bound,
                             noise=noise)
    if setting in (SETTINGS[1], SETTINGS[3]):
        profile = "day" if setting == SETTINGS[3] else None
        return measure_multires(agg, Budget(epsilon_total=eps), UserOptions(
            partitions=labels_of(agg), resolution="adaptive", profile=profile), bound=agg.bound, noise=noise)
    return measure_multires(agg, Budget(epsilon_total=eps, delta=DELTA), UserOptions(), bound=agg.bound, noise=noise)


def cell(agg, fin, eps, setting, reps):
    from dpopt.estimation.hierarchical import estimate_hierarchical

    out = {k: {"cov": [], "hw": [], "n": 0} for k in ("direct", "posterior", "posterior, no allowance")}
    for rep in range(reps):
        m = measurements(agg, eps, setting, 1000 + rep)
        for kind in out:
            t = estimate_hierarchical(m, confidence=0.9, interval=kind.split(",")[0],
                                      bias_allowance=0.0 if "no allowance" in kind else 0.5).table
            t = t[t["released"]].assign(slot_end=lambda d: d["slot"] + d["slot_ns"])
            s = score_table(t, fin)
            out[kind]["cov"].append(s.coverage * s.nodes)  # node-weighted
            out[kind]["n"] += s.nodes
            out[kind]["hw"].extend(t["mean_error_bound"].tolist())
    return {k: {"coverage": float(np.sum(v["cov"]) / max(v["n"], 1)), "median_half_width": float(np.median(v["hw"])),
                "nodes": v["n"]} for k, v in out.items()}


def write_markdown() -> None:
    lines = ["## Calibration of the multi-resolution `mean` interval (issue 21 item 2)", "",
             "`tests/benchmarks/bench_multires_interval.py`: the front door's measurements (exact discrete noise, "
             "seeds 1000+rep; public list at pure ε: the place release (default) and `resolution='adaptive'`; "
             "private selection at δ = 1e-6), `estimate_hierarchical(confidence=0.9)`, the released nodes scored "
             "by `scoring.score_table`: coverage = share of released nodes (pooled over seeds) whose **all-records** "
             "truth lies in [mean ± mean_error_bound]; width = median stated half-width over those nodes "
             "(U = 120 km/h for the buses, 1100 for the aircraft). Columns: coverage / median half-width (km/h).", "",
             "* `direct` — the default: direct (Fieller + κ·σ̄, κ = 0.5) interval widened by |BLUP − direct|;",
             "* `posterior` — option `interval=\"posterior\"`: z·√(tree-BLUP posterior variance) + the same κ·σ̄, "
             "capped at `direct`;",
             "* `posterior, κ = 0` — diagnostic: the same with no bias allowance (cap: `direct` at κ = 0).", "",
             "| data | eps | setting | nodes | direct | posterior | posterior, κ = 0 |", "|---|---|---|---|---|---|---|"]
    for data in DATASETS:
        p = HERE / "results" / f"multires_interval_{data}.json"
        if not p.exists():
            continue
        out = json.loads(p.read_text())
        order = {name: i for i, name in enumerate(SETTINGS)}
        for r in sorted(out["rows"], key=lambda r: (r["eps"], order.get(r["setting"], len(order)))):
            cells = " | ".join(f"{r[k]['coverage']:.2f} / {r[k]['median_half_width']:.1f}"
                               for k in ("direct", "posterior", "posterior, no allowance"))
            lines.append(f"| {data} ({r.get('reps', out['reps'])} seeds) | {r['eps']:g} | {r['setting']} | "
                         f"{r['direct']['nodes']} | {cells} |")
    (HERE / "results" / "multires_interval.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", choices=DATASETS, default="day")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0, 10.0])
    ap.add_argument("--settings", nargs="+", type=int, default=[0, 1, 2],
                    help=f"which settings (indices into {SETTINGS}); rows of the others are kept from the existing json")
    args = ap.parse_args()
    agg, _ = load(args.data)
    fin = finest_grids(agg, bound=agg.bound)
    path = HERE / "results" / f"multires_interval_{args.data}.json"
    chosen = [SETTINGS[i] for i in args.settings]
    kept = [r for r in json.loads(path.read_text())["rows"] if r["setting"] not in chosen] if path.exists() else []
    rows = []
    for eps in args.eps:
        for setting in chosen:
            t0 = time.process_time()
            r = cell(agg, fin, eps, setting, args.reps)
            rows.append({"eps": eps, "setting": setting, **r, "cpu_s": time.process_time() - t0, "reps": args.reps})
            print(json.dumps(rows[-1]), flush=True)
    old = json.loads(path.read_text()) if path.exists() else {"reps": args.reps}
    path.write_text(json.dumps({"reps": old["reps"], "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                "rows": kept + rows}, indent=1))
    write_markdown()


if __name__ == "__main__":
    main()
