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

Each of them is an adapter over the one integer-lattice mechanism of :mod:`dpopt.noise.mechanism`
(built by :func:`~dpopt.noise.mechanism.make_mechanism`, as the ``user`` model's samplers are): the
exact samplers put the values on the lattice (q = round(f/λ)) and the value-space sensitivity Δ,
with the float-error bound η, on whole lattice units t (models/release.md §5,
:func:`~dpopt.noise.discrete_laplace.grid_inputs`), let the mechanism noise q with one (t_i, budget_i)
per entry, and release λ·(q + Z); the mechanism also gives each entry's scale and E|Z|. The numpy
samplers use the continuous mechanism's scale and draw at Δ/ε (Δ/√(2ρ)) in value units: continuous
noise needs no lattice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .._validation import check_choice
from .continuous import check_rng
from .discrete_laplace import DEFAULT_GRANULARITY_BITS, GridInputs, check_granularity_bits, grid_inputs, report_progress
from .mechanism import FAMILIES, SAMPLERS, NoiseMechanism, make_mechanism
from .sources import IntegerSource, SecureRandom

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
    """What the exact samplers share: the lattice mechanism (its integer source) and the grid λ = 2^-k.

    :meth:`add` maps the values to the lattice (:func:`~dpopt.noise.discrete_laplace.grid_inputs`:
    q = round(f/λ), t = the grid sensitivity of Δ and η), lets the mechanism noise q with one
    (t_i, budget_i) per entry, and maps back: λ·(q + Z).
    """

    sampler = "discrete"
    mechanism: str

    def __init__(self, source: IntegerSource | None = None, *,
                 granularity_bits: int = DEFAULT_GRANULARITY_BITS) -> None:
        self.lattice: NoiseMechanism = make_mechanism(self.mechanism, "discrete",
                                                      source=SecureRandom() if source is None else source)
        self.source = self.lattice.source  # type: ignore[attr-defined]
        self.k = check_granularity_bits(granularity_bits)
        self.granularity = 2.0**-self.k
        self.label = f"discrete {self.mechanism.capitalize()} on 2^{-self.k} (Canonne-Kamath-Steinke), " + (
            "OS CSPRNG (secrets)" if isinstance(self.source, SecureRandom) else "seeded: NOT for a real release")

    def _noise(self, values: Any, sensitivity: Any, budget: Any,
               value_errors: Any) -> tuple[GridInputs, np.ndarray, np.ndarray]:
        """(the grid inputs, the released values, each noised entry's budget)."""
        g = grid_inputs(values, sensitivity, budget, self.k, value_errors)
        b = g.budget.flat[g.idx]
        g.out.flat[g.idx] = self.lattice.integer(g.q.flat[g.idx], l1=g.t, l2=g.t, budget=b) * g.lam
        return g, g.out, b


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
        g, out, eps = self._noise(values, sensitivity, budget, value_errors)
        report_progress(callback, out.size)
        scale = np.where(np.isfinite(np.asarray(values, dtype=float)) & ~(g.budget > 0), 0.0, np.nan)
        mean_abs = np.zeros(out.shape)
        scale.flat[g.idx] = self.granularity * self.lattice.scale(l1=g.t, l2=g.t, budget=eps)
        mean_abs.flat[g.idx] = self.lattice.mean_abs(l1=g.t, l2=g.t, budget=eps) * self.granularity
        return NoisyValues(values=out, scale=scale, mean_abs=mean_abs, rounding=self.granularity / 2)


class _NumpySampler:
    """Continuous noise from numpy: Monte-Carlo simulations only, NOT for a real release.

    :meth:`add` draws from the continuous mechanism of :mod:`dpopt.noise.mechanism` at the scale of
    (Δ, budget) in value units (no lattice: λ = 0).
    """

    sampler = "numpy"
    granularity = 0.0
    mechanism: str
    label: str

    def __init__(self, rng: np.random.Generator) -> None:
        self.lattice: NoiseMechanism = make_mechanism(self.mechanism, "numpy", rng=check_rng(rng))
        self.rng = rng

    def add(self, values: Any, sensitivity: Any, budget: Any, *, value_errors: Any = None,
            callback: Callable[[int], None] | None = None) -> NoisyValues:
        """``f`` plus noise of the scale for (Δ, budget) per entry (no noise where the budget is 0);
        one draw per entry, NaN entries too (so seeded runs stay aligned)."""
        vals = np.asarray(values, dtype=float)
        flat = vals.reshape(-1)  # the mechanism's per-entry form (one draw per entry either way)
        sens = np.broadcast_to(np.asarray(sensitivity, dtype=float), vals.shape).reshape(-1)
        b = np.broadcast_to(np.asarray(budget, dtype=float), vals.shape).reshape(-1)
        ok = np.isfinite(flat)
        with np.errstate(divide="ignore", invalid="ignore"):
            law = np.where(b > 0, self.lattice.scale(l1=sens, l2=sens, budget=b), 0.0)
            mean_abs = np.where(ok & (b > 0), self.lattice.mean_abs(l1=sens, l2=sens, budget=b), 0.0)
        scale = np.where(ok, law, np.nan)
        draw = self.lattice.draw(np.where(ok, scale, 1.0), flat.shape)  # type: ignore[attr-defined]
        out = np.where(ok, flat + draw, np.nan)
        if callback is not None:
            callback(vals.size)
        shape = vals.shape
        return NoisyValues(values=out.reshape(shape), scale=scale.reshape(shape), mean_abs=mean_abs.reshape(shape),
                           rounding=0.0)


class NumpyLaplace(_NumpySampler):
    """Continuous ``Lap(Δ/ε)`` from numpy: Monte-Carlo simulations only, NOT for a real release."""

    mechanism = "laplace"
    unit = "epsilon"
    label = "numpy continuous Laplace: simulation only, NOT for a real release"


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
        g, out, rho = self._noise(values, sensitivity, budget, value_errors)
        report_progress(callback, int(g.free.sum()) + g.idx.size)
        sigma = np.where(g.free, 0.0, np.nan)
        mean_abs = np.zeros(out.shape)
        sigma.flat[g.idx] = self.lattice.scale(l1=g.t, l2=g.t, budget=rho) * g.lam
        mean_abs.flat[g.idx] = self.granularity * self.lattice.mean_abs(l1=g.t, l2=g.t, budget=rho)
        return NoisyValues(values=out, scale=sigma, mean_abs=mean_abs, rounding=self.granularity / 2)


class NumpyGaussian(_NumpySampler):
    """Continuous ``N(0, Δ²/(2ρ))`` from numpy: Monte-Carlo simulations only, NOT for a real release."""

    mechanism = "gaussian"
    unit = "rho"
    label = "numpy continuous Gaussian: simulation only, NOT for a real release"


def make_noise(
    mechanism: str = "laplace",
    *,
    sampler: str = "discrete",
    seed: int | None = None,
    rng: np.random.Generator | None = None,
    granularity_bits: int = DEFAULT_GRANULARITY_BITS,
) -> Noise:
    """The sampler a mechanism adds its noise with: the lattice mechanism of
    :func:`~dpopt.noise.mechanism.make_mechanism` behind :meth:`Noise.add`.

    Parameters
    ----------
    mechanism : {"laplace", "gaussian"}, default "laplace"
        The noise distribution (budget unit ``MECHANISMS[mechanism]``: ε for Laplace, ρ of zCDP
        for Gaussian).
    sampler : {"discrete", "numpy"}, default "discrete", keyword-only
        Exact discrete sampler (real releases) or numpy floats (simulation only).
    seed : int, optional, keyword-only
        Reproducible noise for tests and demos, NOT for a real release; None (default): the OS
        CSPRNG (discrete) or fresh OS entropy (numpy).
    rng : numpy.random.Generator, optional, keyword-only
        The generator of the numpy sampler (instead of ``seed``; refused with ``sampler="discrete"``).
    granularity_bits : int, default DEFAULT_GRANULARITY_BITS (12), keyword-only
        k of the discrete sampler's output grid λ = 2^-k (``GRANULARITY_BITS_RANGE``; unused by the numpy
        sampler).

    Returns
    -------
    Noise
        :class:`DiscreteLaplace`, :class:`DiscreteGaussian`, :class:`NumpyLaplace` or
        :class:`NumpyGaussian`; its :meth:`~Noise.add` takes budgets in its ``unit``.

    Raises
    ------
    DpoptInputError
        If ``mechanism`` or ``sampler`` is not one of the names above, ``rng`` is given with
        ``sampler="discrete"``, both ``seed`` and ``rng`` are given, ``rng`` is not a numpy Generator,
        or ``granularity_bits`` is not an integer in ``GRANULARITY_BITS_RANGE``.
    """
    check_choice(mechanism, "mechanism", tuple(MECHANISMS))
    check_choice(sampler, "sampler", SAMPLERS)
    lattice = make_mechanism(mechanism, sampler, seed=seed, rng=rng)
    if sampler == "discrete":
        cls = DiscreteLaplace if mechanism == "laplace" else DiscreteGaussian
        return cls(lattice.source, granularity_bits=granularity_bits)  # type: ignore[attr-defined]
    return (NumpyLaplace if mechanism == "laplace" else NumpyGaussian)(lattice.rng)  # type: ignore[attr-defined]
