"""The engine without a list through the front doors (models/engine.md §8): ``dpopt release RECORDS
--privacy user --epsilon-total E --delta D``. Checked: the rows are windows of the day recurring over
the selected period, the budget recount (ε the exact sum of the pieces, δ the selection's), answers
that track a place + hour-of-day truth with intervals covering it, seeded reproducibility, and the
outlook when no place is selected."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import h3
import numpy as np
import pandas as pd
import pytest

from dpopt.cli import main
from dpopt.hierarchy.tree import DAY_NS
from dpopt.privacy.user.strategies.private_adaptive import PERIOD_NS
from dpopt.release import Budget, NoiseOptions, UserOptions, release
from dpopt.writers import ANSWER_COLUMNS, RELEASE_COLUMNS

U = 60.0
T0 = pd.Timestamp("2021-03-01T00:00:00Z")
LATS = 30.20 + 0.02 * np.arange(5)


def _records(seed: int = 0, n_users: int = 400, n: int = 40000) -> pd.DataFrame:
    """Each user lives in one cell (so each cell has ~80 users); value = 8 + 6·cell + hour/2 + noise."""
    rng = np.random.default_rng(seed)
    user = rng.integers(0, n_users, n)
    cell = user % LATS.size
    ts = T0 + pd.to_timedelta(rng.integers(0, 4 * 86400, n), unit="s")
    value = np.clip(8.0 + 6.0 * cell + ts.hour.to_numpy() / 2.0 + rng.normal(0, 2.0, n), 0, U)
    return pd.DataFrame({"user_id": np.char.add("u", user.astype(str)), "latitude": LATS[cell], "longitude": -97.75,
                         "timestamp": ts, "value": np.round(value, 3)})


DF = _records()


def _run(df=DF, eps=20.0, seed=3):
    return release(df, bound=U, budget=Budget(epsilon_total=eps, delta=1e-6), model=UserOptions(),
                   noise=NoiseOptions(seed=seed))


def _truth(df: pd.DataFrame) -> pd.Series:
    """Exact mean per (cell index, hour of the day)."""
    cell = np.searchsorted(LATS, df["latitude"].to_numpy())
    return df.assign(c=cell, h=df["timestamp"].dt.hour).groupby(["c", "h"])["value"].mean()


def test_rows_are_windows_of_the_day_over_the_selected_period():
    r = _run()
    t = r.table
    assert list(t.columns[:len(RELEASE_COLUMNS)]) == RELEASE_COLUMNS and list(r.answers.columns) == ANSWER_COLUMNS
    assert len(t) > 0 and t["released"].all()
    # rows: a measured marginal's nodes — windows of the day (recurring daily) or the whole period
    window = t["repeat_every"].fillna("") == "P1D"
    whole = ~window
    start = pd.Timestamp(t["slot"].min())
    until = pd.Timestamp(t.loc[window, "repeat_until"].iloc[0])
    assert (t.loc[window, "repeat_until"] == t.loc[window, "repeat_until"].iloc[0]).all()
    assert start.value % PERIOD_NS == 0 and (until.value - start.value) % PERIOD_NS == 0
    assert start <= T0 < until
    offs = pd.to_datetime(t.loc[window, "slot"]) - start
    assert offs.between(pd.Timedelta(0), pd.Timedelta(DAY_NS - 1, unit="ns")).all()
    assert (pd.to_datetime(t.loc[window, "slot_end"]) - pd.to_datetime(t.loc[window, "slot"]) == pd.Timedelta("1h")).all()
    assert (pd.to_datetime(t.loc[whole, "slot"]) == start).all() and (pd.to_datetime(t.loc[whole, "slot_end"]) == until).all()
    # every selected cell (resolution 7) has all 24 windows, each its own answer
    fine = t[window & (t["h3_resolution"] == 7)]
    assert len(fine) > 0 and (fine.groupby("cell").size() == 24).all()
    assert set(r.answers["cell"]) == set(fine["cell"]) and len(r.answers) == len(fine)
    assert (r.answers["node_cell"] == r.answers["cell"]).all() and (r.answers["node_slot"] == r.answers["slot"]).all()
    s = r.summary
    assert s.partitions.startswith("private selection") and "window of the day" in s.partitions
    # the report says why the rows repeat for years beyond a short data set (an outside check was puzzled)
    from dpopt.writers.report_md import report_markdown

    assert f"span of {PERIOD_NS // DAY_NS} days that contains the data" in report_markdown(r)


def test_budget_recount_and_delta():
    r = _run()
    sp = r.measurements.spend
    assert Fraction(sp.epsilon) == sum((Fraction(v) for v in sp.pieces.values()), Fraction(0))
    assert sp.epsilon <= 20.0 and sp.delta == 1e-6
    assert {"selection k", "selection cells", "bounds"} <= set(sp.pieces)
    # the between-grid statistic's share is split with the days' spread inside the windows (§8), evenly
    days, between = sp.pieces["pilot days' sum of squares inside the windows"], sp.pieces["pilot between-grid sum of squares"]
    assert days == between > 0 and math.isfinite(r.measurements.info.engine.day_between)
    # the users' place-or-time vote is asked over a public list only (models/engine.md §8)
    assert not any("vote" in k for k in sp.pieces) and math.isnan(r.measurements.info.engine.place_vote)


def test_answers_track_place_and_hour_and_intervals_cover():
    truth = _truth(DF)
    errs, cover = [], []
    for seed in (1, 2, 3):
        r = _run(eps=20.0, seed=seed)
        t = r.table
        t = t[(t["h3_resolution"] == 7) & (t["repeat_every"].fillna("") == "P1D")]  # the cells' windows
        lat = np.array([h3.cell_to_latlng(c)[0] for c in t["cell"]])
        cell = np.argmin(np.abs(lat[:, None] - LATS[None, :]), axis=1)
        hour = pd.to_datetime(t["slot"]).dt.hour.to_numpy()
        want = truth.reindex(pd.MultiIndex.from_arrays([cell, hour])).to_numpy()
        e = np.abs(t["mean"].to_numpy() - want)
        errs.append(np.median(e))
        cover.append(np.mean(e <= t["mean_error_bound"].to_numpy()))
    constant = np.median(np.abs(truth.to_numpy() - DF["value"].mean()))
    assert np.median(errs) < 0.25 * constant  # place and hour are both answered
    assert min(cover) >= 0.85


def test_seeded_release_is_reproducible():
    a, b = _run(seed=7).table, _run(seed=7).table
    pd.testing.assert_frame_equal(a, b)


def test_nothing_selected_publishes_nothing_and_says_what_would(tmp_path):
    small = _records(seed=1, n_users=30, n=3000)
    data = tmp_path / "d.csv"
    small.to_csv(data, index=False)
    code = main(["release", str(data), "--privacy", "user", "--bound", str(U), "--epsilon-total", "0.5",
                 "--delta", "1e-6", "--seed", "1", "--quiet", "--no-map", "--out", str(tmp_path / "o")])
    assert code == 0
    assert len(pd.read_csv(tmp_path / "o" / "release.csv")) == 0
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert "Private selection released no node" in s["outlook"] and s["outlook_epsilon_needed"] > 0.5
    assert s["epsilon_total"] <= 0.5 and s["delta"] <= 1e-6
    assert "- contribution bounds: none measured" in (tmp_path / "o" / "report.md").read_text()


def _day_records(seed: int, n_users: int = 3000, days: int = 6) -> pd.DataFrame:
    """Users of a few records each; the day sets the value: 20 + 12·(day odd) + hour/4 + noise."""
    rng = np.random.default_rng(seed)
    n = 4 * n_users
    user = rng.integers(0, n_users, n)
    cell = user % 3
    ts = T0 + pd.to_timedelta(rng.integers(0, days * 86400, n), unit="s")
    day = (ts - T0).days.to_numpy()
    value = np.clip(20.0 + 12.0 * (day % 2) + ts.hour.to_numpy() / 4.0 + rng.normal(0, 2.0, n), 0, U)
    return pd.DataFrame({"user_id": np.char.add("u", user.astype(str)), "latitude": LATS[cell], "longitude": -97.75,
                         "timestamp": ts, "value": np.round(value, 3)})


def test_a_window_row_covers_its_grid_on_every_day():
    """The contract: a grid (a cell's hour on one day) is answered by its cell's window of the day,
    and that row's mean_error_bound is the half-width of an interval for the *grid's* truth. Here the
    day moves the value by 12 inside every window, so the window's own interval (its mean over the
    days) misses the days' grids unless the days' spread inside the windows is measured and held
    (models/engine.md §8): coverage of the grids with ≥ 10 users at a stated 0.95."""
    cover = []
    for seed in (1, 2):
        df = _day_records(seed)
        r = _run(df, eps=10.0, seed=seed)
        assert math.isfinite(r.measurements.info.engine.day_between)
        t, a = r.table, r.answers
        cell = np.searchsorted(LATS, df["latitude"].to_numpy())
        g = df.assign(c=cell, d=(df["timestamp"] - T0).dt.days, h=df["timestamp"].dt.hour)
        grids = g.groupby(["c", "d", "h"]).agg(truth=("value", "mean"), users=("user_id", "nunique")).reset_index()
        grids = grids[grids["users"] >= 10]
        lat = np.array([h3.cell_to_latlng(c)[0] for c in a["cell"]])
        a = a.assign(c=np.argmin(np.abs(lat[:, None] - LATS[None, :]), axis=1), h=pd.to_datetime(a["slot"]).dt.hour)
        keys = ["cell", "slot", "slot_end", "repeat_every"]
        a = a.merge(t[keys + ["mean", "mean_error_bound"]].rename(columns={k: f"node_{k}" for k in keys}),
                    on=[f"node_{k}" for k in keys]).rename(columns={"mean_error_bound": "bound"})
        m = grids.merge(a[["c", "h", "mean", "bound"]], on=["c", "h"])
        assert len(m) > 100
        cover.append(np.mean(np.abs(m["mean"] - m["truth"]) <= m["bound"]))
    assert min(cover) >= 0.9, cover




def _reader_rule(t: pd.DataFrame, cell: str, at: pd.Timestamp) -> pd.Series | None:
    """The contract's reader: the smallest published node containing the grid (``cell``, the hour
    starting ``at``) — the finest place among the cell's ancestors, then the shortest window; a row
    recurring every P1D contains the grid where the hour falls in its window of some day."""
    best, key = None, None
    for res in range(h3.get_resolution(cell), -1, -1):
        rows = t[t["cell"] == (cell if res == h3.get_resolution(cell) else h3.cell_to_parent(cell, res))]
        for _, row in rows.iterrows():
            s0, s1 = pd.Timestamp(row["slot"]), pd.Timestamp(row["slot_end"])
            if row["repeat_every"] == "P1D":
                s0 = s0 + pd.Timedelta(days=(at - s0).days)
                s1 = s0 + (pd.Timestamp(row["slot_end"]) - pd.Timestamp(row["slot"]))
            if s0 <= at and at + pd.Timedelta("1h") <= s1 and (key is None or (-res, s1 - s0) < key):
                best, key = row, (-res, s1 - s0)
    return best


def test_a_grid_of_a_place_not_selected_is_covered_by_the_coarser_row_that_answers_it():
    """Without a list only the selected cells have rows of their own; a grid elsewhere is answered, by
    the reader's rule, by a coarser published row (the map's), whose interval must then hold that
    grid's truth, not only the node's own mean (models/engine.md §8). Nothing was measured of those
    places (the records are folded onto the selected cells), so that interval holds the declared
    range [0, U]. Here 80 cells of one user each sit 20 above the busy cells' mean: the map row's
    interval of its own mean (±≈0.5) missed nearly all of them, and one widened by the selected
    places' spread bound a fifth (their values lie outside the selected places' spread)."""
    rng = np.random.default_rng(11)
    lat, lng = np.meshgrid(30.12 + 0.025 * np.arange(10), -97.55 - 0.02 * np.arange(8))  # one user per thin cell
    lat, lng = lat.ravel(), lng.ravel()  # (res 7, beside the busy cells at -97.75, the same res-3 region)
    thin = pd.DataFrame({"user_id": np.char.add("t", np.arange(80).astype(str)), "latitude": lat, "longitude": lng,
                         "timestamp": T0 + pd.to_timedelta(rng.integers(0, 4 * 86400, 80), unit="s"),
                         "value": np.round(np.clip(45.0 + rng.normal(0, 3.0, 80), 0, U), 3)})
    thin = thin.loc[thin.index.repeat(3)].reset_index(drop=True)  # three records each, in one hour
    t = _run(pd.concat([DF, thin], ignore_index=True), eps=10.0, seed=5).table
    t = t.assign(repeat_every=t["repeat_every"].fillna(""))
    cells = np.array([h3.latlng_to_cell(a, b, 7) for a, b in zip(thin["latitude"], thin["longitude"])])
    assert not set(cells) & set(t["cell"])  # the thin cells are not selected: the case is not vacuous
    grids = thin.assign(cell=cells, at=thin["timestamp"].dt.floor("1h")).groupby(["cell", "at"])["value"].mean()
    hits, answered = 0, 0
    for (cell, at), truth in grids.items():
        row = _reader_rule(t, cell, at)
        if row is None:
            continue
        answered += 1
        assert h3.get_resolution(row["cell"]) < 7
        assert row["mean_error_bound"] == pytest.approx(max(row["mean"], U - row["mean"]))  # [0, U]
        assert row["mean_direct_error_bound"] < row["mean_error_bound"]  # the node's own measurement stays published
        hits += abs(row["mean"] - truth) <= row["mean_error_bound"]
    assert answered >= 0.9 * len(grids) and hits == answered, (answered, hits, len(grids))


def test_selected_cells_each_in_a_map_cell_of_their_own_still_get_a_map_row_for_the_places_left_out():
    """Two busy cells 28 km apart lie in two resolution-3 cells (the default map, R − 4) but one
    resolution-2 cell: with the map at resolution 3 its marginals repeated the cells' and no published
    row contained a grid of any other place (an outside check's Berlin meters: 82 % of the grids
    unanswered). The map is now the finest level at which two selected cells share a parent
    (lattice.nesting_map_resolution), and a thin place beside one of them is answered by that row,
    whose interval holds the declared range."""
    rng = np.random.default_rng(4)
    spots = np.array([[30.27, -97.74], [30.52, -97.74]])
    assert len({h3.cell_to_parent(h3.latlng_to_cell(*p, 7), 3) for p in spots}) == 2  # the case is not vacuous
    assert len({h3.cell_to_parent(h3.latlng_to_cell(*p, 7), 2) for p in spots}) == 1
    n = 30000
    user = rng.integers(0, 300, n)
    ts = T0 + pd.to_timedelta(rng.integers(0, 2 * 86400, n), unit="s")
    busy = pd.DataFrame({"user_id": np.char.add("u", user.astype(str)), "latitude": spots[user % 2, 0],
                         "longitude": spots[user % 2, 1], "timestamp": ts,
                         "value": np.round(np.clip(20 + 10 * (user % 2) + rng.normal(0, 3, n), 0, U), 3)})
    thin = pd.DataFrame({"user_id": ["thin"] * 3, "latitude": [30.31] * 3, "longitude": [-97.70] * 3,
                         "timestamp": [T0 + pd.Timedelta(hours=9, minutes=m) for m in (1, 2, 3)], "value": [50.0] * 3})
    t = release(pd.concat([busy, thin], ignore_index=True), bound=U, budget=Budget(epsilon_total=2.0, delta=1e-6),
                model=UserOptions(), noise=NoiseOptions(seed=2)).table
    t = t.assign(repeat_every=t["repeat_every"].fillna(""))
    cell = h3.latlng_to_cell(30.31, -97.70, 7)
    assert cell not in set(t["cell"])
    row = _reader_rule(t, cell, T0 + pd.Timedelta(hours=9))
    assert row is not None and h3.get_resolution(row["cell"]) == 2
    assert row["mean_error_bound"] == pytest.approx(max(row["mean"], U - row["mean"]))  # [0, U]: 50 is inside
