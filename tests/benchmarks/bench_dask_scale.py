"""Both privacy models on a 2-worker Dask LocalCluster at scale, beside the local run.

n synthetic records (the generator of ``bench_scale.py``: Zipf users, clustered moving positions,
30 days, text ids; Parquet) go through the Python entry :func:`dpopt.release.release` with
``InputOptions(backend="dask", client=...)`` on a ``distributed.LocalCluster`` of ``--workers``
worker processes (``--threads`` threads each), and with the default local backend, for

* ``user``: the default model, ``Budget(epsilon_total=10)``, automatic (k, c) (one pass keeping
  the first ``max_records`` = 64 records of every (user, grid) pair), over a public partition list:
  the (cell, slot) of every grid the ``public-occupancy`` run released (``--user-selection``: private
  selection with δ = 1e-6 instead, which at these sizes releases few or no grids);
* ``public-occupancy``: ``Budget(epsilon_total=10)``, ``plan="baseline"`` (the planner is
  benchmarked elsewhere: bench_budget_scale.py).

Every run is a fresh Python process (the "driver": the client, which finishes the contributions
table and runs the noise and estimation). Reported per run: wall time of the ``release`` call, CPU
time (user + system) of the driver and of each worker process, peak RSS of the driver
(``ru_maxrss``) and of each worker (psutil on the worker pids, sampled every 0.1 s, and the
largest memory distributed's own scheduler reports for the worker). The released tables of the
Dask and the local run for the same seed are compared (``identical`` or the largest difference).

Run: python tests/benchmarks/bench_dask_scale.py --n 1e7 [--data existing.parquet]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).parent))
RESULTS = Path(__file__).parent / "results" / "scale.md"


def _release(path: str, model: str, io: Any, partitions: str) -> Any:
    from dpopt.release import Budget, NoiseOptions, PublicOccupancyOptions, UserOptions, release

    if model == "user":
        if partitions == "none":
            return release(path, bound=120.0, budget=Budget(epsilon_total=10, delta=1e-6), model=UserOptions(),
                           noise=NoiseOptions(seed=7), io=io)
        return release(path, bound=120.0, budget=Budget(epsilon_total=10), model=UserOptions(partitions=partitions),
                       noise=NoiseOptions(seed=7), io=io)
    return release(path, bound=120.0, budget=Budget(epsilon_total=10), model=PublicOccupancyOptions(plan="baseline"),
                   noise=NoiseOptions(seed=7), io=io)


class _Sampler:
    """Peak RSS (psutil) and distributed's reported memory of each worker, sampled every 0.1 s."""

    def __init__(self, client: Any) -> None:
        import psutil

        self.client = client
        self.procs = {a: psutil.Process(p) for a, p in client.run(os.getpid).items()}
        self.cpu0 = {a: sum(p.cpu_times()[:2]) for a, p in self.procs.items()}
        self.peak = {a: 0 for a in self.procs}
        self.reported = {a: 0 for a in self.procs}
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        n = 0
        while not self.stop:
            for a, p in self.procs.items():
                try:
                    self.peak[a] = max(self.peak[a], p.memory_info().rss)
                except Exception:  # a worker restarted: keep what was seen
                    pass
            if n % 10 == 0:  # distributed's own metric (heartbeats), once a second
                try:
                    info = self.client.scheduler_info()["workers"]
                    for a, w in info.items():
                        if a in self.reported:
                            self.reported[a] = max(self.reported[a], int(w.get("metrics", {}).get("memory", 0)))
                except Exception:
                    pass
            n += 1
            time.sleep(0.1)

    def finish(self) -> list[dict[str, float]]:
        self.stop = True
        self.thread.join()
        out = []
        for a, p in self.procs.items():
            try:
                cpu = sum(p.cpu_times()[:2]) - self.cpu0[a]
            except Exception:
                cpu = float("nan")
            out.append({"peak_mib": self.peak[a] / 2**20, "reported_mib": self.reported[a] / 2**20, "cpu": cpu})
        return out


def child(backend: str, model: str, path: str, workers: int, threads: int, memory_limit: str,
          partitions: str) -> dict[str, Any]:
    """One run in this (fresh) process; returns its figures."""
    import pandas as pd

    from dpopt.release import InputOptions

    client = cluster = sampler = None
    if backend == "dask":
        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=workers, threads_per_worker=threads, processes=True,
                               memory_limit=memory_limit, dashboard_address=":0")
        client = Client(cluster)
        sampler = _Sampler(client)
    io = InputOptions(backend=backend, client=client)
    load = os.getloadavg()[0]
    t, c = time.perf_counter(), time.process_time()
    r = _release(path, model, io, partitions)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    out = {"backend": backend, "model": model, "wall": wall, "cpu": cpu, "load": f"{load:.1f}-{os.getloadavg()[0]:.1f}",
           "driver_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
           "grids": int(len(r.table)), "workers": sampler.finish() if sampler else [],
           "timings": {k: float(v) for k, v in dict(r.diagnostics.get("timings", {})).items()
                       if isinstance(v, (int, float))}}
    table = r.table.reset_index(drop=True)
    out["table"] = table.to_json(orient="split", double_precision=15)
    out["digest"] = int(pd.util.hash_pandas_object(table, index=False).sum())
    if model == "public-occupancy" and partitions != "none":  # the user run's public list
        table[["cell", "slot"]].to_csv(partitions, index=False)
    if client is not None:
        client.close()
        cluster.close()
    return out


def _compare(a: dict[str, Any], b: dict[str, Any]) -> str:
    import numpy as np
    import pandas as pd

    if a["digest"] == b["digest"]:
        return "identical"
    ta, tb = (pd.read_json(__import__("io").StringIO(x["table"]), orient="split") for x in (a, b))
    if ta.shape != tb.shape or list(ta.columns) != list(tb.columns):
        return f"different shape {ta.shape} vs {tb.shape}"
    num = [c for c in ta.columns if pd.api.types.is_numeric_dtype(ta[c])]
    other = [c for c in ta.columns if c not in num and not ta[c].equals(tb[c])]
    diff = max((float(np.nanmax(np.abs(ta[c].to_numpy(float) - tb[c].to_numpy(float))))
                for c in num if len(ta)), default=0.0)
    return f"max |Δ| {diff:.3g} over numeric columns" + (f"; differing: {other}" if other else "")


def _run_child(*args: str) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    proc = subprocess.run([sys.executable, __file__, "--child", out, *args], env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"run failed ({proc.returncode}): {args}")
    result = json.loads(Path(out).read_text())
    os.unlink(out)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=float, default=1e7, help="records")
    parser.add_argument("--data", help="an existing Parquet file of bench_scale's generator (not rewritten)")
    parser.add_argument("--user-selection", action="store_true",
                        help="user model: private grid selection (delta) instead of the public-occupancy grids")
    parser.add_argument("--models", nargs="+", default=["public-occupancy", "user"],
                        choices=["user", "public-occupancy"])
    parser.add_argument("--backends", nargs="+", default=["dask", "local"], choices=["dask", "local"])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="threads per worker")
    parser.add_argument("--memory-limit", default="8GiB", help="per worker (distributed's memory_limit)")
    parser.add_argument("--json", help="write the raw figures to this JSON file")
    parser.add_argument("--child", nargs=8, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        out, backend, model, path, workers, threads, limit, parts = args.child
        Path(out).write_text(json.dumps(child(backend, model, path, int(workers), int(threads), limit, parts)))
        return
    n = int(args.n)
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        path = args.data or str(Path(tmp) / f"r{n}.parquet")
        if not args.data:
            from bench_scale import _make

            _make(Path(path), n, "parquet")
        parts = "none" if args.user_selection else str(Path(tmp) / "partitions.csv")
        if "user" in args.models and "public-occupancy" not in args.models and parts != "none":
            parser.error("the user model's public list comes from the public-occupancy run: add it or --user-selection")
        runs = []
        for model in args.models:
            got = {}
            for backend in args.backends:
                r = _run_child(backend, model, path, str(args.workers), str(args.threads), args.memory_limit, parts)
                got[backend] = r
                ws = ", ".join(f"{w['peak_mib']:,.0f} MiB ({w['reported_mib']:,.0f} reported), {w['cpu']:.0f} s CPU"
                               for w in r["workers"])
                print(f"n={n:.0e} {model} {backend}: {r['wall']:.1f} s wall, driver {r['cpu']:.1f} s CPU, "
                      f"{r['driver_peak_mib']:,.0f} MiB; workers: {ws or '-'}; {r['grids']} grids; load {r['load']}; "
                      f"timings {r['timings']}", flush=True)
                runs.append(r)
            if len(got) == 2:
                print(f"  {model}: dask vs local tables: {_compare(got['dask'], got['local'])}", flush=True)
                got["dask"]["vs_local"] = _compare(got["dask"], got["local"])
        if args.json:
            for r in runs:
                r.pop("table", None)
            Path(args.json).write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
