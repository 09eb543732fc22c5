"""Records → contributions at scale: dpopt.records.contributions against a floor.

The floor is written by hand for this benchmark: pyarrow reads the same Parquet file in the same
batches, h3ronpy indexes the points, user ids are dictionary-encoded by pyarrow, pandas groups by
(user, cell, slot) per batch and merges the partial tables (count, Σ, Σ²) — no cleaning, no
validation, no first-c records. Every job runs in its own Python process (time = wall clock of
the process, peak = its ru_maxrss), interleaved, ``--repeat`` times; medians are reported.

Synthetic records: heavy-tailed users (Zipf 1.5 over n/100 users), positions clustered around 20
centres with a per-user drift (moving users make many pairs), 30 days of timestamps, values in
[0, 120], user ids as text (``veh<id>``).

Run: python tests/benchmarks/bench_scale.py --sizes 1e6 1e7 --repeat 3
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
RESULTS = Path(__file__).parent / "results" / "scale.md"

FLOOR = r"""
import sys, numpy as np, pandas as pd, pyarrow.dataset as ds, pyarrow.compute as pc
from h3ronpy.vector import coordinates_to_cells
path, rows = sys.argv[1], int(sys.argv[2])
parts, labels = [], {}
for b in ds.dataset(path, format="parquet").to_batches(batch_size=rows):
    u = pc.dictionary_encode(b.column("user_id")).combine_chunks() if hasattr(b.column("user_id"), "combine_chunks") else pc.dictionary_encode(b.column("user_id"))
    names = u.dictionary.to_pylist()
    codes = np.asarray([labels.setdefault(x, len(labels)) for x in names], dtype=np.int64)[u.indices.to_numpy()]
    cell = np.asarray(coordinates_to_cells(b.column("latitude").to_numpy(), b.column("longitude").to_numpy(), 7)).astype(np.int64)
    t = b.column("timestamp")
    per = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[t.type.unit]
    slot = t.cast("int64").to_numpy() // (3600 * per)
    v = b.column("value").to_numpy()
    f = pd.DataFrame({"u": codes, "cell": cell, "slot": slot, "count": 1, "sum": v, "sumsq": v * v})
    parts.append(f.groupby(["u", "cell", "slot"], sort=False).sum().reset_index())
    if len(parts) >= 8:
        parts = [pd.concat(parts).groupby(["u", "cell", "slot"], sort=False).sum().reset_index()]
out = pd.concat(parts).groupby(["u", "cell", "slot"], sort=False).sum().reset_index()
print(len(out), int(out["count"].sum()))
"""

DPOPT = r"""
import sys
from dpopt.records import GridOptions, InputOptions, contributions
path, rows, c = sys.argv[1], int(sys.argv[2]), sys.argv[3]
agg, rep = contributions(path, GridOptions(7, "1h"), InputOptions(chunksize=rows), bound=120.0,
                         first_records=None if c == "none" else int(c))
print(agg.n_pairs, agg.n_records)
"""


TWO_PASS = r"""
import sys, numpy as np
from dpopt.records import GridOptions, InputOptions, contributions, kept_records
path, rows, k, c = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
grid, read = GridOptions(7, "1h"), InputOptions(chunksize=rows)
table, rep = contributions(path, grid, read, bound=120.0)
order = np.lexsort((-table.count, table.pair_user))  # each user's pairs, most records first
start = np.searchsorted(table.pair_user[order], table.pair_user[order])
rank = np.empty(table.n_pairs, np.int64)
rank[order] = np.arange(table.n_pairs) - start
gamma = np.where(rank < k, np.minimum(table.count, c), 0)
agg = kept_records(path, grid, read, table, gamma, bound=120.0)
print(agg.n_pairs, agg.n_records, agg.samples.values.size)
"""


def make_records(path: Path, n: int, seed: int = 0, fmt: str = "parquet") -> None:
    """Write n synthetic records in pieces of 10^6 rows (bounded memory)."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    n_users = max(n // 100, 10)
    centres = rng.uniform([30.1, -97.9], [30.5, -97.5], size=(20, 2))
    home = rng.integers(0, 20, n_users)
    drift = rng.normal(0, 0.02, size=(n_users, 2))
    t0 = pd.Timestamp("2024-01-01T00:00:00Z").value // 10**9
    writer = None
    for start in range(0, n, 10**6):
        m = min(10**6, n - start)
        user = (rng.zipf(1.5, m) - 1) % n_users
        pos = centres[home[user]] + drift[user] * rng.uniform(0, 1, (m, 1)) + rng.normal(0, 0.003, (m, 2))
        ts = t0 + rng.integers(0, 30 * 86400, m)
        frame = pd.DataFrame({"user_id": np.char.add("veh", user.astype(str)), "latitude": pos[:, 0],
                              "longitude": pos[:, 1],
                              "timestamp": pd.to_datetime(ts, unit="s", utc=True),
                              "value": np.round(rng.uniform(0, 120, m), 2)})
        if fmt == "csv":
            frame["timestamp"] = frame["timestamp"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")
            frame.to_csv(path, mode="a", header=start == 0, index=False)
            continue
        table = pa.Table.from_pandas(frame, preserve_index=False)
        if writer is None:
            writer = pq.ParquetWriter(path, table.schema)
        writer.write_table(table, row_group_size=10**6)
    if writer is not None:
        writer.close()


def run_job(code: str, *args: str, cpu: list[float] | None = None) -> tuple[float, float, str]:
    """(seconds, peak RSS in MiB, stdout) of one fresh Python process; its CPU time (user + system)
    is appended to ``cpu`` when given."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, env=env, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t
    if status != 0:
        raise RuntimeError(f"job failed ({status}): {args}")
    if cpu is not None:
        cpu.append(usage.ru_utime + usage.ru_stime)
    return seconds, usage.ru_maxrss / 1024.0, out.strip()


def _make(path: Path, n: int, fmt: str) -> None:
    subprocess.run([sys.executable, __file__, "--make", str(path), str(n), fmt], check=True,
                   env=dict(os.environ, PYTHONPATH=str(ROOT)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e6, 1e7])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rows", type=int, default=500_000, help="rows per chunk (both)")
    parser.add_argument("--first", default="64", help="first_records c of the user-model job")
    parser.add_argument("--csv", action="store_true", help="also time dpopt on a CSV copy")
    parser.add_argument("--json", help="append the raw figures to this JSON file")
    parser.add_argument("--data", help="an existing Parquet file of --sizes[0] records (not rewritten)")
    parser.add_argument("--jobs", nargs="+", choices=["floor", "po", "user", "user2"],
                        default=["floor", "po", "user", "user2"], help="which jobs to run")
    parser.add_argument("--make", nargs=3, metavar=("PATH", "N", "FORMAT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.make:  # child process: the data are written outside the measuring parent (ru_maxrss
        make_records(Path(args.make[0]), int(args.make[1]), fmt=args.make[2])  # survives exec)
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            n = int(size)
            path = Path(args.data) if args.data else Path(tmp) / f"r{n}.parquet"
            if not args.data:
                _make(path, n, "parquet")
            every = {"floor": ("floor", (FLOOR, str(path), str(args.rows))),
                     "po": ("dpopt, public-occupancy (no samples)", (DPOPT, str(path), str(args.rows), "none")),
                     "user": (f"dpopt, user (first {args.first} records/pair)",
                              (DPOPT, str(path), str(args.rows), args.first)),
                     "user2": ("dpopt, user, two passes (k=8 pairs/user, c=16)",
                               (TWO_PASS, str(path), str(args.rows), "8", "16"))}
            jobs = dict(every[j] for j in args.jobs)
            if args.csv:
                csv = Path(tmp) / f"r{n}.csv"
                _make(csv, n, "csv")
                jobs[f"dpopt, user (first {args.first}), CSV"] = (DPOPT, str(csv), str(args.rows), args.first)
            got: dict[str, list[tuple[float, float, float, str]]] = {k: [] for k in jobs}
            outs = {}
            for _ in range(args.repeat):
                for name, (code, *a) in jobs.items():
                    load = os.getloadavg()[0]
                    cpu: list[float] = []
                    sec, mib, out = run_job(code, *a, cpu=cpu)
                    load = f"{load:.1f}-{os.getloadavg()[0]:.1f}"
                    got[name].append((sec, mib, cpu[0], load))
                    outs[name] = out
                    print(f"n={n:.0e} {name}: {sec:.1f} s wall, {cpu[0]:.1f} s CPU, {mib:.0f} MiB, load {load} "
                          f"({out})", flush=True)
            floor = [statistics.median(r[i] for r in got["floor"]) for i in (0, 2)] if "floor" in got else None
            for name, runs in got.items():
                sec, mib, cpu = (statistics.median(r[i] for r in runs) for i in (0, 1, 2))
                rows.append({"n": n, "job": name, "seconds": sec, "cpu": cpu, "peak_mib": mib,
                             "ratio": sec / floor[0] if floor else float("nan"),
                             "cpu_ratio": cpu / floor[1] if floor else float("nan"),
                             "load": " ".join(r[3] for r in runs), "pairs_records": outs[name]})
    lines = ["| records | job | wall (median) | CPU | × floor (wall, CPU) | peak RSS | load | pairs, records |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['n']:.0e} | {r['job']} | {r['seconds']:.1f} s | {r['cpu']:.1f} s | {r['ratio']:.2f}, "
                     f"{r['cpu_ratio']:.2f} | {r['peak_mib']:,.0f} MiB | {r['load']} | {r['pairs_records']} |")
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
