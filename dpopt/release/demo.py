"""``dpopt demo`` section: the release pipeline on the embedded Austin bus day."""

from __future__ import annotations

from typing import TextIO

__all__ = ["demo"]


def demo(out: TextIO) -> None:
    """Aggregate the embedded sample once, then release it with BASELINE and CLIP-USER."""
    from ..records.data import EXAMPLE_BOUND, austin_sample_path
    from ..privacy.contributions import contributions
    from ..privacy.options import Budget, NoiseOptions, PerGridBudget
    from ..privacy.public_occupancy import PublicOccupancyOptions
    from .release import release_aggregate

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
