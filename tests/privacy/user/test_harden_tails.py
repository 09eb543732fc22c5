"""The noise quantiles and tails of the user model are stable at every scale
validation accepts (ε up to 1e100, scales beyond 9e15 where r = exp(−1/s) rounds to 1.0).

Reference: the exact discrete Laplace tail P(|Z| ≥ j) = 2r^j/(1+r), r = e^{−1/s}, evaluated in
60-digit decimal arithmetic (``decimal``), independent of the float code under test.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext

import numpy as np
import pytest

from dpopt.noise import integer_source
from dpopt.privacy.user.mechanism import (
    DiscreteGaussian,
    DiscreteLaplace,
    discrete_gaussian_upper_tail,
    discrete_laplace_abs_quantile,
    discrete_laplace_upper_quantile,
    discrete_laplace_upper_tail,
)
from dpopt.release import Budget, NoiseOptions, UserOptions, release_user

from .conftest import make_agg

SCALES = [1e-100, 1e-3, 0.7, 1.0, 3.0, 40.0, 1e6, 9e15, 1e16, 2e16, 1e17, 1e20, 1e40]
PROBS = [0.5, 0.1, 0.05 / 3, 1e-9]


def _log_tail(s: float, j: int, two_sided: bool) -> Decimal:
    """log P(|Z| ≥ j) (two-sided, j ≥ 1) or log P(Z ≥ j) (j ≥ 0), exactly to 60 digits."""
    with localcontext() as ctx:
        ctx.prec = 60
        a = 1 / Decimal(s)
        head = Decimal(2).ln() if two_sided else Decimal(0)
        return head - Decimal(j) * a - (1 + (-a).exp()).ln()


def _log(p: float) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 60
        return Decimal(p).ln()


@pytest.mark.parametrize("s", SCALES)
@pytest.mark.parametrize("p", PROBS)
def test_discrete_laplace_abs_quantile_against_exact_tail(s, p):
    x = discrete_laplace_abs_quantile(s, p)
    assert x == int(x) and x >= 0
    j = int(x) + 1
    assert _log_tail(s, j, True) <= _log(p)  # a valid bound: P(|Z| > x) ≤ p exactly
    if j - 1 >= 1:
        if x < 2**52:  # the smallest such integer (up to the 1e-12 safety margin)
            assert _log_tail(s, j - 1, True) > _log(p) - Decimal("1e-10")
        else:  # beyond integer resolution: within one part in 1e9
            assert _log_tail(s, int(x * (1 - 1e-9)), True) > _log(p)


@pytest.mark.parametrize("s", SCALES)
@pytest.mark.parametrize("p", PROBS)
def test_discrete_laplace_upper_quantile_and_tail_against_exact(s, p):
    j = discrete_laplace_upper_quantile(s, p)
    assert j == int(j) and j >= 0
    assert _log_tail(s, int(j), False) <= _log(p)
    if 1 <= j < 2**52:
        assert _log_tail(s, int(j) - 1, False) > _log(p) - Decimal("1e-10")
    for x in (0.0, 1.0, 7.0, float(math.ceil(s)), float(math.ceil(30 * s))):
        if x > 2**60:
            continue
        exact = float(_log_tail(s, math.ceil(x), False).exp()) if x >= 0 else None
        got = discrete_laplace_upper_tail(s, x)
        assert got == pytest.approx(exact, rel=1e-9, abs=1e-300)
        # symmetry for negative arguments: P(Z ≥ −x) = 1 − P(Z ≥ x + 1)
        if x >= 1:
            other = 1.0 - float(_log_tail(s, math.ceil(x) + 1, False).exp())
            assert discrete_laplace_upper_tail(s, -x) == pytest.approx(other, rel=1e-9, abs=1e-300)


def test_the_old_failures_are_gone():
    # r = exp(−1/s) rounds to 1.0 above s ≈ 1.8e16 and to 0.0 below s ≈ 1/745 (ε = 1e100)
    assert math.exp(-1.0 / 2e16) == 1.0 and math.exp(-1.0 / 1e-100) == 0.0
    mech = DiscreteLaplace(integer_source(0), seeded=True)
    assert mech.abs_quantile(2e16, 0.05 / 3) == pytest.approx(2e16 * math.log(1 / (0.05 / 3)), rel=1e-9)
    assert mech.abs_quantile(1e-100, 0.05 / 3) == 0.0
    assert mech.upper_quantile(1e-100, 1e-6) == 1.0  # P(Z ≥ 0) = 1/(1 + r) = 1, P(Z ≥ 1) = 0
    assert mech.upper_tail(1e-100, 1.0) == 0.0 and mech.upper_tail(1e-100, 0.0) == 1.0


@pytest.mark.parametrize("sigma", [1e-160, 1e-3, 0.3, 2.0])
def test_discrete_gaussian_tail_at_tiny_sigma(sigma):
    # exact: weights e^{−z²/2σ²}; at σ ≤ 1e-3 every z ≠ 0 underflows: all mass at 0
    w1 = math.exp(-0.5 / sigma**2)
    w = [math.exp(-0.5 * z * z / sigma**2) for z in range(1, 200)]
    norm = 1.0 + 2.0 * sum(w)
    assert discrete_gaussian_upper_tail(sigma, 1.0) == pytest.approx(sum(w) / norm, rel=1e-12, abs=1e-300)
    assert discrete_gaussian_upper_tail(sigma, 0.0) == pytest.approx((1.0 + sum(w)) / norm, rel=1e-12)
    assert discrete_gaussian_upper_tail(sigma, -1.0) == pytest.approx((1.0 + sum(w) + w1) / norm, rel=1e-12)
    mech = DiscreteGaussian(integer_source(0))
    assert mech.abs_quantile(sigma, 0.05 / 3) >= 0 and mech.upper_quantile(sigma, 1e-6) >= 0


def _agg():
    recs = [(f"u{u}", g, t, float(10 * u + t)) for u in range(6) for g in range(2) for t in range(3)]
    return make_agg(recs)


@pytest.mark.parametrize(("bound", "epsilon", "bounds"), [
    (1e4, 1.0, (2000, 64)),  # sum-of-squares scale k·c·H_Z/ε_Z > 1e16: log(r) was 0
    (1e4, 1e100, (1, 3)),  # scale 1e-90: r = 0, log(0) was a domain error
    (100.0, 1e100, "select"),
])
@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_release_at_extreme_budgets(bound, epsilon, bounds, mechanism):
    # Laplace with a public list, Gaussian with private selection (δ for both selection and ρ)
    rel = release_user(_agg(), Budget(epsilon_total=epsilon, delta=1e-6 if mechanism == "gaussian" else None,
                                      mechanism=mechanism),
                       UserOptions(bounds=bounds, partitions=None if mechanism == "gaussian" else _plist(), strategy="fixed"),
                       bound=bound, noise=NoiseOptions(seed=3))
    t = rel.table
    assert np.all(np.isfinite(t["mean_error_bound"])) and np.all(t["mean_error_bound"] >= 0)
    # finite wherever the variance is published (withheld, NaN, where its interval is the range)
    assert np.all(np.isfinite(t["variance_error_bound"]) | np.isnan(t["variance"]))
    if epsilon == 1e100 and len(t):
        assert np.all(t["mean_error_bound"] <= 1e-3 * bound)


def _plist():
    from dpopt.privacy.user.partitions import PartitionList
    from .conftest import CELLS

    return PartitionList.from_grids(np.asarray(CELLS[:2], dtype=np.int64), np.zeros(2, dtype=np.int64))


def test_zcdp_conversion_objective_in_alpha_minus_one():
    from dpopt.accounting import _objective, _objective_x, zcdp_epsilon, zcdp_epsilon_simple

    for x in (-3.0, 0.0, 2.5):  # the two forms agree where α = 1 + eˣ is well resolved in floats
        assert _objective_x(x, 0.7, 9.0) == pytest.approx(_objective(1.0 + math.exp(x), 0.7, 9.0), rel=1e-9)
    # huge ρ (ε = 1e100 converted): α − 1 ≈ 1e-50 rounded α to 1.0 and log(1 − 1/α) failed
    rho = 2.5e99
    eps = zcdp_epsilon(rho, 1e-6)
    assert rho <= eps <= zcdp_epsilon_simple(rho, 1e-6)
