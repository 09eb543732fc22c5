"""Noise models of the budget planner: the error bound of one noised statistic at a confidence.

The planner needs one thing from a mechanism: a bound ``t`` with ``P[|noise| ≤ t] ≥ q`` for a
statistic of sensitivity Δ released with budget b, and its inverse (the least budget reaching an
error). Both compose additively over grids (pure ε-DP and ρ-zCDP alike), so the planner's budget
rows are the same for every model; only the unit and these two functions change.

* :class:`LaplaceNoise` (unit ``"epsilon"``): Laplace(Δ/ε) noise, ``P[|X| > t] = exp(−tε/Δ)``, so
  ``t = Δ·ln(1/(1 − q))/ε`` (seed 002 Prop. II.1 with d = 1; ERRATA E11 for d ≥ 2, not used here).
* :class:`GaussianNoise` (unit ``"rho"``): N(0, σ²) with σ = Δ/√(2ρ) is ρ-zCDP (Bun & Steinke 2016,
  Prop. 1.6); ``t = σ·z_{(1+q)/2}``. Provided for the zCDP variant of the release; the plans of
  this package are made in ``"epsilon"`` unless this model is passed.

These are planning formulas, not samplers: the planner sizes budgets before any noise is drawn, on
the continuous laws' quantiles (vectorised over grids, with their inverses). The samplers are the
integer-lattice mechanisms of :mod:`dpopt.noise.mechanism` (built by
:func:`~dpopt.noise.mechanism.make_mechanism`). :meth:`LaplaceNoise.factor` is that module's
:func:`~dpopt.noise.mechanism.laplace_abs_quantile` at scale 1; :meth:`GaussianNoise.factor` keeps
its own form ndtri(½ + q/2), the same number as the continuous Gaussian mechanism's
σ·(−ndtri((1 − q)/2)) at σ = 1 up to the last bits, which the plans' budgets depend on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..noise.mechanism import laplace_abs_quantile

__all__ = ["NoiseModel", "LaplaceNoise", "GaussianNoise"]


class NoiseModel(Protocol):
    """What the planner needs of a noise mechanism (see module docstring)."""

    unit: str

    def error(self, sensitivity: Any, budget: Any, confidence: float) -> np.ndarray:
        """Bound t with P[|noise| ≤ t] ≥ confidence, for sensitivity Δ and budget b (inf where b = 0)."""
        ...

    def budget_for(self, sensitivity: Any, error: Any, confidence: float) -> np.ndarray:
        """Least budget b with ``error(Δ, b, q) ≤ error`` (inf where error = 0)."""
        ...


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.inf)
    return np.where(num == 0, 0.0, out)


@dataclass(frozen=True)
class LaplaceNoise:
    """Laplace mechanism, pure ε-DP: ``t = Δ·ln(1/(1 − q))/ε``."""

    unit: str = "epsilon"

    @staticmethod
    def factor(confidence: float) -> float:
        """ln(1/(1 − q)): the q-quantile of |Laplace(1)| (:func:`~dpopt.noise.mechanism.laplace_abs_quantile`)."""
        return laplace_abs_quantile(1.0, 1.0 - confidence)

    def error(self, sensitivity: Any, budget: Any, confidence: float) -> np.ndarray:
        d = np.asarray(sensitivity, dtype=float)
        b = np.asarray(budget, dtype=float)
        return _ratio(d * self.factor(confidence), b)

    def budget_for(self, sensitivity: Any, error: Any, confidence: float) -> np.ndarray:
        d = np.asarray(sensitivity, dtype=float)
        e = np.asarray(error, dtype=float)
        return _ratio(d * self.factor(confidence), e)


@dataclass(frozen=True)
class GaussianNoise:
    """Gaussian mechanism, ρ-zCDP: σ = Δ/√(2ρ), ``t = σ·z_{(1+q)/2}``."""

    unit: str = "rho"

    @staticmethod
    def factor(confidence: float) -> float:
        """z_{(1+q)/2}: the q-quantile of |N(0, 1)|."""
        from scipy.special import ndtri

        return float(ndtri(0.5 + confidence / 2.0))

    def error(self, sensitivity: Any, budget: Any, confidence: float) -> np.ndarray:
        d = np.asarray(sensitivity, dtype=float)
        b = np.asarray(budget, dtype=float)
        return _ratio(d * self.factor(confidence), np.sqrt(2.0 * b))

    def budget_for(self, sensitivity: Any, error: Any, confidence: float) -> np.ndarray:
        d = np.asarray(sensitivity, dtype=float)
        e = np.asarray(error, dtype=float)
        r = _ratio(d * self.factor(confidence), e)
        return r * r / 2.0
