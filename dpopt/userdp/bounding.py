"""Contribution bounding of the ``user`` privacy model (models/user_level.md §2).

Under the ``user`` model neighbouring datasets differ by all the records of one user, so every
user's influence on the release is bounded before noise is added, by a rule that reads each user's
own records only (and public parameters):

1. values are clamped to [0, U] (ingestion does so, :mod:`dpopt.records.ingest`, ``out_of_range="clip"``);
2. **at most k grids per user**: user ℓ ranks its grids by its own record count m_{ℓ,g}, largest
   first, ties broken by an independent uniform key per (user, grid) drawn from the release's
   random generator; it keeps the grids of rank < k (only grids of the public partition list, when
   one is given);
3. **at most c records per kept (user, grid) pair**: the first c records by timestamp (ties by
   value), the order of :class:`dpopt.records.aggregate.PairSamples`.

The tie-break keys are i.i.d. per pair, so the bounded contribution of every other user has the same
law whether or not a given user is present; conditioned on the keys, adding or removing one user
changes the bounded data by that user's ≤ k pairs of ≤ c records.

Statistics on a lattice (exact arithmetic): every kept record x contributes, in integer units of
λ = 2^-b (``granularity_bits`` b),

    y_q = clip(rint((x − U/2)/λ), −H_Y, H_Y),           H_Y = ⌈U/(2λ)⌉,
    z_q = clip(rint(((x − U/2)² − U²/8)/λ), −H_Z, H_Z),  H_Z = ⌈U²/(8λ)⌉,

(the centring of PipelineDP's normalised sums: terms in [−U/2, U/2] and [−U²/8, U²/8]) and per grid
R_g (records), L_g (users), Y_g = Σ y_q, Z_g = Σ z_q are exact int64 sums. Snapping moves each term by
≤ λ/2 (a bias below 2^-13 for b = 12). The sensitivities (:mod:`.sensitivity`) hold by construction
and no floating-point rounding reaches the noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._validation import DpoptInputError, check_bound, check_positive_int
from ..records.aggregate import Aggregate

__all__ = ["BoundedGrids", "LatticeValues", "grid_ranks", "bounded_gamma", "lattice_values",
           "bound_contributions", "DEFAULT_GRANULARITY_BITS"]

#: λ = 2^-12 for the lattice of sums
DEFAULT_GRANULARITY_BITS = 12


@dataclass(frozen=True)
class LatticeValues:
    """Per-record lattice terms (in :class:`PairSamples` order) and their prefix sums."""

    lam: float
    half_sum: int
    half_sumsq: int
    cum_y: np.ndarray
    cum_z: np.ndarray
    offsets: np.ndarray


@dataclass(frozen=True)
class BoundedGrids:
    """Per-grid statistics of the bounded data (private: never published un-noised).

    ``gamma`` Γ per pair (0 beyond a user's k grids); ``records`` R_g; ``users`` L_g;
    ``sum_q`` Y_g and ``sumsq_q`` Z_g in lattice units λ; ``k``, ``c`` the bounds.
    """

    gamma: np.ndarray
    records: np.ndarray
    users: np.ndarray
    sum_q: np.ndarray
    sumsq_q: np.ndarray
    k: int
    c: int
    lam: float


def grid_ranks(agg: Aggregate, rng: np.random.Generator, *, mask: np.ndarray | None = None) -> np.ndarray:
    """Rank (0 = first) of every pair among its user's pairs: by count descending, ties by a
    uniform key per pair from ``rng``. Pairs outside ``mask`` (grids not in a public partition
    list) get rank −1 and are never kept.

    The ranks of a user's pairs depend only on that user's counts and keys (a sort within user).
    """
    if not isinstance(rng, np.random.Generator):
        raise DpoptInputError(f"`rng` must be a numpy.random.Generator; got {type(rng).__name__}")
    P = agg.n_pairs
    key = rng.random(P)
    ok = np.ones(P, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    if ok.shape != (P,):
        raise DpoptInputError(f"`mask` must hold one boolean per pair ({P}); got shape {ok.shape}")
    order = np.lexsort((key, -agg.count, ~ok, agg.pair_user))
    users_sorted = agg.pair_user[order]
    start = np.searchsorted(users_sorted, users_sorted, side="left")
    rank = np.empty(P, dtype=np.int64)
    rank[order] = np.arange(P) - start
    rank[~ok] = -1
    return rank


def bounded_gamma(agg: Aggregate, ranks: np.ndarray, k: int, c: int) -> np.ndarray:
    """Γ per pair: min(m, c) for pairs of rank 0..k−1, else 0."""
    k = check_positive_int(k, "k")
    c = check_positive_int(c, "c")
    keep = (ranks >= 0) & (ranks < k)
    return np.where(keep, np.minimum(agg.count, c), 0).astype(np.int64)


def lattice_values(agg: Aggregate, bound: float, *, granularity_bits: int = DEFAULT_GRANULARITY_BITS) -> LatticeValues:
    """Lattice terms y_q, z_q of every record (module doc) as int64 prefix sums."""
    U = check_bound(bound)
    b = check_positive_int(granularity_bits, "granularity_bits", minimum=0)
    if agg.samples is None:
        raise DpoptInputError(
            "`agg` must keep the per-pair samples for contribution bounding (first c records of a "
            "pair): aggregate with keep_samples=True"
        )
    lam = 2.0**-b
    hy = math.ceil(U / 2.0 / lam)
    hz = math.ceil(U * U / 8.0 / lam)
    n = agg.samples.values.size
    if (n + 1) * hz >= 2**62:
        raise DpoptInputError(
            f"`granularity_bits` = {b} is too fine for {n} records and bound {U:g} (int64 sums of "
            "squares could overflow); use fewer bits")
    y = np.clip(agg.samples.values, 0.0, U) - U / 2.0
    yq = np.clip(np.rint(y / lam), -hy, hy).astype(np.int64)
    zq = np.clip(np.rint((y * y - U * U / 8.0) / lam), -hz, hz).astype(np.int64)
    cy = np.zeros(n + 1, dtype=np.int64)
    cz = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(yq, out=cy[1:])
    np.cumsum(zq, out=cz[1:])
    return LatticeValues(lam=lam, half_sum=hy, half_sumsq=hz, cum_y=cy, cum_z=cz, offsets=agg.samples.offsets)


def bound_contributions(agg: Aggregate, *, k: int, c: int, ranks: np.ndarray, lattice: LatticeValues) -> BoundedGrids:
    """Bounded per-grid statistics for bounds (k, c), pair ranks (:func:`grid_ranks`) and the
    lattice terms (:func:`lattice_values`)."""
    gamma = bounded_gamma(agg, ranks, k, c)
    if agg.samples is not None:  # the contributions may keep the first c records per pair only
        agg.samples.check_first(gamma)
    start = lattice.offsets[:-1]
    py = lattice.cum_y[start + gamma] - lattice.cum_y[start]
    pz = lattice.cum_z[start + gamma] - lattice.cum_z[start]
    G = agg.n_grids
    g = agg.pair_grid
    return BoundedGrids(
        gamma=gamma,
        records=_grid_sum(g, gamma, G),
        users=_grid_sum(g, (gamma > 0).astype(np.int64), G),
        sum_q=_grid_sum(g, py, G),
        sumsq_q=_grid_sum(g, pz, G),
        k=int(k),
        c=int(c),
        lam=lattice.lam,
    )


def _grid_sum(grid: np.ndarray, values: np.ndarray, n_grids: int) -> np.ndarray:
    """Exact int64 per-grid sums."""
    out = np.zeros(n_grids, dtype=np.int64)
    np.add.at(out, grid, values.astype(np.int64))
    return out
