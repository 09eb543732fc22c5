"""Records -> occupancy array and per (user, grid) sufficient statistics (seed 002 §II-C).

For every pair (ℓ, g) with m_{g,ℓ} > 0 the aggregate keeps the count m_{g,ℓ}, the sum Σ_j S^{(j)}
and the sum of squares Σ_j (S^{(j)})². They are all a release needs when a plan keeps or suppresses
whole pairs (BASELINE, CLIP-USER, the MILP): the CLIP estimates (6)-(7) of a grid are

    μ_clip = S1/R,   Var_clip = S2/R − μ_clip²,   R = Σ_ℓ Γ_ℓ,  S1, S2 the retained sums.

Pseudo-user clipping (seed 002 §V-B3) keeps the *first* Γ̄_{g,ℓ} = min(Γ_{g,ℓ}, m_g) samples of a
user in a grid; "first" is in the samples' order: by keyed sample key (ties by value), a uniform
sample (:mod:`dpopt.records.sample_key`), in tables built by :func:`dpopt.records.contributions`
(``first_records``) or by a second pass (:func:`dpopt.records.kept_records`, the truncated pairs
only); by timestamp (ties by value) in a table built by hand (:func:`finalize`). The privacy
argument holds for any rule that picks a user's retained samples from that user's own records (the
sensitivities (9) and Lemma III.3 are worst cases over all values of the changed user's Γ_ℓ
retained samples). The table is built by :func:`dpopt.records.contributions`; :func:`finalize`
builds one by hand from a pair table (tests, small examples).

Grids are ordered by (slot, cell) and users by label, so every back-end numbers them alike.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from .._validation import DpoptInputError
from .grid import cell_strings, slot_strings

__all__ = ["PairSamples", "Aggregate", "RetainedStats", "finalize", "prefix_sums"]

@dataclass(frozen=True)
class PairSamples:
    """Samples of every pair: pair p owns ``values[offsets[p]:offsets[p+1]]``: all its records, the
    min(m_p, ``limit``) with the smallest sample keys (``contributions(first_records=limit)``), or as
    many as asked of ``kept_records``. Ordered by (pair, key, value) with ``keys`` (uint64, aligned
    with ``values``) when read by :mod:`dpopt.records`; by (pair, timestamp, value) in a table built
    by hand (``keys`` None)."""

    values: np.ndarray
    offsets: np.ndarray
    limit: int | None = None
    keys: np.ndarray | None = None

    def check_first(self, gamma: np.ndarray) -> None:
        """Refuse reading the first ``gamma[p]`` records of pair p when fewer were kept."""
        gamma = np.asarray(gamma, dtype=np.int64)
        short = gamma > np.diff(self.offsets)
        if np.any(short):  # a caller's error; the message names only the public limit (no record count)
            raise DpoptInputError(
                f"the contributions keep at most {self.limit} records per pair, fewer than the bounding "
                "asks for: use first_records >= c in dpopt.records.contributions (or dpopt.records.kept_records)"
            )


@dataclass(frozen=True)
class RetainedStats:
    """Per-grid statistics of the retained samples (Γ_{g,ℓ} per pair).

    ``retained`` R_g = Σ_ℓ Γ_{g,ℓ}; ``retained_max`` Γ*_g; ``sum``/``sumsq`` the retained S1, S2;
    ``users`` number of users with Γ_{g,ℓ} > 0.
    """

    retained: np.ndarray
    retained_max: np.ndarray
    sum: np.ndarray
    sumsq: np.ndarray
    users: np.ndarray


@dataclass(frozen=True)
class Aggregate:
    """Occupancy array and sufficient statistics of the records.

    Attributes
    ----------
    users : object array (L,) of user labels (str), sorted.
    cells, slots : int64 arrays (G,): H3 cell index and slot start (ns since epoch, UTC) of grid g.
    pair_user, pair_grid : int64 arrays (P,): indices of each non-zero (user, grid) pair,
        sorted by (grid, user).
    count, sum, sumsq : per-pair m_{g,ℓ} (int64), Σ S and Σ S² (float64).
    h3_resolution, slot_ns : the gridding.
    samples : per-pair ordered samples, or None.
    bound : the U every value was brought into [0, U] with at ingestion (None: not known, e.g. an
        aggregate built by hand); a release must use this U.
    out_of_range : the policy ("clip" | "drop" | "error") that brought the values into [0, U].
    lower : the L subtracted from every value at ingestion (0: none): the table holds x − L, so the
        records' values lie in [lower, lower + bound] and a published mean is L + the table's mean
        (variances and error bounds are unchanged by the shift).
    timezone : the IANA zone whose wall clock ``slots`` count (:func:`dpopt.records.grid.time_slots`),
        or None: UTC.
    """

    users: np.ndarray
    cells: np.ndarray
    slots: np.ndarray
    pair_user: np.ndarray
    pair_grid: np.ndarray
    count: np.ndarray
    sum: np.ndarray
    sumsq: np.ndarray
    h3_resolution: int
    slot_ns: int
    samples: PairSamples | None = None
    bound: float | None = None
    out_of_range: str | None = None
    timezone: str | None = None
    lower: float = 0.0

    @property
    def n_users(self) -> int:
        """L, the number of users."""
        return int(self.users.shape[0])

    @property
    def n_grids(self) -> int:
        """G, the number of occupied grids."""
        return int(self.cells.shape[0])

    @property
    def n_pairs(self) -> int:
        """Occupied (user, grid) pairs."""
        return int(self.count.shape[0])

    @property
    def n_records(self) -> int:
        """Records aggregated (Σ m_{g,ℓ})."""
        return int(self.count.sum())

    def grid_records(self) -> np.ndarray:
        """N_g = Σ_ℓ m_{g,ℓ} per grid."""
        return np.bincount(self.pair_grid, weights=self.count, minlength=self.n_grids).astype(np.int64)

    def grid_users(self) -> np.ndarray:
        """L_g = |{ℓ : m_{g,ℓ} > 0}| per grid."""
        return np.bincount(self.pair_grid, minlength=self.n_grids).astype(np.int64)

    def user_grids(self) -> np.ndarray:
        """G_ℓ = |{g : m_{g,ℓ} > 0}| per user."""
        return np.bincount(self.pair_user, minlength=self.n_users).astype(np.int64)

    def grid_labels(self) -> tuple[np.ndarray, np.ndarray]:
        """(H3 strings, ISO slot strings) of each grid."""
        return cell_strings(self.cells), slot_strings(self.slots)

    def occupancy(self) -> Any:
        """The occupancy array A (users × grids) as :class:`dpopt.Occupancy`, labelled by the
        integer user and grid indices of this aggregate."""
        from ..occupancy import Occupancy

        return Occupancy.from_triples(self.pair_user, self.pair_grid, self.count)

    def retained_stats(
        self,
        gamma: np.ndarray,
        *,
        truncated_sums: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> RetainedStats:
        """Per-grid statistics when pair p keeps its first ``gamma[p]`` samples.

        Pairs with ``gamma == count`` use the pair sums, pairs with ``gamma == 0`` nothing; pairs
        with 0 < gamma < count (pseudo-user truncation) need :attr:`samples`, or their retained
        (sum, sumsq) in ``truncated_sums`` (in the order of those pairs).
        """
        gamma = np.asarray(gamma, dtype=np.int64)
        if gamma.shape != self.count.shape or np.any(gamma < 0) or np.any(gamma > self.count):
            raise DpoptInputError("`gamma` must hold one integer in 0..count per pair")
        full = gamma == self.count
        part = (gamma > 0) & ~full
        s1 = np.where(full, self.sum, 0.0)
        s2 = np.where(full, self.sumsq, 0.0)
        if np.any(part):
            idx = np.flatnonzero(part)
            if truncated_sums is not None:
                t1, t2 = (np.asarray(a, dtype=float) for a in truncated_sums)
                if t1.shape != idx.shape or t2.shape != idx.shape:
                    raise DpoptInputError("`truncated_sums` must give one (sum, sumsq) per truncated pair")
            elif self.samples is None:
                raise DpoptInputError(
                    "pseudo-user truncation needs the per-pair samples: aggregate with keep_samples=True"
                )
            else:
                self.samples.check_first(np.where(part, gamma, 0))
                t1, t2 = prefix_sums(self.samples, idx, gamma[idx])
            s1[idx] = t1
            s2[idx] = t2
        G = self.n_grids
        g = self.pair_grid
        R = np.bincount(g, weights=gamma, minlength=G).astype(np.int64)
        rmax = np.zeros(G, dtype=np.int64)
        np.maximum.at(rmax, g, gamma)
        users = np.bincount(g, weights=(gamma > 0), minlength=G).astype(np.int64)
        return RetainedStats(
            retained=R,
            retained_max=rmax,
            sum=np.bincount(g, weights=s1, minlength=G),
            sumsq=np.bincount(g, weights=s2, minlength=G),
            users=users,
        )


def prefix_sums(samples: PairSamples, pairs: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Σ and Σ² of the first keep[i] samples of pair pairs[i] (vectorised)."""
    keep = np.asarray(keep, dtype=np.int64)
    starts = samples.offsets[pairs]
    total = int(keep.sum())
    owner = np.repeat(np.arange(pairs.size), keep)
    # position within the pair: 0..keep-1
    first = np.cumsum(keep) - keep
    within = np.arange(total) - np.repeat(first, keep)
    vals = samples.values[np.repeat(starts, keep) + within]
    return (
        np.bincount(owner, weights=vals, minlength=pairs.size),
        np.bincount(owner, weights=vals * vals, minlength=pairs.size),
    )


# ----------------------------------------------------------------------------------------------
# building


def finalize(
    pairs: pd.DataFrame,
    *,
    h3_resolution: int,
    slot_ns: int,
    samples: pd.DataFrame | None = None,
    bound: float | None = None,
    out_of_range: str | None = None,
) -> Aggregate:
    """Number users and grids and sort pairs by (grid, user); attach ordered samples if given.

    ``bound`` and ``out_of_range``: the U and policy the values were cleaned with (kept on the
    aggregate so that the release uses the same U)."""
    if len(pairs) == 0:
        raise DpoptInputError("`records` hold no valid record after cleaning (nothing to release)")
    user_lab = pairs["user"].astype(str).to_numpy(dtype=object)
    users, u_idx = np.unique(user_lab, return_inverse=True)
    cell = pairs["cell"].to_numpy(dtype=np.int64)
    slot = pairs["slot"].to_numpy(dtype=np.int64)
    grid_keys = pd.MultiIndex.from_arrays([slot, cell]).unique().sort_values()
    g_idx = grid_keys.get_indexer(pd.MultiIndex.from_arrays([slot, cell]))
    order = np.lexsort((u_idx, g_idx))
    agg = Aggregate(
        users=users.astype(object),
        cells=np.asarray(grid_keys.get_level_values(1), dtype=np.int64),
        slots=np.asarray(grid_keys.get_level_values(0), dtype=np.int64),
        pair_user=u_idx[order].astype(np.int64),
        pair_grid=g_idx[order].astype(np.int64),
        count=pairs["count"].to_numpy(dtype=np.int64)[order],
        sum=pairs["sum"].to_numpy(dtype=float)[order],
        sumsq=pairs["sumsq"].to_numpy(dtype=float)[order],
        h3_resolution=int(h3_resolution),
        slot_ns=int(slot_ns),
        bound=None if bound is None else float(bound),
        out_of_range=out_of_range,
    )
    if samples is None:
        return agg
    return _attach_samples(agg, samples)


def pair_index(agg: Aggregate, user: np.ndarray, cell: np.ndarray, slot: np.ndarray) -> np.ndarray:
    """Index of the pair of each (user label, cell, slot) in ``agg`` (all must exist)."""
    u = np.searchsorted(agg.users, np.asarray(user, dtype=object))
    grid_keys = pd.MultiIndex.from_arrays([agg.slots, agg.cells])
    g = grid_keys.get_indexer(pd.MultiIndex.from_arrays([np.asarray(slot, np.int64), np.asarray(cell, np.int64)]))
    # pairs are sorted by (grid, user): key = g * L + u is increasing
    pk = agg.pair_grid * agg.n_users + agg.pair_user
    return np.searchsorted(pk, g.astype(np.int64) * agg.n_users + u)


def _attach_samples(agg: Aggregate, samples: pd.DataFrame) -> Aggregate:
    p = pair_index(agg, samples["user"].to_numpy(dtype=object), samples["cell"].to_numpy(),
                   samples["slot"].to_numpy())
    ts = samples["timestamp"].to_numpy(dtype=np.int64)
    val = samples["value"].to_numpy(dtype=float)
    if not np.isfinite(val).all():  # ingestion drops them; a hand-built aggregate must too (clipping keeps NaN)
        raise DpoptInputError("`samples` column 'value' must be finite (NaN or ±inf found): drop those records "
                              "before building the contributions")
    order = np.lexsort((val, ts, p))
    offsets = np.zeros(agg.n_pairs + 1, dtype=np.int64)
    np.cumsum(agg.count, out=offsets[1:])
    if offsets[-1] != val.size:  # pragma: no cover - internal consistency
        raise RuntimeError("samples do not match the pair counts")
    return replace(agg, samples=PairSamples(values=val[order], offsets=offsets))


#: the former private name (imported by dpopt/privacy/hierarchy_release.py)
_prefix_sums = prefix_sums
