"""`time_limit` is a hard bound on the planner's HiGHS solves.

Two layers: :func:`dpopt.solve.highs.solve_highs` interrupts HiGHS through its simplex/IPM/MIP
interrupt callbacks at ``deadline``; the planner solves large models in a child process killed at
the deadline (:mod:`dpopt.solve.isolated`), because HiGHS checks no interrupt in presolve and the
MIP set-up. No assertion on seconds: the tests check that the callback fired, that a killed solve
leaves the greedy plan with status ``time_limit``, and that the isolated solve gives the same plan.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from dpopt.budget import planner, plan_budget
from dpopt.solve import isolated
from dpopt.solve import ModelBuilder, Status, solve
from tests.budget._synthetic import city_occupancy


def market_split(m: int, n: int, seed: int = 1):
    """Cornuéjols–Dawande market split: min Σ|A x − d| over binary x (hard for branch and bound)."""
    rng = np.random.default_rng(seed)
    A = rng.integers(0, 100, (m, n))
    d = (A.sum(1) // 2).astype(float)
    b = ModelBuilder(name="market_split", sense="min")
    x = b.add_cols("x", n, lower=0, upper=1, integer=True)
    sp = b.add_cols("sp", m, lower=0, upper=np.inf, cost=1.0)
    sm = b.add_cols("sm", m, lower=0, upper=np.inf, cost=1.0)
    r, c = np.nonzero(A)
    b.add_rows("split", rows=np.concatenate([r, np.arange(m), np.arange(m)]), cols=np.concatenate([x[c], sp, sm]),
               vals=np.concatenate([A[r, c], np.ones(m), -np.ones(m)]).astype(float), lower=d, upper=d, count=m)
    return b.build()


def test_deadline_interrupts_highs_through_the_callback():
    model = market_split(4, 30)
    # the deadline has passed: the first interrupt check stops HiGHS; its own limit (60 s) cannot
    res = solve(model, time_limit=60.0, deadline=time.perf_counter())
    assert res.status is Status.TIME_LIMIT
    assert res.info["interrupted"] == 1.0
    assert res.raw_status == "Interrupted by user"
    free = solve(model, time_limit=60.0, options={"mip_max_nodes": 1})  # no deadline: no callback
    assert free.info["interrupted"] == 0.0 and free.status is Status.SOLUTION_LIMIT  # node limit


def test_deadline_in_branch_and_bound_keeps_the_incumbent_and_gap():
    model = market_split(5, 40)
    res = solve(model, time_limit=60.0, deadline=time.perf_counter() + 0.5)
    assert res.status is Status.TIME_LIMIT and res.info["interrupted"] == 1.0
    if res.x is not None:  # an incumbent: a feasible point, its objective and a gap against the bound
        assert model.max_violation(res.x) <= 1e-6
        assert res.objective >= res.bound - 1e-9
        assert res.gap == pytest.approx(abs(res.objective - res.bound) / max(1.0, abs(res.objective)))


def _plans_equal(a, b) -> bool:
    return bool(np.array_equal(a.plan.released, b.plan.released)
                and (a.plan.retained != b.plan.retained).nnz == 0
                and np.array_equal(a.plan.budget, b.plan.budget))


@pytest.mark.slow
def test_a_solver_that_never_answers_is_killed_and_the_greedy_plan_returned(monkeypatch):
    occ = city_occupancy(300, seed=3)
    solved = plan_budget(occ, 120.0, 10.0, target=20.0, method="milp", time_limit=60.0)
    monkeypatch.setattr(planner, "ISOLATE_COLUMNS", 0)  # solve this small model in a child process
    monkeypatch.setattr(isolated, "_CHILD", "import time; time.sleep(600)")  # HiGHS stuck in presolve
    bp = plan_budget(occ, 120.0, 10.0, target=20.0, method="milp", time_limit=3.0)
    assert bp.info["solve"]["status"] == "killed"
    assert bp.info["isolated"]["killed"] is True
    assert bp.status is Status.TIME_LIMIT
    greedy = plan_budget(occ, 120.0, 10.0, target=20.0, method="greedy")
    assert _plans_equal(bp, greedy)  # the greedy plan, as when the MILP is skipped
    assert not _plans_equal(solved, greedy)  # (the MILP's own plan differs here)
    assert bp.plan.total_cost <= 10.0 * (1 + 1e-9)
    assert bp.coverage == greedy.coverage and bp.coverage_bound >= bp.coverage
    assert bp.gap == pytest.approx((bp.coverage_bound - bp.coverage) / max(1.0, bp.coverage))


def test_isolated_solve_gives_the_in_process_plan(monkeypatch):
    occ = city_occupancy(300, seed=3)
    here = plan_budget(occ, 120.0, 10.0, target=20.0, method="milp", time_limit=60.0)
    monkeypatch.setattr(planner, "ISOLATE_COLUMNS", 0)
    there = plan_budget(occ, 120.0, 10.0, target=20.0, method="milp", time_limit=60.0)
    assert "isolated" not in here.info and there.info["isolated"]["killed"] is False
    assert here.status is Status.OPTIMAL and there.status is Status.OPTIMAL
    assert _plans_equal(here, there) and here.coverage == there.coverage


@pytest.mark.slow
def test_hierarchy_plan_keeps_its_greedy_choice_when_the_solver_is_killed(monkeypatch):
    from dpopt.budget.hierarchy import plan_hierarchy

    occ = city_occupancy(300, seed=3)
    G = occ.n_grids
    anc = np.array([np.arange(G), np.arange(G) // 4, np.arange(G) // 16])
    greedy = plan_hierarchy(occ, anc, 120.0, 10.0, target=10.0, method="greedy")
    solved = plan_hierarchy(occ, anc, 120.0, 10.0, target=10.0, time_limit=60.0)
    assert solved.status is Status.OPTIMAL and "isolated" not in solved.info
    assert not np.array_equal(solved.plan.released, greedy.plan.released)  # the MILP changes the choice
    monkeypatch.setattr(planner, "ISOLATE_COLUMNS", 0)
    monkeypatch.setattr(isolated, "_CHILD", "import time; time.sleep(600)")
    hp = plan_hierarchy(occ, anc, 120.0, 10.0, target=10.0, time_limit=2.0)
    assert hp.info["solve"]["status"] == "killed" and hp.status is Status.TIME_LIMIT
    assert np.array_equal(hp.plan.released, greedy.plan.released)
    assert hp.plan.total_cost <= 10.0 * (1 + 1e-9)


def test_a_failing_solver_process_raises(monkeypatch):
    model = market_split(2, 6)
    monkeypatch.setattr(isolated, "_CHILD", "raise SystemExit('highs exploded')")
    now = time.perf_counter()
    with pytest.raises(RuntimeError, match="highs exploded"):
        isolated.solve_isolated(model, deadline=now + 30, kill_at=now + 30)


def test_in_process_solves_get_a_deadline_inside_the_time_limit(monkeypatch):
    seen = []
    real = planner.solve

    def spy(model, **kw):
        seen.append((time.perf_counter(), kw.get("deadline"), kw.get("time_limit")))
        return real(model, **kw)

    monkeypatch.setattr(planner, "solve", spy)
    occ = city_occupancy(300, seed=3)
    bp = plan_budget(occ, 120.0, 10.0, target=20.0, method="milp", time_limit=30.0)
    t0 = time.perf_counter() - bp.solve_time  # no earlier than the plan's own start
    assert len(seen) == 1 and bp.info["solve"]["interrupted"] == 0.0  # solved before its deadline
    called, deadline, backstop = seen[0]
    assert called < deadline <= t0 + 30.0  # the callback's deadline is inside the plan's limit
    # time_limit = (deadline - now) + backstop, with now read by the planner before the call and
    # after the plan's start: bounded by the two clocks the test reads, not by a tolerance
    left = backstop - isolated.BACKSTOP_SECONDS
    assert deadline - called - 1e-9 <= left <= deadline - t0 + 1e-9
    free = plan_budget(occ, 120.0, 10.0, target=20.0, method="milp", time_limit=None)
    assert seen[-1][1] is None and seen[-1][2] is None and _plans_equal(bp, free)
