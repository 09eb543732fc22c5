"""Result objects: one-screen reprs and pandas tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dpopt
from dpopt.arrays.length import CountProfile

COUNTS = np.arange(1, 2001)


def _one_screen(obj) -> None:
    text = repr(obj)
    assert "\n" not in text and len(text) < 400, text
    assert "array(" not in text


def test_reprs_are_one_line():
    plan = dpopt.optimal_clipping(COUNTS, 65.0, 1.0)
    for obj in (plan, plan.certificate, dpopt.best_fit(COUNTS, 40), dpopt.wrap_around(COUNTS, 40),
                dpopt.optimal_array_length(COUNTS, 65.0, 1.0), CountProfile.from_counts(COUNTS),
                dpopt.solve_clipping(COUNTS[:50], 65.0, 1.0)):
        _one_screen(obj)


def test_clipping_plan_to_frame_matches_the_plan():
    counts = np.array([6, 3, 2, 1])
    plan = dpopt.optimal_clipping(counts, 65.0, 0.8)
    df = plan.to_frame()
    assert isinstance(df, pd.DataFrame) and list(df.index) == [0, 1, 2, 3]
    np.testing.assert_array_equal(df["lower"], plan.lower)
    np.testing.assert_array_equal(df["upper"], plan.upper)
    assert df["clipped"].sum() == plan.n_clipped
    assert df["lam"].sum() == pytest.approx(1 / 0.8)  # Σ λ = d/ε (ERRATA E4)
    cert = plan.certificate.to_frame()
    np.testing.assert_allclose(cert["value"], 65.0 * counts)


def test_grouping_to_frame_is_per_user_in_input_order():
    counts = np.array([5, 1, 7, 3])
    g = dpopt.best_fit(counts, 4)
    df = g.to_frame()
    np.testing.assert_array_equal(df["retained"], np.minimum(counts, 4))
    assert sorted(df["position"]) == [0, 1, 2, 3]
    assert df.loc[df["position"] == 0].index[0] == 2  # the largest count is placed first
    assert (df["arrays"] == 1).all()
