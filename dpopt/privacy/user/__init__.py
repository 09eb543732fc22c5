"""The ``user`` privacy model: user-level DP release of grid means and variances when occupancy is
private (models/user_level.md).

Neighbouring datasets add or remove all the records of one user. Contribution bounds are chosen
under DP (the engine: T records per user over the listed grids and the clamp B; the named strategies
fixed/adaptive: k grids per user and c records per user and grid), grids come from a public list or
from private partition selection, and each listed grid's mean is estimated from noisy counts and sums
(and, in the flat strategy, its variance from sums of squares).

The whole model lives in this package (layer 2, privacy models: imports only core and records); its
estimates are :mod:`dpopt.estimation`, its files :mod:`dpopt.writers.user`, its front door
:func:`dpopt.release.release`. Modules:

* the model: :mod:`.options` (:class:`UserOptions` and what it resolves to), :mod:`.engine` (the
  optimised release engine), :mod:`.strategies` (the named strategies: :mod:`.strategies.fixed`, the
  flat per-grid release :func:`measure`; :mod:`.strategies.adaptive`; :mod:`.strategies.private_adaptive`;
  :mod:`.strategies.place`);
* its library: :mod:`.bounding`, :mod:`.bounds`, :mod:`.record_cap`, :mod:`.priority` (contribution
  bounding and its DP choice), :mod:`.sensitivity`, :mod:`.split`, :mod:`.mechanism` (the names of
  the shared noise mechanism, :mod:`dpopt.noise.mechanism`),
  :mod:`.partitions`, :mod:`.select_levels` (private selection), :mod:`.levels` (measuring a
  hierarchy's levels), :mod:`.place_bounds`, :mod:`.place_shares`, :mod:`.predict`.

The names below are loaded on first use (the library modules import nothing of the model, and
importing one of them does not load the strategies).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .bounding import BoundedGrids, bound_contributions, grid_ranks, lattice_values
    from .bounds import BoundsChoice, choose_bounds
    from .mechanism import DiscreteGaussian, DiscreteLaplace, GaussianSimulation, LaplaceSimulation, NoiseMechanism
    from .options import (RESOLUTIONS, SELECTION_DELTA_SHARE, STRATEGIES, UserOptions, _eps_from_rho,
                          _partition_list, _ranks, _sampler_kind, _samplers, noise_family)
    from .partitions import PartitionList, read_partitions, selection_threshold
    from .sensitivity import Sensitivities, sensitivities
    from .split import BudgetSplit, split_budget
    from .strategies.fixed import Shares, measure, shares

#: name → the module (relative to this package) that defines it
_LAZY = {
    **dict.fromkeys(["UserOptions", "RESOLUTIONS", "STRATEGIES", "SELECTION_DELTA_SHARE", "noise_family",
                     "_eps_from_rho", "_partition_list", "_ranks", "_sampler_kind", "_samplers"], "options"),
    **dict.fromkeys(["measure", "Shares", "shares"], "strategies.fixed"),
    **dict.fromkeys(["BoundedGrids", "bound_contributions", "grid_ranks", "lattice_values"], "bounding"),
    **dict.fromkeys(["BoundsChoice", "choose_bounds"], "bounds"),
    **dict.fromkeys(["NoiseMechanism", "DiscreteLaplace", "LaplaceSimulation", "DiscreteGaussian",
                     "GaussianSimulation"], "mechanism"),
    **dict.fromkeys(["PartitionList", "read_partitions", "selection_threshold"], "partitions"),
    **dict.fromkeys(["Sensitivities", "sensitivities"], "sensitivity"),
    **dict.fromkeys(["BudgetSplit", "split_budget"], "split"),
}

__all__ = [
    "UserOptions", "RESOLUTIONS", "STRATEGIES", "SELECTION_DELTA_SHARE", "Shares", "measure", "noise_family",
    "BoundedGrids", "bound_contributions", "grid_ranks", "lattice_values", "BoundsChoice", "choose_bounds",
    "NoiseMechanism", "DiscreteLaplace", "LaplaceSimulation", "DiscreteGaussian", "GaussianSimulation",
    "PartitionList", "read_partitions", "selection_threshold", "Sensitivities", "sensitivities",
    "BudgetSplit", "split_budget",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
