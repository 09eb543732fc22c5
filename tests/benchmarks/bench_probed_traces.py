"""REML on a large crossed system: the score's exact traces against Hutchinson's (models/crossed.md §3).

Above ``_EXACT_TRACE_CORE`` core rows the average-information steps read each block's trace of the
posterior covariance from 64 seeded Rademacher probes (the local part exact) instead of one core solve
per random effect. This benchmark forces both on the same synthetic lattices (places × slots, a random
half of the grids listed, every place and slot and a third of the grids observed, the core factored
sparse as above 6,000 rows) and records the wall time of each REML fit, the ratio, and how far the
probed fit ends from the exact one (ℓ_R and the components). An outside check's release that needed
this (29,373 measured grids, a 6,930-row core): models/engine.md §6, "Where the estimate takes long".

Run: PYTHONPATH=$PWD python tests/benchmarks/bench_probed_traces.py [--places 600 2400 4800]
Writes results/probed_traces.md.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from dpopt.hierarchy import crossed
from dpopt.hierarchy.crossed import fit_crossed
from tests.hierarchy.test_crossed import random_instance

HERE = Path(__file__).parent


def run(places: int, slots: int = 12, seed: int = 5) -> dict:
    rng = np.random.default_rng(seed)
    codes, A, y, s2 = random_instance(rng, n_place=places, n_slot=slots)
    factors = dict(zip(["place", "slot", "hour_of_day"], codes))
    out = {"places": places, "grids": A.shape[1], "observations": A.shape[0]}
    fits = {}
    for name, limit in (("exact", 10**9), ("probed", 0)):
        crossed._EXACT_TRACE_CORE = limit
        t0 = time.perf_counter()
        fits[name] = fit_crossed(factors, sp.csr_matrix(A), y, s2, residual=True, dense_max=0, variances=False)
        out[f"{name} s"] = time.perf_counter() - t0
    crossed._EXACT_TRACE_CORE = 6000
    ex, pr = fits["exact"], fits["probed"]
    out["loglik gap"] = ex.loglik - pr.loglik
    out["largest relative component gap"] = max(abs(pr.sigma2[k] - v) / max(v, 1e-12) for k, v in ex.sigma2.items()
                                                if v > 1e-3 * max(ex.sigma2.values()))
    out["core rows"] = ex.posterior.system.core_size if ex.posterior.system is not None else None
    return out


def markdown(rows: list[dict]) -> str:
    head = ("## REML's traces: exact against probed (`bench_probed_traces.py`)\n\n"
            "Synthetic lattices (tests/hierarchy/test_crossed.py `random_instance`, 12 slots), σ² by REML with the grids' "
            "residual, the core factored sparse (`dense_max` = 0); wall seconds of one fit each (2 shared cores: the ratio "
            "is the result). ℓ_R gap = exact − probed (≥ 0 up to rounding).\n\n"
            "| places | grids | observations | exact s | probed s | ratio | ℓ_R gap | largest relative component gap |\n"
            "|---|---|---|---|---|---|---|---|\n")
    body = "".join(f"| {r['places']} | {r['grids']:,} | {r['observations']:,} | {r['exact s']:.2f} | {r['probed s']:.2f} | "
                   f"{r['exact s'] / r['probed s']:.1f} | {r['loglik gap']:.4f} | {r['largest relative component gap']:.4f} |\n"
                   for r in rows)
    return head + body


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--places", type=int, nargs="+", default=[600, 2400, 4800])
    args = ap.parse_args()
    rows = [run(p) for p in args.places]
    (HERE / "results" / "probed_traces.md").write_text(markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
