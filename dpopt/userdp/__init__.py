"""The ``user`` privacy model: user-level DP release of grid means and variances when occupancy is
private (models/user_level.md).

Neighbouring datasets add or remove all the records of one user. Contribution bounds (k grids per
user, c records per user and grid) are chosen under DP, grids come from a public list or from private
partition selection, and each released grid's mean and variance are estimated from noisy counts,
sums and sums of squares.

* :func:`release_user` (from an :class:`dpopt.release.Aggregate` with ``keep_samples=True``) and
  :func:`release_user_records` (from records) -> :class:`UserRelease`;
* :func:`write_user_release` -> release.csv, summary.json, report.md;
* pieces: :mod:`.bounding`, :mod:`.sensitivity`, :mod:`.split`, :mod:`.bounds`, :mod:`.partitions`,
  :mod:`.mechanism`.
"""

from __future__ import annotations

from .bounding import BoundedGrids, bound_contributions, grid_ranks, lattice_values
from .bounds import BoundsChoice, choose_bounds
from .mechanism import DiscreteGaussian, DiscreteLaplace, GaussianSimulation, LaplaceSimulation, NoiseMechanism
from .partitions import PartitionList, read_partitions, selection_threshold
from .release import UserRelease, UserReleaseSummary, release_user, release_user_records
from .report import write_user_release
from .sensitivity import Sensitivities, sensitivities
from .split import BudgetSplit, split_budget

__all__ = [
    "release_user",
    "release_user_records",
    "UserRelease",
    "UserReleaseSummary",
    "write_user_release",
    "BoundedGrids",
    "bound_contributions",
    "grid_ranks",
    "lattice_values",
    "BoundsChoice",
    "choose_bounds",
    "NoiseMechanism",
    "DiscreteLaplace",
    "LaplaceSimulation",
    "DiscreteGaussian",
    "GaussianSimulation",
    "PartitionList",
    "read_partitions",
    "selection_threshold",
    "Sensitivities",
    "sensitivities",
    "BudgetSplit",
    "split_budget",
]
