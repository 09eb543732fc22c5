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

__all__ = ["austin_sample_path", "load_austin_sample", "EXAMPLE_BOUND", "EXAMPLE_EPSILON", "EXAMPLE_EPSILON_TOTAL"]

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
