"""dpopt.solve.cvxpy_backend: statuses, to_cvxpy, duals in HiGHS's convention (same LP on both back-ends)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from dpopt.clipping import standard_form_kkt
from dpopt.solve import ModelBuilder, Status, solve
from dpopt.solve.cvxpy_backend import map_status, solve_cvxpy, solve_linear_model, to_cvxpy

TOL = 1e-7


def small_lp(sense: str = "min") -> ModelBuilder:
    """An LP with every kind of row and column bound; optimum unique (checked below on both back-ends).

    x0 + x1 + x2 = 4 (eq), 1 ≤ x0 − x1 ≤ 3 (ranged), x1 + 2 x2 ≥ 2, x2 ≤ 1.5 (row), x0 free,
    0 ≤ x1 ≤ 2, x2 ≥ 0.5; minimise (or maximise) 2x0 + 3x1 − x2.
    """
    b = ModelBuilder(sense=sense)  # type: ignore[arg-type]
    x = b.add_cols("x", 3, lower=[-np.inf, 0.0, 0.5], upper=[np.inf, 2.0, np.inf], cost=[2.0, 3.0, -1.0])
    b.add_rows("eq", rows=[0, 0, 0], cols=x, vals=1.0, lower=4.0, upper=4.0)
    b.add_rows("ranged", rows=[0, 0], cols=x[:2], vals=[1.0, -1.0], lower=1.0, upper=3.0)
    b.add_rows("ge", rows=[0, 0], cols=x[1:], vals=[1.0, 2.0], lower=2.0, upper=np.inf)
    b.add_rows("le", rows=[0], cols=x[2:], vals=[1.0], lower=-np.inf, upper=1.5)
    return b


@pytest.mark.parametrize("sense", ["min", "max"])
def test_same_primal_and_duals_on_both_backends(sense: str) -> None:
    model = small_lp(sense).build()
    h = solve(model)
    c = solve_linear_model(model)
    assert h.status is Status.OPTIMAL and c.status is Status.OPTIMAL
    assert c.objective == pytest.approx(h.objective, abs=TOL)
    np.testing.assert_allclose(c.x, h.x, atol=TOL)
    assert standard_form_kkt(model, h).ok
    assert standard_form_kkt(model, c).ok
    np.testing.assert_allclose(c.row_duals, h.row_duals, atol=TOL)
    np.testing.assert_allclose(c.col_duals, h.col_duals, atol=TOL)
    assert c.value("x").shape == (3,) and c.dual("eq").shape == (1,)


def test_to_cvxpy_problem_is_a_plain_cvxpy_problem() -> None:
    model = small_lp().build()
    cm = to_cvxpy(model)
    assert isinstance(cm.problem, cp.Problem)
    assert cm.eq_rows.tolist() == [0] and cm.lo_rows.tolist() == [1, 2] and cm.up_rows.tolist() == [1, 3]
    cm.problem.solve(solver=cp.HIGHS)
    assert cm.problem.value == pytest.approx(solve(model).objective, abs=TOL)


def test_infeasible_and_unbounded() -> None:
    b = ModelBuilder()
    x = b.add_cols("x", 1, lower=0.0, upper=1.0, cost=1.0)
    b.add_rows("r", rows=[0], cols=x, vals=1.0, lower=2.0, upper=np.inf)
    model = b.build()
    assert solve(model).status is Status.INFEASIBLE
    res = solve_linear_model(model)
    assert res.status in (Status.INFEASIBLE, Status.INFEASIBLE_OR_UNBOUNDED)
    assert res.x is None and not res.success
    b = ModelBuilder()
    b.add_cols("x", 1, lower=-np.inf, upper=np.inf, cost=1.0)
    res = solve_linear_model(b.build())
    assert res.status in (Status.UNBOUNDED, Status.INFEASIBLE_OR_UNBOUNDED)


def test_mip_refused() -> None:
    b = ModelBuilder()
    b.add_cols("z", 2, lower=0, upper=1, cost=1.0, integer=True)
    with pytest.raises(ValueError, match="LPs only"):
        to_cvxpy(b.build())


def test_map_status() -> None:
    assert map_status("optimal") is Status.OPTIMAL
    assert map_status("optimal_inaccurate") is Status.UNKNOWN
    assert map_status("infeasible") is Status.INFEASIBLE
    assert map_status("unbounded") is Status.UNBOUNDED
    assert map_status("infeasible_or_unbounded") is Status.INFEASIBLE_OR_UNBOUNDED
    assert map_status("user_limit", time_limit=1.0) is Status.TIME_LIMIT
    assert map_status("user_limit") is Status.ITERATION_LIMIT
    assert map_status("solver_error") is Status.ERROR
    assert map_status(None) is Status.UNKNOWN
    assert map_status("something new") is Status.UNKNOWN


def test_solve_cvxpy_names_blocks_and_maps_status() -> None:
    x = cp.Variable(2, name="x")
    t = cp.Variable(name="t")
    prob = cp.Problem(cp.Minimize(t), [t >= x[0], t >= x[1], x >= np.array([1.0, 2.0])])
    res = solve_cvxpy(prob)
    assert res.status is Status.OPTIMAL and res.backend == "cvxpy"
    assert res.objective == pytest.approx(2.0, abs=TOL)
    assert set(res.col_blocks) == {"x", "t"}
    np.testing.assert_allclose(res.value("x")[1], 2.0, atol=TOL)
    assert res.dual("constraint_1")[0] == pytest.approx(1.0, abs=TOL)  # t ≥ x1 is the active one
    bad = cp.Problem(cp.Minimize(t), [t >= 1, t <= 0])
    assert solve_cvxpy(bad).status in (Status.INFEASIBLE, Status.INFEASIBLE_OR_UNBOUNDED)


@pytest.mark.parametrize("scale", [0.25, 3.0, 40.0])
def test_a_solve_in_units_of_scale_gives_the_same_point_value_and_duals(scale: float) -> None:
    """x = scale·y is exact: the same optimum, objective and row duals as the solve as written, for
    an LP (every kind of row) and a QP (a least-squares objective over the same rows)."""
    base = to_cvxpy(small_lp().build()).problem
    x = base.variables()[0]
    qp = cp.Problem(cp.Minimize(cp.sum_squares(x - np.array([3.0, -1.0, 2.0])) + x[1]), base.constraints)
    for problem in (base, qp):
        ref = solve_cvxpy(problem)
        got = solve_cvxpy(problem, scale=scale)
        assert ref.status is Status.OPTIMAL and got.status is Status.OPTIMAL
        assert got.objective == pytest.approx(ref.objective, rel=1e-7, abs=1e-7)
        np.testing.assert_allclose(got.x, ref.x, atol=1e-6)
        np.testing.assert_allclose(got.row_duals, ref.row_duals, atol=1e-6)


@pytest.mark.parametrize("scale", [0.0, -1.0, float("nan"), float("inf"), "1"])
def test_a_scale_that_is_not_a_positive_number_is_refused(scale) -> None:
    with pytest.raises(ValueError, match="`scale` must be a finite number > 0"):
        solve_cvxpy(to_cvxpy(small_lp().build()).problem, scale=scale)
