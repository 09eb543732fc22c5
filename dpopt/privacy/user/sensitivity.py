"""Sensitivities of the bounded statistics under add/remove of one user (models/user_level.md §3).

After bounding (:mod:`.bounding`) one user holds at most k grids with at most c records each, values
in [0, U]. Adding or removing that user changes, for each of its ≤ k grids g and no other grid,

* the record count R_g by Γ_g ≤ c,
* the centred sum Y_g = Σ (x − U/2) by a sum of Γ_g terms in [−U/2, U/2]: |ΔY_g| ≤ c·U/2,
* the centred sum of squares Z_g = Σ ((x − U/2)² − U²/8), terms in [−U²/8, U²/8]: |ΔZ_g| ≤ c·U²/8,
* the user count L_g by 1.

Hence the ℓ1 sensitivities over all grids are k·c, k·c·U/2, k·c·U²/8 and k, and the ℓ2 ones
√k·c, √k·c·U/2, √k·c·U²/8 and √k, all attained (c records at 0, or all at U, in each of k grids;
tests/privacy/user/test_sensitivity.py enumerates small cases). Without the shifts the sum and the sum of
squares would need c·U and c·U² (twice and eight times as much).

On the lattice of :mod:`.bounding` the sums are integers with terms in [−H_Y, H_Y] and [−H_Z, H_Z]
(H_Y = ⌈U/(2λ)⌉, H_Z = ⌈U²/(8λ)⌉), so the integer ℓ1 sensitivities are k·c·H_Y and k·c·H_Z and
the squared ℓ2 ones the integers k·c², k·c²·H_Y², k·c²·H_Z², k (a vector of integer changes has an
integer squared norm). The float ``*_l2*`` fields are rounded **up** (:func:`sqrt_up`), so that a
Gaussian mechanism squaring them (exactly, as a rational) never gets less than the true Δ2²
(tests/privacy/user/test_gaussian_user.py enumerates the ℓ2 values).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..._validation import check_bound, check_positive_int

__all__ = ["Sensitivities", "sensitivities", "sqrt_up"]


def sqrt_up(n: int) -> float:
    """The smallest float64 x with x² ≥ n exactly (as rationals): √n rounded up."""
    from fractions import Fraction

    x = math.sqrt(n)
    while Fraction(x) ** 2 < n:
        x = math.nextafter(x, math.inf)
    return x


@dataclass(frozen=True)
class Sensitivities:
    """Sensitivities of the per-grid vectors (count R, centred sum Y, centred sum of squares Z,
    user count L) for bounds (k, c) and value bound U; ``*_units`` on the lattice λ."""

    k: int
    c: int
    bound: float
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


def sensitivities(k: int, c: int, bound: float, *, lam: float | None = None) -> Sensitivities:
    """Sensitivities of (R, Y, Z, L) over all grids under add/remove of one bounded user;
    lattice units for λ = ``lam`` (default 2^-12)."""
    k = check_positive_int(k, "k")
    c = check_positive_int(c, "c")
    U = check_bound(bound)
    lam = 2.0**-12 if lam is None else float(lam)
    hy = math.ceil(U / 2.0 / lam)
    hz = math.ceil(U * U / 8.0 / lam)
    return Sensitivities(
        k=k, c=c, bound=U,
        count_l1=k * c, users_l1=k, sum_l1=k * c * U / 2.0, sumsq_l1=k * c * U * U / 8.0,
        sum_l1_units=k * c * hy, sumsq_l1_units=k * c * hz,
        count_l2=sqrt_up(k * c * c), users_l2=sqrt_up(k), sum_l2_units=sqrt_up(k * (c * hy) ** 2),
        sumsq_l2_units=sqrt_up(k * (c * hz) ** 2),
    )
