"""`dpopt.suppression_problem`: the suppression MILP with labelled pairs, extended and checked by brute force.

The brute force enumerates every subset of occupied pairs, keeps those whose grid errors (from
:func:`dpopt.grid_errors`, the calculus, not the model) meet E and that satisfy the added
constraint, and takes the least K, then the fewest suppressed samples at that K.
"""

from __future__ import annotations

import itertools

import cvxpy as cp
import numpy as np
import pytest

import dpopt
from dpopt.solve import Status

RTOL = 1e-9


def tiny_occupancy(rng):
    while True:
        M = rng.integers(1, 12, (rng.integers(2, 5), rng.integers(2, 4)))
        M[rng.random(M.shape) < 0.3] = 0
        if 3 <= np.count_nonzero(M) <= 9 and np.all(M.sum(0) > 0) and np.all(M.sum(1) > 0):
            return dpopt.Occupancy.from_dense(M)


def brute(occ, U, eps, E, allowed):
    """(least K, fewest samples at it) over all suppression sets passing ``allowed``; None if none."""
    coo = occ.matrix.tocoo()
    pairs = [(occ.users[r], occ.grids[c], int(v)) for r, c, v in zip(coo.row, coo.col, coo.data)]
    best = None
    for bits in itertools.product((0, 1), repeat=len(pairs)):
        sup = {(u, g) for (u, g, _), b in zip(pairs, bits) if b}
        if not allowed(sup):
            continue
        if np.any(dpopt.grid_errors(occ, U, eps, suppressed=sup) > E * (1 + RTOL)):
            continue
        kept = {}
        for (u, g, _), b in zip(pairs, bits):
            kept[u] = kept.get(u, 0) + (1 - b)
        K = max(1, max(kept.values()))
        samples = sum(m for (_, _, m), b in zip(pairs, bits) if b)
        best = (K, samples) if best is None else min(best, (K, samples))
    return best


def _case(seed):
    rng = np.random.default_rng(seed)
    occ = tiny_occupancy(rng)
    U, eps = 1.0, float(rng.choice([0.5, 1.0, 2.0]))
    base = dpopt.grid_errors(occ, U, eps)
    E = float(np.max(base) * rng.uniform(1.0, 1.6))
    return rng, occ, U, eps, E


@pytest.mark.parametrize("seed", range(24))
def test_a_forbidden_pair_and_a_cap_equal_brute_force(seed):
    rng, occ, U, eps, E = _case(seed)
    p = dpopt.suppression_problem(occ, U, eps, error_bound=E)
    u, g = p.pairs[int(rng.integers(len(p.pairs)))]
    cap = int(rng.integers(0, 3))
    q = p.with_constraints(p.suppressed(u, g) == 0, cp.sum(p.suppress) <= cap)
    want = brute(occ, U, eps, E, lambda s: (u, g) not in s and len(s) <= cap)
    plan = q.solve_plan()
    if want is None:
        assert plan.status is Status.INFEASIBLE and not plan.suppressed
        return
    assert plan.status is Status.OPTIMAL
    assert (plan.degradation, plan.suppressed_samples) == want
    assert (u, g) not in plan.suppressed and len(plan.suppressed) <= cap
    assert plan.feasible and "tie-break" in plan.info["kept"]


@pytest.mark.parametrize("seed", range(100, 106))
def test_without_added_constraints_it_is_solve_suppression(seed):
    _, occ, U, eps, E = _case(seed)
    p = dpopt.suppression_problem(occ, U, eps, error_bound=E)
    plan = p.solve_plan()
    ref = dpopt.solve_suppression(occ, U, eps, error_bound=E)
    assert (plan.degradation, plan.suppressed_samples) == (ref.degradation, ref.suppressed_samples)
    assert (plan.degradation, plan.suppressed_samples) == brute(occ, U, eps, E, lambda s: True)
    assert "components" in plan.info["kept"]


@pytest.mark.slow
def test_the_constraint_binds_somewhere():
    """The family is not trivial: on some seed the added constraints change the optimum."""
    changed = 0
    for seed in range(24):
        rng, occ, U, eps, E = _case(seed)
        free = brute(occ, U, eps, E, lambda s: True)
        p = dpopt.suppression_problem(occ, U, eps, error_bound=E)
        u, g = p.pairs[int(rng.integers(len(p.pairs)))]
        cap = int(rng.integers(0, 3))
        changed += brute(occ, U, eps, E, lambda s: (u, g) not in s and len(s) <= cap) != free
    assert changed >= 3


def test_pairs_are_labelled_and_bad_labels_refused():
    occ = dpopt.Occupancy.from_triples(["a", "a", "b"], ["g1", "g2", "g1"], [3, 4, 5])
    p = dpopt.suppression_problem(occ, 1.0, 1.0)
    assert p.pairs == (("a", "g1"), ("a", "g2"), ("b", "g1"))
    assert p.pair_index("b", "g1") == 2
    with pytest.raises(dpopt.DpoptInputError, match="not an occupied pair"):
        p.suppressed("b", "g2")
    with pytest.raises(dpopt.DpoptInputError, match="SuppressionProblem"):
        dpopt.suppression.problem.solve_suppression_problem("x")


def test_a_solve_stopped_without_an_incumbent_bounds_k_by_what_it_proved():
    """Stopped before any incumbent, the plan (suppress nothing, not a feasible plan here) carried a
    lower bound of inf beside its K = 12: a bound above the plan's own value (a fuzz run). It is
    now what the search proved, at least 1; inf stays for an infeasible model only."""
    occ = dpopt.heavy_hitter_occupancy(np.random.default_rng(1), gamma=3.0, q=0.01)
    s = dpopt.suppression_problem(occ, 65.0, 0.1)
    u, g = s.pairs[0]
    p = s.with_constraints(s.suppressed(u, g) == 0, cp.sum(s.suppress) <= 50).solve_plan(time_limit=1e-9)
    assert p.status is Status.TIME_LIMIT and p.info["feasible_plan"] is False
    assert 1.0 <= p.lower_bound <= p.degradation and 0.0 <= p.gap <= 1.0
    q = s.with_constraints(cp.sum(s.suppress) <= -1).solve_plan()  # nothing meets this
    assert q.status is Status.INFEASIBLE and q.lower_bound == float("inf")
