"""The integer-lattice noise mechanism: the one noise interface of both privacy models.

Every statistic dpopt noises is, or is first made, an **integer vector** on a lattice: the ``user``
model's counts and sums of values snapped to λ·ℤ (:mod:`dpopt.privacy.user.bounding`), and the
``public-occupancy`` model's CLIP means and variances rounded to λ·ℤ by the grid release
(:mod:`dpopt.noise.additive`, :func:`~dpopt.noise.discrete_laplace.grid_inputs`). One individual
changes the vector by at most ``l1`` lattice units in ℓ1 (``l2`` in ℓ2). A mechanism maps
(sensitivity ℓ1/ℓ2, budget) to the scale of its law and samples that law exactly:

* :meth:`~NoiseMechanism.integer` — noisy copy of an integer vector (one (l1, l2, budget) for all
  entries, or one per entry);
* ``draws`` (the exact samplers only) — the integer noise itself, int64 or Python ints past 2^62,
  which the ``user`` model adds to its statistics and refines (never rounded through a float);
* :meth:`~NoiseMechanism.scale` — the scale of the noise law used (in lattice units);
* :meth:`~NoiseMechanism.mean_abs` — E|Z| of that law;
* :meth:`~NoiseMechanism.abs_quantile` (error bounds) and :meth:`~NoiseMechanism.upper_quantile`,
  :meth:`~NoiseMechanism.upper_tail` (partition-selection threshold).

:func:`make_mechanism` is the one place samplers are built (family ``"laplace"``/``"gaussian"``,
sampler ``"discrete"``/``"numpy"``, a seed or an integer source, or a numpy generator): the
``user`` model's statistics and selection samplers (:mod:`dpopt.privacy.user.options`) and the
public-occupancy model's grid noise (:func:`dpopt.noise.make_noise`) both come from it.

Four implementations ship, two pure ε-DP Laplace (``unit = "epsilon"``):

* :class:`DiscreteLaplace` — real releases: the exact discrete Laplace sampler of
  :mod:`dpopt.noise.discrete_laplace` (Canonne–Kamath–Steinke) from an integer source (the OS
  CSPRNG unless seeded); Z on ℤ with P[Z = z] ∝ exp(−|z|·ε'/Δ1), ε' = ε rounded down to a multiple
  of 2^-30. The query is integer-valued and its ℓ1 sensitivity an integer, so there is no
  floating-point rounding anywhere between the data and the output: ε'-DP exactly (Canonne, Kamath,
  Steinke 2020, Thm 2.2).
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
:func:`dpopt.estimation.direct.abs_quantile`): for integer j ≥ 1,
P(|Z| ≥ j) ≤ P(|N(0, σ²)| ≥ j − 1), since Σ_{z≥j} e^{−z²/2σ²} ≤ ∫_{j−1}^∞ e^{−t²/2σ²} dt and the
normaliser Σ_z e^{−z²/2σ²} ≥ √(2π)·σ (Poisson summation).
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction
from collections.abc import Iterable
from typing import Any, Protocol

import numpy as np

from .._validation import DpoptInputError, check_choice, check_epsilon
from .continuous import laplace
from .discrete_gaussian import (discrete_gaussian, discrete_gaussian_array, discrete_gaussian_mean_abs, entry_sigma2,
                                gaussian_entries, gaussian_simulation, rho_rational)
from .discrete_laplace import (discrete_laplace, discrete_laplace_array, discrete_laplace_mean_abs, epsilon_rational,
                               epsilon_rational_array, laplace_entries)
from .sources import IntegerSource, integer_source
from .reduction import refine_discrete_laplace, refine_laplace

__all__ = ["FAMILIES", "SAMPLERS", "NoiseMechanism", "make_mechanism", "DiscreteLaplace", "user_histogram",
           "LaplaceSimulation", "DiscreteGaussian", "GaussianSimulation", "l2_squared", "laplace_abs_quantile", "discrete_laplace_abs_quantile", "discrete_laplace_upper_quantile",
           "discrete_laplace_upper_tail", "discrete_gaussian_upper_tail", "discrete_gaussian_quantile"]


#: noise family -> the unit of its budget ("epsilon": pure ε-DP; "rho": ρ-zCDP)
FAMILIES: dict[str, str] = {"laplace": "epsilon", "gaussian": "rho"}
#: "discrete": exact sampler on ℤ (real releases); "numpy": continuous floats (simulation only)
SAMPLERS = ("discrete", "numpy")


class NoiseMechanism(Protocol):
    """What a release needs from a noise mechanism on an integer lattice (module doc)."""

    #: "laplace" or "gaussian"
    family: str
    #: budget unit: "epsilon" (Laplace) or "rho" (Gaussian, zCDP)
    unit: str
    #: "discrete" (exact, real releases) or "numpy" (simulation only)
    sampler: str
    label: str
    real_release: bool

    def integer(self, values: np.ndarray, *, l1: Any, l2: Any, budget: Any) -> np.ndarray:
        """Noisy copy of an integer vector: one (l1, l2, budget) for all entries, or one per entry."""
        ...

    def scale(self, *, l1: Any, l2: Any, budget: Any) -> Any:
        """Scale of the law drawn (Laplace b, Gaussian σ; lattice units), per entry for arrays."""
        ...

    def mean_abs(self, *, l1: Any, l2: Any, budget: Any) -> np.ndarray:
        """E|Z| of the law drawn (lattice units)."""
        ...

    def abs_quantile(self, scale: float, prob: float) -> float: ...

    def upper_tail(self, scale: float, x: float) -> float: ...

    def upper_quantile(self, scale: float, prob: float) -> float: ...


def _per_entry(*params: Any) -> bool:
    """One parameter per entry (the grid release) rather than one for all (the user model)?"""
    return any(np.ndim(p) for p in params)


def _entries(values: Any, l1: Any, budget: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values, t, budgets) per entry, t and budgets as flat float64 arrays; t must hold whole
    numbers ≥ 1 (the lattice sensitivity of each entry)."""
    v = np.asarray(values)
    t = np.broadcast_to(np.asarray(l1, dtype=float), v.shape).ravel()
    b = np.broadcast_to(np.asarray(budget, dtype=float), v.shape).ravel()
    if t.size and not (np.all(np.isfinite(t)) and t.min() >= 1 and np.all(t == np.floor(t))):
        raise DpoptInputError("per-entry `l1` (and `l2`) must hold whole numbers >= 1 (lattice units)")
    return v, t, b


def _check_l1(l1: int) -> int:
    if isinstance(l1, bool) or not float(l1).is_integer() or l1 < 1:
        raise DpoptInputError(f"`l1` must be a whole number >= 1 (lattice units); got {l1!r}")
    return int(l1)


class _NumpySimulation:
    """A continuous law from a numpy Generator: simulation only, NOT for a real release."""

    real_release = False
    sampler = "numpy"
    law = ""
    #: E|X| / scale of the continuous law
    MEAN_ABS = 1.0

    def __init__(self, rng: np.random.Generator) -> None:
        if not isinstance(rng, np.random.Generator):
            raise DpoptInputError(f"`rng` must be a numpy.random.Generator; got {type(rng).__name__}")
        self.rng = rng
        self.label = f"numpy continuous {self.law}: simulation only, NOT for a real release"

    def draw(self, scale: Any, shape: tuple[int, ...]) -> np.ndarray:  # pragma: no cover - abstract
        """One draw of the law at ``scale`` (broadcast to ``shape``) per entry."""
        raise NotImplementedError

    def integer(self, values: np.ndarray, *, l1: Any, l2: Any, budget: Any) -> np.ndarray:
        v = np.asarray(values, dtype=float)
        return v + self.draw(self.scale(l1=l1, l2=l2, budget=budget), v.shape)

    def mean_abs(self, *, l1: Any, l2: Any, budget: Any) -> np.ndarray:
        """E|X| = scale·``MEAN_ABS`` (1 for Laplace, √(2/π) for the Gaussian)."""
        return np.asarray(self.scale(l1=l1, l2=l2, budget=budget)) * self.MEAN_ABS


class _ExactSampler:
    """An exact sampler on ℤ drawing from an integer source (the OS CSPRNG in a real release)."""

    real_release = True
    sampler = "discrete"
    law = ""

    def __init__(self, source: IntegerSource, *, seeded: bool = False) -> None:
        self.source = source
        self.label = f"exact discrete {self.law} (Canonne-Kamath-Steinke) on integer statistics, " + (
            "seeded: NOT for a real release" if seeded else "OS CSPRNG (secrets)")

    def draws(self, n: int, *, l1: Any, l2: Any, budget: Any) -> np.ndarray:
        """``n`` exact draws of the law at one (l1, l2, ``budget``), never rounded through a float:
        int64 where every |Z| < 2^62, else an object array of Python ints (at the lattice's widest
        sensitivities, a value range of width 1e-12, the draws pass 2^63)."""
        z = self._draws(int(n), l1=l1, l2=l2, budget=budget)
        if isinstance(z, np.ndarray) and z.dtype == np.int64:
            return z
        z = list(z)
        if all(-2**62 < v < 2**62 for v in z):
            return np.asarray(z, dtype=np.int64)
        out = np.empty(len(z), dtype=object)
        out[:] = z
        return out

    def _draws(self, n: int, *, l1: Any, l2: Any, budget: Any) -> Iterable[int]:  # pragma: no cover - abstract
        raise NotImplementedError


class LaplaceSimulation(_NumpySimulation):
    """Continuous Laplace(Δ1/ε) from numpy: simulation only, NOT for a real release."""

    family = "laplace"
    unit = "epsilon"
    law = "Laplace"

    def scale(self, *, l1: Any, l2: Any, budget: Any) -> Any:
        """b = l1/ε (per entry for arrays: any Δ ≥ 0, no lattice needed by continuous noise)."""
        if _per_entry(l1, budget):
            return np.asarray(l1, dtype=float) / np.asarray(budget, dtype=float)
        return _check_l1(l1) / float(budget)

    def draw(self, scale: Any, shape: tuple[int, ...]) -> np.ndarray:
        """numpy's Laplace(0, 1) times ``scale`` (:func:`dpopt.noise.continuous.laplace`)."""
        return laplace(self.rng, scale, shape)

    def refine(self, noise: np.ndarray, *, l1: Any, budget_from: float, budget_to: float) -> np.ndarray:
        """The noise of an answer at ``budget_from`` refined to ``budget_to`` ≥ it (Laplace noise
        reduction, :func:`dpopt.noise.reduction.refine_laplace`)."""
        return refine_laplace(noise, scale_from=self.scale(l1=l1, l2=None, budget=budget_from),
                              scale_to=self.scale(l1=l1, l2=None, budget=budget_to), rng=self.rng)

    def abs_quantile(self, scale: float, prob: float) -> float:
        """x with P(|Lap(b)| > x) = prob (:func:`laplace_abs_quantile`)."""
        return laplace_abs_quantile(scale, prob)

    def upper_tail(self, scale: float, x: float) -> float:
        """P(Lap(b) ≥ x) = ½·exp(−x/b) for x ≥ 0, 1 − ½·exp(x/b) for x < 0."""
        x = float(x)
        half = 0.5 * math.exp(-abs(x) / float(scale))
        return half if x >= 0 else 1.0 - half

    def upper_quantile(self, scale: float, prob: float) -> float:
        """x ≥ 0 with P(Lap(b) ≥ x) = prob (prob ≤ ½): b·ln(1/(2·prob))."""
        return max(float(scale) * math.log(1.0 / (2.0 * prob)), 0.0)


class DiscreteLaplace(_ExactSampler):
    """Exact discrete Laplace on ℤ (:func:`dpopt.noise.discrete_laplace.discrete_laplace`): real releases.

    P[Z = z] = (1−r)/(1+r)·r^|z| with r = exp(−1/s), s = Δ1/ε'.
    """

    family = "laplace"
    unit = "epsilon"
    law = "Laplace"

    def scale(self, *, l1: Any, l2: Any, budget: Any) -> Any:
        """s = l1/ε' (per entry for arrays)."""
        if _per_entry(l1, budget):
            return np.asarray(l1, dtype=float) / epsilon_rational_array(np.asarray(budget, dtype=float))
        return _check_l1(l1) / float(epsilon_rational(float(budget)))

    def mean_abs(self, *, l1: Any, l2: Any, budget: Any) -> np.ndarray:
        """E|Z| = 2r/(1 − r²), r = exp(−ε'/l1) (:func:`~dpopt.noise.discrete_laplace.discrete_laplace_mean_abs`)."""
        return discrete_laplace_mean_abs(np.asarray(l1, dtype=float), budget, 0)

    def integer(self, values: np.ndarray, *, l1: Any, l2: Any, budget: Any) -> np.ndarray:
        """v + Z; one (l1, budget) for all entries, or one per entry
        (:func:`~dpopt.noise.discrete_laplace.laplace_entries`, the grid release's draws)."""
        if _per_entry(l1, budget):
            v, t, b = _entries(values, l1, budget)
            return _add_exact(v, laplace_entries(t, b, self.source).reshape(v.shape))
        return _add_exact(values, self.draws(int(np.size(values)), l1=l1, l2=l2, budget=budget))

    def _draws(self, n: int, *, l1: Any, l2: Any, budget: Any) -> Iterable[int]:
        s = Fraction(_check_l1(l1)) / epsilon_rational(float(budget))
        if s < _ARRAY_SCALE:  # the vectorised exact sampler (int64 draws; |Z| ≥ 2^62 has probability < e^{-2^22})
            return discrete_laplace_array(s, n, self.source)
        return [discrete_laplace(s, self.source) for _ in range(n)]

    def refine(self, noise: np.ndarray, *, l1: Any, budget_from: float, budget_to: float) -> np.ndarray:
        """The exact integer noise of an answer at ``budget_from`` refined to ``budget_to`` ≥ it
        (Laplace noise reduction, :func:`dpopt.noise.reduction.refine_discrete_laplace`): distributed as
        this sampler's noise at ``budget_to``, the earlier noise a post-processing of it."""
        l1 = Fraction(_check_l1(l1))
        return refine_discrete_laplace(noise, scale_from=l1 / epsilon_rational(float(budget_from)),
                                       scale_to=l1 / epsilon_rational(float(budget_to)), source=self.source)

    def abs_quantile(self, scale: float, prob: float) -> float:
        """Smallest integer x with P(|Z| > x) ≤ prob (:func:`discrete_laplace_abs_quantile`)."""
        return discrete_laplace_abs_quantile(scale, prob)

    def upper_tail(self, scale: float, x: float) -> float:
        """P(Z ≥ x) (:func:`discrete_laplace_upper_tail`)."""
        return discrete_laplace_upper_tail(scale, x)

    def upper_quantile(self, scale: float, prob: float) -> float:
        """Smallest integer j ≥ 0 with P(Z ≥ j) ≤ prob (:func:`discrete_laplace_upper_quantile`)."""
        return discrete_laplace_upper_quantile(scale, prob)


def laplace_abs_quantile(scale: float, prob: float) -> float:
    """x with P(|Lap(b)| > x) = prob for the continuous Laplace of scale b: b·ln(1/prob)."""
    return float(scale) * math.log(1.0 / prob)


def user_histogram(bins: np.ndarray, n_bins: int, epsilon: float, source: IntegerSource) -> np.ndarray:
    """ε-DP histogram of users, ``bins`` holding one bin index in [0, n_bins) per user: every user in
    exactly one bin, so adding or removing a user moves the vector of counts by 1 in ℓ1, and exact
    discrete Laplace of scale 1/ε per bin is ε-DP (the place release's two choices and the
    ``"histogram"`` bounds rule). Returns the noisy integer counts."""
    b = np.asarray(bins, dtype=np.int64)
    if b.size and (b.min() < 0 or b.max() >= n_bins):
        raise DpoptInputError(f"`bins` must lie in [0, {n_bins}); got {b.min()} … {b.max()}")
    exact = np.bincount(b, minlength=n_bins).astype(np.int64)
    return make_mechanism("laplace", source=source, seeded=False).integer(exact, l1=1, l2=1.0,
                                                                        budget=check_epsilon(epsilon))


# --- tails of the discrete Laplace, stable at every scale ---------------------------------------------
# P[Z = z] = (1−r)/(1+r)·r^|z|, r = e^{−a}, a = 1/s. For j ≥ 0, P(Z ≥ j) = r^j/(1+r) and for j ≥ 1,
# P(|Z| ≥ j) = 2r^j/(1+r). With c(a) = log((1 + e^{−a})/2) = log1p(expm1(−a)/2) ∈ (−log 2, 0]
# (≈ −a/2 to full relative precision at small a):
#     log P(Z ≥ j) = −log 2 − j·a − c(a),      log P(|Z| ≥ j) = −j·a − c(a).
# Never forming r avoids the two failures of r = exp(−1/s) in floats: r rounds to 1.0 for
# s > ~9e15 (log r = 0: division by zero) and to 0.0 for s < ~1/745 (log 0: domain error).
# A quantile solves j·a + c(a) ≥ T (T = −log p two-sided, −log(2p) one-sided) in floats, then
# steps j until the tail, re-evaluated in 50-digit decimal arithmetic, is ≤ p and the tail at j − 1
# is not; beyond 2^52 (no integer resolution left) it is raised by one part in 10^12.


def _check_scale_prob(scale: float, prob: float | None = None) -> float:
    s = float(scale)
    if not (s > 0 and math.isfinite(s)):
        raise DpoptInputError(f"`scale` must be a positive finite number; got {scale!r}")
    if prob is not None and not 0.0 < float(prob) < 1.0:
        raise DpoptInputError(f"`prob` must lie in (0, 1); got {prob!r}")
    return s


def _c(a: float) -> float:
    """log((1 + e^{−a})/2), accurate for every a ≥ 0."""
    return math.log1p(math.expm1(-a) / 2.0)


def _dlap_log_tail_exact(s: float, j: int, two_sided: bool) -> Decimal:
    """log P(|Z| ≥ j) (two-sided) or log P(Z ≥ j) in 50-digit decimal arithmetic."""
    with localcontext() as ctx:
        ctx.prec = 50
        a = 1 / Decimal(s)
        head = Decimal(0) if two_sided else -Decimal(2).ln()
        return head - j * a - ((1 + (-a).exp()) / 2).ln()


def _dlap_quantile(scale: float, prob: float, two_sided: bool, floor: int) -> int:
    """Smallest integer j ≥ ``floor`` whose tail (module comment) is ≤ ``prob``."""
    s = _check_scale_prob(scale, prob)
    a = 1.0 / s
    if math.isinf(a):  # s below 1/1.8e308: no mass off 0
        return floor
    target = -math.log(float(prob)) - (0.0 if two_sided else math.log(2.0))
    est = (target - _c(a)) * s
    if est >= 2.0**52:
        return math.ceil(est * (1.0 + 1e-12))
    j = max(math.ceil(est), floor)
    with localcontext() as ctx:
        ctx.prec = 50
        lp = Decimal(float(prob)).ln()
    while j > floor and _dlap_log_tail_exact(s, j - 1, two_sided) <= lp:
        j -= 1
    while _dlap_log_tail_exact(s, j, two_sided) > lp:
        j += 1
    return j


def discrete_laplace_abs_quantile(scale: float, prob: float) -> float:
    """Smallest integer x ≥ 0 with P(|Z| > x) ≤ ``prob`` for Z ~ DLap(scale) (pmf ∝ e^{−|z|/s}),
    from P(|Z| ≥ j) = 2r^j/(1+r), j = x + 1 ≥ 1, in log form (stable for every s > 0)."""
    return float(_dlap_quantile(scale, prob, True, 1) - 1)


def discrete_laplace_upper_quantile(scale: float, prob: float) -> float:
    """Smallest integer j ≥ 0 with P(Z ≥ j) = r^j/(1+r) ≤ ``prob``."""
    return float(_dlap_quantile(scale, prob, False, 0))


def discrete_laplace_upper_tail(scale: float, x: float) -> float:
    """P(Z ≥ x), j = ⌈x⌉: r^j/(1+r) for j ≥ 0, 1 − r^(1−j)/(1+r) for j < 0 (symmetry), via
    exp / expm1 of the log form."""
    a = 1.0 / _check_scale_prob(scale)
    j = math.ceil(float(x) - 1e-12)
    if math.isinf(a):  # all mass at 0
        return 1.0 if j <= 0 else 0.0
    head = -math.log(2.0) - _c(a)
    if j >= 0:
        return math.exp(head - j * a)
    return -math.expm1(head - (1 - j) * a)


#: noise scales (σ for the Gaussian) below this use the vectorised int64 samplers of dpopt.noise;
#: above, the scalar samplers' Python ints (no int64 overflow at any scale validation accepts)
_ARRAY_SCALE = 2**40


def _add_exact(values: np.ndarray, noise: Iterable[int]) -> np.ndarray:
    """float(v + Z) per entry (``noise`` one integer per entry, in order), v and Z added as Python
    ints (exact at any size: int64 or object arrays of Python ints from :mod:`.bounding`, noise
    beyond int64 at huge scales), rounded once to the nearest float.

    Vectorised when ``noise`` is an int64 array and every |v|, |Z| < 2^62 (whole floats included):
    v + Z is then exact in int64 and its conversion to float64 rounds to nearest-even, as
    ``float(int)`` does, so the result is the same float."""
    arr = np.asarray(values)
    whole = arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))
    if isinstance(noise, np.ndarray) and noise.dtype == np.int64 and noise.size == arr.size and (
            arr.dtype.kind in "iu" or whole):
        lim = 2**62
        if arr.size == 0 or (-lim < int(noise.min()) and int(noise.max()) < lim
                             and -lim < float(arr.min()) and float(arr.max()) < lim):
            return (arr.astype(np.int64).ravel() + noise.ravel()).astype(float).reshape(arr.shape)
    if whole:
        arr = arr.astype(object)  # whole floats: their exact integer values
    if arr.dtype != object and arr.dtype.kind not in "iu":
        raise DpoptInputError(f"`values` must hold integers (int64 or Python ints); got dtype {arr.dtype}")
    out = np.fromiter((float(int(v) + int(z)) for v, z in zip(arr.ravel().tolist(), noise)), dtype=float,
                      count=arr.size)
    return out.reshape(arr.shape)


def l2_squared(l2: float) -> int:
    """⌊l2²⌋ computed exactly (``Fraction(l2)**2``): the squared ℓ2 sensitivity Δ2² to calibrate to.

    Every statistic noised here is an integer vector, so Δ2² (a sum of squared integer changes) is
    an integer; if the float ``l2`` is ≥ Δ2 (:func:`dpopt.privacy.user.sensitivity.sqrt_up` rounds up)
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


class GaussianSimulation(_NumpySimulation):
    """Continuous N(0, σ²), σ = Δ2/√(2ρ), from numpy: simulation only, NOT for a real release."""

    family = "gaussian"
    unit = "rho"
    law = "Gaussian"

    MEAN_ABS = float(np.sqrt(2.0 / np.pi))

    def scale(self, *, l1: Any, l2: Any, budget: Any) -> Any:
        """σ = l2/√(2ρ) (per entry for arrays)."""
        if _per_entry(l2, budget):
            return np.asarray(l2, dtype=float) / np.sqrt(2.0 * np.asarray(budget, dtype=float))
        return float(l2) / math.sqrt(2.0 * float(budget))

    def draw(self, scale: Any, shape: tuple[int, ...]) -> np.ndarray:
        """numpy's N(0, scale²) (:func:`dpopt.noise.discrete_gaussian.gaussian_simulation`)."""
        return gaussian_simulation(scale, self.rng, shape)

    def abs_quantile(self, scale: float, prob: float) -> float:
        """x with P(|N(0, σ²)| > x) = prob: σ·Φ⁻¹(1 − prob/2)."""
        return float(scale) * _normal_quantile(prob / 2.0)

    def upper_tail(self, scale: float, x: float) -> float:
        """P(N(0, σ²) ≥ x)."""
        return _normal_upper(float(x) / float(scale))

    def upper_quantile(self, scale: float, prob: float) -> float:
        """x ≥ 0 with P(N(0, σ²) ≥ x) = prob (prob ≤ ½)."""
        return max(float(scale) * _normal_quantile(prob), 0.0)


class DiscreteGaussian(_ExactSampler):
    """Exact discrete Gaussian N_ℤ(0, σ²) (:func:`dpopt.noise.discrete_gaussian.discrete_gaussian`):
    real releases. σ² = ⌊l2²⌋/(2ρ'), ρ' = ``rho_rational(budget)`` (module doc)."""

    family = "gaussian"
    unit = "rho"
    law = "Gaussian"

    @staticmethod
    def sigma2(*, l2: float, budget: float) -> Fraction:
        """σ² = ⌊l2²⌋/(2ρ') (exact rational)."""
        return Fraction(l2_squared(l2)) / (2 * rho_rational(float(budget)))

    def scale(self, *, l1: Any, l2: Any, budget: Any) -> Any:
        """σ of the law actually sampled (√ of :meth:`sigma2`); per entry for arrays, l2 = t whole
        numbers, σ² in floats as the draws report it (:func:`~dpopt.noise.discrete_gaussian.entry_sigma2`)."""
        if _per_entry(l2, budget):
            shape = np.broadcast(np.asarray(l2), np.asarray(budget)).shape
            _, t, b = _entries(np.empty(shape), l2, budget)
            return np.sqrt(entry_sigma2(t, b)).reshape(shape)
        return math.sqrt(float(self.sigma2(l2=l2, budget=budget)))

    def mean_abs(self, *, l1: Any, l2: Any, budget: Any) -> np.ndarray:
        """E|Z| (:func:`~dpopt.noise.discrete_gaussian.discrete_gaussian_mean_abs` of :meth:`scale`)."""
        return discrete_gaussian_mean_abs(self.scale(l1=l1, l2=l2, budget=budget))

    def integer(self, values: np.ndarray, *, l1: Any, l2: Any, budget: Any) -> np.ndarray:
        """v + Z; one (l2, budget) for all entries, or one per entry with whole-number l2
        (:func:`~dpopt.noise.discrete_gaussian.gaussian_entries`, the grid release's draws)."""
        if _per_entry(l2, budget):
            v, t, b = _entries(values, l2, budget)
            return _add_exact(v, gaussian_entries(t, b, self.source)[0].reshape(v.shape))
        return _add_exact(values, self.draws(int(np.size(values)), l1=l1, l2=l2, budget=budget))

    def _draws(self, n: int, *, l1: Any, l2: Any, budget: Any) -> Iterable[int]:
        s2 = self.sigma2(l2=l2, budget=budget)
        if s2 < _ARRAY_SCALE**2:  # σ < 2^40: the vectorised exact sampler
            return discrete_gaussian_array(s2, n, self.source)
        return [discrete_gaussian(s2, self.source) for _ in range(n)]

    def abs_quantile(self, scale: float, prob: float) -> float:
        """An integer x with P(|Z| > x) ≤ prob (:func:`discrete_gaussian_quantile`)."""
        return discrete_gaussian_quantile(scale, prob, two_sided=True)

    def upper_tail(self, scale: float, x: float) -> float:
        """P(Z ≥ x) (:func:`discrete_gaussian_upper_tail`)."""
        return discrete_gaussian_upper_tail(scale, x)

    def upper_quantile(self, scale: float, prob: float) -> float:
        """An integer j ≥ 0 with P(Z ≥ j) ≤ prob (:func:`discrete_gaussian_quantile`)."""
        return discrete_gaussian_quantile(scale, prob, two_sided=False)


def _dgauss_weights(sig: float) -> tuple[np.ndarray, np.ndarray]:
    """z = −top..top and weights exp(−(z/σ)²/2) (in [0, 1], 1 at z = 0, no 0/0 at tiny σ)."""
    top = math.ceil(40 * sig) + 40
    z = np.arange(-top, top + 1, dtype=float)
    with np.errstate(over="ignore"):  # (z/σ)² = inf at tiny σ: weight exactly 0
        return z, np.exp(-0.5 * (z / sig) ** 2)


def discrete_gaussian_quantile(scale: float, prob: float, *, two_sided: bool) -> float:
    """An integer x ≥ 0 with P(|Z| > x) ≤ prob (``two_sided``) or P(Z ≥ x) ≤ prob, Z ~ N_ℤ(0, σ²).

    σ ≤ 10⁵: the smallest such x from the pmf (weights of :func:`discrete_gaussian_upper_tail`),
    with a relative margin of 1e-9 on prob for the float sums. Above: ⌈σ·Φ⁻¹(1 − prob/2)⌉
    (two-sided, from P(|Z| ≥ x + 1) ≤ P(|N| ≥ x)) or ⌈σ·Φ⁻¹(1 − prob)⌉ + 1 (module doc).
    """
    sig = _check_scale_prob(scale, prob)
    p = float(prob)
    if sig > 1e5:
        if two_sided:
            return float(math.ceil(sig * _normal_quantile(p / 2.0)))
        return float(max(math.ceil(sig * _normal_quantile(p)) + 1, 0))
    z, w = _dgauss_weights(sig)
    tail = np.cumsum(w[::-1])[::-1] / w.sum()  # tail[i] = P(Z ≥ z[i])
    pos = z >= 0
    zz, tt = z[pos], tail[pos]
    if two_sided:  # P(|Z| > x) = 2·P(Z ≥ x + 1)
        ok = np.flatnonzero(2.0 * np.append(tt[1:], 0.0) <= p * (1.0 - 1e-9))
    else:
        ok = np.flatnonzero(tt <= p * (1.0 - 1e-9))
    return float(zz[ok[0]]) if ok.size else float(zz[-1])


def discrete_gaussian_upper_tail(scale: float, x: float) -> float:
    """P(Z ≥ x) for Z ~ N_ℤ(0, σ²), σ = ``scale``, j = ⌈x⌉.

    σ ≤ 10⁵: the pmf summed over |z| ≤ ⌈40σ⌉ + 40 with weights exp(−(z/σ)²/2), which stay in
    [0, 1] with weight 1 at z = 0 for every σ > 0 (no 0/0 or overflow at tiny σ; the omitted tail
    is below e^{−800}). Above: the bound P(N(0, σ²) ≥ j − 1) for j ≥ 1 (module doc) and
    1 − P(N ≥ −j) ≤ P(Z ≥ j) for j ≤ 0.
    """
    sig = _check_scale_prob(scale)
    j = math.ceil(float(x) - 1e-12)
    if sig > 1e5:
        return min(_normal_upper((j - 1) / sig), 1.0) if j >= 1 else 1.0 - _normal_upper(-j / sig)
    z, w = _dgauss_weights(sig)
    if j > z[-1]:
        return 0.0
    if j <= z[0]:
        return 1.0
    return float(min(w[z >= j].sum() / w.sum(), 1.0))


def make_mechanism(family: str = "laplace", sampler: str = "discrete", *, seed: int | None = None,
                   source: IntegerSource | None = None, rng: np.random.Generator | None = None,
                   seeded: bool | None = None) -> NoiseMechanism:
    """The one place a noise sampler is built (both privacy models and :func:`dpopt.noise.make_noise`).

    Parameters
    ----------
    family : {"laplace", "gaussian"}
        The noise law (budget unit ``FAMILIES[family]``: ε for Laplace, ρ of zCDP for Gaussian).
    sampler : {"discrete", "numpy"}
        The exact sampler on ℤ (real releases) or numpy's continuous law (simulation only).
    seed : int, optional
        Reproducible noise, NOT for a real release: the seeded integer source
        (:func:`~dpopt.noise.sources.integer_source`) or ``numpy.random.default_rng(seed)``;
        None (default): the OS CSPRNG (discrete) or fresh OS entropy (numpy).
    source : IntegerSource, optional
        The discrete sampler's integer source (instead of ``seed``; e.g. another sampler's, so
        that two samplers draw from one stream).
    rng : numpy.random.Generator, optional
        The numpy sampler's generator (instead of ``seed``).
    seeded : bool, optional
        Whether the discrete sampler's label says "seeded" (default: ``seed`` was given).
    """
    check_choice(family, "mechanism", tuple(FAMILIES))
    check_choice(sampler, "sampler", SAMPLERS)
    if sampler == "discrete":
        if rng is not None:
            raise DpoptInputError("`rng` is for sampler='numpy'; the discrete sampler takes `seed`")
        if source is not None and seed is not None:
            raise DpoptInputError(f"give `seed` or `source`, not both; got seed={seed!r}")
        src = integer_source(seed) if source is None else source
        cls = DiscreteLaplace if family == "laplace" else DiscreteGaussian
        return cls(src, seeded=(seed is not None) if seeded is None else seeded)
    if source is not None:
        raise DpoptInputError("`source` is for sampler='discrete'; the numpy sampler takes `seed` or `rng`")
    if rng is not None and seed is not None:
        raise DpoptInputError(f"give `seed` or `rng`, not both; got seed={seed!r}")
    gen = np.random.default_rng(seed) if rng is None else rng
    return LaplaceSimulation(gen) if family == "laplace" else GaussianSimulation(gen)
