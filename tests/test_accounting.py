"""ρ-zCDP accounting and the (ε, δ) conversion (dpopt.accounting, models/gaussian.md §4)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.stats import norm

from dpopt import DpoptInputError
from dpopt.accounting import (
    ZcdpAccount,
    check_delta,
    check_rho,
    compose_zcdp,
    pure_to_zcdp,
    rho_from_epsilon,
    user_rho,
    zcdp_account,
    zcdp_epsilon,
    zcdp_epsilon_alpha,
    zcdp_epsilon_simple,
)
from dpopt.plan import GridPlan
from dpopt.solve.result import Status

# Published by OpenDP 0.16.0 (an independent Rust implementation of CKS 2020 Cor. 13):
# opendp.combinators.make_zCDP_to_approxDP(make_gaussian(..., scale=1)).map(sqrt(2ρ)).epsilon(δ).
# tests/benchmarks/bench_gaussian.py repeats the comparison live against the installed OpenDP.
OPENDP_VALUES = [
    (0.5, 1e-6, 5.22153444453017),
    (0.01, 1e-5, 0.5457255482740025),
    (2.0, 1e-6, 11.688596249354896),
    (10.0, 1e-9, 37.63745357791327),
    (1e-4, 1e-6, 0.05372712063485988),
    (0.125, 1e-3, 1.5460961269033575),
    (1.0, 1e-10, 10.034343581347633),
]


def gaussian_exact_delta(rho: float, eps: float) -> float:
    """The exact privacy profile of the Gaussian mechanism with Δ/σ = μ = √(2ρ) (Balle & Wang,
    ICML 2018, Theorem 8): δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ)."""
    mu = math.sqrt(2 * rho)
    return norm.cdf(mu / 2 - eps / mu) - math.exp(eps) * norm.cdf(-mu / 2 - eps / mu)


@pytest.mark.parametrize("rho,delta,expected", OPENDP_VALUES)
def test_tight_conversion_matches_opendp(rho, delta, expected):
    assert zcdp_epsilon(rho, delta) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("rho,delta,_", OPENDP_VALUES)
def test_tight_conversion_is_the_infimum_over_a_dense_alpha_grid(rho, delta, _):
    # independent of the minimiser: evaluate CKS Cor. 13 on 2·10⁵ orders α ∈ (1, 10⁶]
    alpha = 1 + np.geomspace(1e-6, 1e6, 200_001)
    vals = rho * alpha + (math.log(1 / delta) + (alpha - 1) * np.log1p(-1 / alpha) - np.log(alpha)) / (alpha - 1)
    eps, a_star = zcdp_epsilon_alpha(rho, delta)
    assert eps <= vals.min() + 1e-9
    assert eps >= vals.min() - 1e-6 * vals.min()
    assert rho * a_star + (math.log(1 / delta) + (a_star - 1) * math.log1p(-1 / a_star) - math.log(a_star)) / (a_star - 1) \
        == pytest.approx(eps, rel=1e-12)


@pytest.mark.parametrize("rho,delta,_", OPENDP_VALUES)
def test_tight_conversion_is_valid_for_the_gaussian_and_beats_the_simple_bound(rho, delta, _):
    eps = zcdp_epsilon(rho, delta)
    # valid: the Gaussian mechanism (ρ-zCDP) is (ε, δ)-DP at the converted ε (exact profile ≤ δ)
    assert gaussian_exact_delta(rho, eps) <= delta
    # tight-ish: not far above the Gaussian's own exact ε (the conversion holds for any ρ-zCDP
    # mechanism, so it cannot be below it)
    assert eps < zcdp_epsilon_simple(rho, delta)
    assert gaussian_exact_delta(rho, 0.8 * eps) > delta


def test_simple_bound_by_hand():
    assert zcdp_epsilon_simple(0.5, math.exp(-8)) == pytest.approx(0.5 + 2 * 2)


@pytest.mark.parametrize("eps,delta", [(1.0, 1e-6), (10.0, 1e-6), (0.1, 1e-9), (50.0, 1e-3), (1e-3, 1e-5)])
def test_round_trip_epsilon_rho_epsilon(eps, delta):
    rho = rho_from_epsilon(eps, delta)
    back = zcdp_epsilon(rho, delta)
    assert back <= eps  # never over the budget
    assert back == pytest.approx(eps, rel=1e-9)
    assert zcdp_epsilon(rho * (1 + 1e-6), delta) > eps  # and the largest such ρ


@pytest.mark.parametrize("rho", [1e-4, 0.02, 1.0, 7.5, 300.0])
def test_round_trip_rho_epsilon_rho(rho):
    eps = zcdp_epsilon(rho, 1e-6)
    assert rho_from_epsilon(eps, 1e-6) == pytest.approx(rho, rel=1e-8)


def test_headline_budget_eps_10_delta_1e6_in_zcdp():
    # (ε, δ) = (10, 10⁻⁶) is ρ ≈ 1.5393-zCDP by the tight conversion; the simple bound gives less
    rho = rho_from_epsilon(10.0, 1e-6)
    assert rho == pytest.approx(1.5392787638662846, rel=1e-9)
    simple = (math.sqrt(math.log(1e6) + 10) - math.sqrt(math.log(1e6))) ** 2  # solves ρ + 2√(ρL) = 10
    assert zcdp_epsilon_simple(simple, 1e-6) == pytest.approx(10.0)
    assert rho > simple


def test_monotone_in_rho_and_delta():
    rhos = np.geomspace(1e-3, 10, 9)
    e = [zcdp_epsilon(r, 1e-6) for r in rhos]
    assert np.all(np.diff(e) > 0)
    d = [zcdp_epsilon(1.0, x) for x in (1e-3, 1e-6, 1e-9)]
    assert np.all(np.diff(d) > 0)


def test_pure_and_composition():
    assert pure_to_zcdp(2.0) == 2.0
    assert compose_zcdp([0.25, 0.5, 0.0]) == 0.75
    with pytest.raises(DpoptInputError, match="rhos"):
        compose_zcdp([0.1, -0.1])


def _plan(unit: str) -> GridPlan:
    # 3 users x 3 grids; user 0 kept in grids 0, 1, 2; user 1 suppressed in grid 1; grid 2 withheld
    retained = sp.csr_array(np.array([[2, 1, 1], [1, 0, 3], [0, 4, 0]], dtype=np.int64))
    return GridPlan(
        retained=retained,
        budget_mean=np.array([0.1, 0.2, 0.4]),
        budget_variance=np.array([0.05, 0.1, 0.0]),
        released=np.array([True, True, False]),
        unit=unit, method="test", status=Status.OPTIMAL,
    )


def test_user_rho_recounted_by_hand():
    plan = _plan("rho")
    # user 0: grids 0, 1 (grid 2 withheld) -> 0.15 + 0.3; user 1: grid 0 -> 0.15; user 2: grid 1 -> 0.3
    np.testing.assert_allclose(user_rho(plan), [0.45, 0.15, 0.3])
    acc = zcdp_account(plan, 1e-6)
    assert isinstance(acc, ZcdpAccount)
    assert acc.rho_total == pytest.approx(0.45)
    assert acc.epsilon_total == pytest.approx(zcdp_epsilon(0.45, 1e-6))
    assert acc.epsilon_simple > acc.epsilon_total
    with pytest.raises(DpoptInputError, match="unit"):
        user_rho(_plan("epsilon"))


def test_account_from_a_number():
    acc = zcdp_account(0.5, 1e-6)
    assert acc.epsilon_total == pytest.approx(5.22153444453017, rel=1e-9)
    assert acc.alpha > 1


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "1"])
def test_bad_rho(bad):
    with pytest.raises(DpoptInputError, match="rho"):
        check_rho(bad)


@pytest.mark.parametrize("bad", [0, 1, 1.5, -1e-6, float("nan"), None])
def test_bad_delta(bad):
    with pytest.raises(DpoptInputError, match="delta"):
        check_delta(bad)
    with pytest.raises(DpoptInputError, match="delta"):
        zcdp_epsilon(1.0, bad)


# --- the one spend record (compose_spend), the rho -> eps step of a pure piece, the delta split -------------------

def test_pure_epsilon_is_the_largest_float_whose_square_half_fits():
    from fractions import Fraction
    import math as _m

    from dpopt.accounting import pure_epsilon

    rng = np.random.default_rng(20261202)
    for rho in np.concatenate([10.0 ** rng.uniform(-8, 3, 300), [0.075, 0.5, 2.0, 1e-300]]):
        e = pure_epsilon(float(rho))
        assert Fraction(e) ** 2 / 2 <= Fraction(float(rho))
        assert Fraction(_m.nextafter(e, _m.inf)) ** 2 / 2 > Fraction(float(rho))
    assert pure_epsilon(0.0) == 0.0 and pure_epsilon(-1.0) == 0.0


def test_compose_spend_sums_exactly_and_prices_pure_pieces_at_half_their_square():
    from fractions import Fraction

    from dpopt.accounting import compose_spend, zcdp_epsilon

    rng = np.random.default_rng(7)
    for _ in range(100):
        vals = rng.uniform(0.0, 2.0, 5).tolist()
        pieces = dict(zip(["count", "selection", "sum", "bounds", "sumsq"], vals))
        eps = compose_spend(pieces, unit="epsilon", pure=("selection", "bounds"), delta=1e-7)
        assert eps.unit == "epsilon" and eps.total == float(sum(Fraction(v) for v in vals)) == eps.epsilon
        assert eps.pieces == pieces and eps.delta == 1e-7
        rho = compose_spend(pieces, unit="rho", pure=("selection", "bounds"), delta=1e-6, delta_conversion=9e-7)
        want = sum(Fraction(pieces[n]) for n in ("count", "sum", "sumsq")) \
            + sum(Fraction(pieces[n]) ** 2 / 2 for n in ("selection", "bounds"))
        assert rho.total == float(want)
        assert list(rho.pieces) == ["count_rho", "sum_rho", "sumsq_rho", "selection_epsilon", "bounds_epsilon"]
        assert rho.epsilon == zcdp_epsilon(rho.total, 9e-7) and rho.delta == 1e-6
    assert compose_spend({"a": 0.5}, unit="rho").epsilon is None  # no delta: no (eps, delta) statement
    with pytest.raises(ValueError, match="unit"):
        compose_spend({"a": 0.5}, unit="eps")


def test_split_delta_adds_up():
    from dpopt.accounting import split_delta

    for d in (1e-9, 1e-6, 0.3):
        for share in (0.0, 0.25, 0.5, 1.0):
            sel, conv = split_delta(d, selection_share=share)
            assert sel == share * d and sel + conv == pytest.approx(d, rel=0, abs=1e-18) and conv >= 0


@pytest.mark.parametrize("rtol", [0, -1e-3, float("nan"), 1.5, "1e-9", True])
def test_rho_from_epsilon_refuses_a_tolerance_its_bisection_cannot_meet(rtol):
    """rtol ≤ 0 looped forever (a float bracket never shrinks below its own spacing); NaN, ≥ 1 or text
    were read silently. One line naming `rtol`."""
    with pytest.raises(DpoptInputError, match="`rtol` must be a number in"):
        rho_from_epsilon(1.0, 1e-6, rtol=rtol)
    assert rho_from_epsilon(1.0, 1e-6, rtol=1e-15) == pytest.approx(rho_from_epsilon(1.0, 1e-6), rel=1e-11)
