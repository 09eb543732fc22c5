"""Small real datasets shipped with dpopt (read with :mod:`importlib.resources`).

``itms_hat_speeds.csv.gz``
    The ITMS data of seed 003 (Rameshwar et al., arXiv 2401.15906): 17,166 bus speed records (km/h)
    of 217 buses (users = licence plates) in one H3 hexagon and hour (``18 8642d9d6fffffff``).
    Origin: the authors' repository ``ma1VAR3/DAPaMean-MD`` (branch ``data``,
    ``data/ITMS_processed.csv``); zero speeds already removed; the paper's bound is U = 65 km/h.
``itms_counts.csv``
    The per-user record counts m_ℓ of that file, one per line under the header ``count``, users in
    sorted licence-plate order (the order of ``numpy.unique``). Usable directly as
    ``dpopt arrays --counts .../itms_counts.csv``.
``austin_sample.csv.gz``
    One real service day (2015-09-06) of Austin's Capital Metro bus positions with speeds: 53,569
    records of 146 buses, columns user_id, timestamp (UTC), latitude, longitude, value (km/h).
    The embedded default of ``dpopt release --example``; loader
    :func:`load_austin_sample` (see :mod:`dpopt.records.data` for provenance and licence).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["dataset_path", "load_itms", "load_itms_counts", "load_austin_sample", "ITMS_BOUND"]

#: the bound U (km/h) used for the ITMS speeds in seed 003
ITMS_BOUND = 65.0


def dataset_path(name: str) -> Path:
    """Filesystem path of a shipped data file, e.g. ``dataset_path("itms_counts.csv")``."""
    ref = resources.files(__name__).joinpath(name)
    if not ref.is_file():
        raise FileNotFoundError(f"dpopt ships no dataset file named {name!r}")
    return Path(str(ref))


def load_itms() -> pd.DataFrame:
    """The ITMS speed records of seed 003 as a DataFrame with columns ``user`` (str), ``value`` (float).

    Rows keep the order of the authors' processed file.

    Returns
    -------
    pandas.DataFrame
        17,166 rows: ``user``, the bus (licence plate, 217 distinct), and ``value``, a speed in km/h in
        (0, :data:`ITMS_BOUND`] (zero speeds removed; U = 65 km/h in seed 003).
    """
    with resources.files(__name__).joinpath("itms_hat_speeds.csv.gz").open("rb") as fh:
        raw = pd.read_csv(fh, compression="gzip")
    return pd.DataFrame({"user": raw["User"].astype(str).to_numpy(), "value": raw["Value"].to_numpy(float)})


def load_itms_counts() -> np.ndarray:
    """Per-user record counts m_ℓ of the ITMS data (int64, users in sorted licence-plate order).

    Returns
    -------
    ndarray of int64, shape (217,)
        m_ℓ ≥ 1 per bus, summing to 17,166: the counts of :func:`load_itms`'s ``user`` column in the
        order of ``numpy.unique`` (read from the shipped ``itms_counts.csv``).
    """
    with resources.files(__name__).joinpath("itms_counts.csv").open("r") as fh:
        return np.loadtxt(fh, dtype=np.int64, skiprows=1, ndmin=1)


def load_austin_sample() -> pd.DataFrame:
    """The embedded Austin sample (see :func:`dpopt.records.data.load_austin_sample`).

    Returns
    -------
    pandas.DataFrame
        53,569 records of 146 buses on 2015-09-06 (Capital Metro, Austin): ``user_id`` (str),
        ``timestamp`` (UTC datetimes), ``latitude``, ``longitude`` (degrees) and ``value`` (speed, km/h).
    """
    from ..records.data import load_austin_sample as _load

    return _load()
