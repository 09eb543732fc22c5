"""The release's one door to the records: every read of private records by the release
goes through :func:`contributions` (and, for the pseudo-user second pass of ``public-occupancy``,
:func:`truncated_reader`), so the ingestion layer can be swapped in one place.

The contributions table is :class:`dpopt.records.aggregate.Aggregate` (one row per (user, finest
grid) with the record count, Σx and Σx² of the values clipped to [0, U], and optionally a uniform
sample of each pair's records: the smallest keyed sample keys, :mod:`dpopt.records.sample_key`), built by :func:`dpopt.records.contributions` for both privacy
models, locally or on Dask, with the same reading options (separator, dropped share, time window).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._validation import DpoptInputError, check_bound
from ..records import contributions as records_contributions
from ..records.aggregate import Aggregate, prefix_sums
from ..records.grid import slot_text
from ..records.ingest import OUT_OF_RANGE, IngestReport
from ..records.options import BACKENDS, InputOptions
from .options import GridOptions

__all__ = ["InputOptions", "contributions", "truncated_reader", "BACKENDS", "OUT_OF_RANGE"]


TruncatedSums = Callable[[Aggregate, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


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
    agg, report = records_contributions(records, grid, io,
                                        bound=bound, lower=lower, first_records=first_records, sample_key=sample_key,
                                        backend=io.backend,
                                        client=io.client)
    if public and agg.n_pairs == 0:
        raise DpoptInputError("`records` hold no valid record after cleaning (nothing to release)")
    return agg, report


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
        kept = kept_records(records, GridOptions(a.h3_resolution, slot_text(a.slot_ns)), io, a, gamma,
                            bound=bound, lower=lower, sample_key=sample_key, backend=io.backend, client=io.client)
        return prefix_sums(kept.samples, pairs, keep)

    return second_pass


def progress_bar(enabled: bool, total: int | None, *, desc: str = "aggregate", unit: str = " records") -> Any:
    """A tqdm bar on stderr, or None."""
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit=unit, unit_scale=True, desc=desc, leave=False)
