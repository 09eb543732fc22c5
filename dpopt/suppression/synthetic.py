"""The synthetic heavy-hitter family of seed 002 (§VI-A2).

G grids and L = 2^G − 1 users indexed 1..L. User ℓ ∈ [2^j, 2^{j+1} − 1] occupies G − j grids
(j ∈ [0 : G−1]), chosen uniformly at random; each of its counts is Geo(q) on {1, 2, ...}; then in
every grid one user of largest count (the lowest index among ties) has its count scaled by (1 + γ).
"""

from __future__ import annotations

import numpy as np

from .._validation import DpoptInputError, check_positive_int
from ..occupancy import Occupancy

__all__ = ["heavy_hitter_occupancy"]


def heavy_hitter_occupancy(
    rng: np.random.Generator,
    *,
    n_grids: int = 12,
    q: float = 0.01,
    gamma: float = 3.0,
) -> Occupancy:
    """Draw one occupancy array of the paper's heavy-hitter family (seed 002 §VI-A2).

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of randomness (seed it for reproducible draws).
    n_grids : int
        G (the paper: 12). L = 2^G − 1 users; about G·2^G (user, grid) pairs.
    q : float
        Parameter of the geometric counts, in (0, 1] (the paper: 0.01, mean count 100).
    gamma : float
        Heavy-hitter scaling γ ≥ 0: the largest count of each grid becomes round((1 + γ)·m).

    Returns
    -------
    Occupancy
        Users labelled 1..L (so user 1 occupies all G grids), grids 0..G−1.
    """
    if not isinstance(rng, np.random.Generator):
        raise DpoptInputError(f"`rng` must be a numpy.random.Generator; got {type(rng).__name__}")
    G = check_positive_int(n_grids, "n_grids")
    if G > 24:
        raise DpoptInputError(f"`n_grids` must be at most 24 (L = 2^G − 1 users); got {G}")
    q = float(q)
    if not (0.0 < q <= 1.0):
        raise DpoptInputError(f"`q` must lie in (0, 1]; got {q}")
    gamma = float(gamma)
    if not (gamma >= 0.0) or not np.isfinite(gamma):
        raise DpoptInputError(f"`gamma` must be a finite number >= 0; got {gamma}")
    L = 2**G - 1
    users = np.arange(1, L + 1, dtype=np.int64)
    j = np.floor(np.log2(users)).astype(np.int64)
    k = G - j  # grids occupied by each user
    # a uniformly random k-subset per user: the first k grids of a random permutation
    perm = np.argsort(rng.random((L, G)), axis=1)
    take = np.arange(G)[None, :] < k[:, None]
    rows = np.broadcast_to(users[:, None], (L, G))[take]
    cols = perm[take]
    counts = rng.geometric(q, size=rows.size).astype(np.int64)
    # heavy hitter: in each grid the largest count (lowest user index among ties) × (1 + γ)
    order = np.lexsort((rows, -counts, cols))
    first = order[np.concatenate(([True], np.diff(cols[order]) != 0))]
    counts[first] = np.rint((1.0 + gamma) * counts[first]).astype(np.int64)
    return Occupancy.from_triples(rows, cols, counts)
