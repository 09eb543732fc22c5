"""Redraw seed 002's Figures 3–8 with both CLIP-USER (greedy) and the exact MILP.

Figures 3–5: estimated privacy loss P̂_ε = mean K_ε·ε against ε (γ = 3, 6, 9; q = 0.01), with the
original G·ε. Figures 6–8: estimated worst-case error after pseudo-user post-processing (eq. (15)),
Ê_ε, against the original worst-case error E_ε. The paper averages 10 draws over ε ∈ [0.1, 1]; the
defaults here are small so the script runs in well under a minute:

    python examples/suppression_figures.py [--out DIR]           # 1 draw, 4 values of ε
    python examples/suppression_figures.py --draws 10 --eps 0.1 0.15 0.2 0.3 0.5 0.7 1.0

Writes suppression_fig{3..8}.{csv,png} (tidy tables: figure, series, epsilon, value, stderr; standard
errors over the draws) to DIR, default a fresh folder under the current directory. Drawn with the
same code as `dpopt reproduce` (dpopt.experiments.plotting). Greedy = Algorithm 1 as in the paper's
experiments (skipping the grid of least initial error).
"""

from __future__ import annotations

import argparse

import numpy as np
from _driver import output_dir

from dpopt.experiments.base import FigureSpec, Rows
from dpopt.experiments.plotting import save_figure
from dpopt.suppression import clip_user, heavy_hitter_occupancy, pseudo_user_clipping, solve_suppression

U = 65.0


def _se(v: list[float]) -> float:
    return float(np.std(v, ddof=1) / np.sqrt(len(v))) if len(v) > 1 else 0.0


def run(gammas, epsilons, draws, seed=2024):
    """Tidy rows for Figs. 3–8: {figure id: Rows}."""
    tables = {}
    for i, gamma in enumerate(gammas):
        rng = np.random.default_rng(seed + int(gamma))
        occs = [heavy_hitter_occupancy(rng, q=0.01, gamma=gamma) for _ in range(draws)]
        loss, err = Rows(f"suppression_fig{3 + i}"), Rows(f"suppression_fig{6 + i}")
        for eps in epsilons:
            vals = {k: [] for k in ("G", "E", "K_greedy", "K_milp", "Ebar_greedy", "Ebar_milp")}
            for occ in occs:
                g = clip_user(occ, U, eps, skip_min_error_grid=True)
                m = solve_suppression(occ, U, eps, tie_break=False)
                vals["G"].append(occ.degradation * eps)
                vals["E"].append(g.error_bound)
                vals["K_greedy"].append(g.degradation * eps)
                vals["K_milp"].append(m.degradation * eps)
                vals["Ebar_greedy"].append(pseudo_user_clipping(occ, U, eps, g).max_error)
                vals["Ebar_milp"].append(pseudo_user_clipping(occ, U, eps, m).max_error)
            for rows, series in ((loss, [("original G·ε", "G"), ("CLIP-USER (greedy)", "K_greedy"),
                                         ("exact MILP", "K_milp")]),
                                 (err, [("original E_ε", "E"), ("greedy + pseudo-users", "Ebar_greedy"),
                                        ("MILP + pseudo-users", "Ebar_milp")])):
                for label, key in series:
                    rows.add(label, eps, float(np.mean(vals[key])), _se(vals[key]))
            print(f"γ={gamma} ε={eps}: K·ε greedy {np.mean(vals['K_greedy']):.2f}, MILP {np.mean(vals['K_milp']):.2f}; "
                  f"E {np.mean(vals['E']):.0f} → Ē greedy {np.mean(vals['Ebar_greedy']):.0f}, "
                  f"MILP {np.mean(vals['Ebar_milp']):.0f}")
        tables[(gamma, "loss")] = loss
        tables[(gamma, "error")] = err
    return tables


def save(tables, out) -> None:
    for (gamma, kind), rows in tables.items():
        spec = FigureSpec(
            rows.figure, f"γ = {gamma:g}, q = 0.01, greedy vs MILP", "privacy parameter ε",
            "privacy loss K·ε" if kind == "loss" else "worst-case error", func=lambda **_: None,
            default_runs=None, xscale="log", yscale="linear" if kind == "loss" else "log")
        frame = rows.frame()
        frame.to_csv(out / f"{rows.figure}.csv", index=False)
        save_figure(frame, spec, out / f"{rows.figure}.png")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=1)
    ap.add_argument("--eps", type=float, nargs="+", default=[0.1, 0.2, 0.5, 1.0])
    ap.add_argument("--gammas", type=float, nargs="+", default=[3, 6, 9])
    ap.add_argument("--out", default=None, help="output folder (default: a fresh folder under the cwd)")
    args = ap.parse_args()
    out = output_dir(args.out, __file__)
    save(run(args.gammas, args.eps, args.draws), out)
    print(f"wrote {out}/suppression_fig3..8.{{csv,png}}")
