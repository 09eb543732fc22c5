"""The budget split: closed form against numeric minimisation; worst case by brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import minimize

from dpopt._validation import DpoptInputError
from dpopt.privacy.user.split import predicted_objective, split_budget, split_coefficients


def _delta_method(parts, ybar, m2, U, wm=1.0, wv=1.0, unit="epsilon"):
    """Predicted MSE of the mean and variance by the delta method, written from scratch."""
    dn, dy, dz = 1.0, U / 2.0, U * U / 8.0  # k = c = R = 1
    if unit == "epsilon":
        var = [2 * (d / p) ** 2 for d, p in zip((dn, dy, dz), parts)]
    else:
        var = [d * d / (2 * p) for d, p in zip((dn, dy, dz), parts)]
    zbar = m2 - U * U / 8.0
    mse_mean = var[1] + ybar**2 * var[0]
    mse_var = var[2] + 4 * ybar**2 * var[1] + (2 * ybar**2 - zbar) ** 2 * var[0]
    return wm * mse_mean / U**2 + wv * mse_var / (U * U / 4.0) ** 2


@pytest.mark.parametrize("unit", ["epsilon", "rho"])
@pytest.mark.parametrize(("typical", "wm", "wv"), [(None, 1.0, 1.0), ((25.0, 12.0), 1.0, 1.0),
                                                   ((60.0, 30.0), 1.0, 0.0), ((10.0, 5.0), 0.2, 3.0)])
def test_closed_form_matches_numeric_minimum(unit, typical, wm, wv):
    U, total = 120.0, 2.0
    sp = split_budget(total, bound=U, unit=unit, weight_mean=wm, weight_variance=wv, typical=typical)
    if typical is None:
        ybar, m2 = U / 2.0, U * U / 4.0
    else:
        ybar, m2 = typical[0] - U / 2.0, (typical[0] - U / 2.0) ** 2 + typical[1] ** 2

    def f(x):
        p = total * np.exp(x) / np.exp(x).sum()
        return _delta_method(p, ybar, m2, U, wm, wv, unit)

    best = min((minimize(f, x0, method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-14, "maxiter": 20000})
                for x0 in (np.zeros(3), np.array([1.0, 0.0, -1.0]), np.array([-1.0, 1.0, 0.0]))), key=lambda r: r.fun)
    ours = np.array([sp.count, sp.sum, sp.sumsq])
    assert ours.sum() == pytest.approx(total)
    if wv == 0:  # no sum of squares needed: its share is 0 and the objective ignores it
        assert sp.sumsq == 0.0
        return
    assert f(np.log(ours)) <= best.fun * (1 + 1e-9)
    assert predicted_objective(ours, sp.coefficients, unit) == pytest.approx(
        _delta_method(ours, ybar, m2, U, wm, wv, unit) / (2.0 if unit == "epsilon" else 0.5), rel=1e-12)


def test_worst_case_coefficients_are_the_maximum_over_data():
    # brute force over (mean, second moment) of data in [0, U]: the default coefficients are the max
    U = 10.0
    worst = np.asarray(split_coefficients(U))
    best_seen = np.zeros(3)
    for mu, sd in itertools.product(np.linspace(0, U, 41), np.linspace(0, U / 2, 41)):
        if sd * sd > mu * (U - mu) + 1e-12:  # Bhatia–Davis: impossible for data in [0, U]
            continue
        best_seen = np.maximum(best_seen, split_coefficients(U, typical=(mu, sd)))
    assert np.allclose(best_seen, worst)
    assert worst == pytest.approx((2.5, 4.25, 0.25))
    sp = split_budget(1.0, bound=U)
    assert (sp.count, sp.sum, sp.sumsq) == pytest.approx((0.3762, 0.4491, 0.1747), abs=1e-4)


def test_bad_inputs():
    with pytest.raises(DpoptInputError, match="typical"):
        split_budget(1.0, bound=10.0, typical=(11.0, 1.0))
    with pytest.raises(DpoptInputError, match="budget"):
        split_budget(0.0, bound=10.0)
    with pytest.raises(DpoptInputError, match="unit"):
        split_budget(1.0, bound=10.0, unit="delta")
