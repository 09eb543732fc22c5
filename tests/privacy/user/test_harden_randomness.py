"""Every random choice of a real ``user`` release comes from the OS CSPRNG.

The release is instrumented: numpy's ``default_rng`` must not be called without a seed (an
OS-seeded PCG64; numpy Generators are immutable types, so this is where one would come from), and
the tie-break keys of bounding must come from ``secrets`` (one call per block of pairs, 64 bits
per pair).
"""

from __future__ import annotations

import secrets

import numpy as np
import pandas as pd
import pytest

from dpopt.noise import SecureRandom, SeededSource
from dpopt.privacy.user import bounding
from dpopt.privacy.user.bounding import grid_ranks, tie_keys
from dpopt.release import Budget, GridOptions, InputOptions, NoiseOptions, UserOptions, contributions, release_user

from .conftest import make_agg


def _agg():
    rng = np.random.default_rng(11)
    recs = [(f"u{u}", int(g), int(t), float(rng.uniform(0, 50))) for u in range(40)
            for g in rng.choice(12, size=3, replace=False) for t in range(int(rng.integers(1, 4)))]
    return make_agg(recs)


@pytest.mark.parametrize(("bounds", "mechanism"), [("select", "laplace"), ((2, 2), "laplace"), ("quantile", "gaussian")])
def test_a_real_release_draws_only_from_secrets(monkeypatch, bounds, mechanism):
    agg = _agg()
    calls = {"secrets": 0}
    keys_from = []
    real_randbelow = secrets.randbelow
    real_tie_keys = bounding.tie_keys

    def counted(n: int) -> int:
        calls["secrets"] += 1
        return real_randbelow(n)

    def recorded_tie_keys(source, n):
        keys_from.append(type(source))
        return real_tie_keys(source, n)

    monkeypatch.setattr(bounding, "tie_keys", recorded_tie_keys)
    real_default_rng = np.random.default_rng

    def guarded_default_rng(seed=None, *args, **kwargs):
        if seed is None:
            raise AssertionError("numpy's default_rng(None) called in a real release")
        return real_default_rng(seed, *args, **kwargs)

    monkeypatch.setattr(secrets, "randbelow", counted)
    monkeypatch.setattr(np.random, "default_rng", guarded_default_rng)
    rel = release_user(agg, Budget(epsilon_total=2.0, delta=1e-6, mechanism=mechanism),
                       UserOptions(bounds=bounds, strategy="fixed"), bound=50.0)
    monkeypatch.undo()
    assert not rel.summary.seeded and "OS CSPRNG" in rel.summary.noise
    assert keys_from == [SecureRandom]  # the tie-break keys: from secrets
    assert calls["secrets"] > 3 * rel.summary.grids_released  # and every noise draw


def test_tie_keys_are_the_bytes_of_the_source():
    keys = tie_keys(SeededSource(5), 3)
    big = SeededSource(5).randbelow(1 << 192)
    assert keys.tolist() == [(big >> (64 * i)) & (2**64 - 1) for i in range(3)]
    assert tie_keys(SeededSource(5), 0).size == 0
    # blocks: 2^16 + 3 keys take two calls
    assert tie_keys(SeededSource(1), 2**16 + 3).size == 2**16 + 3


def test_ties_are_broken_uniformly():
    # one user with 3 grids of equal count, k = 1: each grid kept with probability 1/3
    agg = make_agg([("a", g, 1, 1.0) for g in range(3)])
    src = SeededSource(9)
    first = np.array([int(np.flatnonzero(grid_ranks(agg, src) == 0)[0]) for _ in range(3000)])
    counts = np.bincount(first, minlength=3)
    assert np.all(np.abs(counts - 1000) < 5 * np.sqrt(3000 * (1 / 3) * (2 / 3)))


def test_seeded_releases_reproduce():
    a, b = (release_user(_agg(), Budget(epsilon_total=2.0, delta=1e-6), UserOptions(strategy="fixed"), bound=50.0,
                         noise=NoiseOptions(seed=4)) for _ in range(2))
    assert a.table.equals(b.table) and a.summary == b.summary


@pytest.mark.parametrize("priority", ["random", "count"])
def test_a_real_hierarchical_measurement_draws_only_from_secrets(monkeypatch, priority):
    import h3

    from dpopt.hierarchy.tree import HOUR_NS, Level
    from dpopt.privacy.user import levels
    from dpopt.privacy.user.levels import LevelPlan, measure_levels
    from dpopt.privacy.user.partitions import PartitionList

    rng = np.random.default_rng(3)
    parent = h3.latlng_to_cell(30.27, -97.74, 7)
    cells = sorted(h3.cell_to_children(parent, 8))[:4]
    n = 600
    lat, lng = np.array([h3.cell_to_latlng(cells[i]) for i in rng.integers(0, 4, n)]).T
    df = pd.DataFrame({"user_id": rng.integers(0, 40, n).astype(str), "latitude": lat, "longitude": lng,
                       "timestamp": pd.to_datetime(1_441_065_600 + rng.integers(0, 4 * 3600, n), unit="s", utc=True),
                       "value": rng.uniform(0, 50, n)})
    agg, _ = contributions(df, bound=50.0, grid=GridOptions(8, "1h"), io=InputOptions(out_of_range="clip"),
                           keep_samples=True)
    keys_from = []
    real_default_rng = np.random.default_rng
    real_tie_keys = bounding.tie_keys

    def recorded_tie_keys(source, n):
        keys_from.append(type(source))
        return real_tie_keys(source, n)

    def guarded_default_rng(seed=None, *args, **kwargs):
        if seed is None:
            raise AssertionError("numpy's default_rng(None) called in a real release")
        return real_default_rng(seed, *args, **kwargs)

    monkeypatch.setattr(bounding, "tie_keys", recorded_tie_keys)
    monkeypatch.setattr(levels, "tie_keys", recorded_tie_keys)
    monkeypatch.setattr(np.random, "default_rng", guarded_default_rng)
    meas = measure_levels(agg, PartitionList.from_grids(agg.cells, agg.slots), bound=50.0, bounds=(2, 2), epsilon=1.0,
                          plan=LevelPlan(priority=priority,
                                         levels=(Level(8, HOUR_NS), Level(8, 4 * HOUR_NS), Level(7, 4 * HOUR_NS))))
    monkeypatch.undo()
    assert keys_from == [SecureRandom] and meas.privacy_model == "user"
