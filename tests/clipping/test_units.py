"""The clipping LPs and the array-length surrogate LP do not depend on the unit of the values.

Every bound of the clipping LPs is U times a number and their costs do not involve U; the surrogate
LP's costs are U times numbers. So the optimum at U is U times the optimum at U = 1, and the solvers
solve in units of U. Before, the LPs were solved in their own units: at U = 1e-7 every constraint sat
inside HiGHS's 1e-7 feasibility tolerance, ``solve_clipping([1, 2], 1e-7, 1e-3)`` reported "optimal"
at 667× E^OPT and its KKT check passed (residuals were floored at a scale of 1); the surrogate LP at
U = 1e-6 returned m = 9 at 21× the minimum (m = 14). An outside fuzz run found both.

The extensible cvxpy model (:func:`dpopt.clipping_problem`) is solved in units of U as well
(``solve_cvxpy(scale=U)``): before, its worst-case plan at U = 1e-7 came back "optimal" at 1.9×
E^OPT *with* a certificate (the check's tolerance was floored at 1), its ``"mse"`` objective ended
in a solver error at U = 1e-7 and 1e-3 and ran until its time limit at U ≥ 1e6 (HiGHS's QP).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import dpopt
from dpopt.clipping.problem import _certificate
from dpopt.solve import Status

from .test_objectives import criteria, frontier_min


@pytest.mark.parametrize("U", [1e-9, 1e-7, 1e-3, 1.0, 1e6, 1e12])
@pytest.mark.parametrize("formulation", ["per-user", "per-sample"])
def test_the_clipping_lp_finds_e_opt_in_any_unit(U, formulation):
    rng = np.random.default_rng(int(np.log10(U)) + 20)
    for _ in range(6):
        counts = rng.integers(1, 12, rng.integers(1, 7)).tolist()
        eps = float(10 ** rng.uniform(-3, 1))
        for dim in (1, 2):
            closed = dpopt.optimal_clipping(counts, U, eps, dim=dim)
            lp = dpopt.solve_clipping(counts, U, eps, dim=dim, formulation=formulation)
            assert lp.status is Status.OPTIMAL
            assert lp.error == pytest.approx(closed.error, rel=1e-6)
            assert lp.objective == pytest.approx(closed.error, rel=1e-6)
            assert lp.check()


def test_the_kkt_check_is_relative_to_the_data_however_small():
    """A certificate whose bias mass is off by 1 % of the data fails at any U (it passed below U ≈ 1
    when residuals were divided by max(1, U·m))."""
    for U in (1e-7, 1.0, 1e4):
        cert = dpopt.optimal_clipping([1, 2, 5], U, 0.5).certificate
        assert cert.check()
        off = dataclasses.replace(cert, tau=cert.tau - 0.01 * float(np.max(cert.values)))
        assert not off.check()


@pytest.mark.parametrize("U", [1e-9, 1e-6, 1.0, 1e6])
def test_the_surrogate_lp_finds_the_closed_form_minimiser_in_any_unit(U):
    rng = np.random.default_rng(7)
    for _ in range(8):
        counts = rng.integers(1, 30, rng.integers(2, 12)).tolist()
        eps = float(10 ** rng.uniform(-2, 2))
        closed = dpopt.optimal_array_length(counts, U, eps, method="surrogate")
        lp = dpopt.optimal_array_length(counts, U, eps, method="surrogate", solver="lp")
        assert lp.status is Status.OPTIMAL
        assert lp.objective == pytest.approx(closed.objective, rel=1e-7)
        assert lp.length == closed.length or lp.objective == pytest.approx(closed.objective, rel=1e-12)


@pytest.mark.parametrize("U", [1e-9, 1e-7, 1e-3, 1.0, 1e6, 1e9])
@pytest.mark.parametrize("objective", ["worst_case", "mse", "high_probability"])
def test_the_cvxpy_model_finds_the_frontier_minimum_in_any_unit(U, objective):
    rng = np.random.default_rng(int(np.log10(U)) + 40)
    for _ in range(3):
        counts = rng.integers(1, 40, rng.integers(3, 20))
        d = int(rng.choice([1, 2]))
        eps = float(rng.choice([0.1, 1.0, 4.0]))
        plan = dpopt.clipping_problem(counts, U, eps, dim=d, objective=objective).solve_plan(time_limit=60)
        assert plan.status is Status.OPTIMAL
        want = frontier_min(counts, U, eps, d, criteria(d, eps)[objective])
        assert plan.objective == pytest.approx(want, rel=1e-6)
        if objective != "mse" or plan.bias > 1e-9 * U:
            assert plan.certificate is not None and plan.check()


def test_a_users_constraint_is_kept_in_units_of_u():
    """Solving in units of U rescales every right-hand side, a user's own too: a fixed share of the
    range holds at any U (the lower end of user 0 at 30 % of U, its upper end at 40 %)."""
    for U in (1.0, 1e-8, 1e7):
        p = dpopt.clipping_problem([3, 5, 9], U, 1.0)
        p = p.with_constraints(p.lower[0] >= 0.3 * U, p.upper[0] <= 0.4 * U)
        plan = p.solve_plan()
        assert plan.status is Status.OPTIMAL
        assert plan.lower[0] >= 0.3 * U * (1 - 1e-9) and plan.upper[0] <= 0.4 * U * (1 + 1e-9)
        if U == 1.0:
            ref = plan.objective
        else:
            assert plan.objective / U == pytest.approx(ref, rel=1e-6)


def test_the_certificate_check_is_relative_at_any_u():
    """A plan whose bias is 1 % above the optimum gets no certificate, however small U is (the check's
    tolerance was 1e-6 of max(1, E^OPT), which at U = 1e-9 admitted any plan)."""
    for U in (1e-9, 1.0, 1e6):
        p = dpopt.clipping_problem([1, 4, 7], U, 0.5)
        plan = p.solve_plan()
        assert _certificate(p, plan.bias, plan.sensitivity)[0] is not None
        assert _certificate(p, plan.bias * 1.01, plan.sensitivity)[0] is None


@pytest.mark.parametrize("U", [1e-3, 1.0, 65.0])
def test_a_users_integer_variable_stays_an_integer_in_units_of_u(U):
    """Solving in units of U scales the continuous columns only: a user's boolean z (at most one user
    clipped) stays 0/1. Scaled with the rest, z = 1 was out of reach at U = 65 (error 32.5 against
    24.375) and came back 0.001 at U = 1e-3 (an outside fuzz run). Reference: enumerate the user who
    may be clipped, the others fixed at [0, U] (LPs without integers)."""
    import cvxpy as cp

    counts = [6, 3, 2, 1]
    p = dpopt.clipping_problem(counts, U, 1.0)
    z = cp.Variable(4, boolean=True, name="clipped")
    plan = p.with_constraints(p.lower <= U * z, p.upper >= U * (1 - z), cp.sum(z) <= 1).solve_plan()
    assert plan.status is Status.OPTIMAL
    assert np.allclose(z.value, np.round(z.value), atol=1e-6) and z.value.sum() <= 1 + 1e-6
    best = min(dpopt.clipping_problem(counts, U, 1.0, fixed={j: (0.0, U) for j in range(4) if j != k}).solve_plan().error
               for k in range(4))
    assert plan.error == pytest.approx(best, rel=1e-6)
