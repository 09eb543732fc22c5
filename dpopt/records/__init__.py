"""Layer 1 — records: read, clean, key every record by its finest grid (H3 cell × slot).

Output: the contributions table, one row per (user, finest grid) with the record count and the exact
lattice sums both privacy models need. Nothing privacy-specific. Runs locally (streaming, bounded
memory) and on Dask. The one entry is :func:`contributions` (options :class:`GridOptions`,
:class:`ReadOptions`).
"""

from .aggregate import Aggregate, PairSamples
from .contributions import contributions
from .ingest import ColumnMap, IngestReport
from .kept import kept_records, node_sample_counts, node_split_counts
from .sample_key import SampleKey
from .options import DEFAULT_MAX_DROPPED, DEFAULT_TIME_WINDOW, GridOptions, InputOptions, read_options_from_args

__all__ = ["contributions", "kept_records", "node_sample_counts", "node_split_counts", "SampleKey", "GridOptions", "InputOptions", "Aggregate", "PairSamples", "IngestReport", "ColumnMap",
           "read_options_from_args", "DEFAULT_MAX_DROPPED", "DEFAULT_TIME_WINDOW"]


def __getattr__(name: str) -> object:
    earlier = {"GridSpec": GridOptions, "ReadOptions": InputOptions}  # deprecated in 0.4, removed in 0.5
    if name in earlier:
        import warnings

        new = earlier[name].__name__
        warnings.warn(f"dpopt.records.{name} is deprecated in 0.4 and will be removed in 0.5; use "
                      f"dpopt.records.{new} (one class for the records layer and the front door)",
                      DeprecationWarning, stacklevel=2)
        return earlier[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
