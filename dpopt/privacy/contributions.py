"""The release's one door to the records: every read of private records by the release
goes through :func:`contributions` (and, for the pseudo-user second pass of ``public-occupancy``,
:func:`truncated_reader`), so the ingestion layer can be swapped in one place.

The contributions table is :class:`dpopt.records.aggregate.Aggregate` (one row per (user, finest
grid) with the record count, Σx and Σx² of the values clipped to [0, U], and optionally a uniform
sample of each pair's records: the smallest keyed sample keys, :mod:`dpopt.records.sample_key`), built by :func:`dpopt.records.contributions` for both privacy
models, locally or on Dask, with the same reading options (separator, dropped share, time window).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import DpoptInputError, check_bound, check_choice, check_positive_int
from ..records import contributions as records_contributions
from ..records.aggregate import Aggregate, prefix_sums
from ..records.grid import slot_text
from ..records.ingest import ColumnMap, IngestReport
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
    #: IANA zone of times written without a UTC offset (None: such times are refused)
    timezone: str | None = None

    def read_options(self) -> Any:
        """These options as the records layer's :class:`dpopt.records.ReadOptions`."""
        from ..records import ReadOptions

        kw: dict[str, Any] = {"columns": self.columns, "sep": self.sep, "timestamp_unit": self.timestamp_unit,
                              "out_of_range": self.out_of_range, "timezone": self.timezone}
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
        self.read_options()  # columns, separator, window, zone: checked before any record is read


#: ``first_records`` that keeps every record of every pair (``keep_samples=True``)
ALL_RECORDS = 2**53


def contributions(records: Any, *, bound: float, grid: GridOptions = GridOptions(),
                  io: InputOptions = InputOptions(), keep_samples: bool = False,
                  first_records: int | None = None, sample_key: Any = None,
                  lower: float = 0.0) -> tuple[Aggregate, IngestReport]:
    """Read, clean, grid and aggregate ``records`` into the contributions table with the records
    layer's one entry :func:`dpopt.records.contributions` (streamed in chunks, or on Dask). The
    table carries ``bound`` and ``io.out_of_range``: a release uses that U.

    ``lower`` L: the values' range is [L, L + ``bound``]; every value x is read as x − L (the
    table records L as ``lower``), so both privacy models see values in [0, ``bound``] and the
    release adds L back to every published mean (:func:`dpopt.writers.values.with_value_range`).

    ``first_records`` c (the ``user`` model) keeps a uniform sample of c records of every pair (the
    c smallest keys under ``sample_key``, a :class:`dpopt.records.SampleKey`; None: the public key);
    ``keep_samples`` (``public-occupancy``'s pseudo-user clipping on a DataFrame) keeps all of them,
    in key order.
    Without ``first_records`` (``public-occupancy``, whose plan needs a non-empty occupancy) an
    input with no valid record is refused; the ``user`` model releases an empty table.
    """
    bound = check_bound(bound)
    public = first_records is None
    if keep_samples and public:
        first_records = ALL_RECORDS
    agg, report = records_contributions(records, _grid_spec(grid.h3_resolution, grid.slot), io.read_options(),
                                        bound=bound, lower=lower, first_records=first_records, sample_key=sample_key,
                                        backend=io.backend,
                                        client=io.client)
    if public and agg.n_pairs == 0:
        raise DpoptInputError("`records` hold no valid record after cleaning (nothing to release)")
    return agg, report


def _grid_spec(h3_resolution: int, slot: Any) -> Any:
    from ..records import GridSpec

    return GridSpec(h3_resolution, slot)


def truncated_reader(records: Any, *, bound: float, io: InputOptions, sample_key: Any = None,
                     lower: float = 0.0) -> TruncatedSums:
    """A second pass over the records (locally or on Dask) for the pseudo-user truncated pairs:
    Σ and Σ² of the ``keep[i]`` records with the smallest sample keys (``sample_key``, the release's;
    ties by value) of pair ``pairs[i]``, read with :func:`dpopt.records.kept_records` (only those
    records are held; values read as x − ``lower``, as the table's)."""

    def second_pass(a: Aggregate, pairs: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        from ..records import kept_records

        pairs = np.asarray(pairs, dtype=np.int64)
        keep = np.asarray(keep, dtype=np.int64)
        gamma = np.zeros(a.n_pairs, dtype=np.int64)
        gamma[pairs] = keep
        kept = kept_records(records, _grid_spec(a.h3_resolution, slot_text(a.slot_ns)), io.read_options(), a, gamma,
                            bound=bound, lower=lower, sample_key=sample_key, backend=io.backend, client=io.client)
        return prefix_sums(kept.samples, pairs, keep)

    return second_pass


def progress_bar(enabled: bool, total: int | None, *, desc: str = "aggregate", unit: str = " records") -> Any:
    """A tqdm bar on stderr, or None."""
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit=unit, unit_scale=True, desc=desc, leave=False)
