"""``dpopt demo``: a short tour of what dpopt does, one section per model.

Each section is a function of this module that writes to a text stream (:data:`SECTIONS`, in
order); :func:`demo` prints them all. A section whose package cannot be imported (the light install
has no ``release`` extra) prints ``(not part of this build)`` instead.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from typing import TextIO

import numpy as np

__all__ = ["demo", "SECTIONS", "calculus_demo", "clipping_demo", "arrays_demo", "suppression_demo",
           "mechanisms_demo", "release_demo", "register", "run"]


def calculus_demo(out: TextIO) -> None:
    """The error calculus on four users, and ERRATA E1's corrected variance bias against brute force."""
    from .. import calculus, verify
    from ..verify import estimators as est

    counts = np.array([6, 3, 2, 1])
    retained = np.array([3, 3, 2, 1])
    U = 65.0
    out.write(f"counts m = {counts.tolist()}, retained Gamma = {retained.tolist()}, U = {U:g}\n")
    out.write(f"  mean sensitivity      {calculus.mean_sensitivity(retained, U):10.4f}  (U*Gamma*/R)\n")
    out.write(f"  variance sensitivity  {calculus.variance_sensitivity(retained, U):10.4f}  (Prop. III.1 / Lemma III.3)\n")
    out.write(f"  mean bias             {calculus.mean_bias(retained, counts, U):10.4f}  (Thm IV.1)\n")
    out.write(f"  variance bias         {calculus.variance_bias(retained, counts, U):10.4f}  (Thm IV.2 corrected)\n")
    m, g = np.ones(4, int), np.array([1, 1, 1, 0])
    brute = verify.worst_case_error(est.clipped_variance(g), m, 1.0, target="variance", levels=5)
    out.write(
        "  ERRATA E1, N=4, R=3, U=1: brute force "
        f"{brute.value:.4f} = corrected {calculus.variance_bias(g, m, 1.0):.4f}; "
        f"seed text {calculus.variance_bias_seed_text(g, m, 1.0):.4f}\n"
    )


def clipping_demo(out: TextIO) -> None:
    """The clipping-strategy model (seeds 000/001) in under a second: closed form, certificate, LP
    cross-check (no cvxpy import)."""
    from ..clipping.closed_form import optimal_clipping, optimal_error
    from ..clipping.lp import solve_clipping

    U = 65.0
    # the geometric collection (seed 000 §IV), M = 6: 2^i users with 2^(6-i) samples each
    m = np.concatenate([np.full(2**i, 2 ** (6 - i), dtype=np.int64) for i in range(7)])
    out.write("== Optimal clipping strategy (seeds 000/001, Theorem III.1) ==\n")
    out.write(f"geometric collection M = 6: L = {m.size} users, n = {int(m.sum())} samples, U = {U:g}\n")
    eps = np.array([0.01, 0.1, 0.5, 1.0, 2.0])
    errs = optimal_error(m, U, eps)
    out.write("eps    T_eps   E^OPT    vanilla Laplace\n")
    for e, err in zip(eps, errs):
        plan = optimal_clipping(m, U, e)
        out.write(f"{e:<6g} {plan.threshold:6g}  {err:7.4f}  {U * m.max() / (e * m.sum()):9.3f}\n")
    plan = optimal_clipping(m, U, 0.5)
    rep = plan.certificate.report()
    out.write(f"eps = 0.5: KKT certificate (ERRATA E4) primal {rep.primal:.1e}, dual {rep.dual:.1e}, "
              f"compl. {rep.complementary:.1e}, stationarity {rep.stationarity:.1e} -> ok = {rep.ok}\n")
    for f in ("per-user", "per-sample"):
        lp = solve_clipping(m, U, 0.5, formulation=f)
        out.write(f"LP {f:<10s} (HiGHS): error {lp.error:.6f}, status {lp.status.value}, "
                  f"duals certify: {lp.check()}\n")
    p2 = optimal_clipping(m, U, 0.5, dim=2)
    half = optimal_clipping(m, U, 0.25).error
    out.write(f"d = 2 at eps = 0.5 (ERRATA E3, l1-ball clipping, sensitivity 2T/n): error {p2.error:.4f} "
              f"= 2 x E^OPT(eps/2 = 0.25) = 2 x {half:.4f} (the d = 1 optimum at half the budget)\n")
    out.write("custom variants (per-user bounds U_l, a cap on one user's bias, fixed intervals, d >= 2): "
              "dpopt.clipping_problem(...) returns a cvxpy model; see examples/clipping_*.py\n")


def arrays_demo(out: TextIO) -> None:
    """The array-length model (seed 003) on the shipped ITMS counts in under a second: grouping,
    the four choices of m, the surrogate's excess."""
    from ..arrays.grouping import best_fit, wrap_around
    from ..arrays.length import exact_length_path, optimal_array_length
    from ..datasets import ITMS_BOUND, load_itms_counts

    counts = load_itms_counts()
    U = ITMS_BOUND
    out.write("== Array length of pseudo-user Array-Averaging (seed 003), ITMS bus speeds ==\n")
    out.write(f"users L = {counts.size}, samples M = {int(counts.sum())}, "
              f"m_* = {int(counts.min())}, m^* = {int(counts.max())}, U = {U:g} km/h\n")
    m9 = optimal_array_length(counts, U, 1.0, method="heuristic").length
    wa, bf = wrap_around(counts, m9), best_fit(counts, m9)
    out.write(f"heuristic (9): m = {m9}; WrapAround {wa.num_arrays} arrays "
              f"({wa.discarded} samples discarded), BestFit {bf.num_arrays} arrays (fills <= {bf.fills.max()})\n")
    out.write("eps   method      m    worst-case error E(m)  excess over exact\n")
    for eps in (0.5, 1.0, 2.0):
        for method in ("exact", "surrogate", "heuristic", "median"):
            p = optimal_array_length(counts, U, eps, method=method)
            out.write(f"{eps:<5g} {method:<10s} {p.length:4d}  {p.error:10.3f}            {p.excess:8.3f}\n")
    eps = [0.001, 0.003, 0.01, 0.1, 0.5, 1.0]
    path = exact_length_path(counts, U, eps)
    out.write("exact m_UB(eps) (Figure 5): "
              + ", ".join(f"{e:g}->{m}" for e, m in zip(eps, path)) + "\n")
    out.write("The convex surrogate (19) bounds the noise with Gamma_m >= L*m_* = L (m_* = 1 here), "
              "so its m is far from the exact minimax length (ERRATA E7).\n")


def suppression_demo(out: TextIO) -> None:
    """The grid-suppression model (seed 002): CLIP-USER against the exact MILP on a small
    heavy-hitter occupancy (under 3 s)."""
    from ..suppression.greedy import clip_user
    from ..suppression.milp import solve_suppression
    from ..suppression.pseudo import pseudo_user_clipping
    from ..suppression.synthetic import heavy_hitter_occupancy

    occ = heavy_hitter_occupancy(np.random.default_rng(2), n_grids=6, q=0.05, gamma=6)
    U, eps = 65.0, 0.5
    out.write("Grid suppression (seed 002): lower K = max_l G_l with every grid error <= E\n")
    out.write(f"  synthetic heavy-hitter occupancy: {occ}\n")
    g = clip_user(occ, U, eps)
    m = solve_suppression(occ, U, eps)
    out.write(f"  E = max_g E_g of BASELINE = {g.error_bound:.1f}; original K = G_1 = {occ.degradation}\n")
    out.write(f"  CLIP-USER (greedy):   K = {g.degradation}  (loss {g.privacy_loss:.2f}), "
              f"{len(g.suppressed)} pairs suppressed\n")
    out.write(f"  exact MILP (HiGHS):   K = {m.degradation}  (loss {m.privacy_loss:.2f}), status "
              f"{m.status.value}, gap {m.gap:.0%}, {len(m.suppressed)} pairs, {m.suppressed_samples} samples\n")
    p = pseudo_user_clipping(occ, U, eps, m)
    out.write(f"  pseudo-user clipping after the MILP plan (eq. 15): worst error "
              f"{m.max_error:.1f} -> {p.max_error:.1f}\n")


def mechanisms_demo(out: TextIO) -> None:
    """The mechanisms' MAE on the ITMS data at ε = 1, and the command that reproduces a figure (under 3 s)."""
    from ..experiments.seed003 import itms_dataset
    from ..mechanisms import array_averaging, laplace_mean, levy, quantile

    x, m = itms_dataset()
    rng = np.random.default_rng(0)
    f = x.mean()
    out.write("Mechanisms on the ITMS hexagon-hour (L = 217 buses, n = 17,166 speeds, U = 65), eps = 1, 2000 runs:\n")
    for name, mech, kw in (
        ("Laplace (baseline)", laplace_mean, {}),
        ("Array-Averaging, BestFit, m = 114", array_averaging, {"length": 114}),
        ("Levy, BestFit (eq. (9) m)", levy, {}),
        ("FixedQuantile, BestFit", quantile, {}),
    ):
        rel = mech(x, m, 65.0, 1.0, rng=rng, runs=2000, **kw)
        err = np.abs(rel.values - f)
        out.write(f"  {name:<36s} MAE {err.mean():6.3f} ± {err.std() / np.sqrt(err.size):.3f}  "
                  f"(sensitivity {np.mean(rel.sensitivity):.4f}, budget {rel.budget})\n")
    out.write("Reproduce any paper figure: dpopt reproduce 003-fig1 --out figures/  (or `all`)\n")


def release_demo(out: TextIO) -> None:
    """The release pipeline on the embedded Austin bus day: aggregated once, released with BASELINE
    and CLIP-USER per grid, then under one total budget."""
    from ..privacy.contributions import contributions
    from ..privacy.options import Budget, NoiseOptions, PerGridBudget
    from ..privacy.public_occupancy import PublicOccupancyOptions
    from ..records.data import EXAMPLE_BOUND, austin_sample_path
    from ..release.release import release_aggregate

    agg, ingest = contributions(austin_sample_path(), bound=EXAMPLE_BOUND)
    seeded = NoiseOptions(seed=0)
    out.write(
        f"Austin buses, one day: {ingest.records_read} records, {agg.n_users} buses, "
        f"{agg.n_grids} (H3 res-7 cell x 1h) grids; U = {EXAMPLE_BOUND:g} km/h, eps = 1 per grid\n"
    )
    for plan in ("baseline", "greedy"):
        r = release_aggregate(agg, PerGridBudget(1.0), PublicOccupancyOptions(plan=plan), bound=EXAMPLE_BOUND,
                              noise=seeded, ingest=ingest)
        s = r.summary
        out.write(
            f"  {plan:<8}  K = {s.degradation:>3}  total eps = K*eps = {s.epsilon_total:6.1f}  "
            f"worst-case error E = {s.error_bound:7.1f}  suppressed pairs {s.suppressed_pairs}\n"
        )
    busiest = r.table.nlargest(1, "n_records").iloc[0]
    out.write(
        f"  busiest grid {busiest['cell']} @ {busiest['slot']}: {busiest['n_users']} buses, "
        f"{busiest['n_records']} records -> released mean {busiest['mean']:.1f} km/h "
        f"(noise scale {busiest['mean_noise_scale']:.2f}); exact discrete Laplace noise (seeded demo)\n"
    )
    out.write("One total budget for every bus over the whole day (public-occupancy model):\n")
    for mechanism, budget in (("laplace", Budget(epsilon_total=10.0)),
                              ("gaussian", Budget(epsilon_total=10.0, delta=1e-6, mechanism="gaussian"))):
        r = release_aggregate(agg, budget, PublicOccupancyOptions(plan="greedy"), bound=EXAMPLE_BOUND,
                              noise=seeded, ingest=ingest)
        s = r.summary
        rel = r.table[r.table["released"] & (r.table["n_users"] >= 20)]
        med = float(rel["mean_error_bound"].median())  # a half-width: beyond U it says "no information"
        med_txt = f"± {med:.1f} km/h" if med < EXAMPLE_BOUND else f"wider than the whole range 0-{EXAMPLE_BOUND:g} km/h"
        out.write(
            f"  {mechanism:<8} eps_total = 10{', delta = 1e-6' if s.delta else ''}: greedy plan K = {s.degradation}, "
            f"median 95% noise bound of the mean on grids with >= 20 buses {med_txt}\n"
        )
    out.write("  the budget planner publishes only the grids it can serve within a target error instead:\n"
              "  dpopt release --example --privacy public-occupancy [--target 10] [--mechanism gaussian --delta 1e-6] "
              "--out DIR\n")


#: (title, the packages the section needs, the section), in the order printed
SECTIONS: list[tuple[str, tuple[str, ...], Callable[[TextIO], None]]] = [
    ("Error calculus (seed 002, ERRATA E1)", ("dpopt.calculus",), calculus_demo),
    ("Clipping strategy (seeds 000/001)", ("dpopt.clipping",), clipping_demo),
    ("Array length (seed 003)", ("dpopt.arrays", "dpopt.datasets"), arrays_demo),
    ("Grid suppression (seed 002)", ("dpopt.suppression",), suppression_demo),
    ("Mechanisms and experiments", ("dpopt.experiments", "dpopt.experiments.seed003"), mechanisms_demo),
    ("Release pipeline", ("dpopt.release",), release_demo),
]


def demo(out: TextIO | None = None) -> None:
    """Print every section of :data:`SECTIONS` to ``out`` (default: stdout)."""
    out = out or sys.stdout
    for title, packages, section in SECTIONS:
        out.write(f"\n== {title} ==\n")
        try:
            for package in packages:
                importlib.import_module(package)
        except ModuleNotFoundError:
            out.write("  (not part of this build)\n")
            continue
        section(out)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="a short tour of dpopt's models on small built-in instances")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    demo()
    return 0
