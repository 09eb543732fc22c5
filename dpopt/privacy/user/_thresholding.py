"""The probability that Laplace thresholding releases a grid (continuous approximation), shared by
the choice of bounds (:mod:`.bounds`) and the predicted error (:mod:`.predict`): one module below
both, so neither imports the other."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["release_probability"]


def release_probability(users: np.ndarray, k: int, epsilon: float, delta: float) -> np.ndarray:
    """P[L + Lap(k/ε_p) ≥ T], T = 1 + (k/ε_p)·ln(k/(2δ)) (continuous Laplace thresholding,
    :mod:`.partitions`): 1-Lipschitz·ε_p/(2k) in L."""
    b = k / float(epsilon)
    T = 1.0 + b * math.log(k / (2.0 * float(delta)))
    d = np.asarray(users, dtype=float) - T
    return np.where(d >= 0, 1.0 - 0.5 * np.exp(-np.abs(d) / b), 0.5 * np.exp(-np.abs(d) / b))
