"""Seeded random records for the records-layer tests, and an independent brute-force table (with a
row-by-row pure-Python SipHash-2-4 of the sample keys, independent of the vectorised one)."""

from __future__ import annotations

import hashlib
import struct

import h3
import numpy as np
import pandas as pd
import pytest

from dpopt.records import SampleKey

BOUND = 50.0
RES = 7
SLOT_NS = 3600 * 10**9
#: the sample key of the records-layer tests (a fixed secret: reproducible kept sets)
KEY = SampleKey(bytes(range(16)))
_M = (1 << 64) - 1


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _M


def siphash24_ref(secret: bytes, message: bytes) -> int:
    """SipHash-2-4 of ``message`` (any length) as in Aumasson & Bernstein's reference."""
    k0, k1 = struct.unpack("<QQ", secret)
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D, k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]

    def rnd() -> None:
        v[0] = (v[0] + v[1]) & _M; v[1] = _rotl(v[1], 13) ^ v[0]; v[0] = _rotl(v[0], 32)  # noqa: E702
        v[2] = (v[2] + v[3]) & _M; v[3] = _rotl(v[3], 16) ^ v[2]  # noqa: E702
        v[0] = (v[0] + v[3]) & _M; v[3] = _rotl(v[3], 21) ^ v[0]  # noqa: E702
        v[2] = (v[2] + v[1]) & _M; v[1] = _rotl(v[1], 17) ^ v[2]; v[2] = _rotl(v[2], 32)  # noqa: E702

    full = len(message) // 8 * 8
    words = list(struct.unpack(f"<{full // 8}Q", message[:full]))
    words.append(((len(message) & 0xFF) << 56) | int.from_bytes(message[full:], "little"))
    for m in words:
        v[3] ^= m
        rnd()
        rnd()
        v[0] ^= m
    v[2] ^= 0xFF
    for _ in range(4):
        rnd()
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def key_ref(key: SampleKey, user: str, t_ns: int, value: float, lat: float, lng: float) -> int:
    """The sample key of one record, row by row (dpopt.records.sample_key's definition)."""
    u = hashlib.blake2b(str(user).encode(), digest_size=8, key=key.secret).digest()
    return siphash24_ref(key.secret, u + struct.pack("<qddd", t_ns, value + 0.0, lat + 0.0, lng + 0.0))


def random_records(seed: int, n: int = 3000, users: int = 40) -> pd.DataFrame:
    """Users moving around a few clustered points over a day; repeated timestamps and values (ties),
    some values beyond [0, BOUND] (clipped)."""
    rng = np.random.default_rng(seed)
    centres = np.array([[30.2672, -97.7431], [30.35, -97.70], [30.30, -97.80]])
    k = rng.integers(0, 3, n)
    lat = centres[k, 0] + rng.normal(0, 0.01, n)
    lng = centres[k, 1] + rng.normal(0, 0.01, n)
    t0 = pd.Timestamp("2020-01-01T00:00:00Z").value // 10**9
    ts = t0 + rng.integers(0, 6 * 3600, n) // 60 * 60  # minute resolution: ties inside pairs
    value = np.round(rng.uniform(-5, BOUND + 5, n), 1)
    user = np.char.add("u", rng.zipf(1.6, n).clip(1, users).astype(str))
    return pd.DataFrame({"user_id": user, "latitude": lat, "longitude": lng,
                         "timestamp": pd.to_datetime(ts, unit="s", utc=True).strftime("%Y-%m-%dT%H:%M:%SZ"),
                         "value": value})


def brute_force(frame: pd.DataFrame, c: int | None,
                key: SampleKey = KEY) -> dict[tuple[str, int, int], tuple[int, float, list[float]]]:
    """(user, cell, slot) -> (count, sum, the c values with the smallest (sample key, value))
    computed row by row with h3 and :func:`key_ref`."""
    out: dict = {}
    for row in frame.itertuples(index=False):
        cell = int(h3.str_to_int(h3.latlng_to_cell(row.latitude, row.longitude, RES)))
        t = pd.Timestamp(row.timestamp).value
        pair = (str(row.user_id), cell, t // SLOT_NS * SLOT_NS)
        v = min(max(float(row.value), 0.0), BOUND)
        out.setdefault(pair, []).append((key_ref(key, str(row.user_id), t, v, row.latitude, row.longitude), v))
    table = {}
    for pair, recs in out.items():
        recs.sort()
        vals = [v for _, v in recs]
        table[pair] = (len(vals), sum(vals), vals[:c] if c is not None else None)
    return table


def as_table(agg) -> dict[tuple[str, int, int], tuple[int, float, list[float] | None]]:
    """The contributions table keyed like :func:`brute_force`."""
    table = {}
    for p in range(agg.n_pairs):
        key = (agg.users[agg.pair_user[p]], int(agg.cells[agg.pair_grid[p]]), int(agg.slots[agg.pair_grid[p]]))
        vals = None
        if agg.samples is not None:
            vals = list(agg.samples.values[agg.samples.offsets[p]:agg.samples.offsets[p + 1]])
        table[key] = (int(agg.count[p]), float(agg.sum[p]), vals)
    return table


@pytest.fixture
def records() -> pd.DataFrame:
    return random_records(11)
