"""Bad input gives a clear ValueError naming the argument, stating the rule and showing the value."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import dpopt
from dpopt import DpoptInputError

M = [3, 2, 1]
G = [2, 2, 1]


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: dpopt.mean_bias(G, [3, -2, 1], 1.0), r"`counts` must hold integers >= 1 .*-2"),
        (lambda: dpopt.mean_bias(G, [3, 2.5, 1], 1.0), r"`counts` must hold whole numbers .*2\.5"),
        (lambda: dpopt.mean_bias(G, [3, 0, 1], 1.0), r"`counts` must hold integers >= 1 \(found 0\)"),
        (lambda: dpopt.mean_bias([], [], 1.0), r"`counts` must not be empty"),
        (lambda: dpopt.mean_bias(G, [[3, 2, 1]], 1.0), r"`counts` must be one-dimensional"),
        (lambda: dpopt.mean_bias(G, [3, np.nan, 1], 1.0), r"`counts` must hold finite integers"),
        (lambda: dpopt.mean_bias(G, ["a", "b", "c"], 1.0), r"`counts` must be array-like of numbers"),
        (lambda: dpopt.mean_bias([4, 2, 1], M, 1.0), r"`retained` must satisfy retained\[i\] <= counts\[i\] \(index 0: 4 > 3\)"),
        (lambda: dpopt.mean_bias([2, 2], M, 1.0), r"`retained` must have the shape of `counts`"),
        (lambda: dpopt.mean_sensitivity([0, 0, 0], 1.0), r"`retained` must keep at least one sample"),
        (lambda: dpopt.mean_sensitivity([1, -1], 1.0), r"`retained` must hold integers >= 0"),
        (lambda: dpopt.mean_sensitivity([True, False], 1.0), r"`retained` must hold integers, not booleans"),
        (lambda: dpopt.mean_sensitivity(G, 0.0), r"`bound` must be a positive finite number; got 0\.0"),
        (lambda: dpopt.mean_sensitivity(G, -3), r"`bound` must be a positive finite number; got -3"),
        (lambda: dpopt.mean_sensitivity(G, float("inf")), r"`bound` must be a positive finite number; got inf"),
        (lambda: dpopt.mean_sensitivity(G, "65"), r"`bound` must be a positive finite number; got '65'"),
        (lambda: dpopt.clipping_error(M, 1.0, -1.0, 0, 1), r"`epsilon` must be a positive finite number; got -1\.0"),
        (lambda: dpopt.clipping_error(M, 1.0, float("nan"), 0, 1), r"`epsilon` must be a positive finite number; got nan"),
        (lambda: dpopt.clipping_error(M, 1.0, 0, 0, 1), r"`epsilon` must be a positive finite number; got 0"),
        (lambda: dpopt.clipping_error(M, 1.0, 1.0, 0, 1, dim=0), r"`dim` must be an integer >= 1; got 0"),
        (lambda: dpopt.clipping_error(M, 1.0, 1.0, 0, 1, dim=1.5), r"`dim` must be an integer >= 1; got 1\.5"),
        (lambda: dpopt.clipping_error(M, 1.0, 1.0, 0.8, 0.2), r"`lower` must not exceed `upper`"),
        (lambda: dpopt.clipping_error(M, 1.0, 1.0, 0, 2.0), r"`upper` must lie in \[0, bound\]"),
        (lambda: dpopt.clipping_error(M, 1.0, 1.0, [0, 0], 1), r"`lower` must be a number or have the shape of `counts`"),
        (lambda: dpopt.Occupancy.from_triples(["a"], ["g", "h"], [1]), r"`users`, `grids` and `counts` must have one length"),
        (lambda: dpopt.Occupancy.from_triples(["a", "b"], ["g", "h"], [1, -1]), r"`counts` must hold integers >= 0"),
        (lambda: dpopt.Occupancy.from_triples(["a"], ["g"], [1.5]), r"`counts` must hold whole numbers"),
        (lambda: dpopt.Occupancy.from_triples([], [], []), r"`counts` must not be empty"),
        (lambda: dpopt.Occupancy.from_dense(np.zeros((2, 2))), r"`matrix` must hold at least one positive count"),
        (lambda: dpopt.Occupancy.from_frame(pd.DataFrame({"u": [1]})), r"`frame` must have columns"),
        (lambda: dpopt.grid_errors(dpopt.Occupancy.from_dense([[1, 2]]), 1.0, 1.0, suppressed=[(0, 5)]), r"unknown grid label 5"),
        (lambda: dpopt.grid_errors(dpopt.Occupancy.from_dense([[1, 0], [1, 1]]), 1.0, 1.0, suppressed=[(0, 1)]), r"`suppressed` pair \(0, 1\) is not an occupied"),
        (lambda: dpopt.grid_errors(dpopt.Occupancy.from_dense([[1, 2]]), 1.0, [1.0, -1.0]), r"`epsilon` must hold positive finite numbers"),
        (lambda: dpopt.grid_errors(dpopt.Occupancy.from_dense([[1, 2]]), 1.0, [1.0, 1.0, 1.0]), r"`epsilon` must have length 2"),
        (lambda: dpopt.grid_errors(dpopt.Occupancy.from_dense([[1, 2]]), 1.0, 1.0, split="half"), r"`split` must be one of 'equal', 'optimal'; got 'half'"),
    ],
)
def test_bad_input_raises_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_error_class_is_a_value_error():
    assert issubclass(DpoptInputError, ValueError)


@pytest.mark.parametrize("make", [list, np.asarray, pd.Series, tuple])
def test_array_likes_are_accepted(make):
    assert dpopt.mean_bias(make(G), make(M), 2.0) == pytest.approx(2.0 * (1 - 5 / 6))
    assert dpopt.variance_sensitivity(make(np.array(G, float)), 1.0) == pytest.approx(
        2 * (5 - 2) / 25
    )


def test_an_epsilon_whose_noise_term_overflows_is_refused_where_a_model_sums_it():
    """A tiny ε passes `check_epsilon` (the closed forms answer it: clip everything), but the models
    that compare and sum noise terms 2(U + U²/4)/ε, U·m/(ε·Γ_m) or 2d·U·m/ε got inf: CLIP-USER then
    suppressed every pair and called the plan feasible, the suppression MILP named the wrong
    argument, the custom clipping problem failed inside cvxpy. Each now refuses in one line naming
    `epsilon`; a merely small ε still solves."""
    import dpopt
    from dpopt import DpoptInputError

    occ = dpopt.Occupancy.from_dense([[5, 4, 3], [2, 0, 0], [0, 3, 0], [0, 0, 4], [1, 1, 0]])
    counts = [6, 3, 2, 1]
    calls = [lambda e, u: dpopt.clip_user(occ, u, e), lambda e, u: dpopt.solve_suppression(occ, u, e),
             lambda e, u: dpopt.optimal_array_length(counts, u, e),
             lambda e, u: dpopt.clipping_problem(counts, u, e).solve_plan(),
             lambda e, u: dpopt.clipping_problem(counts, u, 1.0).set_epsilon(e)]
    for eps, bound, which in ((1e-320, 1.0, calls), (1e-120, 1e100, calls[:2])):
        for call in which:
            with pytest.raises(DpoptInputError, match="`epsilon` is too small") as err:
                call(eps, bound)
            assert "\n" not in str(err.value)
    assert dpopt.clip_user(occ, 1.0, 1e-6).feasible  # small but representable: a plan
    assert dpopt.optimal_clipping(counts, 1.0, 1e-320).threshold == 0.0  # the closed form answers any ε
    # finite but beyond HiGHS's 1e20 infinity: the LP would have no valid solution (it ended in status
    # error): refused by name before any model is built
    with pytest.raises(DpoptInputError, match="`epsilon` must be at least 1e-17"):
        dpopt.clipping_problem(counts, 65.0, 1e-30)


def test_research_arguments_that_failed_deep_now_fail_in_one_line():
    """A negative `n_grids`, a `warm_start` that is no plan, a HiGHS option HiGHS does not know:
    each a DpoptInputError naming the argument (were numpy's, an AttributeError, a plain ValueError)."""
    occ = dpopt.Occupancy.from_dense([[5, 4, 3], [2, 0, 0], [0, 3, 0], [0, 0, 4], [1, 1, 0]])
    for call, name in ((lambda: dpopt.basic_composition(1.0, -1), "n_grids"),
                       (lambda: dpopt.solve_suppression(occ, 65.0, 1.0, warm_start="x"), "warm_start"),
                       (lambda: dpopt.solve_suppression(occ, 65.0, 1.0, options={"presolv": "off"}), "options")):
        with pytest.raises(DpoptInputError, match=f"`{name}`") as err:
            call()
        assert "\n" not in str(err.value)
    assert dpopt.basic_composition(1.0, 3) == 3.0


def test_a_choice_given_an_array_is_refused_naming_the_argument():
    """Every choice argument took `value in options`, which a numpy array answers with numpy's
    "truth value of an array … is ambiguous", naming no argument (a fuzz run)."""
    occ = dpopt.Occupancy.from_triples(users=["a", "a", "b", "c"], grids=[1, 2, 1, 2], counts=[5, 1, 2, 3])
    for call, name in ((lambda: dpopt.grid_errors(occ, 65.0, 1.0, split=np.array(["equal", "optimal"])), "split"),
                       (lambda: dpopt.optimal_array_length([6, 3], 65.0, 1.0, method=np.array(["exact"])), "method"),
                       (lambda: dpopt.optimal_array_length([6, 3], 65.0, 1.0, method=["exact"]), "method"),
                       (lambda: dpopt.solve_clipping([6, 3], 65.0, 1.0, formulation={"per-user": 1}), "formulation")):
        with pytest.raises(DpoptInputError, match=f"^`{name}` must be one of ") as err:
            call()
        assert "\n" not in str(err.value)
    assert dpopt.optimal_array_length([6, 3], 65.0, 1.0, method=np.str_("exact")).method == "exact"


def test_solver_options_that_are_no_mapping_are_refused_by_name():
    """``options=1.0`` or a list went into ``dict(options)`` and raised TypeError inside the solve
    (a fuzz run); every solver entry point reads them through one check."""
    occ = dpopt.Occupancy.from_triples(users=["a", "a", "b", "c"], grids=[1, 2, 1, 2], counts=[5, 1, 2, 3])
    for call in (lambda: dpopt.solve_clipping([6, 3], 65.0, 1.0, options=1.0),
                 lambda: dpopt.solve_suppression(occ, 65.0, 1.0, options=[1, 2]),
                 lambda: dpopt.optimal_array_length([6, 3], 65.0, 1.0, solver="milp", options="presolve=off"),
                 lambda: dpopt.solve_clipping([6, 3], 65.0, 1.0, options={1: "off"})):
        with pytest.raises(DpoptInputError, match=r"^`options` must be a mapping of HiGHS option names") as err:
            call()
        assert "\n" not in str(err.value)
    assert dpopt.solve_clipping([6, 3], 65.0, 1.0, options={"presolve": "on"}).status == "optimal"


def test_more_research_arguments_that_failed_deep_now_fail_in_one_line():
    """From a fuzz run: a number for `suppressed`, a ragged `matrix`, a text `time_limit` were a
    TypeError or numpy's unnamed ValueError; an array for `length` or `failure_probability` gave a
    message over several lines."""
    from dpopt.arrays.length import _lengths

    occ = dpopt.Occupancy.from_triples(users=["a", "a", "b", "c"], grids=[1, 2, 1, 2], counts=[5, 1, 2, 3])
    occ2 = dpopt.Occupancy.from_dense(np.array([[5, 1, 0], [2, 0, 3], [1, 1, 1], [4, 4, 0]]))
    for call, name in ((lambda: dpopt.grid_errors(occ, 65.0, 1.0, suppressed=0), "suppressed"),
                       (lambda: dpopt.parallel_composition(occ, 1.0, suppressed=1.0), "suppressed"),
                       (lambda: dpopt.Occupancy.from_dense([[1, 2], [3]]), "matrix"),
                       (lambda: dpopt.budget_frontier(occ2, 65.0, 10.0, time_limit="5"), "time_limit"),
                       (lambda: _lengths(np.zeros((3, 3))), "length"),
                       (lambda: dpopt.clipping_problem([6, 3], 65.0, 1.0, objective="high_probability",
                                                       failure_probability=np.ones((4, 4))), "failure_probability")):
        with pytest.raises(DpoptInputError, match=f"^`{name}` must ") as err:
            call()
        assert "\n" not in str(err.value)


def test_sweep_reads_one_model_name_and_refuses_what_it_cannot_run():
    """`models="clipping"` was iterated letter by letter ("got 'c'"); a number of instances, a model
    that is no callable and one that returns None were TypeError/AttributeError (a fuzz run)."""
    occ2 = dpopt.Occupancy.from_dense(np.array([[5, 1, 0], [2, 0, 3], [1, 1, 1], [4, 4, 0]]))
    one = dpopt.sweep([occ2], [1.0], bound=65.0, models="clipping")
    assert list(one["model"]) == ["clipping"]
    assert one["error"].iloc[0] == pytest.approx(dpopt.sweep([occ2], [1.0], bound=65.0, models=["clipping"])["error"].iloc[0])
    for call, match in ((lambda: dpopt.sweep(5, [1.0], bound=65.0), "^`instances` must be an iterable"),
                        (lambda: dpopt.sweep([occ2], [1.0], bound=65.0, models={"x": 3}), r"^`models\['x'\]` must be"),
                        (lambda: dpopt.sweep([occ2], [1.0], bound=65.0, models={"x": lambda *a, **k: None}),
                         r"^`models\['x'\]` must return a result with a summary\(\)")):
        with pytest.raises(DpoptInputError, match=match):
            call()


def test_budget_planner_arguments_are_refused_by_name():
    """`ladder_ratio=None`, `max_caps="3"` or -1 and `target=1j` were TypeErrors or numpy's unnamed
    errors (a fuzz run)."""
    occ2 = dpopt.Occupancy.from_dense(np.array([[5, 1, 0], [2, 0, 3], [1, 1, 1], [4, 4, 0]]))
    for kw, name in (({"target": 16.0, "ladder_ratio": None}, "ladder_ratio"), ({"target": 16.0, "max_caps": "3"}, "max_caps"),
                     ({"target": 16.0, "max_caps": -1}, "max_caps"), ({"target": 1j}, "target")):
        with pytest.raises(DpoptInputError, match=f"^`{name}` must ") as err:
            dpopt.plan_budget(occ2, 65.0, 10.0, **kw)
        assert "\n" not in str(err.value)
    assert dpopt.plan_budget(occ2, 65.0, 10.0, target=16.0, max_caps=3).status == "optimal"


def test_brute_force_refuses_an_estimator_it_cannot_call():
    """A number for `estimator` or `target`, or `max_datasets=None`, were TypeErrors inside the
    enumeration (a fuzz run)."""
    from dpopt.verify import bruteforce as bf

    mean = lambda x, m: x.mean(axis=1)  # noqa: E731
    for call, name in ((lambda: bf.sensitivity(3, [1, 2], 10.0), "estimator"),
                       (lambda: bf.worst_case_error(None, [1, 2], 10.0), "estimator"),
                       (lambda: bf.worst_case_error(mean, [1, 2], 10.0, target=5), "target"),
                       (lambda: bf.sensitivity(mean, [1, 2], 10.0, max_datasets=None), "max_datasets")):
        with pytest.raises(DpoptInputError, match=f"^`{name}` must "):
            call()
    assert bf.sensitivity(mean, [1, 2], 10.0).value == pytest.approx(20.0 / 3.0)


def test_unhashable_labels_are_refused_by_name():
    """`users=[{}, {}]` was an unhashable-type TypeError from the factorisation (a fuzz run)."""
    with pytest.raises(DpoptInputError, match=r"^`users` must hold labels \(numbers or text\); got dict \{\}"):
        dpopt.Occupancy.from_triples(users=[{}, {}], grids=[1, 2], counts=[1, 2])
    with pytest.raises(DpoptInputError, match=r"^`grids` must hold labels .* got set \{1\}"):
        dpopt.Occupancy.from_triples(users=["a", "b"], grids=[{1}, 2], counts=[1, 2])
    assert dpopt.Occupancy.from_triples(users=["a", "b"], grids=[1, 2], counts=[1, 2]).n_users == 2
