"""The ``user`` privacy model: user-level DP release of grid means and variances when occupancy is
private (models/user_level.md).

Neighbouring datasets add or remove all the records of one user. Contribution bounds (k grids per
user, c records per user and grid) are chosen under DP, grids come from a public list or from private
partition selection, and each released grid's mean and variance are estimated from noisy counts,
sums and sums of squares.

This package is the model's library (layer 2, imports only core and records); the model itself is
:mod:`dpopt.privacy.user` (options and measurements), its estimates :mod:`dpopt.estimation`, its
files :mod:`dpopt.writers.user`, its front door :func:`dpopt.release.release`. Pieces: :mod:`.bounding`, :mod:`.sensitivity`, :mod:`.split`, :mod:`.bounds`, :mod:`.partitions`,
  :mod:`.mechanism`.
"""

from __future__ import annotations

from .bounding import BoundedGrids, bound_contributions, grid_ranks, lattice_values
from .bounds import BoundsChoice, choose_bounds
from .mechanism import DiscreteGaussian, DiscreteLaplace, GaussianSimulation, LaplaceSimulation, NoiseMechanism
from .partitions import PartitionList, read_partitions, selection_threshold
from .sensitivity import Sensitivities, sensitivities
from .split import BudgetSplit, split_budget

__all__ = [
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
