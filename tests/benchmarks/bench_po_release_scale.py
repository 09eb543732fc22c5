"""The default `public-occupancy` release of 10^6 synthetic records, end to end.

    nice PYTHONPATH=$PWD python tests/benchmarks/bench_po_release_scale.py              # ~5 min
    nice PYTHONPATH=$PWD python tests/benchmarks/bench_po_release_scale.py --records 1e5 --repeat 1

Records: tests/benchmarks/bench_scale.py's generator (Parquet, heavy-tailed users, clustered
positions, 30 days). Two jobs per repeat, each a fresh Python process:

* ``cli``: ``dpopt release records.parquet --privacy public-occupancy --bound 120 --epsilon-total 10
  --out DIR`` — the default release (budget planner with its knee frontier, default ``time_limit``
  25 s, then the noise and the output folder with report.html and map.png). Wall clock of the
  process, its CPU time (user + system, its children included: the isolated HiGHS solve) and its
  peak RSS (``wait4``).
* ``stages``: the same release through the Python API under :mod:`cProfile`, reporting the release's
  own stage timings (diagnostics: aggregate, plan, statistics, noise), the planner's parts (frontier,
  MILP) and the cumulative profile time of the writer's parts. The profiler slows Python-heavy code:
  this job shows where the time goes, the ``cli`` job is the measurement.

The machine is shared (6 engineers on 2 cores during wave 3): the load average before and after each
job is recorded. Appends a section to tests/benchmarks/results/po_release_scale.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
RESULTS = Path(__file__).parent / "results" / "po_release_scale.md"

STAGES = r"""
import cProfile, json, pstats, sys, time
from dpopt.release import Budget, PublicOccupancyOptions, release, write_release
path, out = sys.argv[1], sys.argv[2]
prof = cProfile.Profile()
t0 = time.perf_counter()
prof.enable()
res = release(path, bound=120.0, budget=Budget(epsilon_total=10), model=PublicOccupancyOptions())
t1 = time.perf_counter()
write_release(res, out)
prof.disable()
t2 = time.perf_counter()
st = pstats.Stats(prof).stats
def cum(name):
    return round(sum(v[3] for k, v in st.items() if k[2] == name), 3)
plan = res.plan.info.get("budget_plan") if hasattr(res, "plan") else None
info = plan.info if plan is not None else {}
print(json.dumps(dict(release_s=t1 - t0, write_s=t2 - t1, timings=res.diagnostics.get("timings", {}),
    frontier_s=cum("_frontier_points"), greedy_s=cum("greedy_assignment"), milp_stage_s=cum("_milp_stage"),
    highs_s=cum("solve_isolated") + cum("solve_highs"), assemble_s=cum("assemble"),
    html_report_s=cum("write_html_report"), html_map_s=cum("_map_section"), map_png_s=cum("plot_map"),
    csv_s=cum("to_csv"), milp=info.get("solve", {}), milp_columns=info.get("n_cols"))))
"""


def make(path: Path, n: int) -> None:
    if not path.exists():
        from tests.benchmarks.bench_scale import make_records

        make_records(path, n)


def run_measured(cmd: list[str], root: Path = ROOT) -> dict:
    env = dict(os.environ, PYTHONPATH=str(root))
    load0 = os.getloadavg()[0]
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if status != 0:
        raise RuntimeError(f"job failed ({status}): {cmd}")
    return dict(wall_s=wall, cpu_s=usage.ru_utime + usage.ru_stime, peak_mib=usage.ru_maxrss / 1024,
                stdout=out, load=(round(load0, 1), round(os.getloadavg()[0], 1)))


def cli_job(records: Path, out: Path, root: Path = ROOT) -> dict:
    r = run_measured([sys.executable, "-m", "dpopt", "release", str(records), "--privacy", "public-occupancy",
                      "--bound", "120", "--epsilon-total", "10", "--out", str(out)], root)
    summary = json.loads((out / "summary.json").read_text())
    timings = json.loads((Path(out).with_name(Path(out).name + ".diagnostics") / "diagnostics.json").read_text()).get("timings", {})
    fr = summary.get("frontier") or {}
    row = dict(job="cli" if root == ROOT else f"before: the code in {root.name}/", wall_s=r["wall_s"], cpu_s=r["cpu_s"], peak_mib=r["peak_mib"], load=r["load"],
               grids=summary["grids"], pairs=summary["pairs"], users=summary["users"], plan=summary["plan"],
               status=summary["plan_status"], released=summary["released_grids"],
               frontier_points=len(fr.get("tau", [])), frontier_complete=fr.get("complete"), timings=timings)
    print(json.dumps(row), flush=True)
    return row


def stages_job(records: Path, out: Path) -> dict:
    r = run_measured([sys.executable, "-c", STAGES, str(records), str(out)])
    row = dict(job="stages (cProfile)", wall_s=r["wall_s"], cpu_s=r["cpu_s"], load=r["load"],
               **json.loads(r["stdout"].strip().splitlines()[-1]))
    print(json.dumps(row), flush=True)
    return row


def write_results(n: int, cli: list[dict], stages: list[dict]) -> None:
    import platform

    med = lambda key: statistics.median(r[key] for r in cli if r["job"] == "cli")  # noqa: E731
    c = [r for r in cli if r["job"] == "cli"][-1]
    lines = [f"\n## Default public-occupancy release, {n:.0e} synthetic records, end to end "
             f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})\n",
             f"`tests/benchmarks/bench_po_release_scale.py`; Python {platform.python_version()}, "
             f"{os.cpu_count()} cores shared by ~6 engineers (load average before/after each job in the "
             "table). `dpopt release records.parquet --privacy public-occupancy --bound 120 --epsilon-total 10 "
             "--out DIR` in a fresh process: wall, CPU (user + system, children included) and peak RSS.\n",
             f"{c['grids']} grids, {c['pairs']} (user, grid) pairs, {c['users']} users; plan {c['plan']} "
             f"({c['status']}), {c['released']} grids released, frontier {c['frontier_points']} of 16 points.\n",
             "| run | wall s | CPU s | peak MiB | load before/after | aggregate s | plan s | statistics s | noise s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(cli):
        t = r["timings"]
        lines.append(f"| {i + 1 if r['job'] == 'cli' else r['job']} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['peak_mib']:.0f} | "
                     f"{r['load'][0]} / {r['load'][1]} | {t.get('aggregate', 0):.1f} | {t.get('plan', 0):.1f} | "
                     f"{t.get('statistics', 0):.1f} | {t.get('noise', 0):.2f} |")
    lines.append(f"\nMedian wall {med('wall_s'):.1f} s, CPU {med('cpu_s'):.1f} s, peak {med('peak_mib'):.0f} MiB.\n")
    if stages:
        lines += ["Where the time goes (one run under cProfile, which slows Python-heavy code; seconds):\n",
                  "| release | write | frontier | greedy (all passes) | MILP stage | HiGHS | assemble | report.html | "
                  "its map | map.png | CSV | MILP |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for s in stages:
            lines.append(f"| {s['release_s']:.1f} | {s['write_s']:.1f} | {s['frontier_s']:.1f} | {s['greedy_s']:.1f} | "
                         f"{s['milp_stage_s']:.1f} | {s['highs_s']:.1f} | {s['assemble_s']:.1f} | "
                         f"{s['html_report_s']:.1f} | {s['html_map_s']:.1f} | {s['map_png_s']:.1f} | {s['csv_s']:.1f} | "
                         f"{s['milp'].get('status')}, {s['milp_columns'] or s['milp'].get('columns')} columns |")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with open(RESULTS, "a") as f:
        if RESULTS.stat().st_size == 0:
            f.write("# public-occupancy release at scale (issue 24.4)\n")
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=float, default=1e6)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--no-stages", action="store_true", help="skip the cProfile breakdown")
    ap.add_argument("--baseline", default=None, help="a source tree (e.g. `git archive` of main) run once first")
    ap.add_argument("--data", default=None, help="directory for the synthetic Parquet file (kept)")
    ap.add_argument("--no-write", action="store_true", help="print only; do not append to the results file")
    a = ap.parse_args()
    n = int(a.records)
    data = Path(a.data or tempfile.gettempdir()) / f"dpopt_po_scale_{n}.parquet"
    make(data, n)
    cli, stages = [], []
    with tempfile.TemporaryDirectory() as tmp:
        if a.baseline:
            cli.append(cli_job(data, Path(tmp) / "baseline", Path(a.baseline).resolve()))
        for i in range(a.repeat):
            cli.append(cli_job(data, Path(tmp) / f"cli{i}"))
        if not a.no_stages:
            stages.append(stages_job(data, Path(tmp) / "stages"))
    if not a.no_write:
        write_results(n, cli, stages)


if __name__ == "__main__":
    main()
