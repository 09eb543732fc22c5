"""Hour-of-day profiles (models/hierarchy.md §2): ``dpopt release … --partitions
FINEST.csv --profile day`` runs the adaptive release over a hierarchy whose time steps are windows
recurring every day, and release.csv says where each node's window recurs."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import h3
import numpy as np
import pandas as pd
import pytest

from dpopt import DpoptInputError
from dpopt.cli import main
from dpopt.privacy.user import UserOptions

R = 7


def _records(tmp: Path) -> tuple[Path, Path]:
    """400 users, each mostly in its home cell of 7 res-7 cells, over 3 days x 4 hours a day
    (08–11 UTC); slower at 08:00 every day."""
    rng = np.random.default_rng(1)
    cells = sorted(h3.grid_disk(h3.latlng_to_cell(30.27, -97.74, R), 1))
    rows = []
    for u in range(400):
        for _ in range(int(rng.integers(8, 24))):
            cell = cells[u % 7] if rng.random() < 0.7 else cells[int(rng.integers(len(cells)))]
            lat, lng = h3.cell_to_latlng(cell)
            day, hour = int(rng.integers(3)), 8 + int(rng.integers(4))
            rows.append((f"u{u}", lat, lng, f"2024-03-0{1 + day}T{hour:02d}:{int(rng.integers(60)):02d}:00Z",
                         float(np.clip(rng.normal(25 if hour == 8 else 45, 8), 0, 120))))
    df = pd.DataFrame(rows, columns=["user_id", "latitude", "longitude", "timestamp", "value"])
    df.to_csv(tmp / "records.csv", index=False)
    grids = {(h3.latlng_to_cell(a, b, R), pd.Timestamp(t).floor("1h").strftime("%Y-%m-%dT%H:%M:%SZ"))
             for a, b, t in zip(df.latitude, df.longitude, df.timestamp)}
    pd.DataFrame(sorted(grids), columns=["cell", "slot"]).to_csv(tmp / "parts.csv", index=False)
    return tmp / "records.csv", tmp / "parts.csv"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return _records(tmp_path_factory.mktemp("profile"))


def _run(capsys, records: Path, parts: Path | None, out: Path, *extra: str) -> tuple[int, str, str]:
    args = ["release", str(records), "--privacy", "user", "--bound", "120", "--epsilon-total", "10",
            "--h3-resolution", str(R), "--slot", "1h", "--quiet", "--json", "--out", str(out), *extra]
    if parts is not None:
        args[2:2] = ["--partitions", str(parts)]
    code = main(args)
    o, e = capsys.readouterr()
    return code, o, e


def _windows(row) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """A release.csv node's time extent as a reader computes it from the published columns."""
    t0, t1 = pd.Timestamp(row["slot"]), pd.Timestamp(row["slot_end"])
    if not isinstance(row["repeat_every"], str) or not row["repeat_every"]:
        return [(t0, t1)]
    step, until = pd.Timedelta(row["repeat_every"]), pd.Timestamp(row["repeat_until"])
    out = []
    while t0 < until:
        out.append((t0, t1))
        t0, t1 = t0 + step, t1 + step
    return out


def test_profile_release_publishes_recurring_windows_that_answer_every_listed_grid(capsys, data, tmp_path):
    records, parts = data
    code, _, err = _run(capsys, records, parts, tmp_path / "out", "--strategy", "adaptive", "--profile", "day", "--seed", "3")
    assert code == 0, err
    out = tmp_path / "out"
    t = pd.read_csv(out / "release.csv", keep_default_na=False, na_values=[""], dtype={"repeat_every": str})
    s = json.loads((out / "summary.json").read_text())
    assert s["resolution"] == "adaptive" and s["shape"] == "levels"
    times = [lv["time"] for lv in s["levels"]]
    assert "1h of the day" in times and "3h of the day" in times and times[-1] == "period"
    assert [lv["repeat_every"] for lv in s["levels"] if lv["time"].endswith("of the day")] == ["P1D"] * times.count(
        "1h of the day") + ["P1D"] * times.count("3h of the day")
    # the budget recount: the pieces sum exactly to the total, within epsilon_total
    total = sum((Fraction(v) for v in s["budget"].values()), Fraction(0))
    assert total <= 10 and float(total) == pytest.approx(s["epsilon_total"], abs=1e-12)
    # every listed grid is answered by a published node whose windows hold it, and by the smallest one
    plist = pd.read_csv(parts)
    ans = pd.read_csv(out / "answers.csv", keep_default_na=False, na_values=[""],
                      dtype={"node_repeat_every": str, "node_repeat_until": str})
    assert len(ans) == len(plist)
    rows = {(r["cell"], r["slot"], r["slot_end"], r["repeat_every"]): r for _, r in t.iterrows()}
    period_end = pd.to_datetime(plist["slot"], utc=True).max() + pd.Timedelta("1h")
    for a in ans.itertuples():
        key = (a.node_cell, a.node_slot, a.node_slot_end, a.node_repeat_every)
        assert key in rows
        assert a.node_repeat_until == rows[key]["repeat_until"]  # answers.csv reads alone
        g = pd.Timestamp(a.slot)
        holds = [k for k, r in rows.items() if h3.cell_to_parent(a.cell, h3.get_resolution(k[0])) == k[0]
                 and any(w0 <= g and g + pd.Timedelta("1h") <= w1 for w0, w1 in _windows(r))]
        assert key in holds
        size = {k: 7 ** (R - h3.get_resolution(k[0])) * sum((w1 - w0).value for w0, w1 in _windows(rows[k]))
                for k in holds}
        assert size[key] == min(size.values())
    rep = t[t["repeat_every"] == "P1D"]
    assert len(rep) > 0, "no hour-of-day node published: the fixture no longer exercises profiles"
    assert (pd.to_datetime(rep["repeat_until"], utc=True) == period_end).all()
    assert t.loc[t["repeat_every"].isna() | (t["repeat_every"] == ""), "repeat_until"].isna().all()
    # each published node's interval holds the truth of its own records (read by its windows)
    recs = pd.read_csv(records)
    ts = pd.to_datetime(recs["timestamp"], utc=True).dt.tz_localize(None)
    for _, r in t.iterrows():
        res = int(r["h3_resolution"])
        inside = np.array([h3.cell_to_parent(h3.latlng_to_cell(a, b, R), res) == r["cell"]
                           for a, b in zip(recs.latitude, recs.longitude)])
        when = np.zeros(len(recs), dtype=bool)
        for w0, w1 in _windows(r):
            when |= ((ts >= w0.tz_localize(None)) & (ts < w1.tz_localize(None))).to_numpy()
        truth = recs["value"].to_numpy()[inside & when].mean()
        assert abs(r["mean"] - truth) <= r["mean_error_bound"], (r["slot"], r["repeat_every"], truth)
    md = (out / "report.md").read_text()
    assert "1h of the day" in md and "every P1D until" in md
    # the hour-of-day signal is what the profile publishes: 08:00 is slower every day
    first = rep.sort_values("slot").groupby("cell").head(2)
    assert (first.groupby("cell")["mean"].apply(lambda m: m.iloc[0] < m.iloc[1] - 5)).all()


@pytest.mark.slow
def test_profile_over_one_day_says_it_added_nothing(capsys, data, tmp_path):
    """Over a list of one day no hour-of-day window recurs (a 1-h-of-day level repeats the finest
    one and is dropped; a 3-h one is a plain 3-h slot): the release says so on stderr, and does not
    over three days."""
    records, parts = data
    df, p = pd.read_csv(records), pd.read_csv(parts)
    df[df["timestamp"].str.startswith("2024-03-01")].to_csv(tmp_path / "r1.csv", index=False)
    p[p["slot"].str.startswith("2024-03-01")].to_csv(tmp_path / "p1.csv", index=False)
    code, _, err = _run(capsys, tmp_path / "r1.csv", tmp_path / "p1.csv", tmp_path / "one", "--strategy", "adaptive", "--profile", "day",
                        "--seed", "1")
    assert code == 0, err
    warn = [ln for ln in err.splitlines() if "--profile day added no recurring window" in ln]
    assert len(warn) == 1 and warn[0].startswith("dpopt release: warning:")
    code, _, err = _run(capsys, records, parts, tmp_path / "three", "--strategy", "adaptive", "--profile", "day", "--seed", "1")
    assert code == 0 and "added no recurring window" not in err


def test_profile_windows_carry_the_hour_of_day_signal_noise_free():
    """The estimator's input, not its noise: the hour-of-day node of 08:00 holds every 08:00 grid of
    the three days (exact node sums over the tree), and its mean is the 08:00 mean."""
    from dpopt.hierarchy.tree import DAY_NS, HOUR_NS, Level, build_hierarchy
    from dpopt.privacy.user.levels import node_sums

    start = pd.Timestamp("2024-03-01T00:00Z").value
    cells = np.full(6, h3.str_to_int(h3.latlng_to_cell(30.27, -97.74, R)), dtype=np.int64)
    slots = start + np.array([8, 9, 32, 33, 56, 57]) * HOUR_NS
    H = build_hierarchy(cells, slots, (Level(R, HOUR_NS), Level(R, HOUR_NS, DAY_NS), Level(R, 0)))
    sums = node_sums(H, np.array([20, 40, 30, 50, 25, 45]))
    counts = node_sums(H, np.ones(6, dtype=np.int64))
    hod = H.nodes.index[H.nodes["level"] == 1]
    by_slot = dict(zip(H.nodes.loc[hod, "slot"], zip(sums[hod], counts[hod])))
    assert by_slot[start + 8 * HOUR_NS] == (75, 3) and by_slot[start + 9 * HOUR_NS] == (135, 3)


@pytest.mark.parametrize("extra, flag", [
    (("--profile", "day", "--resolution", "place"), "--profile"),
    (("--profile", "day", "--resolution", "fixed"), "--profile"),
    (("--profile", "month"), "--profile"),
    (("--profile", "day"), "--profile"),  # the default engine measures the hours of the day itself
    (("--strategy", "adaptive", "--profile", "day", "--slot", "5h"), "--profile"),
])
def test_profile_misuse_is_one_line_exit_2(capsys, data, tmp_path, extra, flag):
    records, parts = data
    args = ["release", str(records), "--privacy", "user", "--bound", "120", "--epsilon-total", "10",
            "--partitions", str(parts), "--h3-resolution", str(R), "--quiet", "--out", str(tmp_path / "o")]
    if "--slot" not in extra:
        args += ["--slot", "1h"]
    code = main(args + list(extra))
    _, err = capsys.readouterr()
    assert code == 2 and flag in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o").exists()


def test_profile_without_a_list_or_under_public_occupancy_is_refused(capsys, data, tmp_path):
    records, _ = data
    code = main(["release", str(records), "--privacy", "public-occupancy", "--bound", "120", "--epsilon-total", "1",
                 "--h3-resolution", str(R), "--slot", "1h", "--profile", "day", "--quiet", "--out", str(tmp_path / "o")])
    _, err = capsys.readouterr()
    assert code == 2 and "--profile" in err
    with pytest.raises(DpoptInputError, match="profile"):
        UserOptions(strategy="adaptive", profile="day")  # no list
    with pytest.raises(DpoptInputError, match="strategy='optimised'"):
        UserOptions(partitions="x.csv", profile="day")  # the engine: a refusal, not another strategy
    assert not UserOptions(partitions="x.csv", strategy="adaptive", profile="day").place


@pytest.mark.slow
def test_public_occupancy_hierarchy_plan_takes_the_profile_too(capsys, data, tmp_path):
    """Both privacy models use the hierarchy. Under public-occupancy with --plan
    hierarchy the planner (a MILP over the public counts) chooses among hour-of-day nodes; every
    answered grid lies in its node's windows; without --plan hierarchy --profile is refused."""
    records, _ = data
    out = tmp_path / "po"
    code = main(["release", str(records), "--privacy", "public-occupancy", "--bound", "120", "--epsilon-total", "2",
                 "--plan", "hierarchy", "--h3-resolution", str(R), "--slot", "1h", "--profile", "day", "--seed", "1",
                 "--quiet", "--out", str(out)])
    _, err = capsys.readouterr()
    assert code == 0, err
    t = pd.read_csv(out / "release.csv", keep_default_na=False, na_values=[""], dtype={"repeat_every": str})
    t = t[t["released"].astype(str) == "True"]
    assert (t["repeat_every"] == "P1D").any(), "the plan published no hour-of-day node at this budget"
    s = json.loads((out / "summary.json").read_text())
    assert [1 * 3600 * 10**9, 86_400 * 10**9] in [lv[1:] for lv in s["levels"]]
    ans = pd.read_csv(out / "answers.csv", keep_default_na=False, na_values=[""],
                      dtype={"node_repeat_every": str, "node_repeat_until": str})
    rows = {(r["cell"], r["slot"], r["repeat_every"] if isinstance(r["repeat_every"], str) else ""): r
            for _, r in t.iterrows()}
    answered = ans[ans["node"] >= 0]
    assert len(answered) > 0
    for a in answered.itertuples():
        key = (a.node_cell, a.node_slot, a.node_repeat_every if isinstance(a.node_repeat_every, str) else "")
        assert (a.node_slot_end, a.node_repeat_until) == (rows[key]["slot_end"], rows[key]["repeat_until"]) \
            or not key[2] and pd.isna(a.node_repeat_until) and a.node_slot_end == rows[key]["slot_end"]
        g = pd.Timestamp(a.slot)
        assert h3.cell_to_parent(a.cell, h3.get_resolution(key[0])) == key[0]
        assert any(w0 <= g < w1 for w0, w1 in _windows(rows[key]))
    code = main(["release", str(records), "--privacy", "public-occupancy", "--bound", "120", "--epsilon-total", "2",
                 "--h3-resolution", str(R), "--slot", "1h", "--profile", "day", "--quiet", "--out", str(tmp_path / "x")])
    _, err = capsys.readouterr()
    assert code == 2 and "--profile" in err and "hierarchy" in err and not (tmp_path / "x").exists()


def test_public_occupancy_hierarchy_that_publishes_nothing_says_so(capsys, tmp_path):
    """A hierarchy plan with no node within the target (60 users at ε = 1) ran into a deep TypeError
    (indexing a sparse plan by no pairs); now it writes its files and warns on stderr in one line."""
    rng = np.random.default_rng(1)
    cells = sorted(h3.grid_disk(h3.latlng_to_cell(30.27, -97.74, R), 1))
    rows = []
    for u in range(60):
        for _ in range(int(rng.integers(4, 12))):
            lat, lng = h3.cell_to_latlng(cells[int(rng.integers(len(cells)))])
            rows.append((f"u{u}", lat, lng, f"2024-03-0{1 + int(rng.integers(3))}T{8 + int(rng.integers(4)):02d}:10:00Z",
                         float(rng.uniform(0, 100))))
    pd.DataFrame(rows, columns=["user_id", "latitude", "longitude", "timestamp", "value"]).to_csv(tmp_path / "r.csv",
                                                                                                index=False)
    for extra in ((), ("--profile", "day")):
        out = tmp_path / f"o{len(extra)}"
        code = main(["release", str(tmp_path / "r.csv"), "--privacy", "public-occupancy", "--bound", "120",
                     "--epsilon-total", "1", "--plan", "hierarchy", "--quiet", "--out", str(out), *extra])
        _, err = capsys.readouterr()
        warn = [ln for ln in err.splitlines() if "warning" in ln]
        assert code == 0 and len(warn) == 1 and "publishes nothing" in warn[0] and "--epsilon-total" in warn[0]
        t = pd.read_csv(out / "release.csv")
        assert len(t) == 0 or not t["released"].astype(bool).any()
