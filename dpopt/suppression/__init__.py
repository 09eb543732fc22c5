"""Grid-suppression model (seed 002): which (user, grid) contributions to suppress.

Releasing the mean and variance of G grids with budget ε each costs K·ε under composition, where
K = max_ℓ G_ℓ is the largest number of grids a user occupies (seed 002 Theorem II.3). Suppressing
contributions lowers K at the price of clipping bias. This package gives

* :func:`clip_user` — the paper's greedy CLIP-USER (Algorithm 1, ERRATA E1/E2), incremental;
* :func:`solve_suppression` — the exact MILP for the least K with every grid error ≤ E (HiGHS);
* :func:`suppression_problem` — the MILP as a cvxpy model a researcher extends (labelled pairs);
* :func:`suppression_frontier` — the least worst-case error E*(K) for every K;
* :func:`pseudo_user_clipping` — the pseudo-user post-processing of eq. (15);
* :func:`heavy_hitter_occupancy` — the paper's synthetic family (§VI-A2);
* :func:`verify_lower_bound` — recompute a certified lower bound on K from its user weights.

See models/suppression.md for the mathematics.
"""

from __future__ import annotations

from .frontier import FrontierPoint, SuppressionFrontier, suppression_frontier
from .greedy import clip_user
from .lagrange import verify_lower_bound
from .milp import build_suppression_model, solve_suppression
from .plan import SuppressionPlan
from .pseudo import PseudoUserResult, pseudo_user_clipping
from .synthetic import heavy_hitter_occupancy

__all__ = [
    "clip_user",
    "solve_suppression",
    "build_suppression_model",
    "suppression_frontier",
    "SuppressionFrontier",
    "FrontierPoint",
    "pseudo_user_clipping",
    "PseudoUserResult",
    "heavy_hitter_occupancy",
    "SuppressionPlan",
    "verify_lower_bound",
    "suppression_problem",
    "SuppressionProblem",
]


#: names loaded on first use (:mod:`.problem` imports cvxpy, which the rest of the package does not need)
_LAZY = ('SuppressionProblem', 'suppression_problem')


def __getattr__(name: str) -> object:
    if name in _LAZY:
        from . import problem

        return getattr(problem, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
