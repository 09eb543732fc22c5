"""Additive noise behind one small interface (models/user_level.md §5).

Every statistic the user-level release noises is an **integer vector** (counts, and sums of values
snapped to the lattice λ·ℤ, :mod:`.bounding`), of which one user changes at most k entries by a
total of at most ``l1`` (ℓ2: ``l2``) lattice units. So a mechanism needs only:

* :meth:`~NoiseMechanism.integer` — noisy copy of an integer vector;
* :meth:`~NoiseMechanism.scale` — the scale of the noise law used (in lattice units);
* :meth:`~NoiseMechanism.abs_quantile` (error bounds) and :meth:`~NoiseMechanism.upper_quantile`,
  :meth:`~NoiseMechanism.upper_tail` (partition-selection threshold).

Two implementations ship, both pure ε-DP Laplace (``unit = "epsilon"``):

* :class:`DiscreteLaplace` — real releases: the exact discrete Laplace sampler of
  :mod:`dpopt.noise` (Canonne–Kamath–Steinke) from an integer source (the OS CSPRNG unless
  seeded); Z on ℤ with P[Z = z] ∝ exp(−|z|·ε'/Δ1), ε' = ε rounded down to a multiple of 2^-30.
  The query is integer-valued and its ℓ1 sensitivity an integer, so there is no floating-point
  rounding anywhere between the data and the output: ε'-DP exactly (Canonne, Kamath, Steinke 2020, Thm 2.2).
* :class:`LaplaceSimulation` — numpy's continuous Laplace(Δ1/ε): simulations and benchmarks only.

A Gaussian (``unit = "rho"``: ρ-zCDP, σ = Δ2/√(2ρ); the exact discrete Gaussian of CKS for real
releases) plugs in by implementing the same five methods with ``l2``; the release then accounts
its count/sum/sumsq in ρ (models/user_level.md §8).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Protocol

import numpy as np

from .._validation import DpoptInputError
from ..noise import IntegerSource, epsilon_rational
from ..noise.discrete_laplace import discrete_laplace

__all__ = ["NoiseMechanism", "DiscreteLaplace", "LaplaceSimulation"]


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
        noise = np.fromiter((discrete_laplace(s, self.source) for _ in range(ints.size)), dtype=np.int64,
                            count=ints.size)
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
