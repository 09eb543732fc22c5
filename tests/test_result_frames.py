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


def test_every_plan_and_frontier_has_a_summary_and_a_frame():
    """README: the plans and frontiers have summary() (a dict) and to_frame() (a table). GridPlan,
    BudgetPlan, BudgetFrontier and ArrayGrouping lacked one or both; their tables are checked against
    the objects' own arrays, recounted independently from the retained matrix."""
    rng = np.random.default_rng(3)
    dense_counts = rng.integers(1, 9, size=(20, 6)) * (rng.random((20, 6)) < 0.5)
    dense_counts[0] = 1  # every grid occupied
    occ = dpopt.Occupancy.from_dense(dense_counts)
    bp = dpopt.plan_budget(occ, 40.0, 6.0, target=12.0, method="greedy")
    frame = bp.to_frame()
    dense = bp.plan.retained.toarray()
    assert list(frame.columns[:5]) == ["released", "budget_mean", "budget_variance", "users_kept", "samples_kept"]
    np.testing.assert_array_equal(frame["users_kept"], (dense > 0).sum(axis=0))
    np.testing.assert_array_equal(frame["samples_kept"], dense.sum(axis=0))
    np.testing.assert_array_equal(frame["within_target"], bp.within_target)
    assert (frame.loc[frame["within_target"], "mean_bound"] <= frame.loc[frame["within_target"], "target"] + 1e-9).all()
    s = bp.plan.summary()
    assert s["released"] == int(frame["released"].sum()) and s["total_cost"] <= 6.0 + 1e-9
    assert s["degradation"] == int(((dense > 0) & frame["released"].to_numpy()).sum(axis=1).max())
    fr = dpopt.budget_frontier(occ, 40.0, 6.0, taus=[4.0, 12.0, 36.0])
    ft = fr.to_frame()
    np.testing.assert_array_equal(ft["tau"], [4.0, 12.0, 36.0])
    assert (np.diff(ft["coverage"]) >= -1e-9).all() and fr.summary()["points"] == 3
    assert fr.summary()["knee_coverage"] == float(ft.loc[ft["tau"] == fr.knee, "coverage"].iloc[0])
    g = dpopt.best_fit(COUNTS[:30], 40)
    assert g.summary() == {"method": g.method, "length": 40, "users": 30, "arrays": g.num_arrays,
                           "retained": int(g.to_frame()["retained"].sum()), "discarded": g.discarded}
