"""Benchmarks of the clipping-strategy model (seeds 000/001): ``python tests/benchmarks/bench_clipping.py``.

* closed form (:func:`dpopt.optimal_clipping`) for L = 10^7 users as a ratio to ``numpy.sort`` of the
  same int64 counts (target ≤ 2; T_ε comes from ``numpy.partition``), and ``optimal_error`` on a grid
  of 100 ε (one sort);
* per-user LP (8) with highspy for L = 10^6 (target < 10 s), presolve off/on, three ε;
* the same LP through cvxpy vs highspy at L = 10^5 (build + solve, ratio);
* the per-sample LP (Lemma III.1) for N = 10^3, 10^4, 10^5 samples, presolve off/on (and IPM);
* what HiGHS presolve costs on these LPs.

Counts: log-normal (heavy tail), rounded, clipped to [1, 5000]; seeded. Each timing is the best of
``--repeat`` runs. Prints a Markdown table (paste into tests/benchmarks/results/clipping.md).
Options: ``--quick`` (10x smaller sizes), ``--skip-sample`` (omit the N = 10^5 per-sample LP).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import time

import numpy as np


def _best(func, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = func()
        times.append(time.perf_counter() - t0)
    return min(times), out


def _counts(rng: np.random.Generator, L: int) -> np.ndarray:
    return np.clip(np.round(rng.lognormal(3.5, 1.2, size=L)), 1, 5000).astype(np.int64)


def _counts_with_total(rng: np.random.Generator, N: int) -> np.ndarray:
    """Per-user counts (log-normal, median ≈ 4) whose total is exactly N samples."""
    m = np.clip(np.round(rng.lognormal(1.5, 1.0, size=N)), 1, 200).astype(np.int64)
    c = np.cumsum(m)
    k = int(np.searchsorted(c, N))
    m = m[: k + 1].copy()
    m[-1] -= int(c[k] - N)
    return m[m > 0]


def main(argv: list[str] | None = None) -> None:
    from importlib.metadata import version

    from dpopt.clipping import optimal_clipping, optimal_error, per_sample_model, per_user_model, solve_clipping
    from dpopt.solve import solve
    from dpopt.solve.cvxpy_backend import solve_linear_model, to_cvxpy

    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--skip-sample", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    scale = 10 if args.quick else 1
    rep = args.repeat
    rng = np.random.default_rng(20261122)
    U = 65.0
    rows: list[tuple[str, str, str]] = []

    def row(what: str, size: str, value: str) -> None:
        rows.append((what, size, value))
        print(f"| {what} | {size} | {value} |", flush=True)

    print(f"# bench_clipping {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC, "
          f"python {platform.python_version()}, numpy {np.__version__}, highspy {version('highspy')}, "
          f"cvxpy {version('cvxpy')}, {os.cpu_count()} CPUs, load avg {os.getloadavg()[0]:.1f}")
    print("| benchmark | size | result |\n|---|---|---|")

    # 1. closed form vs numpy.sort ---------------------------------------------------------
    L = 10_000_000 // scale
    m = _counts(rng, L)
    t_sort, _ = _best(lambda: np.sort(m), rep)
    for eps in (0.001, 0.1):
        t_cf, plan = _best(lambda: optimal_clipping(m, U, eps), rep)
        row(f"closed form optimal_clipping, eps={eps} (T={plan.threshold:g})", f"L={L:.0e}",
            f"{t_cf:.3f} s = {t_cf / t_sort:.2f} x numpy.sort ({t_sort:.3f} s)")
    t_part, _ = _best(lambda: np.partition(m, L // 2), rep)
    row("  of which: numpy.partition (the selection of T_eps)", f"L={L:.0e}", f"{t_part:.3f} s")
    grid = np.geomspace(1e-4, 10, 100)
    t_grid, _ = _best(lambda: optimal_error(m, U, grid), rep)
    row("optimal_error on 100 eps (one sort + searchsorted)", f"L={L:.0e}",
        f"{t_grid:.3f} s = {t_grid / t_sort:.2f} x numpy.sort")

    # 2. per-user LP with highspy at L = 10^6 -----------------------------------------------
    L = 1_000_000 // scale
    m = _counts(rng, L)
    for eps in (0.001, 0.01, 1.0):
        t_build, model = _best(lambda: per_user_model(m, U, eps), rep)
        for opts in ({"presolve": "off"}, {"presolve": "on"}):
            t_solve, res = _best(lambda: solve(model, options=opts), max(1, rep - 1))
            row(f"per-user LP highspy eps={eps} presolve={opts['presolve']}", f"L={L:.0e}",
                f"build {t_build:.2f} s + solve {t_solve:.2f} s = {t_build + t_solve:.2f} s, "
                f"{res.info['simplex_iterations']:.0f} iterations, {res.status.value}")
    t_all, plan = _best(lambda: solve_clipping(m, U, 0.01), max(1, rep - 1))
    row("solve_clipping (build, solve, duals -> certificate, calculus check), eps=0.01", f"L={L:.0e}",
        f"{t_all:.2f} s, certificate ok: {plan.check(1e-7)}")

    # 3. cvxpy vs highspy at L = 10^5 ---------------------------------------------------------
    L = 100_000 // scale
    m = _counts(rng, L)
    eps = 0.01
    t_h, res_h = _best(lambda: solve(per_user_model(m, U, eps), options={"presolve": "off"}), rep)
    t_c, res_c = _best(lambda: solve_linear_model(per_user_model(m, U, eps), options={"presolve": "off"}), rep)
    t_tr, cm = _best(lambda: to_cvxpy(per_user_model(m, U, eps)), rep)
    row("per-user LP build+solve: highspy", f"L={L:.0e}", f"{t_h:.3f} s")
    row("per-user LP build+solve: cvxpy (to_cvxpy + compile + HiGHS)", f"L={L:.0e}",
        f"{t_c:.3f} s = {t_c / t_h:.1f} x highspy (translation alone {t_tr:.3f} s); "
        f"objectives differ by {abs(res_c.objective - res_h.objective):.1e}")

    # 4. per-sample LP ----------------------------------------------------------------------
    sizes = [1_000, 10_000] + ([] if args.skip_sample else [100_000])
    for N in sizes:
        N //= scale
        m = _counts_with_total(rng, N)
        eps = 0.05
        t_build, model = _best(lambda: per_sample_model(m, U, eps), 1)
        cf = optimal_clipping(m, U, eps).error
        for opts in ({"presolve": "off"}, {"presolve": "on"}, {"presolve": "off", "solver": "ipm"}):
            t_solve, res = _best(lambda: solve(model, options=opts, time_limit=600), 1)
            row(f"per-sample LP highspy {opts}", f"N={N:.0e} (L={m.size})",
                f"build {t_build:.2f} s + solve {t_solve:.2f} s, {res.info['simplex_iterations']:.0f} "
                f"simplex it., {res.status.value}, |obj/n - E^OPT| = "
                f"{abs(res.objective / m.sum() - cf):.1e}")
        if N <= 10_000:
            t_c, res_c = _best(lambda: solve_linear_model(model, options={"presolve": "off"}), 1)
            row("per-sample LP cvxpy (presolve off)", f"N={N:.0e} (L={m.size})", f"{t_c:.2f} s")


if __name__ == "__main__":
    main()
