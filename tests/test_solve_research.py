"""Research scripting with the solver layer: quiet by default, merged options, readable names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dpopt
from dpopt.clipping.lp import DEFAULT_HIGHS_OPTIONS, per_user_model, solve_model
from dpopt.solve import ModelBuilder, solve, write_model
from dpopt.solve.highs import merged_options

ROOT = Path(__file__).resolve().parents[1]


def _toy():
    b = ModelBuilder(name="toy")
    x = b.add_cols("x", 2, lower=0, upper=1, cost=[1, 2], labels=["a", "b"])
    b.add_rows("cover", rows=[0, 0], cols=x, vals=1.0, lower=1.5, upper=np.inf, labels=["all"])
    return b.build()


def test_solve_writes_nothing_to_stdout(capfd):
    r = solve(_toy())
    out, err = capfd.readouterr()
    assert r.success and out == "" and err == ""


def test_first_solve_of_a_fresh_process_prints_no_banner():
    # the HiGHS banner is printed by C++ at the first Highs() of a process: check a fresh one
    code = ("import numpy as np\nfrom dpopt.solve import ModelBuilder, solve\n"
            "b = ModelBuilder(); x = b.add_cols('x', 1, upper=1, cost=1)\n"
            "b.add_rows('r', rows=[0], cols=x, vals=1, lower=0.5, upper=1)\n"
            "print(solve(b.build()).objective)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "0.5", out.stdout


@pytest.mark.parametrize("argv", [
    ["clipping", "--bound", "65", "--epsilon", "1", "--method", "lp", "--json"],
    ["arrays", "--bound", "65", "--epsilon", "1", "--solver", "milp", "--json"],
])
def test_cli_json_is_parseable_with_a_solver(tmp_path, argv):
    counts = tmp_path / "m.txt"
    counts.write_text("6\n3\n2\n1\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "dpopt", argv[0], "--counts", str(counts), *argv[1:]]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True, cwd=tmp_path)
    json.loads(out.stdout)  # a banner line would make this fail


def test_verbose_turns_the_log_on(capfd):
    solve(_toy(), verbose=True)
    out, _ = capfd.readouterr()
    assert out != ""


def test_options_merge_with_defaults():
    assert merged_options({"presolve": "on"}, defaults={"presolve": "off", "threads": 1}) == {
        "output_flag": False, "presolve": "on", "threads": 1}
    assert merged_options(None, verbose=True)["output_flag"] is True
    assert merged_options({"output_flag": False}, verbose=True)["output_flag"] is False


def test_clipping_options_keep_the_default_presolve_off(monkeypatch):
    seen = {}
    import dpopt.clipping.lp as lp

    def fake(model, *, options, time_limit):
        seen.update(options)
        return solve(model, options=options, time_limit=time_limit)

    monkeypatch.setattr(lp, "_solve_highs", fake)
    solve_model(per_user_model([3, 1], 1.0, 1.0), options={"threads": 1})
    assert seen == {**DEFAULT_HIGHS_OPTIONS, "threads": 1}


def test_named_duals_of_the_clipping_lp_match_the_certificate():
    # counts (6, 3, 2, 1), U = 1, eps = 0.8: T is the ceil(2/eps) = 3rd largest U m = 2 (unique, since
    # 2/eps is not an integer); users with U m > T get lambda = 1/2, U m < T get 0, and the user at
    # U m = T takes the rest of sum lambda = d/eps = 1.25 (ERRATA E4's certificate)
    res = solve_model(per_user_model([6, 3, 2, 1], 1.0, 0.8))
    duals = res.named_duals()
    assert set(duals) == {"range_u0", "range_u1", "range_u2", "range_u3"}
    assert duals["range_u0"] == pytest.approx(0.5) and duals["range_u1"] == pytest.approx(0.5)
    assert duals["range_u2"] == pytest.approx(0.25) and duals["range_u3"] == pytest.approx(0.0)
    assert res.named_values()["tau_T"] == pytest.approx(2.0)


def test_export_uses_readable_names(tmp_path):
    path = write_model(per_user_model([6, 3, 2, 1], 1.0, 1.0), tmp_path / "clip.lp")
    text = path.read_text()
    for name in ("alpha_u0", "alpha_u3", "tau_T", "range_u2"):
        assert name in text
    surr = write_model(dpopt.arrays.length.surrogate_lp([1, 2, 2, 5], 1.0, 1.0), tmp_path / "s.mps")
    text = surr.read_text()
    assert "cap_c5" in text and "kept_c2" in text and "length_m" in text


def test_surrogate_lp_named_duals():
    res = solve(dpopt.arrays.length.surrogate_lp([1, 2, 2, 5], 1.0, 1.0))
    duals = res.named_duals()
    assert set(duals) == {"cap_c1", "cap_c2", "cap_c5"}


def test_solve_result_repr_is_one_line():
    res = solve(per_user_model(np.arange(1, 2001), 1.0, 1.0))
    assert "\n" not in repr(res) and len(repr(res)) < 200


def test_the_extensible_models_refuse_what_cvxpy_would_raise_deep_inside_by_name():
    """An outside fuzz run: a text for user_bounds, a Maximize objective, a text constraint, an option
    HiGHS refuses and a non-convex objective or constraint surfaced as numpy, cvxpy or HiGHS errors
    that named no argument (a text constraint in all three extensible models)."""
    import cvxpy as cp

    import dpopt

    with pytest.raises(dpopt.DpoptInputError, match="`user_bounds` must be a number or an array of numbers"):
        dpopt.clipping_problem([1, 2], 1.0, 1.0, user_bounds="abc")
    p = dpopt.clipping_problem([1, 2, 3], 1.0, 1.0)
    for bad in (cp.Maximize(p.bias), 3):
        with pytest.raises(dpopt.DpoptInputError, match="`objective` must be a built-in name"):
            p.with_objective(bad)
    problems = (p, dpopt.array_length_problem([1, 2, 3], 1.0, 1.0),
                dpopt.suppression_problem(dpopt.Occupancy.from_triples(users=[0, 1], grids=[0, 0], counts=[2, 3]),
                                          10.0, 1.0))
    for q in problems:
        with pytest.raises(dpopt.DpoptInputError, match="`constraints` must be cvxpy constraints"):
            q.with_constraints("x")
    with pytest.raises(dpopt.DpoptInputError, match="`options` must hold HiGHS options HiGHS accepts"):
        p.solve_plan(options={"bogus_option": 1})
    with pytest.raises(dpopt.DpoptInputError, match=r"`problem` must be convex by cvxpy's rules \(DCP\)"):
        p.with_objective(cp.sqrt(p.bias)).solve_plan()
    with pytest.raises(dpopt.DpoptInputError, match=r"`problem` must be convex by cvxpy's rules \(DCP\)"):
        p.with_constraints(cp.square(p.bias) >= 1).solve_plan()


def test_an_epsilon_whose_noise_cost_highs_reads_as_infinite_is_refused_by_name():
    """ε = 1e-19 passed the checks and ended in status error with no plan (an outside fuzz run)."""
    import dpopt

    with pytest.raises(dpopt.DpoptInputError, match="`epsilon` must be at least 1e-17"):
        dpopt.clipping_problem([1, 2, 3], 1.0, 1e-19)
    plan = dpopt.clipping_problem([1, 2, 3], 1.0, 1e-17).solve_plan()
    assert plan.status is dpopt.solve.Status.OPTIMAL
    assert plan.error == pytest.approx(dpopt.optimal_clipping([1, 2, 3], 1.0, 1e-17).error, rel=1e-9)
