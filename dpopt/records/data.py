"""The embedded real sample: one service day of Austin's Capital Metro buses.

``dpopt/datasets/austin_sample.csv.gz`` (0.7 MB) holds the 53,569 position reports of 146 buses in
the author's capture file ``2015-09-06.csv`` of the public repository ``scascketta/CapMetrics``
(MIT license, commit 435ebc91dd1561ee60020a91b2a13b9a245c0f68; credit to its author), taken from
the cleaned merge in the Austin CapMetro vehicle-position data (dpopt/datasets/README) (rows at latitude/longitude 0 and exact
(vehicle, timestamp) repeats already dropped). Columns, renamed to dpopt's canonical fields:

* ``user_id``: the vehicle id (a bus is a user);
* ``timestamp``: ISO 8601 UTC (2015-09-06T05:00:47Z .. 2015-09-07T04:58:39Z);
* ``latitude``, ``longitude``: WGS84 degrees;
* ``value``: speed in km/h (the feed's mph converted); none exceeds 120 km/h on this day.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pandas as pd

__all__ = ["austin_sample_path", "load_austin_sample", "EXAMPLE_BOUND", "EXAMPLE_EPSILON", "EXAMPLE_EPSILON_TOTAL",
           "EXAMPLE_AREA", "EXAMPLE_TIMEZONE", "EXAMPLE_DAY", "EXAMPLE_HOURS", "EXAMPLE_PLACE", "example_partitions",
           "example_partitions_path"]

#: default public bound U for the example (km/h)
EXAMPLE_BOUND = 120.0
#: per-grid budget ε of the seed-002 examples (``--epsilon``)
EXAMPLE_EPSILON = 1.0
#: default total budget of ``dpopt release --example``: what one bus may lose over the whole day
EXAMPLE_EPSILON_TOTAL = 10.0


def austin_sample_path() -> Path:
    """Path of the embedded ``austin_sample.csv.gz``."""
    return Path(str(resources.files("dpopt").joinpath("datasets", "austin_sample.csv.gz")))


def load_austin_sample() -> pd.DataFrame:
    """The embedded sample as a DataFrame (user_id as str, timestamp as UTC datetimes)."""
    frame = pd.read_csv(austin_sample_path(), dtype={"user_id": str})
    frame["timestamp"] = pd.to_datetime(frame["timestamp"], utc=True, format="ISO8601")
    return frame


#: the example's public list, from public facts only (never from the records): the H3 res-7 cells whose
#: centre lies in a box around Austin's bus network (south, north latitude; west, east longitude) ...
EXAMPLE_AREA = (30.15, 30.50, -97.90, -97.60)
#: ... × the network's service hours (local time, start hour inclusive, end exclusive) of the day
EXAMPLE_HOURS = (5, 23)
EXAMPLE_DAY = "2015-09-06"
EXAMPLE_TIMEZONE = "America/Chicago"
#: the place the example's console answers for: Congress Avenue at 6th Street, downtown, at 17:00
EXAMPLE_PLACE = (30.2686, -97.7428, 17)


def example_partitions() -> pd.DataFrame:
    """The example's public partition list (columns ``cell``, ``slot``: local time with its offset):
    :data:`EXAMPLE_AREA`'s res-7 cells × the hours :data:`EXAMPLE_HOURS` of :data:`EXAMPLE_DAY` in
    :data:`EXAMPLE_TIMEZONE`. A function of those public constants only; the shipped
    ``austin_example_partitions.csv`` is its output (checked in tests)."""
    import h3

    south, north, west, east = EXAMPLE_AREA
    box = h3.LatLngPoly([(south, west), (south, east), (north, east), (north, west)])
    cells = sorted(h3.h3shape_to_cells(box, 7))
    hours = pd.date_range(f"{EXAMPLE_DAY} {EXAMPLE_HOURS[0]:02d}:00", periods=EXAMPLE_HOURS[1] - EXAMPLE_HOURS[0],
                          freq="h", tz=EXAMPLE_TIMEZONE)
    slots = [t.isoformat() for t in hours]
    return pd.DataFrame({"cell": [c for _ in slots for c in cells], "slot": [t for t in slots for _ in cells]})


def example_partitions_path() -> Path:
    """Path of the shipped ``austin_example_partitions.csv`` (:func:`example_partitions`)."""
    return Path(str(resources.files("dpopt").joinpath("datasets", "austin_example_partitions.csv")))
