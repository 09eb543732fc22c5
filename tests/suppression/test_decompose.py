"""City-scale strategy: exact pattern oracle, certified Lagrangian bound, decomposition = MILP."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dpopt import DpoptInputError
from dpopt.calculus import grid_error_terms, grid_errors
from dpopt.solve import Status
from dpopt.suppression import heavy_hitter_occupancy, solve_suppression, verify_lower_bound
from dpopt.suppression.lagrange import PatternOracle

from ._reference import RTOL, brute_force, random_tiny


def _least_weight_brute(occ, U, eps, E, w, split="equal"):
    """Per grid: the least Σ w over retained sets whose error (foundation calculus) meets E."""
    dense = occ.to_dense()
    out = []
    for j in range(dense.shape[1]):
        present = np.flatnonzero(dense[:, j] > 0)
        counts = dense[present, j]
        best = np.inf
        for keep in itertools.product([0, 1], repeat=present.size):
            keep = np.array(keep, dtype=bool)
            if not keep.any():
                continue
            R, gmax = counts[keep].sum(), counts[keep].max()
            err = grid_error_terms(np.array([counts.sum()]), np.array([R]), np.array([gmax]), U, eps,
                                   split=split).error[0]
            if err <= E * (1 + RTOL):
                best = min(best, float(w[present[keep]].sum()))
        out.append(best)
    return np.array(out)


@pytest.mark.parametrize("seed", range(12))
def test_pattern_oracle_is_exact(seed):
    rng = np.random.default_rng(500 + seed)
    occ = random_tiny(rng, users=int(rng.integers(3, 8)), grids=3, max_count=7)
    U = float(rng.choice([1.0, 10.0]))
    eps = float(rng.choice([0.3, 1.0, 4.0]))
    split = str(rng.choice(["equal", "optimal"]))
    base = grid_errors(occ, U, eps, split=split)
    # E at BASELINE's max and at an attained single-grid value (boundary cases, parity holes)
    for E in (float(base.max()), float(np.sort(base)[-1]) * float(rng.uniform(0.6, 1.0))):
        w = rng.random(occ.n_users) * (rng.random(occ.n_users) < 0.8)
        want = _least_weight_brute(occ, U, eps, E, w, split)
        if not np.all(np.isfinite(want)):
            continue  # no plan meets E in some grid
        oracle = PatternOracle(occ, U, eps, E, split)
        cost, keep = oracle.solve(w)
        assert cost == pytest.approx(want, abs=1e-12)
        # the minimiser is a plan meeting E, of exactly that weight
        pairs = [(occ.users[r], occ.grids[c]) for r, c in
                 zip(oracle.pair_user[~keep].tolist(), oracle.pair_grid[~keep].tolist())]
        err = grid_errors(occ, U, eps, suppressed=pairs or None, split=split)
        assert np.all(err <= E * (1 + RTOL))
        got = np.bincount(oracle.pair_grid[keep], weights=w[oracle.pair_user[keep]], minlength=3)
        assert got == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("seed", range(10))
def test_lagrangian_bound_is_valid_and_decomposition_is_exact(seed):
    rng = np.random.default_rng(900 + seed)
    occ = random_tiny(rng, users=int(rng.integers(3, 7)), grids=int(rng.integers(2, 4)), max_count=7)
    U = float(rng.choice([1.0, 10.0]))
    eps = float(rng.choice([0.3, 1.0, 4.0]))
    E = float(grid_errors(occ, U, eps).max())
    Kb, sb, _ = brute_force(occ, U, eps, E)
    for _ in range(5):  # any non-negative weights give a valid bound
        w = rng.random(occ.n_users) * (rng.random(occ.n_users) < 0.7)
        if w.sum() > 0:
            assert verify_lower_bound(occ, U, eps, w) <= Kb
    plan = solve_suppression(occ, U, eps, strategy="decomposition", tie_break_time_limit=None)
    assert plan.status is Status.OPTIMAL and plan.feasible
    assert plan.degradation == Kb and plan.suppressed_samples == sb
    lam = plan.info["lower_bound_weights"]
    assert verify_lower_bound(occ, U, eps, lam) == plan.info["lagrangian_bound"] <= Kb


def test_decomposition_matches_milp_on_the_synthetic_family():
    occ = heavy_hitter_occupancy(np.random.default_rng(4), n_grids=8, gamma=6)
    for eps in (0.2, 1.0):
        m = solve_suppression(occ, 65, eps, strategy="milp", tie_break=False)
        d = solve_suppression(occ, 65, eps, strategy="decomposition", tie_break=False)
        assert m.status is Status.OPTIMAL and d.status is Status.OPTIMAL
        assert d.degradation == m.degradation and d.feasible
        assert d.lower_bound == d.degradation
        # the certificate is recomputed without a solver and never exceeds the optimum
        lb = verify_lower_bound(occ, 65, eps, d.info["lower_bound_weights"])
        assert lb == d.info["lagrangian_bound"] <= m.degradation


def test_progress_log_and_bar(capsys):
    occ = heavy_hitter_occupancy(np.random.default_rng(5), n_grids=6, gamma=3)
    d = solve_suppression(occ, 65, 1.0, strategy="decomposition", tie_break=False, progress=True)
    log = d.info["log"]
    assert log and log[-1]["stage"] == "re-checked" and log[-1]["incumbent"] == d.degradation
    assert all(e["elapsed"] >= 0 for e in log)
    assert [e["elapsed"] for e in log] == sorted(e["elapsed"] for e in log)
    assert any(e["stage"] == "column generation" or e["stage"] == "subgradient" for e in log)
    assert "suppress" in capsys.readouterr().err  # the tqdm bar went to stderr
    quiet = solve_suppression(occ, 65, 1.0, strategy="milp", tie_break=False)
    assert quiet.info["log"][-1]["stage"] == "re-checked"
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("weights, match", [
    (np.zeros(3), "weights"), (-np.ones(3), "weights"), (np.ones(2), "weights"),
    (np.array([1.0, np.nan, 1.0]), "weights"),
])
def test_verify_lower_bound_rejects_bad_weights(weights, match):
    occ = random_tiny(np.random.default_rng(1), users=3, grids=2)
    with pytest.raises(DpoptInputError, match=match):
        verify_lower_bound(occ, 1.0, 1.0, weights)


def test_strategy_is_validated():
    occ = random_tiny(np.random.default_rng(1), users=3, grids=2)
    with pytest.raises(DpoptInputError, match="strategy"):
        solve_suppression(occ, 1.0, 1.0, strategy="magic")


def test_decomposition_falls_back_to_the_compact_milp(monkeypatch):
    """A weak bound and no local search: the compact MILP (warm start, K ≥ bound) closes the gap."""
    from dpopt.suppression import decompose

    occ = heavy_hitter_occupancy(np.random.default_rng(6), n_grids=8, gamma=6)
    want = solve_suppression(occ, 65, 0.5, strategy="milp", tie_break=False)
    real = decompose.pattern_bound
    monkeypatch.setattr(decompose, "pattern_bound",
                        lambda oracle, **kw: real(oracle, **(kw | dict(subgradient_steps=1, max_lp_solves=0))))
    monkeypatch.setattr(decompose, "local_search", lambda oracle, keep, target, **kw: keep)
    d = solve_suppression(occ, 65, 0.5, strategy="decomposition", tie_break=False)
    stages = [e["stage"] for e in d.info["log"]]
    assert "milp" in stages and "local search" not in stages
    assert d.status is Status.OPTIMAL and d.degradation == want.degradation and d.feasible
    assert d.lower_bound == d.degradation
    assert verify_lower_bound(occ, 65, 0.5, d.info["lower_bound_weights"]) == d.info["lagrangian_bound"]
    first = next(e for e in d.info["log"] if e["stage"] == "milp")
    assert first["incumbent"] > d.degradation  # the oracle plan was not optimal: the MILP was needed


def test_decomposition_with_no_time_returns_the_greedy_plan_checked_and_what_it_proved():
    """At time_limit = 0 the first oracle call stops at once (CLIP-USER's plan is at hand): the plan
    is CLIP-USER's, re-checked, with the bound K ≥ 1 and no Lagrangian certificate; the tie-break,
    with no time left, does not run."""
    from dpopt.suppression import clip_user

    occ = heavy_hitter_occupancy(np.random.default_rng(6), n_grids=8, gamma=6)
    want = solve_suppression(occ, 65, 0.5, strategy="milp", tie_break=False)
    greedy = clip_user(occ, 65, 0.5, error_bound=want.error_bound)
    d = solve_suppression(occ, 65, 0.5, strategy="decomposition", time_limit=0.0)
    assert d.feasible and d.degradation == greedy.degradation >= want.degradation
    assert d.lower_bound == 1 and "lower_bound_weights" not in d.info
    assert d.status is Status.TIME_LIMIT and d.gap == pytest.approx((d.degradation - 1) / d.degradation)
    assert d.info["tie_break"] == "time_limit"


def test_an_oracle_call_stops_at_its_deadline_between_and_inside_grids():
    """A deadline already past: solve() answers None after at most one grid, and a grid of more than
    64 users stops inside its programme; without a deadline the answers are unchanged (a fuzz run:
    6,000 users × 300 grids, time_limit 0.1 s, 3.2 s taken, most of it in one oracle call)."""
    import time

    occ = heavy_hitter_occupancy(np.random.default_rng(3), n_grids=12, gamma=4)
    E = float(grid_errors(occ, 65, 1.0).max())
    oracle = PatternOracle(occ, 65, 1.0, E)
    w = np.random.default_rng(0).random(occ.n_users)
    calls = []
    real = oracle.grid_pattern
    oracle.grid_pattern = lambda g, pw, deadline=None: calls.append(g) or real(g, pw, deadline)
    assert oracle.solve(w, deadline=time.perf_counter() - 1.0) is None and len(calls) == 1
    cost, keep = oracle.solve(w)
    cost2, keep2 = oracle.solve(w, deadline=time.perf_counter() + 3600.0)
    assert np.array_equal(cost, cost2) and np.array_equal(keep, keep2)
    big = int(np.argmax(np.diff(oracle.grid_ptr)))
    assert np.diff(oracle.grid_ptr)[big] > 64
    assert real(big, w[oracle.pair_user], time.perf_counter() - 1.0) is None


def test_the_decomposition_runs_without_a_time_limit():
    """Without a time limit the decomposition's pattern LP is given the time left of an unlimited
    deadline, +inf: read as no limit (a check that refused inf stopped `--plan milp` releases)."""
    import numpy as np

    import dpopt

    occ = dpopt.heavy_hitter_occupancy(np.random.default_rng(1), gamma=1.0, q=0.05)
    plan = dpopt.solve_suppression(occ, 65.0, 1.0, strategy="decomposition")
    assert plan.status == "optimal"
    assert plan.degradation == dpopt.solve_suppression(occ, 65.0, 1.0, strategy="milp").degradation


def test_the_decomposition_never_returns_a_plan_worse_than_clip_user(monkeypatch):
    """With no time for the compact MILP, the decomposition returned its own plan even where CLIP-USER
    had a better one (a fuzz run: 6,000 users × 300 grids, time_limit 0.5 s, K = 3 against the
    greedy's 2). CLIP-USER's plan (or the caller's warm start) is kept where it is better."""
    from dpopt.suppression import clip_user, decompose

    occ = heavy_hitter_occupancy(np.random.default_rng(0), n_grids=8, gamma=2)
    greedy = clip_user(occ, 65, 1.0)
    real = decompose.pattern_bound
    monkeypatch.setattr(decompose, "pattern_bound",
                        lambda oracle, **kw: real(oracle, **(kw | dict(subgradient_steps=1, max_lp_solves=0))))
    monkeypatch.setattr(decompose, "local_search", lambda oracle, keep, target, **kw: keep)
    d = solve_suppression(occ, 65, 1.0, strategy="decomposition", tie_break=False, time_limit=0.0)
    assert "milp" not in [e["stage"] for e in d.info["log"]]  # no time for the compact MILP
    assert d.feasible and d.degradation <= greedy.degradation == 2  # the weakened decomposition's own plan: K = 3
    assert d.info["greedy_degradation"] == greedy.degradation
    assert d.lower_bound <= d.degradation
