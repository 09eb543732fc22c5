"""Slot spans in words and the time control's steps for mixed slot lengths."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpopt.writers import _published
from dpopt.writers._published import slot_labels, time_steps


def _ts(*s: str) -> pd.Series:
    return pd.to_datetime(pd.Series(list(s)), utc=True)


def test_slot_labels_say_date_and_hours():
    t0 = _ts("2015-09-06T05:00:00Z", "2015-09-06T05:00:00Z", "2015-09-06T00:00:00Z", "2015-09-06T15:00:00Z")
    t1 = _ts("2015-09-06T06:00:00Z", "2015-09-07T05:00:00Z", "2015-09-08T00:00:00Z", "2015-09-06T18:00:00Z")
    assert slot_labels(t0, t1).tolist() == [
        "2015-09-06 05:00–06:00 UTC", "2015-09-06 05:00 → 2015-09-07 05:00 UTC (24 h)",
        "2015-09-06 00:00 → 2015-09-08 00:00 UTC (2 d)", "2015-09-06 15:00–18:00 UTC"]


def test_steps_one_length_keeps_the_occupied_slots_mixed_lengths_every_finest_slot(monkeypatch):
    h = pd.Timedelta("1h")
    s, e = time_steps(_ts("2015-09-06T05:00:00Z", "2015-09-06T09:00:00Z"),
                      _ts("2015-09-06T06:00:00Z", "2015-09-06T10:00:00Z"), h)
    assert [t.hour for t in s] == [5, 9] and [t.hour for t in e] == [6, 10]
    t0, t1 = _ts("2015-09-06T00:00:00Z", "2015-09-06T03:00:00Z"), _ts("2015-09-07T00:00:00Z", "2015-09-06T04:00:00Z")
    s, e = time_steps(t0, t1, h)
    assert len(s) == 24 and all(b - a == h for a, b in zip(s, e))
    monkeypatch.setattr(_published, "MAX_STEPS", 10)  # too many finest slots: the nodes' own cut points
    s, e = time_steps(t0, t1, h)
    assert [t.hour for t in s] == [0, 3, 4] and [t.hour for t in e] == [3, 4, 0]


def test_recurring_windows_are_active_on_every_day_and_labelled_as_such():
    """Hour-of-day nodes (release.csv ``repeat_every``/``repeat_until``, models/hierarchy.md §2): a
    view marks them active at their hour of each day before ``repeat_until`` and at no other hour,
    and says so in words; the time control spans every day."""
    from dpopt.writers._published import active_at, published_view

    from .conftest import profile

    table, summary = profile()
    view = published_view(table, summary)
    rep = view.nodes[view.nodes["cycle"].notna()]
    until = "until 2015-09-09 05:00 UTC"
    assert rep["slot_label"].tolist() == [f"08:00–09:00 UTC every day from 2015-09-06 {until}",
                                          f"17:00–18:00 UTC every day from 2015-09-06 {until}"]
    assert max(view.step_ends) == pd.Timestamp("2015-09-09T05:00:00Z")
    for t in pd.date_range("2015-09-06T05:00:00Z", "2015-09-09T07:00:00Z", freq="30min"):
        on = active_at(view.nodes, t)[rep.index]
        before = t < pd.Timestamp("2015-09-09T05:00:00Z")
        assert on.tolist() == [before and t.hour == 8, before and t.hour == 17], t


def test_recurring_windows_over_a_long_period_never_claim_a_span_they_do_not_hold(monkeypatch):
    """Past MAX_STEPS finest slots the time control used to cut only at the nodes' first starts
    and last ends, so one 08:00 window was shown answering a 100-day span; with recurring windows it
    now steps over finest slots only (the first MAX_STEPS) and says where it stops."""
    from dpopt.writers._published import active_at, published_view

    from .conftest import profile

    monkeypatch.setattr(_published, "MAX_STEPS", 48)
    table, summary = profile()
    table = table.assign(repeat_until=table["repeat_until"].where(table["repeat_every"] == "", "2015-12-15T05:00:00Z"))
    view = published_view(table, summary)
    assert len(view.steps) == 48 and all(b - a == pd.Timedelta("1h") for a, b in zip(view.steps, view.step_ends))
    assert view.steps_cut == view.step_ends[-1] < pd.Timestamp("2015-12-15T05:00:00Z")
    rep = view.nodes["cycle"].notna().to_numpy()
    for t in view.steps:  # at every step a recurring node shows exactly in its own hour
        on = active_at(view.nodes, t)[rep]
        assert on.tolist() == [t.hour == 8, t.hour == 17]
    from dpopt.writers.html import render_html

    html = render_html(table, summary)
    assert f"The time control stops at {view.steps_cut:%Y-%m-%d %H:%M} UTC" in html
    monkeypatch.setattr(_published, "MAX_STEPS", 2000)
    assert "The time control stops" not in render_html(*profile())  # 72 slots: no cut, no note


@pytest.mark.parametrize("seed", range(4))
def test_active_counts_equal_the_sum_of_active_at_at_every_step(seed, monkeypatch):
    """The time control's counts in one vectorised pass (``active_counts``) against ``active_at``
    summed step by step: contiguous rows and recurring windows (daily, and weekly on a random share
    of rows), some steps outside every window; block sizes of 1 and the default."""
    from dpopt.writers._published import active_at, active_counts, published_view

    from .conftest import profile

    rng = np.random.default_rng(seed)
    table, summary = profile()
    weekly = rng.random(len(table)) < 0.3
    table = table.assign(repeat_every=np.where((table["repeat_every"] != "") & weekly, "P7D", table["repeat_every"]))
    view = published_view(table, summary)
    steps = list(pd.date_range("2015-09-05T20:00:00Z", "2015-09-20T00:00:00Z", freq="37min"))
    want = [int(active_at(view.nodes, t).sum()) for t in steps]
    assert sum(want) > 0 and min(want) == 0
    assert active_counts(view.nodes, steps).tolist() == want
    monkeypatch.setattr(_published, "_PAIRS", 1)
    assert active_counts(view.nodes, steps).tolist() == want
    assert active_counts(view.nodes, []).tolist() == []


@pytest.mark.parametrize("zone", ["UTC", "America/Chicago"])
def test_slot_labels_written_once_per_distinct_slot_equal_the_row_by_row_words(zone):
    """slot_labels words each distinct (start, end) once and maps them to the rows: the same text as
    writing every row (slots of 1 h, 3 h, a day and a week, repeated; a NaT row takes the row path)."""
    from dpopt.writers._published import _slot_words, slot_labels

    rng = np.random.default_rng(7)
    t0 = pd.Series(pd.Timestamp("2019-10-31", tz=zone) + pd.to_timedelta(rng.integers(0, 24 * 30, 3000), unit="h"))
    t1 = t0 + pd.to_timedelta(rng.choice([1, 3, 24, 24 * 7], 3000), unit="h")
    got = slot_labels(t0, t1)
    assert got.tolist() == _slot_words(t0, t1).tolist() and got.index.equals(t0.index)
    t1[5] = pd.NaT
    assert slot_labels(t0, t1).tolist() == _slot_words(t0, t1).tolist()
