"""Two real aircraft (ADS-B) data sets for the multi-resolution benchmarks, read from a public package.

The ``traffic`` package (MIT licence; its samples are OpenSky Network ADS-B state vectors) ships
two multi-aircraft collections in its wheel:

* ``aircraft_a`` = ``collections/switzerland.json.gz``: 139,098 positions of 842 aircraft over
  Switzerland on 2018-08-01 05:00–22:00 UTC (mostly cruise: ground speed 449 ± 27 kt);
* ``aircraft_b`` = ``collections/quickstart.json.gz``: 247,402 positions with a ground speed, of
  210 aircraft (213 in the file) around Paris on 2021-10-07 12:00–15:00 UTC (arrivals, departures and overflights:
  265 ± 103 kt).

An aircraft (``icao24``) is a user; the value is the ground speed in km/h (knots × 1.852), public
bound U = 1100 km/h (no record exceeds 1000). The package is *not* a dependency of dpopt and is
not shipped: the benchmarks read the JSON straight out of the wheel (no import of ``traffic`` and
its dependencies), found in this order: ``$DPOPT_TRAFFIC_WHEEL``; a ``traffic-*.whl`` in
``~/.cache/dpopt-bench``; an installed ``traffic`` package. Get the wheel once with::

    pip download --no-deps traffic==2.13 -d ~/.cache/dpopt-bench
"""

from __future__ import annotations

import importlib.util
import io
import os
import zipfile
from pathlib import Path

import pandas as pd

#: public bound of the aircraft ground speeds (km/h)
AIRCRAFT_BOUND = 1100.0
KNOT_KMH = 1.852
MEMBERS = {"aircraft_a": "traffic/data/samples/collections/switzerland.json.gz",
           "aircraft_b": "traffic/data/samples/collections/quickstart.json.gz"}
CACHE = Path.home() / ".cache" / "dpopt-bench"


def _read_member(member: str) -> bytes:
    env = os.environ.get("DPOPT_TRAFFIC_WHEEL")
    wheels = [Path(env)] if env else sorted(CACHE.glob("traffic-*.whl"))
    for wheel in wheels:
        if wheel.is_file():
            with zipfile.ZipFile(wheel) as z:
                return z.read(member)
    spec = importlib.util.find_spec("traffic")
    if spec is not None and spec.submodule_search_locations:
        path = Path(next(iter(spec.submodule_search_locations))).parent / member
        if path.is_file():
            return path.read_bytes()
    raise FileNotFoundError(
        f"the aircraft data ({member}) comes from the `traffic` wheel; run "
        f"`pip download --no-deps traffic==2.13 -d {CACHE}` once (or set DPOPT_TRAFFIC_WHEEL)")


def aircraft_records(name: str) -> pd.DataFrame:
    """The records of ``aircraft_a`` / ``aircraft_b`` in dpopt's canonical columns (rows without a
    position, a time or a ground speed dropped; exact (aircraft, time) repeats dropped)."""
    if name not in MEMBERS:
        raise ValueError(f"`name` must be one of {sorted(MEMBERS)}; got {name!r}")
    raw = pd.read_json(io.BytesIO(_read_member(MEMBERS[name])), orient="records", compression="gzip",
                       dtype={"icao24": str})
    raw = raw.dropna(subset=["icao24", "timestamp", "latitude", "longitude", "groundspeed"])
    out = pd.DataFrame({"user_id": raw["icao24"].astype(str),
                        "timestamp": pd.to_datetime(raw["timestamp"], utc=True),
                        "latitude": raw["latitude"].astype(float), "longitude": raw["longitude"].astype(float),
                        "value": raw["groundspeed"].astype(float) * KNOT_KMH})
    return out.drop_duplicates(subset=["user_id", "timestamp"]).reset_index(drop=True)
