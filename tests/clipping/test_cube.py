"""Vector samples in the cube [0, U]^d: the optimum d·E^OPT(ε/d) (models/clipping.md, "The cube").

The reference is an LP written here with scipy's linprog, independent of dpopt: per-user AND
per-coordinate intervals [a_ℓk, b_ℓk], the exact ℓ1 worst-case bias Σ_k max{Σ_ℓ m_ℓ(U − b_ℓk),
Σ_ℓ m_ℓ a_ℓk}/n (coordinates of cube samples move independently) and the ℓ1 sensitivity
max_ℓ Σ_k m_ℓ(b_ℓk − a_ℓk)/n, with d Laplace coordinates (expected ℓ1 noise d·Δ/ε).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog

import dpopt
from dpopt import verify
from dpopt.verify import estimators as est

RTOL = 1e-7


def cube_lp(counts, U, eps, d):
    m = np.asarray(counts, float)
    L, n = m.size, m.sum()
    w = m / n
    na = L * d  # a[ℓ, k] at ℓ·d + k, then b, then β_k (d), then Δ
    nv = 2 * na + d + 1
    c = np.zeros(nv)
    c[2 * na: 2 * na + d] = 1.0
    c[-1] = d / eps
    rows, cols, vals, rhs = [], [], [], []
    r = 0
    for k in range(d):  # −β_k − Σ w b_ℓk ≤ −U Σ w ;  −β_k + Σ w a_ℓk ≤ 0
        for which, sign, b0 in ((na, -1.0, -U * w.sum()), (0, 1.0, 0.0)):
            rows += [r] * (L + 1)
            cols += [which + l * d + k for l in range(L)] + [2 * na + k]
            vals += [sign * wl for wl in w] + [-1.0]
            rhs.append(b0)
            r += 1
    for l in range(L):  # Σ_k w_ℓ (b − a) − Δ ≤ 0
        rows += [r] * (2 * d + 1)
        cols += [na + l * d + k for k in range(d)] + [l * d + k for k in range(d)] + [nv - 1]
        vals += [w[l]] * d + [-w[l]] * d + [-1.0]
        rhs.append(0.0)
        r += 1
    for i in range(na):  # a − b ≤ 0
        rows += [r, r]
        cols += [i, na + i]
        vals += [1.0, -1.0]
        rhs.append(0.0)
        r += 1
    A = sp.csr_array((vals, (rows, cols)), shape=(r, nv))
    bounds = [(0, U)] * (2 * na) + [(0, None)] * (d + 1)
    res = linprog(c, A_ub=A, b_ub=rhs, bounds=bounds, method="highs")
    assert res.status == 0
    return res.fun


@pytest.mark.parametrize("seed", range(40))
def test_cube_optimum_is_d_times_eopt_at_eps_over_d_against_an_independent_lp(seed):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 5))
    counts = rng.integers(1, 30, rng.integers(2, 9))
    U = float(rng.uniform(0.5, 4.0))
    eps = float(rng.choice([0.1, 0.5, 1.0, 3.0]))
    want = cube_lp(counts, U, eps, d)
    plan = dpopt.optimal_clipping(counts, U, eps, dim=d, geometry="cube")
    assert plan.error == pytest.approx(want, rel=RTOL)
    assert plan.error == pytest.approx(d * dpopt.optimal_clipping(counts, U, eps / d).error, rel=1e-12)
    assert plan.check() and plan.info["geometry"] == "cube"
    lp = dpopt.clipping_problem(counts, U, eps, dim=d, geometry="cube").solve_plan()
    assert lp.error == pytest.approx(want, rel=RTOL) and lp.certificate is not None and lp.check()


def test_cube_plan_bias_and_sensitivity_by_brute_force():
    counts, U, eps, d = [1, 2], 1.0, 0.8, 2
    plan = dpopt.optimal_clipping(counts, U, eps, dim=d, geometry="cube")
    f = est.interval_clipped_mean(plan.lower, plan.upper)
    bias = verify.worst_case_error(f, counts, U, dim=d, levels=3, geometry="cube")
    sens = verify.sensitivity(f, counts, U, dim=d, levels=3, geometry="cube")
    assert bias.value == pytest.approx(plan.bias, rel=1e-9)
    assert sens.value == pytest.approx(plan.sensitivity, rel=1e-9)
    grid = verify.value_grid(U, levels=3, dim=d, geometry="cube")
    assert grid.shape == (9, 2) and np.all(grid <= U)


def test_interval_clipping_on_a_cube_grid_works_or_says_why():
    counts = np.array([1, 2])
    data = verify.enumerate_datasets(counts, verify.value_grid(1.0, levels=2, dim=2, geometry="cube"))
    out = est.interval_clipped_mean([0.2, 0.1], [0.8, 0.9])(data, counts)
    assert out.shape == (data.shape[0], 2)
    with pytest.raises(dpopt.DpoptInputError, match="do not fit samples of dimension 2"):
        est.interval_clipped_mean(np.zeros((2, 3)), np.ones((2, 3)))(data, counts)
    with pytest.raises(dpopt.DpoptInputError, match="`geometry`"):
        verify.value_grid(1.0, dim=2, geometry="ball")
