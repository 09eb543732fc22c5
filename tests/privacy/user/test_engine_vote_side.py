"""The plan's admission rule and the users' vote (models/engine.md §5, "The vote's side").

Where the public list is much larger than the data, the plan's even spread of the predicted kept
count over the listed grids holds every busy cell far below its count, and the cells left the plan:
the release answered every grid with the map-wide mean. Where the users' vote says the place sets the
value beyond its noise, the places over the whole period are not left out on that prediction.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import h3
import numpy as np
import pandas as pd
import pytest

from dpopt.privacy.options import Budget, NoiseOptions
from dpopt.privacy.user import UserOptions
from dpopt.privacy.user.engine import _vote_favoured
from dpopt.privacy.user.place_time_vote import PlaceShare
from dpopt.records.grid import cell_strings, slot_strings
from dpopt.release import GridOptions, contributions, release_user

START = pd.Timestamp("2024-03-04", tz="UTC")


def _lattice() -> SimpleNamespace:
    """A stand-in for the engine's bounded lattice: its candidates' names and marginals only."""
    def m(res: int, slot_ns: int, cycle_ns: int = 0) -> SimpleNamespace:
        return SimpleNamespace(marginal=SimpleNamespace(h3_resolution=res, slot_ns=slot_ns, cycle_ns=cycle_ns))

    hour, day = 3_600 * 10**9, 86_400 * 10**9
    return SimpleNamespace(names=["cell × slot", "cell × period", "r3 × hour-of-day", "r3 × slot", "r3 × period"],
                           cands=[m(7, hour), m(7, 0), m(3, hour, day), m(3, hour), m(3, 0)])


@pytest.mark.parametrize(("value", "sd", "want"), [
    (0.90, 0.10, {1}),  # 0.70 > ½: the place (cell × period), beyond the vote's noise
    (0.66, 0.10, set()),  # 0.46: the embedded example's vote does not clear the margin
    (0.10, 0.05, set()),  # the time's side is not waived
    (math.nan, 0.10, set()),
    (0.90, math.nan, set()),
])
def test_the_places_are_waived_only_where_the_vote_says_the_place_beyond_its_noise(value, sd, want):
    assert _vote_favoured(_lattice(), PlaceShare(value, sd, 100.0)) == want
    assert _vote_favoured(_lattice(), None) == frozenset()


def _sensors(seed: int = 5, n: int = 300, clusters: int = 10, days: int = 2) -> pd.DataFrame:
    """Fixed sensors in ``clusters`` places of Austin, a reading every 20 minutes (half kept), each
    place its own level U(10, 90) + N(0, 4²): the place sets the value."""
    rng = np.random.default_rng(seed)
    centres = np.c_[30.27 + rng.normal(0, 0.05, clusters), -97.74 + rng.normal(0, 0.05, clusters)]
    cl = rng.integers(0, clusters, n)
    lat, lon = centres[cl, 0] + rng.normal(0, 0.004, n), centres[cl, 1] + rng.normal(0, 0.004, n)
    ticks = np.arange(0, days * 1440, 20)
    user = np.repeat(np.arange(n), ticks.size)
    minute = np.tile(ticks, n) + rng.integers(0, 20, user.size)
    keep = rng.random(user.size) < 0.5
    user, minute = user[keep], minute[keep]
    value = np.clip(rng.uniform(10, 90, clusters)[cl[user]] + rng.normal(0, 4, user.size), 0, 100)
    return pd.DataFrame({"user_id": user.astype(str), "timestamp": START + pd.to_timedelta(minute, "min"),
                         "latitude": lat[user], "longitude": lon[user], "value": value})


@pytest.mark.parametrize("seed", [1, 2])
def test_a_list_much_larger_than_the_data_is_answered_by_place_where_the_place_sets_the_value(seed):
    """169 cells × 48 hours listed (8,112 grids) for sensors in 25 of the cells: the release answered
    every grid with the map-wide mean (median error 19.4–19.8 against the constant's 19.6); with the
    vote's side it measures the cells and errs ≈ 0.9."""
    rec = _sensors()
    agg = contributions(rec, bound=100.0, grid=GridOptions(7, "1h"), keep_samples=True)
    agg = agg[0] if isinstance(agg, tuple) else agg
    cells = sorted(h3.grid_disk(h3.latlng_to_cell(30.27, -97.74, 7), 7))
    slots = (START + pd.to_timedelta(np.arange(48), "h")).strftime("%Y-%m-%dT%H:%M:%SZ")
    listed = pd.DataFrame({"cell": np.repeat(cells, len(slots)), "slot": np.tile(slots, len(cells))})
    r = release_user(agg, Budget(epsilon_total=10.0), UserOptions(partitions=listed), bound=100.0,
                     noise=NoiseOptions(seed=seed))
    assert "cell × period" in (r.summary.answers_vary_by or [])
    rec = rec.assign(cell=[h3.latlng_to_cell(a, b, 7) for a, b in zip(rec.latitude, rec.longitude)],
                     slot=rec.timestamp.dt.floor("h").dt.strftime("%Y-%m-%dT%H:%M:%SZ"))
    grids = rec.groupby(["cell", "slot"]).agg(truth=("value", "mean"), users=("user_id", "nunique")).reset_index()
    scored = grids[grids.users >= 10]
    est = r.estimates
    answers = pd.DataFrame({"cell": cell_strings(est.answers["cell"].to_numpy()),
                            "slot": slot_strings(est.answers["slot"].to_numpy()),
                            "mean": est.table["mean"].to_numpy()[est.answers["node"].to_numpy()]})
    m = scored.merge(answers, on=["cell", "slot"])
    assert len(m) == len(scored) > 500
    constant = float(np.median(np.abs(scored.truth - rec.value.mean())))
    assert float(np.median(np.abs(m["mean"] - m.truth))) < 0.1 * constant
