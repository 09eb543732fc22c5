"""Where the user release's time goes at scale with a list: the whole CLI run of
:mod:`bench_place_scale` (the scale generator's Parquet, its occupied res-7 × 1 h grids as the list,
ε = 10, ``--strategy optimised``) in a fresh process whose crossed fits and component profiles are
timed as they run, beside the release's own stage timings (records, measurement, estimate).

    nice PYTHONPATH=$PWD python tests/benchmarks/bench_estimate_phases.py --size 2e7 [--data r.parquet --list l.csv]

Each fit of :func:`dpopt.hierarchy.crossed.fit_crossed` is reported with its caller's role (the
engine's pilot, the estimate's point / refit / fixed / joint / wide fit), its REML evaluations and
seconds; each :func:`dpopt.hierarchy.crossed.component_profile` with its block and values. Appends to
tests/benchmarks/results/estimate_phases.md. Wall clock and peak RSS are the process's (``wait4``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from bench_place_scale import LIST  # noqa: E402
from bench_scale import run_job, _make  # noqa: E402

RESULTS = HERE / "results" / "estimate_phases.md"

JOB = r"""
import json, sys, time
import dpopt.hierarchy.crossed as cr
import dpopt.estimation.crossed_estimate as ce
import dpopt.privacy.user.engine as en
rows = []
fit_crossed, profile = cr.fit_crossed, cr.component_profile

def caller():
    code = sys._getframe(2).f_code
    return code.co_filename.rsplit("/", 1)[-1].removesuffix(".py") + "." + code.co_name

def timed_fit(factors, *a, **k):
    t = time.perf_counter()
    fit = fit_crossed(factors, *a, **k)
    rows.append({"what": "fit", "caller": caller(), "factors": len(factors), "residual": bool(k.get("residual", True)),
                 "given": k.get("sigma2") is not None, "evaluations": fit.n_evaluations,
                 "seconds": time.perf_counter() - t, "names": list(factors)})
    print("progress", json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return fit

def timed_profile(*a, **k):
    t = time.perf_counter()
    out = profile(*a, **k)
    rows.append({"what": "profile", "caller": caller(), "block": int(a[5]),
                 "values": int(len(out)), "seconds": time.perf_counter() - t})
    print("progress", json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return out

ce.fit_crossed = en.fit_crossed = timed_fit
ce.component_profile = timed_profile
from dpopt.cli import main
code = main(sys.argv[1:])
print(json.dumps(rows))
sys.exit(code)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=float, default=2e7)
    ap.add_argument("--data", help="an existing Parquet file of the scale generator (not rewritten)")
    ap.add_argument("--list", help="its public list (cell, slot) CSV (else written from the data)")
    ap.add_argument("--seed", type=int, default=1, help="the release's --seed (the plan, and so the fits' sizes, move with it)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        data = Path(args.data) if args.data else tmp / "records.parquet"
        if not args.data:
            _make(data, int(args.size), "parquet")
        plist = Path(args.list) if args.list else tmp / "list.csv"
        if not args.list:
            run_job(LIST, str(data), str(plist))
        out = tmp / "out"
        sec, mib, text = run_job(JOB, "release", str(data), "--privacy", "user", "--bound", "120", "--epsilon-total",
                                 "10", "--partitions", str(plist), "--h3-resolution", "7", "--slot", "1h", "--out",
                                 str(out), "--seed", str(args.seed), "--strategy", "optimised")
        rows = json.loads(text.splitlines()[-1])
        diag = out.parent / "out.diagnostics" / "diagnostics.json"
        stages = json.loads(diag.read_text()).get("timings", {}) if diag.exists() else {}
    write_markdown(args.size, args.seed, sec, mib, rows, stages)


def write_markdown(size: float, seed: int, sec: float, mib: float, rows: list[dict], stages: dict) -> None:
    lines = [f"## Where the time goes, {size:,.0f} records with a list, seed {seed} ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
             "`bench_estimate_phases.py`)", "",
             f"Whole CLI run: **{sec:.1f} s**, peak RSS {mib:,.0f} MiB."
             + (f" Stages (the release's timings): {', '.join(f'{k} {v:.1f} s' for k, v in stages.items())}." if stages else ""),
             "", "| call | caller | blocks | residual | components given | REML evaluations / values | seconds |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["what"] == "fit":
            lines.append(f"| fit_crossed | {r['caller']} | {r['factors']} | {r['residual']} | {r['given']} | "
                         f"{r['evaluations']} | {r['seconds']:.1f} |")
        else:
            lines.append(f"| component_profile | {r['caller']} | block {r['block']} | | | {r['values']} | "
                         f"{r['seconds']:.1f} |")
    total = {w: sum(r["seconds"] for r in rows if r["what"] == w) for w in ("fit", "profile")}
    lines += ["", f"Fits {total['fit']:.1f} s, profiles {total['profile']:.1f} s."]
    RESULTS.parent.mkdir(exist_ok=True)
    with RESULTS.open("a") as f:
        f.write("\n".join(lines) + "\n\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
