"""Array-length model of seed 003 (Rameshwar et al., arXiv 2401.15906): pseudo-user grouping and the
choice of the array length m.

Grouping (:mod:`dpopt.arrays.grouping`): :func:`best_fit` (Algorithm 2), :func:`wrap_around`
(Algorithm 1) -> :class:`ArrayGrouping`.
Length (:mod:`dpopt.arrays.length`): :func:`array_averaging_error` (eq. (15)),
:func:`optimal_array_length` (exact minimax m, Lemma V.2, MILP; convex surrogate (19), ERRATA E7;
heuristic (9); median) -> :class:`ArrayLengthPlan`; :func:`array_length_problem`, the
exact problem as a cvxpy model a researcher extends (:mod:`dpopt.arrays.problem`). See models/array_length.md.
"""

from .grouping import ArrayGrouping, best_fit, processing_order, wrap_around
from .length import (
    ArrayLengthPlan,
    CountProfile,
    array_averaging_error,
    array_length_milp,
    exact_length_path,
    gain,
    heuristic_length,
    lemma_v4_thresholds,
    max_gain,
    median_length,
    optimal_array_length,
    paper_kkt_length,
    surrogate_length,
    surrogate_lp,
    surrogate_objective,
    switch_points,
)

__all__ = [
    "ArrayGrouping",
    "ArrayLengthInfeasible",
    "ArrayLengthProblem",
    "array_length_problem",
    "ArrayLengthPlan",
    "CountProfile",
    "array_averaging_error",
    "array_length_milp",
    "best_fit",
    "exact_length_path",
    "gain",
    "heuristic_length",
    "lemma_v4_thresholds",
    "max_gain",
    "median_length",
    "optimal_array_length",
    "paper_kkt_length",
    "processing_order",
    "surrogate_length",
    "surrogate_lp",
    "surrogate_objective",
    "switch_points",
    "wrap_around",
]


#: names loaded on first use (:mod:`.problem` imports cvxpy, which the rest of the package does not need)
_LAZY = ('ArrayLengthInfeasible', 'ArrayLengthProblem', 'array_length_problem')


def __getattr__(name: str) -> object:
    if name in _LAZY:
        from . import problem

        return getattr(problem, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
