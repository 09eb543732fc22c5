"""Typed solver results: a :class:`Status` and a frozen :class:`SolveResult` (cf. scipy's OptimizeResult)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

__all__ = ["Status", "SolveResult"]


class Status(str, Enum):
    """Outcome of a solve. Only ``OPTIMAL`` certifies the returned point as optimal."""

    OPTIMAL = "optimal"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    INFEASIBLE_OR_UNBOUNDED = "infeasible_or_unbounded"
    TIME_LIMIT = "time_limit"
    ITERATION_LIMIT = "iteration_limit"
    SOLUTION_LIMIT = "solution_limit"
    INTERRUPTED = "interrupted"
    ERROR = "error"
    UNKNOWN = "unknown"
    #: a feasible answer from a heuristic (e.g. CLIP-USER): no optimality certificate
    HEURISTIC = "heuristic"

    def __str__(self) -> str:  # f-strings and reports print "optimal", not "Status.OPTIMAL"
        return self.value

    @property
    def is_optimal(self) -> bool:
        return self is Status.OPTIMAL

    @property
    def is_limit(self) -> bool:
        return self in (Status.TIME_LIMIT, Status.ITERATION_LIMIT, Status.SOLUTION_LIMIT, Status.INTERRUPTED)


@dataclass(frozen=True, eq=False)
class SolveResult:
    """What a back-end returns for one :class:`~dpopt.solve.model.LinearModel`.

    Attributes
    ----------
    status : Status
        Mapped solver status; ``raw_status`` keeps the solver's own words.
    objective : float
        Objective of the returned point (``nan`` when there is none).
    bound : float
        Proven bound on the optimum (the MIP dual bound; equals ``objective`` for an optimal LP).
    gap : float
        Relative gap ``|objective − bound| / max(1, |objective|)``; 0 when proven optimal.
    x : ndarray or None
        Primal values (``None`` when the solver has no feasible point).
    row_duals, col_duals : ndarray or None
        Dual values (LP only), in HiGHS's sign convention (see :mod:`dpopt.solve.highs`).
    """

    status: Status
    objective: float
    bound: float
    gap: float
    x: np.ndarray | None
    row_duals: np.ndarray | None = None
    col_duals: np.ndarray | None = None
    solve_time: float = 0.0
    backend: str = "highspy"
    raw_status: str = ""
    col_blocks: dict[str, slice] = field(default_factory=dict)
    row_blocks: dict[str, slice] = field(default_factory=dict)
    info: dict[str, float] = field(default_factory=dict)
    #: the model's block labels (see :meth:`LinearModel.column_names`), for named read-back
    col_labels: dict[str, tuple[str, ...]] = field(default_factory=dict)
    row_labels: dict[str, tuple[str, ...]] = field(default_factory=dict)
    num_cols: int = 0
    num_rows: int = 0

    @property
    def proven_gap(self) -> float:
        """The gap a result built on this solve states: 0 when proven optimal, the solver's gap where
        it reported one, else ``inf`` (a limit that stopped a solve with no bound proves nothing)."""
        if self.status is Status.OPTIMAL:
            return 0.0
        return float(self.gap) if math.isfinite(self.gap) else math.inf

    def __repr__(self) -> str:  # one line: never dump x or the duals
        return (f"SolveResult(status={self.status.value}, objective={self.objective:.6g}, "
                f"bound={self.bound:.6g}, gap={self.gap:.3g}, cols={self.num_cols}, rows={self.num_rows}, "
                f"backend={self.backend!r}, time={self.solve_time:.3g}s)")

    @property
    def col_names(self) -> tuple[str, ...]:
        """One name per column (built on request)."""
        from .model import block_names

        return block_names(self.col_blocks, self.col_labels, self.num_cols, "x")

    @property
    def row_names(self) -> tuple[str, ...]:
        """One name per row (built on request)."""
        from .model import block_names

        return block_names(self.row_blocks, self.row_labels, self.num_rows, "r")

    def named_values(self) -> dict[str, float]:
        """Primal values keyed by column name (``{"alpha_u0": …, "tau": …}``)."""
        if self.x is None:
            raise RuntimeError(f"no primal solution (status {self.status.value})")
        return dict(zip(self.col_names, map(float, self.x)))

    def named_duals(self) -> dict[str, float]:
        """Row duals (LP only) keyed by constraint name, HiGHS sign convention.

        ``pandas.Series(result.named_duals())`` gives a table; see models/*.md for each model's recipe.
        """
        if self.row_duals is None:
            raise RuntimeError(f"no dual solution (status {self.status.value}; MILPs have none)")
        return dict(zip(self.row_names, map(float, self.row_duals)))

    @property
    def success(self) -> bool:
        return self.status.is_optimal

    @property
    def has_solution(self) -> bool:
        return self.x is not None

    def value(self, block: str) -> np.ndarray:
        """Primal values of a named column block."""
        if self.x is None:
            raise RuntimeError(f"no primal solution (status {self.status.value})")
        return self.x[self.col_blocks[block]]

    def dual(self, block: str) -> np.ndarray:
        """Row duals of a named row block."""
        if self.row_duals is None:
            raise RuntimeError(f"no dual solution (status {self.status.value})")
        return self.row_duals[self.row_blocks[block]]
