"""The release planners return GridPlan; the release consumes it and refuses a foreign bound."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import scipy.sparse as sp

from dpopt import DpoptInputError, Occupancy
from dpopt.calculus import grid_error_terms
from dpopt.noise import epsilon_rational
from dpopt.plan import GridPlan
from dpopt.release import (NoiseOptions, PerGridBudget, PublicOccupancyOptions, baseline_plan, contributions, greedy_plan,
                           milp_plan, pseudo_user_plan, release, release_aggregate, write_release)
from dpopt.solve.result import Status

# 4 users x 3 grids (seed 002 style): user 0 is heavy everywhere
OCC = Occupancy.from_dense([[6, 5, 1], [1, 1, 0], [2, 0, 3], [0, 1, 1]])
U, EPS = 65.0, 1.0


@pytest.mark.parametrize("planner", [baseline_plan, greedy_plan, milp_plan])
def test_planners_return_a_grid_plan_the_accounting_recounts(planner):
    p = planner(OCC, U, EPS)
    assert isinstance(p, GridPlan) and p.unit == "epsilon" and p.n_grids == 3 and p.n_users == 4
    p.check(OCC.matrix)
    kept = p.retained.toarray() > 0
    # independent recount: K = the most grids a user keeps, budget ε per released grid
    assert p.degradation == int(kept.sum(axis=1).max())
    assert p.total_cost == pytest.approx(p.degradation * EPS)
    assert np.array_equal(p.released, kept.any(axis=0))


def test_baseline_budgets_are_the_equal_split_and_status_optimal():
    p = baseline_plan(OCC, U, EPS)
    assert p.status is Status.OPTIMAL and p.gap == 0.0
    assert np.array_equal(p.retained.toarray(), OCC.to_dense())
    np.testing.assert_array_equal(p.budget_mean, [0.5, 0.5, 0.5])
    np.testing.assert_array_equal(p.budget_variance, [0.5, 0.5, 0.5])
    N = OCC.grid_totals
    assert p.error_bound == pytest.approx(grid_error_terms(N, N, OCC.grid_max, U, EPS).error.max())


def test_optimal_split_budgets_never_exceed_epsilon_in_exact_rationals():
    rng = np.random.default_rng(3)
    occ = Occupancy.from_dense(rng.integers(0, 9, (12, 40)) * (rng.random((12, 40)) < 0.5) + np.eye(12, 40, dtype=int))
    for eps in (1.0, 0.3, 0.7, 2.9):
        p = baseline_plan(occ, U, eps, split="optimal")
        ok = p.budget_variance > 0
        spent = [epsilon_rational(a) + epsilon_rational(b) for a, b in zip(p.budget_mean[ok], p.budget_variance[ok])]
        assert all(s <= epsilon_rational(eps) for s in spent)


def test_unknown_planner_option_is_a_type_error():
    with pytest.raises(TypeError):
        greedy_plan(OCC, U, EPS, time_limit=3)
    with pytest.raises(TypeError):
        baseline_plan(OCC, U, EPS, tie_break=True)


def test_pseudo_user_plan_truncates_to_the_array_length():
    g = greedy_plan(OCC, U, EPS)
    p = pseudo_user_plan(g, OCC, U, EPS)
    assert p.array_length is not None and p.array_length.shape == (3,)
    before, after = g.retained.toarray(), p.retained.toarray()
    want = np.where(before > 0, np.minimum(before, p.array_length[None, :]), 0)
    np.testing.assert_array_equal(after, want)
    assert p.method == g.method and p.status == g.status


def test_release_consumes_a_ready_grid_plan(records):
    agg, ing = contributions(records, bound=100)
    occ = agg.occupancy()
    plan = greedy_plan(occ, 100, 1.0)
    a = release_aggregate(agg, PerGridBudget(1.0), PublicOccupancyOptions(plan=plan), noise=NoiseOptions(seed=3),
                          ingest=ing)
    b = release_aggregate(agg, PerGridBudget(1.0), PublicOccupancyOptions(plan="greedy"), noise=NoiseOptions(seed=3),
                          ingest=ing)
    np.testing.assert_array_equal(a.table["mean"], b.table["mean"])
    assert a.summary.degradation == plan.degradation
    with pytest.raises(DpoptInputError, match="pseudo_users"):
        release_aggregate(agg, PerGridBudget(1.0), PublicOccupancyOptions(plan=plan, pseudo_users=True), ingest=ing)
    # a plan that spends more than ε in a grid would make ε_total = K·ε a lie
    with pytest.raises(DpoptInputError, match="above `epsilon`"):
        release_aggregate(agg, PerGridBudget(0.5), PublicOccupancyOptions(plan=plan), noise=NoiseOptions(seed=3),
                          ingest=ing)


def test_release_refuses_a_bound_other_than_the_aggregates(records):
    """An aggregate clipped with U = 120 released with bound = 1 would add noise 120x
    too small. Today's code accepted it; now the aggregate carries U and a different bound fails."""
    agg, ing = contributions(records, bound=120)
    assert agg.bound == 120.0 and agg.out_of_range == "clip"
    with pytest.raises(DpoptInputError, match=r"`bound` must be the U the aggregate"):
        release_aggregate(agg, PerGridBudget(1.0), bound=1, noise=NoiseOptions(seed=1), ingest=ing)
    r = release_aggregate(agg, PerGridBudget(1.0), noise=NoiseOptions(seed=1), ingest=ing)  # default: the aggregate's U
    assert r.summary.bound == 120.0


def test_last_line_check_of_the_retained_sums(records):
    """An aggregate that does not record its U (built by hand) released with a bound below its
    values: the mechanism finds S1 > U·R before adding noise."""
    agg, ing = contributions(records, bound=120)
    bare = dataclasses.replace(agg, bound=None, out_of_range=None)
    with pytest.raises(DpoptInputError, match="does not bound the retained values"):
        release_aggregate(bare, PerGridBudget(1.0), bound=1, noise=NoiseOptions(seed=1), ingest=ing)
    with pytest.raises(DpoptInputError, match="`bound` is required"):
        release_aggregate(bare, PerGridBudget(1.0), noise=NoiseOptions(seed=1), ingest=ing)


def test_summary_publishes_the_privacy_model_and_no_value_dependent_counts(tiny_records, tmp_path):
    df = tiny_records.copy()
    df.loc[1, "value"] = 500.0  # clipped: a value-dependent count
    r = release(df, bound=100, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(), noise=NoiseOptions(seed=1))
    assert r.diagnostics["ingest"]["clipped"] == 1 and set(r.diagnostics["timings"]) >= {"plan", "noise"}
    paths = write_release(r, tmp_path / "o", make_map=False)
    summary = json.loads(paths["summary"].read_text())
    assert summary["privacy_model"] == "public-occupancy" and "public" in summary["privacy_model_description"]
    assert "timings" not in summary
    for key in ("out_of_range", "clipped", "dropped_out_of_range"):
        assert key not in summary["ingest"]


def test_plan_retained_matrix_matches_the_pairs(records):
    agg, _ = contributions(records, bound=100)
    plan = greedy_plan(agg.occupancy(), 100, 1.0)
    dense = plan.retained.toarray()
    r = release_aggregate(agg, PerGridBudget(1.0), PublicOccupancyOptions(plan=plan), noise=NoiseOptions(seed=1))
    np.testing.assert_array_equal(r.gamma(), dense[agg.pair_user, agg.pair_grid])
    assert isinstance(plan.retained, sp.csr_array)


# ---------------------------------------------------------------------------------------------
# Gaussian noise (budget unit ρ): CLIP-USER and the MILP through the equal-split equivalence


def test_gaussian_grid_error_equals_laplace_error_at_the_equivalent_epsilon():
    """bias + √(2/π)(σ_μ + σ_Var), σ_i = Δ_i/√ρ  ==  bias + 2(Δ_μ + Δ_Var)/ε at ε = √(2πρ)."""
    from dpopt.calculus import gaussian_grid_error_terms
    from dpopt.privacy.planners import gaussian_equivalent_epsilon

    rng = np.random.default_rng(20261123)
    for _ in range(50):
        G = 20
        N = rng.integers(1, 200, G)
        R = np.minimum(N, rng.integers(1, 200, G))
        gmax = np.minimum(R, rng.integers(1, 50, G))
        rho = float(rng.uniform(1e-3, 5.0))
        gauss = gaussian_grid_error_terms(N, R, gmax, U, rho, split="equal").error
        lap = grid_error_terms(N, R, gmax, U, gaussian_equivalent_epsilon(rho), split="equal").error
        np.testing.assert_allclose(gauss, lap, rtol=1e-12)


@pytest.mark.parametrize("planner", [greedy_plan, milp_plan])
def test_gaussian_suppression_plans_are_the_laplace_plans_at_the_equivalent_epsilon(planner):
    from dpopt.privacy.planners import gaussian_equivalent_epsilon

    rho = 0.02
    g = planner(OCC, U, rho, mechanism="gaussian")
    lap = planner(OCC, U, gaussian_equivalent_epsilon(rho))
    assert g.unit == "rho" and np.array_equal(g.retained.toarray(), lap.retained.toarray())
    assert g.total_cost == pytest.approx(g.degradation * rho)
    assert np.all(g.budget[g.released] <= rho) and np.allclose(g.budget_mean[g.released], rho / 2)
    with pytest.raises(DpoptInputError, match="`split` must be 'equal'"):
        planner(OCC, U, rho, mechanism="gaussian", split="optimal")


def test_gaussian_budgets_sum_to_at_most_rho_in_exact_rationals():
    for rho in (0.3, 1 / 3, 2.0**-7 * 3, 7.77):
        p = baseline_plan(OCC, U, rho, mechanism="gaussian", split="optimal")
        assert p.unit == "rho"
        for g in np.flatnonzero(p.released):
            assert epsilon_rational(p.budget_mean[g]) + epsilon_rational(p.budget_variance[g]) <= epsilon_rational(rho)
