"""Release pipeline on real data: records -> H3 x time grids -> plan -> user-level DP release.

* :func:`release` — the whole pipeline (seed 002 §II-B, §III-B, §V) -> :class:`ReleaseResult`;
* :func:`aggregate_records` / :func:`release_aggregate` — the two halves (aggregate once, plan many);
* :mod:`.ingest` (CSV/Parquet/DataFrame, chunked, counted cleaning), :mod:`.grid` (H3 × UTC slot),
  :mod:`.aggregate` (occupancy array, per-pair sufficient statistics), :mod:`.noise` (exact discrete
  Laplace for real releases), :mod:`.report` (release.csv, summary.json, map.png, report.md),
  :mod:`.dask_backend` (aggregation on a Dask cluster), :mod:`.data` (the embedded Austin sample).

See models/release.md.
"""

from __future__ import annotations

from .aggregate import Aggregate, Aggregator
from .data import austin_sample_path, load_austin_sample
from .ingest import ColumnMap, IngestReport, read_records
from .noise import discrete_laplace, integer_source
from .release import (
    ReleaseResult,
    ReleaseSummary,
    RetainedPlan,
    aggregate_records,
    plan_release,
    release,
    release_aggregate,
)
from .report import write_report

__all__ = [
    "release",
    "release_aggregate",
    "aggregate_records",
    "plan_release",
    "ReleaseResult",
    "ReleaseSummary",
    "RetainedPlan",
    "Aggregate",
    "Aggregator",
    "ColumnMap",
    "IngestReport",
    "read_records",
    "discrete_laplace",
    "integer_source",
    "write_report",
    "austin_sample_path",
    "load_austin_sample",
]
