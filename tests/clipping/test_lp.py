"""The clipping LPs (per-user LP (8), per-sample LP of Lemma III.1) on both back-ends vs the closed form."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from dpopt import DpoptInputError
from dpopt.calculus import clipping_error
from dpopt.clipping import (
    clipping_model,
    optimal_clipping,
    per_sample_model,
    per_user_model,
    solve_clipping,
    standard_form_kkt,
)
from dpopt.solve import Status, solve, write_model

from .conftest import ANCHOR_ATOL, DUAL_TOL, LP_RTOL, U_PAPER, geometric, random_instance

N_INSTANCES = 120
COMBOS = [(f, b) for f in ("per-user", "per-sample") for b in ("highspy", "cvxpy")]


@pytest.mark.parametrize("i", range(N_INSTANCES))
def test_closed_form_equals_lp(i: int) -> None:
    """≥ 100 seeded instances: ties (2d/ε integer), T_ε = 0 (ε < 2d/L) and generic ε; d = 1 and 2."""
    rng = np.random.default_rng(7000 + i)
    m, U, eps, d = random_instance(rng, i)
    cf = optimal_clipping(m, U, eps, dim=d)
    assert cf.certificate.check()
    scale = U  # errors are at most U
    for formulation, backend in COMBOS:
        lp = solve_clipping(m, U, eps, dim=d, formulation=formulation, backend=backend)
        where = f"{formulation}/{backend}, m={m.tolist()}, U={U}, eps={eps}, d={d}"
        assert lp.status is Status.OPTIMAL, where
        assert lp.objective == pytest.approx(cf.error, rel=LP_RTOL, abs=LP_RTOL * scale), where
        # the LP's intervals, evaluated by the independent error calculus, attain the optimum
        assert clipping_error(m, U, eps, lp.lower, lp.upper, dim=d) == pytest.approx(
            cf.error, rel=LP_RTOL, abs=LP_RTOL * scale), where
        # the solver's duals, mapped to the paper's multipliers, certify optimality
        rep = lp.certificate.report(DUAL_TOL)
        assert rep.ok, (where, rep)
        assert lp.info["kkt"].ok, (where, lp.info["kkt"])


def _unique_dual(m: np.ndarray, U: float, T: float) -> bool:
    return T == 0.0 or int(np.sum(U * m == T)) == 1


def test_duals_equal_closed_form_multipliers_when_unique(rng: np.random.Generator) -> None:
    """When the reduced dual is unique (T = 0, or one user at U m_ℓ = T) HiGHS must return ERRATA E4's λ."""
    checked = 0
    for i in range(80):
        m, U, eps, d = random_instance(rng, i)
        cf = optimal_clipping(m, U, eps, dim=d)
        if not _unique_dual(m, U, cf.threshold):
            continue
        for formulation, backend in COMBOS:
            lp = solve_clipping(m, U, eps, dim=d, formulation=formulation, backend=backend)
            np.testing.assert_allclose(lp.certificate.lam, cf.certificate.lam, atol=DUAL_TOL)
            assert lp.certificate.lam_tau == pytest.approx(cf.certificate.lam_tau, abs=DUAL_TOL)
        checked += 1
    assert checked >= 20


def test_lp_primal_equals_closed_form_without_ties() -> None:
    """Distinct U m_ℓ and 2/ε not an integer: the LP optimum is unique, the intervals coincide."""
    m = np.array([1, 2, 3, 5, 8, 13, 21])
    for eps in (0.35, 0.9, 1.3):
        cf = optimal_clipping(m, 1.0, eps)
        for formulation, backend in COMBOS:
            lp = solve_clipping(m, 1.0, eps, formulation=formulation, backend=backend)
            np.testing.assert_allclose(lp.lower, cf.lower, atol=1e-7)
            np.testing.assert_allclose(lp.upper, cf.upper, atol=1e-7)
            assert lp.threshold == pytest.approx(cf.threshold, abs=1e-7)


@pytest.mark.parametrize("eps, expected", [(0.1, 20.02232), (0.5, 10.44643), (1.0, 6.96429), (2.0, 4.64286)])
def test_geometric_anchor_by_lp(eps: float, expected: float) -> None:
    for formulation in ("per-user", "per-sample"):
        lp = solve_clipping(geometric(6), U_PAPER, eps, formulation=formulation)
        assert lp.objective == pytest.approx(expected, abs=ANCHOR_ATOL)
        assert lp.error == pytest.approx(expected, abs=ANCHOR_ATOL)


def test_per_sample_lp_finds_a_per_user_optimum() -> None:
    """The per-sample LP allows one interval per sample; averaging them per user loses nothing (d = 1)."""
    m = np.array([3, 1, 2, 2])
    U, eps = 1.0, 0.8
    n = m.sum()
    owner = np.repeat(np.arange(m.size), m)
    for backend in ("highspy", "cvxpy"):
        lp = solve_clipping(m, U, eps, formulation="per-sample", backend=backend)
        a_s, b_s = lp.info["sample_lower"], lp.info["sample_upper"]
        assert a_s.shape == b_s.shape == (n,)
        assert np.all(a_s <= b_s + 1e-9)
        # exact worst case of the per-sample strategy (seed 000 Lemma III.1, exact bias of notes §3.2)
        bias = max(np.sum(U - b_s), np.sum(a_s)) / n
        sens = np.max(np.bincount(owner, weights=b_s - a_s)) / n
        assert bias + sens / eps == pytest.approx(lp.objective, abs=1e-7)
        assert lp.error == pytest.approx(lp.objective, abs=1e-7)  # the per-user averages


def exact_bias_per_sample_optimum(m: np.ndarray, U: float, eps: float) -> float:
    """Per-sample LP (d = 1) with the *exact* worst-case bias max{Σ_j(U − b_j), Σ_j a_j}/n of
    notes-001 §3.2 instead of the paper's Σ_j max{a_j, U − b_j}/n; built here in cvxpy, independently."""
    n, owner = int(m.sum()), np.repeat(np.arange(m.size), m)
    a, b = cp.Variable(n), cp.Variable(n)
    bias, tau = cp.Variable(), cp.Variable()
    per_user = np.zeros((m.size, n))
    per_user[owner, np.arange(n)] = 1.0
    cons = [a >= 0, b <= U, a <= b, bias >= cp.sum(U - b) / n, bias >= cp.sum(a) / n,
            tau >= per_user @ (b - a)]
    prob = cp.Problem(cp.Minimize(bias + tau / (eps * n)), cons)
    prob.solve(solver=cp.HIGHS)
    assert prob.status == cp.OPTIMAL
    return float(prob.value)


@pytest.mark.parametrize("i", [i for i in range(48) if i % 4])  # d = 1 members of the family
def test_exact_bias_per_sample_lp_has_the_same_optimum(i: int) -> None:
    """notes-001 §3.2: the paper's scalar bias is only an upper bound, yet with the exact bias the
    per-sample optimum is still E^OPT (ties and T_ε = 0 included)."""
    m, U, eps, d = random_instance(np.random.default_rng(7000 + i), i)
    assert d == 1
    expected = optimal_clipping(m, U, eps).error
    assert exact_bias_per_sample_optimum(m, U, eps) == pytest.approx(expected, rel=LP_RTOL, abs=LP_RTOL * U)


def test_model_shapes_and_blocks() -> None:
    m = np.array([2, 3, 1])
    pu = per_user_model(m, 1.0, 0.5)
    assert (pu.num_cols, pu.num_rows) == (4, 3)
    assert set(pu.col_blocks) == {"alpha", "tau"} and set(pu.row_blocks) == {"range"}
    ps = per_sample_model(m, 1.0, 0.5)
    assert (ps.num_cols, ps.num_rows) == (3 * 6 + 1, 3 * 6 + 3)
    assert set(ps.row_blocks) == {"order", "bias_low", "bias_high", "range"}
    ps2 = per_sample_model(m, 1.0, 0.5, dim=2)
    assert ps2.c[ps2.col_blocks["tau"]][0] == pytest.approx(2 * 2 / 0.5)


def test_standard_form_kkt_detects_wrong_duals() -> None:
    model = per_user_model([3, 1, 2], 1.0, 0.7)
    res = solve(model)
    assert standard_form_kkt(model, res).ok
    import dataclasses

    bad = dataclasses.replace(res, row_duals=res.row_duals + 0.3)
    assert not standard_form_kkt(model, bad).ok


@pytest.mark.parametrize("suffix", [".mps", ".lp"])
@pytest.mark.parametrize("formulation", ["per-user", "per-sample"])
def test_export(tmp_path, suffix: str, formulation: str) -> None:
    model = clipping_model([2, 1, 3], 65.0, 0.5, formulation=formulation)
    path = write_model(model, tmp_path / f"clip{suffix}")
    text = path.read_text()
    assert path.stat().st_size > 0
    if suffix == ".mps":
        assert "ROWS" in text and "COLUMNS" in text and "RHS" in text
        assert sum(1 for line in text.splitlines() if line.startswith(" G ")) == model.num_rows
    else:
        assert "min" in text.lower() and "st" in text.lower()
    # read the file back with HiGHS itself (independent of dpopt's model objects) and solve it
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    assert h.readModel(str(path)) == highspy.HighsStatus.kOk
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    expected = optimal_clipping([2, 1, 3], 65.0, 0.5).error * 6  # objective = n · E^OPT
    assert h.getInfo().objective_function_value == pytest.approx(expected, rel=LP_RTOL)


def test_options_and_time_limit_pass_through() -> None:
    m = geometric(4)
    base = solve_clipping(m, 1.0, 0.3)
    for opts in ({"presolve": "on"}, {"solver": "ipm"}, {"presolve": "off", "solver": "simplex"}):
        for backend in ("highspy", "cvxpy"):
            lp = solve_clipping(m, 1.0, 0.3, options=opts, backend=backend, time_limit=30.0)
            assert lp.status is Status.OPTIMAL
            assert lp.objective == pytest.approx(base.objective, rel=LP_RTOL)
    with pytest.raises(ValueError, match="option"):
        solve_clipping(m, 1.0, 0.3, options={"no_such_option": 1})


def test_bad_choices() -> None:
    with pytest.raises(DpoptInputError, match="formulation"):
        solve_clipping([1, 2], 1.0, 0.5, formulation="per-grid")
    with pytest.raises(DpoptInputError, match="backend"):
        solve_clipping([1, 2], 1.0, 0.5, backend="gurobi")
    with pytest.raises(DpoptInputError, match="counts"):
        solve_clipping([0, 2], 1.0, 0.5)
    with pytest.raises(DpoptInputError, match="epsilon"):
        per_sample_model([1, 2], 1.0, 0.0)
    with pytest.raises(DpoptInputError, match="time_limit"):
        solve_clipping([1, 2], 1.0, 0.5, time_limit=-1.0)


@pytest.mark.parametrize("backend", ["highspy", "cvxpy"])
def test_time_limit_is_reported_not_hidden(backend: str) -> None:
    """A solve stopped by its time limit reports TIME_LIMIT and no silent (non-optimal) plan."""
    m = np.random.default_rng(0).integers(1, 50, size=200_000)
    plan = solve_clipping(m, 65.0, 0.001, time_limit=0.01, backend=backend)
    assert plan.status is Status.TIME_LIMIT
    assert plan.certificate is None and not plan.check()
    assert np.isnan(plan.error) or plan.error >= optimal_clipping(m, 65.0, 0.001).error - 1e-9


def test_random_family_covers_the_regimes() -> None:
    """The cross-check family has ties (2d/ε integer), T_ε = 0 (ε < 2d/L), generic ε, d = 1 and d = 2."""
    kinds = {"tie": 0, "zero": 0, "generic": 0}
    dims = set()
    for i in range(N_INSTANCES):
        m, U, eps, d = random_instance(np.random.default_rng(7000 + i), i)
        dims.add(d)
        x = 2 * d / eps
        if eps < 2 * d / m.size:
            kinds["zero"] += 1
            assert optimal_clipping(m, U, eps, dim=d).threshold == 0.0
        elif abs(x - round(x)) < 1e-9:
            kinds["tie"] += 1
        else:
            kinds["generic"] += 1
    assert min(kinds.values()) >= 30 and dims == {1, 2}
