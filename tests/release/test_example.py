"""`dpopt release --example`: the user model over the shipped public list, in local time, answering
one place and hour on the console; its intervals cover the grids' truths computed here from the
shipped records."""

from __future__ import annotations

import h3
import numpy as np
import pandas as pd
import pytest

from dpopt.cli import main
from dpopt.records.data import (EXAMPLE_AREA, EXAMPLE_HOURS, EXAMPLE_TIMEZONE, example_partitions,
                                example_partitions_path, load_austin_sample)


def test_the_shipped_list_is_made_of_public_facts_only() -> None:
    shipped = pd.read_csv(example_partitions_path(), dtype=str)
    pd.testing.assert_frame_equal(shipped, example_partitions().astype(str))
    south, north, west, east = EXAMPLE_AREA
    for cell in shipped["cell"].unique()[:50]:
        lat, lng = h3.cell_to_latlng(cell)
        assert south <= lat <= north and west <= lng <= east and h3.get_resolution(cell) == 7
    hours = pd.to_datetime(shipped["slot"]).map(lambda t: t.hour)
    assert hours.min() == EXAMPLE_HOURS[0] and hours.max() == EXAMPLE_HOURS[1] - 1


def _truth() -> pd.DataFrame:
    """Each (cell, local hour) grid's exact mean of the clamped speeds and its number of buses."""
    f = load_austin_sample()
    t = pd.to_datetime(f["timestamp"], utc=True).dt.tz_convert(EXAMPLE_TIMEZONE)
    f = f.assign(cell=[h3.latlng_to_cell(a, b, 7) for a, b in zip(f["latitude"], f["longitude"])],
                 hour=t.dt.hour, value=f["value"].clip(0, 120))
    return f.groupby(["cell", "hour"]).agg(truth=("value", "mean"), users=("user_id", "nunique")).reset_index()


@pytest.mark.slow
def test_example_runs_the_user_model_and_its_intervals_cover(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["release", "--example", "--seed", "5", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "Congress Ave at 6th St" in out and "17:00-18:00 local time" in out
    folder = tmp_path / "dpopt-release"
    summary = pd.read_json(folder / "summary.json", typ="series")
    assert summary["privacy_model"] == "user"
    answers = pd.read_csv(folder / "answers.csv", dtype=str)
    table = pd.read_csv(folder / "release.csv", dtype={"cell": str, "slot": str, "slot_end": str})
    assert answers["slot"].str.endswith("-05:00").all()  # local time with its offset
    key = ["cell", "slot", "slot_end"]
    rows = answers.merge(table[key + ["mean", "mean_error_bound"]], left_on=["node_cell", "node_slot", "node_slot_end"],
                         right_on=key, suffixes=("", "_node"))
    assert len(rows) == len(answers) == len(example_partitions())
    rows["hour"] = pd.to_datetime(rows["slot"].str.slice(0, 19)).dt.hour
    scored = rows.merge(_truth(), on=["cell", "hour"])
    busy = scored[scored["users"] >= 10]
    assert len(busy) > 100
    covered = np.abs(busy["mean"] - busy["truth"]) <= busy["mean_error_bound"]
    assert covered.mean() >= 0.90
