"""Sensitivities of one level's bounded statistics under add/remove of one user (models/user_level.md
§3; a level of a tree or a marginal: models/hierarchy.md §4).

After bounding (:mod:`.bounding`) one user holds a set K of at most k finest grids with at most c
records each, values in [0, U]. A level groups the finest grids into nodes; node i holds a_i of them
(its *capacity*, public). Adding or removing that user changes, for each node i with
m_i = |K ∩ node i| > 0 and no other node,

* the record count R_i by ≤ c·m_i,
* the centred sum Y_i = Σ (x − U/2) by a sum of ≤ c·m_i terms in [−U/2, U/2]: |ΔY_i| ≤ c·m_i·U/2,
* the centred sum of squares Z_i = Σ ((x − U/2)² − U²/8), terms in [−U²/8, U²/8]: |ΔZ_i| ≤ c·m_i·U²/8,
* the user count L_i by 1,

with Σ_i m_i ≤ k and 0 ≤ m_i ≤ a_i. Hence

* **ℓ1** = k·c·(1, U/2, U²/8) and k for L at every level: merging grids into nodes cancels nothing
  (all of one user's changes have the same sign, and the sums are attained with all values at 0 or
  all at U);
* **ℓ2²** = c²·(1, (U/2)², (U²/8)²)·M with M = max{Σ m_i² : Σ m_i ≤ k, 0 ≤ m_i ≤ a_i integer}
  (:func:`max_merge_square`: Σ m_i² is Schur-convex and filling the largest a_i first gives a vector
  that majorises every feasible one), and k for L (≤ k nodes move by 1 each).

The flat grid is the level whose nodes each hold one finest grid, at least k of them: M = k, so
ℓ2 = √k·c·(1, U/2, U²/8). Once one node holds ≥ k finest grids M = k² and ℓ2 = ℓ1: a user's k grids
can merge into one node. All bounds are attained (c records at 0, or all at U, in k grids under one
node resp. in k nodes); tests/privacy/user/test_sensitivity.py and tests/hierarchy/test_level_sensitivity.py
enumerate small cases. Without the shifts the sum and the sum of squares would need c·U and c·U²
(twice and eight times as much).

On the lattice of :mod:`.bounding` the sums are integers with terms in [−H_Y, H_Y] and [−H_Z, H_Z]
(H_Y = ⌈U/(2λ)⌉, H_Z = ⌈U²/(8λ)⌉, :func:`.bounding.half_ranges`), so the integer ℓ1 sensitivities are
k·c·H_Y and k·c·H_Z and the squared ℓ2 ones the integers c²·M, c²·H_Y²·M, c²·H_Z²·M and k (a vector of
integer changes has an integer squared norm). The float ``*_l2*`` fields are rounded **up**
(:func:`sqrt_up`), so that a Gaussian mechanism squaring them (exactly, as a rational) never gets less
than the true Δ2² (tests/privacy/user/test_gaussian_user.py enumerates the ℓ2 values).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._validation import DpoptInputError, as_counts, check_bound, check_nonnegative_float, check_positive_int
from .bounding import DEFAULT_GRANULARITY_BITS, half_ranges

__all__ = ["Sensitivities", "sensitivities", "max_merge_square", "sqrt_up"]


def sqrt_up(n: int) -> float:
    """The smallest float64 x with x² ≥ n exactly (as rationals): √n rounded up."""
    from fractions import Fraction

    x = math.sqrt(n)
    while Fraction(x) ** 2 < n:
        x = math.nextafter(x, math.inf)
    return x


def max_merge_square(capacities: np.ndarray, k: int) -> int:
    """M = max Σ m_i² over integers 0 ≤ m_i ≤ a_i with Σ m_i ≤ k: fill the largest a_i first."""
    a = np.sort(np.asarray(capacities, dtype=np.int64))[::-1]
    m = np.minimum(a, np.maximum(k - np.concatenate([[0], np.cumsum(a)[:-1]]), 0))
    return int(np.sum(m.astype(object) ** 2))


@dataclass(frozen=True)
class Sensitivities:
    """Sensitivities of one level's per-node vectors (count R, centred sum Y, centred sum of squares
    Z, user count L) for bounds (k, c) and value bound U; ``*_units`` on the lattice λ; ``merge`` = M,
    the largest Σ m_i² of one user (module doc)."""

    k: int
    c: int
    bound: float
    merge: int
    count_l1: int
    users_l1: int
    sum_l1: float
    sumsq_l1: float
    sum_l1_units: int
    sumsq_l1_units: int
    count_l2: float
    users_l2: float
    sum_l2_units: float
    sumsq_l2_units: float


def sensitivities(k: int, c: int, bound: float, *, lam: float | None = None,
                  capacities: Any = None) -> Sensitivities:
    """Sensitivities of (R, Y, Z, L) over the nodes of one level under add/remove of one bounded user
    (models/user_level.md §3, models/hierarchy.md §4).

    Parameters
    ----------
    k : int
        At most k finest grids kept per user (or nodes, for a level bounded on its own).
    c : int
        At most c records kept per (user, grid).
    bound : float
        U > 0; values lie in [0, U].
    lam : float, optional
        λ > 0, the lattice of the sums (default 2^-12).
    capacities : array_like of int, optional
        a_i ≥ 1, the number of finest grids each node of the level holds (public). None: the flat
        grid, each node one finest grid and at least k nodes (M = k).
    """
    k = check_positive_int(k, "k")
    c = check_positive_int(c, "c")
    U = check_bound(bound)
    lam = 2.0**-DEFAULT_GRANULARITY_BITS if lam is None else check_nonnegative_float(lam, "lam")
    if lam == 0:
        raise DpoptInputError(f"`lam` must be a positive finite number; got {lam!r}")
    hy, hz = half_ranges(U, lam)
    M = k if capacities is None else max_merge_square(as_counts(capacities, "capacities"), k)
    return Sensitivities(
        k=k, c=c, bound=U, merge=M,
        count_l1=k * c, users_l1=k, sum_l1=k * c * U / 2.0, sumsq_l1=k * c * U * U / 8.0,
        sum_l1_units=k * c * hy, sumsq_l1_units=k * c * hz,
        count_l2=sqrt_up(c * c * M), users_l2=sqrt_up(k), sum_l2_units=sqrt_up((c * hy) ** 2 * M),
        sumsq_l2_units=sqrt_up((c * hz) ** 2 * M),
    )
