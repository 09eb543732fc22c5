"""Second pass: the first records of chosen pairs only (bounded memory for the ``user`` model).

:func:`dpopt.records.contributions` with ``first_records=c`` keeps up to c records of *every*
pair in one pass: memory ≈ pairs × c, which is all the records when pairs are small (moving users).
The ``user`` model needs records only of the pairs it keeps, k per user at most, and their first
c; it chooses (k, c) and the kept pairs from the counts alone. So a caller can read the input twice:

1. ``table, report = contributions(records, grid, read, bound=U)`` — counts and sums, no records;
2. choose (k, c) and the kept pairs from ``table`` (their Γ_p = min(m_p, c) for kept pairs, 0
   otherwise), then ``kept_records(records, grid, read, table, gamma, bound=U)`` — the table with
   ``samples`` holding the first Γ_p records of pair p (by timestamp, ties by value).

Memory: Σ_p Γ_p ≤ L·k·c records, whatever the size of the input. The map and reduce steps are the
same on a local stream and on Dask partitions (:func:`dpopt.records.contributions.tree_stream`,
:func:`dpopt.records.dask_backend.tree`).
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from .._validation import DpoptInputError, check_bound, check_choice
from .aggregate import Aggregate, PairSamples
from .contributions import BACKENDS, Kept, _UserCodes, _empty_samples, _pair_dtype, first_c, tree_stream
from .grid import h3_cells, time_slots
from .ingest import clean_chunk, iter_raw_chunks
from .options import GridSpec, ReadOptions

__all__ = ["kept_records"]


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


def _kept_chunk(raw: pd.DataFrame, *, bound: float, grid: GridSpec, read: ReadOptions, lookup: _PairLookup,
                gamma: np.ndarray) -> Kept:
    """Map step: the rows of one raw chunk that may be among the first Γ_p of their pair p."""
    users = _UserCodes()
    chunk, _ = clean_chunk(raw, bound=bound, out_of_range=read.out_of_range, timestamp_unit=read.timestamp_unit,
                           time_window=read.window_ns, users=users, timezone=read.timezone,
                           time_column=read.column_map().timestamp)
    if len(chunk) == 0:
        return _empty_samples()
    cell = h3_cells(chunk.latitude, chunk.longitude, grid.h3_resolution)
    slot = time_slots(chunk.timestamp, grid.slot_ns, read.timezone)
    p = lookup(users.labels, np.asarray(chunk.user, dtype=np.int64), cell, slot)
    if np.any(p < 0):
        raise DpoptInputError("`records` changed between the two passes (a record has no pair in the table)")
    want = gamma[p] > 0
    return _merge([Kept(p=p[want].astype(_pair_dtype(gamma.size)), timestamp=chunk.timestamp[want],
                        value=chunk.value[want])], gamma)


def _merge(parts: list[Kept], gamma: np.ndarray) -> Kept:
    """Reduce step: keep the first Γ_p rows of every pair p among the parts' (:func:`first_c`)."""
    return first_c([(k.p, k.timestamp, k.value) for k in parts], gamma.size, gamma)


def kept_records(records: Any, grid: GridSpec, read: ReadOptions, table: Aggregate, gamma: np.ndarray, *,
                 bound: float, backend: str = "local", client: Any = None) -> Aggregate:
    """``table`` with ``samples`` = the first ``gamma[p]`` records of every pair p (module doc).

    ``table`` must come from :func:`dpopt.records.contributions` on the same ``records``, ``grid``,
    ``read`` and ``bound``; ``gamma`` holds one integer in 0..count per pair.
    """
    bound = check_bound(bound)
    backend = check_choice(backend, "backend", BACKENDS)
    gamma = np.asarray(gamma)
    if gamma.shape != table.count.shape or gamma.dtype.kind not in "iu" or np.any(gamma < 0) \
            or np.any(gamma > table.count):
        raise DpoptInputError("`gamma` must hold one integer in 0..count per pair of `table`")
    gamma = gamma.astype(np.int64)
    step = partial(_kept_chunk, bound=bound, grid=grid, read=read, lookup=_PairLookup(table), gamma=gamma)
    merge = partial(_merge, gamma=gamma)
    if backend == "dask":
        from .dask_backend import dask_map_reduce

        kept = dask_map_reduce(records, read, step, merge, client)
    else:
        chunks = iter_raw_chunks(records, columns=read.column_map(), chunksize=read.chunk_rows, sep=read.sep)
        kept = tree_stream((step(raw) for raw in chunks), merge)
    kept = _empty_samples() if kept is None else kept
    p = kept.p
    order = np.lexsort((kept.value, kept.timestamp, p))
    offsets = np.zeros(table.n_pairs + 1, dtype=np.int64)
    np.cumsum(gamma, out=offsets[1:])
    if offsets[-1] != p.size:
        raise DpoptInputError("`records` changed between the two passes (fewer records than counted)")
    return replace(table, samples=PairSamples(values=kept.value[order], offsets=offsets))
