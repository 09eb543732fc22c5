"""Seeded random records for the records-layer tests, and an independent brute-force table."""

from __future__ import annotations

import h3
import numpy as np
import pandas as pd
import pytest

BOUND = 50.0
RES = 7
SLOT_NS = 3600 * 10**9


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


def brute_force(frame: pd.DataFrame, c: int | None) -> dict[tuple[str, int, int], tuple[int, float, list[float]]]:
    """(user, cell, slot) -> (count, sum, first c values by (time, value)) computed row by row with h3."""
    out: dict = {}
    for row in frame.itertuples(index=False):
        cell = int(h3.str_to_int(h3.latlng_to_cell(row.latitude, row.longitude, RES)))
        t = pd.Timestamp(row.timestamp).value
        key = (str(row.user_id), cell, t // SLOT_NS * SLOT_NS)
        out.setdefault(key, []).append((t, min(max(float(row.value), 0.0), BOUND)))
    table = {}
    for key, recs in out.items():
        recs.sort()
        vals = [v for _, v in recs]
        table[key] = (len(vals), sum(vals), vals[:c] if c is not None else None)
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
