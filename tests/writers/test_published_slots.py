"""Slot spans in words and the time control's steps for mixed slot lengths (issues 21, 23)."""

from __future__ import annotations

import pandas as pd

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
