"""Release under one total privacy budget: the budget planner (models/budget.md).

From public counts only, choose per (user, grid) keep/suppress, per-grid pseudo-user caps, withheld
grids and per-grid budgets so that every user spends at most ``epsilon_total`` and the most grids
(weighted) are released with an error bound ≤ τ.

* :func:`plan_budget` → :class:`BudgetPlan` (holds the :class:`dpopt.plan.GridPlan`);
* :func:`budget_frontier` → :class:`BudgetFrontier` (coverage vs τ and vs the total budget);
* :func:`knee_target`, :func:`smallest_target` (the dual: least τ for a coverage);
* noise models :class:`LaplaceNoise` (ε) and :class:`GaussianNoise` (ρ-zCDP);
* :mod:`dpopt.budget.hierarchy`: which nodes of a public hierarchy to publish, with which budgets,
  so that every finest grid is answered within τ (``plan_hierarchy`` → ``HierarchyPlan``, §11).
"""

from __future__ import annotations

from .errors import CRITERIA, Criterion, StatisticBounds, statistic_bounds
from .frontier import KNEE_RULE, BudgetFrontier, knee_target
from .noise import GaussianNoise, LaplaceNoise, NoiseModel
from .planner import METHODS, BudgetPlan, budget_frontier, make_criterion, plan_budget, smallest_target

__all__ = [
    "plan_budget", "BudgetPlan", "make_criterion", "METHODS", "CRITERIA",
    "budget_frontier", "BudgetFrontier", "knee_target", "smallest_target", "KNEE_RULE",
    "statistic_bounds", "StatisticBounds", "Criterion",
    "NoiseModel", "LaplaceNoise", "GaussianNoise",
]
