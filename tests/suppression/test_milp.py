"""The exact suppression MILP: brute force on tiny occupancies, exact run tables, greedy bound."""

from __future__ import annotations

import numpy as np
import pytest

from dpopt import Occupancy
from dpopt.calculus import grid_error_terms, grid_errors
from dpopt.solve import Status
from dpopt.suppression import (
    build_suppression_model,
    clip_user,
    heavy_hitter_occupancy,
    solve_suppression,
)
from dpopt.suppression.milp import feasible_runs

from ._reference import RTOL, brute_force, random_tiny


def _runs_brute(N, v, cap, U, eps, E, split):
    R = np.arange(v, cap + 1)
    err = grid_error_terms(np.full(R.size, N), R, np.full(R.size, v), U, eps, split=split).error
    return set(R[err <= E * (1 + RTOL)].tolist())


def test_feasible_runs_are_exact_and_not_always_intervals():
    rng = np.random.default_rng(3)
    n = 400
    N = rng.integers(2, 60, size=n)
    cap = np.array([rng.integers(1, x + 1) for x in N])
    v = np.array([rng.integers(1, c + 1) for c in cap])
    U = rng.choice([1.0, 3.0, 65.0], size=n)
    eps = rng.choice([0.1, 0.5, 2.0], size=n)
    split = "equal"
    multi = 0
    for i in range(n):
        R = np.arange(v[i], cap[i] + 1)
        err = grid_error_terms(np.full(R.size, N[i]), R, np.full(R.size, v[i]), U[i], eps[i]).error
        E = float(rng.choice(err))  # a bound equal to an attained value (boundary cases)
        e, lo, hi = feasible_runs(N[i:i + 1], v[i:i + 1], cap[i:i + 1], U[i], eps[i], E, split)
        got = set()
        for a, b in zip(lo.tolist(), hi.tolist()):
            got |= set(range(a, b + 1))
        assert got == _runs_brute(N[i], v[i], cap[i], U[i], eps[i], E, split)
        multi += lo.size > 1
    # the feasible retained totals need not form an interval (parity cases of Lemma III.3)
    assert multi > 0


@pytest.mark.parametrize("seed", range(16))
def test_milp_equals_brute_force(seed):
    rng = np.random.default_rng(100 + seed)
    occ = random_tiny(rng, users=int(rng.integers(3, 7)), grids=int(rng.integers(2, 4)), max_count=7)
    U = float(rng.choice([1.0, 10.0]))
    eps = float(rng.choice([0.3, 1.0, 4.0]))
    base = grid_errors(occ, U, eps)
    _, _, (Ks, errs) = brute_force(occ, U, eps, np.inf)
    finite = np.unique(errs[np.isfinite(errs)])
    # E: BASELINE's, and attained values of the plan errors (tight boundary cases)
    for E in [float(base.max())] + [float(rng.choice(finite)) for _ in range(3)]:
        Kb, sb, _ = brute_force(occ, U, eps, E)
        if Kb is None:  # no suppression set meets E: refused as bad input
            with pytest.raises(ValueError, match="`error_bound` must be at least"):
                solve_suppression(occ, U, eps, error_bound=E)
            continue
        plan = solve_suppression(occ, U, eps, error_bound=E, tie_break_time_limit=None)
        assert isinstance(plan.status, Status)
        assert plan.status is Status.OPTIMAL and plan.gap == 0 and plan.is_optimal
        assert plan.degradation == Kb
        assert plan.suppressed_samples == sb  # lexicographic tie-break
        assert plan.feasible


def test_milp_never_worse_than_greedy_and_proves_optimality():
    occ = heavy_hitter_occupancy(np.random.default_rng(11), n_grids=7, gamma=6)
    for eps in (0.1, 1.0):
        g = clip_user(occ, 65, eps)
        m = solve_suppression(occ, 65, eps, tie_break=False)
        assert m.status == "optimal" and m.gap == 0 and m.lower_bound == m.degradation
        assert m.degradation <= g.degradation
        assert m.feasible and m.error_bound == g.error_bound


def test_tie_break_never_more_samples_than_greedy_at_equal_k():
    occ = Occupancy.from_dense([[5, 4, 3], [2, 0, 0], [0, 3, 0], [0, 0, 4], [1, 1, 0]])
    for eps in (0.5, 1.0, 2.0):
        g = clip_user(occ, 1.0, eps)
        m = solve_suppression(occ, 1.0, eps)
        assert m.degradation <= g.degradation
        if m.degradation == g.degradation:
            assert m.suppressed_samples <= g.suppressed_samples


def test_components_solved_separately():
    a = np.array([[3, 2, 0, 0], [1, 1, 0, 0], [0, 0, 4, 4], [0, 0, 1, 2], [2, 0, 0, 0]])
    occ = Occupancy.from_dense(a)
    plan = solve_suppression(occ, 1.0, 1.0)
    assert plan.info["components"] == 2
    left = Occupancy.from_dense(a[[0, 1, 4]][:, :2])
    right = Occupancy.from_dense(a[2:4][:, 2:], users=[2, 3], grids=[2, 3])
    E = plan.error_bound
    Ks = [solve_suppression(o, 1.0, 1.0, error_bound=E).degradation for o in (left, right)]
    assert plan.degradation == max(Ks)


def test_unreachable_error_bound_is_refused():
    """E below every plan's worst grid error: a clear ValueError naming `error_bound` and the floor."""
    occ = Occupancy.from_dense([[2, 2], [1, 1]])
    floor = max(
        min(grid_errors(occ, 1.0, 1.0, suppressed=s)[g] for s in ([], [(0, g)], [(1, g)]))
        for g in range(2)
    )  # each grid: keep both users, or drop one of the two (dropping both empties it)
    for fn in (solve_suppression, clip_user):
        with pytest.raises(ValueError, match=r"`error_bound` must be at least .*; got 0\.001"):
            fn(occ, 1.0, 1.0, error_bound=1e-3)
        with pytest.raises(ValueError, match="`error_bound` must be at least"):
            fn(occ, 1.0, 1.0, error_bound=floor * 0.999)
        plan = fn(occ, 1.0, 1.0, error_bound=floor)
        assert plan.feasible and max(plan.grid_errors) <= floor * (1 + 1e-9)


def test_model_blocks_and_warm_start_point_is_feasible():
    occ = heavy_hitter_occupancy(np.random.default_rng(4), n_grids=5, gamma=3)
    sm = build_suppression_model(occ, 65, 0.5)
    for name in ("x", "y", "d", "K"):
        assert name in sm.model.col_blocks
    g = clip_user(occ, 65, 0.5)
    from dpopt.suppression.milp import _mask_of

    point = sm.point(_mask_of(sm, g.suppressed))
    assert point is not None
    assert sm.model.max_violation(point) <= 1e-9
    assert sm.model.objective_value(point) == g.degradation


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [(dict(error_bound=0.0), "error_bound"), (dict(error_bound=-1.0), "error_bound"),
     (dict(epsilon=-1.0), "epsilon"), (dict(bound=np.nan), "bound"),
     (dict(time_limit=-1.0), "time_limit"), (dict(time_limit=np.nan), "time_limit"),
     (dict(time_limit="soon"), "time_limit"), (dict(tie_break_time_limit=-2), "tie_break_time_limit"),
     (dict(split="median"), "split")],
)
def test_bad_input(kwargs, match):
    occ = Occupancy.from_dense([[1, 2], [3, 0]])
    args = dict(bound=1.0, epsilon=1.0) | kwargs
    with pytest.raises(ValueError, match=match):
        solve_suppression(occ, args.pop("bound"), args.pop("epsilon"), **args)


def test_bad_objective():
    with pytest.raises(ValueError, match="objective"):
        build_suppression_model(Occupancy.from_dense([[1, 2]]), 1.0, 1.0, objective="speed")


def test_milp_equals_brute_force_when_feasible_totals_have_holes():
    """Instances whose exact feasible sets F_t have several runs (parity holes) — the cases where
    a plain "R ≥ R_min(t)" model would be wrong."""
    rng = np.random.default_rng(2026)
    checked = 0
    for _ in range(400):
        occ = random_tiny(rng, users=int(rng.integers(2, 6)), grids=int(rng.integers(1, 4)), max_count=5)
        U, eps = float(rng.choice([10.0, 65.0])), float(rng.choice([0.5, 1.0, 4.0]))
        _, _, (Ks, errs) = brute_force(occ, U, eps, np.inf)
        E = float(rng.choice(np.unique(errs[np.isfinite(errs)])))
        sm = build_suppression_model(occ, U, eps, error_bound=E)
        if not sm.run_is_col.any():
            continue
        Kb, sb, _ = brute_force(occ, U, eps, E)
        plan = solve_suppression(occ, U, eps, error_bound=E, tie_break_time_limit=None)
        assert plan.status == "optimal"
        assert (plan.degradation, plan.suppressed_samples) == (Kb, sb)
        checked += 1
        if checked >= 8:
            break
    assert checked >= 8


@pytest.mark.parametrize("seed", range(4))
def test_milp_equals_brute_force_optimal_split(seed):
    rng = np.random.default_rng(700 + seed)
    occ = random_tiny(rng, users=5, grids=3, max_count=6)
    U, eps = 10.0, 0.5
    _, _, (Ks, errs) = brute_force(occ, U, eps, np.inf, split="optimal")
    for E in rng.choice(np.unique(errs[np.isfinite(errs)]), size=3):
        Kb, sb, _ = brute_force(occ, U, eps, float(E), split="optimal")
        plan = solve_suppression(occ, U, eps, error_bound=float(E), split="optimal",
                                 tie_break_time_limit=None)
        assert (plan.degradation, plan.suppressed_samples) == (Kb, sb)


@pytest.mark.slow
def test_time_limit_returns_checked_incumbent_with_gap():
    occ = heavy_hitter_occupancy(np.random.default_rng(3), n_grids=9, gamma=3)
    full = solve_suppression(occ, 65, 0.5, tie_break=False)
    assert full.status is Status.OPTIMAL and full.gap == 0
    # a zero time limit stops HiGHS at once: the greedy warm start comes back, not claimed optimal
    plan = solve_suppression(occ, 65, 0.5, time_limit=0.0)
    assert plan.status is Status.TIME_LIMIT and not plan.is_optimal
    assert plan.feasible and plan.lower_bound <= plan.degradation
    assert plan.degradation > full.degradation  # this instance: greedy K is not optimal
    assert plan.gap == pytest.approx((plan.degradation - plan.lower_bound) / plan.degradation)
    assert plan.gap > 0
    assert plan.summary()["status"] == "time_limit"
    assert plan.summary()["lower_bound"] == plan.lower_bound


def test_bound_is_a_deprecated_alias_of_lower_bound():
    occ = heavy_hitter_occupancy(np.random.default_rng(3), n_grids=6, gamma=3)
    plan = solve_suppression(occ, 65, 0.5, tie_break=False)
    with pytest.warns(DeprecationWarning, match="lower_bound"):
        old = plan.bound
    assert old == plan.lower_bound == plan.degradation


def test_huge_error_bound_only_needs_nonempty_grids():
    rng = np.random.default_rng(77)
    occ = random_tiny(rng, users=6, grids=3, max_count=5)
    Kb, sb, _ = brute_force(occ, 10.0, 1.0, 1e12)
    plan = solve_suppression(occ, 10.0, 1.0, error_bound=1e12, tie_break_time_limit=None)
    assert (plan.degradation, plan.suppressed_samples) == (Kb, sb)


def test_time_limit_without_incumbent_is_reported_not_hidden():
    occ = heavy_hitter_occupancy(np.random.default_rng(3), n_grids=9, gamma=3)
    base = grid_errors(occ, 65, 0.5)
    E = float(np.sort(base)[-2])  # below BASELINE's max: the greedy warm start violates E
    assert not clip_user(occ, 65, 0.5, error_bound=E).feasible
    plan = solve_suppression(occ, 65, 0.5, error_bound=E, time_limit=0.0)
    assert plan.status is Status.TIME_LIMIT and plan.gap == np.inf
    assert not plan.feasible and not plan.suppressed and plan.degradation == occ.degradation
    full = solve_suppression(occ, 65, 0.5, error_bound=E, tie_break=False)
    assert full.status is Status.OPTIMAL and full.feasible


def test_warm_started_point_inconsistent_with_its_objective_is_resolved_cold(monkeypatch):
    """A solver answer whose point does not have the reported objective is not trusted."""
    import dataclasses

    from dpopt.suppression import milp

    occ = heavy_hitter_occupancy(np.random.default_rng(3), n_grids=6, gamma=3)
    want = solve_suppression(occ, 65, 0.5, tie_break=False)
    real = milp._solve
    calls = []

    def lying(model, *, time_limit=None, options=None, warm_start=None):
        res = real(model, time_limit=time_limit, options=options, warm_start=warm_start)
        calls.append(warm_start is not None)
        if warm_start is not None and res.has_solution:  # report the optimum, return the warm point
            return dataclasses.replace(res, x=np.asarray(warm_start, float))
        return res

    monkeypatch.setattr(milp, "_solve", lying)
    g = clip_user(occ, 65, 0.5)
    assert g.degradation > want.degradation  # the warm point is not optimal
    plan = solve_suppression(occ, 65, 0.5, tie_break=False, warm_start=g)
    assert calls[:2] == [True, False]  # the warm-started answer was re-solved cold
    assert plan.degradation == want.degradation and plan.status is Status.OPTIMAL and plan.feasible
