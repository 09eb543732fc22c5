"""Fixtures of the writer tests: small published release folders (a few rows of real releases of
the embedded Austin day, both privacy models) and a multi-resolution table built from them."""

from __future__ import annotations

import json
from pathlib import Path

import h3
import pandas as pd
import pytest

FIXTURES = Path(__file__).parent / "fixtures"


def load(model: str) -> tuple[pd.DataFrame, dict]:
    table = pd.read_csv(FIXTURES / f"{model}_release.csv")
    summary = json.loads((FIXTURES / f"{model}_summary.json").read_text(encoding="utf-8"))
    return table, summary


def multires() -> tuple[pd.DataFrame, dict]:
    """The user fixture as a multi-resolution release: its rows at resolution 7 plus two coarser
    nodes (resolution 6, two hours each), the optional columns of the hierarchical estimator, and
    hostile strings where data may carry text (they must be escaped)."""
    t, s = load("user")
    t = t.assign(h3_resolution=7, slot_end=pd.NaT, method="direct", variance_released=True,
                 variance_withheld_reason="")
    parent = h3.cell_to_parent("87489e346ffffff", 6)
    other = h3.cell_to_parent("87489e254ffffff", 6)
    extra = pd.DataFrame({
        "cell": [parent, other], "slot": ["2015-09-06T20:00:00Z", "2015-09-06T05:00:00Z"],
        "slot_end": ["2015-09-06T22:00:00Z", "2015-09-06T07:00:00Z"], "released": [True, True],
        "mean": [31.25, 18.5], "mean_error_bound": [4.75, 60.0], "variance": [210.0, 5.0],
        "variance_error_bound": [55.0, 3600.0], "noisy_count": [412, 77], "h3_resolution": [6, 6],
        "method": ["pooled <b>", "direct"], "variance_released": [True, False],
        "variance_withheld_reason": ["", "interval wider than range <img src=x onerror=alert(1)>"]})
    t.loc[0, "variance_released"] = False
    t.loc[0, "variance_withheld_reason"] = "interval wider than range"
    return pd.concat([t, extra], ignore_index=True), s


def profile() -> tuple[pd.DataFrame, dict]:
    """The multi-resolution table plus two hour-of-day nodes (models/hierarchy.md §2): resolution
    5 windows 08:00–09:00 and 17:00–18:00 UTC recurring every day until 2015-09-09 05:00 (the
    period of a three-day list), as release.csv publishes them."""
    t, s = multires()
    t = t.assign(repeat_every="", repeat_until="")
    cell = h3.cell_to_parent("87489e346ffffff", 5)
    extra = pd.DataFrame({
        "cell": [cell, cell], "slot": ["2015-09-06T08:00:00Z", "2015-09-06T17:00:00Z"],
        "slot_end": ["2015-09-06T09:00:00Z", "2015-09-06T18:00:00Z"], "repeat_every": ["P1D", "P1D"],
        "repeat_until": ["2015-09-09T05:00:00Z"] * 2, "released": [True, True], "mean": [21.5, 27.0],
        "mean_error_bound": [3.5, 4.0], "h3_resolution": [5, 5], "method": ["hierarchical"] * 2,
        "variance_released": [False, False], "variance_withheld_reason": ["clamped", "clamped"]})
    return pd.concat([t, extra], ignore_index=True), dict(s, resolution="adaptive")


@pytest.fixture(params=["occupancy", "user", "multires", "profile"])
def published(request) -> tuple[str, pd.DataFrame, dict]:
    if request.param in ("multires", "profile"):
        return (request.param, *(multires() if request.param == "multires" else profile()))
    return (request.param, *load(request.param))
