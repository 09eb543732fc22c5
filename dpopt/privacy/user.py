"""The ``user`` privacy model: contributions → :class:`~dpopt.measurements.Measurements`
(models/user_level.md).

Neighbouring datasets add or remove all the records of one user; public are only the grid
definition (H3 resolution, slot length), the bound U, the options below and, if given, the
partition list. The model, one small function per step (the library pieces stay in
:mod:`dpopt.userdp`):

1. budget shares (:func:`shares`): ε_b for the bounds, ε_p for private selection, ε_t for three
   map-wide totals (pooling), the rest split among count, sum and sum of squares
   (:func:`dpopt.userdp.split.split_budget`); under Gaussian noise the shares are of ρ and the pure-ε
   pieces run at ε = √(2·share);
2. contribution bounding (:mod:`dpopt.userdp.bounding`): ≤ k grids per user (its own top-k by record
   count, ties at random), ≤ c first records per (user, grid), values on the lattice λ·ℤ; (k, c)
   chosen under DP (:mod:`dpopt.userdp.bounds`, ε_b) unless given;
3. which grids: a public list (all listed grids, empty ones as pure noise) or private Laplace
   thresholding of the user counts (:mod:`dpopt.userdp.partitions`, (ε_p, δ));
4. noisy count ñ, centred sum Ỹ and sum of squares Z̃ per measured grid (:mod:`dpopt.userdp.mechanism`)
   and, with ``pool_fraction`` > 0, the three map-wide totals.

What it returns is a :class:`Measurements` (statistics ``count``, ``sum`` = λỸ, ``sumsq`` = λZ̃ with
their exact noise laws, centre U/2, the exact spend); estimation (:mod:`dpopt.estimation`) turns them
into means and variances — post-processing only.

Accounting (models/user_level.md §8): Laplace, basic composition: ε_total = ε_b + ε_p + ε_t + ε_n +
ε_Y + ε_Z and δ (selection only). Gaussian, zCDP: ρ_total = ε_b²/2 + ε_p²/2 (Bun & Steinke Prop. 1.4)
+ ρ_t + ρ_n + ρ_Y + ρ_Z (Lemma 2.3); private selection is δ_p-approximately ε_p²/2-zCDP (Bun & Steinke
§8), so the release is (ε(ρ_total, δ − δ_p), δ)-DP (CKS 2020 Corollary 13).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from .._validation import DpoptInputError, check_bound, check_choice, check_nonnegative_float, check_positive_int
from ..hierarchy.tree import profile_cycle
from ..measurements import BudgetSpend, Measurements, NoiseLaw, Statistic
from ..noise import epsilon_rational, integer_source
from ..records.aggregate import Aggregate
from ..records.grid import slot_text
from ..userdp.bounding import BoundedGrids, bound_contributions, grid_ranks, lattice_values
from ..userdp.bounds import BOUND_RULES, choose_bounds
from ..userdp.mechanism import (DiscreteGaussian, DiscreteLaplace, GaussianSimulation, LaplaceSimulation,
                                NoiseMechanism)
from ..userdp.predict import NoiseBudgets
from ..userdp.partitions import PartitionList, match_partitions, read_partitions, selection_threshold
from ..userdp.sensitivity import Sensitivities, sensitivities
from ..userdp.split import BudgetSplit, split_budget
from .options import Budget, NoiseOptions

__all__ = ["UserOptions", "RESOLUTIONS", "Shares", "measure", "SELECTION_DELTA_SHARE", "noise_family"]

#: shapes of the release over a public partition list (UserOptions.resolution)
RESOLUTIONS = ("auto", "place", "adaptive", "fixed")
#: how the release chooses what to measure: "optimised" (the engine, :mod:`dpopt.privacy.engine`: the
#: marginals and their budgets chosen by the strategy model) or one of the named fixed strategies
STRATEGIES = ("optimised", "place", "adaptive", "fixed")
#: share of δ spent by private partition selection under Gaussian noise (the rest converts ρ)
SELECTION_DELTA_SHARE = 0.5


@dataclass(frozen=True)
class UserOptions:
    """Options of the ``user`` model (validated on construction).

    ``partitions`` a public partition list (CSV path, DataFrame with columns cell, slot, or a
    :class:`PartitionList`) or None for private partition selection (needs δ); ``bounds``
    "histogram", "select", "quantile" or a public (k, c); ``priority`` which grids a user keeps: its
    own top-k by record count ("own") or the first k in a public hash order ("shared",
    :mod:`dpopt.userdp.priority`); ``bounds_fraction`` (None: 0.1, 0.15 for place), ``selection_fraction``, ``pool_fraction``
    shares of the budget for the automatic bounds, private selection and the pooling totals;
    ``weight_mean``, ``weight_variance``, ``typical`` the split rule (:func:`split_budget`);
    ``max_grids``, ``max_records`` public caps of the automatic bounds.

    ``resolution`` the shape of the release: "auto" (default), "place", "adaptive" or "fixed" (the
    flat per-grid release at the finest resolution). "auto" is "place" with a public list, Laplace
    noise and the default ``bounds``/``priority``, else "adaptive". Place (a public list, pure ε):
    every H3 cell of the finest resolution over the whole period and the map are measured under a
    per-user record cap and a DP inner clamp, and each finest grid is answered by its cell's
    tree-BLUP estimate or the map's (:mod:`dpopt.privacy.user_place`, models/hierarchy.md §13).
    Adaptive with a public list: every level of the public
    hierarchy of H3 parents x coarser slots up to ``coarsest_resolution`` is measured and each
    finest grid is answered by its finest node whose error meets the target
    (:mod:`dpopt.privacy.user_multires`). Adaptive without a list (private selection, Laplace noise
    and δ): nodes of a few public levels are selected by Laplace thresholding of user counts in a
    shared public hash order (at the finest grid a user keeps the one where it dwells, if any:
    ``FINEST_RULE``), then measured (:mod:`dpopt.privacy.user_multires_private`; public (k, c) of
    the measurement, default (4, 8); ``selection_fraction`` default 0.6; no bounds or pooling budget).
    ``selection_fraction`` None: 0.6 there, 0.2 for the flat private release.

    ``profile`` "day" or "week" (with a list; "auto" then runs the adaptive release): the
    hierarchy's time steps are windows that recur every day (hour-of-day, 3-h-of-day) or week
    (hour-of-week, day-of-week) instead of longer contiguous slots (models/hierarchy.md §14).
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
        if self.profile is not None:
            profile_cycle(self.profile)  # the one validator of a profile name
            if self.private or self.resolution not in ("auto", "adaptive"):
                raise DpoptInputError(f"`profile` = {self.profile!r} (hour-of-day windows) goes with the adaptive "
                                      "multi-resolution release over a partition list (resolution 'auto' or "
                                      f"'adaptive' and `partitions`); got resolution={self.resolution!r}"
                                      + (" without a list" if self.private else ""))
        if self.coarsest_resolution is not None:
            check_positive_int(self.coarsest_resolution, "coarsest_resolution", minimum=0)
            if self.coarsest_resolution > 15 or not self.adaptive or self.private:
                raise DpoptInputError("`coarsest_resolution` must be an H3 resolution 0..15 and goes with a "
                                      "multi-resolution release over a partition list; got "
                                      f"{self.coarsest_resolution!r}")
        if self.resolution == "place" and self.private:
            raise DpoptInputError("`resolution` = 'place' needs a public partition list (`partitions`); without "
                                  "one use 'auto' (private multi-resolution selection) or 'fixed'")
        if self.resolution == "place" and (self.bounds != "histogram" or self.priority != "own"):
            raise DpoptInputError(f"`bounds` = {self.bounds!r} / `priority` = {self.priority!r} are options of "
                                  "resolution='adaptive' or 'fixed': the place release chooses its record cap "
                                  "and clamp under DP (models/hierarchy.md §13)")
        bf = check_nonnegative_float(self.bounds_share, "bounds_fraction")
        sf = check_nonnegative_float(self.selection_share, "selection_fraction")
        pf = check_nonnegative_float(self.pool_fraction, "pool_fraction")
        check_positive_int(self.max_grids, "max_grids")
        check_positive_int(self.max_records, "max_records")
        check_choice(self.priority, "priority", ("own", "shared"))
        if self.private and self.adaptive:  # private multi-resolution (user_multires_private): public (k, c)
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

    @property
    def adaptive(self) -> bool:
        """A multi-resolution release (every ``resolution`` but "fixed"; with or without a list)."""
        return self.resolution != "fixed"

    @property
    def engine(self) -> bool:
        """The optimised engine (:mod:`dpopt.privacy.engine`): a partition list, ``strategy``
        "optimised" (``resolution`` "auto") and the default ``bounds``/``priority``/``profile``."""
        return (self.resolution == "auto" and not self.private and self.profile is None
                and self.bounds == "histogram" and self.priority == "own")

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
        :data:`dpopt.privacy.user_place.PLACE_BOUNDS_FRACTION`)."""
        return 0.1 if self.bounds_fraction is None else self.bounds_fraction  # type: ignore[return-value]

    @property
    def selection_share(self) -> float:
        """``selection_fraction``, or its default: 0.6 for the private multi-resolution release
        (:data:`dpopt.privacy.user_multires_private.SELECTION_FRACTION`), else 0.2."""
        if self.selection_fraction is not None:
            return self.selection_fraction  # type: ignore[return-value]
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
        if self.private and self.adaptive:  # public (k, c), no pooling totals (user_multires_private)
            return 0.0, sf, 0.0
        bf = 0.0 if self.fixed_bounds is not None else float(self.bounds_share)
        return bf, sf, float(self.pool_fraction)

    def check_budget(self, budget: Budget) -> tuple[float, float, float, float]:
        """(total in the noise's unit, δ total, δ of the selection, δ of the ρ → ε conversion);
        refuses a δ that would do nothing (Laplace noise over a public list) or is missing."""
        if self.resolution == "place" and isinstance(budget, Budget) and budget.gaussian:
            raise DpoptInputError("`mechanism` = 'gaussian' is not supported by the place release (pure ε, "
                                  "Laplace): add resolution='adaptive' or resolution='fixed'")
        if self.private and self.adaptive and isinstance(budget, Budget) and budget.gaussian:
            raise DpoptInputError("`mechanism` = 'gaussian' with private selection (no `partitions`) runs the flat "
                                  "release only: add resolution='fixed', or use Laplace noise with `delta` for "
                                  "the multi-resolution release")
        return _budget(budget, self.private)


def _budget(budget: Budget, private: bool) -> tuple[float, float, float, float]:
    from ..accounting import check_rho, rho_from_epsilon

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
                                  + ("`epsilon`" if budget.epsilon_total is not None else "private partition selection")
                                  + " (e.g. delta=1e-6); got None")
        return check_rho(budget.rho), 0.0, 0.0, 0.0
    d_sel = SELECTION_DELTA_SHARE * delta if private else 0.0
    d_conv = delta - d_sel
    total = check_rho(budget.rho) if budget.rho is not None else rho_from_epsilon(budget.epsilon_total, d_conv)
    return total, delta, d_sel, d_conv


@dataclass(frozen=True)
class Shares:
    """The budget of each step (in ε, or ρ for the Gaussian statistics): ``bounds`` and ``selection``
    (pure ε either way), ``totals`` (the pooling totals), ``split`` of the statistics, and
    ``sum_budget`` (the bounds utility's SNR cap, a public parameter)."""

    bounds: float
    selection: float
    totals: float
    split: BudgetSplit
    sum_budget: float


def _eps_from_rho(rho: float) -> float:
    """The largest float ε with ε²/2 ≤ ρ exactly (a pure ε-DP piece costs ε²/2 in zCDP)."""
    if rho <= 0:
        return 0.0
    e = math.sqrt(2.0 * rho)
    while Fraction(e) ** 2 / 2 > Fraction(rho):
        e = math.nextafter(e, 0.0)
    return e


def shares(total: float, options: UserOptions, *, bound: float, gaussian: bool) -> Shares:
    """Split ``total`` (ε, or ρ under Gaussian noise) among the steps (module doc, step 1)."""
    bf, sf, pf = options.fractions
    split_rule = {"bound": bound, "weight_mean": options.weight_mean, "weight_variance": options.weight_variance,
                  "typical": options.typical}
    if gaussian:
        # shares of ρ (a 2^-40 margin keeps the exact sum of the rounded pieces ≤ ρ); the pure-ε
        # pieces run at the ε with ε²/2 = their share
        avail = total * (1.0 - 2.0**-40)
        rho_b, rho_p, eps_t = bf * avail, sf * avail, pf * avail
        split = split_budget(avail - rho_b - rho_p - eps_t, unit="rho", **split_rule)
        # the SNR cap: the ε at which Laplace noise of the sum equals this Gaussian's at k = 1
        return Shares(_eps_from_rho(rho_b), _eps_from_rho(rho_p), eps_t, split, math.sqrt(2.0 * split.sum))
    eps_b, eps_p, eps_t = bf * total, sf * total, pf * total
    split = split_budget(total - eps_b - eps_p - eps_t, **split_rule)
    return Shares(eps_b, eps_p, eps_t, split, split.sum)


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
            src = integer_source(noise.seed) if source is None else source
            return (DiscreteLaplace if k == "laplace" else DiscreteGaussian)(src, seeded=noise.seed is not None)
        return LaplaceSimulation(rng) if k == "laplace" else GaussianSimulation(rng)

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


@dataclass(frozen=True, eq=False)
class _Grids:
    """The measured grids and their bounded exact statistics (private input of the noise step)."""

    cells: np.ndarray
    slots: np.ndarray
    R: np.ndarray
    Y: np.ndarray
    Z: np.ndarray
    noisy_users: np.ndarray | None = None
    threshold: float | None = None


def _select_private(agg: Aggregate, bg: BoundedGrids, sens: Sensitivities, k: int, sh: Shares,
                    delta_sel: float, sel_mech: NoiseMechanism) -> _Grids:
    """Private partition selection: Laplace thresholding of the bounded user counts."""
    cand = np.flatnonzero(bg.users > 0)
    threshold = selection_threshold(k, sh.selection, delta_sel, sel_mech).threshold
    lu = sel_mech.integer(bg.users[cand], l1=k, l2=sens.users_l2, budget=sh.selection)
    keep = lu >= threshold
    rows = cand[keep]
    return _Grids(agg.cells[rows], agg.slots[rows], bg.records[rows], bg.sum_q[rows], bg.sumsq_q[rows],
                  noisy_users=lu[keep], threshold=threshold)


def _listed(plist: PartitionList, idx: np.ndarray, bg: BoundedGrids) -> _Grids:
    """Every listed grid (zeros where no record falls: released as pure noise)."""
    have = idx >= 0
    # exact: the bounded sums are int64 or Python ints (bounding)
    out = [np.zeros(len(plist), dtype=d) for d in (np.int64, bg.sum_q.dtype, bg.sumsq_q.dtype)]
    for arr, src in zip(out, (bg.records, bg.sum_q, bg.sumsq_q)):
        arr[have] = src[idx[have]]
    return _Grids(plist.cells, plist.slots, *out)


def _laws(mech: NoiseMechanism, sens: Sensitivities, split: BudgetSplit, lam: float) -> dict[str, NoiseLaw]:
    """The exact law of the noise of each statistic in value units (sum and sumsq on λ·ℤ)."""
    fam = noise_family(mech)
    grid = lam if mech.real_release else 0.0  # numpy noise is continuous
    return {
        "count": NoiseLaw(fam, mech.scale(l1=sens.count_l1, l2=sens.count_l2, budget=split.count),
                          1.0 if mech.real_release else 0.0),
        "sum": NoiseLaw(fam, lam * mech.scale(l1=sens.sum_l1_units, l2=sens.sum_l2_units, budget=split.sum), grid),
        "sumsq": NoiseLaw(fam, lam * mech.scale(l1=sens.sumsq_l1_units, l2=sens.sumsq_l2_units, budget=split.sumsq),
                          grid),
    }


def _noisy(mech: NoiseMechanism, sens: Sensitivities, split: BudgetSplit, g: _Grids) -> tuple[np.ndarray, ...]:
    """ñ, Ỹ, Z̃ (lattice units), in this order (the order of the draws is part of the pinned output)."""
    n_t = mech.integer(g.R, l1=sens.count_l1, l2=sens.count_l2, budget=split.count)
    y_t = mech.integer(g.Y, l1=sens.sum_l1_units, l2=sens.sum_l2_units, budget=split.sum)
    z_t = mech.integer(g.Z, l1=sens.sumsq_l1_units, l2=sens.sumsq_l2_units, budget=split.sumsq)
    return n_t, y_t, z_t


def _totals(mech: NoiseMechanism, sens: Sensitivities, g: _Grids, eps_t: float,
            lam: float) -> tuple[float, float, float] | None:
    """Three noisy map-wide totals (R, λY, λZ), each moved by ≤ k·c·(1, H_Y, H_Z) units by one user."""
    if eps_t <= 0:
        return None
    tot = [mech.integer(np.asarray([int(v.sum())]), l1=l1, l2=l1, budget=eps_t / 3.0)[0]
           for v, l1 in ((g.R, sens.count_l1), (g.Y, sens.sum_l1_units), (g.Z, sens.sumsq_l1_units))]
    return tot[0], lam * tot[1], lam * tot[2]


def _spend(mech: NoiseMechanism, sel_mech: NoiseMechanism, sh: Shares, *, private: bool, chosen: bool,
           gaussian: bool, delta: tuple[float, float]) -> BudgetSpend:
    """The exact spend per user: the budgets the samplers used (each rounded down to a multiple of
    2^-30 by the exact samplers), composed basically (Laplace) or in zCDP (Gaussian)."""
    split = sh.split
    rnd = (lambda v: float(epsilon_rational(v))) if mech.real_release else (lambda v: v)
    used = {name: rnd(v) for name, v in (("count", split.count), ("sum", split.sum), ("sumsq", split.sumsq))}
    if private:
        used["selection"] = float(epsilon_rational(sh.selection)) if sel_mech.real_release else sh.selection
    if chosen:
        used["bounds"] = sh.bounds
    if sh.totals > 0:
        used["totals"] = 3 * float(epsilon_rational(sh.totals / 3.0)) if mech.real_release else sh.totals
    delta_total, delta_conv = delta
    if not gaussian:
        total = float(sum(used.values()))
        return BudgetSpend("epsilon", total, used, delta_total, total)
    from ..accounting import zcdp_epsilon

    # pure-ε pieces in ε (their zCDP cost ε²/2 enters ρ_total); the rest in ρ
    pure = {name: used.pop(name) for name in ("selection", "bounds") if name in used}
    rho_total = float(sum((Fraction(v) for v in used.values()), Fraction(0))
                      + sum((Fraction(v) ** 2 / 2 for v in pure.values()), Fraction(0)))
    pieces = {**{f"{n}_rho": v for n, v in used.items()}, **{f"{n}_epsilon": v for n, v in pure.items()}}
    eps_total = zcdp_epsilon(rho_total, delta_conv) if delta_total > 0 else None
    return BudgetSpend("rho", rho_total, pieces, delta_total, eps_total)


def _nodes(agg: Aggregate, g: _Grids) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Node table (the measured finest grids, no hierarchy yet) and the finest-grid map to them."""
    n = g.cells.size
    nodes = pd.DataFrame({"cell": np.asarray(g.cells, dtype=np.int64), "h3_resolution": agg.h3_resolution,
                          "slot": np.asarray(g.slots, dtype=np.int64), "slot_ns": agg.slot_ns,
                          "parent": np.full(n, -1, dtype=np.int64)})
    finest = nodes[["cell", "slot", "slot_ns"]].assign(node=np.arange(n, dtype=np.int64))
    return nodes, finest


def _bounds(agg: Aggregate, ranks: np.ndarray, options: UserOptions, sh: Shares, rng: np.random.Generator | None,
            mech: NoiseMechanism, delta_sel: float, bound: float) -> tuple[int, int, str]:
    """(k, c, rule): the public pair, or chosen under DP with ε_b."""
    fixed = options.fixed_bounds
    if fixed is not None:
        return int(fixed[0]), int(fixed[1]), "fixed"
    selection = (sh.selection, delta_sel) if options.private else None
    split = sh.split
    choice = choose_bounds(agg, ranks, sh.bounds, rule=str(options.bounds), rng=rng,
                           source=getattr(mech, "source", None), max_grids=options.max_grids,
                           max_records=options.max_records, sum_budget=sh.sum_budget, selection=selection,
                           bound=bound, priority=options.priority,
                           budgets=NoiseBudgets(count=split.count, sum=split.sum, unit=split.unit,
                                                selection=selection))
    return choice.k, choice.c, choice.rule


def measure(contributions: Aggregate, budget: Budget, options: UserOptions = UserOptions(), *,
            bound: float | None = None, noise: NoiseOptions = NoiseOptions(),
            sampler: NoiseMechanism | None = None) -> Measurements:
    """The ``user`` model's measurements of ``contributions`` (module doc).

    ``contributions`` the contributions table with the samples kept (private input); ``budget`` the
    whole release's :class:`Budget`; ``bound`` U (default: the U the table was clipped with);
    ``noise`` the sampler options; ``sampler`` replaces the sampler they choose (its ``unit``
    decides the accounting). ``info`` holds the public facts: k, c, the bounds rule, the split
    rule, the partitions in words, the selection threshold and the noisy user counts (private
    selection), the noisy pooling totals, λ, the sampler's label.
    """
    agg = contributions
    U = check_bound(agg.bound if bound is None else bound)
    kind = _sampler_kind(budget, sampler)
    total, delta_total, delta_sel, delta_conv = options.check_budget(budget)
    mech, sel_mech, rng = _samplers(noise, kind, sampler)
    sh = shares(total, options, bound=U, gaussian=kind == "gaussian")
    plist, idx, mask = _partition_list(agg, options)
    ranks = _ranks(agg, options, rng, mask, mech)
    lattice = lattice_values(agg, U, granularity_bits=noise.granularity_bits)
    k, c, rule = _bounds(agg, ranks, options, sh, rng, mech, delta_sel, U)
    bg = bound_contributions(agg, k=k, c=c, ranks=ranks, lattice=lattice)
    sens = sensitivities(k, c, U, lam=lattice.lam)
    g = (_select_private(agg, bg, sens, k, sh, delta_sel, sel_mech) if options.private
         else _listed(plist, idx, bg))
    n_t, y_t, z_t = _noisy(mech, sens, sh.split, g)
    lam = lattice.lam
    laws = _laws(mech, sens, sh.split, lam)
    totals = _totals(mech, sens, g, sh.totals, lam)
    spend = _spend(mech, sel_mech, sh, private=options.private, chosen=options.fixed_bounds is None,
                   gaussian=kind == "gaussian", delta=(delta_total, delta_conv))
    nodes, finest = _nodes(agg, g)
    stats = {"count": Statistic("count", n_t, laws["count"]), "sum": Statistic("sum", lam * y_t, laws["sum"]),
             "sumsq": Statistic("sumsq", lam * z_t, laws["sumsq"])}
    info = {"k": k, "c": c, "bounds_rule": rule, "split_rule": sh.split.rule, "lattice": lam,
            "partitions": _partitions_text(options.private, kind == "gaussian", delta_sel),
            "selection_threshold": g.threshold, "noisy_users": g.noisy_users, "totals": totals,
            "noise": mech.label, "seeded": noise.seed is not None, "mechanism": kind,
            "delta_selection": delta_sel,  # Laplace: all of δ goes to the private selection (0 with a list)
            "h3_resolution": agg.h3_resolution, "slot": slot_text(agg.slot_ns)}
    return Measurements(privacy_model="user", bound=U, nodes=nodes, statistics=stats, spend=spend,
                        centre=U / 2.0, finest=finest, info=info)


def _ranks(agg: Aggregate, options: UserOptions, rng: np.random.Generator | None, mask: np.ndarray | None,
           mech: NoiseMechanism) -> np.ndarray:
    """Each pair's rank among its user's grids: own top-k (ties at random) or a shared public order."""
    if options.priority == "shared":
        from ..userdp.priority import hash_priority, priority_ranks

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
                                                                   slot_ns=agg.slot_ns)
    idx, listed = match_partitions(agg, plist)
    return plist, idx, listed[agg.pair_grid]


def _partitions_text(private: bool, gaussian: bool, delta_sel: float) -> str:
    if not private:
        return "public list"
    return "private selection (Laplace thresholding" + (
        f", delta_p = {delta_sel:g} of the total delta)" if gaussian else ")")
