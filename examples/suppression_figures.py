"""Redraw seed 002's Figures 3–8 with both CLIP-USER (greedy) and the exact MILP.

Figures 3–5: estimated privacy loss P̂_ε = mean K_ε·ε against ε (γ = 3, 6, 9; q = 0.01), with the
original G·ε. Figures 6–8: estimated worst-case error after pseudo-user post-processing (eq. (15)),
Ê_ε, against the original worst-case error E_ε. The paper averages 10 draws over ε ∈ [0.1, 1]; the
defaults here are small so the script runs in well under a minute:

    python examples/suppression_figures.py                       # 1 draw, 4 values of ε
    python examples/suppression_figures.py --draws 10 --eps 0.1 0.15 0.2 0.3 0.5 0.7 1.0

PNGs go to examples/figures/suppression_fig{3..8}.png (and a CSV of the numbers).
Greedy = Algorithm 1 as in the paper's experiments (skipping the grid of least initial error).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from dpopt.suppression import (  # noqa: E402
    clip_user,
    heavy_hitter_occupancy,
    pseudo_user_clipping,
    solve_suppression,
)

U = 65.0


def run(gammas, epsilons, draws, seed=2024):
    rows = []
    for gamma in gammas:
        rng = np.random.default_rng(seed + int(gamma))
        occs = [heavy_hitter_occupancy(rng, q=0.01, gamma=gamma) for _ in range(draws)]
        for eps in epsilons:
            acc = {"gamma": gamma, "epsilon": eps, "G": occs[0].n_grids}
            vals = {k: [] for k in ("E", "K_greedy", "K_milp", "Ebar_greedy", "Ebar_milp")}
            for occ in occs:
                g = clip_user(occ, U, eps, skip_min_error_grid=True)
                m = solve_suppression(occ, U, eps, tie_break=False)
                vals["E"].append(g.error_bound)
                vals["K_greedy"].append(g.degradation)
                vals["K_milp"].append(m.degradation)
                vals["Ebar_greedy"].append(pseudo_user_clipping(occ, U, eps, g).max_error)
                vals["Ebar_milp"].append(pseudo_user_clipping(occ, U, eps, m).max_error)
            acc.update({k: float(np.mean(v)) for k, v in vals.items()})
            rows.append(acc)
            print(f"γ={gamma} ε={eps}: K greedy {acc['K_greedy']:.1f}, MILP {acc['K_milp']:.1f}; "
                  f"E {acc['E']:.0f} → Ē greedy {acc['Ebar_greedy']:.0f}, MILP {acc['Ebar_milp']:.0f}")
    return rows


def plot(rows, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    gammas = sorted({r["gamma"] for r in rows})
    for i, gamma in enumerate(gammas):
        rs = [r for r in rows if r["gamma"] == gamma]
        eps = np.array([r["epsilon"] for r in rs])
        fig, ax = plt.subplots(figsize=(5, 3.6))
        ax.plot(eps, [r["G"] * r["epsilon"] for r in rs], "k--", label="original $G\\epsilon$")
        ax.plot(eps, [r["K_greedy"] * r["epsilon"] for r in rs], "o-", label="CLIP-USER (greedy)")
        ax.plot(eps, [r["K_milp"] * r["epsilon"] for r in rs], "s-", label="exact MILP")
        ax.set_xscale("log")
        ax.set_xlabel("$\\epsilon$")
        ax.set_ylabel("$\\hat P_\\epsilon$ (privacy loss)")
        ax.set_title(f"Fig. {3 + i}: $\\gamma={gamma}$, $q=0.01$")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / f"suppression_fig{3 + i}.png", dpi=120)
        plt.close(fig)
        fig, ax = plt.subplots(figsize=(5, 3.6))
        ax.plot(eps, [r["E"] for r in rs], "k--", label="original $E_\\epsilon$")
        ax.plot(eps, [r["Ebar_greedy"] for r in rs], "o-", label="greedy + pseudo-users")
        ax.plot(eps, [r["Ebar_milp"] for r in rs], "s-", label="MILP + pseudo-users")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("$\\epsilon$")
        ax.set_ylabel("worst-case error")
        ax.set_title(f"Fig. {6 + i}: $\\gamma={gamma}$, $q=0.01$")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / f"suppression_fig{6 + i}.png", dpi=120)
        plt.close(fig)
    with open(out / "suppression_figures.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=1)
    ap.add_argument("--eps", type=float, nargs="+", default=[0.1, 0.2, 0.5, 1.0])
    ap.add_argument("--gammas", type=float, nargs="+", default=[3, 6, 9])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "figures")
    args = ap.parse_args()
    plot(run(args.gammas, args.eps, args.draws), args.out)
    print(f"wrote {args.out}/suppression_fig3..8.png")
