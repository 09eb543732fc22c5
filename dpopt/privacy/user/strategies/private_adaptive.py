"""The ``user`` model's multi-resolution release **without** a partition list (models/
hierarchy.md §15): private selection of nodes at a few levels, then one measurement per released
node and the tree BLUP. The named strategy without a list (``dpopt release --privacy user
--epsilon-total E --delta D --strategy adaptive``, ``UserOptions(strategy="adaptive")``; the default there is
the engine, :mod:`dpopt.privacy.user.private_list`): :func:`measure_private_adaptive`
maps the front door's options onto :func:`measure_private_multires`.

**What is public** (the privacy model, stated in --help, README and summary.json): the grid
definition (H3 resolution, slot), U, the options, the hierarchy of levels and the hash order of the
shared priority (functions of node keys only). Nothing about occupancy is public: which nodes exist
in the data, how many users or records they hold, are read only through the DP selection and the
noisy measurements.

Steps and budget (pure ε pieces, δ from the selection only):

0. the clamp B ≤ U: ``clamp_fraction``·ε (default 0.05) buys the place release's
   histogram of users' clamp votes (:func:`dpopt.privacy.user.place_bounds.measure_clamp_histogram`:
   every user in one bin, ℓ1 = 1; all of a user's records vote, as no list restricts them), and B is
   its post-processing (:func:`~dpopt.privacy.user.place_bounds.choose_clamp`). Values are measured on
   [0, B]: the centred sum's sensitivity is B/2 instead of U/2 and the count's noise enters a mean
   multiplied by |mean − B/2| instead of |mean − U/2| (models/hierarchy.md §14.2); the means are of
   values clamped at B;
1. selection (:mod:`dpopt.privacy.user.select_levels`): at the finest level a user keeps one grid (the
   :data:`FINEST_RULE`): the grid where it dwells (≥ 10× its mean records per grid, e.g. an
   aircraft at its gate) if it has one, else its first in the shared public order — a rule of its
   own records and public keys, so sensitivity k = 1 as for the shared order alone; at the coarse
   levels its first k_ℓ in the shared order. Level ℓ spends
   (share_ℓ·ε_sel, δ/L) — ε_sel =
   ``selection_fraction``·ε, shares :data:`SELECTION_SHARES` for the default levels (else equal), the
   finest level's share moved to the map (the coarsest level below the root; for explicit levels
   the coarsest) by the public :func:`selection_plan` when its threshold is out of reach; each
   level is (ε_ℓ, δ_ℓ)-DP, so (≤ ε_sel, δ) in total;
2. measurement of the released nodes (a DP output, public from here on): at each level with
   released nodes a user keeps a uniformly random ≤ k of its released nodes and ≤ c records in
   each (:func:`dpopt.privacy.user.levels.bounded_level`: a rule of its own records and i.i.d. keys),
   so the noisy count and centred sum have ℓ1 sensitivity k·c·(1, H_Y) (models/hierarchy.md §5);
   count : sum = 0.4 : 0.6 of the rest, equal shares per measured level (chosen after the
   selection: adaptive composition of DP outputs, same total);
3. estimation (the caller's, layer 3: :func:`dpopt.estimation.hierarchical.estimate_hierarchical`,
   post-processing): the released nodes of all levels and their public ancestors between the
   levels form a forest; no sum constraint between levels (each measured with its own bounding).

Accounting: ε_total = Σ pieces (clamp, selection per level, count and sum per measured level) (each rounded down to a multiple of 2^-30 by the exact samplers),
δ_total = δ. Every finest grid of the data is answered by the smallest released node containing it
(the reader's rule, tests/benchmarks/scoring.py); grids under no released node stay unanswered.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from ...._validation import DpoptInputError, check_bound, check_epsilon
from ....hierarchy.tree import DAY_NS, Level, cell_parents
from ....accounting import compose_spend
from ....measurements import Measurements, NoiseLaw, Statistic, UserInfo
from ....records.aggregate import Aggregate
from ..bounding import LatticeValues, lattice_values
from ....noise.sources import SeededSource
from ....noise.mechanism import NoiseMechanism
from ..levels import _check_bounds, _check_samples_limit, _sampler, bounded_level, simulation_keys, used_budget
from ..place_bounds import choose_clamp, clamp_histogram_fields, measure_clamp_histogram, user_statistics
from ....records.grid import slot_text
from ..select_levels import KeepRule, LevelSelection, level_nodes, select_level
from ..sensitivity import sensitivities
from ...options import Budget, NoiseOptions
from ..options import UserOptions

__all__ = ["measure_private_multires", "measure_private_adaptive", "private_levels", "selection_plan", "FINEST_RULE",
           "DEFAULT_BOUNDS", "SELECTION_FRACTION", "CLAMP_FRACTION", "PUBLIC_FACTS", "PERIOD_NS"]

#: public (k, c) of the value measurement when the front door's ``bounds`` is an automatic rule
DEFAULT_BOUNDS = (4, 8)
#: share of ε spent on the selection (the rest measures the released nodes)
SELECTION_FRACTION = 0.6
#: share of ε spent on the clamp B's histogram (taken from the measurement's part; the place
#: release's ε_B at its default bounds fraction: 0.15/3)
CLAMP_FRACTION = 0.05
#: the simulation stream of the clamp's integer source (a real release draws it from its one source)
_CLAMP_STREAM = 2
#: what the private multi-resolution release treats as public (summary.json ``public``)
PUBLIC_FACTS = ("the grid definition (H3 resolution, slot), U, the options, the levels of the hierarchy and "
                "the hash order of the shared priority; nothing about occupancy (which grids hold users or "
                "records) is public")


#: the public "period" of the coarse levels: 3640 days (10 × 364), epoch-aligned, UTC, so that one
#: slot holds a data set of a few years unless it crosses a boundary (the data's own span is not public)
PERIOD_NS = 3640 * DAY_NS
#: the default coarse levels (resolutions below the grid's, slot, k; None: the root, H3 resolution 0)
#: and the selection shares of (finest, coarse…): the place chain of §14 under selection, every H3
#: cell of the grid's resolution over the period (k = 8), the map (R−4 over the period, k = 1: one
#: node per user, the lowest threshold), then the root (resolution 0 over the period, k = 1), so
#: that a grid whose map node was not selected is still answered (aircraft A: 64 % of its scored
#: grids had no released node). Chosen on the Austin day and the full Austin data (774 days) against
#: the levels (R−3, 1 d), (R−3, 7 d), (R−4, 364 d), and on the aircraft sets for the root
#: (models/hierarchy.md §15)
COARSE_LEVELS = ((0, PERIOD_NS, 8), (4, PERIOD_NS, 1), (None, PERIOD_NS, 1))
#: the map's resolution offset in :data:`COARSE_LEVELS` (R − 4): it receives a dropped finest share
MAP_OFFSET = 4
#: which finest grid a user keeps for the selection (:class:`~dpopt.privacy.user.select_levels.KeepRule`):
#: one, the grid where it dwells (≥ 10× its mean records per grid: an aircraft at its gate) if it
#: has one, else its first in the shared public order (models/hierarchy.md §15)
FINEST_RULE = KeepRule(1, own_top=1, dwell=10.0)
SELECTION_SHARES = (0.8, 0.1, 0.05, 0.05)


def private_levels(agg: Aggregate, finest_k: int = FINEST_RULE.k) -> tuple[tuple[tuple[Level, int], ...],
                                                                     tuple[float, ...], int]:
    """Default (level, k) of the selection, their budget shares and the level that receives the
    finest level's share when :func:`selection_plan` drops it: the finest grid (k = ``finest_k``), then
    :data:`COARSE_LEVELS` ((R, period, k = 8), (R−4, period, k = 1), the root (0, period, k = 1)); a
    coarse level that is not coarser than the previous one (a slot that is a multiple of the
    previous one, longer or at a coarser resolution) or whose resolution would be negative is
    skipped and the shares renormalised. The receiver is the map (R − 4); where there is none
    (R < 4) the coarsest level, the root, which then plays the map."""
    R, s = int(agg.h3_resolution), int(agg.slot_ns)
    out, shares, prev, prev_res = [(Level(R, s), int(finest_k))], [SELECTION_SHARES[0]], s, R
    receiver = None
    for (dr, sl, k), sh in zip(COARSE_LEVELS, SELECTION_SHARES[1:]):
        res = 0 if dr is None else R - dr
        if res >= 0 and sl % prev == 0 and (sl > prev or res < prev_res):
            out.append((Level(res, sl), k))
            shares.append(sh)
            prev, prev_res = sl, res
            if dr == MAP_OFFSET:
                receiver = len(out) - 1
    tot = sum(shares)
    return tuple(out), tuple(x / tot for x in shares), len(out) - 1 if receiver is None else receiver


def level_delta(delta: float, levels: int) -> float:
    """Each level's δ_ℓ = δ/L, rounded down until L of them add up (in floating point, as the
    accounting sums them) to at most δ: one ulp over δ for about 8 % of δ at L = 3 otherwise."""
    d = float(delta) / levels
    while sum([d] * levels) > float(delta):
        d = math.nextafter(d, 0.0)
    return d


#: the finest level is selected only if its threshold needs at most this many users (else its
#: share goes to the coarsest level): a public rule of (ε, δ, k), never of the data
MAX_FINEST_THRESHOLD = 20.0


def selection_plan(levels: tuple[tuple[Level, int], ...], epsilon: float, delta: float, shares: np.ndarray,
                   mech: NoiseMechanism, receiver: int | None = None) -> np.ndarray:
    """Budget share per level (public): ``shares``, except that a finest level whose threshold at
    its share exceeds :data:`MAX_FINEST_THRESHOLD` users gives its share to level ``receiver``
    (default the coarsest; :func:`private_levels` names the map, not the root)."""
    from ..partitions import selection_threshold

    sh = np.array(shares, dtype=float)
    if len(levels) > 1:
        t0 = selection_threshold(levels[0][1], epsilon * sh[0], level_delta(delta, len(levels)), mech).threshold
        if t0 > MAX_FINEST_THRESHOLD:
            to = len(levels) - 1 if receiver is None else int(receiver)
            if not 0 < to < len(levels):
                raise DpoptInputError(f"`receiver` must be a coarse level in [1, {len(levels) - 1}]; got {receiver!r}")
            sh[to] += sh[0]
            sh[0] = 0.0
    return sh


def _forest(sel: list[LevelSelection]) -> pd.DataFrame:
    """Node table: the released nodes of every level and their public ancestors at the coarser
    selected levels (placeholders, unmeasured); parents one level up."""
    rows = []
    keys = [set(zip(s.cells.tolist(), s.slots.tolist())) for s in sel]
    for i in range(1, len(sel)):  # ancestors of every node below, at level i
        lv = sel[i].level
        below = [(c, t) for (c, t) in keys[i - 1]]
        if below:
            cc = cell_parents(np.array([b[0] for b in below], dtype=np.int64), lv.h3_resolution)
            tt = (np.array([b[1] for b in below], dtype=np.int64) // lv.slot_ns) * lv.slot_ns
            keys[i] |= set(zip(cc.tolist(), tt.tolist()))
    index = {}
    for i, s in enumerate(sel):
        for c, t in sorted(keys[i]):
            index[(i, c, t)] = len(rows)
            rows.append({"cell": c, "h3_resolution": s.level.h3_resolution, "slot": t, "slot_ns": s.level.slot_ns,
                         "level": i, "released": (c, t) in set(zip(s.cells.tolist(), s.slots.tolist()))})
    nodes = pd.DataFrame(rows, columns=["cell", "h3_resolution", "slot", "slot_ns", "level", "released"]).astype(
        {"cell": np.int64, "h3_resolution": np.int64, "slot": np.int64, "slot_ns": np.int64, "level": np.int64,
         "released": bool})
    parent = np.full(len(nodes), -1, dtype=np.int64)
    for j, r in nodes.iterrows():
        i = int(r["level"])
        if i + 1 < len(sel):
            up = sel[i + 1].level
            pc = int(cell_parents(np.array([r["cell"]], dtype=np.int64), up.h3_resolution)[0])
            parent[j] = index[(i + 1, pc, (int(r["slot"]) // up.slot_ns) * up.slot_ns)]
    return nodes.assign(parent=parent)


def measure_private_multires(agg: Aggregate, *, epsilon: float, delta: float, bound: float | None = None,
                             levels: tuple[tuple[Level, int], ...] | None = None,
                             bounds: tuple[int, int] = DEFAULT_BOUNDS, selection_fraction: float = SELECTION_FRACTION,
                             selection_shares: tuple[float, ...] | None = None, noise: NoiseOptions = NoiseOptions(),
                             clamp_fraction: float = CLAMP_FRACTION, finest: KeepRule | None = None) -> Measurements:
    """Measurements of the private-selection multi-resolution release (module doc): the forest of
    released nodes (``nodes['released']``) and their placeholders, noisy count and centred sum of
    the released ones. ``levels``: (Level, k) pairs from the finest up (default
    :func:`private_levels`); ``finest`` which finest grids a user keeps for the selection (a
    :class:`~dpopt.privacy.user.select_levels.KeepRule`; default :data:`FINEST_RULE`, or the shared order
    with the k of explicit ``levels``, whose k it must then repeat);
    ``bounds`` the (k, c) of the value measurement (public); ``noise`` the sampler, seed and lattice;
    ``clamp_fraction`` the share of ε for the clamp B (0: values on [0, U], no clamp). Estimate with
    ``estimate_hierarchical`` (post-processing, layer 3) and publish the released rows."""
    U = check_bound(agg.bound if bound is None else bound)
    eps = check_epsilon(epsilon)
    if not (0.0 < float(delta) < 1.0):
        raise DpoptInputError(f"`delta` must be in (0, 1) for private selection; got {delta!r}")
    if not (0.0 < float(selection_fraction) < 1.0):
        raise DpoptInputError(f"`selection_fraction` must be in (0, 1); got {selection_fraction!r}")
    if not (0.0 <= float(clamp_fraction) < 1.0 - float(selection_fraction)):
        raise DpoptInputError(f"`clamp_fraction` must be in [0, 1 - selection_fraction = "
                              f"{1.0 - float(selection_fraction):g}); got {clamp_fraction!r}")
    bounds = _check_bounds(bounds)
    _check_samples_limit(agg, [bounds[1]])  # refuse on the public limit, never on the data
    lv, default_shares, receiver, finest = _levels_and_rule(agg, levels, finest)
    if not isinstance(noise, NoiseOptions):
        raise DpoptInputError(f"`noise` must be a NoiseOptions (dpopt.privacy.options); got {noise!r}")
    seed = noise.seed
    mech = _sampler("laplace", noise.noise, seed)
    pieces: dict[str, float] = {}
    shares = np.asarray(default_shares if selection_shares is None else selection_shares, dtype=float)
    if shares.shape != (len(lv),) or np.any(shares < 0) or shares.sum() > 1.0 + 1e-12:
        raise DpoptInputError(f"`selection_shares` must be {len(lv)} shares >= 0 summing to <= 1; got "
                              f"{selection_shares!r}")
    e_sel, d_sel = eps * selection_fraction, level_delta(float(delta), len(lv))
    shares = selection_plan(lv, e_sel, float(delta), shares, mech, receiver)
    eps_values = eps * (1.0 - selection_fraction - float(clamp_fraction))
    smallest = min([eps * float(clamp_fraction)] * (clamp_fraction > 0) + [e_sel * x for x in shares if x > 0]
                   + [eps_values * 0.4 / len(lv)])
    if mech.real_release and not smallest >= 2.0**-30:  # public: refused before the first draw
        raise DpoptInputError(f"`epsilon` = {epsilon!r} is too small for the private multi-resolution release: its "
                              f"smallest budget piece would be {smallest:.3g} < 2^-30, below the exact sampler's "
                              "resolution; raise epsilon")
    B, clamp_info = _clamp(agg, U, eps * float(clamp_fraction), mech, seed, pieces)
    sel = []
    for i, (level, k) in enumerate(lv):
        if shares[i] <= 0:  # not selected: an empty level (public)
            sel.append(LevelSelection(level, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                                      k, 0.0, 0.0, float("inf"), float("inf")))
            continue
        s = select_level(agg, level, keep=finest if i == 0 else k, epsilon=e_sel * shares[i], delta=d_sel,
                         mechanism=mech)
        pieces[f"level{i}_selection"] = used_budget(s.epsilon, mech)
        sel.append(s)
    lat = lattice_values(agg, B, granularity_bits=noise.bits_for(U))
    return _measure(agg, sel, _forest(sel), bound=B, bounds=bounds, eps_values=eps_values, mech=mech, seed=seed,
                    pieces=pieces, lat=lat, extra_info=clamp_info)


def _levels_and_rule(agg: Aggregate, levels: Any, finest: Any) -> tuple[tuple, np.ndarray, int | None, KeepRule]:
    """(levels, their default selection shares, the receiver of a dropped finest share, the finest
    level's keep rule): :func:`private_levels` with ``finest`` (default :data:`FINEST_RULE`), or
    explicit ``levels`` with equal shares, the coarsest receiving, and the shared order at
    ``levels[0]``'s k unless ``finest`` names that k (public: refused before any noise)."""
    if finest is not None and not isinstance(finest, KeepRule):
        raise DpoptInputError(f"`finest` must be a KeepRule (dpopt.privacy.user.select_levels) or None; got {finest!r}")
    if levels is None:
        finest = FINEST_RULE if finest is None else finest
        lv, shares, receiver = private_levels(agg, finest.k)
    else:
        lv, receiver = tuple(levels), None
        if not lv:
            raise DpoptInputError("`levels` must hold at least the finest (Level, k) pair; got none")
        shares = np.full(len(lv), 1.0 / len(lv))
        finest = KeepRule(lv[0][1]) if finest is None else finest
        if finest.k != lv[0][1]:
            raise DpoptInputError(f"`finest.k` must be the k of `levels[0]` ({lv[0][1]}); got {finest.k!r}")
    if any(getattr(level, "profile", False) for level, _ in lv):
        raise DpoptInputError("`levels` of private selection must be contiguous slots: recurring windows (hour-of-day "
                              "profiles) go with a partition list (UserOptions(partitions=..., strategy='adaptive', profile=...))")
    return lv, np.asarray(shares, dtype=float), receiver, finest


def _clamp(agg: Aggregate, U: float, eps_clamp: float, mech: NoiseMechanism, seed: int | None, pieces: dict
           ) -> tuple[float, dict]:
    """Step 0 (module doc): B and what the release publishes about it; (U, {}) when ``eps_clamp`` = 0.
    The first draw of the release, so an ε_B under the exact sampler's 2^-30 is refused before any."""
    if eps_clamp <= 0:
        return U, {}
    src = getattr(mech, "source", None)
    if src is None:  # a simulation: its own stream, apart from the noise's and the tie keys'
        src = SeededSource(int(np.random.default_rng(None if seed is None else [int(seed), _CLAMP_STREAM])
                               .integers(0, 2**62)))
    _, own_q = user_statistics(agg, np.ones(agg.n_pairs, dtype=bool), U)  # every record votes: no list
    votes = measure_clamp_histogram(own_q, eps_clamp, src)
    pieces["clamp"] = used_budget(eps_clamp, mech)
    B = choose_clamp(votes, eps_clamp, U)
    return B, {"clamp": B, "declared_bound": U, "sumsq_measured": False,
               "clamp_histogram": clamp_histogram_fields(votes, U)}


def _measure(agg: Aggregate, sel: list[LevelSelection], nodes: pd.DataFrame, *, bound: float, bounds: tuple[int, int],
             eps_values: float, mech: NoiseMechanism, seed: int | None, pieces: dict[str, float],
             lat: LatticeValues, extra_info: dict[str, Any]) -> Measurements:
    """Noisy count and centred sum of every released node, level by level (module doc, step 2):
    ``sel`` the levels' selections, ``nodes`` their forest (:func:`_forest`), values on [0, ``bound``]
    (the clamp B, or U) in the lattice ``lat``, the public ``bounds`` (k, c), ``eps_values`` the ε
    of the measurement, ``mech`` the sampler (``seed``: a simulation's tie-key stream). The pieces
    spent are added to ``pieces`` in place; ``extra_info`` (the clamp's) goes into the info."""
    U = bound
    k, c = bounds
    src = getattr(mech, "source", None)
    rng = simulation_keys(seed) if src is None else src
    n = len(nodes)
    val = {s: np.full(n, np.nan) for s in ("count", "sum", "sumsq")}
    scale = {s: np.zeros(n) for s in ("count", "sum", "sumsq")}
    measured = [i for i, s in enumerate(sel) if s.cells.size]
    # each level bounded on its own: a user changes ≤ k of its nodes by ≤ c records each
    sens = sensitivities(k, c, U, lam=lat.lam)
    for i in measured:
        rows = np.flatnonzero((nodes["level"].to_numpy() == i) & nodes["released"].to_numpy())
        grid_node, cells, slots = level_nodes(agg, sel[i].level)
        pos = pd.MultiIndex.from_arrays([nodes["cell"].to_numpy()[rows], nodes["slot"].to_numpy()[rows]])
        local = pos.get_indexer(pd.MultiIndex.from_arrays([cells, slots]))  # level node -> released row or -1
        R, Y, _ = bounded_level(agg, local[grid_node[agg.pair_grid]], rows.size, k, c, lat, rng)
        for stat, share, l1, l2, unit in (("count", 0.4, sens.count_l1, sens.count_l2, 1.0),
                                          ("sum", 0.6, sens.sum_l1_units, sens.sum_l2_units, lat.lam)):
            b = eps_values * share / len(measured)
            val[stat][rows] = unit * np.asarray(mech.integer(np.asarray(R if stat == "count" else Y), l1=l1, l2=l2,
                                                            budget=b), dtype=float)
            scale[stat][rows] = unit * mech.scale(l1=l1, l2=l2, budget=b)
            pieces[f"level{i}_{stat}"] = used_budget(b, mech)
    fam = ("discrete_" if mech.real_release else "") + "laplace"
    stats = {s: Statistic(s, val[s], NoiseLaw(fam, scale[s], lattice=(1.0 if s == "count" else lat.lam)
                                              if mech.real_release else 0.0)) for s in val}
    delta = float(sum(s.delta for s in sel))
    lev0 = np.flatnonzero(nodes["level"].to_numpy() == 0)
    finest = pd.DataFrame({"cell": nodes["cell"].to_numpy()[lev0], "slot": nodes["slot"].to_numpy()[lev0], "node": lev0})
    info = UserInfo(k=k, c=c, levels=[(s.level.h3_resolution, s.level.slot_ns, s.level.cycle_ns) for s in sel],
                    selection=[{"k": s.k, "threshold": s.threshold, "released": int(s.cells.size)} for s in sel],
                    linked_levels=[False] * len(sel), sumsq_centre=U * U / 8.0, lattice=lat.lam,
                    noise=mech.label, h3_resolution=agg.h3_resolution, slot_ns=agg.slot_ns, **extra_info)
    return Measurements(privacy_model="user", bound=U, nodes=nodes.drop(columns=["released"]).assign(
        released=nodes["released"]), statistics=stats, spend=compose_spend(pieces, unit="epsilon", delta=delta),
        centre=U / 2.0, finest=finest, info=info)


def measure_private_adaptive(contributions: Aggregate, budget: Budget, options: UserOptions, *,
                             bound: float | None = None, noise: NoiseOptions = NoiseOptions()) -> Measurements:
    """The front door's private multi-resolution release (module doc): ``budget`` a Laplace
    :class:`~dpopt.privacy.options.Budget` with ε and δ, ``options`` a
    :class:`~dpopt.privacy.user.UserOptions` without partitions; (k, c) its public pair or
    :data:`DEFAULT_BOUNDS` (an automatic rule has nothing to choose from here: the levels' k are
    public and the measurement's (k, c) too), ``selection_fraction`` its share of ε. ``info`` adds
    what the writer publishes: the bounds rule, the partitions and the public facts in words."""
    fixed = options.fixed_bounds  # the rules and the shared priority are refused by UserOptions itself
    total, delta, _, _ = options.check_budget(budget)
    m = measure_private_multires(contributions, epsilon=total, delta=delta, bound=bound,
                                 bounds=fixed or DEFAULT_BOUNDS, selection_fraction=options.selection_share, noise=noise)
    info = replace(m.info, bounds_rule="fixed" if fixed else "public default", split_rule="count 0.4, sum 0.6",
                   shape="adaptive", mechanism="laplace", seeded=noise.seed is not None,
                   partitions="private selection (shared public hash order; at the finest level the grid where a "
                              "user dwells, if any; Laplace thresholding per level)",
                   slot=slot_text(contributions.slot_ns),
                   delta_selection=float(m.spend.delta), public=PUBLIC_FACTS,
                   epsilon_budget=total)
    return Measurements(privacy_model="user", bound=m.bound, nodes=m.nodes, statistics=m.statistics, spend=m.spend,
                        centre=m.centre, finest=m.finest, info=info)
