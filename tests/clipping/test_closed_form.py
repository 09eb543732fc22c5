"""Closed form of Theorem III.1 (seeds 000/001), its certificate (ERRATA E4), E^OPT (E5), d ≥ 2 (E3)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpopt import DpoptInputError
from dpopt.calculus import clipping_error, clipping_error_terms
from dpopt.clipping import (
    KKTCertificate,
    check_certificate,
    clipping_threshold,
    optimal_clipping,
    optimal_error,
    threshold_rank,
)

from .conftest import ANCHOR_ATOL, EXACT_RTOL, U_PAPER, extreme, geometric, random_instance


def g(values: np.ndarray, eps: float, d: int, t: float) -> float:
    """Seed 001's g(ε, t)·n = Σ max{(U m_ℓ − t)/2, 0} + d t/ε (notes-001, E^OPT = min_t g/n)."""
    return float(np.maximum(values - t, 0.0).sum() / 2.0 + d * t / eps)


def brute_min_g(m: np.ndarray, U: float, eps: float, d: int) -> float:
    """min over t ≥ 0 of g: g is convex piecewise linear with kinks at {U m_ℓ}, so t ∈ {0} ∪ {U m_ℓ}."""
    v = U * m.astype(float)
    return min(g(v, eps, d, t) for t in np.concatenate([[0.0], v])) / m.sum()


# ---------------------------------------------------------------- regression anchors
@pytest.mark.parametrize("eps, expected", [(0.1, 20.02232), (0.5, 10.44643), (1.0, 6.96429), (2.0, 4.64286)])
def test_geometric_anchor(eps: float, expected: float) -> None:
    plan = optimal_clipping(geometric(6), U_PAPER, eps)
    assert plan.error == pytest.approx(expected, abs=ANCHOR_ATOL)
    assert optimal_error(geometric(6), U_PAPER, eps)[0] == pytest.approx(expected, abs=ANCHOR_ATOL)


@pytest.mark.parametrize("eps, expected", [(0.5, 3.84091), (1.0, 3.25)])
def test_extreme_anchor(eps: float, expected: float) -> None:
    plan = optimal_clipping(extreme(101, 10), U_PAPER, eps)
    assert plan.error == pytest.approx(expected, abs=ANCHOR_ATOL)
    assert plan.threshold == 65.0  # T_ε = 65 for 2/101 ≤ ε < 2 (notes §5.2)


def test_geometric_thresholds_table() -> None:
    """T_ε jumps at ε = 2/(2^j − 1) (notes-001 §5.2 table), including the tie points themselves."""
    m = geometric(6)
    table = [(2.0, 4160), (2 / 3, 2080), (2 / 7, 1040), (2 / 15, 520), (2 / 31, 260), (2 / 63, 130),
             (2 / 127, 65), (0.99 * 2 / 127, 0)]
    for eps, T in table:
        assert optimal_clipping(m, U_PAPER, eps).threshold == T


# ---------------------------------------------------------------- optimality by construction
@pytest.mark.parametrize("i", range(60))
def test_error_is_min_of_g_and_matches_calculus(i: int) -> None:
    rng = np.random.default_rng(1000 + i)
    m, U, eps, d = random_instance(rng, i)
    plan = optimal_clipping(m, U, eps, dim=d)
    factor = 1.0 if d == 1 else 2.0  # ERRATA E3: the d ≥ 2 optimum is 2·E^OPT
    assert plan.error == pytest.approx(factor * brute_min_g(m, U, eps, d), rel=EXACT_RTOL)
    # the plan's intervals evaluated by the independent error calculus
    terms = clipping_error_terms(m, U, eps, plan.lower, plan.upper, dim=d)
    assert terms.error == pytest.approx(plan.error, rel=EXACT_RTOL)
    assert terms.bias == pytest.approx(plan.bias, rel=EXACT_RTOL, abs=1e-12)
    assert terms.sensitivity == pytest.approx(plan.sensitivity, rel=EXACT_RTOL, abs=1e-15)
    assert plan.noise == pytest.approx(d * plan.sensitivity / eps, rel=EXACT_RTOL, abs=1e-15)
    assert plan.certificate.check()


def test_random_strategies_never_beat_the_plan(rng: np.random.Generator) -> None:
    for i in range(40):
        m, U, eps, d = random_instance(rng, i)
        best = optimal_clipping(m, U, eps, dim=d).error
        for _ in range(50):
            a = rng.uniform(0, U, m.size) * rng.integers(0, 2, m.size)
            b = np.maximum(a, rng.uniform(0, U, m.size))
            b = np.where(rng.random(m.size) < 0.3, U, b)
            assert clipping_error(m, U, eps, a, b, dim=d) >= best - 1e-12 * U


def test_interval_shape_d1() -> None:
    """a + b = U, m_ℓ(b − a) = min{T, U m_ℓ}, and only users with U m_ℓ > T are clipped (Thm III.1)."""
    m = np.array([7, 1, 3, 3, 2, 9, 1])
    plan = optimal_clipping(m, 2.0, 0.5)
    T = plan.threshold
    np.testing.assert_allclose(plan.lower + plan.upper, 2.0, rtol=EXACT_RTOL)
    np.testing.assert_allclose(m * (plan.upper - plan.lower), np.minimum(T, 2.0 * m), rtol=EXACT_RTOL)
    assert plan.n_clipped == int(np.sum(2.0 * m > T))


@pytest.mark.parametrize("U", [0.1, 0.3, 0.7, 1.1, 3.3, 1e-3, 65.0])
def test_intervals_are_ordered_in_floating_point(U: float) -> None:
    """a_ℓ ≤ b_ℓ exactly: (U·m)/m rounds above U for U = 0.1, m = 3, which made a > b by an ulp
    at T = 0 (and dpopt's own error calculus refused the plan)."""
    for m in range(1, 50):
        for eps in (0.01, 1.0):
            plan = optimal_clipping([m, m, m, 1], U, eps)
            assert np.all(plan.lower <= plan.upper)
            if plan.threshold == 0.0:  # no noise: the released value must not depend on the data
                assert np.all(plan.lower == U / 2) and np.all(plan.upper == U / 2)
            n = 3 * m + 1
            assert plan.sensitivity >= np.max(np.array([m, m, m, 1]) * (plan.upper - plan.lower)) / n
            clipping_error_terms([m, m, m, 1], U, eps, plan.lower, plan.upper)


def test_no_clipping_for_large_epsilon() -> None:
    """ε ≥ 2d: T = U m*, no clipping, error = vanilla Laplace d U m*/(ε n) (notes-001 Lemma III.5)."""
    m = geometric(4)
    for d in (1, 3):
        plan = optimal_clipping(m, 65.0, 2.0 * d * 1.5, dim=d)
        assert plan.threshold == 65.0 * m.max()
        assert plan.n_clipped == 0
        vanilla = (1 if d == 1 else 2) * d * 65.0 * m.max() / (3.0 * d * m.sum())
        assert plan.error == pytest.approx(vanilla, rel=EXACT_RTOL)


@pytest.mark.parametrize("d", [1, 2, 4])
def test_zero_threshold_regime(d: int) -> None:
    """ε < 2d/L: T_ε = 0, no noise; d = 1 outputs U/2 (error U/2), d ≥ 2 outputs 0 (error U)."""
    m = np.array([4, 1, 2, 2, 5])
    eps = 2.0 * d / m.size * 0.7
    plan = optimal_clipping(m, 3.0, eps, dim=d)
    assert plan.threshold == 0.0
    assert plan.sensitivity == 0.0 and plan.noise == 0.0
    if d == 1:
        np.testing.assert_array_equal(plan.lower, 1.5)
        np.testing.assert_array_equal(plan.upper, 1.5)
        assert plan.error == pytest.approx(1.5, rel=EXACT_RTOL)
    else:
        np.testing.assert_array_equal(plan.upper, 0.0)
        assert plan.error == pytest.approx(3.0, rel=EXACT_RTOL)
    assert plan.certificate.check()
    assert plan.certificate.lam_tau > 0  # λ_τ = c − L/κ > 0 (notes §3.3, case k > L)


def test_tie_rank_snapping() -> None:
    """2d/ε an integer computed in floating point: ⌈2/(2/3)⌉ must be 3, not 4 (notes-001 §7)."""
    assert threshold_rank(2 / 3) == 3
    assert threshold_rank(2 / 7) == 7
    assert threshold_rank(0.1) == 20
    assert threshold_rank(0.1 * 3, 3) == 20
    assert threshold_rank(2.0 / 3.0 + 1e-6) == 3  # just above a tie: still rank 3
    assert threshold_rank(2.0 / 3.0 - 1e-6) == 4  # just below: rank 4
    assert threshold_rank(100.0) == 1
    np.testing.assert_array_equal(threshold_rank(np.array([2 / 3, 0.1, 1.0])), [3, 20, 2])


def test_tie_both_thresholds_optimal() -> None:
    """At a tie ε = 2d/k every τ ∈ [v_{k+1}, v_k] is optimal: g equal at both ends (notes §3.3)."""
    m = np.array([9, 6, 4, 4, 2, 1])
    v = np.sort(65.0 * m)[::-1]
    for k in range(1, m.size):
        eps = 2.0 / k
        T = clipping_threshold(m, 65.0, eps)
        assert T == v[k - 1]
        assert g(v, eps, 1, v[k - 1]) == pytest.approx(g(v, eps, 1, v[k]), rel=EXACT_RTOL)


def test_threshold_is_selection_not_sort() -> None:
    """T_ε equals the k-th largest by a full sort, on data with many repeats."""
    rng = np.random.default_rng(5)
    m = rng.integers(1, 30, size=2000)
    srt = np.sort(m)[::-1]
    for eps in (0.001, 0.01, 0.05, 0.3, 1.0, 2.0):
        k = math.ceil(2 / eps)
        assert clipping_threshold(m, 2.0, eps) == (2.0 * srt[k - 1] if k <= m.size else 0.0)


# ---------------------------------------------------------------- certificate (ERRATA E4)
def test_certificate_multipliers_match_notes() -> None:
    """Geometric ε = 0.1: T = 260, |G| = 15 users above T share λ = 1/2, the 16 at T share the rest."""
    m = geometric(6)
    cert = optimal_clipping(m, U_PAPER, 0.1).certificate
    v = U_PAPER * m
    assert cert.lam_tau == 0.0
    np.testing.assert_array_equal(cert.lam[v > 260], 0.5)
    np.testing.assert_allclose(cert.lam[v == 260], (10 - 7.5) / 16, rtol=EXACT_RTOL)
    np.testing.assert_array_equal(cert.lam[v < 260], 0.0)
    assert cert.lam.sum() == pytest.approx(10.0, rel=EXACT_RTOL)
    np.testing.assert_allclose(cert.mu, 1 - 2 * cert.lam)
    rep = check_certificate(cert)
    assert rep.ok and rep.duality_gap <= 1e-12


def test_seed_multipliers_violate_complementary_slackness() -> None:
    """ERRATA E4: the proof's multipliers force λ_S = 1/ε − |G|/2 = 2.5 > 0 while S = T = 260 > 0."""
    m = geometric(6)
    good = optimal_clipping(m, U_PAPER, 0.1).certificate
    S = good.s  # the same (optimal) primal point
    lam = np.where(S > 0, 0.5, 0.0)  # the seed: λ = 1/2 if α > 0 else 0, μ = 1 − 2λ
    mu = 1.0 - 2.0 * lam
    lam_S = good.cost - lam.sum()  # from stationarity in S (seed 000 eq. (9))
    assert lam_S == pytest.approx(2.5)
    seed = KKTCertificate(good.values, good.kappa, good.cost, S, good.tau, lam, mu, lam_S, source="seed")
    rep = seed.report()
    assert rep.stationarity <= 1e-12 and rep.primal == 0 and rep.dual == 0
    assert rep.complementary > 1.0 / good.values.max()  # λ_S·S = 650 (scaled by U m* = 4160)
    with pytest.raises(AssertionError, match="complementary"):
        check_certificate(seed)


def test_certificate_checker_catches_each_condition() -> None:
    base = optimal_clipping(np.array([3, 1, 2, 2]), 1.0, 0.8).certificate
    bad_primal = dataclasses.replace(base, tau=base.tau * 0.5)
    bad_dual = dataclasses.replace(base, lam=base.lam - 0.7, mu=base.mu + 1.4)
    bad_stat = dataclasses.replace(base, mu=base.mu + 0.1)
    assert base.check()
    assert bad_primal.report().primal > 0
    assert bad_dual.report().dual > 0
    assert bad_stat.report().stationarity > 0
    for c in (bad_primal, bad_dual, bad_stat):
        assert not c.check()


def test_checker_does_not_scale_small_multipliers_by_1_over_eps() -> None:
    """Tiny ε makes c = d/ε huge; a negative λ_ℓ (which lives in [0, 1/2]) must still fail."""
    base = optimal_clipping(np.array([3, 1, 2, 2]), 1.0, 1e-6).certificate
    assert base.check()
    lam = base.lam.copy()
    lam[0] = -1e-3
    bad = dataclasses.replace(base, lam=lam, mu=1.0 - 2.0 * lam, lam_tau=base.cost - lam.sum())
    assert bad.report().dual == pytest.approx(1e-3)
    assert not bad.check(tol=1e-7)


# ---------------------------------------------------------------- d ≥ 2 (ERRATA E3)
@pytest.mark.parametrize("d", [2, 3])
def test_corrected_vector_strategy(d: int) -> None:
    m = np.array([3, 1, 1, 1, 1])
    U, eps = 65.0, 2.0
    plan = optimal_clipping(m, U, eps, dim=d)
    T = plan.threshold
    np.testing.assert_array_equal(plan.lower, 0.0)
    np.testing.assert_allclose(plan.upper, np.minimum(U, T / m), rtol=EXACT_RTOL)
    n = m.sum()
    assert plan.sensitivity == pytest.approx(2 * T / n, rel=EXACT_RTOL)
    assert plan.sensitivity == pytest.approx(2 * np.max(m * plan.upper) / n, rel=EXACT_RTOL)
    assert plan.error == pytest.approx(2 * brute_min_g(m, U, eps, d), rel=EXACT_RTOL)
    assert plan.error == pytest.approx(clipping_error(m, U, eps, plan.lower, plan.upper, dim=d), rel=EXACT_RTOL)


# ---------------------------------------------------------------- E^OPT over a grid (ERRATA E5)
def test_optimal_error_grid_matches_pointwise() -> None:
    m = geometric(5)
    eps = np.geomspace(0.001, 10, 200)
    eps = np.concatenate([eps, 2.0 / np.arange(1, 70)])  # every tie point
    for d in (1, 2):
        grid = optimal_error(m, 65.0, eps, dim=d)
        point = np.array([optimal_clipping(m, 65.0, e, dim=d).error for e in eps])
        np.testing.assert_allclose(grid, point, rtol=EXACT_RTOL)


def test_optimal_error_plateau_and_seed000_formula_is_wrong() -> None:
    """E^OPT = U/2 on (0, 2d/L]; seed 000's eq. (12) (÷2m_ℓ, min_ℓ) gives a different value (E5)."""
    m = extreme(101, 10)
    eps = np.array([1e-4, 0.01, 2 / 101])
    np.testing.assert_allclose(optimal_error(m, 65.0, eps), 32.5, rtol=EXACT_RTOL)
    e, T = 0.5, 65.0
    seed000 = (np.maximum((65.0 * m - T) / (2 * m), 0).sum() + np.min(np.minimum(T, 65.0 * m)) / e) / m.sum()
    assert abs(seed000 - optimal_error(m, 65.0, e)[0]) > 0.1


@settings(max_examples=60, deadline=None)
@given(
    counts=st.lists(st.integers(1, 40), min_size=1, max_size=30),
    eps=st.lists(st.floats(1e-3, 50.0), min_size=2, max_size=40),
    d=st.integers(1, 4),
)
def test_optimal_error_never_increases(counts: list[int], eps: list[float], d: int) -> None:
    e = np.sort(np.asarray(eps))
    err = optimal_error(counts, 2.0, e, dim=d)
    assert np.all(np.diff(err) <= 1e-12 * 2.0)
    cap = 1.0 if d == 1 else 2.0  # U/2 resp. U
    assert np.all(err <= cap + 1e-12)


# ---------------------------------------------------------------- results and input checks
def test_plan_is_frozen() -> None:
    plan = optimal_clipping([1, 2], 1.0, 1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.error = 0.0  # type: ignore[misc]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"counts": [1, 0, 2]}, "counts"),
        ({"counts": []}, "counts"),
        ({"counts": [1.5, 2]}, "counts"),
        ({"bound": 0.0}, "bound"),
        ({"bound": float("inf")}, "bound"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"dim": 0}, "dim"),
    ],
)
def test_bad_input(kwargs: dict, match: str) -> None:
    args = {"counts": [1, 2, 3], "bound": 1.0, "epsilon": 0.5, "dim": 1} | kwargs
    with pytest.raises(DpoptInputError, match=match):
        optimal_clipping(args["counts"], args["bound"], args["epsilon"], dim=args["dim"])
    with pytest.raises(ValueError, match=match):
        optimal_error(args["counts"], args["bound"], [args["epsilon"]], dim=args["dim"])


def test_optimal_error_bad_grid() -> None:
    with pytest.raises(DpoptInputError, match="epsilons"):
        optimal_error([1, 2], 1.0, [0.5, 0.0])


def test_tiny_epsilon_does_not_overflow() -> None:
    plan = optimal_clipping([3, 1], 1.0, 1e-320)
    assert plan.threshold == 0.0 and plan.error == pytest.approx(0.5)
    # ε = 4: k = 1, T = 3, E = (0 + 3/4)/4
    np.testing.assert_allclose(optimal_error([3, 1], 1.0, [1e-320, 1e-300, 4.0]), [0.5, 0.5, 0.1875])


@pytest.mark.parametrize("tol", [-1e-9, float("nan"), float("inf"), "1e-9"])
def test_a_certificate_check_names_a_bad_tolerance(tol) -> None:
    """A negative tolerance failed every certificate, NaN failed it with an empty list of residuals:
    now one line naming `tol`."""
    plan = optimal_clipping([3, 5, 8, 13], 10.0, 1.0)
    with pytest.raises(DpoptInputError, match="`tol` must be a finite number >= 0"):
        check_certificate(plan.certificate, tol)
    assert check_certificate(plan.certificate, 0.0 + 1e-9).ok
