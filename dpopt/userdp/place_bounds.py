"""The two public parameters of the ``place`` release chosen under DP (models/hierarchy.md §13.2).

ε_b buys two DP quantiles over users (2/3 and 1/3 of ε_b, basic composition: ε_b), each by
:func:`dpopt.userdp.bounds.private_quantile`: permute-and-flip over public candidates with the rank
utility −|#{users with value ≤ v} − q·n|, which one added or removed user moves by ≤ 1 (the
"quantile" bounds rule's mechanism, models/user_level.md §6; exact, the release's integer source).
Each user contributes one number computed from its own records only:

* **records per user** n_ℓ (eligible records, the user's listed grids), candidates the public
  powers of four 16 … 4096: the cap T is the DP **median**, with a public tilt toward smaller
  candidates (each step up costs 2·ln 4/ε_T of utility: at equal rank utility a factor 4 of
  probability; without it, on the Austin day at ε = 1, 1 run in 30 drew T = 4096, beyond every user,
  and erred by 19 km/h; a small T costs little since the cap samples records evenly). A larger T keeps more of the heavy
  users' records: less re-weighting and less subsampling of the cells (noise-free, the full Austin
  data's finest grids are answered at 3.65 km/h with T = 256, against 2.1 with every record) at a
  higher relative noise (models/hierarchy.md §13.1); chosen among the 25th, 50th and 75th
  percentiles on the benchmark;
* **a user's own 99th percentile** of its values, rounded up to the public steps U·j/16
  (j = 1 … 16): the inner clamp B is the DP **75th percentile** over users (chosen against the 90th
  on the benchmark: B ≈ 60–82 instead of 67–97 km/h), never below U/2
  (a public floor: at small ε_b the quantile wanders, and a B too low biases every mean). Values are
  measured clamped to [0, B]: the centred sums' sensitivity is B/2 instead of U/2 and the count's
  noise is multiplied by |mean − B/2| instead of |mean − U/2| (41 km/h on the Austin buses), so
  the noise of a mean falls about 2.5× where B ≈ U/2 (equivalent to 2.5× the budget). The price is
  a one-sided bias −E[(x − B)⁺] per node: on the Austin day at B = 60 km/h, 0.0 km/h median and
  0.18 p90 over the grids with ≥ 10 users (0.61 p90 on the full data), measured in
  tests/benchmarks/results/multires.md.

Everything after the two selections is post-processing (no further budget).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._validation import DpoptInputError, check_bound, check_epsilon
from ..noise.sources import IntegerSource
from ..records.aggregate import Aggregate
from .bounds import private_quantile

__all__ = ["PlaceBounds", "choose_place_bounds", "user_statistics", "RECORD_EDGES", "CLAMP_STEPS"]

#: public candidates of the record cap T: 16, 64, 256, 1024, 4096 (powers of 4: few candidates keep
#: the DP quantile near its target at small ε_b; a user with more records keeps 4096 of them)
RECORD_EDGES = 4 ** np.arange(2, 7, dtype=np.int64)
#: the clamp candidates are U·j/CLAMP_STEPS, j = 1 … CLAMP_STEPS
CLAMP_STEPS = 16
#: quantile of records per user the cap T is set to, and its share of ε_b
CAP_USER_QUANTILE = 0.5
CAP_SHARE = 2.0 / 3.0
#: quantile of users' own 99th percentiles the clamp B is set to
CLAMP_USER_QUANTILE = 0.75
#: quantile of a user's own values that user votes for
CLAMP_VALUE_QUANTILE = 0.99


@dataclass(frozen=True)
class PlaceBounds:
    """``cap`` T (records per user), ``clamp`` B (values measured on [0, B]) and ``epsilon`` spent."""

    cap: int
    clamp: float
    epsilon: float


def user_statistics(agg: Aggregate, eligible: np.ndarray, U: float) -> tuple[np.ndarray, np.ndarray]:
    """Per user with an eligible record: its number of eligible records n_ℓ and its own 99th
    percentile in steps of U/16 (1 … 16). A function of the user's own records only."""
    ok = np.asarray(eligible, dtype=bool)
    n_user = np.bincount(agg.pair_user, weights=np.where(ok, agg.count, 0), minlength=agg.n_users)
    present = np.flatnonzero(n_user > 0)
    s = agg.samples
    owner = np.repeat(np.arange(agg.n_pairs), np.diff(s.offsets))
    keep = ok[owner]
    user = agg.pair_user[owner][keep]
    step = np.clip(np.ceil(np.clip(s.values[keep], 0.0, U) / (U / CLAMP_STEPS)).astype(np.int64), 1, CLAMP_STEPS) - 1
    counts = np.bincount(user * CLAMP_STEPS + step, minlength=agg.n_users * CLAMP_STEPS).reshape(agg.n_users, CLAMP_STEPS)
    cum = np.cumsum(counts, axis=1)
    own_q = np.argmax(cum >= CLAMP_VALUE_QUANTILE * np.maximum(cum[:, -1:], 1), axis=1) + 1
    return n_user[present].astype(np.int64), own_q[present]


def choose_place_bounds(agg: Aggregate, eligible: np.ndarray, epsilon: float, *, bound: float,
                        source: IntegerSource) -> PlaceBounds:
    """(T, B) of the ``place`` release from two ε/2-DP quantiles over users (module doc).

    Parameters
    ----------
    agg : Aggregate
        Contributions with samples (values clamped to [0, U] by ingestion).
    eligible : np.ndarray
        One boolean per pair: the pairs of listed grids (the public list).
    epsilon : float
        ε_b, spent in total on the two quantiles.
    bound : float
        U.
    source : IntegerSource
        The release's integer source (OS CSPRNG for a real release).
    """
    eps = check_epsilon(epsilon)
    U = check_bound(bound)
    if agg.samples is None:
        raise DpoptInputError("the place release reads each user's records: build the contributions with samples "
                              "(dpopt.privacy.contributions(..., first_records=c) or keep_samples=True)")
    n_user, own_q = user_statistics(agg, eligible, U)
    eps_cap = eps * CAP_SHARE
    # public tilt: each step up the candidates costs a factor 4 of probability at equal rank utility,
    # so the flat tail above the largest user (T ≫ n: noise × T/n) is not drawn at small ε
    tilt = 2.0 * math.log(4.0) / eps_cap * np.arange(RECORD_EDGES.size)
    cap = private_quantile(n_user, RECORD_EDGES, CAP_USER_QUANTILE, eps_cap, source, tilt=tilt)
    eps_clamp = eps - eps_cap  # exact (Sterbenz: eps/2 ≤ eps_cap ≤ eps), so the two pieces sum to ε_b
    steps = private_quantile(own_q, np.arange(1, CLAMP_STEPS + 1), CLAMP_USER_QUANTILE, eps_clamp, source)
    return PlaceBounds(cap=int(cap), clamp=U * max(int(steps), CLAMP_STEPS // 2) / CLAMP_STEPS, epsilon=eps)
