"""Kept records: a second pass over chosen pairs, and a user's c records in a node (uniform samples).

:func:`dpopt.records.contributions` with ``first_records=c`` keeps up to c records of *every*
pair in one pass: memory ≈ pairs × c, which is all the records when pairs are small (moving users).
The ``user`` model needs records only of the pairs it keeps, k per user at most, and c of each; it
chooses (k, c) and the kept pairs from the counts alone. So a caller can read the input twice:

1. ``table, report = contributions(records, grid, read, bound=U)`` — counts and sums, no records;
2. choose (k, c) and the kept pairs from ``table`` (their Γ_p = min(m_p, c) for kept pairs, 0
   otherwise), then ``kept_records(records, grid, read, table, gamma, bound=U, sample_key=s)`` —
   the table with ``samples`` holding the Γ_p records of pair p with the smallest sample keys
   (:mod:`.sample_key`, ties by value): a uniform sample of the pair's records.

Memory: Σ_p Γ_p ≤ L·k·c records, whatever the size of the input. The map and reduce steps are the
same on a local stream and on Dask partitions (:func:`dpopt.records.contributions.tree_stream`,
:func:`dpopt.records.dask_backend.tree`); the kept sets are bit-identical on both.

**A user's c records in a node** (:func:`node_sample_counts`): at a coarser level a user's kept
records in a node are the c with the smallest keys among its records in the node's finest grids, a
uniform sample of them. Each pair's stored records are its smallest keys in order, so the node's c
smallest hold the first Γ_p of each pair p: the rule is a vector Γ_p, read like every other.
Sensitivity: Γ depends only on the user's own records and the release's secret, and
Σ_{p in the node} Γ_p ≤ c, so every level's sensitivity argument holds unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from .._validation import DpoptInputError, check_bound, check_choice, check_lower
from .aggregate import Aggregate, PairSamples
from .contributions import (BACKENDS, Kept, _UserCodes, _empty_samples, _pair_dtype, chunk_keys, pair_key_order,
                            smallest_c, tree_stream)
from .grid import h3_cells, time_slots
from .ingest import clean_chunk, decimal_points, iter_raw_chunks
from .options import GridOptions, InputOptions
from .sample_key import SampleKey

__all__ = ["kept_records", "node_sample_counts", "node_split_counts"]


class _PairLookup:
    """Row → its pair in ``table``, built once per pass (the per-chunk rebuild of a user index, a
    grid MultiIndex and the pair keys cost ≈ 1 s a chunk at 3.7·10^6 pairs). Grids are sorted by
    (slot, cell), so the key (slot rank, cell rank) is unique per grid; pairs are unique in (grid,
    user), so g·L + u is unique per pair: two binary searches on the few distinct slots and cells,
    then two hash lookups (pandas' Index, built once: 10× faster than binary searches into the
    3.7·10^6 pair keys of 10^8 records)."""

    def __init__(self, table: Aggregate) -> None:
        self.users = pd.Index(table.users)
        self.L = max(table.n_users, 1)
        self.slots, self.cells = np.unique(table.slots), np.unique(table.cells)
        if self.slots.size * max(self.cells.size, 1) >= 2**62 or table.n_grids * self.L >= 2**62:
            raise DpoptInputError("the contributions table is too large for the second pass (int64 keys)")
        self.grids = pd.Index(self._grid_key(table.slots, table.cells)[0])
        self.pairs = pd.Index(table.pair_grid * self.L + table.pair_user)

    def _grid_key(self, slot: np.ndarray, cell: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        si = np.minimum(np.searchsorted(self.slots, slot), max(self.slots.size - 1, 0))
        ci = np.minimum(np.searchsorted(self.cells, cell), max(self.cells.size - 1, 0))
        if not self.slots.size:
            return np.zeros(slot.size, np.int64), np.zeros(slot.size, dtype=bool)
        ok = (self.slots[si] == slot) & (self.cells[ci] == cell)
        return si.astype(np.int64) * self.cells.size + ci, ok

    def __call__(self, labels: np.ndarray, codes: np.ndarray, cell: np.ndarray, slot: np.ndarray) -> np.ndarray:
        """Index of each row's pair (−1 if absent: the input changed between passes)."""
        u = self.users.get_indexer(labels)[codes] if codes.size else codes
        key, ok = self._grid_key(slot, cell)
        g = np.where(ok, self.grids.get_indexer(key), -1)
        p = self.pairs.get_indexer(g * self.L + u)
        return np.where((u >= 0) & (g >= 0), p, -1)


def _kept_chunk(raw: pd.DataFrame, *, bound: float, grid: GridOptions, read: InputOptions, lookup: _PairLookup,
                gamma: np.ndarray, sample_key: SampleKey, lower: float = 0.0) -> Kept:
    """Map step: the rows of one raw chunk that may be among the Γ_p smallest keys of their pair p."""
    users = _UserCodes()
    chunk, _ = clean_chunk(decimal_points(raw, read.decimal), bound=bound, lower=lower,
                           out_of_range=read.out_of_range,
                           timestamp_unit=read.timestamp_unit,
                           time_window=read.window_ns, users=users, timezone=read.timezone,
                           time_column=read.column_map().timestamp, naive_times=read.naive_times)
    if len(chunk) == 0:
        return _empty_samples()
    cell = h3_cells(chunk.latitude, chunk.longitude, grid.h3_resolution)
    slot = time_slots(chunk.timestamp, grid.slot_ns, read.timezone)
    p = lookup(users.labels, np.asarray(chunk.user, dtype=np.int64), cell, slot)
    if np.any(p < 0):
        raise DpoptInputError("`records` changed between the two passes (a record has no pair in the table)")
    want = gamma[p] > 0
    keys = chunk_keys(chunk, users.labels, sample_key, want)
    return _merge([Kept(p=p[want].astype(_pair_dtype(gamma.size)), key=keys, value=chunk.value[want])], gamma)


def _merge(parts: list[Kept], gamma: np.ndarray) -> Kept:
    """Reduce step: keep the Γ_p smallest-key rows of every pair p among the parts' (:func:`smallest_c`)."""
    return smallest_c([(k.p, k.key, k.value) for k in parts], gamma.size, gamma)


def kept_records(records: Any, grid: GridOptions, read: InputOptions, table: Aggregate, gamma: np.ndarray, *,
                 bound: float, lower: float | None = None, sample_key: SampleKey | None = None,
                 backend: str = "local", client: Any = None) -> Aggregate:
    """``table`` with ``samples`` = the ``gamma[p]`` smallest-key records of every pair p (module doc).

    ``table`` must come from :func:`dpopt.records.contributions` on the same ``records``, ``grid``,
    ``read``, ``bound`` and ``lower`` (None: the table's ``lower``); ``gamma`` holds one integer in
    0..count per pair; ``sample_key`` the release's key (the one given to ``contributions``; None:
    :meth:`.SampleKey.public`).
    """
    bound = check_bound(bound)
    lower = float(table.lower) if lower is None else check_lower(lower)
    if lower != table.lower:
        raise DpoptInputError(f"`lower` must be the L the table's values were shifted by ({table.lower:g}); got "
                              f"{lower:g}")
    sample_key = SampleKey.public() if sample_key is None else sample_key
    backend = check_choice(backend, "backend", BACKENDS)
    gamma = np.asarray(gamma)
    if gamma.shape != table.count.shape or gamma.dtype.kind not in "iu" or np.any(gamma < 0) \
            or np.any(gamma > table.count):
        raise DpoptInputError("`gamma` must hold one integer in 0..count per pair of `table`")
    gamma = gamma.astype(np.int64)
    step = partial(_kept_chunk, bound=bound, grid=grid, read=read.for_workers(), lookup=_PairLookup(table), gamma=gamma,
                   sample_key=sample_key, lower=lower)
    merge = partial(_merge, gamma=gamma)
    if backend == "dask":
        from .dask_backend import dask_map_reduce

        kept = dask_map_reduce(records, read, step, merge, client)
    else:
        chunks = iter_raw_chunks(records, columns=read.column_map(), chunksize=read.chunksize, sep=read.sep)
        kept = tree_stream((step(raw) for raw in chunks), merge)
    kept = _empty_samples() if kept is None else kept
    p = kept.p
    order = pair_key_order(p, kept.key, kept.value)
    offsets = np.zeros(table.n_pairs + 1, dtype=np.int64)
    np.cumsum(gamma, out=offsets[1:])
    if offsets[-1] != p.size:
        raise DpoptInputError("`records` changed between the two passes (fewer records than counted)")
    return replace(table, samples=PairSamples(values=kept.value[order], offsets=offsets, keys=kept.key[order]))


def node_sample_counts(samples: PairSamples, group: np.ndarray, c: int, *,
                       fallback_keys: Callable[[int], np.ndarray] | None = None) -> np.ndarray:
    """Γ_p per pair: how many of pair p's records are among the ``c`` records with the smallest
    (key, value) of its group (module doc). ``group[p]`` ≥ 0 names the group (a (user, node)) whose
    records pair p's join; −1 keeps none of p. The pairs' stored records must hold each pair's
    smallest keys in order (``samples.limit`` ≥ c). Without ``samples.keys`` (a table built by
    hand, stored in time order) ``fallback_keys(n)`` draws n i.i.d. keys, sorted within each pair:
    the counts Γ_p then have the law of a uniform sample's, within a pair its stored order."""
    group = np.asarray(group, dtype=np.int64)
    offsets = np.asarray(samples.offsets, dtype=np.int64)
    take = np.where(group >= 0, np.minimum(np.diff(offsets), int(c)), 0)
    total = int(take.sum())
    owner = np.repeat(np.arange(group.size), take)
    pos = offsets[owner] + np.arange(total) - np.repeat(np.cumsum(take) - take, take)
    if samples.keys is not None:
        keys = samples.keys[pos]
    elif fallback_keys is not None:
        r = np.asarray(fallback_keys(total))
        keys = r[np.lexsort((r, owner))]  # owner is sorted: the j-th smallest draw of a pair at its j-th record
    else:
        raise DpoptInputError("the contributions carry no sample keys: build them with dpopt.records.contributions")
    g = group[owner]
    order = np.lexsort((samples.values[pos], keys, g))
    gs = g[order]
    rank = np.arange(total) - np.searchsorted(gs, gs, side="left")
    return np.bincount(owner[order[rank < int(c)]], minlength=group.size).astype(np.int64)


def node_split_counts(count: np.ndarray, group: np.ndarray, want: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Γ_p per member p of its group: how many of the ``want[p]`` records its group keeps fall in p,
    drawn from the multivariate hypergeometric law (module doc, "a user's c records in a node", when
    only the counts are at hand: a second pass, or a model whose counts are public).

    ``count`` m_p ≥ 0 per member; ``group`` its group (members of a group contiguous); ``want`` the
    group's number of records to keep, repeated on each member (≤ the group's Σ m_p). The split
    reads only the counts and ``rng`` (drawn independently of the data); each member then keeps its
    Γ_p smallest-key records, so the group keeps a uniform sample of want records: the counts of a
    uniform sample across the members have exactly this law, and given them the members' subsets are
    independent uniform ones. Vectorised over groups, one step per member rank (sequential draws
    x_j ~ Hypergeometric(m_j, rest_j − m_j, still wanted))."""
    count, group = np.asarray(count, dtype=np.int64), np.asarray(group, dtype=np.int64)
    want = np.asarray(want, dtype=np.int64)
    n = count.size
    start = np.r_[0, np.flatnonzero(group[1:] != group[:-1]) + 1] if n else np.zeros(0, np.int64)
    size = np.diff(np.r_[start, n])
    total = np.add.reduceat(count, start) if n else np.zeros(0, np.int64)
    need = want[start] if n else np.zeros(0, np.int64)
    if np.any(need > total) or np.any(need < 0):
        raise DpoptInputError("`want` must be in 0..the group's record count")
    out = count.copy()
    cut = np.flatnonzero(need < total)  # groups that keep fewer than all of their records
    rest, left = total[cut], need[cut]
    for j in range(int(size[cut].max()) if cut.size else 0):
        live = np.flatnonzero(size[cut] > j)
        idx = start[cut[live]] + j
        x = rng.hypergeometric(count[idx], rest[live] - count[idx], left[live])
        out[idx] = x
        rest[live] -= count[idx]
        left[live] -= x
    return out
