"""Keyed sample keys: which of a user's records are kept is a uniform sample, not arrival order.

Every record gets a 64-bit key ``K = SipHash-2-4_s(u, t, x, lat, lon)`` of its identity: u the
user's 64-bit word (BLAKE2b keyed with s of the user's label, one call per *distinct* label), t the
timestamp (ns), x the cleaned value, lat/lon the position (IEEE bits, −0.0 read as 0.0). The secret
s (16 bytes) is the release's own randomness: the OS CSPRNG (:func:`secrets.token_bytes`) for a real
release, or derived from the seed of a reproducible run (:meth:`SampleKey.from_seed`). SipHash is a
keyed pseudo-random function (Aumasson & Bernstein 2012): without s the keys cannot be computed, and
under it the keys of distinct records behave as i.i.d. uniform 64-bit numbers. The records layer's
functions default to a fixed public key (:meth:`SampleKey.public`: reproducible tables); the release
(:func:`dpopt.release.release`) always passes its own.

A user's kept records in a group (a (user, finest grid) pair, or a (user, node) of a coarser level)
are the c with the **smallest keys** (ties by value): a uniform sample of size min(c, m) without
replacement from the group's m records. The rule reads the records only, never their order, so the
local stream, any chunking and Dask keep bit-identical sets (the c smallest of a union are among the
c smallest of each part).

**Duplicates.** Records equal in all five fields get the same key; they are one identity for the
order and sit next to each other in it (the cut at c may fall between them). Breaking the tie by
the row's position would make the sample depend on the input's order and chunking; any other choice
among equal records keeps the same multiset of values, so nothing a release computes depends on it.
The sample is uniform over distinct records; exact duplicates (a record logged twice) move together.

**Sensitivity is unchanged.** The kept set of user ℓ is a function of ℓ's own records and s only
(s is drawn independently of the data). Adding or removing a user leaves every other user's keys,
and so their kept records, identical; the changed user still contributes at most c records per
group, so every sensitivity argument stated for "any rule that picks a user's retained samples
from that user's own records" (models/user_level.md §2, seed 002 §V-B3) holds as before.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field

import numpy as np

from .._validation import DpoptInputError

__all__ = ["SampleKey", "record_keys", "siphash24_words"]

_M64 = (1 << 64) - 1
_INIT = (0x736F6D6570736575, 0x646F72616E646F6D, 0x6C7967656E657261, 0x7465646279746573)


@dataclass(frozen=True)
class SampleKey:
    """The per-release secret s (16 bytes) of the record keys; its repr never shows it."""

    secret: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.secret, bytes) or len(self.secret) != 16:
            raise DpoptInputError(f"`secret` must be 16 bytes; got {type(self.secret).__name__} "
                                  f"of length {len(self.secret) if hasattr(self.secret, '__len__') else '?'}")

    @classmethod
    def new(cls) -> SampleKey:
        """A fresh secret from the OS CSPRNG (a real release)."""
        return cls(secrets.token_bytes(16))

    @classmethod
    def public(cls) -> SampleKey:
        """A fixed, public key: the default of the records layer when no key is given, so tables
        built for research and tests are reproducible. Privacy does not rest on the secret (module
        doc); a release passes its own key (:func:`dpopt.release.release` does)."""
        return cls(hashlib.blake2b(b"dpopt public sample key", digest_size=16).digest())

    @classmethod
    def from_seed(cls, seed: int | None) -> SampleKey:
        """Derived from the seed of a reproducible run (NOT for a real release); None: :meth:`new`.
        A separate derivation, so the noise drawn from the same seed is unchanged."""
        if seed is None:
            return cls.new()
        return cls(hashlib.blake2b(str(int(seed)).encode(), digest_size=16, person=b"dpopt.sample").digest())

    @classmethod
    def from_generator(cls, rng: np.random.Generator) -> SampleKey:
        """16 bytes of a numpy Generator (tests and simulations)."""
        return cls(rng.bytes(16))

    def generator(self, stream: int = 1) -> np.random.Generator:
        """A numpy Generator seeded from the secret (``stream`` separates uses): draws that must be
        independent of the data but need not be secret (e.g. :func:`.kept.node_split_counts`)."""
        entropy = int.from_bytes(self.secret, "little")
        return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy, spawn_key=(int(stream),))))

    def user_words(self, labels: np.ndarray) -> np.ndarray:
        """One keyed 64-bit word per distinct user label (BLAKE2b keyed with s; one call a label)."""
        words = [hashlib.blake2b(str(x).encode(), digest_size=8, key=self.secret).digest() for x in labels]
        return np.frombuffer(b"".join(words), dtype="<u8").astype(np.uint64)


def _rotl(x: np.ndarray, b: int, tmp: np.ndarray) -> None:
    """x ← x rotated left by b bits, in place (``tmp`` a scratch array of x's shape)."""
    np.left_shift(x, np.uint64(b), out=tmp)
    np.right_shift(x, np.uint64(64 - b), out=x)
    x |= tmp


def _sipround(v0: np.ndarray, v1: np.ndarray, v2: np.ndarray, v3: np.ndarray, tmp: np.ndarray) -> None:
    """One SipRound on the four state arrays, in place."""
    v0 += v1
    _rotl(v1, 13, tmp)
    v1 ^= v0
    _rotl(v0, 32, tmp)
    v2 += v3
    _rotl(v3, 16, tmp)
    v3 ^= v2
    v0 += v3
    _rotl(v3, 21, tmp)
    v3 ^= v0
    v2 += v1
    _rotl(v1, 17, tmp)
    v1 ^= v2
    _rotl(v2, 32, tmp)


#: rows hashed at once (the state arrays stay in cache: ≈ 3× faster than whole chunks)
HASH_BLOCK = 1 << 15


def siphash24_words(secret: bytes, words: list[np.ndarray]) -> np.ndarray:
    """SipHash-2-4 keyed with ``secret`` (16 bytes) of the messages whose 8-byte little-endian
    words are ``words[0][i], words[1][i], …`` (one uint64 array per word), vectorised over i in
    blocks of :data:`HASH_BLOCK` rows."""
    words = [np.asarray(w, dtype=np.uint64) for w in words]
    n = words[0].shape[0] if words else 0
    if n <= HASH_BLOCK:
        return _siphash24_block(secret, words)
    return np.concatenate([_siphash24_block(secret, [w[i:i + HASH_BLOCK] for w in words])
                           for i in range(0, n, HASH_BLOCK)])


def _siphash24_block(secret: bytes, words: list[np.ndarray]) -> np.ndarray:
    k0, k1 = int.from_bytes(secret[:8], "little"), int.from_bytes(secret[8:], "little")
    n = words[0].shape[0] if words else 0
    v0, v1, v2, v3 = (np.full(n, (k ^ c) & _M64, dtype=np.uint64) for k, c in zip((k0, k1, k0, k1), _INIT))
    tmp = np.empty(n, dtype=np.uint64)
    last = np.full(n, (8 * len(words) & 0xFF) << 56, dtype=np.uint64)
    for m in words + [last]:
        v3 ^= m
        _sipround(v0, v1, v2, v3, tmp)
        _sipround(v0, v1, v2, v3, tmp)
        v0 ^= m
    v2 ^= np.uint64(0xFF)
    for _ in range(4):
        _sipround(v0, v1, v2, v3, tmp)
    v0 ^= v1
    v2 ^= v3
    v0 ^= v2
    return v0


def _bits(x: np.ndarray) -> np.ndarray:
    """IEEE bits of float64 values, −0.0 read as 0.0."""
    return (np.asarray(x, dtype=np.float64) + 0.0).view(np.uint64)


def record_keys(key: SampleKey, user_words: np.ndarray, timestamp: np.ndarray, value: np.ndarray,
                latitude: np.ndarray, longitude: np.ndarray) -> np.ndarray:
    """The 64-bit sample key of every record (module doc); ``user_words`` per record (uint64)."""
    ts = np.asarray(timestamp, dtype=np.int64).view(np.uint64)
    return siphash24_words(key.secret, [np.asarray(user_words, dtype=np.uint64), ts, _bits(value), _bits(latitude),
                                        _bits(longitude)])
