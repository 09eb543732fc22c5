"""Per-grid error bounds of the budget planner, under the ``noise`` and ``worst_case`` criteria.

A grid releases its mean and variance with budgets b_μ and b_V (a share of the grid's budget b);
R = retained records, Γ* = largest retained count of a user, N = the grid's records (public).

* ``noise``: t_μ = noise.error(Δ_μ, b_μ, q), t_V = noise.error(Δ_V, b_V, q): the noise alone. The kept
  users are treated as a sample of the grid's users, so the clipped statistic is taken as an
  unbiased stand-in for the full one; this ignores the clipping bias (it holds when the suppressed
  and truncated records are distributed like the kept ones).
* ``worst_case``: seed 002's bound, the worst-case clipping bias of the kept set plus the noise:
  E_μ = U(1 − R/N) + t_μ (Thm IV.1), E_V = E_Var(N, R) + t_V (Thm IV.2 corrected, ERRATA E1).

Sensitivities are the exact ones of :mod:`dpopt.calculus` (Prop. III.1, all three cases, ERRATA
E10). The planner itself uses the *monotone envelope* of Δ_V (``envelope=True``): U²/4 on R ≤ 2Γ*
(≥ the exact value U²/4·(1 − 1/R²) for odd R), the exact U²Γ*(R − Γ*)/R² above. It is never
smaller than the exact sensitivity and non-increasing in R, so each configuration's feasible R is
an interval [R_min, R_max] (models/budget.md §3); reported bounds use the exact value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..calculus import (
    mean_bias_from_totals,
    mean_sensitivity_from_totals,
    variance_bias_from_totals,
    variance_sensitivity_from_totals,
)
from .noise import LaplaceNoise, NoiseModel

__all__ = ["CRITERIA", "StatisticBounds", "statistic_bounds", "Criterion"]

CRITERIA = ("noise", "worst_case")


@dataclass(frozen=True)
class StatisticBounds:
    """Per-grid error bounds of the mean and the variance (arrays; ``inf`` where R = 0 or b = 0)."""

    mean: np.ndarray
    variance: np.ndarray


def statistic_bounds(
    total: Any,
    retained_total: Any,
    retained_max: Any,
    budget_mean: Any,
    budget_variance: Any,
    bound: float,
    *,
    criterion: str,
    confidence: float,
    noise: NoiseModel | None = None,
    envelope: bool = False,
) -> StatisticBounds:
    """Error bounds of mean and variance at confidence ``confidence`` each (see module docstring)."""
    noise = LaplaceNoise() if noise is None else noise
    N = np.asarray(total, dtype=float)
    R = np.asarray(retained_total, dtype=float)
    g = np.asarray(retained_max, dtype=float)
    dmu = mean_sensitivity_from_totals(R, g, bound)
    dvar = variance_sensitivity_from_totals(R, g, bound)
    if envelope:
        dvar = np.where(R > 2 * g, dvar, np.where(R > 0, bound * bound / 4.0, np.inf))
    tmu = noise.error(np.where(np.isfinite(dmu), dmu, 1.0), budget_mean, confidence)
    tvar = noise.error(np.where(np.isfinite(dvar), dvar, 1.0), budget_variance, confidence)
    tmu = np.where(R > 0, tmu, np.inf)
    tvar = np.where(R > 0, tvar, np.inf)
    if criterion == "worst_case":
        with np.errstate(invalid="ignore"):
            tmu = tmu + mean_bias_from_totals(N, R, bound)
            tvar = tvar + variance_bias_from_totals(N, R, bound)
    return StatisticBounds(mean=tmu, variance=tvar)


@dataclass(frozen=True)
class Criterion:
    """What a released grid must meet: its mean bound ≤ τ_g (and its variance bound ≤ τ^V_g).

    With both targets the failure probability 1 − q is split in halves, so both bounds hold
    together with probability ≥ q; with the mean only, the mean's bound holds with probability q.
    The planner calls :meth:`excess` (≤ 0 means feasible), which must be non-increasing in R and
    non-decreasing in the cap; the seed-002 special case (tests) supplies its own.
    """

    bound: float
    criterion: str
    confidence: float
    target: np.ndarray
    target_variance: np.ndarray | None
    mean_share: float
    noise: NoiseModel

    @property
    def planning_confidence(self) -> float:
        return self.confidence if self.target_variance is None else 1.0 - (1.0 - self.confidence) / 2.0

    def bounds(self, total: Any, retained_total: Any, retained_max: Any, budget: Any, *,
               envelope: bool = True, confidence: float | None = None) -> StatisticBounds:
        b = np.asarray(budget, dtype=float)
        return statistic_bounds(
            total, retained_total, retained_max, b * self.mean_share, b * (1.0 - self.mean_share),
            self.bound, criterion=self.criterion,
            confidence=self.planning_confidence if confidence is None else confidence,
            noise=self.noise, envelope=envelope,
        )

    def excess(self, grid: np.ndarray, total: Any, retained_total: Any, cap: Any, budget: Any) -> np.ndarray:
        """max over the targeted statistics of (bound − target) per entry; feasible iff ≤ 0."""
        sb = self.bounds(total, retained_total, cap, budget)
        out = sb.mean - self.target[grid]
        if self.target_variance is not None:
            out = np.maximum(out, sb.variance - self.target_variance[grid])
        return out
