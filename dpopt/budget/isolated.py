"""The planners' killable HiGHS solve: :mod:`dpopt.solve.isolated` (one implementation for every model)."""

from ..solve.isolated import BACKSTOP_SECONDS, IsolatedSolve, solve_isolated

__all__ = ["solve_isolated", "IsolatedSolve", "BACKSTOP_SECONDS"]
