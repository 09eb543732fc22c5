"""Shared public priority for contribution bounding (models/user_level.md §11.3).

Today's rule (:func:`dpopt.privacy.user.bounding.grid_ranks`) lets each user keep its own top-k grids by
record count, so under private partition selection the users of a grid are spread over different
grids and few grids reach the threshold. Here every user ranks its grids by ONE public order of
grid keys instead (the idea of OpenDP's truncation in a public order): user ℓ keeps its k grids
that come first in the order, so users who share grids pile their counts onto the same grids.

* :func:`hash_priority` — a public pseudo-random order: a keyed 64-bit mix (SplitMix64 finaliser)
  of the grid key (H3 cell, slot start) and a public ``salt``;
* :func:`coarse_first_priority` — grids ordered by a public hash of their coarse parent node
  (H3 parent at ``parent_resolution``, slot floored to ``parent_slot``) first, then by their own
  hash: the users of one coarse node keep the same finest grids;
* :func:`priority_ranks` — per-pair ranks for a grid priority, compatible with
  ``bounding.bound_contributions(agg, k=, c=, ranks=, lattice=)`` (rank 0 first, −1 never kept).

Privacy: the priority of a grid is a function of its public key only, never of the data, and a
user's ranks are a sort of its own grids by that key (ties, impossible for distinct keys of a
64-bit mix except by collision, by grid key). Adding or removing a user therefore changes no
other user's kept set (no random keys are even needed), so the ≤ k pairs of ≤ c records argument
of models/user_level.md §2–3 holds unchanged and every sensitivity stays as stated.
"""

from __future__ import annotations

import h3
import numpy as np

from ..._validation import DpoptInputError, check_positive_int
from ...records.aggregate import Aggregate
from .bounding import pair_mask, user_ranks

__all__ = ["hash_priority", "coarse_first_priority", "priority_ranks"]

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser (Steele, Lea & Flood 2014), a bijection of uint64."""
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def _key_hash(cells: np.ndarray, slots: np.ndarray, salt: int) -> np.ndarray:
    c = np.asarray(cells, dtype=np.int64).view(np.uint64)
    s = np.asarray(slots, dtype=np.int64).view(np.uint64)
    with np.errstate(over="ignore"):
        return _mix(_mix(c ^ np.uint64(salt & (2**64 - 1))) + _GOLD * (s + np.uint64(1)))


def hash_priority(agg: Aggregate, *, salt: int = 0) -> np.ndarray:
    """Public priority (uint64, smaller first) of every grid of ``agg``: a hash of its key."""
    return _key_hash(agg.cells, agg.slots, int(salt))


def coarse_first_priority(agg: Aggregate, *, parent_resolution: int, parent_slot_ns: int,
                          salt: int = 0) -> np.ndarray:
    """Public priority (float ranks, smaller first): the hash of the grid's coarse parent node
    (H3 parent at ``parent_resolution`` ≤ the grid's, slot floored to a multiple of
    ``parent_slot_ns``), then the grid's own hash."""
    r = check_positive_int(parent_resolution, "parent_resolution", minimum=0)
    if r > agg.h3_resolution:
        raise DpoptInputError(
            f"`parent_resolution` must be ≤ the grid resolution {agg.h3_resolution}; got {parent_resolution!r}")
    ps = check_positive_int(parent_slot_ns, "parent_slot_ns")
    uniq, inv = np.unique(agg.cells, return_inverse=True)
    parents = np.asarray([h3.str_to_int(h3.cell_to_parent(h3.int_to_str(int(c)), r)) for c in uniq],
                         dtype=np.int64)[inv]
    coarse = _key_hash(parents, (agg.slots // ps) * ps, int(salt))
    fine = _key_hash(agg.cells, agg.slots, int(salt) + 1)
    order = np.lexsort((fine, coarse))
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    return rank


def priority_ranks(agg: Aggregate, priority: np.ndarray, *, mask: np.ndarray | None = None) -> np.ndarray:
    """Rank (0 = first) of every pair among its user's pairs by the public ``priority`` of its grid
    (one value per grid, smaller first; ties by grid index); pairs outside ``mask`` get −1."""
    pr = np.asarray(priority)
    if pr.shape != (agg.n_grids,):
        raise DpoptInputError(f"`priority` must hold one value per grid ({agg.n_grids}); got shape {pr.shape}")
    ok = pair_mask(agg, mask)
    grid_order = np.empty(agg.n_grids, dtype=np.int64)
    grid_order[np.lexsort((np.arange(agg.n_grids), pr))] = np.arange(agg.n_grids)
    return user_ranks(agg, ok, (grid_order[agg.pair_grid],))
