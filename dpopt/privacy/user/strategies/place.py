"""The ``place`` release of the ``user`` model over a public list (models/hierarchy.md §14):
the default shape with a public list under Laplace noise (``UserOptions(resolution="auto" | "place")``).

Why this shape: on the Austin buses the finest grids' means differ by **place**, not by hour. A
finest grid (res-7 cell × 1 h) answered noise-free by its res-7 cell over the whole period is off by
1.0 km/h (day) / 2.1 (full data); by its res-6 × 1 h parent 3.0 / 3.5; by the map-wide mean 3.6 /
4.4. Under user-level DP a user spreads its influence over every cell it crosses, so a cell's
noise depends on its *effective* users Σ_ℓ (share of ℓ's records in the cell); measuring the cells
over the whole period, and the map, spends the budget where both the signal and the users are.

Steps, each a DP query on the data or post-processing of earlier outputs (pure ε, Laplace):

1. ε_b = ``bounds_fraction``·ε (default 0.15): :func:`dpopt.privacy.user.place_bounds.choose_place_bounds` picks the
   per-user record cap T (from an ε_b·2/3-DP histogram of records per user, by predicted noise)
   and the inner clamp B ≤ U (a quantile, 0.75 to 0.99 by the record histogram
   (:func:`dpopt.privacy.user.place_bounds.clamp_quantile`), of an ε_b/3-DP histogram of users' own 99th
   percentiles); then, post-processing, the map's own cap T_map ≥ T
   (:func:`dpopt.privacy.user.place_bounds.choose_map_cap`: the least predicted noise + re-weighting
   error of the map's mean, the noise from :func:`map_noise_scale`);
2. the rest: :func:`dpopt.privacy.user.levels.measure_levels` over :func:`dpopt.hierarchy.tree.place_levels`
   with values clamped to [0, B]: pilot counts of the cells (R, period) and of the map, then the
   cells' share f of the rest by minimising the predicted BLUP error
   (:mod:`dpopt.privacy.user.place_shares`; f = 0: the map alone), each user keeping ≤ T records of the
   cells and ≤ T_map of the map by
   systematic sampling (:func:`dpopt.privacy.user.record_cap.capped_records`): ℓ1 sensitivity
   T·(1, B/2, B²/8) for the cells and T_map·(1, B/2, B²/8) for the map, basic composition over (level, statistic). Where B < U the sums of
   squares are not measured (``weight_variance`` = 0: the whole rest buys counts and sums): the
   variance of values clamped below U is biased low and withheld anyway, so a budget for it would
   buy nothing (on the Austin day at ε = 1 it was 17 % of the rest; the map's noise sd fell from 1.46
   to 0.95 km/h without it);
3. estimation (front door): :func:`dpopt.estimation.estimate_hierarchical` (tree BLUP), which
   answers each finest grid by its cell where the cell was measured.

Accounting: ε_total = ε_b + Σ_{l,s} ε_{l,s}, recounted exactly from what the samplers used.
Published means are of the values clamped to [0, B] (bias −E[(x − B)⁺] ≤ 0 per node, stated in
summary.json ``clamp``); the variance is withheld when B < U (it would be biased low).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...._validation import DpoptInputError
from ....measurements import Measurements
from ....records.aggregate import Aggregate
from ....records.grid import slot_text
from ....hierarchy.tree import place_levels
from ..levels import PLACE_PILOT_SHARE, PRIOR_SPREAD_DIVISOR, LevelNoise, LevelPlan, measure_levels
from ..place_bounds import (CAP_SHARE, CLAMP_FLOOR_STEP, CLAMP_STEPS, cap_candidates,
                                    choose_map_cap, choose_place_bounds, clamp_histogram_fields,
                            record_histogram_fields)
from ..place_shares import CANDIDATES
from ..split import split_budget
from ....noise.sources import SeededSource
from ...options import Budget, NoiseOptions
from ..options import PLACE_BOUNDS_FRACTION, UserOptions, _partition_list, _samplers, _sampler_kind
from .adaptive import PUBLIC_FACTS, spend_with_bounds

__all__ = ["measure_place", "check_place_budget", "map_noise_scale", "PLACE_BOUNDS_FRACTION"]



def check_place_budget(total: float, eps_b: float, U: float, options: UserOptions) -> None:
    """Refuse, on public facts only and before any draw, a budget the place release could not spend:
    every piece it may use, for every clamp B it may choose (U·j/16, j = 8 … 16: no sum of squares
    below U) and every cells' share f, must be a positive multiple of 2^-30 for the exact sampler,
    and the split must give the means a budget (``weight_mean`` > 0 where B < U). Otherwise the
    refusal would come after the bounds histograms were drawn, and whether it came would depend on
    the data through B."""
    if options.weight_mean <= 0:
        raise DpoptInputError(f"`weight_mean` = {options.weight_mean!r}: the place release needs weight_mean > 0 "
                              "(with a clamp B < U it measures counts and sums only)")
    share = min(min(f for f in CANDIDATES if f > 0), 1.0 - max(CANDIDATES))  # the least level share
    pieces = [eps_b * CAP_SHARE, eps_b - eps_b * CAP_SHARE]
    for j in range(CLAMP_FLOOR_STEP, CLAMP_STEPS + 1):
        sp = split_budget(total - eps_b, bound=U * j / CLAMP_STEPS, weight_mean=options.weight_mean,
                          weight_variance=options.weight_variance if j == CLAMP_STEPS else 0.0)
        pieces += [PLACE_PILOT_SHARE * sp.count / 2.0, (1.0 - PLACE_PILOT_SHARE) * sp.count * share,
                   sp.sum * share] + ([sp.sumsq * share] if sp.sumsq > 0 else [])
    smallest = min(pieces)
    if not smallest >= 2.0**-30:
        raise DpoptInputError(f"`epsilon_total` = {total!r} is too small for the place release: its smallest "
                              f"budget piece would be {smallest:.3g} < 2^-30, below the exact sampler's resolution; "
                              "raise epsilon_total or the smallest weight")


def map_noise_scale(epsilon: float, clamp: float, *, weight_mean: float, weight_variance: float) -> float:
    """The sd of the map's direct mean per unit of T/S(T) (:func:`dpopt.privacy.user.place_bounds.map_cap_error`):
    the map measured alone with the levels' budget ``epsilon`` (the rest after the bounds), split as
    the release splits it (:func:`dpopt.privacy.user.split.split_budget` at B, the pilots' share of the
    count taken off), Laplace noise of scale T·B/2/ε_sum on the centred sum and T/ε_count on the
    count, the count's entering the mean times B/2 (delta method, the estimator's worst case):
    √2·(B/2)·√(1/ε_sum² + 1/ε_count²). Public facts and the DP clamp B only."""
    sp = split_budget(epsilon, bound=clamp, weight_mean=weight_mean, weight_variance=weight_variance)
    eps_count, eps_sum = (1.0 - PLACE_PILOT_SHARE) * sp.count, sp.sum
    return float(np.sqrt(2.0) * clamp / 2.0 * np.sqrt(1.0 / eps_sum**2 + 1.0 / eps_count**2))


def _finite(x: float) -> float | None:
    """A float for JSON (None for ∞ / NaN)."""
    return float(x) if np.isfinite(x) else None


def measure_place(agg: Aggregate, budget: Budget, options: UserOptions, *, U: float,
                  noise: NoiseOptions = NoiseOptions()) -> Measurements:
    """Measurements of the place release (module doc); ``info`` adds the cap, the clamp and the
    accounting in words."""
    total, delta_total, _, delta_conv = options.check_budget(budget)
    mech, _, rng = _samplers(noise, _sampler_kind(budget, None), None)
    eps_b = options.fractions[0] * total
    candidates = cap_candidates(U, noise.bits_for(U))  # public (U, b): refused before any budget is spent
    check_place_budget(total, eps_b, U, options)  # public too: no refusal after the first draw
    plist, _, mask = _partition_list(agg, options)
    source = getattr(mech, "source", None)
    pb = choose_place_bounds(agg, mask, eps_b, bound=U, source=source if source is not None else
                             SeededSource(int(rng.integers(0, 2**62))), candidates=candidates)
    # B < U: the variance is withheld (biased low), so its sum of squares is not bought (a DP output's
    # post-processing decides it)
    weight_variance = options.weight_variance if pb.clamp >= U else 0.0
    # the map's own cap (post-processing of the same histogram, B and public facts): less re-weighting
    # where the map's noise allows it (models/hierarchy.md §14.2)
    map_noise = map_noise_scale(total - eps_b, pb.clamp, weight_mean=options.weight_mean,
                                weight_variance=weight_variance)
    spread = U / PRIOR_SPREAD_DIVISOR  # τ₀: the share rule's prior spread, here standing for users' means
    map_cap, map_error = choose_map_cap(pb.histogram, pb.epsilon * CAP_SHARE, pb.cap, noise=map_noise, spread=spread,
                                        candidates=pb.candidates)
    levels = place_levels(agg.h3_resolution, agg.slot_ns, coarsest_resolution=options.coarsest_resolution)
    m = measure_levels(agg, plist, bound=pb.clamp, bounds=(1, 1), epsilon=total - eps_b,
                       plan=LevelPlan(levels=levels, level_bounds=[None, pb.cap, map_cap], level_split="place",
                                      prior_spread=spread, weight_mean=options.weight_mean,
                                      weight_variance=weight_variance),
                       sampling=LevelNoise(mechanism="laplace", noise=noise.noise, seed=noise.seed,
                                           noise_mechanism=mech, granularity_bits=noise.bits_for(U)))
    spend = spend_with_bounds(m.spend.pieces, m.spend.unit, eps_b, mech.real_release, (delta_total, delta_conv))
    info = replace(m.info, bounds_rule="place (cap from a DP histogram of records per user, DP clamp)", shape="place",
                   mechanism="laplace", seeded=noise.seed is not None, partitions="public list",
                   slot=slot_text(agg.slot_ns), delta_selection=0.0,
                   public=PUBLIC_FACTS, record_cap=pb.cap, map_record_cap=map_cap, clamp=pb.clamp,
                   declared_bound=U,
                   record_histogram={**record_histogram_fields(pb), "map_noise": map_noise, "map_spread": spread,
                                     "map_error": [_finite(e) for e in map_error]},
                   clamp_histogram=clamp_histogram_fields(pb.clamp_histogram, U),
                   sumsq_measured=bool(weight_variance > 0),
                   k=1, c=pb.cap)
    return Measurements(privacy_model="user", bound=pb.clamp, nodes=m.nodes, statistics=m.statistics, spend=spend,
                        centre=m.centre, finest=m.finest, info=info)
