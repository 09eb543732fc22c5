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


@pytest.fixture(params=["occupancy", "user", "multires"])
def published(request) -> tuple[str, pd.DataFrame, dict]:
    if request.param == "multires":
        return (request.param, *multires())
    return (request.param, *load(request.param))
