"""Benchmark (models/gaussian.md): Laplace at pure ε vs Gaussian at (ε, δ) on the same BASELINE plan.

    PYTHONPATH=$PWD python tests/benchmarks/bench_gaussian.py [--reps 50] [--no-full]

Data: the embedded Austin day (dpopt.datasets) and the full Austin data
(/work/shared/data/austin_bus/capmetrics_vehicle_positions_clean.csv.gz), H3 res 7 x 1 h, U = 120 km/h.
Plan: BASELINE (every record kept), every grid the same budget. K = the most grids any bus is in.

* Laplace: total ε pure DP -> ε/K per grid, ε/(2K) to the mean: noise Lap(Δ_μ·2K/ε);
* Gaussian: total (ε, δ = 10⁻⁶) -> ρ = rho_from_epsilon(ε, δ) (tight CKS 2020 Cor. 13) ->
  ρ/K per grid, ρ/(2K) to the mean: noise N(0, σ²), σ = Δ_μ/√(ρ/K).

Both totals are recounted from a GridPlan (user_cost = Σ over the grids a bus is kept in), the
Gaussian one converted back to ε by dpopt.accounting. The noise is simulated with numpy
(``--reps`` draws per grid) on the exact clipped means (= the means of the records after ingest,
values clipped to [0, U]) and scored against the raw truth: the same grids aggregated with no
clipping (U = 10⁹). Reported: median and p90 of |released mean − true mean| over grids with
≥ 10 and ≥ 20 buses. The tight conversion is cross-checked live against OpenDP when installed.
Writes tests/benchmarks/results/gaussian.md.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from dpopt.accounting import rho_from_epsilon, zcdp_account, zcdp_epsilon, zcdp_epsilon_simple  # noqa: E402
from dpopt.calculus import gaussian_grid_error_terms, grid_error_terms  # noqa: E402
from dpopt.noise.discrete_gaussian import gaussian_simulation  # noqa: E402
from dpopt.plan import GridPlan  # noqa: E402
from dpopt.release import InputOptions, contributions  # noqa: E402
from dpopt.records.data import austin_sample_path  # noqa: E402
from dpopt.noise import laplace_simulation  # noqa: E402
from dpopt.solve.result import Status  # noqa: E402

FULL = ROOT.parent.parent / "shared" / "data" / "austin_bus" / "capmetrics_vehicle_positions_clean.csv.gz"
FULL_COLUMNS = {"user_id": "vehicle_id", "timestamp": "timestamp_utc", "value": "speed_kmh"}
BOUND = 120.0
DELTA = 1e-6
EPSILONS = (1.0, 10.0)
MIN_USERS = (10, 20)


def baseline_plan(agg, unit: str, per_grid: float) -> GridPlan:
    G = agg.n_grids
    retained = sp.csr_array((agg.count, (agg.pair_user, agg.pair_grid)), shape=(agg.n_users, G))
    half = np.full(G, per_grid / 2)
    return GridPlan(retained=retained, budget_mean=half, budget_variance=half.copy(),
                    released=np.ones(G, dtype=bool), unit=unit, method="baseline", status=Status.OPTIMAL)


def load(path: Path, columns) -> dict:
    t0 = time.perf_counter()
    agg, ingest = contributions(str(path), bound=BOUND, io=InputOptions(columns=columns))
    raw, _ = contributions(str(path), bound=1e9, io=InputOptions(columns=columns))
    assert raw.n_grids == agg.n_grids and np.array_equal(raw.pair_grid, agg.pair_grid)
    st = agg.retained_stats(agg.count)
    truth = np.bincount(raw.pair_grid, weights=raw.sum, minlength=raw.n_grids) / raw.grid_records()
    return {
        "agg": agg, "stats": st, "clipped_mean": st.sum / st.retained, "truth": truth,
        "users": agg.grid_users(), "K": int(agg.user_grids().max()), "wall_s": time.perf_counter() - t0,
        "out_of_range": int(getattr(ingest, "out_of_range", 0)),
    }


def run(name: str, d: dict, reps: int, seed: int) -> list[dict]:
    agg, st = d["agg"], d["stats"]
    N = agg.grid_records().astype(float)
    K = d["K"]
    rows = []
    rng = np.random.default_rng(seed)
    for eps in EPSILONS:
        rho = rho_from_epsilon(eps, DELTA)
        lap_plan = baseline_plan(agg, "epsilon", eps / K)
        gau_plan = baseline_plan(agg, "rho", rho / K)
        acc = zcdp_account(gau_plan, DELTA)
        assert math.isclose(lap_plan.total_cost, eps, rel_tol=1e-12)
        assert acc.epsilon_total <= eps * (1 + 1e-12)
        for split in ("equal", "optimal"):
            lt = grid_error_terms(N, st.retained, st.retained_max, BOUND, lap_plan.budget, split=split)
            gt = gaussian_grid_error_terms(N, st.retained, st.retained_max, BOUND, gau_plan.budget, split=split)
            lap_scale = lt.mean_sensitivity / lt.epsilon_mean
            sims = {
                "laplace": d["clipped_mean"] + laplace_simulation(lap_scale, rng, size=(reps, N.size)),
                "gaussian": d["clipped_mean"] + gaussian_simulation(gt.sigma_mean, rng, size=(reps, N.size)),
            }
            for mech, rel in sims.items():
                err = np.abs(rel - d["truth"])
                row = {"data": name, "epsilon": eps, "split": split, "mechanism": mech, "K": K,
                       "per_grid": (eps / K) if mech == "laplace" else (rho / K),
                       "total": lap_plan.total_cost if mech == "laplace" else acc.rho_total,
                       "eps_total": eps if mech == "laplace" else acc.epsilon_total}
                for u in MIN_USERS:
                    sel = d["users"] >= u
                    e = err[:, sel].ravel()
                    row[f"grids{u}"] = int(sel.sum())
                    row[f"med{u}"] = float(np.median(e))
                    row[f"p90_{u}"] = float(np.quantile(e, 0.9))
                rows.append(row)
    return rows


def opendp_check() -> list[str]:
    try:
        import opendp.prelude as dp
    except ImportError:  # pragma: no cover
        return ["OpenDP not installed: live cross-check not run (tests/test_accounting.py holds OpenDP 0.16.0 values)."]
    dp.enable_features("contrib")
    meas = dp.c.make_zCDP_to_approxDP(
        dp.m.make_gaussian(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=1.0))
    out = ["| ρ | δ | dpopt tight ε | OpenDP ε | rel. diff | simple ρ + 2√(ρ log 1/δ) |", "|---|---|---|---|---|---|"]
    for eps in EPSILONS:
        rho = rho_from_epsilon(eps, DELTA)
        ours = zcdp_epsilon(rho, DELTA)
        theirs = meas.map(math.sqrt(2 * rho)).epsilon(DELTA)
        out.append(f"| {rho:.6g} | {DELTA:g} | {ours:.10f} | {theirs:.10f} | {abs(ours - theirs) / theirs:.1e} | "
                   f"{zcdp_epsilon_simple(rho, DELTA):.4f} |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-full", action="store_true")
    args = ap.parse_args()
    t0 = time.perf_counter()
    data = {"embedded day": load(austin_sample_path(), None)}
    if not args.no_full:
        data["full Austin"] = load(FULL, FULL_COLUMNS)
    rows = []
    for name, d in data.items():
        rows += run(name, d, args.reps, args.seed)
    lines = [
        f"# Gaussian (zCDP) vs Laplace (pure ε) on the BASELINE plan (issue 15), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "",
        f"`PYTHONPATH=$PWD python tests/benchmarks/bench_gaussian.py --reps {args.reps}` "
        f"({time.perf_counter() - t0:.0f} s). H3 res 7 × 1 h, U = {BOUND:g} km/h, every grid the same budget,",
        f"K = the most grids a bus is in. Laplace: total ε → ε/K per grid; Gaussian: total (ε, δ = {DELTA:g}) → ρ by the",
        "tight CKS 2020 Cor. 13 conversion → ρ/K per grid. Mean/variance split: `equal` (half each, seed 002) or `optimal`",
        "(Laplace ε_i ∝ √Δ_i, Gaussian ρ_i ∝ Δ_i^{2/3}). Noise simulated with numpy "
        f"({args.reps} draws per grid) on the clipped means, scored against the unclipped raw means.",
        "Errors in km/h (|released mean − true mean|), median and p90 over (grid, draw).",
        "",
    ]
    for name, d in data.items():
        lines.append(f"- {name}: {d['agg'].n_records:,} records, {d['agg'].n_users} buses, {d['agg'].n_grids:,} grids, "
                     f"K = {d['K']}, grids with ≥ 10 / ≥ 20 buses: {int((d['users'] >= 10).sum())} / {int((d['users'] >= 20).sum())}; "
                     f"values clipped to U: {d['out_of_range']}; aggregation ×2 {d['wall_s']:.1f} s")
    lines += ["", "| data | ε | split | mechanism | per grid | user total (recounted) | ε total | med ≥10 | p90 ≥10 | med ≥20 | p90 ≥20 | Laplace/Gaussian median ≥10 | ≥20 |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    by = {(r["data"], r["epsilon"], r["split"], r["mechanism"]): r for r in rows}
    for r in rows:
        lap = by[(r["data"], r["epsilon"], r["split"], "laplace")]
        ratio = ("", "") if r["mechanism"] == "laplace" else (f"**{lap['med10'] / r['med10']:.2f}×**", f"**{lap['med20'] / r['med20']:.2f}×**")
        unit = "ε" if r["mechanism"] == "laplace" else "ρ"
        lines.append(
            f"| {r['data']} | {r['epsilon']:g} | {r['split']} | {r['mechanism']} | {unit} = {r['per_grid']:.4g} | {unit} = {r['total']:.4g} | "
            f"{r['eps_total']:.4f} | {r['med10']:.3f} | {r['p90_10']:.3f} | {r['med20']:.3f} | {r['p90_20']:.3f} | {ratio[0]} | {ratio[1]} |")
    lines += ["", "**Verdict (goal: at (10, 10⁻⁶) Gaussian halves Laplace's median error at ε = 10).**"]
    for name, d in data.items():
        lap, gau = by[(name, 10.0, "equal", "laplace")], by[(name, 10.0, "equal", "gaussian")]
        pred = 2 * math.log(2) * math.sqrt(d["K"] * gau["total"]) / (10.0 * 0.6744897501960817)
        lines.append(
            f"- {name} (K = {d['K']}): median |error| of the mean, grids ≥ 10 buses, {lap['med10']:.1f} → {gau['med10']:.1f} km/h "
            f"= {lap['med10'] / gau['med10']:.2f}× smaller (≥ 20 buses: {lap['med20'] / gau['med20']:.2f}×; "
            f"predicted 2 ln2·√(Kρ)/(ε·Φ⁻¹(0.75)) = {pred:.2f}×): goal {'met' if lap['med10'] >= 2 * gau['med10'] else 'NOT met'}.")
    lines += [
        "- In absolute terms BASELINE is useless under both mechanisms (median errors of hundreds of km/h on a",
        "  0–120 km/h scale): a bus in K grids splits the total over K grids. The ratio is what carries over to the",
        "  plans that reduce K (CLIP-USER, the MILP, the budget planner); with ρ split over K grids the Gaussian's",
        "  advantage grows like √K.",
        "- `optimal` split minimises the sum of the mean's and the variance's error; it gives the variance (Δ_Var ∝ U²)",
        "  most of the budget, so the mean's error grows under both mechanisms.",
        "- The real release uses the exact discrete samplers on λ·ℤ (λ = 2⁻¹²); they add the λ/2 rounding and at most",
        "  2λ = 4.9·10⁻⁴ km/h to Δ_μ (so to σ, relative 2λ/Δ_μ), not simulated here.",
    ]
    lines += ["", "Tight conversion, live cross-check against OpenDP (`make_zCDP_to_approxDP`):", ""] + opendp_check()
    text = "\n".join(lines) + "\n"
    out = ROOT / "tests" / "benchmarks" / "results" / "gaussian.md"
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
