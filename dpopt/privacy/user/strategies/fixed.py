"""The ``user`` privacy model's flat release (the named strategy "fixed": every listed or selected
grid at the finest resolution measured once): contributions →
:class:`~dpopt.measurements.Measurements` (models/user_level.md).

Neighbouring datasets add or remove all the records of one user; public are only the grid
definition (H3 resolution, slot length), the bound U, the options below and, if given, the
partition list. The model, one small function per step (the library pieces are the
other modules of :mod:`dpopt.privacy.user`, the options :mod:`dpopt.privacy.user.options`):

1. budget shares (:func:`shares`): ε_b for the bounds, ε_p for private selection, ε_t for three
   map-wide totals (pooling), the rest split among count, sum and sum of squares
   (:func:`dpopt.privacy.user.split.split_budget`); under Gaussian noise the shares are of ρ and the pure-ε
   pieces run at ε = √(2·share);
2. contribution bounding (:mod:`dpopt.privacy.user.bounding`): ≤ k grids per user (its own top-k by record
   count, ties at random), ≤ c first records per (user, grid), values on the lattice λ·ℤ; (k, c)
   chosen under DP (:mod:`dpopt.privacy.user.bounds`, ε_b) unless given;
3. which grids: a public list (all listed grids, empty ones as pure noise) or private Laplace
   thresholding of the user counts (:mod:`dpopt.privacy.user.partitions`, (ε_p, δ));
4. noisy count ñ, centred sum Ỹ and sum of squares Z̃ per measured grid (:mod:`dpopt.privacy.user.mechanism`)
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

import numpy as np
import pandas as pd

from ...._validation import check_bound
from ....accounting import compose_spend
from ....measurements import BudgetSpend, Measurements, NoiseLaw, Statistic, UserInfo
from ....noise import epsilon_rational
from ....records.aggregate import Aggregate
from ....records.grid import slot_text
from ..bounding import BoundedGrids, bound_contributions, lattice_values
from ..bounds import BoundsRule, choose_bounds
from ....noise.mechanism import NoiseMechanism
from ..predict import NoiseBudgets
from ..partitions import PartitionList, selection_threshold
from ..sensitivity import Sensitivities, sensitivities
from ..split import BudgetSplit, split_budget
from ...options import Budget, NoiseOptions
from ..options import UserOptions, _eps_from_rho, _partition_list, _ranks, _sampler_kind, _samplers, noise_family

__all__ = ["measure", "Shares", "shares"]


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
    # the pure-ε pieces (selection, bounds) cost ε²/2 each under zCDP
    return compose_spend(used, unit="rho" if gaussian else "epsilon", pure=("selection", "bounds"), delta=delta_total,
                         delta_conversion=delta_conv)


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
    choice = choose_bounds(agg, ranks, sh.bounds, rng=rng, source=getattr(mech, "source", None), options=BoundsRule(
                           rule=str(options.bounds), max_grids=options.max_grids,
                           max_records=options.max_records, sum_budget=sh.sum_budget, selection=selection,
                           bound=bound, priority=options.priority,
                           budgets=NoiseBudgets(count=split.count, sum=split.sum, unit=split.unit,
                                                selection=selection)))
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
    lattice = lattice_values(agg, U, granularity_bits=noise.bits_for(U))
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
    info = UserInfo(k=k, c=c, bounds_rule=rule, split_rule=sh.split.rule, lattice=lam,
                    partitions=_partitions_text(options.private, kind == "gaussian", delta_sel),
                    selection_threshold=g.threshold, noisy_users=g.noisy_users, totals=totals,
                    noise=mech.label, seeded=noise.seed is not None, mechanism=kind,
                    delta_selection=delta_sel,  # Laplace: all of δ goes to the private selection (0 with a list)
                    h3_resolution=agg.h3_resolution, slot=slot_text(agg.slot_ns))
    return Measurements(privacy_model="user", bound=U, nodes=nodes, statistics=stats, spend=spend,
                        centre=U / 2.0, finest=finest, info=info)


def _partitions_text(private: bool, gaussian: bool, delta_sel: float) -> str:
    if not private:
        return "public list"
    return "private selection (Laplace thresholding" + (
        f", delta_p = {delta_sel:g} of the total delta)" if gaussian else ")")
