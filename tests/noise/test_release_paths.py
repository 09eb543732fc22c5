"""The release paths around the exact samplers: what a release adds to the draws.

``dpopt.noise.mechanism._add_exact`` (the lattice mechanism's v + Z) is vectorised for int64 inputs;
it must give the float of the exact integer sum, as the Python-int path does, at every size.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpopt import DpoptInputError
from dpopt.noise import mechanism as udp


def _python(values, noise) -> list[float]:
    return [float(int(v) + int(z)) for v, z in zip(np.asarray(values).ravel().tolist(), list(noise))]


def test_add_exact_vectorised_equals_python_ints():
    rng = np.random.default_rng(0)
    v = np.concatenate([rng.integers(-2**40, 2**40, 2000), 2**53 + np.arange(-8, 8), -(2**53) + np.arange(16),
                        np.array([2**62 - 1, -(2**62) + 1, 2**61 + 3])])
    z = rng.integers(-2**20, 2**20, v.size)
    z[-3:] = [0, 0, 2**60 + 1]
    out = udp._add_exact(v, z)
    assert out.tolist() == _python(v, z)  # ties at 2^53 round to even as float(int) does
    w = (v[:2000] * 1.0).reshape(40, 50)  # whole floats, 2-d
    np.testing.assert_array_equal(udp._add_exact(w, z[:2000]), np.array(_python(w, z[:2000])).reshape(40, 50))


def test_add_exact_beyond_int64_and_bad_input():
    big = np.array([2**62, 5], dtype=np.int64)
    z = np.array([2**62, 1], dtype=np.int64)
    assert udp._add_exact(big, z).tolist() == [float(2**63), 6.0]  # Python ints: no int64 overflow
    obj = np.array([2**70, -3], dtype=object)
    assert udp._add_exact(obj, np.array([1, 1], dtype=np.int64)).tolist() == [float(2**70 + 1), -2.0]
    assert udp._add_exact(np.array([1, 2]), iter([3, 2**80])).tolist() == [4.0, float(2**80 + 2)]
    with pytest.raises(DpoptInputError, match="values"):
        udp._add_exact(np.array([0.5, 1.0]), np.array([1, 1], dtype=np.int64))
    assert udp._add_exact(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)).shape == (0,)


# --- the Gaussian release's all-integer acceptance test for small rationals σ² = t²·2^29/m -------
from fractions import Fraction  # noqa: E402

from dpopt.noise import discrete_gaussian as dg  # noqa: E402
from dpopt.noise import exact, integer_source  # noqa: E402
from dpopt.noise.discrete_gaussian import grid_sigma2, release_on_grid_gaussian  # noqa: E402
from tests.test_discrete_gaussian import chi2_pvalue  # noqa: E402


def test_small_ratios_equal_fractions():
    t = np.array([1, 3, 7, 40, 4097, 4097, 41, 2**16, 65535], dtype=float)
    m = np.array([2**31, 2**29, 10.5 * 2**30, 2**29, 2**29, 322122547, 322122547, 2**29, 2**29])
    scale = np.floor(np.sqrt(t * t * 2.0**29 / m)) + 1.0
    p, q = dg._small_ratios(t, m, scale)
    for i in range(t.size):
        s2 = Fraction(int(t[i]) ** 2 * 2**29, int(m[i]))
        fits = t[i] < 2**16 and 2 * s2.numerator * s2.denominator * int(scale[i]) ** 2 < 2**55
        assert (int(p[i]), int(q[i])) == ((s2.numerator, s2.denominator) if fits else (0, 0)), i
    assert q[:5].all() and not q[5:].any()  # ρ = 0.3 (m odd, big): the float filter; t = 2^16: not tried


@pytest.mark.parametrize("t,rho", [(1, 2.0), (3, 0.5), (7, 10.5), (40, 0.5)])
def test_gaussian_release_small_rationals_take_the_integer_path(t, rho, monkeypatch):
    # σ² = 1/4, 9, 7/3, 1600: 64γ is often an exact integer, which the float filter cannot certify
    # (before: ~1 exact scalar Bernoulli per draw, 30–120k draws/s); now the int64 test decides
    calls = record_calls(monkeypatch, exact, "bernoulli_exp")
    n = 40_000
    sens = (t - 1.5) / (1 + 1e-9) / 4096 if t >= 2 else 0.0
    out, tg, _ = release_on_grid_gaussian(np.full(n, 0.25), sens, rho, integer_source(5))
    assert np.all(tg == t) and len(calls) == 0
    z = np.rint(out * 4096).astype(np.int64) - 1024
    assert chi2_pvalue(z, grid_sigma2(t, rho)) > 1e-3


def test_gaussian_release_mixes_integer_and_filter_entries():
    # per-entry parameters: small rationals (integer path) interleaved with big ones (float filter)
    n = 30_000
    t = np.tile([3, 41, 1], n // 3)
    rho = np.tile([0.5, 0.3, 2.0], n // 3)
    sens = np.where(t >= 2, (t - 1.5) / (1 + 1e-9) / 4096, 0.0)
    out, tg, _ = release_on_grid_gaussian(np.zeros(n), sens, rho, integer_source(6))
    assert np.array_equal(tg, t)
    z = np.rint(out * 4096).astype(np.int64)
    for j in range(3):
        assert chi2_pvalue(z[j::3], grid_sigma2(int(t[j]), float(rho[j]))) > 1e-3


# --- release entries beyond the per-entry int64 range (t ≥ 2^33 or budget > 2^32) ----------------
from dpopt.noise import discrete_laplace as dl  # noqa: E402
from dpopt.noise.discrete_laplace import draw_grouped, release_on_grid  # noqa: E402
from tests._spy import record_calls


def test_draw_grouped_keeps_entries_and_groups():
    calls = []

    def fake(p, n, source):
        calls.append((p, n))
        return np.arange(n, dtype=np.int64) + 100 * int(p)

    t = np.array([5.0, 7.0, 5.0, 9.0, 7.0, 5.0])
    b = np.array([1.0, 1.0, 1.0, 1.0, 2.0, 1.0])
    out, val = draw_grouped(t, b, lambda ti, bi: Fraction(ti) / Fraction(bi), fake, integer_source(1))
    # groups in sorted (t, budget) order; within a group, entries in index order
    assert calls == [(Fraction(5), 3), (Fraction(7), 1), (Fraction(7, 2), 1), (Fraction(9), 1)]
    assert out.tolist() == [500, 700, 501, 900, 300, 502]  # int(7/2) = 3
    assert val.tolist() == [5.0, 7.0, 5.0, 9.0, 3.5, 5.0]
    one, _ = draw_grouped(np.full(4, 3.0), np.full(4, 1.0), lambda ti, bi: Fraction(ti), fake, integer_source(1))
    assert one.tolist() == [300, 301, 302, 303] and calls[-1] == (Fraction(3), 4)
    empty, _ = draw_grouped(np.zeros(0), np.zeros(0), None, fake, integer_source(1))
    assert empty.size == 0


def test_release_with_huge_sensitivity_is_vectorised(monkeypatch):
    # t = 2^34 grid units (Δ ≈ 2^22 at k = 12): drawn together at the exact scale t/ε', not per entry
    monkeypatch.setattr(dl, "discrete_laplace", None)
    monkeypatch.setattr(dg, "discrete_gaussian", None)
    n, t = 20_000, 2**34
    sens = (t - 1.5) / (1 + 1e-9) / 4096
    out, tg = release_on_grid(np.zeros(n), sens, 0.5, integer_source(3))
    assert np.all(tg == t)
    z = out * 4096
    scale = 2.0 * t  # t/ε' with ε' = 1/2
    for q in (0.5, 0.9):  # P(|Z| ≥ y) ≈ e^{-y/scale} at this scale
        y = scale * np.log(1 / (1 - q))
        assert abs(np.mean(np.abs(z) >= y) - (1 - q)) < 5 * np.sqrt(q * (1 - q) / n)
    g, tg, sigma = release_on_grid_gaussian(np.zeros(n), sens, 0.5, integer_source(4))
    assert np.all(tg == t) and np.allclose(sigma, t / 4096)  # σ = t/√(2ρ') = t at ρ' = 1/2
    zg = g * 4096 / t
    assert abs(np.mean(np.abs(zg) >= 1.0) - 0.3173) < 5 * np.sqrt(0.3173 * 0.6827 / n)
