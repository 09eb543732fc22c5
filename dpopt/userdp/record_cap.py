"""A per-user cap on records, spread over the user's grids in proportion (models/hierarchy.md §13).

The ``place`` release measures one coarse level (every H3 cell of the finest resolution over the
whole period) and the map. There a user's ℓ1 influence is what matters, not how it splits over
nodes, so instead of "≤ k grids × ≤ c records" each user keeps **at most T records in total**,
chosen by **systematic sampling** over its own records:

* user ℓ's eligible pairs (listed finest grids) are put in an i.i.d. uniformly random order (one
  64-bit key per pair from the release's integer source, :func:`.bounding.tie_keys`), with
  cumulative record counts 0 = C_0 < C_1 < … < C_P = n_ℓ;
* one uniform offset u_ℓ ∈ [0, 1) per user (from the same source); the T points
  (j + u_ℓ)·n_ℓ/T, j = 0 … T−1, are spaced n_ℓ/T ≥ 1 apart, and pair p keeps
  Γ_p = N(C_p) − N(C_{p−1}) records, N(x) = min(⌈x·T/n_ℓ − u_ℓ⌉, T) the number of points below x;
* users with n_ℓ ≤ T keep every record; every pair keeps its first Γ_p records in
  :class:`dpopt.records.aggregate.PairSamples` order (at most what the contributions stored).

So E[Γ_p] = T·m_p/n_ℓ: a pair keeps its share of the user's records, unlike "the first c records
of a pair", which drops the records of dwelling vehicles (slow) and biased coarse means by up to
+8 km/h on the Austin day (:func:`dpopt.privacy.user_multires.coarse_record_floor`).

**Invariants (enforced, not assumed):** 0 ≤ Γ_p ≤ m_p and Σ_p Γ_p ≤ T for every user. The rule
reads only the user's own records and its own i.i.d. keys, so every other user's kept records have
the same law with or without user ℓ; adding or removing ℓ moves a level's vector of node counts by
Σ_p Γ_p ≤ T in ℓ1 and in ℓ2 (worst case: all in one node), its centred sums by ≤ T·H_Y and
T·H_Z. Checked by brute force in tests/userdp/test_record_cap.py.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_positive_int
from ..noise import IntegerSource
from ..records.aggregate import Aggregate
from .bounding import tie_keys

__all__ = ["capped_records"]

_TWO_64 = float(2**64)


def capped_records(agg: Aggregate, eligible: np.ndarray, cap: int,
                   source: IntegerSource | np.random.Generator) -> np.ndarray:
    """Γ_p, the records kept of every (user, grid) pair under a per-user cap of ``cap`` records
    (module doc); 0 for pairs not ``eligible``.

    Parameters
    ----------
    agg : Aggregate
        The contributions (pairs of users and grids with record counts ``agg.count``).
    eligible : np.ndarray
        One boolean per pair: pairs of listed grids.
    cap : int
        T, the most records a user keeps in total (public).
    source : IntegerSource or numpy.random.Generator
        The release's integer source (OS CSPRNG for a real release) or a Generator (simulation).
    """
    T = check_positive_int(cap, "cap")
    ok = np.asarray(eligible, dtype=bool)
    m = np.where(ok, agg.count.astype(np.int64), 0)
    users = agg.pair_user.astype(np.int64)
    order = np.lexsort((tie_keys(source, agg.n_pairs), users))
    u_sorted, m_sorted = users[order], m[order]
    n_user = np.bincount(users, weights=m, minlength=agg.n_users).astype(np.int64)
    offset = tie_keys(source, agg.n_users).astype(np.float64) / _TWO_64  # u_ℓ in [0, 1)
    cum = np.cumsum(m_sorted)
    first = np.searchsorted(u_sorted, u_sorted, side="left")
    before = np.where(first > 0, cum[np.maximum(first - 1, 0)], 0)
    hi = cum - before           # C_p within the user
    lo = hi - m_sorted          # C_{p-1}
    n = n_user[u_sorted].astype(np.float64)
    u = offset[u_sorted]

    def points_below(x: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            v = np.ceil(x * (T / np.maximum(n, 1.0)) - u)
        return np.clip(np.where(n > 0, v, 0.0), 0, T).astype(np.int64)

    sampled = np.minimum(points_below(hi.astype(np.float64)) - points_below(lo.astype(np.float64)), m_sorted)
    gamma_sorted = np.where(n_user[u_sorted] <= T, m_sorted, np.maximum(sampled, 0))
    gamma = np.empty(agg.n_pairs, dtype=np.int64)
    gamma[order] = gamma_sorted
    if agg.samples is not None:  # the contributions may hold only a pair's first records
        gamma = np.minimum(gamma, np.diff(agg.samples.offsets))
    return gamma
