"""Records → the contributions table, in bounded memory, locally or on Dask (one implementation).

The contributions table (:class:`~dpopt.records.aggregate.Aggregate`) holds one row per (user ℓ,
finest grid g) with m_{g,ℓ} > 0: the record count, Σ S and Σ S² of the cleaned values, and (for the
``user`` model's bounding, ``first_records=c``) a uniform sample of c records of the pair: those with
the smallest keyed sample keys (:mod:`.sample_key`, ties by value) — never more. Nothing here is
privacy-specific.

Algorithm (a map-reduce; the same functions run on a local stream and on Dask partitions):

1. **map** (:func:`reduce_chunk`): clean a chunk of raw rows (:func:`.ingest.clean_chunk`), grid it
   (vectorised H3, :func:`.grid.h3_cells`), factorise the user ids of the chunk (one Python str per
   *distinct* id of the chunk, none per row) and reduce it to a :class:`Partial`: per-pair count,
   sum and sum of squares (pandas groupby), plus each pair's c smallest-key records of the chunk;
2. **reduce** (:func:`merge_partials`): union the user dictionaries, remap codes, sum equal pairs,
   keep the c smallest-key records of each pair among the partials' (the c smallest of a union are
   among the c smallest of each part, so the bounded top-c is exact);
3. **finish** (:func:`finalize_partial`): number users by label and grids by (slot, cell), sort the
   pairs by (grid, user) and lay out the kept records per pair in (key, value) order.

Memory: a partial holds its distinct pairs and at most c records per pair (:class:`Kept`, 20 bytes
a record); the stream merges every :data:`COMPACT_EVERY` chunks (a tree, the same shape as on
Dask), so peak memory is bounded by the pairs × (1 + c) and :data:`MAP_THREADS` chunks being mapped at
once, not by the records: Parquet is read one
row group at a time (:mod:`.ingest`), and the top-c reduce (:func:`smallest_c`) writes into one
preallocated output and sorts only the records of pairs over c that lie below their key
quantile (:data:`PREFILTER_SDS`), in blocks of :data:`SELECT_BLOCK` (measured at 10^8 records / 3.7·10^6 pairs: tests/benchmarks/results/scale.md).
Counts, keys and kept records are exact whatever the chunking (the sample keys are functions of
the records and the release's secret, never of their order); the float sums Σ S, Σ S² are sums
of the same numbers in a tree whose shape is fixed by the chunk boundaries (identical when the
chunks are; within float rounding otherwise).

Ingestion hygiene: after the whole input is read the run is refused (:func:`.ingest.check_dropped`)
when more than ``max_dropped`` of the rows were dropped; the message names the flag and the causes
with their counts. That makes whether a release happens depend on the data, acceptable only where
the occupancy is public (``public-occupancy``): the ``user`` model's front door reads with
``max_dropped=1`` (never refused) and keeps the counts for the data holder's diagnostics only.
Empty input (no record, or none valid within the share) is not refused here: it yields an empty
table. The files read are listed in the report (``IngestReport.files``).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from .._memory import trim_heap
from .._validation import DpoptInputError, check_bound, check_choice, check_lower, check_positive_int, label_texts
from .aggregate import Aggregate, PairSamples
from .grid import h3_cells, time_slots
from .ingest import IngestReport, check_dropped, clean_chunk, decimal_points, input_files, iter_raw_chunks
from .options import BACKENDS, GridOptions, InputOptions
from .sample_key import SampleKey, record_keys
from ._tree import COMPACT_EVERY, tree_stream

__all__ = ["Partial", "contributions", "reduce_chunk", "merge_partials", "finalize_partial", "smallest_c", "COMPACT_EVERY",
           "BACKENDS"]

_KEYS = ["u", "cell", "slot"]


@dataclass(frozen=True)
class Partial:
    """The contributions of some chunks, before numbering.

    ``users``: object array of distinct user labels (str); ``pairs``: DataFrame u (code into
    ``users``), cell, slot, count, sum, sumsq (one row per pair); ``samples``: :class:`Kept`, at
    most ``first_records`` records per pair (the smallest keys), or None.
    """

    users: np.ndarray
    pairs: pd.DataFrame
    samples: Kept | None
    report: IngestReport


@dataclass(frozen=True)
class Kept:
    """Kept records of a :class:`Partial` as three aligned arrays: ``p`` the row of the record's
    pair in the partial's ``pairs`` (int32 while the partial has < 2^31 pairs, else int64),
    ``key`` (uint64, :func:`.sample_key.record_keys`) and ``value`` (float64). 20 bytes a record; in
    no particular order."""

    p: np.ndarray
    key: np.ndarray
    value: np.ndarray

    def __len__(self) -> int:
        return int(self.p.shape[0])


def _empty_pairs() -> pd.DataFrame:
    return pd.DataFrame({"u": np.empty(0, np.int64), "cell": np.empty(0, np.int64), "slot": np.empty(0, np.int64),
                         "count": np.empty(0, np.int64), "sum": np.empty(0), "sumsq": np.empty(0)})


def _empty_samples() -> Kept:
    return Kept(p=np.empty(0, np.int32), key=np.empty(0, np.uint64), value=np.empty(0))


def _pair_dtype(n_pairs: int) -> type:
    """The narrowest code type for pair rows 0..n_pairs-1 (int32 below 2^31 pairs)."""
    return np.int32 if n_pairs < 2**31 else np.int64


#: kept records of the pairs over c sorted at once by :func:`smallest_c` (bounds its temporaries)
SELECT_BLOCK = 1_000_000


class _UserCodes:
    """Factorise a chunk's raw user column: codes per row, one label str per distinct id."""

    def __init__(self) -> None:
        self.labels = np.empty(0, dtype=object)

    def __call__(self, col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
        codes, uniq = pd.factorize(col, use_na_sentinel=True)
        text, missing = label_texts(uniq)
        # distinct raw values with one label (7 and 7.0 of one numeric column) are one user
        lcodes, labels = pd.factorize(text)
        self.labels = np.asarray(labels, dtype=object)
        na = codes < 0
        safe = np.where(na, 0, codes)
        if uniq.size == 0:
            return np.full(codes.size, -1, dtype=np.int64), np.ones(codes.size, dtype=bool)
        return np.where(na, -1, lcodes[safe]).astype(np.int64), na | missing[safe]


def pair_key_order(pair: np.ndarray, key: np.ndarray, value: np.ndarray) -> np.ndarray:
    """The permutation sorting records by (pair, sample key, value). Fast path: one stable argsort
    of pair·2^32 + the key's top 32 bits instead of a three-key lexsort (the records usually arrive in
    runs of their pair, which the stable sort uses); exact: the records of a run that shares those
    bits (equal records, or 2^-32 per two records of a pair: a few at 10^7 records) are put in
    (key, value) order by a lexsort of those records alone."""
    pair = np.asarray(pair)
    if not (pair.size and int(pair.max()) < 2**31):
        return np.lexsort((value, key, pair))
    key = np.asarray(key, dtype=np.uint64)
    comb = (pair.astype(np.uint64) << np.uint64(32)) | (key >> np.uint64(32))
    order = np.argsort(comb, kind="stable")
    s = comb[order]
    tie = s[1:] == s[:-1]
    if tie.any():
        at = np.zeros(s.size, dtype=bool)
        at[1:] |= tie
        at[:-1] |= tie
        pos = np.flatnonzero(at)
        rows = order[pos]  # tied runs are contiguous in s, so sorting by s first moves rows only within their run
        order[pos] = rows[np.lexsort((np.asarray(value)[rows], key[rows], s[pos]))]
    return order


def smallest_c(pieces: list[tuple[np.ndarray, np.ndarray, np.ndarray]], n_pairs: int, c: Any) -> Kept:
    """The ``c`` records with the smallest (key, value) of every pair among ``pieces`` — (p, key,
    value) arrays with p in 0..n_pairs-1 — as one :class:`Kept` (the bounded top-c reduce): a uniform
    sample of each pair's records (:mod:`.sample_key`). ``c`` one limit for every pair, or an int
    array of one limit per pair (Γ_p of :func:`.kept_records`).

    Memory: the output is allocated once (Σ_p min(candidates_p, c) records); the records of pairs
    with at most c candidates are copied through unsorted, those of the other pairs are sorted in
    blocks of pair ids holding about :data:`SELECT_BLOCK` records, so the temporaries do not grow
    with the input (the former concat-all + lexsort took ≈ 80 bytes per kept record at 10^8 records).
    """
    cand = np.zeros(n_pairs, dtype=np.int64)
    for p, _, _ in pieces:
        cand += np.bincount(p, minlength=n_pairs)
    big = cand > c
    total = int(np.minimum(cand, c).sum()) if n_pairs else 0
    out = Kept(p=np.empty(total, _pair_dtype(n_pairs)), key=np.empty(total, np.uint64), value=np.empty(total))
    pos = 0
    rows_big = []
    for p, t, v in pieces:
        over = big[p]
        small = ~over
        k = int(small.sum())
        for dst, src in ((out.p, p), (out.key, t), (out.value, v)):
            dst[pos:pos + k] = src[small]
        pos += k
        rows_big.append(np.flatnonzero(over))
    if big.any():
        rows_big, sorted_count = _below_key_quantile(pieces, rows_big, big, cand, c)
        pos = _smallest_c_of_big(pieces, rows_big, big, sorted_count, c, out, pos)
    if pos != total:  # pragma: no cover - internal consistency
        raise RuntimeError("top-c selection lost records")
    return out


#: before its sort, a pair over c keeps only the records whose key lies below the key quantile where
#: c + PREFILTER_SDS·(√c + 1) of its records are expected (its keys are uniform); a pair left with
#: fewer than c keeps all. A speed setting only: the selection is exact for any value.
PREFILTER_SDS = 3.0


def _below_key_quantile(pieces: list[tuple[np.ndarray, np.ndarray, np.ndarray]], rows_big: list[np.ndarray],
                        big: np.ndarray, cand: np.ndarray, c: Any) -> tuple[list[np.ndarray], np.ndarray]:
    """The rows of the pairs over c that can be among their c smallest keys, and their count per pair.

    Exact: a pair keeping at least c records with key·2^-11 below its cut has its c smallest
    (key, value) among them, since every record it drops has a larger key than every record it keeps;
    a pair keeping fewer keeps all its rows."""
    limit = np.broadcast_to(np.asarray(c, dtype=np.float64), cand.shape)
    share = (limit + PREFILTER_SDS * (np.sqrt(limit) + 1.0)) / np.maximum(cand, 1)
    cut = np.where(share >= 1.0, 2.0**53, np.floor(share * 2.0**53)).astype(np.uint64)
    shift = np.uint64(11)
    passed = [(t[r] >> shift) < cut[p[r]] for (p, t, _), r in zip(pieces, rows_big)]
    count = np.zeros(cand.size, dtype=np.int64)
    for (p, _, _), r, ok in zip(pieces, rows_big, passed):
        count += np.bincount(p[r[ok]], minlength=cand.size)
    short = big & (count < limit)
    rows = [r[ok | short[p[r]]] for (p, _, _), r, ok in zip(pieces, rows_big, passed)]
    return rows, np.where(short, cand, count)


def _smallest_c_of_big(pieces: list[tuple[np.ndarray, np.ndarray, np.ndarray]], rows_big: list[np.ndarray],
                       big: np.ndarray, cand: np.ndarray, c: Any, out: Kept, pos: int) -> int:
    """Write the c smallest-key records of every pair over c into ``out`` from ``pos``, block by block of
    pair ids (≈ :data:`SELECT_BLOCK` candidate records a block; ``cand`` the rows per pair in
    ``rows_big``); returns the next position."""
    ids = np.flatnonzero(big)
    cum = np.cumsum(cand[ids])
    cuts = np.searchsorted(cum, np.arange(SELECT_BLOCK, int(cum[-1]), SELECT_BLOCK), side="right")
    edges = np.unique(np.concatenate([[0], cuts, [ids.size]]))
    pair_of_big = [p[r] for (p, _, _), r in zip(pieces, rows_big)]
    for lo, hi in zip(edges[:-1], edges[1:]):
        first, last = ids[lo], ids[hi - 1]
        sel = [r[(pb >= first) & (pb <= last)] for r, pb in zip(rows_big, pair_of_big)]
        bp = np.concatenate([p[r] for (p, _, _), r in zip(pieces, sel)])
        bt = np.concatenate([t[r] for (_, t, _), r in zip(pieces, sel)])
        bv = np.concatenate([v[r] for (_, _, v), r in zip(pieces, sel)])
        order = pair_key_order(bp, bt, bv)
        ps = bp[order]
        start = np.flatnonzero(np.concatenate([[True], ps[1:] != ps[:-1]]))
        rank = np.arange(ps.size) - np.repeat(start, np.diff(np.append(start, ps.size)))
        keep = order[rank < (c if np.isscalar(c) else c[ps])]
        k = keep.size
        out.p[pos:pos + k], out.key[pos:pos + k], out.value[pos:pos + k] = bp[keep], bt[keep], bv[keep]
        pos += k
    return pos


def chunk_keys(chunk: Any, labels: np.ndarray, sample_key: SampleKey | None, rows: Any = slice(None)) -> np.ndarray:
    """The sample key of the ``rows`` of a cleaned chunk (:func:`.sample_key.record_keys`);
    ``labels`` the chunk's distinct user labels (the codes of ``chunk.user`` index them)."""
    if not isinstance(sample_key, SampleKey):
        raise DpoptInputError(f"`sample_key` must be a dpopt.records.SampleKey; got {type(sample_key).__name__}")
    codes = np.asarray(chunk.user, dtype=np.int64)[rows]
    words = sample_key.user_words(labels)[codes] if codes.size else np.empty(0, np.uint64)
    return record_keys(sample_key, words, chunk.timestamp[rows], chunk.value[rows], chunk.latitude[rows],
                       chunk.longitude[rows])


def reduce_chunk(raw: pd.DataFrame, *, bound: float, grid: GridOptions, read: InputOptions,
                 first_records: int | None = None, sample_key: SampleKey | None = None, lower: float = 0.0) -> Partial:
    """Map step: one raw chunk (canonical columns) → its :class:`Partial` (``sample_key`` needed
    with ``first_records``; values read as x − ``lower``, :func:`.ingest.clean_chunk`)."""
    users = _UserCodes()
    chunk, report = clean_chunk(decimal_points(raw, read.decimal), bound=bound, lower=lower,
                                out_of_range=read.out_of_range,
                                timestamp_unit=read.timestamp_unit, time_window=read.window_ns, users=users,
                                timezone=read.timezone, time_column=read.column_map().timestamp,
                                naive_times=read.naive_times)
    report = replace(report, time_window=read.time_window)
    frame = pd.DataFrame({
        "u": np.asarray(chunk.user, dtype=np.int64),
        "cell": h3_cells(chunk.latitude, chunk.longitude, grid.h3_resolution),
        "slot": time_slots(chunk.timestamp, grid.slot_ns, read.timezone),
    })
    if not len(frame):
        return Partial(users=users.labels, pairs=_empty_pairs(),
                       samples=None if first_records is None else _empty_samples(), report=report)
    stats = frame.assign(count=np.ones(len(frame), dtype=np.int64), sum=chunk.value, sumsq=chunk.value ** 2)
    groups = stats.groupby(_KEYS, sort=False, observed=True)
    pairs = groups.sum().reset_index()
    samples = None
    if first_records is not None:  # ngroup numbers the groups in the order of sum(sort=False)
        p = groups.ngroup().to_numpy().astype(_pair_dtype(len(pairs)))
        samples = smallest_c([(p, chunk_keys(chunk, users.labels, sample_key), chunk.value)], len(pairs),
                             first_records)
    return Partial(users=users.labels, pairs=pairs, samples=samples, report=report)


def merge_partials(parts: list[Partial], first_records: int | None = None) -> Partial:
    """Reduce step: sum equal pairs, keep the ``first_records`` smallest-key records of each pair."""
    parts = list(parts)
    if len(parts) == 1:
        return parts[0]
    report = parts[0].report
    for p in parts[1:]:
        report = report + p.report
    codes, labels = pd.factorize(np.concatenate([p.users for p in parts]) if parts else np.empty(0, object))
    remap, start = [], 0
    for p in parts:
        remap.append(codes[start:start + p.users.size].astype(np.int64))
        start += p.users.size
    live = [(p, r) for p, r in zip(parts, remap) if len(p.pairs)]
    if not live:
        pairs, new_row = _empty_pairs(), np.empty(0, dtype=np.int64)
    else:
        pairs = pd.concat([p.pairs.assign(u=r[p.pairs["u"].to_numpy()]) for p, r in live], ignore_index=True)
        new_row = np.arange(len(pairs), dtype=np.int64)
        if len(live) > 1:
            groups = pairs.groupby(_KEYS, sort=False, observed=True)
            new_row = groups.ngroup().to_numpy(dtype=np.int64)  # numbering of sum(sort=False)'s rows
            pairs = groups.sum().reset_index()
    samples = None
    if first_records is not None:
        pieces, start, code = [], 0, _pair_dtype(len(pairs))
        for p, _ in live:
            pieces.append((new_row[np.add(p.samples.p, start, dtype=np.int64)].astype(code), p.samples.key,
                           p.samples.value))
            start += len(p.pairs)
        samples = smallest_c(pieces, len(pairs), first_records)
    return Partial(users=np.asarray(labels, dtype=object), pairs=pairs, samples=samples, report=report)


def finalize_partial(part: Partial, *, grid: GridOptions, bound: float, out_of_range: str,
                     first_records: int | None = None, lower: float = 0.0) -> Aggregate:
    """Finish: users numbered by label, grids by (slot, cell), pairs sorted by (grid, user); the
    kept records laid out per pair in (key, value) order. An empty partial gives an empty table."""
    labels = np.asarray(part.users, dtype=object)
    pairs = part.pairs
    used = np.unique(pairs["u"].to_numpy(dtype=np.int64))
    order_u = used[np.argsort(labels[used], kind="stable")]
    rank = np.full(labels.size, -1, dtype=np.int64)
    rank[order_u] = np.arange(order_u.size)
    u = rank[pairs["u"].to_numpy(dtype=np.int64)]
    cell = pairs["cell"].to_numpy(dtype=np.int64)
    slot = pairs["slot"].to_numpy(dtype=np.int64)
    order = np.lexsort((u, cell, slot))
    cell, slot, u = cell[order], slot[order], u[order]
    new = np.ones(order.size, dtype=bool)
    new[1:] = (cell[1:] != cell[:-1]) | (slot[1:] != slot[:-1])
    g = np.cumsum(new) - 1
    count = pairs["count"].to_numpy(dtype=np.int64)[order]
    samples = None
    if first_records is not None:
        samples = _lay_out(part.samples, order, count, first_records)
    return Aggregate(
        users=labels[order_u].astype(object), cells=cell[new], slots=slot[new], pair_user=u, pair_grid=g.astype(np.int64),
        count=count, sum=pairs["sum"].to_numpy(dtype=float)[order], sumsq=pairs["sumsq"].to_numpy(dtype=float)[order],
        h3_resolution=grid.h3_resolution, slot_ns=grid.slot_ns, samples=samples, bound=float(bound),
        out_of_range=out_of_range, lower=float(lower),
    )


def _lay_out(kept: Kept | None, order: np.ndarray, count: np.ndarray, c: int) -> PairSamples:
    """Kept records sorted by (final pair, key, value): pair p owns the next min(m_p, c).
    ``order``: the partial's pair rows in final order."""
    kept = _empty_samples() if kept is None else kept
    final = np.empty(order.size, dtype=_pair_dtype(order.size))
    final[order] = np.arange(order.size)
    val = kept.value
    idx = pair_key_order(final[kept.p], kept.key, val)
    offsets = np.zeros(count.size + 1, dtype=np.int64)
    np.cumsum(np.minimum(count, c), out=offsets[1:])
    if offsets[-1] != val.size:  # pragma: no cover - internal consistency
        raise RuntimeError("kept records do not match the pair counts")
    return PairSamples(values=val[idx], offsets=offsets, limit=int(c), keys=kept.key[idx])


#: chunks mapped at once by the local stream (threads: H3, numpy's sorts and pandas' group-bys release
#: the GIL); a speed setting: the partials and their merge order are the same for any value
MAP_THREADS = max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


def _local_partials(records: Any, read: InputOptions, step: Any) -> Iterator[Partial]:
    """:func:`_mapped` and, once its last partial is taken, the heap pages its chunks left freed
    returned before the stream's final merges (:func:`dpopt._memory.trim_heap`; memory only: at 2·10⁷
    records the stream held ≈ 1.0 GB resident with ≈ 270 MB live, and the final merge added 0.5 GB on
    top). Once, not at every merge: pages the next chunks fault in again cost ≈ 0.3 s a trim."""
    yield from _mapped(records, read, step)
    trim_heap()


def _mapped(records: Any, read: InputOptions, step: Any) -> Iterator[Partial]:
    """The map step over the stream's chunks, :data:`MAP_THREADS` at a time, yielded in input order
    (at most that many raw chunks are held beyond the one being read)."""
    chunks = iter_raw_chunks(records, columns=read.column_map(), chunksize=read.chunksize, sep=read.sep)
    if MAP_THREADS == 1:
        yield from map(step, chunks)
        return
    with ThreadPoolExecutor(MAP_THREADS) as pool:
        running: deque = deque()
        try:
            for raw in chunks:
                running.append(pool.submit(step, raw))
                if len(running) >= MAP_THREADS:
                    yield running.popleft().result()
            while running:
                yield running.popleft().result()
        finally:
            for job in running:
                job.cancel()


def contributions(records: Any, grid: GridOptions, read: InputOptions, *, bound: float, lower: float = 0.0,
                  first_records: int | None = None, sample_key: SampleKey | None = None, backend: str = "local",
                  client: Any = None) -> tuple[Aggregate, IngestReport]:
    """Read, clean and grid ``records`` into the contributions table (layer 1's one entry).

    Parameters
    ----------
    records : pandas DataFrame, a CSV (optionally compressed) or Parquet file, or a directory of
        CSV files or of Parquet files; on ``backend="dask"`` also a Dask DataFrame or a URL/glob.
    grid : :class:`GridOptions` (H3 resolution × slot).
    read : :class:`InputOptions` (columns, separator, timestamp unit, out-of-range policy, chunk
        rows, max dropped share, time window).
    bound : U; values are brought into [0, U] by ``read.out_of_range``.
    lower : L (default 0, nothing subtracted): every value x is read as x − L first, the records'
        range being [L, L + U]; ``Aggregate.lower`` records L.
    first_records : c; keep a uniform sample of c records of every pair in ``Aggregate.samples``:
        the c smallest sample keys, ties by value (:mod:`.sample_key`); None keeps none.
    sample_key : the release's :class:`SampleKey` (its secret); None: the public key
        :meth:`SampleKey.public` (reproducible; a second pass over the same records must use the same key).
    backend : "local" (streamed in chunks of ``read.chunksize``) or "dask" (``client`` a
        ``distributed.Client``; None: Dask's threaded scheduler in this process).

    Returns
    -------
    (Aggregate, IngestReport)
        The table (empty when no record survives cleaning) and what ingestion read and dropped.

    Raises
    ------
    DpoptInputError
        Bad options, an unreadable input, or more than ``read.dropped_limit`` of the rows dropped.
    """
    bound, lower = check_bound(bound), check_lower(lower)
    if not isinstance(grid, GridOptions):
        raise DpoptInputError(f"`grid` must be a dpopt.records.GridOptions; got {type(grid).__name__}")
    if not isinstance(read, InputOptions):
        raise DpoptInputError(f"`read` must be a dpopt.records.InputOptions; got {type(read).__name__}")
    if first_records is not None:
        first_records = check_positive_int(first_records, "first_records")
        sample_key = SampleKey.public() if sample_key is None else sample_key
    backend = check_choice(backend, "backend", BACKENDS)
    step = partial(reduce_chunk, bound=bound, grid=grid, read=read.for_workers(), first_records=first_records, sample_key=sample_key,
                   lower=lower)
    if backend == "dask":
        from .dask_backend import dask_map_reduce

        part = dask_map_reduce(records, read, step, partial(merge_partials, first_records=first_records), client)
    else:
        if client is not None:
            raise DpoptInputError("`client` needs backend='dask'")
        part = tree_stream(_local_partials(records, read, step), partial(merge_partials, first_records=first_records))
    if part is None:  # no chunk at all (an empty directory or file)
        part = Partial(users=np.empty(0, dtype=object), pairs=_empty_pairs(),
                       samples=None if first_records is None else _empty_samples(),
                       report=IngestReport(out_of_range_policy=read.out_of_range, time_window=read.time_window))
    report = replace(part.report, files=input_files(records))
    check_dropped(report, read)
    agg = finalize_partial(part, grid=grid, bound=bound, out_of_range=read.out_of_range, first_records=first_records,
                           lower=lower)
    return replace(agg, timezone=read.timezone), report
