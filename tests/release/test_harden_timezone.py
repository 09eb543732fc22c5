"""Local time (``--timezone`` / ``InputOptions(timezone=...)``): naive times read in the zone, slots
cut on its wall clock, every time column written with its UTC offset, summary.json naming the zone.

The expected slots are computed here independently (zoneinfo + plain datetime arithmetic), never
read back from the code under test.
"""

from __future__ import annotations

import pytest

import json
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import h3
import numpy as np
import pandas as pd

from dpopt.cli import main
from dpopt.privacy.contributions import InputOptions
from dpopt import DpoptInputError
from dpopt.release import (Budget, GridOptions, NoiseOptions, PerGridBudget, PublicOccupancyOptions, UserOptions, release,
                           write_release)

LAT, LNG = 30.25, -97.75
CELL = h3.latlng_to_cell(LAT, LNG, 7)


def _local_slot(utc: datetime, zone: str) -> str:
    """The start of the local hour holding ``utc``, with its offset (an independent oracle)."""
    local = utc.astimezone(ZoneInfo(zone))
    start = local.replace(minute=0, second=0, microsecond=0)
    return start.isoformat()


def _records(zone: str, seed: int = 0, n: int = 200) -> pd.DataFrame:
    """Records over two days in UTC (offset-aware text), spread over the hours."""
    rng = np.random.default_rng(seed)
    t0 = datetime(2020, 3, 7, 0, 0, tzinfo=ZoneInfo("UTC"))
    times = [t0 + timedelta(seconds=int(s)) for s in rng.integers(0, 2 * 86400, n)]
    return pd.DataFrame({"user_id": [f"u{i}" for i in rng.integers(0, 30, n)], "latitude": LAT, "longitude": LNG,
                         "timestamp": [t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in times],
                         "value": rng.uniform(0, 10, n).round(2), "utc": times})


def test_slots_are_cut_on_the_local_wall_clock_with_offsets():
    """Asia/Kolkata (+05:30): local hours are not UTC hours, so the counts per slot differ from a
    UTC cut; each slot's count must equal the records whose local hour it is."""
    for zone in ("Asia/Kolkata", "America/Chicago"):  # Chicago crosses the 2020-03-08 DST change
        frame = _records(zone)
        want = pd.Series([_local_slot(t, zone) for t in frame["utc"]]).value_counts().sort_index()
        r = release(frame.drop(columns="utc"), bound=10, budget=PerGridBudget(1.0),
                    model=PublicOccupancyOptions(plan="greedy"), io=InputOptions(timezone=zone),
                    noise=NoiseOptions(seed=1))
        got = r.table.set_index("slot")["n_records"].sort_index()
        assert got.index.tolist() == want.index.tolist(), zone
        assert got.tolist() == want.tolist(), zone
    assert any(s.endswith("-06:00") for s in got.index) and any(s.endswith("-05:00") for s in got.index)


def test_naive_local_times_equal_their_offset_form(tmp_path, capsys):
    zone = "America/Chicago"
    frame = _records(zone, seed=2)
    naive = frame.assign(timestamp=[t.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S") for t in frame["utc"]])
    a, b = (release(f.drop(columns="utc"), bound=10, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(
        plan="greedy"), io=InputOptions(timezone=zone), noise=NoiseOptions(seed=1)).table for f in (frame, naive))
    pd.testing.assert_frame_equal(a, b)
    path = tmp_path / "naive.csv"
    naive.drop(columns="utc").to_csv(path, index=False)
    code = main(["release", str(path), "--privacy", "public-occupancy", "--bound", "10", "--epsilon", "1", "--plan",
                 "greedy", "--timezone", zone, "--quiet", "--no-map", "--out", str(tmp_path / "o")])
    _, err = capsys.readouterr()
    assert code == 0, err
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["timezone"] == zone
    table = pd.read_csv(tmp_path / "o" / "release.csv")
    assert table["slot"].tolist() == a["slot"].tolist()
    assert table["slot"].str.match(r"^\d{4}-\d\d-\d\dT\d\d:00:00-0[56]:00$").all()
    first = datetime.fromisoformat(table["slot"].iloc[0])  # the report labels slots in local time
    label = f"{first:%Y-%m-%d %H:%M}–{first + timedelta(hours=1):%H:%M} {zone}"
    assert label in (tmp_path / "o" / "report.html").read_text()


def test_user_model_list_in_local_time_matches_the_records(tmp_path):
    """The public list written in local time with offsets (or naive, in the zone) selects the same
    grids as the records' local slots; release.csv and answers.csv carry the offsets."""
    zone = "Asia/Kolkata"
    frame = _records(zone, seed=3)
    hours = sorted({_local_slot(t, zone) for t in frame["utc"]})[:6]
    naive_list = pd.DataFrame({"cell": CELL, "slot": [h[:19] for h in hours]})
    for plist in (pd.DataFrame({"cell": CELL, "slot": hours}), naive_list):
        r = release(frame.drop(columns="utc"), bound=10, budget=Budget(epsilon_total=2.0),
                    model=UserOptions(partitions=plist, bounds=(2, 3), resolution="fixed"),
                    io=InputOptions(timezone=zone), noise=NoiseOptions(seed=1))
        assert r.table["slot"].tolist() == hours
    counts = pd.Series([_local_slot(t, zone) for t in frame["utc"]]).value_counts()
    assert (r.table["noisy_count"] - counts[hours].to_numpy()).abs().max() < 60  # the noise is small at c=3
    r = release(frame.drop(columns="utc"), bound=10, budget=Budget(epsilon_total=2.0),
                model=UserOptions(partitions=pd.DataFrame({"cell": CELL, "slot": hours})),
                io=InputOptions(timezone=zone), noise=NoiseOptions(seed=1))
    paths = write_release(r, tmp_path / "o", make_map=False)
    for key in ("release", "answers"):
        if key in paths:
            t = pd.read_csv(paths[key], dtype=str, keep_default_na=False)
            for col in [c for c in t.columns if c in ("slot", "slot_end", "node_slot", "node_slot_end")]:
                assert t[col].str.endswith("+05:30").all(), (key, col)
    assert json.loads(paths["summary"].read_text())["timezone"] == zone


def test_every_listed_grid_of_the_repeated_hour_has_its_answer_row(tmp_path):
    """On the night clocks go back, the two UTC hours of the repeated local hour share one wall-clock
    slot; a list naming them apart (in UTC or with their own offsets) still gets one answers.csv row
    per listed grid, both answered by that slot's node, and no row for a grid it did not list."""
    zone = "America/New_York"
    rng = np.random.default_rng(4)
    other = h3.latlng_to_cell(LAT + 0.05, LNG, 7)
    t0 = datetime(2024, 11, 3, 3, 0, tzinfo=ZoneInfo("UTC"))  # 23:00 EDT on the 2nd
    times = [t0 + timedelta(seconds=int(s)) for s in rng.integers(0, 6 * 3600, 600)]
    cells = [CELL if i % 2 else other for i in range(600)]
    frame = pd.DataFrame({"user_id": [f"u{i}" for i in rng.integers(0, 40, 600)],
                          "latitude": [h3.cell_to_latlng(c)[0] for c in cells],
                          "longitude": [h3.cell_to_latlng(c)[1] for c in cells],
                          "timestamp": [t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in times],
                          "value": rng.uniform(0, 10, 600).round(2)})
    utc = [f"2024-11-03T0{h}:00:00Z" for h in range(3, 9)]  # 23:00 EDT … 03:00 EST; 05Z and 06Z are both 01:00
    plist = pd.DataFrame({"cell": [CELL] * 6 + [other], "slot": utc + ["2024-11-03T06:00:00Z"]})  # other: 2nd 01:00 only
    for listed in (plist, plist.assign(slot=[_local_slot(datetime.fromisoformat(x.replace("Z", "+00:00")), zone)
                                             for x in plist["slot"]])):
        r = release(frame, bound=10, budget=Budget(epsilon_total=5.0), model=UserOptions(partitions=listed),
                    io=InputOptions(timezone=zone), noise=NoiseOptions(seed=2))
        ans = r.answers
        got = set(zip(ans["cell"], pd.to_datetime(ans["slot"], utc=True)))
        want = set(zip(plist["cell"], pd.to_datetime(plist["slot"], utc=True)))
        assert got == want and len(ans) == len(plist)
        first = ans[(ans["cell"] == CELL) & (ans["slot"] == "2024-11-03T01:00:00-04:00")]
        second = ans[(ans["cell"] == CELL) & (ans["slot"] == "2024-11-03T01:00:00-05:00")]
        assert len(first) == len(second) == 1
        assert first[["node_cell", "node_slot", "node_slot_end"]].values.tolist() == \
            second[["node_cell", "node_slot", "node_slot_end"]].values.tolist()
        # the shared slot's node spans both hours
        assert second["node_slot_end"].iloc[0] == "2024-11-03T02:00:00-05:00"


@pytest.mark.slow
def test_hour_of_day_profiles_are_cut_in_local_time():
    """--profile day with a zone: the hour-of-day windows are local hours (a window starting at local
    midnight counts the records whose local hour is 0, on every day), written with the offset."""
    zone = "America/Chicago"
    rng = np.random.default_rng(0)
    n = 3000
    utc = pd.Timestamp("2020-06-01T05:00:00Z") + pd.to_timedelta(rng.integers(0, 3 * 86400, n), unit="s")
    frame = pd.DataFrame({"user_id": [f"u{i}" for i in rng.integers(0, 300, n)], "latitude": LAT, "longitude": LNG,
                          "timestamp": utc.strftime("%Y-%m-%dT%H:%M:%SZ"), "value": rng.uniform(0, 50, n)})
    r = release(frame, bound=50, budget=Budget(epsilon_total=10), noise=NoiseOptions(seed=1),
                model=PublicOccupancyOptions(plan="hierarchy", profile="day"), io=InputOptions(timezone=zone))
    table = r.table
    windows = table[table["repeat_every"] == "P1D"]
    assert len(windows) and windows["slot"].str.endswith("-05:00").all()
    local_hour = pd.Series([t.astimezone(ZoneInfo(zone)).hour for t in utc.to_pydatetime()])
    for row in windows.itertuples():
        start = datetime.fromisoformat(row.slot)
        hours = (datetime.fromisoformat(row.slot_end) - start) // timedelta(hours=1)
        inside = (local_hour >= start.hour) & (local_hour < start.hour + hours)
        cells = np.array([h3.cell_to_parent(h3.latlng_to_cell(LAT, LNG, 15), row.h3_resolution)] * n)
        assert row.n_records == int((inside & (cells == row.cell)).sum()), row.slot


def _first_existing(wall: datetime, zone: str) -> str:
    """The first wall time at or after ``wall`` that exists in ``zone``, with its offset (an
    independent oracle: minute steps, a wall time exists where it survives a round trip to UTC)."""
    for minutes in range(0, 24 * 60):
        w = wall + timedelta(minutes=minutes)
        back = w.replace(tzinfo=ZoneInfo(zone)).astimezone(ZoneInfo("UTC")).astimezone(ZoneInfo(zone))
        if back.replace(tzinfo=None) == w:
            return back.isoformat()
    raise AssertionError("no existing wall time within a day")


@pytest.mark.parametrize("zone, walls", [
    ("Australia/Lord_Howe", ["2019-10-06T01:00", "2019-10-06T02:00", "2019-10-06T02:15", "2019-10-06T02:30",
                             "2019-10-06T03:00", "2019-04-07T01:30"]),  # a 30-minute gap; the hour back at 02:00
    ("America/Sao_Paulo", ["2018-11-04T00:00", "2018-11-03T00:00", "2019-02-16T23:00"]),  # the day starts in a gap
    ("Europe/Berlin", ["2026-03-29T02:00", "2026-03-29T02:45", "2026-10-25T02:00"]),
])
def test_a_wall_time_in_the_gap_is_written_as_the_first_instant_after_it(zone, walls):
    """pandas' ``nonexistent="shift_forward"`` moved Lord Howe's 02:00 (clocks go 02:00 → 02:30) to
    03:00+11:00: the 01:00 slot then ended at 03:00, overlapping the next, and the slot of the 02:40
    records was written 03:00 .. 03:00, the same (cell, slot) as the real 03:00 slot."""
    from dpopt.records.grid import slot_strings

    ns = pd.DatetimeIndex(walls).as_unit("ns").asi8
    want = [_first_existing(datetime.fromisoformat(w), zone) for w in walls]
    assert slot_strings(ns, zone).tolist() == want


def test_a_list_names_a_day_that_starts_in_the_gap_as_the_release_writes_it(tmp_path):
    """São Paulo skipped 2018-11-04 00:00–01:00: the day's slot is written 2018-11-04T01:00:00-02:00.
    That label, the naive date and the UTC instant of its first hour each list that day (all three were
    refused: not on the lattice, or a wall time that does not exist); a naive slot the clocks skip
    whole (Berlin's 02:00 hour) holds no record and is refused in one line; a list off the local
    lattice is refused quoting the list as written."""
    zone = "America/Sao_Paulo"
    rng = np.random.default_rng(5)
    t0 = datetime(2018, 11, 3, 3, 0, tzinfo=ZoneInfo("UTC"))  # 2018-11-03 00:00 local
    times = [t0 + timedelta(seconds=int(s)) for s in rng.integers(0, 3 * 86400 - 7200, 900)]
    frame = pd.DataFrame({"user_id": [f"u{i}" for i in rng.integers(0, 60, 900)], "latitude": LAT,
                          "longitude": LNG, "timestamp": [t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in times],
                          "value": rng.uniform(0, 10, 900).round(2)})
    day = "2018-11-04T01:00:00-02:00"
    for slot in (day, "2018-11-04T00:00:00", "2018-11-04T03:00:00Z"):
        plist = pd.DataFrame({"cell": CELL, "slot": ["2018-11-03T00:00:00-03:00", slot]})
        r = release(frame, bound=10, budget=Budget(epsilon_total=5.0), grid=GridOptions(7, "1d"),
                    model=UserOptions(partitions=plist), io=InputOptions(timezone=zone), noise=NoiseOptions(seed=2))
        assert sorted(r.answers["slot"]) == ["2018-11-03T00:00:00-03:00", day], slot
        assert r.table.loc[r.table["slot"] == "2018-11-03T00:00:00-03:00", "slot_end"].iloc[0] == day
    # the writers too: their labels built the day's skipped midnight and raised (any release with such a day)
    paths = write_release(r, tmp_path / "out")
    assert "2018-11-04 01:00" in paths["html"].read_text(encoding="utf-8")
    berlin = pd.DataFrame({"cell": CELL, "slot": ["2026-03-29T02:00:00"]})
    with pytest.raises(DpoptInputError, match=r"`partitions` slot '2026-03-29T02:00:00' .*whole slot the clock change skips"):
        release(frame, bound=10, budget=Budget(epsilon_total=5.0), model=UserOptions(partitions=berlin),
                io=InputOptions(timezone="Europe/Berlin"), noise=NoiseOptions(seed=2))
    kolkata = pd.DataFrame({"cell": CELL, "slot": ["2026-01-02T00:00:00Z"]})  # 05:30 there
    with pytest.raises(DpoptInputError, match=r"lattice of the Asia/Kolkata wall clock .*got '2026-01-02T00:00:00Z'"):
        release(frame, bound=10, budget=Budget(epsilon_total=5.0), model=UserOptions(partitions=kolkata),
                io=InputOptions(timezone="Asia/Kolkata"), noise=NoiseOptions(seed=2))


def test_a_naive_list_of_every_local_hour_reads_the_hour_the_clocks_go_back_as_one_slot():
    """Berlin's 2026-10-25T02:00 occurs twice; as a naive partition slot it stopped the release. It is
    one wall slot (both hours share it), written with the first offset and ending an hour later."""
    zone = "Europe/Berlin"
    rng = np.random.default_rng(6)
    t0 = datetime(2026, 10, 24, 22, 0, tzinfo=ZoneInfo("UTC"))  # 00:00 CEST on the 25th
    times = [t0 + timedelta(seconds=int(s)) for s in rng.integers(0, 5 * 3600, 600)]
    frame = pd.DataFrame({"user_id": [f"u{i}" for i in rng.integers(0, 40, 600)], "latitude": LAT,
                          "longitude": LNG, "timestamp": [t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in times],
                          "value": rng.uniform(0, 10, 600).round(2)})
    naive = [f"2026-10-25T0{h}:00:00" for h in range(0, 4)]
    r = release(frame, bound=10, budget=Budget(epsilon_total=5.0), model=UserOptions(partitions=pd.DataFrame(
        {"cell": CELL, "slot": naive})), io=InputOptions(timezone=zone), noise=NoiseOptions(seed=2))
    assert sorted(r.answers["slot"]) == ["2026-10-25T00:00:00+02:00", "2026-10-25T01:00:00+02:00",
                                         "2026-10-25T02:00:00+02:00", "2026-10-25T03:00:00+01:00"]
    own = r.table.set_index("slot")
    assert own.loc["2026-10-25T02:00:00+02:00", "slot_end"] == "2026-10-25T03:00:00+01:00"


def test_under_the_user_model_one_users_naive_time_is_dropped_not_a_refusal_of_the_release(tmp_path):
    """Without a zone, one user's row with a time without an offset made the whole user-model release
    exit 2 with no folder (a privacy audit's neighbour diff): whether a release happens then depended
    on one user's rows. Now it is dropped and counted (diagnostics), and the release is the one
    without that user; public-occupancy (occupancy public) and a column naive by its type still refuse."""
    frame = _records("UTC", seed=7).drop(columns="utc")
    cells = pd.DataFrame({"cell": [CELL], "slot": [frame["timestamp"].iloc[0][:14] + "00:00Z"]})
    extra = pd.DataFrame({"user_id": ["newcomer"], "latitude": [LAT], "longitude": [LNG],
                          "timestamp": ["2020-03-07T18:00:00"], "value": [9.5]})
    runs = []
    for data in (frame, pd.concat([frame, extra], ignore_index=True)):
        r = release(data, bound=10, budget=Budget(epsilon_total=2.0), model=UserOptions(partitions=cells),
                    noise=NoiseOptions(seed=4))
        runs.append(r)
    pd.testing.assert_frame_equal(runs[0].table, runs[1].table)
    assert runs[1].diagnostics["ingest"]["missing"]["timestamp"] == runs[0].diagnostics["ingest"]["missing"]["timestamp"] + 1
    with pytest.raises(DpoptInputError, match="without a UTC offset"):
        release(pd.concat([frame, extra], ignore_index=True), bound=10, budget=PerGridBudget(epsilon=1.0),
                model=PublicOccupancyOptions(plan="baseline"), noise=NoiseOptions(seed=4))
    typed = frame.assign(timestamp=pd.to_datetime(frame["timestamp"], utc=True).dt.tz_localize(None))
    with pytest.raises(DpoptInputError, match="without a UTC offset"):
        release(typed, bound=10, budget=Budget(epsilon_total=2.0), model=UserOptions(partitions=cells),
                noise=NoiseOptions(seed=4))


def test_a_day_the_clocks_shorten_is_labelled_as_a_span_not_00_00_to_00_00():
    """Berlin's 2026-03-29 lasts 23 h: its label read "2026-03-29 00:00–00:00" (the same-day test took
    any slot under 24 h); a 30-day span across the change read "719 h"."""
    from dpopt.writers._published import slot_labels, span_text

    def local(x):
        return pd.Series(pd.to_datetime(x, utc=True)).dt.tz_convert("Europe/Berlin")

    got = slot_labels(local(["2026-03-29T00:00:00+01:00", "2026-03-29T23:00:00+02:00"]),
                      local(["2026-03-30T00:00:00+02:00", "2026-03-30T00:00:00+02:00"])).tolist()
    assert got == ["2026-03-29 00:00 → 2026-03-30 00:00 Europe/Berlin (23 h)", "2026-03-29 23:00–00:00 Europe/Berlin"]
    assert span_text(pd.Timedelta(days=30) - pd.Timedelta(hours=1)) == "29.96 d"
    assert span_text(pd.Timedelta(hours=25)) == "25 h" and span_text(pd.Timedelta(days=3)) == "3 d"


def test_a_user_release_whose_every_time_lacks_an_offset_says_nothing_was_measured(tmp_path, capsys):
    """Under ``user`` a text time without an offset is dropped and counted (whether a release happens
    must not depend on one user's rows). With every time naive and no --timezone nothing is read, each
    node is the midpoint ± U/2, and the outlook said the best node "would meet 2.5 at epsilon ≈ 20"
    — a projection from the prior's half-range, found by an outside check. It now says nothing was
    measured, possibly for want of records, and projects no epsilon."""
    zone = "America/Chicago"
    frame = _records(zone, seed=3)
    naive = frame.assign(timestamp=[t.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S") for t in frame["utc"]])
    path = tmp_path / "naive.csv"
    naive.drop(columns="utc").to_csv(path, index=False)
    hours = sorted({_local_slot(t, zone) for t in frame["utc"]})
    plist = tmp_path / "list.csv"
    pd.DataFrame({"cell": CELL, "slot": hours}).to_csv(plist, index=False)
    code = main(["release", str(path), "--bound", "10", "--epsilon-total", "10", "--partitions", str(plist),
                 "--seed", "1", "--quiet", "--no-map", "--out", str(tmp_path / "o")])
    _, err = capsys.readouterr()
    assert code == 0, err
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert "nothing was measured above its noise" in summary["outlook"] and "would meet" not in summary["outlook"]
    assert summary["outlook_epsilon_needed"] is None
    assert "nothing was measured above its noise" in err and "--timezone" in err
