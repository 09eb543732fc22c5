"""Additive noise behind one small interface (models/user_level.md §5).

Every statistic the user-level release noises is an **integer vector** (counts, and sums of values
snapped to the lattice λ·ℤ, :mod:`.bounding`), of which one user changes at most k entries by a
total of at most ``l1`` (ℓ2: ``l2``) lattice units. So a mechanism needs only:

* :meth:`~NoiseMechanism.integer` — noisy copy of an integer vector;
* :meth:`~NoiseMechanism.scale` — the scale of the noise law used (in lattice units);
* :meth:`~NoiseMechanism.abs_quantile` (error bounds) and :meth:`~NoiseMechanism.upper_quantile`,
  :meth:`~NoiseMechanism.upper_tail` (partition-selection threshold).

Four implementations ship, two pure ε-DP Laplace (``unit = "epsilon"``):

* :class:`DiscreteLaplace` — real releases: the exact discrete Laplace sampler of
  :mod:`dpopt.noise` (Canonne–Kamath–Steinke) from an integer source (the OS CSPRNG unless
  seeded); Z on ℤ with P[Z = z] ∝ exp(−|z|·ε'/Δ1), ε' = ε rounded down to a multiple of 2^-30.
  The query is integer-valued and its ℓ1 sensitivity an integer, so there is no floating-point
  rounding anywhere between the data and the output: ε'-DP exactly (Canonne, Kamath, Steinke 2020, Thm 2.2).
* :class:`LaplaceSimulation` — numpy's continuous Laplace(Δ1/ε): simulations and benchmarks only.

and two Gaussian, ρ-zCDP (``unit = "rho"``, σ = Δ2/√(2ρ) with Δ2 = ``l2``, the ℓ2 sensitivity):

* :class:`DiscreteGaussian` — real releases: the exact discrete Gaussian N_ℤ(0, σ²) of
  :func:`dpopt.noise.discrete_gaussian.discrete_gaussian` (CKS 2020 Algorithm 3) with
  σ² = ⌊l2²⌋/(2ρ') exactly rational (:func:`l2_squared`), ρ' = ρ rounded down to a multiple of 2^-30
  (:func:`~dpopt.noise.discrete_gaussian.rho_rational`). Independent N_ℤ(0, σ²) on each entry of
  an integer vector whose change under add/remove has squared ℓ2 norm ≤ Δ2² (an integer) is
  Δ2²/(2σ²) = ρ'-zCDP (CKS 2020 Theorem 14, the multivariate form of Theorem 4);
* :class:`GaussianSimulation` — numpy's continuous N(0, σ²): simulations and benchmarks only.

Tail bound of the discrete Gaussian used for the error bounds (models/release.md §5 and
:func:`dpopt.release.release.confidence_bounds`): for integer j ≥ 1,
P(|Z| ≥ j) ≤ P(|N(0, σ²)| ≥ j − 1), since Σ_{z≥j} e^{−z²/2σ²} ≤ ∫_{j−1}^∞ e^{−t²/2σ²} dt and the
normaliser Σ_z e^{−z²/2σ²} ≥ √(2π)·σ (Poisson summation).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Protocol

import numpy as np

from .._validation import DpoptInputError
from ..noise import IntegerSource, epsilon_rational
from ..noise.discrete_gaussian import discrete_gaussian_array, discrete_gaussian_pmf, rho_rational
from ..noise.discrete_laplace import discrete_laplace_array

__all__ = ["NoiseMechanism", "DiscreteLaplace", "LaplaceSimulation", "DiscreteGaussian", "GaussianSimulation",
           "l2_squared"]


class NoiseMechanism(Protocol):
    """What the user-level release needs from a noise mechanism (module doc)."""

    unit: str
    label: str
    real_release: bool

    def integer(self, values: np.ndarray, *, l1: int, l2: float, budget: float) -> np.ndarray: ...

    def scale(self, *, l1: int, l2: float, budget: float) -> float: ...

    def abs_quantile(self, scale: float, prob: float) -> float: ...

    def upper_tail(self, scale: float, x: float) -> float: ...

    def upper_quantile(self, scale: float, prob: float) -> float: ...


def _check_l1(l1: int) -> int:
    if isinstance(l1, bool) or not float(l1).is_integer() or l1 < 1:
        raise DpoptInputError(f"`l1` must be a whole number >= 1 (lattice units); got {l1!r}")
    return int(l1)


class LaplaceSimulation:
    """Continuous Laplace(Δ1/ε) from numpy: simulation only, NOT for a real release."""

    unit = "epsilon"
    real_release = False

    def __init__(self, rng: np.random.Generator) -> None:
        if not isinstance(rng, np.random.Generator):
            raise DpoptInputError(f"`rng` must be a numpy.random.Generator; got {type(rng).__name__}")
        self.rng = rng
        self.label = "numpy continuous Laplace: simulation only, NOT for a real release"

    def scale(self, *, l1: int, l2: float, budget: float) -> float:
        return _check_l1(l1) / float(budget)

    def integer(self, values: np.ndarray, *, l1: int, l2: float, budget: float) -> np.ndarray:
        v = np.asarray(values, dtype=float)
        return v + self.rng.laplace(0.0, self.scale(l1=l1, l2=l2, budget=budget), size=v.shape)

    def abs_quantile(self, scale: float, prob: float) -> float:
        """x with P(|Lap(b)| > x) = prob: b·ln(1/prob)."""
        return float(scale) * math.log(1.0 / prob)

    def upper_tail(self, scale: float, x: float) -> float:
        """P(Lap(b) ≥ x) = ½·exp(−x/b) for x ≥ 0, 1 − ½·exp(x/b) for x < 0."""
        x = float(x)
        half = 0.5 * math.exp(-abs(x) / float(scale))
        return half if x >= 0 else 1.0 - half

    def upper_quantile(self, scale: float, prob: float) -> float:
        """x ≥ 0 with P(Lap(b) ≥ x) = prob (prob ≤ ½): b·ln(1/(2·prob))."""
        return max(float(scale) * math.log(1.0 / (2.0 * prob)), 0.0)


class DiscreteLaplace:
    """Exact discrete Laplace on ℤ (:func:`dpopt.noise.discrete_laplace.discrete_laplace`): real releases.

    P[Z = z] = (1−r)/(1+r)·r^|z| with r = exp(−1/s), s = Δ1/ε'.
    """

    unit = "epsilon"
    real_release = True

    def __init__(self, source: IntegerSource, *, seeded: bool = False) -> None:
        self.source = source
        self.label = "exact discrete Laplace (Canonne-Kamath-Steinke) on integer statistics, " + (
            "seeded: NOT for a real release" if seeded else "OS CSPRNG (secrets)")

    def scale(self, *, l1: int, l2: float, budget: float) -> float:
        return _check_l1(l1) / float(epsilon_rational(float(budget)))

    def integer(self, values: np.ndarray, *, l1: int, l2: float, budget: float) -> np.ndarray:
        ints = np.asarray(values, dtype=np.int64)
        s = Fraction(_check_l1(l1)) / epsilon_rational(float(budget))
        noise = discrete_laplace_array(s, ints.size, self.source)
        return (ints + noise.reshape(ints.shape)).astype(float)

    @staticmethod
    def _r(scale: float) -> float:
        return math.exp(-1.0 / float(scale))

    def abs_quantile(self, scale: float, prob: float) -> float:
        """Smallest integer x with P(|Z| > x) ≤ prob, from P(|Z| ≥ j) = 2r^j/(1+r) (j ≥ 1)."""
        r = self._r(scale)
        j = max(math.ceil(math.log(prob * (1.0 + r) / 2.0) / math.log(r) - 1e-12), 1)
        while j > 1 and 2.0 * r ** (j - 1) / (1.0 + r) <= prob:
            j -= 1
        while 2.0 * r**j / (1.0 + r) > prob:
            j += 1
        return float(j - 1)

    def upper_tail(self, scale: float, x: float) -> float:
        """P(Z ≥ x) with j = ⌈x⌉: r^j/(1+r) for j ≥ 0, 1 − r^(1−j)/(1+r) for j < 0 (symmetry)."""
        j = math.ceil(float(x) - 1e-12)
        r = self._r(scale)
        return r**j / (1.0 + r) if j >= 0 else 1.0 - r ** (1 - j) / (1.0 + r)

    def upper_quantile(self, scale: float, prob: float) -> float:
        """Smallest integer j ≥ 0 with P(Z ≥ j) = r^j/(1+r) ≤ prob."""
        r = self._r(scale)
        j = max(math.ceil(math.log(prob * (1.0 + r)) / math.log(r) - 1e-12), 0)
        while j > 0 and r ** (j - 1) / (1.0 + r) <= prob:
            j -= 1
        while r**j / (1.0 + r) > prob:
            j += 1
        return float(j)


def l2_squared(l2: float) -> int:
    """⌊l2²⌋ computed exactly (``Fraction(l2)**2``): the squared ℓ2 sensitivity Δ2² to calibrate to.

    Every statistic noised here is an integer vector, so Δ2² (a sum of squared integer changes) is
    an integer; if the float ``l2`` is ≥ Δ2 (:func:`dpopt.userdp.sensitivity.sqrt_up` rounds up)
    then Δ2² ≤ l2², hence Δ2² ≤ ⌊l2²⌋: never below the truth, and equal to it for √n rounded up.
    """
    v = float(l2)
    if not (math.isfinite(v) and v > 0):
        raise DpoptInputError(f"`l2` must be a positive finite number (lattice units); got {l2!r}")
    sq = Fraction(v) ** 2
    return sq.numerator // sq.denominator


def _normal_upper(z: float) -> float:
    """P(N(0, 1) ≥ z)."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def _normal_quantile(p: float) -> float:
    """z with P(N(0, 1) ≥ z) = p (0 < p < 1)."""
    from scipy.special import ndtri

    return float(-ndtri(float(p)))


class GaussianSimulation:
    """Continuous N(0, σ²), σ = Δ2/√(2ρ), from numpy: simulation only, NOT for a real release."""

    unit = "rho"
    real_release = False

    def __init__(self, rng: np.random.Generator) -> None:
        if not isinstance(rng, np.random.Generator):
            raise DpoptInputError(f"`rng` must be a numpy.random.Generator; got {type(rng).__name__}")
        self.rng = rng
        self.label = "numpy continuous Gaussian: simulation only, NOT for a real release"

    def scale(self, *, l1: int, l2: float, budget: float) -> float:
        """σ = l2/√(2ρ)."""
        return float(l2) / math.sqrt(2.0 * float(budget))

    def integer(self, values: np.ndarray, *, l1: int, l2: float, budget: float) -> np.ndarray:
        v = np.asarray(values, dtype=float)
        return v + self.rng.normal(0.0, self.scale(l1=l1, l2=l2, budget=budget), size=v.shape)

    def abs_quantile(self, scale: float, prob: float) -> float:
        """x with P(|N(0, σ²)| > x) = prob: σ·Φ⁻¹(1 − prob/2)."""
        return float(scale) * _normal_quantile(prob / 2.0)

    def upper_tail(self, scale: float, x: float) -> float:
        """P(N(0, σ²) ≥ x)."""
        return _normal_upper(float(x) / float(scale))

    def upper_quantile(self, scale: float, prob: float) -> float:
        """x ≥ 0 with P(N(0, σ²) ≥ x) = prob (prob ≤ ½)."""
        return max(float(scale) * _normal_quantile(prob), 0.0)


class DiscreteGaussian:
    """Exact discrete Gaussian N_ℤ(0, σ²) (:func:`dpopt.noise.discrete_gaussian.discrete_gaussian`):
    real releases. σ² = ⌊l2²⌋/(2ρ'), ρ' = ``rho_rational(budget)`` (module doc)."""

    unit = "rho"
    real_release = True

    def __init__(self, source: IntegerSource, *, seeded: bool = False) -> None:
        self.source = source
        self.label = "exact discrete Gaussian (Canonne-Kamath-Steinke) on integer statistics, " + (
            "seeded: NOT for a real release" if seeded else "OS CSPRNG (secrets)")

    @staticmethod
    def sigma2(*, l2: float, budget: float) -> Fraction:
        """σ² = ⌊l2²⌋/(2ρ') (exact rational)."""
        return Fraction(l2_squared(l2)) / (2 * rho_rational(float(budget)))

    def scale(self, *, l1: int, l2: float, budget: float) -> float:
        """σ of the law actually sampled (√ of :meth:`sigma2`)."""
        return math.sqrt(float(self.sigma2(l2=l2, budget=budget)))

    def integer(self, values: np.ndarray, *, l1: int, l2: float, budget: float) -> np.ndarray:
        ints = np.asarray(values, dtype=np.int64)
        s2 = self.sigma2(l2=l2, budget=budget)
        noise = discrete_gaussian_array(s2, ints.size, self.source)
        return (ints + noise.reshape(ints.shape)).astype(float)

    def abs_quantile(self, scale: float, prob: float) -> float:
        """An integer x with P(|Z| > x) ≤ prob: ⌈σ·Φ⁻¹(1 − prob/2)⌉, from P(|Z| ≥ x + 1) ≤
        P(|N(0, σ²)| ≥ x) (module doc)."""
        return float(math.ceil(float(scale) * _normal_quantile(prob / 2.0)))

    def upper_tail(self, scale: float, x: float) -> float:
        """P(Z ≥ x), by summing the pmf (σ ≤ 10⁵; above, the bound P(N ≥ ⌈x⌉ − 1) for x > 0)."""
        j = math.ceil(float(x) - 1e-12)
        sig = float(scale)
        if sig > 1e5:
            return min(_normal_upper((j - 1) / sig), 1.0) if j >= 1 else 1.0 - _normal_upper(-j / sig)
        top = math.ceil(40 * sig) + 40
        if j > top:
            return 0.0
        z = np.arange(max(j, -top), top + 1)
        return float(min(discrete_gaussian_pmf(z, sig).sum(), 1.0))

    def upper_quantile(self, scale: float, prob: float) -> float:
        """An integer j ≥ 0 with P(Z ≥ j) ≤ prob: ⌈σ·Φ⁻¹(1 − prob)⌉ + 1 (P(Z ≥ j) ≤ P(N ≥ j − 1))."""
        return float(max(math.ceil(float(scale) * _normal_quantile(prob)) + 1, 0))
