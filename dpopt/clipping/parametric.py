"""The ``"mse"`` clipping objective by a sequence of LPs instead of a QP (models/clipping.md §5).

f(bias, Δ) = bias² + c·Δ² (c = 2d/ε²) depends on the plan only through (bias, Δ), and the set of
achievable (bias, Δ) is convex (a projection of the model's feasible set). So f's minimiser p* is the
point of that set's lower-left boundary where the first-order condition holds: p* minimises the
linear function bias + s·Δ at s* = (∂f/∂Δ)/(∂f/∂bias) = c·Δ*/bias* over the model — the worst-case LP
at ε' = d/s*, which the model's own constraints (the user's included) bound as before.

The boundary is traced by the LP at slope s, whose solution V(s) moves to smaller Δ and larger bias as
s grows, so r(s) = c·Δ(s)/bias(s) falls: s* is where r(s) crosses s. A bisection in log s between a
slope below it and one above it ends where the two LPs' solutions are one vertex (optimal) or the ends
of one edge of the boundary; there f's minimiser on the segment between them is in closed form, and
every variable is taken at that convex combination (feasible: the model is convex; with a user's
integer variable, the better of the two plans, and no status optimal). The point is then
checked: the LP at its own slope may not fall below its linearised value by more than ``CHECK_RTOL``
(the first-order certificate; its shortfall times ∂f/∂bias is a lower bound on f's optimum, so an
unfinished search reports a proven gap).

Why: HiGHS's QP (active set) on this model took 47 s for a time limit of 0.5 s at 3,000 users and
7.4 GB at 3·10⁴, ended "optimal" 1.3 % above the optimum, returned status error with a fixed interval
or a bias cap, and 1.54× the optimum at ε = 1000 (an outside fuzz run). The LPs take what the
worst-case objective takes, some twenty times.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

import cvxpy as cp
import numpy as np

from ..solve.cvxpy_backend import solve_cvxpy
from ..solve.result import SolveResult, Status

__all__ = ["solve_mse"]

#: relative tolerance of the final check (the LP at the point's own slope against its linearised value)
CHECK_RTOL = 1e-7
#: the bisection stops where its two slopes are this close (relative): a vertex between them would
#: lie on the segment to that precision
SLOPE_RTOL = 1e-9
#: LP solves at most (the bracket's search and the bisection); a work limit, not a model constant
MAX_SOLVES = 200


def solve_mse(problem: Any, *, time_limit: float | None = None, options: Mapping[str, Any] | None = None
              ) -> SolveResult:
    """Minimise bias² + 2d·(Δ/ε)² over a :class:`~dpopt.clipping.problem.ClippingProblem`'s constraints
    by LPs (module docstring); the problem's variables are left at the minimiser.

    Returns
    -------
    SolveResult
        ``status``: ``OPTIMAL`` where the point passes the check, the LPs' own status where one fails
        (infeasible, a limit), ``TIME_LIMIT`` where the time ran out first (with the proven gap of the
        last check); ``objective`` f at the point; ``x`` the variables' values (cvxpy order).
    """
    t0 = time.perf_counter()
    deadline = None if time_limit is None else t0 + float(time_limit)
    c = 2.0 * problem.dim * float(problem.inv_epsilon.value) ** 2
    slope = cp.Parameter(nonneg=True, name="slope")
    lp = cp.Problem(cp.Minimize(problem.bias + slope * problem.sensitivity), problem.constraints)
    search = _Search(problem, lp, slope, c, deadline, options)
    lo, hi = search.bracket(problem.dim * float(problem.inv_epsilon.value))
    if search.failed is None:
        while hi[0] / lo[0] > 1.0 + SLOPE_RTOL and not search.same(lo, hi) and search.more():
            mid = search.vertex(math.sqrt(lo[0] * hi[0]))
            if mid is None:
                break
            lo, hi = (mid, hi) if search.below(mid) else (lo, mid)
    return search.result(lo, hi, t0)


class _Search:
    """The LP at a slope (a vertex of the boundary with every variable's value) and the bookkeeping."""

    def __init__(self, problem: Any, lp: cp.Problem, slope: cp.Parameter, c: float, deadline: float | None,
                 options: Mapping[str, Any] | None) -> None:
        self.problem, self.lp, self.slope, self.c = problem, lp, slope, c
        self.deadline, self.options = deadline, options
        self.variables = lp.variables()
        # a user's integer variable: a combination of two plans is not a plan, and no first-order check
        # holds (the MILPs' vertices are kept as they are; the status is never optimal)
        self.integer = any(v.attributes.get("boolean") or v.attributes.get("integer") for v in self.variables)
        self.solves = 0
        self.failed: SolveResult | None = None

    def more(self) -> bool:
        return self.solves < MAX_SOLVES and (self.deadline is None or time.perf_counter() < self.deadline)

    def vertex(self, s: float) -> tuple[float, float, float, list[np.ndarray]] | None:
        """(s, bias, Δ, values) of the LP at slope s; None (``failed`` set) where it ends otherwise."""
        left = None if self.deadline is None else max(0.0, self.deadline - time.perf_counter())
        self.slope.value = s
        res = solve_cvxpy(self.lp, time_limit=left, options=self.options, scale=self.problem.bound)
        self.solves += 1
        if res.status is not Status.OPTIMAL:
            self.failed = res
            return None
        values = [np.array(v.value, dtype=float) for v in self.variables]
        return s, max(float(self.problem.bias.value), 0.0), max(float(self.problem.sensitivity.value), 0.0), values

    def below(self, v: tuple) -> bool:
        """Is s below s* (the vertex's own slope c·Δ/bias above s)?"""
        s, bias, sens, _ = v
        return self.c * sens > s * bias

    @staticmethod
    def same(a: tuple, b: tuple) -> bool:
        """One vertex (its bias and Δ equal to 10⁻⁹ of their size: in any unit)."""
        tol = 1e-9 * max(abs(a[1]) + abs(a[2]), 1e-300)
        return abs(a[1] - b[1]) <= tol and abs(a[2] - b[2]) <= tol

    def bracket(self, s0: float) -> tuple[tuple | None, tuple | None]:
        """Two vertices whose slopes lie below and above s* (or one vertex twice, where it is optimal
        at the first slope the search meets from the other side)."""
        first = self.vertex(s0)
        if first is None:
            return None, None
        lo = hi = first
        step = 4.0
        while self.below(hi) and self.more():  # s0 below s* (Δ > 0 there): grow
            nxt = self.vertex(hi[0] * step)
            if nxt is None:
                return None, None
            lo, hi = hi, nxt
        while not self.below(lo) and self.more():  # s0 above s*: shrink
            if lo[1] <= 0:  # bias = Δ = 0: f = 0, the least there is
                return lo, lo
            nxt = self.vertex(lo[0] / step)
            if nxt is None:
                return None, None
            lo, hi = nxt, lo
        return lo, hi

    def result(self, lo: tuple | None, hi: tuple | None, t0: float) -> SolveResult:
        if lo is None or hi is None:
            return self.failed
        point, f, t = self._segment_minimum(lo, hi)
        for var, value in zip(self.variables, point):
            var.value = value
        bound = self._checked(f, lo, hi, t)
        ok = bound >= f - CHECK_RTOL * max(f, 1e-300)
        status = Status.OPTIMAL if ok else (Status.TIME_LIMIT if not self.more() else Status.UNKNOWN)
        x = np.concatenate([np.ravel(v, order="F") for v in point]) if point else np.zeros(0)
        gap = 0.0 if ok else ((f - bound) / f if f > 0 and math.isfinite(bound) else math.inf)
        return SolveResult(status=status, objective=f, bound=f if ok else bound, gap=gap, x=x, row_duals=None,
                           col_duals=None, solve_time=time.perf_counter() - t0, backend="cvxpy",
                           raw_status=f"mse by {self.solves} LPs", col_blocks={}, row_blocks={})

    def _segment_minimum(self, lo: tuple, hi: tuple) -> tuple[list[np.ndarray], float, float]:
        """f's minimiser on the segment between the two vertices, every variable at that combination,
        f there and its place t ∈ [0, 1] on the segment."""
        b1, d1, b2, d2 = lo[1], lo[2], hi[1], hi[2]
        db, dd = b2 - b1, d2 - d1
        den = db * db + self.c * dd * dd
        t = 0.0 if den <= 0 else min(max(-(b1 * db + self.c * d1 * dd) / den, 0.0), 1.0)
        if self.integer:  # the better of the two plans, not a combination
            t = 0.0 if b1 * b1 + self.c * d1 * d1 <= b2 * b2 + self.c * d2 * d2 else 1.0
        point = [(1.0 - t) * a + t * b for a, b in zip(lo[3], hi[3])]
        bias, sens = b1 + t * db, d1 + t * dd
        return point, bias * bias + self.c * sens * sens, t

    def _checked(self, f: float, lo: tuple, hi: tuple, t: float) -> float:
        """A lower bound on f's optimum at the point the variables hold (module docstring); f itself
        where the point is proven optimal:

        * one vertex at both ends of the bracket: it solves the LP at every slope between them, its own
          slope c·Δ/bias among them (both ends' tests say so), so the first-order condition holds;
        * inside an edge (0 < t < 1): f's gradient there is normal to the edge, of slope k = −Δbias/ΔΔ
          read off the two vertices (not off c·Δ/bias, which c = 2d/ε² amplifies: at ε = 10⁻⁸ a Δ of
          10⁻¹⁷ is all rounding), and the LP at k must not fall below the edge's linear value;
        * else the LP at the point's own slope (the first-order check).

        The LP's shortfall times ∂f/∂bias = 2·bias is subtracted from f (convexity: the Frank–Wolfe
        bound); ``-inf`` where no LP could be solved in time."""
        bias = max(float(self.problem.bias.value), 0.0)
        sens = max(float(self.problem.sensitivity.value), 0.0)
        if self.integer:
            return -math.inf
        if self.same(lo, hi):
            return f
        if 0.0 < t < 1.0 and hi[2] < lo[2]:
            s = (hi[1] - lo[1]) / (lo[2] - hi[2])
        elif bias > 0:
            s = self.c * sens / bias
        else:  # bias 0: ∂f/∂bias = 0, and only Δ = 0 (f = 0) is certain
            return f if sens <= 0 else -math.inf
        keep = [np.array(v.value, dtype=float) for v in self.variables]
        check = self.vertex(s) if self.more() else None
        for var, value in zip(self.variables, keep):
            var.value = value
        if check is None:
            return -math.inf
        linear = bias + s * sens
        shortfall = max(linear - (check[1] + s * check[2]), 0.0)
        if shortfall <= CHECK_RTOL * max(linear, 1e-300):
            return f
        return f - 2.0 * bias * shortfall
