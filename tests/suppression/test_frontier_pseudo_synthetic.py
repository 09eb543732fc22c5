"""Frontier E*(K) vs brute force; pseudo-user clipping (eq. (15)) vs enumeration; the synthetic family."""

from __future__ import annotations

import numpy as np
import pytest

from dpopt import Occupancy
from dpopt.calculus import grid_error_terms, grid_errors
from dpopt.solve import Status
from dpopt.suppression import (
    clip_user,
    heavy_hitter_occupancy,
    pseudo_user_clipping,
    suppression_frontier,
)

from ._reference import brute_force, random_tiny

EXACT_RTOL = 1e-12


@pytest.mark.parametrize("seed", range(4))
def test_frontier_equals_brute_force(seed):
    rng = np.random.default_rng(500 + seed)
    occ = random_tiny(rng, users=5, grids=3, max_count=6)
    U, eps = 10.0, 0.5
    _, _, (Ks, errs) = brute_force(occ, U, eps, np.inf)
    fr = suppression_frontier(occ, U, eps, degradations=range(1, occ.degradation + 1))
    for p in fr.points:
        ok = Ks <= p.degradation
        expect = float(errs[ok].min()) if ok.any() else np.inf
        if np.isfinite(expect):
            assert p.status is Status.OPTIMAL
            assert p.error == pytest.approx(expect, rel=EXACT_RTOL)
            assert p.plan.degradation <= p.degradation
        else:
            assert p.status is Status.INFEASIBLE
    assert np.all(np.diff(fr.errors) <= 1e-9)


def test_frontier_default_range_starts_at_milp_optimum():
    occ = Occupancy.from_dense([[4, 3, 2], [1, 0, 0], [0, 2, 0], [0, 0, 3], [1, 1, 1]])
    fr = suppression_frontier(occ, 1.0, 1.0)
    assert fr.degradations[-1] == occ.degradation
    assert fr.points[0].error <= fr.error_bound * (1 + 1e-12)


def test_pseudo_user_matches_enumeration():
    rng = np.random.default_rng(9)
    occ = random_tiny(rng, users=6, grids=3, max_count=9)
    U, eps = 10.0, 0.7
    plan = clip_user(occ, U, eps, error_bound=float(grid_errors(occ, U, eps).max()) * 1.5)
    res = pseudo_user_clipping(occ, U, eps, plan)
    kept = occ.retained_matrix(list(plan.suppressed)).toarray()
    for g in range(occ.n_grids):
        c = kept[:, g][kept[:, g] > 0]
        N = occ.grid_totals[g]
        best = min(
            grid_error_terms([N], [np.minimum(c, m).sum()], [m], U, eps).error[0]
            for m in range(c.min(), c.max() + 1)
        )
        assert res.grid_errors[g] == pytest.approx(best, rel=EXACT_RTOL)
        assert c.min() <= res.clip[g] <= c.max()
    # m = Γ*_g reproduces the plan's own errors; eq. (15) never makes a grid worse
    np.testing.assert_allclose(res.errors_before, plan.grid_errors, rtol=EXACT_RTOL)
    assert np.all(res.grid_errors <= res.errors_before)


def test_synthetic_family_structure():
    occ = heavy_hitter_occupancy(np.random.default_rng(1), n_grids=6, q=0.05, gamma=3)
    L = 2**6 - 1
    assert occ.n_users == L and occ.n_grids == 6
    users = occ.users
    expected = 6 - np.floor(np.log2(users)).astype(int)
    np.testing.assert_array_equal(occ.user_occupancy, expected)
    again = heavy_hitter_occupancy(np.random.default_rng(1), n_grids=6, q=0.05, gamma=3)
    assert (occ.matrix != again.matrix).nnz == 0
    # heavy hitter: the largest count of each grid is (1 + γ) × a Geo draw, so divisible by 4
    assert np.all(occ.grid_max % 4 == 0)


@pytest.mark.parametrize("kwargs", [dict(q=0.0), dict(gamma=-1.0), dict(n_grids=0), dict(n_grids=30)])
def test_synthetic_bad_input(kwargs):
    with pytest.raises(ValueError):
        heavy_hitter_occupancy(np.random.default_rng(0), **kwargs)


def test_synthetic_needs_generator():
    with pytest.raises(ValueError, match="rng"):
        heavy_hitter_occupancy(0)


def test_frontier_reports_infeasible_degradation():
    # one user alone in two grids: keeping only one grid leaves the other empty (R = 0)
    occ = Occupancy.from_dense([[1, 1]])
    fr = suppression_frontier(occ, 1.0, 1.0, degradations=[1, 2])
    assert fr.points[0].status is Status.INFEASIBLE and fr.points[0].error == np.inf
    assert fr.points[1].status is Status.OPTIMAL
    assert fr.table()[1]["status"] == "optimal"
    with pytest.raises(ValueError, match="degradations"):
        suppression_frontier(occ, 1.0, 1.0, degradations=[3])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [(dict(time_limit=-1.0), "time_limit"), (dict(max_solves=0), "max_solves"),
     (dict(error_bound=0.0), "error_bound"), (dict(epsilon=np.inf), "epsilon")],
)
def test_frontier_bad_input(kwargs, match):
    occ = Occupancy.from_dense([[1, 1], [2, 0]])
    args = dict(bound=1.0, epsilon=1.0) | kwargs
    with pytest.raises(ValueError, match=match):
        suppression_frontier(occ, args.pop("bound"), args.pop("epsilon"), **args)


def test_frontier_solve_cap_reports_iteration_limit_with_bracket():
    rng = np.random.default_rng(501)
    occ = random_tiny(rng, users=5, grids=3, max_count=6)
    exact = suppression_frontier(occ, 10.0, 0.5, degradations=[1, 2])
    capped = suppression_frontier(occ, 10.0, 0.5, degradations=[1, 2], max_solves=1)
    for p, q in zip(exact.points, capped.points):
        if q.status is Status.OPTIMAL:
            assert q.error == pytest.approx(p.error, rel=EXACT_RTOL)
        elif q.status is Status.ITERATION_LIMIT:  # a proven bracket around the exact value
            assert q.lower <= p.error * (1 + EXACT_RTOL) and p.error <= q.error * (1 + EXACT_RTOL)
        else:
            assert q.status is Status.INFEASIBLE and p.status is Status.INFEASIBLE
    assert any(q.status is Status.ITERATION_LIMIT for q in capped.points)


@pytest.mark.parametrize(("suppressed", "match"), [(5, "suppressed"), ([(9, 0)], "user")])
def test_pseudo_user_bad_input(suppressed, match):
    occ = Occupancy.from_dense([[2, 2], [2, 0], [0, 30]])
    with pytest.raises(ValueError, match=match):
        pseudo_user_clipping(occ, 1.0, 1.0, suppressed)


def test_pseudo_user_emptied_grid_is_infinite():
    occ = Occupancy.from_dense([[2, 2], [2, 0], [0, 30]])
    res = pseudo_user_clipping(occ, 1.0, 1.0, [(0, 0), (1, 0)])
    assert res.grid_errors[0] == np.inf and res.max_error == np.inf and res.clip[0] == 0


def test_frontier_total_time_budget_reports_brackets():
    rng = np.random.default_rng(502)
    occ = random_tiny(rng, users=5, grids=3, max_count=6)
    ks = range(1, occ.degradation + 1)
    exact = suppression_frontier(occ, 10.0, 0.5, degradations=ks, time_limit=None)
    spent = suppression_frontier(occ, 10.0, 0.5, degradations=ks, time_limit=0.0)
    assert all(q.status is Status.TIME_LIMIT and q.solves == 0 for q in spent.points)
    for p, q in zip(exact.points, spent.points):  # a proven (if wide) bracket around E*(K)
        assert q.lower <= p.error * (1 + EXACT_RTOL) and p.error <= q.error
    assert len(spent.log) == len(spent.points)


def test_frontier_progress_bar_and_log(capsys):
    rng = np.random.default_rng(503)
    occ = random_tiny(rng, users=5, grids=3, max_count=6)
    fr = suppression_frontier(occ, 10.0, 0.5, progress=True)
    assert "frontier" in capsys.readouterr().err
    assert [e["K"] for e in fr.log] == [p.degradation for p in fr.points]
    assert [e["status"] for e in fr.log] == [Status(p.status).value for p in fr.points]
    quiet = suppression_frontier(occ, 10.0, 0.5)
    assert capsys.readouterr().err == "" and len(quiet.log) == len(quiet.points)


def test_a_point_a_limit_stopped_carries_a_plan_that_says_so():
    """Where a limit stops a frontier point (here the cap of one feasibility MILP per point), its
    plan is the best found (possibly a smaller K's); it carries the point's status and its bracket's
    gap, not the status of the feasibility solve that found it (which read "optimal" on a point
    nothing proved). Solved points keep theirs."""
    occ = Occupancy.from_dense([[5, 4, 3], [2, 0, 0], [0, 3, 0], [0, 0, 4], [1, 1, 0]])
    capped = suppression_frontier(occ, 65.0, 1.0, degradations=[1, 2, 3], max_solves=1).points
    stopped = [pt for pt in capped if pt.status != "optimal" and pt.plan is not None]
    assert stopped  # the case is not vacuous
    for pt in stopped:
        assert pt.plan.status == pt.status and pt.plan.gap == pytest.approx((pt.error - pt.lower) / pt.error)
        assert pt.plan.gap > 0 and pt.plan.max_error == pytest.approx(pt.error) and pt.plan.degradation <= pt.degradation
    for pt in suppression_frontier(occ, 65.0, 1.0, degradations=[1, 2, 3]).points:
        assert pt.status == "optimal" and pt.plan.status == "optimal" and pt.plan.gap == 0.0
