"""Budget split among the noisy count, sum and sum of squares (models/user_level.md §4).

Per grid the release publishes ñ = R + e_n, Ỹ = Y + e_Y, Z̃ = Z + e_Z (centred sums, :mod:`.bounding`)
and estimates

    μ̂ = U/2 + Ỹ/ñ,        σ̂² = Z̃/ñ + U²/8 − (Ỹ/ñ)².

With ȳ = Y/R (the centred mean) and z̄ = Z/R, the delta method gives

    MSE(μ̂)  ≈ (1/R²)·[Var e_Y + ȳ²·Var e_n],
    MSE(σ̂²) ≈ (1/R²)·[Var e_Z + 4ȳ²·Var e_Y + (2ȳ² − z̄)²·Var e_n].

Laplace noise of scale Δ1/ε_i has variance 2Δ1²/ε_i² with Δ1 = k·c·(1, U/2, U²/8); the Gaussian of
ρ_i-zCDP has Δ2²/(2ρ_i) with Δ2 = √k·c·(1, U/2, U²/8). The rule: minimise

    w_mean·MSE(μ̂)/U² + w_var·MSE(σ̂²)/(U²/4)²    subject to  ε_n + ε_Y + ε_Z = ε (or Σρ_i = ρ).

Both objectives are Σ_i a_i/ε_i² (Laplace) or Σ_i a_i/ρ_i (Gaussian) with

    a_n = w_mean·ȳ²/U² + 16·w_var·(2ȳ² − z̄)²/U⁴,   a_Y = w_mean/4 + 16·w_var·ȳ²/U²,   a_Z = w_var/4

(k, c and R factor out, so the split needs no count), minimised in closed form by
ε_i ∝ a_i^{1/3} (Laplace, Lagrange: 2a_i/ε_i³ = λ) and ρ_i ∝ a_i^{1/2} (Gaussian). The data (ȳ, z̄)
are private, so the default evaluates the a_i at their worst case over all data, ȳ² = U²/4 and
E[(x−U/2)²] = U²/4 (every value at 0, or every value at U), which maximises all three at once: the
minimax split, (0.376, 0.449, 0.175) for equal weights (a = (5/2, 17/4, 1/4)). A public guess of a typical grid's mean and
standard deviation (never computed from the data being released) may replace the worst case.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..._validation import DpoptInputError, check_bound, check_choice, check_nonnegative_float

__all__ = ["BudgetSplit", "split_coefficients", "split_budget", "predicted_objective"]


@dataclass(frozen=True)
class BudgetSplit:
    """Budgets of the count, the centred sum and the centred sum of squares (in ``unit``) and the
    coefficients a = (a_n, a_Y, a_Z) they minimise Σ a_i/ε_i² (or Σ a_i/ρ_i) for."""

    count: float
    sum: float
    sumsq: float
    unit: str
    coefficients: tuple[float, float, float]
    rule: str

    @property
    def total(self) -> float:
        return self.count + self.sum + self.sumsq

    def as_dict(self) -> dict[str, float | str]:
        return {"count": self.count, "sum": self.sum, "sumsq": self.sumsq, "unit": self.unit,
                "rule": self.rule}


def split_coefficients(
    bound: float,
    *,
    weight_mean: float = 1.0,
    weight_variance: float = 1.0,
    typical: tuple[float, float] | None = None,
) -> tuple[float, float, float]:
    """(a_n, a_Y, a_Z) of the module doc; ``typical`` = public (mean, sd) guess, else worst case."""
    U = check_bound(bound)
    wm = check_nonnegative_float(weight_mean, "weight_mean")
    wv = check_nonnegative_float(weight_variance, "weight_variance")
    if wm + wv <= 0:
        raise DpoptInputError("`weight_mean` + `weight_variance` must be positive; got 0")
    if typical is None:
        ybar2 = U * U / 4.0
        m2 = U * U / 4.0
    else:
        try:
            mu, sd = (float(v) for v in typical)
        except (TypeError, ValueError):
            raise DpoptInputError(f"`typical` must be a (mean, sd) pair of numbers; got {typical!r}") from None
        if not (0.0 <= mu <= U) or not (0.0 <= sd <= U / 2.0):
            raise DpoptInputError(
                f"`typical` must have mean in [0, U] and sd in [0, U/2] (U = {U:g}); got {typical!r}")
        ybar2 = (mu - U / 2.0) ** 2
        m2 = ybar2 + sd * sd
    zbar = m2 - U * U / 8.0
    a_n = wm * ybar2 / U**2 + 16.0 * wv * (2.0 * ybar2 - zbar) ** 2 / U**4
    a_y = wm / 4.0 + 16.0 * wv * ybar2 / U**2
    a_z = wv / 4.0
    return float(a_n), float(a_y), float(a_z)


def split_budget(
    budget: float,
    *,
    bound: float,
    unit: str = "epsilon",
    weight_mean: float = 1.0,
    weight_variance: float = 1.0,
    typical: tuple[float, float] | None = None,
) -> BudgetSplit:
    """Closed-form minimiser of the predicted error (module doc) for a total ``budget``."""
    total = check_nonnegative_float(budget, "budget")
    if total <= 0:
        raise DpoptInputError(f"`budget` must be a positive finite number; got {budget!r}")
    unit = check_choice(unit, "unit", ("epsilon", "rho"))
    a = np.asarray(split_coefficients(bound, weight_mean=weight_mean, weight_variance=weight_variance,
                                      typical=typical))
    power = 1.0 / 3.0 if unit == "epsilon" else 0.5
    w = np.where(a > 0, a**power, 0.0)
    if w.sum() <= 0:  # pragma: no cover - a_Y > 0 or a_Z > 0 always
        raise DpoptInputError("the split weights give no statistic a positive coefficient")
    share = w / w.sum()
    parts = share * total
    rule = ("minimise w_mean*MSE(mean)/U^2 + w_var*MSE(var)/(U^2/4)^2 (delta method), "
            + ("worst-case data" if typical is None else f"public guess mean={typical[0]:g}, sd={typical[1]:g}")
            + f": budget_i proportional to a_i^{'1/3' if unit == 'epsilon' else '1/2'}")
    return BudgetSplit(count=float(parts[0]), sum=float(parts[1]), sumsq=float(parts[2]), unit=unit,
                       coefficients=(float(a[0]), float(a[1]), float(a[2])), rule=rule)


def predicted_objective(parts: np.ndarray, coefficients: tuple[float, float, float], unit: str = "epsilon") -> float:
    """Σ a_i/ε_i² (Laplace) or Σ a_i/ρ_i (Gaussian): the objective the split minimises (up to the
    common factor 2(kc)²/R² resp. (kc)²·k/(2R²))."""
    p = np.asarray(parts, dtype=float)
    a = np.asarray(coefficients, dtype=float)
    with np.errstate(divide="ignore"):
        terms = np.where(a > 0, a / (p**2 if unit == "epsilon" else p), 0.0)
    return float(terms.sum())
