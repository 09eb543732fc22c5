"""``dpopt demo`` (release section) prints values in km/h only inside their range [0, U = 120]."""

from __future__ import annotations

import io
import re


def test_release_demo_prints_speeds_in_range():
    from dpopt.release.demo import demo

    buf = io.StringIO()
    demo(buf)
    text = buf.getvalue()
    speeds = [float(x) for x in re.findall(r"(?:^|[\s(=±-])(-?\d+(?:\.\d+)?) km/h", text, re.M)]
    assert speeds, text
    assert all(0 <= v <= 120 for v in speeds), text
