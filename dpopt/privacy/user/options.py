"""The options of the ``user`` model (:class:`UserOptions`, validated on construction) and what
they resolve to against the data: the budget in the noise's unit (:meth:`UserOptions.check_budget`),
the samplers, the public partition list and each pair's grid rank. The strategies that measure
with them are in :mod:`dpopt.privacy.user.strategies` and :mod:`dpopt.privacy.user.engine`
(models/user_level.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._validation import DpoptInputError, check_choice, check_nonnegative_float, check_positive_int
from ...hierarchy.tree import profile_cycle
from ...records.aggregate import Aggregate
from .bounding import grid_ranks
from .bounds import BOUND_RULES
from ...noise.mechanism import NoiseMechanism, make_mechanism
from .partitions import PartitionList, match_partitions, read_partitions
from ..options import Budget, NoiseOptions

__all__ = ["UserOptions", "RESOLUTIONS", "STRATEGIES", "SELECTION_DELTA_SHARE", "ENGINE_BOUNDS_FRACTION",
           "PLACE_BOUNDS_FRACTION",
           "ENGINE_SELECTION_FRACTION", "noise_family"]


#: shapes of the release over a public partition list (UserOptions.resolution)
RESOLUTIONS = ("auto", "place", "adaptive", "fixed")
#: how the release chooses what to measure: "optimised" (the engine, :mod:`dpopt.privacy.user.engine`: the
#: marginals and their budgets chosen by the strategy model) or one of the named fixed strategies
STRATEGIES = ("optimised", "place", "adaptive", "fixed")
#: share of the total budget the engine spends on the record cap T and the clamp [A, B] (three DP
#: histograms over users at ε_b/2, ε_b/4, ε_b/4; :mod:`dpopt.privacy.user.engine`)
ENGINE_BOUNDS_FRACTION = 0.15
#: default share of ε the named ``place`` strategy spends on its (T, B): at ε = 1 the histogram of
#: records per user gets ε_T = 0.1, noise of scale 10 users per bin (models/hierarchy.md §14.2)
PLACE_BOUNDS_FRACTION = 0.15
#: share of ε the engine spends choosing its places where no list is given
#: (:mod:`dpopt.privacy.user.private_list`): half, an even split between the two questions a release
#: without a list answers — where to answer and what the answer is. A convention, not a fact of the
#: data; measured beside one third (PipelineDP's split of a MEAN: selection, count, sum) in
#: models/engine.md §8, where one third answers fewer busy grids than PipelineDP on both Austin sets
ENGINE_SELECTION_FRACTION = 0.5
#: share of δ spent by private partition selection under Gaussian noise (the rest converts ρ)
SELECTION_DELTA_SHARE = 0.5


@dataclass(frozen=True)
class UserOptions:
    """Options of the ``user`` model (validated on construction).

    ``partitions`` a public partition list (CSV path, DataFrame with columns cell, slot, or a
    :class:`PartitionList`) or None for private partition selection (needs δ); ``bounds``
    "histogram", "select", "quantile" or a public (k, c); ``priority`` which grids a user keeps: its
    own top-k by record count ("own") or the first k in a public hash order ("shared",
    :mod:`dpopt.privacy.user.priority`); ``bounds_fraction``, ``selection_fraction``, ``pool_fraction``
    shares of the budget for the automatic bounds, private selection and the pooling totals
    (``bounds_fraction`` None: 0.15 under the engine, :data:`ENGINE_BOUNDS_FRACTION`, and under "place",
    :data:`~dpopt.privacy.user.strategies.place.PLACE_BOUNDS_FRACTION`; 0.1 under "adaptive" with a list and
    "fixed"; nothing is spent on bounds with a public (k, c), nor by "adaptive" without a list);
    ``weight_mean``, ``weight_variance``, ``typical`` the split rule (:func:`~dpopt.privacy.user.split.split_budget`;
    the weights are read by "place" and "fixed" only, ``pool_fraction`` by "fixed" only, and another
    value than the default is refused under the other strategies);
    ``max_grids``, ``max_records`` public caps of the automatic bounds.

    ``resolution`` the shape of the release: "auto" (default), "place", "adaptive" or "fixed" (the
    flat per-grid release at the finest resolution). "auto" is the engine (``strategy`` "optimised",
    :mod:`dpopt.privacy.user.engine`; ``coarsest_resolution`` is its lattice's map level), which chooses
    its own record cap and clamp under DP: ``bounds``, ``priority`` and ``profile`` are options of the
    named strategies and refused there (as ``bounds``/``priority`` under "place"). Place (a public list, pure ε):
    every H3 cell of the finest resolution over the whole period and the map are measured under a
    per-user record cap and a DP inner clamp, and each finest grid is answered by its cell's
    tree-BLUP estimate or the map's (:mod:`dpopt.privacy.user.strategies.place`, models/hierarchy.md §14).
    Adaptive with a public list: every level of the public
    hierarchy of H3 parents x coarser slots up to ``coarsest_resolution`` is measured and each
    finest grid is answered by its finest node whose error meets the target
    (:mod:`dpopt.privacy.user.strategies.adaptive`). Without a list (Laplace noise and δ) "auto" runs the engine
    over privately selected cells, answering each selected cell's windows of the day
    (:mod:`dpopt.privacy.user.private_list`, models/engine.md §8); "adaptive" there: nodes of a few
    public levels are selected by Laplace thresholding of user counts in a
    shared public hash order (at the finest grid a user keeps the one where it dwells, if any:
    ``FINEST_RULE``), then measured (:mod:`dpopt.privacy.user.strategies.private_adaptive`; public (k, c) of
    the measurement, default (4, 8); ``selection_fraction`` default 0.6; no bounds or pooling budget).
    ``selection_fraction`` None: 0.6 there, 0.2 for the flat private release.

    What an interval holds: under the engine every listed grid's row is its own, and its interval
    is for the grid's truth (models/engine.md §4). Under the named strategies a grid answered by a
    coarser node ("adaptive", and "place" where it answers by the map) gets that node's interval,
    which holds the node's mean, not the grid's: where the value varies inside the node it misses
    the grids (an outside-style check: 0.58–0.64 of grids covered at a stated 0.95 on data set by
    place × hour); and no strategy's interval holds the record cap's re-weighting of heavy users
    (summary ``reweighting`` says how far it goes; a per-grid cap c = 2 under "fixed" at ε = 1000
    covered 0.44).

    ``profile`` "day" or "week" (with a list and ``strategy`` "adaptive"): the
    hierarchy's time steps are windows that recur every day (hour-of-day, 3-h-of-day) or week
    (hour-of-week, day-of-week) instead of longer contiguous slots (models/hierarchy.md §2).
    """

    partitions: Any = None
    bounds: Any = "histogram"
    priority: str = "own"
    bounds_fraction: float | None = None
    selection_fraction: float | None = None
    pool_fraction: float = 0.05
    weight_mean: float = 1.0
    weight_variance: float = 1.0
    typical: tuple[float, float] | None = None
    max_grids: int = 1024
    max_records: int = 64
    resolution: str = "auto"
    coarsest_resolution: int | None = None
    profile: str | None = None
    strategy: str = "optimised"

    def __post_init__(self) -> None:
        check_choice(self.resolution, "resolution", RESOLUTIONS)
        check_choice(self.strategy, "strategy", STRATEGIES)
        if self.strategy != "optimised":  # a named strategy is the old `resolution` of that name
            if self.resolution not in ("auto", self.strategy):
                raise DpoptInputError(f"`strategy` = {self.strategy!r} and `resolution` = {self.resolution!r} "
                                      "disagree: `resolution` is the old name of `strategy`; give one")
            object.__setattr__(self, "resolution", self.strategy)
        given = "strategy" if self.strategy != "optimised" else "resolution"  # the name the caller used
        if self.profile is not None:
            profile_cycle(self.profile)  # the one validator of a profile name
            if self.private or self.resolution != "adaptive":
                raise DpoptInputError(f"`profile` = {self.profile!r} (windows recurring every {self.profile}) goes with "
                                      "strategy='adaptive' over a partition list (`partitions`); got "
                                      + (f"{given}={self.resolution!r}" if self.resolution != "auto" else
                                         "strategy='optimised', whose lattice holds the hours of the day and "
                                         "days of the week already")
                                      + (" without a list" if self.private else ""))
        self._check_own_bounds(given)
        self._check_idle(given)
        if self.coarsest_resolution is not None:
            check_positive_int(self.coarsest_resolution, "coarsest_resolution", minimum=0)
            if self.coarsest_resolution > 15 or not self.adaptive or self.private:
                raise DpoptInputError("`coarsest_resolution` must be an H3 resolution 0..15 and goes with a "
                                      "multi-resolution release over a partition list; got "
                                      f"{self.coarsest_resolution!r}")
        if self.resolution == "place" and self.private:
            raise DpoptInputError(f"`{given}` = 'place' needs a public partition list (`partitions`); without "
                                  "one use the default strategy 'optimised' (places selected under DP) or 'fixed'")
        bf = check_nonnegative_float(self.bounds_share, "bounds_fraction")
        sf = check_nonnegative_float(self.selection_share, "selection_fraction")
        pf = check_nonnegative_float(self.pool_fraction, "pool_fraction")
        check_positive_int(self.max_grids, "max_grids")
        check_positive_int(self.max_records, "max_records")
        check_choice(self.priority, "priority", ("own", "shared"))
        if self.private and self.adaptive:  # private multi-resolution (strategies.private_adaptive): public (k, c)
            if self.fixed_bounds is None and self.bounds != "histogram":
                raise DpoptInputError(f"`bounds` = {self.bounds!r} is a rule of the other shapes; private "
                                      "multi-resolution selection uses a public K,C pair (default 4,8) or "
                                      "resolution='fixed'")
            if self.priority != "own":
                raise DpoptInputError(f"`priority` = {self.priority!r} is an option of resolution='fixed'; private "
                                      "multi-resolution selection keeps nodes by its own public rule (the shared hash order; at the "
                                      "finest grid the one where a user dwells)")
        if self.fixed_bounds is None and not 0.0 < bf < 1.0:
            raise DpoptInputError(f"`bounds_fraction` must be in (0, 1) with automatic bounds; got {bf!r}")
        if self.private and not 0.0 < sf < 1.0:
            raise DpoptInputError(f"`selection_fraction` must be in (0, 1); got {sf!r}")
        if sum(self.fractions) >= 1.0:
            raise DpoptInputError("`bounds_fraction` + `selection_fraction` + `pool_fraction` must be < 1; "
                                  f"got {sum(self.fractions):g}")

    def _named(self, given: str) -> str:
        """The strategy as the caller named it (``given``: "strategy" or its old name "resolution")."""
        return "strategy='optimised' (the default)" if self.resolution == "auto" else f"{given}={self.resolution!r}"

    def _check_own_bounds(self, given: str) -> None:
        """``bounds`` and ``priority`` are rules of the adaptive and fixed strategies: the engine and the
        place release choose their record cap and clamp under DP (models/engine.md §1, models/hierarchy.md
        §14), so another value is refused there rather than moving the release to another strategy."""
        self.fixed_bounds  # a malformed value is named as such first
        check_choice(self.priority, "priority", ("own", "shared"))
        if self.resolution not in ("auto", "place"):
            return
        name, value = next(((n, v) for n, v, own in (("bounds", self.bounds, "histogram"),
                                                      ("priority", self.priority, "own")) if v != own), ("", None))
        if name:
            who = self._named(given)
            raise DpoptInputError(f"`{name}` = {value!r} is an option of strategy='adaptive' or 'fixed'; "
                                  f"{who} chooses its record cap and clamp under DP: drop `{name}` or name one "
                                  "of those strategies")

    def _check_idle(self, given: str) -> None:
        """The budget-split options read only by the strategies that split each grid's budget by
        :func:`~dpopt.privacy.user.split.split_budget` on the user's weights (``weight_mean``,
        ``weight_variance``: "place" and "fixed") or spend on pooling totals (``pool_fraction``: "fixed")
        are refused at another value elsewhere, where they would do nothing without a word."""
        for name, default, used_by in (("pool_fraction", 0.05, ("fixed",)), ("weight_mean", 1.0, ("place", "fixed")),
                                       ("weight_variance", 1.0, ("place", "fixed"))):
            value = getattr(self, name)
            if self.resolution not in used_by and value != default:
                raise DpoptInputError(f"`{name}` = {value!r} does nothing under {self._named(given)}: it is an option of "
                                      + " or ".join(f"strategy={u!r}" for u in used_by))

    @property
    def adaptive(self) -> bool:
        """A multi-resolution release (every ``resolution`` but "fixed"; with or without a list)."""
        return self.resolution != "fixed"

    @property
    def engine(self) -> bool:
        """The optimised engine (:mod:`dpopt.privacy.user.engine`): ``strategy`` "optimised"
        (``resolution`` "auto"), over a partition list or privately selected cells."""
        return self.resolution == "auto"

    @property
    def place(self) -> bool:
        """The named ``place`` strategy (``strategy`` / ``resolution`` "place")."""
        return self.resolution == "place"

    def place_for(self, budget: Any) -> bool:
        """Does this budget run the place release? (:attr:`place`.)"""
        return self.place

    @property
    def bounds_share(self) -> float:
        """``bounds_fraction``, or its default 0.1 (the place release's own default is
        :data:`dpopt.privacy.user.strategies.place.PLACE_BOUNDS_FRACTION`)."""
        return 0.1 if self.bounds_fraction is None else self.bounds_fraction  # type: ignore[return-value]

    @property
    def engine_bounds_share(self) -> float:
        """``bounds_fraction``, or the engine's default :data:`ENGINE_BOUNDS_FRACTION` (its record cap T
        and clamp [A, B])."""
        return ENGINE_BOUNDS_FRACTION if self.bounds_fraction is None else float(self.bounds_fraction)

    @property
    def selection_share(self) -> float:
        """``selection_fraction``, or its default: 0.6 for the private multi-resolution release
        (:data:`dpopt.privacy.user.strategies.private_adaptive.SELECTION_FRACTION`), else 0.2."""
        if self.selection_fraction is not None:
            return self.selection_fraction  # type: ignore[return-value]
        if self.engine and self.private:
            return ENGINE_SELECTION_FRACTION
        return 0.6 if self.adaptive and self.private else 0.2

    @property
    def private(self) -> bool:
        """Private partition selection (no public list)."""
        return self.partitions is None

    @property
    def fixed_bounds(self) -> tuple[int, int] | None:
        """The public (k, c), or None for an automatic rule."""
        if isinstance(self.bounds, str):
            check_choice(self.bounds, "bounds", BOUND_RULES)
            return None
        try:
            pair = tuple(self.bounds)
        except TypeError:
            pair = ()
        if len(pair) != 2:
            raise DpoptInputError(f"`bounds` must be one of {BOUND_RULES} or a (k, c) pair; got {self.bounds!r}")
        return check_positive_int(pair[0], "bounds[0] (k)"), check_positive_int(pair[1], "bounds[1] (c)")

    @property
    def first_records(self) -> int:
        """The most records per (user, grid) the model can keep: c when fixed, else the cap."""
        fixed = self.fixed_bounds
        return int(fixed[1]) if fixed is not None else int(self.max_records)

    @property
    def fractions(self) -> tuple[float, float, float]:
        """(bounds, selection, pool) shares actually spent (0 for what is public or fixed)."""
        sf = float(self.selection_share) if self.private else 0.0
        if self.engine:  # the engine's record cap and clamp, no pooling totals
            return self.engine_bounds_share, sf, 0.0
        if self.place:  # the place strategy's (T, B), no pooling totals (strategies.place)
            return (PLACE_BOUNDS_FRACTION if self.bounds_fraction is None else float(self.bounds_fraction)), 0.0, 0.0
        if self.private and self.adaptive:  # public (k, c), no pooling totals (strategies.private_adaptive)
            return 0.0, sf, 0.0
        bf = 0.0 if self.fixed_bounds is not None else float(self.bounds_share)
        return bf, sf, (float(self.pool_fraction) if self.resolution == "fixed" else 0.0)

    def check_budget(self, budget: Budget) -> tuple[float, float, float, float]:
        """(total in the noise's unit, δ total, δ of the selection, δ of the ρ → ε conversion);
        refuses a δ that would do nothing (Laplace noise over a public list) or is missing."""
        if self.resolution == "place" and isinstance(budget, Budget) and budget.gaussian:
            raise DpoptInputError("`mechanism` = 'gaussian' is not supported by the place release (pure ε, "
                                  "Laplace): add strategy='adaptive' or strategy='fixed'")
        if self.private and self.adaptive and isinstance(budget, Budget) and budget.gaussian:
            raise DpoptInputError("`mechanism` = 'gaussian' with private selection (no `partitions`) runs the flat "
                                  "release only: add strategy='fixed', or use Laplace noise with `delta` for "
                                  "the multi-resolution release")
        return _budget(budget, self.private)


def _budget(budget: Budget, private: bool) -> tuple[float, float, float, float]:
    from ...accounting import check_rho, rho_from_epsilon, split_delta, zcdp_epsilon
    from ..options import MIN_BUDGET_TOTAL

    if not isinstance(budget, Budget):
        raise DpoptInputError("the user model spends a whole-release `Budget` (epsilon_total or rho); got "
                              f"{type(budget).__name__} (the per-grid epsilon is public-occupancy's mode)")
    delta = budget.delta
    if not budget.gaussian:
        if private and delta is None:
            raise DpoptInputError("`delta` must be a number in (0, 1) for private partition selection (no "
                                  "`partitions`); got None")
        if not private and delta is not None:
            raise DpoptInputError(f"`delta` does nothing with Laplace noise and a public partition list (the "
                                  f"release is pure epsilon-DP): drop it; got delta={delta!r}")
        return float(budget.epsilon_total), float(delta or 0.0), float(delta or 0.0), 0.0
    if delta is None:
        if budget.epsilon_total is not None or private:
            raise DpoptInputError("`delta` is required with mechanism='gaussian' and "
                                  + ("`epsilon_total`" if budget.epsilon_total is not None else "private partition selection")
                                  + " (e.g. delta=1e-6); got None")
        return check_rho(budget.rho), 0.0, 0.0, 0.0
    d_sel, d_conv = split_delta(delta, selection_share=SELECTION_DELTA_SHARE if private else 0.0)
    if budget.rho is not None:
        return check_rho(budget.rho), delta, d_sel, d_conv
    total = rho_from_epsilon(budget.epsilon_total, d_conv)
    if total < MIN_BUDGET_TOTAL:  # the floor a given rho meets (Budget's check), for the rho derived here
        need = zcdp_epsilon(MIN_BUDGET_TOTAL, d_conv)
        raise DpoptInputError(f"`epsilon_total` must be >= {need:.3g} with mechanism='gaussian' and delta={delta!r}: "
                              f"epsilon_total={budget.epsilon_total!r} is rho = {total:.3g} of zCDP, below the "
                              "smallest budget the exact samplers can spend in pieces (2^-20 ≈ 9.5e-07); raise "
                              "it, or use Laplace noise")
    return total, delta, d_sel, d_conv


def _eps_from_rho(rho: float) -> float:
    """:func:`dpopt.accounting.pure_epsilon`: the largest float ε with ε²/2 ≤ ρ exactly."""
    from ...accounting import pure_epsilon

    return pure_epsilon(rho)


def noise_family(mech: Any) -> str:
    """The :data:`~dpopt.measurements.NOISE_FAMILIES` name of a sampler."""
    return ("discrete_" if mech.real_release else "") + ("laplace" if mech.unit == "epsilon" else "gaussian")


def _samplers(noise: NoiseOptions, kind: str, sampler: NoiseMechanism | None
              ) -> tuple[NoiseMechanism, NoiseMechanism, np.random.Generator | None]:
    """(statistics' sampler, selection's Laplace sampler of the same family, numpy rng for ties)."""
    # numpy's generator only for simulation noise: every random choice of a real release (noise,
    # tie-break keys, selection) comes from the integer source
    if sampler is not None and sampler.real_release and getattr(sampler, "source", None) is None:
        raise DpoptInputError("`sampler` is marked real_release but has no integer `source`: a real release draws its "
                              "tie-break keys and bounds choice from the sampler's OS-CSPRNG source (dpopt.noise.integer_source)")
    simulated = noise.noise == "numpy" or (sampler is not None and not sampler.real_release)
    rng = np.random.default_rng(noise.seed) if simulated else None

    def make(flavour: str, k: str, source: Any = None) -> NoiseMechanism:
        if flavour == "discrete":
            return make_mechanism(k, "discrete", seed=noise.seed if source is None else None, source=source,
                                  seeded=noise.seed is not None)
        return make_mechanism(k, "numpy", rng=rng)

    mech = sampler if sampler is not None else make(noise.noise, kind)
    if kind == "laplace":
        return mech, mech, rng
    sel = make("discrete" if mech.real_release else "numpy", "laplace", getattr(mech, "source", None))
    return mech, sel, rng


def _sampler_kind(budget: Budget, sampler: NoiseMechanism | None) -> str:
    if sampler is None:
        return budget.mechanism
    unit = getattr(sampler, "unit", None)
    if unit not in ("epsilon", "rho"):
        raise DpoptInputError(f"`sampler.unit` must be 'epsilon' or 'rho'; got {unit!r}")
    kind = "laplace" if unit == "epsilon" else "gaussian"
    if kind != budget.mechanism:
        raise DpoptInputError(f"`sampler` (unit {unit!r}) contradicts mechanism={budget.mechanism!r}")
    return kind


def _ranks(agg: Aggregate, options: UserOptions, rng: np.random.Generator | None, mask: np.ndarray | None,
           mech: NoiseMechanism) -> np.ndarray:
    """Each pair's rank among its user's grids: own top-k (ties at random) or a shared public order."""
    if options.priority == "shared":
        from .priority import hash_priority, priority_ranks

        return priority_ranks(agg, hash_priority(agg), mask=mask)
    source = getattr(mech, "source", None)  # the OS CSPRNG in a real release
    return grid_ranks(agg, rng if source is None else source, mask=mask)


def _partition_list(agg: Aggregate, options: UserOptions
                    ) -> tuple[PartitionList | None, np.ndarray | None, np.ndarray | None]:
    """(the public list, the aggregate row of each listed grid, the pairs in listed grids); Nones
    under private selection (bounding is restricted to listed grids)."""
    if options.private:
        return None, None, None
    p = options.partitions
    plist = p if isinstance(p, PartitionList) else read_partitions(p, h3_resolution=agg.h3_resolution,
                                                                   slot_ns=agg.slot_ns, timezone=agg.timezone)
    idx, listed = match_partitions(agg, plist)
    return plist, idx, listed[agg.pair_grid]


