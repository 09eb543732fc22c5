"""Clipping-strategy model of seeds 000/001: which interval each user's samples are clipped to.

* :func:`optimal_clipping` — Theorem III.1 in closed form (O(L)), with a KKT certificate
  (ERRATA E4) and, for d ≥ 2, the corrected ℓ1-ball strategy (ERRATA E3);
* :func:`optimal_error` — ``E^OPT(ε)`` over a grid of ε in one call (ERRATA E5);
* :func:`solve_clipping` — the per-user LP (8) of seed 000 or the per-sample LP of Lemma III.1,
  solved with HiGHS through highspy or cvxpy, duals mapped to the paper's multipliers;
* :func:`clipping_problem` — a cvxpy model with named variables for custom variants.

The mathematics and the code map are in ``models/clipping.md``.
"""

from typing import Any

from .closed_form import (
    KKT_TOL,
    LP_KKT_TOL,
    ClippingPlan,
    KKTCertificate,
    KKTReport,
    check_certificate,
    clipping_threshold,
    optimal_clipping,
    optimal_error,
    threshold_rank,
)
from .lp import (
    DEFAULT_HIGHS_OPTIONS,
    clipping_model,
    per_sample_model,
    per_user_model,
    solve_clipping,
    standard_form_kkt,
)

__all__ = [
    "KKT_TOL",
    "LP_KKT_TOL",
    "ClippingPlan",
    "KKTCertificate",
    "KKTReport",
    "check_certificate",
    "clipping_threshold",
    "optimal_clipping",
    "optimal_error",
    "threshold_rank",
    "DEFAULT_HIGHS_OPTIONS",
    "clipping_model",
    "per_sample_model",
    "per_user_model",
    "solve_clipping",
    "standard_form_kkt",
    "clipping_problem",
    "solve_problem",
    "export_problem",
    "ClippingProblem",
]


def __getattr__(name: str) -> Any:  # cvxpy is imported only when a cvxpy model is asked for
    if name in ("clipping_problem", "solve_problem", "export_problem", "ClippingProblem"):
        from . import problem

        return getattr(problem, name)
    raise AttributeError(f"module 'dpopt.clipping' has no attribute {name!r}")
