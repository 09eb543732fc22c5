"""Where the user release's time goes at scale with a list: the whole CLI run of
:mod:`bench_place_scale` (the scale generator's Parquet, its occupied res-7 × 1 h grids as the list,
ε = 10, ``--strategy optimised``) in a fresh process whose crossed fits and component profiles are
timed as they run, beside the release's own stage timings (records, measurement, estimate).

    nice PYTHONPATH=$PWD python tests/benchmarks/bench_estimate_phases.py --size 2e7 [--data r.parquet --list l.csv]
    nice PYTHONPATH=$PWD python tests/benchmarks/bench_estimate_phases.py --kind hospital [--patients 150000]

``--kind hospital``: the large-list release of models/engine.md §6 instead — emergency-department
waiting times (minutes, clamped to [0, 480]) of ``--patients`` patients (85 % one visit, the rest 2–5)
at 25 hospitals over eight weeks in Europe/Madrid from 2024-02-26, multiplicative in hospital × hour
of the day × weekday (seeded; 206,021 records and 38,252 listed res-8 × 1 h grids at 150,000
patients), every occupied grid listed, ε = 10, ``--bound 480``, no map.

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

HOSPITAL = r"""
import sys, h3, numpy as np, pandas as pd
path, plist, n_pat = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = np.random.default_rng(7)
H = 25
lat, lon = 40.42 + rng.normal(0, 0.05, H), -3.70 + rng.normal(0, 0.07, H)
visits = np.where(rng.random(n_pat) < 0.85, 1, rng.integers(2, 6, n_pat))
user = np.repeat(np.arange(n_pat), visits)
home = rng.integers(0, H, n_pat)
hosp = np.where(rng.random(user.size) < 0.8, home[user], rng.integers(0, H, user.size))
hours = np.arange(24)
w = 0.3 + np.exp(-((hours - 11) / 4.0) ** 2) + 0.7 * np.exp(-((hours - 19) / 3.0) ** 2)
day, hod = rng.integers(0, 56, user.size), rng.choice(24, size=user.size, p=w / w.sum())
ts = (pd.Timestamp("2024-02-26", tz="Europe/Madrid") + pd.to_timedelta(day, "D") + pd.to_timedelta(hod, "h")
      + pd.to_timedelta(rng.integers(0, 60, user.size), "min"))
dow, lh = ts.day_of_week.to_numpy(), ts.hour.to_numpy()
prof = 1 + 0.6 * np.exp(-((lh - 19) / 3.0) ** 2) + 0.3 * np.exp(-((lh - 11) / 3.0) ** 2)
wk = np.where(dow == 0, 1.3, np.where(dow >= 5, 0.85, 1.0))
val = 60 * rng.lognormal(0, 0.3, H)[hosp] * prof * wk * rng.lognormal(0, 0.5, user.size)
df = pd.DataFrame({"user_id": user.astype(str), "timestamp": ts.tz_convert("UTC"),
                   "latitude": lat[hosp] + rng.normal(0, 0.0004, user.size),
                   "longitude": lon[hosp] + rng.normal(0, 0.0004, user.size), "value": np.clip(val, 0, 480)})
df.to_parquet(path, index=False)
cell = [h3.latlng_to_cell(a, b, 8) for a, b in zip(df.latitude, df.longitude)]
slot = df.timestamp.dt.tz_convert("Europe/Madrid").dt.floor("h", ambiguous="infer", nonexistent="shift_forward")
grids = pd.DataFrame({"cell": cell, "slot": slot.map(lambda t: t.isoformat())}).drop_duplicates()
grids.to_csv(plist, index=False)
print(len(df), len(grids))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=float, default=2e7)
    ap.add_argument("--data", help="an existing Parquet file of the scale generator (not rewritten)")
    ap.add_argument("--list", help="its public list (cell, slot) CSV (else written from the data)")
    ap.add_argument("--seed", type=int, default=1, help="the release's --seed (the plan, and so the fits' sizes, move with it)")
    ap.add_argument("--kind", choices=["scale", "hospital"], default="scale",
                    help="the scale generator's records (--size) or the hospital waiting times (--patients)")
    ap.add_argument("--patients", type=int, default=150_000, help="patients of --kind hospital")
    args = ap.parse_args()
    cpu: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        data = Path(args.data) if args.data else tmp / "records.parquet"
        plist = Path(args.list) if args.list else tmp / "list.csv"
        if args.kind == "hospital":
            n_records, n_grids = map(int, run_job(HOSPITAL, str(data), str(plist), str(args.patients))[2].split())
            what = f"{n_records:,} hospital waiting times, {n_grids:,} listed grids"
            shape = ["--bound", "480", "--h3-resolution", "8", "--timezone", "Europe/Madrid", "--no-map"]
        else:
            if not args.data:
                _make(data, int(args.size), "parquet")
            if not args.list:
                run_job(LIST, str(data), str(plist))
            what, shape = f"{args.size:,.0f} records with a list", ["--bound", "120", "--h3-resolution", "7"]
        out = tmp / "out"
        sec, mib, text = run_job(JOB, "release", str(data), "--privacy", "user", "--epsilon-total", "10",
                                 "--partitions", str(plist), *shape, "--slot", "1h", "--out", str(out),
                                 "--seed", str(args.seed), "--strategy", "optimised", cpu=cpu)
        rows = json.loads(text.splitlines()[-1])
        diag = out.parent / "out.diagnostics" / "diagnostics.json"
        stages = json.loads(diag.read_text()).get("timings", {}) if diag.exists() else {}
    write_markdown(what, args.seed, sec, mib, rows, stages, cpu=cpu[0])


def write_markdown(what: str, seed: int, sec: float, mib: float, rows: list[dict], stages: dict, *,
                   cpu: float) -> None:
    lines = [f"## Where the time goes, {what}, seed {seed} ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
             "`bench_estimate_phases.py`)", "",
             f"Whole CLI run: **{sec:.1f} s** ({cpu:.0f} CPU-seconds), peak RSS {mib:,.0f} MiB."
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
