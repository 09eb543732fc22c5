"""Objectives inside the clipping plan: worst case, MSE, high probability, and a user's own.

The reference is independent of the LP: along the optimal frontier of seeds 000/001 a plan is a
threshold T on the per-user width U·m_ℓ, with least worst-case bias Σ(U·m_ℓ − T)⁺/(κ·n) (κ = 2 for
d = 1: symmetric clipping; κ = 1 for the ℓ1 ball, d ≥ 2) and sensitivity T/n (d = 1) or 2T/n
(d ≥ 2). Any objective increasing in both terms is minimised on that frontier: a bounded scalar
search on each linear piece between consecutive U·m_ℓ.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.stats import gamma

import dpopt

RTOL = 1e-6


def frontier_min(counts, U, eps, d, f):
    m = np.asarray(counts, float)
    n = m.sum()
    kappa, ds = (2.0, 1.0) if d == 1 else (1.0, 2.0)
    g = lambda T: f(np.maximum(U * m - T, 0).sum() / (kappa * n), ds * T / n)  # noqa: E731
    knots = np.unique(np.r_[0.0, U * m])
    best = min(g(t) for t in knots)
    for lo, hi in zip(knots[:-1], knots[1:]):
        r = minimize_scalar(g, bounds=(lo, hi), method="bounded", options={"xatol": 1e-13 * max(1.0, hi)})
        best = min(best, r.fun)
    return best


def criteria(d, eps, beta=0.05):
    q = gamma.ppf(1 - beta, d)  # Gamma(d, 1) quantile: P[‖Z‖₁ ≥ q·Δ/ε] = β
    return {"worst_case": lambda b, s: b + d * s / eps,
            "mse": lambda b, s: b * b + 2 * d * (s / eps) ** 2,
            "high_probability": lambda b, s: b + q * s / eps}


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("objective", ["worst_case", "mse", "high_probability"])
def test_each_objective_equals_the_frontier_minimum_and_is_certified(seed, objective):
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 40, rng.integers(3, 25))
    d = int(rng.choice([1, 1, 2, 3]))
    eps = float(rng.choice([0.1, 0.5, 1.0, 4.0]))
    U = float(rng.uniform(0.5, 3.0))
    plan = dpopt.clipping_problem(counts, U, eps, dim=d, objective=objective).solve_plan()
    want = frontier_min(counts, U, eps, d, criteria(d, eps)[objective])
    assert plan.objective == pytest.approx(want, rel=RTOL, abs=1e-12)
    assert plan.objective == pytest.approx(criteria(d, eps)[objective](plan.bias, plan.sensitivity), rel=1e-12)
    assert plan.error == pytest.approx(plan.bias + plan.noise, rel=1e-12) and plan.info["objective"] == objective
    if plan.certificate is not None:  # present unless the MSE optimum has no bias (s undefined)
        assert plan.check()
    else:
        assert objective == "mse" and plan.bias <= 1e-9


def test_a_certificate_is_attached_on_most_instances_and_never_with_a_variant():
    found = 0
    for seed in range(6):
        counts = np.random.default_rng(seed).integers(1, 60, 30)
        for objective in ("worst_case", "mse", "high_probability"):
            found += dpopt.clipping_problem(counts, 1.0, 0.3, objective=objective).solve_plan().certificate is not None
            capped = dpopt.clipping_problem(counts, 1.0, 0.3, objective=objective, bias_cap=0.5)
            assert capped.solve_plan().certificate is None
    assert found == 18


@pytest.mark.parametrize("seed", range(5))
def test_a_users_own_objective(seed):
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 40, 12)
    k = float(rng.uniform(0.5, 20))
    p = dpopt.clipping_problem(counts, 1.0, 1.0)
    q = p.with_objective(p.bias + k * p.sensitivity)
    plan = q.solve_plan()
    assert plan.info["objective"] == "custom" and plan.certificate is None
    assert plan.objective == pytest.approx(frontier_min(counts, 1.0, 1.0, 1, lambda b, s: b + k * s), rel=RTOL)
    again = q.with_objective("mse").solve_plan()  # back to a built-in: certified again
    assert again.info["objective"] == "mse"
    assert again.objective == pytest.approx(frontier_min(counts, 1.0, 1.0, 1, criteria(1, 1.0)["mse"]), rel=RTOL)


def test_objective_options_are_checked():
    with pytest.raises(dpopt.DpoptInputError, match="`objective`"):
        dpopt.clipping_problem([1, 2], 1.0, 1.0, objective="l2")
    with pytest.raises(dpopt.DpoptInputError, match="`failure_probability`"):
        dpopt.clipping_problem([1, 2], 1.0, 1.0, objective="high_probability", failure_probability=1.5)
    assert math.isfinite(dpopt.clipping_problem([1, 2], 1.0, 1.0, objective="mse").solve_plan().objective)


def test_a_quadratic_objective_is_never_exported_as_its_linear_part(tmp_path):
    p = dpopt.clipping_problem([1, 2, 3], 1.0, 1.0, objective="mse")
    with pytest.raises(ValueError, match="quadratic"):
        p.export(tmp_path / "mse.lp")
    assert p.with_objective("worst_case").export(tmp_path / "wc.lp").exists()
