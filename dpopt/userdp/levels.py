"""Measure every level of the public hierarchy under the ``user`` model (models/hierarchy.md §2–3).

From the **bounded** contributions (:mod:`.bounding`: ≤ k listed finest grids per user, ≤ c records
per kept (user, grid), lattice terms) every finest grid has exact integer sums R_g, Y_g, Z_g; a
node's sums are the exact sums over the finest grids below it. Every level l of the tree
(:mod:`dpopt.hierarchy.tree`) is one query on the data: the noisy vectors ñ_l, Ỹ_l, Z̃_l over all of
the level's nodes, with the mechanisms of :mod:`.mechanism`.

**Sensitivity of level l** (add/remove one user; proof in models/hierarchy.md §3). The user's kept
finest grids put m_i ≥ 0 of them under node i, Σ_i m_i ≤ k and m_i ≤ a_i (the number of listed
finest grids under node i, public); node i's count moves by ≤ c·m_i, its sums by ≤ c·m_i·(H_Y, H_Z).
Hence ℓ1 = k·c·(1, H_Y, H_Z) at every level (merging grids does not cancel anything: all changes of
one user have the same sign), and ℓ2² = c²·(1, H_Y², H_Z²)·M_l with
M_l = max Σ m_i² over {Σ m_i ≤ k, 0 ≤ m_i ≤ a_i}, attained by filling the largest a_i first
(Σ m_i² is Schur-convex and the greedy vector majorises every feasible one): M_0 = min(k, G) at the
finest level, M_l = k² once one node holds ≥ k finest grids.

**Composition.** The L levels × 3 statistics are L·3 queries on the same data: basic composition
(ε = Σ ε_{l,s}) under Laplace, ρ = Σ ρ_{l,s} under the Gaussian (Bun–Steinke Lemma 2.3). The split
across levels (:func:`level_budgets`) minimises the predicted error Σ_l w_l·Var(mean at level l)
with a public density model (models/hierarchy.md §4); within a level :func:`.split.split_budget`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from .._validation import DpoptInputError, check_bound, check_choice, check_nonnegative_float, check_positive_int
from ..hierarchy.tree import Hierarchy, Level, build_hierarchy, default_levels
from ..measurements import BudgetSpend, Measurements, NoiseLaw, Statistic
from ..noise import epsilon_rational, integer_source
from ..records.aggregate import Aggregate
from .bounding import DEFAULT_GRANULARITY_BITS, bound_contributions, grid_ranks, lattice_values
from .mechanism import DiscreteGaussian, DiscreteLaplace, GaussianSimulation, LaplaceSimulation, NoiseMechanism
from .partitions import PartitionList, match_partitions, read_partitions
from .sensitivity import sqrt_up
from .split import split_budget

__all__ = ["LevelSensitivity", "level_sensitivity", "max_merge_square", "level_budgets", "node_sums",
           "measure_levels"]


@dataclass(frozen=True)
class LevelSensitivity:
    """Sensitivities of one level's (R, Y, Z) vectors in lattice units (module doc); ``merge`` = M_l."""

    count_l1: int
    sum_l1_units: int
    sumsq_l1_units: int
    merge: int
    count_l2: float
    sum_l2_units: float
    sumsq_l2_units: float


def max_merge_square(capacities: np.ndarray, k: int) -> int:
    """M = max Σ m_i² over integers 0 ≤ m_i ≤ a_i with Σ m_i ≤ k: fill the largest a_i first."""
    a = np.sort(np.asarray(capacities, dtype=np.int64))[::-1]
    m = np.minimum(a, np.maximum(k - np.concatenate([[0], np.cumsum(a)[:-1]]), 0))
    return int(np.sum(m.astype(object) ** 2))


def level_sensitivity(capacities: np.ndarray, k: int, c: int, half_sum: int, half_sumsq: int) -> LevelSensitivity:
    """ℓ1 and ℓ2 sensitivities of one level whose nodes hold ``capacities`` listed finest grids."""
    k = check_positive_int(k, "k")
    c = check_positive_int(c, "c")
    M = max_merge_square(capacities, k)
    return LevelSensitivity(
        count_l1=k * c, sum_l1_units=k * c * int(half_sum), sumsq_l1_units=k * c * int(half_sumsq), merge=M,
        count_l2=sqrt_up(c * c * M), sum_l2_units=sqrt_up((c * int(half_sum)) ** 2 * M),
        sumsq_l2_units=sqrt_up((c * int(half_sumsq)) ** 2 * M))


def level_budgets(hier: Hierarchy, total: float, *, unit: str = "epsilon", density_exponent: float = 0.5) -> np.ndarray:
    """Budget of each level: minimise Σ_l Var(mean at level l) with a typical node count
    n_l ∝ f_l^β (f_l = finest grids per node of level l, public; β = ``density_exponent``):
    Var ∝ 1/(ε_l f_l^β)² (Laplace) → ε_l ∝ f_l^(−2β/3); ∝ 1/(ρ_l f_l^(2β)) (Gaussian) → ρ_l ∝ f_l^(−β).
    β = 1 is uniform occupancy, β = 0 data concentrated in a few grids (equal split)."""
    beta = check_nonnegative_float(density_exponent, "density_exponent")
    if beta > 1.0:
        raise DpoptInputError(f"`density_exponent` must be in [0, 1]; got {density_exponent!r}")
    lev = hier.nodes["level"].to_numpy()
    per_level = np.bincount(lev, minlength=hier.n_levels).astype(float)
    fan = per_level[0] / per_level
    w = fan ** (-2.0 * beta / 3.0 if unit == "epsilon" else -beta)
    return float(total) * w / w.sum()


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
    if noise == "discrete":
        src = integer_source(seed)
        return (DiscreteLaplace if kind == "laplace" else DiscreteGaussian)(src, seeded=seed is not None)
    rng = np.random.default_rng(seed)
    return LaplaceSimulation(rng) if kind == "laplace" else GaussianSimulation(rng)


def _used(budget: float, mech: NoiseMechanism) -> float:
    """The budget the sampler really runs at (exact samplers round down to a multiple of 2^-30)."""
    return float(epsilon_rational(budget)) if mech.real_release else float(budget)


def _bounded_finest(agg: Aggregate, plist: PartitionList, k: int, c: int, U: float, bits: int,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any]:
    """(R, Y, Z) per listed finest grid (list order) of the bounded data, and the lattice."""
    idx, listed = match_partitions(agg, plist)
    ranks = grid_ranks(agg, rng, mask=listed[agg.pair_grid])
    lat = lattice_values(agg, U, granularity_bits=bits)
    bg = bound_contributions(agg, k=k, c=c, ranks=ranks, lattice=lat)
    have = idx >= 0
    out = [np.zeros(len(plist), dtype=np.int64) for _ in range(3)]
    for o, v in zip(out, (bg.records, bg.sum_q, bg.sumsq_q)):
        o[have] = v[idx[have]]
    return out[0], out[1], out[2], lat


def measure_levels(
    agg: Aggregate,
    partitions: Any,
    *,
    bound: float,
    bounds: tuple[int, int],
    epsilon: float | None = None,
    rho: float | None = None,
    levels: tuple[Level, ...] | None = None,
    coarsest_resolution: int | None = None,
    density_exponent: float = 0.5,
    weight_mean: float = 1.0,
    weight_variance: float = 1.0,
    mechanism: str = "laplace",
    noise: str = "discrete",
    seed: int | None = None,
    noise_mechanism: NoiseMechanism | None = None,
    granularity_bits: int = DEFAULT_GRANULARITY_BITS,
) -> Measurements:
    """Noisy count, centred sum and centred sum of squares of every node of the public hierarchy
    over the finest list ``partitions`` (module doc), for fixed public bounds ``bounds`` = (k, c).

    ``epsilon`` (Laplace, pure ε-DP) or ``rho`` (Gaussian, ρ-zCDP): the budget of these statistics
    (the bounds choice, if any, is accounted by the caller). ``levels`` default
    :func:`dpopt.hierarchy.tree.default_levels`. ``noise`` "discrete" (exact samplers, OS CSPRNG unless
    ``seed``) or "numpy" (simulation only); ``noise_mechanism`` overrides both.
    """
    U = check_bound(bound)
    kind = check_choice(mechanism, "mechanism", ("laplace", "gaussian"))
    noise = check_choice(noise, "noise", ("discrete", "numpy"))
    unit = "epsilon" if kind == "laplace" else "rho"
    total = epsilon if kind == "laplace" else rho
    if total is None or (epsilon is not None and rho is not None):
        raise DpoptInputError(f"give `{'epsilon' if kind == 'laplace' else 'rho'}` (only) with mechanism={kind!r}")
    total = check_nonnegative_float(total, unit)
    if total <= 0:
        raise DpoptInputError(f"`{unit}` must be positive; got {total!r}")
    try:
        k, c = (check_positive_int(v, n) for v, n in zip(bounds, ("bounds[0] (k)", "bounds[1] (c)")))
    except TypeError:
        raise DpoptInputError(f"`bounds` must be a (k, c) pair of whole numbers; got {bounds!r}") from None
    mech = noise_mechanism if noise_mechanism is not None else _sampler(kind, noise, seed)
    if mech.unit != unit:
        raise DpoptInputError(f"`noise_mechanism` has unit {mech.unit!r}; mechanism={kind!r} needs {unit!r}")
    plist = partitions if isinstance(partitions, PartitionList) else read_partitions(
        partitions, h3_resolution=agg.h3_resolution, slot_ns=agg.slot_ns)
    levels = default_levels(agg.h3_resolution, agg.slot_ns, coarsest_resolution=coarsest_resolution) \
        if levels is None else tuple(levels)
    if levels[0] != Level(agg.h3_resolution, agg.slot_ns):
        raise DpoptInputError(f"`levels[0]` must be the aggregate's grid ({agg.h3_resolution}, {agg.slot_ns}); got {levels[0]}")
    hier = build_hierarchy(plist.cells, plist.slots, levels)
    rng = np.random.default_rng(seed)
    R, Y, Z, lat = _bounded_finest(agg, plist, k, c, U, granularity_bits, rng)
    sums = [node_sums(hier, v) for v in (R, Y, Z)]
    lev_budget = level_budgets(hier, total, unit=unit, density_exponent=density_exponent)
    n = len(hier.nodes)
    values = [np.full(n, np.nan) for _ in range(3)]
    scales = [np.zeros(n) for _ in range(3)]
    pieces: dict[str, float] = {}
    spent = Fraction(0)
    lev = hier.nodes["level"].to_numpy()
    for li in range(hier.n_levels):  # one query per level and statistic
        rows = np.flatnonzero(lev == li)
        sens = level_sensitivity(hier.leaves_under[rows], k, c, lat.half_sum, lat.half_sumsq)
        split = split_budget(lev_budget[li], bound=U, unit=unit, weight_mean=weight_mean,
                             weight_variance=weight_variance)
        for s, (name, b, l1, l2, unit_size) in enumerate((
                ("count", split.count, sens.count_l1, sens.count_l2, 1.0),
                ("sum", split.sum, sens.sum_l1_units, sens.sum_l2_units, lat.lam),
                ("sumsq", split.sumsq, sens.sumsq_l1_units, sens.sumsq_l2_units, lat.lam))):
            values[s][rows] = unit_size * mech.integer(sums[s][rows], l1=l1, l2=l2, budget=b)
            scales[s][rows] = unit_size * mech.scale(l1=l1, l2=l2, budget=b)
            used = _used(b, mech)
            pieces[f"level{li}_{name}"] = used
            spent += Fraction(used)
    family = ("discrete_" if mech.real_release else "") + kind
    stats = {name: Statistic(name, values[s], NoiseLaw(family, scales[s], lattice=(lu if mech.real_release else 0.0)))
             for s, (name, lu) in enumerate((("count", 1.0), ("sum", lat.lam), ("sumsq", lat.lam)))}
    finest = pd.DataFrame({"cell": plist.cells, "slot": plist.slots, "node": hier.finest_node})
    spend = BudgetSpend(unit=unit, total=float(spent), pieces=pieces,
                        epsilon=float(spent) if unit == "epsilon" else None)
    info = {"k": k, "c": c, "levels": [(lv.h3_resolution, lv.slot_ns) for lv in levels],
            "level_budgets": lev_budget.tolist(), "density_exponent": density_exponent,
            "granularity": lat.lam, "noise": mech.label, "slot_ns": agg.slot_ns,
            "h3_resolution": agg.h3_resolution, "sumsq_centre": U * U / 8.0}
    return Measurements(privacy_model="user", bound=U, nodes=hier.nodes, statistics=stats, spend=spend,
                        centre=U / 2.0, finest=finest, info=info)
