"""Fixtures for the release tests: small record tables whose answers are known by construction."""

from __future__ import annotations

import h3
import numpy as np
import pandas as pd
import pytest

#: released values with ε = 1e6 are the exact statistic up to the output grid and tiny noise
NEAR_EXACT_ATOL = 1e-2
#: float sums computed in different orders
SUM_RTOL = 1e-12

# two points in different H3 res-7 cells of Austin, and their cells
P1 = (30.2672, -97.7431)
P2 = (30.3500, -97.7000)


@pytest.fixture
def cells() -> tuple[str, str]:
    c1, c2 = h3.latlng_to_cell(*P1, 7), h3.latlng_to_cell(*P2, 7)
    assert c1 != c2
    return c1, c2


@pytest.fixture
def tiny_records() -> pd.DataFrame:
    """3 users, 2 cells, 2 hours. Grids (cell, hour):

    g0 = (P1, 10h): a: 10, 20 (10:05, 10:10); b: 30 (10:20)
    g1 = (P1, 11h): a: 40 (11:00)
    g2 = (P2, 10h): a: 50 (10:30); b: 60, 70 (10:40, 10:50); c: 80 (10:59:59)
    """
    rows = [
        ("a", *P1, "2020-01-01T10:05:00Z", 10.0),
        ("a", *P1, "2020-01-01T10:10:00Z", 20.0),
        ("b", *P1, "2020-01-01T10:20:00Z", 30.0),
        ("a", *P1, "2020-01-01T11:00:00Z", 40.0),
        ("a", *P2, "2020-01-01T10:30:00Z", 50.0),
        ("b", *P2, "2020-01-01T10:40:00Z", 60.0),
        ("b", *P2, "2020-01-01T10:50:00Z", 70.0),
        ("c", *P2, "2020-01-01T10:59:59Z", 80.0),
    ]
    return pd.DataFrame(rows, columns=["user_id", "latitude", "longitude", "timestamp", "value"])


def random_records(rng: np.random.Generator, n: int = 2000, users: int = 12) -> pd.DataFrame:
    """Random records around Austin over 6 hours, values in [0, 100], some repeated positions."""
    lat = 30.25 + 0.1 * rng.random(n)
    lng = -97.80 + 0.1 * rng.random(n)
    rep = rng.random(n) < 0.3
    lat[rep] = lat[0]
    lng[rep] = lng[0]
    t0 = pd.Timestamp("2021-06-01T00:00:00Z").value
    ts = t0 + rng.integers(0, 6 * 3600, n) * 1_000_000_000
    return pd.DataFrame({
        "user_id": rng.integers(0, users, n).astype(str),
        "latitude": lat,
        "longitude": lng,
        "timestamp": pd.to_datetime(ts, utc=True),
        "value": np.round(100 * rng.random(n), 3),
    })


@pytest.fixture
def records(rng: np.random.Generator) -> pd.DataFrame:
    return random_records(rng)
