"""Front door of the release (Python): :func:`release` with options grouped by concern, and the
writers. See models/README.md for the layers and models/release.md, models/user_level.md for the
two privacy models.

* :func:`release` — records → contributions → privacy model → measurements → estimates, values
  in [0, ``bound``] or [``lower``, ``upper``];
* options: :class:`Budget` / :class:`PerGridBudget`, :class:`UserOptions` /
  :class:`PublicOccupancyOptions`, :class:`GridOptions`, :class:`EstimationOptions`,
  :class:`NoiseOptions`, :class:`InputOptions`;
* :class:`Release` — the result of either privacy model; :func:`write_release` — its published
  folder (atomic);
* lower entries: :func:`release_user` (a contributions table, ``user`` model),
  :func:`release_aggregate` (a contributions table, ``public-occupancy``), :func:`contributions`.
"""

from __future__ import annotations

from ..noise.discrete_laplace import discrete_laplace
from ..noise.sources import integer_source
from ..privacy.contributions import InputOptions, contributions
from ..privacy.options import Budget, GridOptions, NoiseOptions, PerGridBudget
from ..privacy.planners import baseline_plan, greedy_plan, milp_plan, pseudo_user_plan
from ..privacy.public_occupancy import PublicOccupancyOptions, plan_release
from ..privacy.user.options import UserOptions
from ..records.aggregate import Aggregate
from ..records.data import austin_sample_path, load_austin_sample
from ..records.ingest import ColumnMap, IngestReport, read_records
from ..writers import Release, write_release
from ..writers.public_occupancy_result import ReleaseSummary
from ..writers.user import UserReleaseSummary
from .release import EstimationOptions, check_options, release, release_aggregate, release_user

#: earlier names of the one result and the one writer: deprecated in 0.4, removed in 0.5
_DEPRECATED = {"UserRelease": "Release", "ReleaseResult": "Release", "write_report": "write_release",
               "write_user_release": "write_release"}


def __getattr__(name: str) -> object:
    if name in _DEPRECATED:
        import warnings

        new = _DEPRECATED[name]
        warnings.warn(f"dpopt.release.{name} is deprecated in 0.4 and will be removed in 0.5; use "
                      f"dpopt.release.{new} (one result and one writer for both privacy models)",
                      DeprecationWarning, stacklevel=2)
        return globals()[new]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "release",
    "release_user",
    "release_aggregate",
    "contributions",
    "check_options",
    "write_release",
    "Budget",
    "PerGridBudget",
    "UserOptions",
    "PublicOccupancyOptions",
    "GridOptions",
    "EstimationOptions",
    "NoiseOptions",
    "InputOptions",
    "Release",
    "UserReleaseSummary",
    "ReleaseSummary",
    "plan_release",
    "baseline_plan",
    "greedy_plan",
    "milp_plan",
    "pseudo_user_plan",
    "Aggregate",
    "ColumnMap",
    "IngestReport",
    "read_records",
    "discrete_laplace",
    "integer_source",
    "austin_sample_path",
    "load_austin_sample",
]
