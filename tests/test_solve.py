"""The standard form and the HiGHS back-end on problems with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpopt.solve import ModelBuilder, Status, solve, write_model


def _knapsack(integer: bool) -> ModelBuilder:
    # min x0 + 2 x1 + 3 x2  s.t.  x0 + x1 + x2 >= 1.5,  0 <= x <= 1
    b = ModelBuilder(name="toy")
    x = b.add_cols("x", 3, lower=0, upper=1, cost=[1, 2, 3], integer=integer)
    b.add_rows("cover", rows=[0, 0, 0], cols=x, vals=1.0, lower=1.5, upper=np.inf)
    return b


def test_lp_optimum_and_duals_by_hand():
    r = solve(_knapsack(False).build())
    assert r.status is Status.OPTIMAL and r.success and r.gap == 0
    np.testing.assert_allclose(r.value("x"), [1, 0.5, 0], atol=1e-9)
    assert r.objective == pytest.approx(2.0)
    assert r.dual("cover")[0] == pytest.approx(2.0)  # the marginal cost of covering: x1's price


def test_mip_optimum_bound_and_warm_start():
    model = _knapsack(True).build()
    assert model.is_mip
    r = solve(model, warm_start=np.array([1.0, 1.0, 1.0]))
    assert r.status is Status.OPTIMAL and r.objective == pytest.approx(3.0)
    assert r.bound == pytest.approx(3.0) and r.gap == pytest.approx(0.0, abs=1e-9)
    assert model.max_violation(r.x) <= 1e-9 and model.objective_value(r.x) == pytest.approx(3.0)


def test_infeasible_is_reported_not_hidden():
    b = ModelBuilder()
    x = b.add_cols("x", 1, lower=0, upper=1)
    b.add_rows("impossible", rows=[0], cols=x, vals=1.0, lower=2, upper=np.inf)
    r = solve(b.build())
    assert r.status in (Status.INFEASIBLE, Status.INFEASIBLE_OR_UNBOUNDED)
    assert not r.success and r.x is None and math.isnan(r.objective)
    with pytest.raises(RuntimeError, match="no primal solution"):
        r.value("x")


def test_rejected_option_raises():
    from dpopt import DpoptInputError

    with pytest.raises(DpoptInputError, match="`options` .* rejected 'no_such_option'"):
        solve(_knapsack(False).build(), options={"no_such_option": 1})


@pytest.mark.parametrize("limit", [float("nan"), -1.0, "5", [1, 2], -float("inf")])
def test_a_time_limit_that_is_no_number_of_seconds_is_refused_by_every_back_end(limit):
    """``time_limit`` is checked where the solve starts (HiGHS and cvxpy back-ends alike), so every
    model that passes it on — the array length's MILP and LP, a custom clipping problem — refuses it
    in one line naming `time_limit` (NaN ran unlimited and was reported a time limit; -1 and a list
    failed inside cvxpy)."""
    import dpopt
    from dpopt import DpoptInputError

    calls = [lambda: solve(_knapsack(False).build(), time_limit=limit),
             lambda: dpopt.optimal_array_length([6, 3, 2, 1], 65.0, 1.0, solver="milp", time_limit=limit),
             lambda: dpopt.optimal_array_length([6, 3, 2, 1], 65.0, 1.0, method="surrogate", solver="lp",
                                                time_limit=limit),
             lambda: dpopt.clipping_problem([6, 3, 2, 1], 65.0, 1.0).solve_plan(time_limit=limit)]
    for call in calls:
        with pytest.raises(DpoptInputError, match="`time_limit`") as err:
            call()
        assert "\n" not in str(err.value)


def test_an_infinite_time_limit_is_no_limit_where_a_solve_starts():
    """Internal callers pass the time left of an unlimited deadline as +inf (the decomposition's
    pattern LP under `--plan milp` without `--time-limit`): the solve back-ends read it as no
    limit (refusing it stopped those releases)."""
    import dpopt
    from dpopt.solve import solve_bounded

    assert solve(_knapsack(False).build(), time_limit=float("inf")).status == "optimal"
    assert solve_bounded(_knapsack(True).build(), time_limit=float("inf")).status == "optimal"
    assert dpopt.clipping_problem([6, 3, 2, 1], 65.0, 1.0).solve_plan(time_limit=float("inf")).status == "optimal"


def test_status_prints_its_value():
    assert str(Status.OPTIMAL) == "optimal" and f"{Status.HEURISTIC}" == "heuristic"
    assert Status.OPTIMAL == "optimal"


@pytest.mark.parametrize("suffix", [".mps", ".lp"])
def test_write_model_round_trip(tmp_path, suffix):
    import highspy  # the test reads the file back independently

    path = write_model(_knapsack(True).build(), tmp_path / f"toy{suffix}")
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.readModel(str(path))
    h.run()
    assert h.getInfo().objective_function_value == pytest.approx(3.0)


def test_write_model_refuses_other_suffix(tmp_path):
    with pytest.raises(ValueError, match=r"must end in \.mps or \.lp"):
        write_model(_knapsack(False).build(), tmp_path / "toy.txt")


def test_shape_mismatch_is_refused():
    m = _knapsack(False).build()
    with pytest.raises(ValueError, match="`col_upper` must have shape"):
        type(m)(c=m.c, A=m.A, row_lower=m.row_lower, row_upper=m.row_upper,
                col_lower=m.col_lower, col_upper=m.col_upper[:2])
