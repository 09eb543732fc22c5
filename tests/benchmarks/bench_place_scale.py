"""The user release with a public list at scale: the whole CLI run on synthetic records, for a strategy
(``--strategy optimised``, the engine and the default, or ``place``).

    nice PYTHONPATH=$PWD python tests/benchmarks/bench_place_scale.py --sizes 1e6 1e7 --strategy optimised

Records: :func:`bench_scale.make_records` (Parquet, Zipf(1.5) users over n/100 ids, 20 clustered
centres with per-user drift, 30 days, values in [0, 120]). The public list is every (res-7 cell,
1 h slot) that holds a record, written by a separate process before the measurement (a benchmark
harness's choice: a real list comes from outside the data). One job per size, a fresh process:

    dpopt release records.parquet --privacy user --bound 120 --epsilon-total 10
        --partitions list.csv --h3-resolution 7 --slot 1h --out DIR --seed REPEAT

plus ``--strategy S`` (optimised: the engine's bounds, pilot, between statistic, strategy model,
main measurement and crossed fit; place: the cell and map levels and their shrinkage; both with the
writers, report.html and map.png). Wall clock, CPU (user + system) and peak RSS of the
process (``wait4``). Appends to tests/benchmarks/results/place_scale.md.

``--full-austin``: instead, the whole run on the full Austin data (the issue's "whole run ≤ 2× today's
time"), ``--strategy optimised`` and the former default ``place`` in turn, ``--repeat`` rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from bench_scale import ROOT, run_job  # noqa: E402

RESULTS = HERE / "results" / "place_scale.md"

LIST = r"""
import sys, pandas as pd
from dpopt.records import GridOptions, InputOptions, contributions
agg, _ = contributions(sys.argv[1], GridOptions(7, "1h"), InputOptions(chunksize=500_000), bound=120.0)
cells, slots = agg.grid_labels()
pd.DataFrame({"cell": cells, "slot": slots}).to_csv(sys.argv[2], index=False)
print(agg.n_grids, agg.n_users, agg.n_records)
"""

CLI = r"""
import sys
from dpopt.cli import main
sys.exit(main(sys.argv[1:]))
"""


def one_size(n: int, tmp: Path, repeat: int, strategy: str) -> list[dict]:
    data, plist = tmp / f"r{n}.parquet", tmp / f"list{n}.csv"
    subprocess.run([sys.executable, str(HERE / "bench_scale.py"), "--make", str(data), str(n), "parquet"], check=True,
                   env=dict(os.environ, PYTHONPATH=str(ROOT)))
    _, _, facts = run_job(LIST, str(data), str(plist))
    grids, users, records = (int(x) for x in facts.split())
    rows = []
    for rep in range(repeat):
        out = tmp / f"out{n}_{rep}"
        load = os.getloadavg()[0]
        cpu: list[float] = []
        sec, mib, _ = run_job(CLI, "release", str(data), "--privacy", "user", "--bound", "120", "--epsilon-total", "10",
                              "--partitions", str(plist), "--h3-resolution", "7", "--slot", "1h", "--out", str(out),
                              "--seed", str(rep + 1), "--strategy", strategy, cpu=cpu)
        summary = json.loads((out / "summary.json").read_text())
        rows.append({"strategy": strategy, "n": n, "seed": rep + 1, "grids": grids, "users": users, "records": records, "seconds": sec, "cpu": cpu[0],
                     "peak_mib": mib, "load": f"{load:.1f}-{os.getloadavg()[0]:.1f}",
                     "shape": summary.get("shape"), "record_cap": summary.get("record_cap"),
                     "nodes": summary.get("grids_released")})
        print(json.dumps(rows[-1]), flush=True)
    return rows


#: the full Austin data (the benchmarks' `full` set) and its columns
AUSTIN = Path("/work/shared/data/austin_bus/capmetrics_vehicle_positions_clean.csv.gz")
AUSTIN_COLUMNS = ["--user-col", "vehicle_id", "--time-col", "timestamp_utc", "--value-col", "speed_kmh"]

AUSTIN_LIST = r"""
import sys, pandas as pd
from dpopt.records import GridOptions, InputOptions, contributions
cols = {"user_id": "vehicle_id", "timestamp": "timestamp_utc", "value": "speed_kmh"}
agg, _ = contributions(sys.argv[1], GridOptions(7, "1h"), InputOptions(columns=cols), bound=120.0)
cells, slots = agg.grid_labels()
pd.DataFrame({"cell": cells, "slot": slots}).to_csv(sys.argv[2], index=False)
print(agg.n_grids, agg.n_users, agg.n_records)
"""


def full_austin(tmp: Path, repeat: int, strategies: list[str]) -> list[dict]:
    """The whole CLI run on the full Austin data (18 days, 484 buses; its occupied grids as the public
    list), each strategy in turn, ``repeat`` rounds, a fresh process each: the issue's "whole run on the
    full Austin data" beside the former default (``--strategy place``)."""
    plist = tmp / "austin_list.csv"
    _, _, facts = run_job(AUSTIN_LIST, str(AUSTIN), str(plist))
    grids, users, records = (int(x) for x in facts.split())
    rows = []
    for rep in range(repeat):
        for strategy in strategies:
            out = tmp / f"austin_{strategy}_{rep}"
            load, cpu = os.getloadavg()[0], []
            sec, mib, _ = run_job(CLI, "release", str(AUSTIN), *AUSTIN_COLUMNS, "--privacy", "user", "--bound", "120",
                                  "--epsilon-total", "10", "--partitions", str(plist), "--h3-resolution", "7", "--slot",
                                  "1h", "--out", str(out), "--seed", str(rep + 1), "--strategy", strategy, cpu=cpu)
            summary = json.loads((out / "summary.json").read_text())
            rows.append({"strategy": strategy, "n": records, "grids": grids, "users": users, "records": records,
                         "seconds": sec, "cpu": cpu[0], "peak_mib": mib,
                         "load": f"{load:.1f}-{os.getloadavg()[0]:.1f}", "record_cap": summary.get("record_cap"),
                         "nodes": summary.get("grids_released")})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def write_austin_markdown(rows: list[dict]) -> None:
    lines = [f"## Whole run on the full Austin data ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
             "`bench_place_scale.py --full-austin`)", "",
             "`dpopt release capmetrics_vehicle_positions_clean.csv.gz --privacy user --bound 120 --epsilon-total 10 "
             "--partitions list.csv --h3-resolution 7 --slot 1h --strategy S` (the data's column flags; the list is "
             "its occupied grids), a fresh process each, strategies interleaved; seed = round.", "",
             "| strategy | round | wall | CPU | peak RSS | load | T | released nodes |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['strategy']} | {r.get('round', '')} | {r['seconds']:.1f} s | {r['cpu']:.1f} s | "
                     f"{r['peak_mib']:,.0f} MiB | {r['load']} | {r['record_cap']} | {r['nodes']} |")
    by = {s: sorted(r["seconds"] for r in rows if r["strategy"] == s) for s in {r["strategy"] for r in rows}}
    if "place" in by and "optimised" in by:
        med = {s: v[len(v) // 2] for s, v in by.items()}
        lines += ["", f"Median wall: optimised {med['optimised']:.1f} s, place {med['place']:.1f} s: "
                      f"{med['optimised'] / med['place']:.2f}× (the issue's goal: ≤ 2×)."]
    with RESULTS.open("a") as f:
        f.write("\n".join(lines) + "\n\n")


def write_markdown(rows: list[dict]) -> None:
    strategies = sorted({r["strategy"] for r in rows})
    lines = [f"## User release with a list at scale, --strategy {', '.join(strategies)} "
             f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, `bench_place_scale.py`)", "",
             "Whole CLI run (`dpopt release ... --privacy user --epsilon-total 10 --partitions list.csv "
             "--h3-resolution 7 --slot 1h --strategy S --seed R`) on bench_scale.py's synthetic Parquet "
             "records, one fresh process per run, repeat R = 1, 2, … (the plan, and so the fits' sizes, move "
             "with the seed): wall, CPU (user + system), peak RSS; T and the released nodes from summary.json.", "",
             "| records | listed grids | users | seed | wall | CPU | peak RSS | load | T | released nodes |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['records']:,} | {r['grids']:,} | {r['users']:,} | {r.get('seed', 1)} | {r['seconds']:.1f} s | {r['cpu']:.1f} s "
                     f"| {r['peak_mib']:,.0f} MiB | {r['load']} | {r['record_cap']} | {r['nodes']} |")
    with RESULTS.open("a") as f:
        f.write("\n".join(lines) + "\n\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", type=float, default=[1e6, 1e7])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--strategy", default="optimised", choices=["optimised", "place", "adaptive", "fixed"])
    ap.add_argument("--full-austin", action="store_true",
                    help="instead: the whole run on the full Austin data, --strategy optimised and place in turn")
    args = ap.parse_args()
    rows = []
    if args.full_austin:
        with tempfile.TemporaryDirectory() as tmp:
            rows = full_austin(Path(tmp), args.repeat, ["place", "optimised"])
        for i, r in enumerate(rows):
            r["round"] = i // 2 + 1
        write_austin_markdown(rows)
        return
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            rows += one_size(int(size), Path(tmp), args.repeat, args.strategy)
    write_markdown(rows)


if __name__ == "__main__":
    main()
