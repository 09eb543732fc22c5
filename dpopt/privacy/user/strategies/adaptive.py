"""The ``user`` model's multi-resolution release (models/hierarchy.md §13): the
default shape when a public partition list is given (``UserOptions(resolution="adaptive")``).

Steps, each a DP query on the data or post-processing of earlier outputs:

1. budget: a share ``bounds_fraction`` of the total for the automatic contribution bounds (none
   when (k, c) is public), the rest for the levels;
2. (k, c): :func:`dpopt.privacy.user.bounds.choose_bounds` (the "histogram" rule by default, ε_b-DP) on
   the bounds share, predicting the error of the levels' finest-level noise; or the public pair;
3. the levels: :func:`dpopt.privacy.user.levels.measure_levels` with (k, c) and the rest of the budget
   (``profile`` "day"/"week": the levels' time steps are recurring windows, hour-of-day …, §2)
   (its own exact recount: every (level, statistic) piece);
4. estimation (:func:`dpopt.estimation.estimate` with ``method="hierarchical"``) is done by the
   front door: post-processing only.

Accounting: Laplace, basic composition ε_total = ε_b + Σ_{l,s} ε_{l,s}; Gaussian, zCDP ρ_total =
ε_b²/2 + Σ_{l,s} ρ_{l,s} (Bun & Steinke Prop. 1.4, Lemma 2.3), converted to (ε, δ) by CKS 2020
Corollary 13. Both sums are recounted exactly (Fractions) from the budgets the samplers really
used. Without a list (private selection) :func:`measure_multires` hands over to
:func:`dpopt.privacy.user.strategies.private_adaptive.measure_private_adaptive` (models/hierarchy.md §15).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from dataclasses import replace

import numpy as np

from ...._validation import DpoptInputError, check_bound
from ....accounting import compose_spend
from ....measurements import BudgetSpend, Measurements
from ....noise import epsilon_rational
from ....noise.mechanism import NoiseMechanism
from ....hierarchy.tree import default_levels
from ....records.aggregate import Aggregate
from ....records.grid import slot_text
from ..levels import LevelNoise, LevelPlan, measure_levels
from ..predict import NoiseBudgets
from ..split import split_budget
from ...options import Budget, NoiseOptions
from ..options import UserOptions, _eps_from_rho, _partition_list, _ranks, _samplers, _sampler_kind

__all__ = ["measure_multires", "PUBLIC_FACTS"]

#: what the multi-resolution release over a public list treats as public (summary.json ``public``)
PUBLIC_FACTS = ("the grid definition (H3 resolution, slot), U, the options, the partition list and the hierarchy "
                "of H3 parents x coarser slots above it; nothing else about occupancy")


def _choose(agg: Aggregate, options: UserOptions, eps_b: float, rest: float, unit: str, U: float,
            mech: NoiseMechanism, rng: Any) -> tuple[int, int, str]:
    """(k, c, rule): public, or by ``options.bounds``'s rule at ε_b predicting the noise of the
    finest level's count and sum at the rest of the budget (post-processing of the rule's output)."""
    from ..bounds import BoundsRule, choose_bounds

    fixed = options.fixed_bounds
    if fixed is not None:
        return int(fixed[0]), int(fixed[1]), "fixed"
    _, _, mask = _partition_list(agg, options)
    if options.bounds == "histogram":  # the rule reads only which pairs are eligible (rank >= 0):
        ranks = np.where(mask, 0, -1) if mask is not None else np.zeros(agg.n_pairs, dtype=np.int64)
    else:  # no random tie-break keys needed (they cost ~10 s on the full Austin data)
        ranks = _ranks(agg, options, rng, mask, mech)
    split = split_budget(rest, bound=U, unit=unit, weight_mean=options.weight_mean,
                         weight_variance=options.weight_variance)
    choice = choose_bounds(agg, ranks, eps_b, rng=rng, source=getattr(mech, "source", None), options=BoundsRule(
                           rule=str(options.bounds), max_grids=options.max_grids,
                           max_records=options.max_records, sum_budget=split.sum if unit == "epsilon" else
                           (2.0 * split.sum) ** 0.5, bound=U, priority=options.priority,
                           budgets=NoiseBudgets(count=split.count, sum=split.sum, unit=split.unit)))
    c = choice.c if choice.histogram is None else max(choice.c, coarse_record_floor(choice.histogram, options.max_records))
    return choice.k, c, choice.rule


#: the multi-resolution release keeps at least this multiple of the typical records per (user, grid)
RECORD_FLOOR_FACTOR = 2.0


def coarse_record_floor(hist: Any, max_records: int) -> int:
    """Smallest public candidate c ≥ RECORD_FLOOR_FACTOR × the pair-weighted median of the DP
    histogram's records per (user, grid) (post-processing of the ε_b-DP histogram).

    Why: the histogram rule minimises the *finest* grid's noise, which favours c = 1–2; the
    multi-resolution release answers from coarse nodes, where noise is small and the bias of
    dropping a pair's later records dominates (dwelling vehicles: slow records are the dropped
    ones). Measured on the Austin day (tests/benchmarks/results/multires.md): the noise-free
    map-wide mean of the kept records is 27.1 / 24.2 / 21.9 / 19.8 / 19.0 km/h at c = 1 / 2 / 4 /
    8 / 16 against 18.9 for all records; the median records per pair there is 4.
    """
    from ..bounds import histogram_candidates

    w = hist.pair_weights.sum(axis=0)
    cdf = np.cumsum(w) / max(float(w.sum()), 1e-300)
    m50 = float(hist.records[min(int(np.searchsorted(cdf, 0.5)), hist.records.size - 1)])
    cands = histogram_candidates(int(max_records))
    ok = cands >= RECORD_FLOOR_FACTOR * m50
    return int(cands[np.flatnonzero(ok)[0]] if ok.any() else cands[-1])


def spend_with_bounds(pieces: Mapping[str, float], unit: str, eps_b: float, real: bool, delta: tuple[float, float],
                      pure: Mapping[str, float] | None = None) -> BudgetSpend:
    """The whole release's exact spend: every measurement piece (in ``unit``) plus the bounds
    choice, a pure ε piece, and the further pure ε pieces ``pure`` (name → ε; the engine's
    re-measured clamp), each rounded down to the exact sampler's grid in a real release."""
    more = {"bounds": eps_b, **(pure or {})}
    given = dict(pieces)
    for name, eps in more.items():
        if eps > 0:
            given[name] = float(epsilon_rational(eps)) if real else eps
    delta_total, delta_conv = delta
    # δ: private selection's (Laplace without a list) and the ρ → ε conversion's; 0 with a public list and Laplace
    return compose_spend(given, unit=unit, pure=tuple(more), delta=delta_total, delta_conversion=delta_conv)


def measure_multires(contributions: Aggregate, budget: Budget, options: UserOptions, *, bound: float | None = None,
                     noise: NoiseOptions = NoiseOptions()) -> Measurements:
    """Measurements of every level of the public hierarchy over the partition list (module doc).

    ``info`` adds to :func:`measure_levels`' the bounds rule, the shape, the levels' budgets, the
    accounting in words and the finest grid definition.
    """
    agg = contributions
    if options.private:  # no list: private selection of the levels' nodes (models/hierarchy.md §15)
        from .private_adaptive import measure_private_adaptive

        return measure_private_adaptive(agg, budget, options, bound=bound, noise=noise)
    if options.priority != "own":
        raise DpoptInputError(f"`priority` = {options.priority!r} is an option of resolution='fixed'; the adaptive "
                              "release keeps a uniformly random k of each user's listed grids")
    U = check_bound(agg.bound if bound is None else bound)
    if options.profile is not None:  # public (the grid and the option): refused before any budget is spent
        default_levels(agg.h3_resolution, agg.slot_ns, coarsest_resolution=options.coarsest_resolution,
                       profile=options.profile)
    kind = _sampler_kind(budget, None)
    total, delta_total, _, delta_conv = options.check_budget(budget)
    mech, _, rng = _samplers(noise, kind, None)
    gaussian = kind == "gaussian"
    bf = options.fractions[0]
    avail = total * (1.0 - 2.0**-40) if gaussian else total  # margin: exact sum of rounded pieces ≤ ρ
    if gaussian:
        rho_b = bf * avail
        eps_b, rest = _eps_from_rho(rho_b), avail - rho_b
    else:
        eps_b = bf * total
        rest = total - eps_b
    k, c, rule = _choose(agg, options, eps_b, rest, "rho" if gaussian else "epsilon", U, mech, rng)
    plist, _, _ = _partition_list(agg, options)
    m = measure_levels(agg, plist, bound=U, bounds=(k, c), epsilon=None if gaussian else rest,
                       rho=rest if gaussian else None,
                       plan=LevelPlan(coarsest_resolution=options.coarsest_resolution, profile=options.profile,
                                      weight_mean=options.weight_mean, weight_variance=options.weight_variance),
                       sampling=LevelNoise(mechanism=kind, noise=noise.noise, seed=noise.seed, noise_mechanism=mech,
                                           granularity_bits=noise.bits_for(U)))
    spend = spend_with_bounds(m.spend.pieces, m.spend.unit, eps_b if rule != "fixed" else 0.0, mech.real_release, (delta_total, delta_conv))
    info = replace(m.info, bounds_rule=rule, shape="adaptive", mechanism=kind, seeded=noise.seed is not None,
                   partitions="public list", slot=slot_text(agg.slot_ns), delta_selection=0.0, public=PUBLIC_FACTS)
    return Measurements(privacy_model="user", bound=U, nodes=m.nodes, statistics=m.statistics, spend=spend,
                        centre=m.centre, finest=m.finest, info=info)
