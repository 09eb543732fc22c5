"""Coverage frontiers of the budget planner: the result type and the knee rule (models/budget.md §7).

* coverage against the target τ at a fixed total budget (non-decreasing in τ for the exact optimum);
* coverage against the total budget at a fixed τ;
* the knee rule choosing τ when the user gives none.

The frontiers themselves (:func:`dpopt.budget.budget_frontier`) and the dual problem
(:func:`dpopt.budget.smallest_target`) run the planner, so they live in :mod:`.planner`; this
module imports nothing of the planner (no import cycle).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import _fail

__all__ = ["BudgetFrontier", "knee_target", "KNEE_RULE"]

KNEE_RULE = (
    "knee of the coverage-vs-target curve (Kneedle): with x = position of log(tau) between the smallest "
    "and largest tau tried (0..1) and y = coverage / largest coverage, the tau farthest from the chord "
    "y = x — above it (maximising y - x) when the curve is concave, below it (maximising x - y, the "
    "elbow where coverage starts to grow fast) when it is convex — among the taus with coverage > 0"
)


@dataclass(frozen=True, eq=False)
class BudgetFrontier:
    """Coverage (weighted grids within target) against τ and against the total budget."""

    taus: np.ndarray
    coverage: np.ndarray
    released: np.ndarray
    status: list[str]
    epsilon_total: float
    epsilon_totals: np.ndarray | None
    coverage_vs_budget: np.ndarray | None
    budget_tau: float | None
    knee: float
    knee_rule: str = KNEE_RULE
    #: False when a time limit stopped the sweep: ``taus`` holds the targets reached
    complete: bool = True

    def summary(self) -> dict[str, Any]:
        """The frontier in a few numbers: ε_total, points, the knee and its coverage, completeness."""
        at = int(np.argmin(np.abs(self.taus - self.knee))) if self.taus.size else None
        return {"epsilon_total": self.epsilon_total, "points": int(self.taus.size), "knee": self.knee,
                "knee_coverage": None if at is None else float(self.coverage[at]), "knee_rule": self.knee_rule,
                "complete": self.complete, "budget_tau": self.budget_tau}

    def to_frame(self) -> "pd.DataFrame":
        """One row per target τ: coverage, grids released and the planner's status."""
        import pandas as pd

        return pd.DataFrame({"tau": self.taus, "coverage": self.coverage, "released": self.released,
                             "status": list(self.status)})

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "epsilon_total": self.epsilon_total, "tau": self.taus.tolist(), "coverage": self.coverage.tolist(),
            "released": self.released.tolist(), "status": list(self.status), "knee": self.knee,
            "knee_rule": self.knee_rule, "complete": self.complete,
        }
        if self.epsilon_totals is not None:
            out.update(epsilon_totals=self.epsilon_totals.tolist(),
                       coverage_vs_budget=np.asarray(self.coverage_vs_budget).tolist(), budget_tau=self.budget_tau)
        return out


def knee_target(taus: Any, coverage: Any) -> float:
    """The knee rule (:data:`KNEE_RULE`) on a coverage-vs-τ curve (taus increasing, > 0)."""
    t = np.asarray(taus, dtype=float)
    c = np.asarray(coverage, dtype=float)
    if t.size == 0:
        raise _fail("taus", "must not be empty", taus)
    if c.max(initial=0.0) <= 0 or t.size == 1:
        return float(t[-1])
    lt = np.log(t)
    x = (lt - lt[0]) / (lt[-1] - lt[0]) if lt[-1] > lt[0] else np.zeros_like(lt)
    y = c / c.max()
    d = np.where(c > 0, y - x, -np.inf)
    e = np.where(c > 0, x - y, -np.inf)
    return float(t[int(np.argmax(d))] if d.max() >= e.max() else t[int(np.argmax(e))])
