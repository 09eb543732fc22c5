"""The two public parameters of the ``place`` release chosen under DP (models/hierarchy.md §14.2).

ε_b is split 2/3 : 1/3 (exactly: the pieces sum to ε_b as rationals) between two measurements over
users, each user contributing one number computed from its own records only (its eligible
records: the pairs of the listed grids), so one added or removed user moves each by ≤ 1:

* **the cap T: a noisy histogram, then a predicted-error choice**. Users are
  binned by their number of records n_ℓ on the public powers of four, (0, 1], (1, 4], …,
  (1024, 4096], (4096, ∞) (every user in one bin: ℓ1 sensitivity 1), and the histogram is released
  with the exact discrete Laplace of scale 1/ε_T (:func:`measure_record_histogram`), denoised by
  :func:`record_counts` (bins a phantom reaches in ≤ 2 % of histograms). T is then chosen among the public candidates
  1, 4, 16, …, 4096 by post-processing (:func:`choose_cap`): a cell's noise is T·(1, B/2)/ε over its
  kept records π_c·S(T), S(T) = Σ_b h_b·min(r_b, T) (r_b the bin's public representative), so its
  predicted noise is proportional to T/S(T) whatever the cell's share π_c and ε; T is the **largest**
  candidate whose T/S(T) is within a factor 1 + ``CAP_NOISE_TOLERANCE`` (1.5) of the smallest. The
  larger T keeps more of the heavy users' records: less re-weighting and less subsampling of the
  cells (noise-free, the full Austin data's finest grids are answered at 3.65 km/h with T = 256,
  against 2.1 with every record), a cost the histogram cannot measure, so the rule buys it with at
  most 50 % more noise. Where the users hold far fewer records than a candidate, T/S(T) grows
  like T and that candidate is out: the flat tail a DP median draws (1 run in 30: T = 4096,
  19 km/h on the Austin day at ε = 1) cannot be chosen. The choice is a deterministic function of a
  histogram whose bins hold tens to hundreds of users, so it is stable: on the Austin sets over 20
  seeds T takes one value per (data, ε) in three settings and {1024: 19, 256: 1} in the fourth
  (tests/benchmarks/results/place_bounds.md), where a DP median took {16, 64, 256} at ε = 1 on
  the day. With fewer users than about 2·ln 8/ε_T the histogram is mostly noise and so is T
  (models/hierarchy.md §14.2).
* **the map's own cap T_map ≥ T, from the same histogram** (post-processing;
  :func:`choose_map_cap`): the map holds every kept record, so its noise is small where the
  cells' is not, and the cap's other cost dominates there: re-weighting, a capped mean weighing a
  heavy user like a light one (:func:`reweighting_distance` D(T), which bounds the bias by
  2·D(T)·max|μ_ℓ − μ|). T_map minimises √((κ·T/S(T))² + (τ₀·D(T))²) (:func:`map_cap_error`; κ the
  map's noise per unit T/S(T), τ₀ = U/20 the public spread of §14.3).
* **the clamp B: a noisy histogram, then its quantile, floored by what the histogram shows**
  (the same shape as T). Each user votes with its own 99th percentile in steps of U/16
  (:func:`clamp_votes`: 16 bins, U/16, 2U/16, …, U; every user in one bin, ℓ1 sensitivity 1); the
  histogram is released with the exact discrete Laplace of scale 1/ε_B
  (:func:`measure_clamp_histogram`); the bins whose noisy count clears
  ln(16/CLAMP_PHANTOM_RATE)/ε_B are kept and B is the larger of their **quantile q** and the
  **floor** min(U/2, the highest kept bin) (:func:`choose_clamp`; post-processing); U (no clamp)
  where no bin is kept, or where the kept bins hold fewer than half of the users the record
  histogram counts (:func:`shown_bins`: a lone bin that cleared the threshold by its noise is not
  every user). q (:func:`clamp_quantile`, post-processing of the cap's histogram) is the
  share of users whose vote lies below a B above which 1 % of the values lie, were every user's
  values drawn from one law — 0.99 where users hold one record each (their votes are their values),
  about one half where they hold hundreds — and at least 0.75, chosen against the 90th on the Austin
  buses (B ≈ 60–82 instead of 67–97 km/h), where users differ and the busiest quarter's tails are
  their real values. The floor is what keeps a heavy tail: a B too low biases every mean by −E[(x − B)⁺],
  so B drops below U/2 only where no group of users large enough to clear the noise has its 99th
  percentile above it; where one has (the buses: bins up to 90–120 km/h of U = 120; log-normal
  amounts at ε = 10), B stays at least U/2. At ε = 1 the noise hides bins of fewer than ≈ 130 users
  (ln(16/0.02)/ε_B at ε_B = 0.05), so the amounts' tail is not seen and B = 312–375 of 1000. Where the data sit low in a generous declared range
  (sensors reading 15–60 in [0, 200]: every kept bin at or below 62.5), B follows them: the noise of
  every mean scales with B, and a fixed floor U/2 measured those sensors at twice the noise their
  values need (models/engine.md §6). A DP quantile by permute-and-flip over the 16 steps at
  ε_B = ε_b/3 (0.05 at ε = 1) is not stable: with 146 users its rank utility hardly separates
  the steps, so B wandered over 60–120 km/h on the Austin day at ε = 1, and a run with B = 112.5
  erred 4.9 km/h against 3.6 at B = 60 (the count's noise enters a mean multiplied by |mean − B/2|).
  The denoised histogram keeps only the bins that hold tens of users, so its quantile is the
  quantile of where most users are: B = 60 on the day and 60–75 (mostly 67.5) on the full data at
  ε = 1 (tests/benchmarks/results/place_bounds.md). Values are measured clamped to [0, B]: the
  centred sums' sensitivity is B/2 instead of U/2 and the count's noise is multiplied by
  |mean − B/2| instead of |mean − U/2| (41 km/h on the Austin buses), so the noise of a mean falls
  about 2.5× where B ≈ U/2 (equivalent to 2.5× the budget). The price is a one-sided bias
  −E[(x − B)⁺] per node: on the Austin day at B = 60 km/h, 0.0 km/h median and 0.18 p90 over the
  grids with ≥ 10 users (0.61 p90 on the full data), measured in
  tests/benchmarks/results/multires.md.

Both measurements run on the release's integer source (the OS CSPRNG for a real release).
Everything after them is post-processing (no further budget).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy.stats import binom

from ...hierarchy.node_means import BETWEEN_SDS
from ..._validation import DpoptInputError, check_bound, check_epsilon, check_nonnegative_float, check_positive_int
from ...noise.sources import IntegerSource
from ...records.aggregate import Aggregate
from .bounding import CAPACITY, DEFAULT_GRANULARITY_BITS, check_lattice_capacity, lattice_capacity
from .bounds import bin_representatives
from ...noise.mechanism import user_histogram
from .predict import denoise_histogram, threshold_bins

__all__ = ["PlaceBounds", "choose_place_bounds", "clamp_shown", "shown_bins", "seen_users", "users_lower_end", "CLAMP_SHOWN_SHARE", "USERS_LOWER_SDS", "clamp_remeasure_side", "clamp_remeasure_epsilon", "remeasure_clamp", "clamp_fields", "choose_cap", "choose_clamp", "choose_low_clamp", "TWO_SIDED_CAP_SHARE", "clamp_quantile", "cap_candidates", "cap_noise_factor",
           "reweighting_distance", "unkept_share", "kept_under_cap", "map_cap_error", "choose_map_cap", "MAP_CAP_PHANTOM_RATE",
           "clamp_votes", "record_counts", "clamp_histogram_fields", "record_histogram_fields", "measure_clamp_histogram", "measure_record_histogram", "user_statistics", "RECORD_EDGES",
           "RECORD_BIN_EDGES", "CAP_NOISE_TOLERANCE", "CLAMP_STEPS", "CLAMP_FLOOR_STEP",
           "CLAMP_PHANTOM_RATE"]

#: upper edges of the bins of records per user: (0, 1], (1, 4], …, (1024, 4096], then (4096, ∞)
RECORD_BIN_EDGES = 4 ** np.arange(0, 7, dtype=np.int64)
#: public candidates of the record cap T: the bins' upper edges 1, 4, 16, …, 4096 (a user with more
#: records keeps 4096 of them). The small caps serve users with few records: where every user holds
#: one, T = 16 put sixteen times the noise a one-record user can cause on every sum and count; where
#: users hold hundreds, T/S(T) is flat below their counts and the rule's largest-within-tolerance
#: choice never picks them
RECORD_EDGES = RECORD_BIN_EDGES.copy()
#: T is the largest candidate whose predicted noise T/S(T) is ≤ (1 + this)× the smallest
CAP_NOISE_TOLERANCE = 0.5
#: share of ε_b spent on the histogram of records per user (the rest buys the clamp's quantile)
CAP_SHARE = 2.0 / 3.0
#: two-sided bounds (the engine): the cap's share of ε_b; the rest split evenly between the clamp B and
#: the lower clamp A (the mirror of one rule, so the same noise). Taken from the cap and B rather than
#: from the means: with ε_b raised to 0.2·ε instead (T and B at their one-sided 0.1·ε and 0.05·ε) the
#: release without a list (ε_b from the total, the means from half of it) lost 14 % of its means'
#: budget and its hour effect in two seeds of three (tests/release/test_engine_nolist.py: median
#: error 1.65 → 2.2); at 0.15·ε it is 1.44
TWO_SIDED_CAP_SHARE = 0.5
#: the clamp candidates are U·j/CLAMP_STEPS, j = 1 … CLAMP_STEPS
CLAMP_STEPS = 16
#: the clamp candidates' first step: bin i of the clamp histogram stands for B = U·(CLAMP_FLOOR_STEP + i)/CLAMP_STEPS
CLAMP_FLOOR_STEP = 1
#: the highest floor the kept bins can set: U·CLAMP_FALLBACK_STEP/CLAMP_STEPS = U/2 (B goes below U/2
#: only where no kept bin lies above it). Where no bin clears its threshold the histogram shows
#: nothing and B = U, the declared range: a clamp below it is a bias the intervals do not hold, and
#: without evidence of where the values lie it is a guess (U/2 here clamped 40 users' values of
#: 60–95 in [0, 100] to 50: every grid 50 ± 34, coverage 0.49–0.67; models/engine.md §6)
CLAMP_FALLBACK_STEP = CLAMP_STEPS // 2
#: a bin of the clamp histogram counts only where its noisy count is at least ln(#bins/this)/ε_B:
#: at most 2 histograms in 100 (about 1 at small ε) show a phantom bin (an empty bin above it)
CLAMP_PHANTOM_RATE = 0.02
#: the map cap's histogram keeps the bins a phantom reaches in ≤ 2 % of histograms, as the clamp's
MAP_CAP_PHANTOM_RATE = CLAMP_PHANTOM_RATE
#: the least quantile of users' own 99th percentiles the clamp B is set to (chosen against the 90th
#: on the Austin buses, where users hold hundreds of records; :func:`clamp_quantile` raises it where
#: users hold few)
CLAMP_USER_QUANTILE = 0.75
#: a clamp histogram shows the users only where its kept bins hold at least this share of the users
#: the record histogram counts (n̂; :func:`shown_bins`): a majority (the rule by which a marginal's
#: counts weigh the grids, :func:`dpopt.hierarchy.node_means.mostly_measured`; no statement about
#: data). Where fewer are seen, the unseen may vote anywhere in the range, and a clamp from the few
#: seen is a guess (the place-set sensors at ε = 1: one bin of ≈ 200 of 400 sensors cleared its
#: threshold by its noise, B = 50 against truths of 61, coverage 0.54; 7 of 200 releases below 0.90,
#: one at 0.0; models/engine.md §2)
CLAMP_SHOWN_SHARE = 0.5
#: the users that share is of are counted at the record histogram's lower end, this many noise sds
#: below its denoised count (:func:`users_lower_end`; the one-sided margin of the other DP lower ends)
USERS_LOWER_SDS = BETWEEN_SDS
#: quantile of a user's own values that user votes for
CLAMP_VALUE_QUANTILE = 0.99


@dataclass(frozen=True)
class PlaceBounds:
    """``cap`` T (records per user), ``clamp`` B (values measured on [0, B]) and ``epsilon`` spent;
    ``histogram`` the noisy bin counts of records per user (a DP output, bins ``RECORD_BIN_EDGES``)
    and ``cap_noise`` the predicted noise factor T/S(T) of each candidate (its post-processing;
    ``candidates`` those candidates, a prefix of ``RECORD_EDGES``); ``clamp_histogram`` the noisy
    bin counts of users' clamp votes (a DP output; bin i votes for B = U·(8 + i)/16);
    ``record_counts`` the histogram of records per user denoised (post-processing of ``histogram``,
    :func:`dpopt.privacy.user.predict.denoise_histogram`), from which T was chosen; two-sided
    (:func:`choose_place_bounds` ``two_sided``): ``clamp_low`` A < B, values measured on [A, B], and
    ``low_histogram`` the noisy bin counts of users' lower votes (bin i votes for A = U·(15 − i)/16;
    a DP output), else A = 0 and None."""

    cap: int
    clamp: float
    epsilon: float
    histogram: np.ndarray
    cap_noise: np.ndarray
    candidates: np.ndarray
    clamp_histogram: np.ndarray
    record_counts: np.ndarray | None = None
    clamp_low: float = 0.0
    low_histogram: np.ndarray | None = None
    #: ε of ``clamp_histogram`` (the histogram B was read from) and of ``low_histogram``
    clamp_epsilon: float = math.nan
    low_epsilon: float = math.nan
    #: where the first upper (lower) clamp histogram showed nothing and was measured again
    #: (:func:`remeasure_clamp`): that first histogram (a DP output, published beside the second) and
    #: its ε; else None and nan
    unseen_clamp_histogram: np.ndarray | None = None
    unseen_clamp_epsilon: float = math.nan
    unseen_low_histogram: np.ndarray | None = None
    unseen_low_epsilon: float = math.nan


def user_statistics(agg: Aggregate, eligible: np.ndarray, U: float, *, reflect: bool = False
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Per user with an eligible record: its number of eligible records n_ℓ and its own 99th
    percentile in steps of U/16 (1 … 16) — with ``reflect``, the 99th percentile of U − x, i.e. U
    less its own 1st percentile (the lower clamp's vote, :func:`choose_low_clamp`). A function of the
    user's own records only."""
    n_user, (own_q,) = _user_votes(agg, eligible, U, (reflect,))
    return n_user, own_q


def _user_votes(agg: Aggregate, eligible: np.ndarray, U: float, reflects: tuple[bool, ...]
                ) -> tuple[np.ndarray, list[np.ndarray]]:
    """:func:`user_statistics` for several votes in one pass over the records: n_ℓ and one own
    percentile step per entry of ``reflects`` (the upper vote for False, the lower for True)."""
    ok = np.asarray(eligible, dtype=bool)
    n_user = np.bincount(agg.pair_user, weights=np.where(ok, agg.count, 0), minlength=agg.n_users)
    present = np.flatnonzero(n_user > 0)
    s = agg.samples
    owner = np.repeat(np.arange(agg.n_pairs), np.diff(s.offsets))
    keep = ok[owner]
    user = agg.pair_user[owner][keep]
    x = np.clip(s.values[keep], 0.0, U)
    votes = []
    for reflect in reflects:
        step = np.clip(np.ceil((U - x if reflect else x) / (U / CLAMP_STEPS)).astype(np.int64), 1, CLAMP_STEPS) - 1
        counts = np.bincount(user * CLAMP_STEPS + step,
                             minlength=agg.n_users * CLAMP_STEPS).reshape(agg.n_users, CLAMP_STEPS)
        cum = np.cumsum(counts, axis=1)
        votes.append((np.argmax(cum >= CLAMP_VALUE_QUANTILE * np.maximum(cum[:, -1:], 1), axis=1) + 1)[present])
    return n_user[present].astype(np.int64), votes


def measure_record_histogram(n_user: np.ndarray, epsilon: float, source: IntegerSource) -> np.ndarray:
    """ε-DP histogram of users by records per user on ``RECORD_BIN_EDGES`` (bins (lo, hi], then the
    overflow): every user in one bin, so one added or removed user moves the counts by 1 in ℓ1;
    exact discrete Laplace of scale 1/ε per bin. Returns the noisy integer counts."""
    bins = np.searchsorted(RECORD_BIN_EDGES, np.asarray(n_user, dtype=np.int64), side="left")
    return user_histogram(bins, RECORD_BIN_EDGES.size + 1, epsilon, source)


def kept_under_cap(counts: np.ndarray, caps: np.ndarray) -> np.ndarray:
    """S(T) = Σ_b h_b·min(r_b, T) per cap T of ``caps``: the records kept under the cap when the h_b
    users of bin b (``counts``, the histogram of records per user) hold r_b records each
    (:func:`dpopt.privacy.user.bounds.bin_representatives` of ``RECORD_BIN_EDGES``)."""
    h = np.asarray(counts, dtype=float)
    if h.shape != (RECORD_BIN_EDGES.size + 1,):
        raise DpoptInputError(f"`counts` must hold {RECORD_BIN_EDGES.size + 1} bins (RECORD_BIN_EDGES and the "
                              f"overflow); got shape {h.shape}")
    T = np.atleast_1d(np.asarray(caps, dtype=float))
    return np.minimum(bin_representatives(RECORD_BIN_EDGES)[None, :], T[:, None]) @ h


def cap_noise_factor(counts: np.ndarray, candidates: np.ndarray = RECORD_EDGES) -> np.ndarray:
    """T/S(T) per candidate T, S(T) the records kept under the cap (:func:`kept_under_cap`): a cell's
    noise sd is proportional to it (module doc). ∞ where S(T) = 0."""
    T = np.asarray(candidates, dtype=float)
    kept = kept_under_cap(counts, T)
    with np.errstate(divide="ignore"):
        return np.where(kept > 0, T / np.where(kept > 0, kept, 1.0), np.inf)


def cap_candidates(bound: float, granularity_bits: int = DEFAULT_GRANULARITY_BITS) -> np.ndarray:
    """The candidates of ``RECORD_EDGES`` the lattice can hold at bound U: T·max(H_Y, H_Z) < 2^62
    (:data:`dpopt.privacy.user.bounding.CAPACITY`, :func:`~dpopt.privacy.user.bounding.lattice_capacity`).
    Public (U and b only), so computed before any data is read: a cap drawn from the data must never
    make the release refuse after budget was spent. Refuses (one line) when not even the smallest fits."""
    h = lattice_capacity(bound, granularity_bits)
    fits = RECORD_EDGES[[int(t) * h < CAPACITY for t in RECORD_EDGES]]  # Python ints: H may exceed int64
    if fits.size == 0:
        check_lattice_capacity(1, int(RECORD_EDGES[0]), bound, granularity_bits)  # raises its one-line error
    return fits


def choose_cap(counts: np.ndarray, tolerance: float = CAP_NOISE_TOLERANCE,
               candidates: np.ndarray = RECORD_EDGES) -> tuple[int, np.ndarray]:
    """The largest of ``candidates`` (a run of consecutive ``RECORD_EDGES``, :func:`cap_candidates`) whose
    :func:`cap_noise_factor` is within a factor 1 + ``tolerance`` of the smallest (the smallest
    candidate where the histogram is empty: nothing to measure, the least noise per user).
    Returns (T, factors)."""
    tol = check_nonnegative_float(tolerance, "tolerance")
    cand = np.asarray(candidates, dtype=np.int64)
    start = int(np.searchsorted(RECORD_EDGES, cand[0])) if cand.size else 0
    if cand.size == 0 or not np.array_equal(cand, RECORD_EDGES[start:start + cand.size]):
        raise DpoptInputError(f"`candidates` must be a non-empty run of consecutive {RECORD_EDGES.tolist()}; "
                              f"got {cand.tolist()}")
    f = cap_noise_factor(counts, cand)
    if not np.isfinite(f).any():
        return int(cand[0]), f
    ok = np.flatnonzero(f <= (1.0 + tol) * f.min())
    return int(cand[ok[-1]]), f


def reweighting_distance(counts: np.ndarray, candidates: np.ndarray = RECORD_EDGES) -> np.ndarray:
    """D(T) = ½·Σ_b h_b·|min(r_b, T)/S(T) − r_b/S(∞)| per candidate T: the total-variation distance
    between the records' weights in a capped mean (user ℓ's records weigh min(n_ℓ, T)/S(T) in all)
    and in the all-records mean (n_ℓ/S(∞)), with the h_b users of bin b holding r_b records each
    (:func:`dpopt.privacy.user.bounds.bin_representatives`). A capped node mean differs from the
    all-records one by Σ_ℓ (w_ℓ − v_ℓ)(μ_ℓ − μ), at most 2·D(T)·max_ℓ |μ_ℓ − μ| (models/hierarchy.md
    §14.2). 0 where no user holds more than T (or the histogram is empty)."""
    h = np.maximum(np.asarray(counts, dtype=float), 0.0)
    if h.shape != (RECORD_BIN_EDGES.size + 1,):
        raise DpoptInputError(f"`counts` must hold {RECORD_BIN_EDGES.size + 1} bins (RECORD_BIN_EDGES and the "
                              f"overflow); got shape {h.shape}")
    r = bin_representatives(RECORD_BIN_EDGES)
    T = np.asarray(candidates, dtype=float)
    kept = np.minimum(r[None, :], T[:, None])  # records each user of bin b keeps under cap T
    S, S_all = kept @ h, float(r @ h)
    if S_all <= 0:
        return np.zeros(T.size)
    return 0.5 * np.abs(kept / np.where(S > 0, S, 1.0)[:, None] - r[None, :] / S_all) @ h


def unkept_share(counts: np.ndarray, cap: int) -> float:
    """κ(T) = Σ_b h_b·k_b·(1 − k_b/r_b) / Σ_b h_b·k_b, k_b = min(r_b, T): over the records kept under
    the cap T, the mean share of their user's records that were not kept, with the h_b users of bin b
    holding r_b records each (:func:`dpopt.privacy.user.bounds.bin_representatives`). The cap keeps a
    uniform share k/r of a user's records, so a node's kept mean differs from the mean of all its
    records by sampling of variance ≈ κ·s²/m (m its kept records, s² their variance about the
    node's mean: the finite-population correction of the sample; models/engine.md §4). 0 where no
    user holds more than T; 1 (no correction known) where the histogram is empty. Post-processing of
    the DP histogram."""
    h = np.maximum(np.asarray(counts, dtype=float), 0.0)
    if h.shape != (RECORD_BIN_EDGES.size + 1,):
        raise DpoptInputError(f"`counts` must hold {RECORD_BIN_EDGES.size + 1} bins (RECORD_BIN_EDGES and the "
                              f"overflow); got shape {h.shape}")
    T = check_positive_int(cap, "cap")
    r = bin_representatives(RECORD_BIN_EDGES)
    k = np.minimum(r, float(T))
    kept = float(h @ k)
    return float(h @ (k * (1.0 - k / r)) / kept) if kept > 0 else 1.0


def map_cap_error(counts: np.ndarray, *, noise: float, spread: float,
                  candidates: np.ndarray = RECORD_EDGES) -> np.ndarray:
    """Predicted error of the map's mean per candidate cap T (value units):
    √((noise·T/S(T))² + (spread·D(T))²) — the noise sd of a node holding every kept record
    (:func:`cap_noise_factor` scaled by ``noise``, the sd of a direct mean per unit of T/S(T) at the
    map's budget) and the re-weighting bias :func:`reweighting_distance` times the public ``spread``
    of users' means. ∞ where S(T) = 0."""
    f = cap_noise_factor(counts, candidates)
    d = reweighting_distance(counts, candidates)
    return np.sqrt(np.square(check_nonnegative_float(noise, "noise") * f)
                   + np.square(check_nonnegative_float(spread, "spread") * d))


def choose_map_cap(noisy: np.ndarray, epsilon: float, cap: int, *, noise: float, spread: float,
                   candidates: np.ndarray = RECORD_EDGES) -> tuple[int, np.ndarray]:
    """The map's record cap T_map (models/hierarchy.md §14.2): the candidate, at least the cells'
    cap ``cap``, with the least :func:`map_cap_error` (ties: the smaller) on the ε-DP record
    histogram ``noisy`` with the bins under ln(#bins/MAP_CAP_PHANTOM_RATE)/ε zeroed
    (:func:`dpopt.privacy.user.predict.threshold_bins`: a phantom bin in ≤ 2 % of histograms; a phantom
    overflow bin of "users with 8,192 records" would make every cap look re-weighting); ``cap`` where
    no bin clears it. Post-processing of the histogram, the DP clamp (through ``noise``) and public
    facts. The map holds every kept record, so its noise is small where the cells' is not; there a
    cap that re-weights the heavy users costs more than the noise it saves (aircraft B at ε = 10:
    85.8 → 73.5 km/h). Returns (T_map, the predicted error of every candidate; ∞ below ``cap``)."""
    cand = np.asarray(candidates, dtype=np.int64)
    if cand.size == 0 or not np.array_equal(cand, RECORD_EDGES[:cand.size]) or int(cap) not in cand:
        raise DpoptInputError(f"`candidates` must be a non-empty prefix of {RECORD_EDGES.tolist()} holding `cap` = "
                              f"{cap!r}; got {cand.tolist()}")
    counts = threshold_bins(noisy, epsilon, MAP_CAP_PHANTOM_RATE)
    err = map_cap_error(counts, noise=noise, spread=spread, candidates=cand)
    err = np.where(cand >= int(cap), err, np.inf)
    if not np.isfinite(err).any():
        return int(cap), err
    return int(cand[int(np.argmin(err))]), err


def unseen_users(epsilon: float) -> float:
    """The fewest users a bin of the ε-DP histogram of records per user must hold for
    :func:`record_counts` to read it (the threshold ln(#bins/``MAP_CAP_PHANTOM_RATE``)/ε of
    :func:`dpopt.privacy.user.predict.threshold_bins`): a smaller group, e.g. a few users holding most
    of the records, is below the noise and the cap's statistics do not count it. Public (a function
    of ε)."""
    return math.log((RECORD_BIN_EDGES.size + 1) / MAP_CAP_PHANTOM_RATE) / check_epsilon(epsilon)


def record_counts(noisy: np.ndarray, epsilon: float) -> np.ndarray:
    """The histogram of records per user the cap, the clamp's quantile and the unkept share read:
    ``noisy`` (the ε-DP histogram) denoised with the bins a phantom reaches in at most
    ``MAP_CAP_PHANTOM_RATE`` of histograms kept (:func:`dpopt.privacy.user.predict.denoise_histogram`;
    the clamp's and the map cap's rule), its projection where none is. Why not one phantom in two
    histograms: the cap rule compares every T with the least noise factor, which is 1/N at T = 1
    (every user keeps a record), so a few dozen phantom users below 16 records lower that reference
    and exclude the large caps — at ε = 1 (200 draws) aircraft B took T = 256 instead of 1024 in 46
    draws and the full Austin data in 59; at this rate 3 and 6. Post-processing."""
    return denoise_histogram(noisy, epsilon, MAP_CAP_PHANTOM_RATE)


def clamp_votes(own_q: np.ndarray) -> np.ndarray:
    """Each user's clamp vote as a bin index 0 … CLAMP_STEPS − CLAMP_FLOOR_STEP: its own 99th
    percentile step (1 … 16, :func:`user_statistics`) minus the first step. Bin i stands for
    B = U·(CLAMP_FLOOR_STEP + i)/CLAMP_STEPS."""
    q = np.asarray(own_q, dtype=np.int64)
    if q.size and (q.min() < 1 or q.max() > CLAMP_STEPS):
        raise DpoptInputError(f"`own_q` must hold steps in 1 … {CLAMP_STEPS}; got {q.min()} … {q.max()}")
    return np.maximum(q, CLAMP_FLOOR_STEP) - CLAMP_FLOOR_STEP


def measure_clamp_histogram(own_q: np.ndarray, epsilon: float, source: IntegerSource) -> np.ndarray:
    """ε-DP histogram of users by clamp vote (:func:`clamp_votes`, 16 bins): every user in one bin, so
    one added or removed user moves the counts by 1 in ℓ1; exact discrete Laplace of scale 1/ε per
    bin. Returns the noisy integer counts."""
    return user_histogram(clamp_votes(own_q), CLAMP_STEPS - CLAMP_FLOOR_STEP + 1, epsilon, source)


def clamp_histogram_fields(votes: np.ndarray, bound: float, *, low: bool = False) -> dict:
    """What a release publishes of the clamp's DP histogram (summary.json ``clamp_histogram``): the
    clamp each bin stands for and its noisy count (a DP output), enough to recompute B with
    :func:`choose_clamp`; ``low``: of the lower clamp's (``clamp_low_histogram``), each bin's A =
    U − its reflected B (:func:`choose_low_clamp`)."""
    U = check_bound(bound)
    ends = [U * (CLAMP_FLOOR_STEP + i) / CLAMP_STEPS for i in range(int(np.size(votes)))]
    return {"clamps": [U - b for b in ends] if low else ends, "noisy_users": [int(v) for v in np.asarray(votes).ravel()]}


def record_histogram_fields(pb: PlaceBounds) -> dict:
    """What a release publishes of the cap's DP histogram (summary.json ``record_histogram``): the
    bins' upper edges and their noisy user counts (a DP output), the ε it cost, and the candidates
    for T with their predicted noise factors (post-processing of the counts; ``None`` where a factor
    is not finite) — enough to recompute T."""
    return {"upper_edges": [int(e) for e in RECORD_BIN_EDGES], "noisy_users": [int(v) for v in pb.histogram],
            "epsilon": float(pb.epsilon) * (CAP_SHARE if pb.low_histogram is None else TWO_SIDED_CAP_SHARE),
            "candidates": [int(t) for t in pb.candidates],
            "noise_factor": [float(f) if math.isfinite(float(f)) else None for f in pb.cap_noise]}


def clamp_quantile(record_counts: np.ndarray | None) -> float:
    """The users' quantile of the clamp votes B is set to: the larger of ``CLAMP_USER_QUANTILE`` and
    q = Σ_b π_b·P(Bin(r_b, p) ≤ r_b − ⌈(1 − p)·r_b⌉), p = 1 − ``CLAMP_VALUE_QUANTILE``, with π_b the share of users
    in bin b of the (denoised) histogram of records per user, holding r_b records each
    (:func:`dpopt.privacy.user.bounds.bin_representatives`, rounded, at least 1). q is the share of
    users whose vote (own 99th-percentile step) lies at or below a B above which a share p of every
    user's values lies — were their values drawn from one law: a user's vote is at or below B exactly
    when at most n − ⌈(1 − p)·n⌉ (⌊p·n⌋) of its n records lie above B (:func:`user_statistics`). So the q-quantile of the votes clamps about a
    share p of the records. It matters where users hold few records: a user with one record votes
    with that record, the 75th percentile of such votes is the 75th percentile of the values, and a
    quarter of the records were clamped (20,000 one-record users at ε = 10: peak hours answered
    10–15 low, coverage 0.71–0.92; models/engine.md §6); there q → 0.99. Where users hold a hundred
    records or more q is about one half and the floor ``CLAMP_USER_QUANTILE`` holds (users differ:
    the busiest quarter's tails are real values, not one law's). ``CLAMP_USER_QUANTILE`` where the
    histogram is missing or empty. Post-processing of the DP histogram."""
    if record_counts is None:
        return CLAMP_USER_QUANTILE
    h = np.maximum(np.asarray(record_counts, dtype=float), 0.0)
    if h.shape != (RECORD_BIN_EDGES.size + 1,):
        raise DpoptInputError(f"`record_counts` must hold {RECORD_BIN_EDGES.size + 1} bins (RECORD_BIN_EDGES and "
                              f"the overflow); got shape {h.shape}")
    if h.sum() <= 0:
        return CLAMP_USER_QUANTILE
    n = np.maximum(np.rint(bin_representatives(RECORD_BIN_EDGES)), 1.0)
    p = 1.0 - CLAMP_VALUE_QUANTILE
    below = binom.cdf(n - np.ceil(CLAMP_VALUE_QUANTILE * n), n, p)  # at most this many above: the vote's own rule
    return max(CLAMP_USER_QUANTILE, float(h @ below / h.sum()))


def choose_low_clamp(counts: np.ndarray, epsilon: float, bound: float, clamp: float, users: float | None = None
                     ) -> float:
    """A from the noisy histogram of the users' lower votes (post-processing): the rule of
    :func:`choose_clamp` on the reflected values U − x (each user votes with U less its own 1st
    percentile, :func:`user_statistics` ``reflect``) at the quantile 1 — the lower edge of the lowest
    bin whose noisy count clears the noise — then one step (U/16) lower; 0 where no bin clears it.
    So every group of users large enough to be seen keeps its low values, and A removes only the
    empty part of the declared range below them: the sensitivity a release of values in [80, 100] of
    [0, 100] pays for nothing.

    Why the quantile 1 and not B's (≥ 0.75): B's was chosen against the busiest users' real high
    tails on the Austin buses; nothing was measured for the low end, and at the quantile the lowest
    quarter of users' low values is clamped (values 8–20 of one cell in five, A = 11.25: +3 at its
    early hours). Why the step: a bin the threshold hides is a bias, not noise — on aircraft A at
    ε = 1 (ε_A = 0.0375, threshold 178 users) the 117 aircraft voting 688–756 km/h were not seen,
    and a lower clamp of 756 clamps 3.8 % of the records (the busy grids' truths by up to 2.5 km/h);
    one step lower (688), 0.4 % and no busy grid's truth. The step is the votes' own resolution, not
    a fact of the data.
    At most ``clamp`` − U/16 (the range [A, B] never narrower than one step), at least 0; ``users``
    as in :func:`choose_clamp` (0 where the kept bins hold fewer than :data:`CLAMP_SHOWN_SHARE` of them)."""
    U = check_bound(bound)
    low = U - choose_clamp(counts, epsilon, U, quantile=1.0, users=users) - U / CLAMP_STEPS
    return float(max(0.0, min(low, float(clamp) - U / CLAMP_STEPS)))


def choose_clamp(counts: np.ndarray, epsilon: float, bound: float, quantile: float = CLAMP_USER_QUANTILE,
                 users: float | None = None) -> float:
    """B from the noisy clamp histogram (post-processing): the bins whose noisy count reaches
    t = ln(#bins/CLAMP_PHANTOM_RATE)/ε are kept (an empty bin passes with probability
    ≤ CLAMP_PHANTOM_RATE/#bins, so a phantom bin in ≤ 2 % of histograms, about 1 % at small ε), the others zeroed, and
    B is the ``quantile`` of the kept counts (the smallest bin whose cumulative count reaches
    quantile × total), as U·(CLAMP_FLOOR_STEP + bin)/CLAMP_STEPS, raised to the floor min(U/2, the
    highest kept bin): B falls below U/2 only where no kept bin lies above it, so a tail that tens of
    users reach is never clamped below U/2 (module doc); U where no bin is kept (the histogram
    shows nothing: no clamp below the declared range, ``CLAMP_FALLBACK_STEP``), and where ``users``
    (n̂, the users the record histogram counts; None where not measured) is given, also where the kept
    bins hold fewer than :data:`CLAMP_SHOWN_SHARE` of them (:func:`shown_bins`)."""
    h = np.asarray(counts, dtype=float)
    if h.shape != (CLAMP_STEPS - CLAMP_FLOOR_STEP + 1,):
        raise DpoptInputError(f"`counts` must hold {CLAMP_STEPS - CLAMP_FLOOR_STEP + 1} bins (the clamp votes); "
                              f"got shape {h.shape}")
    q = check_nonnegative_float(quantile, "quantile")
    if not 0.0 < q <= 1.0:
        raise DpoptInputError(f"`quantile` must be in (0, 1]; got {quantile!r}")
    U = check_bound(bound)
    kept = shown_bins(h, epsilon, users)
    total = float(kept.sum())
    if total <= 0:
        return U
    step = CLAMP_FLOOR_STEP + int(np.argmax(np.cumsum(kept) >= q * total))
    top = CLAMP_FLOOR_STEP + int(np.flatnonzero(kept)[-1])
    return U * max(step, min(top, CLAMP_FALLBACK_STEP)) / CLAMP_STEPS


def shown_bins(votes: np.ndarray, epsilon: float, users: float | None = None) -> np.ndarray:
    """The bins of a clamp histogram at ``epsilon`` that its clamp reads: those whose noisy count
    clears ln(#bins/``CLAMP_PHANTOM_RATE``)/ε (:func:`dpopt.privacy.user.predict.threshold_bins`), the
    others zeroed; all zero where ``users`` (n̂ > 0, :func:`users_lower_end`; None: not measured) is
    given and the kept counts' lower end, their sum less ``USERS_LOWER_SDS``·√(2k)/ε over the k kept
    bins, is below :data:`CLAMP_SHOWN_SHARE`·n̂ — the histogram then shows too few of the users for a
    clamp to be read from it (the unseen could vote anywhere in the range). The lower end, because a
    kept count was selected for clearing the threshold, its noise for being high: a lone bin of 100
    of 400 users carried past the threshold by its noise would otherwise pass as half of them
    (tests/privacy/user/test_clamp_shown.py: 400 users' votes over three or six bins at ε_B = 0.0375,
    a clamp at or below the median vote in 0.3–1.3 % of simulated histograms, against 5–16 % with the
    threshold alone). Post-processing."""
    kept = threshold_bins(np.asarray(votes, dtype=float), epsilon, CLAMP_PHANTOM_RATE)
    if users is None or float(users) <= 0:
        return kept
    return kept if users_lower_end(kept, epsilon) >= CLAMP_SHOWN_SHARE * float(users) else np.zeros_like(kept)


def clamp_shown(votes: np.ndarray, epsilon: float, users: float | None = None) -> bool:
    """Whether a clamp histogram at ``epsilon`` shows anything (:func:`shown_bins`; where it does
    not, B = U and A = 0). Post-processing."""
    return bool(shown_bins(votes, epsilon, users).sum() > 0)


def users_lower_end(counts: np.ndarray, epsilon: float) -> float:
    """The lower end of the users a denoised record histogram ``counts`` (of the ε-DP histogram at
    ``epsilon``; or a clamp histogram's kept bins, :func:`shown_bins`) counts: Σ counts − ``USERS_LOWER_SDS``·√(2k)/ε over its k nonzero bins (each bin's
    discrete Laplace noise of scale 1/ε has variance ≈ 2/ε²), at least 0. The clamp's share is
    read against it (:func:`shown_bins`), so that the record histogram's own noise does not refuse a
    clamp histogram that shows every user: 60 users in one bin, counted 69 and seen 50 at ε = 0.3
    (tests/privacy/user/test_clamp_remeasure.py). Post-processing."""
    c = np.maximum(np.asarray(counts, dtype=float), 0.0)
    return float(max(c.sum() - USERS_LOWER_SDS * math.sqrt(2.0 * np.count_nonzero(c)) / check_epsilon(epsilon), 0.0))


def seen_users(pb: PlaceBounds) -> float | None:
    """:func:`users_lower_end` of the record histogram of ``pb`` (ε_b·``TWO_SIDED_CAP_SHARE`` with
    two-sided bounds, else ε_b·``CAP_SHARE``); None where it was not measured."""
    if pb.record_counts is None:
        return None
    return users_lower_end(pb.record_counts, pb.epsilon * (TWO_SIDED_CAP_SHARE if pb.low_histogram is not None
                                                           else CAP_SHARE))


def _side(pb: PlaceBounds, side: str) -> tuple[np.ndarray | None, float, np.ndarray | None, float]:
    """(histogram, its ε, the unseen first histogram, its ε) of the ``side`` clamp: ``"upper"`` (B) or
    ``"lower"`` (A)."""
    if side == "upper":
        return pb.clamp_histogram, pb.clamp_epsilon, pb.unseen_clamp_histogram, pb.unseen_clamp_epsilon
    if side == "lower":
        return pb.low_histogram, pb.low_epsilon, pb.unseen_low_histogram, pb.unseen_low_epsilon
    raise DpoptInputError(f"`side` must be 'upper' or 'lower'; got {side!r}")


def clamp_remeasure_side(pb: PlaceBounds, bound: float) -> str | None:
    """Which clamp's histogram to measure again (post-processing of DP outputs), ``bound`` U: ``"lower"``
    where A's histogram showed nothing and B = U is evidently right — B's histogram showed B = U, or showed
    nothing while its top bin (users whose 99th percentile lies in the top step) outnumbers the lower
    histogram's top bin (users whose 1st percentile lies in the bottom step, for whom A = 0 is right)
    by more than two sds of the two noisy counts' difference, 4/ε₁ (each discrete Laplace of scale
    1/ε₁ has variance ≈ 2/ε₁²): values at the top of their declared range, where only A can narrow
    it; else ``"upper"`` where B's histogram showed nothing; else None. Buses stop (146 of 146 users
    in the lower top bin on the embedded day), so B is measured. A is not measured again where B < U
    was seen: the users were seen, their low ends are spread over bins none of which clears, and an A
    from a second look sits above the groups still hidden (aircraft B at ε = 1, seed 1003: 72 → 96)."""
    users = seen_users(pb)
    upper = pb.clamp_histogram is not None and not clamp_shown(pb.clamp_histogram, pb.clamp_epsilon, users)
    lower = pb.low_histogram is not None and not clamp_shown(pb.low_histogram, pb.low_epsilon, users)
    if lower and upper:
        margin = 4.0 / max(float(pb.clamp_epsilon), float(pb.low_epsilon))
        if float(pb.clamp_histogram[-1]) - float(pb.low_histogram[-1]) > margin:
            return "lower"
    elif lower and pb.clamp >= check_bound(bound):  # B's histogram showed the values reach U
        return "lower"
    return "upper" if upper else None


def clamp_remeasure_epsilon(pb: PlaceBounds, limit: float, side: str = "upper") -> float:
    """ε of a second histogram of the ``side`` clamp's votes where the first showed nothing
    (:func:`clamp_shown`), 0 where it showed a bin: min(``limit``, max(ε₁, ε*)), ε₁ the first's,
    ε* = #bins·ln(#bins/r²)/n̂ with r = ``CLAMP_PHANTOM_RATE`` and n̂ the users the denoised record
    histogram counts. Some bin holds at least n̂/#bins users (pigeonhole); at ε* such a bin's noisy
    count clears the threshold ln(#bins/r)/ε* with probability ≥ 1 − r (the discrete Laplace's lower
    tail P(Z ≤ −j) ≤ e^{−εj}), so ε* is what a histogram needs to show something whatever the votes'
    shape — more is never spent. ``limit`` caps it (the engine: ε_b,
    :data:`dpopt.privacy.user.engine.CLAMP_REMEASURE_LIMIT`). Post-processing of DP outputs: whether
    and how much to spend depends on the first histograms only (models/engine.md §2)."""
    hist, eps1, _, _ = _side(pb, side)
    if hist is None or clamp_shown(hist, eps1, seen_users(pb)):
        return 0.0
    bins = int(np.size(hist))
    users = 0.0 if pb.record_counts is None else float(np.maximum(pb.record_counts, 0.0).sum())
    needed = bins * math.log(bins / CLAMP_PHANTOM_RATE**2) / users if users > 0 else math.inf
    return float(min(check_nonnegative_float(limit, "limit"), max(needed, eps1)))


def remeasure_clamp(agg: Aggregate, eligible: np.ndarray, pb: PlaceBounds, epsilon: float, *,
                    bound: float, source: IntegerSource, side: str = "upper") -> PlaceBounds:
    """``pb`` with the ``side`` clamp read from a second histogram of its votes at ``epsilon`` (a new
    ε-DP measurement, :func:`measure_clamp_histogram`): ``"upper"``, B from it and A re-read from
    the lower histogram already measured (:func:`choose_low_clamp` takes B as its ceiling);
    ``"lower"``, A from it under the B already chosen. The first histogram is kept as
    ``unseen_clamp_histogram`` / ``unseen_low_histogram`` (a DP output, published). The first is
    not pooled with the second: at ≤ ε/4 it holds ≤ 1/17 of the pair's information (inverse-variance
    weights ε²), and one histogram keeps the threshold's phantom rate exact."""
    eps = check_epsilon(epsilon)
    U = check_bound(bound)
    if _side(pb, side)[0] is None:
        raise DpoptInputError(f"`side` = {side!r}: these bounds hold no histogram of that clamp (two-sided bounds)")
    _, (own,) = _user_votes(agg, eligible, U, (side == "lower",))
    votes = measure_clamp_histogram(own, eps, source)
    users = seen_users(pb)
    if side == "lower":
        return replace(pb, clamp_low=choose_low_clamp(votes, eps, U, pb.clamp, users), low_histogram=votes,
                       low_epsilon=eps, unseen_low_histogram=pb.low_histogram, unseen_low_epsilon=pb.low_epsilon)
    clamp = choose_clamp(votes, eps, U, quantile=clamp_quantile(pb.record_counts), users=users)
    low = pb.clamp_low if pb.low_histogram is None else choose_low_clamp(pb.low_histogram, pb.low_epsilon, U, clamp,
                                                                         users)
    return replace(pb, clamp=clamp, clamp_low=low, clamp_histogram=votes, clamp_epsilon=eps,
                   unseen_clamp_histogram=pb.clamp_histogram, unseen_clamp_epsilon=pb.clamp_epsilon)


def clamp_fields(pb: PlaceBounds, bound: float, *, low: bool = False) -> dict:
    """summary.json ``clamp_histogram`` (``low``: ``clamp_low_histogram``) of the engine:
    :func:`clamp_histogram_fields` of the histogram B (A) was read from, its ``epsilon``, and
    ``unseen_first`` — the first histogram's noisy counts and ε where it showed nothing and was
    measured again (:func:`remeasure_clamp`), else None."""
    hist, eps, unseen, eps1 = _side(pb, "lower" if low else "upper")
    first = None if unseen is None else {"noisy_users": [int(v) for v in np.asarray(unseen).ravel()],
                                         "epsilon": float(eps1)}
    return {**clamp_histogram_fields(hist, bound, low=low), "epsilon": float(eps), "unseen_first": first}


def choose_place_bounds(agg: Aggregate, eligible: np.ndarray, epsilon: float, *, bound: float,
                        source: IntegerSource, candidates: np.ndarray = RECORD_EDGES,
                        two_sided: bool = False) -> PlaceBounds:
    """(T, B) of the ``place`` release: two DP histograms over users, at ε_T and ε_B, ε_T + ε_B = ε_b
    (module doc); ``two_sided`` (the engine, models/engine.md §2): (T, B, A) from three, at ε_b/2,
    ε_b/4 and ε_b/4, the third the users' lower votes (:func:`choose_low_clamp`).

    Parameters
    ----------
    agg : Aggregate
        Contributions with samples (values clamped to [0, U] by ingestion).
    eligible : np.ndarray
        One boolean per pair: the pairs of listed grids (the public list).
    epsilon : float
        ε_b, spent in total on the two measurements.
    bound : float
        U.
    source : IntegerSource
        The release's integer source (OS CSPRNG for a real release).
    candidates : np.ndarray
        The caps T may take: :func:`cap_candidates` of the release's lattice (default all of
        ``RECORD_EDGES``).
    two_sided : bool
        Also choose the lower clamp A (values then measured on [A, B]).
    """
    eps = check_epsilon(epsilon)
    U = check_bound(bound)
    if agg.samples is None:
        raise DpoptInputError("the place release reads each user's records: build the contributions with samples "
                              "(dpopt.privacy.contributions(..., first_records=c) or keep_samples=True)")
    n_user, (own_q, *own_low) = _user_votes(agg, eligible, U, (False, True) if two_sided else (False,))
    eps_cap = eps * (TWO_SIDED_CAP_SHARE if two_sided else CAP_SHARE)
    noisy = measure_record_histogram(n_user, eps_cap, source)
    counts = record_counts(noisy, eps_cap)
    cap, factors = choose_cap(counts, candidates=candidates)
    # exact (Sterbenz: eps/2 ≤ eps_cap ≤ eps; two-sided eps/2, eps/4, eps/4): the pieces sum to ε_b
    eps_clamp = (eps - eps_cap) / 2.0 if two_sided else eps - eps_cap
    votes = measure_clamp_histogram(own_q, eps_clamp, source)
    q = clamp_quantile(counts)
    users = users_lower_end(counts, eps_cap)
    clamp = choose_clamp(votes, eps_clamp, U, quantile=q, users=users)
    low, low_votes, eps_low = 0.0, None, 0.0
    if two_sided:
        eps_low = eps - eps_cap - eps_clamp
        low_votes = measure_clamp_histogram(own_low[0], eps_low, source)
        low = choose_low_clamp(low_votes, eps_low, U, clamp, users)
    return PlaceBounds(cap=cap, clamp=clamp, epsilon=eps, histogram=noisy,
                       cap_noise=factors, candidates=np.asarray(candidates, dtype=np.int64), clamp_histogram=votes,
                       record_counts=counts, clamp_low=low, low_histogram=low_votes, clamp_epsilon=eps_clamp,
                       low_epsilon=eps_low if two_sided else math.nan)
