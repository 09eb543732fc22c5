"""Sources of uniform random integers for the exact samplers of :mod:`dpopt.noise`.

Every source offers two things:

* ``randbelow(n)``: one uniform integer in {0, …, n−1} (any Python int n ≥ 1), for the scalar
  samplers and permute-and-flip;
* ``random_words(n)``: n independent uniform 64-bit words (a ``uint64`` array), for the vectorised
  exact samplers of :mod:`dpopt.noise.exact`, which turn them into exact uniforms by masking and
  rejection.

A real release draws from :class:`SecureRandom`: the operating system's CSPRNG, in bulk through
:func:`os.urandom` (``secrets`` is the same generator). :class:`SeededSource` (numpy's PCG64,
seeded) makes tests and demos reproducible and is NOT for a real release: its output is
predictable from the seed.
"""

from __future__ import annotations

import os
import secrets
from typing import Protocol

import numpy as np

from .._validation import DpoptInputError

__all__ = ["IntegerSource", "SecureRandom", "SeededSource", "integer_source", "random_words"]


class IntegerSource(Protocol):
    """Anything with ``randbelow(n) -> int`` uniform on {0, ..., n-1}; bulk sources also offer
    ``random_words(n)`` (see :func:`random_words`)."""

    def randbelow(self, n: int) -> int: ...


def _randbelow_from_words(source: "SecureRandom | SeededSource", n: int) -> int:
    """U{0..n−1} for any int n ≥ 1 from 64-bit words: mask to n−1's bit length, reject ≥ n."""
    if n < 1:
        raise DpoptInputError(f"`n` must be >= 1; got {n}")
    bits = (n - 1).bit_length()
    nwords = max(1, -(-bits // 64))
    while True:
        w = source.random_words(nwords)
        # the words as one big-endian integer (w[0] most significant), in linear time
        x = int.from_bytes(np.asarray(w, dtype=np.uint64).astype(">u8").tobytes(), "big")
        x &= (1 << bits) - 1
        if x < n:
            return x


class SecureRandom:
    """Uniform integers from the operating system's CSPRNG (:func:`os.urandom`, :mod:`secrets`)."""

    #: fit for a real release
    secure = True

    def randbelow(self, n: int) -> int:
        return secrets.randbelow(n)

    def random_words(self, n: int) -> np.ndarray:
        """n uniform 64-bit words from ``os.urandom`` (one system call per batch)."""
        return np.frombuffer(os.urandom(8 * int(n)), dtype=np.uint64)


class SeededSource:
    """Uniform integers from numpy's seeded PCG64: reproducible, NOT for a real release."""

    secure = False

    def __init__(self, seed: int) -> None:
        seed = int(seed)
        self._bits = np.random.PCG64(2 * seed if seed >= 0 else -2 * seed - 1)  # any int, one stream each

    def randbelow(self, n: int) -> int:
        return _randbelow_from_words(self, n)

    def random_words(self, n: int) -> np.ndarray:
        """n uniform 64-bit words (the raw PCG64 stream)."""
        return np.asarray(self._bits.random_raw(int(n)), dtype=np.uint64)


def random_words(source: IntegerSource, n: int) -> np.ndarray:
    """n uniform uint64 words from ``source`` (bulk when it offers ``random_words``, else built from
    ``randbelow(2**64)``: any :class:`IntegerSource` works with the vectorised samplers)."""
    bulk = getattr(source, "random_words", None)
    if bulk is not None:
        return bulk(n)
    return np.fromiter((source.randbelow(1 << 64) for _ in range(int(n))), dtype=np.uint64, count=int(n))


def integer_source(seed: int | None = None) -> IntegerSource:
    """:class:`SecureRandom` when ``seed`` is None, else a :class:`SeededSource` (NOT for a real release)."""
    if seed is None:
        return SecureRandom()
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise DpoptInputError(f"`seed` must be an integer or None; got {seed!r}")
    return SeededSource(int(seed))
