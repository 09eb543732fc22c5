"""`time_limit` is a hard bound on every model's HiGHS solve (:mod:`dpopt.solve.bounded`).

The suppression MILP of seed 002's own family, ``heavy_hitter_occupancy(rng(0), gamma=3, q=0.01)``
at U = 65, ε = 0.1, stays in HiGHS's presolve for minutes (no interrupt check there); the bounded
solve kills the stalled child and retries with presolve off within the same limit. The checks are
on the returned status and plan, and that the call returned before ``time_limit + 10 s`` (the
acceptance bound of the deadline itself, not a speed claim).
"""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

import dpopt
from dpopt.solve import ModelBuilder, Status, isolated, solve, solve_bounded
from dpopt.solve import bounded

LIMIT = 8.0
SLACK = 10.0


def knapsack(n: int, seed: int):
    rng = np.random.default_rng(seed)
    w = rng.integers(1, 30, n).astype(float)
    v = rng.integers(1, 30, n).astype(float)
    b = ModelBuilder(name="knapsack", sense="max")
    x = b.add_cols("x", n, lower=0, upper=1, integer=True, cost=v)
    b.add_rows("cap", rows=np.zeros(n, np.int64), cols=x, vals=w, lower=-np.inf, upper=w.sum() / 3, count=1)
    return b.build(), w, v


def brute_knapsack(w, v, cap):
    n = w.size
    best = 0.0
    for bits in range(1 << n):
        sel = np.array([(bits >> i) & 1 for i in range(n)], bool)
        if w[sel].sum() <= cap + 1e-9:
            best = max(best, v[sel].sum())
    return best


@pytest.mark.parametrize("seed", range(3))
def test_isolated_and_in_process_bounded_solves_equal_brute_force(seed):
    model, w, v = knapsack(10, seed)
    best = brute_knapsack(w, v, w.sum() / 3)
    for iso in (False, True):
        res = solve_bounded(model, time_limit=60.0, isolate=iso)
        assert res.status is Status.OPTIMAL and res.objective == pytest.approx(best)
        assert res.info["isolated"] == float(iso)
    assert solve_bounded(model).objective == pytest.approx(best)  # no limit: in this process


@pytest.mark.slow
def test_a_stalled_child_is_retried_with_the_fallback_then_killed(monkeypatch):
    model, w, v = knapsack(10, 0)
    monkeypatch.setattr(isolated, "_CHILD", "import time; time.sleep(600)")  # never reaches a check
    t0 = time.perf_counter()
    res = solve_bounded(model, time_limit=2.0, isolate=True)
    elapsed = time.perf_counter() - t0
    assert elapsed < 2.0 + bounded.KILL_GRACE_SECONDS + SLACK
    assert res.status is Status.TIME_LIMIT and res.x is None and res.gap == np.inf
    assert res.info["killed"] == 1.0 and res.info["stalled"] == 1.0  # the first try stalled, the fallback killed
    assert "presolve" in res.raw_status


@pytest.mark.slow
def test_the_fallback_answers_after_a_stall(monkeypatch):
    model, w, v = knapsack(10, 1)
    # the first try (presolve on) sleeps; the fallback (presolve off) runs the real child
    real = isolated._CHILD
    stall = ("import pickle, sys, time; job = pickle.load(open(sys.argv[1], 'rb'))\n"
             "if job['options'].get('presolve') != 'off': time.sleep(600)\n" + real)
    monkeypatch.setattr(isolated, "_CHILD", stall)
    res = solve_bounded(model, time_limit=6.0, isolate=True)
    assert res.status is Status.OPTIMAL and res.info["fallback"] == 1.0 and res.info["stalled"] == 1.0
    assert res.objective == pytest.approx(brute_knapsack(w, v, w.sum() / 3))


def _hang_occupancy():
    return dpopt.heavy_hitter_occupancy(np.random.default_rng(0), gamma=3.0, q=0.01)


def test_the_presolve_hang_returns_within_the_limit():
    occ = _hang_occupancy()
    t0 = time.perf_counter()
    plan = dpopt.solve_suppression(occ, 65.0, 0.1, tie_break=False, time_limit=LIMIT)
    assert time.perf_counter() - t0 < LIMIT + SLACK
    assert plan.status in (Status.OPTIMAL, Status.TIME_LIMIT)
    assert plan.feasible and plan.lower_bound <= plan.degradation
    if plan.status is Status.TIME_LIMIT:
        assert plan.gap == pytest.approx((plan.degradation - plan.lower_bound) / max(1.0, plan.degradation))
    assert plan.info["solver_status"] and all(isinstance(s, str) for s in plan.info["solver_status"])


def test_the_presolve_hang_returns_within_the_limit_through_the_cli(tmp_path):
    occ = _hang_occupancy()
    coo = occ.matrix.tocoo()
    lines = ["user,grid,count"] + [f"{occ.users[r]},{occ.grids[c]},{v}" for r, c, v in
                                   zip(coo.row.tolist(), coo.col.tolist(), coo.data.tolist())]
    path = tmp_path / "occ.csv"
    path.write_text("\n".join(lines) + "\n")
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "dpopt.cli", "suppress", "--occupancy", str(path), "--bound", "65",
                          "--epsilon", "0.1", "--method", "milp", "--time-limit", str(LIMIT), "--no-tie-break",
                          "--solver-option", "mip_rel_gap=0", "--json"], capture_output=True, text=True,
                         timeout=LIMIT + 60)
    elapsed = time.perf_counter() - t0
    assert out.returncode == 0, out.stderr
    assert elapsed < LIMIT + SLACK + 5.0  # + interpreter start-up and reading the CSV
    import json

    data = json.loads(out.stdout)
    assert data["status"] in ("optimal", "time_limit")
    assert data["max_error"] <= data["error_bound"] * (1 + 1e-9) and data["lower_bound"] <= data["degradation"]


def test_solver_options_reach_highs_and_bad_ones_are_refused():
    model, w, v = knapsack(8, 2)
    res = solve_bounded(model, time_limit=30.0, options={"presolve": "off"})
    assert res.status is Status.OPTIMAL
    with pytest.raises(ValueError, match="no_such_option"):
        solve_bounded(model, time_limit=30.0, options={"no_such_option": 1})
    assert solve(model).objective == res.objective
