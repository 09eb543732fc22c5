"""Measure every level of the public hierarchy under the ``user`` model (models/hierarchy.md §3–4).

From the **bounded** contributions (:mod:`.bounding`: ≤ k listed finest grids per user, ≤ c records
per kept (user, grid), lattice terms) every finest grid has exact integer sums R_g, Y_g, Z_g; a
node's sums are the exact sums over the finest grids below it. Every level l of the tree
(:mod:`dpopt.hierarchy.tree`) is one query on the data: the noisy vectors ñ_l, Ỹ_l, Z̃_l over all of
the level's nodes, with the mechanisms of :mod:`.mechanism`.

**Sensitivity of level l** (add/remove one user; proof in :mod:`.sensitivity` and models/hierarchy.md
§4): :func:`.sensitivity.sensitivities` with the level's capacities a_i (the number of listed finest
grids under node i, public): ℓ1 = k·c·(1, H_Y, H_Z) at every level and ℓ2² = c²·(1, H_Y², H_Z²)·M_l,
M_l = max Σ m_i² over {Σ m_i ≤ k, 0 ≤ m_i ≤ a_i}: M_0 = min(k, G) at the finest level, M_l = k² once
one node holds ≥ k finest grids. A level bounded on its own by (k_l, c_l) (models/hierarchy.md §5)
has capacities 1 (a user changes ≤ k_l nodes by ≤ c_l records each); a record cap T_l is (1, T_l).

**Two phases** (models/hierarchy.md §3, §6): phase 1 measures pilot counts at every level; from
them (post-processing) :func:`first_level_score` picks the finest level worth measuring and
:func:`answer_shares` the levels' budget shares; phase 2 measures counts, sums and sums of squares
at the chosen levels. Within a level :func:`.split.split_budget` splits count / sum / sum of squares.

**Composition.** Every (level, statistic) is a separate query on the same data: basic composition
(ε = Σ ε_{l,s}) under Laplace, ρ = Σ ρ_{l,s} under the Gaussian (Bun–Steinke Lemma 2.3); phase 2's
budgets depend on phase-1 outputs only (adaptive composition, same total).
"""

from __future__ import annotations

import math
from statistics import NormalDist
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from ..._validation import DpoptInputError, check_bound, check_choice, check_nonnegative_float, check_positive_int
from ...hierarchy.tree import Hierarchy, Level, build_hierarchy, default_levels, default_target
from ...measurements import BudgetSpend, Measurements, NoiseLaw, Statistic, UserInfo
from ...noise import IntegerSource, epsilon_rational
from ...records.aggregate import Aggregate
from ...records.kept import node_sample_counts
from .bounding import (CAPACITY, DEFAULT_GRANULARITY_BITS, LatticeValues, _grid_sum, _pair_sums, bound_contributions,
                       grid_ranks, lattice_values, tie_keys, user_ranks)
from ...noise.mechanism import NoiseMechanism, make_mechanism
from .partitions import PartitionList, match_partitions, read_partitions
from .record_cap import capped_records
from .sensitivity import Sensitivities, sensitivities
from .split import BudgetSplit, split_budget

#: "scaled" level bounds apply to levels whose nodes hold at least this many finest grids on average
SCALED_MIN_GRIDS = 64
#: how much finer (in levels, pilot-weighted mean) a first level must answer than a coarser one
FIRST_LEVEL_MARGIN = 0.05
#: share of the count budget spent on the phase-1 pilot counts of every level
PILOT_SHARE = 0.5
#: the same for the place release (pilots of two levels only; models/hierarchy.md §14.3)
PLACE_PILOT_SHARE = 0.1
#: the place release's public prior spread τ₀ of a cell around the map: U / this (§14.3; 6 km/h at
#: U = 120, where the Austin cells' means spread by 5.8 (day) and 6.9 km/h (full data) around the map's,
#: record-weighted; the declared U, not the DP clamp, so that a clamp drawn high does not make cells
#: look worth measuring)
PRIOR_SPREAD_DIVISOR = 20.0
STAT_NAMES = ("count", "sum", "sumsq", "count_pilot")

__all__ = ["coarsest_near_best", "LevelPlan", "LevelNoise", "first_level_score", "answer_levels", "resolve_level_bounds",
           "linked_levels", "bounded_level", "answer_shares", "node_sums", "random_ranks", "measure_levels"]


def answer_levels(hw: np.ndarray, level: np.ndarray, parent: np.ndarray, finest: np.ndarray, first: int,
                  target: float) -> np.ndarray:
    """Node answering each finest grid if levels ``first`` … root were measured: its finest
    ancestor at a level ≥ ``first`` with predicted half-width ``hw`` ≤ ``target``, else the root."""
    ok = (hw <= target) & (level >= first)
    ans = finest.copy()
    for _ in range(int(level.max()) + 1):
        move = ~ok[ans] & (parent[ans] >= 0)
        ans[move] = parent[ans[move]]
    return ans


def first_level_score(hw: np.ndarray, level: np.ndarray, parent: np.ndarray, finest: np.ndarray,
                      weight: np.ndarray, first: int, target: float) -> float:
    """Predicted score of measuring the sums at levels ``first`` … root: the ``weight``-averaged
    level of the answering node (:func:`answer_levels`), plus the answers' mean hw / 10⁶ to break
    ties. Lower is better (finer answers)."""
    ans = answer_levels(hw, level, parent, finest, first, target)
    w = np.maximum(weight, 0.0) + 1e-9
    return float(np.sum(w * level[ans]) / np.sum(w) + np.mean(np.minimum(hw[ans], 1e6)) * 1e-6)


def coarsest_near_best(scores: Any, margin: float) -> int:
    """Index of the last (coarsest) candidate whose score is within ``margin`` of the lowest."""
    sc = np.asarray(scores, dtype=float)
    return int(np.flatnonzero(sc <= sc.min() + margin)[-1])


def answer_shares(level_of_answer: np.ndarray, weight: np.ndarray, first: int, n_levels: int, unit: str) -> np.ndarray:
    """Budget share of each level: minimise Σ_l w_l/ε_l² (Laplace; Σ_l w_l/ρ_l Gaussian), w_l the
    ``weight`` of the finest grids level l is predicted to answer (+ 5 % of the largest, so every
    measured level keeps some budget): ε_l ∝ w_l^(1/3), ρ_l ∝ w_l^(1/2) (Lagrange); 0 below
    ``first``."""
    w = np.bincount(level_of_answer, weights=np.maximum(weight, 0.0) + 1e-9, minlength=n_levels)
    on = np.arange(n_levels) >= first
    w = np.where(on, w + 0.05 * w[on].max(), 0.0)
    x = w ** (1.0 / 3.0 if unit == "epsilon" else 0.5)
    return x / x.sum()


def node_sums(hier: Hierarchy, finest_values: np.ndarray) -> np.ndarray:
    """Exact sums of a per-finest-grid vector (finest-list order) over every node (int64 or float)."""
    v = np.asarray(finest_values)
    out = np.zeros(len(hier.nodes), dtype=v.dtype)
    out[hier.finest_node] = v
    parent = hier.nodes["parent"].to_numpy()
    lev = hier.nodes["level"].to_numpy()
    for li in range(hier.n_levels - 1):  # rows are level-ordered: children before parents
        rows = np.flatnonzero(lev == li)
        np.add.at(out, parent[rows], out[rows])
    return out


def _sampler(kind: str, noise: str, seed: int | None) -> NoiseMechanism:
    return make_mechanism(kind, noise, seed=seed)


#: second entropy word of a simulation's key stream (distinct from the noise's default_rng(seed))
KEYS_STREAM = 1


def simulation_keys(seed: int | None) -> np.random.Generator:
    """The tie keys' generator of a simulation (no integer source): its own stream. default_rng(seed)
    is the simulated noise's, so keys drawn from it would repeat the noise's uniforms one draw apart.
    A real release draws both from its one integer source, in sequence."""
    return np.random.default_rng(None if seed is None else [int(seed), KEYS_STREAM])


def _mechanism(given: NoiseMechanism | None, kind: str, noise: str, seed: int | None) -> NoiseMechanism:
    noise = check_choice(noise, "noise", ("discrete", "numpy"))
    mech = given if given is not None else _sampler(kind, noise, seed)
    unit = "epsilon" if kind == "laplace" else "rho"
    if getattr(mech, "unit", None) != unit:
        raise DpoptInputError(f"`noise_mechanism` has unit {getattr(mech, 'unit', None)!r}; mechanism={kind!r} needs {unit!r}")
    return mech


def used_budget(budget: float, mech: NoiseMechanism) -> float:
    """The budget the sampler really runs at (exact samplers round down to a multiple of 2^-30)."""
    return float(epsilon_rational(budget)) if mech.real_release else float(budget)


def random_ranks(agg: Aggregate, rng: np.random.Generator, *, mask: np.ndarray) -> np.ndarray:
    """Rank of every pair among its user's listed pairs by an i.i.d. uniform key alone (−1 off the
    list): user ℓ keeps a uniformly random k-subset of its listed grids. Like
    :func:`.bounding.grid_ranks` a rule of each user's own grids and independent keys, so the same
    privacy argument holds (models/user_level.md §2); unlike ranking by record count it does not
    favour the grids where a user dwells (for vehicles: where it is slow), which biases the means."""
    key = tie_keys(rng, agg.n_pairs)  # an integer source (real release: the OS CSPRNG) or a Generator
    return user_ranks(agg, np.asarray(mask, dtype=bool), (key,))


def _bounded_finest(agg: Aggregate, plist: PartitionList, k: int, c: int, U: float, bits: int,
                    rng: np.random.Generator, priority: str = "random") -> tuple[np.ndarray, np.ndarray, np.ndarray, Any]:
    """(R, Y, Z) per listed finest grid (list order) of the bounded data, and the lattice."""
    idx, listed = match_partitions(agg, plist)
    ranks = grid_ranks(agg, rng, mask=listed[agg.pair_grid]) if priority == "count" else \
        random_ranks(agg, rng, mask=listed[agg.pair_grid])
    lat = lattice_values(agg, U, granularity_bits=bits)
    bg = bound_contributions(agg, k=k, c=c, ranks=ranks, lattice=lat)
    have = idx >= 0
    out = [np.zeros(len(plist), dtype=v.dtype) for v in (bg.records, bg.sum_q, bg.sumsq_q)]  # exact ints
    for o, v in zip(out, (bg.records, bg.sum_q, bg.sumsq_q)):
        o[have] = v[idx[have]]
    return out[0], out[1], out[2], lat


def resolve_level_bounds(level_bounds: Any, hier: Hierarchy, k: int, c: int) -> list[tuple[int, int] | None] | None:
    """Per-level bounds (models/hierarchy.md §5, §14) from the public ``level_bounds`` option: None (one
    (k, c) for every level: the finest-grid bounding, tree-consistent); "scaled": levels whose nodes
    hold f_l ≥ ``SCALED_MIN_GRIDS`` listed finest grids on average are bounded on their own with
    k_l = ⌈k/√f_l⌉, c_l = c·⌈√f_l⌉ (a coarse node keeps ~√f_l times more of a user's records at
    about the same k_l·c_l), finer levels keep the shared bounding; or an explicit sequence of L
    entries, each a (k_l, c_l) pair, a whole number T_l (each user keeps ≤ T_l records of the level
    in total, :func:`.record_cap.capped_records`) or None (shared). Public: reads the list and
    parameters only."""
    if level_bounds is None:
        return None
    L = hier.n_levels
    if isinstance(level_bounds, str):
        check_choice(level_bounds, "level_bounds", ("scaled",))
        lev = hier.nodes["level"].to_numpy()
        f = [hier.finest_node.size / max(int(np.sum(lev == li)), 1) for li in range(L)]
        return [None if fl < SCALED_MIN_GRIDS else (max(1, math.ceil(k / math.sqrt(fl))), c * math.ceil(math.sqrt(fl)))
                for fl in f]
    if isinstance(level_bounds, (str, bytes)) or not hasattr(level_bounds, "__len__") or len(level_bounds) != L:
        raise DpoptInputError(f"`level_bounds` must be None, 'scaled' or one (k, c) pair, record cap or None per "
                              f"level ({L}); got {level_bounds!r}")
    return [None if b is None else check_positive_int(b, "level_bounds cap") if _is_cap(b) else _check_bounds(b)
            for b in level_bounds]


def _is_cap(entry: Any) -> bool:
    """A ``level_bounds`` entry that is one whole number: a per-user cap of records (§14)."""
    return isinstance(entry, (int, np.integer)) and not isinstance(entry, bool)


def linked_levels(lb: list | None, n_levels: int) -> np.ndarray:
    """Per level: do its nodes keep the tree constraint x_parent = Σ children? Only between two
    consecutive levels that both use the shared finest-grid bounding (their node sums are sums of
    one bounded data set)."""
    shared = np.ones(n_levels, dtype=bool) if lb is None else np.array([b is None for b in lb])
    return np.append(shared[:-1] & shared[1:], False)


def bounded_level(agg: Aggregate, pair_node: np.ndarray, n_nodes: int, k: int, c: int, lat: Any,
                  rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(R, Y, Z) per node of one level, each user bounded **at that level** (models/hierarchy.md §5):
    ``pair_node`` is the level node of every (user, finest grid) pair (−1 off the list); user ℓ keeps
    a uniformly random set of ≤ ``k`` of its level nodes (i.i.d. key per (user, node)) and in each
    kept node the ≤ ``c`` of its records there with the smallest sample keys, a uniform sample
    (:func:`dpopt.records.node_sample_counts`). A rule of each user's own records and independent
    keys, so adding/removing a user leaves the others' kept records unchanged (user_level.md §2)."""
    ok = pair_node >= 0
    lp_key = agg.pair_user.astype(np.int64) * (n_nodes + 1) + np.where(ok, pair_node, n_nodes)
    uniq, lp = np.unique(lp_key, return_inverse=True)
    lp_user, lp_ok = uniq // (n_nodes + 1), (uniq % (n_nodes + 1)) < n_nodes
    order = np.lexsort((tie_keys(rng, uniq.size), ~lp_ok, lp_user))
    start = np.searchsorted(lp_user[order], lp_user[order], side="left")
    rank = np.empty(uniq.size, dtype=np.int64)
    rank[order] = np.arange(uniq.size) - start
    keep_lp = lp_ok & (rank < k)
    gamma = node_sample_counts(agg.samples, np.where(keep_lp[lp], lp, -1), int(c),
                               fallback_keys=lambda n: tie_keys(rng, n))
    return level_node_sums(agg, pair_node, n_nodes, gamma, int(c), lat)


def level_node_sums(agg: Aggregate, pair_node: np.ndarray, n_nodes: int, gamma: np.ndarray, per_pair: int,
                    lat: Any, pair_sums: tuple[np.ndarray, np.ndarray] | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(R, Y, Z) per node of one level from Γ_p records kept of every pair (≤ ``per_pair``, a public
    bound used for the lattice's capacity): the first Γ_p, or those whose lattice sums ``pair_sums``
    are given; pairs with ``pair_node`` −1 count nowhere."""
    if int(per_pair) * max(lat.half_sum, lat.half_sumsq) >= CAPACITY:  # public: the bound, U and b only
        raise DpoptInputError(f"`level_bounds` c = {int(per_pair)} is too large for the lattice "
                              "(c·max(H_Y, H_Z) must stay below 2^62)")
    if pair_sums is None and agg.samples is not None:  # contributions may keep only the first few records per pair
        agg.samples.check_first(gamma)
    ok = pair_node >= 0
    py, pz = _pair_sums(lat, gamma) if pair_sums is None else pair_sums
    node = np.where(ok, pair_node, 0)
    wide = gamma.size * int(per_pair) * max(lat.half_sum, lat.half_sumsq) >= 2**63  # a size bound, not a refusal
    R, Y, Z = (_grid_sum(node, np.where(ok, v, 0), n_nodes, wide=wide) for v in (gamma, py, pz))
    return R, Y, Z


def _per_level_sums(agg: Aggregate, plist: PartitionList, hier: Hierarchy, lb: list, lat: Any,
                    rng: np.random.Generator, shared: list[np.ndarray] | None = None) -> list[np.ndarray]:
    """Node sums (R, Y, Z) with every level bounded by its own (k_l, c_l) (:func:`bounded_level`);
    levels with entry None take the ``shared`` (finest-bounded) node sums."""
    idx, listed = match_partitions(agg, plist)
    grid_fin = np.full(agg.n_grids, -1, dtype=np.int64)  # aggregate grid -> finest-list position
    grid_fin[idx[idx >= 0]] = np.flatnonzero(idx >= 0)
    parent, lev = hier.nodes["parent"].to_numpy(), hier.nodes["level"].to_numpy()
    node = np.where(grid_fin[agg.pair_grid] >= 0, hier.finest_node[np.maximum(grid_fin[agg.pair_grid], 0)], -1)
    out = [np.zeros(len(hier.nodes), dtype=object) for _ in range(3)]  # exact ints whatever the level's width
    for li, b in enumerate(lb):
        rows = np.flatnonzero(lev == li)
        if b is None:
            if shared is None:
                raise DpoptInputError("`level_bounds` entries None need the shared node sums")
            for o, v in zip(out, shared):
                o[rows] = v[rows]
            node = np.where(node >= 0, parent[np.maximum(node, 0)], -1)
            continue
        local = np.full(len(hier.nodes), -1, dtype=np.int64)
        local[rows] = np.arange(rows.size)
        pair_node = np.where(node >= 0, local[np.maximum(node, 0)], -1)
        if _is_cap(b):  # a per-user cap of b records (models/hierarchy.md §14)
            gamma, py, pz = capped_records(agg, pair_node >= 0, b, rng, lat)
            vals = level_node_sums(agg, pair_node, rows.size, gamma, b, lat, (py, pz))
        else:
            vals = bounded_level(agg, pair_node, rows.size, b[0], b[1], lat, rng)
        for o, v in zip(out, vals):
            o[rows] = v
        node = np.where(node >= 0, parent[np.maximum(node, 0)], -1)
    return [o if any(isinstance(x, int) and abs(x) >= 2**62 for x in o) else o.astype(np.int64) for o in out]


def _noisy_levels(ctx: _LevelContext, sums: np.ndarray, *, stat: str, budgets: np.ndarray, unit_size: float,
                  out: np.ndarray, scale: np.ndarray) -> None:
    """Noise one statistic ``stat`` ("count", "sum" or "sumsq") of the node ``sums`` at every level
    with budget > 0 (one query per level, at the level's sensitivity); fills ``out`` and ``scale``
    (value units: lattice units times ``unit_size``) in place."""
    mech, sens = ctx.mech, ctx.sens
    lev = ctx.hier.nodes["level"].to_numpy()
    for li, b in enumerate(budgets):
        if b <= 0:
            continue
        rows = np.flatnonzero(lev == li)
        l1 = getattr(sens[li], f"{stat}_l1" if stat == "count" else f"{stat}_l1_units")
        l2 = getattr(sens[li], f"{stat}_l2" if stat == "count" else f"{stat}_l2_units")
        out[rows] = unit_size * mech.integer(sums[rows], l1=l1, l2=l2, budget=float(b))
        scale[rows] = unit_size * mech.scale(l1=l1, l2=l2, budget=float(b))


def _choose_first(ctx: _LevelContext, pilot: np.ndarray, pilot_scale: np.ndarray) -> tuple[int, list, np.ndarray]:
    """Phase 2's finest measured level (module doc): the candidate with the best
    :func:`first_level_score`, and the levels' budget shares (:func:`answer_shares`), from the GLS
    of the phase-1 ``pilot`` counts (noise scales ``pilot_scale``; post-processing)."""
    from ...hierarchy.gls import tree_gls

    hier, mech, family, sens, linked = ctx.hier, ctx.mech, ctx.family, ctx.sens, ctx.linked
    sum_budget, U, lam, target = ctx.split.sum, ctx.U, ctx.lam, ctx.tau

    lev = hier.nodes["level"].to_numpy()
    law_n = NoiseLaw(family, pilot_scale, lattice=1.0 if mech.real_release else 0.0)
    links = np.where(linked[lev], hier.nodes["parent"].to_numpy(), -1)
    gls = tree_gls(links, pilot, law_n.variance(), height=lev if linked[:-1].all() else None)
    n_hat, v_n = gls.estimate, gls.variance
    z = NormalDist().inv_cdf(0.95)
    # the count's lower z-sd end: a pilot count inflated by noise must not make a level look
    # measurable (at ε = 1 it sent a run to the finest level, 37 km/h; models/hierarchy.md §11)
    n_low = np.maximum(n_hat - z * np.sqrt(np.where(np.isfinite(v_n), v_n, 0.0)), 1.0)
    parent = hier.nodes["parent"].to_numpy()
    L = hier.n_levels
    fin = hier.finest_node
    scores, hws = [], []
    for first in range(L):
        b = sum_budget / (L - first)
        var_y = np.array([NoiseLaw(family, np.array([lam * mech.scale(l1=sens[li].sum_l1_units, l2=sens[li].sum_l2_units,
                                                                       budget=b)]), lattice=lam if mech.real_release else 0.0
                                   ).variance()[0] for li in range(L)])
        hw = z * np.sqrt(var_y[lev] + (U / 2.0) ** 2 * v_n) / n_low
        scores.append(first_level_score(hw, lev, parent, fin, n_hat[fin], first, target))
        hws.append(hw)
    # near-ties go to the coarsest candidate, whose budget is least spread: a candidate must answer
    # the (pilot-weighted) grids at least FIRST_LEVEL_MARGIN levels finer on average to be worth
    # spreading the budget over more levels (full Austin data, ε = 10, seed 1010: first level 0 at
    # 6.991 against 7.003 for the rest spread the budget over all 8 levels and erred by 37 km/h)
    best = coarsest_near_best(scores, FIRST_LEVEL_MARGIN)
    ans = answer_levels(hws[best], lev, parent, fin, best, target)
    return best, scores, answer_shares(lev[ans], n_hat[fin], best, L, mech.unit)


@dataclass(frozen=True)
class LevelPlan:
    """Which levels :func:`measure_levels` measures and how its budget goes over them (public).

    ``levels`` default :func:`dpopt.hierarchy.tree.default_levels`, up to ``coarsest_resolution``,
    with recurring windows (hour-of-day …) for a ``profile`` "day" or "week" (models/hierarchy.md §2);
    ``target`` τ (default U/10) of the level choice; ``first_level`` fixes phase 2's finest measured
    level; ``priority``: a user keeps a random k of its grids (:func:`random_ranks`) or its top k by
    count ("count"); ``level_split`` "answers" (:func:`answer_shares`) or "equal" shares of the
    measured levels, or explicit public shares, one per level (0: not measured; no pilot counts);
    ``weight_mean``/``weight_variance`` the count/sum/sumsq split
    (:func:`dpopt.privacy.user.split.split_budget`); ``level_bounds``: None (default: ``bounds`` at the
    finest level, node sums consistent over the tree), "scaled", or per level a (k_l, c_l) pair or
    None (shared bounding): such levels are bounded on their own (:func:`resolve_level_bounds`,
    :func:`bounded_level`, models/hierarchy.md §5) and measure different bounded data;
    ``info.linked_levels`` says which levels keep the tree constraint (:func:`linked_levels`).
    ``level_split`` "place" (models/hierarchy.md §14.3): pilot counts of level 1 and the root only,
    then the share of level 1 (the rest: the root) minimising the predicted BLUP error with the
    public prior spread ``prior_spread`` τ₀ of level-1 nodes around the root (default
    bound/:data:`PRIOR_SPREAD_DIVISOR`)."""

    levels: tuple[Level, ...] | None = None
    coarsest_resolution: int | None = None
    profile: str | None = None
    target: float | None = None
    first_level: int | None = None
    priority: str = "random"
    level_split: Any = "answers"
    weight_mean: float = 1.0
    weight_variance: float = 1.0
    level_bounds: Any = None
    prior_spread: float | None = None


@dataclass(frozen=True)
class LevelNoise:
    """The samplers of :func:`measure_levels`: ``mechanism`` "laplace" or "gaussian"; ``noise``
    "discrete" (exact samplers, OS CSPRNG unless ``seed``) or "numpy" (simulation only);
    ``noise_mechanism`` overrides both; λ = 2^-``granularity_bits``."""

    mechanism: str = "laplace"
    noise: str = "discrete"
    seed: int | None = None
    noise_mechanism: NoiseMechanism | None = None
    granularity_bits: int = DEFAULT_GRANULARITY_BITS


def _level_options(plan: LevelPlan | None, sampling: LevelNoise | None) -> tuple[LevelPlan, LevelNoise]:
    """The two option objects, the defaults for None; anything else is refused."""
    for value, kind, name in ((plan, LevelPlan, "plan"), (sampling, LevelNoise, "sampling")):
        if value is not None and not isinstance(value, kind):
            raise DpoptInputError(f"`{name}` must be a {kind.__name__} or None; got {value!r}")
    return plan or LevelPlan(), sampling or LevelNoise()


def measure_levels(agg: Aggregate, partitions: Any, *, bound: float, bounds: tuple[int, int],
                   epsilon: float | None = None, rho: float | None = None, plan: LevelPlan | None = None,
                   sampling: LevelNoise | None = None) -> Measurements:
    """Noisy count, centred sum and centred sum of squares of the nodes of the public hierarchy
    over the finest list ``partitions`` (module doc), for fixed public bounds ``bounds`` = (k, c).

    ``epsilon`` (Laplace, pure ε-DP) or ``rho`` (Gaussian, ρ-zCDP): the budget of these statistics
    (the bounds choice, if any, is accounted by the caller). ``plan`` (:class:`LevelPlan`) the
    levels and the budget over them (default ``LevelPlan()``), ``sampling`` (:class:`LevelNoise`) the
    samplers (default ``LevelNoise()``).
    """
    p, ns = _level_options(plan, sampling)
    U, kind = check_bound(bound), check_choice(ns.mechanism, "mechanism", ("laplace", "gaussian"))
    unit, total = ("epsilon" if kind == "laplace" else "rho"), _check_budget(epsilon, rho, kind)
    tau = default_target(U) if p.target is None else check_nonnegative_float(p.target, "target")
    k, c = _check_bounds(bounds)
    mech = _mechanism(ns.noise_mechanism, kind, ns.noise, ns.seed)
    # options that name levels by index (first_level, explicit shares or bounds) keep every default level
    by_index = p.first_level is not None or not isinstance(p.level_split, str) or not (
        p.level_bounds is None or isinstance(p.level_bounds, str))
    plist, hier = _tree(agg, partitions, p.levels, p.coarsest_resolution, p.profile, drop_repeats=not by_index)
    L, first_level = hier.n_levels, p.first_level
    if first_level is not None and not (isinstance(first_level, int) and 0 <= first_level < L):
        raise DpoptInputError(f"`first_level` must be an integer in [0, {L - 1}]; got {first_level!r}")
    fixed_shares = _fixed_shares(p.level_split, L)
    src = getattr(mech, "source", None)  # a real release's keys from the OS CSPRNG
    if src is None and mech.real_release:  # public: the sampler given, never the data
        raise DpoptInputError("`noise_mechanism` is a real-release sampler without an integer `source`: the "
                              "tie keys of a real release must come from it (the OS CSPRNG)")
    keys_source = simulation_keys(ns.seed) if src is None else src
    sums, sens, lat, lb = _bounded_levels(agg, plist, hier, bounds=(k, c), bound=U, bits=ns.granularity_bits,
                                          rng=keys_source, level_bounds=p.level_bounds,
                                          priority=check_choice(p.priority, "priority", ("random", "count")))
    linked = linked_levels(lb, L)
    split = split_budget(total, bound=U, unit=unit, weight_mean=p.weight_mean, weight_variance=p.weight_variance)
    ctx = _LevelContext(agg=agg, plist=plist, hier=hier, mech=mech, family=("discrete_" if mech.real_release else "")
                        + kind, U=U, k=k, c=c, sens=sens, lat=lat, split=split, tau=tau, linked=linked)
    values, scales = [np.full(len(hier.nodes), np.nan) for _ in range(4)], [np.full(len(hier.nodes), np.inf) for _ in range(4)]
    first, scores, shares, b_pilot, pilot = _phase_one(ctx, p, fixed_shares, first_level, sums[0], values[3],
                                                       scales[3])
    if shares is None or _split_rule(p) == "equal":  # phase 2: levels first … root
        shares = np.where(np.arange(L) >= first, 1.0 / (L - first), 0.0)
    budgets = [shares * share for share in ((1.0 - pilot) * split.count, split.sum, split.sumsq)]
    for s, (stat, unit_size) in enumerate((("count", 1.0), ("sum", lat.lam), ("sumsq", lat.lam))):
        _noisy_levels(ctx, sums[s], stat=stat, budgets=budgets[s], unit_size=unit_size, out=values[s],
                      scale=scales[s])
    return _assemble(ctx, values=values, scales=scales, budgets=(*budgets, b_pilot),
                     extra={"first_level": first, "first_level_scores": scores, "target": tau,
                            "split_rule": split.rule, "level_sensitivity": [(sv.count_l1, sv.merge) for sv in sens],
                            "level_bounds": lb, "linked_levels": linked.tolist(),
                            "tree_consistent": bool(linked[:-1].all())})


@dataclass(frozen=True)
class _LevelContext:
    """What every step of :func:`measure_levels` after the bounding reads: the data and its public
    tree, the sampler, the bounds, the levels' sensitivities, the lattice, the budget split, τ and
    the linked levels.

    Attributes
    ----------
    agg : Aggregate
        The contributions measured.
    plist : PartitionList
        The public finest list.
    hier : Hierarchy
        The tree over ``plist``.
    mech : NoiseMechanism
        The sampler of every level's noise.
    family : str
        The noise family of the published laws ("laplace", "discrete_gaussian", ...).
    U : float
        The bound of the values.
    k, c : int
        The shared bounds: ≤ k finest grids per user, ≤ c records per kept grid.
    sens : list of Sensitivities
        Every level's sensitivities (:func:`.sensitivity.sensitivities`).
    lat : LatticeValues
        The lattice of the values (λ = ``lat.lam``).
    split : BudgetSplit
        The count / sum / sum-of-squares split (:func:`.split.split_budget`).
    tau : float
        τ, the target of the level choice.
    linked : np.ndarray
        Per level: does it keep the tree constraint (:func:`linked_levels`).
    """

    agg: Aggregate
    plist: PartitionList
    hier: Hierarchy
    mech: NoiseMechanism
    family: str
    U: float
    k: int
    c: int
    sens: list[Sensitivities]
    lat: LatticeValues
    split: BudgetSplit
    tau: float
    linked: np.ndarray

    @property
    def lam(self) -> float:
        """λ, the lattice's granularity."""
        return self.lat.lam


def _phase_one(ctx: _LevelContext, p: LevelPlan, fixed_shares: np.ndarray | None, first_level: int | None,
               counts: np.ndarray, pilot_out: np.ndarray, pilot_scale: np.ndarray) -> tuple:
    """Phase 1 (pilot counts, post-processing choice) → (first level, scores, shares, pilot budgets,
    pilot share of the count budget). Explicit shares: no pilot. "place": pilots of level 1 and the
    root only, then :func:`.place_shares.place_share`. Otherwise pilots of every level, then
    :func:`_choose_first` unless ``first_level`` is given."""
    L = ctx.hier.n_levels
    pilot = 0.0 if fixed_shares is not None else PILOT_SHARE  # explicit shares: no level choice, no pilot
    b_pilot = np.full(L, pilot * ctx.split.count / L)  # phase 1: pilot counts, every level, equal shares
    if _split_rule(p) == "place":
        pilot = PLACE_PILOT_SHARE
        b_pilot = np.zeros(L)
        b_pilot[[1, L - 1]] = pilot * ctx.split.count / 2.0
    _noisy_levels(ctx, counts, stat="count", budgets=b_pilot, unit_size=1.0, out=pilot_out, scale=pilot_scale)
    if fixed_shares is not None:
        return int(np.flatnonzero(fixed_shares > 0)[0]), [], fixed_shares, b_pilot, pilot
    if _split_rule(p) == "place":
        f, scores = _place_choice(ctx, p, pilot_out, pilot_scale, pilot)
        shares = np.zeros(L)
        shares[1], shares[L - 1] = f, 1.0 - f
        return (1 if f > 0 else L - 1), scores, shares, b_pilot, pilot
    if first_level is not None:
        return first_level, [], None, b_pilot, pilot
    return (*_choose_first(ctx, pilot_out, pilot_scale), b_pilot, pilot)


def _place_choice(ctx: _LevelContext, p: LevelPlan, pilot: np.ndarray, pilot_scale: np.ndarray,
                  pilot_share: float) -> tuple[float, list[float]]:
    """The cells' share of the place release (:func:`.place_shares.place_share`) from the pilot
    counts of level 1 and of the root level (post-processing)."""
    from .place_shares import cell_sizes, place_share

    L = ctx.hier.n_levels
    lev = ctx.hier.nodes["level"].to_numpy()
    sd = np.sqrt(NoiseLaw(ctx.family, pilot_scale, lattice=1.0 if ctx.mech.real_release else 0.0).variance())
    low = np.maximum(np.where(np.isfinite(pilot), pilot - sd, 1.0), 1.0)
    rows = {"cells": np.flatnonzero(lev == 1), "map": np.flatnonzero(lev == L - 1)}
    # the cells' sizes: their pilots shrunk toward the map's count spread by listed grids (public), by
    # how much the pilots vary beyond their noise (Fay–Herriot; models/hierarchy.md §14.3)
    sizes = np.maximum(cell_sizes(pilot[rows["cells"]], sd[rows["cells"]], ctx.hier.leaves_under[rows["cells"]],
                                  float(np.sum(np.maximum(pilot[rows["map"]], 0.0)))), 1.0)
    budgets = {"count": (1.0 - pilot_share) * ctx.split.count, "sum": ctx.split.sum}

    def noise_var(level: str, stat: str, share: float) -> float:
        li = 1 if level == "cells" else L - 1
        sv = ctx.sens[li]
        l1, l2 = (sv.count_l1, sv.count_l2) if stat == "count" else (sv.sum_l1_units, sv.sum_l2_units)
        unit = 1.0 if stat == "count" else ctx.lam
        scale = unit * ctx.mech.scale(l1=l1, l2=l2, budget=share * budgets[stat])
        lattice = unit if ctx.mech.real_release else 0.0
        return float(NoiseLaw(ctx.family, np.array([scale]), lattice=lattice).variance()[0])

    tau0 = (ctx.U / PRIOR_SPREAD_DIVISOR if p.prior_spread is None
            else check_nonnegative_float(p.prior_spread, "prior_spread"))
    map_low = float(np.sum(low[rows["map"]] * (pilot[rows["map"]] > 0))) or 1.0
    return place_share(sizes, sizes, map_low, ctx.U / 2.0, tau0, noise_var)


def _bounded_levels(agg: Aggregate, plist: PartitionList, hier: Hierarchy, *, bounds: tuple[int, int], bound: float,
                    bits: int, rng: np.random.Generator | IntegerSource, priority: str,
                    level_bounds: Any) -> tuple[list, list[Sensitivities], LatticeValues, Any]:
    """Exact node sums (R, Y, Z) of the bounded data, every level's sensitivity, the lattice and the
    resolved per-level bounds (models/hierarchy.md §4, §5).

    Parameters
    ----------
    agg : Aggregate
        The contributions, with samples.
    plist : PartitionList
        The public finest list.
    hier : Hierarchy
        The tree over ``plist``.
    bounds : tuple of int
        The shared (k, c).
    bound : float
        U, the bound of the values.
    bits : int
        The lattice's granularity bits (λ = 2^-bits).
    rng : numpy.random.Generator or IntegerSource
        The tie keys' source.
    priority : str
        "random" or "count" (:class:`LevelPlan`).
    level_bounds : Any
        The public ``level_bounds`` option (:func:`resolve_level_bounds`).
    """
    (k, c), U = bounds, bound
    lev = hier.nodes["level"].to_numpy()
    lb = resolve_level_bounds(level_bounds, hier, k, c)
    _check_samples_limit(agg, [c] + [b[1] for b in (lb or []) if b is not None and not _is_cap(b)])
    R, Y, Z, lat = _bounded_finest(agg, plist, k, c, U, bits, rng, priority)
    sums = [node_sums(hier, v) for v in (R, Y, Z)]
    sens = [sensitivities(k, c, U, lam=lat.lam, capacities=hier.leaves_under[lev == li]) for li in range(hier.n_levels)]
    if lb is not None:  # a level bounded on its own: a user changes ≤ k_l nodes by ≤ c_l records each
        sums = _per_level_sums(agg, plist, hier, lb, lat, rng, shared=sums)
        # a cap T_l is "k = 1 node of T_l records": ℓ1 = ℓ2 = T_l (all of a user's records may sit in one node)
        sens = [sv if b is None else sensitivities(*((1, b) if _is_cap(b) else b), U, lam=lat.lam,
                                                   capacities=np.ones(int(np.sum(lev == li)), dtype=np.int64))
                for li, (sv, b) in enumerate(zip(sens, lb))]
    return sums, sens, lat, lb


def _check_samples_limit(agg: Aggregate, cs: list[int]) -> None:
    """Refuse, on public facts only, bounds that read more records per pair than the contributions
    kept (``first_records``): every c (and c_l of ``level_bounds``) must be ≤ the public limit.
    Without this check the bounding's own check refuses exactly when some pair holds more records
    than the limit — a refusal that depends on the data."""
    limit = getattr(agg.samples, "limit", None)
    if limit is not None and max(cs) > int(limit):
        raise DpoptInputError(f"the contributions keep the first {int(limit)} records per pair, fewer than the "
                              f"bounds ask for (c = {max(cs)}, `bounds` / `level_bounds`): aggregate with "
                              f"first_records >= {max(cs)}")


def _split_rule(p: LevelPlan) -> str | None:
    """``level_split``'s rule name, or None for explicit shares (a sequence or an array)."""
    return p.level_split if isinstance(p.level_split, str) else None


def _tree(agg: Aggregate, partitions: Any, levels: Any, coarsest_resolution: Any,
          profile: str | None = None, drop_repeats: bool = True) -> tuple[PartitionList, Hierarchy]:
    """The public finest list and the tree over it (default levels: without the ones that repeat the
    level below, unless ``drop_repeats`` is False)."""
    plist = partitions if isinstance(partitions, PartitionList) else read_partitions(
        partitions, h3_resolution=agg.h3_resolution, slot_ns=agg.slot_ns, timezone=agg.timezone)
    if levels is not None and profile is not None:
        raise DpoptInputError(f"give `levels` or `profile`, not both; got profile={profile!r}")
    if levels is None:
        levels = default_levels(agg.h3_resolution, agg.slot_ns, profile=profile, coarsest_resolution=coarsest_resolution)
        return plist, (_distinct_levels(plist, levels) if drop_repeats else build_hierarchy(plist.cells, plist.slots,
                                                                                             levels))
    levels = tuple(levels)
    if not levels or levels[0] != Level(agg.h3_resolution, agg.slot_ns):
        raise DpoptInputError(f"`levels[0]` must be the aggregate's grid ({agg.h3_resolution}, {agg.slot_ns}); "
                              f"got {levels[0] if levels else None}")
    return plist, build_hierarchy(plist.cells, plist.slots, levels)


def _distinct_levels(plist: PartitionList, levels: tuple[Level, ...]) -> Hierarchy:
    """The tree over the default levels without a level that repeats the one below it: as many nodes
    means every node has one child, the same grouping of the list (hour-of-day over a list of one
    day; a day slot over a list inside one day); measuring it again would halve both budgets. A
    function of the public list."""
    hier = build_hierarchy(plist.cells, plist.slots, levels)
    sizes = [hier.level_rows(li).size for li in range(hier.n_levels)]
    keep = tuple(lv for li, lv in enumerate(levels) if li == 0 or sizes[li] != sizes[li - 1])
    return hier if len(keep) == len(levels) else build_hierarchy(plist.cells, plist.slots, keep)


def _fixed_shares(level_split: Any, n_levels: int) -> np.ndarray | None:
    """None for the rules "answers"/"equal"; else the explicit public shares of the levels (one
    number ≥ 0 per level, summing to 1; levels with share 0 are not measured)."""
    if isinstance(level_split, str):
        check_choice(level_split, "level_split", ("answers", "equal", "place"))
        if level_split == "place" and n_levels < 3:
            raise DpoptInputError(f"`level_split` = 'place' needs at least 3 levels (finest, cells, map); got {n_levels}")
        return None
    try:
        shares = np.asarray(level_split, dtype=float)
    except (TypeError, ValueError):
        shares = np.array([np.nan])
    if shares.shape != (n_levels,) or not np.all(np.isfinite(shares)) or np.any(shares < 0) \
            or not math.isclose(float(shares.sum()), 1.0, rel_tol=1e-9):
        raise DpoptInputError(f"`level_split` must be 'answers', 'equal' or one share >= 0 per level ({n_levels}) "
                              f"summing to 1; got {level_split!r}")
    return shares / shares.sum() * (1.0 - 2.0**-40)  # margin: the exact recount of the pieces stays ≤ the total


def _check_budget(epsilon: Any, rho: Any, kind: str) -> float:
    name = "epsilon" if kind == "laplace" else "rho"
    total = epsilon if kind == "laplace" else rho
    other = rho if kind == "laplace" else epsilon
    if total is None or other is not None:
        raise DpoptInputError(f"give `{name}` (only) with mechanism={kind!r}; got epsilon={epsilon!r}, rho={rho!r}")
    total = check_nonnegative_float(total, name)
    if total <= 0:
        raise DpoptInputError(f"`{name}` must be positive; got {total!r}")
    return total


def _check_bounds(bounds: Any) -> tuple[int, int]:
    try:
        k, c = bounds
    except (TypeError, ValueError):
        raise DpoptInputError(f"`bounds` must be a (k, c) pair of whole numbers; got {bounds!r}") from None
    return check_positive_int(k, "bounds[0] (k)"), check_positive_int(c, "bounds[1] (c)")


def _assemble(ctx: _LevelContext, *, values: list[np.ndarray], scales: list[np.ndarray],
              budgets: tuple[np.ndarray, ...], extra: dict[str, Any]) -> Measurements:
    """The :class:`Measurements` (statistics, exact spend recount, public info): ``values`` and
    ``scales`` of the statistics :data:`STAT_NAMES`, the per-level ``budgets`` of each, and the
    ``extra`` public info (fields of :class:`~dpopt.measurements.UserInfo`)."""
    agg, plist, hier, mech, family, lat = ctx.agg, ctx.plist, ctx.hier, ctx.mech, ctx.family, ctx.lat
    U, k, c = ctx.U, ctx.k, ctx.c
    pieces: dict[str, float] = {}
    spent = Fraction(0)
    for name, bs in zip(STAT_NAMES, budgets):
        for li, b in enumerate(bs):
            if b > 0:
                used = used_budget(float(b), mech)
                pieces[f"level{li}_{name}"] = used
                spent += Fraction(used)
    stats = {}
    for s, (name, lu) in enumerate(zip(STAT_NAMES, (1.0, lat.lam, lat.lam, 1.0))):
        sc = np.where(np.isfinite(scales[s]), scales[s], 0.0)
        stats[name] = Statistic(name, values[s], NoiseLaw(family, sc, lattice=lu if mech.real_release else 0.0))
    unit = mech.unit
    spend = BudgetSpend(unit=unit, total=float(spent), pieces=pieces,
                        epsilon=float(spent) if unit == "epsilon" else None)
    info = UserInfo(k=k, c=c, levels=[(lv.h3_resolution, lv.slot_ns, lv.cycle_ns) for lv in hier.levels],
                    lattice=lat.lam, noise=mech.label, slot_ns=agg.slot_ns, h3_resolution=agg.h3_resolution,
                    sumsq_centre=U * U / 8.0, **extra)
    finest = pd.DataFrame({"cell": plist.cells, "slot": plist.slots, "node": hier.finest_node})
    return Measurements(privacy_model="user", bound=U, nodes=hier.nodes, statistics=stats, spend=spend,
                        centre=U / 2.0, finest=finest, info=info)
