"""Array-length model of seed 003: exact minimax m (Lemma V.2, MILP), surrogate (19) (ERRATA E7),
heuristic (9), median, and the lemmas of Sections III and V as properties on random instances."""

from __future__ import annotations

import math
from dataclasses import FrozenInstanceError

import numpy as np
import pytest

import dpopt
from dpopt import verify
from dpopt.arrays import (
    array_averaging_error,
    array_length_milp,
    best_fit,
    exact_length_path,
    gain,
    heuristic_length,
    lemma_v4_thresholds,
    max_gain,
    median_length,
    optimal_array_length,
    paper_kkt_length,
    surrogate_length,
    surrogate_lp,
    surrogate_objective,
    switch_points,
    wrap_around,
)
from dpopt.arrays.length import TIE_RTOL
from dpopt.datasets import ITMS_BOUND, load_itms_counts
from dpopt.solve import Status, solve
from dpopt.verify import estimators as est

from ..conftest import EXACT_ATOL, EXACT_RTOL, SOLVER_ATOL, SOLVER_RTOL
from .conftest import random_counts, random_epsilon

N_INSTANCES = 120


def gamma_direct(counts, m):
    return sum(min(int(c), int(m)) for c in counts)


def error_direct(counts, U, eps, m):
    """Eq. (15) transcribed: U(1 − Γ_m/M) + U·m/(ε·Γ_m)."""
    g = gamma_direct(counts, m)
    return U * (1 - g / sum(counts)) + U * m / (eps * g)


def surrogate_direct(counts, U, eps, m):
    """Problem (19) objective transcribed (ERRATA E7)."""
    g = sum(min(float(c), float(m)) for c in counts)
    return U * (1 - g / sum(counts)) + U * m / (eps * len(counts) * min(counts))


def close(a, b, rtol=EXACT_RTOL, atol=EXACT_ATOL):
    return math.isclose(a, b, rel_tol=rtol, abs_tol=atol)


@pytest.fixture(scope="module")
def instances():
    rng = np.random.default_rng(3003)
    out = []
    for _ in range(N_INSTANCES):
        out.append((random_counts(rng), float(rng.uniform(0.5, 100)), random_epsilon(rng)))
    return out


# --------------------------------------------------------------------------- eq. (15)
def test_error_vectorised_matches_transcription(rng):
    for _ in range(50):
        counts = random_counts(rng)
        U, eps = float(rng.uniform(0.5, 100)), random_epsilon(rng)
        lengths = np.arange(1, counts.max() + 5)
        got = array_averaging_error(counts, U, eps, lengths)
        want = [error_direct(counts, U, eps, m) for m in lengths]
        np.testing.assert_allclose(got, want, rtol=EXACT_RTOL, atol=EXACT_ATOL)
        m = int(lengths[-1] // 2 + 1)
        assert isinstance(array_averaging_error(counts, U, eps, m), float)


def test_public_names_resolve():
    assert dpopt.best_fit is best_fit and dpopt.wrap_around is wrap_around
    assert dpopt.optimal_array_length is optimal_array_length
    assert dpopt.array_averaging_error is array_averaging_error


# --------------------------------------------------------------------------- exact: enumeration = scan = MILP
@pytest.mark.slow
def test_exact_enumeration_equals_integer_scan_and_milp(instances):
    for counts, U, eps in instances:
        enum = optimal_array_length(counts, U, eps, method="exact")
        scan = optimal_array_length(counts, U, eps, method="exact", solver="scan")
        milp = optimal_array_length(counts, U, eps, method="exact", solver="milp")
        # Lemma V.2: the best integer of [m_*, m^*] is attained on {m_ℓ}
        assert close(scan.error, enum.error)
        assert enum.length in set(counts.tolist())
        # the scan's smallest minimiser is the enumeration's (up to float ties)
        assert scan.length == enum.length or close(
            error_direct(counts, U, eps, scan.length), error_direct(counts, U, eps, enum.length)
        )
        # the direct transcription at every integer is never below the optimum
        all_m = range(int(counts.min()), int(counts.max()) + 1)
        best = min(error_direct(counts, U, eps, m) for m in all_m)
        assert close(best, enum.error)
        assert close(enum.error, error_direct(counts, U, eps, enum.length))
        # the smallest minimiser over every integer (direct transcription), up to float ties
        first = next(m for m in all_m if error_direct(counts, U, eps, m) <= best * (1 + TIE_RTOL))
        assert enum.length == first
        assert milp.status is Status.OPTIMAL
        assert math.isclose(milp.objective, enum.error, rel_tol=SOLVER_RTOL, abs_tol=SOLVER_ATOL)
        assert math.isclose(milp.error, enum.error, rel_tol=SOLVER_RTOL, abs_tol=SOLVER_ATOL)
        # the MILP's chosen candidate is a minimiser (HiGHS may pick another one among exact ties)
        assert milp.length in set(counts.tolist())
        assert math.isclose(
            error_direct(counts, U, eps, milp.length), best, rel_tol=SOLVER_RTOL, abs_tol=SOLVER_ATOL
        )
        assert enum.excess == 0.0 and enum.optimal_length == enum.length


def test_milp_model_read_outs():
    counts = np.array([5, 1, 3, 3, 8])
    model = array_length_milp(counts, 2.0, 0.7)
    # a genuine MILP: one binary per distinct count, the read-outs continuous
    assert model.is_mip
    np.testing.assert_array_equal(model.integrality[model.col_blocks["choose"]], True)
    assert not model.integrality[model.col_blocks["length"]].any()
    res = solve(model)
    assert res.status is Status.OPTIMAL
    # the objective is E_ε at the chosen candidate (costs transcribed independently)
    m_chosen = int(round(res.value("length")[0]))
    assert m_chosen in {1, 3, 5, 8}
    assert math.isclose(res.objective, error_direct(counts, 2.0, 0.7, m_chosen), rel_tol=SOLVER_RTOL)
    assert math.isclose(
        res.objective, min(error_direct(counts, 2.0, 0.7, m) for m in range(1, 9)), rel_tol=SOLVER_RTOL
    )
    m = res.value("length")[0]
    assert math.isclose(res.value("gamma")[0], gamma_direct(counts, round(m)), abs_tol=SOLVER_ATOL)
    assert math.isclose(res.value("choose").sum(), 1.0, abs_tol=SOLVER_ATOL)


# --------------------------------------------------------------------------- surrogate (19): LP = closed form
def test_surrogate_lp_equals_closed_form(instances):
    for counts, U, eps in instances:
        closed = optimal_array_length(counts, U, eps, method="surrogate")
        lp = optimal_array_length(counts, U, eps, method="surrogate", solver="lp")
        assert lp.status is Status.OPTIMAL
        # same optimal value of (19); the LP's point is a minimiser too
        assert math.isclose(lp.objective, closed.objective, rel_tol=SOLVER_RTOL, abs_tol=SOLVER_ATOL)
        assert math.isclose(
            surrogate_direct(counts, U, eps, lp.length), closed.objective, rel_tol=SOLVER_RTOL, abs_tol=SOLVER_ATOL
        )
        # closed form = brute-force minimum of F over every integer of [m_*, m^*] (and F is convex)
        f = [surrogate_direct(counts, U, eps, m) for m in range(int(counts.min()), int(counts.max()) + 1)]
        assert close(min(f), closed.objective)
        assert close(closed.objective, surrogate_direct(counts, U, eps, closed.length))
        # ... and it is the smallest integer minimiser (up to float ties)
        first = int(counts.min()) + next(i for i, v in enumerate(f) if v <= min(f) * (1 + TIE_RTOL))
        assert closed.length == first
        assert np.all(np.diff(f, 2) >= -1e-9 * max(1.0, max(map(abs, f))))
        # the surrogate is an upper bound of the exact objective; its length is no better than exact
        assert closed.objective >= closed.error - EXACT_ATOL * U
        assert closed.excess >= -EXACT_ATOL and closed.optimal_error <= closed.error + EXACT_ATOL


def test_surrogate_lp_hypograph_is_tight():
    counts = np.array([9, 4, 4, 1, 7, 7, 7, 2])
    res = solve(surrogate_lp(counts, 3.0, 0.25))
    m = res.value("length")[0]
    kept = res.value("kept")
    values = np.unique(counts)
    np.testing.assert_allclose(kept, np.minimum(values, m), atol=SOLVER_ATOL)


def test_surrogate_lp_dual_certificate(rng):
    """KKT of the LP: λ_j = −y_j ≥ 0 on `cap`; λ_j = U·w_j/M above m, 0 below; Σλ = c_m − z_m."""
    checked = 0
    for _ in range(60):
        counts = random_counts(rng)
        U, eps = float(rng.uniform(0.5, 100)), random_epsilon(rng)
        model = surrogate_lp(counts, U, eps)
        res = solve(model)
        assert res.status is Status.OPTIMAL
        m = res.value("length")[0]
        lam = -res.dual("cap")
        values, w = np.unique(counts, return_counts=True)
        M = counts.sum()
        tol = 1e-7 * U
        assert np.all(lam >= -tol)
        above, below = values > m + 1e-6, values < m - 1e-6
        np.testing.assert_allclose(lam[above], U * w[above] / M, atol=tol)
        np.testing.assert_allclose(lam[below], 0.0, atol=tol)
        c_m = U / (eps * counts.size * counts.min())
        z_m = res.col_duals[model.col_blocks["length"]][0]
        assert math.isclose(lam.sum(), c_m - z_m, rel_tol=1e-6, abs_tol=tol)
        if counts.min() + 1e-6 < m < counts.max() - 1e-6:
            assert abs(z_m) <= tol  # interior m: the subgradient condition of the closed form
            checked += 1
    assert checked >= 10


def test_surrogate_bounds_exact_objective(rng):
    for _ in range(60):
        counts = random_counts(rng)
        U, eps = float(rng.uniform(0.5, 100)), random_epsilon(rng)
        m = np.arange(counts.min(), counts.max() + 1)
        assert np.all(surrogate_objective(counts, U, eps, m) >= array_averaging_error(counts, U, eps, m) - 1e-9 * U)


def test_erratum_e7_paper_kkt_is_suboptimal_at_kinks():
    """ERRATA E7: for non-integer k the paper's step (ii) returns an end point, not the kink."""
    counts = load_itms_counts()
    for eps in (0.5, 1.0):
        k = counts.sum() / (eps * counts.size * counts.min())
        assert not float(k).is_integer()
        literal = paper_kkt_length(counts, ITMS_BOUND, eps)
        assert literal == counts.min()  # step (ii) picks m_* = 1
        best = surrogate_length(counts, eps)
        f_literal = surrogate_objective(counts, ITMS_BOUND, eps, literal)
        f_best = surrogate_objective(counts, ITMS_BOUND, eps, best)
        assert f_best < f_literal - 1.0
    # (i) at an integer k the paper's answer is optimal: k = M/(eps L m_*) = 2
    counts = np.array([10, 8, 6, 4, 2, 2])
    eps = counts.sum() / (2 * counts.size * counts.min())
    lit = paper_kkt_length(counts, 1.0, eps)
    assert math.isclose(
        surrogate_objective(counts, 1.0, eps, lit), surrogate_objective(counts, 1.0, eps, surrogate_length(counts, eps))
    )


def test_itms_surrogate_table():
    """notes-003 §6 [data]: m_OPT = 24, 74, 141 for eps = 0.5, 1, 2, and the true errors."""
    counts = load_itms_counts()
    for eps, m, f, e in ((0.5, 24, 62.5, 48.8), (1.0, 74, 49.1, 27.4), (2.0, 141, 33.6, 12.8)):
        plan = optimal_array_length(counts, ITMS_BOUND, eps, method="surrogate")
        assert plan.length == m
        assert abs(plan.objective - f) < 0.05 and abs(plan.error - e) < 0.05


# --------------------------------------------------------------------------- Lemma V.1 by brute force
def _array_averaging_estimator(grouping, counts):
    """Batched Array-Averaging f_m = (1/K) Σ_k Ā_k: linear in the samples, weights via unit vectors."""
    counts = np.asarray(counts)
    users = np.repeat(np.arange(counts.size), counts)
    N = users.size
    weights = np.array([grouping.array_means(np.eye(N)[i], users).mean() for i in range(N)])

    def f(samples, _counts):
        return samples @ weights

    return f


def test_lemma_v1_matches_brute_force(rng):
    checked = wa_checked = 0
    while checked < 25:
        L = int(rng.integers(1, 4))
        counts = rng.integers(1, 5, size=L)
        if counts.sum() > 8:
            continue
        U = float(rng.uniform(0.5, 3))
        for m in range(1, int(counts.max()) + 1):
            retained = np.minimum(counts, m)
            formula = U * (1 - retained.sum() / counts.sum())
            r = verify.worst_case_error(est.clipped_mean(retained), counts, U, levels=3, formula=formula)
            assert r.agrees(rtol=EXACT_RTOL, atol=EXACT_ATOL)
            # with no discarded block, WrapAround Array-Averaging is that clipped mean
            wa = wrap_around(counts, m)
            if wa.discarded == 0:
                r2 = verify.worst_case_error(
                    _array_averaging_estimator(wa, counts), counts, U, levels=3, formula=formula
                )
                assert r2.agrees(rtol=EXACT_RTOL, atol=EXACT_ATOL)
                wa_checked += 1
            assert close(
                array_averaging_error(counts, U, 1.0, m) - U * m / retained.sum(), formula, atol=1e-12 * U
            )
        checked += 1
    assert wa_checked >= 10


# --------------------------------------------------------------------------- gain lemmas (Section III)
def test_gain_lemmas(rng):
    for _ in range(200):
        counts = random_counts(rng)
        m = np.arange(1, counts.max() + 1)
        g = gain(counts, m)
        gmax = max_gain(counts)
        # Lemma III.1 (Δ_f ≥ Δ̄_m for m ≤ m^*) and eq. (5): 1 ≤ G(m) ≤ G_max
        assert np.all(g >= 1 - 1e-12) and np.all(g <= gmax * (1 + 1e-12))
        assert close(gain(counts, int(counts.min())), gmax)
        assert close(gain(counts, int(counts.max())), 1.0)
        sens_full = counts.max() / counts.sum()  # Δ_f / U
        sens_arr = m / np.minimum(counts[None, :], m[:, None]).sum(axis=1)  # Δ̄_m / U
        assert np.all(sens_full >= sens_arr - 1e-15)
        # Lemma III.2: the median keeps at least half the maximal gain
        med = median_length(counts)
        assert med in set(counts.tolist())
        assert np.count_nonzero(counts >= med) >= counts.size / 2
        assert gain(counts, med) >= gmax / 2 - 1e-12


def test_median_choice_itms():
    counts = load_itms_counts()
    assert median_length(counts) == 46 == math.floor(np.median(counts))
    plan = optimal_array_length(counts, ITMS_BOUND, 1.0, method="median")
    assert plan.length == 46 and math.isnan(plan.objective)
    assert abs(gain(counts, 46) - 3.91) < 0.005 and abs(max_gain(counts) - 5.27) < 0.005


# --------------------------------------------------------------------------- heuristic (9)
def test_heuristic_enumeration_equals_scan(instances):
    for counts, U, eps in instances:
        a = optimal_array_length(counts, U, eps, method="heuristic")
        b = optimal_array_length(counts, U, eps, method="heuristic", solver="scan")
        assert a.length == b.length
        ms = np.arange(counts.min(), counts.max() + 1)
        vals = [gamma_direct(counts, m) / math.sqrt(m) for m in ms]
        assert close(max(vals), a.objective)
        # the smallest maximiser of the transcribed (9)
        first = int(ms[next(i for i, v in enumerate(vals) if v >= max(vals) * (1 - TIE_RTOL))])
        assert a.length == first


def test_heuristic_itms_both_ranges():
    counts = load_itms_counts()
    assert heuristic_length(counts) == 114
    lo, hi = int(np.percentile(counts, 10)), int(np.percentile(counts, 90))
    assert heuristic_length(counts, low=lo, high=hi - 1) == 114  # the authors' [P10, P90)


# --------------------------------------------------------------------------- Lemma V.3, V.4, Corollary V.1
def test_lemma_v3_minimiser_nondecreasing_in_epsilon(rng):
    eps = np.geomspace(1e-4, 20, 300)
    for _ in range(100):
        counts = random_counts(rng)
        U = float(rng.uniform(0.5, 100))
        path = exact_length_path(counts, U, eps)
        assert np.all(np.diff(path) >= 0)
        for e in eps[::60]:
            assert optimal_array_length(counts, U, float(e)).length == path[np.searchsorted(eps, e)]


def test_lemma_v4_and_corollary_v1_thresholds(rng):
    margin = 1e-7
    for _ in range(150):
        counts = random_counts(rng)
        if counts.min() == counts.max():
            continue
        U = float(rng.uniform(0.5, 100))
        lo_star, hi_star = switch_points(counts)
        eps1, eps2 = lemma_v4_thresholds(counts)
        m_min, m_max = int(counts.min()), int(counts.max())
        L = counts.size
        assert eps1 >= 1 / (L * (L - 1)) - 1e-15 and eps2 <= 1.0
        # Lemma V.4: sufficient thresholds
        assert optimal_array_length(counts, U, eps1).length == m_min
        assert optimal_array_length(counts, U, eps1 / 3).length == m_min
        assert optimal_array_length(counts, U, eps2).length == m_max
        assert optimal_array_length(counts, U, 3 * eps2).length == m_max
        # Corollary V.1: the exact switch points, bracketed by the lemma's
        assert eps1 <= lo_star * (1 + 1e-12) and hi_star <= eps2 * (1 + 1e-12)
        assert optimal_array_length(counts, U, lo_star * (1 - margin)).length == m_min
        assert optimal_array_length(counts, U, lo_star * (1 + 1e-4)).length > m_min
        assert optimal_array_length(counts, U, hi_star * (1 + margin)).length == m_max
        assert optimal_array_length(counts, U, hi_star * (1 - 1e-4)).length < m_max


def test_itms_figure5_staircase():
    """notes-003 §5 [data]: m_UB = 1 up to eps ≈ 0.00305, 417 from ≈ 0.98, and the listed steps."""
    counts = load_itms_counts()
    lo, hi = switch_points(counts)
    assert abs(lo - 0.00305) < 5e-6 and abs(hi - 0.98) < 5e-3
    eps = [0.003, 0.01, 0.05, 0.1, 0.2, 0.5, 0.99]
    np.testing.assert_array_equal(exact_length_path(counts, ITMS_BOUND, eps), [1, 78, 235, 265, 315, 342, 417])
    e1, e2 = lemma_v4_thresholds(counts)
    assert abs(e1 - 5 / (217 * 212)) < 1e-15 and e2 == 1.0


# --------------------------------------------------------------------------- results and bad input
def test_plan_is_frozen_and_consistent():
    plan = optimal_array_length([1, 2, 3, 50], 1.0, 1.0)
    with pytest.raises(FrozenInstanceError):
        plan.length = 3  # type: ignore[misc]
    assert close(plan.bias + plan.noise, plan.error)
    assert plan.wrap_around_arrays == plan.retained_total // plan.length
    assert plan.num_users == 4 and plan.total_samples == 56


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(counts=[1, 2], bound=0.0, epsilon=1.0), "bound"),
        (dict(counts=[1, 2], bound=1.0, epsilon=-1.0), "epsilon"),
        (dict(counts=[1, 2], bound=1.0, epsilon=float("nan")), "epsilon"),
        (dict(counts=[], bound=1.0, epsilon=1.0), "counts"),
        (dict(counts=[1, 0], bound=1.0, epsilon=1.0), "counts"),
        (dict(counts=[1.5, 2], bound=1.0, epsilon=1.0), "counts"),
        (dict(counts=[1, 2], bound=1.0, epsilon=1.0, method="optimal"), "method"),
        (dict(counts=[1, 2], bound=1.0, epsilon=1.0, method="exact", solver="lp"), "solver"),
        (dict(counts=[1, 2], bound=1.0, epsilon=1.0, method="surrogate", solver="milp"), "solver"),
        (dict(counts=[1, 2], bound=1.0, epsilon=1.0, method="heuristic", low=3, high=2), "low"),
        (dict(counts=[1, 2], bound=1.0, epsilon=1.0, method="heuristic", low=0), "low"),
    ],
)
def test_optimal_array_length_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        optimal_array_length(**kwargs)


@pytest.mark.parametrize("length", [0, -1, 1.5, [1, 0], [], "3", True])
def test_error_bad_length(length):
    with pytest.raises(ValueError, match="length"):
        array_averaging_error([1, 2], 1.0, 1.0, length)


def test_other_bad_input():
    with pytest.raises(ValueError, match="epsilons"):
        exact_length_path([1, 2], 1.0, [0.5, -1])
    with pytest.raises(ValueError, match="length"):
        surrogate_objective([1, 2], 1.0, 1.0, [0.0])
    with pytest.raises(ValueError, match="epsilon"):
        surrogate_length([1, 2], 0)
    with pytest.raises(ValueError, match="length"):
        gain([1, 2], 0)
    assert switch_points([3, 3]) == (math.inf, 0.0)
    assert lemma_v4_thresholds([3, 3]) == (math.inf, 1 / 2)


# --------------------------------------------------------------------------- hand-computed known answers
def test_hand_computed_small_instance():
    """counts [1, 2, 3, 50]: M = 56, L = 4, Γ_1..Γ_3 = 4, 7, 9, Γ_50 = 56 (worked by hand).

    U = 1, ε = 1: E(1) = 1 − 4/56 + 1/4 = 1.1786, E(2) = 1 − 7/56 + 2/7 = 1.1607,
    E(3) = 1 − 9/56 + 3/9 = 1.1726, E(50) = 50/56 = 0.8929 → m_UB = 50.
    ε = 0.1: E(1) = 0.9286 + 2.5 = 3.4286 is the smallest (E(2) = 3.7321, E(50) = 8.9286) → m_UB = 1.
    Surrogate (19): k = 56/(4ε) = 14/ε; ε = 1 → k = 14, ⌊k⌋+1 > L → m_* = 1; ε = 5 → k = 2.8 → the
    3rd largest count, 2; ε = 20 → k = 0.7 < 1 → m^* = 50. Heuristic (9): Γ_m/√m = 4, 4.95, 5.20, 7.92
    at m = 1, 2, 3, 50 → 50; median (lower) = 2.
    """
    counts = [1, 2, 3, 50]
    for m, want in ((1, 1 - 4 / 56 + 1 / 4), (2, 1 - 7 / 56 + 2 / 7), (3, 1 - 9 / 56 + 3 / 9), (50, 50 / 56)):
        assert close(array_averaging_error(counts, 1.0, 1.0, m), want)
    plan = optimal_array_length(counts, 1.0, 1.0)
    assert plan.length == 50 and close(plan.error, 50 / 56) and close(plan.bias, 0.0)
    assert optimal_array_length(counts, 1.0, 0.1).length == 1
    assert [surrogate_length(counts, e) for e in (1.0, 5.0, 20.0)] == [1, 2, 50]
    assert heuristic_length(counts) == 50 and median_length(counts) == 2
    for e, m in ((1.0, 1), (5.0, 2), (20.0, 50)):
        lp = optimal_array_length(counts, 1.0, e, method="surrogate", solver="lp")
        assert lp.status is Status.OPTIMAL and lp.length == m


@pytest.mark.parametrize(
    "func, args, match",
    [
        (array_length_milp, ([1, 2], 1.0, 0.0), "epsilon"),
        (array_length_milp, ([1, -2], 1.0, 1.0), "counts"),
        (surrogate_lp, ([1, 2], -1.0, 1.0), "bound"),
        (paper_kkt_length, ([1, 2], 1.0, float("inf")), "epsilon"),
        (surrogate_objective, ([1, 2], 1.0, 1.0, [float("nan")]), "length"),
        (median_length, ([[1, 2], [3, 4]],), "counts"),
    ],
)
def test_model_builders_bad_input(func, args, match):
    with pytest.raises(ValueError, match=match):
        func(*args)


@pytest.mark.parametrize("method, solver", [("exact", "milp"), ("surrogate", "lp")])
def test_a_solve_stopped_by_its_time_limit_proves_nothing(method, solver):
    """time_limit = 0 stops the solve before it proves anything: the status says time_limit and the
    gap is not 0 (the surrogate LP's was reported 0, which reads as proven); the length is the
    closed form's fallback, the objective unknown. Without a limit both solve with gap 0."""
    import math

    from dpopt import optimal_array_length

    stopped = optimal_array_length([6, 3, 2, 1], 65.0, 1.0, method=method, solver=solver, time_limit=0.0)
    assert stopped.status == "time_limit" and stopped.gap > 0 and math.isnan(stopped.objective)
    solved = optimal_array_length([6, 3, 2, 1], 65.0, 1.0, method=method, solver=solver)
    assert solved.status == "optimal" and solved.gap == 0.0 and math.isfinite(solved.objective)


def test_the_milp_finds_the_enumerations_length_at_every_scale_of_the_bound():
    """The exact MILP against the enumeration over seeded instances with U from 10⁻³ to 10³: the same
    least error (its costs are in units of the least candidate error; in absolute units HiGHS's
    presolve took m = 199, error 0.0118561, for m = 200, error 0.0118554, at U = 1, ε = 0.5, and
    called it optimal with gap 0)."""
    from dpopt import optimal_array_length

    rng = np.random.default_rng(7)
    rng.geometric(0.02, size=300)
    uniform = rng.integers(20, 201, size=300)
    plan = optimal_array_length(uniform, 1.0, 0.5, solver="milp")
    assert plan.length == plan.optimal_length == 200 and plan.excess == 0.0
    for _ in range(60):
        counts = rng.integers(1, int(rng.integers(2, 400)), int(rng.integers(2, 400)))
        U, eps = 10.0 ** rng.uniform(-3, 3), 10.0 ** rng.uniform(-2, 1)
        milp = optimal_array_length(counts, U, eps, solver="milp")
        assert milp.status == "optimal" and milp.excess <= 1e-12 * milp.optimal_error
        assert milp.objective == pytest.approx(milp.error, rel=1e-12)


@pytest.mark.parametrize("method", ["exact", "heuristic"])
def test_a_scan_stops_at_its_time_limit_and_says_so(method):
    """The scans visit every integer of [m_*, m^*]: with counts 1 and 10¹² that is 10¹² lengths
    (the heuristic's scan allocated them at once: 7.28 TiB). In chunks, stopped at the time limit,
    the plan says time_limit with an unproven gap; a small range is scanned whole and optimal."""
    from dpopt import optimal_array_length

    wide = optimal_array_length([1, 10**12], 1.0, 1.0, method=method, solver="scan", time_limit=0.0)
    assert wide.status == "time_limit" and math.isinf(wide.gap) and 1 <= wide.length <= 10**12
    small = optimal_array_length([1, 7, 30], 1.0, 1.0, method=method, solver="scan", time_limit=0.0)
    assert small.status == "optimal" and small.gap == 0.0
