"""Standard-form models and solver back-ends (HiGHS through highspy; cvxpy for readable models)."""

from pathlib import Path
from typing import Any

from .model import LinearModel, ModelBuilder
from .result import SolveResult, Status

__all__ = ["LinearModel", "ModelBuilder", "SolveResult", "Status", "solve", "solve_bounded", "write_model"]


def solve(model: LinearModel, **kwargs: Any) -> SolveResult:
    """Solve a :class:`LinearModel` with HiGHS (see :func:`dpopt.solve.highs.solve_highs`)."""
    from .highs import solve_highs

    return solve_highs(model, **kwargs)


def solve_bounded(model: LinearModel, **kwargs: Any) -> SolveResult:
    """Solve with a hard ``time_limit`` (see :func:`dpopt.solve.bounded.solve_bounded`)."""
    from .bounded import solve_bounded as _bounded

    return _bounded(model, **kwargs)


def write_model(model: LinearModel, path: str | Path) -> Path:
    """Write a model to .mps/.lp (see :func:`dpopt.solve.highs.write_model`)."""
    from .highs import write_model as _write

    return _write(model, path)
