"""The public hierarchy of grids: H3 parents (aperture 7) × coarser time slots
(or recurring windows: hour-of-day profiles), and the choice of
which nodes to measure and publish (multi-resolution release, models/hierarchy.md).

* :mod:`.tree`: levels, vectorised H3 parents, the node table (:func:`build_hierarchy`);
* :mod:`.gls`: generalised least squares over the tree (two-pass, unequal variances);
* :mod:`.decompose`: the published nodes (finest ancestor meeting the target; no holes).
"""

from .decompose import answer_nodes, published_mask
from .strategy import Candidate, StrategyPlan, StrategyProblem, greedy_strategy, predicted_mse, solve_strategy  # noqa: F401
from .gls import TreeGLS, tree_gls
from .tree import (DAY_NS, HOUR_NS, PROFILES, WEEK_NS, Hierarchy, Level, build_hierarchy, cell_parents, default_levels,
                   profile_cycle)

__all__ = ["Level", "Hierarchy", "build_hierarchy", "cell_parents", "default_levels", "HOUR_NS", "DAY_NS",
           "WEEK_NS", "PROFILES", "profile_cycle", "TreeGLS", "tree_gls", "answer_nodes", "published_mask"]
