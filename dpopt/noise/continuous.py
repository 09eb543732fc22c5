"""Continuous Laplace noise from numpy: Monte-Carlo simulations only, NOT for a real release.

Floating-point Laplace samples leak the low bits of the noised value (Mironov, CCS 2012), so a
real release uses the exact discrete sampler of :mod:`dpopt.noise.discrete_laplace`. The papers'
simulations (and dpopt's reproductions of their figures) use continuous Laplace noise: that is
what these functions draw, from a :class:`numpy.random.Generator` the caller seeds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import DpoptInputError

__all__ = ["check_rng", "laplace", "laplace_simulation"]


def check_rng(rng: Any) -> np.random.Generator:
    """Require a :class:`numpy.random.Generator` (seeded by the caller)."""
    if not isinstance(rng, np.random.Generator):
        raise DpoptInputError(
            "`rng` must be a numpy.random.Generator (e.g. numpy.random.default_rng(0)); "
            f"got {type(rng).__name__}"
        )
    return rng


def laplace(rng: np.random.Generator, scale: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Laplace noise with scale ``b`` (density ``e^{-|x|/b}/(2b)``, ``E|Z| = b``); ``b = 0`` gives 0.

    ``scale`` broadcasts against ``shape``. Simulation only (module doc).
    """
    scale = np.broadcast_to(np.asarray(scale, dtype=float), shape)
    return rng.laplace(0.0, 1.0, size=shape) * scale


def laplace_simulation(scale: np.ndarray | float, rng: np.random.Generator,
                       size: int | tuple[int, ...] | None = None) -> np.ndarray:
    """``rng.laplace(0, scale, size)``: continuous Laplace noise, NOT for a real release."""
    if not isinstance(rng, np.random.Generator):
        raise DpoptInputError(f"`rng` must be a numpy.random.Generator; got {type(rng).__name__}")
    return rng.laplace(0.0, scale, size=size)
