"""dpopt: explicit optimisation models for user-level differentially private mean and variance release.

The public names below are a contract (see README.md). They are loaded lazily, so ``import dpopt``
stays fast and a command that needs only the error calculus never imports cvxpy.

Error calculus (one partition): :func:`mean_sensitivity`, :func:`variance_sensitivity`,
:func:`mean_bias`, :func:`variance_bias`, :func:`clipping_error`; many grids: :class:`Occupancy`,
:func:`grid_errors`, composition accounting.

Models: clipping strategy (:func:`optimal_clipping`, :func:`solve_clipping`,
:func:`clipping_problem`), array length (:func:`best_fit`, :func:`wrap_around`,
:func:`array_averaging_error`, :func:`optimal_array_length`, :func:`array_length_problem`), grid
suppression (:func:`clip_user`, :func:`solve_suppression`, :func:`suppression_problem`); sweeps over
instances × ε (:func:`sweep`).
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

# a library's loggers stay silent unless the caller configures logging (the release's progress lines
# are INFO on logger "dpopt"; the command line shows them on a terminal or with --progress)
logging.getLogger("dpopt").addHandler(logging.NullHandler())

__version__ = "0.4.0"

# public name -> module that defines it
_LAZY: dict[str, str] = {
    # foundation
    "DpoptInputError": "dpopt._validation",
    "mean_sensitivity": "dpopt.calculus",
    "variance_sensitivity": "dpopt.calculus",
    "mean_bias": "dpopt.calculus",
    "variance_bias": "dpopt.calculus",
    "variance_bias_seed_text": "dpopt.calculus",
    "clipping_error": "dpopt.calculus",
    "clipping_error_terms": "dpopt.calculus",
    "grid_error_terms": "dpopt.calculus",
    "grid_errors": "dpopt.calculus",
    "basic_composition": "dpopt.calculus",
    "parallel_composition": "dpopt.calculus",
    "laplace_l1_tail": "dpopt.calculus",
    "laplace_l1_tail_probability": "dpopt.calculus",
    "Occupancy": "dpopt.occupancy",
    # clipping-strategy model (seeds 000/001)
    "optimal_clipping": "dpopt.clipping",
    "optimal_error": "dpopt.clipping",
    "solve_clipping": "dpopt.clipping",
    "clipping_problem": "dpopt.clipping",
    "ClippingPlan": "dpopt.clipping",
    "KKTCertificate": "dpopt.clipping",
    "check_certificate": "dpopt.clipping",
    "export_problem": "dpopt.clipping",
    # array-length model (seed 003)
    "best_fit": "dpopt.arrays",
    "wrap_around": "dpopt.arrays",
    "array_averaging_error": "dpopt.arrays",
    "optimal_array_length": "dpopt.arrays",
    "ArrayGrouping": "dpopt.arrays",
    "ArrayLengthPlan": "dpopt.arrays",
    "exact_length_path": "dpopt.arrays",
    "surrogate_length": "dpopt.arrays",
    "heuristic_length": "dpopt.arrays",
    "median_length": "dpopt.arrays",
    "switch_points": "dpopt.arrays",
    "load_itms": "dpopt.datasets",
    "load_itms_counts": "dpopt.datasets",
    "load_austin_sample": "dpopt.datasets",
    # grid-suppression model (seed 002)
    "clip_user": "dpopt.suppression",
    "solve_suppression": "dpopt.suppression",
    "suppression_frontier": "dpopt.suppression",
    "pseudo_user_clipping": "dpopt.suppression",
    "SuppressionPlan": "dpopt.suppression",
    "SuppressionFrontier": "dpopt.suppression",
    "FrontierPoint": "dpopt.suppression",
    "PseudoUserResult": "dpopt.suppression",
    "heavy_hitter_occupancy": "dpopt.suppression",
    "build_suppression_model": "dpopt.suppression",
    "suppression_problem": "dpopt.suppression",
    "SuppressionProblem": "dpopt.suppression",
    "array_length_problem": "dpopt.arrays",
    "ArrayLengthProblem": "dpopt.arrays",
    # sweeps: models over instances x epsilon into one tidy table
    "sweep": "dpopt.experiments.sweep",
    # budget planner (models/budget.md): one total budget, coverage vs accuracy
    "plan_budget": "dpopt.budget",
    "budget_frontier": "dpopt.budget",
    "BudgetPlan": "dpopt.budget",
    "BudgetFrontier": "dpopt.budget",
    # the plan contract, noise and accounting
    "GridPlan": "dpopt.plan",
    "make_noise": "dpopt.noise",
    "zcdp_epsilon": "dpopt.accounting",
    "rho_from_epsilon": "dpopt.accounting",
}

_SUBMODULES = {
    "calculus", "occupancy", "verify", "solve", "clipping", "arrays", "suppression",
    "mechanisms", "datasets", "experiments", "release", "cli", "budget",
    "plan", "noise", "accounting",
}

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        module = importlib.import_module(f"dpopt.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'dpopt' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | _SUBMODULES)
