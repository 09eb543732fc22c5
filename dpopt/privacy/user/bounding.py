"""Contribution bounding of the ``user`` privacy model (models/user_level.md §2).

Under the ``user`` model neighbouring datasets differ by all the records of one user, so every
user's influence on the release is bounded before noise is added, by a rule that reads each user's
own records only (and public parameters):

1. values are clamped to [0, U] (ingestion does so, :mod:`dpopt.records.ingest`, ``out_of_range="clip"``);
2. **at most k grids per user**: user ℓ ranks its grids by its own record count m_{ℓ,g}, largest
   first, ties broken by an independent uniform 64-bit key per (user, grid) drawn from the
   release's integer source (:func:`tie_keys`: the OS CSPRNG for a real release, the seeded
   source when a seed is given); it keeps the grids of rank < k (only grids of the public partition list, when
   one is given);
3. **at most c records per kept (user, grid) pair**: the first c in the order of
   :class:`dpopt.records.aggregate.PairSamples`, i.e. the c smallest keyed sample keys (ties by
   value), a uniform sample of the pair's records (:mod:`dpopt.records.sample_key`).

The tie-break keys are i.i.d. per pair, so the bounded contribution of every other user has the same
law whether or not a given user is present; conditioned on the keys, adding or removing one user
changes the bounded data by that user's ≤ k pairs of ≤ c records.

Statistics on a lattice (exact arithmetic): every kept record x contributes, in integer units of
λ = 2^-b (``granularity_bits`` b; by default :func:`dpopt.noise.lattice_bits` of U, a lattice relative
to the range outside 1 ≤ U < 128, so that the release does not depend on the values' unit),

    y_q = clip(rint((x − U/2)/λ), −H_Y, H_Y),           H_Y = ⌈U/(2λ)⌉,
    z_q = clip(rint(((x − U/2)² − U²/8)/λ), −H_Z, H_Z),  H_Z = ⌈U²/(8λ)⌉,

(the centring of PipelineDP's normalised sums: terms in [−U/2, U/2] and [−U²/8, U²/8]) and per grid
R_g (records), L_g (users), Y_g = Σ y_q, Z_g = Σ z_q are exact integer sums. Snapping moves each term by
≤ λ/2 (at most 2^-13 of the range under the default lattice). The sensitivities (:mod:`.sensitivity`) hold by construction
and no floating-point rounding reaches the noise.

Exactness without a data-dependent refusal. The only refusal is
:func:`check_lattice_capacity`, a function of public quantities (c, U, b) that a front door calls
before reading data: c·H < 2^62 with H = max(H_Y, H_Z) (:func:`lattice_capacity`; H_Y is the larger
below U = 4). Then every term fits int64 and so does every bounded **pair** sum (Σ of Γ ≤ c terms,
|·| ≤ c·H < 2^62): no sum over a user's unbounded records is ever formed.
A grid sum adds at most P pair sums (P the number of pairs), so it is computed in int64 when
P·c·H < 2^63 (a proven bound: then also the sum over all grids fits) and in Python integers
(object arrays) otherwise; either way the result is the exact integer and only its dtype differs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..._validation import DpoptInputError, check_bound, check_positive_int
from ...noise import DEFAULT_GRANULARITY_BITS, IntegerSource, check_granularity_bits
from ...noise.discrete_laplace import GRANULARITY_BITS_RANGE
from ...records.aggregate import Aggregate

__all__ = ["BoundedGrids", "LatticeValues", "grid_ranks", "bounded_gamma", "lattice_values",
           "bound_contributions", "check_lattice_capacity", "half_ranges", "lattice_capacity", "lattice_halves",
           "tie_keys",
           "DEFAULT_GRANULARITY_BITS"]

#: every lattice term and every bounded pair sum stays below this in magnitude (int64 with room)
CAPACITY = 2**62


@dataclass(frozen=True)
class LatticeValues:
    """Per-record lattice terms y_q, z_q (int64, in :class:`PairSamples` order; |y_q| ≤ H_Y,
    |z_q| ≤ H_Z) and the pair offsets."""

    lam: float
    half_sum: int
    half_sumsq: int
    y: np.ndarray
    z: np.ndarray
    offsets: np.ndarray


@dataclass(frozen=True)
class BoundedGrids:
    """Per-grid statistics of the bounded data (private: never published un-noised).

    ``gamma`` Γ per pair (0 beyond a user's k grids); ``records`` R_g; ``users`` L_g (int64);
    ``sum_q`` Y_g and ``sumsq_q`` Z_g in lattice units λ: exact integers, int64 arrays when a
    public-size bound proves they fit, else object arrays of Python ints (module doc); ``k``, ``c``
    the bounds.
    """

    gamma: np.ndarray
    records: np.ndarray
    users: np.ndarray
    sum_q: np.ndarray
    sumsq_q: np.ndarray
    k: int
    c: int
    lam: float


#: pairs per call of the integer source in :func:`tie_keys` (one randbelow(2^(64·block)) each)
_KEY_BLOCK = 1 << 16


def tie_keys(source: IntegerSource | np.random.Generator, n: int) -> np.ndarray:
    """n i.i.d. uniform 64-bit keys (uint64).

    From an :class:`~dpopt.noise.IntegerSource` (a real release: ``SecureRandom``, the OS CSPRNG;
    seeded: ``SeededSource``) by one ``randbelow(2^(64·m))`` per block of m keys, whose 8·m bytes
    are the keys; from a numpy Generator (simulations only) by ``integers``.
    """
    n = int(n)
    if isinstance(source, np.random.Generator):
        return source.integers(0, 2**64, size=n, dtype=np.uint64, endpoint=False)
    if not callable(getattr(source, "randbelow", None)):
        raise DpoptInputError(
            f"`source` must be an integer source (randbelow) or a numpy.random.Generator; got {type(source).__name__}")
    out = np.empty(n, dtype=np.uint64)
    for start in range(0, n, _KEY_BLOCK):
        m = min(_KEY_BLOCK, n - start)
        big = int(source.randbelow(1 << (64 * m)))
        out[start:start + m] = np.frombuffer(big.to_bytes(8 * m, "little"), dtype="<u8")
    return out


def grid_ranks(agg: Aggregate, source: IntegerSource | np.random.Generator, *,
               mask: np.ndarray | None = None) -> np.ndarray:
    """Rank (0 = first) of every pair among its user's pairs: by count descending, ties by a
    uniform key per pair (:func:`tie_keys` from ``source``). Pairs outside ``mask`` (grids not in a
    public partition list) get rank −1 and are never kept.

    The ranks of a user's pairs depend only on that user's counts and keys (a sort within user).
    """
    ok = pair_mask(agg, mask)
    return user_ranks(agg, ok, (tie_keys(source, agg.n_pairs), -agg.count))


def pair_mask(agg: Aggregate, mask: np.ndarray | None) -> np.ndarray:
    """``mask`` checked to hold one boolean per pair (None: every pair)."""
    P = agg.n_pairs
    ok = np.ones(P, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    if ok.shape != (P,):
        raise DpoptInputError(f"`mask` must hold one boolean per pair ({P}); got shape {ok.shape}")
    return ok


def user_ranks(agg: Aggregate, ok: np.ndarray, keys: tuple[np.ndarray, ...]) -> np.ndarray:
    """Rank (0 = first) of every pair among its user's pairs ordered by ``keys`` (np.lexsort
    order: the last key is the primary one), pairs in ``ok`` first; −1 outside ``ok``."""
    order = np.lexsort((*keys, ~ok, agg.pair_user))
    users_sorted = agg.pair_user[order]
    start = np.searchsorted(users_sorted, users_sorted, side="left")
    rank = np.empty(agg.n_pairs, dtype=np.int64)
    rank[order] = np.arange(agg.n_pairs) - start
    rank[~ok] = -1
    return rank


def bounded_gamma(agg: Aggregate, ranks: np.ndarray, k: int, c: int) -> np.ndarray:
    """Γ per pair: min(m, c) for pairs of rank 0..k−1, else 0."""
    k = check_positive_int(k, "k")
    c = check_positive_int(c, "c")
    keep = (ranks >= 0) & (ranks < k)
    return np.where(keep, np.minimum(agg.count, c), 0).astype(np.int64)


def half_ranges(bound: float, lam: float) -> tuple[int, int]:
    """(H_Y, H_Z) = (⌈U/(2λ)⌉, ⌈U²/(8λ)⌉): the largest |y_q| and |z_q| of one record on the lattice
    λ (module doc)."""
    U = check_bound(bound)
    return math.ceil(U / 2.0 / lam), math.ceil(U * U / 8.0 / lam)


def lattice_halves(bound: float, granularity_bits: int) -> tuple[float, int, int]:
    """(λ, H_Y, H_Z) of the lattice: λ = 2^-b and :func:`half_ranges` (module doc)."""
    U = check_bound(bound)
    b = check_granularity_bits(granularity_bits)
    lam = 2.0**-b
    return (lam, *half_ranges(U, lam))


#: the fewest steps of the value lattice the declared range must span (a public rule on U and b): below
#: it values are rounded to a handful of levels (at U = 1e-6 every value was 0 and every interval the
#: whole range); 64 steps round a value by at most 1/128 of the range
MIN_LATTICE_STEPS = 64


def check_lattice_resolution(bound: float, granularity_bits: int = DEFAULT_GRANULARITY_BITS) -> None:
    """Refuse a declared range U narrower than :data:`MIN_LATTICE_STEPS` steps of the lattice 2^-b:
    public (U and b), checked before any record is read."""
    U = check_bound(bound)
    lam = lattice_halves(U, granularity_bits)[0]
    if U < MIN_LATTICE_STEPS * lam:
        raise DpoptInputError(
            f"`bound` = {U:g} spans fewer than {MIN_LATTICE_STEPS} steps of the value lattice ({lam:g}): values would be "
            f"rounded to a few levels; express them in a smaller unit (e.g. × 1000) so that the range is at least "
            f"{MIN_LATTICE_STEPS * lam:g}")


def lattice_capacity(bound: float, granularity_bits: int) -> int:
    """max(H_Y, H_Z) of the lattice (:func:`lattice_halves`): the largest |term| of one record, so a
    pair of c records sums to at most c times it (H_Y > H_Z below U = 4)."""
    _, hy, hz = lattice_halves(bound, granularity_bits)
    return max(hy, hz)


def check_lattice_capacity(k: int, c: int, bound: float, granularity_bits: int = DEFAULT_GRANULARITY_BITS) -> None:
    """Refuse (k, c, U, b) whose bounded pair sums could leave int64: c·max(H_Y, H_Z) ≥ 2^62.

    Public quantities only (k, c, the bound U, the granularity b; with automatic bounds pass the
    caps ``max_grids``, ``max_records``): call it before any data is read. Nothing else in
    bounding refuses a run, whatever the data (module doc). ``k`` is validated for the message's
    sake; the ℓ1 sensitivities k·c·H are Python integers and need no cap. Under the default lattice
    (:func:`dpopt.noise.lattice_bits`) it refuses only ranges wider than about 2^46/c or narrower
    than about 2^-50·c (c = 64: 2·10^12 and 6·10^-14).
    """
    check_positive_int(k, "k")
    c = check_positive_int(c, "c")
    U = check_bound(bound)
    if c * lattice_capacity(U, granularity_bits) >= CAPACITY:
        b = int(granularity_bits)
        fit = next((f for f in range(b - 1, GRANULARITY_BITS_RANGE[0] - 1, -1)
                    if c * lattice_capacity(U, f) < CAPACITY), None)
        raise DpoptInputError(
            f"the value range {U:g} does not fit the exact lattice 2^{-b} with a cap of c = {c} per grid "
            f"(c·max(⌈U·2^b/2⌉, ⌈U²·2^b/8⌉) must stay below 2^62): express the values in a unit where the range "
            f"is between 1e-12 and 1e12" + (f" (in Python also: use `granularity_bits` <= {fit})" if fit is not None
                                            else ""))


def lattice_values(agg: Aggregate, bound: float, *, granularity_bits: int = DEFAULT_GRANULARITY_BITS,
                   low: float = 0.0) -> LatticeValues:
    """Lattice terms y_q, z_q of every record (module doc), int64. With a lower clamp ``low`` = A
    (0 ≤ A < ``bound``; the engine's, models/engine.md §2) the values are clamped to [A, U] and read
    shifted by −A: the terms of the module doc with U − A for U (centred at (A + U)/2, half-range
    (U − A)/2), so every sensitivity is that of the bound U − A.

    Refuses only by :func:`check_lattice_capacity` at c = 1 (public); never by the data.
    """
    top = check_bound(bound)
    low = float(low)
    if not (math.isfinite(low) and 0.0 <= low < top):
        raise DpoptInputError(f"`low` must be in [0, bound) = [0, {top:g}); got {low!r}")
    U = top - low
    check_lattice_capacity(1, 1, U, granularity_bits)
    lam, hy, hz = lattice_halves(U, granularity_bits)
    if agg.samples is None:
        raise DpoptInputError(
            "`agg` must keep the per-pair samples for contribution bounding (first c records of a "
            "pair): aggregate with keep_samples=True"
        )
    y = np.clip(agg.samples.values, low, top) - (low + U / 2.0)
    yq = np.clip(np.rint(y / lam), -hy, hy).astype(np.int64)
    zq = np.clip(np.rint((y * y - U * U / 8.0) / lam), -hz, hz).astype(np.int64)
    return LatticeValues(lam=lam, half_sum=hy, half_sumsq=hz, y=yq, z=zq, offsets=agg.samples.offsets)


def _pair_sums(lattice: LatticeValues, gamma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Σ of the first Γ terms of every pair (int64: |·| ≤ Γ·H < 2^62 by the capacity check)."""
    gamma = np.asarray(gamma, dtype=np.int64)
    P = gamma.size
    total = int(gamma.sum())
    owner = np.repeat(np.arange(P), gamma)
    within = np.arange(total) - np.repeat(np.cumsum(gamma) - gamma, gamma)
    idx = np.repeat(lattice.offsets[:-1], gamma) + within
    py = np.zeros(P, dtype=np.int64)
    pz = np.zeros(P, dtype=np.int64)
    np.add.at(py, owner, lattice.y[idx])
    np.add.at(pz, owner, lattice.z[idx])
    return py, pz


def bound_contributions(agg: Aggregate, *, k: int, c: int, ranks: np.ndarray, lattice: LatticeValues) -> BoundedGrids:
    """Bounded per-grid statistics for bounds (k, c), pair ranks (:func:`grid_ranks`) and the
    lattice terms (:func:`lattice_values`); exact whatever the data (module doc)."""
    gamma = bounded_gamma(agg, ranks, k, c)
    if int(c) * max(lattice.half_sum, lattice.half_sumsq) >= CAPACITY:  # public: c, U and b only
        raise DpoptInputError(f"`c` = {int(c)} is too large for the lattice (c·max(H_Y, H_Z) must stay below 2^62): "
                              "see check_lattice_capacity")
    if agg.samples is not None:  # the contributions may keep the first c records per pair only
        agg.samples.check_first(gamma)
    py, pz = _pair_sums(lattice, gamma)
    G = agg.n_grids
    g = agg.pair_grid
    wide = gamma.size * int(c) * max(lattice.half_sum, lattice.half_sumsq) >= 2**63  # a size bound, not a refusal
    return BoundedGrids(
        gamma=gamma,
        records=_grid_sum(g, gamma, G),
        users=_grid_sum(g, (gamma > 0).astype(np.int64), G),
        sum_q=_grid_sum(g, py, G, wide=wide),
        sumsq_q=_grid_sum(g, pz, G, wide=wide),
        k=int(k),
        c=int(c),
        lam=lattice.lam,
    )


def _grid_sum(grid: np.ndarray, values: np.ndarray, n_grids: int, *, wide: bool = False) -> np.ndarray:
    """Exact per-grid sums: int64, or Python ints (object array) when ``wide``."""
    if wide:
        out = np.zeros(n_grids, dtype=object)
        np.add.at(out, grid, values.astype(object))
        return out
    out = np.zeros(n_grids, dtype=np.int64)
    np.add.at(out, grid, values.astype(np.int64))
    return out
