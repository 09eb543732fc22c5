"""The engine's list where no public one is given (models/engine.md §8).

Without a partition list nothing about occupancy is public, so the grids the engine answers are
chosen under DP: the places by private selection, the times by a public rule.

1. **How many cells a user votes for** (ε_k = :data:`KEEP_SHARE` of the selection budget): k is the
   :data:`KEEP_QUANTILE` quantile of the users' numbers of distinct cells (H3 resolution R over the
   whole period), by permute-and-flip over the powers of two 1 … :data:`MAX_KEEP`
   (:func:`dpopt.privacy.user.bounds.private_quantile`; each user gives one value, the rank utility
   −dist(q·n, [#{x < k}, #{x ≤ k}]) has sensitivity 1: ε_k-DP).
2. **Which cells** (ε_s, δ): every user keeps a uniformly random k of its distinct cells (i.i.d.
   keys from the release's randomness, :func:`random_votes`; PipelineDP's rule) and each cell with
   u_v ≥ 1 keeping users is released iff u_v + Z_v ≥ T, Z_v Laplace of scale k/ε_s
   (:func:`dpopt.privacy.user.select_levels.threshold_counts`; its proof: a user's kept set is a
   function of its own cells and its own keys, whose law does not depend on the other users, so one
   user moves ≤ k counts by 1 each; a cell kept by that user alone is released with probability
   ≤ δ/k, ≤ k of them). A cell is a node of the level (R, the public 3640-day period,
   epoch-aligned); a cell selected in several periods is one place.
3. **Which times** (public): every window of the day (the slot's offset within its day on the
   records' clock), recurring daily over the selected periods. Each record's grid is folded to
   (cell, window) by :func:`fold_to_day`, a public function of its key, before bounding; the engine
   then runs over the list selected cells × the day's windows, a DP output and therefore public.
   Why not days as well: a user active on many days votes for at most k of them, so a day's count
   is ≈ (users)·k/(days) against a threshold ≈ (k/ε)·ln(k/δ): the ratio ≈ users·ε/(days·ln(k/δ))
   does not grow with k, and on the full Austin data (484 buses, 18 days, δ = 10⁻⁶) a day passes
   only at a selection ε of about 1 of its own (0.72 of the threshold at ε = 0.4), budget the
   places then lack; a year of data needs twenty times that. So without a list the release answers
   a place's hour of the day, not a place's hour of a given day. A public list keeps the day.

Privacy: (ε_k + ε_s, δ) for the list, then the engine's own ε over it (sequential composition; the
engine's choices depend on the list only through its public value). Why uniformly random votes and
not a user's busiest cells or the shared public order: a busy grid needs many users at once, and a
random vote lands on a cell in proportion to the users it has; measured noise-free on the Austin
data (selection ε 3, k = 16; models/engine.md §8) random votes pass cells holding 5,100–5,500 of the
full data's 5,851 busy grids, busiest cells 4,909, the shared order 3,196 (the embedded day favours
the busiest cells at small k: 96 against 36–88 at k = 2).

Constants, and why they do not depend on the data: :data:`KEEP_QUANTILE` (a quarter): k is a number
of votes three users in four can fill, so the sensitivity k is not paid for votes most users do not
have; :data:`MAX_KEEP` caps the candidates (the threshold grows like k·ln k); :data:`KEEP_SHARE` is
the share of the selection spent learning k (a coarse quantile: nine candidates).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import numpy as np

from ...hierarchy.tree import DAY_NS, Level
from ...noise.mechanism import NoiseMechanism
from ...noise.sources import IntegerSource, random_words
from ...records.aggregate import Aggregate, PairSamples
from ...records.contributions import pair_key_order
from ...records.grid import slot_text
from ..._validation import DpoptInputError
from .bounds import private_quantile
from .levels import used_budget
from .partitions import PartitionList
from .select_levels import LevelSelection, level_nodes, threshold_counts
from .strategies.private_adaptive import PERIOD_NS

#: the selection's progress line (INFO; :func:`dpopt.writers.console.phase_lines`): DP outputs only
_log = logging.getLogger(__name__)

__all__ = ["PrivateList", "private_list", "fold_to_day", "fold_with_days", "keep_count", "random_votes", "KEEP_QUANTILE", "MAX_KEEP", "KEEP_SHARE"]

#: k is this quantile of the users' numbers of distinct cells (module doc)
KEEP_QUANTILE = 0.25
#: the largest k offered (candidates 1, 2, 4, …, MAX_KEEP)
MAX_KEEP = 256
#: share of the selection budget spent choosing k
KEEP_SHARE = 0.1


@dataclass(frozen=True, eq=False)
class PrivateList:
    """The engine's list chosen under DP (module doc): the folded contributions ``agg`` (slots are
    windows of the day, offsets since midnight), the ``partitions`` (selected cells × every window),
    the public ``period`` (start, end) ns the windows recur over, the vote count ``k``, the
    ``selection`` (threshold, noisy users of the selected cells) and the budget ``pieces`` spent."""

    agg: Aggregate
    partitions: PartitionList
    period: tuple[int, int]
    k: int
    selection: LevelSelection
    pieces: dict[str, float]
    #: each folded record's day (aligned with ``agg.samples``; :func:`fold_with_days`), None without samples
    days: np.ndarray | None = None


def fold_to_day(agg: Aggregate) -> Aggregate:
    """The contributions with every grid's slot replaced by its window of the day (slot mod 1 day,
    on the records' clock): pairs of one user and one (cell, window) merged — counts, sums and
    samples (ordered by their keys, as the reader orders a pair's records). A public function of
    each record's key."""
    return fold_with_days(agg)[0]


def fold_with_days(agg: Aggregate) -> tuple[Aggregate, np.ndarray | None]:
    """:func:`fold_to_day` and, aligned with the folded samples (None without samples), each
    record's day — the day it was folded from, counted from the records' first day (int16 where the
    span allows, else int32; a public function of the record's key): the engine reads the days'
    spread inside a window from it (models/engine.md §8)."""
    if agg.slot_ns > DAY_NS or DAY_NS % agg.slot_ns:
        raise DpoptInputError(f"without a partition list the engine answers windows of the day: `slot` must divide "
                              f"one day; got {slot_text(agg.slot_ns)!r} (give a list, or --strategy adaptive)")
    slots = np.asarray(agg.slots, dtype=np.int64)
    window = np.mod(slots, DAY_NS)
    key, grid = np.unique(np.stack([window, np.asarray(agg.cells, dtype=np.int64)], axis=1), axis=0,
                          return_inverse=True)
    grid = grid.reshape(-1)
    pair_key = grid[agg.pair_grid] * np.int64(agg.n_users) + np.asarray(agg.pair_user, dtype=np.int64)
    uniq, pair = np.unique(pair_key, return_inverse=True)  # sorted by (grid, user), as Aggregate's pairs
    pair = pair.reshape(-1)
    P = uniq.size
    add = lambda x: np.bincount(pair, weights=np.asarray(x, dtype=float), minlength=P)  # noqa: E731
    samples, days = None, None
    if agg.samples is not None:
        s = agg.samples
        n_rec = np.diff(s.offsets)
        rec_pair = np.repeat(pair, n_rec)
        day = np.floor_divide(slots, DAY_NS)
        day = day - (day.min() if day.size else 0)
        rec_day = np.repeat(day.astype(np.int16 if day.size == 0 or day.max() < 2**15 else np.int32)[agg.pair_grid],
                            n_rec)
        keys = s.keys if s.keys is not None else np.zeros(s.values.size, dtype=np.uint64)
        order = pair_key_order(rec_pair, keys, s.values)
        values, keys, rec_pair, days = s.values[order], keys[order], rec_pair[order], rec_day[order]
        per = np.bincount(rec_pair, minlength=P)
        if s.limit is not None:  # each merged pair's `limit` smallest keys (all among its parts' smallest)
            rank = np.arange(rec_pair.size) - np.repeat(np.cumsum(per) - per, per)
            on = rank < s.limit
            values, keys, rec_pair, days = values[on], keys[on], rec_pair[on], days[on]
            per = np.bincount(rec_pair, minlength=P)
        samples = PairSamples(values=values, offsets=np.concatenate([[0], np.cumsum(per)]).astype(np.int64),
                              limit=s.limit, keys=keys if s.keys is not None else None)
    return replace(agg, cells=key[:, 1].copy(), slots=key[:, 0].copy(), pair_user=(uniq % agg.n_users).astype(np.int64),
                   pair_grid=(uniq // agg.n_users).astype(np.int64), count=add(agg.count).astype(np.int64),
                   sum=add(agg.sum), sumsq=add(agg.sumsq), samples=samples), days


def random_votes(pair_user: np.ndarray, pair_node: np.ndarray, n_nodes: int, k: int, source: IntegerSource) -> np.ndarray:
    """Users per node when every user keeps a uniformly random k of its distinct nodes (all of them
    if it has at most k): i.i.d. keys from ``source``, each user's choice a function of its own
    nodes and keys only (the keys' law does not depend on who else is in the data)."""
    key = np.unique(np.asarray(pair_user, dtype=np.int64) * (n_nodes + 1) + np.asarray(pair_node, dtype=np.int64))
    user, node = key // (n_nodes + 1), key % (n_nodes + 1)
    order = np.lexsort((random_words(source, user.size), user))
    first = np.searchsorted(user[order], user[order], side="left")
    return np.bincount(node[order[np.arange(order.size) - first < int(k)]], minlength=n_nodes).astype(np.int64)


def keep_count(agg: Aggregate, level: Level, epsilon: float, source: IntegerSource) -> int:
    """k of step 1 (module doc): the :data:`KEEP_QUANTILE` quantile of the users' numbers of
    distinct nodes of ``level``, over the powers of two up to :data:`MAX_KEEP` (ε-DP)."""
    grid_node, cells, _ = level_nodes(agg, level)
    pairs = np.unique(np.asarray(agg.pair_user, dtype=np.int64) * (cells.size + 1) + grid_node[agg.pair_grid])
    per_user = np.bincount(pairs // (cells.size + 1), minlength=agg.n_users)
    per_user = per_user[per_user > 0]
    candidates = 2 ** np.arange(int(np.log2(MAX_KEEP)) + 1)
    return private_quantile(per_user.astype(float), candidates, KEEP_QUANTILE, epsilon, source)


def private_list(agg: Aggregate, *, epsilon: float, delta: float, mechanism: NoiseMechanism,
                 source: IntegerSource) -> PrivateList:
    """The engine's list without a public one: (ε, δ)-DP (module doc). ``epsilon`` the selection's
    whole budget (k and the cells), ``delta`` its δ."""
    folded, days = fold_with_days(agg)  # refuses a slot that does not divide a day before any draw
    level = Level(agg.h3_resolution, PERIOD_NS)
    eps_k = used_budget(KEEP_SHARE * float(epsilon), mechanism)  # what the sampler runs at is what is counted
    k = keep_count(agg, level, eps_k, source)
    grid_node, cells, slots = level_nodes(agg, level)
    sel = threshold_counts(level, cells, slots, random_votes(agg.pair_user, grid_node[agg.pair_grid], cells.size, k, source),
                           k=k, epsilon=float(epsilon) - eps_k, delta=float(delta), mechanism=mechanism)
    pieces = {"selection k": eps_k, "selection cells": used_budget(sel.epsilon, mechanism)}
    cells = np.unique(sel.cells)
    windows = np.arange(0, DAY_NS, agg.slot_ns, dtype=np.int64)
    grid_cells, grid_slots = np.repeat(cells, windows.size), np.tile(windows, cells.size)
    period = (int(sel.slots.min()), int(sel.slots.max()) + PERIOD_NS) if sel.slots.size else (0, 0)
    _log.info("places selected under DP: %d cells (each user votes for at most %d)", cells.size, k)
    return PrivateList(agg=folded, partitions=PartitionList.from_grids(grid_cells, grid_slots),
                       period=period, k=int(k), selection=sel, pieces=pieces, days=days)
