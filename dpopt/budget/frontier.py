"""Coverage frontiers of the budget planner, from public counts only (models/budget.md §7).

* coverage against the target τ at a fixed total budget (non-decreasing in τ for the exact optimum);
* coverage against the total budget at a fixed τ;
* the knee rule choosing τ when the user gives none;
* the dual problem: the smallest τ reaching a required coverage (bisection on τ).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import _fail, check_bound, check_epsilon

__all__ = ["BudgetFrontier", "budget_frontier", "knee_target", "smallest_target", "KNEE_RULE"]

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

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "epsilon_total": self.epsilon_total, "tau": self.taus.tolist(), "coverage": self.coverage.tolist(),
            "released": self.released.tolist(), "status": list(self.status), "knee": self.knee,
            "knee_rule": self.knee_rule,
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


def budget_frontier(occ: Any, bound: float, epsilon_total: float, *, taus: Any = None,
                    epsilon_totals: Any = None, budget_tau: float | None = None, method: str = "greedy",
                    time_limit: float | None = 10.0, progress: bool = False, **settings: Any) -> BudgetFrontier:
    """Coverage for each τ in ``taus`` (default 16 log-spaced values in [U/200, U/2]) at ``epsilon_total``,
    and, if ``epsilon_totals`` is given, for each total budget at ``budget_tau`` (default: the knee).

    ``settings`` are passed to :func:`plan_budget` (criterion, confidence, weights, ...); each point
    is one planner run (``method``, ``time_limit`` seconds each). Public counts only.
    """
    from .planner import plan_budget

    U = check_bound(bound)
    eps = check_epsilon(epsilon_total, "epsilon_total")
    settings.pop("target", None)
    t = np.geomspace(U / 200, U / 2, 16) if taus is None else np.asarray(taus, dtype=float)
    if t.ndim != 1 or t.size == 0 or np.any(~np.isfinite(t)) or np.any(t <= 0) or np.any(np.diff(t) <= 0):
        raise _fail("taus", "must be increasing positive finite numbers", taus)
    it = t
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(t, desc="frontier")
    cov, rel, st = [], [], []
    for tau in it:
        bp = plan_budget(occ, U, eps, target=float(tau), method=method, time_limit=time_limit, **settings)
        cov.append(bp.coverage)
        rel.append(bp.n_released)
        st.append(str(bp.status))
    cov_a = np.asarray(cov)
    knee = knee_target(t, cov_a)
    e_arr = cvb = None
    btau = None
    if epsilon_totals is not None:
        e_arr = np.asarray(epsilon_totals, dtype=float)
        if e_arr.ndim != 1 or np.any(~np.isfinite(e_arr)) or np.any(e_arr <= 0):
            raise _fail("epsilon_totals", "must be positive finite numbers", epsilon_totals)
        btau = knee if budget_tau is None else float(budget_tau)
        cvb = np.asarray([plan_budget(occ, U, float(e), target=btau, method=method, time_limit=time_limit,
                                      **settings).coverage for e in e_arr])
    return BudgetFrontier(taus=t, coverage=cov_a, released=np.asarray(rel), status=st, epsilon_total=eps,
                          epsilon_totals=e_arr, coverage_vs_budget=cvb, budget_tau=btau, knee=knee)


def smallest_target(occ: Any, bound: float, epsilon_total: float, coverage: float, *,
                    rtol: float = 0.01, method: str = "greedy", time_limit: float | None = 10.0,
                    **settings: Any) -> tuple[float, Any]:
    """The dual problem: the smallest τ (to relative ``rtol``) whose plan covers ≥ ``coverage``.

    Bisection on log τ over (0, U/2]; coverage of the exact optimum is non-decreasing in τ (a
    larger τ only enlarges every configuration's feasible interval). Returns (τ, BudgetPlan).
    Raises :class:`DpoptInputError` if τ = 2U does not reach it.
    """
    from .planner import plan_budget

    U = check_bound(bound)
    run = lambda tau: plan_budget(occ, U, epsilon_total, target=tau, method=method,  # noqa: E731
                                  time_limit=time_limit, **settings)
    hi = 2.0 * U
    best = run(hi)
    if best.coverage < coverage:
        raise _fail("coverage", f"is not reachable at epsilon_total={epsilon_total:g} (at most {best.coverage:g})",
                    coverage)
    lo = U * 1e-6
    while hi / lo > 1 + rtol:
        mid = math.sqrt(lo * hi)
        bp = run(mid)
        if bp.coverage >= coverage:
            hi, best = mid, bp
        else:
            lo = mid
    return hi, best
