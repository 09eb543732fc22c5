"""The intervals' component profiles: one factorisation per value against one per component.

`crossed_estimate.component_upper_bounds` tabulates each variance component's restricted
likelihood, the others at their REML values, at ≈ 26 values (`component_nodes`). In the augmented
form each value was one factorisation of the system's core; `crossed._low_rank_profile` factors it
once with the component at 0 and reads every value from the r × r eigenproblem of ZᵀP₀Z (r the
block's effects), taken by `component_profile` where its flops are fewer (models/crossed.md §3).
This benchmark times both on the synthetic lattices of bench_probed_traces.py (places × 12 slots,
the core sparse or dense as the release would factor it) and records the largest difference of
the two likelihoods (rounding only).

Run: PYTHONPATH=$PWD python tests/benchmarks/bench_component_profiles.py [--places 600 2400 4800]
Writes results/component_profiles.md.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from dpopt.estimation.crossed_estimate import component_nodes
from dpopt.hierarchy import crossed
from dpopt.hierarchy.crossed import component_profile, fit_crossed, fit_kernel
from tests.hierarchy.test_crossed import random_instance

HERE = Path(__file__).parent


def run(places: int, slots: int = 12, seed: int = 5) -> list[dict]:
    rng = np.random.default_rng(seed)
    codes, A, y, s2 = random_instance(rng, n_place=places, n_slot=slots)
    factors = dict(zip(["place", "slot", "hour_of_day"], codes))
    A = sp.csr_matrix(A)
    fit = fit_crossed(factors, A, y, s2, residual=True, dense_max=0 if places > 2400 else 6000, variances=False)
    H, inner, order, kernel = fit_kernel(fit, A)
    kernel["dense_max"] = 0 if places > 2400 else 6000
    names = list(fit.sigma2)
    base = np.array([max(fit.sigma2[k], 0.0) for k in names])[order]
    cap = 4.0 * float(base.sum())
    rows = []
    for i, width in enumerate(inner):
        values = component_nodes(cap, float(base[i]))
        t0 = time.perf_counter()
        new = component_profile(H, y, s2, base, inner, i, values, **kernel)
        t1 = time.perf_counter()
        keep, crossed._LOW_RANK_MAX = crossed._LOW_RANK_MAX, 0  # one factorisation per value
        try:
            old = component_profile(H, y, s2, base, inner, i, values, **kernel)
        finally:
            crossed._LOW_RANK_MAX = keep
        t2 = time.perf_counter()
        rows.append({"places": places, "grids": A.shape[1], "core": fit.posterior.system.core_size,
                     "component": names[order[i]], "effects": int(width), "values": int(values.size),
                     "per value s": t2 - t1, "profile s": t1 - t0, "gap": float(np.max(np.abs(new - old)))})
        print(rows[-1], flush=True)
    return rows


def markdown(rows: list[dict]) -> str:
    head = ("## The intervals' component profiles (`bench_component_profiles.py`)\n\n"
            "Synthetic lattices (tests/hierarchy/test_crossed.py `random_instance`, 12 slots), the fit's REML "
            "components, each component's likelihood at `component_nodes` (cap = 4 × their sum); the core dense "
            "up to 2,400 places, sparse (SuperLU) above. Wall seconds of one profile each way (2 shared cores: "
            "the ratio is the result); gap = the largest |Δℓ_R| between them. The residual's block (the grids) "
            "is too large for one eigenproblem and keeps one factorisation per value.\n\n"
            "| places | grids | core rows | component | effects | values | one per value s | one factorisation s "
            "| ratio | gap |\n|---|---|---|---|---|---|---|---|---|---|\n")
    body = "".join(f"| {r['places']} | {r['grids']:,} | {r['core']:,} | {r['component']} | {r['effects']:,} | "
                   f"{r['values']} | {r['per value s']:.2f} | {r['profile s']:.2f} | "
                   f"{r['per value s'] / r['profile s']:.1f} | {r['gap']:.1e} |\n" for r in rows)
    return head + body


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--places", type=int, nargs="+", default=[600, 2400, 4800])
    args = ap.parse_args()
    rows = [r for p in args.places for r in run(p)]
    (HERE / "results" / "component_profiles.md").write_text(markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
