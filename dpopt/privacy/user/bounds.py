"""Contribution bounds (k, c) chosen from the data under DP (models/user_level.md §6, §11).

Three rules, each ε_b-DP under add/remove of one user (ε_b counted in the release's total):

``"histogram"`` (default): ε_b buys ONE noisy joint histogram of the contribution distribution
    (:func:`measure_contributions`): user ℓ falls in the single bin (i, j) of its number of grids
    G_ℓ and its median records per (user, grid) m_ℓ, bins on public geometric grids, so adding or
    removing a user moves one bin by one (ℓ1 sensitivity 1) and the exact discrete Laplace of
    scale 1/ε_b (the release's integer source) makes the histogram ε_b-DP. (k, c) is then the
    minimiser of the predicted release error (:func:`dpopt.privacy.user.predict.predicted_release_error`)
    over the public candidates, evaluated exhaustively: post-processing, no further budget.

``"select"``: exact permute-and-flip (:func:`dpopt.noise.selection.permute_and_flip`,
    ε-DP like the exponential mechanism, integer arithmetic, the release's integer source) over a
    public grid of candidates (k, c) with the utility

        u(k, c) = Σ_g min(s_g, τ),   s_g = n_g(k, c)/(k·c),   τ = 1/ε_sum,
        n_g(k, c) = Σ_ℓ min(m_{ℓ,g}, c)·[g among ℓ's top k].

    s_g is the grid's signal-to-noise ratio: every noise scale of the release is k·c·(1, U/2,
    U²/8)/ε_i and every estimate divides by n_g, so the predicted noise of grid g's mean is about
    (U/2)/(ε_sum·s_g) (Laplace scale of Ỹ/n). At s_g = τ = 1/ε_sum that equals U/2, the half-range
    the post-processed mean can be off by anyway: below τ more SNR buys accuracy almost linearly,
    above it a grid is already informative and gets no more credit. So u counts, in SNR units, how
    much of the map the bounds make informative (coverage of grids *and* their SNR). Sensitivity 1:
    adding a user changes n_g by ≤ c in its ≤ k kept grids only (the top-k rule of the others is
    their own), so each term moves by ≤ c/(k·c) = 1/k (min(·, τ) is 1-Lipschitz) and u by ≤ 1, for
    every candidate at once. With private partition selection (ε_p, δ) each term is multiplied by
    the probability p_g(k) that Laplace thresholding releases the grid (:func:`release_probability`,
    continuous form), which moves by ≤ ε_p/(2k) per added user (the Laplace density ≤ 1/(2b),
    b = k/ε_p): |Δ(min(s, τ)·p)| ≤ 1/k + τ·ε_p/(2k), so Δu = 1 + τ·ε_p/2. The utility ignores the bias of dropping records (unknowable without
    spending budget), so c = 1..4 score alike when users hold several records per grid.

``"quantile"``: two private quantiles over the same public candidate grids (permute-and-flip,
    ε_b/2 each): k is the candidate v minimising |#{ℓ : G_ℓ ≤ v} − q·n| (G_ℓ = grids of user ℓ,
    n users), then c likewise over the per-user median of m_{ℓ,g} in the user's top-k grids. The
    utility −|#{x ≤ v} − q·n| has sensitivity 1 under add/remove of one user (the count moves by 0
    or 1 while q·n moves by q, so the difference moves by −q or 1 − q).

Randomness and float-safety: the selection runs on the integer source of the release (the OS
CSPRNG for a real release; a source seeded from ``rng`` for simulations), utilities on the lattice
2^-20 with the sensitivity widened accordingly (:mod:`dpopt.noise.selection`). An earlier version
used numpy's Gumbel-max exponential mechanism, whose bounded Gumbel support gives candidates more
than ~40 log-units below the best probability exactly 0 (pure ε-DP failed with δ ≈ e^-40).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._validation import (DpoptInputError, check_bound, check_choice, check_epsilon, check_nonnegative_float,
                           check_positive_int)
from ...noise.selection import permute_and_flip
from ...noise.sources import IntegerSource, SeededSource
from ...records.aggregate import Aggregate
from ...noise.mechanism import user_histogram
from ._thresholding import release_probability
from .predict import PRIORITIES, ContributionHistogram, NoiseBudgets, predicted_release_error, denoise_histogram

__all__ = ["BoundsChoice", "BoundsRule", "candidate_grid", "private_quantile", "rank_utility", "selection_utility", "release_probability", "choose_bounds",
           "BOUND_RULES", "bin_representatives", "histogram_bins", "histogram_candidates", "contribution_bins", "measure_contributions", "optimise_bounds"]

BOUND_RULES = ("histogram", "select", "quantile")


@dataclass(frozen=True)
class BoundsChoice:
    """Chosen (k, c) (DP outputs), the rule, and the budget it spent (ε)."""

    k: int
    c: int
    rule: str
    epsilon: float
    candidates: int
    #: ``"histogram"``: the noisy histogram (DP output) and the objective over the candidates
    histogram: ContributionHistogram | None = None
    objective: np.ndarray | None = None


def candidate_grid(limit: int) -> np.ndarray:
    """Public candidates 1, 2, 3, 4, 6, 8, 12, 16, 24, ... ≤ ``limit`` (steps of ×√2, rounded)."""
    limit = check_positive_int(limit, "limit")
    out = {1}
    p = 1
    while p <= limit:
        out.add(p)
        if p * 3 // 2 <= limit and p >= 2:
            out.add(p * 3 // 2)
        p *= 2
    return np.asarray(sorted(v for v in out if v <= limit), dtype=np.int64)


def selection_utility(agg: Aggregate, ranks: np.ndarray, ks: np.ndarray, cs: np.ndarray, *,
                      cap: float, selection: tuple[float, float] | None = None) -> np.ndarray:
    """u(k, c) = Σ_g min(n_g/(k·c), cap)·p_g(k) of the module doc for every pair of candidates,
    shape (len(ks), len(cs)); p_g = 1 without ``selection`` = (ε_p, δ), else the probability that
    Laplace thresholding releases the grid (users L_g(k), threshold T(k)).

    ``ranks`` are the pair ranks of :func:`dpopt.privacy.user.bounding.grid_ranks`.
    """
    ks = np.asarray(ks, dtype=np.int64)
    cs = np.asarray(cs, dtype=np.int64)
    out = np.empty((ks.size, cs.size))
    G = agg.n_grids
    valid = ranks >= 0
    for i, k in enumerate(ks):
        keep = valid & (ranks < k)
        g = agg.pair_grid[keep]
        m = agg.count[keep]
        p = 1.0
        if selection is not None:
            p = release_probability(np.bincount(g, minlength=G), int(k), *selection)
        for j, c in enumerate(cs):
            n = np.bincount(g, weights=np.minimum(m, c), minlength=G)
            out[i, j] = float((np.minimum(n / float(k * c), cap) * p).sum())
    return out


def histogram_bins(limit: int) -> np.ndarray:
    """Public upper edges 1, 2, 4, …, 2^⌈log2 limit⌉ of the histogram bins (a value v falls in the
    first bin whose edge is ≥ v; values above the last edge in an overflow bin)."""
    limit = check_positive_int(limit, "limit")
    return 2 ** np.arange(int(math.ceil(math.log2(limit))) + 1, dtype=np.int64)


def histogram_candidates(limit: int) -> np.ndarray:
    """Public candidates of the ``"histogram"`` rule: the bin edges 1, 2, 4, … capped at ``limit``
    (1, 2, 4, 8, 10 for 10). Never above the cap: the front door keeps only the first
    ``max_records`` records of a pair (:attr:`dpopt.privacy.user.UserOptions.first_records`), so a
    c above it would make the bounding refuse exactly when some pair holds more records than the
    cap — a refusal that depends on private data."""
    return np.unique(np.minimum(histogram_bins(limit), check_positive_int(limit, "limit")))


def bin_representatives(edges: np.ndarray) -> np.ndarray:
    """Public value standing for each bin (lo, hi]: √((lo + 1)·hi) (1 for the first); the overflow
    bin (hi, ∞) stands at 2·hi."""
    lo = np.r_[0, edges[:-1]]
    return np.r_[np.sqrt((lo + 1.0) * edges), 2.0 * edges[-1]]


def contribution_bins(agg: Aggregate, ranks: np.ndarray, grid_edges: np.ndarray,
                      record_edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bin (i, j) of every user with at least one eligible pair (rank ≥ 0): i by G_ℓ (its number of
    eligible grids), j by m_ℓ (the median of m_{ℓ,g} over them). A function of the user's own
    records and the public mask only — the fact the sensitivity proof needs."""
    valid = ranks >= 0
    users = agg.pair_user[valid]
    G = np.bincount(users, minlength=agg.n_users)
    present = np.flatnonzero(G > 0)
    med = _user_medians(users, agg.count[valid].astype(float))  # users in increasing order
    i = np.searchsorted(grid_edges, G[present], side="left")
    j = np.searchsorted(record_edges, med, side="left")
    return i, j


def measure_contributions(agg: Aggregate, ranks: np.ndarray, epsilon: float, *, source: IntegerSource,
                          max_grids: int = 1024, max_records: int = 64) -> ContributionHistogram:
    """ε-DP joint histogram of users by (G_ℓ, m_ℓ) (module doc): every user in one bin, so one user
    moves the vector of bin counts by 1 in ℓ1; exact discrete Laplace of scale 1/ε per bin."""
    eps = check_epsilon(epsilon)
    ge, re = histogram_bins(max_grids), histogram_bins(max_records)
    i, j = contribution_bins(agg, ranks, ge, re)
    shape = (ge.size + 1, re.size + 1)
    noisy = user_histogram(i * shape[1] + j, shape[0] * shape[1], eps, source).reshape(shape)
    return ContributionHistogram(grids=bin_representatives(ge), records=bin_representatives(re), noisy=noisy,
                                 counts=denoise_histogram(noisy, eps), epsilon=eps)


#: near-optimal band of the ``"histogram"`` rule, as a fraction of U/2
DEFAULT_TOLERANCE = 0.05


def optimise_bounds(hist: ContributionHistogram, ks: np.ndarray, cs: np.ndarray, *, bound: float = 1.0,
                    tolerance: float = DEFAULT_TOLERANCE, **model: Any) -> tuple[int, int, np.ndarray]:
    """Exhaustive minimisation of :func:`predicted_release_error` over the public candidates.

    Every pair (k, c) is evaluated. The near-optimal band is the set of pairs within
    ``tolerance``·U/2 of the minimum; k is the lower median of the distinct k of the band (in
    candidate order) and c the best c at that k. Where the objective is flat (noise saturates the
    release, or every k between a few and all of a user's grids gives the same signal-to-noise
    ratio, models/user_level.md §11) the argmin itself wanders with the histogram's noise, and an
    edge of the band is where the flat region ends; its middle is stable and away from both edges.
    Returns (k, c, objective).
    """
    tol = check_nonnegative_float(tolerance, "tolerance")
    obj = predicted_release_error(hist, ks, cs, bound=bound, **model)
    band = obj <= obj.min() + tol * check_bound(bound) / 2.0
    rows = np.flatnonzero(band.any(axis=1))
    i = int(rows[(rows.size - 1) // 2])
    j = int(np.argmin(obj[i]))
    return int(ks[i]), int(cs[j]), obj


@dataclass(frozen=True)
class BoundsRule:
    """The options of :func:`choose_bounds` (public): ``rule`` (:data:`BOUND_RULES`),
    ``max_grids``/``max_records`` public caps; ``quantile`` of the "quantile" rule; ``sum_budget``
    ε_sum of the release's noisy sum (sets the cap τ = 1/ε_sum of ``"select"``); ``selection`` (ε_p,
    δ) of private partition selection; ``budgets`` the release's noise budgets for ``"histogram"``
    (default: Laplace with the minimax split's count/sum ratio at ``sum_budget``, and ``selection``);
    ``bound`` U (the argmin does not depend on it); ``priority`` "own" or "shared" (which ranks the
    release uses, :mod:`.priority`); ``model`` further keywords of
    :func:`dpopt.privacy.user.predict.predicted_release_error`."""

    rule: str = "histogram"
    max_grids: int = 1024
    max_records: int = 64
    quantile: float = 0.5
    sum_budget: float | None = None
    selection: tuple[float, float] | None = None
    budgets: NoiseBudgets | None = None
    bound: float = 1.0
    priority: str = "own"
    model: dict | None = None

    def __post_init__(self) -> None:
        check_choice(self.rule, "bounds", BOUND_RULES)
        check_positive_int(self.max_grids, "max_grids")
        check_positive_int(self.max_records, "max_records")
        check_choice(self.priority, "priority", PRIORITIES)
        if not 0.0 < float(self.quantile) < 1.0:
            raise DpoptInputError(f"`quantile` must be in (0, 1); got {self.quantile!r}")


def choose_bounds(agg: Aggregate, ranks: np.ndarray, epsilon: float, *, rng: np.random.Generator,
                  source: IntegerSource | None = None, options: BoundsRule | None = None) -> BoundsChoice:
    """(k, c) by the ε-DP rule of ``options`` (module doc; :class:`BoundsRule`, None: its defaults).
    ``source`` the integer source of the selection (default: seeded from ``rng``, simulations only)."""
    eps = check_epsilon(epsilon)
    o = BoundsRule() if options is None else options
    if not isinstance(o, BoundsRule):
        raise DpoptInputError(f"`options` must be a BoundsRule; got {type(o).__name__}")
    src = source if source is not None else SeededSource(int(rng.integers(0, 2**62)))
    kmax, cmax = int(o.max_grids), int(o.max_records)
    if o.rule == "histogram":
        budgets = o.budgets
        if budgets is None:
            if o.sum_budget is None:
                raise DpoptInputError("`budgets` (or `sum_budget`) is needed by bounds='histogram'")
            # the minimax split (split.py): ε_n/ε_Y = (a_n/a_Y)^(1/3) = (10/17)^(1/3)
            sb = check_epsilon(o.sum_budget, "sum_budget")
            budgets = NoiseBudgets(count=sb * (10.0 / 17.0) ** (1.0 / 3.0), sum=sb, selection=o.selection)
        return _histogram_choice(agg, ranks, eps, src, kmax, cmax, budgets=budgets, bound=o.bound,
                                 priority=o.priority, model=o.model or {})
    if o.rule == "select":
        return _select_choice(agg, ranks, eps, src, kmax, cmax, o)
    # quantiles: each user one value, rank utility of sensitivity 1, over the public candidate grids
    valid = ranks >= 0
    per_user = np.bincount(agg.pair_user[valid], minlength=agg.n_users).astype(float)
    k = private_quantile(per_user[per_user > 0], candidate_grid(kmax), o.quantile, eps / 2.0, src)
    keep = valid & (ranks < k)
    med = _user_medians(agg.pair_user[keep], agg.count[keep].astype(float))
    c = private_quantile(med, candidate_grid(cmax), o.quantile, eps / 2.0, src)
    return BoundsChoice(k=k, c=c, rule=o.rule, epsilon=eps, candidates=0)


def _select_choice(agg: Aggregate, ranks: np.ndarray, eps: float, src: IntegerSource, kmax: int, cmax: int,
                   o: BoundsRule) -> BoundsChoice:
    """The ``"select"`` rule: permute-and-flip over the candidate grid's selection utility."""
    ks, cs = candidate_grid(kmax), candidate_grid(cmax)
    if o.sum_budget is None:
        raise DpoptInputError("`sum_budget` (the noisy sum's ε) is needed by bounds='select'")
    cap = 1.0 / check_epsilon(o.sum_budget, "sum_budget")
    u = selection_utility(agg, ranks, ks, cs, cap=cap, selection=o.selection)
    du = 1.0 if o.selection is None else 1.0 + cap * float(o.selection[0]) / 2.0
    idx = permute_and_flip(u.ravel(), eps, sensitivity=du, source=src)
    i, j = divmod(idx, cs.size)
    return BoundsChoice(k=int(ks[i]), c=int(cs[j]), rule=o.rule, epsilon=eps, candidates=int(u.size))


def _histogram_choice(agg: Aggregate, ranks: np.ndarray, eps: float, src: IntegerSource, kmax: int, cmax: int, *,
                      budgets: NoiseBudgets, bound: float, priority: str, model: dict) -> BoundsChoice:
    """The ``"histogram"`` rule: one ε-DP measurement, then the exhaustive optimiser."""
    hist = measure_contributions(agg, ranks, eps, source=src, max_grids=kmax, max_records=cmax)
    ks, cs = histogram_candidates(kmax), histogram_candidates(cmax)
    k, c, obj = optimise_bounds(hist, ks, cs, bound=bound, budgets=budgets, priority=priority, **model)
    return BoundsChoice(k=k, c=c, rule="histogram", epsilon=eps, candidates=int(obj.size), histogram=hist,
                        objective=obj)


def private_quantile(values: np.ndarray, candidates: np.ndarray, quantile: float, epsilon: float,
                     source: IntegerSource) -> int:
    """The candidate v whose rank interval [#{x < v}, #{x ≤ v}] is nearest q·n: utility
    −dist(q·n, [#{x < v}, #{x ≤ v}]), by permute-and-flip.

    Sensitivity 1: adding or removing one value moves #{x < v} and #{x ≤ v} each by at most 1 (in
    the same direction) and q·n by q ≤ 1, so each of a − q·n and q·n − b moves by at most 1, and so
    does their positive part's maximum. Where many values equal a candidate (users who all hold one
    cell) that candidate alone has utility 0; the form −|#{x ≤ v} − q·n| gave every candidate at or
    above the largest value the same utility, and the mechanism then drew any of them (k = 32 for
    sensors that never leave their cell, and no cell cleared the threshold k sets)."""
    utility = rank_utility(values, candidates, quantile)
    return int(candidates[permute_and_flip(utility, epsilon, sensitivity=1.0, source=source)])


def rank_utility(values: np.ndarray, candidates: np.ndarray, quantile: float) -> np.ndarray:
    """:func:`private_quantile`'s utility of each candidate: −dist(q·n, [#{x < v}, #{x ≤ v}])."""
    ordered = np.sort(np.asarray(values, dtype=float))
    below = np.searchsorted(ordered, candidates, side="left")
    upto = np.searchsorted(ordered, candidates, side="right")
    target = quantile * ordered.size
    return -np.maximum(np.maximum(below - target, target - upto), 0.0)


def _user_medians(users: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Median of ``values`` per user (users with no value omitted), vectorised."""
    if users.size == 0:
        return np.zeros(0)
    order = np.lexsort((values, users))
    u, v = users[order], values[order]
    starts = np.flatnonzero(np.r_[True, u[1:] != u[:-1]])
    ends = np.r_[starts[1:], u.size]
    lo = starts + (ends - starts - 1) // 2
    hi = starts + (ends - starts) // 2
    return 0.5 * (v[lo] + v[hi])
