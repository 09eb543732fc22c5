"""Withheld variances say one reason each, in release.csv's own words, in every output (report.html's
summary, its tooltips and table, the console), and the headline says "mean" when no variance is
published. Expected counts come from the table with pandas, not from the writers."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from dpopt.estimation.direct import VARIANCE_NEGATIVE_REASON, VARIANCE_WITHHELD_REASON
from dpopt.writers.console import console_summary
from dpopt.writers.html import render_html

from .conftest import load, multires


def _section(page: str, sid: str) -> str:
    m = re.search(rf'<section id="{sid}">(.*?)</section>', page, re.S)
    assert m, sid
    return re.sub(r"<[^>]+>", "", m.group(1))


def _with_reasons() -> tuple[pd.DataFrame, dict]:
    """The user fixture as the estimator now writes it: a negative noisy variance withheld with its
    reason, whole-range intervals with theirs, the rest published."""
    t, s = load("user")
    t = t.copy()
    neg = t["variance_raw"] < 0
    whole = ~neg & (t["variance_error_bound"] >= 3600)
    t["variance_released"] = ~(neg | whole)
    t["variance_withheld_reason"] = ""
    t.loc[neg, "variance_withheld_reason"] = VARIANCE_NEGATIVE_REASON
    t.loc[whole, "variance_withheld_reason"] = VARIANCE_WITHHELD_REASON
    t.loc[neg | whole, ["variance", "variance_raw", "variance_error_bound"]] = float("nan")
    return t, s


@pytest.mark.parametrize("case", ["reasons", "multires"])
def test_one_reason_per_withheld_variance_same_words_everywhere(case):
    table, summary = _with_reasons() if case == "reasons" else multires()
    rel = table[table["released"].astype(bool)]
    hidden = rel[~rel["variance_released"].astype(bool)]
    want = hidden["variance_withheld_reason"].value_counts()
    assert len(hidden) and want.sum() == len(hidden)
    page = render_html(table, summary, unit="km/h", tiles=None)
    text = _section(page, "summary")
    import html as _h

    text = _h.unescape(text)
    for why, k in want.items():
        assert f"{why} ({k} cell{'s' if k > 1 else ''})" in text
    assert f"The variance of {len(hidden)} published cell(s) was withheld" in text
    assert "as wide as its whole range" not in text  # the old, second reason is gone
    # the table's column and each tooltip carry the row's one reason
    for why in want.index:
        assert _h.escape(f"variance withheld: {why}") in page
    console = console_summary(summary, {}, unit="km/h", table=table)
    line = next(x for x in console.splitlines() if x.startswith("variance"))
    shown = len(rel) - len(hidden)
    assert f"published in {shown} of {len(rel)} cells" in line if shown else "not published (mean only)" in line
    for why, k in want.items():
        assert f"{why} ({k})" in line


def test_headline_says_mean_when_no_variance_is_published():
    table, summary = _with_reasons()
    table = table.assign(variance_released=False, variance=float("nan"),
                         variance_withheld_reason=VARIANCE_NEGATIVE_REASON)
    what = _section(render_html(table, summary, tiles=None), "summary")
    assert "What: the mean of the value" in what and "variance of the value" not in what
    line = next(x for x in console_summary(summary, {}, table=table).splitlines() if x.startswith("variance"))
    assert line.split(None, 1)[1].startswith("not published (mean only): " + VARIANCE_NEGATIVE_REASON)
    # with some variance published the headline names both
    t2, s2 = multires()
    assert "What: the mean and variance of the value" in _section(render_html(t2, s2, tiles=None), "summary")
