"""Sources of uniform random integers for the exact samplers of :mod:`dpopt.noise`.

A real release draws from :class:`SecureRandom` (the operating system's CSPRNG through
:mod:`secrets`). :class:`SeededSource` (a seeded Mersenne twister) makes tests and demos
reproducible and is NOT for a real release: its output is predictable from the seed.
"""

from __future__ import annotations

import random
import secrets
from typing import Protocol

import numpy as np

from .._validation import DpoptInputError

__all__ = ["IntegerSource", "SecureRandom", "SeededSource", "integer_source"]


class IntegerSource(Protocol):
    """Anything with ``randbelow(n) -> int`` uniform on {0, ..., n-1}."""

    def randbelow(self, n: int) -> int: ...


class SecureRandom:
    """Uniform integers from the operating system's CSPRNG (:mod:`secrets`)."""

    #: fit for a real release
    secure = True

    def randbelow(self, n: int) -> int:
        return secrets.randbelow(n)


class SeededSource:
    """Uniform integers from a seeded Mersenne twister: reproducible, NOT for a real release."""

    secure = False

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def randbelow(self, n: int) -> int:
        return self._rng.randrange(n)


def integer_source(seed: int | None = None) -> IntegerSource:
    """:class:`SecureRandom` when ``seed`` is None, else a :class:`SeededSource` (NOT for a real release)."""
    if seed is None:
        return SecureRandom()
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise DpoptInputError(f"`seed` must be an integer or None; got {seed!r}")
    return SeededSource(int(seed))
