"""One interface for additive noise: "noise of sensitivity Δ and budget b on these values".

A mechanism (the per-grid CLIP mechanism of :mod:`dpopt.mechanisms.grid`, the release) holds a
:class:`Noise` and calls :meth:`Noise.add`; it does not know which sampler runs:

* ``make_noise("laplace", sampler="discrete")`` — :class:`DiscreteLaplace`: the exact discrete
  Laplace mechanism on λ·ℤ (:mod:`.discrete_laplace`, Canonne–Kamath–Steinke) with the OS CSPRNG,
  or a seeded source (NOT for a real release); budget unit ε;
* ``make_noise("laplace", sampler="numpy", rng=...)`` — :class:`NumpyLaplace`: continuous
  ``Lap(Δ/ε)`` from numpy, for Monte-Carlo simulations only;
* ``make_noise("gaussian", sampler="discrete")`` — :class:`DiscreteGaussian`: the exact discrete
  Gaussian on λ·ℤ (:mod:`.discrete_gaussian`, Canonne–Kamath–Steinke Algorithm 3), budget unit ρ
  (zero-concentrated DP); ``Δ`` is then the ℓ2 sensitivity of each entry (= its ℓ1 sensitivity for
  a scalar statistic);
* ``make_noise("gaussian", sampler="numpy", rng=...)`` — :class:`NumpyGaussian`: continuous
  ``N(0, Δ²/(2ρ))`` from numpy, for simulations only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .._validation import DpoptInputError, check_choice, check_positive_int
from .continuous import check_rng, laplace
from .discrete_laplace import (
    DEFAULT_GRANULARITY_BITS,
    discrete_laplace_mean_abs,
    epsilon_rational_array,
    release_on_grid,
)
from .discrete_gaussian import discrete_gaussian_mean_abs, gaussian_simulation, release_on_grid_gaussian
from .mechanism import FAMILIES, SAMPLERS
from .sources import IntegerSource, SecureRandom, integer_source

__all__ = [
    "MECHANISMS",
    "SAMPLERS",
    "NoisyValues",
    "Noise",
    "DiscreteLaplace",
    "NumpyLaplace",
    "DiscreteGaussian",
    "NumpyGaussian",
    "make_noise",
]

#: noise mechanism -> the unit of its budget ("epsilon": pure ε-DP; "rho": ρ-zCDP)
MECHANISMS: dict[str, str] = FAMILIES


@dataclass(frozen=True, eq=False)
class NoisyValues:
    """Values with noise added, entry by entry.

    Attributes
    ----------
    values : ndarray
        The released values (NaN where the input was NaN: nothing released).
    scale : ndarray
        Scale of the noise distribution actually used, in value units (Laplace ``b``: ``Δ/ε`` for
        numpy, ``λ·t/ε'`` for the discrete sampler; Gaussian ``σ``: ``Δ/√(2ρ)`` for numpy,
        ``λ·t/√(2ρ')`` for the discrete sampler); 0 where no noise was added (no budget and
        no sensitivity), NaN where nothing was released.
    mean_abs : ndarray
        E|noise| per entry (0 where no noise).
    rounding : float
        Largest rounding of a value to the output grid (λ/2 for the discrete sampler, else 0).
    """

    values: np.ndarray
    scale: np.ndarray
    mean_abs: np.ndarray
    rounding: float


class Noise(Protocol):
    """What every noise sampler offers a mechanism."""

    #: "laplace" (a Gaussian sampler: "gaussian")
    mechanism: str
    #: budget unit of ``add``'s ``budget``: "epsilon" or "rho"
    unit: str
    #: "discrete" or "numpy"
    sampler: str
    #: one line for reports: the sampler and its randomness
    label: str
    #: spacing λ of the output grid (0 for continuous noise)
    granularity: float

    def add(self, values: Any, sensitivity: Any, budget: Any, *, value_errors: Any = None,
            callback: Callable[[int], None] | None = None) -> NoisyValues:
        """Add noise calibrated to ``sensitivity`` (Δ per entry) and ``budget`` (per entry)."""
        ...


class _ExactSampler:
    """What the exact samplers share: the integer source and the output grid λ = 2^-k."""

    sampler = "discrete"
    mechanism: str

    def __init__(self, source: IntegerSource | None = None, *,
                 granularity_bits: int = DEFAULT_GRANULARITY_BITS) -> None:
        self.source = SecureRandom() if source is None else source
        self.k = check_positive_int(granularity_bits, "granularity_bits", minimum=0)
        self.granularity = 2.0**-self.k
        self.label = f"discrete {self.mechanism.capitalize()} on 2^-{self.k} (Canonne-Kamath-Steinke), " + (
            "OS CSPRNG (secrets)" if isinstance(self.source, SecureRandom) else "seeded: NOT for a real release")


class DiscreteLaplace(_ExactSampler):
    """Exact discrete Laplace on λ·ℤ (see :mod:`dpopt.noise.discrete_laplace`); budget unit ε.

    Parameters
    ----------
    source : IntegerSource
        :class:`~dpopt.noise.sources.SecureRandom` for a real release (the default).
    granularity_bits : int
        k of λ = 2^-k.
    """

    mechanism = "laplace"
    unit = "epsilon"

    def add(self, values: Any, sensitivity: Any, budget: Any, *, value_errors: Any = None,
            callback: Callable[[int], None] | None = None) -> NoisyValues:
        """λ·(round(f/λ) + Z), Z ~ DLap(t/ε'); ``value_errors`` bound the float error of ``values``.

        An entry with budget 0 and Δ = 0 is released without noise (the caller guarantees it is
        data-independent); a NaN entry is not released.
        """
        vals = np.asarray(values, dtype=float)
        eps = np.broadcast_to(np.asarray(budget, dtype=float), vals.shape)
        out, t = release_on_grid(vals, sensitivity, eps, self.source, granularity_bits=self.k,
                                 callback=callback, value_errors=value_errors)
        ok = np.isfinite(vals)
        scale = np.full(vals.shape, np.nan)
        mean_abs = np.zeros(vals.shape)
        noisy = ok & (eps > 0)
        scale[ok & ~noisy] = 0.0
        if np.any(noisy):
            used = epsilon_rational_array(eps[noisy])
            scale[noisy] = self.granularity * t[noisy] / used
            mean_abs[noisy] = discrete_laplace_mean_abs(t[noisy], eps[noisy], self.k)
        return NoisyValues(values=out, scale=scale, mean_abs=mean_abs, rounding=self.granularity / 2)


class _NumpySampler:
    """Continuous noise from numpy: Monte-Carlo simulations only, NOT for a real release.

    Subclasses give the scale from (Δ, budget), the draw and E|X|/scale.
    """

    sampler = "numpy"
    granularity = 0.0
    mechanism: str
    label: str
    mean_abs_factor: float

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = check_rng(rng)

    @staticmethod
    def _scale(sens: np.ndarray, budget: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _draw(self, scale: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def add(self, values: Any, sensitivity: Any, budget: Any, *, value_errors: Any = None,
            callback: Callable[[int], None] | None = None) -> NoisyValues:
        """``f`` plus noise of the scale for (Δ, budget) per entry (no noise where the budget is 0);
        one draw per entry, NaN entries too (so seeded runs stay aligned)."""
        vals = np.asarray(values, dtype=float)
        sens = np.broadcast_to(np.asarray(sensitivity, dtype=float), vals.shape)
        b = np.broadcast_to(np.asarray(budget, dtype=float), vals.shape)
        ok = np.isfinite(vals)
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where(ok, np.where(b > 0, self._scale(sens, b), 0.0), np.nan)
        out = np.where(ok, vals + self._draw(np.where(ok, scale, 1.0), vals.shape), np.nan)
        if callback is not None:
            callback(vals.size)
        return NoisyValues(values=out, scale=scale, mean_abs=np.where(ok, scale * self.mean_abs_factor, 0.0),
                           rounding=0.0)


class NumpyLaplace(_NumpySampler):
    """Continuous ``Lap(Δ/ε)`` from numpy: Monte-Carlo simulations only, NOT for a real release."""

    mechanism = "laplace"
    unit = "epsilon"
    label = "numpy continuous Laplace: simulation only, NOT for a real release"
    mean_abs_factor = 1.0

    @staticmethod
    def _scale(sens: np.ndarray, budget: np.ndarray) -> np.ndarray:
        return sens / budget

    def _draw(self, scale: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        return laplace(self.rng, scale, shape)


class DiscreteGaussian(_ExactSampler):
    """Exact discrete Gaussian on λ·ℤ (see :mod:`dpopt.noise.discrete_gaussian`); budget unit ρ.

    Entry i is released as λ·(round(f_i/λ) + Z_i), Z_i ~ N_ℤ(0, t_i²/(2ρ'_i)), ρ'_i ≤ ρ_i: ρ_i-zCDP
    for an ℓ2 (= ℓ1, scalar) sensitivity Δ_i (Canonne, Kamath & Steinke 2020, Theorem 4).
    """

    mechanism = "gaussian"
    unit = "rho"

    def add(self, values: Any, sensitivity: Any, budget: Any, *, value_errors: Any = None,
            callback: Callable[[int], None] | None = None) -> NoisyValues:
        """λ·(round(f/λ) + Z), Z ~ N_ℤ(0, t²/(2ρ')); entries with ρ = 0 and Δ = 0 get no noise."""
        vals = np.asarray(values, dtype=float)
        rho = np.broadcast_to(np.asarray(budget, dtype=float), vals.shape)
        out, _, sigma = release_on_grid_gaussian(vals, sensitivity, rho, self.source,
                                                 granularity_bits=self.k, callback=callback,
                                                 value_errors=value_errors)
        noisy = np.isfinite(vals) & (np.nan_to_num(sigma) > 0)
        mean_abs = np.zeros(vals.shape)
        if np.any(noisy):
            lam = self.granularity  # the sampler's σ_Z is in grid units: E|λZ| = λ·E|Z|
            mean_abs[noisy] = lam * discrete_gaussian_mean_abs(sigma[noisy] / lam)
        return NoisyValues(values=out, scale=sigma, mean_abs=mean_abs, rounding=self.granularity / 2)


class NumpyGaussian(_NumpySampler):
    """Continuous ``N(0, Δ²/(2ρ))`` from numpy: Monte-Carlo simulations only, NOT for a real release."""

    mechanism = "gaussian"
    unit = "rho"
    label = "numpy continuous Gaussian: simulation only, NOT for a real release"
    mean_abs_factor = float(np.sqrt(2.0 / np.pi))

    @staticmethod
    def _scale(sens: np.ndarray, budget: np.ndarray) -> np.ndarray:
        return sens / np.sqrt(2.0 * budget)

    def _draw(self, scale: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        return gaussian_simulation(scale, self.rng, shape)


def make_noise(
    mechanism: str = "laplace",
    *,
    sampler: str = "discrete",
    seed: int | None = None,
    rng: np.random.Generator | None = None,
    granularity_bits: int = DEFAULT_GRANULARITY_BITS,
) -> Noise:
    """The sampler a mechanism adds its noise with.

    Parameters
    ----------
    mechanism : {"laplace", "gaussian"}
        The noise distribution (budget unit ``MECHANISMS[mechanism]``: ε for Laplace, ρ of zCDP
        for Gaussian).
    sampler : {"discrete", "numpy"}
        Exact discrete sampler (real releases) or numpy floats (simulation only).
    seed : int, optional
        Reproducible noise for tests and demos, NOT for a real release; None (default): the OS
        CSPRNG (discrete) or fresh OS entropy (numpy).
    rng : numpy.random.Generator, optional
        The generator of the numpy sampler (instead of ``seed``).
    granularity_bits : int
        k of the discrete sampler's output grid λ = 2^-k.
    """
    check_choice(mechanism, "mechanism", tuple(MECHANISMS))
    check_choice(sampler, "sampler", SAMPLERS)
    if sampler == "discrete":
        if rng is not None:
            raise DpoptInputError("`rng` is for sampler='numpy'; the discrete sampler takes `seed`")
        cls = DiscreteLaplace if mechanism == "laplace" else DiscreteGaussian
        return cls(integer_source(seed), granularity_bits=granularity_bits)
    if rng is not None and seed is not None:
        raise DpoptInputError(f"give `seed` or `rng`, not both; got seed={seed!r}")
    gen = np.random.default_rng(seed) if rng is None else rng
    return NumpyLaplace(gen) if mechanism == "laplace" else NumpyGaussian(gen)
