"""What the data holder may spend: a per-grid budget (the seeds' mode) or one total budget.

A data holder thinks "ε for the whole day, for every user"; the seeds think in a per-grid ε. Both
are accepted, in one validated object, :class:`PrivacyBudget`:

* per grid (seed 002's mode, Laplace only): ``epsilon`` — every released grid's release is ε-DP;
  the whole release costs K·ε, with K the most grids any user is kept in (Theorem II.3);
* total, pure DP (Laplace): ``epsilon_total`` — the most any one user may lose over the whole
  release; the plan spreads it over the grids (Σ_{g: ℓ kept in g} ε_g ≤ ε_total for every ℓ);
* total, zero-concentrated DP (Gaussian): ``rho`` (ρ-zCDP for every user), or ``epsilon_total``
  with ``delta`` (converted to the largest ρ whose tight (ε, δ) conversion, Canonne–Kamath–Steinke
  2020 Corollary 13, stays ≤ ε_total; :func:`dpopt.accounting.rho_from_epsilon`).

:func:`per_grid_budget` turns a total into a uniform per-grid budget B/K, rounded down to the
samplers' 2^-30 grid so that K·b ≤ B holds exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .._validation import DpoptInputError, check_choice, check_epsilon
from ..noise import MECHANISMS
from ..plan import GridPlan

__all__ = ["PrivacyBudget", "resolve_budget", "per_grid_budget", "exact_user_spend"]

#: the samplers' budgets are multiples of 2^-BITS (dpopt.noise.epsilon_rational)
_BITS = 30


@dataclass(frozen=True)
class PrivacyBudget:
    """A validated privacy budget.

    Attributes
    ----------
    mechanism : {"laplace", "gaussian"}
        The noise; its budget unit is ε (pure DP) or ρ (zCDP).
    per_grid : float or None
        ε of every grid's release (the seeds' mode); None in the total modes.
    total : float or None
        The largest loss any user may have over the whole release, in ``unit``.
    delta : float or None
        δ of the (ε, δ) statement of a Gaussian release (None: stated as ρ-zCDP only).
    epsilon_total_requested : float or None
        The ε_total the user gave with ``delta`` (Gaussian), for the report.
    """

    mechanism: str
    per_grid: float | None
    total: float | None
    delta: float | None = None
    epsilon_total_requested: float | None = None

    @property
    def unit(self) -> str:
        return MECHANISMS[self.mechanism]

    @property
    def mode(self) -> str:
        """"per-grid" or "total"."""
        return "per-grid" if self.per_grid is not None else "total"

    def describe(self) -> str:
        """The budget in words, for reports."""
        if self.per_grid is not None:
            return (f"ε = {self.per_grid:g} per grid (pure ε-DP, Laplace noise); a user kept in K grids "
                    f"loses at most K·ε")
        if self.mechanism == "laplace":
            return f"ε = {self.total:g} in total for every user (pure ε-DP, Laplace noise)"
        text = f"ρ = {self.total:.6g} in total for every user (ρ-zero-concentrated DP, Gaussian noise)"
        if self.delta is not None:
            from ..accounting import zcdp_epsilon

            text += f", which implies (ε = {zcdp_epsilon(self.total, self.delta):.6g}, δ = {self.delta:g})-DP"
        return text


def resolve_budget(*, epsilon: float | None = None, epsilon_total: float | None = None,
                   rho: float | None = None, delta: float | None = None,
                   mechanism: str = "laplace") -> PrivacyBudget:
    """One :class:`PrivacyBudget` from the keyword options of the release (validated).

    Exactly one of ``epsilon`` (per grid, Laplace), ``epsilon_total`` (total; Gaussian needs
    ``delta`` with it) and ``rho`` (total, Gaussian) must be given.
    """
    mechanism = check_choice(mechanism, "mechanism", tuple(MECHANISMS))
    given = [name for name, v in (("epsilon", epsilon), ("epsilon_total", epsilon_total), ("rho", rho))
             if v is not None]
    if len(given) != 1:
        raise DpoptInputError(
            "give exactly one budget: `epsilon` (per grid), `epsilon_total` (whole release) or `rho` "
            f"(whole release, Gaussian); got {', '.join(given) or 'none'}"
        )
    if delta is not None:
        from ..accounting import check_delta

        delta = check_delta(delta)
    if mechanism == "laplace":
        if rho is not None:
            raise DpoptInputError(f"`rho` is a zCDP budget: use it with mechanism='gaussian'; got rho={rho!r}")
        if delta is not None:
            raise DpoptInputError(f"`delta` is for mechanism='gaussian' (Laplace noise is pure ε-DP); got {delta!r}")
        if epsilon is not None:
            return PrivacyBudget("laplace", per_grid=check_epsilon(epsilon), total=None)
        return PrivacyBudget("laplace", per_grid=None, total=check_epsilon(epsilon_total, "epsilon_total"))
    if epsilon is not None:
        raise DpoptInputError(
            f"`epsilon` is the seeds' per-grid Laplace budget; with mechanism='gaussian' give `rho` or "
            f"`epsilon_total` with `delta`; got epsilon={epsilon!r}"
        )
    if rho is not None:
        return PrivacyBudget("gaussian", per_grid=None, total=check_epsilon(rho, "rho"), delta=delta)
    if delta is None:
        raise DpoptInputError("`delta` is required with `epsilon_total` and mechanism='gaussian' "
                              "(Gaussian noise gives (ε, δ)-DP); e.g. delta=1e-6")
    from ..accounting import rho_from_epsilon

    eps_total = check_epsilon(epsilon_total, "epsilon_total")
    return PrivacyBudget("gaussian", per_grid=None, total=float(rho_from_epsilon(eps_total, delta)),
                         delta=delta, epsilon_total_requested=eps_total)


def per_grid_budget(total: float, grids: int) -> float:
    """The uniform per-grid budget b = ⌊B·2^30/K⌋/2^30 for a user kept in at most K grids.

    Exact: K·b ≤ B, and b is a multiple of 2^-30, so the samplers use it unrounded.
    """
    if grids < 1:
        raise DpoptInputError(f"`grids` must be >= 1; got {grids!r}")
    num = (Fraction(total) * 2**_BITS) // grids
    if num < 1:
        raise DpoptInputError(
            f"a total budget of {total:g} over {grids} grids leaves less than 2^-{_BITS} per grid"
        )
    return float(Fraction(num, 2**_BITS))


def exact_user_spend(plan: GridPlan) -> np.ndarray:
    """Each user's spend Σ_{g kept} (b'_μ,g + b'_Var,g), with b' = ⌊b·2^30⌋/2^30 the budgets the
    exact samplers use (:func:`dpopt.noise.epsilon_rational`), summed in integers."""
    n = (np.floor(np.asarray(plan.budget_mean, dtype=float) * 2.0**_BITS)
         + np.floor(np.asarray(plan.budget_variance, dtype=float) * 2.0**_BITS)).astype(np.int64)
    spent = np.asarray(plan.kept() @ n).ravel().astype(np.int64)
    return spent.astype(float) / 2.0**_BITS
