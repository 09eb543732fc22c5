"""A per-user cap on records, spread over the user's grids in proportion (models/hierarchy.md §14).

The ``place`` release measures one coarse level (every H3 cell of the finest resolution over the
whole period) and the map. There a user's ℓ1 influence is what matters, not how it splits over
nodes, so instead of "≤ k grids × ≤ c records" each user keeps **at most T records in total**,
chosen by **systematic sampling** over its own records:

* user ℓ's eligible pairs (listed finest grids) are put in an i.i.d. uniformly random order (one
  64-bit key per pair from the release's integer source, :func:`.bounding.tie_keys`), with
  cumulative record counts 0 = C_0 < C_1 < … < C_P = n_ℓ;
* the user's records are numbered k = 0 … n_ℓ − 1 in that pair order (each pair's records in
  :class:`dpopt.records.aggregate.PairSamples` order; n_ℓ counts the records the contributions
  stored, at most ``first_records`` per pair);
* one uniform offset u_ℓ ∈ [0, 1) per user (from the same source); the T points
  (j + u_ℓ)·n_ℓ/T, j = 0 … T−1, are spaced n_ℓ/T ≥ 1 apart, and record k is kept when a point
  falls in [k, k + 1), i.e. N(k + 1) > N(k) with N(x) = min(⌈x·T/n_ℓ − u_ℓ⌉, T);
* users with n_ℓ ≤ T keep every record.

Records, not "the first Γ_p of each pair": at T = 16 the first record of a pair (where a bus
enters a cell) biased the Austin day's map by up to 4 km/h.

So E[Γ_p] = T·m_p/n_ℓ: a pair keeps its share of the user's records, unlike "the first c records
of a pair", which drops the records of dwelling vehicles (slow) and biased coarse means by up to
+8 km/h on the Austin day (:func:`dpopt.privacy.user.strategies.adaptive.coarse_record_floor`).

**Invariants (enforced, not assumed):** 0 ≤ Γ_p ≤ m_p, and Σ_p Γ_p ≤ T for every user (at most
one point per record; N telescopes to ≤ T), = min(T, n_ℓ) up to floating-point rounding. The rule
reads only the user's own records and its own i.i.d. keys, so every other user's kept records have
the same law with or without user ℓ; adding or removing ℓ moves a level's vector of node counts by
Σ_p Γ_p ≤ T in ℓ1 and in ℓ2 (worst case: all in one node), its centred sums by ≤ T·H_Y and
T·H_Z. Checked by brute force in tests/hierarchy/test_place.py (``test_cap_invariants``,
``test_capped_level_sensitivity_one_user``, ``test_cap_keeps_the_records_of_the_definition``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._validation import DpoptInputError, check_positive_int
from ...noise import IntegerSource
from ...records.aggregate import Aggregate
from .bounding import tie_keys

__all__ = ["capped_records"]

_TWO_64 = float(2**64)


def capped_records(agg: Aggregate, eligible: np.ndarray, cap: int, source: IntegerSource | np.random.Generator,
                   lattice: Any = None, *, record_kept: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """The records kept under a per-user cap of ``cap`` records (module doc): per pair Γ_p (0 for
    pairs not ``eligible``) and, with ``lattice``, the exact int64 sums of the kept records' lattice
    terms y and z per pair (else None).

    Parameters
    ----------
    agg : Aggregate
        The contributions, with samples (each pair's stored records).
    eligible : np.ndarray
        One boolean per pair: pairs of listed grids.
    cap : int
        T, the most records a user keeps in total (public).
    source : IntegerSource or numpy.random.Generator
        The release's integer source (OS CSPRNG for a real release) or a Generator (simulation).
    lattice : LatticeValues, optional
        Per-record lattice terms (:func:`dpopt.privacy.user.bounding.lattice_values`).
    record_kept : np.ndarray, optional
        Output: one boolean per stored record (:class:`PairSamples` order), set True where the
        record is kept (the caller's array, all False on entry).
    """
    T = check_positive_int(cap, "cap")
    if agg.samples is None:
        raise DpoptInputError("the record cap reads each user's records: build the contributions with samples")
    ok = np.asarray(eligible, dtype=bool)
    offsets = np.asarray(agg.samples.offsets, dtype=np.int64)
    m = np.where(ok, np.diff(offsets), 0)
    users = agg.pair_user.astype(np.int64)
    order = np.lexsort((tie_keys(source, agg.n_pairs), users))
    cum = np.cumsum(m[order])
    first = np.searchsorted(users[order], users[order], side="left")
    before = np.empty(agg.n_pairs, dtype=np.int64)   # the pair's first position in its user's sequence
    before[order] = cum - m[order] - np.where(first > 0, cum[np.maximum(first - 1, 0)], 0)
    n_user = np.bincount(users, weights=m, minlength=agg.n_users).astype(np.int64)
    offset = tie_keys(source, agg.n_users).astype(np.float64) / _TWO_64  # u_ℓ in [0, 1)
    gamma = np.zeros(agg.n_pairs, dtype=np.int64)
    sums = None if lattice is None else (np.zeros(agg.n_pairs, dtype=np.int64), np.zeros(agg.n_pairs, dtype=np.int64))
    seq = _Sequences(offsets=offsets, eligible=ok, users=users, before=before, n_user=n_user, offset=offset, cap=T)
    for p0, p1 in _pair_blocks(offsets):  # memory O(block), not O(records)
        owner, idx = _kept_records(seq, p0, p1)
        np.add.at(gamma, owner, 1)
        if record_kept is not None:
            record_kept[idx] = True
        if sums is not None:  # exact int64: a pair's sum is ≤ its stored records × H, which the lattice's
            for out, terms in zip(sums, (lattice.y, lattice.z)):  # capacity check bounds below 2^62
                np.add.at(out, owner, terms[idx])
    return gamma, *(sums if sums is not None else (None, None))


#: records handled per block (per-record temporaries are O(block))
BLOCK_RECORDS = 1 << 22


def _pair_blocks(offsets: np.ndarray) -> list[tuple[int, int]]:
    """Consecutive pair ranges [p0, p1) holding about :data:`BLOCK_RECORDS` stored records each."""
    P = offsets.size - 1
    cuts = np.searchsorted(offsets, np.arange(BLOCK_RECORDS, int(offsets[-1]), BLOCK_RECORDS), side="right") - 1
    edges = np.unique(np.concatenate([[0], np.clip(cuts, 0, P), [P]]))
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


@dataclass(frozen=True)
class _Sequences:
    """Every user's sequence of records (module doc), what each block of pairs reads.

    Attributes
    ----------
    offsets : np.ndarray
        The samples' offsets: pair p's stored records are ``offsets[p]`` … ``offsets[p + 1]`` − 1.
    eligible : np.ndarray
        One boolean per pair: pairs of listed grids.
    users : np.ndarray
        The user of every pair (int64).
    before : np.ndarray
        Every pair's first position in its user's sequence.
    n_user : np.ndarray
        n_ℓ, the eligible records of every user.
    offset : np.ndarray
        u_ℓ ∈ [0, 1), every user's offset.
    cap : int
        T, the most records a user keeps.
    """

    offsets: np.ndarray
    eligible: np.ndarray
    users: np.ndarray
    before: np.ndarray
    n_user: np.ndarray
    offset: np.ndarray
    cap: int


def _kept_records(seq: _Sequences, p0: int, p1: int) -> tuple[np.ndarray, np.ndarray]:
    """(pair, record index) of the kept records of pairs p0 … p1 − 1 (module doc): record k of its
    user's sequence is kept when N(k + 1) > N(k), N(x) = min(⌈x·T/n − u⌉, T) ≥ 0; all of it when n ≤ T."""
    offsets, ok, users, before, n_user, offset, T = (seq.offsets, seq.eligible, seq.users, seq.before, seq.n_user,
                                                     seq.offset, seq.cap)
    lo, hi = int(offsets[p0]), int(offsets[p1])
    owner = p0 + np.repeat(np.arange(p1 - p0), np.diff(offsets[p0:p1 + 1]))
    pos = (before[owner] + np.arange(lo, hi) - offsets[owner]).astype(np.float64)  # k, 0 … n_ℓ − 1
    n = n_user[users[owner]].astype(np.float64)
    u = offset[users[owner]]
    scale = T / np.maximum(n, 1.0)
    below = np.clip(np.ceil(pos * scale - u), 0, T)
    above = np.clip(np.ceil((pos + 1.0) * scale - u), 0, T)
    keep = ok[owner] & ((n <= T) | (above > below))
    return owner[keep], np.arange(lo, hi)[keep]
