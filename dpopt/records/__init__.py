"""Layer 1 — records: read, clean, key every record by its finest grid (H3 cell × slot).

Output: the contributions table, one row per (user, finest grid) with the record count and the exact
lattice sums both privacy models need. Nothing privacy-specific. Runs locally (streaming, bounded
memory) and on Dask. The one entry is :func:`contributions` (options :class:`GridSpec`,
:class:`ReadOptions`).
"""

from .aggregate import Aggregate, PairSamples
from .contributions import contributions
from .ingest import ColumnMap, IngestReport
from .kept import kept_records, node_sample_counts, node_split_counts
from .sample_key import SampleKey
from .options import DEFAULT_MAX_DROPPED, DEFAULT_TIME_WINDOW, GridSpec, ReadOptions, read_options_from_args

__all__ = ["contributions", "kept_records", "node_sample_counts", "node_split_counts", "SampleKey", "GridSpec", "ReadOptions", "Aggregate", "PairSamples", "IngestReport", "ColumnMap",
           "read_options_from_args", "DEFAULT_MAX_DROPPED", "DEFAULT_TIME_WINDOW"]
