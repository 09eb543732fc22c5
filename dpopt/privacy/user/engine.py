"""The ``user`` model's release engine over a public list, or without one over privately selected
cells and the day's windows (:mod:`dpopt.privacy.user.private_list`; models/engine.md, §8 for no list).

Choose which place × time marginals to measure and with what budget by an explicit optimisation
model, measure them, and leave to the estimation layer one crossed random-effects model of the
listed grids' means. Steps, each a DP query on the data or post-processing of earlier outputs:

1. **Bounds** (ε_b = :data:`BOUNDS_FRACTION` of the total): the per-user record cap T and the
   value clamp [A, B] ⊆ [0, U] from three DP histograms over users
   (:func:`dpopt.privacy.user.place_bounds.choose_place_bounds`, ``two_sided``). Where a clamp's
   histogram shows nothing (B would be U, or A 0), it is measured once more from the rest, at most
   :data:`CLAMP_REMEASURE_LIMIT`·ε_b and no more than the users' count says a histogram needs
   (:func:`_choose_bounds`); the decision reads DP outputs only and the total is unchanged.
2. **One bounded data set.** Each user keeps at most T of its records in listed grids, a
   systematic sample over its own records (:func:`dpopt.privacy.user.record_cap.capped_records`); values
   clamped to [A, B] and read as x − A on the lattice of
   :func:`dpopt.privacy.user.bounding.lattice_values` (every statistic and estimate in [0, B − A];
   the published means are moved back by A). Every marginal's node sums are sums of the same kept
   records.
3. **Candidates**: the public lattice's marginals (:func:`dpopt.hierarchy.lattice.candidate_marginals`).
4. **Pilot** (:data:`PILOT_SHARE` of the rest, equal per candidate): noisy counts and centred sums
   of every candidate. Fitted by the crossed model (:func:`dpopt.hierarchy.crossed.fit_crossed`),
   they give the variance components that predict each candidate's worth; its node counts are
   predicted from the pilot's totals and the bounds' histogram of records per user together
   (:func:`_predicted_counts`).
4b. **Between-grid statistic** (:data:`BETWEEN_SHARE` of the rest, one scalar): the record-weighted
   sum of squares of the listed grids' kept means (:func:`between_sumsq`), from which the estimator
   bounds how much the grids' means differ (the intervals' scale). Without a list the share is split
   evenly with a second scalar: the days' sum of squares inside the windows of the day
   (:func:`nested_sumsq`), which a day's grid answered by its window holds in its interval.
4c. **The users' place-or-time vote** (:data:`VOTE_SHARE` of the rest, over a public list only):
   each user's share of its grid means' spread that moves with the place at a fixed time, against
   the time at a fixed place (:mod:`dpopt.privacy.user.place_time_vote`; a user with evidence on one
   side only, a sensor that never moves, reads that side against the DP upper end of the grids' means'
   variance from step 4b); the plans split the main effects' components between place and time by
   it. Where the lattice holds a recurring window
   (hour-of-day) and a contiguous level of one cycle's span (1 d), a second vote of the same form
   (:data:`CYCLE_VOTE_SHARE`) splits the time's part between the two kinds of time level
   (:func:`dpopt.privacy.user.place_time_vote.cycle_votes`). A vote whose noise decides the first
   plan's route — the plan read at its 2-sd ends gives the most budget to different marginals — is
   raised by noise reduction, its share doubled, until its ends agree or it holds
   :data:`VOTE_SHARE_MOST` (:func:`_decided_votes`).
5. **Strategy, first round**: the budget shares of the main budget by
   :func:`dpopt.hierarchy.strategy.solve_strategy` (an LP/MILP solved with HiGHS, models/strategy.md)
   from the pilot's outputs only; :data:`ROUND1_SHARE` of them is measured.
5b. **First round grown** where it saw no factor but the rest could still lift one: once more to
   :data:`ROUND1_GROWTH` times its budget, on the same plan (:func:`_grow_first_round`).
6. **Second round**: the same fit over everything measured so far, and the whole main budget planned
   again with every marginal at least at its first-round share; each marginal's answers are raised
   to its final budget by noise reduction under Laplace noise (:mod:`dpopt.noise.reduction`: the
   earlier answers are post-processing of the final ones, so a marginal costs and is worth its final
   budget) or by an independent draw combined by inverse variance under the Gaussian (ρ adds). The
   estimator reads the final answers; the pilot's are published as the earlier, noisier view.

**Sensitivity** (add/remove one user): the user keeps ≤ T records, so every marginal's count
vector moves by ≤ T in ℓ1 and ℓ2 (all in one node at worst) and its centred-sum vector by ≤ T·H_Y
lattice units; no other user's kept records change (the sample reads only the user's own records
and keys); the between-grid statistic and the days' one move by at most ⌈T·(4K + 2)⌉ (:func:`nested_sumsq`);
each vote's centred sum by 2^15 lattice units and its number of voters by 1 (one vote per user). Each
(marginal, statistic), the between-grid statistic and each of a vote's two sums is one query,
raised over the rounds to its final budget: ε = Σ_i ε_i^final under Laplace (noise reduction; the proof: models/engine.md §2),
ρ = Σ ρ_i under the Gaussian; the plans depend on earlier DP outputs only. Published means are of values clamped to [0, B].

Constants: :data:`BOUNDS_FRACTION` and :data:`PILOT_SHARE` are fixed fractions of the budget spent
to learn the bounds and the strategy; they are not tuned on data: a larger pilot buys a better
allocation of the rest at the cost of an even split of itself, and the pilot's measurements are
reused in the estimate.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from ..._validation import DpoptInputError
from ...hierarchy.crossed import RESIDUAL, fit_crossed, within_memory
from ...hierarchy.tree import DAY_NS
from ...hierarchy.lattice import Marginal, MarginalNodes, candidate_marginals, nesting_map_resolution
from ...hierarchy.count_prior import fit_count_prior
from ...hierarchy.node_means import (BETWEEN_SDS, MIN_LEVELS, between_estimate, between_upper, combine, combined_total,
                                     count_threshold, crossed_inputs, identified)
from ...hierarchy.strategy import Candidate, StrategyProblem, solve_strategy
from ...accounting import pure_epsilon
from ...measurements import BudgetSpend, Measurements, NoiseLaw, Statistic, UserInfo
from ...records.aggregate import Aggregate
from ...records.grid import slot_text
from .bounding import lattice_values
from .bounds import bin_representatives
from .levels import level_node_sums, used_budget
from .place_bounds import (RECORD_BIN_EDGES, PlaceBounds, cap_candidates, choose_place_bounds, clamp_fields,
                           clamp_remeasure_epsilon, clamp_remeasure_side, kept_under_cap, record_histogram_fields,
                           remeasure_clamp, unkept_share)
from .place_time_vote import (PlaceShare, VoteDraw, cycle_votes, draw_votes, main_effect_split, place_votes,
                              raise_votes, vote_pieces, vote_share)
from .private_list import PrivateList, private_list
from .record_cap import capped_records
from .sensitivity import sensitivities
from .split import split_budget
from ...noise.sources import SeededSource
from ..options import Budget, NoiseOptions
from .options import ENGINE_BOUNDS_FRACTION, UserOptions, _partition_list, _sampler_kind, _samplers, noise_family
from .strategies.adaptive import PUBLIC_FACTS, spend_with_bounds

#: the release's progress lines (INFO; :func:`dpopt.writers.console.phase_lines` shows them on the
#: command line): public facts and DP outputs only — budgets, the marginals' names, the bounds and votes
_log = logging.getLogger(__name__)

__all__ = ["EngineInfo", "measure_engine", "between_sumsq", "nested_sumsq", "between_sensitivity", "BOUNDS_FRACTION", "PILOT_SHARE", "BETWEEN_SHARE"]

#: share of the total budget for the record cap T and the clamp [A, B] (three DP histograms over users)
BOUNDS_FRACTION = ENGINE_BOUNDS_FRACTION
#: the most a second clamp histogram may cost where the first showed nothing, as a multiple of the
#: share f/(1 − f) of the rest (f the bounds' share of the total): over a public list ε₂ ≤ ε_b, the
#: bounds' own share once more (a release spends at most 2·ε_b = 0.3·ε choosing T, B and A). Not
#: without a list: there the rest also pays the selection, the means' budget is near what lifts a
#: selected cell above its noise, and the same 18 % of it turned two of the four sensors releases
#: that answered anything at ε = 1 into releases that answer nothing (models/engine.md §2). Where no bin
#: clears the threshold B = U, and every measurement's noise carries the declared range U − A
#: instead of B − A — up to twice the noise sd where B ≈ U/2; where even the second histogram shows
#: nothing the means lose f/(1 − f) = 18 % of their budget (sd +21 % at f = 0.15). A statement about
#: the worst-case cost, not tuned on data: below it the pigeonhole rule of
#: :func:`.place_bounds.clamp_remeasure_epsilon` spends only what the users' count says is needed
CLAMP_REMEASURE_LIMIT = 1.0
#: the spend piece of the re-measured clamp histogram (a pure ε step, summary.json ``budget``)
CLAMP_REMEASURE_PIECE = "bounds, clamp re-measured"
#: share of the rest spent evenly on every candidate marginal to learn the strategy (reused in the fit)
PILOT_SHARE = 0.1
#: share of the rest spent on one scalar, the between-grid sum of squares of the listed grids
#: (:func:`between_sumsq`): a DP upper end of how much the grids' means differ, which bounds the
#: variance components the intervals integrate over (models/engine.md §4). A fixed fraction whose
#: cost is 10 % less budget for the means and whose gain is intervals that need not assume the
#: grids differ as much as single values do; not tuned on data. Without a list it is split evenly with
#: the days' sum of squares inside the windows (:func:`nested_sumsq`; models/engine.md §8): the same
#: statistic one level down, no preference between the two, and nothing taken from the means
BETWEEN_SHARE = 0.1
#: share of the rest first spent on the users' place-or-time vote (:mod:`.place_time_vote`; raised
#: where the first plan depends on it, :data:`VOTE_SHARE_MOST`): its noise sd is
#: ≈ √2/(ε_v·N) for N voters, so at 1 % of the rest the vote outweighs the uniform law on [0, 1]
#: (weight ≥ ½ in :func:`.place_time_vote.main_effect_split`) from N ≈ 5/ε_v voters — about 55 at
#: ε = 10 and 550 at ε = 1 — at a cost of 1 % of every other measurement's budget. A statement about
#: the vote's noise, not tuned on data
VOTE_SHARE = 0.01
#: share of the rest spent on the time's own vote, recurring window or day (:func:`.place_time_vote.cycle_votes`),
#: where the lattice holds both kinds of time level: the same noise law and the same statement as
#: :data:`VOTE_SHARE`
CYCLE_VOTE_SHARE = VOTE_SHARE
#: the most either vote is raised to, as a share of the rest, where the first plan depends on it
#: (:func:`_decided_votes`: its share doubled by noise reduction while the plan's route differs
#: between the vote's 2-sd ends): three doublings of :data:`VOTE_SHARE`, the largest below the
#: pilot's share — the votes, like the pilot, buy the plan's knowledge, and a vote never costs more
#: than the pilot. A statement about the budget's parts, not tuned on data
VOTE_SHARE_MOST = 0.08
#: the variance of the uniform law on [0, 1]: a vote whose first draw is noisier than this does not yet
#: outweigh it in :func:`.place_time_vote.main_effect_split` (its voters are few: sd ≈ √2/(ε_v·N)) and
#: is not raised (:func:`_decided_votes`)
UNIFORM_VARIANCE = 1.0 / 12.0
#: what the engine without a list treats as public (summary.json ``public``)
NO_LIST_FACTS = ("the grid definition (H3 resolution, slot), U, the options, the windows of the day and the public "
                 "3640-day periods (epoch-aligned) they recur over; nothing about occupancy: the cells are a DP selection")
#: a second-round step below this fraction of the main budget is not drawn (float residue of the
#: plan's shares, below the exact sampler's 2^-30 budget lattice at any ε of interest)
TINY_STEP = 1e-9
#: share of the main budget spent by the first round, on the plan the pilot's knowledge gives (the
#: public prior where the pilot sees nothing); the second round re-plans the whole main budget from
#: a fit of everything measured so far, each marginal at least at its first-round budget, and
#: refines the first round's noise (Laplace noise reduction, so the first round's budget is not
#: spent twice). Why 0.3: a marginal the whole budget would measure at a count signal-to-noise of
#: 10 is seen by the first round at 3, the threshold a node must pass to enter a fit (node_means);
#: a larger first round sees more and re-allocates less. A statement about noise, not tuned on data
ROUND1_SHARE = 0.3
#: where the first round saw no factor (no marginal with ``MIN_LEVELS`` nodes above their count
#: threshold) but the rest of the budget could still lift one, the first round is raised once to this
#: multiple of its budget before the re-plan (:func:`_grow_first_round`; free in precision under noise
#: reduction): a count at half its threshold then reaches it, where a re-plan from the smaller round
#: would send the rest to the map. Chosen with the benchmarks in view among two statements, doubling
#: once and raising to 0.6 then 0.9 of the plan: the second step changed nothing on the embedded day
#: and the time-set day and lost on the full Austin data at ε = 1 (4.36 → 4.40, 20 seeds)
ROUND1_GROWTH = 2.0
#: the strategy model's relative optimality gap: its objective is a predicted MSE, a surrogate, so a
#: plan within 1 % of the surrogate's optimum is as good as the optimum (a solver tolerance); the solve
#: stops on this gap or its round limit, never on the clock, so a seeded release is reproducible
STRATEGY_GAP = 0.01


@dataclass(frozen=True, eq=False)
class EngineInfo:
    """What the engine measured, for the estimator and the writers (public or DP outputs only).

    ``names``/``levels`` per measured marginal (the finest first), ``codes`` per marginal the node
    row (within the marginal) of each listed grid, ``offsets`` the first row of each marginal in
    the node table, ``cap`` T, ``clamp`` the width B − A of the values' range and ``low`` its lower
    clamp A (every statistic and estimate of the measurements reads values shifted by −A, in
    [0, B − A]; models/engine.md §2), ``pilot``/``main`` the budget per marginal of each
    phase (count + sum, in ``unit``), ``strategy`` the strategy's one-line summary; ``between`` the
    noisy between-grid statistic Q̃ of :func:`between_sumsq` in value² units and ``between_sd`` its
    noise sd (value²; NaN where not measured); ``day_between``/``day_between_sd`` the same for the
    days' sum of squares inside the windows of a folded list (:func:`nested_sumsq`; NaN with a
    public list); ``unkept`` κ, the mean share of a kept record's user's
    records the cap T did not keep (:func:`dpopt.privacy.user.place_bounds.unkept_share` of the DP
    histogram of records per user; 1 where unknown: no finite-population correction), which sizes the
    sampling error of a kept mean against the mean of all records (models/engine.md §4);
    ``place_vote``/``place_vote_sd`` the users' noisy mean place-or-time vote p̂ and its sd
    (:mod:`.place_time_vote`; NaN where not measured); ``cycle_vote``/``cycle_vote_sd`` the time's own
    vote q̂ (recurring window against day) and its sd (NaN where not measured)."""

    names: tuple[str, ...]
    levels: tuple[tuple[int, int, int], ...]
    codes: tuple[np.ndarray, ...]
    offsets: np.ndarray
    cap: int
    clamp: float
    unit: str
    pilot: np.ndarray
    main: np.ndarray
    strategy: str
    between: float = math.nan
    between_sd: float = math.nan
    day_between: float = math.nan
    day_between_sd: float = math.nan
    first: np.ndarray | None = None
    period: tuple[int, int] | None = None
    unkept: float = 1.0
    place_vote: float = math.nan
    place_vote_sd: float = math.nan
    cycle_vote: float = math.nan
    cycle_vote_sd: float = math.nan
    low: float = 0.0


@dataclass(eq=False)
class _Phase:
    """The measurement of every marginal so far (value units), cumulative over the rounds, with its
    noise laws; ``spread`` the noisy centred sum of squares Σ (x − B/2)² of the marginal with the
    fewest nodes (pilot only). ``levels`` the budget each (statistic, marginal) has reached and
    ``noise`` its current noise (lattice units) — private, kept only to refine it in the next round
    (:func:`_refined`), never published."""

    count: list[np.ndarray]
    total: list[np.ndarray]
    count_law: list[NoiseLaw]
    total_law: list[NoiseLaw]
    spent: dict[str, float]
    spread: np.ndarray | None = None
    spread_law: NoiseLaw | None = None
    levels: dict[tuple[str, int], float] = field(default_factory=dict)
    noise: dict[tuple[str, int], np.ndarray] = field(default_factory=dict)
    components: tuple[dict[str, float], float, set[str]] | None = None


@dataclass(frozen=True, eq=False)
class _Bounded:
    """Exact node sums (R, Y lattice units) of every candidate; private, never published."""

    cands: tuple[MarginalNodes, ...]
    R: list[np.ndarray]
    Y: list[np.ndarray]
    Z: np.ndarray
    lam: float
    half_sum: int
    half_sumsq: int
    cap: int
    #: the width B − A of the clamped values' range: every statistic reads values shifted by −A
    clamp: float
    windows: bool = False
    #: the lower clamp A (the values clamped to [A, B], read as x − A)
    low: float = 0.0
    #: (estimate, variance) of the total kept count from the DP histogram of records per user (None: unknown)
    kept_hint: tuple[float, float] | None = None
    #: the (user, grid) pairs in listed grids (bool per pair of the aggregate; None: every pair)
    pairs: np.ndarray | None = None
    #: each pair's listed grid (the finest candidate's grid order; −1 off the list)
    pair_grid: np.ndarray | None = None
    #: public relations between the candidates' codes, memoised for every plan of the release:
    #: "inside" (candidate, factor) → levels of the factor inside each node, "finer" (g, f) → does g
    #: vary inside f's levels (at 2·10⁷ records each is a sort of 127,853 grids)
    relations: dict[str, dict[tuple[str, str], Any]] = field(default_factory=dict)
    #: over a folded list (``windows``), the kept records' (count, centred sum) per (window node, day)
    #: (:func:`_day_sums`), from which the days' spread inside a window is measured; None otherwise
    day_sums: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def names(self) -> list[str]:
        """Each candidate's readable name; over the folded list of a release without one
        (``windows``, :mod:`.private_list`) a slot is a window of the day recurring daily."""
        fin = self.cands[0].marginal
        return [Marginal(mn.marginal.h3_resolution, mn.marginal.slot_ns,
                         DAY_NS if self.windows and mn.marginal.slot_ns == fin.slot_ns and mn.marginal.cycle_ns == 0
                         else mn.marginal.cycle_ns).name(fin.h3_resolution, fin.slot_ns) for mn in self.cands]

    @property
    def smallest(self) -> int:
        """The candidate with the fewest nodes (its sum of squares gives the spread of the values)."""
        return int(np.argmin([mn.n_nodes for mn in self.cands]))


def _map_resolution(agg: Aggregate, options: UserOptions) -> int | None:
    """The lattice's coarsest place level (the map, models/engine.md §1): ``coarsest_resolution``
    where given (below the finest, so that the lattice keeps a place level above the grids), else
    the lattice's default max(R − MAP_STEPS, 0)."""
    top = options.coarsest_resolution
    if top is not None and not int(top) < agg.h3_resolution:
        raise DpoptInputError(f"`coarsest_resolution` must be below the finest H3 resolution {agg.h3_resolution} "
                              f"(the map level of the engine's lattice); got {top!r}")
    return top


def _bounded(agg: Aggregate, options: UserOptions, cap: int, clamp: float, source: Any, bits: int, *,
             windows: bool = False, low: float = 0.0, days: np.ndarray | None = None) -> _Bounded:
    """Step 2–3: the kept records (≤ ``cap`` per user) summed over every candidate's nodes, values
    clamped to [``low``, ``clamp``] and read shifted by −``low``. ``days``: each stored record's day
    over a folded list (:func:`.private_list.fold_with_days`), whose kept records are then also
    summed per (window, day) (:func:`_day_sums`)."""
    plist, idx, eligible = _partition_list(agg, options)
    lat = lattice_values(agg, clamp, granularity_bits=bits, low=low)
    kept = None if days is None else np.zeros(np.asarray(days).size, dtype=bool)
    gamma, py, pz = capped_records(agg, eligible, cap, source, lat, record_kept=kept)
    pos = np.full(agg.n_grids, -1, dtype=np.int64)
    pos[idx[idx >= 0]] = np.flatnonzero(idx >= 0)
    pair_pos = pos[agg.pair_grid]
    top = _map_resolution(agg, options)
    if top is None and windows:  # no public list: the selected places' map: one that holds two of them (§8)
        top = nesting_map_resolution(plist.cells, agg.h3_resolution)
    cands = candidate_marginals(plist.cells, plist.slots, h3_resolution=agg.h3_resolution, slot_ns=agg.slot_ns,
                                map_resolution=top)
    R, Y, Z = [], [], []
    for mn in cands:
        pair_node = np.where(pair_pos >= 0, mn.code[np.maximum(pair_pos, 0)], -1)
        r, y, z = level_node_sums(agg, pair_node, mn.n_nodes, gamma, cap, lat, (py, pz))
        R.append(np.asarray(r, dtype=np.int64))
        Y.append(_exact_ints(y))  # a node's centred sum reaches (kept records)·H_Y, past int64 for tiny ranges
        Z.append(_exact_ints(z))
    smallest = int(np.argmin([mn.n_nodes for mn in cands]))
    day = None if kept is None else _day_sums(agg, kept, days, pair_pos, cands[0].code, lat.y)
    return _Bounded(cands=cands, R=R, Y=Y, Z=Z[smallest], lam=lat.lam, half_sum=int(lat.half_sum),
                    half_sumsq=int(lat.half_sumsq), cap=int(cap), clamp=float(clamp) - float(low), windows=windows,
                    pairs=eligible, pair_grid=pair_pos, low=float(low), day_sums=day)


def _exact_ints(values: Any) -> np.ndarray:
    """Exact integer sums as int64 where they fit, else as Python ints (object): a node's sum of
    squares reaches (kept records)·H_Z and its centred sum (kept records)·H_Y, past int64 for many
    records at a lattice fine against the range (U = 1e-12: H_Y ≈ 2^51; the noise is added to Python
    ints exactly, :func:`dpopt.noise.mechanism._add_exact`)."""
    arr = np.asarray(values)
    if arr.dtype != object:
        return arr.astype(np.int64)
    big = any(not -2**63 <= int(v) < 2**63 for v in arr.ravel())
    return np.array([int(v) for v in arr.ravel()], dtype=object).reshape(arr.shape) if big else arr.astype(np.int64)


def _day_sums(agg: Aggregate, kept: np.ndarray, days: np.ndarray, pair_pos: np.ndarray, code: np.ndarray,
              y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(R_d, Y_d): the kept records' count and centred lattice sum per (finest node, day) of a folded
    list — a window of the day in a cell, on one day — in any order (exact sums: int64, or Python
    integers where (records)·H_Y could leave int64). Private."""
    rec = np.flatnonzero(kept)
    owner = np.searchsorted(np.asarray(agg.samples.offsets, dtype=np.int64), rec, side="right") - 1
    grid = pair_pos[owner]
    on = grid >= 0
    rec, grid = rec[on], grid[on]
    if not rec.size:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    d = np.asarray(days)[rec].astype(np.int64)
    key = code[grid].astype(np.int64) * (int(d.max()) + 1) + d
    order = np.argsort(key, kind="stable")
    key, vals = key[order], np.asarray(y, dtype=np.int64)[rec[order]]
    if vals.size * int(np.max(np.abs(vals), initial=0)) >= 2**63:  # a size bound: exact Python integers
        vals = vals.astype(object)
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    return np.diff(np.r_[starts, key.size]).astype(np.int64), np.add.reduceat(vals, starts)


def _noisy(mech: Any, exact: np.ndarray, l1: int, l2: float, budget: float, unit_size: float, n: int
           ) -> tuple[np.ndarray, NoiseLaw]:
    """One query: ``exact`` (lattice integers) with noise of sensitivities ``l1``, ``l2``
    (models/engine.md §2), in value units, and its exact law."""
    noisy = unit_size * np.asarray(mech.integer(exact, l1=l1, l2=l2, budget=budget), dtype=float)
    law = NoiseLaw(noise_family(mech), np.full(n, unit_size * mech.scale(l1=l1, l2=l2, budget=budget)),
                   unit_size if mech.real_release else 0.0)
    return noisy, law


def _with_noise(exact: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """exact + noise per entry (lattice units) as floats, added exactly and rounded once."""
    if noise.dtype.kind == "f":  # continuous simulation noise
        return np.asarray(exact, dtype=float) + noise
    if noise.dtype == object or int(np.max(np.abs(exact), initial=0)) + int(np.max(np.abs(noise), initial=0)) >= 2**62:
        return np.array([float(int(e) + int(z)) for e, z in zip(np.ravel(exact), np.ravel(noise))])
    return (np.asarray(exact, dtype=np.int64) + noise).astype(float)


def _refined(mech: Any, exact: np.ndarray, prev: tuple[float, np.ndarray | None, np.ndarray, NoiseLaw] | None, *,
             l1: int, l2: float, step: float, unit_size: float
             ) -> tuple[float, np.ndarray | None, np.ndarray, NoiseLaw]:
    """One statistic of one marginal raised by ``step`` (the sampler's budget) to level + step:
    (level, noise, value, law). Laplace: the earlier noise *refined* to the new level
    (:mod:`dpopt.noise.reduction`; the earlier value is a post-processing of the new one, so the
    statistic costs its final level in all and is as precise as one draw there); Gaussian: a fresh
    draw at ``step`` combined with the earlier value by inverse variance (ρ adds, and so does the
    precision). Where nothing was measured before, one fresh draw (models/engine.md §2)."""
    n = int(np.size(exact))
    level = step + (prev[0] if prev is not None else 0.0)
    if prev is not None and mech.unit == "epsilon":
        noise = mech.refine(prev[1], l1=l1, budget_from=prev[0], budget_to=level)
    else:
        noise = mech.draws(n, l1=l1, l2=l2, budget=step) if mech.real_release else \
            np.asarray(mech.integer(np.zeros(n), l1=l1, l2=l2, budget=step))
    value = unit_size * _with_noise(exact, noise)
    law = NoiseLaw(noise_family(mech), np.full(n, unit_size * mech.scale(l1=l1, l2=l2, budget=level)),
                   unit_size if mech.real_release else 0.0)
    if prev is not None and mech.unit == "rho":  # independent draws: combine by inverse variance
        fresh = NoiseLaw(law.family, np.full(n, unit_size * mech.scale(l1=l1, l2=l2, budget=step)), law.lattice)
        value, var = combine([prev[2], value], [prev[3].variance(), fresh.variance()])
        law = NoiseLaw("gaussian", np.sqrt(var), 0.0)
        noise = None
    return level, noise, value, law


def _measure(b: _Bounded, mech: Any, budgets: np.ndarray, *, tag: str, spread: bool = False,
             prev: _Phase | None = None) -> _Phase:
    """Raise every marginal's count and centred sum by its budget in ``budgets`` (split between
    them by :func:`dpopt.privacy.user.split.split_budget`) over the measurement ``prev`` (none: the
    first round), and with ``spread`` measure the centred sum of squares of the smallest marginal;
    a marginal with no budget keeps its earlier measurement (NaN where it has none)."""
    # every marginal is a sum of the same ≤ T kept records per user: the (k, c) = (1, T) sensitivities
    # of the user model (all of a user's records in one node at worst; models/engine.md §2)
    sens = sensitivities(1, b.cap, b.clamp, lam=b.lam)
    out = _Phase([], [], [], [], {})
    for i, (mn, bud, name) in enumerate(zip(b.cands, budgets, b.names)):
        sq = spread and i == b.smallest
        sp = split_budget(float(bud), bound=b.clamp, unit=mech.unit, weight_mean=1.0,
                          weight_variance=1.0 if sq else 0.0) if bud > 0 else None
        for key, exact, l1, l2, unit_size, target in (
                ("count", b.R[i], sens.count_l1, sens.count_l2, 1.0, (out.count, out.count_law)),
                ("sum", b.Y[i], sens.sum_l1_units, sens.sum_l2_units, b.lam, (out.total, out.total_law))):
            before = None if prev is None or (key, i) not in prev.levels else (
                prev.levels[key, i], prev.noise.get((key, i)), *((prev.count[i], prev.count_law[i]) if key == "count"
                                                                 else (prev.total[i], prev.total_law[i])))
            if sp is None:
                value, law = (before[2], before[3]) if before is not None else (
                    np.full(mn.n_nodes, np.nan), NoiseLaw(noise_family(mech), np.zeros(mn.n_nodes), 0.0))
                if before is not None:
                    out.levels[key, i] = before[0]
                    if before[1] is not None:
                        out.noise[key, i] = before[1]
            else:
                step = used_budget(sp.count if key == "count" else sp.sum, mech)
                level, noise, value, law = _refined(mech, exact, before, l1=l1, l2=l2, step=step, unit_size=unit_size)
                out.levels[key, i] = level
                if noise is not None:
                    out.noise[key, i] = noise
                out.spent[f"{tag} {key} {name}"] = step
            target[0].append(value), target[1].append(law)
        if sq:
            used = used_budget(sp.sumsq, mech)
            out.spread, out.spread_law = _noisy(mech, b.Z, sens.sumsq_l1_units, sens.sumsq_l2_units, used, b.lam,
                                                mn.n_nodes)
            out.spent[f"{tag} sum of squares {name}"] = used
    _log.info("%s measured (%s): %s", tag, "ε" if mech.unit == "epsilon" else "ρ",
              ", ".join(f"{name} {bud:.4g}" for name, bud in zip(b.names, budgets) if bud > 0) or "nothing")
    return out


def between_sumsq(R: np.ndarray, Y: np.ndarray, *, half_sum: int, bits: int, cap: int) -> tuple[int, int]:
    """(Q, its ℓ1 = ℓ2 sensitivity) of the listed grids' between-grid sum of squares about their mean.

    With R_g kept records and Y_g their centred sum in lattice units (λ = 2^-``bits``, |y| ≤ H =
    ``half_sum``) per listed grid, N = Σ R_g and S = Σ Y_g,

        Q = Σ_{g: R_g > 0} ⌊Y_g² / (R_g·2^b)⌋ − ⌊S² / (N·2^b)⌋   (0 where N = 0),

    in units of λ (value² / λ): Σ_g R_g·(ȳ_g − ȳ)², the record-weighted sum of squares of the grids'
    kept means about their overall mean: :func:`nested_sumsq` with one group, the whole list."""
    R = np.asarray(R, dtype=np.int64)
    Y = _exact_ints(Y)
    return (nested_sumsq(R, Y, np.array([int(R.sum())], dtype=object), np.array([sum(int(y) for y in Y)], dtype=object),
                         bits=bits), between_sensitivity(half_sum=half_sum, bits=bits, cap=cap))


def nested_sumsq(R_fine: np.ndarray, Y_fine: np.ndarray, R_group: np.ndarray, Y_group: np.ndarray, *, bits: int) -> int:
    """Σ_{f: R_f > 0} ⌊Y_f² / (R_f·2^b)⌋ − Σ_{c: R_c > 0} ⌊Y_c² / (R_c·2^b)⌋ (exact, Python integers)
    for fine cells f nested in groups c (R_c = Σ_{f ∈ c} R_f, Y_c likewise; the caller's partition):
    Σ_f R_f·(ȳ_f − ȳ_c(f))², the record-weighted sum of squares of the fine cells' kept means about
    their group's, in units of λ = 2^-b. **Sensitivity** ⌈T·(4K + 2)⌉, K = H²/2^b
    (:func:`between_sensitivity`), for any fixed nesting: it is the within-group sum of squares of
    the kept records minus the within-cell one. Adding one record of centred value x (|x| ≤ H) raises
    its group's by n_c/(n_c + 1)·(x − ȳ_c)² ∈ [0, 4H²) and its cell's by n_f/(n_f + 1)·(x − ȳ_f)²
    ∈ [0, 4H²) (the others are unchanged), so the exact value moves by less than 4H², i.e. 4K in units of
    λ, either way; each of the two floors that change (the cell's term and the
    group's) moves by less than 1 more. Removing a record is the reverse step, and a user's ≤ T kept
    records are added one after another (no other user's kept records change)."""
    b = int(bits)

    def part(R: np.ndarray, Y: np.ndarray) -> int:  # ⌊y²/(r·2^b)⌋, b of either sign (a lattice λ > 1)
        return sum((int(y) * int(y) << max(-b, 0)) // (int(r) << max(b, 0)) for r, y in zip(R, Y) if int(r) > 0)
    return part(R_fine, Y_fine) - part(R_group, Y_group)


def between_sensitivity(*, half_sum: int, bits: int, cap: int) -> int:
    """⌈T·(4K + 2)⌉, K = H²/2^b: the ℓ1 = ℓ2 sensitivity of :func:`between_sumsq` (its proof)."""
    return math.ceil(int(cap) * (4 * Fraction(int(half_sum) ** 2) / Fraction(2) ** int(bits) + 2))


def _measure_between(b: _Bounded, mech: Any, budget: float) -> tuple[dict[str, float], dict[str, float]]:
    """The noisy :func:`between_sumsq` of the listed grids (one query), in value² units, for
    :class:`EngineInfo`; and its budget piece. Over a folded list (``b.day_sums``) ``budget`` is split
    evenly with a second query of the same sensitivity: the days' sum of squares inside the windows
    (:func:`nested_sumsq` of the (window, day) sums in their windows; EngineInfo ``day_between``),
    since a day's grid is answered by its window and its truth deviates from the window's by that
    spread (models/engine.md §8)."""
    if budget <= 0:
        return {}, {}
    bits = int(round(-math.log2(b.lam)))
    q, sens = between_sumsq(b.R[0], b.Y[0], half_sum=b.half_sum, bits=bits, cap=b.cap)
    queries = [("between", q, "pilot between-grid sum of squares")]
    if b.day_sums is not None:
        queries.append(("day_between", nested_sumsq(*b.day_sums, b.R[0], b.Y[0], bits=bits),
                        "pilot days' sum of squares inside the windows"))
    used = used_budget(budget / len(queries), mech)
    sd = mech.scale(l1=sens, l2=float(sens), budget=used) * (math.sqrt(2.0) if mech.unit == "epsilon" else 1.0)
    info, pieces = {}, {}
    for name, value, piece in queries:
        noisy = mech.integer(np.array([value], dtype=object if abs(value) >= 2**62 else np.int64), l1=sens,
                             l2=float(sens), budget=used)
        info.update({name: b.lam * float(np.asarray(noisy, dtype=float)[0]), f"{name}_sd": b.lam * sd})
        pieces[piece] = used
    return info, pieces


def _pilot_budgets(b: _Bounded, budget: float) -> np.ndarray:
    """The pilot's budget per candidate: an even split over the main effects — the marginals that
    are place alone (a place level over the whole period) or time alone (the coarsest place level
    over a time level) — and nothing on their interactions. Main effects first (the hierarchical
    ordering principle of experimental design): they are what the pilot can measure at all, and
    what the strategy most needs to tell apart (does the place or the time set the value?)."""
    top = min(mn.marginal.h3_resolution for mn in b.cands)
    main = np.array([mn.marginal.slot_ns == 0 or mn.marginal.h3_resolution == top for mn in b.cands])
    return np.where(main, budget / max(int(main.sum()), 1), 0.0)


def _split_total(budget: Budget, options: UserOptions) -> tuple[float, float, float, str, tuple[float, float]]:
    """(the private list's ε (0 with a public list), the bounds' ε_b, the rest in the noise's unit,
    that unit, (δ total, δ of the ρ → ε conversion))."""
    total, delta_total, _, delta_conv = options.check_budget(budget)
    frac = options.engine_bounds_share
    if budget.gaussian:  # the bounds' histograms are pure ε: ε_b²/2 of ρ (a list is required: UserOptions)
        rho_b = frac * total
        return 0.0, pure_epsilon(rho_b), total - rho_b, "rho", (delta_total, delta_conv)
    eps_sel = float(options.selection_share) * total if options.private else 0.0
    return eps_sel, frac * total, total - frac * total - eps_sel, "epsilon", (delta_total, delta_conv)


def measure_engine(agg: Aggregate, budget: Budget, options: UserOptions, *, U: float,
                   noise: NoiseOptions = NoiseOptions()) -> Measurements:
    """Measurements of the engine over the public list ``options.partitions`` (module doc).

    ``agg`` the contributions with samples (values in [0, ``U``]); ``budget`` the whole release's
    (pure ε with Laplace noise, or ρ / (ε, δ) with Gaussian noise). Returns the node table of every
    measured marginal (column ``marginal``), the statistics ``count``/``sum`` (main phase) and
    ``count_pilot``/``sum_pilot``, and :class:`EngineInfo` in ``info.engine``.
    """
    eps_sel, eps_b, rest, unit, deltas = _split_total(budget, options)
    mech, _, rng = _samplers(noise, _sampler_kind(budget, None), None)
    source = getattr(mech, "source", None)
    source = source if source is not None else SeededSource(int(rng.integers(0, 2**62)))
    chosen = None
    if options.private:  # no public list: the places selected under DP, the day's windows (private_list)
        chosen = private_list(agg, epsilon=eps_sel, delta=deltas[0], mechanism=mech, source=source)
        if len(chosen.partitions) == 0:
            return _nothing_selected(agg, chosen, mech=mech, noise=noise, U=U, deltas=deltas,
                                     epsilon=float(budget.epsilon_total))
        agg, options = chosen.agg, replace(options, partitions=chosen.partitions)
    candidates = cap_candidates(U, noise.bits_for(U))
    pb, rest, clamp_spent = _choose_bounds(agg, options, eps_b, rest, unit, U=U, source=source, candidates=candidates,
                                           again=chosen is None)
    b = _bounded(agg, options, pb.cap, pb.clamp, source, noise.bits_for(U), windows=chosen is not None,
                 low=pb.clamp_low, days=None if chosen is None else chosen.days)
    b = replace(b, kept_hint=_kept_from_histogram(pb))
    pilot_budgets = _pilot_budgets(b, PILOT_SHARE * rest)
    pilot = _measure(b, mech, pilot_budgets, tag="pilot", spread=True)
    between, between_spent = _measure_between(b, mech, BETWEEN_SHARE * rest)
    votes = _votes(agg, b, mech, rest, listed=chosen is None, reference=_spread(b, pilot, between, upper=False))
    # the plan of the pilot's knowledge: the prior's total is the between-grid statistic's upper end
    votes, voted = _decided_votes(b, pilot, votes, mech, rest, unit, spread=_spread(b, pilot, between))
    vote, cycle = votes.shares()
    total = (1.0 - PILOT_SHARE - BETWEEN_SHARE - votes.share) * rest
    prior, _ = _plan(b, pilot, total, unit, spread=_spread(b, pilot, between), vote=vote, cycle=cycle)
    first = ROUND1_SHARE * prior
    first = np.where(first > TINY_STEP * total, first, 0.0)  # a solver's residue is no measurement
    round1 = _measure(b, mech, first, tag="round 1", prev=pilot)
    round1, first, grown = _grow_first_round(b, mech, round1, first, total)
    main_budgets, summary = _plan(b, round1, total, unit, committed=first, spread=_spread(b, round1, between),
                                  vote=vote, cycle=cycle)
    summary = f"{voted}{grown}{summary}"
    more = main_budgets - first
    main = _measure(b, mech, np.where(more > TINY_STEP * total, more, 0.0), tag="main", prev=round1)
    spend = spend_with_bounds({**(chosen.pieces if chosen else {}), **pilot.spent, **between_spent, **votes.spent(),
                               **round1.spent,
                               **main.spent}, unit, eps_b, mech.real_release, deltas, pure=clamp_spent)
    _check_account(spend, budget, unit)
    return _assemble(agg, b, pilot, main, spend, EngineInfo(
        names=tuple(b.names),
        levels=tuple((mn.marginal.h3_resolution, mn.marginal.slot_ns,
                      DAY_NS if b.windows and mn.marginal.slot_ns == agg.slot_ns else mn.marginal.cycle_ns)
                     for mn in b.cands),
        codes=tuple(mn.code for mn in b.cands), offsets=np.cumsum([0] + [mn.n_nodes for mn in b.cands[:-1]]),
        cap=b.cap, clamp=b.clamp, low=b.low, unit=unit, pilot=pilot_budgets, main=main_budgets, first=first, strategy=summary,
        period=None if chosen is None else chosen.period, unkept=unkept_share(pb.record_counts, pb.cap), **between,
        place_vote=vote.value if vote else math.nan, place_vote_sd=vote.sd if vote else math.nan,
        cycle_vote=cycle.value if cycle else math.nan, cycle_vote_sd=cycle.sd if cycle else math.nan),
        mech=mech, noise=noise, U=U, bounds=pb, chosen=chosen, deltas=deltas)


def _choose_bounds(agg: Aggregate, options: UserOptions, eps_b: float, rest: float, unit: str, *, U: float,
                   source: Any, candidates: np.ndarray, again: bool = True) -> tuple[PlaceBounds, float, dict[str, float]]:
    """(T, B, A) from the three histograms at ε_b (:func:`.place_bounds.choose_place_bounds`); where a
    clamp's showed nothing and ``again`` (over a public list), that clamp again from a second
    histogram (:func:`.place_bounds.clamp_remeasure_side` — B, or A where the values evidently reach
    the top of the range — and :func:`.place_bounds.clamp_remeasure_epsilon`) taken from ``rest``
    (ε₂ of ε, or ε₂²/2 of ρ: a pure ε-DP step costs ε²/2 in zCDP), at a cost of at most
    min(``CLAMP_REMEASURE_LIMIT``·f/(1 − f), 1/2) of ``rest``, f the bounds' share of the total (ε₂ ≤ ε_b,
    and at least half of the rest left for the marginals: the cap binds only where f > 1/3).
    Returns the bounds, what is left of ``rest`` and the re-measure's pure ε piece (empty where none)."""
    _, _, eligible = _partition_list(agg, options)
    pb = choose_place_bounds(agg, eligible, eps_b, bound=U, source=source, candidates=candidates, two_sided=True)
    frac = float(options.engine_bounds_share)
    # ε₂ ≤ ε_b, and never more than half of the rest: with a bounds_fraction of 1/2 or more the first
    # term alone is the whole rest or more, and nothing would be left to measure the marginals with
    most = min(CLAMP_REMEASURE_LIMIT * frac / (1.0 - frac), 0.5) * rest if (again and frac < 1.0) else 0.0
    side = clamp_remeasure_side(pb, U)
    eps2 = 0.0 if side is None else clamp_remeasure_epsilon(pb, most if unit == "epsilon" else pure_epsilon(most), side)
    if eps2 > 0:
        pb = remeasure_clamp(agg, eligible, pb, eps2, bound=U, source=source, side=side)
    _log.info("bounds: at most %d record%s per user; values clamped to %.4g–%.4g above the range's lower end "
              "(its width %.4g)%s", pb.cap, "" if pb.cap == 1 else "s", pb.clamp_low, pb.clamp, U,
              "; a clamp measured again" if eps2 > 0 else "")
    if eps2 <= 0:
        return pb, rest, {}
    cost = eps2 if unit == "epsilon" else float(Fraction(eps2) ** 2 / 2)
    return pb, rest - cost, {CLAMP_REMEASURE_PIECE: eps2}


@dataclass
class _Votes:
    """The users' votes as drawn so far (:func:`_votes`, :func:`_decided_votes`): each vote's draw
    (None where not asked) and its share of the rest."""

    place: VoteDraw | None = None
    cycle: VoteDraw | None = None
    cycle_label: str = ""
    place_share: float = 0.0
    cycle_share: float = 0.0

    @property
    def share(self) -> float:
        """The votes' share of the rest in all."""
        return self.place_share + self.cycle_share

    def shares(self) -> tuple[PlaceShare | None, PlaceShare | None]:
        """(the place-or-time vote, the time's vote) as estimates (post-processing)."""
        return (None if self.place is None else vote_share(self.place),
                None if self.cycle is None else vote_share(self.cycle))

    def spent(self) -> dict[str, float]:
        """Their budget pieces, each at its final level (noise reduction: a vote costs that only)."""
        return {**({} if self.place is None else vote_pieces(self.place)),
                **({} if self.cycle is None else vote_pieces(self.cycle, self.cycle_label))}


def _votes(agg: Aggregate, b: _Bounded, mech: Any, rest: float, *, listed: bool, reference: float | None = None
           ) -> _Votes:
    """The place-or-time vote and the time's vote at their first shares of ``rest`` (:data:`VOTE_SHARE`,
    :data:`CYCLE_VOTE_SHARE`): the users' votes (:mod:`.place_time_vote`; ``reference`` the DP
    estimate V̂ of the grids' means' variance that the users with evidence on one side read their
    spread against, :func:`.place_time_vote.one_sided_shares`), over a public list only — over a
    private list of cells × windows of the day (models/engine.md §8) the first was measured to cost
    coverage (payments 0.94 → 0.78) and neither is asked — the time's only where the lattice holds a
    recurring window and a day (:func:`_cycle_pair`)."""
    if not listed:
        return _Votes()
    out = _Votes(place=draw_votes(place_votes(agg, b.pairs, reference=reference), mech, VOTE_SHARE * rest,
                                  with_noise=_vote_noise), place_share=VOTE_SHARE)
    pair = _cycle_pair(b)
    if pair is not None:
        out.cycle = draw_votes(cycle_votes(agg, b.pairs, b.pair_grid, b.cands[pair[1]].code, b.cands[pair[0]].code),
                               mech, CYCLE_VOTE_SHARE * rest, with_noise=_vote_noise)
        out.cycle_label, out.cycle_share = _cycle_label(b, pair), CYCLE_VOTE_SHARE
    return out


def _vote_noise(exact: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """A vote's query plus its draw, by :func:`_with_noise` (looked up when called): the one place every
    statistic of the engine meets its noise."""
    return _with_noise(exact, noise)


def _vote_ends(share: PlaceShare | None) -> list[PlaceShare] | None:
    """The vote read at its ends p̂ ± ``BETWEEN_SDS``·sd(p̂), clipped to [0, 1] (None where it has no
    finite sd)."""
    if share is None or not (math.isfinite(share.value) and math.isfinite(share.sd)):
        return None
    return [replace(share, value=float(min(max(share.value + side * BETWEEN_SDS * share.sd, 0.0), 1.0)))
            for side in (-1.0, 1.0)]


def _route(budgets: np.ndarray) -> int:
    """The marginal a plan gives the most budget (−1: none)."""
    return int(np.argmax(budgets)) if float(np.sum(budgets)) > 0 else -1


def _decided_votes(b: _Bounded, pilot: _Phase, votes: _Votes, mech: Any, rest: float, unit: str, *,
                   spread: float) -> tuple[_Votes, str]:
    """(the votes, a note for the strategy's summary): each vote raised — its share of ``rest``
    doubled, by noise reduction under pure ε (a fresh draw combined by inverse variance under ρ,
    :func:`.place_time_vote.raise_votes`), so it costs its final level only — while the first plan's
    route (:func:`_route`: the marginal it gives the most) differs between the vote's ends
    (:func:`_vote_ends`, the other vote as measured), up to :data:`VOTE_SHARE_MOST`. A vote the plan
    does not depend on stays at its first share; one it does is measured until its noise no longer
    decides the plan, or it costs what the pilot does (models/engine.md §5, "The vote raised where
    the plan depends on it"). A vote whose first draw does not yet outweigh the uniform law (sd² >
    :data:`UNIFORM_VARIANCE`: few voters) is not raised: what it stands for is the few users with
    evidence, and more precision does not make them the many (payers of one purchase a shop and
    hour at ε = 1: raised, a vote of 0.52 moved the plan off the hour of the day that sets the
    value). On the embedded day at ε = 10 the first vote's sd was 0.12–0.28 and the plan bought the
    cells at one end and the region's hours at the other in 8 of 12 seeds. Post-processing of DP
    outputs decides each step; the vote's account is its final level (models/engine.md §2's claim
    for rounds)."""
    raised = False
    while True:
        place, cycle = votes.shares()
        total = (1.0 - PILOT_SHARE - BETWEEN_SHARE - votes.share) * rest
        todo = []
        for side, mine, share in (("place", place, votes.place_share), ("cycle", cycle, votes.cycle_share)):
            ends = _vote_ends(mine)
            if ends is None or 2.0 * share > VOTE_SHARE_MOST * (1.0 + 1e-9) or mine.sd ** 2 > UNIFORM_VARIANCE:
                continue
            routes = {_route(_plan(b, pilot, total, unit, spread=spread, vote=end if side == "place" else place,
                                   cycle=end if side == "cycle" else cycle)[0]) for end in ends}
            if len(routes) > 1:
                todo.append(side)
        if not todo:
            break
        raised = True
        for side in todo:
            share = 2.0 * getattr(votes, f"{side}_share")
            setattr(votes, side, raise_votes(getattr(votes, side), mech, share * rest, with_noise=_vote_noise))
            setattr(votes, f"{side}_share", share)
    place, cycle = votes.shares()
    if place is not None:
        _log.info("users' vote: the place sets %.2g ± %.2g of what the place and the time set", place.value, place.sd)
    if not raised:
        return votes, ""
    what = [f"{name} {100 * share:.3g} %" for name, share, base in
            (("place-or-time", votes.place_share, VOTE_SHARE), (votes.cycle_label, votes.cycle_share, CYCLE_VOTE_SHARE))
            if share > base]
    return votes, (f"the users' votes raised ({', '.join(what)} of the rest: the first plan's route differed at a "
                   "vote's 2-sd ends); ")


def _grow_first_round(b: _Bounded, mech: Any, round1: _Phase, first: np.ndarray, total: float
                      ) -> tuple[_Phase, np.ndarray, str]:
    """(the first round's measurement, its budgets, a note for the strategy's summary): where the
    first round saw no factor (:func:`_pilot_components`) but the rest of the budget could still lift
    one (:func:`_within_reach`), the same plan is measured once more up to :data:`ROUND1_GROWTH` times
    its budget before the re-plan (models/engine.md §5). Raised by noise reduction (Laplace) or an
    independent draw combined by inverse variance (Gaussian), so the first round's budget is not
    spent twice; the re-plan then reads counts whose signal-to-noise ratio has doubled (Laplace)."""
    _, _, seen = _pilot_components(b, round1, b.names)
    if seen or not _within_reach(b, round1, total - float(np.sum(first))):
        return round1, first, ""
    more = (ROUND1_GROWTH - 1.0) * first
    more = np.where(more > TINY_STEP * total, more, 0.0)
    grown = _measure(b, mech, more, tag="round 1, grown", prev=round1)
    grown.spent = {**round1.spent, **grown.spent}  # the first round's pieces stay in the account
    return grown, first + more, f"first round grown to {ROUND1_GROWTH:g}× (it saw no factor); "


def _check_account(spend: BudgetSpend, budget: Budget, unit: str) -> None:
    """A pure-ε account above the budget is an accounting error (a plan or round that spent a piece
    twice), and the release stops rather than publish it. Below the budget is allowed: a plan whose
    shares sum to less than one leaves budget unspent (at ε = 10⁵ on smooth data, 70 % spent)."""
    if unit == "epsilon" and spend.total > float(budget.epsilon_total) * (1.0 + 1e-9):
        raise RuntimeError(f"the engine's privacy account holds {spend.total!r}, above the budget "
                           f"{float(budget.epsilon_total)!r}: an accounting error, nothing is published")


def _nothing_selected(agg: Aggregate, chosen: PrivateList, *, mech: Any, noise: NoiseOptions, U: float,
                      deltas: tuple[float, float], epsilon: float) -> Measurements:
    """No cell passed the private selection: nothing else is measured (the rest of the budget is not
    spent) and the release publishes no row; its outlook names the selection's threshold and the ε
    that would lower it (:func:`dpopt.estimation.outlook.levels_outlook`)."""
    from .strategies.private_adaptive import _forest, _measure as _measure_forest

    sel = chosen.selection
    m = _measure_forest(agg, [sel], _forest([sel]), bound=U, bounds=(chosen.k, 1), eps_values=0.0, mech=mech,
                        seed=noise.seed, pieces=dict(chosen.pieces), lat=lattice_values(agg, U, granularity_bits=noise.bits_for(U)),
                        extra_info={})
    info = replace(m.info, shape="engine", partitions=_selection_text(chosen), delta_selection=float(deltas[0]),
                   selection_threshold=float(chosen.selection.threshold),
                   public=NO_LIST_FACTS, epsilon_budget=float(epsilon), seeded=noise.seed is not None, mechanism="laplace",
                   bounds_rule="none measured (no place selected)", split_rule="none", slot=slot_text(agg.slot_ns))
    return Measurements(privacy_model="user", bound=m.bound, nodes=m.nodes, statistics=m.statistics, spend=m.spend,
                        centre=m.centre, finest=m.finest, info=info)


def _selection_text(chosen: PrivateList) -> str:
    """How the places were chosen, in words (summary.json's ``partitions``)."""
    return (f"private selection: H3 cells over the period, each user voting for a uniformly random {chosen.k} of "
            f"its cells (k by a DP quantile), Laplace thresholding (threshold {chosen.selection.threshold:.4g} noisy "
            "users); every window of the day, recurring daily")


def _windows(nodes: pd.DataFrame, finest: pd.DataFrame, period: tuple[int, int], slot_ns: int
             ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The folded list's nodes as what they are (private_list): a slot-level node is its window of
    the day recurring daily from the period's start; a period node spans the public period."""
    start, end = period
    nodes = nodes.copy()
    window = (nodes["slot_ns"].to_numpy() == slot_ns) & (nodes["cycle_ns"].to_numpy() == 0)
    nodes.loc[window, "cycle_ns"] = DAY_NS
    nodes.loc[window, "slot"] = start + nodes.loc[window, "slot"].to_numpy()
    whole = ~window
    nodes.loc[whole, "slot"] = start
    nodes.loc[whole, "slot_ns"] = end - start
    return nodes, finest.assign(slot=start + finest["slot"].to_numpy())


def _stack(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate([np.asarray(p, dtype=float) for p in parts])


def _law(laws: list[NoiseLaw]) -> NoiseLaw:
    """One law over the stacked node table (per-node scales; one family and lattice per phase)."""
    lattice = max(law.lattice for law in laws)
    return NoiseLaw(laws[0].family, _stack([law.scale for law in laws]), lattice)


def _assemble(agg: Aggregate, b: _Bounded, pilot: _Phase, main: _Phase, spend: BudgetSpend, info: EngineInfo, *,
              mech: Any, noise: NoiseOptions, U: float, bounds: Any, chosen: PrivateList | None = None,
              deltas: tuple[float, float] = (0.0, 0.0)) -> Measurements:
    nodes = pd.concat([mn.nodes.assign(marginal=i) for i, mn in enumerate(b.cands)], ignore_index=True)
    nodes["parent"] = np.int64(-1)
    stats = {"count": Statistic("count", _stack(main.count), _law(main.count_law)),
             "sum": Statistic("sum", _stack(main.total), _law(main.total_law)),
             "count_pilot": Statistic("count_pilot", _stack(pilot.count), _law(pilot.count_law)),
             "sum_pilot": Statistic("sum_pilot", _stack(pilot.total), _law(pilot.total_law))}
    if pilot.spread is not None:  # the smallest marginal's sum of squares, NaN on every other node
        rows = np.arange(info.offsets[b.smallest], info.offsets[b.smallest] + b.cands[b.smallest].n_nodes)
        value = np.full(len(nodes), np.nan)
        value[rows] = pilot.spread
        scale = np.zeros(len(nodes))
        scale[rows] = pilot.spread_law.scale
        stats["sumsq_pilot"] = Statistic("sumsq_pilot", value, NoiseLaw(pilot.spread_law.family, scale,
                                                                         pilot.spread_law.lattice))
    fin = b.cands[0]
    finest = pd.DataFrame({"cell": fin.nodes["cell"].to_numpy()[fin.code], "slot": fin.nodes["slot"].to_numpy()[fin.code],
                           "node": fin.code.astype(np.int64)})
    if chosen is not None:
        nodes, finest = _windows(nodes, finest, chosen.period, agg.slot_ns)
    gaussian = mech.unit == "rho"
    meta = UserInfo(engine=info, k=1, c=b.cap, record_cap=b.cap, clamp=float(bounds.clamp), clamp_low=b.low, declared_bound=U,
                    bounds_rule="record cap T and clamp [A, B] from DP histograms over users", shape="engine",
                    split_rule="count and sum per marginal (closed form)",
                    partitions="public list" if chosen is None else _selection_text(chosen),
                    selection_threshold=None if chosen is None else float(chosen.selection.threshold),
                    h3_resolution=agg.h3_resolution, slot=slot_text(agg.slot_ns), slot_ns=agg.slot_ns,
                    noise=noise.noise, lattice=b.lam, seeded=noise.seed is not None,
                    mechanism="gaussian" if gaussian else "laplace", delta_selection=float(deltas[0]) if chosen else 0.0,
                    public=PUBLIC_FACTS if chosen is None else NO_LIST_FACTS,
                    levels=[list(lv) for lv in info.levels], sumsq_measured=False,
                    sumsq_centre=b.clamp * b.clamp / 8.0, record_histogram=record_histogram_fields(bounds),
                    clamp_histogram=clamp_fields(bounds, U),
                    clamp_low_histogram=None if bounds.low_histogram is None else clamp_fields(bounds, U, low=True))
    return Measurements(privacy_model="user", bound=b.clamp, nodes=nodes, statistics=stats, spend=spend,
                        centre=b.clamp / 2.0, finest=finest, info=meta)


def _unit_noise(b: _Bounded, unit: str, *, centre_gap: float) -> float:
    """Var(ñ)·(centre gap)² + Var(Ỹ) of one node at unit budget (ε = 1 or ρ = 1), split as
    :func:`_measure` splits it: the numerator of a node's mean's noise variance (module doc)."""
    sp = split_budget(1.0, bound=b.clamp, unit=unit, weight_mean=1.0, weight_variance=0.0)
    T, half = float(b.cap), b.clamp / 2.0
    if unit == "epsilon":  # Laplace: Var = 2 (Δ/ε)²
        return 2.0 * (T / sp.count) ** 2 * centre_gap ** 2 + 2.0 * (T * half / sp.sum) ** 2
    return (T * T / (2.0 * sp.count)) * centre_gap ** 2 + T * T * half * half / (2.0 * sp.sum)  # σ² = Δ²/(2ρ)


def _total_count(phase: _Phase) -> tuple[float, float]:
    """(estimate, variance) of the total kept count from every marginal ``phase`` measured
    (:func:`dpopt.hierarchy.node_means.combined_total`). Post-processing."""
    return combined_total(phase.count, [law.variance() for law in phase.count_law])


def _kept_from_histogram(pb: PlaceBounds) -> tuple[float, float] | None:
    """(Σ_b h_b·min(r_b, T), Σ_b min(r_b, T)²·2/ε_T²): the total kept count read off the denoised DP
    histogram of records per user in listed grids (``pb.record_counts``: h_b users of r_b records,
    :func:`.bounds.bin_representatives`; T the cap) and its variance under the histogram's noise
    (variance 2/ε_T² per bin, ε_T its ε; the denoising's thresholding and the bins' representatives
    are left out of it). None where the bounds kept no histogram. Post-processing of a DP output."""
    if pb.record_counts is None:
        return None
    fields = record_histogram_fields(pb)
    eps_t = float(fields["epsilon"])
    if not eps_t > 0:
        return None
    k = np.minimum(bin_representatives(RECORD_BIN_EDGES), float(pb.cap))
    kept = kept_under_cap(np.maximum(np.asarray(pb.record_counts, dtype=float), 0.0), pb.cap)
    return float(kept[0]), float(np.sum(k * k) * 2.0 / (eps_t * eps_t))


def _predicted_counts(b: _Bounded, pilot: _Phase) -> np.ndarray:
    """Each listed grid's kept count predicted from DP outputs (post-processing): the total kept
    count — every measured marginal's total of ``pilot`` (:func:`dpopt.hierarchy.node_means.combined_total`)
    and the bounds' histogram's (``b.kept_hint``, :func:`_kept_from_histogram`) combined by inverse
    variance — spread evenly over the listed grids. At ε = 1 the pilot's total alone has a noise sd
    about the size of the total itself (the weekly kind: 7,110 ± 79,000 against 78,000 kept), the
    histogram's a tenth of it (models/engine.md §5, "The plan's counts"). Finer predictions need node
    counts the pilot can see, which at the budgets of user-level DP it mostly cannot (a node's count
    signal-to-noise ratio is ε times its effective users, models/engine.md §5)."""
    G = b.cands[0].code.size
    n, n_var = _total_count(pilot)
    if b.kept_hint is not None:
        n, n_var = combine([np.array([n]), np.array([b.kept_hint[0]])],
                           [np.array([n_var]), np.array([max(b.kept_hint[1], 1e-9)])])
        n = float(n[0])
    return np.full(G, max(float(n), 1.0) / G)


def _admission_counts(b: _Bounded, phase: _Phase, grid_n: np.ndarray, *, first: bool = True) -> list[np.ndarray]:
    """Each candidate's node counts as the plan's admission rule reads them (:func:`_candidate`,
    :func:`_weakest`: could enough of a marginal's nodes pass their count threshold?). A place over the
    whole period (:func:`_main_kinds` "place", the marginals :func:`_vote_favoured` also exempts) that
    ``phase`` measured: each node at the larger of the even spread ``grid_n``
    (:func:`_predicted_counts`) and the median of its count's empirical-Bayes posterior under the NPMLE
    of the marginal's counts' distribution (:func:`dpopt.hierarchy.count_prior.fit_count_prior`), so
    that a node reads as passing where it more likely than not passes. Any other marginal: the even
    spread (the time's nodes: read off the pilot's counts too, a thin region's days admitted the day,
    which round 1 could not see at ε = 1, in place of the day of the week: the day-set at ε = 1 4.8 →
    8.1). Where the noise hides how the records are spread the rule is the even spread's; where it
    shows a few busy nodes, those are read as busy: over a list mostly empty
    (a box of cells × the service hours) the even spread had priced out every cell of a place-set data
    set, and the release answered every grid with the map-wide mean (models/engine.md §5, "The plan's
    admission rule"). The plan's predicted noise variances still read the even spread, and only the
    ``first`` plan reads the posterior counts: a re-plan reads the first round's measured counts of what
    it measured (:func:`_weakest`) and the even spread of the rest, as before (the same section: where
    the first round saw nothing, a re-plan that admitted the cells on the pilot's counts spent on them
    in a data set whose day of the week sets the value, and its errors doubled). Post-processing of DP
    outputs."""
    out, kinds = [], _main_kinds(b)
    for i, (name, mn) in enumerate(zip(b.names, b.cands)):
        node_n = np.bincount(mn.code, weights=grid_n, minlength=mn.n_nodes)
        if first and kinds.get(name) == "place" and mn.n_nodes > 1 and np.all(np.isfinite(phase.count[i])):
            prior = fit_count_prior(phase.count[i], phase.count_law[i])
            node_n = np.maximum(node_n, prior.posterior_quantiles(phase.count[i], 0.5))
        out.append(node_n)
    return out


def _admitted(node_n: np.ndarray, count_sd: float) -> bool:
    """Could a marginal of admission node counts ``node_n`` (:func:`_admission_counts`) enter the
    fit at count noise sd ``count_sd``: would ``MIN_LEVELS`` of its nodes pass their count threshold
    (one, for a marginal of fewer nodes: the map's serves the map-wide mean as it is)? The count
    :func:`_weakest` asks at the planned budget; under the even spread a marginal's nodes differ only
    by their numbers of listed grids, and one node of the most grids passing no longer admits it
    (models/engine.md §5). Post-processing."""
    return _predicted_passing(node_n, count_sd) >= (MIN_LEVELS if node_n.size >= MIN_LEVELS else 1)


def _pilot_components(b: _Bounded, pilot: _Phase, names: list[str]) -> tuple[dict[str, float], float, set[str]]:
    """(variance components, μ, the factors seen) of the crossed model fitted to the measurements so
    far (REML), by the estimator's rules (models/engine.md §4): a factor's component is fitted only
    where at least ``MIN_LEVELS`` of its marginal's nodes entered, the grids' own residual only where
    that many listed grids did (fitted without them, an unidentified residual takes the variance of
    the factors, and the plan would read the time of a time-set data set as noise). Kept on the phase:
    the first round's fit serves both :func:`_grow_first_round` and the re-plan (at 2·10⁷ records one
    such fit takes minutes)."""
    if pilot.components is None:
        pilot.components = _fit_components(b, pilot, names)
    return pilot.components


def _fit_components(b: _Bounded, pilot: _Phase, names: list[str]) -> tuple[dict[str, float], float, set[str]]:
    """:func:`_pilot_components`' fit."""
    codes = [mn.code for mn in b.cands]
    var = lambda laws: [law.variance() for law in laws]  # noqa: E731
    # every marginal's counts weigh the grids here, the noisy too (the estimator leaves those out:
    # measured, the plans read with that rule lost on the place-set sensors, models/engine.md §4)
    factors, A, y, s2, kept = crossed_inputs(codes, names, pilot.count, var(pilot.count_law), pilot.total,
                                             var(pilot.total_law), centre=b.clamp / 2.0, half_range=b.clamp / 2.0,
                                             every_margin=True)
    every = {name: 0.0 for name, mn in zip(names[1:], b.cands[1:]) if mn.n_nodes > 1}  # every candidate factor
    seen, grid_seen = identified(names, kept, factors)
    if y.size < len(seen) + 3:
        return {**every, "residual": 0.0}, b.clamp / 2.0, set()
    fit, left_out = within_memory(lambda fs: fit_crossed(fs, A, y, s2, residual=grid_seen, variances=False),
                                  {f: c for f, c in factors.items() if f in seen})
    found = {f: float(fit.sigma2[f]) for f in seen if f not in left_out}  # left out: planned as unseen
    if grid_seen:
        found["residual"] = float(fit.sigma2[RESIDUAL])
    return {**every, "residual": 0.0, **found}, float(fit.mu), set(found)


def _within_reach(b: _Bounded, phase: _Phase, remaining: float) -> bool:
    """Could the ``remaining`` budget, all on one measured marginal, lift ``MIN_LEVELS`` of its nodes
    above their count threshold — enough for the fit to see its factor? Each node's count
    signal-to-noise ratio grows with the budget in proportion (the Laplace scale falls as 1/ε, the
    Gaussian sd as 1/√ρ); it is read at the lower end of what was observed, ``BETWEEN_SDS`` = 2 noise
    sds below (the one-sided margin of the other DP upper and lower ends): a count that passes only by
    its noise would project a finer answer that the rest of the budget cannot buy (seen on the full
    Austin data at ε = 1: time marginals chosen on noise, the map-wide mean 8 km/h off). Post-processing
    of DP outputs."""
    return any(_nodes_passing(b, phase, i, remaining) >= MIN_LEVELS for i in range(len(b.cands)))


def _nodes_passing(b: _Bounded, phase: _Phase, i: int, more: float) -> int:
    """How many nodes of marginal ``i`` would pass their count threshold with ``more`` budget (count
    and sum, split as :func:`_measure` splits it) added to what ``phase`` measured it at: the count
    signal-to-noise ratio read ``BETWEEN_SDS`` noise sds below what was observed, grown in proportion
    to the budget (Laplace) or its square root (Gaussian); 0 for a marginal not yet measured or of
    fewer than ``MIN_LEVELS`` nodes. Post-processing of DP outputs (:func:`_within_reach`, :func:`_weakest`)."""
    mn = b.cands[i]
    level = phase.levels.get(("count", i), 0.0)
    if level <= 0 or mn.n_nodes < MIN_LEVELS:
        return 0
    laplace = phase.count_law[i].family.endswith("laplace")
    more = more * split_budget(1.0, bound=b.clamp, unit="epsilon" if laplace else "rho", weight_mean=1.0,
                               weight_variance=0.0).count  # the count's part, split as _measure splits
    grow = (level + more) / level if laplace else math.sqrt((level + more) / level)
    snr = phase.count[i] / np.sqrt(np.maximum(phase.count_law[i].variance(), 1e-300)) - BETWEEN_SDS
    return int(np.sum(snr * grow >= count_threshold(mn.n_nodes)))


def _predicted_passing(node_n: np.ndarray, count_sd: float) -> int:
    """How many nodes of predicted kept counts ``node_n`` (:func:`_predicted_counts`, summed per node)
    would pass their count threshold (:func:`dpopt.hierarchy.node_means.count_threshold`) at count
    noise sd ``count_sd``. Post-processing of DP outputs and public geometry."""
    return int(np.sum(node_n >= count_threshold(node_n.size) * count_sd))


def _spread(b: _Bounded, phase: _Phase, between: dict[str, float], *, upper: bool = True) -> float:
    """The grids' means' variance from the between-grid statistic, at most B²/4 (Popoviciu), with the
    total kept count every measured marginal of ``phase`` gives: its DP upper end
    (:func:`dpopt.hierarchy.node_means.between_upper`), the prior's total variance; or, ``upper``
    False, its point estimate V̂ (at least its noise sd: a variance's scale, positive), what the users
    with evidence on one side read their spread against (:func:`.place_time_vote.one_sided_shares`;
    models/engine.md §5). Post-processing."""
    n, n_var = _total_count(phase)
    Q, sd = between.get("between", math.nan), between.get("between_sd", math.nan)
    if upper:
        value = between_upper(Q, sd, n, count_var=n_var)
    else:
        v, sd_v = between_estimate(Q, sd, n, count_var=n_var)
        value = max(v, sd_v) if np.isfinite(v) else math.inf
    return float(min(value, b.clamp * b.clamp / 4.0))


def _plan(b: _Bounded, pilot: _Phase, rest: float, unit: str, *, committed: np.ndarray | None = None,
          spread: float | None = None, vote: PlaceShare | None = None, cycle: PlaceShare | None = None
          ) -> tuple[np.ndarray, str]:
    """Steps 5–6: the main budget per marginal from the measurements so far (``pilot``: the pilot's,
    then the first round's) and public facts only (models/strategy.md): each factor's variance
    component as their REML fit estimates it where the fit saw that factor, else a prior: what the
    seen factors leave of ``spread`` (:func:`_spread`: the DP upper end of the grids' means' variance,
    measured in the pilot, at most B²/4 — the largest variance of a mean in [0, B], Popoviciu — which
    stands in where it is not given), split evenly over the unseen factors (no preference between
    place and time; a split even over place, time and their interactions instead erred 5.1 against
    4.4 km/h on the full Austin data at ε = 1, 12 seeds); the map-wide mean as a factor of prior
    variance B²/4; predicted node counts. ``committed``: the
    budgets the first round spent (lower bounds of the plan; where that round saw nothing and the
    rest could not lift enough nodes, :func:`_within_reach`, the rest goes to the map). In the first
    plan, and in a re-plan where the first round saw nothing, a marginal gets budget only if enough of
    its nodes would pass their count threshold at that share (:func:`_weakest`). The factors:
    :func:`_plan_factors`. ``vote``, ``cycle``: the users' votes, which split the main effects (:func:`.place_time_vote.main_effect_split`)."""
    names, codes = b.names, [mn.code for mn in b.cands]
    fitted, mu, seen = _pilot_components(b, pilot, names)
    if committed is not None and not seen and not _within_reach(b, pilot, rest - float(np.sum(committed))):
        return _map_only(b, names, rest, "the first round saw no factor, nor would the rest of the budget",
                         committed / rest)
    factors, sigma2 = _plan_factors(b, fitted, seen, spread=spread, vote=vote, cycle=cycle)
    grid_n = _predicted_counts(b, pilot)
    admit = _admission_counts(b, pilot, grid_n, first=committed is None)
    unit_v = _unit_noise(b, unit, centre_gap=abs(mu - b.clamp / 2.0))
    sd_all = _count_sd(b, unit, rest)
    held = np.zeros(len(names)) if committed is None else np.asarray(committed, dtype=float) / rest
    finer, inside = (b.relations.setdefault(key, {}) for key in ("finer", "inside"))  # shared by every plan
    exempt = _vote_favoured(b, vote)  # candidates' indices the admission rule does not ask
    cands = [_candidate(names[i], codes[i], grid_n, unit_v, factors, sigma2, reachable=sd_all, held=held[i] > 0,
                        finer=finer, inside=inside, exempt=i in exempt, admit=admit[i]) for i in range(len(names))]
    if all(c.must == "not" for c in cands):  # no node of any marginal can rise above its noise
        return _map_only(b, names, rest, "no marginal can be measured above its noise at this budget", held)
    noise = "laplace" if unit == "epsilon" else "gaussian"
    fixed = np.zeros(len(cands))  # an earlier round's share left as it is: more of it buys no node
    for _ in range(len(cands)):
        free = 1.0 - float(fixed.sum())
        if free <= 0 or all(c.must == "not" for c in cands):
            return _map_only(b, names, rest, "no marginal measured so far would lift its nodes above their noise "
                             "at the share the plan gives it", held)
        problem = StrategyProblem(factors=factors, sigma2=sigma2, candidates=cands, budget=rest * free, noise=noise,
                                  committed=np.where(fixed > 0, 0.0, held) / free)
        plan = solve_strategy(problem, gap_tol=STRATEGY_GAP)
        shares = np.maximum(np.asarray(plan.shares, dtype=float) * free, np.where(fixed > 0, 0.0, held)) + fixed
        if not (np.all(np.isfinite(shares)) and 0 < shares.sum() <= 1 + 1e-9):
            why = "no marginal can be measured above its noise at this budget" if np.all(shares == 0) else \
                f"the strategy model ended {plan.status.value}"
            return _map_only(b, names, rest, why, held)
        weak = _weakest(b, pilot, shares * rest, held * rest, fixed, admit=admit, unit=unit, exempt=exempt) \
            if committed is None or not seen else None
        if weak is None:
            break
        cands[weak] = replace(cands[weak], must="not")
        fixed[weak] = held[weak]
    return shares / max(shares.sum(), 1.0) * rest, plan.summary()


def _plan_factors(b: _Bounded, fitted: dict[str, float], seen: set[str], *, spread: float | None,
                  vote: PlaceShare | None, cycle: PlaceShare | None) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """(factors, variance components) of a plan (:func:`_plan`'s doc): every candidate factor the fit
    holds and the grids' residual, with the prior of :func:`_components`, less those the estimate can
    never identify (:func:`_unidentifiable`: their share of the prior stays split, measuring them is
    not credited), and the map-wide mean, a factor of prior variance B²/4."""
    codes = [mn.code for mn in b.cands]
    factors = {name: code for name, code in zip(b.names[1:], codes[1:]) if name in fitted}
    factors["residual"] = np.arange(codes[0].size)
    sigma2 = _components(b, factors, fitted, seen, spread=spread, vote=vote, cycle=cycle)
    for name in _unidentifiable(b, factors):
        del factors[name], sigma2[name]
    factors["mean"] = np.zeros(codes[0].size, dtype=np.int64)
    sigma2["mean"] = b.clamp * b.clamp / 4.0
    return factors, sigma2


def _unidentifiable(b: _Bounded, factors: dict[str, np.ndarray]) -> list[str]:
    """The plan's factors that the estimate can never identify: a marginal of fewer than ``MIN_LEVELS``
    nodes (:func:`dpopt.hierarchy.node_means.identified`, the one rule of the estimate and of the plan;
    on one day of data the regions over the day, r3 × 1 d, hold four). Their variance is real and keeps
    its share of the prior's split (:func:`_components`), but the estimate fits no component for
    them, so a plan that credited measuring them bought precision no answer would carry (models/
    engine.md §5, "The plan credits only what the estimate can identify"). Their nodes stay
    candidates: they inform the mean and the factors constant on them. Public geometry."""
    return [name for name, mn in zip(b.names, b.cands) if name in factors and mn.n_nodes < MIN_LEVELS]


def _weakest(b: _Bounded, phase: _Phase, budgets: np.ndarray, held: np.ndarray, fixed: np.ndarray, *,
             unit: str, grid_n: np.ndarray | None = None, admit: list[np.ndarray] | None = None,
             exempt: frozenset[int] = frozenset()) -> int | None:
    """The plan's consistency check (models/engine.md §5; :func:`_plan` asks it of the first plan, and
    of a re-plan where the first round saw no factor): of the marginals to which the plan gives more
    than they hold, the one with the fewest nodes that would pass their count threshold at its planned
    budget, if fewer than ``MIN_LEVELS`` do — read off
    the earlier rounds' counts for a marginal measured there (:func:`_nodes_passing`), off its node
    counts in ``admit`` otherwise (:func:`_admission_counts`; without ``admit``, the even spread of the
    predicted grid counts ``grid_n``; :func:`_predicted_passing`). Measured there it could enter
    the estimate only as its pool, whose mean spends the noise of all its nodes (a map-wide mean from
    24 hour-of-day nodes is 24 times noisier in variance than from the map's one node at the same
    budget), while the plan credits it with its factor. A marginal of fewer than ``MIN_LEVELS`` nodes
    (the map) has no factor the estimate could see and serves the map-wide mean as it is: not asked.
    None when every such marginal passes."""
    worst, fewest = None, MIN_LEVELS
    for i in np.flatnonzero((fixed == 0) & (budgets > held * (1 + 1e-9))):
        mn = b.cands[int(i)]
        if mn.n_nodes < MIN_LEVELS or (held[i] == 0 and int(i) in exempt):
            continue
        if held[i] > 0:
            n = _nodes_passing(b, phase, int(i), float(budgets[i] - held[i]))
        else:
            node_n = np.bincount(mn.code, weights=grid_n, minlength=mn.n_nodes) if admit is None else admit[int(i)]
            n = _predicted_passing(node_n, _count_sd(b, unit, float(budgets[i])))
        if n < fewest:
            worst, fewest = int(i), n
    return worst


def _vote_favoured(b: _Bounded, vote: PlaceShare | None) -> frozenset[int]:
    """The candidates' indices of the places over the whole period (:func:`_main_kinds` "place") where
    the users' vote says the place sets the value beyond the vote's noise, p̂ − ``BETWEEN_SDS``·sd(p̂) > ½
    (the other DP lower ends' one-sided margin); else none. The plan's admission rule (:func:`_candidate`,
    :func:`_weakest` for a marginal not yet measured) does not leave these out on its even spread of
    the predicted kept count over the listed grids, which holds every busy node far below its count
    where the public list is much larger than the data (models/engine.md §5, "The vote's side"): a
    list of 217 cells × 72 hours for data in 25 cells, the place setting the value, was answered by the
    map-wide mean (median error 9.7 on a range of 100, `place` 0.72); with the rule 0.72–0.84 in four
    seeds of four. Once measured, a marginal's nodes are judged by their measured counts as before.
    The time's side is not exempt: measured, it moved the day-set at ε = 10 in four seeds of four,
    median 1.03 → 1.19. Post-processing of the DP vote and public geometry."""
    if vote is None or not (math.isfinite(vote.value) and math.isfinite(vote.sd)):
        return frozenset()
    if vote.value - BETWEEN_SDS * vote.sd <= 0.5:
        return frozenset()
    kinds = _main_kinds(b)
    return frozenset(i for i, name in enumerate(b.names) if kinds.get(name) == "place")


def _main_kinds(b: _Bounded) -> dict[str, str]:
    """Each candidate that is a main effect: "place" (a place finer than the map over the whole
    period), or the map over a time level finer than the period, "cycle" where that level is a
    window of the day recurring daily (hour-of-day: the time's vote's side of the hours within a
    day) and "calendar" otherwise (the slot, the day, and the day of the week, whose windows are
    whole days: the vote's side of the days at a fixed hour); the map itself and the interactions
    are none (public: the lattice's geometry; models/engine.md §5)."""
    top = min(mn.marginal.h3_resolution for mn in b.cands)
    out = {}
    for name, mn in zip(b.names, b.cands):
        m = mn.marginal
        if m.slot_ns == 0 and m.h3_resolution != top:
            out[name] = "place"
        elif m.h3_resolution == top and m.slot_ns != 0:
            out[name] = "cycle" if m.cycle_ns and m.slot_ns < DAY_NS else "calendar"
    return out


def _components(b: _Bounded, factors: dict[str, np.ndarray], fitted: dict[str, float], seen: set[str], *,
                spread: float | None, vote: PlaceShare | None, cycle: PlaceShare | None) -> dict[str, float]:
    """The plan's variance component of each factor (:func:`_plan`'s doc): REML's where the fit saw
    it, else what the seen factors leave of the total — ``spread``, the DP upper end of the grids'
    spread (B²/4 without one) — split evenly; the main effects re-split by the votes, the
    interactions under :func:`_heredity`."""
    total = b.clamp * b.clamp / 4.0 if spread is None else spread
    left = max(total - sum(fitted[f] for f in factors if f in seen), total / (len(factors) + 1))
    prior = left / (sum(f not in seen for f in factors) + 1)  # what the seen factors leave, split evenly
    split = main_effect_split({f: fitted[f] if f in seen else prior for f in factors}, _main_kinds(b), vote, cycle)
    return _heredity(b, split, seen)


def _heredity(b: _Bounded, sigma2: dict[str, float], seen: set[str]) -> dict[str, float]:
    """The prior's interactions under strong heredity (models/engine.md §5): the component of an
    interaction of a place level finer than the map and a time level finer than the period that the
    fit has not seen is at most the smaller of its two parents' — the same place over the whole period
    and the map over the same time — as the votes split them (the hierarchical ordering and heredity
    principles of factorial designs: Hamada & Wu 1992, Chipman 1996). Without votes every unseen
    factor has the same prior and nothing changes; with them an interaction no longer outweighs the
    main effect the users voted against (on a data set where the day of the week sets the value, the
    first round bought place × day interactions at the prior of the day itself, and the estimate saw
    neither). Public geometry and DP outputs only."""
    top = min(mn.marginal.h3_resolution for mn in b.cands)
    by_level = {(mn.marginal.h3_resolution, mn.marginal.slot_ns, mn.marginal.cycle_ns): name
                for name, mn in zip(b.names, b.cands)}
    out = dict(sigma2)
    for name, mn in zip(b.names[1:], b.cands[1:]):
        m = mn.marginal
        if name in seen or name not in out or m.h3_resolution == top or m.slot_ns == 0:
            continue
        place = by_level.get((m.h3_resolution, 0, 0))
        time = by_level.get((top, m.slot_ns, m.cycle_ns))
        if place in sigma2 and time in sigma2:
            out[name] = min(out[name], sigma2[place], sigma2[time])
    return out


def _cycle_pair(b: _Bounded) -> tuple[int, int] | None:
    """(recurring, contiguous): the finest place's candidates over a recurring window of cycle C
    (hour-of-day) and over contiguous slots of length C (the day), which the time's vote groups a
    user's grids by (:func:`.place_time_vote.cycle_votes`); None where the lattice lacks either, or
    its main effects lack either kind (nothing to split). Public: the lattice's geometry."""
    kinds = set(_main_kinds(b).values())
    if b.windows or b.pair_grid is None or not {"cycle", "calendar"} <= kinds:
        return None
    fin = b.cands[0].marginal.h3_resolution
    for i, mn in enumerate(b.cands):
        m = mn.marginal
        if m.h3_resolution != fin or not m.cycle_ns:
            continue
        for j, other in enumerate(b.cands):
            o = other.marginal
            if o.h3_resolution == fin and o.cycle_ns == 0 and o.slot_ns == m.cycle_ns:
                return i, j
    return None


def _cycle_label(b: _Bounded, pair: tuple[int, int]) -> str:
    """The time's vote named by its two time levels ("hour-of-day or 1 d"), for the budget pieces."""
    return " or ".join(b.names[i].split(" × ", 1)[1] for i in pair)


def _map_only(b: _Bounded, names: list[str], rest: float, why: str, held: np.ndarray | None = None
              ) -> tuple[np.ndarray, str]:
    """The main budget not ``held`` (shares an earlier round committed) on the marginal with the fewest
    nodes (the map): what a release can say where the strategy has no plan — the map-wide means,
    measured as well as the budget allows."""
    held = np.zeros(len(b.cands)) if held is None else np.asarray(held, dtype=float)
    shares = held * rest
    shares[b.smallest] += rest * (1.0 - float(held.sum()))
    others = np.delete(held, b.smallest)
    return shares, (f"{'the rest' if others.any() else 'all'} to {names[b.smallest]} ({why}: the release answers "
                    "with the map-wide means)")


def _count_sd(b: _Bounded, unit: str, budget: float) -> float:
    """The noise sd of a node count measured with all of ``budget`` on one marginal (split as
    :func:`_measure` splits it): √2·T/ε_count (Laplace) or T/√(2ρ_count) (Gaussian)."""
    sp = split_budget(float(budget), bound=b.clamp, unit=unit, weight_mean=1.0, weight_variance=0.0)
    return math.sqrt(2.0) * b.cap / sp.count if unit == "epsilon" else b.cap / math.sqrt(2.0 * sp.count)


def _candidate(name: str, code: np.ndarray, grid_n: np.ndarray, unit_v: float, factors: dict[str, np.ndarray],
               sigma2: dict[str, float], *, reachable: float, finer: dict[tuple[str, str], bool],
               inside: dict[tuple[str, str], np.ndarray] | None = None, held: bool = False,
               exempt: bool = False, admit: np.ndarray | None = None) -> Candidate:
    """One marginal as a strategy candidate (models/strategy.md §3): its nodes' predicted noise at
    unit budget and, for every factor f constant on its nodes (informed), the variance r of what a
    node's mean holds besides f's effect and is not estimated with it: the factors varying inside the
    node, each divided by its number of levels there, and the factors constant on the node that vary
    inside f's levels (finer than f; ``finer`` keeps each pair's answer for the other candidates and
    ``inside`` each (candidate, factor)'s levels per node for the next plan). Its nodes' noise reads
    ``grid_n`` (:func:`_predicted_counts`), whether enough could pass its node counts ``admit``
    (:func:`_admission_counts`, :func:`_admitted`; default the even spread of ``grid_n``)."""
    n_nodes = int(code.max()) + 1
    node_n = np.bincount(code, weights=grid_n, minlength=n_nodes)
    v = unit_v / np.maximum(node_n, 0.5) ** 2
    constant, r_vary = [], np.zeros(n_nodes)
    inside = {} if inside is None else inside
    for f, fc in factors.items():
        if (name, f) not in inside:
            inside[(name, f)] = _levels_inside(code, fc, n_nodes)
        levels = inside[(name, f)]
        if levels.max() == 1:
            constant.append(f)
        else:
            r_vary = r_vary + sigma2[f] / np.maximum(levels, 1)
    informs = {}
    for f in constant:
        for g in constant:
            if g != f and (g, f) not in finer:
                finer[(g, f)] = _varies_within(factors[g], factors[f])
        informs[f] = r_vary + sum(sigma2[g] for g in constant if g != f and finer[(g, f)])
    # a marginal too few of whose nodes would pass the count threshold even with the whole budget is
    # left out: its nodes could enter the estimate only by their noise (node_means.count_threshold)
    useless = not exempt and not _admitted(node_n if admit is None else admit, reachable)
    must = "measure" if held else ("not" if useless else None)  # an earlier round's marginal is refined, not dropped
    return Candidate(marginal=name, option="cap T", node=code, v=v, informs=informs, must=must)


def _levels_inside(coarse: np.ndarray, fine: np.ndarray, n_coarse: int | None = None) -> np.ndarray:
    """The number of distinct levels of ``fine`` inside each level of ``coarse`` (non-negative int
    codes per grid), from one sort of the pairs' combined int64 keys."""
    coarse = np.asarray(coarse, dtype=np.int64)
    width = int(np.max(fine)) + 1 if np.size(fine) else 1
    pairs = np.unique(coarse * width + np.asarray(fine, dtype=np.int64))
    return np.bincount(pairs // width, minlength=0 if n_coarse is None else n_coarse)


def _varies_within(fine: np.ndarray, coarse: np.ndarray) -> bool:
    """Does factor ``fine`` take several levels inside some level of ``coarse``?"""
    return bool(_levels_inside(coarse, fine).max() > 1)
