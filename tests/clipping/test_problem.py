"""Custom clipping problems (cvxpy, HiGHS): each variant reduces to the base case when slack and its
worst-case error is confirmed by brute force (dpopt.verify); the d ≥ 2 correction (ERRATA E3)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from dpopt import DpoptInputError, verify
from dpopt.clipping import clipping_problem, optimal_clipping
from dpopt.clipping.problem import ClippingProblem, solve_problem
from dpopt.solve import Status
from dpopt.verify import estimators

from .conftest import LP_RTOL, random_instance

BF_TOL = 1e-6  # brute force (exact) vs an LP optimum from HiGHS


def scaled(est, user_bounds: np.ndarray):
    """Estimator on samples t ∈ [0, 1] rescaled to x = t·U_ℓ (heterogeneous ranges)."""

    def f(samples: np.ndarray, counts: np.ndarray) -> np.ndarray:
        return est(samples * np.repeat(user_bounds, counts), counts)

    return f


def brute_force_error_d1(plan, m: np.ndarray, user_bounds: np.ndarray) -> tuple[float, float]:
    """(worst-case bias, sensitivity) of interval clipping with the plan's intervals, by enumeration."""
    est = scaled(estimators.interval_clipped_mean(plan.lower, plan.upper), user_bounds)
    bias = verify.worst_case_error(est, m, 1.0, target=scaled(estimators.mean, user_bounds), levels=3)
    sens = verify.sensitivity(est, m, 1.0, levels=3)
    return bias.value, sens.value


def assert_brute_force_d1(plan, m: np.ndarray, user_bounds: np.ndarray) -> None:
    bias, sens = brute_force_error_d1(plan, m, user_bounds)
    assert plan.bias == pytest.approx(bias, abs=BF_TOL)
    assert plan.sensitivity == pytest.approx(sens, abs=BF_TOL)
    assert plan.error == pytest.approx(bias + sens / plan.epsilon, abs=BF_TOL)


# ---------------------------------------------------------------- base case
@pytest.mark.parametrize("i", range(12))
def test_base_problem_is_the_closed_form(i: int) -> None:
    rng = np.random.default_rng(300 + i)
    m, U, eps, d = random_instance(rng, i)
    plan = clipping_problem(m, U, eps, dim=d).solve_plan()
    assert plan.status is Status.OPTIMAL
    assert plan.error == pytest.approx(optimal_clipping(m, U, eps, dim=d).error, rel=LP_RTOL, abs=LP_RTOL * U)


def test_named_variables_and_with_constraints() -> None:
    m = np.array([3, 1, 2, 2])
    prob = clipping_problem(m, 1.0, 0.8)
    assert isinstance(prob, cp.Problem)
    assert set(prob.var_dict) == {"lower", "upper", "user_bias", "bias", "sensitivity"}
    base = prob.solve_plan()
    tighter = prob.with_constraints(prob.upper[0] <= 0.3, [prob.lower[1] >= 0.2])
    assert isinstance(tighter, ClippingProblem) and len(tighter.constraints) == len(prob.constraints) + 2
    plan = tighter.solve_plan()
    assert plan.upper[0] <= 0.3 + 1e-9 and plan.lower[1] >= 0.2 - 1e-9
    assert plan.error >= base.error - 1e-9
    assert_brute_force_d1(plan, m, np.ones(4))


# ---------------------------------------------------------------- per-user bounds U_ℓ
def test_user_bounds_equal_to_U_is_the_base_case() -> None:
    m = np.array([4, 1, 2, 2, 1])
    for eps in (0.3, 0.8, 2.5):
        plan = clipping_problem(m, 2.0, eps, user_bounds=np.full(5, 2.0)).solve_plan()
        assert plan.error == pytest.approx(optimal_clipping(m, 2.0, eps).error, rel=LP_RTOL)


def test_user_bounds_heterogeneous_closed_form_and_brute_force() -> None:
    """Reduced LP with right-hand sides U_ℓ m_ℓ: the optimum is min_t Σ(U_ℓ m_ℓ − t)⁺/2 + t/ε over n."""
    m = np.array([3, 1, 2, 2])
    Ub = np.array([1.0, 0.5, 0.25, 1.0])
    for eps in (0.4, 0.9, 1.7, 3.0):
        plan = clipping_problem(m, 1.0, eps, user_bounds=Ub).solve_plan()
        v = Ub * m
        expected = min(np.maximum(v - t, 0).sum() / 2 + t / eps for t in np.r_[0.0, v]) / m.sum()
        assert plan.error == pytest.approx(expected, rel=LP_RTOL)
        assert np.all(plan.upper <= Ub + 1e-9)
        assert_brute_force_d1(plan, m, Ub)


@pytest.mark.parametrize("i", range(40))
def test_reported_sensitivity_never_below_that_of_the_intervals(i: int) -> None:
    """Privacy: the plan's Δ (and bias) are never below the exact values of its own intervals,
    even by the solver's feasibility tolerance (seeds 20 and 39 were 1e-16 short before)."""
    rng = np.random.default_rng(i)
    L = int(rng.integers(2, 9))
    m = rng.integers(1, 6, L)
    U = float(rng.choice([1.0, 65.0]))
    d = int(rng.choice([1, 2]))
    eps = float(rng.uniform(0.05, 3.0))
    Ub = U * rng.uniform(0.2, 1.0, L)
    plan = clipping_problem(m, U, eps, dim=d, user_bounds=Ub).solve_plan()
    a, b, w = plan.lower, plan.upper, m / m.sum()
    if d == 1:  # seed 000 Lemma III.1 with the exact bias of notes-001 §3.2
        sens, bias = np.max(w * (b - a)), max(w @ (Ub - b), w @ a)
    else:  # seed 001 Lemma III.2, ERRATA E3
        sens, bias = 2 * np.max(w * b), w @ np.maximum(a, Ub - b)
    assert plan.sensitivity >= sens and plan.bias >= bias
    assert plan.error == pytest.approx(plan.objective, rel=LP_RTOL, abs=LP_RTOL * U)


# ---------------------------------------------------------------- cap on one user's bias
def test_bias_cap_slack_is_the_base_case() -> None:
    m = np.array([5, 1, 2, 1])
    for eps in (0.3, 1.0):
        plan = clipping_problem(m, 1.0, eps, bias_cap=10.0).solve_plan()
        assert plan.error == pytest.approx(optimal_clipping(m, 1.0, eps).error, rel=LP_RTOL)


def test_bias_cap_binding_brute_force() -> None:
    m = np.array([4, 1, 2, 1])
    n = m.sum()
    base = optimal_clipping(m, 1.0, 0.5)
    shares = m * np.maximum(base.lower, 1.0 - base.upper) / n
    cap = 0.5 * shares.max()
    plan = clipping_problem(m, 1.0, 0.5, bias_cap=cap).solve_plan()
    assert plan.status is Status.OPTIMAL
    new_shares = m * np.maximum(plan.lower, 1.0 - plan.upper) / n
    assert np.all(new_shares <= cap + 1e-9)
    assert plan.error > base.error + 1e-6  # the cap binds
    assert_brute_force_d1(plan, m, np.ones(4))


# ---------------------------------------------------------------- fixed intervals
def test_fixed_at_optimal_intervals_is_the_base_case() -> None:
    m = np.array([3, 1, 2, 2])
    base = optimal_clipping(m, 1.0, 0.6)
    fixed = {0: (base.lower[0], base.upper[0]), 2: (base.lower[2], base.upper[2])}
    plan = clipping_problem(m, 1.0, 0.6, fixed=fixed).solve_plan()
    assert plan.error == pytest.approx(base.error, rel=LP_RTOL)


def test_fixed_asymmetric_intervals_brute_force() -> None:
    """Asymmetric fixed intervals: the exact bias max{Σm(U−b), Σma}/n (not Σ max) is what brute force sees."""
    m = np.array([3, 1, 2, 2])
    fixed = {0: (0.1, 0.3), 3: (0.0, 1.0)}
    plan = clipping_problem(m, 1.0, 0.6, fixed=fixed).solve_plan()
    assert plan.lower[0] == pytest.approx(0.1, abs=1e-9) and plan.upper[0] == pytest.approx(0.3, abs=1e-9)
    assert plan.lower[3] == pytest.approx(0.0, abs=1e-9) and plan.upper[3] == pytest.approx(1.0, abs=1e-9)
    assert plan.error >= optimal_clipping(m, 1.0, 0.6).error - 1e-9
    assert_brute_force_d1(plan, m, np.ones(4))


def test_infeasible_combination_reports_status() -> None:
    prob = clipping_problem([2, 1], 1.0, 0.5, fixed={0: (0.0, 0.2)}, bias_cap=0.01)
    plan = prob.solve_plan()
    assert plan.status in (Status.INFEASIBLE, Status.INFEASIBLE_OR_UNBOUNDED)
    assert np.isnan(plan.error)


# ---------------------------------------------------------------- d ≥ 2 (ERRATA E3)
def test_vector_lp_is_twice_eopt_and_brute_force() -> None:
    m = np.array([2, 1, 1, 1])
    U, eps, d = 1.0, 1.5, 2
    plan = clipping_problem(m, U, eps, dim=d).solve_plan()
    cf = optimal_clipping(m, U, eps, dim=d)
    assert plan.error == pytest.approx(cf.error, rel=LP_RTOL)
    est = estimators.annulus_clipped_mean(plan.lower, plan.upper)
    sens = verify.sensitivity(est, m, U, dim=d, levels=3, formula=plan.sensitivity)
    assert sens.agrees(rtol=BF_TOL, atol=BF_TOL)
    bias = verify.worst_case_error(est, m, U, dim=d, levels=3, formula=plan.bias)
    assert bias.agrees(rtol=BF_TOL, atol=BF_TOL)


def seed_vector_plan(m: np.ndarray, U: float, T: float) -> tuple[np.ndarray, np.ndarray]:
    """Seed 001 Theorem III.1 applied to d ≥ 2: a = max{(U m − T)/(2m), 0}, b = U − a."""
    a = np.maximum((U * m - T) / (2 * m), 0.0)
    return a, U - a


@pytest.mark.parametrize("eps", [2.0, 0.5])
def test_seed_vector_sensitivity_violated_but_dpopt_not(eps: float) -> None:
    """ERRATA E3: a concrete neighbouring pair moves the seed's clipped mean by more than T_ε/n.

    ε = 2 (d = 2): T = 1 > 0, claimed Δ = 1/4; user 0 (a = 1/4, b = 3/4) moving both samples from
    e₁ to e₂ moves the clipped mean by 2·2·(3/4)/4 = 3/4.
    ε = 0.5: T = 0, the seed adds no noise (claimed Δ = 0), yet a = b = 1/2 for every user and one
    user 0 moving both samples from e₁ to e₂ moves the mean by 2·2·(1/2)/4 = 1/2.
    dpopt's ℓ1-ball strategy has brute-force sensitivity exactly its stated 2T/n.
    """
    m = np.array([2, 1, 1])
    U, d = 1.0, 2
    n = m.sum()
    plan = optimal_clipping(m, U, eps, dim=d)
    T = plan.threshold
    a, b = seed_vector_plan(m, U, T)
    claimed = T / n  # seed 001 Lemma III.3: max_ℓ Σ(b − a)/n = T/n
    seed = verify.sensitivity(estimators.annulus_clipped_mean(a, b), m, U, dim=d, levels=3, formula=claimed)
    assert seed.value > claimed + 0.1
    # by hand (ERRATA E3): the annulus has ℓ1 diameter 2b, so the true Δ is max_ℓ 2 m_ℓ b_ℓ / n
    assert seed.value == pytest.approx({2.0: 0.75, 0.5: 0.5}[eps], abs=1e-12)
    # the maximising pair differs in one user's samples and moves the mean by `value` in ℓ1
    f = estimators.annulus_clipped_mean(a, b)
    x = np.concatenate(seed.dataset)[None]
    y = np.concatenate(seed.neighbour)[None]
    changed = [i for i in range(m.size) if not np.array_equal(seed.dataset[i], seed.neighbour[i])]
    assert changed == [seed.user]
    assert np.abs(f(x, m) - f(y, m)).sum() == pytest.approx(seed.value)
    ours = verify.sensitivity(estimators.annulus_clipped_mean(plan.lower, plan.upper), m, U, dim=d, levels=3,
                              formula=plan.sensitivity)
    assert ours.respects(atol=1e-12) and ours.agrees()
    assert plan.sensitivity == pytest.approx(2 * T / n)


# ---------------------------------------------------------------- input checks
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"user_bounds": [1.0, 2.0]}, "user_bounds"),       # above U
        ({"user_bounds": [1.0]}, "user_bounds"),            # wrong shape
        ({"user_bounds": [0.0, 1.0]}, "user_bounds"),       # not positive
        ({"bias_cap": -0.1}, "bias_cap"),
        ({"fixed": {5: (0.0, 1.0)}}, "fixed"),
        ({"fixed": {0: (0.6, 0.4)}}, "fixed"),
        ({"fixed": {0: 0.5}}, "fixed"),
        ({"fixed": [(0, 1)]}, "fixed"),
        ({"dim": 0}, "dim"),
    ],
)
def test_bad_input(kwargs: dict, match: str) -> None:
    with pytest.raises(DpoptInputError, match=match):
        clipping_problem([1, 2], 1.0, 0.5, **kwargs)


def test_solve_problem_needs_a_clipping_problem() -> None:
    with pytest.raises(DpoptInputError, match="problem"):
        solve_problem(cp.Problem(cp.Minimize(0)))  # type: ignore[arg-type]


# ---------------------------------------------------------------- export of custom problems
@pytest.mark.parametrize("suffix", [".mps", ".lp"])
def test_export_custom_problem(tmp_path, suffix: str) -> None:
    """A custom model goes through cvxpy's standard form (from_cvxpy) to HiGHS writeModel."""
    from dpopt.solve import solve
    from dpopt.solve.cvxpy_backend import from_cvxpy

    prob = clipping_problem([2, 1, 3], 1.0, 0.5, fixed={0: (0.1, 0.5)}, bias_cap=0.3)
    model = from_cvxpy(prob)
    assert {"lower", "upper", "bias", "sensitivity", "user_bias"} <= set(model.col_blocks)
    res = solve(model)
    plan = prob.solve_plan()
    assert res.objective == pytest.approx(plan.error, abs=1e-9)
    np.testing.assert_allclose(res.value("lower"), plan.lower, atol=1e-7)
    path = prob.export(tmp_path / f"custom{suffix}")
    assert path.stat().st_size > 0


def test_from_cvxpy_keeps_maximisation_and_integers() -> None:
    from dpopt.solve import solve
    from dpopt.solve.cvxpy_backend import from_cvxpy

    x = cp.Variable(2, name="x")
    z = cp.Variable(name="z", integer=True)
    prob = cp.Problem(cp.Maximize(x[0] + 2 * z + 3), [x <= 1.5, x >= 0, z <= 2.5, z >= 0])
    model = from_cvxpy(prob)
    assert model.sense == "max" and model.is_mip
    res = solve(model)
    assert res.objective == pytest.approx(1.5 + 4 + 3)


def test_a_plan_states_its_gap():
    """DESIGN's results carry their gap: 0 for the closed form and an optimal LP (built-in or
    custom), inf where a time limit stopped the solve (the plan's error is then not proven: it was
    32.5 against the optimum 24.375 here, with the gap only in info["result"])."""
    import math

    import dpopt

    counts = [6, 3, 2, 1]
    assert dpopt.optimal_clipping(counts, 65.0, 1.0).gap == 0.0
    for solve in (lambda **k: dpopt.clipping_problem(counts, 65.0, 1.0).solve_plan(**k),
                  lambda **k: dpopt.solve_clipping(counts, 65.0, 1.0, **k)):
        assert solve().gap == 0.0 and solve().status == "optimal"
        stopped = solve(time_limit=0.0)
        assert stopped.status == "time_limit" and math.isinf(stopped.gap) and stopped.summary()["gap"] == stopped.gap
        if stopped.lower.size and math.isnan(stopped.lower[0]):  # no point: how many users it clips is unknown
            assert stopped.summary()["users_clipped"] is None


def test_export_problem_writes_the_lp_that_highs_solves_to_the_same_optimum(tmp_path) -> None:
    """export_problem had no test. The .lp file, read by HiGHS directly, has the cvxpy problem's optimum;
    a wrong suffix is refused before any conversion, a quadratic objective in one line naming it."""
    import cvxpy as cp
    import highspy

    from dpopt.clipping.problem import clipping_problem, export_problem

    prob = clipping_problem([2, 3, 5, 8, 13, 21], 10.0, 1.0)
    want = prob.solve(solver=cp.HIGHS)
    path = export_problem(prob, tmp_path / "clip.lp")
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.readModel(str(path))
    h.run()
    assert h.getInfo().objective_function_value == pytest.approx(want, rel=1e-9, abs=1e-12)
    with pytest.raises(DpoptInputError, match=r"`path` must end in \.mps or \.lp"):
        export_problem(prob, tmp_path / "clip.txt")
    quad = cp.Problem(cp.Minimize(cp.sum_squares(prob.var_dict["upper"])), prob.constraints)
    with pytest.raises(DpoptInputError, match="the objective is quadratic"):
        export_problem(quad, tmp_path / "quad.lp")
    with pytest.raises(DpoptInputError, match=r"`path` must end"):  # the suffix first, before converting
        export_problem(quad, tmp_path / "quad.csv")
