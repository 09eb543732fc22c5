"""The vectorised H3 indexer (h3ronpy) agrees exactly with h3's latlng_to_cell."""

from __future__ import annotations

import h3.api.numpy_int as h3i
import numpy as np
import pytest

from dpopt.records import grid


@pytest.mark.parametrize("res", [0, 5, 7, 9, 12, 15])
def test_vectorised_cells_equal_h3(res):
    assert grid._vector_cells is not None, "h3ronpy is a dependency: the vectorised indexer must be used"
    rng = np.random.default_rng(res)
    n = 100_000 if res in (7, 15) else 20_000
    lat = np.concatenate([rng.uniform(-90, 90, n), [90.0, -90.0, 0.0, 89.999999, -0.0]])
    lng = np.concatenate([rng.uniform(-180, 180, n), [180.0, -180.0, 0.0, 179.999999, -180.0]])
    want = np.fromiter((h3i.latlng_to_cell(a, b, res) for a, b in zip(lat.tolist(), lng.tolist())),
                       dtype=np.uint64, count=lat.size).astype(np.int64)
    assert np.array_equal(grid.h3_cells(lat, lng, res), want)


def test_fallback_path_equals_the_vectorised_one(monkeypatch):
    rng = np.random.default_rng(0)
    lat, lng = rng.uniform(30, 31, 5000), rng.uniform(-98, -97, 5000)
    fast = grid.h3_cells(lat, lng, 8)
    monkeypatch.setattr(grid, "_vector_cells", None)
    assert np.array_equal(grid.h3_cells(lat, lng, 8), fast)


@pytest.mark.parametrize("ns, text", [(86_400 * 10**9, "1d"), (3_600 * 10**9, "1h"), (1_800 * 10**9, "30min"),
                                      (90 * 10**9, "90s"), (30 * 10**9, "30s"), (5 * 10**8, "0.5s"), (1, "1e-09s")])
def test_slot_text_names_every_slot_length(ns, text):
    """A sub-second slot read "0d" (and the console's lattice warning "0 min", a fuzz run)."""
    from dpopt.records.grid import slot_text

    assert slot_text(ns) == text
