"""The error calculus against brute force (dpopt.verify) on seeded random small instances."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

import dpopt
from dpopt import calculus, verify
from dpopt.verify import estimators as est

from .conftest import EXACT_ATOL, EXACT_RTOL, random_partition

N_RANDOM = 220  # ≥ 200 instances per formula


def _instances(seed: int, n: int = N_RANDOM):
    rng = np.random.default_rng(seed)
    return [random_partition(rng) for _ in range(n)]


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=EXACT_RTOL, abs_tol=EXACT_ATOL)


# ------------------------------------------------------------------ sensitivities
@pytest.mark.parametrize("bound", [1.0, 65.0])
def test_mean_sensitivity_equals_brute_force(bound):
    for m, g in _instances(1):
        formula = dpopt.mean_sensitivity(g, bound)
        r = verify.sensitivity(est.clipped_mean(g), m, bound, levels=3, formula=formula)
        assert r.agrees(rtol=EXACT_RTOL, atol=EXACT_ATOL * bound), (m, g, r)


@pytest.mark.parametrize("bound", [1.0, 65.0])
def test_variance_sensitivity_equals_brute_force_all_three_cases(bound):
    cases = set()
    for m, g in _instances(2):
        formula = dpopt.variance_sensitivity(g, bound)
        r = verify.sensitivity(est.clipped_variance(g), m, bound, levels=3, formula=formula)
        assert r.agrees(rtol=EXACT_RTOL, atol=EXACT_ATOL * bound**2), (m, g, r)
        R, gs = g.sum(), g.max()
        cases.add("spread" if R > 2 * gs else ("even" if R % 2 == 0 else "odd"))
    assert cases == {"spread", "even", "odd"}


def test_variance_sensitivity_finer_grid_does_not_exceed_formula():
    """A 5-level grid (values U/4 apart) finds nothing larger: the maximisers sit on {0, U}."""
    for m, g in _instances(3, 40):
        if m.sum() > 7:
            continue
        formula = dpopt.variance_sensitivity(g, 1.0)
        r = verify.sensitivity(est.clipped_variance(g), m, 1.0, levels=5, formula=formula)
        assert r.agrees(rtol=EXACT_RTOL, atol=EXACT_ATOL)


def test_item_level_corollary():
    """Seed 002 Corollary III.1: m_ℓ = 1 gives Δ_Var = U²(L − 1)/L² (L ≥ 2), far below 8U²/L."""
    for L in range(2, 9):
        value = dpopt.variance_sensitivity(np.ones(L, int), 3.0)
        r = verify.sensitivity(est.variance, np.ones(L, int), 3.0, levels=3, formula=value)
        assert r.agrees()
        assert _close(value, 9.0 * (L - 1) / L**2)


# ------------------------------------------------------------------ worst-case biases
@pytest.mark.parametrize("bound", [1.0, 65.0])
def test_mean_bias_equals_brute_force(bound):
    for m, g in _instances(4):
        formula = dpopt.mean_bias(g, m, bound)
        r = verify.worst_case_error(est.clipped_mean(g), m, bound, levels=3, formula=formula)
        assert r.agrees(rtol=EXACT_RTOL, atol=EXACT_ATOL * bound), (m, g, r)


@pytest.mark.parametrize("bound", [1.0, 65.0])
def test_variance_bias_equals_brute_force(bound):
    cases = set()
    for m, g in _instances(5):
        formula = dpopt.variance_bias(g, m, bound)
        r = verify.worst_case_error(
            est.clipped_variance(g), m, bound, target="variance", levels=3, formula=formula
        )
        assert r.agrees(rtol=EXACT_RTOL, atol=EXACT_ATOL * bound**2), (m, g, r)
        N, R = m.sum(), g.sum()
        cases.add("none" if R == N else "most" if 2 * R > N else ("even" if N % 2 == 0 else "odd"))
    assert cases == {"none", "most", "even", "odd"}


# ERRATA E1 table: (N, R) -> brute force, corrected, seed text (U = 1)
E1_TABLE = [
    (4, 3, 0.1875, 0.2500),
    (6, 1, 0.2500, 0.1389),
    (6, 5, 0.1389, 0.2500),
    (7, 6, 0.1224, 0.2449),
]


@pytest.mark.parametrize("N,R,expected,seed_text", E1_TABLE)
def test_errata_e1_seed_theorem_iv2_disagrees_with_brute_force(N, R, expected, seed_text):
    """One user per sample; the first R users are kept. 5 levels {0, ¼, ½, ¾, 1} as in ERRATA."""
    m = np.ones(N, dtype=int)
    g = np.r_[np.ones(R, int), np.zeros(N - R, int)]
    brute = verify.worst_case_error(
        est.clipped_variance(g), m, 1.0, target="variance", levels=5
    ).value
    corrected = dpopt.variance_bias(g, m, 1.0)
    printed = calculus.variance_bias_seed_text(g, m, 1.0)
    assert brute == pytest.approx(expected, abs=5e-5)
    assert _close(brute, corrected)
    assert printed == pytest.approx(seed_text, abs=5e-5)
    assert not math.isclose(brute, printed, abs_tol=1e-3)


def test_errata_e1_consequence_large_grid():
    """Suppressing one user of a big grid: the seed's formula says U²/4, the corrected one far less."""
    m = np.full(50, 20)
    g = m.copy()
    g[0] = 0
    U = 65.0
    assert calculus.variance_bias_seed_text(g, m, U) == pytest.approx(U * U / 4)
    assert dpopt.variance_bias(g, m, U) < U * U / 40


# ------------------------------------------------------------------ clipping strategies (seeds 000/001)
def _random_intervals(rng, L, U):
    a = rng.uniform(0, U, L)
    b = rng.uniform(0, U, L)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    # make some intervals touch the ends / be degenerate, as strategies do
    lo[rng.random(L) < 0.3] = 0.0
    hi[rng.random(L) < 0.3] = U
    return lo, hi


@pytest.mark.slow
def test_clipping_error_d1_equals_brute_force():
    rng = np.random.default_rng(6)
    for _ in range(N_RANDOM):
        m, _ = random_partition(rng, max_samples=7)
        U, eps = 1.0, float(rng.uniform(0.2, 3))
        lo, hi = _random_intervals(rng, m.size, U)
        # per-user interval values enter the grid so that clipping points are represented
        vals = verify.value_grid(U, levels=2, extra=np.r_[lo, hi])
        if len(vals) ** m.sum() > 200_000:
            vals = verify.value_grid(U, levels=2)
        terms = calculus.clipping_error_terms(m, U, eps, lo, hi)
        fn = est.interval_clipped_mean(lo, hi)
        bias = verify.worst_case_error(fn, m, U, values=vals, formula=terms.bias)
        sens = verify.sensitivity(fn, m, U, values=vals, formula=terms.sensitivity)
        assert bias.agrees(rtol=EXACT_RTOL, atol=EXACT_ATOL), (m, lo, hi, bias)
        assert sens.agrees(rtol=EXACT_RTOL, atol=EXACT_ATOL), (m, lo, hi, sens)
        assert _close(terms.error, terms.bias + terms.noise)
        assert _close(terms.noise, terms.sensitivity / eps)
        assert _close(dpopt.clipping_error(m, U, eps, lo, hi), terms.error)


def test_clipping_error_d1_seed_bias_is_only_an_upper_bound():
    """notes-001 §3.2: n = 2, (a, b) = (0, 0) and (U, U): the seed's Lemma III.1 gives U, the truth U/2."""
    m, U = [1, 1], 1.0
    lo, hi = [0.0, U], [0.0, U]
    terms = calculus.clipping_error_terms(m, U, 1.0, lo, hi)
    brute = verify.worst_case_error(est.interval_clipped_mean(lo, hi), m, U).value
    seed_bound = sum(mi * max(a, U - b) for mi, a, b in zip(m, lo, hi)) / 2
    assert _close(brute, 0.5) and _close(terms.bias, brute)
    assert _close(seed_bound, 1.0)


def test_clipping_error_d2_corrected_sensitivity_attained_and_seed_violated():
    """ERRATA E3: the ℓ1 sensitivity is max 2·m·b/n; the seed's max m(b − a)/n is exceeded."""
    rng = np.random.default_rng(7)
    U = 1.0
    extra = np.array([[0.0, 1e-9]])  # a point near 0 along e₂ (the bias supremum)
    vals = verify.value_grid(U, levels=3, dim=2, extra=extra)
    violated = 0
    for _ in range(40):
        m = rng.integers(1, 3, size=int(rng.integers(1, 3)))
        lo, hi = _random_intervals(rng, m.size, U)
        terms = calculus.clipping_error_terms(m, U, 1.0, lo, hi, dim=2)
        fn = est.annulus_clipped_mean(lo, hi)
        sens = verify.sensitivity(fn, m, U, values=vals, formula=terms.sensitivity)
        bias = verify.worst_case_error(fn, m, U, values=vals, formula=terms.bias)
        assert sens.agrees(rtol=EXACT_RTOL, atol=EXACT_ATOL), (m, lo, hi, sens)
        assert bias.respects(atol=EXACT_ATOL) and bias.gap < 1e-8, (m, lo, hi, bias)
        seed = float(np.max(m * (hi - lo))) / m.sum()
        violated += sens.value > seed + 1e-9
    assert violated >= 30


def test_clipping_error_noise_scales_with_dimension():
    t1 = calculus.clipping_error_terms([3, 1], 1.0, 0.5, 0.0, 1.0, dim=2)
    t3 = calculus.clipping_error_terms([3, 1], 1.0, 0.5, 0.0, 1.0, dim=3)
    assert _close(t1.sensitivity, t3.sensitivity)
    assert _close(t3.noise, 1.5 * t1.noise)


# ------------------------------------------------------------------ many grids
def test_grid_error_terms_match_single_partition_functions():
    rng = np.random.default_rng(8)
    Ns, Rs, Gs, expect = [], [], [], []
    U, eps = 65.0, 0.7
    for _ in range(100):
        m, g = random_partition(rng, max_samples=30, max_users=8)
        Ns.append(m.sum()), Rs.append(g.sum()), Gs.append(g.max())
        expect.append(
            dpopt.mean_bias(g, m, U)
            + dpopt.variance_bias(g, m, U)
            + 2 * dpopt.mean_sensitivity(g, U) / eps
            + 2 * dpopt.variance_sensitivity(g, U) / eps
        )
    terms = calculus.grid_error_terms(Ns, Rs, Gs, U, eps)
    np.testing.assert_allclose(terms.error, expect, rtol=EXACT_RTOL)
    np.testing.assert_allclose(terms.epsilon_mean + terms.epsilon_variance, eps)


def test_optimal_split_is_the_numerical_minimum():
    rng = np.random.default_rng(9)
    for _ in range(30):
        m, g = random_partition(rng, max_samples=40, max_users=10)
        U, eps = 10.0, float(rng.uniform(0.1, 2))
        dmu = dpopt.mean_sensitivity(g, U)
        dvar = dpopt.variance_sensitivity(g, U)
        res = minimize_scalar(
            lambda e1: dmu / e1 + dvar / (eps - e1), bounds=(1e-9, eps - 1e-9), method="bounded",
            options={"xatol": 1e-12},
        )
        t = calculus.grid_error_terms([m.sum()], [g.sum()], [g.max()], U, eps, split="optimal")
        assert t.noise[0] == pytest.approx(res.fun, rel=1e-6)
        assert t.noise[0] <= res.fun * (1 + 1e-9)
        assert t.epsilon_mean[0] + t.epsilon_variance[0] == pytest.approx(eps)
        equal = calculus.grid_error_terms([m.sum()], [g.sum()], [g.max()], U, eps)
        assert t.error[0] <= equal.error[0] + 1e-12


def test_grid_errors_on_occupancy_and_suppression():
    rng = np.random.default_rng(10)
    dense = rng.integers(0, 4, size=(12, 5)) * (rng.random((12, 5)) < 0.6)
    dense[0, :] = np.maximum(dense[0, :], 1)  # every grid occupied
    occ = dpopt.Occupancy.from_dense(dense, users=[f"u{i}" for i in range(12)], grids=list("abcde"))
    U, eps = 65.0, 0.5
    base = dpopt.grid_errors(occ, U, eps)
    for j, grid in enumerate(occ.grids):
        col = dense[:, list("abcde").index(grid)]
        m = col[col > 0]
        expect = 2 * dpopt.mean_sensitivity(m, U) / eps + 2 * dpopt.variance_sensitivity(m, U) / eps
        assert base[j] == pytest.approx(expect, rel=EXACT_RTOL)
    # suppress user u0 in grid 'a'
    col = dense[:, 0].copy()
    if (col > 0).sum() >= 2:
        after = dpopt.grid_errors(occ, U, eps, suppressed=[("u0", "a")])
        g = col.copy()
        g[0] = 0
        m = col[col > 0]
        g = g[col > 0]
        expect = (
            dpopt.mean_bias(g, m, U) + dpopt.variance_bias(g, m, U)
            + 2 * dpopt.mean_sensitivity(g, U) / eps + 2 * dpopt.variance_sensitivity(g, U) / eps
        )
        assert after[0] == pytest.approx(expect, rel=EXACT_RTOL)
        np.testing.assert_allclose(after[1:], base[1:])


def test_grid_fully_suppressed_has_infinite_error():
    occ = dpopt.Occupancy.from_triples(["a", "b"], ["g", "h"], [2, 3])
    err = dpopt.grid_errors(occ, 1.0, 1.0, suppressed=[("a", "g")])
    assert math.isinf(err[0]) and math.isfinite(err[1])


# ------------------------------------------------------------------ composition
def test_composition_accounting_matches_a_recount():
    rng = np.random.default_rng(11)
    dense = (rng.random((30, 8)) < 0.4) * rng.integers(1, 5, size=(30, 8))
    dense[:, 0] = np.maximum(dense[:, 0], 1)
    occ = dpopt.Occupancy.from_dense(dense)
    eps_g = rng.uniform(0.1, 1.0, 8)
    recount = max(sum(eps_g[j] for j in range(8) if dense[i, j] > 0) for i in range(30))
    assert dpopt.parallel_composition(occ, eps_g) == pytest.approx(recount)
    assert dpopt.parallel_composition(occ, 0.5) == pytest.approx(0.5 * (dense > 0).sum(1).max())
    assert dpopt.basic_composition(eps_g) == pytest.approx(eps_g.sum())
    assert dpopt.basic_composition(0.5, 8) == pytest.approx(4.0)
    # suppressing a user's pair lowers that user's loss
    i = int(np.argmax((dense > 0).sum(1)))
    pairs = [(i, j) for j in range(8) if dense[i, j] > 0][:1]
    sup = dense.copy()
    sup[i, pairs[0][1]] = 0
    recount2 = max(sum(eps_g[j] for j in range(8) if sup[r, j] > 0) for r in range(30))
    assert dpopt.parallel_composition(occ, eps_g, suppressed=pairs) == pytest.approx(recount2)
