"""Gridding: H3 cells equal h3's per-point answer; UTC slots floor to the slot start."""

from __future__ import annotations

import h3
import numpy as np
import pandas as pd
import pytest

from dpopt import DpoptInputError
from dpopt.records.grid import cell_polygons, cell_strings, h3_cells, parse_slot, slot_strings, time_slots


@pytest.mark.parametrize("res", [0, 7, 9, 15])
def test_h3_cells_match_per_point_calls(rng, res):
    lat = 30.2 + 0.3 * rng.random(500)
    lng = -97.9 + 0.3 * rng.random(500)
    lat[::3] = lat[0]  # repeated positions go through the dedup
    lng[::3] = lng[0]
    got = cell_strings(h3_cells(lat, lng, res))
    want = [h3.latlng_to_cell(a, b, res) for a, b in zip(lat, lng)]
    assert list(got) == want


def test_h3_cells_empty():
    assert h3_cells(np.empty(0), np.empty(0), 7).shape == (0,)


@pytest.mark.parametrize(
    "slot,ns",
    [("1h", 3600 * 10**9), ("1H", 3600 * 10**9), ("1d", 86400 * 10**9), ("15min", 900 * 10**9), ("30s", 30 * 10**9), (60, 60 * 10**9),
     (pd.Timedelta("2h"), 7200 * 10**9), ("1D", 86400 * 10**9)],
)
def test_parse_slot(slot, ns):
    assert parse_slot(slot) == ns


@pytest.mark.parametrize("slot", ["soon", "0s", "500ms", -3600, None, [1]])
def test_parse_slot_bad(slot):
    with pytest.raises(DpoptInputError, match="`slot` must be"):
        parse_slot(slot)


def test_time_slots_floor_including_before_epoch():
    times = pd.to_datetime(
        ["2015-09-06T05:00:00Z", "2015-09-06T05:59:59Z", "2015-09-06T06:00:00Z", "1969-12-31T23:30:00Z"], utc=True
    ).as_unit("ns").asi8
    got = slot_strings(time_slots(times, parse_slot("1h")))
    assert list(got) == ["2015-09-06T05:00:00Z", "2015-09-06T05:00:00Z", "2015-09-06T06:00:00Z", "1969-12-31T23:00:00Z"]
    got15 = slot_strings(time_slots(times, parse_slot("15min")))
    assert list(got15) == ["2015-09-06T05:00:00Z", "2015-09-06T05:45:00Z", "2015-09-06T06:00:00Z", "1969-12-31T23:30:00Z"]


def test_polygons_are_hexagons_lng_lat():
    c = h3.latlng_to_cell(30.27, -97.74, 7)
    (poly,) = cell_polygons(np.array([h3.str_to_int(c)]))
    assert poly.shape == (6, 2)
    assert np.all(poly[:, 0] < -97) and np.all(poly[:, 1] > 30)


@pytest.mark.parametrize("res", [-1, 16, 2.5, "7"])
def test_bad_resolution(res):
    with pytest.raises(DpoptInputError, match="h3_resolution"):
        h3_cells(np.zeros(1), np.zeros(1), res)


def test_instant_strings_keep_the_second_offset_of_the_repeated_hour():
    """05:00Z and 06:00Z on 2024-11-03 are both 01:00 in New York: slot_strings writes the shared
    wall slot once with the first offset, instant_strings each instant with its own."""
    import numpy as np
    import pandas as pd

    from dpopt.records.grid import instant_strings, slot_strings, wall_clock

    ns = pd.to_datetime(["2024-11-03T05:00:00Z", "2024-11-03T06:00:00Z", "2024-07-01T12:00:00Z"]).as_unit("ns").asi8
    assert list(instant_strings(ns, "America/New_York")) == ["2024-11-03T01:00:00-04:00", "2024-11-03T01:00:00-05:00",
                                                             "2024-07-01T08:00:00-04:00"]
    wall = wall_clock(np.asarray(ns), "America/New_York")
    assert list(slot_strings(wall, "America/New_York"))[:2] == ["2024-11-03T01:00:00-04:00"] * 2
