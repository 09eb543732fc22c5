"""Release pipeline on real data: records -> H3 x time grids -> plan -> user-level DP release.

* :func:`release` — the whole pipeline (seed 002 §II-B, §III-B, §V) -> :class:`ReleaseResult`;
* :func:`aggregate_records` / :func:`release_aggregate` — the two halves (aggregate once, plan many);
* :mod:`.ingest` (CSV/Parquet/DataFrame, chunked, counted cleaning), :mod:`.grid` (H3 × UTC slot),
  :mod:`.aggregate` (occupancy array, per-pair sufficient statistics), :mod:`.planners` (BASELINE,
  CLIP-USER, the MILP, pseudo-user clipping, each returning a :class:`dpopt.plan.GridPlan`),
  :mod:`.report` (release.csv, summary.json, map.png, report.md),
  :mod:`.dask_backend` (aggregation on a Dask cluster), :mod:`.data` (the embedded Austin sample). The noise is in
  :mod:`dpopt.noise`, the per-grid mechanism in :mod:`dpopt.mechanisms.grid`.

See models/release.md.
"""

from __future__ import annotations

from ..records.aggregate import Aggregate, Aggregator
from ..records.data import austin_sample_path, load_austin_sample
from ..records.ingest import ColumnMap, IngestReport, read_records
from ..noise.discrete_laplace import discrete_laplace
from ..noise.sources import integer_source
from .planners import baseline_plan, greedy_plan, milp_plan, pseudo_user_plan
from .release import (
    ReleaseResult,
    ReleaseSummary,
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
    "baseline_plan",
    "greedy_plan",
    "milp_plan",
    "pseudo_user_plan",
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
