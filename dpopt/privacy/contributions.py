"""The release's one door to the records (issue 20): every read of private records by the release
goes through :func:`contributions` (and, for the pseudo-user second pass of ``public-occupancy``,
:func:`truncated_reader`), so the ingestion layer can be swapped in one place.

Today the contributions table is :class:`dpopt.records.aggregate.Aggregate` (one row per (user,
finest grid) with the record count, Σx and Σx² of the values clipped to [0, U], and optionally the
samples in time order); :func:`dpopt.records.contributions` (issue 24) will replace the body.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import DpoptInputError, check_bound, check_choice, check_positive_int
from ..records.aggregate import Aggregate, Aggregator, truncated_sums_stream
from ..records.ingest import ColumnMap, IngestReport, count_rows, read_records
from .options import GridOptions

__all__ = ["InputOptions", "contributions", "truncated_reader", "BACKENDS", "OUT_OF_RANGE"]

BACKENDS = ("local", "dask")
OUT_OF_RANGE = ("clip", "drop", "error")

TruncatedSums = Callable[[Aggregate, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class InputOptions:
    """How records are read: ``columns`` (our name → theirs), ``out_of_range`` (values outside
    [0, U]: clip, drop or error), ``timestamp_unit`` of numeric times, ``chunksize`` rows per streamed
    chunk, ``backend`` "local" or "dask" (``client`` a ``distributed.Client``, default a local
    cluster), ``progress`` bars on stderr."""

    columns: ColumnMap | Mapping[str, str] | None = None
    out_of_range: str = "clip"
    timestamp_unit: str = "s"
    chunksize: int | None = None
    backend: str = "local"
    client: Any = None
    progress: bool = False
    #: CSV separator, the refused share of dropped rows, the plausible time window (dpopt.records)
    sep: str = ","
    max_dropped: float | None = None
    time_window: Any = "default"

    def read_options(self) -> Any:
        """These options as the records layer's :class:`dpopt.records.ReadOptions`."""
        from ..records import ReadOptions

        kw: dict[str, Any] = {"columns": self.columns, "sep": self.sep, "timestamp_unit": self.timestamp_unit,
                              "out_of_range": self.out_of_range}
        if self.chunksize is not None:
            kw["chunk_rows"] = self.chunksize
        if self.max_dropped is not None:
            kw["max_dropped"] = self.max_dropped
        if self.time_window != "default":
            kw["time_window"] = self.time_window
        return ReadOptions(**kw)

    def __post_init__(self) -> None:
        check_choice(self.out_of_range, "out_of_range", OUT_OF_RANGE)
        check_choice(self.timestamp_unit, "timestamp_unit", ("s", "ms", "us", "ns"))
        check_choice(self.backend, "backend", BACKENDS)
        if self.chunksize is not None:
            check_positive_int(self.chunksize, "chunksize")
        if self.client is not None and self.backend != "dask":
            raise DpoptInputError("`client` is a Dask client: it needs backend='dask'")


def contributions(records: Any, *, bound: float, grid: GridOptions = GridOptions(),
                  io: InputOptions = InputOptions(), keep_samples: bool = False,
                  first_records: int | None = None) -> tuple[Aggregate, IngestReport]:
    """Read, clean, grid and aggregate ``records`` into the contributions table (locally, streamed in
    chunks, or on Dask). The table carries ``bound`` and ``io.out_of_range``: a release uses that U.

    ``first_records`` c (the ``user`` model): the records layer's entry
    :func:`dpopt.records.contributions` keeps the c earliest records of every pair, locally or on
    Dask. Otherwise (``public-occupancy``) ``keep_samples`` keeps every sample (pseudo-user clipping).
    """
    bound = check_bound(bound)
    if first_records is not None:
        from ..records import GridSpec
        from ..records import contributions as records_contributions

        return records_contributions(records, GridSpec(grid.h3_resolution, grid.slot), io.read_options(),
                                     bound=bound, first_records=first_records, backend=io.backend,
                                     client=io.client)
    if io.backend == "dask":
        from ..records.dask_backend import aggregate_dask

        return aggregate_dask(records, bound=bound, h3_resolution=grid.h3_resolution, slot=grid.slot,
                              columns=io.columns, out_of_range=io.out_of_range,
                              timestamp_unit=io.timestamp_unit, client=io.client, keep_samples=keep_samples)
    agg = Aggregator(h3_resolution=grid.h3_resolution, slot_ns=grid.slot_ns, keep_samples=keep_samples,
                     bound=bound, out_of_range=io.out_of_range)
    report = IngestReport(out_of_range_policy=io.out_of_range)
    bar = progress_bar(io.progress, count_rows(records) if not isinstance(records, Aggregate) else None)
    try:
        for chunk, rep in read_records(records, bound=bound, columns=io.columns, out_of_range=io.out_of_range,
                                       timestamp_unit=io.timestamp_unit, chunksize=io.chunksize):
            agg.add(chunk)
            report = report + rep
            if bar is not None:
                bar.update(rep.records_read)
    finally:
        if bar is not None:
            bar.close()
    return agg.result(), report


def truncated_reader(records: Any, *, bound: float, io: InputOptions) -> TruncatedSums:
    """A second pass over the records for the pseudo-user truncated pairs (files or Dask)."""
    if io.backend == "dask":
        from ..records.dask_backend import truncated_sums_dask

        def dask_pass(a: Aggregate, pairs: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return truncated_sums_dask(records, a, pairs, keep, bound=bound, columns=io.columns,
                                       out_of_range=io.out_of_range, timestamp_unit=io.timestamp_unit,
                                       client=io.client)

        return dask_pass

    def local_pass(a: Aggregate, pairs: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        chunks = (c for c, _ in read_records(records, bound=bound, columns=io.columns, out_of_range=io.out_of_range,
                                             timestamp_unit=io.timestamp_unit, chunksize=io.chunksize))
        return truncated_sums_stream(chunks, a, pairs, keep)

    return local_pass


def progress_bar(enabled: bool, total: int | None, *, desc: str = "aggregate", unit: str = " records") -> Any:
    """A tqdm bar on stderr, or None."""
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit=unit, unit_scale=True, desc=desc, leave=False)
